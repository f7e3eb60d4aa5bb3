"""The asyncio API: the same flow in one event loop, with several waits in flight, and cancellation that
does not hang."""

from __future__ import annotations

import asyncio
import time

import pytest

import pacerelle
from conftest import Paired


async def answer_all(device: pacerelle.AsyncDevice, answers: dict[str, bool | list[str] | str], timeout: float = 20) -> None:
    """The phone answers each question, by its text, as it shows up."""
    remaining = dict(answers)
    cursor: str | None = None
    deadline = time.monotonic() + timeout
    while remaining:
        page = await device.conversation(cursor, timeout=min(5.0, max(0.0, deadline - time.monotonic())))
        for item in page.items:
            if item.kind == "question" and item.question is not None and item.text in remaining:
                await device.answer(item.question.question_id, remaining.pop(item.text))
        cursor = page.cursor
        assert time.monotonic() < deadline, f"questions never seen: {list(remaining)}"


def test_the_async_flow_in_one_event_loop(paired: Paired) -> None:
    async def main() -> None:
        agent = pacerelle.AsyncAgent.from_agent(paired.agent)
        device = pacerelle.AsyncDevice(paired.device.credentials)

        # Several waits in flight at once: a wait for tasks and three questions.
        inbox_wait = asyncio.ensure_future(agent.wait_for_messages(timeout=20))
        asked = await asyncio.gather(
            agent.ask_user("first?"),
            agent.ask_user("which?", options=["red", "blue"]),
            agent.ask_user("why?", kind="text"),
        )
        waits = [asyncio.ensure_future(agent.wait_for_answer(a, timeout=20)) for a in asked]
        await asyncio.sleep(0.2)
        assert not any(w.done() for w in waits) and not inbox_wait.done()
        phone = asyncio.ensure_future(answer_all(device, {"first?": True, "which?": ["blue"], "why?": "because"}))
        sent = await device.send("a task")
        outcomes = await asyncio.gather(*waits)
        await phone
        assert [o.state for o in outcomes] == ["answered"] * 3
        assert [o.approved for o in outcomes] == [True, True, False]  # a written answer approves nothing
        assert [o.answer for o in outcomes] == [True, ["blue"], "because"]
        inbox = await inbox_wait
        assert [m.message_id for m in inbox.messages] == [sent.id]

        await agent.reply(sent.id, "done")
        await agent.mark_processed(sent.id)
        assert (await agent.status()).processed == 1
        checkpoint = await agent.save_checkpoint("did it", "rest", [sent.id])
        assert (await agent.get_checkpoints(1))[0].checkpoint_id == checkpoint.checkpoint_id
        await agent.notify("all done", title="done", level="success")
        reply = await device.wait_for_reply(sent.id, timeout=10)
        assert reply.text == "done"

        # ask() and the decorators on coroutine functions.
        ran: list[str] = []

        @agent.require_approval("Publish {name}?")
        async def publish(name: str) -> str:
            ran.append(name)
            return name

        phone = asyncio.ensure_future(answer_all(device, {"Publish v1?": True, "Publish v2?": False}))
        assert await publish("v1") == "v1"
        with pytest.raises(pacerelle.NotApproved) as caught:
            await publish("v2")
        await phone
        assert caught.value.conclusion == "denied"
        assert ran == ["v1"]

        phone = asyncio.ensure_future(answer_all(device, {"Merge?": True}))
        async with agent.approval("Merge?") as outcome:
            assert outcome is not None and outcome.approved
        await phone

    asyncio.run(main())


def test_the_async_run_loop(paired: Paired) -> None:
    async def main() -> None:
        agent = pacerelle.AsyncAgent.from_agent(paired.agent)
        device = pacerelle.AsyncDevice(paired.device.credentials)

        async def handler(message: pacerelle.Message, ctx: pacerelle.AsyncRunContext) -> str:
            await ctx.save_checkpoint("seen", "next")
            if message.text == "stop":
                ctx.stop()
            return f"async echo: {message.text}"

        loop = asyncio.ensure_future(agent.run(handler, timeout=5))
        first = await device.send("one")
        second = await device.send("stop")
        assert (await device.wait_for_reply(first.id)).text == "async echo: one"
        assert (await device.wait_for_reply(second.id)).text == "async echo: stop"
        await asyncio.wait_for(loop, 20)
        status = await agent.status()
        assert status.processed == 2 and status.session is None
        # The one word every surface shows: nothing asked, nothing in progress.
        assert status.open_questions == 0 and status.activity in ("listening", "offline")

    asyncio.run(main())


def test_cancelling_a_task_abandons_its_wait_at_once(paired: Paired) -> None:
    async def main() -> float:
        agent = pacerelle.AsyncAgent.from_agent(paired.agent)
        waits = [asyncio.ensure_future(agent.wait_for_messages(timeout=50)) for _ in range(5)]
        await asyncio.sleep(0.3)
        started = time.monotonic()
        for w in waits:
            w.cancel()
        results = await asyncio.gather(*waits, return_exceptions=True)
        assert all(isinstance(r, asyncio.CancelledError) for r in results)
        return time.monotonic() - started

    started = time.monotonic()
    elapsed = asyncio.run(main())
    assert elapsed < 1.0
    assert time.monotonic() - started < 5.0  # asyncio.run did not wait for the abandoned requests


def test_errors_come_back_as_exceptions(paired: Paired) -> None:
    async def main() -> None:
        agent = pacerelle.AsyncAgent.from_agent(paired.agent)
        with pytest.raises(pacerelle.NotFound):
            await agent.mark_processed("msg_nothing")
        with pytest.raises(pacerelle.InvalidInput):
            await agent.wait_for_messages(cursor="not a cursor")

    asyncio.run(main())
