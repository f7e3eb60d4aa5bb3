"""The package's public names are its documented API, and the run loop says once where it listens."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

import pacerelle
from conftest import Background, Paired


def test_public_names_are_exactly_the_documented_api() -> None:
    public = {name for name in dir(pacerelle) if not name.startswith("_")}
    documented = {name for name in pacerelle.__all__ if not name.startswith("__")}
    assert "annotations" not in public
    assert public == documented, (
        f"undocumented: {sorted(public - documented)}; missing: {sorted(documented - public)}"
    )
    # Every name in __all__ (dunders included) exists, once.
    assert len(pacerelle.__all__) == len(set(pacerelle.__all__))
    for name in pacerelle.__all__:
        assert hasattr(pacerelle, name), name
    # Nothing else but dunder and private (underscore) names.
    others = {n for n in dir(pacerelle) if n not in pacerelle.__all__}
    assert all(n.startswith("_") for n in others), sorted(others)


def _listening_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "pacerelle" and r.getMessage().startswith("listening")]


def _wait_for(predicate, timeout: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def test_the_run_loop_logs_one_info_line_when_it_starts_listening(
    paired: Paired, caplog: pytest.LogCaptureFixture
) -> None:
    agent = paired.agent
    caplog.set_level(logging.INFO, logger="pacerelle")
    loop = Background(lambda: agent.run(lambda m: "ok", timeout=2, handle_signals=False))
    try:
        _wait_for(lambda: _listening_lines(caplog))
        time.sleep(0.5)
    finally:
        agent.stop()
        loop.join(20)
    lines = _listening_lines(caplog)
    assert len(lines) == 1, [r.getMessage() for r in lines]
    assert lines[0].levelno == logging.INFO
    assert lines[0].getMessage().startswith(f"listening as {agent.agent_id} on {agent.relay_url}")


def test_the_async_run_loop_logs_the_same_line(paired: Paired, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="pacerelle")
    env = paired.env()

    async def main() -> None:
        agent = pacerelle.AsyncAgent(env["PACERELLE_RELAY_URL"], env["PACERELLE_AGENT_ID"], env["PACERELLE_AGENT_TOKEN"])
        task = asyncio.create_task(agent.run(lambda m: "ok", timeout=2, handle_signals=False))
        deadline = time.monotonic() + 20
        while not _listening_lines(caplog):
            assert time.monotonic() < deadline, "no listening line"
            await asyncio.sleep(0.05)
        agent.stop()
        await asyncio.wait_for(task, 20)

    asyncio.run(main())
    lines = _listening_lines(caplog)
    assert len(lines) == 1
    assert lines[0].getMessage().startswith(f"listening as {paired.agent.agent_id} on {paired.agent.relay_url}")
