//! The relay's configuration.

use std::path::PathBuf;

/// How to run a relay. Built by `pacerelle serve` from its flags and environment.
#[derive(Clone, Default)]
pub struct Config {
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
