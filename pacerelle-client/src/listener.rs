//! The agent's lease shared by the calls of a listener that consumes the inbox one call at a time rather than
//! in a loop: the MCP server, whose model calls `wait_for_messages` and `mark_processed` as tools. It follows
//! the [`Runner`](crate::runner::Runner)'s rules: one [`Lease`] with its takeover policy, the one [`Backoff`] while
//! the relay is unreachable ([`ErrorKind::worth_retrying`]), and a lease that was lost (it lapsed while the
//! relay was down, or was taken over) taken again once, without takeover.

use std::future::Future;
use std::time::Duration;

use pacerelle_core::Cursor;
use pacerelle_core::wire::LeaseHolder;
use tokio::time::Instant;

use crate::agent::{AgentClient, Inbox};
use crate::backoff::Backoff;
use crate::error::{ErrorKind, Result};
use crate::lease::Lease;
use pacerelle_core::wire::SessionInfo;

/// How long releasing the lease on exit may take before giving up (the lease then lapses in ~30 s).
const RELEASE_TIMEOUT: Duration = Duration::from_secs(5);

/// The lease as a listener that consumes call by call holds it (or not), shared by its concurrent calls.
#[derive(Debug)]
pub struct Listener {
    agent: AgentClient,
    host: String,
    state: tokio::sync::Mutex<State>,
}

#[derive(Debug)]
struct State {
    lease: Lease,
    refused: Option<Option<LeaseHolder>>,
}

/// Where a [`Listener`]'s lease stands, for a status display.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseState {
    /// The session, when this listener holds the lease.
    pub session: Option<SessionInfo>,
    /// When it does not: another session held it at the last attempt to take it.
    pub refused: bool,
    /// That session, when the relay named it.
    pub holder: Option<LeaseHolder>,
}

impl Listener {
    /// A listener for `agent`, named `host` to other sessions, that has not taken the lease yet. With
    /// `takeover`, the first successful take removes any other holder; later takes (after the lease was lost)
    /// never do, so two listeners cannot take it back and forth.
    pub fn new(agent: AgentClient, host: impl Into<String>, takeover: bool) -> Self {
        let host = host.into();
        Listener {
            state: tokio::sync::Mutex::new(State {
                lease: Lease::new(agent.clone(), host.clone(), takeover),
                refused: None,
            }),
            agent,
            host,
        }
    }

    /// A listener for the session `name` (the default session when `None`), working in `folder`: it takes
    /// that name's lease, and consumes the tasks sent to that name or to any session.
    pub fn named(self, name: Option<String>, folder: Option<String>) -> Self {
        let mut state = self.state.into_inner();
        state.lease = state.lease.named(name, folder);
        Listener {
            state: tokio::sync::Mutex::new(state),
            agent: self.agent,
            host: self.host,
        }
    }

    /// The session name whose lease this listener takes.
    pub async fn session_name(&self) -> String {
        self.state.lock().await.lease.name().to_string()
    }

    /// The name this listener shows to other sessions.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// Takes the lease unless this listener holds it. Fails with the relay's error: `agent_in_use` (see
    /// [`Error::lease_holder`](crate::Error::lease_holder)) when another session holds it.
    pub async fn ensure(&self) -> Result<()> {
        let mut state = self.state.lock().await;
        match state.lease.ensure().await {
            Ok(Some(_)) => {
                tracing::info!(host = %self.host, "took the agent's lease");
                state.refused = None;
                Ok(())
            }
            Ok(None) => Ok(()),
            Err(e) => {
                if e.kind() == ErrorKind::AgentInUse {
                    let holder = e.lease_holder();
                    let host = holder.as_ref().map_or("another session", |h| h.host.as_str());
                    tracing::warn!(holder = %host, "another session holds the agent's lease");
                    state.refused = Some(holder);
                }
                Err(e)
            }
        }
    }

    /// Notes that the relay said this listener no longer holds the lease.
    pub async fn lost(&self) {
        if self.state.lock().await.lease.lost() {
            tracing::warn!("the agent's lease was lost (expired or taken over)");
        }
    }

    /// Where the lease stands.
    pub async fn state(&self) -> LeaseState {
        let state = self.state.lock().await;
        let session = state.lease.session().cloned();
        let refused = if session.is_some() {
            None
        } else {
            state.refused.clone()
        };
        LeaseState {
            session,
            refused: refused.is_some(),
            holder: refused.flatten(),
        }
    }

    /// Releases the lease if held (on exit), giving up after 5 s: the lease then lapses by itself.
    pub async fn release(&self) {
        let mut state = self.state.lock().await;
        if state.lease.session().is_none() {
            return;
        }
        match tokio::time::timeout(RELEASE_TIMEOUT, state.lease.release()).await {
            Ok(Ok(())) => tracing::info!("released the agent's lease"),
            Ok(Err(e)) => tracing::warn!(error = %e, "could not release the lease; it lapses within 30 s"),
            Err(_) => tracing::warn!("releasing the lease timed out; it lapses within 30 s"),
        }
    }

    /// Runs a call that consumes the inbox: takes the lease first; if the relay says the lease was lost,
    /// takes it again once (without takeover) and retries. Fails with `agent_in_use` or `lease_lost` when
    /// another session holds it.
    pub async fn consume<T, F, Fut>(&self, call: F) -> Result<T>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let mut retried = false;
        loop {
            self.ensure().await?;
            match call().await {
                Err(e) if matches!(e.kind(), ErrorKind::LeaseLost | ErrorKind::AgentInUse) => {
                    self.lost().await;
                    if retried || e.kind() == ErrorKind::AgentInUse {
                        return Err(e);
                    }
                    retried = true;
                }
                other => return other,
            }
        }
    }

    /// Waits for tasks for the caller's whole `total`, across a relay restart. While the relay is unreachable
    /// the wait goes on with the one [`Backoff`]; a relay that stops ends its parked waits early with
    /// nothing, so the wait resumes from the returned cursor for what is left. Each attempt waits only for
    /// what is left of the caller's time.
    pub async fn wait_for_messages(&self, mut cursor: Option<Cursor>, total: Duration) -> Result<Inbox> {
        let started = Instant::now();
        let backoff = Backoff::default();
        let left = move || total.saturating_sub(started.elapsed());
        loop {
            let inbox = backoff
                .retry_until(
                    started + total,
                    || self.consume(|| self.agent.wait_for_messages(cursor, left())),
                    |e| e.kind().worth_retrying(),
                )
                .await?;
            let early = left() > backoff.max;
            if !early || !inbox.messages.is_empty() || !inbox.rejected.is_empty() {
                return Ok(inbox);
            }
            cursor = Some(inbox.cursor);
            tokio::time::sleep(backoff.first).await;
        }
    }
}
