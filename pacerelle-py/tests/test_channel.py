"""The channel of an answer: 'phone' when a device answered, 'host' when the person answered at the computer
(`Agent.answer_at_host`), which counts only for a question asked with `answered_at_host=True`."""

from __future__ import annotations

import asyncio

import pytest

import pacerelle
from conftest import Background, Paired


def test_an_answer_at_the_computer_counts_when_the_question_says_so(paired: Paired) -> None:
    agent, device = paired.agent, paired.device
    asked = agent.ask_user("Deploy to staging?", answered_at_host=True)
    device.wait_for_question()

    outcome = agent.answer_at_host(asked, True)
    assert outcome.state == "answered"
    assert outcome.approved
    assert outcome.answer is True
    assert outcome.channel == "host"
    assert outcome.answered_by is None
    assert outcome.answered_by_name is None
    assert not outcome.signed
    assert "channel='host'" in repr(outcome)
    # The agent reads the same outcome again; a retry returns it too.
    again = agent.wait_for_answer(asked, timeout=5)
    assert (again.approved, again.channel, again.answered_by) == (True, "host", None)
    assert agent.answer_at_host(asked.question_id, True).channel == "host"

    # The phone shows it as answered at the computer, and its own answer no longer counts.
    seen = next(q for q in device.questions("answered").questions if q.question_id == asked.question_id)
    assert (seen.state, seen.channel, seen.answered_by, seen.answer) == ("answered", "host", None, True)
    with pytest.raises(pacerelle.QuestionClosed) as closed:
        device.deny(asked.question_id)
    assert closed.value.state == "answered"
    assert closed.value.answer is True

    entry = next(e for e in agent.answer_log() if e.question_id == asked.question_id)
    assert (entry.channel, entry.answered_by, entry.approved) == ("host", None, True)


def test_a_question_asked_for_the_phone_only_refuses_an_answer_at_the_computer(paired: Paired) -> None:
    agent, device = paired.agent, paired.device
    asked = agent.ask_user("Drop the cache?")
    device.wait_for_question()

    with pytest.raises(pacerelle.InvalidInput):
        agent.answer_at_host(asked, True)
    # Nothing was recorded: still pending, and the phone's answer counts, as a phone's.
    assert agent.wait_for_answer(asked, timeout=0).state == "pending"
    pending = device.questions("pending").questions
    assert [q.question_id for q in pending] == [asked.question_id]
    assert pending[0].channel is None

    device.approve(asked.question_id)
    outcome = agent.wait_for_answer(asked, timeout=10)
    assert outcome.approved
    assert outcome.channel == "phone"
    assert outcome.answered_by == device.device_id
    seen = next(q for q in device.questions("answered").questions if q.question_id == asked.question_id)
    assert (seen.channel, seen.answered_by, seen.answered_by_name, seen.answer) == (
        "phone", device.device_id, "Ana's phone", True
    )


def test_the_first_answer_wins_on_either_channel(paired: Paired) -> None:
    agent, device = paired.agent, paired.device
    asked = agent.ask_user("Merge?", answered_at_host=True)
    device.wait_for_question()
    device.deny(asked.question_id)
    with pytest.raises(pacerelle.QuestionClosed) as closed:
        agent.answer_at_host(asked, True)
    assert closed.value.state == "answered"
    outcome = agent.wait_for_answer(asked, timeout=5)
    assert (outcome.approved, outcome.answer, outcome.channel) == (False, False, "phone")


def test_an_answer_at_the_computer_fits_the_question_as_a_device_answer_does(paired: Paired) -> None:
    agent, device = paired.agent, paired.device
    yes_no = agent.ask_user("Restart?", answered_at_host=True)
    # "yes" is a text, as in Device.answer: a yes/no question takes True or False.
    with pytest.raises(pacerelle.InvalidInput):
        agent.answer_at_host(yes_no, "yes")
    assert agent.wait_for_answer(yes_no, timeout=0).state == "pending"
    assert agent.answer_at_host(yes_no, False).answer is False

    which = agent.ask_user("Which region?", options=["eu-west", "us-east"], answered_at_host=True)
    chosen = agent.answer_at_host(which, ["us-east"])
    assert (chosen.approved, chosen.answer, chosen.channel) == (True, ["us-east"], "host")

    why = agent.ask_user("Commit message?", kind="text", answered_at_host=True)
    text = agent.answer_at_host(why, "yes")
    assert (text.approved, text.answer, text.channel) == (False, "yes", "host")
    assert len(device.questions("answered").questions) == 3


def test_ask_waits_for_an_answer_given_at_the_computer(paired: Paired) -> None:
    agent, device = paired.agent, paired.device
    waiting = Background(lambda: agent.ask("Ship it?", answered_at_host=True, timeout=30))
    question = device.wait_for_question()
    assert agent.answer_at_host(question.question_id, True).channel == "host"
    outcome = waiting.join()
    assert (outcome.approved, outcome.channel, outcome.answered_by) == (True, "host", None)


def test_the_async_agent_answers_at_the_computer_too(paired: Paired) -> None:
    async def main() -> None:
        agent = pacerelle.AsyncAgent.from_agent(paired.agent)
        asked = await agent.ask_user("Rotate the keys?", answered_at_host=True)
        outcome = await agent.answer_at_host(asked, True)
        assert (outcome.approved, outcome.channel, outcome.answered_by) == (True, "host", None)
        plain = await agent.ask_user("Rotate them again?")
        with pytest.raises(pacerelle.InvalidInput):
            await agent.answer_at_host(plain, True)

    asyncio.run(main())
