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
            .open_session("ag_1", "ses_a", "laptop", "default", None, false, Timestamp(T0))
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
            .open_session(
                "ag_1",
                "ses_b",
                "desktop",
                "default",
                None,
                false,
                Timestamp(T0 + ttl),
            )
            .await
            .expect("ok");
        assert!(
            matches!(refused, SessionOpened::InUse(ref h) if h.host == "laptop"),
            "{name}: {refused:?}"
        );
        // A full TTL after the last heartbeat: lapsed.
        let late = Timestamp(T0 + 2 * ttl);
        assert!(
            store
                .caller("ag_1", None, late)
                .await
                .expect("ok")
                .lease
                .is_none(),
            "{name}"
        );
        assert!(
            matches!(
                store.heartbeat("ag_1", "ses_a", late).await.expect("ok"),
                Renewal::Lost
            ),
            "{name}"
        );
        let taken = store
            .open_session("ag_1", "ses_b", "desktop", "default", None, false, late)
            .await
            .expect("ok");
        assert!(matches!(taken, SessionOpened::Opened(_)), "{name}");
        let lease = store
            .caller("ag_1", None, late)
            .await
            .expect("ok")
            .lease
            .expect("held");
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
            .open_session("ag_1", "ses_a", "laptop", "default", None, false, Timestamp(T0))
            .await
            .expect("stored");
        let taken = store
            .open_session(
                "ag_1",
                "ses_b",
                "desktop",
                "default",
                None,
                true,
                Timestamp(T0 + 10),
            )
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
            store
                .caller("ag_1", Some("ses_a"), Timestamp(T0))
                .await
                .expect("read")
                .known,
            "{name}"
        );
        assert!(
            !store
                .caller("ag_2", Some("ses_a"), Timestamp(T0))
                .await
                .expect("read")
                .known,
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
                .caller("ag_1", None, Timestamp(T0 + 30))
                .await
                .expect("ok")
                .lease
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
            .open_session(
                "ag_1",
                "ses_c",
                "laptop",
                "default",
                None,
                false,
                Timestamp(T0 + 40),
            )
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
                    .open_session(
                        "ag_1",
                        &format!("ses_{i}"),
                        "host",
                        "default",
                        None,
                        false,
                        Timestamp(T0),
                    )
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
            .open_session("ag_1", "ses_a", "laptop", "default", None, false, Timestamp(T0))
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

/// Stores task `id` from `dv_1` of `ag_1`, addressed to `session` (any session when `None`).
async fn send_to(
    store: &crate::store::Store,
    id: &str,
    session: Option<&str>,
    at: i64,
) -> pacerelle_core::Cursor {
    match store
        .put_message("ag_1", "dv_1", id, "AQID", session, u32::MAX, Timestamp(at))
        .await
        .expect("stored")
    {
        crate::store::Put::Stored(stored) => stored.cursor,
        other => panic!("{id} not stored: {other:?}"),
    }
}

/// The ids a wait of session `session` reads from the start, at `at`.
async fn read_ids(store: &crate::store::Store, session: Option<&str>, at: i64) -> (String, Vec<String>) {
    let read = store
        .wait_read("ag_1", session, pacerelle_core::Cursor::START, 50, Timestamp(at))
        .await
        .expect("reads");
    let ids = read.messages.iter().map(|m| m.message_id.clone()).collect();
    (read.name, ids)
}

#[tokio::test]
async fn named_sessions_each_hold_a_lease_and_read_their_tasks_and_those_for_any() {
    for backend in backends().await {
        let store = &super::messages::two_agents(&backend).await;
        let name = backend.name();
        // Two names side by side; a second session of one name is refused, naming the holder and the name.
        for (id, host, session, folder) in [
            ("ses_a", "laptop / claude-code", "alpha", Some("api")),
            ("ses_b", "laptop / codex", "beta", Some("web")),
        ] {
            let opened = store
                .open_session("ag_1", id, host, session, folder, false, Timestamp(T0))
                .await
                .expect("stored");
            assert!(
                matches!(&opened, SessionOpened::Opened(info) if info.name == session && info.folder.as_deref() == folder),
                "{name}: {opened:?}"
            );
        }
        let refused = store
            .open_session(
                "ag_1",
                "ses_c",
                "ci / codex",
                "beta",
                None,
                false,
                Timestamp(T0 + 1),
            )
            .await
            .expect("stored");
        assert!(
            matches!(&refused, SessionOpened::InUse(h) if h.host == "laptop / codex" && h.name == "beta"),
            "{name}: {refused:?}"
        );
        // The lease each request consumes under.
        let caller = store
            .caller("ag_1", Some("ses_b"), Timestamp(T0 + 1))
            .await
            .expect("reads");
        assert_eq!(caller.name, "beta", "{name}");
        assert_eq!(
            caller.lease.map(|l| l.session_id).as_deref(),
            Some("ses_b"),
            "{name}"
        );
        let sessionless = store
            .caller("ag_1", None, Timestamp(T0 + 1))
            .await
            .expect("reads");
        assert_eq!(
            (sessionless.name.as_str(), sessionless.lease.is_none()),
            ("default", true),
            "{name}"
        );

        // A task for beta is never read by alpha; a task for any is read by both until one is handed it.
        send_to(store, "for-beta", Some("beta"), T0 + 2).await;
        let any = send_to(store, "for-any", None, T0 + 3).await;
        send_to(store, "for-alpha", Some("alpha"), T0 + 4).await;
        assert_eq!(
            read_ids(store, Some("ses_a"), T0 + 5).await,
            (
                "alpha".to_string(),
                vec!["for-any".to_string(), "for-alpha".to_string()]
            ),
            "{name}"
        );
        assert_eq!(
            read_ids(store, Some("ses_b"), T0 + 5).await,
            (
                "beta".to_string(),
                vec!["for-beta".to_string(), "for-any".to_string()]
            ),
            "{name}"
        );
        // Alpha is handed the task for any (its delivered mark): it is alpha's from then on.
        store.mark_delivered(
            "ag_1",
            "alpha",
            pacerelle_core::Cursor::START,
            any,
            Timestamp(T0 + 6),
        );
        store.marks().settle("ag_1", 0).await;
        assert_eq!(
            read_ids(store, Some("ses_b"), T0 + 7).await.1,
            ["for-beta"],
            "{name}"
        );
        let alpha = store
            .wait_read(
                "ag_1",
                Some("ses_a"),
                pacerelle_core::Cursor::START,
                50,
                Timestamp(T0 + 7),
            )
            .await
            .expect("reads");
        let sessions: Vec<(&str, Option<&str>, bool)> = alpha
            .messages
            .iter()
            .map(|m| (m.message_id.as_str(), m.session.as_deref(), m.redelivered))
            .collect();
        assert_eq!(
            sessions,
            [
                ("for-any", Some("alpha"), true),
                ("for-alpha", Some("alpha"), false)
            ],
            "{name}: the task for any was handed to alpha, the one for alpha not yet"
        );
        // A session marks only its own: beta cannot mark alpha's, nor alpha beta's.
        for (task, session) in [("for-any", "beta"), ("for-beta", "alpha")] {
            let marked = store
                .mark_processed("ag_1", task, session, Timestamp(T0 + 8))
                .await
                .expect("ok");
            assert!(marked.is_none(), "{name}: {session} marked {task}");
        }
        let marked = store
            .mark_processed("ag_1", "for-beta", "beta", Timestamp(T0 + 8))
            .await
            .expect("ok");
        assert!(marked.is_some(), "{name}");

        // The status lists both, the one open longest first, each with its tasks in progress.
        let open = store.sessions("ag_1").await.expect("reads");
        let listed: Vec<(&str, &str, Option<&str>, u64)> = open
            .iter()
            .map(|s| {
                (
                    s.name.as_str(),
                    s.host.as_str(),
                    s.folder.as_deref(),
                    s.in_progress,
                )
            })
            .collect();
        assert_eq!(
            listed,
            [
                ("alpha", "laptop / claude-code", Some("api"), 1),
                ("beta", "laptop / codex", Some("web"), 0)
            ],
            "{name}"
        );
        // Releasing beta leaves alpha holding its lease; beta's name is free again.
        let ended = store
            .release("ag_1", "ses_b", Timestamp(T0 + 9))
            .await
            .expect("ok")
            .expect("found");
        assert_eq!(
            (ended.name.as_str(), ended.folder.as_deref()),
            ("beta", Some("web")),
            "{name}"
        );
        let again = store
            .open_session(
                "ag_1",
                "ses_d",
                "ci / codex",
                "beta",
                None,
                false,
                Timestamp(T0 + 10),
            )
            .await
            .expect("stored");
        assert!(matches!(again, SessionOpened::Opened(_)), "{name}");
        assert_eq!(store.sessions("ag_1").await.expect("reads").len(), 2, "{name}");
    }
}
