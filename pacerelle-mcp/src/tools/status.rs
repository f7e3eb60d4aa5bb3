//! `get_status`: what the phone sees, plus this server's own state.

use crate::tools::output_schema;
use pacerelle_client::{
    Error, QuestionState, agent::AuditFilter, core::wire::DeviceInfo, core::wire::Status,
};
use rmcp::ErrorData as McpError;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Serialize;

use crate::lease::LeaseView;
use crate::server::PacerelleServer;
use crate::tools::{failure, output, relay_failure, unreachable_text};

/// Pending questions are counted up to this many.
const MAX_COUNTED_QUESTIONS: usize = 100;

/// The result of `get_status`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatusResult {
    /// False when the relay could not be reached; the other relay fields are then empty.
    pub relay_reachable: bool,
    /// The relay's base URL.
    pub relay_url: String,
    /// The agent's id.
    pub agent_id: String,
    /// The agent's display name.
    pub agent_name: Option<String>,
    /// This server and the agent's lease (one session at a time receives tasks).
    pub lease: LeaseView,
    /// What the phone shows: offline, connected, listening, busy or waiting_confirmation.
    pub presence: Option<String>,
    /// A wait for tasks is parked at the relay now.
    pub listening: bool,
    /// Tasks by state.
    pub tasks: TaskCounts,
    /// Questions asked and still pending (counted up to 100); null when the relay could not say.
    pub open_questions: Option<u64>,
    /// When the last checkpoint was saved (RFC 3339).
    pub last_checkpoint_at: Option<String>,
    /// When the last wait started or ended (RFC 3339).
    pub last_wait_at: Option<String>,
    /// Paired devices that are not revoked: where tasks can come from.
    pub devices: Vec<DeviceView>,
    /// Every open session of the agent, this one included, the one open longest first (as `list_sessions`).
    pub sessions: Vec<SessionView>,
}

/// One open session of the agent.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionView {
    /// Its name: the phone sends a task to this session by it ("default" for a session not named).
    pub name: String,
    /// True for this server's own session.
    pub this_session: bool,
    /// Where it runs.
    pub host: String,
    /// The folder it works in, if it said.
    pub folder: Option<String>,
    /// When it opened (RFC 3339).
    pub since: String,
    /// What it is doing: listening, busy, connected, waiting_confirmation or offline (its lease lapsed).
    pub presence: String,
    /// Its tasks delivered and not processed.
    pub in_progress: u64,
    /// Its last heartbeat (RFC 3339).
    pub last_heartbeat_at: String,
    /// When its last wait for tasks started or ended (RFC 3339), if the relay saw one.
    pub last_wait_at: Option<String>,
}

/// The result of `list_sessions`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionList {
    /// This server's session name.
    pub this_session: String,
    /// Every open session of the agent, the one open longest first.
    pub sessions: Vec<SessionView>,
}

fn session_views(status: &Status, mine: &str) -> Vec<SessionView> {
    status
        .sessions
        .iter()
        .map(|s| SessionView {
            name: s.name.clone(),
            this_session: s.name == mine,
            host: s.host.clone(),
            folder: s.folder.clone(),
            since: s.since.to_string(),
            presence: s.presence.as_str().to_string(),
            in_progress: s.in_progress,
            last_heartbeat_at: s.last_heartbeat_at.to_string(),
            last_wait_at: s.last_wait_at.map(|t| t.to_string()),
        })
        .collect()
}

/// Tasks by state.
#[derive(Debug, Clone, Copy, Default, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskCounts {
    /// Sent by a device, not yet delivered to this agent.
    pub waiting: u64,
    /// Delivered, not yet marked processed.
    pub in_progress: u64,
    /// Marked processed.
    pub processed: u64,
}

/// A paired device.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceView {
    /// Its id (the `from` of its tasks).
    pub device_id: String,
    /// Its name.
    pub name: String,
    /// `owner` (sends tasks, answers) or `user`.
    pub role: String,
    /// When it paired (RFC 3339).
    pub paired_at: String,
}

fn device_view(d: DeviceInfo) -> DeviceView {
    DeviceView {
        device_id: d.device_id,
        name: d.name,
        role: d.role.as_str().to_string(),
        paired_at: d.created_at.to_string(),
    }
}

fn next_step(result: &StatusResult) -> String {
    if result.devices.is_empty() {
        return "No device is paired yet, so no task can arrive. Ask the person to pair their phone (for \
                example with `pacerelle pair` on this computer), then call get_status again."
            .to_string();
    }
    if let Some(holder) = &result.lease.holder {
        return crate::tools::in_use_text(holder);
    }
    let pending = result.tasks.waiting + result.tasks.in_progress;
    let tasks = match pending {
        0 => "No task is pending.".to_string(),
        1 => "1 task is pending.".to_string(),
        n => format!("{n} tasks are pending."),
    };
    format!(
        "The relay is reachable. {tasks} Next: call get_checkpoints, then wait_for_messages without a cursor."
    )
}

#[tool_router(router = status_router, vis = "pub(crate)")]
impl PacerelleServer {
    #[tool(
        name = "get_status",
        description = "Pacerelle status: whether the relay is reachable, the agent's name, whether this \
                       session holds the lease (only the holder receives tasks), whether it is listening, \
                       tasks waiting and in progress, open questions, the last checkpoint's time and the \
                       paired devices. Call it first, then get_checkpoints, then wait_for_messages.",
        output_schema = output_schema::<StatusResult>(),
        annotations(
            title = "Pacerelle status",
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    pub async fn get_status(&self) -> Result<CallToolResult, McpError> {
        let state = &self.state;
        let status = match state.client.status().await {
            Ok(status) => status,
            Err(Error::Network { reason, .. }) => {
                let result = StatusResult {
                    relay_reachable: false,
                    relay_url: state.relay_url.clone(),
                    agent_id: state.client.agent_id().to_string(),
                    agent_name: None,
                    lease: state.lease_view().await,
                    presence: None,
                    listening: false,
                    tasks: TaskCounts::default(),
                    open_questions: None,
                    last_checkpoint_at: None,
                    last_wait_at: None,
                    devices: Vec::new(),
                    sessions: Vec::new(),
                };
                return output(&result, unreachable_text(&state.relay_url, &reason));
            }
            Err(e) => return relay_failure(&state.relay_url, e),
        };
        let pending = AuditFilter {
            state: Some(QuestionState::Pending),
            limit: Some(MAX_COUNTED_QUESTIONS),
            ..AuditFilter::default()
        };
        // Taking the lease here, when it is free, lets the phone see this session as connected early.
        let (_, devices, questions) = tokio::join!(
            state.lease.ensure(),
            state.client.devices(),
            state.client.answer_log(&pending)
        );
        let devices = match devices {
            Ok(devices) => devices,
            Err(e) => return relay_failure(&state.relay_url, e),
        };
        let open_questions = match questions {
            Ok(entries) => Some(
                entries
                    .iter()
                    .filter(|q| q.state == QuestionState::Pending)
                    .count() as u64,
            ),
            Err(e) => {
                tracing::debug!(error = %e, "open questions not counted");
                None
            }
        };
        let lease = state.lease_view().await;
        let sessions = session_views(&status, &lease.session);
        let result = StatusResult {
            relay_reachable: true,
            relay_url: state.relay_url.clone(),
            agent_id: status.agent.agent_id.clone(),
            agent_name: Some(status.agent.name.clone()),
            lease,
            presence: Some(status.presence.as_str().to_string()),
            listening: status.listening,
            tasks: TaskCounts {
                waiting: status.messages.waiting,
                in_progress: status.messages.in_progress,
                processed: status.messages.processed,
            },
            open_questions,
            last_checkpoint_at: status.last_checkpoint_at.map(|t| t.to_string()),
            last_wait_at: status.last_wait_at.map(|t| t.to_string()),
            devices: devices
                .into_iter()
                .filter(|d| d.revoked_at.is_none())
                .map(device_view)
                .collect(),
            sessions,
        };
        output(&result, next_step(&result))
    }

    #[tool(
        name = "list_sessions",
        description = "The agent's open sessions: each listening assistant (one per session name, for example \
                       one per project folder) with its host, folder, since when, what it is doing and its \
                       tasks in progress; thisSession names this one. The phone sends a task to one session \
                       or to any; this session receives those sent to it or to any.",
        output_schema = output_schema::<SessionList>(),
        annotations(
            title = "Pacerelle sessions",
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    pub async fn list_sessions(&self) -> Result<CallToolResult, McpError> {
        let state = &self.state;
        // The lease first, when it is free: the status read after it then lists this session among the others.
        if let Err(Error::Network { reason, .. }) = state.lease.ensure().await {
            return failure(unreachable_text(&state.relay_url, &reason));
        }
        let status = match state.client.status().await {
            Ok(status) => status,
            Err(Error::Network { reason, .. }) => {
                return failure(unreachable_text(&state.relay_url, &reason));
            }
            Err(e) => return relay_failure(&state.relay_url, e),
        };
        let mine = state.lease.session_name().await;
        let list = SessionList {
            sessions: session_views(&status, &mine),
            this_session: mine,
        };
        let others = list.sessions.iter().filter(|s| !s.this_session).count();
        let next = match others {
            0 => "This is the agent's only open session: every task sent from the phone comes here."
                .to_string(),
            n => format!(
                "{n} other session(s) listen beside this one ({:?}); a task sent to one of them never comes \
                 here, one sent to any session goes to whichever is handed it first.",
                list.this_session
            ),
        };
        output(&list, next)
    }
}
