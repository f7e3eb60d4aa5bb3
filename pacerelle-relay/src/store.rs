//! Storage: what the routes ask of the database, and the outcomes they branch on.
//!
//! All SQL lives in the backend modules, [`sqlite`] (the embedded default) and [`postgres`] (several instances),
//! with the same methods; [`Store`] is the one the relay opened and forwards each call to it (ADR 0003). Conflicts that a caller can cause (an id
//! already taken, a wrong claim proof…) are returned as outcome values; only storage failures are
//! [`StoreError`](crate::error::StoreError)s. Every method that touches an agent's data takes that agent's
//! id from the caller's credential, so one agent can never reach another's rows. A stored row becomes what
//! the wire shows in one place, [`rows`], for both backends.

// First: its column macros serve both backends.
#[macro_use]
pub(crate) mod rows;

// After rows: its `on_db!` serves the backends' tests too.
#[macro_use]
mod reads;

mod commands;
pub mod copy;
pub(crate) mod grants;
pub(crate) mod marks;
pub(crate) mod postgres;
pub(crate) mod principals;
mod questions;
mod retention;
pub(crate) mod sqlite;
#[cfg(test)]
mod suite;
pub(crate) mod types;

use pacerelle_core::Timestamp;
use pacerelle_core::pairing::Role;
use pacerelle_core::question::{Channel, QuestionKind, QuestionState, Refusal};
use pacerelle_core::wire::{
    LeaseHolder, MessageCounts, PairingClaimed, PairingCreated, QuestionView, SessionInfo, Stored,
};

pub(crate) use types::{
    DuePush, MAX_PER_DEVICE, NewUpdate, OutboxFigures, Outboxes, Purged, PushPut, RosterPut, Target,
    WriterCounts,
};

use std::sync::Arc;

use pacerelle_core::Cursor;
use pacerelle_core::wire::{DeviceEnvelope, DeviceInfo, WebhookInfo};

use crate::config::Config;
use crate::error::{Error, StoreError};
use postgres::PgStore;
pub(crate) use postgres::WakeHost;
use sqlite::SqliteStore;

type Result<T, E = StoreError> = std::result::Result<T, E>;

/// The relay's store: one of the backends, chosen when the relay opens.
#[derive(Debug, Clone)]
pub(crate) enum Store {
    /// The embedded default: a SQLite file in the data folder.
    Sqlite(SqliteStore),
    /// A PostgreSQL database (`--database postgres://…`).
    Postgres(PgStore),
}

impl Store {
    /// Opens the store the configuration names: PostgreSQL when it gives a database URL, else the SQLite file.
    pub(crate) async fn open(config: &Config) -> Result<Store, Error> {
        match &config.database_url {
            Some(url) => {
                let data = crate::at_rest::folder_of(&config.database_path);
                Ok(Store::Postgres(PgStore::open(url, &data).await?))
            }
            None => Ok(Store::Sqlite(SqliteStore::open(&config.database_path).await?)),
        }
    }

    /// Finishes what is queued and closes the connections.
    pub(crate) async fn close(&self) {
        match self {
            Store::Sqlite(s) => s.close().await,
            Store::Postgres(p) => p.close().await,
        }
    }

    /// Records that the agent was handed its tasks after `after` up to `through` (those not yet marked), so that
    /// a later delivery of them says `redelivered` (ADR 0001, 6). Nobody waits for it: it runs in a task of its
    /// own, and the caller answers without a second synced write (on SQLite it rides in the writer's next
    /// batch). A failure, or a power cut before its commit, loses only the mark — the tasks stay stored and
    /// unprocessed, and their next delivery lacks the `redelivered` flag. Until it is written, [`marks`] holds
    /// it, so that a read that may return those tasks again waits for it.
    ///
    /// The tasks sent to any session among them become `session`'s (those another session took meanwhile stay
    /// its own): a task is handed to one session name.
    pub(crate) fn mark_delivered(
        &self,
        agent_id: &str,
        session: &str,
        after: Cursor,
        through: Cursor,
        now: Timestamp,
    ) {
        let (after, through) = (seq_of(after), seq_of(through));
        let (agent_id, session) = (agent_id.to_string(), session.to_string());
        self.marks().add(&agent_id, through);
        let store = self.clone();
        tokio::spawn(async move {
            let written = match &store {
                Store::Sqlite(s) => s.set_delivered(&agent_id, &session, (after, through), now).await,
                Store::Postgres(p) => p.set_delivered(&agent_id, &session, (after, through), now).await,
            };
            if let Err(e) = written {
                tracing::warn!(error = %e, "a delivered mark was not stored");
            }
            store.marks().done(&agent_id);
        });
    }

    /// The principals this relay found recently ([`principals`]).
    pub(in crate::store) fn principals(&self) -> &principals::Principals {
        match self {
            Store::Sqlite(s) => s.principals(),
            Store::Postgres(p) => p.principals(),
        }
    }

    /// The delivered marks of this relay not yet committed.
    pub(in crate::store) fn marks(&self) -> &marks::PendingMarks {
        match self {
            Store::Sqlite(s) => s.marks(),
            Store::Postgres(p) => p.marks(),
        }
    }

    /// What the store's writes have done since it opened (`GET /metrics`): commits, writes, writes per commit.
    pub(crate) fn writer_counts(&self) -> Arc<WriterCounts> {
        match self {
            Store::Sqlite(s) => s.writer_counts(),
            Store::Postgres(p) => p.writer_counts(),
        }
    }
}

/// Forwards each listed method to the backend the store holds: the list is the interface both backends have.
/// A method listed `as` a value of [`commands`] hands the backend that one value, built from its arguments.
macro_rules! forward {
    ($(async fn $name:ident(&self $(, $arg:ident: $ty:ty)*) -> $ret:ty $(as $bundle:ident)?;)*) => {
        impl Store {
            $(forward!(@method $name ($($arg: $ty),*) -> $ret $(as $bundle)?);)*
        }
    };
    (@method $name:ident ($($arg:ident: $ty:ty),*) -> $ret:ty) => {
        pub(crate) async fn $name(&self $(, $arg: $ty)*) -> $ret {
            match self {
                Store::Sqlite(s) => s.$name($($arg),*).await,
                Store::Postgres(p) => p.$name($($arg),*).await,
            }
        }
    };
    (@method $name:ident ($($arg:ident: $ty:ty),*) -> $ret:ty as $bundle:ident) => {
        // The arguments are the fields of the command handed on, one by one.
        #[allow(clippy::too_many_arguments)]
        pub(crate) async fn $name(&self $(, $arg: $ty)*) -> $ret {
            let given = commands::$bundle { $($arg),* };
            match self {
                Store::Sqlite(s) => s.$name(&given).await,
                Store::Postgres(p) => p.$name(&given).await,
            }
        }
    };
}

forward! {
    async fn register_agent(&self, agent_id: &str, name: &str, auth_hash: &[u8; 32], now: Timestamp) -> Result<Registered> as NewAgent;
    async fn put_checkpoint(&self, agent_id: &str, checkpoint_id: &str, envelope: &str, now: Timestamp) -> Result<Stored> as NewCheckpoint;
    async fn revoke_device(&self, agent_id: &str, device_id: &str, now: Timestamp) -> Result<Option<DeviceInfo>> as DeviceAt;
    async fn global_head(&self) -> Result<Cursor>;
    async fn put_message(&self, agent_id: &str, device_id: &str, message_id: &str, envelope: &str, session: Option<&str>, max_pending: u32, now: Timestamp) -> Result<Put> as NewTask;
    async fn wait_read(&self, agent_id: &str, session_id: Option<&str>, after: Cursor, limit: u32, now: Timestamp) -> Result<WaitRead> as WaitQuery;
    async fn put_reply(&self, agent_id: &str, reply_id: &str, source_message_id: &str, envelopes: &[DeviceEnvelope], now: Timestamp) -> Result<ReplyPut> as NewReply;
    async fn create_pairing(&self, p: &NewPairing<'_>) -> Result<PairingStored>;
    async fn claim_pairing(&self, pairing_id: &str, proof_hash: &[u8; 32], name: &str, signing: Option<SigningKeyCopy<'_>>, now: Timestamp) -> Result<Claim> as PairingClaim;
    async fn register_signing_key(&self, agent_id: &str, device_id: &str, signing: SigningKeyCopy<'_>) -> Result<SigningKeyPut> as NewSigningKey;
    async fn put_push_subscription(&self, agent_id: &str, device_id: &str, endpoint: &str, p256dh: &[u8], auth: &[u8], now: Timestamp) -> Result<PushPut> as NewSubscription;
    async fn delete_push_subscription(&self, device_id: &str, endpoint: &str) -> Result<bool>;
    async fn due_pushes(&self, now: Timestamp, busy: &[i64], limit: u32) -> Result<Vec<DuePush>> as Due;
    async fn next_push_due(&self, busy: &[i64]) -> Result<Option<Timestamp>>;
    async fn push_done(&self, push_id: i64) -> Result<()>;
    async fn push_retry(&self, id: i64, status: Option<u16>, error: &str, next: Timestamp) -> Result<()> as FailedAttempt;
    async fn push_subscription_gone(&self, subscription_id: i64) -> Result<()>;
    async fn put_roster(&self, agent_id: &str, previous: u64, version: u64, envelope: &str, now: Timestamp) -> Result<RosterPut> as NewRoster;
    async fn put_grant(&self, agent_id: &str, grant_id: &str, device_id: &str, granted_at: Timestamp, expires_at: Timestamp) -> Result<grants::GrantPut> as NewGrant;
    async fn use_grant(&self, agent_id: &str, grant_id: &str, now: Timestamp) -> Result<Option<pacerelle_core::wire::GrantRecord>> as GrantUse;
    async fn revoke_grant(&self, agent_id: &str, grant_id: &str, by: &str, now: Timestamp) -> Result<Option<pacerelle_core::wire::GrantRecord>> as GrantRevocation;
    async fn open_session(&self, agent_id: &str, session_id: &str, host: &str, name: &str, folder: Option<&str>, takeover: bool, now: Timestamp) -> Result<SessionOpened> as NewSession;
    async fn release(&self, agent_id: &str, session_id: &str, now: Timestamp) -> Result<Option<SessionInfo>> as SessionAt;
    async fn sweep(&self, now: Timestamp) -> Result<()>;
    async fn set_webhook(&self, agent_id: &str, url: &str, secret: &str, now: Timestamp) -> Result<WebhookInfo> as NewWebhook;
    async fn delete_webhook(&self, agent_id: &str) -> Result<WebhookInfo>;
    async fn due_events(&self, now: Timestamp, busy: &[String], limit: u32) -> Result<Vec<DueEvent>> as Due;
    async fn next_event_due(&self, busy: &[String]) -> Result<Option<Timestamp>>;
    async fn set_max_pending_events(&self, cap: u32) -> Result<()>;
    async fn event_delivered(&self, event_id: &str, status: u16, now: Timestamp) -> Result<()>;
    async fn event_attempt_failed(&self, id: &str, status: Option<u16>, error: &str, next: Option<Timestamp>) -> Result<()> as FailedAttempt;
}

/// Items returned per long-poll answer at most; the cursor then points at the last one returned.
pub(crate) const PAGE_LIMIT: u32 = 200;

/// The owner of a bearer credential, as stored.
#[derive(Debug, Clone)]
pub(crate) enum Principal {
    /// An agent; `hash` is `SHA-256(auth secret)`.
    Agent { agent_id: String, hash: Vec<u8> },
    /// A device of `agent_id`; `hash` is `SHA-256(device secret)`. Its role is set at pairing and never
    /// changes, so a principal kept in memory keeps it right.
    Device {
        agent_id: String,
        device_id: String,
        role: pacerelle_core::pairing::Role,
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
    /// The label the agent gave the future device, if any.
    pub label: Option<String>,
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

/// An offer as a claim reads it: agent, device, label, role, claim hash, expiry, claimed.
pub(in crate::store) type ClaimRow = (String, String, Option<String>, String, Vec<u8>, i64, Option<i64>);

/// The device a claim adds: its agent, id, label and role, and its new token with the hash the relay keeps.
pub(in crate::store) struct ClaimedDevice {
    pub agent_id: String,
    pub device_id: String,
    pub label: Option<String>,
    pub role: Role,
    pub token: pacerelle_core::Bearer,
    pub token_hash: [u8; 32],
}

impl Claim {
    /// Checks a claim of the offer as read (`row`, `None` when there is none) with `proof_hash` at `now`: the
    /// outcome that refuses it, or the device it adds, with a token issued for it. The proof is compared in
    /// constant time.
    pub(in crate::store) fn check(
        row: Option<ClaimRow>,
        proof_hash: &[u8; 32],
        now: Timestamp,
    ) -> Result<std::result::Result<ClaimedDevice, Claim>> {
        let Some((agent_id, device_id, label, role, claim_hash, expires_at, claimed_at)) = row else {
            return Ok(Err(Claim::NotFound));
        };
        if !pacerelle_core::keys::constant_time_eq(&claim_hash, proof_hash) {
            return Ok(Err(Claim::WrongProof));
        }
        if claimed_at.is_some() {
            return Ok(Err(Claim::AlreadyClaimed));
        }
        if expires_at <= now.millis() {
            return Ok(Err(Claim::Expired));
        }
        let role = rows::role(&role)?;
        let (token, token_hash) = pacerelle_core::Bearer::issue(&device_id);
        Ok(Ok(ClaimedDevice {
            agent_id,
            device_id,
            label,
            role,
            token,
            token_hash,
        }))
    }
}

impl ClaimedDevice {
    /// The outcome once the device is stored: its agent, its id and its token.
    pub(in crate::store) fn claimed(self) -> Claim {
        Claim::Claimed(PairingClaimed {
            agent_id: self.agent_id,
            device_id: self.device_id,
            device_token: self.token.expose().to_string(),
        })
    }
}

/// A device's signing key as it gave it, already checked: base64url of its Ed25519 public key and that key
/// sealed for the agent. The relay stores and lists both as given; it cannot open the seal.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SigningKeyCopy<'a> {
    pub key: &'a str,
    pub seal: &'a str,
}

/// Outcome of registering a device's signing key after pairing.
#[derive(Debug)]
pub(crate) enum SigningKeyPut {
    /// Stored now: the device had none.
    Stored(DeviceInfo),
    /// The device already has this very key and seal (a retry).
    Again(DeviceInfo),
    /// The device already has another key or seal; it never changes.
    Exists,
    /// No such device of this agent.
    NotFound,
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

/// The session holding the lease of one of an agent's session names now.
#[derive(Debug, Clone)]
pub(crate) struct Lease {
    pub session_id: String,
    pub holder: LeaseHolder,
}

/// Who consumes the inbox with a request ([`Store::caller`]): the session name it consumes as, that name's
/// lease now, and whether the session it named is one this agent has (or had).
#[derive(Debug, Clone)]
pub(crate) struct Caller {
    /// Its session's name; [`pacerelle_core::ids::DEFAULT_SESSION`] without a session, or with one this agent
    /// never had.
    pub name: String,
    /// The session holding that name's lease now, if any.
    pub lease: Option<Lease>,
    /// Whether the session the request named is one of this agent's (`false` without a session).
    pub known: bool,
}

/// One open session of an agent as stored, with its tasks in progress ([`Store::sessions`]).
#[derive(Debug, Clone)]
pub(crate) struct OpenSessionRow {
    pub session_id: String,
    pub name: String,
    pub host: String,
    pub folder: Option<String>,
    pub since: Timestamp,
    pub last_heartbeat_at: Timestamp,
    /// Its tasks delivered and not processed.
    pub in_progress: u64,
    /// When the oldest of those was delivered.
    pub oldest_in_progress: Option<Timestamp>,
}

impl From<OpenSessionRow> for Lease {
    fn from(row: OpenSessionRow) -> Lease {
        Lease {
            session_id: row.session_id,
            holder: LeaseHolder {
                host: row.host,
                name: row.name,
                since: row.since,
                last_heartbeat_at: row.last_heartbeat_at,
            },
        }
    }
}

impl OpenSessionRow {
    /// Whether its lease is live at `now`.
    pub(crate) fn live(&self, now: Timestamp) -> bool {
        self.last_heartbeat_at.millis().saturating_add(lease_ttl_ms()) > now.millis()
    }
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
    /// The user it is for, as the agent gave it in clear (checked): stored and shown, never used to route.
    pub user_id: Option<&'a str>,
    /// How many distinct devices must answer before it closes (1: the first answer closes it).
    pub approvals: u32,
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
    /// Done now, or already done this way (a retry by the device that answered, or of an answer at the host;
    /// a second cancel).
    Done(T),
    /// The state machine refused it.
    Refused(Refusal),
    /// No such question for this credential (or this device is not one of its recipients).
    NotFound,
}

/// Who gives an answer: one of the question's recipient devices (channel `phone`), or the agent recording an
/// answer given at the computer (channel `host`, no device).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answerer<'a> {
    Device(&'a str),
    Host,
}

impl<'a> Answerer<'a> {
    /// The device that answers (the `answered_by` stored), and the channel stored with the answer.
    pub(crate) fn device_and_channel(self) -> (Option<&'a str>, Channel) {
        match self {
            Answerer::Device(device_id) => (Some(device_id), Channel::Phone),
            Answerer::Host => (None, Channel::Host),
        }
    }

    /// Records this answer in `record` through the state machine: [`QuestionRecord::answer`] for a device,
    /// [`QuestionRecord::answer_at_host`] at the computer.
    ///
    /// [`QuestionRecord::answer`]: pacerelle_core::question::QuestionRecord::answer
    /// [`QuestionRecord::answer_at_host`]: pacerelle_core::question::QuestionRecord::answer_at_host
    pub(crate) fn answer(
        self,
        record: &mut pacerelle_core::question::QuestionRecord,
        now: Timestamp,
    ) -> Result<(), Refusal> {
        match self {
            Answerer::Device(device_id) => record.answer(device_id, now),
            Answerer::Host => record.answer_at_host(now),
        }
    }
}

/// Which questions a listing wants, by the state they have at the time of the read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StateFilter {
    All,
    Only(QuestionState),
}

impl StateFilter {
    /// The state wanted, as stored; `None` for all.
    pub(in crate::store) fn state(self) -> Option<&'static str> {
        match self {
            StateFilter::All => None,
            StateFilter::Only(s) => Some(s.as_str()),
        }
    }
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

impl LogPage {
    /// The page of a read that asked for `limit + 1` rows, newest first: the first `limit` as views, and, when
    /// there was one more, the cursor of the last view to read on from.
    pub(crate) fn of<R>(
        rows: Vec<R>,
        limit: u32,
        view: impl FnMut(R) -> Result<QuestionView>,
    ) -> Result<LogPage> {
        let more = rows.len() > limit as usize;
        let questions = rows
            .into_iter()
            .take(limit as usize)
            .map(view)
            .collect::<Result<Vec<_>, _>>()?;
        let next = if more {
            questions.last().map(|v| v.cursor)
        } else {
            None
        };
        Ok(LogPage { questions, next })
    }
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
    pub target: Target,
}

/// One step of the agent's long-poll, read in one snapshot ([`Store::wait_read`]).
#[derive(Debug)]
pub(crate) struct WaitRead {
    /// The session name the caller consumes as: its session's, else [`pacerelle_core::ids::DEFAULT_SESSION`].
    pub name: String,
    /// The session holding that name's lease now, if any.
    pub lease: Option<Lease>,
    /// Whether the caller's session is the lease's or one this agent has had (`false` without a session).
    pub session_known: bool,
    /// The greatest sequence number given to any item: no cursor this relay issued is beyond it.
    pub global_head: pacerelle_core::Cursor,
    /// The agent's tasks not yet processed after the cursor, oldest first.
    pub messages: Vec<pacerelle_core::wire::AgentMessage>,
    /// The cursor to continue from.
    pub next: pacerelle_core::Cursor,
    /// The version of the agent's roster (0: none stored), read in the same snapshot.
    pub roster_version: u64,
}

impl WaitRead {
    /// A step of the long-poll read after `after`, with the agent's `messages` (at most `limit`): it continues
    /// from the last one when the page is full, else from the agent's head (or `after`, if that is beyond).
    /// `global` and `head` are the greatest sequence numbers given: to any item ever, and to the agent's.
    #[allow(clippy::too_many_arguments)] // the facts of one snapshot, each a column of the read
    pub(in crate::store) fn new(
        name: String,
        lease: Option<Lease>,
        session_known: bool,
        global: i64,
        head: i64,
        after: i64,
        messages: Vec<pacerelle_core::wire::AgentMessage>,
        limit: u32,
    ) -> WaitRead {
        let next = match messages.last() {
            Some(last) if messages.len() >= limit as usize => last.cursor,
            _ => cursor(head.max(after)),
        };
        WaitRead {
            name,
            lease,
            session_known,
            global_head: cursor(global),
            messages,
            next,
            roster_version: 0,
        }
    }

    /// This read with the agent's roster version, read in its snapshot.
    pub(in crate::store) fn with_roster(mut self, version: i64) -> WaitRead {
        self.roster_version = u64::try_from(version).unwrap_or(0);
        self
    }
}

/// A timestamp as stored (milliseconds since the epoch).
pub(crate) fn ts(ms: i64) -> Timestamp {
    Timestamp(ms)
}

/// The channel of a question's answer, from its stored state and `channel` column: none unless it is answered;
/// an answered row without a channel (as none was stored before there were channels) was answered by a device.
pub(crate) fn channel_of(state: QuestionState, stored: Option<&str>) -> Result<Option<Channel>> {
    if state != QuestionState::Answered {
        return Ok(None);
    }
    match stored {
        None | Some("phone") => Ok(Some(Channel::Phone)),
        Some("host") => Ok(Some(Channel::Host)),
        Some(other) => Err(StoreError::internal(format!(
            "unknown answer channel {other:?} in the database"
        ))),
    }
}

/// The cursor of the item at `seq`.
pub(crate) fn cursor(seq: i64) -> Cursor {
    Cursor(u64::try_from(seq).unwrap_or(0))
}

/// The sequence number a cursor continues from.
pub(crate) fn seq_of(c: Cursor) -> i64 {
    i64::try_from(c.seq()).unwrap_or(i64::MAX)
}

impl Lease {
    /// The lease of an open session as stored — its id, host, start and last heartbeat — if it is still live at
    /// `now` (its last heartbeat within the lease's time-to-live).
    pub(crate) fn live(
        (session_id, host, since, beat): SessionRow,
        name: String,
        now: Timestamp,
    ) -> Option<Lease> {
        (beat.saturating_add(lease_ttl_ms()) > now.millis()).then(|| Lease {
            session_id,
            holder: LeaseHolder {
                host,
                name,
                since: ts(since),
                last_heartbeat_at: ts(beat),
            },
        })
    }
}

/// A session as stored: its id, host, start and last heartbeat.
pub(in crate::store) type SessionRow = (String, String, i64, i64);

impl SessionOpened {
    /// What opening a session at `now` does to the session the agent has open (`open`): `Err` with the outcome
    /// while that one is live and not taken over; else the open session's id and when to end it — now if it was
    /// live, at the end of its lease if that had lapsed.
    pub(in crate::store) fn end_open(
        (old_id, old_host, since, beat): SessionRow,
        name: &str,
        takeover: bool,
        now: Timestamp,
    ) -> std::result::Result<(String, i64), SessionOpened> {
        let lapsed_at = beat.saturating_add(lease_ttl_ms());
        let live = lapsed_at > now.millis();
        if live && !takeover {
            return Err(SessionOpened::InUse(LeaseHolder {
                host: old_host,
                name: name.to_string(),
                since: ts(since),
                last_heartbeat_at: ts(beat),
            }));
        }
        Ok((old_id, if live { now.millis() } else { lapsed_at }))
    }

    /// A session opened at `now`, holding its name's lease.
    pub(in crate::store) fn opened(session_id: String, new: &commands::NewSession<'_>) -> SessionOpened {
        SessionOpened::Opened(SessionInfo {
            session_id,
            host: new.host.to_string(),
            since: new.now,
            lease_expires_at: new.now.plus_millis(lease_ttl_ms()),
            name: new.name.to_string(),
            folder: new.folder.map(str::to_string),
        })
    }
}

/// A session ended by a release, from what the release returns: its host, start, end, name and folder.
pub(in crate::store) fn released(
    session_id: &str,
    (host, since, ended_at, name, folder): ReleasedRow,
) -> SessionInfo {
    SessionInfo {
        session_id: session_id.to_string(),
        host,
        since: ts(since),
        lease_expires_at: ts(ended_at),
        name,
        folder,
    }
}

/// What a release returns: the session's host, start, end, name and folder.
pub(in crate::store) type ReleasedRow = (String, i64, i64, String, Option<String>);

/// The lease time-to-live in milliseconds.
pub(crate) fn lease_ttl_ms() -> i64 {
    i64::try_from(pacerelle_core::wire::LEASE_TTL_SECONDS.saturating_mul(1000)).unwrap_or(i64::MAX)
}
