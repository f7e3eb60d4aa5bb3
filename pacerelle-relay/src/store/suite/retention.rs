//! Retention: what a purge deletes by which age, what it keeps, in which batches — on each backend.

use pacerelle_core::Cursor;
use pacerelle_core::Timestamp;
use pacerelle_core::wire::{DeviceEnvelope, MessageCounts};

use super::questions::{ask, ask_ready};
use super::{Backend, T0, backends};
use crate::config::Retention;
use crate::store::retention::BATCH_ROWS;
use crate::store::{ItemPut, Purged, Put, ReplyPut, Store};

const DAY: i64 = 86_400_000;
/// When the purge runs in these tests.
const NOW: i64 = T0 + 400 * DAY;
/// Older than the tasks' 30 days, younger than the answer log's 365.
const MID: i64 = NOW - 300 * DAY;
/// Younger than both.
const NEW: i64 = NOW - DAY;

/// A copy for the phone, `dv_1`.
fn to_phone() -> Vec<DeviceEnvelope> {
    vec![DeviceEnvelope {
        device_id: "dv_1".into(),
        envelope: "AQID".into(),
    }]
}

/// The store of [`ask_ready`] (`ag_1`, its phone `dv_1` and tablet `dv_2`, a webhook) with a push subscription
/// for the phone.
async fn with_phone(backend: &Backend) -> Store {
    let store = ask_ready(backend).await;
    store
        .put_push_subscription(
            "ag_1",
            "dv_1",
            "https://push.example/1",
            &[4; 65],
            &[7; 16],
            Timestamp(T0),
        )
        .await
        .expect("a subscription");
    store
}

/// Task `id` from the phone stored at `at`, processed (with its update) at `processed`.
async fn task(store: &Store, id: &str, at: i64, processed: Option<i64>) {
    let put = store
        .put_message("ag_1", "dv_1", id, "AQ", None, u32::MAX, Timestamp(at))
        .await
        .expect("stored");
    assert!(matches!(put, Put::Stored(_)));
    if let Some(at) = processed {
        store
            .mark_processed("ag_1", id, "default", Timestamp(at))
            .await
            .expect("ok")
            .expect("marked");
    }
}

/// The phone's answer to question `id` at `at`.
async fn answer(store: &Store, id: &str, at: i64) {
    store
        .answer_question("ag_1", "dv_1", id, "BBBB", None, Timestamp(at))
        .await
        .expect("answered");
}

/// Tasks waiting, in progress and processed as the status reports them.
async fn counts(store: &Store) -> MessageCounts {
    store.status_facts("ag_1").await.expect("status").messages
}

/// The agent's counters: tasks ever stored, ever processed.
async fn counters(backend: &Backend) -> Vec<Option<i64>> {
    backend
        .numbers("SELECT messages, processed FROM agent_counts WHERE agent_id = 'ag_1'")
        .await
}

#[tokio::test]
async fn a_purge_deletes_exactly_what_is_older_than_its_kind_allows_and_keeps_the_counts() {
    for backend in backends().await {
        let name = backend.name();
        let store = &with_phone(&backend).await;
        // Tasks: processed long ago (goes), never processed (stays however old), stored long ago but processed
        // recently (stays: a task's age runs from its processing), recent.
        task(store, "m_old", T0, Some(T0 + 1)).await;
        task(store, "m_open", T0, None).await;
        task(store, "m_late", T0, Some(NEW)).await;
        task(store, "m_new", NEW, Some(NEW)).await;
        for (id, source, at) in [("r_old", "m_old", T0 + 2), ("r_new", "m_new", NEW)] {
            let put = store
                .put_reply("ag_1", id, source, &to_phone(), Timestamp(at))
                .await
                .expect("stored");
            assert!(matches!(put, ReplyPut::Stored(_)), "{name}");
        }
        for (id, at) in [("n_old", T0), ("n_new", NEW)] {
            store
                .put_notification("ag_1", id, &to_phone(), Timestamp(at))
                .await
                .expect("stored");
        }
        // Two old checkpoints: the newest of them stays, the agent resumes from it.
        store
            .put_checkpoint("ag_1", "c_1", "AQ", Timestamp(T0))
            .await
            .expect("stored");
        store
            .put_checkpoint("ag_1", "c_2", "AQ", Timestamp(T0 + 10))
            .await
            .expect("stored");
        // Questions (to the phone and the tablet) closed long ago in each way go; an old one still open stays;
        // one closed at MID is past the tasks' age but within the answer log's, so it stays while its delivered
        // webhook event goes.
        ask(store, "q_answered", T0, T0 + DAY).await;
        answer(store, "q_answered", T0 + 5).await;
        ask(store, "q_expired", T0, T0 + 1000).await;
        store.expire_due(Timestamp(T0 + 1000), 10).await.expect("expired");
        ask(store, "q_cancelled", T0, T0 + DAY).await;
        store
            .cancel_question("ag_1", "q_cancelled", Timestamp(T0 + 6))
            .await
            .expect("cancelled");
        ask(store, "q_open", T0, NOW + DAY).await;
        ask(store, "q_mid", MID, MID + DAY).await;
        answer(store, "q_mid", MID + 1).await;
        let mid_event = backend
            .strings("SELECT event_id FROM webhook_events WHERE question_id = 'q_mid'")
            .await;
        assert_eq!(mid_event.len(), 1, "{name}");
        store
            .event_delivered(&mid_event[0], 200, Timestamp(MID + 2))
            .await
            .expect("delivered");
        ask(store, "q_new", NEW, NEW + DAY).await;
        answer(store, "q_new", NEW + 1).await;

        let before = counts(store).await;
        assert_eq!(
            before,
            MessageCounts {
                waiting: 1,
                in_progress: 0,
                processed: 3
            },
            "{name}"
        );
        let counted = counters(&backend).await;
        assert_eq!(counted, [Some(4), Some(3)], "{name}");
        let head = backend.count("SELECT MAX(seq) FROM items").await;
        let r_old = backend
            .count("SELECT seq FROM items WHERE item_id = 'r_old'")
            .await;
        let cut = NOW - 30 * DAY;
        let old_pushes = backend
            .count(&format!(
                "SELECT COUNT(*) FROM push_outbox WHERE expires_at < {cut} AND next_attempt_at < {cut}"
            ))
            .await;
        // r_old, n_old, the three old questions and their updates, q_mid and its update: the phone's pushes
        // (the tablet has no subscription).
        assert_eq!(old_pushes, 2 + 3 * 2 + 2, "{name}");
        let old_pushes = u64::try_from(old_pushes).expect("positive");
        let commits = store.writer_counts().commits.get();

        let purged = store
            .purge(Timestamp(NOW), &Retention::default())
            .await
            .expect("purged");
        assert!(!purged.more, "{name}");
        // One write transaction per kind of row, each a commit.
        assert_eq!(purged.batches, 5, "{name}");
        assert_eq!(store.writer_counts().commits.get() - commits, 5, "{name}");

        let kept = backend
            .strings("SELECT kind || ' ' || item_id FROM items WHERE kind <> 'update' ORDER BY seq")
            .await;
        assert_eq!(
            kept,
            [
                "message m_open",
                "message m_late",
                "message m_new",
                "reply r_new",
                "notification n_new",
                "checkpoint c_2",
                "question q_open",
                "question q_mid",
                "question q_new",
            ],
            "{name}"
        );
        let updates = backend
            .strings(
                "SELECT s.item_id || ' ' || u.update_state FROM items u JOIN items s ON s.seq = u.subject_seq
                 WHERE u.kind = 'update' ORDER BY u.seq",
            )
            .await;
        assert_eq!(
            updates,
            [
                "m_late processed",
                "m_new processed",
                "q_mid answered",
                "q_new answered"
            ],
            "{name}"
        );
        // Nothing dangles: every update has its subject, every envelope and question its item.
        assert_eq!(
            backend
                .count("SELECT COUNT(*) FROM items WHERE kind = 'update'")
                .await,
            4,
            "{name}"
        );
        assert!(backend.dangling().await.is_empty(), "{name}");
        let enveloped = backend
            .strings(
                "SELECT i.item_id FROM item_envelopes e JOIN items i ON i.seq = e.item_seq ORDER BY i.seq",
            )
            .await;
        assert_eq!(
            enveloped,
            [
                "r_new", "n_new", "q_open", "q_open", "q_mid", "q_mid", "q_new", "q_new"
            ],
            "{name}"
        );
        assert_eq!(
            backend
                .strings("SELECT state FROM questions ORDER BY item_seq")
                .await,
            ["pending", "answered", "answered"],
            "{name}"
        );
        // The delivered event of q_mid went by the tasks' age; q_new's, still pending, stays.
        assert_eq!(
            backend.strings("SELECT question_id FROM webhook_events").await,
            ["q_new"],
            "{name}"
        );
        // Pushes whose TTL ended before the cut went; the others stay.
        let expired = backend
            .count(&format!(
                "SELECT COUNT(*) FROM push_outbox WHERE expires_at < {cut}"
            ))
            .await;
        assert_eq!(expired, 0, "{name}");
        assert!(
            backend.count("SELECT COUNT(*) FROM push_outbox").await > 0,
            "{name}"
        );
        assert_eq!(
            purged.rows,
            // m_old and its update, r_old and its envelope, n_old and its envelope, c_1, three questions with
            // their row, two envelopes, update and (pending) webhook event, q_mid's event, and the old pushes.
            2 + 2 + 2 + 1 + 3 * 6 + 1 + old_pushes,
            "{name}"
        );

        // The counters are those before: tasks waiting, and processed ever.
        assert_eq!(counts(store).await, before, "{name}");
        assert_eq!(counters(&backend).await, counted, "{name}");
        // The quota on tasks not yet processed still counts m_open alone.
        assert!(
            matches!(
                store
                    .put_message("ag_1", "dv_1", "m_refused", "AQ", None, 1, Timestamp(NOW))
                    .await
                    .expect("ok"),
                Put::QuotaExceeded
            ),
            "{name}"
        );
        let Put::Stored(stored) = store
            .put_message("ag_1", "dv_1", "m_after", "AQ", None, 2, Timestamp(NOW))
            .await
            .expect("ok")
        else {
            panic!("{name}: the second pending task fits the quota");
        };
        // No sequence number is reused, whatever the kind, and a cursor at a deleted item still reads what
        // follows it.
        let head = u64::try_from(head).expect("positive");
        assert!(stored.cursor.seq() > head, "{name}");
        let ItemPut::Stored(note, true) = store
            .put_notification("ag_1", "n_after", &to_phone(), Timestamp(NOW))
            .await
            .expect("ok")
        else {
            panic!("{name}: stored");
        };
        assert!(note.cursor.seq() > head, "{name}");
        let after = Cursor(u64::try_from(r_old).expect("positive"));
        let (items, _) = store
            .conversation("ag_1", "dv_1", after, 200, true, Timestamp(NOW))
            .await
            .expect("read");
        let ids: Vec<&str> = items.iter().map(|i| i.id.as_str()).collect();
        assert!(
            ids.contains(&"r_new") && ids.contains(&"m_after"),
            "{name}: {ids:?}"
        );
        assert!(items.iter().all(|i| i.cursor.seq() > after.seq()), "{name}");
        assert!(!ids.contains(&"n_old") && !ids.contains(&"r_old"), "{name}");

        // A second purge at the same time finds nothing.
        let again = store
            .purge(Timestamp(NOW), &Retention::default())
            .await
            .expect("purged");
        assert_eq!(again.rows, 0, "{name}");
    }
}

#[tokio::test]
async fn nothing_goes_when_the_relay_keeps_everything() {
    for backend in backends().await {
        let name = backend.name();
        let store = &with_phone(&backend).await;
        task(store, "m_old", T0, Some(T0 + 1)).await;
        store
            .put_notification("ag_1", "n_old", &to_phone(), Timestamp(T0))
            .await
            .expect("stored");
        ask(store, "q_old", T0, T0 + DAY).await;
        answer(store, "q_old", T0 + 5).await;
        let rows = backend.count("SELECT COUNT(*) FROM items").await;
        let purged = store
            .purge(Timestamp(NOW), &Retention::FOREVER)
            .await
            .expect("purged");
        assert_eq!(purged, Purged::default(), "{name}");
        assert_eq!(backend.count("SELECT COUNT(*) FROM items").await, rows, "{name}");
        // Only the answer log kept forever: the task and the notification go, the question stays.
        let keep_answers = Retention {
            answers: None,
            ..Retention::default()
        };
        let purged = store.purge(Timestamp(NOW), &keep_answers).await.expect("purged");
        assert!(purged.rows > 0, "{name}");
        assert_eq!(
            backend
                .strings("SELECT item_id FROM items WHERE kind <> 'update'")
                .await,
            ["q_old"],
            "{name}"
        );
    }
}

#[tokio::test]
async fn a_purge_deletes_in_batches_and_stops_at_its_bound() {
    for backend in backends().await {
        let name = backend.name();
        let store = &with_phone(&backend).await;
        // 1 200 tasks processed long ago, stored and marked as the relay does (the counters' triggers run).
        backend.old_tasks("m", 1200, false).await;
        task(store, "m_open", T0, None).await;
        let before = counts(store).await;
        let counted = counters(&backend).await;
        let commits = store.writer_counts().commits.get();

        let first = backend
            .purge_bounded(Timestamp(NOW), &Retention::default(), 2)
            .await;
        assert_eq!(
            first,
            Purged {
                rows: 2 * BATCH_ROWS as u64,
                batches: 2,
                more: true
            },
            "{name}"
        );
        // Each batch was a write transaction of its own.
        assert_eq!(store.writer_counts().commits.get() - commits, 2, "{name}");
        assert_eq!(
            backend
                .count("SELECT COUNT(*) FROM items WHERE kind = 'message'")
                .await,
            1200 - 1000 + 1,
            "{name}"
        );
        let rest = store
            .purge(Timestamp(NOW), &Retention::default())
            .await
            .expect("purged");
        assert_eq!(rest.rows, 200, "{name}");
        assert!(!rest.more, "{name}");
        // The oldest went first, and what is left is the task never processed.
        assert_eq!(
            backend
                .strings("SELECT item_id FROM items WHERE kind = 'message'")
                .await,
            ["m_open"],
            "{name}"
        );
        assert_eq!(counts(store).await, before, "{name}");
        assert_eq!(counters(&backend).await, counted, "{name}");

        // Tasks with their updates: a batch stops at the item that would start past BATCH_ROWS rows.
        backend.old_tasks("t", 300, true).await;
        let purged = backend
            .purge_bounded(Timestamp(NOW), &Retention::FOREVER, 1)
            .await;
        assert_eq!(purged, Purged::default(), "{name}");
        let purged = backend
            .purge_bounded(Timestamp(NOW), &Retention::default(), 1)
            .await;
        assert_eq!(
            purged,
            Purged {
                rows: BATCH_ROWS as u64,
                batches: 1,
                more: true
            },
            "{name}"
        );
        assert_eq!(
            backend
                .count("SELECT COUNT(*) FROM items WHERE kind = 'message'")
                .await,
            50 + 1,
            "{name}"
        );
        let purged = store
            .purge(Timestamp(NOW), &Retention::default())
            .await
            .expect("purged");
        assert_eq!(purged.rows, 100, "{name}");
    }
}
