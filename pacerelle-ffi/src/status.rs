//! Presence of the agent, as the phone shows it.

use std::time::SystemTime;

pub use pacerelle_core::wire::{Activity, Presence};

use crate::time::system_time;

/// The agent's presence and the counts a phone shows.
///
/// Not the core's wire `Status`: its times are the core's `Timestamp` newtype, which crosses as `SystemTime`,
/// and this one flattens the agent, the session and the counts into one record.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct AgentStatus {
    /// The agent's id.
    pub agent_id: String,
    /// Its display name.
    pub agent_name: String,
    /// What it is doing, in the one word every surface shows (`asking`, `working`, `listening`, `offline`).
    pub activity: Activity,
    /// The relay's finer reading of its presence.
    pub presence: Presence,
    /// Open questions sent to this device that it has not answered yet.
    pub open_questions: u64,
    /// A wait is parked at the relay now.
    pub listening: bool,
    /// Where the session holding the agent's lease runs ("laptop / claude-code"), if one does (of several,
    /// the one open longest).
    pub session_host: Option<String>,
    /// Every open session of the agent, the one open longest first: send a task to one by its `name`
    /// (`DeviceClient::send_to`).
    pub sessions: Vec<AgentSession>,
    /// When the last wait started or ended.
    pub last_wait_at: Option<SystemTime>,
    /// Tasks stored and never delivered.
    pub waiting: u64,
    /// Tasks delivered and not processed.
    pub in_progress: u64,
    /// Tasks marked processed.
    pub processed: u64,
    /// Paired devices not revoked.
    pub devices: u64,
    /// When the last checkpoint was saved.
    pub last_checkpoint_at: Option<SystemTime>,
}

/// One open session of the agent (an assistant listening in one project folder, say).
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct AgentSession {
    /// Its name ("default" for a session that gave none).
    pub name: String,
    /// Where it runs.
    pub host: String,
    /// The folder it works in, if it said.
    pub folder: Option<String>,
    /// When it opened.
    pub since: SystemTime,
    /// What it is doing.
    pub presence: Presence,
    /// Its tasks delivered and not processed.
    pub in_progress: u64,
}

impl From<pacerelle_client::core::wire::Status> for AgentStatus {
    fn from(s: pacerelle_client::core::wire::Status) -> Self {
        let activity = s.activity();
        AgentStatus {
            agent_id: s.agent.agent_id,
            agent_name: s.agent.name,
            activity,
            presence: s.presence,
            open_questions: s.open_questions,
            listening: s.listening,
            session_host: s.session.map(|h| h.host),
            sessions: s
                .sessions
                .into_iter()
                .map(|x| AgentSession {
                    name: x.name,
                    host: x.host,
                    folder: x.folder,
                    since: system_time(x.since),
                    presence: x.presence,
                    in_progress: x.in_progress,
                })
                .collect(),
            last_wait_at: s.last_wait_at.map(system_time),
            waiting: s.messages.waiting,
            in_progress: s.messages.in_progress,
            processed: s.messages.processed,
            devices: s.devices,
            last_checkpoint_at: s.last_checkpoint_at.map(system_time),
        }
    }
}
