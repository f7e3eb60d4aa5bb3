//! Checkpoints: what an agent has done and will do next, sealed with its own key, to resume after an interruption.

use pacerelle_core::checkpoint::{CheckpointPayload, checkpoint_aad};
use pacerelle_core::envelope;
use pacerelle_core::wire::{self, CheckpointList, SaveCheckpoint, Stored};
use pacerelle_core::{Timestamp, ids};
use reqwest::Method;

use crate::error::Result;
use crate::http::Req;

use super::{AgentClient, check_text};

/// A checkpoint, opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// Its id.
    pub checkpoint_id: String,
    /// What has been done.
    pub summary: String,
    /// What to do next.
    pub next_action: String,
    /// The tasks it concerns.
    pub message_ids: Vec<String>,
    /// When it was saved.
    pub created_at: Timestamp,
}

impl AgentClient {
    /// Saves a checkpoint, sealed with the agent's own key.
    pub async fn save_checkpoint(
        &self,
        summary: &str,
        next_action: &str,
        message_ids: &[String],
    ) -> Result<Checkpoint> {
        for id in message_ids {
            ids::validate("message id", id)?;
        }
        check_text("a checkpoint's summary", summary)?;
        check_text("a checkpoint's next action", next_action)?;
        let checkpoint_id = ids::generate(ids::CHECKPOINT);
        let payload = CheckpointPayload {
            summary: summary.to_string(),
            next_action: next_action.to_string(),
            message_ids: message_ids.to_vec(),
        };
        let key = self.inner.token.self_key(&self.inner.agent_id);
        let envelope = envelope::seal_json(
            &key,
            &checkpoint_aad(&self.inner.agent_id, &checkpoint_id),
            &payload,
        );
        let body = SaveCheckpoint {
            checkpoint_id: checkpoint_id.clone(),
            envelope,
        };
        let stored: Stored = self
            .inner
            .http
            .send(Req {
                body: Some(&body),
                ..self.req(Method::POST, "/v1/agent/checkpoints")
            })
            .await?;
        Ok(Checkpoint {
            checkpoint_id,
            summary: payload.summary,
            next_action: payload.next_action,
            message_ids: payload.message_ids,
            created_at: stored.created_at,
        })
    }

    /// The latest checkpoints, latest first (`limit` 1 to 100).
    pub async fn checkpoints(&self, limit: u32) -> Result<Vec<Checkpoint>> {
        let limit = limit.clamp(1, wire::MAX_CHECKPOINT_LIMIT);
        let query = [("limit", limit.to_string())];
        let list: CheckpointList = self
            .inner
            .http
            .send(Req {
                query: &query,
                ..self.req::<()>(Method::GET, "/v1/agent/checkpoints")
            })
            .await?;
        let key = self.inner.token.self_key(&self.inner.agent_id);
        list.checkpoints
            .into_iter()
            .map(|c| {
                let payload: CheckpointPayload = envelope::open_json(
                    &key,
                    &checkpoint_aad(&self.inner.agent_id, &c.checkpoint_id),
                    &c.envelope,
                )?;
                Ok(Checkpoint {
                    checkpoint_id: c.checkpoint_id,
                    summary: payload.summary,
                    next_action: payload.next_action,
                    message_ids: payload.message_ids,
                    created_at: c.created_at,
                })
            })
            .collect()
    }
}
