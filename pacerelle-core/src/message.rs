//! Tasks and replies: what travels inside their envelopes.

use serde::{Deserialize, Serialize};

use crate::envelope::{Aad, Direction, kind};

/// Longest text of a task, reply or checkpoint field, in bytes.
pub const MAX_TEXT_BYTES: usize = 64 * 1024;

/// A task, as sealed by the device that sends it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskPayload {
    /// What the person asks.
    pub text: String,
    /// The session the sender addressed it to, sealed with it so that the relay cannot hand it to another
    /// one (the agent checks it against its own session); absent: any session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
}

/// A reply, as sealed by the agent for each device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplyPayload {
    /// What the agent answers.
    pub text: String,
    /// The task it answers (also bound in clear by the relay; both must agree).
    pub source_message_id: String,
}

/// The context of a task sent by `device_id`.
pub fn task_aad<'a>(agent_id: &'a str, device_id: &'a str, message_id: &'a str) -> Aad<'a> {
    Aad {
        agent_id,
        device_id,
        direction: Direction::DeviceToAgent,
        kind: kind::MESSAGE,
        object_id: message_id,
    }
}

/// The context of a reply sealed for `device_id`.
pub fn reply_aad<'a>(agent_id: &'a str, device_id: &'a str, reply_id: &'a str) -> Aad<'a> {
    Aad {
        agent_id,
        device_id,
        direction: Direction::AgentToDevice,
        kind: kind::REPLY,
        object_id: reply_id,
    }
}
