//! The inbox through the real client against a real relay: send, wait, reply, process, redelivery,
//! idempotency, checkpoints, lease, and what the database holds.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;
use pacerelle_client::core::wire::OpenSession;

use std::time::Duration;

use common::{TestRelay, file_contains};
use pacerelle_client::{AgentClient, core::wire::ItemKind, core::wire::MessageState};

const NO_WAIT: Duration = Duration::ZERO;

#[tokio::test]
async fn a_task_is_answered_and_the_reply_names_its_source() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;

    let sent = device.send("rename the draft", None).await.expect("send");
    let inbox = agent
        .wait_for_messages(None, Duration::from_secs(5))
        .await
        .expect("wait");
    assert_eq!(inbox.messages.len(), 1);
    let task = &inbox.messages[0];
    assert_eq!(task.message_id, sent.id);
    assert_eq!(task.text, "rename the draft");
    assert_eq!(task.from, device.credentials().device_id);
    assert_eq!(task.from_name, "test phone");
    assert!(!task.redelivered);

    agent.reply(&task.message_id, "done", None).await.expect("reply");
    agent.mark_processed(&task.message_id).await.expect("processed");

    let page = device.conversation(None, NO_WAIT).await.expect("conversation");
    assert_eq!(page.items.len(), 3, "{:?}", page.items);
    assert_eq!(page.items[0].kind, ItemKind::Message);
    assert_eq!(page.items[0].state, Some(MessageState::Processed));
    assert_eq!(page.items[1].kind, ItemKind::Reply);
    assert_eq!(page.items[1].text, "done");
    assert_eq!(page.items[1].source_message_id.as_deref(), Some(sent.id.as_str()));
    // Then the update that says the task was processed.
    assert_eq!(page.items[2].kind, ItemKind::Update);
    let update = page.items[2].update.as_deref().expect("an update");
    assert_eq!(update.subject_id, sent.id);
    assert_eq!(update.state, pacerelle_client::core::wire::ItemState::Processed);
}

#[tokio::test]
async fn a_parked_wait_returns_the_task_sent_meanwhile() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let head = agent.wait_for_messages(None, NO_WAIT).await.expect("empty wait");
    assert!(head.messages.is_empty());

    let waiting = tokio::spawn({
        let agent = agent.clone();
        async move {
            agent
                .wait_for_messages(Some(head.cursor), Duration::from_secs(30))
                .await
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let sent = device.send("wake up", None).await.expect("send");
    let inbox = waiting.await.expect("join").expect("wait");
    assert_eq!(inbox.messages.len(), 1);
    assert_eq!(inbox.messages[0].message_id, sent.id);
    assert!(inbox.cursor > head.cursor);
}

#[tokio::test]
async fn the_same_message_id_is_stored_once() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let first = device.send("once", Some("task-42")).await.expect("first");
    let second = device.send("once", Some("task-42")).await.expect("second");
    assert!(first.created);
    assert!(!second.created);
    assert_eq!(first.cursor, second.cursor);
    let inbox = agent.wait_for_messages(None, NO_WAIT).await.expect("wait");
    assert_eq!(
        inbox
            .messages
            .iter()
            .filter(|m| m.message_id == "task-42")
            .count(),
        1
    );
    assert_eq!(inbox.messages.len(), 1);
}

#[tokio::test]
async fn an_unprocessed_task_comes_again_after_a_restart_and_a_processed_one_never_does() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let kept = device.send("unfinished", None).await.expect("send");
    let done = device.send("finished", None).await.expect("send");

    let first = agent.wait_for_messages(None, NO_WAIT).await.expect("wait");
    assert_eq!(first.messages.len(), 2);
    assert!(first.messages.iter().all(|m| !m.redelivered));
    agent.mark_processed(&done.id).await.expect("processed");

    // The agent restarts: a new client with the same credentials, no cursor.
    let restarted = AgentClient::new(&relay.url, agent.agent_id(), agent.token().clone())
        .expect("client")
        .with_home(Some(&pacerelle_test_support::home()));
    let again = restarted.wait_for_messages(None, NO_WAIT).await.expect("wait");
    assert_eq!(again.messages.len(), 1);
    assert_eq!(again.messages[0].message_id, kept.id);
    assert!(again.messages[0].redelivered);

    restarted.mark_processed(&kept.id).await.expect("processed");
    restarted
        .mark_processed(&kept.id)
        .await
        .expect("processed twice is fine");
    let empty = restarted.wait_for_messages(None, NO_WAIT).await.expect("wait");
    assert!(empty.messages.is_empty());
}

#[tokio::test]
async fn a_cursor_returns_only_newer_tasks() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    device.send("one", None).await.expect("send");
    let first = agent.wait_for_messages(None, NO_WAIT).await.expect("wait");
    assert_eq!(first.messages.len(), 1);
    let two = device.send("two", None).await.expect("send");
    let next = agent
        .wait_for_messages(Some(first.cursor), NO_WAIT)
        .await
        .expect("wait");
    assert_eq!(
        next.messages
            .iter()
            .map(|m| m.message_id.as_str())
            .collect::<Vec<_>>(),
        vec![two.id.as_str()]
    );
    let none = agent
        .wait_for_messages(Some(next.cursor), NO_WAIT)
        .await
        .expect("wait");
    assert!(none.messages.is_empty());
    assert_eq!(none.cursor, next.cursor);
}

#[tokio::test]
async fn checkpoints_are_listed_latest_first_and_open() {
    let relay = TestRelay::start().await;
    let (agent, _device) = relay.agent_and_device().await;
    agent
        .save_checkpoint("read the spec", "write the parser", &[])
        .await
        .expect("save");
    agent
        .save_checkpoint("wrote the parser", "test it", &["msg_a".to_string()])
        .await
        .expect("save");
    let list = agent.checkpoints(10).await.expect("list");
    assert_eq!(list.len(), 2);
    assert_eq!(list[0].summary, "wrote the parser");
    assert_eq!(list[0].next_action, "test it");
    assert_eq!(list[0].message_ids, vec!["msg_a".to_string()]);
    assert_eq!(list[1].summary, "read the spec");
    assert_eq!(agent.checkpoints(1).await.expect("list").len(), 1);
}

#[tokio::test]
async fn the_database_holds_no_plaintext_of_tasks_replies_or_checkpoints() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let task_canary = "canary-task-7f3a9c";
    let reply_canary = "canary-reply-51d2e8";
    let checkpoint_canary = "canary-checkpoint-b04c11";
    let sent = device
        .send(&format!("please {task_canary}"), None)
        .await
        .expect("send");
    let inbox = agent.wait_for_messages(None, NO_WAIT).await.expect("wait");
    assert_eq!(inbox.messages[0].text, format!("please {task_canary}"));
    agent.reply(&sent.id, reply_canary, None).await.expect("reply");
    agent.mark_processed(&sent.id).await.expect("processed");
    agent
        .save_checkpoint(checkpoint_canary, checkpoint_canary, &[])
        .await
        .expect("checkpoint");

    // Read the files while the relay runs (WAL not yet checkpointed) and after it stopped.
    let check = |files: Vec<std::path::PathBuf>| {
        assert!(!files.is_empty());
        for file in files {
            for canary in [task_canary, reply_canary, checkpoint_canary] {
                assert!(
                    !file_contains(&file, canary.as_bytes()),
                    "{canary} found in {}",
                    file.display()
                );
            }
        }
    };
    check(relay.database_files());
    let dir = relay.stop().await;
    let files: Vec<_> = std::fs::read_dir(dir.path())
        .expect("dir")
        .map(|e| e.expect("entry").path())
        .collect();
    check(files);
}

#[tokio::test]
async fn a_second_session_is_refused_with_the_holder_named_unless_it_takes_over() {
    let relay = TestRelay::start().await;
    let (agent, _device) = relay.agent_and_device().await;
    let first = agent
        .open_session(&OpenSession::new("laptop / claude-code"))
        .await
        .expect("first session");

    let other = AgentClient::new(&relay.url, agent.agent_id(), agent.token().clone())
        .expect("client")
        .with_home(Some(&pacerelle_test_support::home()));
    let err = other
        .open_session(&OpenSession::new("desktop / codex"))
        .await
        .expect_err("lease is held");
    assert_eq!(err.code(), Some("agent_in_use"));
    let text = err.to_string();
    assert!(text.contains("laptop / claude-code"), "{text}");
    let pacerelle_client::Error::Api {
        details: Some(details),
        ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!(details["host"], "laptop / claude-code");
    assert_eq!(details["since"], serde_json::to_value(first.since).expect("json"));

    // The holder still consumes the inbox; the other cannot without a lease.
    agent
        .wait_for_messages(None, NO_WAIT)
        .await
        .expect("holder waits");
    let err = other
        .wait_for_messages(None, NO_WAIT)
        .await
        .expect_err("not the holder");
    assert_eq!(err.code(), Some("agent_in_use"));

    // Taking over moves the lease; the old holder learns it lost it.
    other
        .open_session(&OpenSession {
            takeover: true,
            ..OpenSession::new("desktop / codex")
        })
        .await
        .expect("takeover");
    let err = agent.heartbeat().await.expect_err("lost");
    assert_eq!(err.code(), Some("lease_lost"));
    other
        .wait_for_messages(None, NO_WAIT)
        .await
        .expect("new holder waits");
    other.close_session().await.expect("release");
    agent
        .open_session(&OpenSession::new("laptop / claude-code"))
        .await
        .expect("free again");
}

#[tokio::test]
async fn status_shows_counts_and_devices_from_both_sides() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    device.send("a", None).await.expect("send");
    device.send("b", None).await.expect("send");
    let s = device.status().await.expect("status");
    assert_eq!(s.messages.waiting, 2);
    assert_eq!(s.devices, 1);
    assert_eq!(s.agent.agent_id, agent.agent_id());
    let inbox = agent.wait_for_messages(None, NO_WAIT).await.expect("wait");
    agent
        .mark_processed(&inbox.messages[0].message_id)
        .await
        .expect("processed");
    let s = agent.status().await.expect("status");
    assert_eq!(
        (s.messages.waiting, s.messages.in_progress, s.messages.processed),
        (0, 1, 1)
    );
}

#[tokio::test]
async fn a_revoked_device_is_refused_and_gets_no_new_replies() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let sent = device.send("hello", None).await.expect("send");
    agent
        .revoke_device(&device.credentials().device_id)
        .await
        .expect("revoke");
    let err = device.send("again", None).await.expect_err("revoked");
    assert_eq!(err.code(), Some("device_revoked"));
    let err = device.conversation(None, NO_WAIT).await.expect_err("revoked");
    assert_eq!(err.code(), Some("device_revoked"));
    // Replies are sealed only for devices still paired.
    agent
        .reply(&sent.id, "late", None)
        .await
        .expect("reply with no device left");
    let devices = agent.devices().await.expect("devices");
    assert!(devices[0].revoked_at.is_some());
}
