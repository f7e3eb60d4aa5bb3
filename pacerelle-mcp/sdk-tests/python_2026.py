"""`pacerelle-mcp` driven by the official MCP Python SDK 2.3.0 (`mcp` on PyPI) on a **2026-07-28** session
(`server/discover`, no server request during a session), over stdio, against a real relay (`pacerelle serve` on
127.0.0.1:0 with its SQLite file) and a real device (the CLI paired as a terminal):

- `ask_user {alsoAskHere}` asks at the host with an input request; the SDK shows the dialog (its elicitation
  callback) and calls again with the answer; a yes there approves with channel `host`, and the phone shows the
  question answered at the computer;
- the phone answering while the host's dialog is open wins: the dialog's later yes counts for nothing;
- the listening flow: a task from the phone waited for, replied to and marked processed.

The `py` step's suite runs on the 1.x SDK (2025-11-25 sessions, elicitation requests from the server); this file
is the newer revision's, in a virtual environment of its own (`cargo xtask test --only mcp-sdks`). Run by hand:
`python python_2026.py` with `mcp==2.3.0` installed, once target/debug/pacerelle and pacerelle-mcp are built.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters, types

ROOT = Path(__file__).resolve().parents[2]
PACERELLE = ROOT / "target" / "debug" / "pacerelle"
MCP = ROOT / "target" / "debug" / "pacerelle-mcp"


class World:
    """A relay, an agent and a phone (the CLI as a device), in a folder of their own."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.relay = subprocess.Popen(
            [str(PACERELLE), "serve", "--listen", "127.0.0.1:0", "--data", str(work / "data"), "--json"],
            env=dict(os.environ, PACERELLE_HOME=str(work / "relay-home"), PACERELLE_LOG="warn"),
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        out = ""
        deadline = time.monotonic() + 30
        while True:
            assert time.monotonic() < deadline, f"the relay did not start: {out!r}"
            out += self.relay.stdout.readline()  # type: ignore[union-attr]
            try:
                self.url = json.loads(out)["relayUrl"]
                break
            except json.JSONDecodeError:
                continue
        self.agent = self.cli("agent", ["agent", "create", "--name", "Python SDK 2 agent"])
        link = self.cli("agent", ["pair", "--name", "phone"])["link"]
        self.cli("phone", ["device", "join", link, "--name", "Phone"])

    def cli(self, home: str, args: list[str]) -> Any:
        done = subprocess.run(
            [str(PACERELLE), "--json", *args],
            env=dict(os.environ, PACERELLE_HOME=str(self.work / home), PACERELLE_RELAY_URL=self.url),
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert done.returncode == 0, f"pacerelle {' '.join(args)}: {done.stderr}"
        return json.loads(done.stdout) if done.stdout.strip() else None

    def server(self) -> StdioServerParameters:
        return StdioServerParameters(
            command=str(MCP),
            args=[],
            env=dict(
                os.environ,
                PACERELLE_AGENT_ID=self.agent["agentId"],
                PACERELLE_AGENT_TOKEN=self.agent["token"],
                PACERELLE_RELAY_URL=self.url,
                PACERELLE_HOME=str(self.work / "agent"),
                PACERELLE_LOG="warn",
            ),
        )

    def on_phone(self, question: str, state: str) -> dict[str, Any]:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            for item in self.cli("phone", ["inbox"]):
                q = item.get("question") or {}
                if item.get("kind") == "question" and item.get("text") == question and q.get("state") == state:
                    return item
            time.sleep(0.1)
        raise AssertionError(f"the phone never showed {question!r} {state}")

    def close(self) -> None:
        self.relay.kill()
        self.relay.wait()


async def settled(client: Client, question_id: str) -> dict[str, Any]:
    for _ in range(10):
        result = await client.call_tool("wait_for_answer", {"questionId": question_id, "timeoutSeconds": 20})
        assert not result.is_error, result
        if result.structured_content["state"] != "pending":
            return result.structured_content
    raise AssertionError(f"{question_id} stayed pending")


def text_of(result: types.CallToolResult) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def a_yes_in_the_hosts_dialog_counts(world: World) -> None:
    dialogs: list[Any] = []

    async def dialog(context: Any, params: Any) -> types.ElicitResult:
        dialogs.append(params)
        return types.ElicitResult(action="accept", content={"answer": "yes"})

    async with Client(world.server(), mode="2026-07-28", elicitation_callback=dialog) as client:
        asked = await client.call_tool(
            "ask_user", {"question": "Ship version 3?", "kind": "yes_no", "alsoAskHere": True}
        )
        assert not asked.is_error, asked
        assert asked.structured_content["askedHere"] is True, asked.structured_content
        assert "answered here at the computer" in text_of(asked), text_of(asked)
        result = await settled(client, asked.structured_content["questionId"])
    assert len(dialogs) == 1 and "Ship version 3?" in dialogs[0].message, dialogs
    assert result["approved"] is True and result["channel"] == "host", result
    shown = world.on_phone("Ship version 3?", "answered")
    assert shown["question"]["channel"] == "host", shown


async def the_phone_first_wins(world: World) -> None:
    answered: list[str] = []

    async def dialog(context: Any, params: Any) -> types.ElicitResult:
        item = await anyio.to_thread.run_sync(world.on_phone, "Drop the table?", "pending")
        await anyio.to_thread.run_sync(world.cli, "phone", ["answer", item["id"], "no"])
        answered.append(item["id"])
        return types.ElicitResult(action="accept", content={"answer": "yes"})

    async with Client(world.server(), mode="2026-07-28", elicitation_callback=dialog) as client:
        asked = await client.call_tool(
            "ask_user", {"question": "Drop the table?", "kind": "yes_no", "alsoAskHere": True}
        )
        assert "does not count" in text_of(asked), text_of(asked)
        result = await settled(client, asked.structured_content["questionId"])
    assert answered == [result["questionId"]], (answered, result)
    assert result["channel"] == "phone" and result["answer"] == "no" and result["approved"] is False, result


async def the_listening_flow(world: World) -> None:
    text = f"Write the changelog ({secrets.token_hex(4)})"
    sent = world.cli("phone", ["send", text])
    async with Client(world.server(), mode="2026-07-28") as client:
        task = None
        for _ in range(5):
            waited = await client.call_tool("wait_for_messages", {"timeoutSeconds": 20})
            assert not waited.is_error, waited
            task = next((m for m in waited.structured_content["messages"] if m["messageId"] == sent["messageId"]), None)
            if task:
                break
        assert task and task["text"] == text, task
        reply = await client.call_tool("reply", {"sourceMessageId": task["messageId"], "text": f"Done: {text}"})
        assert not reply.is_error and reply.structured_content["created"] is True, reply
        done = await client.call_tool("mark_processed", {"messageId": task["messageId"]})
        assert not done.is_error, done
    replies = [i for i in world.cli("phone", ["inbox"]) if i.get("kind") == "reply"]
    assert any(r.get("text") == f"Done: {text}" for r in replies), replies


def main() -> int:
    for binary in (PACERELLE, MCP):
        if not binary.exists():
            print(f"{binary} is missing: build the workspace first", file=sys.stderr)
            return 2
    failed = 0
    with tempfile.TemporaryDirectory(prefix="pacerelle-mcp-py2-") as work:
        world = World(Path(work))
        try:
            for case in (a_yes_in_the_hosts_dialog_counts, the_phone_first_wins, the_listening_flow):
                started = time.monotonic()
                try:
                    anyio.run(case, world)
                    print(f"ok - {case.__name__} ({time.monotonic() - started:.1f} s)")
                except Exception as e:  # noqa: BLE001 - every case runs and says how it failed
                    failed += 1
                    print(f"not ok - {case.__name__}: {e!r}")
        finally:
            world.close()
    # As node's test runner says it, which the xtask's summary counts.
    print(f"# pass {3 - failed}")
    print(f"# fail {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
