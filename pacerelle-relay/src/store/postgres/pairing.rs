//! The PostgreSQL backend: pairing (mirrors `sqlite/pairing.rs`).

use super::prelude::*;

impl PgStore {
    pub(crate) async fn create_pairing(&self, _p: &NewPairing<'_>) -> Result<PairingStored> {
        Err(not_yet("create_pairing"))
    }

    pub(crate) async fn pairing(&self, _pairing_id: &str) -> Result<Option<PairingRow>> {
        Err(not_yet("pairing"))
    }

    pub(crate) async fn claim_pairing(
        &self,
        _pairing_id: &str,
        _proof_hash: &[u8; 32],
        _name: &str,
        _now: Timestamp,
    ) -> Result<Claim> {
        Err(not_yet("claim_pairing"))
    }
}
