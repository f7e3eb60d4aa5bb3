//! What a write of the store is given, one value per write: [`super::Store`]'s methods take the values one by
//! one, as the routes have them, and hand each backend this one value, so that the interface both backends
//! implement is written here once, and each backend's method says only what it does differently.

use pacerelle_core::wire::DeviceEnvelope;
use pacerelle_core::{Cursor, Timestamp};

use super::SigningKeyCopy;

/// A new agent: its id, name and the hash of its secret. The same id with the same hash again is a retry: it
/// finds the stored agent.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NewAgent<'a> {
    pub agent_id: &'a str,
    pub name: &'a str,
    pub auth_hash: &'a [u8; 32],
    pub now: Timestamp,
}

/// A checkpoint to store, or to find under this id if it is stored already.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NewCheckpoint<'a> {
    pub agent_id: &'a str,
    pub checkpoint_id: &'a str,
    pub envelope: &'a str,
    pub now: Timestamp,
}

/// A device of this agent, at `now`: to revoke (idempotent: the first revocation time is kept; its push
/// subscriptions go in the same transaction).
#[derive(Debug, Clone, Copy)]
pub(crate) struct DeviceAt<'a> {
    pub agent_id: &'a str,
    pub device_id: &'a str,
    pub now: Timestamp,
}

/// The signing key of a device paired before keys: stored if the device has none; the same key and seal
/// again is a retry; anything else is refused, since a device's key never changes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NewSigningKey<'a> {
    pub agent_id: &'a str,
    pub device_id: &'a str,
    pub signing: SigningKeyCopy<'a>,
}

/// A claim of a pairing offer: the proof is checked, then in one transaction the offer is marked claimed
/// (its ciphertext dropped), the device created with its signing key if it gave one, and the hash of its new
/// token stored.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PairingClaim<'a> {
    pub pairing_id: &'a str,
    pub proof_hash: &'a [u8; 32],
    pub name: &'a str,
    pub signing: Option<SigningKeyCopy<'a>>,
    pub now: Timestamp,
}

/// Roster `version`, to store if the stored one is still `previous` (0: none) and `version` is greater.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NewRoster<'a> {
    pub agent_id: &'a str,
    pub previous: u64,
    pub version: u64,
    pub envelope: &'a str,
    pub now: Timestamp,
}

/// A session to open: it takes the lease, unless a live one holds it and `takeover` is false.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NewSession<'a> {
    pub agent_id: &'a str,
    pub session_id: &'a str,
    pub host: &'a str,
    /// Its name: the lease taken is this name's.
    pub name: &'a str,
    pub folder: Option<&'a str>,
    pub takeover: bool,
    pub now: Timestamp,
}

/// A session of this agent, at `now`: to renew (its lease, if it still holds it) or to end (idempotent).
#[derive(Debug, Clone, Copy)]
pub(crate) struct SessionAt<'a> {
    pub agent_id: &'a str,
    pub session_id: &'a str,
    pub now: Timestamp,
}

/// A push subscription of this device: registered, its keys replaced if the device has it already, or moved
/// from another device (whose queued pushes to it are dropped).
#[derive(Debug, Clone, Copy)]
pub(crate) struct NewSubscription<'a> {
    pub agent_id: &'a str,
    pub device_id: &'a str,
    pub endpoint: &'a str,
    pub p256dh: &'a [u8],
    pub auth: &'a [u8],
    pub now: Timestamp,
}

/// A failed attempt of a push or a webhook event, with the HTTP status if there was one: tried again at
/// `next` (which also ends a claim), or, for an event, failed for good when `next` is none.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FailedAttempt<'a, Id, Next> {
    pub id: Id,
    pub status: Option<u16>,
    pub error: &'a str,
    pub next: Next,
}

/// What is due at `now` of an outbox: at most `limit`, none of the keys in `busy` (those with an attempt in
/// flight here).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Due<'a, K> {
    pub now: Timestamp,
    pub busy: &'a [K],
    pub limit: u32,
}

/// A task sent by a device, to store or to find under this id; refused when the agent already has
/// `max_pending` tasks not yet processed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NewTask<'a> {
    pub agent_id: &'a str,
    pub device_id: &'a str,
    pub message_id: &'a str,
    pub envelope: &'a str,
    /// The session it is for; `None`: whichever takes it first.
    pub session: Option<&'a str>,
    pub max_pending: u32,
    pub now: Timestamp,
}

/// One step of the agent's long-poll: its tasks after `after`, at most `limit`, as `session_id` (if any) sees
/// them at `now`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WaitQuery<'a> {
    pub agent_id: &'a str,
    pub session_id: Option<&'a str>,
    pub after: Cursor,
    pub limit: u32,
    pub now: Timestamp,
}

/// A task of this agent, at `now`: to mark processed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TaskAt<'a> {
    pub agent_id: &'a str,
    pub message_id: &'a str,
    /// The session name marking it: a task of another session's is not its to mark.
    pub session: &'a str,
    pub now: Timestamp,
}

/// A reply with one envelope per device, to the task `source_message_id`; to store or to find under this id.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NewReply<'a> {
    pub agent_id: &'a str,
    pub reply_id: &'a str,
    pub source_message_id: &'a str,
    pub envelopes: &'a [DeviceEnvelope],
    pub now: Timestamp,
}

/// The agent's webhook, to set or replace: its URL and its secret (sealed with the relay's webhook key before it
/// is stored, never in clear).
#[derive(Debug, Clone, Copy)]
pub(crate) struct NewWebhook<'a> {
    pub agent_id: &'a str,
    pub url: &'a str,
    pub secret: &'a str,
    pub now: Timestamp,
}

/// A grant the agent kept, to register: stored once per question (a registration again finds the first),
/// only for a question of this agent answered on a phone by `device_id`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NewGrant<'a> {
    pub agent_id: &'a str,
    pub grant_id: &'a str,
    pub device_id: &'a str,
    pub granted_at: Timestamp,
    pub expires_at: Timestamp,
}

/// A grant of this agent at `now`, to use: counted only while it is neither revoked nor expired.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GrantUse<'a> {
    pub agent_id: &'a str,
    pub grant_id: &'a str,
    pub now: Timestamp,
}

/// A grant of this agent, revoked at `now` by `by`, an owner device. Idempotent: the first revocation is kept.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GrantRevocation<'a> {
    pub agent_id: &'a str,
    pub grant_id: &'a str,
    pub by: &'a str,
    pub now: Timestamp,
}
