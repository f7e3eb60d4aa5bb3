//! The device side (a phone, or a terminal acting as one): join by link, send tasks, read the conversation,
//! answer questions, push; one concern per module.

mod conversation;
mod follow;
mod grants;
pub(crate) mod push;
mod questions;
mod signing;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use pacerelle_core::envelope;
use pacerelle_core::keys::ContentKey;
use pacerelle_core::pairing::{self, PairingSecret, Role};
use pacerelle_core::signing::{SigningKey, seal_signing_key};
use pacerelle_core::wire::{ClaimPairing, DeviceInfo, DeviceSelf, PairingClaimed, PairingOffer, Status};
use pacerelle_core::{Bearer, CryptoError, b64};
use reqwest::Method;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::http::{Http, Req, Retry};

pub use conversation::{ConversationItem, ConversationPage, ItemUpdate};
pub use follow::{FOLLOW_WAIT, Follow, Followed};
pub use grants::{GrantChoice, ListedGrant};
pub use push::{MAX_PUSH_SUBSCRIPTIONS, PushError, PushEvent, PushKeys, PushSubscriptionKeys};
pub use questions::{ClosedQuestion, OpenedQuestion, QuestionList};

fn open<T: serde::de::DeserializeOwned>(
    key: &ContentKey,
    aad: &envelope::Aad<'_>,
    sealed: &str,
) -> std::result::Result<T, CryptoError> {
    envelope::open_json(key, aad, sealed).map_err(|e| match e {
        pacerelle_core::Error::Crypto(c) => c,
        _ => CryptoError::Open,
    })
}

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
    /// The push subscriptions registered from this device, with their keys (absent from credentials stored
    /// before push existed, which load with none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub push: Vec<PushSubscriptionKeys>,
    /// base64url of the 32-byte seed of this device's Ed25519 signing key, which signs every answer
    /// (docs/crypto.md §4.8). It never leaves the device. Absent from credentials stored before signing keys
    /// existed, which load with none: such a device registers a key at its first answer (or through
    /// [`DeviceClient::register_signing_key`]), and its credentials must then be stored again
    /// ([`DeviceClient::credentials_to_store`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_seed: Option<String>,
    /// Partner mode: the user this device answers for (role `user`), as the offer sealed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<pacerelle_core::pairing::OfferUser>,
    /// Partner mode: how to show the agent (accent colour, icon), as the offer sealed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branding: Option<pacerelle_core::pairing::Branding>,
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
    /// The questions as last read, to refuse answers locally that cannot count.
    questions: Mutex<HashMap<String, OpenedQuestion>>,
    /// The push subscriptions as they are now (see [`DeviceClient::credentials_to_store`]).
    push: Mutex<Vec<PushSubscriptionKeys>>,
    /// This device's signing key: drawn at pairing, loaded from the credentials, or registered later by a
    /// device paired before signing keys (see [`DeviceClient::credentials_to_store`]).
    signing: Mutex<Option<Arc<SigningKey>>>,
    /// Held while a signing key is registered, so that two answers at once register one key.
    registering: tokio::sync::Mutex<()>,
    /// Whether the relay was seen to list this device's signing key: answers are signed only then, since an
    /// agent pins only the keys its relay lists and refuses a signature by a key it never received.
    key_listed: std::sync::atomic::AtomicBool,
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
        // The signing key is drawn here and never leaves this device; the agent receives its public half
        // sealed with the device key, so the relay cannot substitute it.
        let signing = SigningKey::generate()?;
        let public = signing.public_key();
        let claim = ClaimPairing {
            claim_secret: b64::encode(&secret.claim_secret()),
            name: name.to_string(),
            signing_key: Some(public.to_b64()),
            signing_key_seal: Some(seal_signing_key(
                &key,
                &payload.agent_id,
                &payload.device_id,
                &public,
            )),
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
            push: Vec::new(),
            signing_seed: Some(b64::encode(&signing.seed())),
            user: payload.user,
            branding: payload.branding.filter(|b| b.validate().is_ok()),
        };
        Ok(DeviceClient {
            inner: Arc::new(Inner {
                http,
                credentials,
                key,
                questions: Mutex::new(HashMap::new()),
                push: Mutex::new(Vec::new()),
                signing: Mutex::new(Some(Arc::new(signing))),
                registering: tokio::sync::Mutex::new(()),
                key_listed: std::sync::atomic::AtomicBool::new(false),
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
        let signing = match credentials.signing_seed.as_deref() {
            Some(seed) => {
                let seed = b64::decode_array::<32>(seed)
                    .ok_or_else(|| Error::InvalidInput("malformed signing key in credentials".into()))?;
                Some(Arc::new(SigningKey::from_seed(seed)?))
            }
            None => None,
        };
        let http = Http::new(&credentials.relay_url)?;
        let push = Mutex::new(credentials.push.clone());
        Ok(DeviceClient {
            inner: Arc::new(Inner {
                http,
                credentials,
                key,
                questions: Mutex::new(HashMap::new()),
                push,
                signing: Mutex::new(signing),
                registering: tokio::sync::Mutex::new(()),
                key_listed: std::sync::atomic::AtomicBool::new(false),
            }),
        })
    }

    /// The credentials this client was made with (at pairing, or as restored). What to store is
    /// [`DeviceClient::credentials_to_store`]: these plus the push subscriptions and a signing key registered
    /// since.
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
