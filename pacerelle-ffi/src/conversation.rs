//! The conversation with the agent: tasks this device sent, replies, questions, notifications, and updates
//! (state changes of tasks and questions).

use std::time::SystemTime;

pub use pacerelle_core::question::Level;
pub use pacerelle_core::wire::{ItemKind, ItemState, MessageState, SubjectKind};

use crate::question::{Channel, Question, channel_of};
use crate::time::system_time;

/// A state change the relay reports in the conversation, at once: a task processed, a question answered
/// (here or elsewhere), expired or cancelled. For a question, dismiss its notification.
///
/// Not the client's `ItemUpdate` itself: that one holds the question's metadata as the relay sent it (its
/// times the core's `Timestamp` newtype, which crosses as `SystemTime`); this one holds the answer's facts.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ItemUpdate {
    /// The task or question whose state changed.
    pub subject_id: String,
    /// Which of the two.
    pub subject_kind: SubjectKind,
    /// The state it reached: `Processed` for a task; `Answered`, `Expired` or `Cancelled` for a question.
    pub state: ItemState,
    /// For a question this client read earlier (in this process): the question brought up to date, with the
    /// answer that counts. `null`/`nil` otherwise: `questions()` reads it.
    pub question: Option<Question>,
    /// For an answered question, the device that answered (absent when answered at the computer).
    pub answered_by: Option<String>,
    /// Its name, as the relay reports it.
    pub answered_by_name: Option<String>,
    /// When the relay accepted the answer.
    pub answered_at: Option<SystemTime>,
    /// For an answered question, how: on a device (`Phone`) or at the computer (`Host`).
    pub channel: Option<Channel>,
}

impl ItemUpdate {
    /// The update, or `None` for a subject or a state this version does not know.
    fn from_client(u: pacerelle_client::device::ItemUpdate) -> Option<Self> {
        let subject_kind = match u.subject_kind {
            SubjectKind::Message | SubjectKind::Question => u.subject_kind,
            _ => return None,
        };
        let state = match u.state {
            ItemState::Processed | ItemState::Answered | ItemState::Expired | ItemState::Cancelled => u.state,
            _ => return None,
        };
        let meta = u.meta.as_ref();
        Some(ItemUpdate {
            subject_id: u.subject_id,
            subject_kind,
            state,
            answered_by: meta.and_then(|m| m.answered_by.clone()),
            answered_by_name: meta.and_then(|m| m.answered_by_name.clone()),
            answered_at: meta.and_then(|m| m.answered_at).map(system_time),
            channel: meta.and_then(|m| channel_of(m.channel, m.answered_by.as_deref())),
            question: u.question.map(Question::from),
        })
    }
}

/// The kind, or `None` for one this version does not know (`Unknown`, from a newer relay).
pub(crate) fn known_kind(kind: ItemKind) -> Option<ItemKind> {
    match kind {
        ItemKind::Message
        | ItemKind::Reply
        | ItemKind::Question
        | ItemKind::Notification
        | ItemKind::Update => Some(kind),
        _ => None,
    }
}

/// One item of the conversation, opened on this device.
///
/// Not the client's `ConversationItem` itself: its time and position are the core's `Timestamp` and `Cursor`
/// newtypes, which cross as a `SystemTime` and an opaque string, and its question holds the answer key.
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
    /// For an update, the state change it reports.
    pub update: Option<ItemUpdate>,
    /// When the relay stored it.
    pub created_at: SystemTime,
    /// Its position in the conversation: pass it as `cursor` to read what follows. Opaque.
    pub cursor: String,
}

impl ConversationItem {
    /// The item, or `None` for a kind this version does not know (the client already skips those).
    pub(crate) fn from_client(item: pacerelle_client::device::ConversationItem) -> Option<Self> {
        let kind = known_kind(item.kind)?;
        let update = match item.update {
            Some(u) => Some(ItemUpdate::from_client(*u)?),
            None => None,
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
            update,
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

impl From<pacerelle_client::device::ConversationPage> for ConversationPage {
    fn from(page: pacerelle_client::device::ConversationPage) -> Self {
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
///
/// Not the core's wire `Stored`: its `Cursor` and `Timestamp` newtypes cross as a string and a `SystemTime`.
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

impl From<pacerelle_client::core::wire::Stored> for SentMessage {
    fn from(s: pacerelle_client::core::wire::Stored) -> Self {
        SentMessage {
            message_id: s.id,
            cursor: s.cursor.to_string(),
            created_at: system_time(s.created_at),
            created: s.created,
        }
    }
}
