"""Grants and several approvals in `require_approval` and `approval()`, against a real relay.

Grants: a device paired through the CLI answers `pacerelle answer ID yes --for 15m` to the question a policy's
`ask` raised; the same call then runs without a question (the gate's conclusion `granted`, each use recorded
in the agent's grants book, the CLI hook's `<PACERELLE_HOME>/grants/<agentId>.json`), while another command,
another project folder, or the same call after the grant was revoked is asked again.

Several approvals: `approvals=2` with one paired device is refused before anything is asked; with two, one yes
keeps the question waiting, two yeses run the call, a yes then a no denies it; a policy rule's `approvals`
applies too.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

import pacerelle
from conftest import Background, Paired, Relay, relay_binary

POLICY = """
default = "ask"
grant = ["15m", "1h"]

[[rule]]
tool = "shell"
command = "make release*"
decision = "ask"
grant = false
"""


class CliDevice:
    """A device paired through the CLI (`pacerelle device join`), in its own home: it grants with its answers."""

    def __init__(self, home: Path) -> None:
        self.home = home

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ, PACERELLE_HOME=str(self.home), PACERELLE_LOG="warn")
        for var in ("PACERELLE_RELAY_URL", "PACERELLE_AGENT_ID", "PACERELLE_AGENT_TOKEN"):
            env.pop(var, None)
        done = subprocess.run(
            [str(relay_binary()), *args], env=env, capture_output=True, text=True, timeout=60, check=False
        )
        assert done.returncode == 0, f"pacerelle {' '.join(args)}: {done.stderr}"
        return done

    def next_question(self, seen: set[str], timeout: float = 20.0) -> dict[str, Any]:
        """The first pending question of the inbox whose id is not in `seen` (which it is added to)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            items = json.loads(self.run("--json", "inbox").stdout)
            for item in items:
                question = item.get("question") or {}
                qid = question.get("questionId")
                if qid and qid not in seen and question.get("state") == "pending":
                    seen.add(qid)
                    return question
            time.sleep(0.1)
        raise AssertionError("no new question reached the device")

    def answer(self, question_id: str, *args: str) -> None:
        self.run("answer", question_id, *args)


class Granting:
    def __init__(self, agent: pacerelle.Agent, device: CliDevice, home: Path, project: Path) -> None:
        self.agent = agent
        self.device = device
        self.home = home
        self.project = project
        self.seen: set[str] = set()

    def book(self) -> dict[str, Any]:
        """The agent's grants book, as the CLI's hook keeps it."""
        path = self.home / "grants" / f"{self.agent.agent_id}.json"
        return json.loads(path.read_text())


@pytest.fixture
def granting(relay: Relay, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Granting:
    """An agent whose home is a temporary folder, a CLI device paired with it, and a project folder as the
    current directory."""
    home = tmp_path / "agent-home"
    monkeypatch.setenv("PACERELLE_HOME", str(home))
    agent = pacerelle.Agent.register(relay.url, "grants agent")
    assert agent.native.home == str(home)
    device = CliDevice(tmp_path / "device-home")
    device.run("device", "join", agent.create_pairing(label="phone").link, "--name", "Ana's phone")
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    return Granting(agent, device, home, project)


def test_a_grant_lets_the_same_call_run_without_a_question(
    granting: Granting, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent, device = granting.agent, granting.device
    policy = pacerelle.Policy.parse(POLICY)
    ran: list[str] = []

    # A call the grant does not let run is asked and, unanswered, withdrawn after 15 s: the test fails, not hangs.
    @agent.require_approval(policy=policy, tool="shell", timeout=15)
    def shell(command: str) -> str:
        ran.append(command)
        return f"ran {command}"

    # Asked, with the grants the policy offers for exactly this call in this folder; the device grants 15 min.
    first = Background(lambda: shell("make test"))
    question = device.next_question(granting.seen)
    offer = question["grants"]
    assert offer["durations"] == [900, 3600]
    assert offer["scopes"] == [
        {"tool": "shell", "command": "make test", "match": "exact", "folder": str(granting.project)}
    ]
    device.answer(question["questionId"], "yes", "--for", "15m")
    assert first.join() == "ran make test"
    kept = granting.book()["grants"]
    assert [g["id"] for g in kept] == [question["questionId"]] and kept[0]["uses"] == []

    # The same call runs without a question, three times; each use is in the book.
    asked = len(agent.answer_log())
    for _ in range(3):
        assert shell("make test") == "ran make test"
    assert len(agent.answer_log()) == asked, "no question was asked"
    uses = granting.book()["grants"][0]["uses"]
    used = [(u["tool"], u["command"], u["folder"]) for u in uses]
    assert used == [("shell", "make test", str(granting.project))] * 3
    # The gate's word for such a call.
    ruling = agent.native.approve("Run?", policy=policy, tool="shell", input={"command": "make test"}).wait()
    assert (ruling.conclusion, ruling.lets_run) == ("granted", True)
    assert f"allowed by grant {question['questionId']}" in ruling.reason and "Ana's phone" in ruling.reason

    # Another argument (another scope), and the same call in another folder: asked (the device says no).
    other = tmp_path / "other"
    other.mkdir()
    for folder, command in ((granting.project, "make deploy"), (other, "make test")):
        monkeypatch.chdir(folder)
        call = Background(lambda command=command: shell(command))
        asked_now = device.next_question(granting.seen)
        assert asked_now["question"] == f"Allow shell(command={command!r})?"
        assert asked_now["grants"]["scopes"][0]["folder"] == str(folder)
        device.answer(asked_now["questionId"], "no")
        with pytest.raises(pacerelle.NotApproved) as caught:
            call.join()
        assert caught.value.conclusion == "denied"
    monkeypatch.chdir(granting.project)

    # Revoked from the device: the next use learns it from the relay, and asks again.
    device.run("grants", "revoke", question["questionId"])
    call = Background(lambda: shell("make test"))
    device.answer(device.next_question(granting.seen)["questionId"], "no")
    with pytest.raises(pacerelle.NotApproved):
        call.join()
    assert granting.book()["grants"][0].get("revokedAt")
    assert ran == ["make test"] * 4


def test_a_rule_without_grants_offers_none_and_a_plain_yes_keeps_none(granting: Granting) -> None:
    agent, device = granting.agent, granting.device
    ran: list[str] = []

    @agent.require_approval(policy=pacerelle.Policy.parse(POLICY), tool="shell", timeout=15)
    def shell(command: str) -> None:
        ran.append(command)

    # `grant = false`: no offer, and a grant cannot be given.
    call = Background(lambda: shell("make release"))
    question = device.next_question(granting.seen)
    assert not question.get("grants")
    device.answer(question["questionId"], "yes")
    call.join()
    # A grantable call answered a plain yes: the next one is asked again.
    for _ in range(2):
        call = Background(lambda: shell("make test"))
        question = device.next_question(granting.seen)
        assert question["grants"]["scopes"][0]["command"] == "make test"
        device.answer(question["questionId"], "yes")
        call.join()
    assert ran == ["make release", "make test", "make test"]
    assert not (granting.home / "grants" / f"{agent.agent_id}.json").exists() or granting.book()["grants"] == []


# ---------------------------------------------------------------- several approvals

TWO_FOR_DEPLOY = """
default = "allow"

[[rule]]
tool = "deploy"
decision = "ask"
approvals = 2
"""


def test_more_approvals_than_devices_is_refused_before_asking(paired: Paired) -> None:
    agent = paired.agent
    ran: list[str] = []
    fewer = "needs 2 approvals, but only 1 device"

    with pytest.raises(pacerelle.InvalidInput, match=fewer):
        with agent.approval("Deploy?", approvals=2):
            ran.append("block")

    @agent.require_approval("Ship {version}?", approvals=2)
    def ship(version: str) -> None:
        ran.append(version)

    @agent.require_approval(policy=pacerelle.Policy.parse(TWO_FOR_DEPLOY))
    def deploy(env: str) -> None:
        ran.append(env)

    with pytest.raises(pacerelle.InvalidInput, match=fewer):
        ship("1.0")
    with pytest.raises(pacerelle.InvalidInput, match=fewer):
        deploy("prod")
    with pytest.raises(pacerelle.InvalidInput, match=fewer):
        agent.ask_user("Deploy?", approvals=2)
    for bad in (0, 11):
        with pytest.raises(pacerelle.InvalidInput, match="approvals is 1 to 10"):
            agent.ask("Deploy?", approvals=bad)
    with pytest.raises(pacerelle.InvalidInput, match="yes/no"):
        agent.ask_user("Which?", options=["a", "b"], approvals=2)
    assert pacerelle.Policy.parse(TWO_FOR_DEPLOY).evaluate("deploy").approvals == 2
    assert ran == []
    assert agent.answer_log() == [], "nothing was asked"


def test_two_approvals_need_two_devices_yes(paired: Paired) -> None:
    agent, ana = paired.agent, paired.device
    ben = pacerelle.Device.join(agent.create_pairing(label="second").link, "Ben's phone")

    def answer(*answers: tuple[pacerelle.Device, bool]) -> Background:
        def play() -> None:
            for device, yes in answers:
                device.answer(device.wait_for_question(timeout=20).question_id, yes)

        return Background(play)

    # One yes: the question keeps waiting; the time limit withdraws it, and the block never runs.
    phone = answer((ana, True))
    with pytest.raises(pacerelle.NotApproved) as caught:
        with agent.approval("Deploy?", approvals=2, timeout=3):
            raise AssertionError("must not run")
    phone.join()
    assert caught.value.conclusion in ("cancelled", "pending"), caught.value.reason
    assert caught.value.outcome is not None and not caught.value.outcome.approved

    # Two yeses from two devices: the function runs.
    ran: list[str] = []

    @agent.require_approval("Ship {version}?", approvals=2)
    def ship(version: str) -> None:
        ran.append(version)

    phone = answer((ana, True), (ben, True))
    ship("1.2")
    phone.join()
    assert ran == ["1.2"]

    # A policy rule's approvals: one yes is not enough, and a no then denies.
    @agent.require_approval(policy=pacerelle.Policy.parse(TWO_FOR_DEPLOY))
    def deploy(env: str) -> None:
        ran.append(env)

    phone = answer((ana, True), (ben, False))
    with pytest.raises(pacerelle.NotApproved) as caught:
        deploy("prod")
    phone.join()
    assert caught.value.conclusion == "denied"
    assert ran == ["1.2"]

    # The plain question API: approved only once both said yes.
    asked = agent.ask_user("Both of you?", approvals=2)
    phone = answer((ana, True))
    phone.join()
    assert not agent.wait_for_answer(asked, timeout=0.5).approved
    answer((ben, True)).join()
    assert agent.wait_for_answer(asked, timeout=10).approved
