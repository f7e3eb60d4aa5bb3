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
        self.settle_marks(agent_id, 0).await;
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
