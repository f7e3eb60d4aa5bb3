//! The stream of tasks and replies — the cap on pending tasks, delivery and acknowledgement, replies, what one
//! device sees, cursors that never skip — on each backend.

use std::collections::HashSet;
use std::sync::Arc;

use pacerelle_core::question::{QuestionKind, QuestionState};
use pacerelle_core::wire::{DeviceEnvelope, ItemKind, ItemState, Stored};
use pacerelle_core::{Cursor, Timestamp};
use tokio::sync::Barrier;

use super::{Backend, T0, backends};
use crate::store::{
    NewQuestion, NewUpdate, Put, QuestionPut, Registered, ReplyPut, SessionOpened, Store, Transition,
};

/// `backend`'s store with agent `ag_1` and its devices `dv_1` (phone) and `dv_2` (tablet), and agent `ag_2`
/// with `dv_3`.
pub(in crate::store) async fn two_agents(backend: &Backend) -> Store {
    let store = backend.store.clone();
    for (agent, name) in [("ag_1", "laptop"), ("ag_2", "other")] {
        let registered = store
            .register_agent(agent, name, &[1; 32], Timestamp(T0))
            .await
            .expect("stored");
        assert!(matches!(registered, Registered::Created(_)), "{}", backend.name());
    }
    backend.add_devices().await;
    backend.add_device("ag_2", "dv_3", "phone").await;
    store
}

/// Stores task `id` from `dv_1` of `ag_1` at [`T0`] with room for any number of pending tasks.
pub(in crate::store) async fn send(store: &Store, id: &str) -> Stored {
    match store
        .put_message("ag_1", "dv_1", id, "AQID", None, u32::MAX, Timestamp(T0))
        .await
        .expect("stored")
    {
        Put::Stored(stored) => stored,
        other => panic!("stored, got {other:?}"),
    }
}

/// A copy sealed for `device_id`.
fn envelope(device_id: &str, envelope: &str) -> DeviceEnvelope {
    DeviceEnvelope {
        device_id: device_id.into(),
        envelope: envelope.into(),
    }
}

#[tokio::test]
async fn the_pending_count_agrees_with_a_scan_and_the_cap_refuses_only_new_tasks() {
    for backend in backends().await {
        let name = backend.name();
        let store = &two_agents(&backend).await;
        assert_eq!(backend.pending_both_ways("ag_1").await, (0, 0), "{name}");
        for i in 0..3 {
            let put = store
                .put_message("ag_1", "dv_1", &format!("m{i}"), "AQ", None, 3, Timestamp(T0 + i))
                .await
                .expect("stored");
            assert!(matches!(put, Put::Stored(Stored { created: true, .. })), "{name}");
        }
        store
            .put_message("ag_2", "dv_3", "m0", "AQ", None, 3, Timestamp(T0))
            .await
            .expect("another agent's task");
        assert_eq!(backend.pending_both_ways("ag_1").await, (3, 3), "{name}");
        assert_eq!(backend.pending_both_ways("ag_2").await, (1, 1), "{name}");
        let refused = store
            .put_message("ag_1", "dv_1", "m3", "AQ", None, 3, Timestamp(T0 + 3))
            .await
            .expect("no storage error");
        assert!(matches!(refused, Put::QuotaExceeded), "{name}");
        // A retry of a stored task is found, not refused; the same id from another device is a conflict.
        let again = store
            .put_message("ag_1", "dv_1", "m1", "AQ", None, 3, Timestamp(T0 + 4))
            .await
            .expect("found");
        assert!(
            matches!(again, Put::Stored(Stored { created: false, .. })),
            "{name}"
        );
        let other = store
            .put_message("ag_1", "dv_2", "m1", "AQ", None, 3, Timestamp(T0 + 4))
            .await
            .expect("no storage error");
        assert!(matches!(other, Put::Conflict(_)), "{name}");
        // Marking twice counts once, and only the first stores an update.
        let first = store
            .mark_processed("ag_1", "m1", "default", Timestamp(T0 + 5))
            .await
            .expect("processed")
            .expect("found");
        assert!(first.update.is_some(), "{name}");
        let second = store
            .mark_processed("ag_1", "m1", "default", Timestamp(T0 + 6))
            .await
            .expect("processed")
            .expect("found");
        assert!(second.update.is_none(), "{name}");
        assert_eq!(
            second.processed_at,
            Timestamp(T0 + 5),
            "{name}: the first time is kept"
        );
        assert!(
            store
                .mark_processed("ag_1", "nope", "default", Timestamp(T0))
                .await
                .expect("ok")
                .is_none(),
            "{name}"
        );
        assert!(
            store
                .mark_processed("ag_2", "m1", "default", Timestamp(T0))
                .await
                .expect("ok")
                .is_none(),
            "{name}: another agent's task id is not this agent's"
        );
        assert_eq!(backend.pending_both_ways("ag_1").await, (2, 2), "{name}");
        assert_eq!(backend.pending_both_ways("ag_2").await, (1, 1), "{name}");
        let put = store
            .put_message("ag_1", "dv_1", "m3", "AQ", None, 3, Timestamp(T0 + 6))
            .await
            .expect("room again");
        assert!(matches!(put, Put::Stored(Stored { created: true, .. })), "{name}");
        assert_eq!(backend.pending_both_ways("ag_1").await, (3, 3), "{name}");
    }
}

#[tokio::test]
async fn sequence_numbers_only_grow_across_agents_and_kinds() {
    for backend in backends().await {
        let name = backend.name();
        let store = &two_agents(&backend).await;
        assert_eq!(store.global_head().await.expect("ok"), Cursor::START, "{name}");
        let mut last = Cursor::START;
        for (i, agent) in ["ag_1", "ag_2", "ag_1"].into_iter().enumerate() {
            let c = store
                .put_checkpoint(agent, &format!("c{i}"), "AQID", Timestamp(T0))
                .await
                .expect("ok");
            assert!(c.cursor > last, "{name}");
            last = c.cursor;
        }
        let task = send(store, "m1").await;
        assert!(task.cursor > last, "{name}");
        assert_eq!(store.global_head().await.expect("ok"), task.cursor, "{name}");
        // Retention deleting the newest items leaves the head where it was: the cursors that named them stay
        // valid, and the wait's own read agrees.
        backend
            .run("DELETE FROM items WHERE item_id IN ('c1', 'c2', 'm1')")
            .await;
        assert_eq!(store.global_head().await.expect("ok"), task.cursor, "{name}");
        let read = store
            .wait_read("ag_1", None, task.cursor, 10, Timestamp(T0))
            .await
            .expect("reads");
        assert_eq!(read.global_head, task.cursor, "{name}");
    }
}

#[tokio::test]
async fn concurrent_sends_never_pass_the_cap_and_store_an_id_once() {
    for backend in backends().await {
        let name = backend.name();
        let store = &two_agents(&backend).await;
        let barrier = Arc::new(Barrier::new(24));
        let mut sends = Vec::new();
        for i in 0..24 {
            let (store, barrier) = (store.clone(), barrier.clone());
            sends.push(tokio::spawn(async move {
                barrier.wait().await;
                // Twelve distinct ids, each sent twice at once.
                store
                    .put_message(
                        "ag_1",
                        "dv_1",
                        &format!("m{}", i % 12),
                        "AQ",
                        None,
                        5,
                        Timestamp(T0),
                    )
                    .await
                    .expect("no storage error")
            }));
        }
        let (mut created, mut found, mut refused) = (HashSet::new(), 0, 0);
        for send in sends {
            match send.await.expect("joined") {
                Put::Stored(s) if s.created => {
                    assert!(created.insert(s.id.clone()), "{name}: {} created twice", s.id)
                }
                Put::Stored(_) => found += 1,
                Put::QuotaExceeded => refused += 1,
                Put::Conflict(why) => panic!("{name}: no conflict expected: {why}"),
            }
        }
        assert_eq!(created.len(), 5, "{name}: exactly the cap is stored");
        assert_eq!(created.len() + found + refused, 24, "{name}");
        assert!(found <= 5, "{name}: only a stored id is found again");
        assert_eq!(backend.pending_both_ways("ag_1").await, (5, 5), "{name}");
    }
}

#[tokio::test]
async fn concurrent_acknowledgements_store_one_update() {
    for backend in backends().await {
        let name = backend.name();
        let store = &two_agents(&backend).await;
        send(store, "m1").await;
        let barrier = Arc::new(Barrier::new(10));
        let mut marks = Vec::new();
        for i in 0..10 {
            let (store, barrier) = (store.clone(), barrier.clone());
            marks.push(tokio::spawn(async move {
                barrier.wait().await;
                store
                    .mark_processed("ag_1", "m1", "default", Timestamp(T0 + 10 + i))
                    .await
                    .expect("no storage error")
                    .expect("found")
            }));
        }
        let mut marked = Vec::new();
        for mark in marks {
            marked.push(mark.await.expect("joined"));
        }
        let updates: Vec<&NewUpdate> = marked.iter().filter_map(|m| m.update.as_ref()).collect();
        assert_eq!(updates.len(), 1, "{name}: one acknowledgement is the first");
        let at = updates[0].created_at;
        assert!(
            marked.iter().all(|m| m.processed_at == at),
            "{name}: all see the first time"
        );
        assert_eq!(
            backend
                .count("SELECT COUNT(*) FROM items WHERE kind = 'update'")
                .await,
            1,
            "{name}"
        );
        assert_eq!(backend.pending_both_ways("ag_1").await, (0, 0), "{name}");
    }
}

#[tokio::test]
async fn a_wait_reads_the_lease_the_session_and_the_heads_and_resumes_from_its_cursor() {
    for backend in backends().await {
        let name = backend.name();
        let store = &two_agents(&backend).await;
        let read = store
            .wait_read("ag_1", None, Cursor::START, 10, Timestamp(T0))
            .await
            .expect("reads");
        assert!(
            read.lease.is_none() && !read.session_known && read.messages.is_empty(),
            "{name}"
        );
        assert_eq!(
            (read.global_head, read.next),
            (Cursor::START, Cursor::START),
            "{name}"
        );

        let opened = store
            .open_session("ag_1", "ses_1", "laptop", "default", None, false, Timestamp(T0))
            .await
            .expect("opens");
        assert!(matches!(opened, SessionOpened::Opened(_)), "{name}");
        let m1 = send(store, "m1").await;
        let m2 = send(store, "m2").await;
        let m3 = send(store, "m3").await;
        let other = store
            .put_checkpoint("ag_2", "c1", "AQID", Timestamp(T0))
            .await
            .expect("another agent's item");
        let read = store
            .wait_read("ag_1", Some("ses_1"), Cursor::START, 2, Timestamp(T0 + 1))
            .await
            .expect("reads");
        let lease = read.lease.expect("held");
        assert_eq!(
            (lease.session_id.as_str(), lease.holder.host.as_str()),
            ("ses_1", "laptop"),
            "{name}"
        );
        assert_eq!(lease.holder.since, Timestamp(T0), "{name}");
        assert!(read.session_known, "{name}");
        assert_eq!(
            read.global_head, other.cursor,
            "{name}: the relay's head, every agent's items"
        );
        let ids: Vec<&str> = read.messages.iter().map(|m| m.message_id.as_str()).collect();
        assert_eq!(ids, ["m1", "m2"], "{name}");
        let first = &read.messages[0];
        assert_eq!(
            (
                first.from.as_str(),
                first.from_name.as_str(),
                first.envelope.as_str()
            ),
            ("dv_1", "phone", "AQID"),
            "{name}"
        );
        assert_eq!(
            (first.cursor, first.sent_at, first.redelivered),
            (m1.cursor, Timestamp(T0), false),
            "{name}"
        );
        assert_eq!(
            read.next, m2.cursor,
            "{name}: a full page continues after its last task"
        );

        let read = store
            .wait_read("ag_1", Some("ses_2"), read.next, 2, Timestamp(T0 + 2))
            .await
            .expect("reads");
        assert!(!read.session_known, "{name}: a session this agent never had");
        assert_eq!(read.messages.len(), 1, "{name}");
        assert_eq!(
            read.next, m3.cursor,
            "{name}: a short page continues from the agent's head"
        );
        // A processed task is no longer handed out; the cursor still moves to the head.
        store
            .mark_processed("ag_1", "m3", "default", Timestamp(T0 + 3))
            .await
            .expect("ok");
        let read = store
            .wait_read("ag_1", Some("ses_1"), m2.cursor, 2, Timestamp(T0 + 4))
            .await
            .expect("reads");
        assert!(read.messages.is_empty(), "{name}");
        assert!(
            read.next > m3.cursor,
            "{name}: the update item is the agent's head"
        );

        // Past the lease's time-to-live the session no longer holds it, but stays known.
        let late = Timestamp(T0 + crate::store::lease_ttl_ms());
        let read = store
            .wait_read("ag_1", Some("ses_1"), Cursor::START, 10, late)
            .await
            .expect("reads");
        assert!(read.lease.is_none(), "{name}");
        assert!(read.session_known, "{name}");
        let read = store
            .wait_read("ag_2", Some("ses_1"), Cursor::START, 10, Timestamp(T0))
            .await
            .expect("reads");
        assert!(
            read.lease.is_none() && !read.session_known,
            "{name}: another agent's session"
        );
    }
}

#[tokio::test]
async fn replies_are_checked_stored_once_and_sealed_per_device() {
    for backend in backends().await {
        let name = backend.name();
        let store = &two_agents(&backend).await;
        let task = send(store, "m1").await;
        let both = [envelope("dv_1", "R1D1"), envelope("dv_2", "R1D2")];
        let put = |id: &'static str, source: &'static str, envelopes: Vec<DeviceEnvelope>| {
            let store = store.clone();
            async move {
                store
                    .put_reply("ag_1", id, source, &envelopes, Timestamp(T0 + 1))
                    .await
                    .expect("no storage error")
            }
        };
        assert!(
            matches!(put("r1", "m9", both.to_vec()).await, ReplyPut::NoSource),
            "{name}"
        );
        let unknown = put(
            "r1",
            "m1",
            vec![
                envelope("dv_1", "A"),
                envelope("dv_3", "B"),
                envelope("dv_9", "C"),
            ],
        )
        .await;
        assert!(
            matches!(&unknown, ReplyPut::UnknownDevice(d) if d == "dv_3"),
            "{name}: the first device not of this agent, got {unknown:?}"
        );
        let ReplyPut::Stored(stored) = put("r1", "m1", both.to_vec()).await else {
            panic!("{name}: stored");
        };
        assert!(stored.created && stored.cursor > task.cursor, "{name}");
        let ReplyPut::Stored(again) = put("r1", "m1", both.to_vec()).await else {
            panic!("{name}: found");
        };
        assert_eq!(
            (again.created, again.cursor, again.created_at),
            (false, stored.cursor, stored.created_at),
            "{name}"
        );
        send(store, "m2").await;
        assert!(
            matches!(put("r1", "m2", both.to_vec()).await, ReplyPut::Conflict),
            "{name}"
        );
        assert_eq!(
            backend
                .count("SELECT COUNT(*) FROM items WHERE kind = 'reply'")
                .await,
            1,
            "{name}"
        );
        assert_eq!(
            backend.count("SELECT COUNT(*) FROM item_envelopes").await,
            2,
            "{name}"
        );
        for (device, sealed) in [("dv_1", "R1D1"), ("dv_2", "R1D2")] {
            let (items, _) = store
                .conversation("ag_1", device, task.cursor, 10, true, Timestamp(T0 + 2))
                .await
                .expect("reads");
            let reply = items
                .iter()
                .find(|i| i.kind == ItemKind::Reply)
                .expect("the reply");
            assert_eq!(
                (reply.id.as_str(), reply.envelope.as_str()),
                ("r1", sealed),
                "{name}"
            );
            assert_eq!(reply.source_message_id.as_deref(), Some("m1"), "{name}");
        }
    }
}

#[tokio::test]
async fn a_conversation_shows_a_device_its_own_items_and_their_updates() {
    for backend in backends().await {
        let name = backend.name();
        let store = &two_agents(&backend).await;
        let m1 = send(store, "m1").await;
        store
            .put_message("ag_1", "dv_2", "t1", "TABLET", None, u32::MAX, Timestamp(T0))
            .await
            .expect("the tablet's task");
        let only_dv1 = [envelope("dv_1", "Q1D1")];
        let q = NewQuestion {
            question_id: "q1",
            kind: QuestionKind::YesNo,
            expires_at: Timestamp(T0 + 60_000),
            self_envelope: "SELF",
            envelopes: &only_dv1,
            user_id: None,
            approvals: 1,
        };
        let put = store
            .put_question("ag_1", &q, 100, Timestamp(T0))
            .await
            .expect("asked");
        assert!(matches!(put, QuestionPut::Item(_)), "{name}");
        store.mark_delivered("ag_1", "default", Cursor::START, m1.cursor, Timestamp(T0 + 1));
        let marked = store
            .mark_processed("ag_1", "m1", "default", Timestamp(T0 + 2))
            .await
            .expect("ok")
            .expect("found");
        let processed = marked.update.expect("an update");
        assert_eq!(processed.recipients, ["dv_1"], "{name}");
        let (cancel, effects) = store
            .cancel_question("ag_1", "q1", Timestamp(T0 + 3))
            .await
            .expect("cancels");
        assert!(matches!(cancel, Transition::Done(_)), "{name}");
        let cancelled = effects.update.expect("an update");

        let (items, next) = store
            .conversation("ag_1", "dv_1", Cursor::START, 50, true, Timestamp(T0 + 4))
            .await
            .expect("reads");
        let seen: Vec<(ItemKind, &str)> = items.iter().map(|i| (i.kind, i.id.as_str())).collect();
        assert_eq!(
            seen,
            [
                (ItemKind::Message, "m1"),
                (ItemKind::Question, "q1"),
                (ItemKind::Update, processed.id.as_str()),
                (ItemKind::Update, cancelled.id.as_str()),
            ],
            "{name}"
        );
        assert_eq!(items[0].state, Some(ItemState::Processed), "{name}");
        assert_eq!(items[0].envelope, "AQID", "{name}");
        assert_eq!(items[1].envelope, "Q1D1", "{name}");
        assert_eq!(
            items[1].question.as_ref().map(|m| (m.kind, m.state)),
            Some((QuestionKind::YesNo, QuestionState::Cancelled)),
            "{name}"
        );
        // What a push would carry is what the conversation returns, question metadata included.
        assert_eq!(items[2], processed.item, "{name}");
        assert_eq!(items[3], cancelled.item, "{name}");
        assert_eq!(items[3].subject_id.as_deref(), Some("q1"), "{name}");
        assert_eq!(next, cancelled.cursor(), "{name}");

        // Without updates; and a page of one continues after its item.
        let (items, _) = store
            .conversation("ag_1", "dv_1", Cursor::START, 50, false, Timestamp(T0 + 4))
            .await
            .expect("reads");
        assert!(items.iter().all(|i| i.kind != ItemKind::Update), "{name}");
        let (page, next) = store
            .conversation("ag_1", "dv_1", Cursor::START, 1, true, Timestamp(T0 + 4))
            .await
            .expect("reads");
        assert_eq!((page.len(), next), (1, m1.cursor), "{name}");

        // The tablet sees its own task only: neither the phone's task, the question sealed for the phone, nor
        // their updates.
        let (items, next) = store
            .conversation("ag_1", "dv_2", Cursor::START, 50, true, Timestamp(T0 + 4))
            .await
            .expect("reads");
        let seen: Vec<(&str, Option<ItemState>)> = items.iter().map(|i| (i.id.as_str(), i.state)).collect();
        assert_eq!(seen, [("t1", Some(ItemState::Sent))], "{name}");
        assert_eq!(
            next,
            cancelled.cursor(),
            "{name}: an empty tail still moves the cursor to the head"
        );
    }
}

#[tokio::test]
async fn a_cursor_never_skips_an_item_that_commits_later() {
    const SENDERS: usize = 8;
    const EACH: usize = 40;
    for backend in backends().await {
        let name = backend.name();
        let store = &two_agents(&backend).await;
        let barrier = Arc::new(Barrier::new(SENDERS + 1));
        let mut senders = Vec::new();
        for s in 0..SENDERS {
            let (store, barrier) = (store.clone(), barrier.clone());
            senders.push(tokio::spawn(async move {
                barrier.wait().await;
                for i in 0..EACH {
                    // Another agent's item between, so that the relay's sequence interleaves the agents.
                    store
                        .put_checkpoint("ag_2", &format!("c{s}_{i}"), "AQ", Timestamp(T0))
                        .await
                        .expect("stored");
                    send(&store, &format!("m{s}_{i}")).await;
                }
            }));
        }
        barrier.wait().await;
        let mut seen = HashSet::new();
        let (mut after, mut conversation_after) = (Cursor::START, Cursor::START);
        let mut in_conversation = HashSet::new();
        loop {
            let done = senders.iter().all(|s| s.is_finished());
            let read = store
                .wait_read("ag_1", None, after, 7, Timestamp(T0))
                .await
                .expect("reads");
            for m in &read.messages {
                assert!(
                    seen.insert(m.message_id.clone()),
                    "{name}: {} handed out twice",
                    m.message_id
                );
            }
            after = read.next;
            let (items, next) = store
                .conversation("ag_1", "dv_1", conversation_after, 5, true, Timestamp(T0))
                .await
                .expect("reads");
            for i in items {
                assert!(
                    in_conversation.insert(i.id.clone()),
                    "{name}: {} shown twice",
                    i.id
                );
            }
            conversation_after = next;
            if done && read.messages.is_empty() && conversation_after == after {
                break;
            }
        }
        for s in senders {
            s.await.expect("joined");
        }
        assert_eq!(
            seen.len(),
            SENDERS * EACH,
            "{name}: every task reached the agent's cursor"
        );
        assert_eq!(
            in_conversation.len(),
            SENDERS * EACH,
            "{name}: every task reached the device's cursor"
        );
    }
}

#[tokio::test]
async fn a_task_handed_out_again_says_redelivered_at_once() {
    for backend in backends().await {
        let name = backend.name();
        let store = &two_agents(&backend).await;
        for round in 0..20 {
            let task = send(store, &format!("m{round}")).await;
            let after = Cursor(task.cursor.seq() - 1);
            let read = store
                .wait_read("ag_1", None, after, 10, Timestamp(T0))
                .await
                .expect("reads");
            assert_eq!(read.messages.len(), 1, "{name}");
            assert!(
                !read.messages[0].redelivered,
                "{name}, round {round}: first delivery"
            );
            store.mark_delivered("ag_1", "default", after, task.cursor, Timestamp(T0 + 1));
            // At once, as an agent that restarts: the mark, queued by a task of its own and not yet committed,
            // is waited for.
            let read = store
                .wait_read("ag_1", None, after, 10, Timestamp(T0 + 2))
                .await
                .expect("reads");
            assert!(
                read.messages[0].redelivered,
                "{name}, round {round}: handed out again"
            );
        }
        let delivered = backend
            .count("SELECT COUNT(*) FROM items WHERE kind = 'message' AND delivered_at IS NOT NULL")
            .await;
        assert_eq!(delivered, 20, "{name}");
        // A processed task keeps no mark from a later delivery of the range.
        send(store, "late").await;
        store
            .mark_processed("ag_1", "late", "default", Timestamp(T0 + 3))
            .await
            .expect("ok");
        store.mark_delivered(
            "ag_1",
            "default",
            Cursor::START,
            store.global_head().await.expect("ok"),
            Timestamp(T0 + 4),
        );
        store
            .wait_read("ag_1", None, Cursor::START, 1, Timestamp(T0 + 5))
            .await
            .expect("reads after the mark");
        let late = backend
            .numbers("SELECT delivered_at FROM items WHERE item_id = 'late'")
            .await;
        assert_eq!(late, [None], "{name}");
    }
}
