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
use crate::store::retention::{BATCH_ROWS, Step};

impl PgStore {
    /// Deletes up to [`BATCH_ROWS`] rows of `step` older than `cut` in one transaction: the rows deleted, and
    /// whether more may be left ([`crate::store::Store::purge`]).
    pub(in crate::store) async fn purge_batch(&self, step: Step, cut: i64) -> Result<(u64, bool)> {
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
            "DELETE FROM grants WHERE item_seq = ANY($1)",
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
    //! What only PostgreSQL has — several instances purging one database at once — on a fresh database of the
    //! test cluster when `PACERELLE_TEST_POSTGRES` asks for one. The tests both backends share are in
    //! `crate::store::suite::retention`.

    use super::super::push::tests::{T0, item, store};
    use super::*;
    use crate::config::Retention;

    /// When the purge runs in these tests.
    const NOW: i64 = T0 + 400 * 86_400_000;

    async fn count(store: &PgStore, sql: &'static str) -> i64 {
        sqlx::query_scalar(sql)
            .fetch_one(&store.pool)
            .await
            .expect("read")
    }

    impl PgStore {
        /// `n` tasks of `ag_1` from `dv_1` (ids `prefix` and a number) processed long ago, each with its update if
        /// `updates`, in one transaction: for the suite's `Backend::old_tasks`, and two instances purging them.
        pub(in crate::store) async fn old_tasks(&self, prefix: &str, n: i64, updates: bool) {
            let mut tx = self.pool.begin().await.expect("begins");
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
    }

    #[tokio::test]
    async fn instances_purging_at_once_beside_writers_delete_each_row_once() {
        let Some((store, url, dir)) = store("retention concurrent").await else {
            return;
        };
        store.old_tasks("m", 3000, true).await;
        let other = PgStore::open(&url, dir.path()).await.expect("a second instance");
        // Two instances purge while the agent keeps storing items.
        let purges = [store.clone(), other.clone()].map(|s| {
            tokio::spawn(async move { s.as_store().purge(Timestamp(NOW), &Retention::default()).await })
        });
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
