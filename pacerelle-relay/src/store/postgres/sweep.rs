//! The PostgreSQL backend: upkeep (mirrors `sqlite/sweep.rs`): expired offers lose their ciphertext, old
//! tombstones go, lapsed sessions end.

use super::prelude::*;
use crate::store::lease_ttl_ms;

/// How long expired pairing tombstones and ended sessions are kept.
const KEEP_MS: i64 = 24 * 3600 * 1000;

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

#[cfg(test)]
mod tests {
    use super::super::push::tests::{T0, store};
    use super::*;

    async fn offer(store: &PgStore) -> Option<Option<String>> {
        sqlx::query_scalar("SELECT offer FROM pairings WHERE pairing_id = 'p_1'")
            .fetch_optional(&store.pool)
            .await
            .expect("reads")
    }

    #[tokio::test]
    async fn the_sweeper_drops_expired_offers_and_lapsed_sessions() {
        let Some((store, _url, _dir)) = store("sweep").await else {
            return;
        };
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "INSERT INTO pairings (pairing_id, agent_id, device_id, role, claim_hash, offer, expires_at, created_at)
             VALUES ('p_1', 'ag_1', 'dv_new', 'owner', '\\x00', 'AQID', {expires}, {T0});
             INSERT INTO sessions (session_id, agent_id, host, since, last_heartbeat_at)
             VALUES ('ses_a', 'ag_1', 'laptop', {T0}, {T0})",
            expires = T0 + 1000
        )))
        .execute(&store.pool)
        .await
        .expect("an offer and a session");
        let commits = store.writer_counts().commits.get();
        store.sweep(Timestamp(T0 + 999)).await.expect("sweeps");
        assert_eq!(store.writer_counts().commits.get() - commits, 1);
        assert_eq!(offer(&store).await, Some(Some("AQID".into())));

        store.sweep(Timestamp(T0 + 60_000)).await.expect("sweeps");
        assert_eq!(
            offer(&store).await,
            Some(None),
            "the ciphertext of an expired offer is gone"
        );
        let ended: Option<i64> =
            sqlx::query_scalar("SELECT ended_at FROM sessions WHERE session_id = 'ses_a'")
                .fetch_one(&store.pool)
                .await
                .expect("a row");
        assert_eq!(ended, Some(T0 + lease_ttl_ms()));
        // A day after expiry the tombstone goes too; a day after its end, the session.
        store.sweep(Timestamp(T0 + KEEP_MS + 2000)).await.expect("sweeps");
        assert_eq!(offer(&store).await, None);
        store
            .sweep(Timestamp(T0 + lease_ttl_ms() + KEEP_MS + 1))
            .await
            .expect("sweeps");
        let sessions: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM sessions")
            .fetch_one(&store.pool)
            .await
            .expect("reads");
        assert_eq!(sessions, 0);
        store.close().await;
    }
}
