//! The agent's lease on its inbox: a session opened, kept by heartbeats, released.

use std::sync::Arc;
use std::time::Duration;

use pacerelle_core::wire::{OpenSession, SessionInfo};
use reqwest::Method;

use crate::error::{Error, Result};
use crate::http::{Req, Retry};

use super::{AgentClient, Inner};

/// Heartbeats are sent this often while a session is open (the relay's lease lasts 30 s).
const HEARTBEAT_EVERY: Duration = Duration::from_secs(10);

#[derive(Debug)]
pub(super) struct SessionState {
    id: String,
    name: String,
    heartbeat: tokio::task::JoinHandle<()>,
}

/// The heartbeat stops with the last clone of the client.
impl Drop for Inner {
    fn drop(&mut self) {
        if let Ok(mut guard) = self.session.lock()
            && let Some(state) = guard.take()
        {
            state.heartbeat.abort();
        }
    }
}

impl AgentClient {
    pub(super) fn session_id(&self) -> Option<String> {
        self.inner
            .session
            .lock()
            .ok()
            .and_then(|g| g.as_ref().map(|s| s.id.clone()))
    }

    /// The name of the session this client has open, if any.
    pub(super) fn session_name(&self) -> Option<String> {
        self.inner
            .session
            .lock()
            .ok()
            .and_then(|g| g.as_ref().map(|s| s.name.clone()))
    }

    /// Takes the lease of the session `session.name` (the default session without a name): from now on only
    /// this client consumes that session's tasks and those sent to any session. A heartbeat keeps it. Other
    /// names are other sessions: each has a lease of its own.
    ///
    /// Fails with the relay's `agent_in_use` error, naming the holder, unless `session.takeover` is set.
    pub async fn open_session(&self, session: &OpenSession) -> Result<SessionInfo> {
        if let Some(name) = &session.name {
            pacerelle_core::ids::validate_session_name(name)?;
        }
        let info: SessionInfo = self
            .inner
            .http
            .send(Req {
                body: Some(session),
                ..self.req(Method::POST, "/v1/agent/sessions")
            })
            .await?;
        let heartbeat = tokio::spawn(heartbeat_loop(
            Arc::downgrade(&self.inner),
            info.session_id.clone(),
        ));
        let previous = self
            .inner
            .session
            .lock()
            .map_err(|_| Error::InvalidInput("session lock poisoned".into()))?
            .replace(SessionState {
                id: info.session_id.clone(),
                name: info.name.clone(),
                heartbeat,
            });
        if let Some(previous) = previous {
            previous.heartbeat.abort();
        }
        Ok(info)
    }

    /// Renews the lease now (the client also does it on its own every 10 s).
    pub async fn heartbeat(&self) -> Result<SessionInfo> {
        let id = self
            .session_id()
            .ok_or_else(|| Error::InvalidInput("no session is open".into()))?;
        send_heartbeat(&self.inner, &id).await
    }

    /// Releases the lease.
    pub async fn close_session(&self) -> Result<()> {
        let state = self.inner.session.lock().ok().and_then(|mut g| g.take());
        if let Some(state) = state {
            state.heartbeat.abort();
            let path = format!("/v1/agent/sessions/{}", state.id);
            let _: SessionInfo = self
                .inner
                .http
                .send(self.req::<()>(Method::DELETE, &path))
                .await?;
        }
        Ok(())
    }
}

async fn send_heartbeat(inner: &Inner, session_id: &str) -> Result<SessionInfo> {
    let path = format!("/v1/agent/sessions/{session_id}/heartbeat");
    let req = Req::<()> {
        bearer: Some(inner.bearer.expose()),
        retry: Retry::No,
        ..Req::new(Method::POST, &path)
    };
    inner.http.send(req).await
}

async fn heartbeat_loop(inner: std::sync::Weak<Inner>, session_id: String) {
    loop {
        tokio::time::sleep(HEARTBEAT_EVERY).await;
        let Some(inner) = inner.upgrade() else { return };
        match send_heartbeat(&inner, &session_id).await {
            Ok(_) => {}
            Err(e) if e.kind() == crate::ErrorKind::LeaseLost => {
                tracing::warn!("the agent's lease was lost: another session took it over or it expired");
                return;
            }
            Err(e) => tracing::debug!(error = %e, "heartbeat failed; will try again"),
        }
    }
}
