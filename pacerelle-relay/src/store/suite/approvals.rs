//! Questions that need several approvals: each device's answer kept until enough devices answered or one
//! closes the question — on each backend.

use pacerelle_core::Timestamp;

use super::questions::ask_ready;
use super::{T0, backends};
use crate::store::Transition;

/// Asks `id` of `ag_1`'s two devices at [`T0`], needing `approvals` of them.
async fn ask_both(store: &crate::store::Store, id: &str, approvals: u32) {
    let envelopes = super::questions::envelopes();
    let q = crate::store::NewQuestion {
        question_id: id,
        kind: pacerelle_core::question::QuestionKind::YesNo,
        expires_at: Timestamp(T0 + 60_000),
        self_envelope: "AAAA",
        envelopes: &envelopes,
        user_id: None,
        approvals,
    };
    let put = store
        .put_question("ag_1", &q, u32::MAX, Timestamp(T0))
        .await
        .expect("ok");
    assert!(matches!(put, crate::store::QuestionPut::Item(_)));
}

#[tokio::test]
async fn a_question_needing_two_approvals_stays_open_until_two_devices_answered_or_one_closes_it() {
    use pacerelle_core::question::{QuestionState, Refusal};
    for backend in backends().await {
        let name = backend.name();
        let store = &ask_ready(&backend).await;
        ask_both(store, "q_two", 2).await;
        let answer = |device: &'static str, envelope: &'static str, closes: bool, at: i64| {
            store.answer_question_closing(
                "ag_1",
                device,
                "q_two",
                envelope,
                Some("Cp"),
                closes,
                Timestamp(T0 + at),
            )
        };
        // One answer: kept, the question still pending, the device listed.
        let (first, effects) = answer("dv_1", "YES1", false, 10).await.expect("ok");
        let Transition::Done(first) = first else {
            panic!("{name}: kept")
        };
        assert_eq!(first.meta.state, QuestionState::Pending, "{name}");
        assert_eq!(
            (first.meta.approvals, first.meta.answers.as_slice()),
            (2, &["dv_1".to_string()][..])
        );
        assert!(!effects.closed);
        // The same device again counts once.
        let (again, _) = answer("dv_1", "OTHER", false, 11).await.expect("ok");
        assert!(
            matches!(again, Transition::Done(ref q) if q.meta.answers.len() == 1),
            "{name}"
        );
        // The second device: closed as answered, both answers kept for the agent, in order.
        let (second, effects) = answer("dv_2", "YES2", false, 20).await.expect("ok");
        let Transition::Done(second) = second else {
            panic!("{name}: closed")
        };
        assert_eq!(second.meta.state, QuestionState::Answered);
        assert!(effects.closed && effects.event);
        let view = store
            .question("ag_1", "q_two", Timestamp(T0 + 30))
            .await
            .expect("ok")
            .expect("found");
        let kept: Vec<(&str, i64, &str)> = view
            .answers
            .iter()
            .map(|a| (a.device_id.as_str(), a.answered_at.millis(), a.envelope.as_str()))
            .collect();
        assert_eq!(
            kept,
            [("dv_1", T0 + 10, "YES1"), ("dv_2", T0 + 20, "YES2")],
            "{name}"
        );
        assert_eq!((view.approvals, view.answered_by.as_deref()), (2, Some("dv_2")));
        // A retry of the first device once closed: the question as it stands, not a refusal.
        let (late, _) = answer("dv_1", "YES1", false, 40).await.expect("ok");
        assert!(
            matches!(late, Transition::Done(ref q) if q.meta.state == QuestionState::Answered),
            "{name}"
        );

        // A closing answer (a no) closes it at once.
        ask_both(store, "q_no", 2).await;
        let (no, _) = store
            .answer_question_closing("ag_1", "dv_2", "q_no", "NO2", None, true, Timestamp(T0 + 50))
            .await
            .expect("ok");
        assert!(
            matches!(no, Transition::Done(ref q) if q.meta.state == QuestionState::Answered),
            "{name}"
        );
        let (after, _) = store
            .answer_question_closing("ag_1", "dv_1", "q_no", "YES1", None, false, Timestamp(T0 + 60))
            .await
            .expect("ok");
        assert!(
            matches!(after, Transition::Refused(Refusal::AlreadyAnswered)),
            "{name}"
        );
        let view = store
            .question("ag_1", "q_no", Timestamp(T0 + 70))
            .await
            .expect("ok")
            .expect("found");
        assert_eq!(view.answers.len(), 1);
        // One approval alone, then the expiry: expired, the answer still kept for the record.
        ask_both(store, "q_late", 2).await;
        answer_one(store, "q_late").await;
        let view = store
            .question("ag_1", "q_late", Timestamp(T0 + 60_000))
            .await
            .expect("ok")
            .expect("found");
        assert_eq!(
            (view.state, view.answers.len()),
            (QuestionState::Expired, 1),
            "{name}"
        );
    }
}

async fn answer_one(store: &crate::store::Store, id: &str) {
    let (kept, _) = store
        .answer_question_closing("ag_1", "dv_1", id, "YES1", None, false, Timestamp(T0 + 5))
        .await
        .expect("ok");
    assert!(matches!(kept, Transition::Done(_)));
}
