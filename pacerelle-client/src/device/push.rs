//! Push on the device side (Web Push, RFC 8030 / 8291): register a subscription with the relay, and turn a
//! push body the relay sent into the conversation item it carries.
//!
//! The subscription's P-256 key pair and auth secret are drawn here and kept in the device's credentials
//! ([`DeviceCredentials::push`]): after [`DeviceClient::register_push`] or
//! [`DeviceClient::unregister_push`], store [`DeviceClient::credentials_to_store`] again. The push service
//! sees only ciphertext; the item inside is the same end-to-end envelope the conversation returns, opened
//! here with the device key.

use pacerelle_core::webpush::SubscriptionKeys;
use pacerelle_core::wire::{self, ItemKind};
use pacerelle_core::{CryptoError, Cursor, Timestamp, b64};
use reqwest::Method;
use serde::{Deserialize, Serialize};

use crate::device::{ConversationItem, DeviceClient, DeviceCredentials};
use crate::error::{Error, Result};
use crate::http::Req;

/// The payload version this client reads.
const PAYLOAD_VERSION: u32 = 1;
/// Subscriptions a device may hold at the relay.
pub const MAX_PUSH_SUBSCRIPTIONS: usize = 10;
/// Longest endpoint accepted.
const MAX_ENDPOINT_LEN: usize = 2048;

/// A push subscription of this device, with its secrets: the private key and the auth secret decrypt the
/// pushes sent to `endpoint`. Part of [`DeviceCredentials`]; `Debug` hides the secrets.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PushSubscriptionKeys {
    /// Where the relay posts the pushes (given by the push service or the UnifiedPush distributor).
    pub endpoint: String,
    /// The subscription's public key: an uncompressed P-256 point, base64url (65 bytes).
    pub p256dh: String,
    /// The matching private key, base64url.
    pub private_key: String,
    /// The auth secret, base64url (16 bytes).
    pub auth: String,
}

impl std::fmt::Debug for PushSubscriptionKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushSubscriptionKeys")
            .field("endpoint", &self.endpoint)
            .field("p256dh", &self.p256dh)
            .finish_non_exhaustive()
    }
}

/// The public half of a subscription's keys, as a push service or a distributor asks for them. `Debug`
/// hides the auth secret.
#[derive(Clone, PartialEq, Eq)]
pub struct PushKeys {
    /// The subscription's public key, base64url (65 bytes, uncompressed P-256).
    pub p256dh: String,
    /// The auth secret, base64url (16 bytes). Secret: whoever has it and the endpoint can send pushes that
    /// decrypt; it never leaves the device but to the relay.
    pub auth: String,
}

impl std::fmt::Debug for PushKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushKeys")
            .field("p256dh", &self.p256dh)
            .finish_non_exhaustive()
    }
}

/// What a push carried, opened on this device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PushEvent {
    /// The conversation item the push carried, opened with the device key: the same item
    /// [`DeviceClient::conversation`] returns.
    Item(Box<ConversationItem>),
    /// The item did not fit in the push (or is of a kind this version does not know): read the conversation
    /// from `fetch_from` to get it.
    Fetch {
        /// What the item is (`Unknown` for a kind this version does not know).
        kind: ItemKind,
        /// Its id.
        id: String,
        /// Its position in the conversation.
        cursor: Cursor,
        /// The position just before it: the conversation after `fetch_from` starts with this item.
        fetch_from: Cursor,
    },
}

/// Why a push body was refused. Nothing in it is trusted or shown; none of these carries plaintext.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PushError {
    /// No push subscription is stored on this device (never registered, or credentials stored before it was).
    #[error(
        "no push subscription is registered on this device: register one and store the credentials again"
    )]
    NotRegistered,
    /// The body does not decrypt with this device's push keys: altered, truncated, not `aes128gcm`, or sent
    /// to another subscription.
    #[error("the push does not decrypt with this device's push keys (altered, or for another subscription)")]
    Undecryptable,
    /// The body decrypts, but is not a push payload this version reads.
    #[error("the push payload is malformed: {0}")]
    Malformed(&'static str),
    /// The payload names another agent or another device.
    #[error("the push is for another agent or device")]
    NotForThisDevice,
    /// The item in the payload did not open with the device key (altered, or sealed with another key).
    #[error("the pushed item {id} did not open: {reason}")]
    ItemRejected {
        /// The item's id.
        id: String,
        /// Why.
        reason: CryptoError,
    },
}

impl PushError {
    /// The stable code, for branching and logs: `push_not_registered`, `push_undecryptable`,
    /// `push_malformed`, `push_not_for_this_device` or `push_item_rejected`.
    pub fn code(&self) -> &'static str {
        match self {
            PushError::NotRegistered => "push_not_registered",
            PushError::Undecryptable => "push_undecryptable",
            PushError::Malformed(_) => "push_malformed",
            PushError::NotForThisDevice => "push_not_for_this_device",
            PushError::ItemRejected { .. } => "push_item_rejected",
        }
    }
}

/// `POST /v1/device/push`: the W3C `PushSubscription.toJSON()` shape.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct RegisterPush<'a> {
    endpoint: &'a str,
    expiration_time: Option<u64>,
    keys: RegisterKeys<'a>,
}

#[derive(Debug, Serialize)]
struct RegisterKeys<'a> {
    p256dh: &'a str,
    auth: &'a str,
}

/// The relay's answer to a registration.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PushRegistered {
    #[allow(dead_code)] // read for its shape: a 2xx without it is an unexpected answer
    endpoint: String,
    #[allow(dead_code)]
    created_at: Timestamp,
}

/// `GET /v1/push/key`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RelayPushKey {
    public_key: String,
}

/// `DELETE /v1/device/push`.
#[derive(Debug, Serialize)]
struct UnregisterPush<'a> {
    endpoint: &'a str,
}

/// The plaintext of a push (see `docs/relay-api.md`, "Push").
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PushPayload {
    v: u32,
    agent_id: String,
    device_id: String,
    kind: ItemKind,
    id: String,
    cursor: Cursor,
    #[serde(default)]
    item: Option<serde_json::Value>,
}

/// Checks an endpoint before it is sent to the relay (which checks it again, and its address).
fn check_endpoint(endpoint: &str) -> Result<()> {
    let scheme_ok = endpoint.starts_with("https://") || endpoint.starts_with("http://");
    if !scheme_ok || endpoint.len() > MAX_ENDPOINT_LEN || endpoint.chars().any(char::is_whitespace) {
        return Err(Error::InvalidInput(format!(
            "a push endpoint is an https:// URL of at most {MAX_ENDPOINT_LEN} bytes"
        )));
    }
    Ok(())
}

impl DeviceClient {
    /// The push subscriptions as they are now.
    pub(crate) fn push_subscriptions(&self) -> Vec<PushSubscriptionKeys> {
        self.inner.push.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// The subscription for `endpoint`, made by `new` (given how many there are) and kept when there is none,
    /// in one step, so that two registrations at once keep the same keys; true when it was made now.
    pub(crate) fn push_subscription_for(
        &self,
        endpoint: &str,
        new: impl FnOnce(usize) -> Result<PushSubscriptionKeys>,
    ) -> Result<(PushSubscriptionKeys, bool)> {
        let mut subscriptions = self
            .inner
            .push
            .lock()
            .map_err(|_| Error::InvalidInput("push subscriptions unavailable".into()))?;
        if let Some(known) = subscriptions.iter().find(|s| s.endpoint == endpoint) {
            return Ok((known.clone(), false));
        }
        let made = new(subscriptions.len())?;
        subscriptions.push(made.clone());
        Ok((made, true))
    }

    /// Forgets the subscription for `endpoint`.
    pub(crate) fn forget_push_subscription(&self, endpoint: &str) {
        if let Ok(mut subscriptions) = self.inner.push.lock() {
            subscriptions.retain(|s| s.endpoint != endpoint);
        }
    }

    /// Opens an item a push carried, as the conversation opens it, and remembers a question in it.
    pub(crate) fn open_pushed_item(
        &self,
        item: wire::ConversationItem,
    ) -> std::result::Result<ConversationItem, (String, CryptoError)> {
        let opened = self.open_item(item)?;
        if let Some(q) = &opened.question {
            self.remember(q);
        }
        Ok(opened)
    }

    /// Registers a push subscription for `endpoint` (given by the push service or the UnifiedPush
    /// distributor): draws its P-256 key pair and 16-byte auth secret, keeps them in this device's
    /// credentials, and registers them with the relay, which then pushes this device's questions, replies,
    /// notifications and closed questions there. Registering the same endpoint again keeps its keys (a safe
    /// retry). Store [`DeviceClient::credentials_to_store`] afterwards: the keys are in it.
    ///
    /// The relay refuses an endpoint that is not `https` or is a private address (`push_endpoint_forbidden`,
    /// unless it runs with `--allow-private-push-endpoints`), and more than 10 subscriptions per device.
    pub async fn register_push(&self, endpoint: &str) -> Result<PushKeys> {
        let endpoint = endpoint.trim();
        check_endpoint(endpoint)?;
        // Kept before the request, so that a retry after an uncertain failure sends the same keys.
        let (keys, new) = self.push_subscription_for(endpoint, |held| {
            if held >= MAX_PUSH_SUBSCRIPTIONS {
                return Err(Error::InvalidInput(format!(
                    "a device holds at most {MAX_PUSH_SUBSCRIPTIONS} push subscriptions: unregister one first"
                )));
            }
            new_subscription(endpoint)
        })?;
        let body = RegisterPush {
            endpoint,
            expiration_time: None,
            keys: RegisterKeys {
                p256dh: &keys.p256dh,
                auth: &keys.auth,
            },
        };
        let sent: Result<PushRegistered> = self
            .inner
            .http
            .send(Req {
                body: Some(&body),
                ..self.req(Method::POST, "/v1/device/push")
            })
            .await;
        match sent {
            Ok(_) => Ok(PushKeys {
                p256dh: keys.p256dh,
                auth: keys.auth,
            }),
            Err(e) => {
                // Refused: keys the relay never took are not kept.
                if new && !e.is_transient() {
                    self.forget_push_subscription(endpoint);
                }
                Err(e)
            }
        }
    }

    /// Removes the subscription for `endpoint` at the relay (also when the relay did not know it) and
    /// forgets its keys. Store [`DeviceClient::credentials_to_store`] afterwards.
    pub async fn unregister_push(&self, endpoint: &str) -> Result<()> {
        let endpoint = endpoint.trim();
        check_endpoint(endpoint)?;
        let body = UnregisterPush { endpoint };
        let () = self
            .inner
            .http
            .send(Req {
                body: Some(&body),
                ..self.req(Method::DELETE, "/v1/device/push")
            })
            .await?;
        self.forget_push_subscription(endpoint);
        Ok(())
    }

    /// Opens a push body the relay sent to one of this device's subscriptions (the raw `aes128gcm` bytes
    /// the push service delivered): decrypts it with the subscription's keys, checks that it is for this
    /// agent and device, and opens the item it carries with the device key — or says which item to fetch
    /// when it carried none. Makes no request.
    pub fn open_push(&self, body: &[u8]) -> std::result::Result<PushEvent, PushError> {
        let subscriptions = self.push_subscriptions();
        if subscriptions.is_empty() {
            return Err(PushError::NotRegistered);
        }
        let plain = subscriptions
            .iter()
            .find_map(|keys| decrypt(keys, body))
            .ok_or(PushError::Undecryptable)?;
        let payload: PushPayload = serde_json::from_slice(&plain).map_err(|_| {
            PushError::Malformed("not a push payload (v, agentId, deviceId, kind, id, cursor)")
        })?;
        if payload.v != PAYLOAD_VERSION {
            return Err(PushError::Malformed(
                "a payload version this client does not read",
            ));
        }
        let credentials = self.credentials();
        if payload.agent_id != credentials.agent_id || payload.device_id != credentials.device_id {
            return Err(PushError::NotForThisDevice);
        }
        let fetch = || PushEvent::Fetch {
            kind: payload.kind,
            id: payload.id.clone(),
            cursor: payload.cursor,
            fetch_from: Cursor(payload.cursor.seq().saturating_sub(1)),
        };
        let Some(item) = payload.item.clone() else {
            return Ok(fetch());
        };
        if payload.kind == ItemKind::Unknown {
            // Sent by a newer relay: the conversation (which skips what this version does not know) has it.
            return Ok(fetch());
        }
        let item: wire::ConversationItem = serde_json::from_value(item)
            .map_err(|_| PushError::Malformed("the item is not a conversation item"))?;
        if DeviceClient::unknown_update(&item) {
            return Ok(fetch());
        }
        if item.id != payload.id || item.kind != payload.kind || item.cursor != payload.cursor {
            return Err(PushError::Malformed(
                "the item does not match the payload's kind, id and cursor",
            ));
        }
        self.open_pushed_item(item)
            .map(|item| PushEvent::Item(Box::new(item)))
            .map_err(|(id, reason)| PushError::ItemRejected { id, reason })
    }

    /// The relay's VAPID public key (`GET /v1/push/key`, base64url of an uncompressed P-256 point): the
    /// `applicationServerKey` of a Web Push subscription, or the VAPID key a UnifiedPush distributor asks for.
    pub async fn relay_push_key(&self) -> Result<String> {
        let key: RelayPushKey = self
            .inner
            .http
            .send(Req::<()>::new(Method::GET, "/v1/push/key"))
            .await?;
        Ok(key.public_key)
    }

    /// The credentials to store: those of [`DeviceClient::credentials`] with the push subscriptions and the
    /// signing key as they are now (registered or unregistered since this client was made).
    pub fn credentials_to_store(&self) -> DeviceCredentials {
        DeviceCredentials {
            push: self.push_subscriptions(),
            signing_seed: self.signing_seed(),
            ..self.credentials().clone()
        }
    }
}

/// A new subscription for `endpoint`: a P-256 key pair and an auth secret drawn from the system's generator.
fn new_subscription(endpoint: &str) -> Result<PushSubscriptionKeys> {
    let keys = SubscriptionKeys::generate().map_err(|_| Error::Crypto(CryptoError::Random))?;
    Ok(PushSubscriptionKeys {
        endpoint: endpoint.to_string(),
        p256dh: b64::encode(keys.public_key()),
        private_key: b64::encode(keys.private_key()),
        auth: b64::encode(keys.auth()),
    })
}

/// Decrypts an `aes128gcm` body with one subscription's keys; `None` when it does not decrypt.
fn decrypt(keys: &PushSubscriptionKeys, body: &[u8]) -> Option<Vec<u8>> {
    let keys =
        SubscriptionKeys::from_parts(&b64::decode(&keys.private_key)?, &b64::decode(&keys.auth)?).ok()?;
    keys.decrypt(body).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pacerelle_core::envelope;
    use pacerelle_core::keys::{ContentKey, random_array};
    use pacerelle_core::message::{ReplyPayload, reply_aad};
    use pacerelle_core::pairing::Role;
    use pacerelle_core::{ids, webpush};
    use serde_json::json;

    const ENDPOINT: &str = "https://push.example/up/1";

    /// A device restored from credentials holding one push subscription (no request is made).
    fn device() -> (DeviceClient, ContentKey) {
        let key = random_array::<32>();
        let subscription = new_subscription(ENDPOINT).expect("keys");
        let credentials = DeviceCredentials {
            relay_url: "http://127.0.0.1:9".into(),
            agent_id: ids::generate(ids::AGENT),
            agent_name: "agent".into(),
            device_id: ids::generate(ids::DEVICE),
            role: Role::Owner,
            device_token: format!(
                "{}.{}",
                ids::generate(ids::DEVICE),
                b64::encode(&random_array::<32>())
            ),
            device_key: b64::encode(&key),
            push: vec![subscription],
            signing_seed: None,
            branding: None,
            user: None,
        };
        let device = DeviceClient::from_credentials(credentials).expect("device");
        (device, ContentKey::from_bytes(key))
    }

    /// A reply item sealed for `device` with `key`, as the conversation returns it.
    fn reply_item(device: &DeviceClient, key: &ContentKey, text: &str, cursor: u64) -> serde_json::Value {
        let c = device.credentials();
        let id = ids::generate(ids::REPLY);
        let source = ids::generate(ids::MESSAGE);
        let payload = ReplyPayload {
            text: text.into(),
            source_message_id: source.clone(),
        };
        json!({
            "kind": "reply", "id": id, "sourceMessageId": source,
            "envelope": envelope::seal_json(key, &reply_aad(&c.agent_id, &c.device_id, &id), &payload),
            "createdAt": "2026-11-30T18:00:00.000Z", "cursor": Cursor(cursor).to_string(),
        })
    }

    fn payload(device: &DeviceClient, item: &serde_json::Value) -> serde_json::Value {
        let c = device.credentials();
        json!({
            "v": 1, "relay": c.relay_url, "agentId": c.agent_id, "deviceId": c.device_id,
            "kind": item["kind"], "id": item["id"], "cursor": item["cursor"], "item": item,
        })
    }

    /// What the relay would push to the device's subscription.
    fn pushed(device: &DeviceClient, plaintext: &[u8]) -> Vec<u8> {
        let s = &device.push_subscriptions()[0];
        let p256dh = b64::decode(&s.p256dh).expect("p256dh");
        let auth = b64::decode(&s.auth).expect("auth");
        webpush::encrypt(plaintext, &p256dh, &auth).expect("encrypts")
    }

    fn push_json(device: &DeviceClient, value: &serde_json::Value) -> Vec<u8> {
        pushed(device, &serde_json::to_vec(value).expect("json"))
    }

    #[test]
    fn a_pushed_item_opens_as_the_conversation_opens_it() {
        let (device, key) = device();
        let item = reply_item(&device, &key, "the build is green", 42);
        match device.open_push(&push_json(&device, &payload(&device, &item))) {
            Ok(PushEvent::Item(opened)) => {
                assert_eq!(opened.kind, ItemKind::Reply);
                assert_eq!(opened.text, "the build is green");
                assert_eq!(opened.id, item["id"]);
                assert_eq!(opened.cursor, Cursor(42));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_push_without_its_item_says_where_to_fetch_it() {
        let (device, key) = device();
        let item = reply_item(&device, &key, "long", 42);
        let mut p = payload(&device, &item);
        p.as_object_mut().expect("object").remove("item");
        match device.open_push(&push_json(&device, &p)) {
            Ok(PushEvent::Fetch {
                kind,
                id,
                cursor,
                fetch_from,
            }) => {
                assert_eq!(
                    (kind, cursor, fetch_from),
                    (ItemKind::Reply, Cursor(42), Cursor(41))
                );
                assert_eq!(id, item["id"]);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_closing_push_carries_the_update_and_an_unknown_one_says_fetch() {
        let (device, _) = device();
        let item = json!({
            "kind": "update", "id": "upd_1", "subjectId": "qst_1", "subjectKind": "question",
            "state": "expired",
            "question": {"kind": "yes_no", "state": "expired", "expiresAt": "2026-11-30T18:00:00.000Z"},
            "createdAt": "2026-11-30T18:00:01.000Z", "cursor": Cursor(9).to_string(),
        });
        match device.open_push(&push_json(&device, &payload(&device, &item))) {
            Ok(PushEvent::Item(opened)) => {
                assert_eq!(opened.kind, ItemKind::Update);
                let update = opened.update.expect("the update");
                assert_eq!(update.subject_id, "qst_1");
                assert_eq!(update.state, wire::ItemState::Expired);
            }
            other => panic!("{other:?}"),
        }
        let mut newer = item.clone();
        newer["state"] = json!("archived");
        assert!(matches!(
            device.open_push(&push_json(&device, &payload(&device, &newer))),
            Ok(PushEvent::Fetch {
                kind: ItemKind::Update,
                ..
            })
        ));
    }

    #[test]
    fn every_bad_body_is_refused_with_its_code() {
        let (device, key) = device();
        let item = reply_item(&device, &key, "secret text", 7);
        let good = payload(&device, &item);
        let code = |body: &[u8]| device.open_push(body).map(|_| ()).map_err(|e| e.code());

        let mut tampered = push_json(&device, &good);
        let last = tampered.len() - 1;
        tampered[last] ^= 1;
        assert_eq!(code(&tampered), Err("push_undecryptable"));
        assert_eq!(code(&tampered[..40]), Err("push_undecryptable"));
        assert_eq!(code(b""), Err("push_undecryptable"));
        // Sent to another subscription.
        let (other, _) = self::device();
        assert_eq!(code(&push_json(&other, &good)), Err("push_undecryptable"));

        assert_eq!(code(&pushed(&device, b"not json")), Err("push_malformed"));
        let mut v2 = good.clone();
        v2["v"] = json!(2);
        assert_eq!(code(&push_json(&device, &v2)), Err("push_malformed"));
        let mut moved = good.clone();
        moved["id"] = json!("rep_another");
        assert_eq!(code(&push_json(&device, &moved)), Err("push_malformed"));
        let mut not_item = good.clone();
        not_item["item"] = json!({"kind": "reply"});
        assert_eq!(code(&push_json(&device, &not_item)), Err("push_malformed"));

        for field in ["agentId", "deviceId"] {
            let mut elsewhere = good.clone();
            elsewhere[field] = json!("dv_someoneelse");
            assert_eq!(
                code(&push_json(&device, &elsewhere)),
                Err("push_not_for_this_device")
            );
        }

        let foreign = reply_item(&device, &ContentKey::from_bytes(random_array()), "forged", 8);
        assert_eq!(
            code(&push_json(&device, &payload(&device, &foreign))),
            Err("push_item_rejected")
        );

        // No message carries the plaintext.
        for body in [tampered, pushed(&device, b"{\"v\":\"secret text\"}")] {
            let e = device.open_push(&body).expect_err("refused");
            assert!(!e.to_string().contains("secret text"), "{e}");
        }

        let restored = DeviceClient::from_credentials(DeviceCredentials {
            push: Vec::new(),
            ..device.credentials().clone()
        })
        .expect("device");
        assert_eq!(
            restored
                .open_push(&push_json(&device, &good))
                .map(|_| ())
                .map_err(|e| e.code()),
            Err("push_not_registered")
        );
    }

    #[test]
    fn credentials_keep_the_push_keys_and_older_ones_still_load() {
        let (device, key) = device();
        let stored = device.credentials_to_store().to_secret_string();
        let restored =
            DeviceClient::from_credentials(DeviceCredentials::from_secret_string(&stored).expect("parses"))
                .expect("device");
        let item = reply_item(&device, &key, "after a restart", 3);
        assert!(matches!(
            restored.open_push(&push_json(&device, &payload(&device, &item))),
            Ok(PushEvent::Item(_))
        ));

        // Credentials stored before push existed: no `push` field; they load, and are written back the same.
        let mut old = serde_json::to_value(device.credentials()).expect("json");
        old.as_object_mut().expect("object").remove("push");
        let old_blob = format!(
            "pcrdev1_{}",
            b64::encode(&serde_json::to_vec(&old).expect("json"))
        );
        let loaded = DeviceCredentials::from_secret_string(&old_blob).expect("old credentials load");
        assert!(loaded.push.is_empty());
        let written = loaded.to_secret_string();
        let json = b64::decode(written.trim_start_matches("pcrdev1_")).expect("b64");
        let written: serde_json::Value = serde_json::from_slice(&json).expect("json");
        assert_eq!(written, old, "written back without a push field");
    }

    #[tokio::test]
    async fn registering_keeps_one_key_pair_per_endpoint_and_at_most_ten() {
        let (device, _) = device();
        // The relay of these credentials is not listening: what is decided before the request shows.
        let known = device.push_subscriptions()[0].clone();
        assert!(device.register_push(ENDPOINT).await.is_err());
        assert_eq!(
            device.push_subscriptions(),
            [known],
            "a known endpoint keeps its keys"
        );
        // A new endpoint whose registration failed for a reason worth retrying keeps its keys for the retry.
        assert!(device.register_push("https://push.example/up/2").await.is_err());
        let second = device.push_subscription_for("https://push.example/up/2", |_| panic!("kept"));
        assert!(matches!(second, Ok((_, false))));
        for n in 3..=MAX_PUSH_SUBSCRIPTIONS {
            let endpoint = format!("https://push.example/up/{n}");
            device
                .push_subscription_for(&endpoint, |_| new_subscription(&endpoint))
                .expect("kept");
        }
        match device.register_push("https://push.example/up/11").await {
            Err(Error::InvalidInput(reason)) => assert!(reason.contains("at most 10"), "{reason}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(device.push_subscriptions().len(), MAX_PUSH_SUBSCRIPTIONS);
        assert_eq!(device.credentials_to_store().push.len(), MAX_PUSH_SUBSCRIPTIONS);
    }

    #[test]
    fn codes_are_stable() {
        let codes: Vec<&str> = [
            PushError::NotRegistered,
            PushError::Undecryptable,
            PushError::Malformed("x"),
            PushError::NotForThisDevice,
            PushError::ItemRejected {
                id: "rep_1".into(),
                reason: CryptoError::Open,
            },
        ]
        .iter()
        .map(PushError::code)
        .collect();
        assert_eq!(
            codes,
            [
                "push_not_registered",
                "push_undecryptable",
                "push_malformed",
                "push_not_for_this_device",
                "push_item_rejected"
            ]
        );
    }

    #[test]
    fn endpoints_are_checked_before_any_request() {
        assert!(check_endpoint("https://push.example/up/abc").is_ok());
        assert!(check_endpoint("http://127.0.0.1:9/up").is_ok());
        for bad in ["", "push.example/up", "ftp://push.example", "https://a b"] {
            assert!(check_endpoint(bad).is_err(), "{bad:?}");
        }
        assert!(check_endpoint(&format!("https://x/{}", "a".repeat(MAX_ENDPOINT_LEN))).is_err());
    }
}
