//! The agent side: register, pair devices, wait for tasks, reply, mark processed, checkpoints, lease.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use pacerelle_core::checkpoint::{CheckpointPayload, checkpoint_aad};
use pacerelle_core::envelope;
use pacerelle_core::message::{ReplyPayload, TaskPayload, reply_aad, task_aad};
use pacerelle_core::pairing::{self, Branding, OfferPayload, OfferUser, PairingSecret, Role};
use pacerelle_core::roster;
use pacerelle_core::wire::{
    self, AgentInfo, CheckpointList, CreatePairing, DeviceEnvelope, DeviceInfo, DeviceList, MessageBatch,
    OpenSession, PairingCreated, Processed, RegisterAgent, SaveCheckpoint, SendReply, SessionInfo, Status,
    Stored,
};
use pacerelle_core::{AgentToken, Bearer, CryptoError, Cursor, Timestamp, b64, ids};
use reqwest::Method;
use serde::Deserialize;

use crate::error::{Error, Result};
use crate::http::{Http, Req, Retry};
use crate::roster::RosterMark;

/// Heartbeats are sent this often while a session is open (the relay's lease lasts 30 s).
const HEARTBEAT_EVERY: Duration = Duration::from_secs(10);

/// A task received by the agent, opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The id the device chose; reply with it as `source_message_id`.
    pub message_id: String,
    /// What the person asks.
    pub text: String,
    /// The device that sent it.
    pub from: String,
    /// That device's name.
    pub from_name: String,
    /// When the relay stored it.
    pub sent_at: Timestamp,
    /// Delivered before and not marked processed (for example before a crash).
    pub redelivered: bool,
    /// Its position in the stream.
    pub cursor: Cursor,
    /// Partner mode: the `externalId` of the user whose device sent it, as the agent's roster says; `None`
    /// when the owner sent it. A user's task is that user's request, not the owner's instruction.
    pub user: Option<String>,
}

/// How many tasks' senders a client remembers to address its replies ([`AgentClient::reply`]).
const REMEMBERED_SENDERS: usize = 4096;

/// A task whose envelope did not open. It is not the person's instruction; mark it processed to drop it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    /// Its id.
    pub message_id: String,
    /// The device it claims to come from.
    pub from: String,
    /// Why it was rejected.
    pub reason: CryptoError,
}

/// The result of a wait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inbox {
    /// Tasks, oldest first; empty when the wait ended without one.
    pub messages: Vec<Message>,
    /// Tasks that failed to open.
    pub rejected: Vec<Rejected>,
    /// Where to continue listening.
    pub cursor: Cursor,
}

/// A checkpoint, opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// Its id.
    pub checkpoint_id: String,
    /// What has been done.
    pub summary: String,
    /// What to do next.
    pub next_action: String,
    /// The tasks it concerns.
    pub message_ids: Vec<String>,
    /// When it was saved.
    pub created_at: Timestamp,
}

/// How to create a pairing offer.
#[derive(Debug, Clone)]
pub struct PairingOptions {
    /// A label for the future device ("phone").
    pub label: Option<String>,
    /// How long the offer can be claimed (default 10 minutes, at most one hour).
    pub ttl: Duration,
    /// The device's role.
    pub role: Role,
    /// The base URL a phone uses to reach the relay, when it differs from the one this client uses.
    pub public_url: Option<String>,
    /// Partner mode: the user the device will answer for (its role is then `user`); see
    /// [`AgentClient::connect_user`].
    pub user: Option<OfferUser>,
    /// Partner mode: how the app shows the agent to that user (accent colour, icon), sealed in the offer.
    pub branding: Option<Branding>,
}

impl Default for PairingOptions {
    fn default() -> Self {
        PairingOptions {
            label: None,
            ttl: Duration::from_secs(pairing::DEFAULT_TTL_SECONDS),
            role: Role::Owner,
            public_url: None,
            user: None,
            branding: None,
        }
    }
}

/// A pairing offer, ready to show as a link or QR code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PairingLink {
    /// `https://relay/pair#v1.…`: the secret is in the fragment, which never reaches the relay.
    pub link: String,
    /// The offer's public id.
    pub pairing_id: String,
    /// The device that claiming it will create.
    pub device_id: String,
    /// When it stops being claimable.
    pub expires_at: Timestamp,
}

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

#[derive(Debug)]
struct SessionState {
    id: String,
    heartbeat: tokio::task::JoinHandle<()>,
}

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
                roster_mark: RosterMark::new(RosterMark::default_home().as_deref(), agent_id),
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

    fn session_id(&self) -> Option<String> {
        self.inner
            .session
            .lock()
            .ok()
            .and_then(|g| g.as_ref().map(|s| s.id.clone()))
    }

    /// The agent as the relay knows it.
    pub async fn info(&self) -> Result<AgentInfo> {
        self.inner
            .http
            .send(self.req::<()>(Method::GET, "/v1/agent"))
            .await
    }

    /// Creates a pairing offer and returns its link. Whoever opens the link first becomes a device.
    pub async fn create_pairing(&self, options: PairingOptions) -> Result<PairingLink> {
        pairing::check_ttl(options.ttl).map_err(|e| Error::InvalidInput(e.into()))?;
        let role = if options.user.is_some() {
            Role::User
        } else {
            options.role
        };
        if let Some(user) = &options.user {
            let checked = roster::check_external_id(&user.external_id)
                .and_then(|()| roster::check_user_name(&user.name));
            checked.map_err(|e| Error::InvalidInput(e.into()))?;
        }
        if let Some(branding) = &options.branding {
            branding.validate().map_err(|e| Error::InvalidInput(e.into()))?;
        }
        let info = self.info().await?;
        let secret = PairingSecret::generate();
        let device_id = ids::generate(ids::DEVICE);
        // Listed in the agent's roster before the offer exists: the device it creates is the agent's own.
        self.add_to_roster(&device_id, role, options.user.as_ref())
            .await?;
        let expires_at = Timestamp::now().plus_millis(options.ttl.as_millis() as i64);
        let offer = OfferPayload {
            v: 1,
            agent_id: self.inner.agent_id.clone(),
            agent_name: info.name,
            device_id: device_id.clone(),
            device_key: b64::encode(
                &self
                    .inner
                    .token
                    .device_key(&self.inner.agent_id, &device_id)
                    .to_bytes(),
            ),
            role,
            expires_at,
            user: options.user.clone(),
            branding: options.branding.clone(),
        };
        let body = CreatePairing {
            pairing_id: secret.pairing_id(),
            device_id: device_id.clone(),
            label: options.label,
            role,
            claim_hash: b64::encode(&secret.claim_hash()),
            offer: pairing::seal_offer(&secret, &offer),
            expires_at,
        };
        let created: PairingCreated = self
            .inner
            .http
            .send(Req {
                body: Some(&body),
                ..self.req(Method::POST, "/v1/agent/pairings")
            })
            .await?;
        let base = options.public_url.as_deref().unwrap_or(self.inner.http.base());
        Ok(PairingLink {
            link: secret.link(base),
            pairing_id: created.pairing_id,
            device_id: created.device_id,
            expires_at: created.expires_at,
        })
    }

    /// Every device ever paired, revoked ones included.
    pub async fn devices(&self) -> Result<Vec<DeviceInfo>> {
        let list: DeviceList = self
            .inner
            .http
            .send(self.req::<()>(Method::GET, "/v1/agent/devices"))
            .await?;
        Ok(list.devices)
    }

    /// Revokes a device: first in the agent's roster (from then on its answers never approve, whatever the
    /// relay says), then at the relay (its credential stops working at once).
    pub async fn revoke_device(&self, device_id: &str) -> Result<DeviceInfo> {
        ids::validate("device id", device_id)?;
        self.revoke_in_roster(device_id).await?;
        self.revoke_at_relay(device_id).await
    }

    /// Tells the relay a device is revoked, for a device the roster already lists as revoked.
    pub(crate) async fn revoke_at_relay(&self, device_id: &str) -> Result<DeviceInfo> {
        let path = format!("/v1/agent/devices/{device_id}");
        self.inner.http.send(self.req::<()>(Method::DELETE, &path)).await
    }

    /// Takes the agent's lease: from now on only this client consumes the inbox. A heartbeat keeps it.
    ///
    /// Fails with the relay's `agent_in_use` error, naming the holder, unless `takeover` is set.
    pub async fn open_session(&self, host: &str, takeover: bool) -> Result<SessionInfo> {
        let body = OpenSession {
            host: host.to_string(),
            takeover,
        };
        let info: SessionInfo = self
            .inner
            .http
            .send(Req {
                body: Some(&body),
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

    /// Waits for tasks. Without a cursor: every task not yet processed (those delivered before come again,
    /// flagged `redelivered`). With one: tasks after it. Parks up to `wait` (at most 55 s) when there is none.
    pub async fn wait_for_messages(&self, cursor: Option<Cursor>, wait: Duration) -> Result<Inbox> {
        let wait = wait.min(Duration::from_secs(wire::MAX_WAIT_SECONDS));
        let mut query = vec![("wait", wait.as_secs().to_string())];
        if let Some(c) = cursor {
            query.push(("cursor", c.to_string()));
        }
        let batch: MessageBatch = self
            .inner
            .http
            .send(Req {
                query: &query,
                session: self.session_id(),
                wait: Some(wait),
                ..self.req::<()>(Method::GET, "/v1/agent/messages")
            })
            .await?;
        let mut inbox = Inbox {
            messages: Vec::new(),
            rejected: Vec::new(),
            cursor: batch.cursor,
        };
        // Only a device the agent's roster lists as active sends the person's instructions.
        let roster = if batch.messages.is_empty() {
            None
        } else {
            Some(self.roster().await?)
        };
        for m in batch.messages {
            if roster.as_ref().is_some_and(|r| !r.is_active(&m.from)) {
                tracing::warn!(message_id = %m.message_id, from = %m.from, "a task from a device the roster does not trust; rejected");
                inbox.rejected.push(Rejected {
                    message_id: m.message_id,
                    from: m.from,
                    reason: CryptoError::NotTrusted,
                });
                continue;
            }
            let key = self.inner.token.device_key(&self.inner.agent_id, &m.from);
            let aad = task_aad(&self.inner.agent_id, &m.from, &m.message_id);
            match envelope::open_json::<TaskPayload>(&key, &aad, &m.envelope) {
                Ok(task) => {
                    let user = roster
                        .as_ref()
                        .and_then(|r| r.device(&m.from))
                        .and_then(|d| d.user.clone());
                    self.remember_sender(&m.message_id, user.clone());
                    inbox.messages.push(Message {
                        message_id: m.message_id,
                        text: task.text,
                        from: m.from,
                        from_name: m.from_name,
                        sent_at: m.sent_at,
                        redelivered: m.redelivered,
                        cursor: m.cursor,
                        user,
                    });
                }
                Err(e) => {
                    let reason = match e {
                        pacerelle_core::Error::Crypto(c) => c,
                        _ => CryptoError::Open,
                    };
                    tracing::warn!(message_id = %m.message_id, from = %m.from, "a task did not open; rejected");
                    inbox.rejected.push(Rejected {
                        message_id: m.message_id,
                        from: m.from,
                        reason,
                    });
                }
            }
        }
        Ok(inbox)
    }

    fn remember_sender(&self, message_id: &str, user: Option<String>) {
        if let Ok(mut senders) = self.inner.senders.lock() {
            if senders.len() >= REMEMBERED_SENDERS {
                senders.clear();
            }
            senders.insert(message_id.to_string(), user);
        }
    }

    /// Replies to a task, sealed for each device of the task's audience that the agent's roster and the
    /// relay both list as active: the owner's devices, or (Partner mode) the devices of the user who sent
    /// it. The sender is known for tasks this client received ([`AgentClient::wait_for_messages`]); a reply
    /// to a task it did not receive goes to the owner's devices, never to a user's. Idempotent by `reply_id`
    /// (one is drawn when `None`; pass your own to retry safely across restarts).
    pub async fn reply(&self, source_message_id: &str, text: &str, reply_id: Option<&str>) -> Result<Stored> {
        ids::validate("source message id", source_message_id)?;
        check_text("a reply", text)?;
        let reply_id = match reply_id {
            Some(id) => {
                ids::validate("reply id", id)?;
                id.to_string()
            }
            None => ids::generate(ids::REPLY),
        };
        let payload = ReplyPayload {
            text: text.to_string(),
            source_message_id: source_message_id.to_string(),
        };
        let user = self
            .inner
            .senders
            .lock()
            .ok()
            .and_then(|s| s.get(source_message_id).cloned())
            .flatten();
        // No trusted device left: the reply is stored for nobody, as before any device was paired.
        let envelopes = self
            .trusted_devices(user.as_deref())
            .await?
            .0
            .into_iter()
            .map(|device_id| {
                let key = self.inner.token.device_key(&self.inner.agent_id, &device_id);
                let aad = reply_aad(&self.inner.agent_id, &device_id, &reply_id);
                let envelope = envelope::seal_json(&key, &aad, &payload);
                DeviceEnvelope { device_id, envelope }
            })
            .collect();
        let body = SendReply {
            reply_id,
            source_message_id: source_message_id.to_string(),
            envelopes,
        };
        self.inner
            .http
            .send(Req {
                body: Some(&body),
                ..self.req(Method::POST, "/v1/agent/replies")
            })
            .await
    }

    /// Marks a task processed: the acknowledgement. Idempotent and final.
    pub async fn mark_processed(&self, message_id: &str) -> Result<Processed> {
        ids::validate("message id", message_id)?;
        let path = format!("/v1/agent/messages/{message_id}/processed");
        self.inner
            .http
            .send(Req {
                session: self.session_id(),
                ..self.req::<()>(Method::POST, &path)
            })
            .await
    }

    /// Saves a checkpoint, sealed with the agent's own key.
    pub async fn save_checkpoint(
        &self,
        summary: &str,
        next_action: &str,
        message_ids: &[String],
    ) -> Result<Checkpoint> {
        for id in message_ids {
            ids::validate("message id", id)?;
        }
        check_text("a checkpoint's summary", summary)?;
        check_text("a checkpoint's next action", next_action)?;
        let checkpoint_id = ids::generate(ids::CHECKPOINT);
        let payload = CheckpointPayload {
            summary: summary.to_string(),
            next_action: next_action.to_string(),
            message_ids: message_ids.to_vec(),
        };
        let key = self.inner.token.self_key(&self.inner.agent_id);
        let envelope = envelope::seal_json(
            &key,
            &checkpoint_aad(&self.inner.agent_id, &checkpoint_id),
            &payload,
        );
        let body = SaveCheckpoint {
            checkpoint_id: checkpoint_id.clone(),
            envelope,
        };
        let stored: Stored = self
            .inner
            .http
            .send(Req {
                body: Some(&body),
                ..self.req(Method::POST, "/v1/agent/checkpoints")
            })
            .await?;
        Ok(Checkpoint {
            checkpoint_id,
            summary: payload.summary,
            next_action: payload.next_action,
            message_ids: payload.message_ids,
            created_at: stored.created_at,
        })
    }

    /// The latest checkpoints, latest first (`limit` 1 to 100).
    pub async fn checkpoints(&self, limit: u32) -> Result<Vec<Checkpoint>> {
        let limit = limit.clamp(1, wire::MAX_CHECKPOINT_LIMIT);
        let query = [("limit", limit.to_string())];
        let list: CheckpointList = self
            .inner
            .http
            .send(Req {
                query: &query,
                ..self.req::<()>(Method::GET, "/v1/agent/checkpoints")
            })
            .await?;
        let key = self.inner.token.self_key(&self.inner.agent_id);
        list.checkpoints
            .into_iter()
            .map(|c| {
                let payload: CheckpointPayload = envelope::open_json(
                    &key,
                    &checkpoint_aad(&self.inner.agent_id, &c.checkpoint_id),
                    &c.envelope,
                )?;
                Ok(Checkpoint {
                    checkpoint_id: c.checkpoint_id,
                    summary: payload.summary,
                    next_action: payload.next_action,
                    message_ids: payload.message_ids,
                    created_at: c.created_at,
                })
            })
            .collect()
    }

    /// Presence and counts, as the phone sees them.
    pub async fn status(&self) -> Result<Status> {
        self.inner
            .http
            .send(self.req::<()>(Method::GET, "/v1/agent/status"))
            .await
    }
}

/// An agent's credentials, found as the CLI and the wheel find them: `PACERELLE_AGENT_ID` and
/// `PACERELLE_AGENT_TOKEN` (both or neither), else `agent.json` in the credentials folder, the file
/// `pacerelle agent create` and `pacerelle up` write. The relay is `PACERELLE_RELAY_URL` when set, else the
/// one `agent.json` holds when that file is for the same agent id (so that an MCP host entry with only the id
/// and the token, such as `npx -y @pacerelle/mcp-server`, reaches the relay the agent was created on), else
/// `None` (the caller's default, where `pacerelle up` listens).
#[derive(Debug, Clone)]
pub struct AgentCredentials {
    /// The relay's URL, when given.
    pub relay_url: Option<String>,
    /// The agent's id.
    pub agent_id: String,
    /// Its token.
    pub token: AgentToken,
}

impl AgentCredentials {
    /// The credentials file's name in the credentials folder.
    pub const FILE: &'static str = "agent.json";

    /// Finds them through `var` (the environment, or what stands for it) and in `home` (`None`:
    /// `PACERELLE_HOME` through `var`, else the user's config folder + `pacerelle`). The errors say what to
    /// set or run, and name the file or variable a malformed id or token came from.
    pub fn find(var: impl Fn(&str) -> Option<String>, home: Option<&std::path::Path>) -> Result<Self> {
        let var = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        let relay_url = var("PACERELLE_RELAY_URL");
        let token = |text: &str, source: &str| {
            AgentToken::parse(text.trim()).map_err(|e| Error::InvalidInput(format!("{source}: {e}")))
        };
        let agent_id = |text: &str, source: &str| {
            let id = text.trim().to_string();
            ids::validate("agent id", &id).map_err(|e| Error::InvalidInput(format!("{source}: {e}")))?;
            Ok::<_, Error>(id)
        };
        let home = || match home {
            Some(home) => Some(home.to_path_buf()),
            None => var("PACERELLE_HOME")
                .map(std::path::PathBuf::from)
                .or_else(|| dirs::config_dir().map(|d| d.join("pacerelle"))),
        };
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct File {
            relay_url: Option<String>,
            agent_id: String,
            token: String,
        }
        match (var("PACERELLE_AGENT_ID"), var("PACERELLE_AGENT_TOKEN")) {
            (Some(id), Some(text)) => {
                let agent_id = agent_id(&id, "PACERELLE_AGENT_ID")?;
                // No relay variable: the relay saved with this same agent, if the file is for it. A file that
                // is missing, unreadable or for another agent is not an error: the variables are complete.
                let relay_url = relay_url.or_else(|| {
                    let bytes = std::fs::read(home()?.join(Self::FILE)).ok()?;
                    let file: File = serde_json::from_slice(&bytes).ok()?;
                    (file.agent_id.trim() == agent_id)
                        .then_some(file.relay_url)
                        .flatten()
                        .filter(|url| !url.trim().is_empty())
                });
                Ok(AgentCredentials {
                    relay_url,
                    agent_id,
                    token: token(&text, "PACERELLE_AGENT_TOKEN")?,
                })
            }
            (None, None) => {
                let home = home().ok_or_else(|| {
                    Error::InvalidInput("no config directory on this system: set PACERELLE_HOME".into())
                })?;
                let path = home.join(Self::FILE);
                let bytes = match std::fs::read(&path) {
                    Ok(bytes) => bytes,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        return Err(Error::InvalidInput(format!(
                            "no agent credentials: set PACERELLE_AGENT_ID and PACERELLE_AGENT_TOKEN (the relay is \
                             PACERELLE_RELAY_URL, else the one saved with that agent in {path}, else {default}), \
                             or run `pacerelle agent create --name NAME` (writes {path})",
                            path = path.display(),
                            default = crate::DEFAULT_RELAY_URL,
                        )));
                    }
                    Err(e) => {
                        return Err(Error::InvalidInput(format!(
                            "cannot read {}: {e}",
                            path.display()
                        )));
                    }
                };
                let file: File = serde_json::from_slice(&bytes).map_err(|e| {
                    Error::InvalidInput(format!("{} is not valid ({e}); fix or remove it", path.display()))
                })?;
                Ok(AgentCredentials {
                    relay_url: relay_url.or(file.relay_url),
                    agent_id: agent_id(&file.agent_id, &format!("the agent id in {}", path.display()))?,
                    token: token(&file.token, &format!("the token in {}", path.display()))?,
                })
            }
            _ => Err(Error::InvalidInput(
                "set both PACERELLE_AGENT_ID and PACERELLE_AGENT_TOKEN, or neither".into(),
            )),
        }
    }
}

/// The one rule for a reply's id, derived so that sending a reply again stores it once (the relay keeps one
/// reply per id):
/// - `None`: the task's one final reply, derived from the task's id alone; a supervised agent ([`Runner`])
///   that replies with it never answers a redelivered task twice, whatever its handler says the second time;
/// - `Some(text)`: one reply among several to the task (the MCP server's `reply`), derived from the task's id
///   and the text, so the same text sent twice is stored once and a different one is a new reply.
///
/// [`Runner`]: crate::Runner
pub fn reply_id_for(message_id: &str, text: Option<&str>) -> String {
    match text {
        None => format!(
            "{}_{}",
            ids::REPLY,
            &b64::encode(&pacerelle_core::keys::sha256(message_id.as_bytes()))[..22]
        ),
        Some(text) => {
            let mut input = Vec::with_capacity(message_id.len() + 1 + text.len());
            input.extend_from_slice(message_id.as_bytes());
            input.push(0);
            input.extend_from_slice(text.as_bytes());
            format!(
                "{}_{}",
                ids::REPLY,
                &b64::encode(&pacerelle_core::keys::sha256(&input))[..26]
            )
        }
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
            Err(e) if e.code() == Some(wire::code::LEASE_LOST) => {
                tracing::warn!("the agent's lease was lost: another session took it over or it expired");
                return;
            }
            Err(e) => tracing::debug!(error = %e, "heartbeat failed; will try again"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let map: std::collections::HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn credentials_from_the_environment_else_the_file_with_errors_that_say_what_to_do() {
        let dir = tempfile::tempdir().expect("dir");
        let token = AgentToken::generate().expose();
        let env = vars(&[("PACERELLE_AGENT_ID", "ag_1"), ("PACERELLE_AGENT_TOKEN", &token)]);
        let found = AgentCredentials::find(env, Some(dir.path())).expect("from the environment");
        assert_eq!((found.agent_id.as_str(), found.relay_url), ("ag_1", None));

        let missing = AgentCredentials::find(vars(&[]), Some(dir.path())).expect_err("nothing");
        assert!(missing.to_string().contains("no agent credentials"), "{missing}");
        let half = AgentCredentials::find(vars(&[("PACERELLE_AGENT_ID", "ag_1")]), Some(dir.path()));
        assert!(half.expect_err("half").to_string().contains("both"));
        let bad = vars(&[
            ("PACERELLE_AGENT_ID", "ag_1"),
            ("PACERELLE_AGENT_TOKEN", "pcr1_nope"),
        ]);
        let bad = AgentCredentials::find(bad, Some(dir.path())).expect_err("malformed");
        assert!(bad.to_string().contains("PACERELLE_AGENT_TOKEN"), "{bad}");

        let file = dir.path().join(AgentCredentials::FILE);
        std::fs::write(
            &file,
            format!(r#"{{"relayUrl":"http://relay:1","agentId":"ag_2","name":"n","token":"{token}"}}"#),
        )
        .expect("write");
        let home = vars(&[("PACERELLE_HOME", dir.path().to_str().expect("utf-8"))]);
        let found = AgentCredentials::find(home, None).expect("from the file");
        assert_eq!(found.agent_id, "ag_2");
        assert_eq!(found.relay_url.as_deref(), Some("http://relay:1"));
        let over = vars(&[("PACERELLE_RELAY_URL", "http://other:2")]);
        let found = AgentCredentials::find(over, Some(dir.path())).expect("from the file");
        assert_eq!(
            found.relay_url.as_deref(),
            Some("http://other:2"),
            "the variable wins"
        );
        std::fs::write(&file, r#"{"agentId":"ag_2","token":"pcr1_nope"}"#).expect("write");
        let bad = AgentCredentials::find(vars(&[]), Some(dir.path())).expect_err("malformed");
        assert!(bad.to_string().contains(&file.display().to_string()), "{bad}");

        // A malformed agent id is named by where it came from too.
        let bad = vars(&[("PACERELLE_AGENT_ID", "ag 1"), ("PACERELLE_AGENT_TOKEN", &token)]);
        let bad = AgentCredentials::find(bad, Some(dir.path())).expect_err("malformed id");
        assert!(bad.to_string().contains("PACERELLE_AGENT_ID: "), "{bad}");
        std::fs::write(&file, format!(r#"{{"agentId":"ag 2","token":"{token}"}}"#)).expect("write");
        let bad = AgentCredentials::find(vars(&[]), Some(dir.path())).expect_err("malformed id");
        assert!(
            bad.to_string()
                .contains(&format!("the agent id in {}", file.display())),
            "{bad}"
        );
    }

    #[test]
    fn variables_without_a_relay_take_the_relay_saved_with_the_same_agent() {
        let dir = tempfile::tempdir().expect("dir");
        let token = AgentToken::generate().expose();
        let saved = |agent: &str| {
            let file = format!(
                r#"{{"relayUrl":"https://relay.example","agentId":"{agent}","name":"n","token":"{token}"}}"#
            );
            std::fs::write(dir.path().join(AgentCredentials::FILE), file).expect("write");
        };
        let only_id_and_token = || vars(&[("PACERELLE_AGENT_ID", "ag_1"), ("PACERELLE_AGENT_TOKEN", &token)]);
        saved("ag_1");
        let found = AgentCredentials::find(only_id_and_token(), Some(dir.path())).expect("found");
        assert_eq!(found.relay_url.as_deref(), Some("https://relay.example"));
        // Through PACERELLE_HOME as well, as an MCP host's environment gives it.
        let home = dir.path().to_str().expect("utf-8");
        let with_home = vars(&[
            ("PACERELLE_AGENT_ID", "ag_1"),
            ("PACERELLE_AGENT_TOKEN", &token),
            ("PACERELLE_HOME", home),
        ]);
        let found = AgentCredentials::find(with_home, None).expect("found");
        assert_eq!(found.relay_url.as_deref(), Some("https://relay.example"));
        // The variable still wins.
        let over = vars(&[
            ("PACERELLE_AGENT_ID", "ag_1"),
            ("PACERELLE_AGENT_TOKEN", &token),
            ("PACERELLE_RELAY_URL", "http://other:2"),
        ]);
        let found = AgentCredentials::find(over, Some(dir.path())).expect("found");
        assert_eq!(found.relay_url.as_deref(), Some("http://other:2"));
        // Another agent's file says nothing about this one's relay, and a broken file is no error.
        saved("ag_2");
        let found = AgentCredentials::find(only_id_and_token(), Some(dir.path())).expect("found");
        assert_eq!((found.agent_id.as_str(), found.relay_url), ("ag_1", None));
        std::fs::write(dir.path().join(AgentCredentials::FILE), "{").expect("write");
        let found = AgentCredentials::find(only_id_and_token(), Some(dir.path())).expect("found");
        assert_eq!(found.relay_url, None);
    }

    #[test]
    fn one_reply_id_rule_final_and_per_text() {
        let last = reply_id_for("msg_1", None);
        assert_eq!(last, reply_id_for("msg_1", None));
        assert_ne!(last, reply_id_for("msg_2", None));
        let a = reply_id_for("msg_1", Some("done"));
        assert_eq!(a, reply_id_for("msg_1", Some("done")));
        assert_ne!(a, reply_id_for("msg_1", Some("done!")));
        assert_ne!(a, reply_id_for("msg_2", Some("done")));
        assert_ne!(a, last);
        for id in [&a, &last] {
            ids::validate("reply id", id).expect("valid id");
            assert!(id.starts_with("rep_"));
        }
    }
}
