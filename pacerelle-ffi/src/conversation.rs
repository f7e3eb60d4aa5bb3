//! The conversation with the agent: tasks this device sent, replies, questions and notifications.

use std::time::SystemTime;

pub use pacerelle_client::{Level, MessageState};

use crate::question::Question;
use crate::time::system_time;

/// The state of a task this device sent.
#[uniffi::remote(Enum)]
pub enum MessageState {
    /// Stored at the relay, not yet delivered to the agent.
    Sent,
    /// Delivered to the agent, not yet processed.
    Delivered,
    /// Marked processed by the agent.
    Processed,
}

/// How much a notification matters.
#[uniffi::remote(Enum)]
pub enum Level {
    /// For information.
    Info,
    /// Something needs attention.
    Warning,
    /// Something failed.
    Error,
    /// A task is done.
    Success,
}

/// What a conversation item is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, uniffi::Enum)]
pub enum ItemKind {
    /// A task this device sent.
    Message,
    /// A reply from the agent.
    Reply,
    /// A question from the agent: see `question`.
    Question,
    /// A notification from the agent (no answer expected): see `title` and `level`.
    Notification,
}

/// One item of the conversation, opened on this device.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ConversationItem {
    /// What it is.
    pub kind: ItemKind,
    /// The message, reply, question or notification id.
    pub id: String,
    /// The text (for a question, the question).
    pub text: String,
    /// For a reply, the task it answers.
    pub source_message_id: Option<String>,
    /// For a task, its state as of this read.
    pub state: Option<MessageState>,
    /// For a question, the question with its state as of this read.
    pub question: Option<Question>,
    /// For a notification, its title.
    pub title: Option<String>,
    /// For a notification, how much it matters.
    pub level: Option<Level>,
    /// When the relay stored it.
    pub created_at: SystemTime,
    /// Its position in the conversation: pass it as `cursor` to read what follows. Opaque.
    pub cursor: String,
}

impl ConversationItem {
    /// The item, or `None` for a kind this version does not know (the client already skips those).
    fn from_client(item: pacerelle_client::ConversationItem) -> Option<Self> {
        use pacerelle_client::ItemKind as K;
        let kind = match item.kind {
            K::Message => ItemKind::Message,
            K::Reply => ItemKind::Reply,
            K::Question => ItemKind::Question,
            K::Notification => ItemKind::Notification,
            _ => return None,
        };
        Some(ConversationItem {
            kind,
            id: item.id,
            text: item.text,
            source_message_id: item.source_message_id,
            state: item.state,
            question: item.question.map(Question::from),
            title: item.title,
            level: item.level,
            created_at: system_time(item.created_at),
            cursor: item.cursor.to_string(),
        })
    }
}

/// An item of the conversation that did not open (altered, or sealed with another key): shown as such,
/// never trusted.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct RejectedItem {
    /// Its id.
    pub id: String,
    /// Why it did not open.
    pub reason: String,
}

/// A page of the conversation.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ConversationPage {
    /// Oldest first; empty when a wait ended with nothing new.
    pub items: Vec<ConversationItem>,
    /// Items that did not open.
    pub rejected: Vec<RejectedItem>,
    /// Where to continue: pass it as `cursor` next time (and keep it to resume after a restart). Opaque.
    pub cursor: String,
}

impl From<pacerelle_client::ConversationPage> for ConversationPage {
    fn from(page: pacerelle_client::ConversationPage) -> Self {
        ConversationPage {
            items: page
                .items
                .into_iter()
                .filter_map(ConversationItem::from_client)
                .collect(),
            rejected: page
                .rejected
                .into_iter()
                .map(|r| RejectedItem {
                    id: r.message_id,
                    reason: r.reason.to_string(),
                })
                .collect(),
            cursor: page.cursor.to_string(),
        }
    }
}

/// A task as the relay stored it.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct SentMessage {
    /// Its id (the one given, or the one drawn).
    pub message_id: String,
    /// Its position in the conversation. Opaque.
    pub cursor: String,
    /// When the relay first stored it.
    pub created_at: SystemTime,
    /// False when this id was already stored and the call changed nothing (a safe retry).
    pub created: bool,
}

impl From<pacerelle_client::Stored> for SentMessage {
    fn from(s: pacerelle_client::Stored) -> Self {
        SentMessage {
            message_id: s.id,
            cursor: s.cursor.to_string(),
            created_at: system_time(s.created_at),
            created: s.created,
        }
    }
}
