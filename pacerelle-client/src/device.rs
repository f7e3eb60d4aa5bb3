//! The device side (a phone, or a terminal acting as one): join by link, send tasks, read the conversation.

use std::sync::Arc;
use std::time::Duration;

use pacerelle_core::envelope;
use pacerelle_core::keys::ContentKey;
use pacerelle_core::message::{ReplyPayload, TaskPayload, reply_aad, task_aad};
use pacerelle_core::pairing::{self, PairingSecret, Role};
use pacerelle_core::wire::{
    self, ClaimPairing, Conversation, DeviceInfo, DeviceSelf, ItemKind, MessageState, PairingClaimed,
    PairingOffer, SendMessage, Status, Stored,
};
use pacerelle_core::{Bearer, CryptoError, Cursor, Timestamp, b64, ids};
use reqwest::Method;
use serde::{Deserialize, Serialize};

use crate::agent::Rejected;
use crate::error::{Error, Result};
use crate::http::{Http, Req, Retry};

/// Prefix of [`DeviceCredentials::to_secret_string`].
const CREDENTIALS_PREFIX: &str = "pcrdev1_";

/// What a device keeps after pairing. A secret: store it in a file only its owner reads, the Keychain or
/// the Keystore. `Debug` hides the token and the key.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceCredentials {
    /// The relay's base URL.
    pub relay_url: String,
    /// The agent paired with.
    pub agent_id: String,
    /// Its display name.
    pub agent_name: String,
    /// This device's id.
    pub device_id: String,
    /// This device's role.
    pub role: Role,
    /// The bearer credential issued by the relay.
    pub device_token: String,
    /// The key shared with the agent, base64url.
    pub device_key: String,
}

impl std::fmt::Debug for DeviceCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceCredentials")
            .field("relay_url", &self.relay_url)
            .field("agent_id", &self.agent_id)
            .field("device_id", &self.device_id)
            .finish_non_exhaustive()
    }
}

impl DeviceCredentials {
    /// One opaque string holding everything, `pcrdev1_…`.
    pub fn to_secret_string(&self) -> String {
        #[allow(clippy::unwrap_used)] // plain strings serialise infallibly
        let json = serde_json::to_vec(self).unwrap();
        format!("{CREDENTIALS_PREFIX}{}", b64::encode(&json))
    }

    /// Parses [`DeviceCredentials::to_secret_string`].
    pub fn from_secret_string(text: &str) -> Result<Self> {
        let bad = || Error::InvalidInput("malformed device credentials (expected pcrdev1_…)".into());
        let body = text.trim().strip_prefix(CREDENTIALS_PREFIX).ok_or_else(bad)?;
        let json = b64::decode(body).ok_or_else(bad)?;
        serde_json::from_slice(&json).map_err(|_| bad())
    }
}

/// One item of the conversation, opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConversationItem {
    /// A task this device sent, or a reply from the agent.
    pub kind: ItemKind,
    /// The message id or reply id.
    pub id: String,
    /// The text.
    pub text: String,
    /// For a reply, the task it answers.
    pub source_message_id: Option<String>,
    /// For a task, its state.
    pub state: Option<MessageState>,
    /// When the relay stored it.
    pub created_at: Timestamp,
    /// Its position in the stream.
    pub cursor: Cursor,
}

/// A page of the conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConversationPage {
    /// Oldest first.
    pub items: Vec<ConversationItem>,
    /// Items whose envelopes did not open.
    pub rejected: Vec<Rejected>,
    /// Where to continue.
    pub cursor: Cursor,
}

/// A device's client. Cheap to clone.
#[derive(Debug, Clone)]
pub struct DeviceClient {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    http: Http,
    credentials: DeviceCredentials,
    key: ContentKey,
}

impl DeviceClient {
    /// Pairs with an agent by opening its link. The link's secret never leaves this process.
    pub async fn join(link: &str, name: &str) -> Result<Self> {
        let name = name.trim();
        if name.is_empty() || name.chars().count() > 100 {
            return Err(Error::InvalidInput(
                "a device name has 1 to 100 characters".into(),
            ));
        }
        let (relay_url, secret) = PairingSecret::parse_link(link)?;
        let http = Http::new(&relay_url)?;
        let path = format!("/v1/pairings/{}", secret.pairing_id());
        let offer: PairingOffer = http.send(Req::<()>::new(Method::GET, &path)).await?;
        let payload = pairing::open_offer(&secret, &offer.agent_id, &offer.device_id, &offer.offer)?;
        let key = payload.key()?;
        let claim = ClaimPairing {
            claim_secret: b64::encode(&secret.claim_secret()),
            name: name.to_string(),
        };
        let claim_path = format!("{path}/claim");
        // Claiming is single-use: never retried, so a lost answer cannot claim twice.
        let claimed: PairingClaimed = http
            .send(Req {
                body: Some(&claim),
                retry: Retry::No,
                ..Req::new(Method::POST, &claim_path)
            })
            .await?;
        if claimed.agent_id != payload.agent_id || claimed.device_id != payload.device_id {
            return Err(Error::Crypto(CryptoError::Open));
        }
        let credentials = DeviceCredentials {
            relay_url,
            agent_id: payload.agent_id,
            agent_name: payload.agent_name,
            device_id: payload.device_id,
            role: payload.role,
            device_token: claimed.device_token,
            device_key: b64::encode(&key.to_bytes()),
        };
        Ok(DeviceClient {
            inner: Arc::new(Inner {
                http,
                credentials,
                key,
            }),
        })
    }

    /// A client from stored credentials.
    pub fn from_credentials(credentials: DeviceCredentials) -> Result<Self> {
        let key = b64::decode_array::<32>(&credentials.device_key)
            .map(ContentKey::from_bytes)
            .ok_or_else(|| Error::InvalidInput("malformed device key in credentials".into()))?;
        if Bearer(credentials.device_token.clone()).split().is_none() {
            return Err(Error::InvalidInput(
                "malformed device token in credentials".into(),
            ));
        }
        let http = Http::new(&credentials.relay_url)?;
        Ok(DeviceClient {
            inner: Arc::new(Inner {
                http,
                credentials,
                key,
            }),
        })
    }

    /// The credentials to store.
    pub fn credentials(&self) -> &DeviceCredentials {
        &self.inner.credentials
    }

    fn req<'a, B: serde::Serialize>(&'a self, method: Method, path: &'a str) -> Req<'a, B> {
        Req {
            bearer: Some(&self.inner.credentials.device_token),
            ..Req::new(method, path)
        }
    }

    fn agent_id(&self) -> &str {
        &self.inner.credentials.agent_id
    }

    fn device_id(&self) -> &str {
        &self.inner.credentials.device_id
    }

    /// Sends a task to the agent. Idempotent by `message_id` (one is drawn when `None`).
    pub async fn send(&self, text: &str, message_id: Option<&str>) -> Result<Stored> {
        crate::agent::check_text("a task", text)?;
        let message_id = match message_id {
            Some(id) => {
                ids::validate("message id", id)?;
                id.to_string()
            }
            None => ids::generate(ids::MESSAGE),
        };
        let aad = task_aad(self.agent_id(), self.device_id(), &message_id);
        let envelope = envelope::seal_json(
            &self.inner.key,
            &aad,
            &TaskPayload {
                text: text.to_string(),
            },
        );
        let body = SendMessage { message_id, envelope };
        self.inner
            .http
            .send(Req {
                body: Some(&body),
                ..self.req(Method::POST, "/v1/device/messages")
            })
            .await
    }

    /// The conversation after `cursor` (from the start when `None`), parking up to `wait` when there is
    /// nothing new.
    pub async fn conversation(&self, cursor: Option<Cursor>, wait: Duration) -> Result<ConversationPage> {
        let wait = wait.min(Duration::from_secs(wire::MAX_WAIT_SECONDS));
        let mut query = vec![("wait", wait.as_secs().to_string())];
        if let Some(c) = cursor {
            query.push(("cursor", c.to_string()));
        }
        let page: Conversation = self
            .inner
            .http
            .send(Req {
                query: &query,
                wait: Some(wait),
                ..self.req::<()>(Method::GET, "/v1/device/conversation")
            })
            .await?;
        let mut out = ConversationPage {
            items: Vec::new(),
            rejected: Vec::new(),
            cursor: page.cursor,
        };
        for item in page.items {
            match self.open_item(&item) {
                Ok(text) => out.items.push(ConversationItem {
                    kind: item.kind,
                    id: item.id,
                    text,
                    source_message_id: item.source_message_id,
                    state: item.state,
                    created_at: item.created_at,
                    cursor: item.cursor,
                }),
                Err(reason) => out.rejected.push(Rejected {
                    message_id: item.id,
                    from: self.agent_id().to_string(),
                    reason,
                }),
            }
        }
        Ok(out)
    }

    fn open_item(&self, item: &wire::ConversationItem) -> std::result::Result<String, CryptoError> {
        let to_crypto = |e: pacerelle_core::Error| match e {
            pacerelle_core::Error::Crypto(c) => c,
            _ => CryptoError::Open,
        };
        match item.kind {
            ItemKind::Message => {
                let aad = task_aad(self.agent_id(), self.device_id(), &item.id);
                let task: TaskPayload =
                    envelope::open_json(&self.inner.key, &aad, &item.envelope).map_err(to_crypto)?;
                Ok(task.text)
            }
            ItemKind::Reply => {
                let aad = reply_aad(self.agent_id(), self.device_id(), &item.id);
                let reply: ReplyPayload =
                    envelope::open_json(&self.inner.key, &aad, &item.envelope).map_err(to_crypto)?;
                // The relay states the source in clear; the sealed payload must agree.
                if item.source_message_id.as_deref() != Some(reply.source_message_id.as_str()) {
                    return Err(CryptoError::Open);
                }
                Ok(reply.text)
            }
            _ => Err(CryptoError::Malformed),
        }
    }

    /// Presence of the agent and counts.
    pub async fn status(&self) -> Result<Status> {
        self.inner
            .http
            .send(self.req::<()>(Method::GET, "/v1/device/status"))
            .await
    }

    /// This device and its agent, as the relay knows them.
    pub async fn info(&self) -> Result<DeviceSelf> {
        self.inner
            .http
            .send(self.req::<()>(Method::GET, "/v1/device"))
            .await
    }

    /// Leaves: revokes this device's credential at the relay.
    pub async fn leave(&self) -> Result<DeviceInfo> {
        self.inner
            .http
            .send(self.req::<()>(Method::DELETE, "/v1/device"))
            .await
    }
}
