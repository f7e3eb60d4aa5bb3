"""Signed answers: a new agent requires them, and the requirement is the agent's explicit choice."""

from __future__ import annotations

from datetime import datetime, timezone

from conftest import Paired


def test_a_new_agent_requires_signed_answers_and_can_accept_unsigned_ones_again(paired: Paired) -> None:
    agent = paired.agent
    since = agent.require_signed(True)
    assert isinstance(since, datetime) and since.tzinfo is not None
    assert since <= datetime.now(timezone.utc)
    # Already required: the time stays the first one.
    assert agent.require_signed(True) == since
    assert agent.require_signed(False) is None
    again = agent.require_signed()
    assert isinstance(again, datetime) and again >= since
    # The device pairs with a key and signs: its yes approves, signed.
    asked = agent.ask_user("Publish the release notes?")
    paired.device.answer(asked.question_id, True)
    outcome = agent.wait_for_answer(asked, timeout=10)
    assert outcome.approved is True
    assert outcome.signed is True
