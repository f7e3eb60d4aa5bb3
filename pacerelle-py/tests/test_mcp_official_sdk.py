"""`pacerelle-mcp` driven by the official MCP Python SDK (`mcp` on PyPI) over stdio, against a real relay, with
the phone played by the wheel's `Device`: asking at the computer too (`alsoAskHere`, MCP elicitation) — an
answer in the host's dialog counts and the phone shows it answered at the computer; an answer on the phone
given first wins over a later yes in the dialog; a host without elicitation is asked on the phone only, as before.
And one id, one question: a wait judges exactly the question the server asked under the id, names it, survives a
restart of the server, refuses an id it did not ask and another question served under the id; asking again under
an id says it resumed, with the first expiry."""

from __future__ import annotations

import sqlite3
import time
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

from conftest import ROOT, Paired, Relay

MCP_BINARY = ROOT / "target" / "debug" / "pacerelle-mcp"


def server(paired: Paired) -> StdioServerParameters:
    if not MCP_BINARY.exists():
        raise RuntimeError(f"{MCP_BINARY} is missing: build it with `cargo build -p pacerelle-mcp`")
    return StdioServerParameters(command=str(MCP_BINARY), args=[], env=paired.env())


def on_phone(paired: Paired, question_id: str, state: str) -> Any:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        for q in paired.device.questions().questions:
            if q.question_id == question_id and q.state == state:
                return q
        time.sleep(0.05)
    raise AssertionError(f"the phone never saw {question_id} {state}")


async def call(session: ClientSession, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await session.call_tool(name, arguments)
    assert not result.isError, result
    assert result.structuredContent is not None
    return result.structuredContent


async def settled(session: ClientSession, question_id: str) -> dict[str, Any]:
    for _ in range(10):
        result = await call(session, "wait_for_answer", {"questionId": question_id, "timeoutSeconds": 20})
        if result["state"] != "pending":
            return result
    raise AssertionError(f"{question_id} stayed pending")


def test_a_yes_in_the_hosts_dialog_counts_and_the_phone_shows_it(paired: Paired) -> None:
    dialogs: list[types.ElicitRequestParams] = []

    async def dialog(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        dialogs.append(params)
        return types.ElicitResult(action="accept", content={"answer": "yes"})

    async def main() -> dict[str, Any]:
        async with stdio_client(server(paired)) as (read, write):
            async with ClientSession(read, write, elicitation_callback=dialog) as session:
                await session.initialize()
                asked = await call(
                    session,
                    "ask_user",
                    {"question": "Ship version 2?", "kind": "yes_no", "alsoAskHere": True},
                )
                assert asked["askedHere"] is True, asked
                return await settled(session, asked["questionId"])

    result = anyio.run(main)
    assert result["approved"] is True, result
    assert result["channel"] == "host"
    assert result["answeredBy"] is None
    assert len(dialogs) == 1 and "Ship version 2?" in dialogs[0].message
    shown = on_phone(paired, result["questionId"], "answered")
    assert shown.answer is True
    assert shown.channel == "host"


def pending_on_phone(paired: Paired, text: str) -> Any:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        for q in paired.device.questions().questions:
            if q.question == text and q.state == "pending":
                return q
        time.sleep(0.05)
    raise AssertionError(f"the phone never saw {text!r} pending")


def test_the_phone_answering_while_the_hosts_dialog_is_open_wins(paired: Paired) -> None:
    # This SDK runs an elicitation callback inside its receive loop: nothing else from the server (the tool's
    # result, a cancellation) is read until it returns, so the withdrawal itself is tested with rmcp
    # (pacerelle-mcp/tests/it/here.rs). What holds here: the phone answered first, so the dialog's later yes
    # counts for nothing.
    answered_on_phone: list[str] = []

    async def dialog(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        q = await anyio.to_thread.run_sync(pending_on_phone, paired, "Drop the table?")
        await anyio.to_thread.run_sync(paired.device.answer, q.question_id, False)
        answered_on_phone.append(q.question_id)
        return types.ElicitResult(action="accept", content={"answer": "yes"})

    async def main() -> dict[str, Any]:
        async with stdio_client(server(paired)) as (read, write):
            async with ClientSession(read, write, elicitation_callback=dialog) as session:
                await session.initialize()
                asked = await call(
                    session,
                    "ask_user",
                    {"question": "Drop the table?", "kind": "yes_no", "alsoAskHere": True},
                )
                assert asked["askedHere"] is True, asked
                return await settled(session, asked["questionId"])

    result = anyio.run(main)
    assert answered_on_phone == [result["questionId"]]
    assert result["channel"] == "phone", result
    assert result["answer"] == "no"
    assert result["approved"] is False
    shown = on_phone(paired, result["questionId"], "answered")
    assert shown.channel == "phone"


def test_a_host_without_elicitation_is_asked_on_the_phone_only(paired: Paired) -> None:
    async def main() -> dict[str, Any]:
        async with stdio_client(server(paired)) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return await call(
                    session,
                    "ask_user",
                    {"question": "Proceed?", "kind": "yes_no", "alsoAskHere": True},
                )

    asked = anyio.run(main)
    assert asked["askedHere"] is False, asked
    assert "elicitation" in asked["notAskedHere"]
    on_phone(paired, asked["questionId"], "pending")




async def refused(session: ClientSession, name: str, arguments: dict[str, Any]) -> str:
    result = await session.call_tool(name, arguments)
    assert result.isError, result
    return " ".join(c.text for c in result.content if isinstance(c, types.TextContent))


def test_a_wait_judges_exactly_the_question_asked_under_its_id(relay: Relay, paired: Paired) -> None:
    # The questions the server asked are kept under this home, across its restarts.
    params = StdioServerParameters(
        command=server(paired).command, args=[], env=dict(paired.env(), PACERELLE_HOME=str(relay.home))
    )
    tests = {"question": "Run the test suite?", "kind": "yes_no", "questionId": "x-py", "expiresInSeconds": 600}
    drop = "Delete the production database?"

    async def first_session() -> None:
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                asked = await call(session, "ask_user", tests)
                assert asked["resumed"] is False, asked
                q = await anyio.to_thread.run_sync(on_phone, paired, "x-py", "pending")
                await anyio.to_thread.run_sync(paired.device.answer, q.question_id, True)
                yes = await settled(session, "x-py")
                assert yes["approved"] is True and yes["question"] == "Run the test suite?", yes
                # The same question with another expiry: resumed, the first expiry holds.
                again = await call(session, "ask_user", dict(tests, expiresInSeconds=3600))
                assert again["resumed"] is True and again["expiresAt"] == asked["expiresAt"], again
                # Another question under the id: refused; the wait still names the first one only.
                text = await refused(session, "ask_user", {"question": drop, "kind": "yes_no", "questionId": "x-py"})
                assert "already names a different question" in text, text
                after = await settled(session, "x-py")
                assert after["question"] == "Run the test suite?" and drop not in str(after), after
                # A question of this agent the server did not ask, answered yes: not approved, and why.
                paired.agent.ask_user("Rotate the keys?", question_id="x-py-elsewhere")
                await anyio.to_thread.run_sync(paired.device.answer, "x-py-elsewhere", True)
                text = await refused(session, "wait_for_answer", {"questionId": "x-py-elsewhere", "timeoutSeconds": 0})
                assert "question_not_asked_here" in text and "Nothing is approved" in text, text

    async def second_session() -> tuple[dict[str, Any], str]:
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                restarted = await settled(session, "x-py")
                # The relay now serves another question under the id (its own sealed copy included).
                await anyio.to_thread.run_sync(serve_another_question, relay, paired, "x-py", drop)
                text = await refused(session, "wait_for_answer", {"questionId": "x-py", "timeoutSeconds": 0})
                return restarted, text

    anyio.run(first_session)
    restarted, text = anyio.run(second_session)
    assert restarted["approved"] is True and restarted["question"] == "Run the test suite?", restarted
    assert "question_id_conflict" in text and "nothing is approved" in text, text


def serve_another_question(relay: Relay, paired: Paired, question_id: str, other: str) -> None:
    """Plays a relay that replaces the question stored under `question_id` with another one the agent sealed
    under that id: the stored row is moved aside, and the other question asked under the id directly."""
    db = sqlite3.connect(relay.data / "pacerelle.db", timeout=10)
    try:
        with db:
            moved = db.execute(
                "UPDATE items SET item_id = ? WHERE kind = 'question' AND item_id = ?",
                (f"{question_id}-moved", question_id),
            ).rowcount
    finally:
        db.close()
    assert moved == 1
    assert paired.agent.ask_user(other, question_id=question_id).resumed is False
