//! `get_checkpoints` and `save_checkpoint`: a summary and the next action, sealed with the agent's own key,
//! so that a session can resume after an interruption.

use crate::tools::output_schema;
use pacerelle_client::agent::Checkpoint;
use pacerelle_client::core::wire::MAX_CHECKPOINT_LIMIT;
use rmcp::ErrorData as McpError;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::server::PacerelleServer;
use crate::tools::{Args, check_id, input_schema, output, output_reading, relay_failure};

/// Checkpoints returned when `limit` is not given.
pub const DEFAULT_LIMIT: u32 = 5;
/// Most message ids one checkpoint names.
pub const MAX_MESSAGE_IDS: usize = 100;

/// Arguments of `get_checkpoints`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GetCheckpointsArgs {
    /// How many checkpoints to return, latest first (1 to 100, default 5).
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<i64>,
}

/// Arguments of `save_checkpoint`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SaveCheckpointArgs {
    /// What has been done so far, enough to resume without this conversation.
    pub summary: String,
    /// The next action to take when resuming.
    pub next_action: String,
    /// The tasks (messageId) this checkpoint concerns.
    #[serde(default)]
    pub message_ids: Option<Vec<String>>,
}

/// A checkpoint.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointView {
    /// Its id.
    pub id: String,
    /// What had been done.
    pub summary: String,
    /// What to do next.
    pub next_action: String,
    /// The tasks it concerns.
    pub message_ids: Vec<String>,
    /// When it was saved (RFC 3339).
    pub created_at: String,
}

impl From<Checkpoint> for CheckpointView {
    fn from(c: Checkpoint) -> Self {
        CheckpointView {
            id: c.checkpoint_id,
            summary: c.summary,
            next_action: c.next_action,
            message_ids: c.message_ids,
            created_at: c.created_at.to_string(),
        }
    }
}

/// The result of `get_checkpoints`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointsResult {
    /// Latest first.
    pub checkpoints: Vec<CheckpointView>,
}

/// The result of `save_checkpoint`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SavedCheckpoint {
    /// The new checkpoint's id.
    pub id: String,
    /// When it was saved (RFC 3339).
    pub created_at: String,
}

fn limit_of(limit: Option<i64>) -> Result<u32, McpError> {
    match limit {
        None => Ok(DEFAULT_LIMIT),
        Some(n) if (1..=i64::from(MAX_CHECKPOINT_LIMIT)).contains(&n) => Ok(n as u32),
        Some(n) => Err(McpError::invalid_params(
            format!("limit must be between 1 and {MAX_CHECKPOINT_LIMIT} (got {n})"),
            None,
        )),
    }
}

#[tool_router(router = checkpoints_router, vis = "pub(crate)")]
impl PacerelleServer {
    #[tool(
        name = "get_checkpoints",
        input_schema = input_schema::<GetCheckpointsArgs>(),
        description = "The latest checkpoints saved by this agent, latest first: id, summary, nextAction, \
                       messageIds, createdAt. Read them when starting or resuming, before repeating an \
                       action.",
        output_schema = output_schema::<CheckpointsResult>(),
        annotations(
            title = "Read checkpoints",
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    pub async fn get_checkpoints(
        &self,
        Args(args): Args<GetCheckpointsArgs>,
    ) -> Result<CallToolResult, McpError> {
        let limit = limit_of(args.limit)?;
        let state = &self.state;
        let checkpoints = match state.client.checkpoints(limit).await {
            Ok(list) => list,
            Err(e) => return relay_failure(&state.relay_url, e),
        };
        let next = if checkpoints.is_empty() {
            "No checkpoint yet: nothing to resume. Next: call wait_for_messages without a cursor."
        } else {
            "Latest first. If the latest nextAction concerns a task still pending, resume from it; tasks not \
             yet processed come again from wait_for_messages without a cursor. Next: call wait_for_messages \
             without a cursor."
        };
        let result = CheckpointsResult {
            checkpoints: checkpoints.into_iter().map(CheckpointView::from).collect(),
        };
        if result.checkpoints.is_empty() {
            return output(&result, next);
        }
        let ids = result
            .checkpoints
            .iter()
            .map(|c| c.id.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        output_reading(
            &result,
            next,
            format!("Checkpoints: structuredContent.checkpoints[] (summary, nextAction; {ids})"),
        )
    }

    #[tool(
        name = "save_checkpoint",
        input_schema = input_schema::<SaveCheckpointArgs>(),
        description = "Save a checkpoint: a summary of what has been done and the next action, so that this \
                       or a later session can resume after an interruption. Sealed with the agent's own key: \
                       the relay cannot read it. Save one when there is progress worth keeping.",
        output_schema = output_schema::<SavedCheckpoint>(),
        annotations(
            title = "Save a checkpoint",
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    pub async fn save_checkpoint(
        &self,
        Args(args): Args<SaveCheckpointArgs>,
    ) -> Result<CallToolResult, McpError> {
        let message_ids = args.message_ids.unwrap_or_default();
        if message_ids.len() > MAX_MESSAGE_IDS {
            return Err(McpError::invalid_params(
                format!("messageIds names at most {MAX_MESSAGE_IDS} tasks"),
                None,
            ));
        }
        for id in &message_ids {
            check_id("message id", id)?;
        }
        let state = &self.state;
        match state
            .client
            .save_checkpoint(&args.summary, &args.next_action, &message_ids)
            .await
        {
            Ok(c) => output(
                &SavedCheckpoint {
                    id: c.checkpoint_id,
                    created_at: c.created_at.to_string(),
                },
                "Checkpoint saved. Carry on; when the current task is done, reply, mark_processed, then call \
                 wait_for_messages with your latest cursor.",
            ),
            Err(e) => relay_failure(&state.relay_url, e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits() {
        assert_eq!(limit_of(None).expect("default"), DEFAULT_LIMIT);
        assert_eq!(limit_of(Some(100)).expect("max"), 100);
        assert!(limit_of(Some(0)).is_err());
        assert!(limit_of(Some(-1)).is_err());
        assert!(limit_of(Some(101)).is_err());
    }
}
