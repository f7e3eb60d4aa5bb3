"""verify_webhook accepts a real signed delivery from the relay and rejects an altered or stale one."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import pacerelle
from conftest import Background, Paired

SECRET = "whsec_python_test_0123456789"


class Receiver:
    """An HTTP server on 127.0.0.1 that keeps each POST's headers and raw body."""

    def __init__(self) -> None:
        received: queue.Queue[tuple[dict[str, str], bytes]] = queue.Queue()
        self.received = received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                received.put((dict(self.headers.items()), body))
                self.send_response(204)
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/pacerelle"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def test_a_real_delivery_verifies_and_an_altered_or_stale_one_does_not(paired: Paired, receiver: Receiver) -> None:
    agent, device = paired.agent, paired.device
    info = agent.set_webhook(receiver.url, SECRET)
    assert info.url == receiver.url
    assert agent.webhook().url == receiver.url

    def phone() -> None:
        question = device.wait_for_question(timeout=20)
        device.approve(question.question_id)

    answering = Background(phone)
    outcome = agent.ask("Ship it?", timeout=20)
    answering.join()
    assert outcome.approved

    headers, body = receiver.received.get(timeout=30)
    event = pacerelle.verify_webhook(SECRET, headers, body)
    assert event.type == "question.answered"
    assert event.question_id == outcome.question_id
    assert event.agent_id == agent.agent_id
    assert event.state == "answered"
    assert event.answered_by == device.device_id
    # Header names in any case, or the signature value alone.
    lowered = {k.lower(): v for k, v in headers.items()}
    assert pacerelle.verify_webhook(SECRET.encode(), lowered, body.decode()).id == event.id
    assert pacerelle.verify_webhook(SECRET, lowered["pacerelle-signature"], body).id == event.id
    # The event is metadata: whether it was a yes is decided by the agent, from the sealed answer.
    assert agent.wait_for_answer(event.question_id, timeout=0).approved

    altered = body.replace(b"answered", b"cancelled", 1)
    with pytest.raises(pacerelle.WebhookError) as caught:
        pacerelle.verify_webhook(SECRET, headers, altered)
    assert caught.value.reason == "bad_signature"
    with pytest.raises(pacerelle.WebhookError) as caught:
        pacerelle.verify_webhook("another-secret-0000000", headers, body)
    assert caught.value.reason == "bad_signature"

    later = datetime.now(timezone.utc) + timedelta(seconds=301)
    with pytest.raises(pacerelle.WebhookError) as caught:
        pacerelle.verify_webhook(SECRET, headers, body, tolerance=300, now=later)
    assert caught.value.reason == "outside_tolerance"
    with pytest.raises(pacerelle.WebhookError) as caught:
        pacerelle.verify_webhook(SECRET, {"content-type": "application/json"}, body)
    assert caught.value.reason == "malformed_header"
    assert isinstance(caught.value, pacerelle.PacerelleError)

    deliveries = agent.webhook_deliveries()
    assert deliveries[0].event_id == event.id
    agent.clear_webhook()
    assert agent.webhook().url is None


def test_sign_and_verify_round_trip() -> None:
    body = (
        b'{"id":"evt_1","type":"question.expired","createdAt":"2026-01-01T00:00:00.000Z","agentId":"ag_1",'
        b'"question":{"questionId":"qst_1","kind":"yes_no","state":"expired","createdAt":"2026-01-01T00:00:00.000Z",'
        b'"expiresAt":"2026-01-01T00:00:00.000Z","selfEnvelope":"AQ","recipients":["dv_1"],"cursor":"c1.AAAAAAAAAAE"}}'
    )
    at = datetime(2026, 1, 1, tzinfo=timezone.utc)
    signature = pacerelle.sign_webhook(SECRET, body, timestamp=at)
    assert signature.startswith(f"t={int(at.timestamp())},v1=")
    event = pacerelle.verify_webhook(SECRET, {"Pacerelle-Signature": signature}, body, now=at)
    assert (event.type, event.question_id, event.state) == ("question.expired", "qst_1", "expired")
    assert event.user_id is None
    for_alice = body.replace(b'"agentId":"ag_1",', b'"agentId":"ag_1","userId":"alice",')
    alice = pacerelle.verify_webhook(SECRET, pacerelle.sign_webhook(SECRET, for_alice, timestamp=at), for_alice, now=at)
    assert alice.user_id == "alice"
    with pytest.raises(pacerelle.WebhookError) as caught:
        pacerelle.verify_webhook(SECRET, signature, body, now=at + timedelta(minutes=6))
    assert caught.value.reason == "outside_tolerance"
