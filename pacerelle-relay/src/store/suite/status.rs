//! The agent's status: counted as tasks move, as a scan of every task would say — on each backend.

use pacerelle_core::Timestamp;

use super::{Backend, T0, backends};
use crate::store::{Registered, Store};

/// What the status would say by scanning every task of `ag_1`: waiting, in progress, processed, the oldest
/// delivery in progress and the newest checkpoint.
async fn by_scanning(backend: &Backend) -> Vec<Option<i64>> {
    backend
        .numbers(
            "SELECT COUNT(CASE WHEN delivered_at IS NULL AND processed_at IS NULL THEN 1 END),
                    COUNT(CASE WHEN delivered_at IS NOT NULL AND processed_at IS NULL THEN 1 END),
                    COUNT(CASE WHEN processed_at IS NOT NULL THEN 1 END),
                    MIN(CASE WHEN processed_at IS NULL THEN delivered_at END),
                    (SELECT MAX(created_at) FROM items WHERE agent_id = 'ag_1' AND kind = 'checkpoint')
             FROM items WHERE agent_id = 'ag_1' AND kind = 'message'",
        )
        .await
}

/// Checks that the counted status of `ag_1` is what a scan says.
async fn agrees(backend: &Backend, store: &Store) {
    let facts = store.status_facts("ag_1").await.expect("status");
    let m = &facts.messages;
    let counted = vec![
        Some(m.waiting as i64),
        Some(m.in_progress as i64),
        Some(m.processed as i64),
        facts.oldest_in_progress.map(|t| t.0),
        facts.last_checkpoint_at.map(|t| t.0),
    ];
    assert_eq!(counted, by_scanning(backend).await, "{}", backend.name());
}

#[tokio::test]
async fn the_counted_status_agrees_with_a_full_scan_as_tasks_move() {
    for backend in backends().await {
        let name = backend.name();
        let store = &backend.store;
        let registered = store
            .register_agent("ag_1", "laptop", &[1; 32], Timestamp(T0))
            .await
            .expect("stored");
        assert!(matches!(registered, Registered::Created(_)), "{name}");
        let empty = store.status_facts("ag_1").await.expect("status");
        assert_eq!(
            (empty.messages.waiting, empty.devices, empty.last_checkpoint_at),
            (0, 0, None),
            "{name}"
        );
        backend.add_devices().await;
        agrees(&backend, store).await;
        for i in 0..6 {
            store
                .put_message(
                    "ag_1",
                    "dv_1",
                    &format!("m{i}"),
                    "AQ",
                    None,
                    u32::MAX,
                    Timestamp(T0 + i),
                )
                .await
                .expect("stored");
            agrees(&backend, store).await;
        }
        // The same id again stores nothing and counts nothing.
        store
            .put_message("ag_1", "dv_1", "m0", "AQ", None, u32::MAX, Timestamp(T0 + 9))
            .await
            .expect("found");
        agrees(&backend, store).await;
        // Delivered marks as the relay's writer leaves them (a time of their own per task).
        backend
            .run(
                "UPDATE items SET delivered_at = 2000 + seq WHERE agent_id = 'ag_1' AND item_id IN ('m1', 'm2', 'm3')",
            )
            .await;
        agrees(&backend, store).await;
        for id in ["m1", "m4"] {
            store
                .mark_processed("ag_1", id, "default", Timestamp(T0 + 20))
                .await
                .expect("processed");
            agrees(&backend, store).await;
        }
        store
            .put_checkpoint("ag_1", "c1", "AQ", Timestamp(T0 + 30))
            .await
            .expect("a checkpoint");
        store
            .put_checkpoint("ag_1", "c2", "AQ", Timestamp(T0 + 31))
            .await
            .expect("a checkpoint");
        agrees(&backend, store).await;
        store
            .revoke_device("ag_1", "dv_2", Timestamp(T0 + 40))
            .await
            .expect("revoked");
        let facts = store.status_facts("ag_1").await.expect("status");
        let m = &facts.messages;
        assert_eq!((m.waiting, m.in_progress, m.processed), (2, 2, 2), "{name}");
        // m1 went on to be processed: the oldest in progress is m2, delivered at 2000 + its seq.
        let m2 = backend
            .count("SELECT seq FROM items WHERE agent_id = 'ag_1' AND item_id = 'm2'")
            .await;
        assert_eq!(facts.oldest_in_progress, Some(Timestamp(2000 + m2)), "{name}");
        assert_eq!(facts.last_checkpoint_at, Some(Timestamp(T0 + 31)), "{name}");
        assert_eq!(facts.devices, 1, "{name}");
    }
}
