//! Pairing a device with the agent, and the devices paired: listed, revoked.

use std::time::Duration;

use pacerelle_core::pairing::{self, Branding, OfferPayload, OfferUser, PairingSecret, Role};
use pacerelle_core::roster;
use pacerelle_core::wire::{CreatePairing, DeviceInfo, DeviceList, PairingCreated};
use pacerelle_core::{Timestamp, b64, ids};
use reqwest::Method;

use crate::error::{Error, Result};
use crate::http::Req;

use super::AgentClient;

/// How to create a pairing offer.
#[derive(Debug, Clone)]
pub struct PairingOptions {
    /// A label for the future device ("phone").
    pub label: Option<String>,
    /// How long the offer can be claimed (default 10 minutes, at most one hour).
    pub ttl: Duration,
    /// The device's role.
    pub role: Role,
    /// The base URL a phone uses to reach the relay, when it differs from the one this client uses.
    pub public_url: Option<String>,
    /// Partner mode: the user the device will answer for (its role is then `user`); see
    /// [`AgentClient::connect_user`].
    pub user: Option<OfferUser>,
    /// Partner mode: how the app shows the agent to that user (accent colour, icon), sealed in the offer.
    pub branding: Option<Branding>,
}

impl Default for PairingOptions {
    fn default() -> Self {
        PairingOptions {
            label: None,
            ttl: Duration::from_secs(pairing::DEFAULT_TTL_SECONDS),
            role: Role::Owner,
            public_url: None,
            user: None,
            branding: None,
        }
    }
}

/// A pairing offer, ready to show as a link or QR code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PairingLink {
    /// `https://relay/pair#v1.…`: the secret is in the fragment, which never reaches the relay.
    pub link: String,
    /// The offer's public id.
    pub pairing_id: String,
    /// The device that claiming it will create.
    pub device_id: String,
    /// When it stops being claimable.
    pub expires_at: Timestamp,
}

impl AgentClient {
    /// Creates a pairing offer and returns its link. Whoever opens the link first becomes a device.
    pub async fn create_pairing(&self, options: PairingOptions) -> Result<PairingLink> {
        pairing::check_ttl(options.ttl).map_err(|e| Error::InvalidInput(e.into()))?;
        let role = if options.user.is_some() {
            Role::User
        } else {
            options.role
        };
        if let Some(user) = &options.user {
            let checked = roster::check_external_id(&user.external_id)
                .and_then(|()| roster::check_user_name(&user.name));
            checked.map_err(|e| Error::InvalidInput(e.into()))?;
        }
        if let Some(branding) = &options.branding {
            branding.validate().map_err(|e| Error::InvalidInput(e.into()))?;
        }
        let info = self.info().await?;
        let secret = PairingSecret::generate();
        let device_id = ids::generate(ids::DEVICE);
        // Listed in the agent's roster before the offer exists: the device it creates is the agent's own.
        self.add_to_roster(&device_id, role, options.user.as_ref())
            .await?;
        let expires_at = Timestamp::now().plus_millis(options.ttl.as_millis() as i64);
        let offer = OfferPayload {
            v: 1,
            agent_id: self.inner.agent_id.clone(),
            agent_name: info.name,
            device_id: device_id.clone(),
            device_key: b64::encode(
                &self
                    .inner
                    .token
                    .device_key(&self.inner.agent_id, &device_id)
                    .to_bytes(),
            ),
            role,
            expires_at,
            user: options.user.clone(),
            branding: options.branding.clone(),
        };
        let body = CreatePairing {
            pairing_id: secret.pairing_id(),
            device_id: device_id.clone(),
            label: options.label,
            role,
            claim_hash: b64::encode(&secret.claim_hash()),
            offer: pairing::seal_offer(&secret, &offer),
            expires_at,
        };
        let created: PairingCreated = self
            .inner
            .http
            .send(Req {
                body: Some(&body),
                ..self.req(Method::POST, "/v1/agent/pairings")
            })
            .await?;
        let base = options.public_url.as_deref().unwrap_or(self.inner.http.base());
        Ok(PairingLink {
            link: secret.link(base),
            pairing_id: created.pairing_id,
            device_id: created.device_id,
            expires_at: created.expires_at,
        })
    }

    /// Every device ever paired, revoked ones included.
    pub async fn devices(&self) -> Result<Vec<DeviceInfo>> {
        let list: DeviceList = self
            .inner
            .http
            .send(self.req::<()>(Method::GET, "/v1/agent/devices"))
            .await?;
        Ok(list.devices)
    }

    /// Revokes a device: first in the agent's roster (from then on its answers never approve, whatever the
    /// relay says), then at the relay (its credential stops working at once).
    pub async fn revoke_device(&self, device_id: &str) -> Result<DeviceInfo> {
        ids::validate("device id", device_id)?;
        self.revoke_in_roster(device_id).await?;
        self.revoke_at_relay(device_id).await
    }

    /// Tells the relay a device is revoked, for a device the roster already lists as revoked.
    pub(crate) async fn revoke_at_relay(&self, device_id: &str) -> Result<DeviceInfo> {
        let path = format!("/v1/agent/devices/{device_id}");
        self.inner.http.send(self.req::<()>(Method::DELETE, &path)).await
    }
}
