#![doc = include_str!("../README.md")]

pub mod agent;
mod backoff;
pub mod device;
mod error;
mod files;
pub mod gate;
mod home;
mod http;
mod lease;
mod listener;
mod machine;
mod runner;

pub use agent::{
    AgentClient, AgentCredentials, AgentFile, AnswerOutcome, Asked, AskedQuestion, AskedStore, AuditEntry,
    AuditFilter, CSV_COLUMNS, Checkpoint, ConnectOptions, DEFAULT_TOLERANCE, Delivery, EVENT_ID_HEADER,
    GRANTS_FILE, GrantBook, GrantUse, GrantedCall, Inbox, KeptGrant, MAX_QUESTION_BYTES, Message,
    NOT_ASKED_HERE, PairingLink, PairingOptions, QuestionRequest, Rejected, SIGNATURE_HEADER, UserDevice,
    UserInfo, WebhookError, answer_text, reply_id_for, sign_webhook, verify_answer_log, verify_webhook,
    write_csv, write_jsonl,
};
pub use backoff::Backoff;
pub use device::{
    ClosedQuestion, ConversationItem, ConversationPage, DeviceClient, DeviceCredentials, FOLLOW_WAIT, Follow,
    Followed, GrantChoice, ItemUpdate, ListedGrant, MAX_PUSH_SUBSCRIPTIONS, OpenedQuestion, PushError,
    PushEvent, PushKeys, PushSubscriptionKeys, QuestionList,
};
pub use error::{Error, ErrorKind, Result};
pub use files::write_private;
pub use gate::{Conclusion, Gate, Ruling};
pub use home::{DEFAULT_RELAY_URL, HOME_VAR, RELAY_URL_VAR, default_home, home_dir, relay_url};
pub use lease::Lease;
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
pub use runner::{Context, DEFAULT_MAX_ATTEMPTS, Event, Handler, Runner, shutdown_signal};

/// What an agent is told about Pacerelle — when to ask, how to wait, that no answer is a no: the MCP server's
/// instructions and the agent skill `pacerelle hook install` writes, one text (`src/instructions.md`).
pub const INSTRUCTIONS: &str = include_str!("instructions.md").trim_ascii_end();
