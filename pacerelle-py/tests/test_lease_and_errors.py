"""The lease across processes, typed errors, the GIL released during waits, Ctrl-C during a wait."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import pacerelle
from conftest import Background, Paired, Relay, pair

SECOND_AGENT = textwrap.dedent(
    """
    import json, pacerelle
    agent = pacerelle.Agent.from_env(host="second process")
    try:
        {action}
        print(json.dumps({{"error": None}}))
    except pacerelle.PacerelleError as e:
        print(json.dumps({{"error": type(e).__name__, "host": getattr(e, "host", None),
                           "since": str(getattr(e, "since", None)), "code": e.code}}))
    """
)


def second_agent(paired: Paired, action: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", SECOND_AGENT.format(action=action)],
        env=paired.env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def test_a_second_agent_in_another_process_gets_agent_in_use(paired: Paired) -> None:
    agent = paired.agent
    agent.host = "first process"
    session = agent.open_session()
    assert session.host == "first process"
    try:
        for action in ("agent.open_session()", "agent.run(lambda m: None)"):
            result = second_agent(paired, action)
            assert result["error"] == "AgentInUse", result
            assert result["host"] == "first process"
            assert result["code"] == "agent_in_use"
            assert str(session.since.year) in str(result["since"])
        status = agent.status()
        assert status.session is not None and status.session.host == "first process"
    finally:
        agent.close_session()
    # Once released, the other process gets it; an explicit takeover works while it is held.
    assert second_agent(paired, "agent.open_session(); agent.close_session()")["error"] is None
    agent.open_session()
    assert second_agent(paired, "agent.open_session(takeover=True)")["error"] is None
    with pytest.raises(pacerelle.LeaseLost):
        agent.wait_for_messages(timeout=0)


def test_named_sessions_listen_side_by_side_each_with_its_own_tasks(paired: Paired) -> None:
    agent, device = paired.agent, paired.device
    api = pacerelle.Agent.from_env(paired.env() | {"PACERELLE_SESSION": "api"}, host="api process")
    assert api.session == "api"
    opened = api.open_session(folder="billing-api")
    assert (opened.name, opened.folder) == ("api", "billing-api")
    try:
        # Another process of the same agent, named web, opens beside it; a second "api" is refused.
        web = second_agent(paired, "agent.session = 'web'; agent.open_session(); agent.close_session()")
        assert web["error"] is None, web
        refused = second_agent(paired, "agent.session = 'api'; agent.open_session()")
        assert refused["error"] == "AgentInUse" and refused["host"] == "api process", refused
        # A task for web waits for web; api receives only the one sent to it (or to any session).
        device.send("for web", session="web")
        for_api = device.send("for api", session="api")
        inbox = api.wait_for_messages(timeout=5)
        assert [(m.message_id, m.text, m.session) for m in inbox.messages] == [(for_api.id, "for api", "api")]
        status = device.status()
        assert [(s.name, s.host, s.folder, s.in_progress) for s in status.sessions] == [
            ("api", "api process", "billing-api", 1)
        ]
        assert status.session is not None and status.session.name == "api"
        with pytest.raises(pacerelle.InvalidInput):
            device.send("bad", session="any")
    finally:
        api.close_session()
    assert agent.session is None, "the default session unless named"


def test_errors_are_typed(relay: Relay, paired: Paired) -> None:
    agent, device = paired.agent, paired.device
    with pytest.raises(pacerelle.AuthError) as auth:
        pacerelle.Agent(relay.url, agent.agent_id, pacerelle.Agent.register(relay.url, "other").token).status()
    assert auth.value.code == "unauthorized" and auth.value.status == 401
    with pytest.raises(pacerelle.InvalidInput) as refused:
        pacerelle.Agent(relay.url, agent.agent_id, "pcr1_broken")
    assert refused.value.code == "invalid_input"
    with pytest.raises(pacerelle.InvalidInput) as refused:
        pacerelle.Device.join("https://relay.invalid/pair#v2.nothing", "phone")
    assert refused.value.code == "invalid_input"
    with pytest.raises(pacerelle.InvalidInput):
        agent.reply("msg_x", "   ")
    with pytest.raises(pacerelle.InvalidInput) as refused:
        agent.ask_user("pick", kind="yes_no", options=["a", "b"])
    # Refused here, before anything was sent: the code the relay would give, as the CLI prints it.
    assert refused.value.code == "invalid_input"
    with pytest.raises(pacerelle.InvalidInput) as refused:
        agent.wait_for_messages(timeout=-1)
    assert refused.value.code == "invalid_input"
    # A count out of range names its argument (not Python's OverflowError).
    for call, name in [
        (lambda: agent.get_checkpoints(limit=-1), "limit"),
        (lambda: agent.webhook_deliveries(limit=2**40), "limit"),
        (lambda: agent.answer_log(limit=-3), "limit"),
    ]:
        with pytest.raises(pacerelle.InvalidInput, match=name) as refused:
            call()
        assert refused.value.code == "invalid_input"
    with pytest.raises(pacerelle.NotFound):
        agent.mark_processed("msg_unknown")
    lonely = pacerelle.Agent.register(relay.url, "no phone")
    with pytest.raises(pacerelle.NoDevice):
        lonely.ask_user("anyone?")
    asked = agent.ask_user("short", expires_in=1)
    device.wait_for_question()
    time.sleep(1.2)
    with pytest.raises(pacerelle.QuestionClosed) as closed:
        device.approve(asked.question_id)
    assert closed.value.state == "expired"
    with pytest.raises(pacerelle.PairingError):
        link = agent.create_pairing()
        pacerelle.Device.join(link.link, "first")
        pacerelle.Device.join(link.link, "second")
    relay.stop()
    with pytest.raises(pacerelle.RelayUnavailable) as down:
        pacerelle.Agent(relay.url, agent.agent_id, agent.token).info()
    assert down.value.transient
    assert down.value.code == "unavailable" and down.value.status is None


def test_a_question_id_carries_one_question(paired: Paired) -> None:
    agent, device = paired.agent, paired.device
    asked = agent.ask_user("Run the test suite?", question_id="deploy-approval")
    device.wait_for_question()
    device.approve(asked.question_id)
    assert agent.wait_for_answer(asked, timeout=10).approved
    with pytest.raises(pacerelle.QuestionIdConflict) as conflict:
        agent.ask_user("Delete the production database?", question_id="deploy-approval")
    assert conflict.value.code == "question_id_conflict"
    assert isinstance(conflict.value, pacerelle.InvalidInput)
    with pytest.raises(pacerelle.QuestionIdConflict):
        agent.ask("Delete the production database?", question_id="deploy-approval", timeout=5)
    # The same question under its id resumes it, with its answer.
    again = agent.ask_user("Run the test suite?", question_id="deploy-approval")
    assert again.question_id == "deploy-approval"
    assert agent.wait_for_answer(again, timeout=10).approved


def test_a_refused_answer_tells_the_answer_that_counts(paired: Paired) -> None:
    agent, phone = paired.agent, paired.device
    tablet = pacerelle.Device.join(agent.create_pairing().link, "tablet")
    asked = agent.ask_user("Deploy?")
    phone.wait_for_question()
    phone.approve(asked.question_id)
    with pytest.raises(pacerelle.QuestionClosed) as closed:
        tablet.answer(asked.question_id, False)
    assert closed.value.state == "answered"
    assert closed.value.answer is True
    assert closed.value.answered_by_name == "Ana's phone"
    assert agent.wait_for_answer(asked, timeout=5).approved


def test_results_are_typed_objects_with_a_repr(paired: Paired) -> None:
    agent, device = paired.agent, paired.device
    sent = device.send("look at me")
    assert repr(sent).startswith("Stored(id=")
    inbox = agent.wait_for_messages(timeout=5)
    assert len(inbox) == 1
    message = inbox.messages[0]
    assert repr(message).startswith(f"Message(message_id='{sent.id}', text='look at me'")
    assert message.device_name == "Ana's phone" and message.device_id == device.device_id
    assert message.sent_at.tzinfo is not None
    status = agent.status()
    assert "presence=" in repr(status) and status.devices == 1
    link = agent.create_pairing()
    assert link.link not in repr(link)  # the pairing secret is not printed by accident
    creds = device.credentials
    assert creds.to_secret_string() not in repr(creds)
    again = pacerelle.Device(creds.to_secret_string())
    assert again.info().device.name == "Ana's phone"
    with pytest.raises(AttributeError):
        message.text = "changed"  # type: ignore[misc]


def test_from_env_and_the_credentials_file(tmp_path: object, paired: Paired) -> None:
    env = paired.env()
    agent = pacerelle.Agent.from_env(env)
    assert agent.agent_id == paired.agent.agent_id
    with pytest.raises(pacerelle.InvalidInput):
        pacerelle.Agent.from_env({"PACERELLE_AGENT_ID": "ag_1"})
    home = os.path.join(str(tmp_path), "home")
    os.makedirs(home)
    with open(os.path.join(home, "agent.json"), "w") as f:
        json.dump({"relayUrl": paired.agent.relay_url, "agentId": paired.agent.agent_id, "name": "x",
                   "token": paired.agent.token}, f)
    from_file = pacerelle.AsyncAgent.from_env({"PACERELLE_HOME": home})
    assert from_file.agent_id == paired.agent.agent_id and from_file.relay_url == paired.agent.relay_url
    with pytest.raises(pacerelle.InvalidInput):
        pacerelle.Agent.from_env({"PACERELLE_HOME": os.path.join(str(tmp_path), "nothing")})


def test_a_blocking_wait_releases_the_gil(paired: Paired) -> None:
    waiting = Background(lambda: paired.agent.wait_for_messages(timeout=2))
    counted = 0
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        counted += 1
    assert waiting.join(10).messages == []
    assert counted > 100_000  # the main thread ran Python while the other one waited


CTRL_C = textwrap.dedent(
    """
    import sys, time, pacerelle
    agent = pacerelle.Agent.from_env()
    print("waiting", flush=True)
    started = time.monotonic()
    try:
        agent.wait_for_messages(timeout=50)
    except KeyboardInterrupt:
        print(f"interrupted after {time.monotonic() - started:.2f}", flush=True)
        sys.exit(0)
    sys.exit(3)
    """
)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_interrupts_a_wait_promptly(paired: Paired) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", CTRL_C], env=paired.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "waiting"
    time.sleep(0.5)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert "interrupted" in out
    assert time.monotonic() - sent < 2.0


def test_many_threads_share_one_agent(relay: Relay) -> None:
    one = pair(relay.url)
    results: list[int] = []
    lock = threading.Lock()

    def work(i: int) -> None:
        one.agent.notify(f"note {i}")
        with lock:
            results.append(i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(results) == list(range(8))
    notes = [i.text for i in one.device.conversation().items if i.kind == "notification"]
    assert sorted(notes) == sorted(f"note {i}" for i in range(8))
