"""The README's quickstart and the example agent run, as written, against a real relay; mypy checks the
stubs, the package, the example and a usage file."""

from __future__ import annotations

import importlib.util
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import pacerelle
from conftest import ROOT, Paired, relay_binary

DOCS = [ROOT / "pacerelle-py" / "README.md", ROOT / "docs" / "python.md"]
EXAMPLE = ROOT / "examples" / "python" / "supervised_agent.py"


def quickstart(path: Path) -> str:
    """The first ```python block after the 'Quickstart' heading."""
    text = path.read_text(encoding="utf-8")
    found = re.search(r"^#+ Quickstart.*?^```python\n(.*?)^```", text, re.S | re.M)
    assert found, f"no quickstart in {path}"
    return found.group(1)


class Phone:
    """Plays the phone for an agent process: approves or denies questions by their text."""

    def __init__(self, device: pacerelle.Device, answers: dict[str, bool]) -> None:
        self.device = device
        self.answers = answers
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        cursor: str | None = None
        while not self.stop.is_set():
            page = self.device.conversation(cursor, timeout=1)
            for item in page.items:
                if item.kind == "question" and item.question is not None and item.question.is_open:
                    self.device.answer(item.question.question_id, self.answers.get(item.text, False))
            cursor = page.cursor


def run_agent(args: list[str], paired: Paired, exchanges: list[tuple[str, str]], answers: dict[str, bool]) -> str:
    proc = subprocess.Popen(args, env=paired.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    phone = Phone(paired.device, answers)
    try:
        for i, (task, expected) in enumerate(exchanges):
            sent = paired.device.send(task, message_id=f"msg_task{i}")
            reply = paired.device.wait_for_reply(sent.id, timeout=30)
            assert reply.text == expected, (task, reply.text)
        deadline = time.monotonic() + 10
        while paired.agent.status().processed < len(exchanges):
            assert time.monotonic() < deadline
            time.sleep(0.1)
    finally:
        phone.stop.set()
        proc.send_signal(signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
    assert proc.returncode == 0, err
    # Stopped cleanly: the lease is released.
    assert paired.agent.status().session is None
    return err


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_the_quickstart_runs(doc: Path, paired: Paired, tmp_path: Path) -> None:
    script = tmp_path / "quickstart.py"
    script.write_text(quickstart(doc))
    run_agent(
        [sys.executable, str(script)],
        paired,
        [("hello", "echo: hello"), ("delete /tmp/a", "deleted /tmp/a"), ("delete /tmp/b", "not deleted: denied")],
        {"Delete /tmp/a?": True, "Delete /tmp/b?": False},
    )


def test_the_example_agent_runs(paired: Paired) -> None:
    err = run_agent(
        [sys.executable, str(EXAMPLE)],
        paired,
        [
            ("hello", "echo: hello"),
            ("deploy staging", "deployed staging"),
            ("deploy prod", "not deployed to prod: denied"),
            ("notes", "- handled deploy to prod: not deployed to prod: denied\n"
                      "- handled deploy to staging: deployed staging\n"
                      "- echoed msg_task0"),
        ],
        {"Deploy to staging?": True, "Deploy to prod?": False},
    )
    assert "received SIGTERM" in err


USAGE = '''
from __future__ import annotations

import asyncio
from datetime import datetime

import pacerelle


def sync_usage(agent: pacerelle.Agent, device: pacerelle.Device) -> None:
    inbox: pacerelle.Inbox = agent.wait_for_messages(timeout=1)
    for message in inbox.messages:
        when: datetime = message.sent_at
        agent.reply(message.message_id, f"{message.text} at {when:%H:%M}")
        agent.mark_processed(message.message_id)
    outcome: pacerelle.AnswerOutcome = agent.ask("ok?", expires_in=60)
    answer: bool | list[str] | str | None = outcome.answer
    if outcome.approved and answer is True:
        agent.notify("approved", level="success")
    asked = agent.ask_user("which?", options=["a", "b"])
    agent.wait_for_answer(asked, timeout=None)
    agent.cancel_question(asked.question_id)
    entries: list[pacerelle.AuditEntry] = agent.answer_log(state="expired", since=0.0)
    print(entries, device.questions("pending").questions[0].options)

    @agent.require_approval("Remove {name}?")
    def remove(name: str) -> int:
        return len(name)

    n: int = remove("x")
    with agent.approval("go?", approvals=2) as got:
        print(n, got)

    @agent.require_approval(policy=pacerelle.Policy.ask_everything(), tool="shell", approvals=1)
    def shell(command: str) -> None:
        print(command)

    ruling = agent.native.approve("run?", policy=pacerelle.Policy.ask_everything(), tool="shell", input={}).wait()
    if ruling.conclusion == "granted" and ruling.lets_run:
        print(agent.native.home, pacerelle.Policy.ask_everything().evaluate("shell").approvals + 1)
    try:
        agent.open_session()
    except pacerelle.AgentInUse as e:
        print(e.host, e.since, e.code)
    except pacerelle.NotApproved as e:
        print(e.conclusion, e.reason.upper() if e.reason else None, e.outcome)


async def async_usage(agent: pacerelle.AsyncAgent) -> None:
    inbox, status = await asyncio.gather(agent.wait_for_messages(), agent.status())
    print(len(inbox), status.presence)

    async def handler(message: pacerelle.Message, ctx: pacerelle.AsyncRunContext) -> str:
        await ctx.save_checkpoint("done", "next")
        return message.text

    await agent.run(handler)


def webhook(headers: dict[str, str], body: bytes) -> str:
    try:
        return pacerelle.verify_webhook("secret-secret-secret", headers, body).question_id
    except pacerelle.WebhookError as e:
        return str(e.reason)
'''


def test_types_check_with_mypy(tmp_path: Path) -> None:
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed (cargo xtask test --only py installs it)")
    usage = tmp_path / "usage.py"
    usage.write_text(USAGE)
    for target in (["-p", "pacerelle"], [str(usage), str(EXAMPLE)]):
        result = subprocess.run(
            [sys.executable, "-m", "mypy", "--strict", "--no-incremental", *target],
            capture_output=True,
            text=True,
            cwd=tmp_path,
        )
        assert result.returncode == 0, result.stdout + result.stderr


def test_up_names_the_files_cursor_and_claude_desktop_read(tmp_path: Path) -> None:
    """`pacerelle up` labels the MCP configuration with the files the hosts read (Cursor: `mcp.json` in
    `~/.cursor/` or a project's `.cursor/`, never `.mcp.json`), as docs/hosts/cursor.md does."""
    up = subprocess.Popen(
        [str(relay_binary()), "up", "--listen", "127.0.0.1:0", "--data", str(tmp_path / "data"),
         "--home", str(tmp_path / "home")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    try:
        assert up.stdout is not None
        deadline = time.monotonic() + 60
        for line in up.stdout:
            lines.append(line)
            if line.startswith("Pairing link") or time.monotonic() > deadline:
                break
    finally:
        up.send_signal(signal.SIGINT)
        try:
            up.wait(20)
        except subprocess.TimeoutExpired:
            up.kill()
            up.wait()
    out = "".join(lines)
    assert "Pairing link" in out, out + (up.stderr.read() if up.stderr else "")
    label = next(line for line in lines if "Cursor" in line)
    assert "~/.cursor/mcp.json" in label and ".cursor/mcp.json in a project" in label, label
    assert "(.mcp.json" not in out and " .mcp.json" not in out
    doc = (ROOT / "docs" / "hosts" / "cursor.md").read_text(encoding="utf-8")
    assert "`~/.cursor/mcp.json`" in doc and "`.cursor/mcp.json`" in doc
    assert "`.mcp.json`" not in doc
