//! Web Push subscriptions and the push outbox: what each item queues, a device's subscriptions — on each backend.

use pacerelle_core::Timestamp;
use pacerelle_core::question::QuestionKind;
use pacerelle_core::wire::DeviceEnvelope;

use super::{Backend, T0, backends};
use crate::store::types::{TTL_NORMAL_MS, TTL_UPDATE_MS};
use crate::store::{MAX_PER_DEVICE, NewQuestion, PushPut, Store};

/// `backend`'s store with agent `ag_1` and its devices `dv_1` (phone), `dv_2` (tablet) and `dv_3` (laptop).
async fn three_devices(backend: &Backend) -> Store {
    let store = backend.with_agent().await;
    backend.add_devices().await;
    backend.add_device("ag_1", "dv_3", "laptop").await;
    store
}

/// Subscribes `device` of `ag_1` to `endpoint` at `T0 + at`.
async fn subscribe(store: &Store, device: &str, endpoint: &str, at: i64) -> PushPut {
    store
        .put_push_subscription("ag_1", device, endpoint, &[4; 65], &[0; 16], Timestamp(T0 + at))
        .await
        .expect("stored")
}

/// One envelope for each of `devices`.
fn envelopes(devices: &[&str]) -> Vec<DeviceEnvelope> {
    devices
        .iter()
        .map(|d| DeviceEnvelope {
            device_id: d.to_string(),
            envelope: "AQID".into(),
        })
        .collect()
}

#[tokio::test]
async fn items_queue_one_push_per_subscription_of_their_active_recipients_and_revocation_drops_them() {
    for backend in backends().await {
        let store = &three_devices(&backend).await;
        let name = backend.name();
        let now = Timestamp(T0);
        for (device, endpoint) in [("dv_1", "a"), ("dv_1", "b"), ("dv_2", "c")] {
            assert_eq!(
                subscribe(store, device, endpoint, 0).await,
                PushPut::Created(now),
                "{name}"
            );
        }
        // dv_3 has none; the question is sealed for dv_1 and dv_3 only.
        let q = NewQuestion {
            question_id: "q1",
            kind: QuestionKind::YesNo,
            expires_at: Timestamp(T0 + 60_000),
            self_envelope: "SELF",
            envelopes: &envelopes(&["dv_1", "dv_3"]),
            user_id: None,
            approvals: 1,
        };
        store
            .put_question("ag_1", &q, u32::MAX, now)
            .await
            .expect("asked");
        let topic = pacerelle_core::webpush::topic("q1");
        let question = (
            "dv_1".to_string(),
            "question".to_string(),
            "high".to_string(),
            Some(topic.clone()),
            T0 + 60_000,
        );
        assert_eq!(
            backend.push_outbox().await,
            [question.clone(), question.clone()],
            "{name}"
        );
        // The same question again (a retry) queues nothing more.
        store
            .put_question("ag_1", &q, u32::MAX, now)
            .await
            .expect("again");
        assert_eq!(backend.push_outbox().await.len(), 2, "{name}");

        store
            .put_notification("ag_1", "n1", &envelopes(&["dv_1", "dv_2"]), now)
            .await
            .expect("notified");
        let rows = backend.push_outbox().await;
        assert_eq!(rows.len(), 5, "{name}");
        assert!(
            rows.iter().any(|r| r.0 == "dv_2"
                && r.1 == "notification"
                && r.2 == "normal"
                && r.3.is_none()
                && r.4 == T0 + TTL_NORMAL_MS),
            "{name}: {rows:?}"
        );

        // A task processed (its update) pushes nothing.
        store
            .put_message("ag_1", "dv_2", "m1", "AQID", None, u32::MAX, now)
            .await
            .expect("sent");
        store
            .mark_processed("ag_1", "m1", "default", now)
            .await
            .expect("processed");
        assert_eq!(backend.push_outbox().await.len(), 5, "{name}");
        // A question's update goes to the question's recipients, with its topic.
        store
            .answer_question("ag_1", "dv_1", "q1", "AQID", None, Timestamp(T0 + 5))
            .await
            .expect("answered");
        let updates: Vec<(String, Option<String>, i64)> = backend
            .push_outbox()
            .await
            .into_iter()
            .filter(|r| r.1 == "update")
            .map(|r| (r.0, r.3, r.4))
            .collect();
        assert_eq!(
            updates,
            vec![("dv_1".to_string(), Some(topic.clone()), T0 + 5 + TTL_UPDATE_MS); 2],
            "{name}"
        );

        // Revoking dv_1 drops its subscriptions and their pushes; a subscription moved to dv_2 drops dv_1's.
        assert_eq!(
            subscribe(store, "dv_2", "b", 1).await,
            PushPut::Created(Timestamp(T0 + 1)),
            "{name}"
        );
        store.revoke_device("ag_1", "dv_1", now).await.expect("revoked");
        let rows = backend.push_outbox().await;
        assert!(rows.iter().all(|r| r.0 == "dv_2"), "{name}: {rows:?}");
        assert_eq!(rows.len(), 1, "{name}");
        assert_eq!(backend.push_endpoints().await, ["b", "c"], "{name}");
    }
}

#[tokio::test]
async fn a_subscription_is_created_replaced_moved_or_refused_past_the_device_limit() {
    for backend in backends().await {
        let store = &three_devices(&backend).await;
        let name = backend.name();
        assert_eq!(
            subscribe(store, "dv_1", "e0", 0).await,
            PushPut::Created(Timestamp(T0)),
            "{name}"
        );
        // The same device again: its keys change, its first registration time stays.
        assert_eq!(
            subscribe(store, "dv_1", "e0", 5).await,
            PushPut::Replaced(Timestamp(T0)),
            "{name}"
        );
        for i in 1..MAX_PER_DEVICE {
            assert!(
                matches!(
                    subscribe(store, "dv_1", &format!("e{i}"), 0).await,
                    PushPut::Created(_)
                ),
                "{name}"
            );
        }
        assert_eq!(
            subscribe(store, "dv_1", "e_more", 0).await,
            PushPut::TooMany,
            "{name}"
        );
        // Replacing one the device holds is still allowed at the limit.
        assert_eq!(
            subscribe(store, "dv_1", "e3", 9).await,
            PushPut::Replaced(Timestamp(T0)),
            "{name}"
        );
        // Moved to another device: a new subscription, created now.
        assert_eq!(
            subscribe(store, "dv_2", "e3", 10).await,
            PushPut::Created(Timestamp(T0 + 10)),
            "{name}"
        );
        assert!(
            store
                .delete_push_subscription("dv_2", "e3")
                .await
                .expect("deleted"),
            "{name}"
        );
        assert!(
            !store
                .delete_push_subscription("dv_2", "e3")
                .await
                .expect("nothing"),
            "{name}"
        );
        assert!(
            !store
                .delete_push_subscription("dv_2", "e0")
                .await
                .expect("not dv_2's"),
            "{name}"
        );

        // Devices of two agents register one endpoint at the same time: both succeed, one holds it.
        store
            .register_agent("ag_2", "desk", &[2; 32], Timestamp(T0))
            .await
            .expect("a second agent");
        backend.add_device("ag_2", "dv_9", "phone").await;
        for round in 0..20 {
            let endpoint = format!("shared{round}");
            let (a, b) = tokio::join!(
                store.put_push_subscription("ag_1", "dv_3", &endpoint, &[4; 65], &[0; 16], Timestamp(T0)),
                store.put_push_subscription("ag_2", "dv_9", &endpoint, &[4; 65], &[0; 16], Timestamp(T0)),
            );
            let (a, b) = (a.expect("ok"), b.expect("ok"));
            assert!(
                matches!((a, b), (PushPut::Created(_), PushPut::Created(_))),
                "{name}: {a:?} {b:?}"
            );
            let holders = backend
                .push_endpoints()
                .await
                .into_iter()
                .filter(|e| *e == endpoint)
                .count();
            assert_eq!(holders, 1, "{name}");
            // Neither device nears its limit in the next rounds.
            for device in ["dv_3", "dv_9"] {
                store
                    .delete_push_subscription(device, &endpoint)
                    .await
                    .expect("deleted");
            }
        }
    }
}
