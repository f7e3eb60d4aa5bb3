"""The answer log anyone can verify, through the binding: the phone's signed answers are `signed`, the export
verifies from a dict, its text or a file, and a changed record raises `VerificationFailed` naming it."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

import pytest
from conftest import Paired

import pacerelle


def answered(paired: Paired, question: str, answer: bool, question_id: str) -> pacerelle.AnswerOutcome:
    agent, device = paired.agent, paired.device
    asked = agent.ask_user(question, question_id=question_id)
    device.answer(device.wait_for_question(timeout=20).question_id, answer)
    return agent.wait_for_answer(asked, timeout=20)


def test_signed_answers_export_and_verify(paired: Paired, tmp_path: Path) -> None:
    agent = paired.agent
    yes = answered(paired, "Deploy v2?", True, "q_deploy")
    assert yes.approved and yes.signed
    no = answered(paired, "Drop the table?", False, "q_drop")
    assert not no.approved and no.signed
    assert all(entry.signed for entry in agent.answer_log())

    export = agent.export_answer_log()
    assert isinstance(export, dict)
    assert export["format"] == "pacerelle-answer-log"
    assert [r["questionId"] for r in export["records"]] == ["q_deploy", "q_drop"]
    assert export["devices"][0]["name"] == "Ana's phone"
    # The fingerprint the export names is the one the phone shows.
    fingerprint = paired.device.signing_fingerprint
    assert fingerprint is not None and len(fingerprint.split()) == 6
    assert export["devices"][0]["fingerprint"] == fingerprint
    assert pacerelle.verify_answer_log(export) == 2

    text = agent.export_answer_log(as_text=True)
    assert isinstance(text, str)
    assert pacerelle.verify_answer_log(text) == 2
    assert pacerelle.verify_answer_log(text.encode()) == 2
    path = tmp_path / "answers.json"
    path.write_text(text)
    assert pacerelle.verify_answer_log(path) == 2
    assert pacerelle.verify_answer_log(str(path)) == 2

    # The question's text changed (with its digest recomputed) in the second record.
    record = export["records"][1]
    question = json.loads(base64.urlsafe_b64decode(record["question"] + "=="))
    question["question"] = "Drop the production table?"
    raw = json.dumps(question).encode()
    record["question"] = base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
    with pytest.raises(pacerelle.VerificationFailed) as caught:
        pacerelle.verify_answer_log(export)
    failure = caught.value
    assert isinstance(failure, pacerelle.PacerelleError)
    assert (failure.record, failure.question_id) == (2, "q_drop")
    assert failure.code == "verification_failed"
    assert str(failure).startswith("record 2 (question q_drop): ")

    with pytest.raises(pacerelle.VerificationFailed) as caught:
        pacerelle.verify_answer_log(b"not an export")
    assert caught.value.record == 0 and caught.value.question_id is None


def test_the_async_agent_exports_too(paired: Paired) -> None:
    assert answered(paired, "Rotate the keys?", True, "q_rotate").signed

    async def main() -> dict[str, object]:
        agent = pacerelle.AsyncAgent.from_agent(paired.agent)
        export: dict[str, object] = await agent.export_answer_log(state="answered")
        return export

    export = asyncio.run(main())
    assert pacerelle.verify_answer_log(export) == 1
