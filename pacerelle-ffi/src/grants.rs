//! Grants (docs/hooks.md, "Grants"): a gate question's offer, the grant this device gives with its yes, and the
//! agent's grants listed and revoked from an owner device. The scope and the offer are the core's own types.

use std::time::SystemTime;

pub use pacerelle_core::grant::{CommandMatch, GrantOffer, GrantScope};

use crate::time::system_time;

/// One of the agent's grants, as an owner device lists it.
///
/// Not the core's wire `GrantRecord`: its times are the core's `Timestamp` newtype, which crosses as
/// `SystemTime`, and this one adds what the grant covers and its question, as this device opened them.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct GrantInfo {
    /// Its id: the gate question it answered.
    pub grant_id: String,
    /// The device that gave it.
    pub device_id: String,
    /// When it started.
    pub granted_at: SystemTime,
    /// When it ends, as signed.
    pub expires_at: SystemTime,
    /// The calls it let run.
    pub uses: u64,
    /// The last of them.
    pub last_used_at: Option<SystemTime>,
    /// When an owner device revoked it.
    pub revoked_at: Option<SystemTime>,
    /// The device that revoked it.
    pub revoked_by: Option<String>,
    /// What it covers, read from the signed grant (absent when its answer's copy does not open here).
    pub scope: Option<GrantScope>,
    /// The question it answered, as this device opened it (absent when not sealed for this device).
    pub question: Option<String>,
}

impl From<pacerelle_client::core::wire::GrantRecord> for GrantInfo {
    fn from(r: pacerelle_client::core::wire::GrantRecord) -> Self {
        GrantInfo {
            grant_id: r.grant_id,
            device_id: r.device_id,
            granted_at: system_time(r.granted_at),
            expires_at: system_time(r.expires_at),
            uses: r.uses,
            last_used_at: r.last_used_at.map(system_time),
            revoked_at: r.revoked_at.map(system_time),
            revoked_by: r.revoked_by,
            scope: None,
            question: None,
        }
    }
}

impl From<pacerelle_client::device::ListedGrant> for GrantInfo {
    fn from(g: pacerelle_client::device::ListedGrant) -> Self {
        GrantInfo {
            scope: g.grant.map(|grant| grant.scope),
            question: g.question.map(|q| q.question),
            ..GrantInfo::from(g.record)
        }
    }
}
