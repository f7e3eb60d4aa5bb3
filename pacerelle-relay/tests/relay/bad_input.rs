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

    // Too large.
    let huge = SendMessage {
        message_id: "huge".into(),
        envelope: b64::encode(&vec![7u8; MAX_BODY_BYTES]),
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
