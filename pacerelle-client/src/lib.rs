#![doc = include_str!("../README.md")]

mod agent;
mod asked;
mod audit;
mod device;
mod error;
mod files;
mod follow;
pub mod gate;
mod grants;
mod http;
mod listener;
mod machine;
mod push;
mod question;
mod roster;
mod runner;
mod users;
mod webhook;

pub use agent::{
    AgentClient, AgentCredentials, Checkpoint, Inbox, Message, PairingLink, PairingOptions, Rejected,
    reply_id_for,
};
pub use asked::{AskedQuestion, AskedStore, NOT_ASKED_HERE};
pub use audit::{AuditEntry, AuditFilter, CSV_COLUMNS, verify_answer_log, write_csv, write_jsonl};
pub use device::{
    ClosedQuestion, ConversationItem, ConversationPage, DeviceClient, DeviceCredentials, GrantChoice,
    ItemUpdate, ListedGrant, OpenedQuestion, QuestionList,
};
pub use error::{Error, ErrorKind, Result};
pub use files::write_private;
pub use follow::{FOLLOW_WAIT, Follow, Followed};
pub use gate::{Conclusion, Gate, Ruling};
pub use grants::{GRANTS_FILE, GrantBook, GrantUse, GrantedCall, KeptGrant};
pub use listener::{LeaseState, Listener};
pub use machine::machine_name;
pub use pacerelle_core as core;
pub use pacerelle_core::pairing::Branding;
pub use pacerelle_core::question::{Answer, Channel, Level, QuestionKind, QuestionState};
pub use pacerelle_core::signing::{AnswerLogExport, ExportDevice, ExportRecord, VerifyFailure};
pub use pacerelle_core::wire::{
    AgentInfo, DeviceInfo, DeviceSelf, ItemKind, ItemState, MessageState, Presence, Processed, QuestionMeta,
    SessionInfo, Status, Stored, SubjectKind, WebhookEvent, WebhookInfo,
};
pub use pacerelle_core::{AgentToken, Cursor, Timestamp};
pub use push::{MAX_PUSH_SUBSCRIPTIONS, PushError, PushEvent, PushKeys, PushSubscriptionKeys};
pub use question::{AnswerOutcome, Asked, MAX_QUESTION_BYTES, QuestionRequest, answer_text};
pub use runner::{Backoff, Context, DEFAULT_MAX_ATTEMPTS, Event, Handler, Lease, Runner, shutdown_signal};
pub use users::{ConnectOptions, UserDevice, UserInfo};
pub use webhook::{
    DEFAULT_TOLERANCE, Delivery, EVENT_ID_HEADER, SIGNATURE_HEADER, WebhookError, sign_webhook,
    verify_webhook,
};

/// What an agent is told about Pacerelle — when to ask, how to wait, that no answer is a no: the MCP server's
/// instructions and the agent skill `pacerelle hook install` writes, one text (`src/instructions.md`).
pub const INSTRUCTIONS: &str = include_str!("instructions.md").trim_ascii_end();

/// The relay address used when none is given: a relay started by `pacerelle serve` on this machine.
pub const DEFAULT_RELAY_URL: &str = "http://127.0.0.1:8787";
