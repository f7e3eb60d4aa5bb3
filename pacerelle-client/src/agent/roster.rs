//! The agent's device roster, on the agent side: read, checked against the highest version seen here, and
//! changed by compare-and-set (see [`pacerelle_core::roster`] for why it exists).
//!
//! Several hosts of one agent (the CLI, an MCP server, a Python agent, on one machine or several) share the
//! roster through the relay: each change is a compare-and-set on the version, so none is lost, and each host
//! refuses a roster older than the newest it has seen. That mark is kept in memory and, unless disabled, in
//! a file only its owner can read (`<home>/rosters/<agentId>.json`, where home is `PACERELLE_HOME` or the
//! user's config folder + `pacerelle`), so that hosts on one machine, and restarts, share it.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use pacerelle_core::Timestamp;
use pacerelle_core::pairing::Role;
use pacerelle_core::roster::{Roster, RosterDevice, RosterError, RosterUser};
use pacerelle_core::signing::{self, PublicKey, SigningKeyError};
use pacerelle_core::wire::{self, DeviceInfo, PutRoster, RosterView};
use reqwest::Method;
use serde::{Deserialize, Serialize};

use crate::agent::AgentClient;
use crate::error::{Error, Result};
use crate::http::Req;

/// Tries of a roster change that meets concurrent changes by other hosts.
const CHANGE_TRIES: usize = 8;

/// The highest roster version this host has seen, and the digest of that version's content, in memory and
/// in a file: a relay that serves an older version, or another roster under a version already seen (a fork),
/// is caught. Also the last roster this client read or stored, opened, so that a wait whose answer names that
/// same version does not read it again ([`AgentClient::roster_at`]).
#[derive(Debug)]
pub(crate) struct RosterMark {
    file: Option<PathBuf>,
    seen: Mutex<MarkFile>,
    latest: Mutex<Option<Roster>>,
}

#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct MarkFile {
    version: u64,
    /// `base64url(SHA-256(the roster's JSON))` of that version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    digest: Option<String>,
}

impl RosterMark {
    /// A mark kept in `<home>/rosters/<agent_id>.json`, or in memory only when `home` is `None`.
    pub(crate) fn new(home: Option<&Path>, agent_id: &str) -> Self {
        RosterMark {
            file: home.map(|h| h.join("rosters").join(format!("{agent_id}.json"))),
            seen: Mutex::new(MarkFile::default()),
            latest: Mutex::new(None),
        }
    }

    /// The roster this client last read or stored, if it is `version` and no host of this machine has seen
    /// a newer one since.
    fn current(&self, version: u64) -> Option<Roster> {
        let latest = self
            .latest
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .filter(|r| r.version == version)?;
        (self.seen().version <= version).then_some(latest)
    }

    fn keep(&self, roster: &Roster) {
        let mut latest = self.latest.lock().unwrap_or_else(|e| e.into_inner());
        if latest.as_ref().is_none_or(|l| l.version <= roster.version) {
            *latest = Some(roster.clone());
        }
    }

    fn read_file(&self) -> MarkFile {
        let Some(path) = &self.file else {
            return MarkFile::default();
        };
        std::fs::read(path)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<MarkFile>(&bytes).ok())
            .unwrap_or_default()
    }

    /// The newest mark, here or from another host of this machine.
    fn seen(&self) -> MarkFile {
        let from_file = self.read_file();
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if from_file.version > seen.version {
            *seen = from_file;
        }
        seen.clone()
    }

    /// Checks `roster` against the mark, then records it: older than seen is a rollback, the same version
    /// with other content is a fork; either way an error, and the mark does not move.
    pub(crate) fn check_and_record(&self, roster: &Roster) -> std::result::Result<(), RosterError> {
        let seen = self.seen();
        roster.check_not_older(seen.version)?;
        let digest = roster_digest(roster);
        if roster.version == seen.version
            && let Some(known) = &seen.digest
            && *known != digest
        {
            return Err(RosterError::Forked {
                version: roster.version,
            });
        }
        if roster.version > seen.version || seen.digest.is_none() {
            self.record(MarkFile {
                version: roster.version,
                digest: Some(digest),
            });
        }
        self.keep(roster);
        Ok(())
    }

    /// Records a version this host stored or read; the mark never goes down.
    fn record(&self, mark: MarkFile) {
        {
            let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
            if mark.version < seen.version {
                return;
            }
            *seen = mark.clone();
        }
        let Some(path) = &self.file else { return };
        if mark.version < self.read_file().version {
            return;
        }
        if let Err(e) = crate::files::write_private(path, &serde_json::to_vec(&mark).unwrap_or_default()) {
            tracing::warn!(path = %path.display(), error = %e, "cannot keep the device roster's version; it is kept in memory only");
        }
    }

    /// Records the roster this host just stored.
    pub(crate) fn stored(&self, roster: &Roster) {
        self.record(MarkFile {
            version: roster.version,
            digest: Some(roster_digest(roster)),
        });
        self.keep(roster);
    }
}

/// `base64url(SHA-256(JSON))` of a roster, to tell two rosters of one version apart.
fn roster_digest(roster: &Roster) -> String {
    pacerelle_core::b64::encode(&pacerelle_core::keys::sha256(
        &serde_json::to_vec(roster).unwrap_or_default(),
    ))
}

fn roster_error(e: RosterError) -> Error {
    let code = match e {
        RosterError::RolledBack { .. } | RosterError::Forked { .. } => wire::code::ROSTER_ROLLBACK,
        _ => wire::code::ROSTER_INVALID,
    };
    Error::local(409, code, e.to_string())
}

impl AgentClient {
    /// The roster as of `version`, the version the relay named in a wait's answer: the one this client holds
    /// when it is that version (and no host of this machine saw a newer one), else read as [`AgentClient::roster`]
    /// reads it. Without a version (a relay older than the hint), always read. The relay could name an old
    /// version here only as it could serve an old roster to [`AgentClient::roster`]: never one older than this
    /// machine has seen.
    pub(crate) async fn roster_at(&self, version: Option<u64>) -> Result<Roster> {
        if let Some(held) = version.and_then(|v| self.inner.roster_mark.current(v)) {
            return Ok(held);
        }
        self.roster().await
    }

    /// The agent's device roster as the relay keeps it, opened and checked here: it must open with the
    /// agent's self key and be no older than the newest version this host has seen.
    ///
    /// Fails with code `roster_rollback` for an older roster (or none after one was seen) and
    /// `roster_invalid` for one that does not open or is malformed: then no device approves.
    pub async fn roster(&self) -> Result<Roster> {
        let view: RosterView = self
            .inner
            .http
            .send(self.req::<()>(Method::GET, "/v1/agent/roster"))
            .await?;
        let roster = match view.envelope.as_deref() {
            None => Roster::empty(&self.inner.agent_id),
            Some(sealed) => Roster::open(
                &self.inner.token.self_key(&self.inner.agent_id),
                &self.inner.agent_id,
                view.version,
                sealed,
            )
            .map_err(roster_error)?,
        };
        self.inner
            .roster_mark
            .check_and_record(&roster)
            .map_err(roster_error)?;
        Ok(roster)
    }

    /// Applies `change` to the newest roster and stores the result as the next version, retrying when
    /// another host changed it meanwhile. A change that changes nothing stores nothing.
    pub(crate) async fn change_roster(&self, change: impl Fn(&mut Vec<RosterDevice>)) -> Result<Roster> {
        self.change_roster_with(|devices, _| change(devices)).await
    }

    /// [`AgentClient::change_roster`] for a change to the devices and the users (Partner mode).
    pub(crate) async fn change_roster_with(
        &self,
        change: impl Fn(&mut Vec<RosterDevice>, &mut Vec<RosterUser>),
    ) -> Result<Roster> {
        self.change_whole_roster(|roster| change(&mut roster.devices, &mut roster.users))
            .await
    }

    /// [`AgentClient::change_roster`] for a change to anything the roster holds: `change` gets the next
    /// version (its version and time already stamped).
    pub(crate) async fn change_whole_roster(&self, change: impl Fn(&mut Roster)) -> Result<Roster> {
        let key = self.inner.token.self_key(&self.inner.agent_id);
        let mut last = None;
        for _ in 0..CHANGE_TRIES {
            let current = self.roster().await?;
            let mut next = current.next(Timestamp::now(), |_| {});
            change(&mut next);
            if next.devices == current.devices
                && next.users == current.users
                && next.require_signed_since == current.require_signed_since
            {
                return Ok(current);
            }
            next.validate().map_err(|e| Error::InvalidInput(e.to_string()))?;
            let body = PutRoster {
                previous_version: current.version,
                version: next.version,
                envelope: next.seal(&key),
            };
            let stored: Result<RosterView> = self
                .inner
                .http
                .send(Req {
                    body: Some(&body),
                    ..self.req(Method::PUT, "/v1/agent/roster")
                })
                .await;
            match stored {
                Ok(_) => {
                    self.inner.roster_mark.stored(&next);
                    return Ok(next);
                }
                Err(e) if e.kind() == crate::ErrorKind::RosterConflict => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| Error::InvalidInput("the roster kept changing".into())))
    }

    /// Adds a device to the roster (done before its pairing offer is uploaded, so that a claimed device is
    /// always listed). Adding a listed device changes nothing. With `user` (Partner mode), the device is a
    /// `user` device of that user, and the user is added (or connected again, under its new name) in the
    /// same version.
    pub(crate) async fn add_to_roster(
        &self,
        device_id: &str,
        role: Role,
        user: Option<&pacerelle_core::pairing::OfferUser>,
    ) -> Result<Roster> {
        let now = Timestamp::now();
        self.change_whole_roster(|roster| {
            // The first roster of a new agent: every device it pairs signs, so it requires signed answers
            // from the start (an agent adopting older devices does not; `require_signed` turns it on later).
            if roster.version == 1 && roster.devices.is_empty() && roster.users.is_empty() {
                roster.require_signed_since = Some(now);
            }
            let Roster { devices, users, .. } = roster;
            if let Some(u) = user {
                match users.iter_mut().find(|r| r.external_id == u.external_id) {
                    Some(r) => {
                        r.name.clone_from(&u.name);
                        r.disconnected_at = None;
                    }
                    None => users.push(RosterUser {
                        external_id: u.external_id.clone(),
                        name: u.name.clone(),
                        connected_at: now,
                        disconnected_at: None,
                    }),
                }
            }
            if !devices.iter().any(|d| d.device_id == device_id) {
                devices.push(RosterDevice {
                    device_id: device_id.to_string(),
                    role,
                    added_at: now,
                    revoked_at: None,
                    signing_key: None,
                    signing_key_pinned_at: None,
                    signing_key_refused_at: None,
                    user: user.map(|u| u.external_id.clone()),
                });
            }
        })
        .await
    }

    /// Marks a device revoked in the roster: from then on its answers never approve, whatever the relay
    /// says. Revoking a device the roster does not list adds it, revoked.
    pub(crate) async fn revoke_in_roster(&self, device_id: &str) -> Result<Roster> {
        let now = Timestamp::now();
        self.change_roster(
            |devices| match devices.iter_mut().find(|d| d.device_id == device_id) {
                Some(d) => {
                    d.revoked_at.get_or_insert(now);
                }
                None => devices.push(RosterDevice {
                    device_id: device_id.to_string(),
                    role: Role::Owner,
                    added_at: now,
                    revoked_at: Some(now),
                    signing_key: None,
                    signing_key_pinned_at: None,
                    signing_key_refused_at: None,
                    user: None,
                }),
            },
        )
        .await
    }

    /// Adopts the devices the relay lists as active into the roster: for agents whose devices were paired
    /// before rosters existed. This trusts the relay's list once, so run it only on a relay you trust at that
    /// moment, and check the list it returns. Devices already in the roster keep their entry. The signing
    /// keys the adopted devices sealed are pinned as [`AgentClient::pin_signing_keys`] does.
    pub async fn adopt_devices(&self) -> Result<Roster> {
        let listed = self.devices().await?;
        let now = Timestamp::now();
        let roster = self
            .change_roster(|devices| {
                for d in listed.iter().filter(|d| d.revoked_at.is_none()) {
                    if !devices.iter().any(|r| r.device_id == d.device_id) {
                        devices.push(RosterDevice {
                            device_id: d.device_id.clone(),
                            role: d.role,
                            added_at: now,
                            revoked_at: None,
                            signing_key: None,
                            signing_key_pinned_at: None,
                            signing_key_refused_at: None,
                            user: None,
                        });
                    }
                }
            })
            .await?;
        self.pin_signing_keys_from(&listed, roster).await
    }

    /// Pins in the roster the signing key of every roster device that has none yet and whose relay record
    /// carries a sealed one (docs/crypto.md §4.8): the seal must open with the device key and name this agent
    /// and device, and the copy the relay lists in clear, when it lists one, must be the same key. A key that
    /// passes is pinned (a pinned key is never replaced). A key that does not — or a clear key the relay lists
    /// without its seal — is refused: logged as a warning and marked in the roster (`signingKeyRefusedAt`,
    /// once), so that device's answers, signed or not, never approve until the relay lists its true key: the
    /// relay cannot turn a device that signs into one that does not. All in one roster change. Reads the
    /// relay's device list once; returns the roster as it now stands.
    pub async fn pin_signing_keys(&self) -> Result<Roster> {
        let listed = self.devices().await?;
        let roster = self.roster().await?;
        self.pin_signing_keys_from(&listed, roster).await
    }

    /// [`AgentClient::pin_signing_keys`] from a device list and a roster the caller already read: no request
    /// unless there is a key to pin or a refusal to mark.
    pub(crate) async fn pin_signing_keys_from(
        &self,
        listed: &[DeviceInfo],
        roster: Roster,
    ) -> Result<Roster> {
        let keys = self.open_signing_keys(listed, &roster);
        let news = |d: &RosterDevice| match keys.iter().find(|(id, _)| *id == d.device_id) {
            Some((_, Ok(_))) => true,
            Some((_, Err(_))) => d.signing_key_refused_at.is_none(),
            None => false,
        };
        if !roster.devices.iter().any(news) {
            return Ok(roster);
        }
        let now = Timestamp::now();
        self.change_roster(|devices| {
            for (device_id, key) in &keys {
                let Some(d) = devices.iter_mut().find(|d| &d.device_id == device_id) else {
                    continue;
                };
                if d.signing_key.is_some() {
                    continue;
                }
                match key {
                    Ok(key) => {
                        d.signing_key = Some(key.to_b64());
                        d.signing_key_pinned_at = Some(now);
                    }
                    Err(_) => {
                        d.signing_key_refused_at.get_or_insert(now);
                    }
                }
            }
        })
        .await
    }

    /// For each roster device without a pinned key whose relay record lists one: the key its record seals
    /// when it opens and matches the clear copy, else why it is refused (logged).
    fn open_signing_keys(
        &self,
        listed: &[DeviceInfo],
        roster: &Roster,
    ) -> Vec<(String, std::result::Result<PublicKey, SigningKeyError>)> {
        let agent_id = &self.inner.agent_id;
        let mut opened = Vec::new();
        for device in roster.devices.iter().filter(|d| d.signing_key.is_none()) {
            let Some(record) = listed.iter().find(|l| l.device_id == device.device_id) else {
                continue;
            };
            let key = match (record.signing_key_seal.as_deref(), record.signing_key.as_deref()) {
                (None, None) => continue,
                // A device sends its key in clear and sealed together: a clear key alone was not sealed by it.
                (None, Some(_)) => Err(SigningKeyError::Invalid),
                (Some(seal), clear) => {
                    let device_key = self.inner.token.device_key(agent_id, &device.device_id);
                    signing::open_signing_key(&device_key, agent_id, &device.device_id, seal, clear)
                }
            };
            if let Err(reason) = &key {
                tracing::warn!(
                    device_id = %device.device_id,
                    reason = %reason,
                    "the device's signing key is refused and not pinned: none of its answers will approve"
                );
            }
            opened.push((device.device_id.clone(), key));
        }
        opened
    }

    /// Requires signed answers from now on (`true`: a device with no pinned key approves nothing), or accepts
    /// again the unsigned answers of devices paired before signing keys (`false`). New agents require them
    /// from their first pairing. Changes the roster only when the setting changes; returns it.
    pub async fn require_signed(&self, required: bool) -> Result<Roster> {
        let now = Timestamp::now();
        self.change_whole_roster(|roster| {
            if !required {
                roster.require_signed_since = None;
            } else if roster.require_signed_since.is_none() {
                roster.require_signed_since = Some(now);
            }
        })
        .await
    }

    /// The devices a question or notification for `user` goes to (`None`: the owner; Partner mode:
    /// `Some(externalId)`): active at the relay (it routes) **and** in the roster's audience for that user
    /// ([`Roster::audience`]: the agent decides). The relay can remove a device from this list, never add
    /// one. The signing keys the list carries are pinned first, from the list already read (no extra request
    /// unless there is a key to pin).
    ///
    /// Fails with `user_not_found` for a user never connected or disconnected, and `no_device` when nobody
    /// is left to reach.
    pub(crate) async fn devices_to_reach(&self, user: Option<&str>, what: &str) -> Result<Vec<String>> {
        let (reach, roster, listed) = self.trusted_devices(user).await?;
        let roster = self.revoke_those_that_left(&listed, roster).await;
        if let Some(external_id) = user
            && roster
                .user(external_id)
                .is_none_or(|u| u.disconnected_at.is_some())
        {
            return Err(user_not_found(external_id));
        }
        let roster = if !reach.is_empty() {
            // The answer's judgement pins again if this fails: asking does not depend on it.
            match self.pin_signing_keys_from(&listed, roster.clone()).await {
                Ok(pinned) => pinned,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot pin the devices' signing keys now; retried when an answer comes");
                    roster
                }
            }
        } else {
            roster
        };
        if reach.is_empty() {
            let unlisted = listed
                .iter()
                .filter(|d| d.revoked_at.is_none() && roster.device(&d.device_id).is_none())
                .count();
            let hint = if let Some(external_id) = user {
                format!(
                    ": user {external_id:?} has no paired device yet (send them the link `connect_user` gave)"
                )
            } else if roster.version == 0 && unlisted > 0 {
                format!(
                    ": the relay lists {unlisted} device(s) paired before this agent kept a device roster; \
                     check them with `pacerelle agent devices` and adopt them with `pacerelle agent adopt`, or pair again"
                )
            } else {
                ": pair a phone first (`pacerelle pair`)".to_string()
            };
            return Err(Error::local(
                400,
                wire::code::NO_DEVICE,
                format!("{what} needs a paired device{hint}"),
            ));
        }
        Ok(reach)
    }

    /// Revokes in the roster the devices the relay lists as revoked (a device that left, `DELETE /v1/device`)
    /// while the roster still trusts them, as of the relay's revocation time (never later than now). Safe to
    /// take from the relay: it only takes trust away. One roster change for all of them; on failure the
    /// roster is left as it was (the relay refuses those devices anyway) and the next question tries again.
    async fn revoke_those_that_left(&self, listed: &[DeviceInfo], roster: Roster) -> Roster {
        let now = Timestamp::now();
        let left: Vec<(String, Timestamp)> = listed
            .iter()
            .filter_map(|d| {
                let at = d.revoked_at?;
                let trusted = roster.device(&d.device_id)?.revoked_at.is_none();
                trusted.then(|| (d.device_id.clone(), at.min(now)))
            })
            .collect();
        if left.is_empty() {
            return roster;
        }
        let changed = self
            .change_roster(|devices| {
                for d in devices.iter_mut() {
                    if let Some((_, at)) = left.iter().find(|(id, _)| *id == d.device_id) {
                        d.revoked_at.get_or_insert(*at);
                    }
                }
            })
            .await;
        match changed {
            Ok(roster) => roster,
            Err(e) => {
                tracing::warn!(error = %e, "cannot revoke in the roster the devices that left; tried again at the next question");
                roster
            }
        }
    }

    /// The devices active at the relay and in the roster's audience for `user` (`None`: the owner's),
    /// possibly none, with the roster and the relay's list they came from.
    pub(crate) async fn trusted_devices(
        &self,
        user: Option<&str>,
    ) -> Result<(Vec<String>, Roster, Vec<pacerelle_core::wire::DeviceInfo>)> {
        let roster = self.roster().await?;
        let listed = self.devices().await?;
        let reach: Vec<String> = listed
            .iter()
            .filter(|d| d.revoked_at.is_none())
            .filter(|d| roster.may_answer_for(&d.device_id, user, None))
            .map(|d| d.device_id.clone())
            .collect();
        Ok((reach, roster, listed))
    }
}

/// `user_not_found` for a user the roster does not list as connected.
pub(crate) fn user_not_found(external_id: &str) -> Error {
    Error::local(
        404,
        wire::code::USER_NOT_FOUND,
        format!(
            "no connected user {external_id:?}: connect them first (connect_user), or check the externalId"
        ),
    )
}
