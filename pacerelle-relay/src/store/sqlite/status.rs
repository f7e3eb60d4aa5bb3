//! The facts behind an agent's status: its tasks by state, its last checkpoint, its active devices.

use pacerelle_core::wire::MessageCounts;

use super::{Result, SqliteStore, ts};
use crate::store::StatusFacts;

impl SqliteStore {
    pub(crate) async fn status_facts(&self, agent_id: &str) -> Result<StatusFacts> {
        type Row = (i64, i64, i64, Option<i64>, Option<i64>, i64);
        let (waiting, in_progress, processed, oldest, last_checkpoint, devices): Row = sqlx::query_as(
            "SELECT COALESCE(SUM(delivered_at IS NULL AND processed_at IS NULL), 0),
                    COALESCE(SUM(delivered_at IS NOT NULL AND processed_at IS NULL), 0),
                    COALESCE(SUM(processed_at IS NOT NULL), 0),
                    MIN(CASE WHEN processed_at IS NULL THEN delivered_at END),
                    (SELECT MAX(created_at) FROM items WHERE agent_id = ?1 AND kind = 'checkpoint'),
                    (SELECT COUNT(*) FROM devices WHERE agent_id = ?1 AND revoked_at IS NULL)
             FROM items WHERE agent_id = ?1 AND kind = 'message'",
        )
        .bind(agent_id)
        .fetch_one(&self.read)
        .await?;
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
