"""`pacerelle-mcp` driven by the official MCP Python SDK (`mcp` on PyPI) over stdio, against a real relay, with
the phone played by the wheel's `Device`: asking at the computer too (`alsoAskHere`, MCP elicitation) — an
answer in the host's dialog counts and the phone shows it answered at the computer; an answer on the phone
first withdraws the dialog; a host without elicitation is asked on the phone only, as before."""

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


def test_an_answer_on_the_phone_first_withdraws_the_hosts_dialog(paired: Paired) -> None:
    opened = anyio.Event()
    withdrawn: list[str] = []

    async def dialog(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        opened.set()
        try:
            await anyio.sleep(60)
        except anyio.get_cancelled_exc_class():
            withdrawn.append(params.message)
            raise
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
                question_id = asked["questionId"]
                with anyio.fail_after(20):
                    await opened.wait()
                await anyio.to_thread.run_sync(on_phone, paired, question_id, "pending")
                await anyio.to_thread.run_sync(paired.device.answer, question_id, False)
                with anyio.fail_after(20):
                    while not withdrawn:
                        await anyio.sleep(0.05)
                return await settled(session, question_id)

    result = anyio.run(main)
    assert withdrawn, "the dialog should be withdrawn once the phone answered"
    assert result["channel"] == "phone", result
    assert result["answer"] == "no"
    assert result["approved"] is False


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


