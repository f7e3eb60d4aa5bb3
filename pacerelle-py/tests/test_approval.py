"""`require_approval` and `approval()`: only an authenticated yes runs the function; no, expiry, cancel and an
unreachable relay raise NotApproved with that reason, and the function never runs."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

import pacerelle
from conftest import ROOT, Background, Paired, Relay


def answer_next(device: pacerelle.Device, answer: bool) -> Background:
    """The phone answers the next open question, in the background."""

    def play() -> pacerelle.Question:
        question = device.wait_for_question(timeout=20)
        device.answer(question.question_id, answer)
        return question

    return Background(play)


def test_yes_runs_the_function(paired: Paired) -> None:
    agent, device = paired.agent, paired.device
    ran: list[str] = []

    @agent.require_approval("Delete {path}?", details="it cannot be undone")
    def delete(path: str) -> str:
        ran.append(path)
        return f"deleted {path}"

    phone = answer_next(device, True)
    assert delete("/tmp/x") == "deleted /tmp/x"
    question = phone.join()
    assert question.question == "Delete /tmp/x?"
    assert question.details == "it cannot be undone"
    assert question.kind == "yes_no"
    assert ran == ["/tmp/x"]


def test_no_raises_denied_and_never_runs(paired: Paired) -> None:
    agent, device = paired.agent, paired.device
    ran: list[str] = []

    @agent.require_approval
    def deploy(env: str) -> None:
        ran.append(env)

    phone = answer_next(device, False)
    with pytest.raises(pacerelle.NotApproved) as caught:
        deploy("prod")
    assert "deploy(env='prod')" in phone.join().question
    assert caught.value.conclusion == "denied"
    assert caught.value.outcome is not None
    assert caught.value.outcome.state == "answered"
    assert caught.value.outcome.answer is False
    assert caught.value.outcome.answered_by_name == "Ana's phone"
    assert isinstance(caught.value, pacerelle.PacerelleError)
    assert ran == []


def test_expiry_raises_expired(paired: Paired) -> None:
    ran: list[int] = []

    @paired.agent.require_approval("Run it?", expires_in=1)
    def act() -> None:
        ran.append(1)

    with pytest.raises(pacerelle.NotApproved) as caught:
        act()
    assert caught.value.conclusion == "expired"
    assert caught.value.outcome is not None and caught.value.outcome.state == "expired"
    assert ran == []


def test_our_own_time_limit_withdraws_the_question(paired: Paired) -> None:
    agent, device = paired.agent, paired.device
    with pytest.raises(pacerelle.NotApproved) as caught:
        with agent.approval("Quick?", expires_in=600, timeout=1):
            raise AssertionError("must not run")
    assert caught.value.conclusion == "cancelled"  # as the answer log records it
    outcome = caught.value.outcome
    assert outcome is not None and not outcome.approved
    # A late yes approves nothing: the question was withdrawn.
    with pytest.raises(pacerelle.QuestionClosed):
        device.questions()  # refresh the device's view
        device.answer(outcome.question_id, True)


def test_cancel_raises_cancelled(paired: Paired) -> None:
    agent, device = paired.agent, paired.device
    ran: list[int] = []

    def cancel_it() -> None:
        question = device.wait_for_question(timeout=20)
        agent.cancel_question(question.question_id)

    canceller = Background(cancel_it)
    with pytest.raises(pacerelle.NotApproved) as caught:
        with agent.approval("Shall I?"):
            ran.append(1)
    canceller.join()
    assert caught.value.conclusion == "cancelled"
    assert ran == []


def test_the_context_manager_runs_the_block_on_yes(paired: Paired) -> None:
    agent, device = paired.agent, paired.device
    phone = answer_next(device, True)
    with agent.approval("Go ahead?") as outcome:
        assert outcome is not None and outcome.approved
        assert outcome.answer is True
    phone.join()
    log = agent.answer_log()
    assert log[0].question == "Go ahead?" and log[0].approved


def test_an_unreachable_relay_is_not_a_yes(relay: Relay, paired: Paired) -> None:
    ran: list[int] = []

    @paired.agent.require_approval("Anything?")
    def act() -> None:
        ran.append(1)

    relay.stop()
    with pytest.raises(pacerelle.NotApproved) as caught:
        act()
    assert caught.value.conclusion == "relay_unavailable"
    assert isinstance(caught.value.__cause__, pacerelle.RelayUnavailable)
    assert ran == []


POLICY = """
default = "ask"

[[rule]]
tool = "read_file"
decision = "allow"

[[rule]]
tool = "shell"
command = ["rm -rf *"]
decision = "deny"
reason = "no recursive deletes"
"""


def test_a_policy_file_decides_first(tmp_path: Path, paired: Paired) -> None:
    agent, device = paired.agent, paired.device
    policy_file = tmp_path / "policy.toml"
    policy_file.write_text(POLICY)
    ran: list[str] = []

    @agent.require_approval(policy=policy_file)
    def read_file(path: str) -> str:
        ran.append(path)
        return "content"

    @agent.require_approval(policy=policy_file, tool="shell")
    def run_shell(command: str) -> None:
        ran.append(command)

    assert read_file("/etc/hosts") == "content"  # allowed without asking
    with pytest.raises(pacerelle.NotApproved) as caught:
        run_shell("rm -rf /")
    assert caught.value.conclusion == "denied"
    assert "no recursive deletes" in str(caught.value)
    phone = answer_next(device, True)
    run_shell("ls")  # no rule matches: the default asks
    assert phone.join().question == "Allow shell(command='ls')?"
    assert ran == ["/etc/hosts", "ls"]
    assert len(agent.answer_log()) == 1  # only the 'ask' was asked


def test_policy_evaluate() -> None:
    policy = pacerelle.Policy.parse(POLICY)
    assert policy.evaluate("read_file").decision == "allow"
    deny = policy.evaluate("shell", {"command": "rm -rf /tmp"})
    assert (deny.decision, deny.reason) == ("deny", "no recursive deletes")
    assert policy.evaluate("shell", {"command": "ls"}).decision == "ask"
    assert pacerelle.Policy.ask_everything().evaluate("x").decision == "ask"
    with pytest.raises(pacerelle.InvalidInput):
        pacerelle.Policy.parse("default = 'maybe'")


# ---------------------------------------------------------------- the table shared with the hook and MCP

#: The scenarios every surface concludes alike; pacerelle-cli/tests/it/gate_table.rs runs them through the hook
#: and the MCP tools.
TABLE: list[dict[str, Any]] = json.loads((ROOT / "pacerelle-cli" / "tests" / "gate_table.json").read_text())[
    "scenarios"
]

TAMPER = """
CREATE TRIGGER gate_table_tamper AFTER UPDATE OF answer_envelope ON questions
WHEN NEW.answer_envelope IS NOT NULL
BEGIN
  UPDATE questions SET answer_envelope =
    substr(NEW.answer_envelope, 1, length(NEW.answer_envelope) / 2)
    || CASE substr(NEW.answer_envelope, length(NEW.answer_envelope) / 2 + 1, 1) WHEN 'A' THEN 'B' ELSE 'A' END
    || substr(NEW.answer_envelope, length(NEW.answer_envelope) / 2 + 2)
  WHERE item_seq = NEW.item_seq;
END
"""


def tamper_with_answers(relay: Relay) -> None:
    """Every answer the relay stores from now on has one character of its sealed envelope changed."""
    db = sqlite3.connect(relay.data / "pacerelle.db", timeout=10)
    try:
        db.execute(TAMPER)
        db.commit()
    finally:
        db.close()


@pytest.mark.parametrize("scenario", [s for s in TABLE if "python" in s["surfaces"]], ids=lambda s: s["name"])
def test_the_gate_table(scenario: dict[str, Any], relay: Relay, paired: Paired, tmp_path: Path) -> None:
    agent, device = paired.agent, paired.device
    phone: str = scenario["phone"]
    policy: Path | None = None
    if scenario.get("policy") is not None:
        policy = tmp_path / "policy.toml"
        policy.write_text(scenario["policy"])
    touches = scenario.get("touches")
    ran: list[str | None] = []

    @agent.require_approval(
        "Deploy to production?",
        policy=policy,
        tool="Write" if touches else "deploy",
        expires_in=2 if phone == "silent" else 60,
    )
    def act(file_path: str | None = None) -> None:
        ran.append(file_path)

    def play() -> None:
        if phone == "silent":
            device.wait_for_question(timeout=20)
        elif phone in ("yes", "no"):
            if scenario.get("tamper"):
                tamper_with_answers(relay)
            question = device.wait_for_question(timeout=20)
            try:
                device.answer(question.question_id, phone == "yes")
            except pacerelle.PacerelleError:
                pass  # with the trigger, the relay stores another answer than the one given
        elif phone == "cancel":
            agent.cancel_question(device.wait_for_question(timeout=20).question_id)

    if scenario.get("relay") == "down":
        relay.stop()
    background = Background(play) if phone != "none" else None
    try:
        act(str(tmp_path / "project" / touches) if touches else None)
        conclusion = "approved" if phone != "none" else "allowed"
    except pacerelle.NotApproved as e:
        conclusion = str(e.conclusion)
        assert e.reason and " " in e.reason, e.reason  # the gate's sentence, beside its word
        assert ran == []
    if background is not None:
        background.join()
    assert conclusion == scenario["conclusion"], scenario["name"]
    assert bool(ran) == (conclusion in ("approved", "allowed"))
    if scenario.get("relay") != "down":
        asked = len(agent.answer_log())
        assert asked == (0 if phone == "none" else 1), scenario["name"]


def test_a_policy_file_protects_itself(tmp_path: Path) -> None:
    policy_file = tmp_path / "policy.toml"
    policy_file.write_text('default = "allow"')
    policy = pacerelle.Policy.load(policy_file)
    assert policy.evaluate("Write", {"file_path": str(tmp_path / "notes.md")}).decision == "allow"
    assert policy.evaluate("Write", {"file_path": str(policy_file)}).decision == "ask"
    assert policy.evaluate("shell", {"command": f"rm {policy_file}"}).decision == "ask"
    assert policy.evaluate("Edit", {"path": "/repo/.claude/settings.json"}).decision == "ask"


def test_an_interrupted_approval_withdraws_its_question(paired: Paired) -> None:
    """Cancelling the asyncio task that waits drops the native gate, which withdraws the question: a late
    yes approves nothing."""
    agent, device = paired.agent, paired.device

    async def main() -> None:
        async_agent = pacerelle.AsyncAgent.from_agent(agent)
        waiting = asyncio.ensure_future(async_agent.approval("Interrupted?", expires_in=600).__aenter__())
        question = await asyncio.to_thread(device.wait_for_question, 20)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        deadline = time.monotonic() + 10
        while device.questions("cancelled").questions == []:
            assert time.monotonic() < deadline, "the question was not withdrawn"
            await asyncio.sleep(0.1)
        assert device.questions("cancelled").questions[0].question_id == question.question_id

    asyncio.run(main())
