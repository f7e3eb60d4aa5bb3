//! Webhooks and their outbox: the cap on pending events, the due read, a removed webhook, a lost key — on each
//! backend.

use pacerelle_core::Timestamp;
use pacerelle_core::question::QuestionKind;
use pacerelle_core::wire::{DeviceEnvelope, WebhookEvent};

use super::{T0, backends};
use crate::store::rows::DROPPED;
use crate::store::{DueEvent, NewQuestion, Outboxes, Registered, Store, Target};

/// The secret of the webhooks [`with_webhook`] sets.
const SECRET: &str = "whsec_0123456789abcdef";

/// Longer than any claim a due read makes (PostgreSQL's lasts five minutes): a read this much later finds the
/// events it claimed due again.
const AFTER_ANY_CLAIM: i64 = 3_600_000;

/// Registers `agent` (at `T0 + 1`) and sets its webhook (at `T0 + 2`), with [`SECRET`].
pub(in crate::store) async fn with_webhook(store: &Store, agent: &str, hash: u8) {
    let registered = store
        .register_agent(agent, agent, &[hash; 32], Timestamp(T0 + 1))
        .await
        .expect("registered");
    assert!(matches!(registered, Registered::Created(_)));
    store
        .set_webhook(agent, "http://127.0.0.1:9/hook", SECRET, Timestamp(T0 + 2))
        .await
        .expect("set");
}

/// Agents `ag_1` and `ag_2`, each with a webhook.
pub(in crate::store) async fn webhook_agents(store: &Store) {
    with_webhook(store, "ag_1", 1).await;
    with_webhook(store, "ag_2", 2).await;
}

/// Asks `agent` question `question` (sealed for no device) at `T0 + at` and cancels it then, which queues its
/// `question.cancelled` event, due at once, when the agent has a webhook. Returns whether an event was queued.
pub(in crate::store) async fn cancelled(store: &Store, agent: &str, question: &str, at: i64) -> bool {
    let q = NewQuestion {
        question_id: question,
        kind: QuestionKind::YesNo,
        expires_at: Timestamp(T0 + at + 60_000),
        self_envelope: "AA",
        envelopes: &[],
        user_id: None,
        approvals: 1,
    };
    store
        .put_question(agent, &q, u32::MAX, Timestamp(T0 + at))
        .await
        .expect("asked");
    let (_, effects) = store
        .cancel_question(agent, question, Timestamp(T0 + at))
        .await
        .expect("cancelled");
    effects.event
}

/// Agents `ag_1` and `ag_2` with a webhook and a backlog of events, due at once: `ag_1`'s questions `a1` to `a4`
/// cancelled at `T0 + 11` to `T0 + 14`, `ag_2`'s `b1` at `T0 + 20`.
pub(in crate::store) async fn backlog(store: &Store) {
    webhook_agents(store).await;
    for i in 1..=4 {
        cancelled(store, "ag_1", &format!("a{i}"), 10 + i).await;
    }
    cancelled(store, "ag_2", "b1", 20).await;
}

/// The (agent, question) of each event read, in the order read.
pub(in crate::store) fn due_questions(due: Vec<DueEvent>) -> Vec<(String, String)> {
    due.into_iter()
        .map(|e| {
            let event: WebhookEvent = serde_json::from_str(&e.body).expect("the body");
            (e.agent_id, event.question.question_id)
        })
        .collect()
}

/// An (agent, question) pair as [`due_questions`] gives them.
pub(in crate::store) fn pair(agent: &str, question: &str) -> (String, String) {
    (agent.to_string(), question.to_string())
}

#[tokio::test]
async fn the_oldest_pending_events_beyond_the_cap_are_dropped_in_the_queueing_transaction() {
    for backend in backends().await {
        let (store, name) = (&backend.store, backend.name());
        webhook_agents(store).await;
        store.set_max_pending_events(3).await.expect("cap");
        for i in 1..=5 {
            assert!(cancelled(store, "ag_1", &format!("q{i}"), 10 + i).await, "{name}");
        }
        cancelled(store, "ag_2", "other", 20).await;
        let log = store.deliveries("ag_1", 10).await.expect("log");
        let states: Vec<(&str, &str)> = log
            .iter()
            .map(|d| (d.question_id.as_str(), d.state.as_str()))
            .collect();
        assert_eq!(
            states,
            [
                ("q5", "pending"),
                ("q4", "pending"),
                ("q3", "pending"),
                ("q2", "failed"),
                ("q1", "failed"),
            ],
            "{name}"
        );
        let dropped = &log[4];
        assert!(dropped.next_attempt_at.is_none(), "{name}");
        assert!(
            dropped
                .last_error
                .as_deref()
                .is_some_and(|e| e.starts_with(DROPPED) && e.contains("(3 pending events at most")),
            "{name}: {dropped:?}"
        );
        // The other agent's outbox is its own.
        assert_eq!(
            store.deliveries("ag_2", 10).await.expect("log")[0].state,
            "pending",
            "{name}"
        );

        // A dropped event whose attempt was under way and is answered 2xx is delivered; a given-up one is not.
        store
            .event_delivered(&dropped.event_id, 200, Timestamp(T0 + 30))
            .await
            .expect("recorded");
        store
            .event_attempt_failed(
                &log[0].event_id,
                Some(500),
                "the receiver answered HTTP 500",
                None,
            )
            .await
            .expect("given up");
        store
            .event_delivered(&log[0].event_id, 200, Timestamp(T0 + 31))
            .await
            .expect("recorded");
        let after = store.deliveries("ag_1", 10).await.expect("log");
        assert_eq!(after[4].state, "delivered", "{name}");
        assert!(after[4].last_error.is_none(), "{name}");
        assert_eq!(after[0].state, "failed", "{name}");
        assert_eq!(
            (after[0].attempts, after[0].last_status),
            (1, Some(500)),
            "{name}"
        );

        // A lower cap at the next start drops the excess with the next event queued.
        store.set_max_pending_events(1).await.expect("cap");
        cancelled(store, "ag_1", "q6", 40).await;
        let pending: Vec<String> = store
            .deliveries("ag_1", 10)
            .await
            .expect("log")
            .into_iter()
            .filter(|d| d.state == "pending")
            .map(|d| d.question_id)
            .collect();
        assert_eq!(pending, ["q6"], "{name}");
    }
}

#[tokio::test]
async fn the_due_read_skips_the_busy_agents() {
    for backend in backends().await {
        let (store, name) = (&backend.store, backend.name());
        backlog(store).await;
        let now = Timestamp(T0 + 100);
        // ag_1 in flight: its backlog is left out of the read.
        let busy = ["ag_1".to_string()];
        assert_eq!(
            store.next_event_due(&busy).await.expect("next"),
            Some(Timestamp(T0 + 20)),
            "{name}: the next due of an agent not in flight"
        );
        let both = ["ag_1".to_string(), "ag_2".to_string()];
        assert!(
            store.due_events(now, &both, 10).await.expect("due").is_empty(),
            "{name}"
        );
        assert_eq!(store.next_event_due(&both).await.expect("next"), None, "{name}");
        let due = store.due_events(now, &busy, 10).await.expect("due");
        assert!(
            matches!(&due[0].target, Target::Webhook { url, secret } if url == "http://127.0.0.1:9/hook" && secret == SECRET),
            "{name}: {:?}",
            due[0].target
        );
        assert_eq!(due_questions(due), [pair("ag_2", "b1")], "{name}");
    }
}

#[tokio::test]
async fn a_removed_webhook_fails_its_pending_events_and_queues_no_more() {
    for backend in backends().await {
        let (store, name) = (&backend.store, backend.name());
        webhook_agents(store).await;
        cancelled(store, "ag_1", "q1", 10).await;
        let removed = store.delete_webhook("ag_1").await.expect("removed");
        assert!(removed.url.is_none(), "{name}");
        assert!(store.webhook("ag_1").await.expect("read").url.is_none(), "{name}");
        let log = store.deliveries("ag_1", 10).await.expect("log");
        assert_eq!(log[0].state, "failed", "{name}");
        assert_eq!(
            log[0].last_error.as_deref(),
            Some("the webhook was removed"),
            "{name}"
        );
        assert!(
            !cancelled(store, "ag_1", "q2", 11).await,
            "{name}: no webhook, no event"
        );
        let info = store.webhook("ag_2").await.expect("read");
        assert_eq!(
            (info.url.as_deref(), info.updated_at),
            (Some("http://127.0.0.1:9/hook"), Some(Timestamp(T0 + 2))),
            "{name}"
        );
    }
}

#[tokio::test]
async fn a_secret_sealed_with_a_lost_key_is_unreadable_not_an_error() {
    for mut backend in backends().await {
        let name = backend.name();
        webhook_agents(&backend.store).await;
        cancelled(&backend.store, "ag_1", "q1", 10).await;
        let sealed = backend.sealed_secret("ag_1").await;
        assert!(
            !sealed.windows(6).any(|w| w == b"whsec_"),
            "{name}: never in clear"
        );

        backend.lose_the_webhook_key().await;
        let store = &backend.store;
        let due = store.due_events(Timestamp(T0 + 20), &[], 10).await.expect("due");
        assert!(matches!(due[0].target, Target::Unreadable), "{name}");
        store
            .set_webhook(
                "ag_1",
                "http://127.0.0.1:9/hook",
                "whsec_set_again_0123456",
                Timestamp(T0 + 30),
            )
            .await
            .expect("set again");
        let due = store
            .due_events(Timestamp(T0 + 20 + AFTER_ANY_CLAIM), &[], 10)
            .await
            .expect("due");
        assert!(
            matches!(&due[0].target, Target::Webhook { secret, .. } if secret == "whsec_set_again_0123456"),
            "{name}"
        );
    }
}

#[tokio::test]
async fn the_outboxes_give_their_depth_and_oldest_entry() {
    for backend in backends().await {
        let name = backend.name();
        let store = &backend.store;
        assert_eq!(
            store.outboxes().await.expect("reads"),
            Outboxes::default(),
            "{name}"
        );
        with_webhook(store, "ag_1", 1).await;
        backend.add_devices().await;
        store
            .put_push_subscription(
                "ag_1",
                "dv_1",
                "https://push.example/a",
                &[4; 65],
                &[0; 16],
                Timestamp(T0),
            )
            .await
            .expect("subscribed");
        let to_phone = [DeviceEnvelope {
            device_id: "dv_1".into(),
            envelope: "AQID".into(),
        }];
        for (id, at) in [("n1", T0 + 5), ("n2", T0 + 9)] {
            store
                .put_notification("ag_1", id, &to_phone, Timestamp(at))
                .await
                .expect("stored");
        }
        // Two events queued, the older one delivered: one pending, since T0 + 4.
        assert!(cancelled(store, "ag_1", "q1", 3).await, "{name}");
        assert!(cancelled(store, "ag_1", "q2", 4).await, "{name}");
        let first = store
            .due_events(Timestamp(T0 + 5), &[], 1)
            .await
            .expect("due")
            .remove(0);
        store
            .event_delivered(&first.event_id, 200, Timestamp(T0 + 6))
            .await
            .expect("delivered");
        let figures = store.outboxes().await.expect("reads");
        assert_eq!(
            (figures.push.pending, figures.push.oldest),
            (2, Some(Timestamp(T0 + 5))),
            "{name}"
        );
        assert_eq!(
            (figures.webhook.pending, figures.webhook.oldest),
            (1, Some(Timestamp(T0 + 4))),
            "{name}"
        );
    }
}
