//! The facts behind an agent's status: its tasks by state, its last checkpoint, its active devices.

use pacerelle_core::wire::MessageCounts;

use super::{Result, SqliteStore, ts};
use crate::store::StatusFacts;

impl SqliteStore {
    /// Reads only what is unprocessed (the partial index `items_unprocessed`), the agent's stored-task counter
    /// (migration 0007) and its newest checkpoint: the time does not grow with the tasks processed. A delivered
    /// mark of this agent still queued in the writer is let commit first, so that the tasks a wait has handed
    /// out count as in progress, not as waiting.
    pub(crate) async fn status_facts(&self, agent_id: &str) -> Result<StatusFacts> {
        self.settle_marks(agent_id, 0).await?;
        type Row = (i64, i64, Option<i64>, Option<i64>, Option<i64>, i64);
        let (waiting, in_progress, oldest, stored, last_checkpoint, devices): Row = sqlx::query_as(
            "SELECT COALESCE(SUM(delivered_at IS NULL), 0),
                    COALESCE(SUM(delivered_at IS NOT NULL), 0),
                    MIN(delivered_at),
                    (SELECT messages FROM agent_counts WHERE agent_id = ?1),
                    (SELECT created_at FROM items WHERE agent_id = ?1 AND kind = 'checkpoint'
                     ORDER BY seq DESC LIMIT 1),
                    (SELECT COUNT(*) FROM devices WHERE agent_id = ?1 AND revoked_at IS NULL)
             FROM items INDEXED BY items_unprocessed
             WHERE agent_id = ?1 AND kind = 'message' AND processed_at IS NULL",
        )
        .bind(agent_id)
        .fetch_one(&self.read)
        .await?;
        let processed = stored.unwrap_or(0) - waiting - in_progress;
        let count = |n: i64| u64::try_from(n).unwrap_or(0);
        Ok(StatusFacts {
            messages: MessageCounts {
                waiting: count(waiting),
                in_progress: count(in_progress),
                processed: count(processed),
            },
            oldest_in_progress: oldest.map(ts),
            last_checkpoint_at: last_checkpoint.map(ts),
            devices: count(devices),
        })
    }
}

#[cfg(test)]
mod tests {
    use pacerelle_core::Timestamp;

    use super::super::tests::{T0, store};

    /// What the status said before the counter: every task of the agent scanned.
    async fn by_scanning(store: &super::SqliteStore) -> (i64, i64, i64, Option<i64>, Option<i64>) {
        sqlx::query_as(
            "SELECT COALESCE(SUM(delivered_at IS NULL AND processed_at IS NULL), 0),
                    COALESCE(SUM(delivered_at IS NOT NULL AND processed_at IS NULL), 0),
                    COALESCE(SUM(processed_at IS NOT NULL), 0),
                    MIN(CASE WHEN processed_at IS NULL THEN delivered_at END),
                    (SELECT MAX(created_at) FROM items WHERE agent_id = 'ag_1' AND kind = 'checkpoint')
             FROM items WHERE agent_id = 'ag_1' AND kind = 'message'",
        )
        .fetch_one(&store.read)
        .await
        .expect("scanned")
    }

    async fn agrees(store: &super::SqliteStore) {
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

    #[tokio::test]
    async fn the_counted_status_agrees_with_a_full_scan_as_tasks_move() {
        let (store, _dir) = store().await;
        store
            .write(|conn| {
                conn.execute(
                    "INSERT INTO devices (device_id, agent_id, name, role, token_hash, created_at)
                     VALUES ('dv_1', 'ag_1', 'phone', 'owner', x'00', 1)",
                    [],
                )?;
                Ok(())
            })
            .await
            .expect("a device");
        agrees(&store).await;
        for i in 0..6 {
            store
                .put_message(
                    "ag_1",
                    "dv_1",
                    &format!("m{i}"),
                    "AQ",
                    u32::MAX,
                    Timestamp(T0 + i),
                )
                .await
                .expect("stored");
            agrees(&store).await;
        }
        // The same id again stores nothing and counts nothing.
        store
            .put_message("ag_1", "dv_1", "m0", "AQ", u32::MAX, Timestamp(T0 + 9))
            .await
            .expect("found");
        agrees(&store).await;
        store
            .write(|conn| {
                conn.execute(
                    "UPDATE items SET delivered_at = 2000 + seq WHERE agent_id = 'ag_1' AND item_id IN ('m1', 'm2', 'm3')",
                    [],
                )?;
                Ok(())
            })
            .await
            .expect("delivered");
        agrees(&store).await;
        for id in ["m1", "m4"] {
            store
                .mark_processed("ag_1", id, Timestamp(T0 + 20))
                .await
                .expect("processed");
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
        let facts = store.status_facts("ag_1").await.expect("status");
        assert_eq!(
            (
                facts.messages.waiting,
                facts.messages.in_progress,
                facts.messages.processed
            ),
            (2, 2, 2)
        );
        assert_eq!(facts.devices, 1);
    }
}
