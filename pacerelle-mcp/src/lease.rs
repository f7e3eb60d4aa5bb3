//! One listener per session name: this server takes its session's lease through the client's
//! [`Listener`](pacerelle_client::listener::Listener) (its takeover policy, retakes and waits), the client renews it by
//! heartbeat, and it is released on exit. This module only shows it.

use pacerelle_client::core::wire::LeaseHolder;
use pacerelle_client::{Error, listener::LeaseState};
use schemars::JsonSchema;
use serde::Serialize;

/// The session that holds the lease, as shown to a session that does not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Holder {
    /// Where it runs ("laptop / claude (pacerelle-mcp pid 1234)").
    pub host: String,
    /// The session whose lease it holds (this server's), when the relay said.
    pub session: Option<String>,
    /// Since when it holds the lease (RFC 3339), when the relay said.
    pub since: Option<String>,
}

impl Holder {
    /// The holder the relay named, or "another session" when it did not.
    pub fn from_relay(holder: Option<LeaseHolder>) -> Holder {
        match holder {
            Some(h) => Holder {
                host: h.host,
                session: Some(h.name),
                since: Some(h.since.to_string()),
            },
            None => Holder {
                host: "another session".to_string(),
                session: None,
                since: None,
            },
        }
    }

    /// The holder named in an `agent_in_use` error's details.
    pub fn of(e: &Error) -> Holder {
        Holder::from_relay(e.lease_holder())
    }
}

/// This server's view of the lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LeaseView {
    /// True when this server holds its session's lease and may consume the inbox.
    pub held: bool,
    /// This server's session of the agent ("default" unless PACERELLE_SESSION or --session names one): it
    /// receives the tasks sent to this session or to any.
    pub session: String,
    /// How this server names itself to other sessions.
    pub host: String,
    /// Since when this server holds it (RFC 3339).
    pub since: Option<String>,
    /// The other session that held it at the last attempt to take it, if one did.
    pub holder: Option<Holder>,
}

impl LeaseView {
    /// What `get_status` shows of `state`, for a server named `host` listening as session `session`.
    pub fn new(host: &str, session: String, state: LeaseState) -> LeaseView {
        LeaseView {
            held: state.session.is_some(),
            session,
            host: host.to_string(),
            since: state.session.map(|s| s.since.to_string()),
            holder: state.refused.then(|| Holder::from_relay(state.holder)),
        }
    }
}
