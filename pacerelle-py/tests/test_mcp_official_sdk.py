"""`pacerelle-mcp` driven by the official MCP Python SDK (`mcp` on PyPI) over stdio, against a real relay, with
the phone played by the wheel's `Device`: asking at the computer too (`alsoAskHere`, MCP elicitation) — an
answer in the host's dialog counts and the phone shows it answered at the computer; an answer on the phone
given first wins over a later yes in the dialog; a host without elicitation is asked on the phone only, as before."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

from conftest import ROOT, Paired

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
    # (pacerelle-mcp/tests/here.rs). What holds here: the phone answered first, so the dialog's later yes
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


