//! Agents: registration and its retries, and the one name space of agent and device ids — on each backend.

use pacerelle_core::Timestamp;
use pacerelle_core::keys;
use pacerelle_core::pairing::Role;

use super::{T0, backends};
use crate::store::{NewPairing, PairingStored, Registered, Store};

/// Registers agent `ag_1` ("laptop", secret hash `[1; 32]`) at [`T0`]: the fixture of the backends' own tests.
pub(in crate::store) async fn register_ag_1(store: &Store) {
    let registered = store
        .register_agent("ag_1", "laptop", &[1; 32], Timestamp(T0))
        .await
        .expect("stored");
    assert!(matches!(registered, Registered::Created(_)), "{registered:?}");
}

#[tokio::test]
async fn registration_is_idempotent_for_the_same_secret_only() {
    for backend in backends().await {
        let store = &backend.with_agent().await;
        let name = backend.name();
        let again = store
            .register_agent("ag_1", "other name", &[1; 32], Timestamp(T0 + 5))
            .await
            .expect("ok");
        let Registered::Again(info) = again else {
            panic!("{name}: a retry finds the agent, got {again:?}");
        };
        assert_eq!(
            (info.name.as_str(), info.created_at),
            ("laptop", Timestamp(T0)),
            "{name}"
        );
        let other = store
            .register_agent("ag_1", "laptop", &[2; 32], Timestamp(T0))
            .await
            .expect("ok");
        assert!(matches!(other, Registered::Exists), "{name}: {other:?}");
        let agent = store.agent("ag_1").await.expect("read").expect("found");
        assert_eq!(
            (agent.agent_id.as_str(), agent.created_at),
            ("ag_1", Timestamp(T0)),
            "{name}"
        );
        assert!(store.agent("ag_2").await.expect("read").is_none(), "{name}");
    }
}

#[tokio::test]
async fn agent_and_device_ids_never_collide() {
    for backend in backends().await {
        let store = &backend.with_agent().await;
        let name = backend.name();
        let offer = NewPairing {
            agent_id: "ag_1",
            pairing_id: "BBBBBBBBBBBBBBBBBBBBBB",
            device_id: "ag_1",
            label: None,
            role: Role::Owner,
            claim_hash: keys::sha256(b"claim"),
            offer: "AQID",
            expires_at: Timestamp(T0 + 1000),
            now: Timestamp(T0),
        };
        let taken = store.create_pairing(&offer).await.expect("ok");
        assert!(matches!(taken, PairingStored::Conflict(_)), "{name}: {taken:?}");
        let offer = NewPairing {
            device_id: "dv_x",
            ..offer
        };
        store.create_pairing(&offer).await.expect("ok");
        let impostor = store
            .register_agent("dv_x", "impostor", &[3; 32], Timestamp(T0))
            .await
            .expect("ok");
        assert!(matches!(impostor, Registered::Exists), "{name}: {impostor:?}");
    }
}
