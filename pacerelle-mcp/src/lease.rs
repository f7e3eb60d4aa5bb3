//! One listener per agent: this server takes the agent's lease, the client renews it by heartbeat, and it
//! is released on exit. Taking it is retried lazily by the tools that consume the inbox.

use std::time::Duration;

use pacerelle_client::core::wire::LeaseHolder;
use pacerelle_client::{AgentClient, Error, ErrorKind};
use schemars::JsonSchema;
use serde::Serialize;

/// How long closing the session may take on exit before giving up (the lease then lapses in ~30 s).
const RELEASE_TIMEOUT: Duration = Duration::from_secs(5);

/// The session that holds the lease, as shown to a session that does not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Holder {
    /// Where it runs ("laptop / claude (pacerelle-mcp pid 1234)").
    pub host: String,
    /// Since when it holds the lease (RFC 3339), when the relay said.
    pub since: Option<String>,
}

/// Why the lease could not be taken.
#[derive(Debug)]
pub enum LeaseError {
    /// Another session holds it.
    InUse(Holder),
    /// The relay could not be asked, or refused for another reason.
    Relay(Error),
}

/// This server's view of the lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LeaseView {
    /// True when this server holds the agent's lease and may consume the inbox.
    pub held: bool,
    /// How this server names itself to other sessions.
    pub host: String,
    /// Since when this server holds it (RFC 3339).
    pub since: Option<String>,
    /// The other session that held it at the last attempt to take it, if one did.
    pub holder: Option<Holder>,
}

#[derive(Debug)]
struct State {
    lease: pacerelle_client::Lease,
    refused_by: Option<Holder>,
}

/// The agent's lease as this server holds it (or not): the client's [`pacerelle_client::Lease`] (its one
/// takeover policy, shared with the runner) and who refused it last, for `get_status`.
#[derive(Debug)]
pub struct Lease {
    host: String,
    state: tokio::sync::Mutex<State>,
}

impl Lease {
    /// A lease not yet taken. With `takeover`, the first successful take removes any other holder; later
    /// takes (after this server lost the lease) never do, so two servers cannot take it back and forth.
    pub fn new(client: AgentClient, host: String, takeover: bool) -> Self {
        Lease {
            state: tokio::sync::Mutex::new(State {
                lease: pacerelle_client::Lease::new(client, host.clone(), takeover),
                refused_by: None,
            }),
            host,
        }
    }

    /// The label this server shows to other sessions.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// Takes the lease unless this server already holds it.
    pub async fn ensure(&self) -> Result<(), LeaseError> {
        let mut state = self.state.lock().await;
        match state.lease.ensure().await {
            Ok(Some(_)) => {
                tracing::info!(host = %self.host, "took the agent's lease");
                state.refused_by = None;
                Ok(())
            }
            Ok(None) => Ok(()),
            Err(e) if e.kind() == ErrorKind::AgentInUse => {
                let holder = holder_of(&e);
                tracing::warn!(holder = %holder.host, "another session holds the agent's lease");
                state.refused_by = Some(holder.clone());
                Err(LeaseError::InUse(holder))
            }
            Err(e) => Err(LeaseError::Relay(e)),
        }
    }

    /// Notes that the relay said this server no longer holds the lease.
    pub async fn lost(&self) {
        if self.state.lock().await.lease.lost() {
            tracing::warn!("the agent's lease was lost (expired or taken over)");
        }
    }

    /// What `get_status` shows.
    pub async fn view(&self) -> LeaseView {
        let state = self.state.lock().await;
        let session = state.lease.session();
        LeaseView {
            held: session.is_some(),
            host: self.host.clone(),
            since: session.map(|s| s.since.to_string()),
            holder: if session.is_some() {
                None
            } else {
                state.refused_by.clone()
            },
        }
    }

    /// Releases the lease if held (on exit).
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
}

/// The holder named in an `agent_in_use` error's details.
pub fn holder_of(e: &Error) -> Holder {
    let details = match e {
        Error::Api { details, .. } => details.clone(),
        _ => None,
    };
    match details.and_then(|d| serde_json::from_value::<LeaseHolder>(*d).ok()) {
        Some(h) => Holder {
            host: h.host,
            since: Some(h.since.to_string()),
        },
        None => Holder {
            host: "another session".to_string(),
            since: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pacerelle_client::core::wire::code;

    #[test]
    fn holder_from_details() {
        let e = Error::Api {
            status: 409,
            code: code::AGENT_IN_USE.into(),
            message: "in use".into(),
            details: Some(Box::new(serde_json::json!({
                "host": "desk / codex",
                "since": "2026-11-30T10:00:00.000Z",
                "lastHeartbeatAt": "2026-11-30T10:05:00.000Z"
            }))),
        };
        assert_eq!(
            holder_of(&e),
            Holder {
                host: "desk / codex".into(),
                since: Some("2026-11-30T10:00:00.000Z".into())
            }
        );
        let bare = Error::Api {
            status: 409,
            code: code::AGENT_IN_USE.into(),
            message: "in use".into(),
            details: None,
        };
        assert_eq!(holder_of(&bare).since, None);
    }
}
