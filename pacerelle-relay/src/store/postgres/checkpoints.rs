//! The PostgreSQL backend: checkpoints, the agent's sealed progress notes kept in its stream (mirrors
//! `sqlite/checkpoints.rs`).

use super::prelude::*;

impl PgStore {
    /// Stores a checkpoint, or finds the one already stored under this id. The agent's counter row is locked
    /// first (ADR 0003): the checkpoint draws its sequence number in commit order, and a second store of the
    /// same id waits for the first and then finds it.
    pub(crate) async fn put_checkpoint(
        &self,
        agent_id: &str,
        checkpoint_id: &str,
        envelope: &str,
        now: Timestamp,
    ) -> Result<Stored> {
        let mut tx = self.pool.begin().await?;
        super::lock_agent(&mut tx, agent_id).await?;
        let existing: Option<(i64, i64)> = sqlx::query_as(
            "SELECT seq, created_at FROM items
             WHERE agent_id = $1 AND kind = 'checkpoint' AND item_id = $2",
        )
        .bind(agent_id)
        .bind(checkpoint_id)
        .fetch_optional(&mut *tx)
        .await?;
        let stored = match existing {
            Some((seq, created_at)) => Stored {
                id: checkpoint_id.to_string(),
                cursor: Cursor(u64::try_from(seq).unwrap_or(0)),
                created_at: Timestamp(created_at),
                created: false,
            },
            None => {
                let seq: i64 = sqlx::query_scalar(
                    "INSERT INTO items (agent_id, kind, item_id, envelope, created_at)
                     VALUES ($1, 'checkpoint', $2, $3, $4) RETURNING seq",
                )
                .bind(agent_id)
                .bind(checkpoint_id)
                .bind(envelope)
                .bind(now.millis())
                .fetch_one(&mut *tx)
                .await?;
                Stored {
                    id: checkpoint_id.to_string(),
                    cursor: Cursor(u64::try_from(seq).unwrap_or(0)),
                    created_at: now,
                    created: true,
                }
            }
        };
        tx.commit().await?;
        self.counts.commits.inc();
        self.counts.writes.inc();
        Ok(stored)
    }

    /// The latest checkpoints, latest first.
    pub(crate) async fn checkpoints(&self, agent_id: &str, limit: u32) -> Result<Vec<CheckpointRecord>> {
        let rows: Vec<(String, String, i64)> = sqlx::query_as(
            "SELECT item_id, COALESCE(envelope, ''), created_at FROM items
             WHERE agent_id = $1 AND kind = 'checkpoint' ORDER BY seq DESC LIMIT $2",
        )
        .bind(agent_id)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(checkpoint_id, envelope, created_at)| CheckpointRecord {
                checkpoint_id,
                envelope,
                created_at: Timestamp(created_at),
            })
            .collect())
    }
}
