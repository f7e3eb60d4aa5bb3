//! Checkpoints: what an agent saves to resume after an interruption, sealed with its self key.

use serde::{Deserialize, Serialize};

use crate::envelope::{Aad, Direction, kind};

/// A checkpoint's content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointPayload {
    /// What has been done.
    pub summary: String,
    /// What to do next.
    pub next_action: String,
    /// The tasks it concerns.
    #[serde(default)]
    pub message_ids: Vec<String>,
}

/// The context of a checkpoint.
pub fn checkpoint_aad<'a>(agent_id: &'a str, checkpoint_id: &'a str) -> Aad<'a> {
    Aad {
        agent_id,
        device_id: "",
        direction: Direction::AgentToSelf,
        kind: kind::CHECKPOINT,
        object_id: checkpoint_id,
    }
}
