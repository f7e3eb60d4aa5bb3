//! The relay's HTTP API: paths, request and response bodies, error codes. JSON fields are camelCase.
//!
//! Authentication is `Authorization: Bearer <principalId>.<secret>` (see [`crate::token::Bearer`]): an
//! agent's credential on `/v1/agent/…`, a device's on `/v1/device/…`. The credential decides which agent
//! is concerned; no path names another agent. `docs/relay-api.md` documents every route and code.
//!
//! | method | path | body → response |
//! |---|---|---|
//! | GET | `/v1/health` | → [`Health`] |
//! | POST | `/v1/agents` (header [`REGISTRATION_HEADER`] unless open) | [`RegisterAgent`] → [`AgentInfo`] |
//! | GET | `/v1/agent` | → [`AgentInfo`] |
//! | POST | `/v1/agent/pairings` | [`CreatePairing`] → [`PairingCreated`] |
//! | GET | `/v1/agent/devices` | → [`DeviceList`] |
//! | DELETE | `/v1/agent/devices/{deviceId}` | → [`DeviceInfo`] |
//! | GET | `/v1/agent/messages?cursor=&wait=` (header [`SESSION_HEADER`]) | → [`MessageBatch`] |
//! | POST | `/v1/agent/messages/{messageId}/processed` (header [`SESSION_HEADER`]) | → [`Processed`] |
//! | POST | `/v1/agent/replies` | [`SendReply`] → [`Stored`] |
//! | POST | `/v1/agent/checkpoints` | [`SaveCheckpoint`] → [`Stored`] |
//! | GET | `/v1/agent/checkpoints?limit=` | → [`CheckpointList`] |
//! | POST | `/v1/agent/sessions` | [`OpenSession`] → [`SessionInfo`] |
//! | POST | `/v1/agent/sessions/{sessionId}/heartbeat` | → [`SessionInfo`] |
//! | DELETE | `/v1/agent/sessions/{sessionId}` | → [`SessionInfo`] |
//! | GET | `/v1/agent/status` | → [`Status`] |
//! | POST | `/v1/agent/questions` | [`CreateQuestion`] → [`QuestionView`] |
//! | GET | `/v1/agent/questions/{questionId}?wait=` | → [`QuestionView`] (parks while pending) |
//! | POST | `/v1/agent/questions/{questionId}/cancel` | → [`QuestionView`] |
//! | GET | `/v1/agent/questions?state=&since=&until=&cursor=&limit=` | → [`AnswerLog`] |
//! | POST | `/v1/agent/notifications` | [`SendNotification`] → [`Stored`] |
//! | PUT | `/v1/agent/webhook` | [`SetWebhook`] → [`WebhookInfo`] |
//! | GET | `/v1/agent/webhook` | → [`WebhookInfo`] |
//! | DELETE | `/v1/agent/webhook` | → [`WebhookInfo`] |
//! | GET | `/v1/agent/webhook/deliveries?limit=` | → [`DeliveryLog`] |
//! | GET | `/v1/pairings/{pairingId}` (no credential) | → [`PairingOffer`] |
//! | POST | `/v1/pairings/{pairingId}/claim` (no credential) | [`ClaimPairing`] → [`PairingClaimed`] |
//! | GET | `/v1/device` | → [`DeviceSelf`] |
//! | DELETE | `/v1/device` | → [`DeviceInfo`] (the device leaves: revoked) |
//! | POST | `/v1/device/messages` | [`SendMessage`] → [`Stored`] |
//! | GET | `/v1/device/conversation?cursor=&wait=` | → [`Conversation`] |
//! | GET | `/v1/device/status` | → [`Status`] |
//! | GET | `/v1/device/questions?state=` | → [`DeviceQuestions`] |
//! | POST | `/v1/device/questions/{questionId}/answer` | [`AnswerQuestion`] → [`DeviceQuestion`] |
//! | PUT | `/v1/device/signing-key` | [`RegisterSigningKey`] → [`DeviceInfo`] (once; `409 signing_key_exists` after) |
//!
//! `wait` is in seconds, 0 to [`MAX_WAIT_SECONDS`]; the relay caps larger values.

use serde::{Deserialize, Serialize};

use crate::cursor::Cursor;
use crate::pairing::Role;
use crate::question::{Channel, QuestionKind, QuestionState};
use crate::time::Timestamp;

/// Header carrying the registration secret when the relay is not open for registration.
pub const REGISTRATION_HEADER: &str = "x-pacerelle-registration";
/// Header carrying the agent session id on requests that consume the inbox.
pub const SESSION_HEADER: &str = "x-pacerelle-session";
/// Longest long-poll, in seconds.
pub const MAX_WAIT_SECONDS: u64 = 55;
/// Largest request body the relay accepts, in bytes.
pub const MAX_BODY_BYTES: usize = 256 * 1024;
/// A session whose last heartbeat is older than this loses the lease.
pub const LEASE_TTL_SECONDS: u64 = 30;
/// Most checkpoints returned by one listing.
pub const MAX_CHECKPOINT_LIMIT: u32 = 100;

/// `GET /v1/health`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    /// Always true when the relay answers.
    pub ok: bool,
    /// The relay's version.
    pub version: String,
    /// Whether agents can register without the registration secret.
    pub open_registration: bool,
}

/// The JSON body of every error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorBody {
    /// A stable code from [`code`].
    pub code: String,
    /// A human-readable explanation.
    pub error: String,
    /// Extra facts for some codes (`agent_in_use`: the holder).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<serde_json::Value>,
}

/// Stable error codes. They never change meaning; new ones may be added.
pub mod code {
    /// The body is not valid JSON or misses a field.
    pub const INVALID_JSON: &str = "invalid_json";
    /// A field or parameter has a value out of its range or form.
    pub const INVALID_INPUT: &str = "invalid_input";
    /// The body exceeds the relay's limit.
    pub const BODY_TOO_LARGE: &str = "body_too_large";
    /// A cursor that this relay did not issue.
    pub const BAD_CURSOR: &str = "bad_cursor";
    /// No credential, or one that does not match.
    pub const UNAUTHORIZED: &str = "unauthorized";
    /// A valid credential of the wrong kind (a device on an agent route, or the reverse).
    pub const FORBIDDEN: &str = "forbidden";
    /// The device was revoked.
    pub const DEVICE_REVOKED: &str = "device_revoked";
    /// A push endpoint that is not https, or whose host is a private, loopback or link-local address.
    pub const PUSH_ENDPOINT_FORBIDDEN: &str = "push_endpoint_forbidden";
    /// Registration needs the relay's registration secret.
    pub const REGISTRATION_CLOSED: &str = "registration_closed";
    /// The id is already taken by another agent.
    pub const AGENT_EXISTS: &str = "agent_exists";
    /// No such item for this credential.
    pub const NOT_FOUND: &str = "not_found";
    /// No such route.
    pub const NO_ROUTE: &str = "no_route";
    /// Method not allowed on this route.
    pub const METHOD_NOT_ALLOWED: &str = "method_not_allowed";
    /// The pairing offer has expired.
    pub const PAIRING_EXPIRED: &str = "pairing_expired";
    /// The pairing offer was already claimed.
    pub const PAIRING_CLAIMED: &str = "pairing_claimed";
    /// The claim secret does not match the offer.
    pub const PAIRING_PROOF: &str = "pairing_proof";
    /// Another session holds the agent's lease.
    pub const AGENT_IN_USE: &str = "agent_in_use";
    /// This session no longer holds the lease (expired or taken over).
    pub const LEASE_LOST: &str = "lease_lost";
    /// The id is reused for a different item (another source message, another device…).
    pub const ID_CONFLICT: &str = "id_conflict";
    /// The question expired before this answer or cancel.
    pub const QUESTION_EXPIRED: &str = "question_expired";
    /// The question was cancelled.
    pub const QUESTION_CANCELLED: &str = "question_cancelled";
    /// The question already has an answer (the first valid answer wins).
    pub const QUESTION_ANSWERED: &str = "question_answered";
    /// A question or notification needs at least one paired device to go to.
    pub const NO_DEVICE: &str = "no_device";
    /// 404: Partner mode — no user with this `externalId` was ever connected to the agent, or it was
    /// disconnected. Agent side.
    pub const USER_NOT_FOUND: &str = "user_not_found";
    /// A question id already names a different question (text, kind, options or details differ): one id
    /// never carries two questions. Asking the same question again under its id resumes it. Agent side.
    pub const QUESTION_ID_CONFLICT: &str = "question_id_conflict";
    /// The device roster changed since the version the update was based on: read it again and retry.
    pub const ROSTER_CONFLICT: &str = "roster_conflict";
    /// 409: the device already registered a signing key; it never changes.
    pub const SIGNING_KEY_EXISTS: &str = "signing_key_exists";
    /// The relay returned a device roster older than one this agent host has seen, or none at all after
    /// one was seen: no device is trusted until it serves the newest. Agent side.
    pub const ROSTER_ROLLBACK: &str = "roster_rollback";
    /// The relay returned a device roster that does not open with the agent's key, or is malformed. Agent side.
    pub const ROSTER_INVALID: &str = "roster_invalid";
    /// Too many requests of this kind from this address.
    pub const RATE_LIMITED: &str = "rate_limited";
    /// The agent holds as much as the relay allows of this kind (tasks waiting, open questions): nothing was
    /// stored; retry once some are processed, answered or cancelled. HTTP 429.
    pub const QUOTA_EXCEEDED: &str = "quota_exceeded";
    /// The request's body did not arrive within the relay's body timeout. HTTP 408; the connection is closed.
    pub const REQUEST_TIMEOUT: &str = "request_timeout";
    /// Something failed inside the relay; details are in its log.
    pub const INTERNAL: &str = "internal";
    /// The relay's storage is unavailable.
    pub const UNAVAILABLE: &str = "unavailable";
}

/// `POST /v1/agents`: the agent side chose its id and token; the relay learns only `SHA-256(auth)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RegisterAgent {
    /// The new agent's id.
    pub agent_id: String,
    /// Its display name.
    pub name: String,
    /// base64url of `SHA-256(auth secret)`.
    pub auth_hash: String,
}

/// An agent as the relay knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentInfo {
    /// Its id.
    pub agent_id: String,
    /// Its display name.
    pub name: String,
    /// When it registered.
    pub created_at: Timestamp,
}

/// `POST /v1/agent/pairings`: an offer sealed with the pairing key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreatePairing {
    /// Derived from the pairing secret.
    pub pairing_id: String,
    /// The id the new device will have.
    pub device_id: String,
    /// An optional label chosen on the agent side ("phone").
    #[serde(default)]
    pub label: Option<String>,
    /// The new device's role.
    pub role: Role,
    /// base64url of `SHA-256(claimSecret)`.
    pub claim_hash: String,
    /// The sealed [`crate::pairing::OfferPayload`].
    pub offer: String,
    /// When the offer stops being claimable (the relay caps it at one hour from now).
    pub expires_at: Timestamp,
}

/// The answer to [`CreatePairing`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PairingCreated {
    /// The offer's id.
    pub pairing_id: String,
    /// The device it will create.
    pub device_id: String,
    /// When it expires (as stored).
    pub expires_at: Timestamp,
}

/// `GET /v1/pairings/{pairingId}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PairingOffer {
    /// The offer's id.
    pub pairing_id: String,
    /// The agent, in clear (bound into the offer's additional data).
    pub agent_id: String,
    /// The device, in clear (bound into the offer's additional data).
    pub device_id: String,
    /// The sealed offer.
    pub offer: String,
    /// When it expires.
    pub expires_at: Timestamp,
    /// The label the agent gave the future device (`pacerelle pair --name`), in clear as the relay stores it: a
    /// name the device may offer, editable, when it asks for its own. Absent without one (and from older relays).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

/// `POST /v1/pairings/{pairingId}/claim`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimPairing {
    /// base64url of the claim secret derived from the link.
    pub claim_secret: String,
    /// The device's display name ("Ana's phone").
    pub name: String,
    /// base64url of the device's Ed25519 public key (docs/crypto.md §4.8), which the relay records in clear
    /// as part of the pairing record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_key: Option<String>,
    /// The same key sealed for the agent with the device key
    /// ([`crate::signing::SigningKeyPayload`]): the relay cannot substitute it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_key_seal: Option<String>,
}

/// `PUT /v1/device/signing-key`: a device paired before signing keys registers its key, once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RegisterSigningKey {
    /// base64url of the device's Ed25519 public key.
    pub signing_key: String,
    /// The same key sealed for the agent with the device key.
    pub signing_key_seal: String,
}

/// The answer to [`ClaimPairing`]: the device's credential, shown once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PairingClaimed {
    /// The agent paired with.
    pub agent_id: String,
    /// The new device.
    pub device_id: String,
    /// The device's bearer credential, `deviceId.secret`.
    pub device_token: String,
}

/// A paired device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceInfo {
    /// Its id.
    pub device_id: String,
    /// The name it gave when it claimed the offer.
    pub name: String,
    /// The label the agent side gave the offer.
    #[serde(default)]
    pub label: Option<String>,
    /// Its role.
    pub role: Role,
    /// When it paired.
    pub created_at: Timestamp,
    /// When it was revoked, if it was.
    #[serde(default)]
    pub revoked_at: Option<Timestamp>,
    /// base64url of its Ed25519 public key as it gave it (at pairing or later, once); absent until then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_key: Option<String>,
    /// That key sealed for the agent with the device key, which the agent opens and pins in its roster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_key_seal: Option<String>,
}

/// `GET /v1/agent/devices`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceList {
    /// Every device ever paired, revoked ones included, oldest first.
    pub devices: Vec<DeviceInfo>,
}

/// `GET /v1/device`: the calling device and its agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceSelf {
    /// The device.
    pub device: DeviceInfo,
    /// Its agent.
    pub agent: AgentInfo,
}

/// `POST /v1/device/messages`: a task sealed by the device. Idempotent by `messageId`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendMessage {
    /// Chosen by the sender.
    pub message_id: String,
    /// The sealed [`crate::message::TaskPayload`].
    pub envelope: String,
    /// The session it is for ([`crate::ids::validate_session_name`]); absent: whichever session of the agent
    /// takes it first. In clear: the relay routes by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
}

/// The answer to every idempotent store: the item as the relay holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Stored {
    /// The item's id.
    pub id: String,
    /// Its position in the agent's stream.
    pub cursor: Cursor,
    /// When it was first stored.
    pub created_at: Timestamp,
    /// False when the id was already stored and this call changed nothing.
    pub created: bool,
}

/// A task as the agent receives it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentMessage {
    /// The sender's id.
    pub message_id: String,
    /// The device that sent it.
    pub from: String,
    /// That device's name.
    pub from_name: String,
    /// The sealed task.
    pub envelope: String,
    /// When the relay stored it.
    pub sent_at: Timestamp,
    /// True when it was delivered before and not marked processed.
    pub redelivered: bool,
    /// Its position in the stream.
    pub cursor: Cursor,
    /// The session it is for: the one its device addressed it to, or the one it was first handed to; absent
    /// while it was sent to any session and handed to none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
}

/// `GET /v1/agent/messages`: without a cursor, every task not yet processed; with one, tasks after it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageBatch {
    /// Oldest first; empty when the wait ended.
    pub messages: Vec<AgentMessage>,
    /// Where to continue.
    pub cursor: Cursor,
    /// The version of the agent's device roster the relay holds as of this read (0: none yet), so that an
    /// agent holding that version already need not read the roster again to judge the tasks' senders. Absent
    /// from a relay older than this field. Only a hint: the agent still never accepts a version older than one
    /// it has seen (docs/crypto.md §4.7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roster_version: Option<u64>,
}

/// `POST /v1/agent/messages/{messageId}/processed`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Processed {
    /// The task.
    pub message_id: String,
    /// When it was first marked processed.
    pub processed_at: Timestamp,
}

/// One device's copy of a sealed reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceEnvelope {
    /// The device it is sealed for.
    pub device_id: String,
    /// The envelope.
    pub envelope: String,
}

/// `POST /v1/agent/replies`: a reply sealed for each paired device. Idempotent by `replyId`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendReply {
    /// Chosen by the agent.
    pub reply_id: String,
    /// The task it answers; must be one of this agent's.
    pub source_message_id: String,
    /// One envelope per device.
    pub envelopes: Vec<DeviceEnvelope>,
}

/// `POST /v1/agent/checkpoints`. Idempotent by `checkpointId`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SaveCheckpoint {
    /// Chosen by the agent.
    pub checkpoint_id: String,
    /// The sealed [`crate::checkpoint::CheckpointPayload`].
    pub envelope: String,
}

/// A stored checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointRecord {
    /// Its id.
    pub checkpoint_id: String,
    /// Sealed with the agent's self key.
    pub envelope: String,
    /// When it was stored.
    pub created_at: Timestamp,
}

/// `GET /v1/agent/checkpoints`: latest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointList {
    /// Latest first.
    pub checkpoints: Vec<CheckpointRecord>,
}

/// `POST /v1/agent/sessions`: take the agent's lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OpenSession {
    /// Where the session runs ("laptop / claude-code"), shown to a second session.
    pub host: String,
    /// Its name ([`crate::ids::validate_session_name`]): the lease is per name, and a task addressed to this
    /// name reaches only this session. Absent: [`crate::ids::DEFAULT_SESSION`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The folder it works in, as the phone shows it (a short name, not a path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub folder: Option<String>,
    /// Take the lease even if another session holds it.
    #[serde(default)]
    pub takeover: bool,
}

impl OpenSession {
    /// The default session, running at `host`, without takeover.
    pub fn new(host: impl Into<String>) -> Self {
        OpenSession {
            host: host.into(),
            name: None,
            folder: None,
            takeover: false,
        }
    }
}

/// A session holding (or having held) the lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionInfo {
    /// Its id, to send in [`SESSION_HEADER`].
    pub session_id: String,
    /// Where it runs.
    pub host: String,
    /// When it took the lease.
    pub since: Timestamp,
    /// When the lease lapses without a heartbeat.
    pub lease_expires_at: Timestamp,
    /// Its name ([`crate::ids::DEFAULT_SESSION`] from a relay older than named sessions).
    #[serde(default = "default_session_name")]
    pub name: String,
    /// The folder it works in, if it said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub folder: Option<String>,
}

fn default_session_name() -> String {
    crate::ids::DEFAULT_SESSION.to_string()
}

/// One open session of an agent, as `status` lists it for the phone's overview and MCP's `list_sessions`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionSummary {
    /// Its name.
    pub name: String,
    /// Where it runs.
    pub host: String,
    /// The folder it works in, if it said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub folder: Option<String>,
    /// When it took its lease.
    pub since: Timestamp,
    /// Its last heartbeat.
    pub last_heartbeat_at: Timestamp,
    /// When its last wait for tasks started or ended, if this relay saw one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_wait_at: Option<Timestamp>,
    /// What it is doing: [`Presence::Listening`] (a wait parked now or moments ago), [`Presence::Busy`] (tasks
    /// of its own delivered and not processed), [`Presence::Connected`], or [`Presence::Offline`] (its lease
    /// lapsed without a heartbeat).
    pub presence: Presence,
    /// Its tasks delivered and not processed.
    pub in_progress: u64,
}

/// The `details` of an `agent_in_use` error: who holds the lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseHolder {
    /// Where the holder runs.
    pub host: String,
    /// The session name whose lease it holds.
    #[serde(default = "default_session_name")]
    pub name: String,
    /// Since when it holds the lease.
    pub since: Timestamp,
    /// Its last heartbeat.
    pub last_heartbeat_at: Timestamp,
}

/// What the agent is doing, as the phone sees it (DESIGN §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[serde(rename_all = "snake_case")]
pub enum Presence {
    /// No session heartbeat and no recent wait.
    Offline,
    /// A session is connected but not waiting and has nothing in progress.
    Connected,
    /// A wait is parked now or returned moments ago.
    Listening,
    /// Tasks are delivered and not processed, and the agent was recently active.
    Busy,
    /// A task was delivered long ago, is not processed, and no wait came since: the agent is probably
    /// waiting for a confirmation on the computer.
    WaitingConfirmation,
}

impl Presence {
    /// Its wire name: `offline`, `connected`, `listening`, `busy`, `waiting_confirmation`.
    pub fn as_str(self) -> &'static str {
        match self {
            Presence::Offline => "offline",
            Presence::Connected => "connected",
            Presence::Listening => "listening",
            Presence::Busy => "busy",
            Presence::WaitingConfirmation => "waiting_confirmation",
        }
    }
}

/// Counts of tasks by state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct MessageCounts {
    /// Stored, never delivered.
    pub waiting: u64,
    /// Delivered, not processed.
    pub in_progress: u64,
    /// Marked processed.
    pub processed: u64,
}

/// `GET /v1/agent/status` and `GET /v1/device/status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// The agent.
    pub agent: AgentInfo,
    /// The summary a phone shows.
    pub presence: Presence,
    /// The session holding a lease, if any: of the agent's live sessions, the one open longest.
    #[serde(default)]
    pub session: Option<LeaseHolder>,
    /// Every open session of the agent, the one open longest first (those whose lease lapsed without a
    /// heartbeat included, as offline). Empty from a relay older than named sessions.
    #[serde(default)]
    pub sessions: Vec<SessionSummary>,
    /// A wait is parked now.
    pub listening: bool,
    /// When the last wait started or ended.
    #[serde(default)]
    pub last_wait_at: Option<Timestamp>,
    /// Tasks by state.
    pub messages: MessageCounts,
    /// When the last checkpoint was saved.
    #[serde(default)]
    pub last_checkpoint_at: Option<Timestamp>,
    /// Paired devices not revoked.
    pub devices: u64,
    /// The relay's clock.
    pub relay_time: Timestamp,
    /// Open questions this credential sees: for the agent, all of its questions still pending; for a device,
    /// those sent to it that it has not answered yet. 0 from a relay older than this field.
    #[serde(default)]
    pub open_questions: u64,
}

impl Status {
    /// What the agent is doing, in the one word every surface shows ([`Activity`]).
    pub fn activity(&self) -> Activity {
        Activity::of(self.presence, self.messages.in_progress, self.open_questions)
    }

    /// Whether the agent's sessions are worth listing one by one: it has several, or one with a name. A lone
    /// session that gave none (every client older than named sessions) shows as "the session", as before.
    pub fn lists_sessions(&self) -> bool {
        match self.sessions.as_slice() {
            [] => false,
            [one] => one.name != crate::ids::DEFAULT_SESSION,
            _ => true,
        }
    }
}

/// What the agent is doing, in the words a person reads on every surface — the CLI's `status`, the phone SDK,
/// the web app (`activity.js`, held to [`Activity::of`] by its tests) — decided once, here, from the relay's
/// [`Presence`] and counts. In order: a question waits → `asking`; a task is in progress → `working`; a session
/// is there → `listening`; else `offline`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[serde(rename_all = "snake_case")]
pub enum Activity {
    /// A question of the agent waits for an answer (for a device: one sent to it, not answered by it yet).
    Asking,
    /// A task was handed to the agent and is not processed yet.
    Working,
    /// The agent waits for tasks, or its session is connected with nothing in progress.
    Listening,
    /// No session and no recent wait: tasks wait on the relay.
    Offline,
}

impl Activity {
    /// The word from the relay's presence, the tasks in progress and the open questions.
    pub fn of(presence: Presence, in_progress: u64, open_questions: u64) -> Activity {
        match presence {
            _ if open_questions > 0 => Activity::Asking,
            Presence::Busy | Presence::WaitingConfirmation => Activity::Working,
            _ if in_progress > 0 => Activity::Working,
            Presence::Listening | Presence::Connected => Activity::Listening,
            Presence::Offline => Activity::Offline,
        }
    }

    /// The word: `asking`, `working`, `listening`, `offline`.
    pub fn as_str(self) -> &'static str {
        match self {
            Activity::Asking => "asking",
            Activity::Working => "working",
            Activity::Listening => "listening",
            Activity::Offline => "offline",
        }
    }
}

/// The state of a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[serde(rename_all = "snake_case")]
pub enum MessageState {
    /// Stored, not yet delivered to the agent.
    Sent,
    /// Delivered to the agent, not yet processed.
    Delivered,
    /// Marked processed by the agent.
    Processed,
}

/// The kind of a conversation item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ItemKind {
    /// A task sent by this device.
    Message,
    /// A reply from the agent.
    Reply,
    /// A question from the agent.
    Question,
    /// A notification from the agent (no answer expected).
    Notification,
    /// A state change of an earlier item: a task this device sent was processed, a question sealed for it
    /// was answered, cancelled or expired. Written by the relay, sealed by nobody: it carries no envelope.
    Update,
    /// A kind this version does not know (sent by a newer relay); clients skip it.
    #[serde(other)]
    Unknown,
}

/// What an [`ItemKind::Update`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum SubjectKind {
    /// A task this device sent.
    Message,
    /// A question sealed for this device.
    Question,
    /// A kind this version does not know (sent by a newer relay).
    #[serde(other)]
    Unknown,
}

impl SubjectKind {
    /// The name on the wire and in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            SubjectKind::Message => "message",
            SubjectKind::Question => "question",
            SubjectKind::Unknown => "unknown",
        }
    }
}

/// The `state` of a conversation item: a task's state (on a `message` item), or the state an `update` item
/// reports (`processed` for a task; `answered`, `expired` or `cancelled` for a question).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ItemState {
    /// A task stored, not yet delivered to the agent.
    Sent,
    /// A task delivered to the agent, not yet processed.
    Delivered,
    /// A task marked processed by the agent.
    Processed,
    /// A question answered (by the device in the question's `answeredBy`).
    Answered,
    /// A question that reached its expiry unanswered.
    Expired,
    /// A question cancelled by the agent.
    Cancelled,
    /// A state this version does not know (sent by a newer relay).
    #[serde(other)]
    Unknown,
}

impl ItemState {
    /// The name on the wire and in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            ItemState::Sent => "sent",
            ItemState::Delivered => "delivered",
            ItemState::Processed => "processed",
            ItemState::Answered => "answered",
            ItemState::Expired => "expired",
            ItemState::Cancelled => "cancelled",
            ItemState::Unknown => "unknown",
        }
    }

    /// The task state this is, if it is one.
    pub fn message_state(self) -> Option<MessageState> {
        match self {
            ItemState::Sent => Some(MessageState::Sent),
            ItemState::Delivered => Some(MessageState::Delivered),
            ItemState::Processed => Some(MessageState::Processed),
            _ => None,
        }
    }

    /// The question state this is, if it is one a question can be closed in.
    pub fn question_state(self) -> Option<QuestionState> {
        match self {
            ItemState::Answered => Some(QuestionState::Answered),
            ItemState::Expired => Some(QuestionState::Expired),
            ItemState::Cancelled => Some(QuestionState::Cancelled),
            _ => None,
        }
    }
}

impl From<MessageState> for ItemState {
    fn from(s: MessageState) -> Self {
        match s {
            MessageState::Sent => ItemState::Sent,
            MessageState::Delivered => ItemState::Delivered,
            MessageState::Processed => ItemState::Processed,
        }
    }
}

/// One item of a device's conversation: sealed for that device, or (kind `update`) a state change in clear.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConversationItem {
    /// What it is.
    pub kind: ItemKind,
    /// Its id (message, reply, question, notification or update id).
    pub id: String,
    /// The envelope this device opens; empty (and absent on the wire) for an `update`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub envelope: String,
    /// For a reply, the task it answers.
    #[serde(default)]
    pub source_message_id: Option<String>,
    /// For a task, its state; for an update, the state its subject reached.
    #[serde(default)]
    pub state: Option<ItemState>,
    /// For an update, the id of the task or question whose state changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject_id: Option<String>,
    /// For an update, what its subject is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject_kind: Option<SubjectKind>,
    /// For a question, and an update about a question: the question's state and expiry as of this read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<QuestionMeta>,
    /// When the relay stored it.
    pub created_at: Timestamp,
    /// Its position in the stream.
    pub cursor: Cursor,
}

/// `GET /v1/device/conversation`: items after the cursor, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Conversation {
    /// Oldest first; empty when the wait ended.
    pub items: Vec<ConversationItem>,
    /// Where to continue.
    pub cursor: Cursor,
}

/// A question's metadata, in clear at the relay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QuestionMeta {
    /// What kind of answer it expects.
    pub kind: QuestionKind,
    /// Where it stands (a pending question past its expiry reads as expired).
    pub state: QuestionState,
    /// When it expires.
    pub expires_at: Timestamp,
    /// The device that answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered_by: Option<String>,
    /// When the relay accepted the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered_at: Option<Timestamp>,
    /// The answering device's name at the time of the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered_by_name: Option<String>,
    /// The answer sealed with the question's answer key ([`AnswerQuestion::copy`]), for display only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_copy: Option<String>,
    /// How the answer came: `phone` (a device; `answeredBy` names it) or `host` (at the computer, through
    /// the agent; no `answeredBy`). Absent while unanswered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<Channel>,
    /// How many distinct devices must approve; absent = 1.
    #[serde(default = "one_approval", skip_serializing_if = "is_one_approval")]
    pub approvals: u32,
    /// For a question that needs several approvals: the devices that answered so far (while it is pending,
    /// each one approved), in the order they came.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub answers: Vec<String>,
}

/// `POST /v1/agent/questions`: a question sealed for each owner device and for the agent itself.
/// Idempotent by `questionId`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateQuestion {
    /// Chosen by the agent.
    pub question_id: String,
    /// Its kind (in clear, for the answer log).
    pub kind: QuestionKind,
    /// When it expires: in the future, at most 7 days away.
    pub expires_at: Timestamp,
    /// The [`crate::question::QuestionPayload`] sealed with the agent's self key (`deviceId` = "").
    pub self_envelope: String,
    /// One envelope per recipient device; at least one, each an active device of this agent.
    pub envelopes: Vec<DeviceEnvelope>,
    /// The `externalId` of the agent's user the question is for (Partner mode), in clear beside the sealed
    /// addressee: routing metadata the relay stores and repeats in the question's views and webhook events
    /// ([`QuestionView::user_id`]). Informational only: who may answer is decided by the agent from the
    /// sealed question. 1 to 128 characters, no control characters. Absent for the owner's questions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    /// How many distinct devices must approve: 1 (absent, the first answer decides) to
    /// [`MAX_APPROVALS`], at most the number of envelopes. The sealed question says the same number, which is
    /// the one the agent counts; the relay keeps the question open until that many devices answered or one
    /// answer closes it.
    #[serde(default = "one_approval", skip_serializing_if = "is_one_approval")]
    pub approvals: u32,
}

/// A question as the agent sees it, with its answer when there is one. Also one line of the answer log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QuestionView {
    /// Its id.
    pub question_id: String,
    /// Its kind.
    pub kind: QuestionKind,
    /// Where it stands, by the relay's clock.
    pub state: QuestionState,
    /// When it was asked.
    pub created_at: Timestamp,
    /// When it expires.
    pub expires_at: Timestamp,
    /// When it was answered, cancelled or expired.
    #[serde(default)]
    pub closed_at: Option<Timestamp>,
    /// The agent's own sealed copy.
    pub self_envelope: String,
    /// The devices it was sent to.
    pub recipients: Vec<String>,
    /// The device that answered.
    #[serde(default)]
    pub answered_by: Option<String>,
    /// That device's name at the time of the answer.
    #[serde(default)]
    pub answered_by_name: Option<String>,
    /// When the relay accepted the answer.
    #[serde(default)]
    pub answered_at: Option<Timestamp>,
    /// The sealed [`crate::question::AnswerPayload`].
    #[serde(default)]
    pub answer_envelope: Option<String>,
    /// How the answer came: `phone` (`answeredBy` names the device) or `host` (at the computer, sealed by the
    /// agent itself). Absent while unanswered, and from relays that predate channels (then `phone`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<Channel>,
    /// The user it was asked for, as the agent gave it in clear when it asked ([`CreateQuestion::user_id`]):
    /// informational only, the sealed question decides. Absent for the owner's questions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    /// How many distinct devices must approve (docs/relay-api.md, "Several approvals"); absent = 1.
    #[serde(default = "one_approval", skip_serializing_if = "is_one_approval")]
    pub approvals: u32,
    /// For a question that needs several approvals: each device's answer, in the order they came (the one
    /// that closed it too); the agent counts the signed yeses among them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub answers: Vec<DeviceAnswer>,
    /// Its position in the agent's stream (the answer log pages by it).
    pub cursor: Cursor,
}

/// `GET /v1/agent/questions`: the answer log, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AnswerLog {
    /// Newest first.
    pub questions: Vec<QuestionView>,
    /// Pass as `cursor` for the next (older) page; none when this was the last.
    #[serde(default)]
    pub next: Option<Cursor>,
}

/// A question as a device sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceQuestion {
    /// Its id.
    pub question_id: String,
    /// The envelope sealed for this device.
    pub envelope: String,
    /// State, expiry and answer metadata.
    #[serde(flatten)]
    pub meta: QuestionMeta,
    /// When it was asked.
    pub created_at: Timestamp,
    /// Its position in the agent's stream.
    pub cursor: Cursor,
}

/// `GET /v1/device/questions`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceQuestions {
    /// Oldest first.
    pub questions: Vec<DeviceQuestion>,
}

/// A grant as the relay keeps it (docs/relay-api.md, "Grants"): metadata only — what the grant covers and its
/// signature travel sealed in the answer. The relay counts its uses and records its revocation, so that a
/// gate learns of a revocation on its next check and every owner device sees the grants given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GrantRecord {
    /// The grant's id: the gate question it answered.
    pub grant_id: String,
    /// The device that granted it (the question's answering device).
    pub device_id: String,
    /// When it started, as the agent registered it (the signed answer's `answeredAt`).
    pub granted_at: Timestamp,
    /// When it ends, as signed.
    pub expires_at: Timestamp,
    /// The calls it let run, as the gates reported them.
    pub uses: u64,
    /// The last of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_used_at: Option<Timestamp>,
    /// When an owner device revoked it: from then on no gate uses it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<Timestamp>,
    /// The device that revoked it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_by: Option<String>,
}

impl GrantRecord {
    /// Whether a gate may use it at `now`: not revoked, not expired (by the relay's record; the gate checks
    /// the signed expiry itself).
    pub fn live_at(&self, now: Timestamp) -> bool {
        self.revoked_at.is_none() && now < self.expires_at
    }
}

/// `PUT /v1/agent/grants/{grantId}`: the agent registers a grant it kept (checked against the signed answer
/// first), so that owner devices list it and may revoke it. Idempotent: a grant registered again is returned
/// as first registered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PutGrant {
    /// The device that granted it: the question's answering device, or the relay refuses it.
    pub device_id: String,
    /// When it started.
    pub granted_at: Timestamp,
    /// When it ends: after `grantedAt`, at most a day later.
    pub expires_at: Timestamp,
}

/// One entry of `GET /v1/device/grants`: the record, and its question as sealed for this device (absent when
/// this device was not one of its recipients), whose answer copy carries the grant itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceGrant {
    /// The grant as the relay keeps it.
    #[serde(flatten)]
    pub record: GrantRecord,
    /// Its question, sealed for this device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<DeviceQuestion>,
}

/// `GET /v1/device/grants`: the agent's grants not ended more than a day ago, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceGrants {
    /// Newest first.
    pub grants: Vec<DeviceGrant>,
}

/// `POST /v1/device/questions/{questionId}/answer`: the [`crate::question::AnswerPayload`] sealed by the
/// device. A retry by the device that answered returns its answer; any other later answer is refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AnswerQuestion {
    /// The sealed answer.
    pub envelope: String,
    /// The same answer sealed with the question's answer key, so that every recipient can show the answer
    /// that counts. Informational only: the agent decides from `envelope`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy: Option<String>,
    /// For a question that needs several approvals: this answer closes it at once, whatever the count (a
    /// device sets it on a `no`, which denies). Informational for the relay: the agent decides from the sealed
    /// answers. Absent = `false`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub closes: bool,
}

/// Most approvals a question may need.
pub const MAX_APPROVALS: u32 = 10;

/// One device's answer to a question that needs several approvals, as the relay keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceAnswer {
    /// The device.
    pub device_id: String,
    /// When the relay accepted it.
    pub answered_at: Timestamp,
    /// The answer, sealed by the device for the agent.
    pub envelope: String,
}

/// The default of a question's `approvals`: one answer decides.
pub fn one_approval() -> u32 {
    1
}

/// Whether a question's `approvals` is the default, left out of its JSON.
pub fn is_one_approval(n: &u32) -> bool {
    *n == 1
}

/// `GET /v1/agent/roster` and the answer to `PUT /v1/agent/roster`: the newest sealed device roster
/// ([`crate::roster::Roster`]); version 0 and no envelope when none was ever stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RosterView {
    /// Its version.
    pub version: u64,
    /// The roster sealed with the agent's self key, bound to `version`.
    #[serde(default)]
    pub envelope: Option<String>,
}

/// `PUT /v1/agent/roster`: stores a new version, only if the stored one is still `previousVersion` (0: none
/// stored) and `version` is greater; otherwise `409 roster_conflict` with the stored version in `details`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PutRoster {
    /// The version the change was based on.
    pub previous_version: u64,
    /// The new version.
    pub version: u64,
    /// The sealed roster.
    pub envelope: String,
}

/// `POST /v1/agent/notifications`: sealed for each device; no answer expected. Idempotent by id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendNotification {
    /// Chosen by the agent.
    pub notification_id: String,
    /// One envelope per device (a [`crate::question::NotificationPayload`]).
    pub envelopes: Vec<DeviceEnvelope>,
}

/// `PUT /v1/agent/webhook`: where to POST question events, and the secret that signs them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetWebhook {
    /// An `http://` or `https://` URL.
    pub url: String,
    /// The signing secret, 16 to 256 characters; never returned.
    pub secret: String,
}

/// The agent's webhook.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookInfo {
    /// The URL, none when no webhook is set.
    #[serde(default)]
    pub url: Option<String>,
    /// When it was set.
    #[serde(default)]
    pub updated_at: Option<Timestamp>,
}

/// One event's delivery state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Delivery {
    /// The event id (`evt_…`), also in the `Pacerelle-Event-Id` header.
    pub event_id: String,
    /// `question.answered`, `question.expired` or `question.cancelled`.
    pub event_type: String,
    /// The question concerned.
    pub question_id: String,
    /// `pending` (will be tried again), `delivered` or `failed` (gave up).
    pub state: String,
    /// Attempts made.
    pub attempts: u32,
    /// The last HTTP status received, if any.
    #[serde(default)]
    pub last_status: Option<u16>,
    /// The last error, if any.
    #[serde(default)]
    pub last_error: Option<String>,
    /// When the event was created.
    pub created_at: Timestamp,
    /// When it was delivered.
    #[serde(default)]
    pub delivered_at: Option<Timestamp>,
    /// When the next attempt is due, while pending.
    #[serde(default)]
    pub next_attempt_at: Option<Timestamp>,
}

/// `GET /v1/agent/webhook/deliveries`: newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryLog {
    /// Newest first.
    pub deliveries: Vec<Delivery>,
}

/// The JSON body of a webhook POST.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookEvent {
    /// Unique per event; a receiver deduplicates by it.
    pub id: String,
    /// `question.answered`, `question.expired` or `question.cancelled`.
    #[serde(rename = "type")]
    pub event_type: String,
    /// When the event happened.
    pub created_at: Timestamp,
    /// The agent.
    pub agent_id: String,
    /// The user the question was for (Partner mode): the question's `userId`, repeated beside the agent for
    /// routing. As the agent gave it in clear, informational only. Absent for the owner's questions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    /// The question, with its sealed content (metadata in clear).
    pub question: QuestionView,
}

/// Header carrying `t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>." ‖ body)>` on webhook POSTs.
pub const SIGNATURE_HEADER: &str = "pacerelle-signature";
/// Header carrying the event id on webhook POSTs.
pub const EVENT_ID_HEADER: &str = "pacerelle-event-id";

/// Query of the long-polls.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct WaitQuery {
    /// Items after this cursor; none: as described on each route.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Seconds to park when nothing is there, 0 to 55.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<u64>,
    /// Conversation only: `true` to receive `update` items. A client that does not ask (one built before
    /// updates existed, whose item type requires an envelope and knows only task states) never sees them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updates: Option<bool>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_presence_is_named_as_on_the_wire() {
        for p in [
            Presence::Offline,
            Presence::Connected,
            Presence::Listening,
            Presence::Busy,
            Presence::WaitingConfirmation,
        ] {
            assert_eq!(serde_json::to_value(p).expect("json"), p.as_str());
        }
    }

    #[test]
    fn snapshot_of_a_batch() {
        let batch = MessageBatch {
            messages: vec![AgentMessage {
                message_id: "msg_1".into(),
                from: "dv_1".into(),
                from_name: "phone".into(),
                envelope: "AQ".into(),
                sent_at: Timestamp(0),
                redelivered: true,
                cursor: Cursor(3),
                session: None,
            }],
            cursor: Cursor(3),
            roster_version: None,
        };
        let json = serde_json::to_string(&batch).expect("serialises");
        assert_eq!(
            json,
            r#"{"messages":[{"messageId":"msg_1","from":"dv_1","fromName":"phone","envelope":"AQ","sentAt":"1970-01-01T00:00:00.000Z","redelivered":true,"cursor":"c1.AAAAAAAAAAM"}],"cursor":"c1.AAAAAAAAAAM"}"#
        );
        let back: MessageBatch = serde_json::from_str(&json).expect("parses");
        assert_eq!(back, batch);
    }

    #[test]
    fn snapshot_of_conversation_items_old_and_update() {
        let task = ConversationItem {
            kind: ItemKind::Message,
            id: "msg_1".into(),
            envelope: "AQ".into(),
            source_message_id: None,
            state: Some(MessageState::Delivered.into()),
            subject_id: None,
            subject_kind: None,
            question: None,
            created_at: Timestamp(0),
            cursor: Cursor(3),
        };
        // The items kinds known before updates serialise as they did.
        let json = serde_json::to_string(&task).expect("serialises");
        assert_eq!(
            json,
            r#"{"kind":"message","id":"msg_1","envelope":"AQ","sourceMessageId":null,"state":"delivered","createdAt":"1970-01-01T00:00:00.000Z","cursor":"c1.AAAAAAAAAAM"}"#
        );
        assert_eq!(
            serde_json::from_str::<ConversationItem>(&json).expect("parses"),
            task
        );

        let update = ConversationItem {
            kind: ItemKind::Update,
            id: "upd_1".into(),
            envelope: String::new(),
            source_message_id: None,
            state: Some(ItemState::Answered),
            subject_id: Some("qst_1".into()),
            subject_kind: Some(SubjectKind::Question),
            question: Some(QuestionMeta {
                kind: QuestionKind::YesNo,
                state: QuestionState::Answered,
                expires_at: Timestamp(60_000),
                answered_by: Some("dv_1".into()),
                answered_at: Some(Timestamp(1000)),
                answered_by_name: Some("phone".into()),
                answer_copy: None,
                channel: None,
                approvals: 1,
                answers: Vec::new(),
            }),
            created_at: Timestamp(1000),
            cursor: Cursor(4),
        };
        let json = serde_json::to_string(&update).expect("serialises");
        assert_eq!(
            json,
            r#"{"kind":"update","id":"upd_1","sourceMessageId":null,"state":"answered","subjectId":"qst_1","subjectKind":"question","question":{"kind":"yes_no","state":"answered","expiresAt":"1970-01-01T00:01:00.000Z","answeredBy":"dv_1","answeredAt":"1970-01-01T00:00:01.000Z","answeredByName":"phone"},"createdAt":"1970-01-01T00:00:01.000Z","cursor":"c1.AAAAAAAAAAQ"}"#
        );
        assert_eq!(
            serde_json::from_str::<ConversationItem>(&json).expect("parses"),
            update
        );
    }

    #[test]
    fn an_item_of_an_unknown_kind_still_parses_so_that_it_can_be_skipped() {
        // No envelope, a state and a subject kind this version does not know: the page still parses.
        let page: Conversation = serde_json::from_str(
            r#"{"items":[{"kind":"reaction","id":"rx_1","state":"liked","subjectKind":"reply",
                          "createdAt":"1970-01-01T00:00:01.000Z","cursor":"c1.AAAAAAAAAAQ"}],
                "cursor":"c1.AAAAAAAAAAQ"}"#,
        )
        .expect("parses");
        let item = &page.items[0];
        assert_eq!(item.kind, ItemKind::Unknown);
        assert_eq!(item.state, Some(ItemState::Unknown));
        assert_eq!(item.subject_kind, Some(SubjectKind::Unknown));
        assert!(item.envelope.is_empty());
    }

    #[test]
    fn item_states_name_and_map() {
        for s in [
            MessageState::Sent,
            MessageState::Delivered,
            MessageState::Processed,
        ] {
            let item = ItemState::from(s);
            assert_eq!(item.message_state(), Some(s));
            assert_eq!(
                serde_json::to_string(&item).expect("ok"),
                serde_json::to_string(&s).expect("ok")
            );
            assert_eq!(item.question_state(), None);
        }
        for q in [
            QuestionState::Answered,
            QuestionState::Expired,
            QuestionState::Cancelled,
        ] {
            let item: ItemState = serde_json::from_str(&format!("\"{}\"", q.as_str())).expect("ok");
            assert_eq!(item.question_state(), Some(q));
            assert_eq!(item.as_str(), q.as_str());
            assert_eq!(item.message_state(), None);
        }
    }

    #[test]
    fn presence_names() {
        assert_eq!(
            serde_json::to_string(&Presence::WaitingConfirmation).expect("ok"),
            "\"waiting_confirmation\""
        );
    }
}
