//! The conversation: tasks sent, replies and notifications read, and the updates of items already read.

use std::time::Duration;

use pacerelle_core::envelope;
use pacerelle_core::message::{ReplyPayload, TaskPayload, reply_aad, task_aad};
use pacerelle_core::question::{Level, NotificationPayload, notification_aad};
use pacerelle_core::wire::{
    self, Conversation, ItemKind, ItemState, MessageState, QuestionMeta, SendMessage, Stored, SubjectKind,
};
use pacerelle_core::{CryptoError, Cursor, Timestamp, ids};
use reqwest::Method;

use crate::agent::Rejected;
use crate::error::Result;
use crate::http::Req;

use super::{DeviceClient, OpenedQuestion, open};

/// One item of the conversation, opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConversationItem {
    /// A task this device sent, a reply, a question or a notification from the agent, or an update (a state
    /// change of a task or a question: see `update`).
    pub kind: ItemKind,
    /// The message, reply, question, notification or update id.
    pub id: String,
    /// The text (for a question, the question; empty for an update).
    pub text: String,
    /// For a reply, the task it answers.
    pub source_message_id: Option<String>,
    /// For a task, its state.
    pub state: Option<MessageState>,
    /// For a question: the question opened, with its state as of this read.
    pub question: Option<OpenedQuestion>,
    /// For a notification, its title.
    pub title: Option<String>,
    /// For a notification, how much it matters.
    pub level: Option<Level>,
    /// For an update, the state change it reports (boxed: most items are not updates).
    pub update: Option<Box<ItemUpdate>>,
    /// When the relay stored it.
    pub created_at: Timestamp,
    /// Its position in the stream.
    pub cursor: Cursor,
}

/// A state change the relay reports in the conversation (an item of kind [`ItemKind::Update`]): a task this
/// device sent was processed, or a question sealed for it was answered (here or on another device),
/// cancelled or expired. The relay writes it with the change and wakes the conversation at once, so a device
/// learns it without reading its tasks or questions again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemUpdate {
    /// The task or question whose state changed.
    pub subject_id: String,
    /// Which of the two.
    pub subject_kind: SubjectKind,
    /// The state it reached: [`ItemState::Processed`] for a task; [`ItemState::Answered`],
    /// [`ItemState::Expired`] or [`ItemState::Cancelled`] for a question.
    pub state: ItemState,
    /// For a question: the question as this client last read it, brought up to date (state, who answered,
    /// the answer that counts). `None` when this client has not read the question (see
    /// [`DeviceClient::questions`]).
    pub question: Option<OpenedQuestion>,
    /// For a question: its metadata as the relay reports it (in clear: kind, state, expiry, who answered).
    pub meta: Option<QuestionMeta>,
}

/// A page of the conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConversationPage {
    /// Oldest first.
    pub items: Vec<ConversationItem>,
    /// Items whose envelopes did not open.
    pub rejected: Vec<Rejected>,
    /// Where to continue.
    pub cursor: Cursor,
}

impl DeviceClient {
    /// Sends a task to the agent, for whichever of its sessions takes it first. Idempotent by `message_id` (one
    /// is drawn when `None`).
    pub async fn send(&self, text: &str, message_id: Option<&str>) -> Result<Stored> {
        self.send_to(text, message_id, None).await
    }

    /// Sends a task to one session of the agent (`session`: its name), or to any when `None`. The name is sealed
    /// with the task too: an agent's session opens only what was sent to it or to any.
    pub async fn send_to(
        &self,
        text: &str,
        message_id: Option<&str>,
        session: Option<&str>,
    ) -> Result<Stored> {
        crate::agent::check_text("a task", text)?;
        if let Some(name) = session {
            ids::validate_session_name(name)?;
        }
        let message_id = match message_id {
            Some(id) => {
                ids::validate("message id", id)?;
                id.to_string()
            }
            None => ids::generate(ids::MESSAGE),
        };
        let aad = task_aad(self.agent_id(), self.device_id(), &message_id);
        let envelope = envelope::seal_json(
            &self.inner.key,
            &aad,
            &TaskPayload {
                text: text.to_string(),
                session: session.map(str::to_string),
            },
        );
        let body = SendMessage {
            message_id,
            envelope,
            session: session.map(str::to_string),
        };
        self.inner
            .http
            .send(Req {
                body: Some(&body),
                ..self.req(Method::POST, "/v1/device/messages")
            })
            .await
    }

    /// The conversation after `cursor` (from the start when `None`), parking up to `wait` when there is
    /// nothing new.
    pub async fn conversation(&self, cursor: Option<Cursor>, wait: Duration) -> Result<ConversationPage> {
        let wait = wait.min(Duration::from_secs(wire::MAX_WAIT_SECONDS));
        let mut query = vec![
            ("wait", wait.as_secs().to_string()),
            ("updates", "true".to_owned()),
        ];
        if let Some(c) = cursor {
            query.push(("cursor", c.to_string()));
        }
        let page: Conversation = self
            .inner
            .http
            .send(Req {
                query: &query,
                wait: Some(wait),
                ..self.req::<()>(Method::GET, "/v1/device/conversation")
            })
            .await?;
        let mut out = ConversationPage {
            items: Vec::new(),
            rejected: Vec::new(),
            cursor: page.cursor,
        };
        for item in page.items {
            if item.kind == ItemKind::Unknown || Self::unknown_update(&item) {
                // Sent by a newer relay: skipped, as the wire contract says.
                continue;
            }
            match self.open_item(item) {
                Ok(opened) => {
                    if let Some(q) = &opened.question {
                        self.remember(q);
                    }
                    out.items.push(opened);
                }
                Err((id, reason)) => out.rejected.push(Rejected {
                    message_id: id,
                    from: self.agent_id().to_string(),
                    reason,
                }),
            }
        }
        Ok(out)
    }

    /// An update about a subject or in a state this version does not know (from a newer relay): skipped like
    /// an unknown kind.
    pub(crate) fn unknown_update(item: &wire::ConversationItem) -> bool {
        item.kind == ItemKind::Update
            && (item.subject_kind == Some(SubjectKind::Unknown) || item.state == Some(ItemState::Unknown))
    }

    pub(super) fn open_item(
        &self,
        item: wire::ConversationItem,
    ) -> std::result::Result<ConversationItem, (String, CryptoError)> {
        let update = match item.kind {
            ItemKind::Update => Some(Box::new(
                self.read_update(&item).map_err(|e| (item.id.clone(), e))?,
            )),
            _ => None,
        };
        let mut out = ConversationItem {
            kind: item.kind,
            id: item.id,
            text: String::new(),
            source_message_id: item.source_message_id,
            state: item
                .state
                .filter(|_| item.kind == ItemKind::Message)
                .and_then(ItemState::message_state),
            question: None,
            title: None,
            level: None,
            update,
            created_at: item.created_at,
            cursor: item.cursor,
        };
        let opened = match item.kind {
            ItemKind::Message => {
                let aad = task_aad(self.agent_id(), self.device_id(), &out.id);
                open::<TaskPayload>(&self.inner.key, &aad, &item.envelope).map(|task| out.text = task.text)
            }
            ItemKind::Reply => {
                let aad = reply_aad(self.agent_id(), self.device_id(), &out.id);
                open::<ReplyPayload>(&self.inner.key, &aad, &item.envelope).and_then(|reply| {
                    // The relay states the source in clear; the sealed payload must agree.
                    if out.source_message_id.as_deref() != Some(reply.source_message_id.as_str()) {
                        return Err(CryptoError::Open);
                    }
                    out.text = reply.text;
                    Ok(())
                })
            }
            ItemKind::Question => match &item.question {
                Some(meta) => self
                    .open_question(&out.id, &item.envelope, meta, out.created_at)
                    .map(|q| {
                        out.text = q.question.clone();
                        out.question = Some(q);
                    }),
                None => Err(CryptoError::Malformed),
            },
            ItemKind::Notification => {
                let aad = notification_aad(self.agent_id(), self.device_id(), &out.id);
                open::<NotificationPayload>(&self.inner.key, &aad, &item.envelope).map(|n| {
                    out.text = n.text;
                    out.title = n.title;
                    out.level = Some(n.level);
                })
            }
            ItemKind::Update => Ok(()),
            _ => Err(CryptoError::Malformed),
        };
        match opened {
            Ok(()) => Ok(out),
            Err(reason) => Err((out.id, reason)),
        }
    }

    /// Reads an update item (nothing sealed: the relay states it in clear) and, for a question this client
    /// remembers, brings the remembered question up to date so that [`DeviceClient::answer`] refuses locally
    /// an answer that can no longer count.
    fn read_update(&self, item: &wire::ConversationItem) -> std::result::Result<ItemUpdate, CryptoError> {
        let (Some(subject_id), Some(subject_kind), Some(state)) =
            (item.subject_id.clone(), item.subject_kind, item.state)
        else {
            return Err(CryptoError::Malformed);
        };
        match (subject_kind, state.question_state(), &item.question) {
            (SubjectKind::Message, None, None) if state == ItemState::Processed => Ok(ItemUpdate {
                subject_id,
                subject_kind,
                state,
                question: None,
                meta: None,
            }),
            (SubjectKind::Question, Some(closed), Some(meta)) if meta.state == closed => Ok(ItemUpdate {
                question: self.refresh_question(&subject_id, meta),
                subject_id,
                subject_kind,
                state,
                meta: Some(meta.clone()),
            }),
            _ => Err(CryptoError::Malformed),
        }
    }
}
