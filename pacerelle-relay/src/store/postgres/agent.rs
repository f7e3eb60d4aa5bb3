//! The PostgreSQL backend: agents and credentials — registration, the agent itself, and the principal behind a
//! bearer id (mirrors `sqlite/agent.rs`).
//!
//! Agent ids and device ids share one name space: registration refuses an id that a device or a pairing offer
//! holds, and a pairing refuses a device id that an agent holds. SQLite's single writer makes each check and the
//! insert after it one step; here two transactions could both pass the check, so both take a transaction-scoped
//! advisory lock on the id first ([`lock_ids`]) and the second one's check sees what the first committed.

use pacerelle_core::keys;

use super::prelude::*;

/// Takes, until the transaction ends, an advisory lock on each of `ids` (an agent, device or pairing id): two
/// transactions that check and then claim the same id run one after the other. The locks are taken in the
/// order of their keys, so two transactions that lock several ids cannot wait for each other in a circle.
pub(super) async fn lock_ids(conn: &mut PgConnection, ids: &[&str]) -> Result<()> {
    sqlx::query(
        "SELECT pg_advisory_xact_lock(k)
         FROM (SELECT DISTINCT hashtextextended(id, 0) AS k FROM unnest($1::text[]) AS id) AS keys
         ORDER BY k",
    )
    .bind(ids)
    .execute(conn)
    .await?;
    Ok(())
}

impl PgStore {
    /// Registers an agent. The same id with the same hash again is a retry: it finds the stored agent.
    pub(crate) async fn register_agent(&self, new: &NewAgent<'_>) -> Result<Registered> {
        let mut tx = self.pool.begin().await?;
        lock_ids(&mut tx, &[new.agent_id]).await?;
        let existing: Option<(String, Vec<u8>, i64)> =
            sqlx::query_as("SELECT name, auth_hash, created_at FROM agents WHERE agent_id = $1")
                .bind(new.agent_id)
                .fetch_optional(&mut *tx)
                .await?;
        let outcome = match existing {
            Some((stored_name, stored_hash, created_at)) => {
                if keys::constant_time_eq(&stored_hash, new.auth_hash) {
                    Registered::Again(AgentInfo {
                        agent_id: new.agent_id.to_string(),
                        name: stored_name,
                        created_at: Timestamp(created_at),
                    })
                } else {
                    Registered::Exists
                }
            }
            None => {
                let taken: bool = sqlx::query_scalar(
                    "SELECT EXISTS (SELECT 1 FROM devices WHERE device_id = $1)
                         OR EXISTS (SELECT 1 FROM pairings WHERE device_id = $1)",
                )
                .bind(new.agent_id)
                .fetch_one(&mut *tx)
                .await?;
                if taken {
                    Registered::Exists
                } else {
                    sqlx::query(
                        "INSERT INTO agents (agent_id, name, auth_hash, created_at) VALUES ($1, $2, $3, $4)",
                    )
                    .bind(new.agent_id)
                    .bind(new.name)
                    .bind(&new.auth_hash[..])
                    .bind(new.now.millis())
                    .execute(&mut *tx)
                    .await?;
                    Registered::Created(AgentInfo {
                        agent_id: new.agent_id.to_string(),
                        name: new.name.to_string(),
                        created_at: new.now,
                    })
                }
            }
        };
        tx.commit().await?;
        self.committed();
        Ok(outcome)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::sync::Arc;

    use pacerelle_core::pairing::Role;
    use pacerelle_test_support::postgres::Cluster;
    use tokio::sync::Barrier;

    use super::*;
    use crate::store::Principal;
    use crate::store::{Claim, NewPairing, PairingStored};

    /// The tests' "now".
    pub(in super::super) const T0: i64 = 1_800_000_000_000;

    /// A store on a fresh database of the test cluster, with one agent, `ag_1`; `None` (the test then passes
    /// without running, saying so) unless `PACERELLE_TEST_POSTGRES` names or asks for a cluster.
    pub(in super::super) async fn store() -> Option<(PgStore, tempfile::TempDir)> {
        let Some(cluster) = Cluster::shared() else {
            println!("skipped: PACERELLE_TEST_POSTGRES=off");
            return None;
        };
        let dir = tempfile::tempdir().expect("a temporary directory");
        let url = cluster.fresh_database().await;
        let store = PgStore::open(&url, dir.path()).await.expect("opens");
        crate::store::suite::agent::register_ag_1(&store.as_store()).await;
        Some((store, dir))
    }

    /// An offer for `device_id` of `agent_id` under `pairing_id`, claimable with `b"claim"` until `T0 + 1000`.
    pub(in super::super) fn offer<'a>(
        agent_id: &'a str,
        pairing_id: &'a str,
        device_id: &'a str,
    ) -> NewPairing<'a> {
        NewPairing {
            agent_id,
            pairing_id,
            device_id,
            label: Some("kitchen"),
            role: Role::User,
            claim_hash: keys::sha256(b"claim"),
            offer: "AQID",
            expires_at: Timestamp(T0 + 1000),
            now: Timestamp(T0),
        }
    }

    /// Pairs device `device_id` with `ag_1` (offer, then claim).
    pub(in super::super) async fn pair(store: &PgStore, pairing_id: &str, device_id: &str) {
        let created = store
            .create_pairing(&offer("ag_1", pairing_id, device_id))
            .await
            .expect("stored");
        assert!(matches!(created, PairingStored::Created(_)));
        let claimed = store
            .as_store()
            .claim_pairing(
                pairing_id,
                &keys::sha256(b"claim"),
                "phone",
                None,
                Timestamp(T0 + 1),
            )
            .await
            .expect("claimed");
        assert!(matches!(claimed, Claim::Claimed(_)));
    }

    #[tokio::test]
    async fn a_principal_is_the_agent_or_the_device_and_shows_a_revocation() {
        let Some((store, _dir)) = store().await else {
            return;
        };
        pair(&store, "CCCCCCCCCCCCCCCCCCCCCC", "dv_1").await;
        let Some(Principal::Agent { agent_id, hash }) =
            store.as_store().principal("ag_1").await.expect("read")
        else {
            panic!("ag_1 is an agent");
        };
        assert_eq!((agent_id.as_str(), hash), ("ag_1", vec![1; 32]));
        let Some(Principal::Device {
            agent_id,
            device_id,
            role,
            hash,
            revoked,
        }) = store.as_store().principal("dv_1").await.expect("read")
        else {
            panic!("dv_1 is a device");
        };
        assert_eq!(
            (agent_id.as_str(), device_id.as_str(), role, revoked),
            ("ag_1", "dv_1", Role::User, false)
        );
        assert_eq!(hash.len(), 32);
        assert!(
            store
                .as_store()
                .principal("nobody")
                .await
                .expect("read")
                .is_none()
        );
        store
            .as_store()
            .revoke_device("ag_1", "dv_1", Timestamp(T0 + 2))
            .await
            .expect("revoked");
        assert!(matches!(
            store.as_store().principal("dv_1").await.expect("read"),
            Some(Principal::Device { revoked: true, .. })
        ));
    }

    /// Eight registrations of one new id at once, each with its own secret, in twenty rounds: one creates it,
    /// the others find it taken — as eight one after the other would.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_registrations_of_one_id_create_it_once() {
        let Some((store, _dir)) = store().await else {
            return;
        };
        for round in 0..20 {
            let id = format!("ag_race_{round}");
            let start = Arc::new(Barrier::new(8));
            let mut tasks = tokio::task::JoinSet::new();
            for i in 0..8u8 {
                let (store, start, id) = (store.clone(), start.clone(), id.clone());
                tasks.spawn(async move {
                    start.wait().await;
                    store
                        .as_store()
                        .register_agent(&id, "racer", &[i; 32], Timestamp(T0))
                        .await
                        .expect("ok")
                });
            }
            let outcomes = tasks.join_all().await;
            let created = outcomes
                .iter()
                .filter(|o| matches!(o, Registered::Created(_)))
                .count();
            let exists = outcomes
                .iter()
                .filter(|o| matches!(o, Registered::Exists))
                .count();
            assert_eq!((created, exists), (1, 7), "round {round}: {outcomes:?}");
        }
    }

    /// A registration and a pairing offer that want one id at the same moment: exactly one of them gets it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_registration_and_a_pairing_racing_for_one_id_do_not_both_get_it() {
        let Some((store, _dir)) = store().await else {
            return;
        };
        for round in 0..20 {
            let id = format!("id_{round}");
            let pairing_id = format!("pairing_{round:0>14}");
            let start = Arc::new(Barrier::new(2));
            let (s1, b1, id1) = (store.clone(), start.clone(), id.clone());
            let register = tokio::spawn(async move {
                b1.wait().await;
                s1.as_store()
                    .register_agent(&id1, "racer", &[9; 32], Timestamp(T0))
                    .await
                    .expect("ok")
            });
            let (s2, b2, id2) = (store.clone(), start.clone(), id.clone());
            let offer_it = tokio::spawn(async move {
                b2.wait().await;
                s2.create_pairing(&offer("ag_1", &pairing_id, &id2))
                    .await
                    .expect("ok")
            });
            let registered = matches!(register.await.expect("joined"), Registered::Created(_));
            let offered = matches!(offer_it.await.expect("joined"), PairingStored::Created(_));
            assert!(
                registered != offered,
                "round {round}: registered {registered}, offered {offered}"
            );
        }
    }
}
