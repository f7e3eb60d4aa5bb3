use std::time::Duration;

use pacerelle_core::message::{ReplyPayload, reply_aad};
use pacerelle_core::pairing::Role;
use pacerelle_core::wire::{
    CheckpointList, Conversation, DeviceEnvelope, ItemKind, MessageBatch, MessageCounts, MessageState,
    Presence, SaveCheckpoint, SendReply, Status, Stored, code,
};
use pacerelle_core::{Cursor, b64, envelope};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::common::{
    Agent, Device, TestRelay, ids_of, pair, pair_as, processed, register, send_task, send_task_reply, start,
    wait_messages,
};

fn sealed_reply(agent: &Agent, device: &Device, reply_id: &str, source: &str, text: &str) -> DeviceEnvelope {
    let payload = serde_json::to_vec(&ReplyPayload {
        text: text.into(),
        source_message_id: source.into(),
    })
    .expect("json");
    DeviceEnvelope {
        device_id: device.id.clone(),
        envelope: envelope::seal(&device.key, &reply_aad(&agent.id, &device.id, reply_id), &payload),
    }
}

async fn conversation(relay: &TestRelay, device: &Device, cursor: Option<Cursor>, wait: u64) -> Conversation {
    let mut path = format!("/v1/device/conversation?wait={wait}");
    if let Some(c) = cursor {
        path.push_str(&format!("&cursor={c}"));
    }
    relay.get(&path, &device.bearer).await.ok()
}

#[tokio::test]
async fn sending_the_same_message_id_twice_stores_it_once() {
    let relay = start().await;
    let agent = register(&relay).await;
    let phone = pair(&relay, &agent).await;

    let first = send_task_reply(&relay, &phone, "m1", "buy milk").await;
    assert_eq!(first.status, StatusCode::CREATED);
    let first: Stored = first.ok();
    assert!(first.created);
    // A retry carries a freshly sealed envelope: still the same item.
    let again = send_task_reply(&relay, &phone, "m1", "buy milk").await;
    assert_eq!(again.status, StatusCode::OK);
    let again: Stored = again.ok();
    assert!(!again.created);
    assert_eq!(again.cursor, first.cursor);
    assert_eq!(again.created_at, first.created_at);

    let batch: MessageBatch = wait_messages(&relay, &agent, None, 0, None).await.ok();
    assert_eq!(ids_of(&batch), ["m1"]);
    assert_eq!(batch.messages[0].from, phone.id);
    assert_eq!(batch.messages[0].from_name, "Ana's phone");
    // The agent opens what the phone sealed.
    let opened = envelope::open(
        &agent.token.device_key(&agent.id, &phone.id),
        &pacerelle_core::message::task_aad(&agent.id, &phone.id, "m1"),
        &batch.messages[0].envelope,
    )
    .expect("opens");
    assert!(String::from_utf8_lossy(&opened).contains("buy milk"));

    // Another device of the same agent cannot reuse that id.
    let tablet = pair(&relay, &agent).await;
    send_task_reply(&relay, &tablet, "m1", "other")
        .await
        .error(StatusCode::CONFLICT, code::ID_CONFLICT);
}

#[tokio::test]
async fn without_a_cursor_every_unprocessed_task_comes_back_flagged_redelivered() {
    let relay = start().await;
    let agent = register(&relay).await;
    let phone = pair(&relay, &agent).await;
    send_task(&relay, &phone, "t1", "one").await;
    send_task(&relay, &phone, "t2", "two").await;

    let first: MessageBatch = wait_messages(&relay, &agent, None, 0, None).await.ok();
    assert_eq!(ids_of(&first), ["t1", "t2"]);
    assert!(first.messages.iter().all(|m| !m.redelivered));
    assert_eq!(first.cursor, first.messages[1].cursor);

    // The agent restarts before processing anything.
    let second: MessageBatch = wait_messages(&relay, &agent, None, 0, None).await.ok();
    assert_eq!(ids_of(&second), ["t1", "t2"]);
    assert!(second.messages.iter().all(|m| m.redelivered));

    // Processed is final (and idempotent: the first time is kept).
    let done = processed(&relay, &agent, "t1").await;
    let again = processed(&relay, &agent, "t1").await;
    assert_eq!(done.processed_at, again.processed_at);
    let third: MessageBatch = wait_messages(&relay, &agent, None, 0, None).await.ok();
    assert_eq!(ids_of(&third), ["t2"]);
    processed(&relay, &agent, "t2").await;
    let empty: MessageBatch = wait_messages(&relay, &agent, None, 0, None).await.ok();
    assert!(empty.messages.is_empty());
    // The head of the agent's stream, which now ends with the two `update` items of the processed tasks.
    let device_head = conversation(&relay, &phone, None, 0).await.cursor;
    assert!(device_head > first.cursor);
    assert_eq!(empty.cursor, device_head, "no cursor given: the head");

    relay
        .call(
            Method::POST,
            "/v1/agent/messages/nope/processed",
            Some(&agent.bearer),
            None,
        )
        .await
        .error(StatusCode::NOT_FOUND, code::NOT_FOUND);
}

#[tokio::test]
async fn with_a_cursor_only_newer_tasks_come() {
    let relay = start().await;
    let agent = register(&relay).await;
    let phone = pair(&relay, &agent).await;
    send_task(&relay, &phone, "old", "old").await;
    let first: MessageBatch = wait_messages(&relay, &agent, None, 0, None).await.ok();
    assert_eq!(ids_of(&first), ["old"]);

    send_task(&relay, &phone, "new", "new").await;
    let next: MessageBatch = wait_messages(&relay, &agent, Some(first.cursor), 0, None)
        .await
        .ok();
    assert_eq!(ids_of(&next), ["new"]);
    assert!(!next.messages[0].redelivered);

    let empty: MessageBatch = wait_messages(&relay, &agent, Some(next.cursor), 0, None)
        .await
        .ok();
    assert!(empty.messages.is_empty());
    assert_eq!(empty.cursor, next.cursor, "an empty answer keeps the cursor");
}

/// Polls the agent's status until a wait is parked.
async fn until_listening(relay: &TestRelay, agent: &Agent) {
    for _ in 0..500 {
        let status: Status = relay.get("/v1/agent/status", &agent.bearer).await.ok();
        if status.listening {
            assert_eq!(status.presence, Presence::Listening);
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the wait never parked");
}

#[tokio::test]
async fn a_parked_wait_is_woken_by_a_send_and_returns_the_task() {
    let relay = start().await;
    let agent = register(&relay).await;
    let phone = pair(&relay, &agent).await;
    let head: MessageBatch = wait_messages(&relay, &agent, None, 0, None).await.ok();

    let waiter = {
        let relay = &relay;
        let agent = &agent;
        async move { wait_messages(relay, agent, Some(head.cursor), 55, None).await }
    };
    let sender = async {
        until_listening(&relay, &agent).await;
        send_task(&relay, &phone, "wake", "wake up").await
    };
    let (woken, stored) = tokio::join!(waiter, sender);
    let woken: MessageBatch = woken.ok();
    assert_eq!(ids_of(&woken), ["wake"]);
    assert_eq!(woken.cursor, stored.cursor);
}

#[tokio::test]
async fn a_wait_that_finds_nothing_returns_an_empty_batch() {
    let relay = start().await;
    let agent = register(&relay).await;
    let batch: MessageBatch = wait_messages(&relay, &agent, None, 1, None).await.ok();
    assert!(batch.messages.is_empty());
    assert_eq!(batch.cursor, Cursor::START);
}

#[tokio::test]
async fn replies_reach_the_devices_they_are_sealed_for() {
    let relay = start().await;
    let agent = register(&relay).await;
    let phone = pair(&relay, &agent).await;
    let tablet = pair(&relay, &agent).await;
    send_task(&relay, &phone, "q1", "what time is it?").await;

    let reply = SendReply {
        reply_id: "r1".into(),
        source_message_id: "q1".into(),
        envelopes: vec![sealed_reply(&agent, &phone, "r1", "q1", "noon")],
    };
    let stored = relay.post("/v1/agent/replies", &agent.bearer, &reply).await;
    assert_eq!(stored.status, StatusCode::CREATED);
    let stored: Stored = stored.ok();
    // Idempotent by reply id; another source with the same id is a conflict.
    let again: Stored = relay.post("/v1/agent/replies", &agent.bearer, &reply).await.ok();
    assert!(!again.created);
    assert_eq!(again.cursor, stored.cursor);
    let mut other = reply.clone();
    other.source_message_id = "q2".into();
    send_task(&relay, &phone, "q2", "and now?").await;
    relay
        .post("/v1/agent/replies", &agent.bearer, &other)
        .await
        .error(StatusCode::CONFLICT, code::ID_CONFLICT);
    // Unknown source message.
    let mut orphan = reply.clone();
    orphan.reply_id = "r-orphan".into();
    orphan.source_message_id = "never-sent".into();
    relay
        .post("/v1/agent/replies", &agent.bearer, &orphan)
        .await
        .error(StatusCode::NOT_FOUND, code::NOT_FOUND);
    // No envelope at all is allowed.
    let silent = SendReply {
        reply_id: "r-silent".into(),
        source_message_id: "q1".into(),
        envelopes: vec![],
    };
    relay
        .post("/v1/agent/replies", &agent.bearer, &silent)
        .await
        .ok::<Stored>();

    // The phone sees its two tasks and the reply sealed for it, oldest first; it opens the reply.
    let conv = conversation(&relay, &phone, None, 0).await;
    let kinds: Vec<(ItemKind, &str)> = conv.items.iter().map(|i| (i.kind, i.id.as_str())).collect();
    assert_eq!(
        kinds,
        [
            (ItemKind::Message, "q1"),
            (ItemKind::Reply, "r1"),
            (ItemKind::Message, "q2")
        ]
    );
    assert_eq!(conv.items[0].state, Some(MessageState::Sent.into()));
    assert_eq!(conv.items[1].source_message_id.as_deref(), Some("q1"));
    let opened = envelope::open(
        &phone.key,
        &reply_aad(&agent.id, &phone.id, "r1"),
        &conv.items[1].envelope,
    )
    .expect("the phone opens its reply");
    assert!(String::from_utf8_lossy(&opened).contains("noon"));
    // The tablet sent nothing and got nothing.
    assert!(conversation(&relay, &tablet, None, 0).await.items.is_empty());
    // After the cursor: nothing new.
    let after = conversation(&relay, &phone, Some(conv.cursor), 0).await;
    assert!(after.items.is_empty());
    assert_eq!(after.cursor, conv.cursor);
}

#[tokio::test]
async fn a_parked_conversation_is_woken_by_a_reply() {
    let relay = start().await;
    let agent = register(&relay).await;
    let phone = pair(&relay, &agent).await;
    let sent = send_task(&relay, &phone, "q", "hello?").await;

    let waiter = conversation(&relay, &phone, Some(sent.cursor), 55);
    let replier = async {
        // Processing changes the task's state; the reply is what wakes the phone.
        let batch: MessageBatch = wait_messages(&relay, &agent, None, 0, None).await.ok();
        assert_eq!(ids_of(&batch), ["q"]);
        tokio::time::sleep(Duration::from_millis(100)).await;
        let reply = SendReply {
            reply_id: "a".into(),
            source_message_id: "q".into(),
            envelopes: vec![sealed_reply(&agent, &phone, "a", "q", "hi")],
        };
        relay
            .post("/v1/agent/replies", &agent.bearer, &reply)
            .await
            .ok::<Stored>()
    };
    let (conv, stored) = tokio::join!(waiter, replier);
    assert_eq!(conv.items.len(), 1);
    assert_eq!(conv.items[0].kind, ItemKind::Reply);
    assert_eq!(conv.cursor, stored.cursor);
}

#[tokio::test]
async fn checkpoints_are_idempotent_and_listed_latest_first() {
    let relay = start().await;
    let agent = register(&relay).await;
    for id in ["c1", "c2", "c3"] {
        let body = SaveCheckpoint {
            checkpoint_id: id.into(),
            envelope: b64::encode(id.as_bytes()),
        };
        let stored: Stored = relay
            .post("/v1/agent/checkpoints", &agent.bearer, &body)
            .await
            .ok();
        assert!(stored.created);
    }
    let again: Stored = relay
        .post(
            "/v1/agent/checkpoints",
            &agent.bearer,
            &SaveCheckpoint {
                checkpoint_id: "c1".into(),
                envelope: b64::encode(b"other"),
            },
        )
        .await
        .ok();
    assert!(!again.created);
    let list: CheckpointList = relay
        .get("/v1/agent/checkpoints?limit=2", &agent.bearer)
        .await
        .ok();
    let ids: Vec<&str> = list
        .checkpoints
        .iter()
        .map(|c| c.checkpoint_id.as_str())
        .collect();
    assert_eq!(ids, ["c3", "c2"]);
    let all: CheckpointList = relay.get("/v1/agent/checkpoints", &agent.bearer).await.ok();
    assert_eq!(all.checkpoints.len(), 3);
    assert_eq!(all.checkpoints[2].envelope, b64::encode(b"c1"));

    let status: Status = relay.get("/v1/agent/status", &agent.bearer).await.ok();
    assert!(status.last_checkpoint_at.is_some());
}

#[tokio::test]
async fn status_counts_tasks_by_state_for_agent_and_device() {
    let relay = start().await;
    let agent = register(&relay).await;
    let phone = pair(&relay, &agent).await;
    for id in ["a", "b", "c"] {
        send_task(&relay, &phone, id, id).await;
    }
    let status: Status = relay.get("/v1/device/status", &phone.bearer).await.ok();
    assert_eq!(status.agent.agent_id, agent.id);
    assert_eq!(status.messages.waiting, 3);
    assert_eq!(status.devices, 1);
    assert_eq!(status.presence, Presence::Offline);
    assert!(!status.listening);

    let batch: MessageBatch = wait_messages(&relay, &agent, None, 0, None).await.ok();
    assert_eq!(batch.messages.len(), 3);
    processed(&relay, &agent, "a").await;
    let status: Status = relay.get("/v1/agent/status", &agent.bearer).await.ok();
    assert_eq!(
        (
            status.messages.waiting,
            status.messages.in_progress,
            status.messages.processed
        ),
        (0, 2, 1)
    );
    assert_eq!(status.presence, Presence::Busy);
    assert!(status.last_wait_at.is_some());

    // A Partner-mode user's device learns whether the agent is there, not the agent's figures: no task
    // counts (other users' and the owner's), no device count, no session host, name or folder, no checkpoint
    // time.
    let session: Value = relay
        .post(
            "/v1/agent/sessions",
            &agent.bearer,
            &json!({"host": "ops-laptop-7", "name": "ops", "folder": "payroll-migration"}),
        )
        .await
        .ok();
    assert!(session["sessionId"].is_string(), "{session}");
    let user = pair_as(&relay, &agent, Role::User).await;
    let owner_view: Status = relay.get("/v1/device/status", &phone.bearer).await.ok();
    assert_eq!(
        owner_view.session.map(|s| s.host).as_deref(),
        Some("ops-laptop-7")
    );
    assert_eq!(owner_view.devices, 2);
    let sessions: Vec<(&str, Option<&str>)> = owner_view
        .sessions
        .iter()
        .map(|s| (s.name.as_str(), s.folder.as_deref()))
        .collect();
    assert_eq!(sessions, [("ops", Some("payroll-migration"))]);
    let user_view: Status = relay.get("/v1/device/status", &user.bearer).await.ok();
    assert_eq!(user_view.agent.agent_id, agent.id);
    assert_eq!(user_view.presence, owner_view.presence);
    assert_eq!(user_view.session, None);
    assert!(user_view.sessions.is_empty(), "no session's name, host or folder");
    assert_eq!(user_view.messages, MessageCounts::default());
    assert_eq!((user_view.devices, user_view.last_checkpoint_at), (0, None));
}

#[tokio::test]
async fn shutting_down_ends_parked_waits_at_once() {
    let relay = start().await;
    let agent = register(&relay).await;
    let parked = {
        let client = reqwest::Client::new();
        let url = format!("{}/v1/agent/messages?wait=55", relay.base);
        let bearer = agent.bearer.clone();
        tokio::spawn(async move { client.get(url).bearer_auth(bearer).send().await })
    };
    until_listening(&relay, &agent).await;
    tokio::time::timeout(Duration::from_secs(20), relay.stop())
        .await
        .expect("shutdown does not wait for the 55 s long-poll");
    let answer = parked.await.expect("the waiter task");
    if let Ok(resp) = answer {
        assert_eq!(resp.status(), StatusCode::OK);
    }
}
