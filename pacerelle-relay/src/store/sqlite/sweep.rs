//! Upkeep: expired offers lose their ciphertext, old tombstones go, lapsed sessions end.

use pacerelle_core::Timestamp;

use super::{Result, SqliteStore};
use crate::store::lease_ttl_ms;

/// How long expired pairing tombstones and ended sessions are kept.
const KEEP_MS: i64 = 24 * 3600 * 1000;

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

#[cfg(test)]
mod tests {
    use pacerelle_core::keys;
    use pacerelle_core::pairing::Role;

    use super::super::tests::{T0, store};
    use super::*;
    use crate::store::{NewPairing, PairingStored};

    #[tokio::test]
    async fn the_sweeper_drops_expired_offers_and_lapsed_sessions() {
        let (store, _dir) = store().await;
        let offer = NewPairing {
            agent_id: "ag_1",
            pairing_id: "AAAAAAAAAAAAAAAAAAAAAA",
            device_id: "dv_1",
            label: None,
            role: Role::Owner,
            claim_hash: keys::sha256(b"claim"),
            offer: "AQID",
            expires_at: Timestamp(T0 + 1000),
            now: Timestamp(T0),
        };
        assert!(matches!(
            store.create_pairing(&offer).await.expect("ok"),
            PairingStored::Created(_)
        ));
        store
            .open_session("ag_1", "ses_a", "laptop", false, Timestamp(T0))
            .await
            .expect("ok");
        store.sweep(Timestamp(T0 + 999)).await.expect("sweeps");
        let row = store
            .as_store()
            .pairing(offer.pairing_id)
            .await
            .expect("ok")
            .expect("kept");
        assert!(row.offer.is_some());

        store.sweep(Timestamp(T0 + 60_000)).await.expect("sweeps");
        let row = store
            .as_store()
            .pairing(offer.pairing_id)
            .await
            .expect("ok")
            .expect("tombstone");
        assert!(row.offer.is_none(), "the ciphertext of an expired offer is gone");
        let ended: Option<i64> =
            sqlx::query_scalar("SELECT ended_at FROM sessions WHERE session_id = 'ses_a'")
                .fetch_one(&store.read)
                .await
                .expect("a row");
        assert_eq!(ended, Some(T0 + lease_ttl_ms()));
        // A day after expiry the tombstone goes too.
        store.sweep(Timestamp(T0 + KEEP_MS + 2000)).await.expect("sweeps");
        assert!(
            store
                .as_store()
                .pairing(offer.pairing_id)
                .await
                .expect("ok")
                .is_none()
        );
    }
}
