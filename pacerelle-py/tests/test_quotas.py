"""The relay's per-agent quotas surface as `QuotaExceeded`: not transient, with the quota in `details`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import pacerelle
from conftest import Relay, pair


@pytest.fixture
def small_relay(tmp_path: Path) -> Iterator[Relay]:
    r = Relay(tmp_path / "relay", tmp_path / "home", ("--max-pending-tasks", "2", "--max-open-questions", "1"))
    r.start()
    yield r
    r.stop()


def test_a_send_beyond_the_pending_quota_raises_quota_exceeded(small_relay: Relay) -> None:
    paired = pair(small_relay.url)
    agent, device = paired.agent, paired.device
    first = device.send("one")
    device.send("two")
    with pytest.raises(pacerelle.QuotaExceeded) as full:
        device.send("three")
    e = full.value
    assert isinstance(e, pacerelle.PacerelleError)
    assert e.code == "quota_exceeded" and e.status == 429
    assert e.transient is False
    assert e.details == {"quota": "max_pending_tasks", "limit": 2}
    assert "three" not in str(e)
    agent.mark_processed(first.id)
    device.send("three")


def test_a_question_beyond_the_open_quota_raises_quota_exceeded(small_relay: Relay) -> None:
    agent = pair(small_relay.url).agent
    asked = agent.ask_user("Deploy?")
    with pytest.raises(pacerelle.QuotaExceeded) as full:
        agent.ask_user("Roll back?")
    assert full.value.details == {"quota": "max_open_questions", "limit": 1}
    assert not full.value.transient
    agent.cancel_question(asked.question_id)
    agent.ask_user("Roll back?")
