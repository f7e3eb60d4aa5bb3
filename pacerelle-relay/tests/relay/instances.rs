//! Two relay instances on one PostgreSQL database (ADR 0003): what one stores wakes the waits parked on the
//! other, for tasks, replies and answers alike. PostgreSQL only.

use std::time::{Duration, Instant};

use pacerelle_core::envelope;
use pacerelle_core::message::{ReplyPayload, reply_aad};
use pacerelle_core::question::Answer;
use pacerelle_core::wire::{Conversation, DeviceEnvelope, MessageBatch, QuestionView, SendReply};
use pacerelle_relay::Config;
use reqwest::StatusCode;

use crate::common::{
    TestRelay, answer, ask, db_path, ids_of, on_postgres, pair, register, send_task, start, start_with,
};

/// A wait parked on one instance must end well before its own end (20 s) when the other instance stores what
/// it waits for; a generous bound, not a latency figure.
const WOKEN_WITHIN: Duration = Duration::from_secs(10);

/// A second instance on the same database as `first`: same database URL and the same keys (the webhook and push
/// keys, which every instance of one relay shares).
async fn second_instance(first: &TestRelay) -> TestRelay {
    let dir = tempfile::tempdir().expect("a temporary directory");
    for file in ["postgres-url", "webhook.key", "push.key"] {
        let from = first.dir.path().join(file);
        if from.exists() {
            std::fs::copy(&from, dir.path().join(file)).expect("copied");
        }
    }
    let config = Config {
        open_registration: true,
        ..Config::new(db_path(&dir))
    };
    start_with(config, dir).await
}

/// `GET` on `base` with a bearer, in a task of its own (so that it can park while the test goes on).
fn parked_get(relay: &TestRelay, path: String, bearer: &str) -> tokio::task::JoinHandle<(Duration, String)> {
    let (url, bearer) = (format!("{}{path}", relay.base), bearer.to_string());
    tokio::spawn(async move {
        let started = Instant::now();
        let reply = reqwest::Client::new()
            .get(url)
            .bearer_auth(bearer)
            .send()
            .await
            .expect("answers");
        assert_eq!(reply.status(), StatusCode::OK);
        (started.elapsed(), reply.text().await.expect("a body"))
    })
}

#[tokio::test]
async fn what_one_instance_stores_wakes_the_waits_parked_on_the_other() {
    if !on_postgres() {
        eprintln!("skipped: two instances need PostgreSQL (PACERELLE_TEST_POSTGRES)");
        return;
    }
    let a = start().await;
    let b = second_instance(&a).await;
    let agent = register(&a).await;
    let phone = pair(&a, &agent).await;

    // A task sent through A wakes the agent's wait parked on B.
    let wait = parked_get(&b, "/v1/agent/messages?wait=20".into(), &agent.bearer);
    tokio::time::sleep(Duration::from_millis(300)).await;
    send_task(&a, &phone, "t1", "from A").await;
    let (took, body) = wait.await.expect("joins");
    let batch: MessageBatch = serde_json::from_str(&body).expect("a batch");
    assert_eq!(ids_of(&batch), ["t1"]);
    assert!(took < WOKEN_WITHIN, "woken after {took:?}");

    // A reply stored through B wakes the phone's conversation parked on A.
    let head: Conversation = a.get("/v1/device/conversation?wait=0", &phone.bearer).await.ok();
    let cursor = head.cursor.to_string();
    let wait = parked_get(
        &a,
        format!("/v1/device/conversation?wait=20&cursor={cursor}"),
        &phone.bearer,
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let payload = serde_json::to_vec(&ReplyPayload {
        text: "from B".into(),
        source_message_id: "t1".into(),
    })
    .expect("json");
    let reply = SendReply {
        reply_id: "r1".into(),
        source_message_id: "t1".into(),
        envelopes: vec![DeviceEnvelope {
            device_id: phone.id.clone(),
            envelope: envelope::seal(&phone.key, &reply_aad(&agent.id, &phone.id, "r1"), &payload),
        }],
    };
    assert_eq!(
        b.post("/v1/agent/replies", &agent.bearer, &reply).await.status,
        StatusCode::CREATED
    );
    let (took, body) = wait.await.expect("joins");
    let conversation: Conversation = serde_json::from_str(&body).expect("a conversation");
    assert!(conversation.items.iter().any(|i| i.id == "r1"), "{body}");
    assert!(took < WOKEN_WITHIN, "woken after {took:?}");

    // A question asked through B and answered through A wakes the agent's question wait on B.
    ask(&b, &agent, "deploy", &[&phone], 600_000).await;
    let wait = parked_get(&b, "/v1/agent/questions/deploy?wait=20".into(), &agent.bearer);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        answer(&a, &phone, "deploy", Answer::Yes).await.status,
        StatusCode::OK
    );
    let (took, body) = wait.await.expect("joins");
    let view: QuestionView = serde_json::from_str(&body).expect("a question");
    assert_eq!(
        view.state,
        pacerelle_core::question::QuestionState::Answered,
        "{body}"
    );
    assert!(took < WOKEN_WITHIN, "woken after {took:?}");
}

#[tokio::test]
async fn a_device_revoked_through_one_instance_is_refused_by_the_other_that_had_its_credential_in_memory() {
    if !on_postgres() {
        eprintln!("skipped: two instances need PostgreSQL (PACERELLE_TEST_POSTGRES)");
        return;
    }
    let a = start().await;
    let b = second_instance(&a).await;
    let agent = register(&a).await;
    let phone = pair(&a, &agent).await;
    // B has seen the device's credential (and keeps it in memory).
    for _ in 0..3 {
        let reply = b.get("/v1/device", &phone.bearer).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    }
    let revoked = a
        .delete(&format!("/v1/agent/devices/{}", phone.id), &agent.bearer)
        .await;
    assert_eq!(revoked.status, StatusCode::OK, "{}", revoked.body);
    // The revocation's notification reaches B within milliseconds; a generous bound well below the 10 s after
    // which B would read the credential again anyway.
    let started = Instant::now();
    loop {
        let reply = b.get("/v1/device", &phone.bearer).await;
        if reply.status == StatusCode::FORBIDDEN {
            reply.error(StatusCode::FORBIDDEN, pacerelle_core::wire::code::DEVICE_REVOKED);
            break;
        }
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "B still accepted the revoked device after {:?}",
            started.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // And A at once.
    a.get("/v1/device", &phone.bearer)
        .await
        .error(StatusCode::FORBIDDEN, pacerelle_core::wire::code::DEVICE_REVOKED);
}
