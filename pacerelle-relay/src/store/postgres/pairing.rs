//! The PostgreSQL backend: pairing — the agent's sealed offers, fetched and claimed once by a phone, which
//! becomes a device (mirrors `sqlite/pairing.rs`).

use pacerelle_core::wire::PairingCreated;

use super::agent::lock_ids;
use super::prelude::*;
use crate::store::ClaimRow;

impl PgStore {
    /// Stores a pairing offer; the same upload again finds it. The pairing id and the device id are locked
    /// first ([`lock_ids`]): a concurrent upload, registration or pairing that wants either id waits and then
    /// finds it taken, as it would after SQLite's single writer.
    pub(crate) async fn create_pairing(&self, p: &NewPairing<'_>) -> Result<PairingStored> {
        let mut tx = self.pool.begin().await?;
        lock_ids(&mut tx, &[p.pairing_id, p.device_id]).await?;
        let outcome = create_pairing_in(&mut tx, p).await?;
        tx.commit().await?;
        self.committed();
        Ok(outcome)
    }

    /// Claims an offer: checks the proof, then in one transaction marks the offer claimed (dropping its
    /// ciphertext), creates the device with its signing key if it gave one, and stores the hash of its new
    /// token. The offer's row is locked while
    /// it is read, so of two concurrent claims the second finds it claimed.
    pub(crate) async fn claim_pairing(&self, claim: &PairingClaim<'_>) -> Result<Claim> {
        let mut tx = self.pool.begin().await?;
        let outcome = claim_pairing_in(
            &mut tx,
            claim.pairing_id,
            claim.proof_hash,
            claim.name,
            claim.signing,
            claim.now,
        )
        .await?;
        tx.commit().await?;
        self.committed();
        Ok(outcome)
    }
}

/// [`PgStore::create_pairing`] within its transaction, the ids already locked.
async fn create_pairing_in(conn: &mut PgConnection, p: &NewPairing<'_>) -> Result<PairingStored> {
    let existing: Option<(String, String, i64, Option<i64>)> = sqlx::query_as(
        "SELECT agent_id, device_id, expires_at, claimed_at FROM pairings WHERE pairing_id = $1",
    )
    .bind(p.pairing_id)
    .fetch_optional(&mut *conn)
    .await?;
    if let Some((stored_agent, stored_device, stored_expiry, claimed_at)) = existing {
        // A retry of the same upload gets the stored offer; anything else is a conflict.
        if stored_agent == p.agent_id && stored_device == p.device_id && claimed_at.is_none() {
            return Ok(PairingStored::Created(PairingCreated {
                pairing_id: p.pairing_id.to_string(),
                device_id: stored_device,
                expires_at: Timestamp(stored_expiry),
            }));
        }
        return Ok(PairingStored::Conflict("this pairing id is already in use"));
    }
    let taken: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM devices WHERE device_id = $1)
             OR EXISTS (SELECT 1 FROM pairings WHERE device_id = $1)
             OR EXISTS (SELECT 1 FROM agents WHERE agent_id = $1)",
    )
    .bind(p.device_id)
    .fetch_one(&mut *conn)
    .await?;
    if taken {
        return Ok(PairingStored::Conflict("this device id is already in use"));
    }
    sqlx::query(
        "INSERT INTO pairings (pairing_id, agent_id, device_id, label, role, claim_hash, offer,
                               expires_at, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(p.pairing_id)
    .bind(p.agent_id)
    .bind(p.device_id)
    .bind(p.label)
    .bind(p.role.as_str())
    .bind(&p.claim_hash[..])
    .bind(p.offer)
    .bind(p.expires_at.millis())
    .bind(p.now.millis())
    .execute(&mut *conn)
    .await?;
    Ok(PairingStored::Created(PairingCreated {
        pairing_id: p.pairing_id.to_string(),
        device_id: p.device_id.to_string(),
        expires_at: p.expires_at,
    }))
}

/// [`PgStore::claim_pairing`] within its transaction.
async fn claim_pairing_in(
    conn: &mut PgConnection,
    pairing_id: &str,
    proof_hash: &[u8; 32],
    name: &str,
    signing: Option<SigningKeyCopy<'_>>,
    now: Timestamp,
) -> Result<Claim> {
    let row: Option<ClaimRow> = sqlx::query_as(
        "SELECT agent_id, device_id, label, role, claim_hash, expires_at, claimed_at
         FROM pairings WHERE pairing_id = $1 FOR UPDATE",
    )
    .bind(pairing_id)
    .fetch_optional(&mut *conn)
    .await?;
    let device = match Claim::check(row, proof_hash, now)? {
        Ok(device) => device,
        Err(refused) => return Ok(refused),
    };
    sqlx::query(
        "UPDATE pairings SET offer = NULL, claimed_at = $2
         WHERE pairing_id = $1 AND claimed_at IS NULL",
    )
    .bind(pairing_id)
    .bind(now.millis())
    .execute(&mut *conn)
    .await?;
    sqlx::query(
        "INSERT INTO devices (device_id, agent_id, name, label, role, token_hash, created_at,
                              signing_key, signing_key_seal)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(&device.device_id)
    .bind(&device.agent_id)
    .bind(name)
    .bind(&device.label)
    .bind(device.role.as_str())
    .bind(&device.token_hash[..])
    .bind(now.millis())
    .bind(signing.map(|s| s.key))
    .bind(signing.map(|s| s.seal))
    .execute(&mut *conn)
    .await?;
    Ok(device.claimed())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tokio::sync::Barrier;

    use super::super::agent::tests::{T0, offer, store};
    use super::*;
    use crate::store::Principal;
    use pacerelle_core::{Bearer, keys};

    const PAIRING: &str = "PPPPPPPPPPPPPPPPPPPPPP";

    #[tokio::test]
    async fn an_offer_is_stored_once_and_its_ids_are_reserved() {
        let Some((store, _dir)) = store().await else {
            return;
        };
        let created = store
            .create_pairing(&offer("ag_1", PAIRING, "dv_1"))
            .await
            .expect("ok");
        assert!(matches!(created, PairingStored::Created(ref c) if c.expires_at == Timestamp(T0 + 1000)));
        // The same upload again, even with another expiry: the stored offer.
        let retry = NewPairing {
            expires_at: Timestamp(T0 + 5000),
            ..offer("ag_1", PAIRING, "dv_1")
        };
        assert!(matches!(
            store.create_pairing(&retry).await.expect("ok"),
            PairingStored::Created(ref c) if c.expires_at == Timestamp(T0 + 1000)
        ));
        assert!(matches!(
            store
                .create_pairing(&offer("ag_1", PAIRING, "dv_2"))
                .await
                .expect("ok"),
            PairingStored::Conflict("this pairing id is already in use")
        ));
        assert!(matches!(
            store
                .create_pairing(&offer("ag_1", "QQQQQQQQQQQQQQQQQQQQQQ", "dv_1"))
                .await
                .expect("ok"),
            PairingStored::Conflict("this device id is already in use")
        ));
        let row = store
            .as_store()
            .pairing(PAIRING)
            .await
            .expect("read")
            .expect("found");
        assert_eq!(
            (
                row.agent_id.as_str(),
                row.device_id.as_str(),
                row.offer.as_deref(),
                row.claimed_at
            ),
            ("ag_1", "dv_1", Some("AQID"), None)
        );
        assert!(store.as_store().pairing("nothing").await.expect("read").is_none());
    }

    #[tokio::test]
    async fn a_claim_checks_the_proof_then_the_state_and_creates_the_device_once() {
        let Some((store, _dir)) = store().await else {
            return;
        };
        store
            .create_pairing(&offer("ag_1", PAIRING, "dv_1"))
            .await
            .expect("ok");
        let proof = keys::sha256(b"claim");
        assert!(matches!(
            store
                .as_store()
                .claim_pairing("nothing", &proof, "phone", None, Timestamp(T0))
                .await
                .expect("ok"),
            Claim::NotFound
        ));
        assert!(matches!(
            store
                .as_store()
                .claim_pairing(PAIRING, &keys::sha256(b"wrong"), "phone", None, Timestamp(T0))
                .await
                .expect("ok"),
            Claim::WrongProof
        ));
        let Claim::Claimed(claimed) = store
            .as_store()
            .claim_pairing(PAIRING, &proof, "phone", None, Timestamp(T0 + 1))
            .await
            .expect("ok")
        else {
            panic!("the right proof claims it");
        };
        assert_eq!(
            (claimed.agent_id.as_str(), claimed.device_id.as_str()),
            ("ag_1", "dv_1")
        );
        let device = store
            .as_store()
            .device("ag_1", "dv_1")
            .await
            .expect("read")
            .expect("created");
        assert_eq!(
            (device.name.as_str(), device.created_at),
            ("phone", Timestamp(T0 + 1))
        );
        // The token's secret hashes to what the device's principal holds.
        let Some(Principal::Device { hash, .. }) = store.as_store().principal("dv_1").await.expect("read")
        else {
            panic!("dv_1 is a device");
        };
        let bearer = Bearer(claimed.device_token.clone());
        let (id, secret_hash) = bearer.split().expect("a bearer");
        assert_eq!(id, "dv_1");
        assert!(keys::constant_time_eq(&hash, &secret_hash));
        let row = store
            .as_store()
            .pairing(PAIRING)
            .await
            .expect("read")
            .expect("a tombstone");
        assert_eq!((row.offer, row.claimed_at), (None, Some(Timestamp(T0 + 1))));
        assert!(matches!(
            store
                .as_store()
                .claim_pairing(PAIRING, &proof, "phone", None, Timestamp(T0 + 2))
                .await
                .expect("ok"),
            Claim::AlreadyClaimed
        ));
        // A claimed offer's ids stay taken.
        assert!(matches!(
            store
                .create_pairing(&offer("ag_1", PAIRING, "dv_1"))
                .await
                .expect("ok"),
            PairingStored::Conflict(_)
        ));

        store
            .create_pairing(&offer("ag_1", "LLLLLLLLLLLLLLLLLLLLLL", "dv_late"))
            .await
            .expect("ok");
        assert!(matches!(
            store
                .as_store()
                .claim_pairing(
                    "LLLLLLLLLLLLLLLLLLLLLL",
                    &proof,
                    "phone",
                    None,
                    Timestamp(T0 + 1000)
                )
                .await
                .expect("ok"),
            Claim::Expired
        ));
    }

    /// Eight claims of one offer at once with the right proof: one device, one token.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_claims_of_one_offer_claim_it_once() {
        let Some((store, _dir)) = store().await else {
            return;
        };
        store
            .create_pairing(&offer("ag_1", PAIRING, "dv_1"))
            .await
            .expect("ok");
        let start = Arc::new(Barrier::new(8));
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..8 {
            let (store, start) = (store.clone(), start.clone());
            tasks.spawn(async move {
                start.wait().await;
                store
                    .as_store()
                    .claim_pairing(PAIRING, &keys::sha256(b"claim"), "phone", None, Timestamp(T0 + 1))
                    .await
                    .expect("ok")
            });
        }
        let outcomes = tasks.join_all().await;
        let claimed = outcomes.iter().filter(|c| matches!(c, Claim::Claimed(_))).count();
        let already = outcomes
            .iter()
            .filter(|c| matches!(c, Claim::AlreadyClaimed))
            .count();
        assert_eq!((claimed, already), (1, 7), "{outcomes:?}");
        assert_eq!(store.as_store().devices("ag_1").await.expect("read").len(), 1);
    }

    /// Two offers for one device id at once, under different pairing ids: one is stored, the other refused.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_offers_for_one_device_id_store_one() {
        let Some((store, _dir)) = store().await else {
            return;
        };
        for round in 0..20 {
            let device = format!("dv_{round}");
            let start = Arc::new(Barrier::new(2));
            let mut tasks = tokio::task::JoinSet::new();
            for side in ["A", "B"] {
                let (store, start, device) = (store.clone(), start.clone(), device.clone());
                let pairing_id = format!("{side}{round:0>21}");
                tasks.spawn(async move {
                    start.wait().await;
                    store
                        .create_pairing(&offer("ag_1", &pairing_id, &device))
                        .await
                        .expect("ok")
                });
            }
            let outcomes = tasks.join_all().await;
            let created = outcomes
                .iter()
                .filter(|o| matches!(o, PairingStored::Created(_)))
                .count();
            assert_eq!(created, 1, "round {round}: {outcomes:?}");
        }
    }
}
