//! Configuration from the environment: the agent's credentials and the relay's address.

use pacerelle_client::{AgentToken, DEFAULT_RELAY_URL};

/// Variable holding the agent's id (`ag_…`).
pub const AGENT_ID_VAR: &str = "PACERELLE_AGENT_ID";
/// Variable holding the agent's token (`pcr1_…`).
pub const AGENT_TOKEN_VAR: &str = "PACERELLE_AGENT_TOKEN";
/// Variable holding the relay's base URL.
pub const RELAY_URL_VAR: &str = "PACERELLE_RELAY_URL";

/// What the server needs to act as an agent.
#[derive(Debug, Clone)]
pub struct Config {
    /// The relay's base URL (default [`DEFAULT_RELAY_URL`]).
    pub relay_url: String,
    /// The agent's id.
    pub agent_id: String,
    /// The agent's token. `Debug` never shows it.
    pub token: AgentToken,
    /// Take the agent's lease even if another session holds it.
    pub takeover: bool,
}

/// Why the configuration is unusable. Messages name the variable and never echo a secret.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// A required variable is not set or empty.
    #[error(
        "{0} is not set. Set PACERELLE_AGENT_ID and PACERELLE_AGENT_TOKEN to the values printed by \
         `pacerelle agent create` (or `pacerelle up`) in the MCP host's configuration for pacerelle-mcp"
    )]
    Missing(&'static str),
    /// The agent id is not a valid id.
    #[error(
        "PACERELLE_AGENT_ID is not a valid agent id ({0}); expected the `ag_…` id printed by \
         `pacerelle agent create`"
    )]
    AgentId(String),
    /// The token does not parse or its checksum does not match.
    #[error(
        "PACERELLE_AGENT_TOKEN is malformed: expected the whole `pcr1_…` token printed by \
         `pacerelle agent create` (check that it was copied completely)"
    )]
    Token,
    /// The relay URL is not http(s).
    #[error("PACERELLE_RELAY_URL must start with http:// or https:// (got {0:?})")]
    RelayUrl(String),
}

impl Config {
    /// Reads the configuration through `var` (the process environment in `main`, a map in tests).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>, takeover: bool) -> Result<Config, ConfigError> {
        let get = |name: &'static str| var(name).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        let agent_id = get(AGENT_ID_VAR).ok_or(ConfigError::Missing(AGENT_ID_VAR))?;
        pacerelle_client::core::ids::validate("agent id", &agent_id)
            .map_err(|e| ConfigError::AgentId(e.to_string()))?;
        let token_text = get(AGENT_TOKEN_VAR).ok_or(ConfigError::Missing(AGENT_TOKEN_VAR))?;
        let token = AgentToken::parse(&token_text).map_err(|_| ConfigError::Token)?;
        let relay_url = get(RELAY_URL_VAR).unwrap_or_else(|| DEFAULT_RELAY_URL.to_string());
        if !(relay_url.starts_with("http://") || relay_url.starts_with("https://")) {
            return Err(ConfigError::RelayUrl(relay_url));
        }
        Ok(Config {
            relay_url,
            agent_id,
            token,
            takeover,
        })
    }

    /// Reads the configuration from the process environment.
    pub fn from_env(takeover: bool) -> Result<Config, ConfigError> {
        Config::from_vars(|name| std::env::var(name).ok(), takeover)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn complete_configuration() {
        let token = AgentToken::generate();
        let text = token.expose();
        let config = Config::from_vars(vars(&[(AGENT_ID_VAR, "ag_x"), (AGENT_TOKEN_VAR, &text)]), true)
            .expect("valid");
        assert_eq!(config.relay_url, DEFAULT_RELAY_URL);
        assert_eq!(config.agent_id, "ag_x");
        assert_eq!(config.token, token);
        assert!(config.takeover);
        assert!(
            !format!("{config:?}").contains(&text),
            "Debug must not show the token"
        );
    }

    #[test]
    fn missing_and_malformed_values_are_named() {
        let token = AgentToken::generate().expose();
        assert_eq!(
            Config::from_vars(vars(&[]), false).expect_err("refused"),
            ConfigError::Missing(AGENT_ID_VAR)
        );
        assert_eq!(
            Config::from_vars(vars(&[(AGENT_ID_VAR, "ag_x"), (AGENT_TOKEN_VAR, "  ")]), false)
                .expect_err("refused"),
            ConfigError::Missing(AGENT_TOKEN_VAR)
        );
        assert!(matches!(
            Config::from_vars(vars(&[(AGENT_ID_VAR, "a b"), (AGENT_TOKEN_VAR, &token)]), false),
            Err(ConfigError::AgentId(_))
        ));
        let bad = Config::from_vars(
            vars(&[(AGENT_ID_VAR, "ag_x"), (AGENT_TOKEN_VAR, "pcr1_secretish")]),
            false,
        )
        .expect_err("refused");
        assert_eq!(bad, ConfigError::Token);
        assert!(!bad.to_string().contains("secretish"));
        assert!(matches!(
            Config::from_vars(
                vars(&[
                    (AGENT_ID_VAR, "ag_x"),
                    (AGENT_TOKEN_VAR, &token),
                    (RELAY_URL_VAR, "relay.example")
                ]),
                false
            ),
            Err(ConfigError::RelayUrl(_))
        ));
    }
}
