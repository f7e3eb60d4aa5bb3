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
    /// Where the session holding the agent's lease runs ("laptop / claude-code"), if one does.
    pub session_host: Option<String>,
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
            last_wait_at: s.last_wait_at.map(system_time),
            waiting: s.messages.waiting,
            in_progress: s.messages.in_progress,
            processed: s.messages.processed,
            devices: s.devices,
            last_checkpoint_at: s.last_checkpoint_at.map(system_time),
        }
    }
}
