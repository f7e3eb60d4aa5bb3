//! Storage: what the routes ask of the database, and the outcomes they branch on.
//!
//! All SQL lives in the backend modules ([`sqlite`] for now). Conflicts that a caller can cause (an id
//! already taken, a wrong claim proof…) are returned as outcome values; only storage failures are
//! [`StoreError`](crate::error::StoreError)s. Every method that touches an agent's data takes that agent's
//! id from the caller's credential, so one agent can never reach another's rows.

pub(crate) mod sqlite;

use pacerelle_core::Timestamp;
use pacerelle_core::pairing::Role;
use pacerelle_core::question::{QuestionKind, QuestionState, Refusal};
use pacerelle_core::wire::{
    LeaseHolder, MessageCounts, PairingClaimed, PairingCreated, QuestionView, SessionInfo, Stored,
};

pub(crate) use sqlite::SqliteStore as Store;
pub(crate) use sqlite::WriterCounts;
pub(crate) use sqlite::updates::NewUpdate;

/// Items returned per long-poll answer at most; the cursor then points at the last one returned.
pub(crate) const PAGE_LIMIT: u32 = 200;

/// The owner of a bearer credential, as stored.
#[derive(Debug, Clone)]
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
    /// A new task would pass the agent's quota of tasks not yet processed; nothing was stored.
    QuotaExceeded,
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

/// A new question, already validated.
#[derive(Debug)]
pub(crate) struct NewQuestion<'a> {
    pub question_id: &'a str,
    pub kind: QuestionKind,
    pub expires_at: Timestamp,
    pub self_envelope: &'a str,
    pub envelopes: &'a [pacerelle_core::wire::DeviceEnvelope],
}

/// Outcome of storing a question or a notification.
#[derive(Debug)]
pub(crate) enum ItemPut<T> {
    /// Stored now (`true`) or already stored under this id (`false`).
    Stored(T, bool),
    /// This device id is not an active device of this agent.
    UnknownDevice(String),
}

/// Outcome of storing a question: that of any item, or a refusal by the agent's quota of open questions
/// (notifications hold nothing open and have no such quota).
#[derive(Debug)]
pub(crate) enum QuestionPut {
    /// Stored, already stored, or refused for a device (boxed: a question view is large, the refusal empty).
    Item(Box<ItemPut<QuestionView>>),
    /// A new question would pass the agent's quota of open questions; nothing was stored.
    QuotaExceeded,
}

/// What a transition did besides its answer: whether the question closed in this call (waiters to wake),
/// whether a webhook event was queued (the deliverer to kick), and the `update` item it stored (conversations
/// to wake).
#[derive(Debug, Default, Clone)]
pub(crate) struct Effects {
    pub closed: bool,
    pub event: bool,
    pub update: Option<NewUpdate>,
}

/// A task marked processed: when (the first time), and the `update` item stored if this call was the first.
#[derive(Debug, Clone)]
pub(crate) struct Marked {
    pub processed_at: Timestamp,
    pub update: Option<NewUpdate>,
}

/// Outcome of an answer or a cancel.
#[derive(Debug)]
pub(crate) enum Transition<T> {
    /// Done now, or already done this way (a retry by the device that answered, a second cancel).
    Done(T),
    /// The state machine refused it.
    Refused(Refusal),
    /// No such question for this credential (or this device is not one of its recipients).
    NotFound,
}

/// Which questions a listing wants, by the state they have at the time of the read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StateFilter {
    All,
    Only(QuestionState),
}

/// The filters of the answer log.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LogQuery {
    pub state: StateFilter,
    /// `createdAt >= since`.
    pub since: Option<Timestamp>,
    /// `createdAt < until`.
    pub until: Option<Timestamp>,
    /// Questions with a seq below this one.
    pub before: Option<pacerelle_core::Cursor>,
    pub limit: u32,
}

/// A page of the answer log.
#[derive(Debug)]
pub(crate) struct LogPage {
    pub questions: Vec<QuestionView>,
    pub next: Option<pacerelle_core::Cursor>,
}

/// What a pass of the expirer did.
#[derive(Debug, Default)]
pub(crate) struct ExpiryPass {
    /// Agents whose questions expired (their waiters to wake).
    pub agents: Vec<String>,
    /// Whether webhook events were queued.
    pub events: bool,
    /// Whether more questions may be due (the pass stopped at its limit).
    pub more: bool,
    /// The `update` items stored, one per question expired (conversations to wake).
    pub updates: Vec<NewUpdate>,
}

/// A webhook event due for an attempt, with the agent's webhook as it is now.
#[derive(Debug)]
pub(crate) struct DueEvent {
    pub event_id: String,
    /// The agent: the deliverer has one attempt in flight per agent at most.
    pub agent_id: String,
    pub body: String,
    pub attempts: u32,
    pub created_at: Timestamp,
    /// Where it goes, as the agent's webhook is now.
    pub target: sqlite::Target,
}

/// One step of the agent's long-poll, read in one snapshot ([`Store::wait_read`]).
#[derive(Debug)]
pub(crate) struct WaitRead {
    /// The session holding the agent's lease now, if any.
    pub lease: Option<Lease>,
    /// Whether the caller's session is the lease's or one this agent has had (`false` without a session).
    pub session_known: bool,
    /// The greatest sequence number given to any item: no cursor this relay issued is beyond it.
    pub global_head: pacerelle_core::Cursor,
    /// The agent's tasks not yet processed after the cursor, oldest first.
    pub messages: Vec<pacerelle_core::wire::AgentMessage>,
    /// The cursor to continue from.
    pub next: pacerelle_core::Cursor,
}

/// The lease time-to-live in milliseconds.
pub(crate) fn lease_ttl_ms() -> i64 {
    i64::try_from(pacerelle_core::wire::LEASE_TTL_SECONDS.saturating_mul(1000)).unwrap_or(i64::MAX)
}
