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
