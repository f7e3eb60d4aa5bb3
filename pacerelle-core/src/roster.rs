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
use crate::signing::PublicKey;
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
    /// When the agent first refused a signing key the relay listed for this device: a seal that did not
    /// open or named another agent or device, a clear copy that differs from the sealed key, or a clear copy
    /// without a seal. The device claimed with a key, so from then on its unsigned answers never approve:
    /// the relay cannot turn it into a device that does not sign. Set once, never cleared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_key_refused_at: Option<Timestamp>,
    /// Partner mode: the `externalId` of the user this device belongs to (role `user`), absent for the
    /// owner's devices. Sealed in the roster, so the relay cannot move a device to another user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
}

/// Partner mode: one of the agent's own users, a named group of devices answering for that user only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RosterUser {
    /// The id the integrator chose for this user (its own user id), unique within the agent.
    pub external_id: String,
    /// The name shown for the user.
    pub name: String,
    /// When the agent first connected the user.
    pub connected_at: Timestamp,
    /// When the agent disconnected the user (every device of the user revoked then); absent while connected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disconnected_at: Option<Timestamp>,
}

/// Most characters of a user's `externalId`.
pub const MAX_EXTERNAL_ID_LEN: usize = 128;
/// Most characters of a user's name.
pub const MAX_USER_NAME_LEN: usize = 200;
/// Most users a roster holds (disconnected ones included).
pub const MAX_USERS: usize = 1000;

/// Checks a user's `externalId`: 1 to 128 characters, no control characters, not only spaces.
pub fn check_external_id(external_id: &str) -> Result<(), &'static str> {
    if external_id.trim().is_empty() {
        return Err("a user's externalId cannot be empty");
    }
    if external_id.chars().count() > MAX_EXTERNAL_ID_LEN {
        return Err("a user's externalId is at most 128 characters");
    }
    if external_id.chars().any(char::is_control) {
        return Err("a user's externalId cannot hold control characters");
    }
    Ok(())
}

/// Checks a user's name: 1 to 200 characters, no control characters, not only spaces.
pub fn check_user_name(name: &str) -> Result<(), &'static str> {
    if name.trim().is_empty() {
        return Err("a user's name cannot be empty");
    }
    if name.chars().count() > MAX_USER_NAME_LEN {
        return Err("a user's name is at most 200 characters");
    }
    if name.chars().any(char::is_control) {
        return Err("a user's name cannot hold control characters");
    }
    Ok(())
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
    /// Partner mode: every user ever connected, disconnected ones included, in the order they were added.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub users: Vec<RosterUser>,
    /// Since when the agent requires signed answers: from then on, a device with no pinned signing key
    /// approves nothing. Written in the first roster of a new agent; absent for an agent that accepts the
    /// unsigned answers of devices paired before signing keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub require_signed_since: Option<Timestamp>,
}

/// What the roster says of a device's signatures, for step 6a of the verdict (docs/crypto.md §4.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceSigning {
    /// The roster pins this key: the device's answers must carry its signature.
    Pinned(PublicKey),
    /// No key is pinned and the device may answer unsigned (a device paired before signing keys, of an
    /// agent that does not require signatures).
    Unsigned,
    /// No key is pinned and unsigned answers do not count, for this reason.
    MustSign(&'static str),
}

/// Why an unsigned answer of a device whose signing key the agent refused does not count.
pub const SIGNING_KEY_REFUSED: &str = "the device cannot sign for this agent: the signing key the relay \
     listed for it was refused (withheld, substituted or not sealed by the device), so its unsigned answers never approve";
/// Why an unsigned answer does not count for an agent that requires signatures.
pub const SIGNATURE_REQUIRED: &str =
    "the agent requires signed answers, and the device has no signing key the agent pinned";

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
            users: Vec::new(),
            require_signed_since: None,
        }
    }

    /// What step 6a of a live verdict requires of `device_id`'s answers ([`Roster::signing_at`] now).
    pub fn signing(&self, device_id: &str) -> DeviceSigning {
        self.signing_at(device_id, None)
    }

    /// What step 6a requires of `device_id`'s answers, as of `at` (`None`: now; `Some(t)`: a record of the
    /// past, the relay's time of an answer). A pinned key must sign; without one, an unsigned answer counts
    /// unless the agent had refused a key of that device, or required signatures, by then.
    pub fn signing_at(&self, device_id: &str, at: Option<Timestamp>) -> DeviceSigning {
        match self
            .device(device_id)
            .and_then(|d| d.signing_key.as_deref())
            .and_then(PublicKey::parse)
        {
            Some(key) => DeviceSigning::Pinned(key),
            None => self.unsigned_at(device_id, at),
        }
    }

    /// Whether an unsigned answer of `device_id` counts as of `at` (`None`: now), whatever key is pinned
    /// since: for the answer log, which counts an unsigned answer the relay accepted before the key was
    /// pinned as it counted then.
    pub fn unsigned_at(&self, device_id: &str, at: Option<Timestamp>) -> DeviceSigning {
        let by_then = |since: Option<Timestamp>| since.is_some_and(|s| at.is_none_or(|t| s <= t));
        if by_then(self.device(device_id).and_then(|d| d.signing_key_refused_at)) {
            DeviceSigning::MustSign(SIGNING_KEY_REFUSED)
        } else if by_then(self.require_signed_since) {
            DeviceSigning::MustSign(SIGNATURE_REQUIRED)
        } else {
            DeviceSigning::Unsigned
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

    /// True only for a listed, unrevoked `owner`: the only devices whose answers approve a question asked
    /// of the owner.
    pub fn may_approve(&self, device_id: &str) -> bool {
        self.may_answer_for(device_id, None, None)
    }

    /// The user `external_id` (Partner mode), disconnected or not.
    pub fn user(&self, external_id: &str) -> Option<&RosterUser> {
        self.users.iter().find(|u| u.external_id == external_id)
    }

    /// Whether `device_id`'s answer counts for a question addressed to `user` (`None`: the owner), as of
    /// `at` (`None`: now, when any revocation refuses it; `Some(t)`: a record of the past, where a device or
    /// user revoked after `t` still counts).
    ///
    /// - For the owner: a listed `owner` device.
    /// - For a user: a listed `user` device whose sealed `user` is that `externalId`, of a listed user.
    ///
    /// In both cases the device (and the user) must not have been revoked (disconnected) by then. The
    /// audience is sealed in the question and the device's user in the roster, so the relay can move
    /// neither a question nor a device from one user to another.
    pub fn may_answer_for(&self, device_id: &str, user: Option<&str>, at: Option<Timestamp>) -> bool {
        let Some(d) = self.device(device_id) else {
            return false;
        };
        let user = match user {
            None => None,
            Some(external_id) => match self.user(external_id) {
                Some(u) => Some(u),
                None => return false,
            },
        };
        answers_for(d, user, at)
    }

    /// The active devices that a question, notification or reply for `user` (`None`: the owner) goes to:
    /// exactly those whose answer would count now ([`Roster::may_answer_for`]). The user is looked up once,
    /// not once per device.
    pub fn audience<'a>(&'a self, user: Option<&'a str>) -> impl Iterator<Item = &'a RosterDevice> + 'a {
        let found = user.map(|external_id| self.user(external_id));
        self.devices.iter().filter(move |d| match found {
            None => answers_for(d, None, None),
            Some(None) => false,
            Some(Some(u)) => answers_for(d, Some(u), None),
        })
    }

    /// The next version, with `change` applied to the devices and the time stamped.
    pub fn next(&self, now: Timestamp, change: impl FnOnce(&mut Vec<RosterDevice>)) -> Roster {
        self.next_with(now, |devices, _| change(devices))
    }

    /// The next version, with `change` applied to the devices and the users, and the time stamped.
    pub fn next_with(
        &self,
        now: Timestamp,
        change: impl FnOnce(&mut Vec<RosterDevice>, &mut Vec<RosterUser>),
    ) -> Roster {
        let mut devices = self.devices.clone();
        let mut users = self.users.clone();
        change(&mut devices, &mut users);
        Roster {
            v: 1,
            agent_id: self.agent_id.clone(),
            version: self.version + 1,
            updated_at: now,
            devices,
            users,
            require_signed_since: self.require_signed_since,
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
        if self
            .devices
            .iter()
            .filter_map(|d| d.signing_key.as_deref())
            .any(|k| PublicKey::parse(k).is_none())
        {
            return Err(RosterError::Malformed(
                "a device's signing key is not 32 bytes of base64url",
            ));
        }
        if self
            .devices
            .iter()
            .any(|d| d.signing_key_pinned_at.is_some() && d.signing_key.is_none())
        {
            return Err(RosterError::Malformed(
                "a device has a time of pinning but no signing key",
            ));
        }
        if self.users.len() > MAX_USERS {
            return Err(RosterError::Malformed("too many users"));
        }
        for u in &self.users {
            check_external_id(&u.external_id).map_err(RosterError::Malformed)?;
            check_user_name(&u.name).map_err(RosterError::Malformed)?;
        }
        let mut users = std::collections::HashSet::new();
        if !self.users.iter().all(|u| users.insert(u.external_id.as_str())) {
            return Err(RosterError::Malformed("a user is listed twice"));
        }
        let belongs = |d: &RosterDevice| match (&d.user, d.role) {
            (None, _) => true,
            (Some(u), Role::User) => users.contains(u.as_str()),
            (Some(_), Role::Owner) => false,
        };
        if !self.devices.iter().all(belongs) {
            return Err(RosterError::Malformed(
                "a device names a user the roster does not list, or an owner device names a user",
            ));
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
        let roster: Roster = envelope::read_payload(&plain).ok_or(RosterError::Malformed("not a roster"))?;
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

/// The rule of [`Roster::may_answer_for`] for a device and a user already looked up (`None`: the owner):
/// the device is not revoked by `at` (`None`: now, so never revoked), and it is an `owner` device for the
/// owner, or a `user` device of that user, who is not disconnected by then.
fn answers_for(d: &RosterDevice, user: Option<&RosterUser>, at: Option<Timestamp>) -> bool {
    let live = |revoked: Option<Timestamp>| match (revoked, at) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(r), Some(t)) => t < r,
    };
    if !live(d.revoked_at) {
        return false;
    }
    match user {
        None => d.role == Role::Owner,
        Some(u) => {
            d.role == Role::User
                && d.user.as_deref() == Some(u.external_id.as_str())
                && live(u.disconnected_at)
        }
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
            signing_key_refused_at: None,
            user: None,
        }
    }

    fn user_device(id: &str, user: &str) -> RosterDevice {
        RosterDevice {
            role: Role::User,
            user: Some(user.into()),
            ..owner(id)
        }
    }

    fn user(external_id: &str) -> RosterUser {
        RosterUser {
            external_id: external_id.into(),
            name: external_id.into(),
            connected_at: Timestamp(1),
            disconnected_at: None,
        }
    }

    #[test]
    fn a_user_device_answers_for_its_own_user_only() {
        let r = Roster::empty(AGENT).next_with(Timestamp(5), |d, u| {
            u.push(user("alice"));
            u.push(RosterUser {
                disconnected_at: Some(Timestamp(10)),
                ..user("bob")
            });
            d.push(owner("dv_o"));
            d.push(user_device("dv_a", "alice"));
            d.push(user_device("dv_b", "bob"));
        });
        assert!(r.validate().is_ok());
        assert!(r.may_answer_for("dv_a", Some("alice"), None));
        assert!(!r.may_answer_for("dv_a", Some("bob"), None), "not another user's");
        assert!(
            !r.may_answer_for("dv_a", None, None),
            "a user device never answers for the owner"
        );
        assert!(
            !r.may_answer_for("dv_o", Some("alice"), None),
            "the owner does not answer for a user"
        );
        assert!(r.may_answer_for("dv_o", None, None));
        assert!(
            !r.may_answer_for("dv_b", Some("bob"), None),
            "a disconnected user answers no more"
        );
        assert!(
            r.may_answer_for("dv_b", Some("bob"), Some(Timestamp(9))),
            "but did before"
        );
        assert!(!r.may_answer_for("dv_b", Some("bob"), Some(Timestamp(10))));
        assert!(!r.may_answer_for("dv_a", Some("carol"), None));
        let alice: Vec<_> = r.audience(Some("alice")).map(|d| d.device_id.as_str()).collect();
        assert_eq!(alice, ["dv_a"]);
        let owners: Vec<_> = r.audience(None).map(|d| d.device_id.as_str()).collect();
        assert_eq!(owners, ["dv_o"]);
        assert_eq!(
            r.audience(Some("bob")).count(),
            0,
            "a disconnected user has no audience"
        );
        assert_eq!(r.audience(Some("carol")).count(), 0, "nor has an unknown one");
        // The audience is exactly the devices whose answer counts now.
        for who in [None, Some("alice"), Some("bob"), Some("carol")] {
            let by_rule: Vec<_> = r
                .devices
                .iter()
                .filter(|d| r.may_answer_for(&d.device_id, who, None))
                .map(|d| d.device_id.as_str())
                .collect();
            let audience: Vec<_> = r.audience(who).map(|d| d.device_id.as_str()).collect();
            assert_eq!(audience, by_rule, "{who:?}");
        }
    }

    #[test]
    fn a_device_of_an_unlisted_user_is_malformed() {
        let stray = Roster::empty(AGENT).next(Timestamp(5), |d| d.push(user_device("dv_a", "alice")));
        assert!(matches!(stray.validate(), Err(RosterError::Malformed(_))));
        let owner_with_user = Roster::empty(AGENT).next_with(Timestamp(5), |d, u| {
            u.push(user("alice"));
            d.push(RosterDevice {
                user: Some("alice".into()),
                ..owner("dv_o")
            });
        });
        assert!(matches!(
            owner_with_user.validate(),
            Err(RosterError::Malformed(_))
        ));
        let twice = Roster::empty(AGENT).next_with(Timestamp(5), |_, u| {
            u.push(user("alice"));
            u.push(user("alice"));
        });
        assert!(matches!(twice.validate(), Err(RosterError::Malformed(_))));
        assert!(check_external_id("").is_err() && check_external_id("a\nb").is_err());
        assert!(check_external_id(&"x".repeat(129)).is_err() && check_external_id("user-42").is_ok());
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
    fn a_refused_key_or_the_agent_s_requirement_stops_unsigned_answers_from_then_on() {
        let public = crate::signing::SigningKey::from_seed([8; 32])
            .expect("key")
            .public_key();
        let r = Roster::empty(AGENT).next(Timestamp(5), |d| {
            d.push(owner("dv_old"));
            d.push(RosterDevice {
                signing_key_refused_at: Some(Timestamp(20)),
                ..owner("dv_refused")
            });
            d.push(RosterDevice {
                signing_key: Some(public.to_b64()),
                signing_key_pinned_at: Some(Timestamp(30)),
                ..owner("dv_keyed")
            });
        });
        assert_eq!(r.signing("dv_old"), DeviceSigning::Unsigned);
        assert_eq!(
            r.signing("dv_refused"),
            DeviceSigning::MustSign(SIGNING_KEY_REFUSED)
        );
        assert_eq!(
            r.signing_at("dv_refused", Some(Timestamp(19))),
            DeviceSigning::Unsigned
        );
        assert_eq!(r.signing("dv_keyed"), DeviceSigning::Pinned(public));
        assert_eq!(
            r.unsigned_at("dv_keyed", Some(Timestamp(29))),
            DeviceSigning::Unsigned
        );

        let mut required = r.next(Timestamp(40), |_| {});
        required.require_signed_since = Some(Timestamp(40));
        assert_eq!(
            required.signing("dv_old"),
            DeviceSigning::MustSign(SIGNATURE_REQUIRED)
        );
        assert_eq!(
            required.signing_at("dv_old", Some(Timestamp(39))),
            DeviceSigning::Unsigned
        );
        assert_eq!(required.signing("dv_keyed"), DeviceSigning::Pinned(public));
        // The requirement is sealed with the roster, and kept by every later version.
        let sealed = required.seal(&key());
        let opened = Roster::open(&key(), AGENT, 2, &sealed).expect("open");
        assert_eq!(
            opened.next(Timestamp(50), |_| {}).require_signed_since,
            Some(Timestamp(40))
        );

        let bad_key = Roster::empty(AGENT).next(Timestamp(5), |d| {
            d.push(RosterDevice {
                signing_key: Some("c2hvcnQ".into()),
                ..owner("dv_a")
            });
        });
        assert!(matches!(bad_key.validate(), Err(RosterError::Malformed(_))));
        let pinned_without_key = Roster::empty(AGENT).next(Timestamp(5), |d| {
            d.push(RosterDevice {
                signing_key_pinned_at: Some(Timestamp(4)),
                ..owner("dv_a")
            });
        });
        assert!(matches!(
            pinned_without_key.validate(),
            Err(RosterError::Malformed(_))
        ));
        for (external_id, name) in [("", "Ana"), ("ana", ""), ("ana", "A\nna")] {
            let r = Roster::empty(AGENT).next_with(Timestamp(5), |_, u| {
                u.push(RosterUser {
                    name: name.into(),
                    ..user(external_id)
                });
            });
            assert!(
                matches!(r.validate(), Err(RosterError::Malformed(_))),
                "{external_id:?} {name:?}"
            );
        }
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
