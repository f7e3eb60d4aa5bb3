//! The PostgreSQL backend: the facts behind an agent's status — its tasks by state, its last checkpoint, its
//! active devices (mirrors `sqlite/status.rs`).

use pacerelle_core::wire::MessageCounts;

use super::prelude::*;

impl PgStore {
    /// Reads only what is unprocessed (the partial index `items_unprocessed`), the agent's stored-task counter
    /// (`agent_counts`) and its newest checkpoint, in one statement (one snapshot): the time does not grow with
    /// the tasks processed. A delivered mark of this agent still being written is let commit first, so that the
    /// tasks a wait of this instance has handed out count as in progress, not as waiting.
    pub(crate) async fn status_facts(&self, agent_id: &str) -> Result<StatusFacts> {
        self.settle_marks(agent_id, 0).await;
        type Row = (i64, i64, Option<i64>, Option<i64>, Option<i64>, i64);
        let (waiting, in_progress, oldest, stored, last_checkpoint, devices): Row = sqlx::query_as(
            "SELECT COUNT(*) FILTER (WHERE delivered_at IS NULL),
                    COUNT(*) FILTER (WHERE delivered_at IS NOT NULL),
                    MIN(delivered_at),
                    (SELECT messages FROM agent_counts WHERE agent_id = $1),
                    (SELECT created_at FROM items WHERE agent_id = $1 AND kind = 'checkpoint'
                     ORDER BY seq DESC LIMIT 1),
                    (SELECT COUNT(*) FROM devices WHERE agent_id = $1 AND revoked_at IS NULL)
             FROM items
             WHERE agent_id = $1 AND kind = 'message' AND processed_at IS NULL",
        )
        .bind(agent_id)
        .fetch_one(&self.pool)
        .await?;
        let processed = stored.unwrap_or(0) - waiting - in_progress;
        let count = |n: i64| u64::try_from(n).unwrap_or(0);
        Ok(StatusFacts {
            messages: MessageCounts {
                waiting: count(waiting),
                in_progress: count(in_progress),
                processed: count(processed),
            },
            oldest_in_progress: oldest.map(Timestamp),
            last_checkpoint_at: last_checkpoint.map(Timestamp),
            devices: count(devices),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::agent::tests::{T0, pair, store};
    use super::*;

    /// What the status would say by scanning every task of the agent.
    async fn by_scanning(store: &PgStore) -> (i64, i64, i64, Option<i64>, Option<i64>) {
        sqlx::query_as(
            "SELECT COUNT(*) FILTER (WHERE delivered_at IS NULL AND processed_at IS NULL),
                    COUNT(*) FILTER (WHERE delivered_at IS NOT NULL AND processed_at IS NULL),
                    COUNT(*) FILTER (WHERE processed_at IS NOT NULL),
                    MIN(CASE WHEN processed_at IS NULL THEN delivered_at END),
                    (SELECT MAX(created_at) FROM items WHERE agent_id = 'ag_1' AND kind = 'checkpoint')
             FROM items WHERE agent_id = 'ag_1' AND kind = 'message'",
        )
        .fetch_one(&store.pool)
        .await
        .expect("scanned")
    }

    async fn agrees(store: &PgStore) {
        let facts = store.status_facts("ag_1").await.expect("status");
        let (waiting, in_progress, processed, oldest, checkpoint) = by_scanning(store).await;
        let m = &facts.messages;
        assert_eq!(
            (m.waiting as i64, m.in_progress as i64, m.processed as i64),
            (waiting, in_progress, processed)
        );
        assert_eq!(facts.oldest_in_progress.map(|t| t.0), oldest);
        assert_eq!(facts.last_checkpoint_at.map(|t| t.0), checkpoint);
    }

    /// Tasks are written with plain SQL here (storing and marking them belongs to `messages.rs`); the counter
    /// triggers of the schema count them as the store's own writes do.
    async fn run(store: &PgStore, sql: &str) {
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_string()))
            .execute(&store.pool)
            .await
            .expect("written");
    }

    #[tokio::test]
    async fn the_counted_status_agrees_with_a_full_scan_as_tasks_move() {
        let Some((store, _dir)) = store().await else {
            return;
        };
        let empty = store.status_facts("ag_1").await.expect("status");
        assert_eq!(
            (empty.messages.waiting, empty.devices, empty.last_checkpoint_at),
            (0, 0, None)
        );
        pair(&store, "AAAAAAAAAAAAAAAAAAAAAA", "dv_1").await;
        pair(&store, "BBBBBBBBBBBBBBBBBBBBBB", "dv_2").await;
        agrees(&store).await;
        for i in 0..6 {
            run(
                &store,
                &format!(
                    "INSERT INTO items (agent_id, kind, item_id, device_id, envelope, created_at)
                     VALUES ('ag_1', 'message', 'm{i}', 'dv_1', 'AQ', {})",
                    T0 + i
                ),
            )
            .await;
            agrees(&store).await;
        }
        run(
            &store,
            "UPDATE items SET delivered_at = 2000 + seq WHERE agent_id = 'ag_1' AND item_id IN ('m1', 'm2', 'm3')",
        )
        .await;
        agrees(&store).await;
        for id in ["m1", "m4"] {
            run(
                &store,
                &format!(
                    "UPDATE items SET processed_at = {} WHERE agent_id = 'ag_1' AND item_id = '{id}'",
                    T0 + 20
                ),
            )
            .await;
            agrees(&store).await;
        }
        store
            .put_checkpoint("ag_1", "c1", "AQ", Timestamp(T0 + 30))
            .await
            .expect("a checkpoint");
        store
            .put_checkpoint("ag_1", "c2", "AQ", Timestamp(T0 + 31))
            .await
            .expect("a checkpoint");
        agrees(&store).await;
        store
            .revoke_device("ag_1", "dv_2", Timestamp(T0 + 40))
            .await
            .expect("revoked");
        let facts = store.status_facts("ag_1").await.expect("status");
        let m = &facts.messages;
        assert_eq!((m.waiting, m.in_progress, m.processed), (2, 2, 2));
        // m1 went on to be processed: the oldest in progress is m2, delivered at 2000 + its seq.
        let m2: i64 = sqlx::query_scalar("SELECT seq FROM items WHERE agent_id = 'ag_1' AND item_id = 'm2'")
            .fetch_one(&store.pool)
            .await
            .expect("read");
        assert_eq!(facts.oldest_in_progress, Some(Timestamp(2000 + m2)));
        assert_eq!(facts.last_checkpoint_at, Some(Timestamp(T0 + 31)));
        assert_eq!(facts.devices, 1);
    }
}
