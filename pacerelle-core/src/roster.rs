//! The device roster (DESIGN §12): which devices the agent paired, their role, and which it revoked.
//!
//! The relay keeps a device list in clear to route envelopes, but a relay that can edit its own rows must
//! not be able to choose who approves. So the agent keeps its own list, the roster, sealed with its self key
//! (only processes holding the agent token can read or write it) and versioned: each change seals the whole
//! roster again with the next version, bound in the additional data. The relay stores the newest sealed
//! roster and hands it back; every agent host remembers the highest version it has seen and refuses an older
//! one ([`Roster::check_not_older`]), so the relay can neither forge a roster nor roll one back past what a
//! host has seen. A device approves only if the roster lists it as an owner that is not revoked
//! ([`Roster::may_approve`]), whatever the relay's rows say.

use serde::{Deserialize, Serialize};

#[cfg(feature = "content")]
use crate::envelope;
use crate::envelope::{Aad, Direction};
#[cfg(feature = "content")]
use crate::keys::ContentKey;
use crate::pairing::Role;
use crate::time::Timestamp;

/// Object kind of a roster in the additional data.
pub const KIND_ROSTER: &str = "roster";
/// Most devices a roster holds (revoked ones included).
pub const MAX_DEVICES: usize = 1000;

/// One device the agent paired.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RosterDevice {
    /// The device's id, chosen by the agent when it made the pairing offer.
    pub device_id: String,
    /// Its role: only an `owner` approves.
    pub role: Role,
    /// When the agent added it (the pairing offer was made).
    pub added_at: Timestamp,
    /// When the agent revoked it; a revoked device never approves again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<Timestamp>,
    /// base64url of the device's Ed25519 public key, pinned when the agent first opened the key the device
    /// sealed for it ([`crate::signing::open_signing_key`]); absent until then, and for a device paired
    /// before signing keys. Once pinned it never changes: the device's answers must carry its signature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_key: Option<String>,
    /// When the agent pinned `signing_key`. The answer log (a record of the past) still counts an unsigned
    /// answer the relay accepted before this time, from a device that had no key then; a live verdict never
    /// does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_key_pinned_at: Option<Timestamp>,
}

/// The agent's own list of devices, sealed with its self key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Roster {
    /// Always 1.
    pub v: u8,
    /// The agent it belongs to.
    pub agent_id: String,
    /// Starts at 1 and grows by one at each change; 0 is the empty roster that was never stored.
    pub version: u64,
    /// When this version was sealed.
    pub updated_at: Timestamp,
    /// Every device ever added, revoked ones included, in the order they were added.
    pub devices: Vec<RosterDevice>,
}

/// Why a roster was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RosterError {
    /// The relay returned a roster older than one this host has already seen: a rollback.
    #[error(
        "the relay returned device roster version {got}, older than version {seen} seen here: \
         it may have been rolled back, so no device is trusted until the relay serves version {seen} or newer"
    )]
    RolledBack {
        /// The highest version this host has seen.
        seen: u64,
        /// The version the relay returned.
        got: u64,
    },
    /// The relay returned, under a version this host has already seen, a roster with other content: two
    /// rosters of one version mean the relay forked them (e.g. to hide a revocation from some hosts).
    #[error(
        "the relay returned a device roster version {version} that differs from the version {version} seen here: \
         it forked the roster, so no device is trusted until it serves the one seen or a newer one"
    )]
    Forked {
        /// The version.
        version: u64,
    },
    /// The sealed roster did not open with the agent's self key for the version the relay named.
    #[error("the device roster from the relay did not open with this agent's key")]
    Open,
    /// The roster opened but its content is not valid.
    #[error("the device roster from the relay is malformed: {0}")]
    Malformed(&'static str),
}

/// The additional data of roster `version` of `agent_id`.
pub fn roster_aad<'a>(agent_id: &'a str, version: &'a str) -> Aad<'a> {
    Aad {
        agent_id,
        device_id: "",
        direction: Direction::AgentToSelf,
        kind: KIND_ROSTER,
        object_id: version,
    }
}

impl Roster {
    /// The roster of an agent that never stored one: version 0, no device.
    pub fn empty(agent_id: &str) -> Self {
        Roster {
            v: 1,
            agent_id: agent_id.to_string(),
            version: 0,
            updated_at: Timestamp(0),
            devices: Vec::new(),
        }
    }

    /// The device's entry.
    pub fn device(&self, device_id: &str) -> Option<&RosterDevice> {
        self.devices.iter().find(|d| d.device_id == device_id)
    }

    /// True when the device is listed and not revoked.
    pub fn is_active(&self, device_id: &str) -> bool {
        self.device(device_id).is_some_and(|d| d.revoked_at.is_none())
    }

    /// True only for a listed, unrevoked `owner`: the only devices whose answers approve.
    pub fn may_approve(&self, device_id: &str) -> bool {
        self.device(device_id)
            .is_some_and(|d| d.revoked_at.is_none() && d.role == Role::Owner)
    }

    /// The next version, with `change` applied and the time stamped.
    pub fn next(&self, now: Timestamp, change: impl FnOnce(&mut Vec<RosterDevice>)) -> Roster {
        let mut devices = self.devices.clone();
        change(&mut devices);
        Roster {
            v: 1,
            agent_id: self.agent_id.clone(),
            version: self.version + 1,
            updated_at: now,
            devices,
        }
    }

    /// Checks the shape: version 1, at most [`MAX_DEVICES`] devices, each listed once.
    pub fn validate(&self) -> Result<(), RosterError> {
        if self.v != 1 {
            return Err(RosterError::Malformed("unknown roster format"));
        }
        if self.devices.len() > MAX_DEVICES {
            return Err(RosterError::Malformed("too many devices"));
        }
        let mut seen = std::collections::HashSet::new();
        if !self.devices.iter().all(|d| seen.insert(d.device_id.as_str())) {
            return Err(RosterError::Malformed("a device is listed twice"));
        }
        Ok(())
    }

    /// Seals the roster with the agent's self key, bound to its agent and version.
    #[cfg(feature = "content")]
    pub fn seal(&self, self_key: &ContentKey) -> String {
        let version = self.version.to_string();
        envelope::seal_json(self_key, &roster_aad(&self.agent_id, &version), self)
    }

    /// Opens roster `version` of `agent_id` as the relay returned it.
    #[cfg(feature = "content")]
    pub fn open(
        self_key: &ContentKey,
        agent_id: &str,
        version: u64,
        sealed: &str,
    ) -> Result<Roster, RosterError> {
        let label = version.to_string();
        let plain =
            envelope::open(self_key, &roster_aad(agent_id, &label), sealed).map_err(|_| RosterError::Open)?;
        let roster: Roster =
            serde_json::from_slice(&plain).map_err(|_| RosterError::Malformed("not a roster"))?;
        if roster.agent_id != agent_id || roster.version != version {
            return Err(RosterError::Malformed(
                "agent or version differs from its sealed context",
            ));
        }
        roster.validate()?;
        Ok(roster)
    }

    /// Refuses a roster older than `seen`, the highest version this host has seen.
    pub fn check_not_older(&self, seen: u64) -> Result<(), RosterError> {
        if self.version < seen {
            return Err(RosterError::RolledBack {
                seen,
                got: self.version,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AGENT: &str = "ag_r";

    fn key() -> ContentKey {
        crate::keys::self_key(&[3; 32], AGENT)
    }

    fn owner(id: &str) -> RosterDevice {
        RosterDevice {
            device_id: id.into(),
            role: Role::Owner,
            added_at: Timestamp(1),
            revoked_at: None,
            signing_key: None,
            signing_key_pinned_at: None,
        }
    }

    #[test]
    fn only_unrevoked_owners_approve() {
        let r = Roster::empty(AGENT).next(Timestamp(5), |d| {
            d.push(owner("dv_a"));
            d.push(RosterDevice {
                role: Role::User,
                ..owner("dv_u")
            });
            d.push(RosterDevice {
                revoked_at: Some(Timestamp(4)),
                ..owner("dv_r")
            });
        });
        assert_eq!(r.version, 1);
        assert!(r.may_approve("dv_a"));
        assert!(!r.may_approve("dv_u"), "a user device does not approve");
        assert!(r.is_active("dv_u"));
        assert!(!r.may_approve("dv_r") && !r.is_active("dv_r"));
        assert!(!r.may_approve("dv_unknown"));
        assert!(!Roster::empty(AGENT).may_approve("dv_a"));
    }

    #[test]
    fn sealed_roster_is_bound_to_agent_and_version() {
        let r = Roster::empty(AGENT).next(Timestamp(5), |d| d.push(owner("dv_a")));
        let sealed = r.seal(&key());
        assert_eq!(Roster::open(&key(), AGENT, 1, &sealed), Ok(r.clone()));
        // Relabelled as another version, or as another agent's: does not open.
        assert_eq!(Roster::open(&key(), AGENT, 2, &sealed), Err(RosterError::Open));
        assert_eq!(
            Roster::open(&key(), "ag_other", 1, &sealed),
            Err(RosterError::Open)
        );
        let other_key = crate::keys::self_key(&[4; 32], AGENT);
        assert_eq!(
            Roster::open(&other_key, AGENT, 1, &sealed),
            Err(RosterError::Open)
        );
        // Older than what was seen: refused.
        assert!(r.check_not_older(1).is_ok());
        assert_eq!(
            r.check_not_older(2),
            Err(RosterError::RolledBack { seen: 2, got: 1 })
        );
    }

    #[test]
    fn a_device_listed_twice_is_malformed() {
        let r = Roster::empty(AGENT).next(Timestamp(5), |d| {
            d.push(owner("dv_a"));
            d.push(owner("dv_a"));
        });
        let sealed = r.seal(&key());
        assert!(matches!(
            Roster::open(&key(), AGENT, 1, &sealed),
            Err(RosterError::Malformed(_))
        ));
    }
}
