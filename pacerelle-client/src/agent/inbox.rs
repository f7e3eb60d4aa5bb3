//! The agent's inbox: wait for tasks, reply to them, mark them processed.

use std::time::Duration;

use pacerelle_core::envelope;
use pacerelle_core::message::{ReplyPayload, TaskPayload, reply_aad, task_aad};
use pacerelle_core::wire::{self, DeviceEnvelope, MessageBatch, Processed, SendReply, Stored};
use pacerelle_core::{CryptoError, Cursor, Timestamp, b64, ids};
use reqwest::Method;

use crate::error::Result;
use crate::http::Req;

use super::{AgentClient, check_text};

/// A task received by the agent, opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The id the device chose; reply with it as `source_message_id`.
    pub message_id: String,
    /// What the person asks.
    pub text: String,
    /// The device that sent it.
    pub from: String,
    /// That device's name.
    pub from_name: String,
    /// When the relay stored it.
    pub sent_at: Timestamp,
    /// Delivered before and not marked processed (for example before a crash).
    pub redelivered: bool,
    /// Its position in the stream.
    pub cursor: Cursor,
    /// Partner mode: the `externalId` of the user whose device sent it, as the agent's roster says; `None`
    /// when the owner sent it. A user's task is that user's request, not the owner's instruction.
    pub user: Option<String>,
    /// The session its sender addressed it to (sealed with it); `None`: any session.
    pub session: Option<String>,
}

/// How many tasks' senders a client remembers to address its replies ([`AgentClient::reply`]).
const REMEMBERED_SENDERS: usize = 4096;

/// A task whose envelope did not open. It is not the person's instruction; mark it processed to drop it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    /// Its id.
    pub message_id: String,
    /// The device it claims to come from.
    pub from: String,
    /// Why it was rejected.
    pub reason: CryptoError,
}

/// The result of a wait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inbox {
    /// Tasks, oldest first; empty when the wait ended without one.
    pub messages: Vec<Message>,
    /// Tasks that failed to open.
    pub rejected: Vec<Rejected>,
    /// Where to continue listening.
    pub cursor: Cursor,
}

/// Whether a task whose sender addressed it to `addressed` (sealed with it; `None`: any session) is for the
/// session named `mine` (`None`: no session open, which consumes as the default one).
fn for_session(addressed: Option<&str>, mine: Option<&str>) -> bool {
    addressed.is_none_or(|a| a == mine.unwrap_or(ids::DEFAULT_SESSION))
}

impl AgentClient {
    /// Waits for tasks. Without a cursor: every task not yet processed (those delivered before come again,
    /// flagged `redelivered`). With one: tasks after it. Parks up to `wait` (at most 55 s) when there is none.
    pub async fn wait_for_messages(&self, cursor: Option<Cursor>, wait: Duration) -> Result<Inbox> {
        let wait = wait.min(Duration::from_secs(wire::MAX_WAIT_SECONDS));
        let mut query = vec![("wait", wait.as_secs().to_string())];
        if let Some(c) = cursor {
            query.push(("cursor", c.to_string()));
        }
        let batch: MessageBatch = self
            .inner
            .http
            .send(Req {
                query: &query,
                session: self.session_id(),
                wait: Some(wait),
                ..self.req::<()>(Method::GET, "/v1/agent/messages")
            })
            .await?;
        let mut inbox = Inbox {
            messages: Vec::new(),
            rejected: Vec::new(),
            cursor: batch.cursor,
        };
        // Only a device the agent's roster lists as active sends the person's instructions.
        let roster = if batch.messages.is_empty() {
            None
        } else {
            Some(self.roster_at(batch.roster_version).await?)
        };
        let mine = self.session_name();
        for m in batch.messages {
            if roster.as_ref().is_some_and(|r| !r.is_active(&m.from)) {
                tracing::warn!(message_id = %m.message_id, from = %m.from, "a task from a device the roster does not trust; rejected");
                inbox.rejected.push(Rejected {
                    message_id: m.message_id,
                    from: m.from,
                    reason: CryptoError::NotTrusted,
                });
                continue;
            }
            let key = self.inner.token.device_key(&self.inner.agent_id, &m.from);
            let aad = task_aad(&self.inner.agent_id, &m.from, &m.message_id);
            match envelope::open_json::<TaskPayload>(&key, &aad, &m.envelope) {
                Ok(task) if !for_session(task.session.as_deref(), mine.as_deref()) => {
                    tracing::warn!(message_id = %m.message_id, from = %m.from, "a task addressed to another session; rejected");
                    inbox.rejected.push(Rejected {
                        message_id: m.message_id,
                        from: m.from,
                        reason: CryptoError::Misrouted,
                    });
                }
                Ok(task) => {
                    let user = roster
                        .as_ref()
                        .and_then(|r| r.device(&m.from))
                        .and_then(|d| d.user.clone());
                    self.remember_sender(&m.message_id, user.clone());
                    inbox.messages.push(Message {
                        message_id: m.message_id,
                        text: task.text,
                        from: m.from,
                        from_name: m.from_name,
                        sent_at: m.sent_at,
                        redelivered: m.redelivered,
                        cursor: m.cursor,
                        user,
                        session: task.session,
                    });
                }
                Err(e) => {
                    let reason = match e {
                        pacerelle_core::Error::Crypto(c) => c,
                        _ => CryptoError::Open,
                    };
                    tracing::warn!(message_id = %m.message_id, from = %m.from, "a task did not open; rejected");
                    inbox.rejected.push(Rejected {
                        message_id: m.message_id,
                        from: m.from,
                        reason,
                    });
                }
            }
        }
        Ok(inbox)
    }

    fn remember_sender(&self, message_id: &str, user: Option<String>) {
        if let Ok(mut senders) = self.inner.senders.lock() {
            if senders.len() >= REMEMBERED_SENDERS {
                senders.clear();
            }
            senders.insert(message_id.to_string(), user);
        }
    }

    /// Replies to a task, sealed for each device of the task's audience that the agent's roster and the
    /// relay both list as active: the owner's devices, or (Partner mode) the devices of the user who sent
    /// it. The sender is known for tasks this client received ([`AgentClient::wait_for_messages`]); a reply
    /// to a task it did not receive goes to the owner's devices, never to a user's. Idempotent by `reply_id`
    /// (one is drawn when `None`; pass your own to retry safely across restarts).
    pub async fn reply(&self, source_message_id: &str, text: &str, reply_id: Option<&str>) -> Result<Stored> {
        ids::validate("source message id", source_message_id)?;
        check_text("a reply", text)?;
        let reply_id = match reply_id {
            Some(id) => {
                ids::validate("reply id", id)?;
                id.to_string()
            }
            None => ids::generate(ids::REPLY),
        };
        let payload = ReplyPayload {
            text: text.to_string(),
            source_message_id: source_message_id.to_string(),
        };
        let user = self
            .inner
            .senders
            .lock()
            .ok()
            .and_then(|s| s.get(source_message_id).cloned())
            .flatten();
        // No trusted device left: the reply is stored for nobody, as before any device was paired.
        let envelopes = self
            .trusted_devices(user.as_deref())
            .await?
            .0
            .into_iter()
            .map(|device_id| {
                let key = self.inner.token.device_key(&self.inner.agent_id, &device_id);
                let aad = reply_aad(&self.inner.agent_id, &device_id, &reply_id);
                let envelope = envelope::seal_json(&key, &aad, &payload);
                DeviceEnvelope { device_id, envelope }
            })
            .collect();
        let body = SendReply {
            reply_id,
            source_message_id: source_message_id.to_string(),
            envelopes,
        };
        self.inner
            .http
            .send(Req {
                body: Some(&body),
                ..self.req(Method::POST, "/v1/agent/replies")
            })
            .await
    }

    /// Marks a task processed: the acknowledgement. Idempotent and final.
    pub async fn mark_processed(&self, message_id: &str) -> Result<Processed> {
        ids::validate("message id", message_id)?;
        let path = format!("/v1/agent/messages/{message_id}/processed");
        self.inner
            .http
            .send(Req {
                session: self.session_id(),
                ..self.req::<()>(Method::POST, &path)
            })
            .await
    }
}

/// The one rule for a reply's id, derived so that sending a reply again stores it once (the relay keeps one
/// reply per id):
/// - `None`: the task's one final reply, derived from the task's id alone; a supervised agent ([`Runner`])
///   that replies with it never answers a redelivered task twice, whatever its handler says the second time;
/// - `Some(text)`: one reply among several to the task (the MCP server's `reply`), derived from the task's id
///   and the text, so the same text sent twice is stored once and a different one is a new reply.
///
/// [`Runner`]: crate::runner::Runner
pub fn reply_id_for(message_id: &str, text: Option<&str>) -> String {
    match text {
        None => format!(
            "{}_{}",
            ids::REPLY,
            &b64::encode(&pacerelle_core::keys::sha256(message_id.as_bytes()))[..22]
        ),
        Some(text) => {
            let mut input = Vec::with_capacity(message_id.len() + 1 + text.len());
            input.extend_from_slice(message_id.as_bytes());
            input.push(0);
            input.extend_from_slice(text.as_bytes());
            format!(
                "{}_{}",
                ids::REPLY,
                &b64::encode(&pacerelle_core::keys::sha256(&input))[..26]
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_reply_id_rule_final_and_per_text() {
        let last = reply_id_for("msg_1", None);
        assert_eq!(last, reply_id_for("msg_1", None));
        assert_ne!(last, reply_id_for("msg_2", None));
        let a = reply_id_for("msg_1", Some("done"));
        assert_eq!(a, reply_id_for("msg_1", Some("done")));
        assert_ne!(a, reply_id_for("msg_1", Some("done!")));
        assert_ne!(a, reply_id_for("msg_2", Some("done")));
        assert_ne!(a, last);
        for id in [&a, &last] {
            ids::validate("reply id", id).expect("valid id");
            assert!(id.starts_with("rep_"));
        }
    }
}
