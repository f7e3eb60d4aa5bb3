//! Push (Web Push, as UnifiedPush distributors speak it): register a subscription, and open what the relay
//! pushed into the same items `waitForEvents` returns.

use crate::conversation::{ConversationItem, ItemKind, known_kind};
use crate::device::DeviceClient;
use crate::error::{PacerelleError, Result};

/// The public keys of a push subscription, base64url: what a push service or a UnifiedPush distributor may
/// ask for. `auth` is a secret shared with the relay: never log it (`Debug` hides it).
#[derive(Clone, PartialEq, Eq, uniffi::Record)]
pub struct PushKeys {
    /// The subscription's public key (65 bytes, uncompressed P-256).
    pub p256dh: String,
    /// The auth secret (16 bytes).
    pub auth: String,
}

impl std::fmt::Debug for PushKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushKeys")
            .field("p256dh", &self.p256dh)
            .finish_non_exhaustive()
    }
}

impl From<pacerelle_client::device::PushKeys> for PushKeys {
    fn from(k: pacerelle_client::device::PushKeys) -> Self {
        PushKeys {
            p256dh: k.p256dh,
            auth: k.auth,
        }
    }
}

/// What a push carried, opened on this device.
// Lowered to a foreign type at once, never kept in Rust: boxing the item would only cost an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum PushEvent {
    /// The conversation item the push carried (a question, a reply, a notification, a closed question),
    /// opened with the device key: the same item `waitForEvents` returns.
    Item {
        /// The item.
        item: ConversationItem,
    },
    /// The item did not fit in the push: call `conversation(fetchFrom)`; the item `id` comes first.
    Fetch {
        /// What the item is; `null`/`nil` for a kind this version does not know.
        kind: Option<ItemKind>,
        /// Its id.
        id: String,
        /// Its position in the conversation. Opaque.
        cursor: String,
        /// The position just before it: pass it as `cursor` to `conversation`. Opaque.
        fetch_from: String,
    },
}

impl PushEvent {
    fn from_client(event: pacerelle_client::device::PushEvent) -> Self {
        use pacerelle_client::device::PushEvent as E;
        match event {
            E::Item(item) => {
                let (id, cursor) = (item.id.clone(), item.cursor);
                match ConversationItem::from_client(*item) {
                    Some(opened) => PushEvent::Item { item: opened },
                    // A kind the binding does not map: the conversation has it.
                    None => PushEvent::Fetch {
                        kind: None,
                        id,
                        cursor: cursor.to_string(),
                        fetch_from: pacerelle_client::Cursor(cursor.seq().saturating_sub(1)).to_string(),
                    },
                }
            }
            E::Fetch {
                kind,
                id,
                cursor,
                fetch_from,
            } => PushEvent::Fetch {
                kind: known_kind(kind),
                id,
                cursor: cursor.to_string(),
                fetch_from: fetch_from.to_string(),
            },
        }
    }
}

#[uniffi::export(async_runtime = "tokio")]
impl DeviceClient {
    /// Registers a push subscription for `endpoint` (a UnifiedPush distributor's `onNewEndpoint`, or any Web
    /// Push endpoint): draws its key pair and auth secret on this device, keeps them in the credentials and
    /// registers them with the relay. Store `credentials()` again afterwards: the keys are in it. The same
    /// endpoint again keeps its keys (a safe retry).
    ///
    /// Fails with `Relay` (`push_endpoint_forbidden`: not https, or a private address) or `InvalidInput`.
    pub async fn register_push(&self, endpoint: String) -> Result<PushKeys> {
        Ok(self.inner.register_push(&endpoint).await?.into())
    }

    /// Removes the subscription for `endpoint` at the relay and forgets its keys. Store `credentials()` again.
    pub async fn unregister_push(&self, endpoint: String) -> Result<()> {
        Ok(self.inner.unregister_push(&endpoint).await?)
    }

    /// The relay's VAPID public key (base64url): the `vapid` of `UnifiedPush.register`, or the application
    /// server key a push service asks for.
    pub async fn relay_push_key(&self) -> Result<String> {
        Ok(self.inner.relay_push_key().await?)
    }

    /// Opens a push body (the raw bytes the distributor delivered, `aes128gcm`): decrypted with the
    /// subscription's keys, checked for this agent and device, its item opened with the device key. Makes no
    /// request; safe to call while the phone is locked.
    ///
    /// Fails with `PushRefused` and a stable `code` (`push_not_registered`, `push_undecryptable`,
    /// `push_malformed`, `push_not_for_this_device`, `push_item_rejected`): show nothing from it.
    pub fn open_push(&self, body: Vec<u8>) -> Result<PushEvent> {
        let event = self.inner.open_push(&body)?;
        Ok(PushEvent::from_client(event))
    }
}

impl From<pacerelle_client::device::PushError> for PacerelleError {
    fn from(e: pacerelle_client::device::PushError) -> Self {
        PacerelleError::PushRefused {
            code: e.code().to_string(),
            reason: e.to_string(),
        }
    }
}
