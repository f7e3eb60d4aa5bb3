//! Retention: what is older than the relay's settings ([`Retention`]) is deleted, in small write transactions
//! that let the other writes through between them.
//!
//! Each kind of row goes by its own age (migration 0011 indexes each one, so a purge reads only what it
//! deletes, oldest first):
//!
//! - tasks processed before the cut of [`Retention::items`], with the `update` items about them; replies,
//!   notifications and checkpoints stored before it, except each agent's newest checkpoint; webhook events
//!   delivered or failed, created before it; pushes whose TTL ended before it;
//! - questions closed (answered, expired, cancelled) before the cut of [`Retention::answers`], with their
//!   envelopes, updates and webhook events.
//!
//! Tasks not yet processed and open questions are never deleted. Nothing is renumbered: `seq` is
//! AUTOINCREMENT, so a cursor taken before a purge still orders after the same items, and finds fewer. The
//! counters of `agent_counts` count tasks ever stored and ever processed; only processed tasks are deleted, so
//! tasks not yet processed (their difference) stay exact.
//!
//! A write deletes at most [`BATCH_ROWS`] rows, then the purge queues its next write behind whatever other
//! writes arrived meanwhile; one purge runs at most [`MAX_BATCHES`] writes, and the next sweep goes on.

use pacerelle_core::Timestamp;
use rusqlite::{Connection, params};

use super::{Result, SqliteStore};
use crate::config::Retention;
use crate::store::Purged;
use crate::store::retention::{BATCH_ROWS, MAX_BATCHES, Step};

impl SqliteStore {
    /// Deletes what is older than `retention` at `now`, in write transactions of at most [`BATCH_ROWS`] rows,
    /// at most [`MAX_BATCHES`] of them.
    pub(crate) async fn purge(&self, now: Timestamp, retention: &Retention) -> Result<Purged> {
        self.purge_bounded(now, retention, MAX_BATCHES).await
    }

    /// [`SqliteStore::purge`] with another bound on the write transactions.
    async fn purge_bounded(&self, now: Timestamp, retention: &Retention, max_batches: u32) -> Result<Purged> {
        // Paced: the tasks whose writes wait for the writer queue them before the next batch.
        crate::store::retention::purge(now, retention, max_batches, true, |step, cut| async move {
            let (rows, more) = self.write(move |conn| batch(conn, step, cut)).await?;
            Ok((rows as u64, more))
        })
        .await
    }
}

/// Deletes up to [`BATCH_ROWS`] rows of `step` older than `cut`: the rows deleted, and whether more may be left.
fn batch(conn: &Connection, step: Step, cut: i64) -> Result<(usize, bool)> {
    let limit = BATCH_ROWS as i64;
    let seqs: Vec<i64> = match step {
        Step::Tasks => conn
            .prepare_cached(
                "SELECT seq FROM items WHERE processed_at < ?1 AND kind = 'message'
                 ORDER BY processed_at LIMIT ?2",
            )?
            .query_map(params![cut, limit], |r| r.get(0))?
            .collect::<Result<_, _>>()?,
        Step::Sent => conn
            .prepare_cached(
                "SELECT seq FROM items i
                 WHERE kind IN ('reply', 'notification', 'checkpoint') AND created_at < ?1
                   AND NOT (kind = 'checkpoint'
                            AND seq = (SELECT MAX(seq) FROM items c
                                       WHERE c.agent_id = i.agent_id AND c.kind = 'checkpoint'))
                 ORDER BY created_at LIMIT ?2",
            )?
            .query_map(params![cut, limit], |r| r.get(0))?
            .collect::<Result<_, _>>()?,
        Step::Questions => conn
            .prepare_cached(
                "SELECT item_seq FROM questions WHERE closed_at < ?1 ORDER BY closed_at LIMIT ?2",
            )?
            .query_map(params![cut, limit], |r| r.get(0))?
            .collect::<Result<_, _>>()?,
        Step::Events => {
            let rows = conn
                .prepare_cached(
                    "DELETE FROM webhook_events WHERE event_id IN
                         (SELECT event_id FROM webhook_events WHERE state <> 'pending' AND created_at < ?1
                          ORDER BY created_at LIMIT ?2)",
                )?
                .execute(params![cut, limit])?;
            return Ok((rows, rows == BATCH_ROWS));
        }
        Step::Pushes => {
            // A push is tried until its TTL (`expires_at`), never later: one whose TTL ended before the cut
            // will not be sent. The range on `next_attempt_at` reads the outbox's own index.
            let rows = conn
                .prepare_cached(
                    "DELETE FROM push_outbox WHERE push_id IN
                         (SELECT push_id FROM push_outbox WHERE next_attempt_at < ?1 AND expires_at < ?1
                          LIMIT ?2)",
                )?
                .execute(params![cut, limit])?;
            return Ok((rows, rows == BATCH_ROWS));
        }
    };
    let found = seqs.len();
    let mut rows = 0;
    for seq in seqs {
        if rows >= BATCH_ROWS {
            // Items found are left: the next batch takes them.
            return Ok((rows, true));
        }
        rows += delete_item(conn, seq)?;
    }
    Ok((rows, found == BATCH_ROWS))
}

/// Deletes the item `seq` with what depends on it: a question's webhook events and state, the `update` items
/// about it, its per-device envelopes. Returns the rows deleted. The foreign keys are checked through indexes
/// (migration 0011 adds the one on `subject_seq`).
fn delete_item(conn: &Connection, seq: i64) -> Result<usize> {
    let mut rows = 0;
    for sql in [
        "DELETE FROM webhook_events WHERE question_seq = ?1",
        "DELETE FROM questions WHERE item_seq = ?1",
        "DELETE FROM items WHERE subject_seq = ?1 AND kind = 'update'",
        "DELETE FROM item_envelopes WHERE item_seq = ?1",
        "DELETE FROM items WHERE seq = ?1",
    ] {
        rows += conn.prepare_cached(sql)?.execute([seq])?;
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use pacerelle_core::Cursor;
    use pacerelle_core::question::QuestionKind;
    use pacerelle_core::wire::{DeviceEnvelope, MessageCounts};

    use super::super::tests::{T0, store};
    use super::*;
    use crate::store::{ItemPut, NewQuestion, Put, QuestionPut, ReplyPut};

    const DAY: i64 = 86_400_000;
    /// When the purge runs in these tests.
    const NOW: i64 = T0 + 400 * DAY;
    /// Older than the tasks' 30 days, younger than the answer log's 365.
    const MID: i64 = NOW - 300 * DAY;
    /// Younger than both.
    const NEW: i64 = NOW - DAY;

    fn to_phone() -> Vec<DeviceEnvelope> {
        vec![DeviceEnvelope {
            device_id: "dv_1".into(),
            envelope: "AQID".into(),
        }]
    }

    /// The store of `super::super::tests::store` with a phone, a webhook and a push subscription for the phone.
    async fn with_phone() -> (SqliteStore, tempfile::TempDir) {
        let (store, dir) = store().await;
        store
            .write(|conn| {
                conn.execute(
                    "INSERT INTO devices (device_id, agent_id, name, role, token_hash, created_at)
                     VALUES ('dv_1', 'ag_1', 'phone', 'owner', x'00', ?1)",
                    [T0],
                )?;
                Ok(())
            })
            .await
            .expect("a device");
        store
            .set_webhook(
                "ag_1",
                "http://127.0.0.1:9/hook",
                "0123456789abcdef",
                Timestamp(T0),
            )
            .await
            .expect("a webhook");
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
        (store, dir)
    }

    async fn task(store: &SqliteStore, id: &str, at: i64, processed: Option<i64>) {
        let put = store
            .put_message("ag_1", "dv_1", id, "AQ", u32::MAX, Timestamp(at))
            .await
            .expect("stored");
        assert!(matches!(put, Put::Stored(_)));
        if let Some(at) = processed {
            store
                .mark_processed("ag_1", id, Timestamp(at))
                .await
                .expect("ok")
                .expect("marked");
        }
    }

    async fn ask(store: &SqliteStore, id: &str, at: i64, expires_at: i64) {
        let envelopes = to_phone();
        let q = NewQuestion {
            question_id: id,
            kind: QuestionKind::YesNo,
            expires_at: Timestamp(expires_at),
            self_envelope: "AAAA",
            envelopes: &envelopes,
            user_id: None,
        };
        let put = store
            .put_question("ag_1", &q, u32::MAX, Timestamp(at))
            .await
            .expect("ok");
        assert!(matches!(put, QuestionPut::Item(item) if matches!(*item, ItemPut::Stored(_, true))));
    }

    async fn answer(store: &SqliteStore, id: &str, at: i64) {
        store
            .answer_question("ag_1", "dv_1", id, "BBBB", None, Timestamp(at))
            .await
            .expect("answered");
    }

    async fn strings(store: &SqliteStore, sql: &'static str) -> Vec<String> {
        sqlx::query_scalar(sql)
            .fetch_all(&store.read)
            .await
            .expect("read")
    }

    async fn count(store: &SqliteStore, sql: &'static str) -> i64 {
        sqlx::query_scalar(sql)
            .fetch_one(&store.read)
            .await
            .expect("read")
    }

    /// Tasks waiting, in progress and processed as the status reports them.
    async fn counts(store: &SqliteStore) -> MessageCounts {
        store.status_facts("ag_1").await.expect("status").messages
    }

    #[tokio::test]
    async fn a_purge_deletes_exactly_what_is_older_than_its_kind_allows_and_keeps_the_counts() {
        let (store, _dir) = with_phone().await;
        // Tasks: processed long ago (goes), never processed (stays however old), stored long ago but processed
        // recently (stays: a task's age runs from its processing), recent.
        task(&store, "m_old", T0, Some(T0 + 1)).await;
        task(&store, "m_open", T0, None).await;
        task(&store, "m_late", T0, Some(NEW)).await;
        task(&store, "m_new", NEW, Some(NEW)).await;
        for (id, source, at) in [("r_old", "m_old", T0 + 2), ("r_new", "m_new", NEW)] {
            let put = store
                .put_reply("ag_1", id, source, &to_phone(), Timestamp(at))
                .await
                .expect("stored");
            assert!(matches!(put, ReplyPut::Stored(_)));
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
        // Questions closed long ago in each way go; an old one still open stays; one closed at MID is past the
        // tasks' age but within the answer log's, so it stays while its delivered webhook event goes.
        ask(&store, "q_answered", T0, T0 + DAY).await;
        answer(&store, "q_answered", T0 + 5).await;
        ask(&store, "q_expired", T0, T0 + 1000).await;
        store.expire_due(Timestamp(T0 + 1000), 10).await.expect("expired");
        ask(&store, "q_cancelled", T0, T0 + DAY).await;
        store
            .cancel_question("ag_1", "q_cancelled", Timestamp(T0 + 6))
            .await
            .expect("cancelled");
        ask(&store, "q_open", T0, NOW + DAY).await;
        ask(&store, "q_mid", MID, MID + DAY).await;
        answer(&store, "q_mid", MID + 1).await;
        let mid_event = strings(
            &store,
            "SELECT event_id FROM webhook_events WHERE question_id = 'q_mid'",
        )
        .await;
        assert_eq!(mid_event.len(), 1);
        store
            .event_delivered(&mid_event[0], 200, Timestamp(MID + 2))
            .await
            .expect("delivered");
        ask(&store, "q_new", NEW, NEW + DAY).await;
        answer(&store, "q_new", NEW + 1).await;

        let before = counts(&store).await;
        assert_eq!(
            before,
            MessageCounts {
                waiting: 1,
                in_progress: 0,
                processed: 3
            }
        );
        let head = count(&store, "SELECT MAX(seq) FROM items").await;
        let r_old = count(&store, "SELECT seq FROM items WHERE item_id = 'r_old'").await;
        let cut = NOW - 30 * DAY;
        let old_pushes: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM push_outbox WHERE expires_at < ?1")
            .bind(cut)
            .fetch_one(&store.read)
            .await
            .expect("read");
        // r_old, n_old, the three old questions and their updates, q_mid and its update.
        assert_eq!(old_pushes, 2 + 3 * 2 + 2);
        let old_pushes = u64::try_from(old_pushes).expect("positive");

        let purged = store
            .purge(Timestamp(NOW), &Retention::default())
            .await
            .expect("purged");
        assert!(!purged.more);

        let kept = strings(
            &store,
            "SELECT kind || ' ' || item_id FROM items WHERE kind <> 'update' ORDER BY seq",
        )
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
            ]
        );
        let updates = strings(
            &store,
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
            ]
        );
        // Nothing dangles: every update has its subject, every envelope and question its item.
        assert_eq!(
            count(&store, "SELECT COUNT(*) FROM items WHERE kind = 'update'").await,
            4
        );
        assert!(
            strings(&store, "SELECT 'x' FROM pragma_foreign_key_check")
                .await
                .is_empty()
        );
        let enveloped = strings(
            &store,
            "SELECT i.item_id FROM item_envelopes e JOIN items i ON i.seq = e.item_seq ORDER BY i.seq",
        )
        .await;
        assert_eq!(enveloped, ["r_new", "n_new", "q_open", "q_mid", "q_new"]);
        assert_eq!(
            strings(&store, "SELECT state FROM questions ORDER BY item_seq").await,
            ["pending", "answered", "answered"]
        );
        // The delivered event of q_mid went by the tasks' age; q_new's, still pending, stays.
        assert_eq!(
            strings(&store, "SELECT question_id FROM webhook_events").await,
            ["q_new"]
        );
        // Pushes whose TTL ended before the cut went; the others stay.
        let expired: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM push_outbox WHERE expires_at < ?1")
            .bind(cut)
            .fetch_one(&store.read)
            .await
            .expect("read");
        assert_eq!(expired, 0);
        assert!(count(&store, "SELECT COUNT(*) FROM push_outbox").await > 0);
        assert_eq!(
            purged.rows,
            // m_old and its update, r_old and its envelope, n_old and its envelope, c_1, three questions with
            // their row, envelope, update and (pending) webhook event, q_mid's event, and the old pushes.
            2 + 2 + 2 + 1 + 3 * 5 + 1 + old_pushes
        );

        // The counters are those before: tasks waiting, and processed ever.
        assert_eq!(counts(&store).await, before);
        // The quota on tasks not yet processed still counts m_open alone.
        assert!(matches!(
            store
                .put_message("ag_1", "dv_1", "m_refused", "AQ", 1, Timestamp(NOW))
                .await
                .expect("ok"),
            Put::QuotaExceeded
        ));
        let Put::Stored(stored) = store
            .put_message("ag_1", "dv_1", "m_after", "AQ", 2, Timestamp(NOW))
            .await
            .expect("ok")
        else {
            panic!("the second pending task fits the quota");
        };
        // No sequence number is reused, and a cursor at a deleted item still reads what follows it.
        assert!(stored.cursor.seq() > u64::try_from(head).expect("positive"));
        let after = Cursor(u64::try_from(r_old).expect("positive"));
        let (items, _) = store
            .conversation("ag_1", "dv_1", after, 200, true, Timestamp(NOW))
            .await
            .expect("read");
        let ids: Vec<&str> = items.iter().map(|i| i.id.as_str()).collect();
        assert!(ids.contains(&"r_new") && ids.contains(&"m_after"), "{ids:?}");
        assert!(items.iter().all(|i| i.cursor.seq() > after.seq()));
        assert!(!ids.contains(&"n_old") && !ids.contains(&"r_old"));

        // A second purge at the same time finds nothing.
        let again = store
            .purge(Timestamp(NOW), &Retention::default())
            .await
            .expect("purged");
        assert_eq!(again.rows, 0);
    }

    #[tokio::test]
    async fn nothing_goes_when_the_relay_keeps_everything() {
        let (store, _dir) = with_phone().await;
        task(&store, "m_old", T0, Some(T0 + 1)).await;
        store
            .put_notification("ag_1", "n_old", &to_phone(), Timestamp(T0))
            .await
            .expect("stored");
        ask(&store, "q_old", T0, T0 + DAY).await;
        answer(&store, "q_old", T0 + 5).await;
        let rows = count(&store, "SELECT COUNT(*) FROM items").await;
        let purged = store
            .purge(Timestamp(NOW), &Retention::FOREVER)
            .await
            .expect("purged");
        assert_eq!(purged, Purged::default());
        assert_eq!(count(&store, "SELECT COUNT(*) FROM items").await, rows);
        // Only the answer log kept forever: the task and the notification go, the question stays.
        let purged = store
            .purge(
                Timestamp(NOW),
                &Retention {
                    answers: None,
                    ..Retention::default()
                },
            )
            .await
            .expect("purged");
        assert!(purged.rows > 0);
        assert_eq!(
            strings(&store, "SELECT item_id FROM items WHERE kind <> 'update'").await,
            ["q_old"]
        );
    }

    #[tokio::test]
    async fn a_purge_deletes_in_batches_and_stops_at_its_bound() {
        let (store, _dir) = with_phone().await;
        // 1 200 tasks processed long ago, stored and marked as the relay does (the counters' triggers run).
        store
            .write(|conn| {
                conn.execute(
                    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1200)
                     INSERT INTO items (agent_id, kind, item_id, device_id, envelope, created_at)
                     SELECT 'ag_1', 'message', 'm' || i, 'dv_1', 'AQ', ?1 + i FROM n",
                    [T0],
                )?;
                conn.execute(
                    "UPDATE items SET processed_at = created_at + 1 WHERE kind = 'message'",
                    [],
                )?;
                Ok(())
            })
            .await
            .expect("tasks");
        task(&store, "m_open", T0, None).await;
        let before = counts(&store).await;
        let commits = store.writer_counts().commits.get();

        let first = store
            .purge_bounded(Timestamp(NOW), &Retention::default(), 2)
            .await
            .expect("purged");
        assert_eq!(
            first,
            Purged {
                rows: 2 * BATCH_ROWS as u64,
                batches: 2,
                more: true
            }
        );
        // Each batch was a write transaction of its own.
        assert_eq!(store.writer_counts().commits.get() - commits, 2);
        assert_eq!(
            count(&store, "SELECT COUNT(*) FROM items WHERE kind = 'message'").await,
            1200 - 1000 + 1
        );
        let rest = store
            .purge(Timestamp(NOW), &Retention::default())
            .await
            .expect("purged");
        assert_eq!(rest.rows, 200);
        assert!(!rest.more);
        // The oldest went first, and what is left is the task never processed.
        assert_eq!(
            strings(&store, "SELECT item_id FROM items WHERE kind = 'message'").await,
            ["m_open"]
        );
        assert_eq!(counts(&store).await, before);
    }
}
