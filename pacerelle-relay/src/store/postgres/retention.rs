//! The PostgreSQL backend: retention (mirrors `sqlite/retention.rs`, whose documentation says what goes and
//! when). What is older than the relay's settings ([`Retention`]) is deleted in small transactions: at most
//! [`BATCH_ROWS`] rows each (an item deleted with its dependents may pass it by those), at most [`MAX_BATCHES`]
//! per purge, the same bounds and the same counts as SQLite's.
//!
//! PostgreSQL runs other writes beside a purge. A batch of items first locks the counter rows of the agents
//! whose items it deletes (in the order of their ids), as every write that inserts items locks its agent's
//! first: a write that adds an `update` about an item, or refers to it otherwise, is then never waiting for the
//! purge while the purge waits for it. The other kinds (finished webhook events, pushes past their TTL) are
//! rows nobody else writes; their batches skip rows another transaction holds. Several instances may purge at
//! once: each deletes what the other did not.

use super::prelude::*;
use crate::store::retention::{BATCH_ROWS, MAX_BATCHES, Step};

impl PgStore {
    /// Deletes what is older than `retention` at `now`, in transactions of at most [`BATCH_ROWS`] rows, at
    /// most [`MAX_BATCHES`] of them.
    pub(crate) async fn purge(&self, now: Timestamp, retention: &Retention) -> Result<Purged> {
        self.purge_bounded(now, retention, MAX_BATCHES).await
    }

    /// [`PgStore::purge`] with another bound on the transactions.
    async fn purge_bounded(&self, now: Timestamp, retention: &Retention, max_batches: u32) -> Result<Purged> {
        crate::store::retention::purge(now, retention, max_batches, false, |step, cut| {
            self.batch(step, cut)
        })
        .await
    }

    /// Deletes up to [`BATCH_ROWS`] rows of `step` older than `cut` in one transaction: the rows deleted, and
    /// whether more may be left.
    async fn batch(&self, step: Step, cut: i64) -> Result<(u64, bool)> {
        let limit = BATCH_ROWS as i64;
        let mut tx = self.pool.begin().await?;
        let found: Vec<(i64, String)> = match step {
            Step::Tasks => {
                sqlx::query_as(
                    "SELECT seq, agent_id FROM items
                     WHERE processed_at < $1 AND kind = 'message'
                     ORDER BY processed_at LIMIT $2",
                )
                .bind(cut)
                .bind(limit)
                .fetch_all(&mut *tx)
                .await?
            }
            Step::Sent => {
                sqlx::query_as(
                    "SELECT seq, agent_id FROM items i
                     WHERE kind IN ('reply', 'notification', 'checkpoint') AND created_at < $1
                       AND NOT (kind = 'checkpoint'
                                AND seq = (SELECT MAX(seq) FROM items c
                                           WHERE c.agent_id = i.agent_id AND c.kind = 'checkpoint'))
                     ORDER BY created_at LIMIT $2",
                )
                .bind(cut)
                .bind(limit)
                .fetch_all(&mut *tx)
                .await?
            }
            Step::Questions => {
                sqlx::query_as(
                    "SELECT item_seq, agent_id FROM questions WHERE closed_at < $1
                     ORDER BY closed_at LIMIT $2",
                )
                .bind(cut)
                .bind(limit)
                .fetch_all(&mut *tx)
                .await?
            }
            Step::Events => {
                let done = sqlx::query(
                    "DELETE FROM webhook_events WHERE event_id IN
                         (SELECT event_id FROM webhook_events WHERE state <> 'pending' AND created_at < $1
                          ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED)",
                )
                .bind(cut)
                .bind(limit)
                .execute(&mut *tx)
                .await?;
                return self.commit(tx, done.rows_affected()).await;
            }
            Step::Pushes => {
                // A push is tried until its TTL (`expires_at`), never later: one whose TTL ended before the cut
                // will not be sent. The range on `next_attempt_at` reads the outbox's own index.
                let done = sqlx::query(
                    "DELETE FROM push_outbox WHERE push_id IN
                         (SELECT push_id FROM push_outbox WHERE next_attempt_at < $1 AND expires_at < $1
                          LIMIT $2 FOR UPDATE SKIP LOCKED)",
                )
                .bind(cut)
                .bind(limit)
                .execute(&mut *tx)
                .await?;
                return self.commit(tx, done.rows_affected()).await;
            }
        };
        let more = found.len() == BATCH_ROWS;
        if found.is_empty() {
            return self.commit(tx, 0).await;
        }
        let mut agents: Vec<&str> = found.iter().map(|(_, agent)| agent.as_str()).collect();
        agents.sort_unstable();
        agents.dedup();
        sqlx::query("SELECT 1 FROM agent_counts WHERE agent_id = ANY($1) ORDER BY agent_id FOR UPDATE")
            .bind(&agents)
            .execute(&mut *tx)
            .await?;
        // What each item takes with it, so the batch stops where SQLite's does: before the item that would
        // start once BATCH_ROWS rows are deleted.
        let seqs: Vec<i64> = found.iter().map(|(seq, _)| *seq).collect();
        let costs: Vec<(i64, i64)> = sqlx::query_as(
            "SELECT c.seq,
                    (SELECT COUNT(*) FROM webhook_events e WHERE e.question_seq = c.seq)
                  + (SELECT COUNT(*) FROM questions q WHERE q.item_seq = c.seq)
                  + (SELECT COUNT(*) FROM items u WHERE u.subject_seq = c.seq AND u.kind = 'update')
                  + (SELECT COUNT(*) FROM item_envelopes v WHERE v.item_seq = c.seq)
                  + (SELECT COUNT(*) FROM items i WHERE i.seq = c.seq)
             FROM unnest($1::BIGINT[]) WITH ORDINALITY AS c (seq, n)
             ORDER BY c.n",
        )
        .bind(&seqs)
        .fetch_all(&mut *tx)
        .await?;
        let mut counted: u64 = 0;
        let mut taken = Vec::with_capacity(costs.len());
        let mut left = false;
        for (seq, cost) in costs {
            if counted >= BATCH_ROWS as u64 {
                // Items found are left: the next batch takes them.
                left = true;
                break;
            }
            counted += u64::try_from(cost).unwrap_or(0);
            taken.push(seq);
        }
        let mut rows = 0;
        for sql in [
            "DELETE FROM webhook_events WHERE question_seq = ANY($1)",
            "DELETE FROM questions WHERE item_seq = ANY($1)",
            "DELETE FROM items WHERE subject_seq = ANY($1) AND kind = 'update'",
            "DELETE FROM item_envelopes WHERE item_seq = ANY($1)",
            "DELETE FROM items WHERE seq = ANY($1)",
        ] {
            rows += sqlx::query(sql)
                .bind(&taken)
                .execute(&mut *tx)
                .await?
                .rows_affected();
        }
        let (rows, _) = self.commit(tx, rows).await?;
        Ok((rows, left || more))
    }

    /// Commits a batch that deleted `rows` rows: the rows, and whether a full batch may have left more.
    async fn commit(&self, tx: sqlx::Transaction<'_, sqlx::Postgres>, rows: u64) -> Result<(u64, bool)> {
        tx.commit().await?;
        self.committed();
        Ok((rows, rows == BATCH_ROWS as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::super::push::tests::{T0, item, store};
    use super::*;

    const DAY: i64 = 86_400_000;
    /// When the purge runs in these tests.
    const NOW: i64 = T0 + 400 * DAY;
    /// Older than the tasks' 30 days, younger than the answer log's 365.
    const MID: i64 = NOW - 300 * DAY;
    /// Younger than both.
    const NEW: i64 = NOW - DAY;

    async fn strings(store: &PgStore, sql: &'static str) -> Vec<String> {
        sqlx::query_scalar(sql)
            .fetch_all(&store.pool)
            .await
            .expect("read")
    }

    async fn count(store: &PgStore, sql: &'static str) -> i64 {
        sqlx::query_scalar(sql)
            .fetch_one(&store.pool)
            .await
            .expect("read")
    }

    /// The agent's counters: tasks ever stored, ever processed.
    async fn counters(store: &PgStore) -> (i64, i64) {
        sqlx::query_as("SELECT messages, processed FROM agent_counts WHERE agent_id = 'ag_1'")
            .fetch_one(&store.pool)
            .await
            .expect("read")
    }

    /// A task stored at `at`, processed (with its update) at `processed`.
    async fn task(store: &PgStore, id: &str, at: i64, processed: Option<i64>) {
        let (seq, _) = item(store, "message", id, None, &[], at).await;
        if let Some(when) = processed {
            sqlx::query("UPDATE items SET processed_at = $2 WHERE seq = $1")
                .bind(seq)
                .bind(when)
                .execute(&store.pool)
                .await
                .expect("processed");
            item(
                store,
                "update",
                &format!("u_{id}"),
                Some((seq, "processed")),
                &[],
                when,
            )
            .await;
        }
    }

    /// A question to the phone asked at `at`, closed in `state` at `closed` (with its update and a webhook
    /// event in `event`), or left open.
    async fn question(store: &PgStore, id: &str, at: i64, closed: Option<(&str, i64, &str)>) {
        let (seq, _) = item(store, "question", id, None, &["dv_1"], at).await;
        let Some((state, when, event)) = closed else {
            return;
        };
        sqlx::query(
            "UPDATE questions SET state = $2, closed_at = $3,
                 answered_by = CASE WHEN $2 = 'answered' THEN 'dv_1' END,
                 answered_at = CASE WHEN $2 = 'answered' THEN $3 END,
                 answer_envelope = CASE WHEN $2 = 'answered' THEN 'BBBB' END,
                 channel = CASE WHEN $2 = 'answered' THEN 'phone' END
             WHERE item_seq = $1",
        )
        .bind(seq)
        .bind(state)
        .bind(when)
        .execute(&store.pool)
        .await
        .expect("closed");
        item(store, "update", &format!("u_{id}"), Some((seq, state)), &[], when).await;
        sqlx::query(
            "INSERT INTO webhook_events (event_id, agent_id, event_type, question_seq, question_id, body, state,
                                         created_at, next_attempt_at, delivered_at)
             VALUES ($1, 'ag_1', 'question.' || $2, $3, $4, '{}', $5, $6,
                     CASE WHEN $5 = 'pending' THEN $6 END, CASE WHEN $5 = 'delivered' THEN $6 + 1 END)",
        )
        .bind(format!("evt_{id}"))
        .bind(state)
        .bind(seq)
        .bind(id)
        .bind(event)
        .bind(when)
        .execute(&store.pool)
        .await
        .expect("an event");
    }

    #[tokio::test]
    async fn old_rows_go_by_their_own_age_and_open_work_stays() {
        let Some((store, _url, _dir)) = store("retention").await else {
            return;
        };
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
        task(&store, "m_old", T0, Some(T0 + 1)).await;
        task(&store, "m_open", T0, None).await;
        task(&store, "m_late", T0, Some(NEW)).await;
        task(&store, "m_new", NEW, Some(NEW + 1)).await;
        for (kind, id, at) in [
            ("reply", "r_old", T0),
            ("reply", "r_new", NEW),
            ("notification", "n_old", T0),
            ("notification", "n_new", NEW),
        ] {
            item(&store, kind, id, None, &["dv_1"], at).await;
        }
        // Two old checkpoints: the newest of them stays, the agent resumes from it.
        item(&store, "checkpoint", "c_1", None, &[], T0).await;
        item(&store, "checkpoint", "c_2", None, &[], T0 + 10).await;
        question(&store, "q_answered", T0, Some(("answered", T0 + 5, "pending"))).await;
        question(&store, "q_expired", T0, Some(("expired", T0 + 1000, "pending"))).await;
        question(&store, "q_cancelled", T0, Some(("cancelled", T0 + 6, "pending"))).await;
        question(&store, "q_open", T0, None).await;
        // Closed past the tasks' age but within the answer log's: it stays, its delivered event goes.
        question(&store, "q_mid", MID, Some(("answered", MID + 1, "delivered"))).await;
        question(&store, "q_new", NEW, Some(("answered", NEW + 1, "pending"))).await;

        let before = counters(&store).await;
        assert_eq!(before, (4, 3));
        let head = count(&store, "SELECT MAX(seq) FROM items").await;
        let cut = NOW - 30 * DAY;
        let old_pushes: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM push_outbox WHERE expires_at < $1 AND next_attempt_at < $1",
        )
        .bind(cut)
        .fetch_one(&store.pool)
        .await
        .expect("read");
        // r_old, n_old, the four old questions (q_open's TTL too) and three updates, q_mid and its update.
        assert_eq!(old_pushes, 2 + 4 + 3 + 2);
        let commits = store.writer_counts().commits.get();

        let purged = store
            .purge(Timestamp(NOW), &Retention::default())
            .await
            .expect("purged");
        assert!(!purged.more);
        // One transaction per kind of row, each a commit.
        assert_eq!(purged.batches, 5);
        assert_eq!(store.writer_counts().commits.get() - commits, 5);

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
        assert_eq!(
            count(&store, "SELECT COUNT(*) FROM items WHERE kind = 'update'").await,
            4
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
        assert_eq!(
            strings(&store, "SELECT question_id FROM webhook_events").await,
            ["q_new"]
        );
        let expired: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM push_outbox WHERE expires_at < $1")
            .bind(cut)
            .fetch_one(&store.pool)
            .await
            .expect("read");
        assert_eq!(expired, 0);
        assert!(count(&store, "SELECT COUNT(*) FROM push_outbox").await > 0);
        assert_eq!(
            purged.rows,
            // m_old and its update, r_old and its envelope, n_old and its envelope, c_1, three questions with
            // their row, envelope, update and (pending) webhook event, q_mid's event, and the old pushes.
            2 + 2 + 2 + 1 + 3 * 5 + 1 + u64::try_from(old_pushes).expect("positive")
        );
        // The counters are those before; no sequence number is reused.
        assert_eq!(counters(&store).await, before);
        let (after, _) = item(&store, "notification", "n_after", None, &[], NOW).await;
        assert!(after > head);

        // A second purge at the same time finds nothing.
        let again = store
            .purge(Timestamp(NOW), &Retention::default())
            .await
            .expect("purged");
        assert_eq!(again.rows, 0);
        store.close().await;
    }

    #[tokio::test]
    async fn nothing_goes_when_the_relay_keeps_everything() {
        let Some((store, _url, _dir)) = store("retention forever").await else {
            return;
        };
        task(&store, "m_old", T0, Some(T0 + 1)).await;
        item(&store, "notification", "n_old", None, &["dv_1"], T0).await;
        question(&store, "q_old", T0, Some(("answered", T0 + 5, "delivered"))).await;
        let rows = count(&store, "SELECT COUNT(*) FROM items").await;
        let purged = store
            .purge(Timestamp(NOW), &Retention::FOREVER)
            .await
            .expect("purged");
        assert_eq!(purged, Purged::default());
        assert_eq!(count(&store, "SELECT COUNT(*) FROM items").await, rows);
        // Only the answer log kept forever: the task and the notification go, the question stays.
        let keep_answers = Retention {
            answers: None,
            ..Retention::default()
        };
        let purged = store.purge(Timestamp(NOW), &keep_answers).await.expect("purged");
        assert!(purged.rows > 0);
        assert_eq!(
            strings(&store, "SELECT item_id FROM items WHERE kind <> 'update'").await,
            ["q_old"]
        );
        store.close().await;
    }

    /// `n` tasks of `ag_1` (ids `prefix` and a number) processed long ago, each with its update if `updates`.
    async fn old_tasks(store: &PgStore, prefix: &str, n: i64, updates: bool) {
        let mut tx = store.pool.begin().await.expect("begins");
        super::super::lock_agent(&mut tx, "ag_1").await.expect("locks");
        sqlx::query(
            "INSERT INTO items (agent_id, kind, item_id, device_id, envelope, created_at, processed_at)
             SELECT 'ag_1', 'message', $1 || i, 'dv_1', 'AQ', $2 + i, $2 + i + 1 FROM generate_series(1, $3) AS i",
        )
        .bind(prefix)
        .bind(T0)
        .bind(n)
        .execute(&mut *tx)
        .await
        .expect("tasks");
        if updates {
            sqlx::query(
                "INSERT INTO items (agent_id, kind, item_id, device_id, created_at, subject_seq, update_state)
                 SELECT agent_id, 'update', 'u' || seq, device_id, processed_at, seq, 'processed'
                 FROM items WHERE kind = 'message' AND item_id LIKE $1 || '%'",
            )
            .bind(prefix)
            .execute(&mut *tx)
            .await
            .expect("updates");
        }
        tx.commit().await.expect("commits");
    }

    #[tokio::test]
    async fn a_purge_deletes_in_batches_and_stops_at_its_bound() {
        let Some((store, _url, _dir)) = store("retention batches").await else {
            return;
        };
        old_tasks(&store, "m", 1200, false).await;
        task(&store, "m_open", T0, None).await;
        let before = counters(&store).await;
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
        // Each batch was a transaction of its own.
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
        assert_eq!(counters(&store).await, before);

        // Tasks with their updates: a batch stops at the item that would start past BATCH_ROWS rows, as
        // SQLite's does.
        old_tasks(&store, "t", 300, true).await;
        let purged = store
            .purge_bounded(Timestamp(NOW), &Retention::FOREVER, 1)
            .await
            .expect("nothing");
        assert_eq!(purged, Purged::default());
        let purged = store
            .purge_bounded(Timestamp(NOW), &Retention::default(), 1)
            .await
            .expect("purged");
        assert_eq!(
            purged,
            Purged {
                rows: BATCH_ROWS as u64,
                batches: 1,
                more: true
            }
        );
        assert_eq!(
            count(&store, "SELECT COUNT(*) FROM items WHERE kind = 'message'").await,
            50 + 1
        );
        let purged = store
            .purge(Timestamp(NOW), &Retention::default())
            .await
            .expect("purged");
        assert_eq!(purged.rows, 100);
        store.close().await;
    }

    #[tokio::test]
    async fn instances_purging_at_once_beside_writers_delete_each_row_once() {
        let Some((store, url, dir)) = store("retention concurrent").await else {
            return;
        };
        old_tasks(&store, "m", 3000, true).await;
        let other = PgStore::open(&url, dir.path()).await.expect("a second instance");
        // Two instances purge while the agent keeps storing items.
        let purges = [store.clone(), other.clone()]
            .map(|s| tokio::spawn(async move { s.purge(Timestamp(NOW), &Retention::default()).await }));
        let writer = {
            let store = store.clone();
            tokio::spawn(async move {
                for i in 0..100 {
                    item(&store, "notification", &format!("n{i}"), None, &["dv_1"], NOW).await;
                }
            })
        };
        let mut rows = 0;
        for purge in purges {
            let purged = purge.await.expect("joined").expect("no deadlock, no error");
            rows += purged.rows;
        }
        writer.await.expect("joined");
        assert_eq!(rows, 2 * 3000);
        assert_eq!(
            count(&store, "SELECT COUNT(*) FROM items WHERE kind = 'message'").await,
            0
        );
        assert_eq!(
            count(&store, "SELECT COUNT(*) FROM items WHERE kind = 'notification'").await,
            100
        );
        other.close().await;
        store.close().await;
    }
}
