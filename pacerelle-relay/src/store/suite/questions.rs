//! Questions: expiry, the first answer, answers at the computer — on each backend.

use pacerelle_core::Timestamp;
use pacerelle_core::question::{Channel, QuestionKind, QuestionState, Refusal};
use pacerelle_core::wire::{DeviceEnvelope, ItemState, QuestionView};

use super::{Backend, T0, backends};
use crate::store::rows::{ANSWERED, EXPIRED};
use crate::store::{ItemPut, LogQuery, NewQuestion, QuestionPut, Registered, StateFilter, Store, Transition};

/// `backend`'s store with agent `ag_1`, its devices `dv_1` and `dv_2`, and a webhook (so that closing a question
/// queues an event).
pub(in crate::store) async fn ask_ready(backend: &Backend) -> Store {
    let store = backend.store.clone();
    let registered = store
        .register_agent("ag_1", "laptop", &[1; 32], Timestamp(T0))
        .await
        .expect("stored");
    assert!(matches!(registered, Registered::Created(_)), "{}", backend.name());
    backend.add_devices().await;
    store
        .set_webhook(
            "ag_1",
            "http://127.0.0.1:9/hook",
            "0123456789abcdef",
            Timestamp(T0),
        )
        .await
        .expect("webhook");
    store
}

/// A copy of a question for each of `ag_1`'s two devices.
pub(in crate::store) fn envelopes() -> [DeviceEnvelope; 2] {
    [
        DeviceEnvelope {
            device_id: "dv_1".into(),
            envelope: "AQID".into(),
        },
        DeviceEnvelope {
            device_id: "dv_2".into(),
            envelope: "BAUG".into(),
        },
    ]
}

/// Puts yes/no question `id` to `ag_1`'s two devices at `at`, expiring at `expires_at`, with room for
/// `max_open` open questions: what the store answers.
pub(in crate::store) async fn put(
    store: &Store,
    id: &str,
    at: i64,
    expires_at: i64,
    max_open: u32,
) -> QuestionPut {
    let envelopes = envelopes();
    let q = NewQuestion {
        question_id: id,
        kind: QuestionKind::YesNo,
        expires_at: Timestamp(expires_at),
        self_envelope: "AAAA",
        envelopes: &envelopes,
        user_id: None,
        approvals: 1,
    };
    store
        .put_question("ag_1", &q, max_open, Timestamp(at))
        .await
        .expect("ok")
}

/// Asks yes/no question `id` of `ag_1`'s two devices at `at`, expiring at `expires_at`.
pub(in crate::store) async fn ask(store: &Store, id: &str, at: i64, expires_at: i64) {
    let put = put(store, id, at, expires_at, u32::MAX).await;
    assert!(matches!(put, QuestionPut::Item(item) if matches!(*item, ItemPut::Stored(_, true))));
}

/// The webhook events queued for `ag_1`: (question, event type), sorted.
pub(in crate::store) async fn events(store: &Store) -> Vec<(String, String)> {
    let mut all: Vec<(String, String)> = store
        .deliveries("ag_1", 200)
        .await
        .expect("ok")
        .into_iter()
        .map(|d| (d.question_id, d.event_type))
        .collect();
    all.sort();
    all
}

/// The question `id` of agent `ag_1` as it reads at `now`; it must exist.
pub(in crate::store) async fn read(store: &Store, id: &str, now: Timestamp) -> QuestionView {
    store.question("ag_1", id, now).await.expect("ok").expect("found")
}

/// Checks, on a store just migrated from before answers had a channel, whose agent `ag_1` holds `q1` answered
/// by `dv_1` ("phone") at 5 with the envelope `ANS`, and `q2` pending: the old answer reads as given on the phone,
/// by its device; the pending question has no channel.
pub(in crate::store) async fn answers_after_migration(store: &Store) {
    let now = Timestamp(10);
    let q1 = store
        .question("ag_1", "q1", now)
        .await
        .expect("ok")
        .expect("found");
    assert_eq!(
        (q1.state, q1.channel),
        (QuestionState::Answered, Some(Channel::Phone))
    );
    assert_eq!(
        (q1.answered_by.as_deref(), q1.answered_by_name.as_deref()),
        (Some("dv_1"), Some("phone"))
    );
    assert_eq!(
        (q1.answered_at, q1.answer_envelope.as_deref()),
        (Some(Timestamp(5)), Some("ANS"))
    );
    let q2 = store
        .question("ag_1", "q2", now)
        .await
        .expect("ok")
        .expect("found");
    assert_eq!((q2.state, q2.channel), (QuestionState::Pending, None));
}

/// Checks, on a store just migrated from before questions had users, whose agent `ag_1` holds the pending
/// question `q1` sealed for `dv_1`: `q1` has no user; a new question keeps the user it was asked for, and a
/// retry of it with another user is the question as first stored; the answer log reads both users back.
pub(in crate::store) async fn users_after_migration(store: &Store) {
    let now = Timestamp(10);
    let q1 = store
        .question("ag_1", "q1", now)
        .await
        .expect("ok")
        .expect("found");
    assert_eq!((q1.state, q1.user_id), (QuestionState::Pending, None));
    let envelopes = [DeviceEnvelope {
        device_id: "dv_1".into(),
        envelope: "AQID".into(),
    }];
    let mut q = NewQuestion {
        question_id: "q2",
        kind: QuestionKind::YesNo,
        expires_at: Timestamp(9_000_000_000_000),
        self_envelope: "AAAA",
        envelopes: &envelopes,
        user_id: Some("alice"),
        approvals: 1,
    };
    let put = store.put_question("ag_1", &q, u32::MAX, now).await.expect("ok");
    let QuestionPut::Item(item) = put else {
        panic!("stored");
    };
    let ItemPut::Stored(created, true) = *item else {
        panic!("stored now");
    };
    assert_eq!(created.user_id.as_deref(), Some("alice"));
    q.user_id = Some("bob");
    let again = store.put_question("ag_1", &q, u32::MAX, now).await.expect("ok");
    assert!(
        matches!(again, QuestionPut::Item(item) if matches!(*item, ItemPut::Stored(ref v, false) if *v == created))
    );
    let query = LogQuery {
        state: StateFilter::All,
        since: None,
        until: None,
        before: None,
        limit: 10,
    };
    let log = store.answer_log("ag_1", &query, now).await.expect("ok");
    let users: Vec<(&str, Option<&str>)> = log
        .questions
        .iter()
        .map(|v| (v.question_id.as_str(), v.user_id.as_deref()))
        .collect();
    assert_eq!(users, [("q2", Some("alice")), ("q1", None)]);
}

#[tokio::test]
async fn the_expirer_writes_each_expiry_and_its_event_exactly_once() {
    for backend in backends().await {
        let store = &ask_ready(&backend).await;
        ask(store, "q1", T0, T0 + 1000).await;
        assert_eq!(store.next_expiry().await.expect("ok"), Some(Timestamp(T0 + 1000)));

        assert!(
            store
                .expire_due(Timestamp(T0 + 999), 10)
                .await
                .expect("ok")
                .agents
                .is_empty()
        );
        // Reads show the expiry at once; the row is written by the expirer.
        let v = store
            .question("ag_1", "q1", Timestamp(T0 + 1000))
            .await
            .expect("ok")
            .expect("found");
        assert_eq!(v.state, QuestionState::Expired);
        assert_eq!(v.closed_at, Some(Timestamp(T0 + 1000)));
        assert_eq!(backend.stored_state("q1").await, "pending");

        let pass = store.expire_due(Timestamp(T0 + 1500), 10).await.expect("ok");
        assert_eq!(pass.agents, ["ag_1"]);
        assert!(pass.events && !pass.more);
        let expired: Vec<(&str, ItemState, &[String])> = pass
            .updates
            .iter()
            .map(|u| (u.subject_id.as_str(), u.state, u.recipients.as_slice()))
            .collect();
        assert_eq!(
            expired,
            [(
                "q1",
                ItemState::Expired,
                &["dv_1".to_string(), "dv_2".to_string()][..]
            )]
        );
        assert_eq!(backend.stored_state("q1").await, "expired");
        let again = store.expire_due(Timestamp(T0 + 2000), 10).await.expect("ok");
        assert!(again.agents.is_empty() && !again.events && again.updates.is_empty());
        assert_eq!(store.next_expiry().await.expect("ok"), None);

        // Later writes are refused and queue nothing.
        let (answer, effects) = store
            .answer_question("ag_1", "dv_1", "q1", "AQID", None, Timestamp(T0 + 2000))
            .await
            .expect("ok");
        assert!(matches!(answer, Transition::Refused(Refusal::Expired)));
        assert!(!effects.closed && !effects.event);
        let (cancel, _) = store
            .cancel_question("ag_1", "q1", Timestamp(T0 + 2000))
            .await
            .expect("ok");
        assert!(matches!(cancel, Transition::Refused(Refusal::Expired)));
        assert_eq!(events(store).await, [("q1".to_string(), EXPIRED.to_string())]);
        let v = store
            .question("ag_1", "q1", Timestamp(T0 + 5000))
            .await
            .expect("ok")
            .expect("found");
        assert_eq!(
            v.closed_at,
            Some(Timestamp(T0 + 1000)),
            "closed at its expiry, not when swept"
        );
    }
}

#[tokio::test]
async fn a_write_that_meets_an_unswept_expiry_records_it_once() {
    for backend in backends().await {
        let store = &ask_ready(&backend).await;
        ask(store, "q2", T0, T0 + 1000).await;
        let (answer, effects) = store
            .answer_question("ag_1", "dv_1", "q2", "AQID", None, Timestamp(T0 + 1000))
            .await
            .expect("ok");
        assert!(matches!(answer, Transition::Refused(Refusal::Expired)));
        assert!(effects.closed && effects.event);
        assert_eq!(
            effects.update.map(|u| (u.subject_id, u.state)),
            Some(("q2".to_string(), ItemState::Expired)),
            "the write that meets the expiry stores its update"
        );
        assert_eq!(backend.stored_state("q2").await, "expired");
        assert!(
            store
                .expire_due(Timestamp(T0 + 3000), 10)
                .await
                .expect("ok")
                .agents
                .is_empty()
        );
        assert_eq!(events(store).await, [("q2".to_string(), EXPIRED.to_string())]);
    }
}

#[tokio::test]
async fn the_first_answer_wins_and_queues_one_event() {
    for backend in backends().await {
        let store = &ask_ready(&backend).await;
        ask(store, "q3", T0, T0 + 60_000).await;
        let (first, effects) = store
            .answer_question("ag_1", "dv_1", "q3", "AQID", None, Timestamp(T0 + 10))
            .await
            .expect("ok");
        let Transition::Done(first) = first else {
            panic!("accepted")
        };
        assert_eq!(first.envelope, "AQID", "the device's copy of the question");
        assert_eq!(first.meta.answered_at, Some(Timestamp(T0 + 10)));
        assert!(effects.closed && effects.event);
        let (second, effects) = store
            .answer_question("ag_1", "dv_2", "q3", "BAUG", None, Timestamp(T0 + 11))
            .await
            .expect("ok");
        assert!(matches!(second, Transition::Refused(Refusal::AlreadyAnswered)));
        assert!(!effects.closed && !effects.event && effects.update.is_none());
        let (retry, effects) = store
            .answer_question("ag_1", "dv_1", "q3", "CCCC", None, Timestamp(T0 + 12))
            .await
            .expect("ok");
        assert!(matches!(retry, Transition::Done(ref q) if q.meta.answered_at == Some(Timestamp(T0 + 10))));
        assert!(!effects.closed);
        let v = store
            .question("ag_1", "q3", Timestamp(T0 + 100_000))
            .await
            .expect("ok")
            .expect("found");
        assert_eq!(
            v.state,
            QuestionState::Answered,
            "an answered question never expires"
        );
        assert_eq!(v.answer_envelope.as_deref(), Some("AQID"));
        assert_eq!(v.answered_by_name.as_deref(), Some("phone"));
        assert_eq!(v.recipients, ["dv_1", "dv_2"]);
        // A device the question was not sealed for, and an unknown question: not found.
        let (other, _) = store
            .answer_question("ag_1", "dv_9", "q3", "AQID", None, Timestamp(T0 + 13))
            .await
            .expect("ok");
        assert!(matches!(other, Transition::NotFound));
        let (cancel, _) = store
            .cancel_question("ag_1", "nope", Timestamp(T0))
            .await
            .expect("ok");
        assert!(matches!(cancel, Transition::NotFound));
        assert_eq!(events(store).await, [("q3".to_string(), ANSWERED.to_string())]);
    }
}

#[tokio::test]
async fn an_answer_at_the_host_wins_once_and_a_device_after_it_is_refused() {
    for backend in backends().await {
        let store = &ask_ready(&backend).await;
        ask(store, "q4", T0, T0 + 60_000).await;
        let (first, effects) = store
            .answer_question_at_host("ag_1", "q4", "HOST", Some("COPY"), Timestamp(T0 + 10))
            .await
            .expect("ok");
        let Transition::Done(first) = first else {
            panic!("accepted")
        };
        assert_eq!(first.state, QuestionState::Answered);
        assert_eq!(first.channel, Some(Channel::Host));
        assert_eq!(first.answered_by, None);
        assert_eq!(first.answered_by_name, None);
        assert_eq!(first.answered_at, Some(Timestamp(T0 + 10)));
        assert_eq!(first.answer_envelope.as_deref(), Some("HOST"));
        assert!(effects.closed && effects.event);
        let update = effects.update.expect("an update item");
        assert_eq!(update.state, ItemState::Answered);
        // A retry gets the stored answer; a device after it is refused.
        let (retry, effects) = store
            .answer_question_at_host("ag_1", "q4", "OTHER", None, Timestamp(T0 + 11))
            .await
            .expect("ok");
        assert!(matches!(retry, Transition::Done(ref v) if v.answer_envelope.as_deref() == Some("HOST")));
        assert!(!effects.closed && !effects.event && effects.update.is_none());
        let (device, _) = store
            .answer_question("ag_1", "dv_1", "q4", "AQID", None, Timestamp(T0 + 12))
            .await
            .expect("ok");
        assert!(matches!(device, Transition::Refused(Refusal::AlreadyAnswered)));
        let listed = store
            .device_questions("ag_1", "dv_2", StateFilter::All, 10, Timestamp(T0 + 13))
            .await
            .expect("ok");
        assert_eq!(listed[0].meta.channel, Some(Channel::Host));
        assert_eq!(listed[0].meta.answer_copy.as_deref(), Some("COPY"));
        assert_eq!(events(store).await, [("q4".to_string(), ANSWERED.to_string())]);

        // A device answered first: the host is refused; and a host answer to an unknown question is not found.
        ask(store, "q5", T0, T0 + 60_000).await;
        store
            .answer_question("ag_1", "dv_1", "q5", "AQID", None, Timestamp(T0 + 20))
            .await
            .expect("ok");
        let (late, _) = store
            .answer_question_at_host("ag_1", "q5", "HOST", None, Timestamp(T0 + 21))
            .await
            .expect("ok");
        assert!(matches!(late, Transition::Refused(Refusal::AlreadyAnswered)));
        let v = store
            .question("ag_1", "q5", Timestamp(T0 + 22))
            .await
            .expect("ok")
            .expect("found");
        assert_eq!(v.channel, Some(Channel::Phone));
        let (missing, _) = store
            .answer_question_at_host("ag_1", "nope", "HOST", None, Timestamp(T0 + 23))
            .await
            .expect("ok");
        assert!(matches!(missing, Transition::NotFound));
    }
}
