"""Partner mode: the agent connects its own users, each a named group of devices paired by a link; a question
or a notification for a user reaches that user's devices only, only their answer counts, and disconnecting a
user revokes their devices. Against a real relay, with the devices joined through `pacerelle.Device`."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path

import pytest

import pacerelle
from conftest import Background, Paired

SVG = b'<svg xmlns="http://www.w3.org/2000/svg" width="8" height="8"><rect width="8" height="8"/></svg>'


def _open_question_ids(device: pacerelle.Device) -> set[str]:
    return {q.question_id for q in device.questions("pending").questions}


def test_a_user_answers_only_their_own_questions_and_is_disconnected(paired: Paired, tmp_path: Path) -> None:
    agent, owner = paired.agent, paired.device
    icon = tmp_path / "logo.svg"
    icon.write_bytes(SVG)

    alice_link = agent.connect_user("alice", "Alice", accent_color="#1a2b3c", icon=icon, ttl_seconds=120)
    bob_link = agent.connect_user("bob", "Bob")
    assert isinstance(alice_link, pacerelle.PairingLink)
    assert alice_link.device_id != bob_link.device_id
    alice = pacerelle.Device.join(alice_link.link, "Alice's phone")
    bob = pacerelle.Device.join(bob_link.link, "Bob's phone")
    assert alice.device_id == alice_link.device_id

    # The link sealed the user and the branding for the device.
    creds = alice.credentials
    assert (creds.role, creds.user, creds.user_name) == ("user", "alice", "Alice")
    assert creds.accent_color == "#1a2b3c"
    assert creds.icon == "data:image/svg+xml;base64," + base64.b64encode(SVG).decode()
    assert (bob.credentials.user, bob.credentials.accent_color, bob.credentials.icon) == ("bob", None, None)
    assert owner.credentials.user is None

    # A question for alice reaches alice's phone only.
    asked = agent.ask_user("Pay 40 € to the plumber?", user="alice", expires_in=120)
    seen = alice.wait_for_question(timeout=20)
    assert (seen.question_id, seen.question) == (asked.question_id, "Pay 40 € to the plumber?")
    assert asked.question_id not in _open_question_ids(bob)
    assert asked.question_id not in _open_question_ids(owner)
    # Neither bob's phone nor the owner's can answer it.
    for other in (bob, owner):
        with pytest.raises(pacerelle.NotFound):
            other.approve(asked.question_id)

    alice.approve(asked.question_id)
    outcome = agent.wait_for_answer(asked, timeout=20)
    assert outcome.state == "answered"
    assert outcome.approved
    assert outcome.answered_by == alice.device_id
    assert outcome.answered_by_name == "Alice's phone"

    # The answer log names the user and filters by it.
    entry = next(e for e in agent.answer_log() if e.question_id == asked.question_id)
    assert (entry.user, entry.approved, entry.answered_by) == ("alice", True, alice.device_id)
    assert "user='alice'" in repr(entry)
    assert [e.question_id for e in agent.answer_log(user="alice")] == [asked.question_id]
    assert agent.answer_log(user="bob") == []
    exported = agent.export_answer_log(user="alice")
    assert [r["questionId"] for r in exported["records"]] == [asked.question_id]

    # A notification for bob reaches bob only.
    agent.notify("Your parcel left the depot", title="Parcel", user="bob")
    assert any(i.kind == "notification" and i.text == "Your parcel left the depot" for i in bob.conversation().items)
    for other in (alice, owner):
        assert not any(i.kind == "notification" for i in other.conversation().items)

    # A task from alice's phone names alice; the owner's names no user.
    agent.open_session()
    try:
        alice.send("Can I pay next week?", message_id="msg_alice1")
        owner.send("Status?", message_id="msg_owner1")
        received: dict[str, pacerelle.Message] = {}
        for _ in range(10):
            for m in agent.wait_for_messages(timeout=2).messages:
                received[m.message_id] = m
            if len(received) == 2:
                break
        assert received["msg_alice1"].user == "alice"
        assert received["msg_alice1"].device_id == alice.device_id
        assert received["msg_owner1"].user is None
    finally:
        agent.close_session()

    # The users, their devices and the last answer.
    users = agent.list_users()
    assert [(u.external_id, u.name, u.connected) for u in users] == [("alice", "Alice", True), ("bob", "Bob", True)]
    got = agent.get_user("alice")
    assert isinstance(got, pacerelle.User)
    assert [(d.device_id, d.name, d.paired) for d in got.devices] == [(alice.device_id, "Alice's phone", True)]
    assert isinstance(got.devices[0], pacerelle.UserDevice)
    assert got.devices[0].paired_at is not None and got.devices[0].revoked_at is None
    assert got.disconnected_at is None
    assert got.last_answer is not None and got.last_answer.question_id == asked.question_id
    assert got.last_answer.user == "alice"
    assert agent.get_user("bob").last_answer is None
    assert '"externalId":"alice"' in got.to_json()

    # Disconnecting bob revokes his phone: it can no longer read, and he can no longer be asked.
    gone = agent.disconnect_user("bob")
    assert (gone.external_id, gone.connected) == ("bob", False)
    assert gone.disconnected_at is not None
    assert all(d.revoked_at is not None for d in gone.devices) and gone.devices
    with pytest.raises(pacerelle.AuthError) as revoked:
        bob.questions()
    assert revoked.value.code == "device_revoked"
    with pytest.raises(pacerelle.NotFound) as missing:
        agent.ask_user("Still there?", user="bob")
    assert missing.value.code == "user_not_found"
    assert [u.connected for u in agent.list_users()] == [True, False]
    # Alice is untouched.
    assert agent.get_user("alice").connected
    alice.questions()


def test_an_unknown_user_is_not_found(paired: Paired) -> None:
    agent = paired.agent
    with pytest.raises(pacerelle.NotFound) as got:
        agent.get_user("carol")
    assert (got.value.code, got.value.status) == ("user_not_found", 404)
    for call in (
        lambda: agent.disconnect_user("carol"),
        lambda: agent.ask_user("Hello?", user="carol"),
        lambda: agent.notify("Hello", user="carol"),
    ):
        with pytest.raises(pacerelle.NotFound) as err:
            call()
        assert err.value.code == "user_not_found"
    assert agent.list_users() == []
    assert agent.answer_log(user="carol") == []


def test_connecting_checks_the_user_and_the_branding(paired: Paired, tmp_path: Path) -> None:
    agent = paired.agent
    with pytest.raises(pacerelle.InvalidInput):
        agent.connect_user("", "Alice")
    with pytest.raises(pacerelle.InvalidInput):
        agent.connect_user("alice", "Alice", accent_color="red")
    bad = tmp_path / "logo.gif"
    bad.write_bytes(b"GIF89a")
    with pytest.raises(pacerelle.InvalidInput):
        agent.connect_user("alice", "Alice", icon=bad)
    # Nothing was connected by the refused calls.
    assert agent.list_users() == []


def test_a_user_not_yet_paired_has_no_device_to_ask(paired: Paired) -> None:
    agent = paired.agent
    agent.connect_user("dana", "Dana")
    with pytest.raises(pacerelle.NoDevice):
        agent.ask_user("Anyone?", user="dana")
    [device] = agent.get_user("dana").devices
    assert (device.paired, device.name, device.paired_at) == (False, None, None)


def test_the_async_twin_connects_and_asks_a_user(paired: Paired) -> None:
    env = paired.env()

    async def main() -> None:
        agent = pacerelle.AsyncAgent(env["PACERELLE_RELAY_URL"], env["PACERELLE_AGENT_ID"], env["PACERELLE_AGENT_TOKEN"])
        link = await agent.connect_user("erin", "Erin")
        erin = await pacerelle.AsyncDevice.join(link.link, "Erin's phone")
        asked = await agent.ask_user("Book the 9:40 train?", user="erin", expires_in=120)
        seen = await erin.wait_for_question(timeout=20)
        assert seen.question_id == asked.question_id
        await erin.deny(asked.question_id)
        outcome = await agent.wait_for_answer(asked, timeout=20)
        assert (outcome.state, outcome.approved, outcome.answered_by) == ("answered", False, erin.device_id)
        [user] = await agent.list_users()
        assert user.external_id == "erin"
        assert (await agent.disconnect_user("erin")).connected is False
        with pytest.raises(pacerelle.AuthError):
            await erin.questions()

    asyncio.run(main())


def test_an_approval_for_a_user_waits_for_that_users_yes(paired: Paired) -> None:
    agent, owner = paired.agent, paired.device
    link = agent.connect_user("fred", "Fred")
    fred = pacerelle.Device.join(link.link, "Fred's phone")

    def phone() -> str:
        seen = fred.wait_for_question(timeout=20)
        fred.approve(seen.question_id)
        return seen.question_id

    answering = Background(phone)
    with agent.approval("Refund order 1187?", user="fred", timeout=30) as outcome:
        ran = True
    question_id = answering.join()
    assert ran
    assert outcome is not None and outcome.approved and outcome.answered_by == fred.device_id
    assert outcome.question_id == question_id
    assert question_id not in {q.question_id for q in owner.questions().questions}
    [entry] = agent.answer_log(user="fred")
    assert (entry.question_id, entry.user, entry.approved) == (question_id, "fred", True)


def test_a_decorated_call_asks_the_user_its_arguments_name(paired: Paired) -> None:
    agent, owner = paired.agent, paired.device
    gina = pacerelle.Device.join(agent.connect_user("gina", "Gina").link, "Gina's phone")
    hugo = pacerelle.Device.join(agent.connect_user("hugo", "Hugo").link, "Hugo's phone")
    refunded: list[str] = []

    @agent.require_approval("Refund {order} for {customer}?", user=lambda order, customer: customer, timeout=30)
    def refund(order: str, customer: str) -> None:
        refunded.append(order)

    def answer(device: pacerelle.Device, yes: bool) -> str:
        seen = device.wait_for_question(timeout=20)
        (device.approve if yes else device.deny)(seen.question_id)
        return seen.question_id

    # gina's call asks gina, and runs on her yes.
    answering = Background(lambda: answer(gina, True))
    refund("1187", customer="gina")
    gina_question = answering.join()
    assert refunded == ["1187"]
    # hugo's call asks hugo, not gina and not the owner; his no stops it.
    answering = Background(lambda: answer(hugo, False))
    with pytest.raises(pacerelle.NotApproved) as denied:
        refund("1188", customer="hugo")
    hugo_question = answering.join()
    assert denied.value.conclusion == "denied"
    assert refunded == ["1187"]
    assert hugo_question not in {q.question_id for q in gina.questions().questions}
    assert not {gina_question, hugo_question} & {q.question_id for q in owner.questions().questions}
    assert [e.user for e in agent.answer_log(user="hugo")] == ["hugo"]

    # A fixed user works too.
    @agent.require_approval(user="gina", timeout=30)
    def close_ticket() -> None:
        refunded.append("ticket")

    answering = Background(lambda: answer(gina, True))
    close_ticket()
    answering.join()
    assert refunded == ["1187", "ticket"]
