//! Partner mode (docs/partner.md): an agent asks its own users, each a named group of devices paired by a
//! link, to approve what concerns them.
//!
//! A user lives in the agent's roster, sealed with its self key: its `externalId` (the integrator's own id),
//! its name, and which devices are its own. Questions and notifications for a user are sealed for that
//! user's devices only, and only their answers count ([`Roster::may_answer_for`]); the relay routes by
//! device and can move neither a question nor a device from one user to another.

use std::time::Duration;

use pacerelle_core::Timestamp;
use pacerelle_core::pairing::{Branding, OfferUser};
use pacerelle_core::question::QuestionState;
use pacerelle_core::roster::{Roster, RosterUser};
use pacerelle_core::wire::DeviceInfo;
use serde::{Deserialize, Serialize};

use super::check_user;
use crate::agent::audit::{AuditEntry, AuditFilter};
use crate::agent::roster::user_not_found;
use crate::agent::{AgentClient, PairingLink, PairingOptions};
use crate::error::Result;

/// How many recent answer-log entries [`AgentClient::list_users`] reads to find each user's last answer.
const LAST_ANSWERS_SCANNED: usize = 200;

/// What [`AgentClient::connect_user`] needs besides the user.
#[derive(Debug, Clone, Default)]
pub struct ConnectOptions {
    /// How the app shows the agent to the user (accent colour, icon), sealed in the offer.
    pub branding: Option<Branding>,
    /// How long the link can be claimed (default 10 minutes, at most one hour).
    pub ttl: Option<Duration>,
    /// The base URL the user's phone reaches the relay at, when it differs from the one this client uses.
    pub public_url: Option<String>,
}

/// A user of the agent (Partner mode), as the agent's roster and the relay's device list describe them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserInfo {
    /// The integrator's id for the user.
    pub external_id: String,
    /// The user's name.
    pub name: String,
    /// When the agent first connected the user.
    pub connected_at: Timestamp,
    /// When the agent disconnected the user; `None` while connected.
    pub disconnected_at: Option<Timestamp>,
    /// The user's devices, the links not yet used included, oldest first.
    pub devices: Vec<UserDevice>,
    /// The newest question addressed to the user that was answered, when the recent log holds one.
    pub last_answer: Option<AuditEntry>,
}

/// One device of a user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserDevice {
    /// The device's id.
    pub device_id: String,
    /// The name the device gave when it claimed the link; `None` while the link is unused.
    pub name: Option<String>,
    /// `true` once the user opened the link in the app (the device is paired), `false` while it waits.
    pub paired: bool,
    /// When the device paired.
    pub paired_at: Option<Timestamp>,
    /// When the device was revoked (by the agent, or when the user was disconnected).
    pub revoked_at: Option<Timestamp>,
}

impl AgentClient {
    /// Connects a user of the agent (Partner mode) and returns a pairing link for them: whoever opens it
    /// becomes one of that user's devices (role `user`), under the agent's name and `branding`. Connecting
    /// a known `external_id` again gives another link for the same user (a second phone, or a new one) and
    /// updates its name; a disconnected user is connected again.
    ///
    /// Fails with [`Error::InvalidInput`](crate::Error::InvalidInput) for an empty or over-long `external_id` or name (128 and 200
    /// characters), control characters, or malformed branding.
    pub async fn connect_user(
        &self,
        external_id: &str,
        name: &str,
        options: ConnectOptions,
    ) -> Result<PairingLink> {
        let defaults = PairingOptions::default();
        // No label: the relay stores a pairing's label in clear, and a user's name is sealed only.
        self.create_pairing(PairingOptions {
            label: None,
            ttl: options.ttl.unwrap_or(defaults.ttl),
            public_url: options.public_url,
            user: Some(OfferUser {
                external_id: external_id.to_string(),
                name: name.to_string(),
            }),
            branding: options.branding,
            ..defaults
        })
        .await
    }

    /// Every user ever connected, disconnected ones included, in the order they were connected, each with
    /// their devices and last answer (found in the newest 200 entries of the answer log).
    pub async fn list_users(&self) -> Result<Vec<UserInfo>> {
        let roster = self.roster().await?;
        if roster.users.is_empty() {
            return Ok(Vec::new());
        }
        let listed = self.devices().await?;
        let log = self
            .answer_log(&AuditFilter {
                limit: Some(LAST_ANSWERS_SCANNED),
                ..AuditFilter::default()
            })
            .await?;
        Ok(roster
            .users
            .iter()
            .map(|u| user_info(&roster, u, &listed, last_answer(&log, &u.external_id)))
            .collect())
    }

    /// One user, with their devices and last answer.
    ///
    /// Fails with code `user_not_found` when the roster never listed `external_id`.
    pub async fn get_user(&self, external_id: &str) -> Result<UserInfo> {
        check_user(external_id)?;
        let roster = self.roster().await?;
        let user = roster
            .user(external_id)
            .ok_or_else(|| user_not_found(external_id))?;
        let listed = self.devices().await?;
        let log = self
            .answer_log(&AuditFilter {
                user: Some(external_id.to_string()),
                state: Some(QuestionState::Answered),
                limit: Some(1),
                ..AuditFilter::default()
            })
            .await?;
        Ok(user_info(&roster, user, &listed, log.into_iter().next()))
    }

    /// Disconnects a user: every device of theirs is revoked, in the roster first (their answers never count
    /// again, whatever the relay says) and then at the relay (their requests are refused with
    /// `device_revoked`, so they can no longer read anything), and the user is marked disconnected. Links
    /// not yet used are revoked too. Disconnecting a disconnected user changes nothing.
    ///
    /// Fails with code `user_not_found` when the roster never listed `external_id`.
    pub async fn disconnect_user(&self, external_id: &str) -> Result<UserInfo> {
        check_user(external_id)?;
        let now = Timestamp::now();
        let roster = self
            .change_roster_with(|devices, users| {
                let Some(user) = users.iter_mut().find(|u| u.external_id == external_id) else {
                    return;
                };
                user.disconnected_at.get_or_insert(now);
                for d in devices
                    .iter_mut()
                    .filter(|d| d.user.as_deref() == Some(external_id))
                {
                    d.revoked_at.get_or_insert(now);
                }
            })
            .await?;
        let user = roster
            .user(external_id)
            .ok_or_else(|| user_not_found(external_id))?;
        let listed = self.devices().await?;
        for device in roster
            .devices
            .iter()
            .filter(|d| d.user.as_deref() == Some(external_id))
        {
            let paired = listed.iter().find(|l| l.device_id == device.device_id);
            // The roster version above already revoked it: only the relay is left to tell.
            if paired.is_some_and(|l| l.revoked_at.is_none()) {
                self.revoke_at_relay(&device.device_id).await?;
            }
        }
        // Each device's revocation time comes from the roster, so the list read above still describes them.
        Ok(user_info(&roster, user, &listed, None))
    }
}

fn last_answer(log: &[AuditEntry], external_id: &str) -> Option<AuditEntry> {
    log.iter()
        .find(|e| e.user.as_deref() == Some(external_id) && e.state == QuestionState::Answered)
        .cloned()
}

fn user_info(
    roster: &Roster,
    user: &RosterUser,
    listed: &[DeviceInfo],
    last_answer: Option<AuditEntry>,
) -> UserInfo {
    let devices = roster
        .devices
        .iter()
        .filter(|d| d.user.as_deref() == Some(user.external_id.as_str()))
        .map(|d| {
            let paired = listed.iter().find(|l| l.device_id == d.device_id);
            UserDevice {
                device_id: d.device_id.clone(),
                name: paired.map(|l| l.name.clone()),
                paired: paired.is_some(),
                paired_at: paired.map(|l| l.created_at),
                revoked_at: d.revoked_at.or(paired.and_then(|l| l.revoked_at)),
            }
        })
        .collect();
    UserInfo {
        external_id: user.external_id.clone(),
        name: user.name.clone(),
        connected_at: user.connected_at,
        disconnected_at: user.disconnected_at,
        devices,
        last_answer,
    }
}
