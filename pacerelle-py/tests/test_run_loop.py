"""The supervised loop: answers, marks processed, lets the handler checkpoint, survives a relay restart,
leaves a failing task unprocessed for the next run."""

from __future__ import annotations

import logging
import time

import pytest

import pacerelle
from conftest import Background, Paired, Relay


def wait_until(predicate, timeout: float = 20.0, every: float = 0.1):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(every)


def test_the_loop_answers_marks_processed_and_survives_a_relay_restart(relay: Relay, paired: Paired) -> None:
    agent, device = paired.agent, paired.device
    seen: list[pacerelle.Message] = []

    def handler(message: pacerelle.Message, ctx: pacerelle.RunContext) -> str:
        seen.append(message)
        ctx.save_checkpoint(f"answered {message.text}", "wait for the next task")
        return f"echo: {message.text}"

    loop = Background(lambda: agent.run(handler, timeout=5, max_backoff=0.5))
    try:
        first = device.send("hello")
        reply = device.wait_for_reply(first.id, timeout=20)
        assert reply.text == "echo: hello"
        wait_until(lambda: agent.status().processed == 1)
        checkpoints = agent.get_checkpoints()
        assert checkpoints[0].summary == "answered hello"
        assert checkpoints[0].message_ids == [first.id]

        relay.restart(pause=0.5)

        second = device.send("after the restart")
        reply = device.wait_for_reply(second.id, timeout=40)
        assert reply.text == "echo: after the restart"
        status = wait_until(lambda: (s := agent.status()).processed == 2 and s)
        assert status.in_progress == 0
        assert [m.text for m in seen if not m.redelivered][:2] == ["hello", "after the restart"]
    finally:
        agent.stop()
        loop.join(20)
    # The lease is released when the loop stops.
    assert agent.status().session is None


def test_a_failing_handler_leaves_the_task_for_the_next_run(
    paired: Paired, caplog: pytest.LogCaptureFixture
) -> None:
    agent, device = paired.agent, paired.device
    caplog.set_level(logging.ERROR, logger="pacerelle")

    def failing(message: pacerelle.Message) -> str:
        if message.text == "boom":
            agent.stop()
            raise RuntimeError("the handler broke")
        return "ok"

    sent = device.send("boom")
    Background(lambda: agent.run(failing, timeout=5)).join(30)
    assert "the handler failed on task" in caplog.text
    assert "the handler broke" in caplog.text
    status = agent.status()
    assert status.processed == 0
    assert status.in_progress == 1

    redelivered: list[pacerelle.Message] = []

    def working(message: pacerelle.Message) -> str:
        redelivered.append(message)
        agent.stop()
        return f"done: {message.text}"

    Background(lambda: agent.run(working, timeout=5)).join(30)
    assert [m.message_id for m in redelivered] == [sent.id]
    assert redelivered[0].redelivered
    assert device.wait_for_reply(sent.id, timeout=10).text == "done: boom"
    assert agent.status().processed == 1


def test_coroutine_handlers_and_non_text_results(paired: Paired, caplog: pytest.LogCaptureFixture) -> None:
    agent, device = paired.agent, paired.device
    caplog.set_level(logging.WARNING, logger="pacerelle")
    answered: list[str] = []

    async def handler(message: pacerelle.Message) -> object:
        answered.append(message.text)
        if message.text == "quiet":
            return None
        if message.text == "blank":
            return "   "
        if message.text == "number":
            return 42
        agent.stop()
        return f"async: {message.text}"

    quiet = device.send("quiet")
    blank = device.send("blank")
    number = device.send("number")
    last = device.send("last")
    Background(lambda: agent.run(handler, timeout=5)).join(30)
    assert answered == ["quiet", "blank", "number", "last"]
    assert device.wait_for_reply(last.id, timeout=10).text == "async: last"
    replies = [i for i in device.conversation().items if i.kind == "reply"]
    assert [r.source_message_id for r in replies] == [last.id]
    assert "only a str is sent as a reply" in caplog.text
    # A blank reply is no reply (the runner's rule), and its task is processed all the same.
    assert agent.status().processed == 4
    del quiet, blank, number


def test_a_task_that_keeps_failing_or_cannot_be_answered_is_set_aside_and_the_loop_goes_on(
    paired: Paired, caplog: pytest.LogCaptureFixture
) -> None:
    agent, device = paired.agent, paired.device
    caplog.set_level(logging.ERROR, logger="pacerelle")
    calls: dict[str, int] = {}

    def handler(message: pacerelle.Message) -> str:
        calls[message.message_id] = calls.get(message.message_id, 0) + 1
        if message.text == "poison":
            raise ValueError("this task always breaks the handler")
        return f"echo: {message.text}"  # over the size limit for a 64 KiB task

    poison = device.send("poison")
    big = device.send("x" * 65536)
    after = device.send("after")
    loop = Background(lambda: agent.run(handler, timeout=5, max_backoff=0.5))
    try:
        poisoned = device.wait_for_reply(poison.id, timeout=30).text
        assert "set aside" in poisoned and "failed 3 times" in poisoned
        too_large = device.wait_for_reply(big.id, timeout=30).text
        assert "set aside" in too_large and "64 KiB" in too_large
        assert device.wait_for_reply(after.id, timeout=30).text == "echo: after"
        wait_until(lambda: agent.status().processed == 3)
        # The loop is still running: a later task is answered.
        later = device.send("later")
        assert device.wait_for_reply(later.id, timeout=30).text == "echo: later"
    finally:
        agent.stop()
        loop.join(20)
    assert calls[poison.id] == 3
    assert calls[big.id] == 1
    assert f"task {poison.id} set aside" in caplog.text
    assert f"task {big.id} set aside" in caplog.text
    assert "this task always breaks the handler" in caplog.text
    assert agent.status().session is None
