//! The PostgreSQL backend: upkeep (mirrors `sqlite/sweep.rs`): expired offers lose their ciphertext, old
//! tombstones go, lapsed sessions end.

use super::prelude::*;
use crate::store::lease_ttl_ms;
use crate::store::retention::KEEP_MS;

impl PgStore {
    /// Drops the ciphertext of expired offers, forgets old tombstones, ends sessions whose lease lapsed, in one
    /// transaction. Every statement only moves rows the way time already decided, so several instances may
    /// sweep at once: the second finds nothing left to do.
    pub(crate) async fn sweep(&self, now: Timestamp) -> Result<()> {
        let now = now.millis();
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "UPDATE pairings SET offer = NULL
             WHERE offer IS NOT NULL AND claimed_at IS NULL AND expires_at <= $1",
        )
        .bind(now)
        .execute(&mut *tx)
        .await?;
        sqlx::query("DELETE FROM pairings WHERE expires_at < $1")
            .bind(now.saturating_sub(KEEP_MS))
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "UPDATE sessions SET ended_at = last_heartbeat_at + $2
             WHERE ended_at IS NULL AND last_heartbeat_at + $2 <= $1",
        )
        .bind(now)
        .bind(lease_ttl_ms())
        .execute(&mut *tx)
        .await?;
        sqlx::query("DELETE FROM sessions WHERE ended_at IS NOT NULL AND ended_at < $1")
            .bind(now.saturating_sub(KEEP_MS))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        self.committed();
        Ok(())
    }
}
