//! Per-agent quotas: a task beyond `max_pending_tasks` not yet processed, or a question beyond
//! `max_open_questions` open, is refused `429 quota_exceeded` and stores nothing; processing, answering,
//! cancelling or expiring frees room; a retry of what is already stored is answered as always.

use pacerelle_core::question::{Answer, Level, NotificationPayload, QuestionState, notification_aad};
use pacerelle_core::wire::{
    Conversation, DeviceEnvelope, MessageBatch, QuestionView, SendMessage, SendNotification, Status, Stored,
    code,
};
use pacerelle_core::{Cursor, envelope};
use pacerelle_relay::{Config, Quotas};
use reqwest::{Method, StatusCode};

use crate::common::{
    Agent, Device, Reply, TestRelay, answer, ask, db_path, eventually, pair, processed, register,
    seal_question, seal_task, send_task, send_task_reply, start_with, wait_messages, yes_no,
};

const MAX_TASKS: u32 = 5;
const MAX_QUESTIONS: u32 = 3;

/// A relay with small quotas: 5 tasks not yet processed, 3 open questions.
async fn start_small() -> TestRelay {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let config = Config {
        open_registration: true,
        quotas: Quotas {
            max_pending_tasks: MAX_TASKS,
            max_open_questions: MAX_QUESTIONS,
            ..Quotas::default()
        },
        ..Config::new(db_path(&dir))
    };
    start_with(config, dir).await
}

/// Checks a `quota_exceeded` refusal: 429, the limit named in the message and the details, nothing quoted
/// from the request.
#[track_caller]
fn refused(reply: Reply, quota: &str, limit: u32, sent: &str) {
    let body = reply.error(StatusCode::TOO_MANY_REQUESTS, code::QUOTA_EXCEEDED);
    assert!(body.error.contains(quota), "{}", body.error);
    assert!(body.error.contains(&limit.to_string()), "{}", body.error);
    assert!(
        !body.error.contains(sent),
        "the message quotes the request: {}",
        body.error
    );
    let details = body.details.expect("details");
    assert_eq!(details["quota"], quota);
    assert_eq!(details["limit"], limit);
}

/// Every item id the device's conversation holds, with the updates.
async fn conversation_ids(relay: &TestRelay, device: &Device) -> Vec<String> {
    let conversation: Conversation = relay
        .get("/v1/device/conversation?wait=0&updates=true", &device.bearer)
        .await
        .ok();
    conversation.items.into_iter().map(|i| i.id).collect()
}

/// The ids of the tasks the agent is handed (all not yet processed).
async fn pending_ids(relay: &TestRelay, agent: &Agent) -> Vec<String> {
    let batch: MessageBatch = wait_messages(relay, agent, None, 0, None).await.ok();
    batch.messages.into_iter().map(|m| m.message_id).collect()
}

#[tokio::test]
async fn a_task_beyond_the_pending_quota_is_refused_and_stores_nothing_until_one_is_processed() {
    let relay = start_small().await;
    let agent = register(&relay).await;
    let phone = pair(&relay, &agent).await;

    let mut first = Vec::new();
    for i in 1..=MAX_TASKS {
        first.push(send_task(&relay, &phone, &format!("t{i}"), "fill the queue").await);
    }
    let before = conversation_ids(&relay, &phone).await;
    assert_eq!(before, ["t1", "t2", "t3", "t4", "t5"]);

    refused(
        send_task_reply(&relay, &phone, "t6", "one too many").await,
        "max_pending_tasks",
        MAX_TASKS,
        "t6",
    );
    // Nothing stored: the conversation, the agent's queue and the status are as before.
    assert_eq!(conversation_ids(&relay, &phone).await, before);
    assert_eq!(pending_ids(&relay, &agent).await, ["t1", "t2", "t3", "t4", "t5"]);
    let status: Status = relay.get("/v1/device/status", &phone.bearer).await.ok();
    assert_eq!(status.messages.waiting + status.messages.in_progress, 5);
    assert_eq!(status.messages.processed, 0);

    // A retry of a stored task is answered as before the cap was reached: 200, the same item.
    let again = send_task_reply(&relay, &phone, "t3", "fill the queue").await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);
    let again: Stored = again.ok();
    assert!(!again.created);
    assert_eq!(again.cursor, first[2].cursor);
    assert_eq!(again.created_at, first[2].created_at);

    // Delivered is not processed: still full.
    refused(
        send_task_reply(&relay, &phone, "t6", "one too many").await,
        "max_pending_tasks",
        MAX_TASKS,
        "t6",
    );

    // Processing one frees one place, and only one.
    processed(&relay, &agent, "t2").await;
    let t6 = send_task_reply(&relay, &phone, "t6", "now there is room").await;
    assert_eq!(t6.status, StatusCode::CREATED, "{}", t6.body);
    refused(
        send_task_reply(&relay, &phone, "t7", "full again").await,
        "max_pending_tasks",
        MAX_TASKS,
        "t7",
    );
    assert_eq!(pending_ids(&relay, &agent).await, ["t1", "t3", "t4", "t5", "t6"]);
}

#[tokio::test]
async fn concurrent_sends_never_pass_the_pending_quota() {
    let relay = start_small().await;
    let agent = register(&relay).await;
    let phone = pair(&relay, &agent).await;
    let tablet = pair(&relay, &agent).await;

    // 24 sends at once from two devices, into an empty queue of 5 places.
    let relay = std::sync::Arc::new(relay);
    let mut sends = tokio::task::JoinSet::new();
    for i in 0..24 {
        let device = if i % 2 == 0 { &phone } else { &tablet };
        let id = format!("c{i}");
        let body = SendMessage {
            envelope: seal_task(device, &id, "race"),
            message_id: id,
            session: None,
        };
        let (relay, bearer) = (relay.clone(), device.bearer.clone());
        sends.spawn(async move { relay.post("/v1/device/messages", &bearer, &body).await });
    }
    let replies = sends.join_all().await;
    let mut created = 0;
    for reply in replies {
        match reply.status {
            StatusCode::CREATED => created += 1,
            StatusCode::TOO_MANY_REQUESTS => {
                reply.error(StatusCode::TOO_MANY_REQUESTS, code::QUOTA_EXCEEDED);
            }
            other => panic!("unexpected {other}: {}", reply.body),
        }
    }
    assert_eq!(created, MAX_TASKS);
    assert_eq!(pending_ids(&relay, &agent).await.len(), MAX_TASKS as usize);
}

#[tokio::test]
async fn the_pending_quota_is_per_agent() {
    let relay = start_small().await;
    let full = register(&relay).await;
    let phone = pair(&relay, &full).await;
    for i in 0..MAX_TASKS {
        send_task(&relay, &phone, &format!("f{i}"), "fill").await;
    }
    refused(
        send_task_reply(&relay, &phone, "f9", "refused").await,
        "max_pending_tasks",
        MAX_TASKS,
        "f9",
    );

    let other = register(&relay).await;
    let other_phone = pair(&relay, &other).await;
    let stored = send_task_reply(&relay, &other_phone, "o1", "another agent's queue").await;
    assert_eq!(stored.status, StatusCode::CREATED, "{}", stored.body);
}

async fn cancel(relay: &TestRelay, agent: &Agent, question_id: &str) -> QuestionView {
    relay
        .call(
            Method::POST,
            &format!("/v1/agent/questions/{question_id}/cancel"),
            Some(&agent.bearer),
            None,
        )
        .await
        .ok()
}

/// Asks a question expiring in `expires_in_ms`; the raw answer.
async fn ask_reply(relay: &TestRelay, agent: &Agent, id: &str, phone: &Device, expires_in_ms: i64) -> Reply {
    let payload = yes_no(&format!("may I run {id}?"), &[phone], expires_in_ms);
    let body = seal_question(agent, id, &payload, &[phone]);
    relay.post("/v1/agent/questions", &agent.bearer, &body).await
}

#[tokio::test]
async fn a_question_beyond_the_open_quota_is_refused_until_one_is_answered_cancelled_or_expired() {
    let relay = start_small().await;
    let agent = register(&relay).await;
    let phone = pair(&relay, &agent).await;

    let (q1_payload, q1) = ask(&relay, &agent, "q1", &[&phone], 600_000).await;
    ask(&relay, &agent, "q2", &[&phone], 600_000).await;
    ask(&relay, &agent, "q3", &[&phone], 600_000).await;
    let before = conversation_ids(&relay, &phone).await;

    refused(
        ask_reply(&relay, &agent, "q4", &phone, 600_000).await,
        "max_open_questions",
        MAX_QUESTIONS,
        "q4",
    );
    assert_eq!(conversation_ids(&relay, &phone).await, before);
    relay
        .get("/v1/agent/questions/q4", &agent.bearer)
        .await
        .error(StatusCode::NOT_FOUND, code::NOT_FOUND);

    // Asking a stored question again resumes it, quota or not.
    let again = relay
        .post(
            "/v1/agent/questions",
            &agent.bearer,
            &seal_question(&agent, "q1", &q1_payload, &[&phone]),
        )
        .await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);
    let again: QuestionView = again.ok();
    assert_eq!(again.cursor, q1.cursor);
    assert_eq!(again.state, QuestionState::Pending);

    // A notification holds nothing open: it is not counted, and not refused.
    let note = NotificationPayload {
        text: "still here".into(),
        title: None,
        level: Level::Info,
    };
    let body = SendNotification {
        notification_id: "n1".into(),
        envelopes: vec![DeviceEnvelope {
            device_id: phone.id.clone(),
            envelope: envelope::seal_json(&phone.key, &notification_aad(&agent.id, &phone.id, "n1"), &note),
        }],
    };
    let notified = relay.post("/v1/agent/notifications", &agent.bearer, &body).await;
    assert_eq!(notified.status, StatusCode::CREATED, "{}", notified.body);

    // An answer frees one place.
    answer(&relay, &phone, "q1", Answer::Yes)
        .await
        .ok::<serde_json::Value>();
    ask(&relay, &agent, "q4", &[&phone], 600_000).await;
    refused(
        ask_reply(&relay, &agent, "q5", &phone, 600_000).await,
        "max_open_questions",
        MAX_QUESTIONS,
        "q5",
    );

    // So does a cancel.
    assert_eq!(cancel(&relay, &agent, "q2").await.state, QuestionState::Cancelled);
    ask(&relay, &agent, "q5", &[&phone], 2_000).await;
    refused(
        ask_reply(&relay, &agent, "q6", &phone, 600_000).await,
        "max_open_questions",
        MAX_QUESTIONS,
        "q6",
    );

    // And an expiry: q5 expires in 2 s, then q6 fits.
    let view = eventually(30, "room after q5's expiry", || async {
        let reply = ask_reply(&relay, &agent, "q6", &phone, 600_000).await;
        match reply.status {
            StatusCode::CREATED => Some(reply.ok::<QuestionView>()),
            _ => {
                reply.error(StatusCode::TOO_MANY_REQUESTS, code::QUOTA_EXCEEDED);
                None
            }
        }
    })
    .await;
    assert_eq!(view.state, QuestionState::Pending);
    let q5: QuestionView = relay.get("/v1/agent/questions/q5", &agent.bearer).await.ok();
    assert_eq!(q5.state, QuestionState::Expired);
}

#[tokio::test]
async fn a_refused_send_leaves_the_agent_cursor_and_conversation_cursor_usable() {
    let relay = start_small().await;
    let agent = register(&relay).await;
    let phone = pair(&relay, &agent).await;
    for i in 0..MAX_TASKS {
        send_task(&relay, &phone, &format!("k{i}"), "fill").await;
    }
    let batch: MessageBatch = wait_messages(&relay, &agent, None, 0, None).await.ok();
    let cursor: Cursor = batch.cursor;
    refused(
        send_task_reply(&relay, &phone, "k9", "refused").await,
        "max_pending_tasks",
        MAX_TASKS,
        "k9",
    );
    // Nothing new after the cursor: the refusal took no sequence number anyone could see.
    let after: MessageBatch = wait_messages(&relay, &agent, Some(cursor), 0, None).await.ok();
    assert!(after.messages.is_empty());
    assert_eq!(after.cursor, cursor);
}
