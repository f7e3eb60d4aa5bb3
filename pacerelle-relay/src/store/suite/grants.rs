//! Grants: registered only for a question its device answered on a phone, used while live, revoked once,
//! listed for a device with its question — on each backend.

use pacerelle_core::Timestamp;

use super::questions::{ask, ask_ready};
use super::{T0, backends};
use crate::store::Transition;
use crate::store::grants::GrantPut;

#[tokio::test]
async fn a_grant_is_registered_for_its_answer_used_while_live_and_revoked_once() {
    for backend in backends().await {
        let name = backend.name();
        let store = &ask_ready(&backend).await;
        ask(store, "q_gate", T0, T0 + 60_000).await;
        let (granted_at, expires_at) = (Timestamp(T0 + 10), Timestamp(T0 + 3_600_000));
        // Before the answer, and for an unknown question: refused.
        let early = store
            .put_grant("ag_1", "q_gate", "dv_1", granted_at, expires_at)
            .await
            .expect("ok");
        assert!(matches!(early, GrantPut::NotItsAnswer), "{name}: {early:?}");
        let unknown = store
            .put_grant("ag_1", "q_none", "dv_1", granted_at, expires_at)
            .await
            .expect("ok");
        assert!(matches!(unknown, GrantPut::NoQuestion), "{name}");
        let (answered, _) = store
            .answer_question("ag_1", "dv_1", "q_gate", "AQID", Some("Ag"), granted_at)
            .await
            .expect("ok");
        assert!(matches!(answered, Transition::Done(_)));
        // Another device than the one that answered, another agent: refused.
        let other = store
            .put_grant("ag_1", "q_gate", "dv_2", granted_at, expires_at)
            .await
            .expect("ok");
        assert!(matches!(other, GrantPut::NotItsAnswer), "{name}");
        let foreign = store
            .put_grant("ag_2", "q_gate", "dv_1", granted_at, expires_at)
            .await
            .expect("ok");
        assert!(matches!(foreign, GrantPut::NoQuestion), "{name}");

        let GrantPut::Stored(first) = store
            .put_grant("ag_1", "q_gate", "dv_1", granted_at, expires_at)
            .await
            .expect("ok")
        else {
            panic!("{name}: stored")
        };
        assert_eq!(
            (first.uses, first.expires_at, first.revoked_at),
            (0, expires_at, None)
        );
        // Registered again, even with another expiry: the first registration stands.
        let GrantPut::Stored(again) = store
            .put_grant("ag_1", "q_gate", "dv_1", granted_at, Timestamp(T0 + 7_200_000))
            .await
            .expect("ok")
        else {
            panic!("{name}: found")
        };
        assert_eq!(again, first, "{name}");

        for n in 1..=3 {
            let used = store
                .use_grant("ag_1", "q_gate", Timestamp(T0 + 100 + n))
                .await
                .expect("ok");
            let used = used.expect("found");
            assert_eq!(
                (used.uses, used.last_used_at),
                (n as u64, Some(Timestamp(T0 + 100 + n))),
                "{name}"
            );
        }
        assert!(
            store
                .use_grant("ag_1", "q_none", Timestamp(T0 + 200))
                .await
                .expect("ok")
                .is_none()
        );
        assert!(
            store
                .use_grant("ag_2", "q_gate", Timestamp(T0 + 200))
                .await
                .expect("ok")
                .is_none()
        );
        // Past its expiry a use is not counted.
        let late = store
            .use_grant("ag_1", "q_gate", expires_at)
            .await
            .expect("ok")
            .expect("found");
        assert_eq!(late.uses, 3, "{name}");

        // The device's list: the grant, with its question sealed for that device.
        let listed = store
            .device_grants("ag_1", "dv_2", Timestamp(T0 + 300))
            .await
            .expect("ok");
        assert_eq!(listed.len(), 1, "{name}");
        assert_eq!(listed[0].record.grant_id, "q_gate");
        assert_eq!(listed[0].record.uses, 3);
        let question = listed[0].question.as_ref().expect("sealed for dv_2");
        assert_eq!(
            (question.envelope.as_str(), question.meta.answer_copy.as_deref()),
            ("BAUG", Some("Ag"))
        );
        // A device it was not sealed for still sees the grant, without a question.
        backend.add_device("ag_1", "dv_3", "laptop").await;
        let listed = store
            .device_grants("ag_1", "dv_3", Timestamp(T0 + 300))
            .await
            .expect("ok");
        assert!(listed.len() == 1 && listed[0].question.is_none(), "{name}");
        // Listed for a day after its end, then no more.
        let day = 24 * 3600 * 1000;
        let ended = Timestamp(expires_at.millis() + day - 1);
        assert_eq!(
            store
                .device_grants("ag_1", "dv_1", ended)
                .await
                .expect("ok")
                .len(),
            1
        );
        let gone = Timestamp(expires_at.millis() + day);
        assert!(
            store
                .device_grants("ag_1", "dv_1", gone)
                .await
                .expect("ok")
                .is_empty(),
            "{name}"
        );

        // Revoked once: the first revocation stands, and no use counts after it.
        let revoked = store
            .revoke_grant("ag_1", "q_gate", "dv_2", Timestamp(T0 + 400))
            .await
            .expect("ok")
            .expect("found");
        assert_eq!(
            (revoked.revoked_at, revoked.revoked_by.as_deref()),
            (Some(Timestamp(T0 + 400)), Some("dv_2"))
        );
        let again = store
            .revoke_grant("ag_1", "q_gate", "dv_1", Timestamp(T0 + 500))
            .await
            .expect("ok")
            .expect("found");
        assert_eq!(again, revoked, "{name}");
        let after = store
            .use_grant("ag_1", "q_gate", Timestamp(T0 + 600))
            .await
            .expect("ok")
            .expect("found");
        assert_eq!(
            (after.uses, after.revoked_at),
            (3, Some(Timestamp(T0 + 400))),
            "{name}"
        );
        assert!(!after.live_at(Timestamp(T0 + 600)));
        assert!(
            store
                .revoke_grant("ag_1", "q_none", "dv_1", Timestamp(T0))
                .await
                .expect("ok")
                .is_none()
        );
    }
}
