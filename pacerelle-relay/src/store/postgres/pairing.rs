//! The PostgreSQL backend: pairing — the agent's sealed offers, fetched and claimed once by a phone, which
//! becomes a device (mirrors `sqlite/pairing.rs`).

use pacerelle_core::wire::{PairingClaimed, PairingCreated};
use pacerelle_core::{Bearer, keys};

use super::agent::lock_ids;
use super::device::role;
use super::prelude::*;

impl PgStore {
    /// Stores a pairing offer; the same upload again finds it. The pairing id and the device id are locked
    /// first ([`lock_ids`]): a concurrent upload, registration or pairing that wants either id waits and then
    /// finds it taken, as it would after SQLite's single writer.
    pub(crate) async fn create_pairing(&self, p: &NewPairing<'_>) -> Result<PairingStored> {
        let mut tx = self.pool.begin().await?;
        lock_ids(&mut tx, &[p.pairing_id, p.device_id]).await?;
        let outcome = create_pairing_in(&mut tx, p).await?;
        tx.commit().await?;
        self.counts.commits.inc();
        self.counts.writes.inc();
        Ok(outcome)
    }

    /// The offer (or its tombstone) stored under `pairing_id`.
    pub(crate) async fn pairing(&self, pairing_id: &str) -> Result<Option<PairingRow>> {
        type Row = (String, String, String, Option<String>, i64, Option<i64>);
        let row: Option<Row> = sqlx::query_as(
            "SELECT pairing_id, agent_id, device_id, offer, expires_at, claimed_at
             FROM pairings WHERE pairing_id = $1",
        )
        .bind(pairing_id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(
            |(pairing_id, agent_id, device_id, offer, expires_at, claimed_at)| PairingRow {
                pairing_id,
                agent_id,
                device_id,
                offer,
                expires_at: Timestamp(expires_at),
                claimed_at: claimed_at.map(Timestamp),
            },
        ))
    }

    /// Claims an offer: checks the proof, then in one transaction marks the offer claimed (dropping its
    /// ciphertext), creates the device and stores the hash of its new token. The offer's row is locked while
    /// it is read, so of two concurrent claims the second finds it claimed.
    pub(crate) async fn claim_pairing(
        &self,
        pairing_id: &str,
        proof_hash: &[u8; 32],
        name: &str,
        now: Timestamp,
    ) -> Result<Claim> {
        let mut tx = self.pool.begin().await?;
        let outcome = claim_pairing_in(&mut tx, pairing_id, proof_hash, name, now).await?;
        tx.commit().await?;
        self.counts.commits.inc();
        self.counts.writes.inc();
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
    now: Timestamp,
) -> Result<Claim> {
    type Row = (String, String, Option<String>, String, Vec<u8>, i64, Option<i64>);
    let row: Option<Row> = sqlx::query_as(
        "SELECT agent_id, device_id, label, role, claim_hash, expires_at, claimed_at
         FROM pairings WHERE pairing_id = $1 FOR UPDATE",
    )
    .bind(pairing_id)
    .fetch_optional(&mut *conn)
    .await?;
    let Some((agent_id, device_id, label, role_text, claim_hash, expires_at, claimed_at)) = row else {
        return Ok(Claim::NotFound);
    };
    if !keys::constant_time_eq(&claim_hash, proof_hash) {
        return Ok(Claim::WrongProof);
    }
    if claimed_at.is_some() {
        return Ok(Claim::AlreadyClaimed);
    }
    if expires_at <= now.millis() {
        return Ok(Claim::Expired);
    }
    let (token, token_hash) = Bearer::issue(&device_id);
    sqlx::query(
        "UPDATE pairings SET offer = NULL, claimed_at = $2
         WHERE pairing_id = $1 AND claimed_at IS NULL",
    )
    .bind(pairing_id)
    .bind(now.millis())
    .execute(&mut *conn)
    .await?;
    sqlx::query(
        "INSERT INTO devices (device_id, agent_id, name, label, role, token_hash, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(&device_id)
    .bind(&agent_id)
    .bind(name)
    .bind(label)
    .bind(role(&role_text)?.as_str())
    .bind(&token_hash[..])
    .bind(now.millis())
    .execute(&mut *conn)
    .await?;
    Ok(Claim::Claimed(PairingClaimed {
        agent_id,
        device_id,
        device_token: token.expose().to_string(),
    }))
}
