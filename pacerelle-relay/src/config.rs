//! The relay's configuration.

use std::path::PathBuf;
use std::time::Duration;

/// How to run a relay. Built by `pacerelle serve` from its flags and environment.
#[derive(Clone, Default)]
pub struct Config {
    /// A PostgreSQL database to use instead of the SQLite file (`--database postgres://…`); the data folder
    /// (the folder of [`Config::database_path`]) still holds the relay's keys.
    pub database_url: Option<String>,
    /// The SQLite database file; created with its schema if missing.
    pub database_path: PathBuf,
    /// Whether anyone may register an agent without the registration secret.
    pub open_registration: bool,
    /// The secret that `POST /v1/agents` must carry in `x-pacerelle-registration` when registration is not
    /// open. Without it (and without open registration) no agent can register.
    pub registration_secret: Option<String>,
    /// The URL at which phones reach this relay, when it differs from the address it listens on (behind a
    /// reverse proxy). Pairing links are made on the agent side; the relay only reports this URL in its log.
    pub public_url: Option<String>,
    /// The VAPID `sub` of Web Push requests: a `mailto:` or `https:` URL where push services can reach the
    /// operator (`--push-contact`). Default: the public URL.
    pub push_contact: Option<String>,
    /// Whether push endpoints may be `http` or resolve to private, loopback or link-local addresses
    /// (`--allow-private-push-endpoints`: tests and home labs). Off by default (SSRF).
    pub allow_private_push_endpoints: bool,
    /// How pushes are delivered (tests shorten the delays).
    pub push: crate::push::PushSettings,
    /// Reverse proxies whose forwarding headers (`Forwarded`, `X-Forwarded-For`) name the client that the rate
    /// limits count (`--trusted-proxy`). Empty: every request counts for its peer address.
    pub trusted_proxies: Vec<crate::Cidr>,
    /// Timeouts and the cap on open connections, the same for HTTP and HTTPS (`docs/self-hosting.md`).
    pub connections: Connections,
    /// What one agent may hold at once (`docs/relay-api.md`, `quota_exceeded`).
    pub quotas: Quotas,
    /// How long old data is kept before the sweeper deletes it (`--retain-days`, `--retain-answers-days`).
    pub retention: Retention,
    /// Whether `GET /metrics` answers (`--metrics`). Off by default: the figures tell how busy the relay is, and
    /// whoever reaches the relay could read them.
    pub metrics: bool,
}

/// How the relay treats connections: what a client that connects and then sends nothing, or sends slowly,
/// can hold. The same over HTTP and HTTPS. Parked long-polls are requests being answered, not idle
/// connections: they keep their 55 s.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connections {
    /// A connection that has not sent a complete request head (line and headers) this long after it opened
    /// (after the TLS handshake, over HTTPS), or after the first byte of a next request on a kept-alive
    /// connection, is closed without an answer (`--header-timeout`). Default 10 s.
    pub header_timeout: Duration,
    /// A request whose body has not fully arrived this long after its head is answered `408
    /// request_timeout` and its connection closed (`--body-timeout`). Default 30 s.
    pub body_timeout: Duration,
    /// A kept-alive connection with no request in progress (between a response and the first byte of the
    /// next request) is closed after this long (`--idle-timeout`). Default 60 s.
    pub idle_timeout: Duration,
    /// Connections open at once at most, TLS handshakes included (`--max-connections`). Beyond it a new
    /// connection takes the place of the one that has gone longest without a request in progress, which is
    /// closed; when every connection has a request in progress, the new one is refused (closed at once; over
    /// plain HTTP after a `503 unavailable` written without reading). `None`: the process's soft file limit
    /// (raised to the hard limit at start) less 128, within 32..=65 536. `Some(0)` is refused by
    /// [`crate::Relay::serve`].
    pub max_connections: Option<usize>,
}

impl Default for Connections {
    fn default() -> Self {
        Connections {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            max_connections: None,
        }
    }
}

/// What one agent may hold at once. A write that would pass a cap is refused with `quota_exceeded` (HTTP 429)
/// and stores nothing; what is already stored stays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quotas {
    /// Tasks sent to the agent and not yet marked processed (`--max-pending-tasks`). Default 10 000.
    pub max_pending_tasks: u32,
    /// The agent's questions still open: neither answered, cancelled nor expired (`--max-open-questions`).
    /// Default 1 000.
    pub max_open_questions: u32,
    /// Webhook events of the agent waiting for delivery (`--max-pending-events`); beyond it the oldest pending
    /// events are failed as `dropped` so the newest get through. Default 1 000.
    pub max_pending_events: u32,
}

impl Default for Quotas {
    fn default() -> Self {
        Quotas {
            max_pending_tasks: 10_000,
            max_open_questions: 1_000,
            max_pending_events: 1_000,
        }
    }
}

/// How long the relay keeps what is finished (`docs/self-hosting.md`, "Retention"). The sweeper deletes what is
/// older, a few hundred rows per write transaction, at start and every 30 s. Tasks not yet processed, open
/// questions, devices, agents and sessions are never deleted by age; cursors stay valid (a client with an old
/// cursor just finds fewer items after it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retention {
    /// Tasks processed longer ago than this (with the updates about them), replies, notifications and
    /// checkpoints stored longer ago (each agent's newest checkpoint is kept), finished webhook events and
    /// expired pushes (`--retain-days`). `None`: kept forever. Default 30 days.
    pub items: Option<Duration>,
    /// Questions answered, expired or cancelled longer ago than this, with their envelopes, updates and
    /// webhook events: the answer log (`--retain-answers-days`). `None`: kept forever. Default 365 days.
    pub answers: Option<Duration>,
}

/// One day.
const DAY: Duration = Duration::from_secs(24 * 3600);

impl Retention {
    /// Keeps everything forever.
    pub const FOREVER: Retention = Retention {
        items: None,
        answers: None,
    };
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            items: Some(DAY * 30),
            answers: Some(DAY * 365),
        }
    }
}

impl Config {
    /// A configuration with this database file, closed registration and no secret.
    pub fn new(database_path: impl Into<PathBuf>) -> Self {
        Config {
            database_path: database_path.into(),
            ..Config::default()
        }
    }
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("database_path", &self.database_path)
            .field("database_url", &self.database_url.as_ref().map(|_| "…"))
            .field("open_registration", &self.open_registration)
            .field(
                "registration_secret",
                &self.registration_secret.as_ref().map(|_| "…"),
            )
            .field("public_url", &self.public_url)
            .field("push_contact", &self.push_contact)
            .field("allow_private_push_endpoints", &self.allow_private_push_endpoints)
            .field("push", &self.push)
            .field("trusted_proxies", &self.trusted_proxies)
            .field("connections", &self.connections)
            .field("quotas", &self.quotas)
            .field("retention", &self.retention)
            .field("metrics", &self.metrics)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_the_registration_secret() {
        let config = Config {
            registration_secret: Some("hunter2".into()),
            ..Config::new("/tmp/relay.db")
        };
        let text = format!("{config:?}");
        assert!(!text.contains("hunter2"));
        assert!(text.contains("relay.db"));
    }
}
