//! Upkeep: expired offers lose their ciphertext, old tombstones go, lapsed sessions end.

use pacerelle_core::Timestamp;

use super::{Result, SqliteStore};
use crate::store::lease_ttl_ms;
use crate::store::retention::KEEP_MS;

impl SqliteStore {
    /// Drops the ciphertext of expired offers, forgets old tombstones, ends sessions whose lease lapsed.
    pub(crate) async fn sweep(&self, now: Timestamp) -> Result<()> {
        let now = now.millis();
        self.write(move |conn| {
            conn.prepare_cached(
                "UPDATE pairings SET offer = NULL
                     WHERE offer IS NOT NULL AND claimed_at IS NULL AND expires_at <= ?1",
            )?
            .execute([now])?;
            conn.prepare_cached("DELETE FROM pairings WHERE expires_at < ?1")?
                .execute([now.saturating_sub(KEEP_MS)])?;
            conn.prepare_cached(
                "UPDATE sessions SET ended_at = last_heartbeat_at + ?2
                     WHERE ended_at IS NULL AND last_heartbeat_at + ?2 <= ?1",
            )?
            .execute([now, lease_ttl_ms()])?;
            conn.prepare_cached("DELETE FROM sessions WHERE ended_at IS NOT NULL AND ended_at < ?1")?
                .execute([now.saturating_sub(KEEP_MS)])?;
            Ok(())
        })
        .await
    }
}
