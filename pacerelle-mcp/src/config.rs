//! Configuration from the environment: the agent's credentials (by the client's one rule,
//! [`AgentCredentials::find`]: the variables, else the `agent.json` that `pacerelle agent create` writes), the
//! relay's address, and what the text of a tool result carries.

use pacerelle_client::{AgentToken, agent::AgentCredentials};

/// Variable holding the agent's id (`ag_…`).
pub const AGENT_ID_VAR: &str = "PACERELLE_AGENT_ID";
/// Variable holding the agent's token (`pcr1_…`).
pub const AGENT_TOKEN_VAR: &str = "PACERELLE_AGENT_TOKEN";
/// Variable holding the relay's base URL.
pub const RELAY_URL_VAR: &str = "PACERELLE_RELAY_URL";
/// Variable choosing what the text of a successful tool result carries: `json` (default) or `guide`.
pub const RESULT_TEXT_VAR: &str = "PACERELLE_MCP_RESULT_TEXT";
/// Variable giving `ask_user`'s `alsoAskHere` default: `1`/`true` to also ask at the computer when the host
/// supports elicitation, `0`/`false` (the default) for the phone only.
pub const ALSO_ASK_HERE_VAR: &str = "PACERELLE_MCP_ALSO_ASK_HERE";
/// Variable naming this server's session of the agent (`--session` wins over it): several sessions of one
/// agent, each with its own name, listen side by side, each receiving the tasks sent to it or to any session.
/// Unset: the default session, one per agent.
pub const SESSION_VAR: &str = "PACERELLE_SESSION";

/// What the text blocks of a successful tool result carry besides the next step for the model. The result's
/// `structuredContent` is always there (every tool declares an `outputSchema`); this only decides whether
/// its JSON is repeated as text.
///
/// MCP 2025-11-25 and 2026-07-28 both say: "For backwards compatibility, a tool that returns structured
/// content SHOULD also return the serialized JSON in a TextContent block." A host that gives the model only
/// the text blocks needs that copy to see a task at all; a host that gives the model both pays for every
/// task twice. Which hosts do which is not established here, so the default keeps every host working.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ResultText {
    /// The next step, then the result's JSON (as the specification recommends). Works with every host.
    #[default]
    Json,
    /// The next step and where to read the result in `structuredContent`, without repeating it: a 64 KiB
    /// task travels once. Only for hosts that show `structuredContent` to the model.
    Guide,
}

impl ResultText {
    /// Reads `PACERELLE_MCP_RESULT_TEXT` through `var`: unset or empty is [`ResultText::Json`].
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<ResultText, ConfigError> {
        match var(RESULT_TEXT_VAR)
            .map(|v| v.trim().to_ascii_lowercase())
            .as_deref()
        {
            None | Some("") | Some("json") => Ok(ResultText::Json),
            Some("guide") => Ok(ResultText::Guide),
            Some(other) => Err(ConfigError::ResultText(other.to_string())),
        }
    }

    /// Reads it from the process environment.
    pub fn from_env() -> Result<ResultText, ConfigError> {
        ResultText::from_vars(|name| std::env::var(name).ok())
    }

    /// Its name, as the variable spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            ResultText::Json => "json",
            ResultText::Guide => "guide",
        }
    }
}

/// What the server needs to act as an agent.
#[derive(Debug, Clone)]
pub struct Config {
    /// The relay's base URL (default [`pacerelle_client::DEFAULT_RELAY_URL`]).
    pub relay_url: String,
    /// The agent's id.
    pub agent_id: String,
    /// The agent's token. `Debug` never shows it.
    pub token: AgentToken,
    /// Take the agent's lease even if another session holds it.
    pub takeover: bool,
    /// This server's session name (`PACERELLE_SESSION` or `--session`); `None`: the default session.
    pub session: Option<String>,
    /// What the text of a successful tool result carries (`PACERELLE_MCP_RESULT_TEXT`).
    pub result_text: ResultText,
    /// `ask_user`'s `alsoAskHere` when the call does not say (`PACERELLE_MCP_ALSO_ASK_HERE`).
    pub also_ask_here: bool,
}

/// Why the configuration is unusable. Messages name the variable or file and never echo a secret.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// No usable credentials: neither variables nor `agent.json`, only one of the two variables, a malformed
    /// id or token (the message names where it came from), an unreadable file.
    #[error("{0} (for an MCP host, `pacerelle up` prints pacerelle-mcp's configuration with both variables)")]
    Credentials(String),
    /// The relay URL is not http(s).
    #[error("PACERELLE_RELAY_URL must start with http:// or https:// (got {0:?})")]
    RelayUrl(String),
    /// The result text mode is neither `json` nor `guide`.
    #[error(
        "PACERELLE_MCP_RESULT_TEXT must be json (the result's JSON repeated as text, the default) or guide \
         (only the next step, for hosts that show structuredContent to the model); got {0:?}"
    )]
    ResultText(String),
    /// The `alsoAskHere` default is not a yes or a no.
    #[error("PACERELLE_MCP_ALSO_ASK_HERE must be 1, true, 0 or false; got {0:?}")]
    AlsoAskHere(String),
    /// The session name is not one (1 to 40 of `A-Z a-z 0-9 _ - .`, not `any`).
    #[error("PACERELLE_SESSION (or --session): {0}")]
    Session(String),
}

impl Config {
    /// Reads the configuration through `var` (the process environment in `main`, a map in tests).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>, takeover: bool) -> Result<Config, ConfigError> {
        let get = |name: &'static str| var(name).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        let found = AgentCredentials::find(&var, None).map_err(|e| {
            ConfigError::Credentials(match e {
                pacerelle_client::Error::InvalidInput(text) => text,
                other => other.to_string(),
            })
        })?;
        let relay_url = found.relay_url;
        if !(relay_url.starts_with("http://") || relay_url.starts_with("https://")) {
            return Err(ConfigError::RelayUrl(relay_url));
        }
        let result_text = ResultText::from_vars(&var)?;
        let also_ask_here = match get(ALSO_ASK_HERE_VAR).map(|v| v.to_ascii_lowercase()).as_deref() {
            None | Some("0") | Some("false") => false,
            Some("1") | Some("true") => true,
            Some(other) => return Err(ConfigError::AlsoAskHere(other.to_string())),
        };
        let session = get(SESSION_VAR);
        if let Some(name) = &session {
            check_session(name)?;
        }
        Ok(Config {
            relay_url,
            agent_id: found.agent_id,
            token: found.token,
            takeover,
            session,
            result_text,
            also_ask_here,
        })
    }

    /// This configuration as the session `name` (the `--session` flag, which wins over `PACERELLE_SESSION`).
    pub fn with_session(mut self, name: Option<String>) -> Result<Config, ConfigError> {
        if let Some(name) = name {
            check_session(&name)?;
            self.session = Some(name);
        }
        Ok(self)
    }

    /// Reads the configuration from the process environment.
    pub fn from_env(takeover: bool) -> Result<Config, ConfigError> {
        Config::from_vars(|name| std::env::var(name).ok(), takeover)
    }
}

fn check_session(name: &str) -> Result<(), ConfigError> {
    pacerelle_client::core::ids::validate_session_name(name).map_err(|e| ConfigError::Session(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pacerelle_client::DEFAULT_RELAY_URL;
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
        assert_eq!(
            config.result_text,
            ResultText::Json,
            "json unless asked otherwise"
        );
        assert!(!config.also_ask_here, "the phone only unless asked otherwise");
        assert_eq!(config.session, None, "the default session unless named");
        assert!(
            !format!("{config:?}").contains(&text),
            "Debug must not show the token"
        );
    }

    #[test]
    fn without_the_variables_the_agent_json_of_the_home_is_used_as_by_the_cli() {
        let token = AgentToken::generate();
        let home = tempfile::tempdir().expect("tempdir");
        let file = serde_json::json!({
            "relayUrl": "http://127.0.0.1:8787",
            "agentId": "ag_fromfile",
            "token": token.expose(),
        });
        std::fs::write(home.path().join("agent.json"), file.to_string()).expect("write");
        let home_var = home.path().to_str().expect("utf-8");
        let config = Config::from_vars(vars(&[("PACERELLE_HOME", home_var)]), false).expect("from the file");
        assert_eq!(
            (config.agent_id.as_str(), config.relay_url.as_str()),
            ("ag_fromfile", "http://127.0.0.1:8787")
        );
        assert_eq!(config.token, token);
        // The relay variable still wins over the file's relay.
        let config = Config::from_vars(
            vars(&[
                ("PACERELLE_HOME", home_var),
                (RELAY_URL_VAR, "https://relay.example"),
            ]),
            false,
        )
        .expect("from the file");
        assert_eq!(config.relay_url, "https://relay.example");
    }

    #[test]
    fn missing_and_malformed_values_are_named() {
        let token = AgentToken::generate().expose();
        let refused = |pairs: &[(&str, &str)]| match Config::from_vars(vars(pairs), false) {
            Err(ConfigError::Credentials(text)) => text,
            other => panic!("{pairs:?} should be refused for its credentials, got {other:?}"),
        };
        // Neither variable and no agent.json in the home: both ways are named.
        let empty = tempfile::tempdir().expect("tempdir");
        let none = refused(&[("PACERELLE_HOME", empty.path().to_str().expect("utf-8"))]);
        assert!(
            none.contains("no agent credentials") && none.contains("agent.json"),
            "{none}"
        );
        assert!(refused(&[(AGENT_ID_VAR, "ag_x"), (AGENT_TOKEN_VAR, "  ")]).contains("both"));
        let bad_id = refused(&[(AGENT_ID_VAR, "a b"), (AGENT_TOKEN_VAR, &token)]);
        assert!(
            bad_id.contains(AGENT_ID_VAR) && bad_id.contains("agent id"),
            "{bad_id}"
        );
        let bad = refused(&[(AGENT_ID_VAR, "ag_x"), (AGENT_TOKEN_VAR, "pcr1_secretish")]);
        assert!(
            bad.contains(AGENT_TOKEN_VAR) && bad.contains("malformed"),
            "{bad}"
        );
        assert!(!bad.contains("secretish"));
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

    #[test]
    fn the_result_text_is_json_by_default_guide_on_request_and_nothing_else() {
        let token = AgentToken::generate().expose();
        let with = |mode: &str| {
            Config::from_vars(
                vars(&[
                    (AGENT_ID_VAR, "ag_x"),
                    (AGENT_TOKEN_VAR, &token),
                    (RESULT_TEXT_VAR, mode),
                ]),
                false,
            )
            .map(|c| c.result_text)
        };
        assert_eq!(with(""), Ok(ResultText::Json));
        assert_eq!(with("json"), Ok(ResultText::Json));
        assert_eq!(with(" Guide "), Ok(ResultText::Guide));
        assert_eq!(with("none"), Err(ConfigError::ResultText("none".into())));
        assert!(
            with("text")
                .expect_err("refused")
                .to_string()
                .contains(RESULT_TEXT_VAR)
        );
    }

    #[test]
    fn also_ask_here_is_a_yes_or_a_no() {
        let token = AgentToken::generate().expose();
        let with = |v: &str| {
            Config::from_vars(
                vars(&[
                    (AGENT_ID_VAR, "ag_x"),
                    (AGENT_TOKEN_VAR, &token),
                    (ALSO_ASK_HERE_VAR, v),
                ]),
                false,
            )
            .map(|c| c.also_ask_here)
        };
        assert_eq!(with("1"), Ok(true));
        assert_eq!(with(" TRUE "), Ok(true));
        assert_eq!(with("0"), Ok(false));
        assert_eq!(with(""), Ok(false));
        assert_eq!(with("maybe"), Err(ConfigError::AlsoAskHere("maybe".into())));
    }

    #[test]
    fn the_session_is_named_by_the_variable_or_the_flag_and_checked() {
        let token = AgentToken::generate().expose();
        let with = |v: &str| {
            Config::from_vars(
                vars(&[
                    (AGENT_ID_VAR, "ag_x"),
                    (AGENT_TOKEN_VAR, &token),
                    (SESSION_VAR, v),
                ]),
                false,
            )
        };
        assert_eq!(with("api").expect("valid").session.as_deref(), Some("api"));
        assert_eq!(with("").expect("unset").session, None);
        for bad in ["any", "two words", "a/b"] {
            let e = with(bad).expect_err(bad);
            assert!(matches!(&e, ConfigError::Session(_)), "{bad}: {e}");
            assert!(e.to_string().starts_with("PACERELLE_SESSION"), "{e}");
        }
        let flagged = with("api")
            .expect("valid")
            .with_session(Some("web".into()))
            .expect("valid");
        assert_eq!(flagged.session.as_deref(), Some("web"), "the flag wins");
        assert!(
            with("api")
                .expect("valid")
                .with_session(Some("any".into()))
                .is_err()
        );
    }
}
