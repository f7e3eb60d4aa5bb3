//! Pairing: the agent's sealed offers, fetched and claimed once by a phone, which becomes a device.

use crate::store::commands::PairingClaim;
use pacerelle_core::wire::PairingCreated;
use rusqlite::{Connection, OptionalExtension, params};

use super::{Result, SqliteStore, ts};
use crate::store::ClaimRow;
use crate::store::{Claim, NewPairing, PairingStored};

impl SqliteStore {
    pub(crate) async fn create_pairing(&self, p: &NewPairing<'_>) -> Result<PairingStored> {
        let now = p.now;
        let pairing_id = p.pairing_id.to_string();
        let agent_id = p.agent_id.to_string();
        let device_id = p.device_id.to_string();
        let label = p.label.map(str::to_string);
        let offer = p.offer.to_string();
        let (role, claim_hash, expires_at, now) = (p.role, p.claim_hash, p.expires_at, now);
        self.write(move |conn: &Connection| {
            let existing: Option<(String, String, i64, Option<i64>)> = conn
                .prepare_cached(
                    "SELECT agent_id, device_id, expires_at, claimed_at FROM pairings WHERE pairing_id = ?1",
                )?
                .query_row(params![pairing_id], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
                })
                .optional()?;
            if let Some((stored_agent, stored_device, stored_expiry, claimed_at)) = existing {
                // A retry of the same upload gets the stored offer; anything else is a conflict.
                if stored_agent == agent_id && stored_device == device_id && claimed_at.is_none() {
                    return Ok(PairingStored::Created(PairingCreated {
                        pairing_id,
                        device_id: stored_device,
                        expires_at: ts(stored_expiry),
                    }));
                }
                return Ok(PairingStored::Conflict("this pairing id is already in use"));
            }
            let taken: bool = conn
                .prepare_cached(
                    "SELECT EXISTS (SELECT 1 FROM devices WHERE device_id = ?1)
                         OR EXISTS (SELECT 1 FROM pairings WHERE device_id = ?1)
                         OR EXISTS (SELECT 1 FROM agents WHERE agent_id = ?1)",
                )?
                .query_row(params![device_id], |r| r.get(0))?;
            if taken {
                return Ok(PairingStored::Conflict("this device id is already in use"));
            }
            conn.prepare_cached(
                "INSERT INTO pairings (pairing_id, agent_id, device_id, label, role, claim_hash, offer,
                                           expires_at, created_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )?
            .execute(params![
                pairing_id,
                agent_id,
                device_id,
                label.as_deref(),
                role.as_str(),
                &claim_hash[..],
                offer,
                expires_at.millis(),
                now.millis(),
            ])?;
            Ok(PairingStored::Created(PairingCreated {
                pairing_id,
                device_id,
                expires_at,
            }))
        })
        .await
    }

    /// Claims an offer: checks the proof, then in one transaction marks the offer claimed (dropping its
    /// ciphertext), creates the device with its signing key if it gave one, and stores the hash of its new token.
    pub(crate) async fn claim_pairing(&self, claim: &PairingClaim<'_>) -> Result<Claim> {
        let (now, proof_hash, signing) = (claim.now, claim.proof_hash, claim.signing);
        let (pairing_id, proof_hash, name) =
            (claim.pairing_id.to_string(), *proof_hash, claim.name.to_string());
        let (signing_key, signing_key_seal) = match signing {
            Some(s) => (Some(s.key.to_string()), Some(s.seal.to_string())),
            None => (None, None),
        };
        self.write(move |conn: &Connection| {
            let row: Option<ClaimRow> = conn
                .prepare_cached(
                    "SELECT agent_id, device_id, label, role, claim_hash, expires_at, claimed_at
                     FROM pairings WHERE pairing_id = ?1",
                )?
                .query_row(params![pairing_id], |r| {
                    Ok((
                        r.get(0)?,
                        r.get(1)?,
                        r.get(2)?,
                        r.get(3)?,
                        r.get(4)?,
                        r.get(5)?,
                        r.get(6)?,
                    ))
                })
                .optional()?;
            let device = match Claim::check(row, &proof_hash, now)? {
                Ok(device) => device,
                Err(refused) => return Ok(refused),
            };
            conn.prepare_cached(
                "UPDATE pairings SET offer = NULL, claimed_at = ?2
                     WHERE pairing_id = ?1 AND claimed_at IS NULL",
            )?
            .execute(params![pairing_id, now.millis()])?;
            conn.prepare_cached(
                "INSERT INTO devices (device_id, agent_id, name, label, role, token_hash, created_at,
                                      signing_key, signing_key_seal)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )?
            .execute(params![
                device.device_id,
                device.agent_id,
                name,
                device.label,
                device.role.as_str(),
                &device.token_hash[..],
                now.millis(),
                signing_key,
                signing_key_seal,
            ])?;
            Ok(device.claimed())
        })
        .await
    }
}
