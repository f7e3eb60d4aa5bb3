"""The artefacts of `cargo xtask dist`, used as a user would (the `dist` step of `cargo xtask test` makes them
from the debug build): install.sh against a local HTTP server, the npm packages from a local registry run by
`npx` under a real MCP client, the wheels in a fresh venv, the Kotlin SDK from a Maven consumer project. No
Rust toolchain is on the PATH of what runs here. The relay and the phone are the workspace's own `pacerelle`
(PACERELLE_DIST_BIN), started on 127.0.0.1.

The step sets: PACERELLE_DIST (the artefacts), PACERELLE_DIST_VERSION, PACERELLE_DIST_TARGET,
PACERELLE_DIST_BIN, PACERELLE_DIST_MAVEN (the consumer's local Maven repository), PACERELLE_DIST_NODE,
PACERELLE_DIST_NPM_TOOLS (where the local registry is installed).
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

ROOT = Path(__file__).resolve().parents[2]
DIST = Path(os.environ["PACERELLE_DIST"])
VERSION = os.environ["PACERELLE_DIST_VERSION"]
TARGET = os.environ["PACERELLE_DIST_TARGET"]
BIN = Path(os.environ["PACERELLE_DIST_BIN"])
NODE = Path(os.environ["PACERELLE_DIST_NODE"])
# How long each user path took, for the README's figures.
TIMINGS = Path(os.environ.get("PACERELLE_DIST_TIMINGS", DIST.parent / "timings.json"))


def minimal_path(*first: Path) -> str:
    """node's folder (and `first`), /usr/bin and /bin: no cargo, no rustc."""
    path = os.pathsep.join([*(str(p) for p in first), str(NODE.parent), "/usr/bin", "/bin"])
    for tool in ("cargo", "rustc", "rustup"):
        assert shutil.which(tool, path=path) is None, f"{tool} is on the test PATH {path}"
    return path


def base_env(home: Path, *first: Path) -> dict[str, str]:
    """A user's environment: a home, a minimal PATH, nothing of the test run's (no PACERELLE_HOME)."""
    return {"HOME": str(home), "PATH": minimal_path(*first), "LANG": "C.UTF-8", "TMPDIR": str(home)}


@functools.cache
def expected_versions() -> tuple[str, str]:
    """`pacerelle X (commit)` and `pacerelle-mcp X (commit)` as the programs in the archive print them: every
    other artefact must print the same lines. The commit must be one of this repository's."""
    unpacked = Path(os.environ.get("TMPDIR", "/tmp")) / f"pacerelle-dist-versions-{os.getpid()}"
    shutil.rmtree(unpacked, ignore_errors=True)
    unpacked.mkdir(parents=True)
    archive = DIST / f"pacerelle-{VERSION}-{TARGET}.tar.gz"
    subprocess.run(["tar", "-xzf", str(archive), "-C", str(unpacked)], check=True)
    out = []
    for program in ("pacerelle", "pacerelle-mcp"):
        exe = unpacked / f"pacerelle-{VERSION}-{TARGET}" / program
        line = subprocess.run([exe, "--version"], check=True, capture_output=True, text=True).stdout
        match = re.fullmatch(rf"{program} {re.escape(VERSION)} \(([0-9a-f]{{12}})\)\n", line)
        assert match, f"{program} --version printed {line!r}: the version and a commit are expected"
        subprocess.run(["git", "cat-file", "-e", match[1]], cwd=ROOT, check=True)
        out.append(line.strip())
    shutil.rmtree(unpacked)
    return out[0], out[1]


def record(name: str, seconds: float) -> None:
    timings = json.loads(TIMINGS.read_text()) if TIMINGS.exists() else {}
    timings[name] = round(seconds, 1)
    TIMINGS.write_text(json.dumps(timings, indent=2) + "\n")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_json(process: subprocess.Popen[str], seconds: float = 60) -> dict[str, Any]:
    """The first JSON object a process prints on stdout (pretty-printed or not); it keeps running."""
    assert process.stdout is not None
    seen = ""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            raise AssertionError(f"the process ended before printing JSON: {seen}")
        seen += line
        try:
            return json.loads(seen)
        except json.JSONDecodeError:
            continue
    raise AssertionError(f"no JSON in {seconds} s: {seen}")


def pacerelle(*args: str, env: dict[str, str], stdin: str | None = None, program: Path | None = None) -> Any:
    """Runs a `pacerelle … --json` command and returns its JSON."""
    out = subprocess.run(
        [str(program or BIN / "pacerelle"), *args, "--json"],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, f"pacerelle {' '.join(args)}: {out.stderr}"
    return json.loads(out.stdout) if out.stdout.strip() else None


class Processes:
    """Processes a test starts, each in a process group of its own: `npx` does not pass SIGTERM on to what it
    runs, so the whole group (npx, the launcher, the program) is stopped."""

    def __init__(self) -> None:
        self.started: list[subprocess.Popen[Any]] = []

    def start(self, args: list[str], **kwargs: Any) -> subprocess.Popen[Any]:
        process = subprocess.Popen(args, start_new_session=True, **kwargs)
        self.started.append(process)
        return process

    def stop(self) -> None:
        for p in self.started:
            self.signal(p, signal.SIGTERM)
        for p in self.started:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                pass
        # Whatever is left of each group, such as a program whose npx already ended.
        for p in self.started:
            self.signal(p, signal.SIGKILL)
            p.wait()

    @staticmethod
    def signal(process: subprocess.Popen[Any], number: int) -> None:
        try:
            os.killpg(process.pid, number)
        except ProcessLookupError:
            pass


@pytest.fixture
def processes() -> Iterator[Processes]:
    running = Processes()
    yield running
    running.stop()


class Relay:
    """A relay on 127.0.0.1:0 with its own data folder."""

    def __init__(self, processes: Processes, tmp: Path) -> None:
        env = base_env(tmp)
        serve = processes.start(
            [str(BIN / "pacerelle"), "serve", "--listen", "127.0.0.1:0", "--json", "--data", str(tmp / "data")],
            env=env,
            stdout=subprocess.PIPE,
            stderr=open(tmp / "relay.log", "w"),
            text=True,
        )
        self.url: str = read_json(serve)["relayUrl"]


def phone(relay_url: str, agent_env: dict[str, str], home: Path) -> dict[str, str]:
    """A device paired with the agent of `agent_env` (its link through stdin); its environment."""
    link = pacerelle("pair", env=agent_env)["link"]
    env = base_env(home) | {"PACERELLE_HOME": str(home / "phone")}
    pacerelle("device", "join", "-", "--name", "phone", env=env, stdin=link + "\n")
    return env


def reply_to(phone_env: dict[str, str], message_id: str, seconds: float = 30) -> dict[str, Any]:
    """The reply to `message_id` in the phone's inbox, once there."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for item in pacerelle("inbox", env=phone_env):
            if item.get("kind") == "reply" and item.get("sourceMessageId") == message_id:
                return item
        time.sleep(0.2)
    raise AssertionError(f"no reply to {message_id} in {seconds} s")


def processed(phone_env: dict[str, str], message_id: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for item in pacerelle("inbox", env=phone_env):
            if item.get("id") == message_id and item.get("state") == "processed":
                return
        time.sleep(0.2)
    raise AssertionError(f"{message_id} never shown processed")


# ── install.sh ──────────────────────────────────────────────────────────────────────────────────────


class Server:
    """A static HTTP server of a folder on 127.0.0.1, in a thread."""

    def __init__(self, folder: Path) -> None:
        handler = functools.partial(QuietHandler, directory=str(folder))
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def install(base_url: str, prefix: Path, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", str(DIST / "install.sh"), "--prefix", str(prefix), "--base-url", base_url, "--version", VERSION],
        env=base_env(home),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_install_sh_installs_the_archive_into_a_prefix_after_checking_its_sum(tmp_path: Path) -> None:
    cli, mcp = expected_versions()
    server = Server(DIST)
    try:
        started = time.monotonic()
        done = install(server.url, tmp_path / "prefix", tmp_path)
        record("install.sh", time.monotonic() - started)
    finally:
        server.close()
    assert done.returncode == 0, done.stderr
    bin_dir = tmp_path / "prefix" / "bin"
    assert sorted(p.name for p in bin_dir.iterdir()) == ["pacerelle", "pacerelle-mcp"]
    for program, expected in (("pacerelle", cli), ("pacerelle-mcp", mcp)):
        out = subprocess.run([bin_dir / program, "--version"], capture_output=True, text=True, check=True)
        assert out.stdout.strip() == expected
    assert "is not on PATH" in done.stderr, done.stderr


def test_install_sh_refuses_an_archive_whose_sum_does_not_match(tmp_path: Path) -> None:
    archive = f"pacerelle-{VERSION}-{TARGET}.tar.gz"
    served = tmp_path / "served"
    served.mkdir()
    shutil.copy(DIST / "SHA256SUMS", served / "SHA256SUMS")
    data = bytearray((DIST / archive).read_bytes())
    data[len(data) // 2] ^= 0xFF
    (served / archive).write_bytes(bytes(data))
    server = Server(served)
    try:
        done = install(server.url, tmp_path / "prefix", tmp_path)
    finally:
        server.close()
    assert done.returncode != 0
    assert "SHA-256" in done.stderr and "nothing installed" in done.stderr, done.stderr
    assert not (tmp_path / "prefix").exists(), "nothing may be installed"


# ── npm ─────────────────────────────────────────────────────────────────────────────────────────────


class Registry:
    """verdaccio on 127.0.0.1 with its storage in a temporary folder, no uplink, and one local user."""

    def __init__(self, processes: Processes, tmp: Path) -> None:
        tools = Path(os.environ["PACERELLE_DIST_NPM_TOOLS"])
        source = Path(__file__).parent / "npm-tools"
        lock = (source / "package-lock.json").read_bytes()
        installed = tools / "node_modules" / ".bin" / "verdaccio"
        if not installed.exists() or (tools / "package-lock.json").read_bytes() != lock:
            tools.mkdir(parents=True, exist_ok=True)
            for name in ("package.json", "package-lock.json"):
                shutil.copy(source / name, tools / name)
            subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=tools, check=True)
        port = free_port()
        self.url = f"http://127.0.0.1:{port}/"
        folder = tmp / "registry"
        folder.mkdir()
        config = folder / "config.yaml"
        config.write_text(
            f"storage: {folder / 'storage'}\n"
            f"auth:\n  htpasswd:\n    file: {folder / 'htpasswd'}\n    max_users: 10\n"
            "uplinks: {}\n"
            # The platform package holds both binaries: more than verdaccio's default 10 MB.
            "max_body_size: 300mb\n"
            "packages:\n  '**':\n    access: $all\n    publish: $authenticated\n"
            "log: { type: stdout, format: pretty, level: warn }\n"
        )
        processes.start(
            [str(NODE), str(installed), "--config", str(config), "--listen", f"127.0.0.1:{port}"],
            cwd=folder,
            stdout=open(folder / "verdaccio.log", "w"),
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{self.url}-/ping", timeout=2).read()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        user = json.dumps({"name": "dist", "password": "dist-test-password", "type": "user", "roles": []})
        request = urllib.request.Request(
            f"{self.url}-/user/org.couchdb.user:dist",
            data=user.encode(),
            method="PUT",
            headers={"Content-Type": "application/json"},
        )
        token = json.loads(urllib.request.urlopen(request, timeout=10).read())["token"]
        self.npmrc = folder / "npmrc"
        self.npmrc.write_text(f"registry={self.url}\n//127.0.0.1:{port}/:_authToken={token}\n")

    def env(self, home: Path) -> dict[str, str]:
        """The environment of a user whose npm uses this registry, with an empty cache of its own."""
        return base_env(home) | {
            "npm_config_registry": self.url,
            "npm_config_cache": str(home / "npm-cache"),
            "npm_config_update_notifier": "false",
            "npm_config_fund": "false",
            "npm_config_audit": "false",
        }


@pytest.fixture
def registry(processes: Processes, tmp_path: Path) -> Registry:
    registry = Registry(processes, tmp_path)
    tarballs = sorted(DIST.glob("*.tgz"))
    assert {t.name.rsplit("-", 1)[0] for t in tarballs} == {
        "pacerelle-linux-x64",
        "pacerelle-mcp-server",
        "pacerelle-cli",
    }, tarballs
    publisher = base_env(tmp_path) | {"NPM_CONFIG_USERCONFIG": str(registry.npmrc)}
    for tarball in tarballs:
        subprocess.run(
            ["npm", "publish", str(tarball), "--access", "public", "--loglevel=error"],
            env=publisher,
            check=True,
            cwd=tmp_path,
        )
    return registry


def npx(
    registry: Registry, home: Path, *args: str, extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    cwd = home / "empty"
    cwd.mkdir(exist_ok=True)
    return subprocess.run(
        ["npx", "-y", *args],
        env=registry.env(home) | (extra or {}),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_npx_runs_the_mcp_server_with_only_the_agent_id_and_token(
    registry: Registry, processes: Processes, tmp_path: Path
) -> None:
    cli, mcp = expected_versions()
    user = tmp_path / "user"
    user.mkdir()
    started = time.monotonic()
    version = npx(registry, user, "@pacerelle/mcp-server", "--version")
    record("npx @pacerelle/mcp-server --version, empty npm cache", time.monotonic() - started)
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == mcp
    version = npx(registry, user, "@pacerelle/cli", "--version")
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == cli

    # The agent is created on this computer as the person would, so the relay is saved with it in the config
    # folder (~/.config/pacerelle/agent.json); the MCP host's entry then holds only the id and the token.
    relay = Relay(processes, tmp_path)
    agent_env = base_env(user)
    agent = pacerelle("agent", "create", "--name", "npx agent", "--relay", relay.url, env=agent_env)
    assert (user / ".config" / "pacerelle" / "agent.json").exists()
    device = phone(relay.url, agent_env, tmp_path)
    host_env = registry.env(user) | {
        "PACERELLE_AGENT_ID": agent["agentId"],
        "PACERELLE_AGENT_TOKEN": agent["token"],
    }
    assert "PACERELLE_RELAY_URL" not in host_env and "PACERELLE_HOME" not in host_env
    server = StdioServerParameters(
        command="npx", args=["-y", "@pacerelle/mcp-server"], env=host_env, cwd=user / "empty"
    )

    async def call(session: ClientSession, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = await session.call_tool(name, arguments)
        assert not result.isError, result
        assert result.structuredContent is not None
        return result.structuredContent

    async def listen() -> str:
        async with stdio_client(server) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                status = await call(session, "get_status", {})
                assert status, status
                sent = pacerelle("send", "what is in the working folder?", env=device)
                cursor = None
                for _ in range(10):
                    arguments: dict[str, Any] = {"timeoutSeconds": 10}
                    if cursor:
                        arguments["cursor"] = cursor
                    got = await call(session, "wait_for_messages", arguments)
                    cursor = got.get("cursor") or cursor
                    tasks = [m for m in got["messages"] if m["messageId"] == sent["messageId"]]
                    if tasks:
                        break
                else:
                    raise AssertionError("the task never reached the MCP server")
                assert tasks[0]["text"] == "what is in the working folder?"
                await call(session, "reply", {"sourceMessageId": sent["messageId"], "text": "nothing yet"})
                await call(session, "mark_processed", {"messageId": sent["messageId"]})
                return sent["messageId"]

    message_id = anyio.run(listen)
    assert reply_to(device, message_id)["text"] == "nothing yet"
    processed(device, message_id)


def test_the_launcher_names_an_unsupported_platform_and_a_missing_platform_package(
    registry: Registry, tmp_path: Path
) -> None:
    elsewhere = {"PACERELLE_NPM_PLATFORM": "linux-riscv64"}
    other = npx(registry, tmp_path, "@pacerelle/mcp-server", "--version", extra=elsewhere)
    assert other.returncode != 0
    assert "linux-riscv64" in other.stderr and "cargo install --locked pacerelle-mcp" in other.stderr, other.stderr
    assert other.stdout == ""

    # Installed without optional dependencies: the platform package is missing, and the message says why.
    project = tmp_path / "project"
    project.mkdir()
    subprocess.run(
        ["npm", "install", "--omit=optional", "@pacerelle/mcp-server", "--loglevel=error"],
        env=registry.env(tmp_path),
        cwd=project,
        check=True,
    )
    missing = subprocess.run(
        [str(project / "node_modules" / ".bin" / "pacerelle-mcp"), "--version"],
        env=registry.env(tmp_path),
        capture_output=True,
        text=True,
    )
    assert missing.returncode != 0
    assert "@pacerelle/linux-x64" in missing.stderr and "--omit=optional" in missing.stderr, missing.stderr


def test_npx_up_to_a_paired_device_and_an_agent_that_replies(
    registry: Registry, processes: Processes, tmp_path: Path
) -> None:
    """The time from published packages to a phone that gets a reply: `npx @pacerelle/cli up` (relay, agent,
    link), the phone joins, the MCP server from `npx @pacerelle/mcp-server` answers the first task."""
    user = tmp_path / "user"
    user.mkdir()
    (user / "empty").mkdir()
    started = time.monotonic()
    up = processes.start(
        ["npx", "-y", "@pacerelle/cli", "up", "--listen", "127.0.0.1:0", "--json", "--data", str(user / "relay")],
        env=registry.env(user),
        cwd=user / "empty",
        stdout=subprocess.PIPE,
        stderr=open(tmp_path / "up.log", "w"),
        text=True,
    )
    shown = read_json(up, 300)
    env = base_env(tmp_path) | {"PACERELLE_HOME": str(tmp_path / "phone")}
    pacerelle("device", "join", "-", "--name", "phone", env=env, stdin=shown["link"] + "\n")
    server = StdioServerParameters(
        command="npx",
        args=["-y", "@pacerelle/mcp-server"],
        env=registry.env(user) | {"PACERELLE_AGENT_ID": shown["agentId"], "PACERELLE_AGENT_TOKEN": shown["token"]},
        cwd=user / "empty",
    )
    sent = pacerelle("send", "hello", env=env)

    async def answer() -> None:
        async with stdio_client(server) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                for _ in range(10):
                    got = await session.call_tool("wait_for_messages", {"timeoutSeconds": 10})
                    messages = (got.structuredContent or {}).get("messages", [])
                    tasks = [m for m in messages if m["messageId"] == sent["messageId"]]
                    if tasks:
                        break
                else:
                    raise AssertionError("no task")
                await session.call_tool("reply", {"sourceMessageId": sent["messageId"], "text": "echo: hello"})
                await session.call_tool("mark_processed", {"messageId": sent["messageId"]})

    anyio.run(answer)
    assert reply_to(env, sent["messageId"])["text"] == "echo: hello"
    elapsed = time.monotonic() - started
    record("npm: npx up, a paired phone, its task answered by npx @pacerelle/mcp-server", elapsed)


# ── wheels ──────────────────────────────────────────────────────────────────────────────────────────


def test_the_wheels_in_a_fresh_venv_give_the_sdk_and_the_commands(processes: Processes, tmp_path: Path) -> None:
    """`pip install pacerelle pacerelle-cli pacerelle-mcp` from the built wheels only (pip checks that their
    tags fit this machine), then `pacerelle up`, a phone, and the supervised agent example replies."""
    cli, mcp = expected_versions()
    wheels = sorted(p.name for p in DIST.glob("*.whl"))
    assert any(w.startswith("pacerelle-") and "-abi3-manylinux" in w for w in wheels), wheels
    assert any(w.startswith("pacerelle_cli-") and "-py3-none-manylinux" in w for w in wheels), wheels
    assert any(w.startswith("pacerelle_mcp-") and "-py3-none-manylinux" in w for w in wheels), wheels
    venv = tmp_path / "venv"
    python = Path(sys.base_prefix) / "bin" / "python3"
    started = time.monotonic()
    subprocess.run([str(python), "-m", "venv", str(venv)], check=True, env=base_env(tmp_path))
    env = base_env(tmp_path, venv / "bin")
    subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check", "--no-index",
         "--find-links", str(DIST), "pacerelle", "pacerelle-cli", "pacerelle-mcp"],
        check=True,
        env=env,
    )
    for program, expected in (("pacerelle", cli), ("pacerelle-mcp", mcp)):
        out = subprocess.run([venv / "bin" / program, "--version"], capture_output=True, text=True, check=True)
        assert out.stdout.strip() == expected

    up = processes.start(
        [str(venv / "bin" / "pacerelle"), "up", "--listen", "127.0.0.1:0", "--json"]
        + ["--data", str(tmp_path / "relay")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=open(tmp_path / "up.log", "w"),
        text=True,
    )
    shown = read_json(up)
    phone_env = env | {"PACERELLE_HOME": str(tmp_path / "phone")}
    join = ("device", "join", "-", "--name", "phone")
    pacerelle(*join, env=phone_env, stdin=shown["link"] + "\n", program=venv / "bin" / "pacerelle")
    processes.start(
        [str(venv / "bin" / "python"), str(ROOT / "examples" / "python" / "supervised_agent.py")],
        env=env | {
            "PACERELLE_RELAY_URL": shown["relayUrl"],
            "PACERELLE_AGENT_ID": shown["agentId"],
            "PACERELLE_AGENT_TOKEN": shown["token"],
        },
        stdout=open(tmp_path / "agent.log", "w"),
        stderr=subprocess.STDOUT,
    )
    sent = pacerelle("send", "hello", env=phone_env, program=venv / "bin" / "pacerelle")
    assert reply_to(phone_env, sent["messageId"])["text"] == "echo: hello"
    elapsed = time.monotonic() - started
    record("wheels: pip install, pacerelle up, a paired phone, the supervised agent's echo", elapsed)


# ── Kotlin ──────────────────────────────────────────────────────────────────────────────────────────


def test_a_maven_project_that_depends_on_the_installed_sdk_pairs_and_gets_a_reply(
    processes: Processes, tmp_path: Path
) -> None:
    relay = Relay(processes, tmp_path)
    agent_env = base_env(tmp_path) | {"PACERELLE_HOME": str(tmp_path / "agent"), "PACERELLE_RELAY_URL": relay.url}
    agent = pacerelle("agent", "create", "--name", "maven", env=agent_env)
    processes.start(
        [str(BIN / "echo-agent"), "--takeover"],
        env=agent_env | {"PACERELLE_AGENT_ID": agent["agentId"], "PACERELLE_AGENT_TOKEN": agent["token"]},
        stdout=open(tmp_path / "echo.log", "w"),
        stderr=subprocess.STDOUT,
    )
    link = pacerelle("pair", env=agent_env)["link"]
    consumer = tmp_path / "consumer"
    shutil.copytree(Path(__file__).resolve().parents[1] / "maven" / "consumer", consumer)
    started = time.monotonic()
    done = subprocess.run(
        ["mvn", "--batch-mode", "--quiet", "test", f"-Dmaven.repo.local={os.environ['PACERELLE_DIST_MAVEN']}",
         f"-Dpacerelle.version={VERSION}"],
        cwd=consumer,
        env=os.environ | {"PACERELLE_PAIRING_LINK": link},
        capture_output=True,
        text=True,
        timeout=600,
    )
    record("maven consumer: mvn test", time.monotonic() - started)
    assert done.returncode == 0, done.stdout + done.stderr
