"""The blocking and asyncio twins are one definition (`_twin`): the same signatures and documentation, and the
same interruption rules — Ctrl-C ends a blocking call or a multi-step wait, a second SIGINT or a cancelled task
ends the run loop, and in every case the flow's cleanup runs (the lease is released, the task stays
unprocessed for the next run)."""

from __future__ import annotations

import asyncio
import inspect
import os
import signal
import threading
import time

import pytest

import pacerelle
from conftest import Paired


def _later(delay: float, *signals: signal.Signals, every: float = 0.3) -> threading.Thread:
    """Sends `signals` to this process from another thread, the first after `delay` seconds."""

    def send() -> None:
        time.sleep(delay)
        for sig in signals:
            os.kill(os.getpid(), sig)
            time.sleep(every)

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize(
    ("blocking", "awaiting"),
    [(pacerelle.Agent, pacerelle.AsyncAgent), (pacerelle.Device, pacerelle.AsyncDevice),
     (pacerelle.RunContext, pacerelle.AsyncRunContext)],
)
def test_each_pair_of_twins_is_one_definition(blocking: type, awaiting: type) -> None:
    def methods(cls: type) -> list[str]:
        return [n for n in dir(cls) if not n.startswith("_") and not isinstance(inspect.getattr_static(cls, n), property)]

    names = methods(blocking)
    assert names == methods(awaiting)
    shared = [n for n in names if n not in ("register", "join", "run", "from_agent", "from_env", "stop",
                                            "require_approval", "approval")]
    assert shared, names
    for name in shared:
        one, other = inspect.getattr_static(blocking, name), inspect.getattr_static(awaiting, name)
        assert one is other, f"{name} is written twice"
        assert one.__doc__, f"{name} has no docstring"


def test_twin_methods_block_in_one_and_are_coroutines_in_the_other(paired: Paired) -> None:
    agent = paired.agent
    twin = pacerelle.AsyncAgent.from_agent(agent)
    assert not inspect.iscoroutinefunction(agent.status)
    assert inspect.iscoroutinefunction(twin.status)
    assert inspect.signature(agent.ask_user) == inspect.signature(twin.ask_user)
    assert agent.status().processed == asyncio.run(twin.status()).processed == 0


def test_ctrl_c_interrupts_a_blocking_call_and_a_multi_step_wait(paired: Paired) -> None:
    for wait in (lambda: paired.agent.wait_for_messages(timeout=50),
                 lambda: paired.device.wait_for_reply("msg_nothing", timeout=50)):
        _later(0.5, signal.SIGINT)
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            wait()
        assert time.monotonic() - started < 10


def test_a_second_sigint_interrupts_the_run_loop_which_releases_the_lease(paired: Paired) -> None:
    agent, device = paired.agent, paired.device
    started = threading.Event()

    def slow(message: pacerelle.Message) -> str:
        started.set()
        time.sleep(60)  # interrupted by the second SIGINT
        return "never"

    sent = device.send("take your time")

    def send_when_started() -> None:
        assert started.wait(30)
        _later(0.2, signal.SIGINT, signal.SIGINT)

    threading.Thread(target=send_when_started, daemon=True).start()
    before = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        agent.run(slow, timeout=5)
    assert time.monotonic() - before < 40
    status = agent.status()
    assert status.session is None, "the lease is released"
    assert status.processed == 0 and status.in_progress == 1, "the task stays for the next run"
    del sent


def test_cancelling_the_async_run_loop_releases_the_lease(paired: Paired) -> None:
    async def main() -> None:
        agent = pacerelle.AsyncAgent.from_agent(paired.agent)
        device = pacerelle.AsyncDevice(paired.device.credentials)
        started = asyncio.Event()

        async def slow(message: pacerelle.Message) -> str:
            started.set()
            await asyncio.sleep(60)
            return "never"

        await device.send("take your time")
        loop = asyncio.ensure_future(agent.run(slow, timeout=5, handle_signals=False))
        await asyncio.wait_for(started.wait(), 30)
        loop.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(loop, 20)
        status = await agent.status()
        assert status.session is None, "the lease is released"
        assert status.processed == 0 and status.in_progress == 1

    asyncio.run(main())
