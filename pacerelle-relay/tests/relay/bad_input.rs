use pacerelle_core::wire::{Conversation, MAX_BODY_BYTES, MessageBatch, SendMessage, code};
use pacerelle_core::{Cursor, b64};
use reqwest::{Method, StatusCode};

use crate::common::{pair, register, send_task, start};

#[tokio::test]
async fn bad_input_gets_a_stable_code_and_loses_nothing() {
    let relay = start().await;
    let agent = register(&relay).await;
    let phone = pair(&relay, &agent).await;
    let kept = [
        send_task(&relay, &phone, "k1", "first").await,
        send_task(&relay, &phone, "k2", "second").await,
    ];

    // Malformed JSON, a missing field, a wrong type.
    for body in [
        &b"{not json"[..],
        br#"{"messageId":"x"}"#,
        br#"{"messageId":1,"envelope":"AQ"}"#,
    ] {
        relay
            .request(
                Method::POST,
                "/v1/device/messages",
                Some(&phone.bearer),
                &[],
                Some(body.to_vec()),
            )
            .await
            .error(StatusCode::BAD_REQUEST, code::INVALID_JSON);
    }
    // An error never echoes what was sent.
    let echoed = relay
        .request(
            Method::POST,
            "/v1/device/messages",
            Some(&phone.bearer),
            &[],
            Some(br#"{"messageId":"x","envelope":["very-secret-text"]}"#.to_vec()),
        )
        .await
        .error(StatusCode::BAD_REQUEST, code::INVALID_JSON);
    assert!(!echoed.error.contains("very-secret-text"));
    // Nor through serde's backquoted values, escaped quotes or a value shaped like the message around it; it
    // names the field and the expected shape instead.
    for body in [
        r#"{"questionId":"q1","kind":"very-secret-kind","envelopes":[],"selfEnvelope":"AQ","expiresAt":"2030-01-01T00:00:00Z"}"#,
        r#"{"questionId":"q1","kind":"a`, expected very-secret\" `x","envelopes":[],"selfEnvelope":"AQ","expiresAt":"2030-01-01T00:00:00Z"}"#,
        r#"{"questionId":["very-secret"]}"#,
    ] {
        let refused = relay
            .request(
                Method::POST,
                "/v1/agent/questions",
                Some(&agent.bearer),
                &[],
                Some(body.as_bytes().to_vec()),
            )
            .await
            .error(StatusCode::BAD_REQUEST, code::INVALID_JSON);
        assert!(
            !refused.error.contains("very-secret"),
            "{body} → {}",
            refused.error
        );
        assert!(refused.error.contains("expected"), "{}", refused.error);
    }
    let refused = relay
        .request(
            Method::GET,
            "/v1/device/conversation?wait=very-secret",
            Some(&phone.bearer),
            &[],
            None,
        )
        .await
        .error(StatusCode::BAD_REQUEST, code::INVALID_INPUT);
    assert!(!refused.error.contains("very-secret"), "{}", refused.error);

    // Too large.
    let huge = SendMessage {
        message_id: "huge".into(),
        envelope: b64::encode(&vec![7u8; MAX_BODY_BYTES]),
        session: None,
    };
    relay
        .post("/v1/device/messages", &phone.bearer, &huge)
        .await
        .error(StatusCode::PAYLOAD_TOO_LARGE, code::BODY_TOO_LARGE);

    // Bad ids and envelopes.
    for (id, envelope) in [
        ("bad id", "AQID"),
        ("ok", ""),
        ("ok", "not base64!"),
        ("ok", "AQ=="),
    ] {
        let body = SendMessage {
            message_id: id.into(),
            envelope: envelope.into(),
            session: None,
        };
        relay
            .post("/v1/device/messages", &phone.bearer, &body)
            .await
            .error(StatusCode::BAD_REQUEST, code::INVALID_INPUT);
    }

    // Cursors this relay never issued, and a bad wait.
    let beyond = Cursor(1_000_000);
    for path in [
        "/v1/agent/messages?cursor=garbage&wait=0".to_string(),
        format!("/v1/agent/messages?cursor={beyond}&wait=0"),
    ] {
        relay
            .get(&path, &agent.bearer)
            .await
            .error(StatusCode::BAD_REQUEST, code::BAD_CURSOR);
    }
    relay
        .get("/v1/device/conversation?cursor=c1.AAAA&wait=0", &phone.bearer)
        .await
        .error(StatusCode::BAD_REQUEST, code::BAD_CURSOR);
    relay
        .get("/v1/agent/messages?wait=soon", &agent.bearer)
        .await
        .error(StatusCode::BAD_REQUEST, code::INVALID_INPUT);
    relay
        .get("/v1/agent/checkpoints?limit=-1", &agent.bearer)
        .await
        .error(StatusCode::BAD_REQUEST, code::INVALID_INPUT);

    // Unknown ids, routes and methods.
    relay
        .call(
            Method::POST,
            "/v1/agent/messages/unknown/processed",
            Some(&agent.bearer),
            None,
        )
        .await
        .error(StatusCode::NOT_FOUND, code::NOT_FOUND);
    relay
        .delete("/v1/agent/devices/dv_unknown", &agent.bearer)
        .await
        .error(StatusCode::NOT_FOUND, code::NOT_FOUND);
    relay
        .call(Method::GET, "/v1/nothing/here", None, None)
        .await
        .error(StatusCode::NOT_FOUND, code::NO_ROUTE);
    relay
        .call(Method::PUT, "/v1/health", None, None)
        .await
        .error(StatusCode::METHOD_NOT_ALLOWED, code::METHOD_NOT_ALLOWED);

    // The relay still serves, and every stored item is still there.
    let conv: Conversation = relay
        .get("/v1/device/conversation?wait=0", &phone.bearer)
        .await
        .ok();
    let ids: Vec<&str> = conv.items.iter().map(|i| i.id.as_str()).collect();
    assert_eq!(ids, ["k1", "k2"]);
    assert_eq!(conv.items[1].cursor, kept[1].cursor);
    let batch: MessageBatch = relay.get("/v1/agent/messages?wait=0", &agent.bearer).await.ok();
    assert_eq!(batch.messages.len(), 2);
}

#[tokio::test]
async fn bad_question_log_and_webhook_input_gets_stable_codes() {
    use pacerelle_core::Timestamp;
    use pacerelle_core::question::{Answer, QuestionState};
    use pacerelle_core::wire::{
        AnswerLog, AnswerQuestion, DeviceEnvelope, QuestionView, SendNotification, SetWebhook, WebhookInfo,
    };

    use crate::common::{answer, ask, seal_question, yes_no};

    let relay = start().await;
    let agent = register(&relay).await;
    let phone = pair(&relay, &agent).await;
    ask(&relay, &agent, "kept", &[&phone], 600_000).await;

    // Creating: expiry in the past or beyond 7 days, no recipient, a device twice, bad ids and envelopes.
    let mut payload = yes_no("q", &[&phone], 600_000);
    for expires_at in [
        Timestamp::now().plus_millis(-1_000),
        Timestamp::now().plus_millis(8 * 24 * 3600 * 1000),
    ] {
        payload.expires_at = expires_at;
        relay
            .post(
                "/v1/agent/questions",
                &agent.bearer,
                &seal_question(&agent, "bad-expiry", &payload, &[&phone]),
            )
            .await
            .error(StatusCode::BAD_REQUEST, code::INVALID_INPUT);
    }
    let payload = yes_no("q", &[&phone], 600_000);
    let mut body = seal_question(&agent, "nobody", &payload, &[&phone]);
    body.envelopes.clear();
    relay
        .post("/v1/agent/questions", &agent.bearer, &body)
        .await
        .error(StatusCode::BAD_REQUEST, code::NO_DEVICE);
    let mut body = seal_question(&agent, "twice", &payload, &[&phone, &phone]);
    relay
        .post("/v1/agent/questions", &agent.bearer, &body)
        .await
        .error(StatusCode::BAD_REQUEST, code::INVALID_INPUT);
    body.envelopes.truncate(1);
    body.question_id = "bad id".into();
    relay
        .post("/v1/agent/questions", &agent.bearer, &body)
        .await
        .error(StatusCode::BAD_REQUEST, code::INVALID_INPUT);
    body.question_id = "ok-id".into();
    body.self_envelope = "not base64!".into();
    relay
        .post("/v1/agent/questions", &agent.bearer, &body)
        .await
        .error(StatusCode::BAD_REQUEST, code::INVALID_INPUT);
    // The user it is for, in clear: an externalId (1 to 128 characters, no control characters) or nothing.
    let mut body = seal_question(&agent, "for-a-user", &payload, &[&phone]);
    for user_id in [
        String::new(),
        "   ".into(),
        "ali\u{7}ce".into(),
        "line\nbreak".into(),
        "u".repeat(129),
    ] {
        body.user_id = Some(user_id.clone());
        let refused = relay
            .post("/v1/agent/questions", &agent.bearer, &body)
            .await
            .error(StatusCode::BAD_REQUEST, code::INVALID_INPUT);
        assert!(refused.error.contains("userId"), "{}", refused.error);
    }
    relay
        .request(
            Method::POST,
            "/v1/agent/questions",
            Some(&agent.bearer),
            &[],
            Some(
                br#"{"questionId":"k","kind":"yes_no","expiresAt":"2030-01-01T00:00:00Z","selfEnvelope":"AQ","envelopes":[],"userId":7}"#
                    .to_vec(),
            ),
        )
        .await
        .error(StatusCode::BAD_REQUEST, code::INVALID_JSON);
    relay
        .request(
            Method::POST,
            "/v1/agent/questions",
            Some(&agent.bearer),
            &[],
            Some(br#"{"questionId":"k","kind":"maybe","expiresAt":"2030-01-01T00:00:00Z","selfEnvelope":"AQ","envelopes":[]}"#.to_vec()),
        )
        .await
        .error(StatusCode::BAD_REQUEST, code::INVALID_JSON);
    let empty = SendNotification {
        notification_id: "n".into(),
        envelopes: vec![],
    };
    relay
        .post("/v1/agent/notifications", &agent.bearer, &empty)
        .await
        .error(StatusCode::BAD_REQUEST, code::NO_DEVICE);
    let stranger = SendNotification {
        notification_id: "n".into(),
        envelopes: vec![DeviceEnvelope {
            device_id: "dv_nobody".into(),
            envelope: "AQID".into(),
        }],
    };
    relay
        .post("/v1/agent/notifications", &agent.bearer, &stranger)
        .await
        .error(StatusCode::BAD_REQUEST, code::INVALID_INPUT);

    // Answering with no envelope; an unknown question; a wait that is not a number.
    relay
        .post(
            "/v1/device/questions/kept/answer",
            &phone.bearer,
            &AnswerQuestion {
                envelope: String::new(),
                copy: None,
                closes: false,
            },
        )
        .await
        .error(StatusCode::BAD_REQUEST, code::INVALID_INPUT);
    answer(&relay, &phone, "never-asked", Answer::Yes)
        .await
        .error(StatusCode::NOT_FOUND, code::NOT_FOUND);
    relay
        .get("/v1/agent/questions/kept?wait=soon", &agent.bearer)
        .await
        .error(StatusCode::BAD_REQUEST, code::INVALID_INPUT);
    // The wrong credential kind.
    relay
        .get("/v1/device/questions", &agent.bearer)
        .await
        .error(StatusCode::FORBIDDEN, code::FORBIDDEN);
    relay
        .get("/v1/agent/questions", &phone.bearer)
        .await
        .error(StatusCode::FORBIDDEN, code::FORBIDDEN);

    // Filters of the listings.
    for query in [
        "state=maybe",
        "state=PENDING",
        "since=yesterday",
        "until=2026-13-01T00:00:00Z",
        "since=2026-01-02T00:00:00Z&until=2026-01-01T00:00:00Z",
        "limit=0",
        "limit=201",
        "limit=ten",
        "limit=-1",
    ] {
        relay
            .get(&format!("/v1/agent/questions?{query}"), &agent.bearer)
            .await
            .error(StatusCode::BAD_REQUEST, code::INVALID_INPUT);
    }
    for cursor in ["garbage", "c1.AAAA", "c1.AAAAAAAPQkA"] {
        relay
            .get(&format!("/v1/agent/questions?cursor={cursor}"), &agent.bearer)
            .await
            .error(StatusCode::BAD_REQUEST, code::BAD_CURSOR);
    }
    relay
        .get("/v1/device/questions?state=open", &phone.bearer)
        .await
        .error(StatusCode::BAD_REQUEST, code::INVALID_INPUT);
    for query in ["limit=0", "limit=500", "limit=x"] {
        relay
            .get(&format!("/v1/agent/webhook/deliveries?{query}"), &agent.bearer)
            .await
            .error(StatusCode::BAD_REQUEST, code::INVALID_INPUT);
    }

    // Webhooks: malformed, non-HTTP, host-less or oversize URLs, short or long secrets.
    let long_url = format!("https://hooks.example/{}", "a".repeat(2048));
    for (url, secret) in [
        ("not a url", "0123456789abcdef"),
        ("ftp://hooks.example/x", "0123456789abcdef"),
        ("http://", "0123456789abcdef"),
        ("/relative/path", "0123456789abcdef"),
        (long_url.as_str(), "0123456789abcdef"),
        ("https://hooks.example/x", "short"),
        ("https://hooks.example/x", ""),
    ] {
        relay
            .put(
                "/v1/agent/webhook",
                &agent.bearer,
                &SetWebhook {
                    url: url.into(),
                    secret: secret.into(),
                },
            )
            .await
            .error(StatusCode::BAD_REQUEST, code::INVALID_INPUT);
    }
    let long_secret = "s".repeat(257);
    relay
        .put(
            "/v1/agent/webhook",
            &agent.bearer,
            &SetWebhook {
                url: "https://hooks.example/x".into(),
                secret: long_secret,
            },
        )
        .await
        .error(StatusCode::BAD_REQUEST, code::INVALID_INPUT);
    let none: WebhookInfo = relay.get("/v1/agent/webhook", &agent.bearer).await.ok();
    assert!(none.url.is_none(), "no bad webhook was stored");

    // The relay still serves, and the question is intact.
    let log: AnswerLog = relay.get("/v1/agent/questions", &agent.bearer).await.ok();
    assert_eq!(log.questions.len(), 1);
    let kept: QuestionView = relay.get("/v1/agent/questions/kept", &agent.bearer).await.ok();
    assert_eq!(kept.state, QuestionState::Pending);
}
