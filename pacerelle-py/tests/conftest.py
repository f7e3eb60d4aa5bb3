"""Fixtures: a real relay (`pacerelle serve`) on 127.0.0.1 with a temporary database, and a paired agent and
device. The tests run against the installed wheel."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import pacerelle

ROOT = Path(__file__).resolve().parents[2]


def relay_binary() -> Path:
    """`PACERELLE_BIN`, else `target/debug/pacerelle` (built with cargo when missing)."""
    explicit = os.environ.get("PACERELLE_BIN")
    if explicit:
        return Path(explicit)
    path = ROOT / "target" / "debug" / "pacerelle"
    if not path.exists():
        cargo = shutil.which("cargo")
        if cargo is None:
            pytest.skip("no relay binary: set PACERELLE_BIN or build pacerelle-cli")
        subprocess.run([cargo, "build", "-p", "pacerelle-cli"], cwd=ROOT, check=True)
    return path


class Relay:
    """A `pacerelle serve` process; `restart()` keeps its port and database."""

    def __init__(self, data: Path, home: Path, args: tuple[str, ...] = ()) -> None:
        self.data = data
        self.home = home
        self.args = args  # more `serve` options
        self.url = ""
        self.port = 0
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        env = dict(os.environ, PACERELLE_HOME=str(self.home), PACERELLE_LOG="warn")
        for var in ("PACERELLE_RELAY_URL", "PACERELLE_AGENT_ID", "PACERELLE_AGENT_TOKEN"):
            env.pop(var, None)
        self.proc = subprocess.Popen(
            [
                str(relay_binary()), "serve", "--json", "--listen", f"127.0.0.1:{self.port}",
                "--data", str(self.data), *self.args,
            ],
            stdout=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        assert self.proc.stdout is not None
        text = ""
        while True:  # one JSON object, maybe over several lines
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"the relay did not start (exit {self.proc.wait()})")
            text += line
            try:
                self.url = json.loads(text)["relayUrl"]
                break
            except json.JSONDecodeError:
                continue
        self.port = int(self.url.rsplit(":", 1)[1])

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def restart(self, pause: float = 0.0) -> None:
        self.stop()
        time.sleep(pause)
        for _ in range(50):
            try:
                self.start()
                return
            except RuntimeError:
                time.sleep(0.1)  # the port may still be closing
        raise RuntimeError("the relay did not restart")


@pytest.fixture
def relay(tmp_path: Path) -> Iterator[Relay]:
    r = Relay(tmp_path / "relay", tmp_path / "home")
    r.start()
    yield r
    r.stop()


class Paired:
    def __init__(self, agent: pacerelle.Agent, device: pacerelle.Device) -> None:
        self.agent = agent
        self.device = device

    def env(self) -> dict[str, str]:
        """The environment of an agent process for this agent."""
        env = dict(os.environ)
        env.update(
            PACERELLE_RELAY_URL=self.agent.relay_url,
            PACERELLE_AGENT_ID=self.agent.agent_id,
            PACERELLE_AGENT_TOKEN=self.agent.token,
            PYTHONUNBUFFERED="1",
        )
        return env


def pair(relay_url: str, name: str = "test agent") -> Paired:
    agent = pacerelle.Agent.register(relay_url, name)
    link = agent.create_pairing(label="phone")
    device = pacerelle.Device.join(link.link, "Ana's phone")
    return Paired(agent, device)


@pytest.fixture
def paired(relay: Relay) -> Paired:
    return pair(relay.url)


class Background:
    """Runs a function in a thread and keeps its result or exception."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.result: Any = None
        self.error: BaseException | None = None

        def target() -> None:
            try:
                self.result = fn()
            except BaseException as e:  # noqa: BLE001 - handed to the test
                self.error = e

        self.thread = threading.Thread(target=target, daemon=True)
        self.thread.start()

    def join(self, timeout: float = 30.0) -> Any:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the background call did not finish"
        if self.error is not None:
            raise self.error
        return self.result


def python() -> str:
    return sys.executable
