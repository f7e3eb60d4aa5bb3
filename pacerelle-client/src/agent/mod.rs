//! The agent side: the client an agent holds, and what it does with it, one concern per module.

mod asked;
pub(crate) mod audit;
mod checkpoints;
mod credentials;
pub(crate) mod grants;
mod inbox;
mod pairing;
pub(crate) mod questions;
pub(crate) mod roster;
mod session;
pub(crate) mod users;
mod webhooks;

use std::sync::{Arc, Mutex};

use pacerelle_core::wire::{self, AgentInfo, RegisterAgent, Status};
use pacerelle_core::{AgentToken, Bearer, b64, ids};
use reqwest::Method;

use self::roster::RosterMark;
use self::session::SessionState;
use crate::error::{Error, Result};
use crate::http::{Http, Req};

pub use asked::{AskedQuestion, AskedStore, NOT_ASKED_HERE};
pub use audit::{AuditEntry, AuditFilter, CSV_COLUMNS, verify_answer_log, write_csv, write_jsonl};
pub use checkpoints::Checkpoint;
pub use credentials::{AgentCredentials, AgentFile};
pub use grants::{GRANTS_FILE, GrantBook, GrantUse, GrantedCall, KeptGrant};
pub use inbox::{Inbox, Message, Rejected, reply_id_for};
pub use pairing::{PairingLink, PairingOptions};
pub use questions::{AnswerOutcome, Asked, MAX_QUESTION_BYTES, QuestionRequest, answer_text};
pub use users::{ConnectOptions, UserDevice, UserInfo};
pub use webhooks::{
    DEFAULT_TOLERANCE, Delivery, EVENT_ID_HEADER, SIGNATURE_HEADER, WebhookError, sign_webhook,
    verify_webhook,
};

/// The agent's client. Cheap to clone; clones share the session.
#[derive(Debug, Clone)]
pub struct AgentClient {
    pub(crate) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) http: Http,
    pub(crate) agent_id: String,
    pub(crate) token: AgentToken,
    bearer: Bearer,
    session: Mutex<Option<SessionState>>,
    pub(crate) roster_mark: RosterMark,
    /// The user (Partner mode; `None`: the owner) of each task received, by message id: a reply goes to the
    /// same audience as the task it answers.
    senders: Mutex<std::collections::HashMap<String, Option<String>>>,
}

impl AgentClient {
    /// A client for an existing agent.
    pub fn new(relay_url: &str, agent_id: &str, token: AgentToken) -> Result<Self> {
        ids::validate("agent id", agent_id)?;
        let http = Http::new(relay_url)?;
        let bearer = token.bearer(agent_id);
        Ok(AgentClient {
            inner: Arc::new(Inner {
                http,
                agent_id: agent_id.to_string(),
                token,
                bearer,
                session: Mutex::new(None),
                roster_mark: RosterMark::new(crate::home::default_home().as_deref(), agent_id),
                senders: Mutex::new(std::collections::HashMap::new()),
            }),
        })
    }

    /// Keeps the highest device roster version seen in `<home>/rosters/<agentId>.json` (by default home is
    /// `PACERELLE_HOME`, else the user's config folder + `pacerelle`), or in memory only with `None`. Call it
    /// right after creating the client, before any clone.
    pub fn with_home(mut self, home: Option<&std::path::Path>) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.roster_mark = RosterMark::new(home, &inner.agent_id);
        }
        self
    }

    /// Creates a new agent: draws its id and token here, and registers only `SHA-256(auth)` at the relay.
    ///
    /// `registration_secret` is needed unless the relay has open registration.
    pub async fn register(relay_url: &str, name: &str, registration_secret: Option<&str>) -> Result<Self> {
        let token = AgentToken::generate();
        let agent_id = ids::generate(ids::AGENT);
        let client = AgentClient::new(relay_url, &agent_id, token)?;
        let body = RegisterAgent {
            agent_id: agent_id.clone(),
            name: name.to_string(),
            auth_hash: b64::encode(&client.inner.token.auth_hash()),
        };
        let headers: Vec<(&'static str, String)> = registration_secret
            .map(|s| (wire::REGISTRATION_HEADER, s.to_string()))
            .into_iter()
            .collect();
        let _: AgentInfo = client
            .inner
            .http
            .send(Req {
                body: Some(&body),
                headers: &headers,
                ..Req::new(Method::POST, "/v1/agents")
            })
            .await?;
        Ok(client)
    }

    /// The agent's id.
    pub fn agent_id(&self) -> &str {
        &self.inner.agent_id
    }

    /// The agent's token (a secret: store it like a password).
    pub fn token(&self) -> &AgentToken {
        &self.inner.token
    }

    /// The relay's base URL.
    pub fn relay_url(&self) -> &str {
        self.inner.http.base()
    }

    pub(crate) fn req<'a, B: serde::Serialize>(&'a self, method: Method, path: &'a str) -> Req<'a, B> {
        Req {
            bearer: Some(self.inner.bearer.expose()),
            ..Req::new(method, path)
        }
    }

    /// The agent as the relay knows it.
    pub async fn info(&self) -> Result<AgentInfo> {
        self.inner
            .http
            .send(self.req::<()>(Method::GET, "/v1/agent"))
            .await
    }

    /// Presence and counts, as the phone sees them.
    pub async fn status(&self) -> Result<Status> {
        self.inner
            .http
            .send(self.req::<()>(Method::GET, "/v1/agent/status"))
            .await
    }
}

/// Refuses empty text and text over [`pacerelle_core::message::MAX_TEXT_BYTES`].
pub(crate) fn check_text(what: &str, text: &str) -> Result<()> {
    if text.trim().is_empty() {
        return Err(Error::InvalidInput(format!("{what} needs some text")));
    }
    if text.len() > pacerelle_core::message::MAX_TEXT_BYTES {
        return Err(Error::InvalidInput(format!("{what} is at most 64 KiB of text")));
    }
    Ok(())
}

/// Checks a user's `externalId` as every call taking one does.
pub(crate) fn check_user(external_id: &str) -> Result<()> {
    pacerelle_core::roster::check_external_id(external_id).map_err(|e| Error::InvalidInput(e.into()))
}
