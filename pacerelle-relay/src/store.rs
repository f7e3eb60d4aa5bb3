//! Storage: what the routes ask of the database, and the outcomes they branch on.
//!
//! All SQL lives in the backend modules ([`sqlite`] for now). Conflicts that a caller can cause (an id
//! already taken, a wrong claim proof…) are returned as outcome values; only storage failures are
//! [`StoreError`](crate::error::StoreError)s. Every method that touches an agent's data takes that agent's
//! id from the caller's credential, so one agent can never reach another's rows.

pub(crate) mod sqlite;

use pacerelle_core::Timestamp;
use pacerelle_core::pairing::Role;
use pacerelle_core::wire::{LeaseHolder, MessageCounts, PairingClaimed, PairingCreated, SessionInfo, Stored};

pub(crate) use sqlite::SqliteStore as Store;

/// Items returned per long-poll answer at most; the cursor then points at the last one returned.
pub(crate) const PAGE_LIMIT: u32 = 200;

/// The owner of a bearer credential, as stored.
#[derive(Debug)]
pub(crate) enum Principal {
    /// An agent; `hash` is `SHA-256(auth secret)`.
    Agent { agent_id: String, hash: Vec<u8> },
    /// A device of `agent_id`; `hash` is `SHA-256(device secret)`.
    Device {
        agent_id: String,
        device_id: String,
        hash: Vec<u8>,
        revoked: bool,
    },
}

/// Outcome of a registration.
#[derive(Debug)]
pub(crate) enum Registered {
    Created(pacerelle_core::wire::AgentInfo),
    /// A retry: the same id with the same auth hash is already registered.
    Again(pacerelle_core::wire::AgentInfo),
    /// The id is taken (by an agent or a device).
    Exists,
}

/// A new pairing offer, already validated.
#[derive(Debug)]
pub(crate) struct NewPairing<'a> {
    pub agent_id: &'a str,
    pub pairing_id: &'a str,
    pub device_id: &'a str,
    pub label: Option<&'a str>,
    pub role: Role,
    pub claim_hash: [u8; 32],
    pub offer: &'a str,
    pub expires_at: Timestamp,
    pub now: Timestamp,
}

/// Outcome of storing a pairing offer.
#[derive(Debug)]
pub(crate) enum PairingStored {
    Created(PairingCreated),
    /// The pairing id or the device id is already in use; the text says which.
    Conflict(&'static str),
}

/// A stored pairing offer (or its tombstone).
#[derive(Debug)]
pub(crate) struct PairingRow {
    pub pairing_id: String,
    pub agent_id: String,
    pub device_id: String,
    pub offer: Option<String>,
    pub expires_at: Timestamp,
    pub claimed_at: Option<Timestamp>,
}

/// Outcome of a claim.
#[derive(Debug)]
pub(crate) enum Claim {
    Claimed(PairingClaimed),
    NotFound,
    /// The claim secret does not match.
    WrongProof,
    AlreadyClaimed,
    Expired,
}

/// Outcome of an idempotent store (task, checkpoint).
#[derive(Debug)]
pub(crate) enum Put {
    Stored(Stored),
    /// The id is taken by a different item; the text says how.
    Conflict(&'static str),
}

/// Outcome of storing a reply.
#[derive(Debug)]
pub(crate) enum ReplyPut {
    Stored(Stored),
    /// The id is taken by a reply to another task.
    Conflict,
    /// `sourceMessageId` is not one of this agent's tasks.
    NoSource,
    /// This device id is not one of this agent's devices.
    UnknownDevice(String),
}

/// Outcome of opening a session.
#[derive(Debug)]
pub(crate) enum SessionOpened {
    Opened(SessionInfo),
    InUse(LeaseHolder),
}

/// Outcome of a heartbeat.
#[derive(Debug)]
pub(crate) enum Renewal {
    Renewed(SessionInfo),
    Lost,
    NotFound,
}

/// The session holding an agent's lease now.
#[derive(Debug, Clone)]
pub(crate) struct Lease {
    pub session_id: String,
    pub holder: LeaseHolder,
}

/// The facts `GET …/status` reads from storage.
#[derive(Debug, Default)]
pub(crate) struct StatusFacts {
    pub messages: MessageCounts,
    /// When the oldest task that is delivered and not processed was delivered.
    pub oldest_in_progress: Option<Timestamp>,
    pub last_checkpoint_at: Option<Timestamp>,
    pub devices: u64,
}

/// The lease time-to-live in milliseconds.
pub(crate) fn lease_ttl_ms() -> i64 {
    i64::try_from(pacerelle_core::wire::LEASE_TTL_SECONDS.saturating_mul(1000)).unwrap_or(i64::MAX)
}
