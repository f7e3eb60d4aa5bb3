//! Agent sessions and the lease: lapse, takeover, release, concurrent opens — on each backend.

use std::sync::Arc;

use pacerelle_core::Timestamp;
use tokio::sync::Barrier;

use super::{T0, backends};
use pacerelle_core::keys;
use pacerelle_core::pairing::Role;

use crate::store::retention::KEEP_MS;
use crate::store::{NewPairing, PairingStored, Renewal, SessionOpened, lease_ttl_ms};

#[tokio::test]
async fn a_lease_lapses_without_heartbeat_and_then_anyone_may_take_it() {
    for backend in backends().await {
        let store = &backend.with_agent().await;
        let name = backend.name();
        let ttl = lease_ttl_ms();
        let opened = store
            .open_session("ag_1", "ses_a", "laptop", false, Timestamp(T0))
            .await
            .expect("stored");
        assert!(matches!(opened, SessionOpened::Opened(_)), "{name}");
        // Within the TTL: held, renewable, refused to others.
        let renewed = store
            .heartbeat("ag_1", "ses_a", Timestamp(T0 + ttl - 1))
            .await
            .expect("ok");
        assert!(matches!(renewed, Renewal::Renewed(_)), "{name}");
        let refused = store
            .open_session("ag_1", "ses_b", "desktop", false, Timestamp(T0 + ttl))
            .await
            .expect("ok");
        assert!(
            matches!(refused, SessionOpened::InUse(ref h) if h.host == "laptop"),
            "{name}: {refused:?}"
        );
        // A full TTL after the last heartbeat: lapsed.
        let late = Timestamp(T0 + 2 * ttl);
        assert!(store.lease("ag_1", late).await.expect("ok").is_none(), "{name}");
        assert!(
            matches!(
                store.heartbeat("ag_1", "ses_a", late).await.expect("ok"),
                Renewal::Lost
            ),
            "{name}"
        );
        let taken = store
            .open_session("ag_1", "ses_b", "desktop", false, late)
            .await
            .expect("ok");
        assert!(matches!(taken, SessionOpened::Opened(_)), "{name}");
        let lease = store.lease("ag_1", late).await.expect("ok").expect("held");
        assert_eq!(lease.session_id, "ses_b", "{name}");
        // The lapsed session ended when its lease ran out, not when it was taken over: releasing it now gives
        // the end stored then.
        let ended = store
            .release("ag_1", "ses_a", late.plus_millis(ttl))
            .await
            .expect("ok")
            .expect("found");
        assert_eq!(ended.lease_expires_at, Timestamp(T0 + ttl - 1 + ttl), "{name}");
    }
}

#[tokio::test]
async fn a_takeover_ends_the_live_session_and_release_is_idempotent() {
    for backend in backends().await {
        let store = &backend.with_agent().await;
        let name = backend.name();
        let ttl = lease_ttl_ms();
        store
            .open_session("ag_1", "ses_a", "laptop", false, Timestamp(T0))
            .await
            .expect("stored");
        let taken = store
            .open_session("ag_1", "ses_b", "desktop", true, Timestamp(T0 + 10))
            .await
            .expect("ok");
        assert!(matches!(taken, SessionOpened::Opened(_)), "{name}");
        assert!(
            matches!(
                store
                    .heartbeat("ag_1", "ses_a", Timestamp(T0 + 11))
                    .await
                    .expect("ok"),
                Renewal::Lost
            ),
            "{name}"
        );
        assert!(
            matches!(
                store
                    .heartbeat("ag_1", "ses_x", Timestamp(T0 + 11))
                    .await
                    .expect("ok"),
                Renewal::NotFound
            ),
            "{name}"
        );
        assert!(
            store.session_known("ag_1", "ses_a").await.expect("read"),
            "{name}"
        );
        assert!(
            !store.session_known("ag_2", "ses_a").await.expect("read"),
            "{name}"
        );
        // Released: ended now; again: the same end.
        let released = store
            .release("ag_1", "ses_b", Timestamp(T0 + 20))
            .await
            .expect("ok")
            .expect("found");
        assert_eq!(released.lease_expires_at, Timestamp(T0 + 20), "{name}");
        let again = store
            .release("ag_1", "ses_b", Timestamp(T0 + 30))
            .await
            .expect("ok")
            .expect("found");
        assert_eq!(again.lease_expires_at, Timestamp(T0 + 20), "{name}");
        assert!(
            store
                .lease("ag_1", Timestamp(T0 + 30))
                .await
                .expect("ok")
                .is_none(),
            "{name}"
        );
        assert!(
            store
                .release("ag_1", "ses_x", Timestamp(T0))
                .await
                .expect("ok")
                .is_none(),
            "{name}"
        );
        // A session released after its lease lapsed ended when the lease ran out.
        store
            .open_session("ag_1", "ses_c", "laptop", false, Timestamp(T0 + 40))
            .await
            .expect("stored");
        let lapsed = store
            .release("ag_1", "ses_c", Timestamp(T0 + 40 + 3 * ttl))
            .await
            .expect("ok")
            .expect("found");
        assert_eq!(lapsed.lease_expires_at, Timestamp(T0 + 40 + ttl), "{name}");
    }
}

/// Eight sessions opened at once without takeover: one gets the lease, seven find it in use.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_opens_give_the_lease_to_one() {
    for backend in backends().await {
        let store = backend.with_agent().await;
        let start = Arc::new(Barrier::new(8));
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..8 {
            let (store, start) = (store.clone(), start.clone());
            tasks.spawn(async move {
                start.wait().await;
                store
                    .open_session("ag_1", &format!("ses_{i}"), "host", false, Timestamp(T0))
                    .await
                    .expect("ok")
            });
        }
        let outcomes = tasks.join_all().await;
        let opened = outcomes
            .iter()
            .filter(|o| matches!(o, SessionOpened::Opened(_)))
            .count();
        assert_eq!(opened, 1, "{}: {outcomes:?}", backend.name());
    }
}

#[tokio::test]
async fn the_sweeper_drops_expired_offers_and_lapsed_sessions() {
    for backend in backends().await {
        let store = &backend.with_agent().await;
        let name = backend.name();
        let offer = NewPairing {
            agent_id: "ag_1",
            pairing_id: "AAAAAAAAAAAAAAAAAAAAAA",
            device_id: "dv_new",
            label: None,
            role: Role::Owner,
            claim_hash: keys::sha256(b"claim"),
            offer: "AQID",
            expires_at: Timestamp(T0 + 1000),
            now: Timestamp(T0),
        };
        let created = store.create_pairing(&offer).await.expect("stored");
        assert!(matches!(created, PairingStored::Created(_)), "{name}");
        let opened = store
            .open_session("ag_1", "ses_a", "laptop", false, Timestamp(T0))
            .await
            .expect("stored");
        assert!(matches!(opened, SessionOpened::Opened(_)), "{name}");
        let offer_of = || async {
            store
                .pairing(offer.pairing_id)
                .await
                .expect("read")
                .map(|row| row.offer)
        };
        let commits = store.writer_counts().commits.get();
        store.sweep(Timestamp(T0 + 999)).await.expect("sweeps");
        assert_eq!(
            store.writer_counts().commits.get() - commits,
            1,
            "{name}: one write"
        );
        assert_eq!(offer_of().await, Some(Some("AQID".into())), "{name}");

        store.sweep(Timestamp(T0 + 60_000)).await.expect("sweeps");
        assert_eq!(
            offer_of().await,
            Some(None),
            "{name}: the ciphertext of an expired offer is gone"
        );
        let ended = backend
            .numbers("SELECT ended_at FROM sessions WHERE session_id = 'ses_a'")
            .await;
        assert_eq!(
            ended,
            [Some(T0 + lease_ttl_ms())],
            "{name}: the lapsed session ended"
        );
        // A day after expiry the tombstone goes too; a day after its end, the session.
        store.sweep(Timestamp(T0 + KEEP_MS + 2000)).await.expect("sweeps");
        assert_eq!(offer_of().await, None, "{name}");
        store
            .sweep(Timestamp(T0 + lease_ttl_ms() + KEEP_MS + 1))
            .await
            .expect("sweeps");
        assert_eq!(
            backend.numbers("SELECT COUNT(*) FROM sessions").await,
            [Some(0)],
            "{name}"
        );
    }
}
