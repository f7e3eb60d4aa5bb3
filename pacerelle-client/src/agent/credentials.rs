//! An agent's credentials: found in the environment or in `agent.json`, the one file that holds them on disk.

use std::path::{Path, PathBuf};

use pacerelle_core::{AgentToken, ids};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::home::{self, HOME_VAR, RELAY_URL_VAR};

/// An agent's credentials, found as the CLI and the wheel find them: `PACERELLE_AGENT_ID` and
/// `PACERELLE_AGENT_TOKEN` (both or neither), else `agent.json` in the credentials folder ([`AgentFile`], the
/// file `pacerelle agent create` and `pacerelle up` write). The relay follows the one precedence
/// ([`home::relay_url`]): `PACERELLE_RELAY_URL`, else the one `agent.json` holds when that file is for the same
/// agent id (so that an MCP host entry with only the id and the token, such as `npx -y @pacerelle/mcp-server`,
/// reaches the relay the agent was created on), else [`home::DEFAULT_RELAY_URL`] (where `pacerelle up`
/// listens).
#[derive(Debug, Clone)]
pub struct AgentCredentials {
    /// The relay's URL.
    pub relay_url: String,
    /// The agent's id.
    pub agent_id: String,
    /// Its token.
    pub token: AgentToken,
}

/// What `agent.json` holds: the agent the CLI made (`pacerelle agent create`, `pacerelle up`), with the relay
/// it was made on. Read and written only through this type. `Debug` hides the token.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentFile {
    /// The relay the agent is registered on (empty in a file that names none).
    #[serde(default)]
    pub relay_url: String,
    /// The agent's id.
    pub agent_id: String,
    /// Its name.
    #[serde(default)]
    pub name: String,
    /// Its token, as text (a secret).
    pub token: String,
}

impl std::fmt::Debug for AgentFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentFile")
            .field("relay_url", &self.relay_url)
            .field("agent_id", &self.agent_id)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl AgentFile {
    /// The file's name in the credentials folder.
    pub const NAME: &'static str = "agent.json";

    /// Where it is in `home`.
    pub fn path(home: &Path) -> PathBuf {
        home.join(Self::NAME)
    }

    /// The file in `home`, `None` when there is none; an unreadable or malformed file is an error that names
    /// it.
    pub fn read(home: &Path) -> Result<Option<AgentFile>> {
        let path = Self::path(home);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(Error::InvalidInput(format!(
                    "cannot read {}: {e}",
                    path.display()
                )));
            }
        };
        serde_json::from_slice(&bytes).map(Some).map_err(|e| {
            Error::InvalidInput(format!("{} is not valid ({e}); fix or remove it", path.display()))
        })
    }

    /// Writes it in `home`, readable by its owner only.
    pub fn write(&self, home: &Path) -> std::io::Result<()> {
        let json = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        crate::files::write_private(&Self::path(home), &json)
    }
}

impl AgentCredentials {
    /// The credentials file's name in the credentials folder.
    pub const FILE: &'static str = AgentFile::NAME;

    /// Finds them through `var` (the environment, or what stands for it) and in `home` (`None`:
    /// [`home::home_dir`] of `PACERELLE_HOME` through `var`). The errors say what to set or run, and name the
    /// file or variable a malformed id or token came from.
    pub fn find(var: impl Fn(&str) -> Option<String>, home: Option<&Path>) -> Result<Self> {
        let var = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        let given_relay = var(RELAY_URL_VAR);
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
            None => home::home_dir(var(HOME_VAR).map(PathBuf::from).as_deref()),
        };
        match (var("PACERELLE_AGENT_ID"), var("PACERELLE_AGENT_TOKEN")) {
            (Some(id), Some(text)) => {
                let agent_id = agent_id(&id, "PACERELLE_AGENT_ID")?;
                // No relay variable: the relay saved with this same agent, if the file is for it. A file that
                // is missing, unreadable or for another agent is not an error: the variables are complete.
                let saved = home()
                    .and_then(|home| AgentFile::read(&home).ok().flatten())
                    .filter(|file| file.agent_id.trim() == agent_id);
                Ok(AgentCredentials {
                    relay_url: home::relay_url(
                        given_relay.as_deref(),
                        saved.as_ref().map(|f| f.relay_url.as_str()),
                    ),
                    agent_id,
                    token: token(&text, "PACERELLE_AGENT_TOKEN")?,
                })
            }
            (None, None) => {
                let home = home().ok_or_else(|| {
                    Error::InvalidInput("no config directory on this system: set PACERELLE_HOME".into())
                })?;
                let path = AgentFile::path(&home);
                let Some(file) = AgentFile::read(&home)? else {
                    return Err(Error::InvalidInput(format!(
                        "no agent credentials: set PACERELLE_AGENT_ID and PACERELLE_AGENT_TOKEN (the relay is \
                         PACERELLE_RELAY_URL, else the one saved with that agent in {path}, else {default}), \
                         or run `pacerelle agent create --name NAME` (writes {path})",
                        path = path.display(),
                        default = home::DEFAULT_RELAY_URL,
                    )));
                };
                Ok(AgentCredentials {
                    relay_url: home::relay_url(given_relay.as_deref(), Some(&file.relay_url)),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::home::DEFAULT_RELAY_URL;

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
        assert_eq!(
            (found.agent_id.as_str(), found.relay_url.as_str()),
            ("ag_1", DEFAULT_RELAY_URL)
        );

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
        assert_eq!(found.relay_url, "http://relay:1");
        let over = vars(&[("PACERELLE_RELAY_URL", "http://other:2")]);
        let found = AgentCredentials::find(over, Some(dir.path())).expect("from the file");
        assert_eq!(found.relay_url, "http://other:2", "the variable wins");
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
        assert_eq!(found.relay_url, "https://relay.example");
        // Through PACERELLE_HOME as well, as an MCP host's environment gives it.
        let home = dir.path().to_str().expect("utf-8");
        let with_home = vars(&[
            ("PACERELLE_AGENT_ID", "ag_1"),
            ("PACERELLE_AGENT_TOKEN", &token),
            ("PACERELLE_HOME", home),
        ]);
        let found = AgentCredentials::find(with_home, None).expect("found");
        assert_eq!(found.relay_url, "https://relay.example");
        // The variable still wins.
        let over = vars(&[
            ("PACERELLE_AGENT_ID", "ag_1"),
            ("PACERELLE_AGENT_TOKEN", &token),
            ("PACERELLE_RELAY_URL", "http://other:2"),
        ]);
        let found = AgentCredentials::find(over, Some(dir.path())).expect("found");
        assert_eq!(found.relay_url, "http://other:2");
        // Another agent's file says nothing about this one's relay, and a broken file is no error.
        saved("ag_2");
        let found = AgentCredentials::find(only_id_and_token(), Some(dir.path())).expect("found");
        assert_eq!(
            (found.agent_id.as_str(), found.relay_url.as_str()),
            ("ag_1", DEFAULT_RELAY_URL)
        );
        std::fs::write(dir.path().join(AgentCredentials::FILE), "{").expect("write");
        let found = AgentCredentials::find(only_id_and_token(), Some(dir.path())).expect("found");
        assert_eq!(found.relay_url, DEFAULT_RELAY_URL);
    }
}
