"""A question asked again under its `question_id`: resumed, with the expiry it was first asked with, and said."""

from __future__ import annotations

import pacerelle
from conftest import Paired


def test_asking_again_under_an_id_resumes_with_the_first_expiry(paired: Paired) -> None:
    agent = paired.agent
    first = agent.ask_user("Tag v3.0?", question_id="tag-30", expires_in=600)
    assert first.resumed is False
    again = agent.ask_user("Tag v3.0?", question_id="tag-30", expires_in=3600)
    assert again.resumed is True
    assert again.question_id == "tag-30"
    assert again.expires_at == first.expires_at
    # Waiting with it reads the one question asked.
    paired.device.answer("tag-30", True)
    assert agent.wait_for_answer(again, timeout=10).approved is True
    # Another question under the id is refused; a fresh id is not a resume.
    try:
        agent.ask_user("Delete the tag?", question_id="tag-30")
    except pacerelle.QuestionIdConflict:
        pass
    else:
        raise AssertionError("another question under the id must be refused")
    assert agent.ask_user("Tag v3.0?", question_id="tag-31").resumed is False
