//! The agent's lease, taken and kept for a loop that consumes its inbox.

use crate::agent::AgentClient;
use crate::error::Result;
use pacerelle_core::wire::{OpenSession, SessionInfo};

/// The lease as a long-lived listener holds it, with the one takeover policy of the [`Runner`](crate::runner::Runner) and the MCP
/// server: only the first successful take may take the lease over from a live holder (when asked); a take
/// after the lease was lost never does, so two listeners cannot take it back and forth.
#[derive(Debug)]
pub struct Lease {
    agent: AgentClient,
    /// What a take opens: the host, the session's name and folder, and whether to take over (the first take
    /// only).
    open: OpenSession,
    session: Option<SessionInfo>,
}

impl Lease {
    /// A lease not yet taken, for `agent`, named `host` to other sessions.
    pub fn new(agent: AgentClient, host: impl Into<String>, takeover: bool) -> Self {
        Lease {
            agent,
            open: OpenSession {
                host: host.into(),
                name: None,
                folder: None,
                takeover,
            },
            session: None,
        }
    }

    /// The lease of the session `name` (the default session when `None`), working in `folder`.
    pub fn named(mut self, name: Option<String>, folder: Option<String>) -> Self {
        self.open.name = name;
        self.open.folder = folder;
        self
    }

    /// The name this listener shows to other sessions.
    pub fn host(&self) -> &str {
        &self.open.host
    }

    /// The session name whose lease this is.
    pub fn name(&self) -> &str {
        self.open
            .name
            .as_deref()
            .unwrap_or(pacerelle_core::ids::DEFAULT_SESSION)
    }

    /// The session holding the lease, when this listener holds it.
    pub fn session(&self) -> Option<&SessionInfo> {
        self.session.as_ref()
    }

    /// Takes the lease unless held; `Some` with the session when it was taken now. Fails with the relay's
    /// error (`agent_in_use` names the holder in its details).
    pub async fn ensure(&mut self) -> Result<Option<&SessionInfo>> {
        if self.session.is_some() {
            return Ok(None);
        }
        let info = self.agent.open_session(&self.open).await?;
        self.open.takeover = false;
        Ok(Some(&*self.session.insert(info)))
    }

    /// Notes that the relay said the lease is no longer held; true when it was.
    pub fn lost(&mut self) -> bool {
        self.session.take().is_some()
    }

    /// Releases the lease if held.
    pub async fn release(&mut self) -> Result<()> {
        if self.session.take().is_some() {
            self.agent.close_session().await?;
        }
        Ok(())
    }
}
