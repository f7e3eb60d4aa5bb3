//! Where credentials live: `PACERELLE_HOME` (default: the user's config directory), files only the owner
//! can read.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow};
use pacerelle_client::{
    AgentClient, DeviceClient, agent::AgentCredentials, agent::AgentFile, device::DeviceCredentials,
};

const DEVICE_FILE: &str = "device.json";
/// The folder of the pairings beyond the first, one `<agentId>.json` per agent.
const DEVICES_DIR: &str = "devices";

/// The credentials folder.
#[derive(Debug, Clone)]
pub struct Home(pub PathBuf);

impl Home {
    /// `--home`/`PACERELLE_HOME`, else the user's config folder + `pacerelle` (the client's one rule,
    /// [`pacerelle_client::home::home_dir`]).
    pub fn resolve(explicit: Option<PathBuf>) -> Result<Home> {
        pacerelle_client::home::home_dir(explicit.as_deref())
            .map(Home)
            .ok_or_else(|| anyhow!("no config directory on this system: set PACERELLE_HOME"))
    }

    pub fn agent_path(&self) -> PathBuf {
        AgentFile::path(&self.0)
    }

    pub fn device_path(&self) -> PathBuf {
        self.0.join(DEVICE_FILE)
    }

    pub fn read_agent(&self) -> Result<Option<AgentFile>> {
        Ok(AgentFile::read(&self.0)?)
    }

    pub fn write_agent(&self, file: &AgentFile) -> Result<()> {
        file.write(&self.0)
            .with_context(|| format!("cannot write {}", self.agent_path().display()))
    }

    pub fn devices_dir(&self) -> PathBuf {
        self.0.join(DEVICES_DIR)
    }

    /// Every pairing of this terminal, one per agent: `device.json` (the only one before a terminal could
    /// pair with several agents, and still the first) then `devices/<agentId>.json` by file name. A file
    /// under `devices/` for an agent that `device.json` already holds is ignored.
    pub fn pairings(&self) -> Result<Vec<Pairing>> {
        let mut found = Vec::new();
        if let Some(creds) = read_json::<DeviceCredentials>(&self.device_path())? {
            found.push(Pairing {
                path: self.device_path(),
                creds,
            });
        }
        let dir = self.devices_dir();
        let mut paths = match std::fs::read_dir(&dir) {
            Ok(entries) => entries
                .map(|e| e.map(|e| e.path()))
                .collect::<std::io::Result<Vec<_>>>()
                .with_context(|| format!("cannot read {}", dir.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", dir.display())),
        };
        paths.retain(|p| p.extension().is_some_and(|x| x == "json"));
        paths.sort();
        for path in paths {
            let Some(creds) = read_json::<DeviceCredentials>(&path)? else {
                continue;
            };
            if found.iter().any(|p: &Pairing| p.creds.agent_id == creds.agent_id) {
                continue;
            }
            found.push(Pairing { path, creds });
        }
        Ok(found)
    }

    /// Stores a pairing: over the file of the same agent's pairing if there is one (that agent's pairing
    /// only is replaced), else in `device.json` when this terminal has no pairing (the one-agent layout,
    /// unchanged), else in `devices/<agentId>.json`. Returns the file written.
    pub fn write_pairing(&self, creds: &DeviceCredentials) -> Result<PathBuf> {
        let pairings = self.pairings()?;
        let path = match pairings.iter().find(|p| p.creds.agent_id == creds.agent_id) {
            Some(same) => same.path.clone(),
            None if pairings.is_empty() => self.device_path(),
            None => self
                .devices_dir()
                .join(format!("{}.json", file_stem(&creds.agent_id)?)),
        };
        write_private(&path, &serde_json::to_vec_pretty(creds)?)?;
        Ok(path)
    }

    /// Removes a pairing's file (one agent's; the others stay).
    pub fn remove_pairing(&self, pairing: &Pairing) -> Result<()> {
        match std::fs::remove_file(&pairing.path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(e).with_context(|| format!("cannot remove {}", pairing.path.display()))
            }
            _ => Ok(()),
        }
    }
}

/// One pairing of this terminal with an agent, and the file that holds it.
#[derive(Debug, Clone)]
pub struct Pairing {
    pub path: PathBuf,
    pub creds: DeviceCredentials,
}

impl Pairing {
    /// `Laptop (ag_…)`.
    pub fn label(&self) -> String {
        format!("{} ({})", self.creds.agent_name, self.creds.agent_id)
    }
}

/// An agent id as a file name: the relay's ids are letters, digits, `_` and `-`; anything else is refused
/// rather than written outside the folder.
fn file_stem(agent_id: &str) -> Result<&str> {
    if !agent_id.is_empty()
        && agent_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        Ok(agent_id)
    } else {
        Err(anyhow!(
            "the agent id {agent_id:?} cannot name a credentials file"
        ))
    }
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .with_context(|| format!("{} is not valid; fix or remove it", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// The relay URL: `--relay`/`PACERELLE_RELAY_URL`, else the one stored with the credentials, else the default
/// (the client's one rule, [`pacerelle_client::home::relay_url`]).
pub fn relay_url(global: &crate::Global, stored: Option<&str>) -> String {
    pacerelle_client::home::relay_url(global.relay.as_deref(), stored)
}

/// The grants the gate keeps for an agent: `<home>/grants/<agentId>.json` (mode 0600, docs/hooks.md).
pub fn grants_path(global: &crate::Global, agent_id: &str) -> PathBuf {
    global.home.0.join("grants").join(format!("{agent_id}.json"))
}

/// The agent's client: `PACERELLE_AGENT_ID` and `PACERELLE_AGENT_TOKEN`, else `agent.json` (the client's one
/// rule, [`AgentCredentials::find`]); `--relay`/`PACERELLE_RELAY_URL` overrides the stored relay.
pub fn agent_client(global: &crate::Global) -> Result<AgentClient> {
    let var = |name: &str| match name {
        pacerelle_client::home::RELAY_URL_VAR => global.relay.clone(),
        _ => std::env::var(name).ok(),
    };
    // The client's message as it is, with the code Python's `InvalidInput` carries for the same refusal.
    let found = AgentCredentials::find(var, Some(&global.home.0)).map_err(|e| match e {
        pacerelle_client::Error::InvalidInput(message) => crate::output::invalid_input(message),
        other => other.into(),
    })?;
    // The device roster's high-water mark lives beside the credentials, shared by every host of this home.
    Ok(AgentClient::new(&found.relay_url, &found.agent_id, found.token)?.with_home(Some(&global.home.0)))
}

/// The paired agents, named in an error: `Laptop (ag_1), Server (ag_2)`.
pub fn paired_list(pairings: &[Pairing]) -> String {
    pairings.iter().map(Pairing::label).collect::<Vec<_>>().join(", ")
}

/// The error for a terminal with no pairing: `unauthorized`, the relay's code for a device without a valid
/// credential (the phone SDK's `NotPaired`).
pub fn not_paired() -> anyhow::Error {
    crate::output::Refused {
        code: pacerelle_client::core::wire::code::UNAUTHORIZED,
        message: "this terminal is not paired: run `pacerelle device join -` and paste a link from \
                  `pacerelle pair`"
            .into(),
    }
    .into()
}

/// The pairings `--agent` names: the agent whose id it is, else the agents of that name (ASCII case
/// ignored); with no `--agent`, every pairing. An unknown agent is an input error listing the paired ones.
pub fn pick(global: &crate::Global, agent: Option<&str>) -> Result<Vec<Pairing>> {
    let pairings = global.home.pairings()?;
    if pairings.is_empty() {
        return Err(not_paired());
    }
    let Some(wanted) = agent else {
        return Ok(pairings);
    };
    if let Some(p) = pairings.iter().find(|p| p.creds.agent_id == wanted) {
        return Ok(vec![p.clone()]);
    }
    let named: Vec<Pairing> = pairings
        .iter()
        .filter(|p| p.creds.agent_name.eq_ignore_ascii_case(wanted))
        .cloned()
        .collect();
    match named.len() {
        0 => Err(crate::output::invalid_input(format!(
            "this terminal is not paired with an agent {wanted:?}; paired with: {}",
            paired_list(&pairings)
        ))),
        1 => Ok(named),
        _ => Err(crate::output::invalid_input(format!(
            "several paired agents are named {wanted:?}: {}; give `--agent AGENT_ID`",
            paired_list(&named)
        ))),
    }
}

/// The one pairing a command acts through: the only one, or the one `--agent` names. With several and no
/// `--agent`, an input error listing them; `what` says what needs one agent (`send a task`).
pub fn pick_one(global: &crate::Global, agent: Option<&str>, what: &str) -> Result<Pairing> {
    let mut found = pick(global, agent)?;
    if found.len() > 1 {
        return Err(crate::output::invalid_input(format!(
            "this terminal is paired with several agents: {}; to {what}, name one with `--agent AGENT_ID|NAME` \
             (see `pacerelle device list`)",
            paired_list(&found)
        )));
    }
    found.pop().ok_or_else(not_paired)
}

/// A pairing's client; `--relay`/`PACERELLE_RELAY_URL` overrides the relay stored with it, as it does the
/// agent's.
pub fn client_for(global: &crate::Global, pairing: &Pairing) -> Result<DeviceClient> {
    let mut creds = pairing.creds.clone();
    creds.relay_url = relay_url(global, Some(&creds.relay_url));
    DeviceClient::from_credentials(creds)
        .with_context(|| format!("the credentials in {}", pairing.path.display()))
}

/// The device's client for a command that acts through one agent: [`pick_one`], then [`client_for`].
pub fn device_client(
    global: &crate::Global,
    agent: Option<&str>,
    what: &str,
) -> Result<(Pairing, DeviceClient)> {
    let pairing = pick_one(global, agent, what)?;
    let client = client_for(global, &pairing)?;
    Ok((pairing, client))
}

/// Writes a credentials file readable by its owner only (0600 in a 0700 folder), replacing it atomically.
fn write_private(path: &Path, bytes: &[u8]) -> Result<()> {
    pacerelle_client::files::write_private(path, bytes)
        .with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn creds(agent_id: &str, device_id: &str) -> DeviceCredentials {
        serde_json::from_value(serde_json::json!({
            "relayUrl": "http://127.0.0.1:1", "agentId": agent_id, "agentName": agent_id.to_uppercase(),
            "deviceId": device_id, "role": "owner", "deviceToken": "t", "deviceKey": "k",
        }))
        .expect("credentials")
    }

    fn held(home: &Home) -> Vec<(String, String)> {
        home.pairings()
            .expect("pairings")
            .into_iter()
            .map(|p| (p.creds.agent_id, p.creds.device_id))
            .collect()
    }

    #[test]
    fn a_home_holds_one_pairing_per_agent_and_keeps_the_one_agent_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = Home(dir.path().to_path_buf());
        assert!(held(&home).is_empty());
        // The first pairing is device.json, as a terminal paired before several agents wrote it.
        assert_eq!(
            home.write_pairing(&creds("ag_a", "dv_1")).expect("write"),
            home.device_path()
        );
        let second = home.write_pairing(&creds("ag_b", "dv_2")).expect("write");
        assert_eq!(second, home.devices_dir().join("ag_b.json"));
        // The same agent again replaces its pairing only, where it lives.
        assert_eq!(
            home.write_pairing(&creds("ag_a", "dv_3")).expect("write"),
            home.device_path()
        );
        assert_eq!(home.write_pairing(&creds("ag_b", "dv_4")).expect("write"), second);
        assert_eq!(
            held(&home),
            [("ag_a".into(), "dv_3".into()), ("ag_b".into(), "dv_4".into())]
        );
        // Leaving the first keeps the other; a new agent then goes under devices/.
        let first = home.pairings().expect("pairings").remove(0);
        home.remove_pairing(&first).expect("remove");
        assert_eq!(held(&home), [("ag_b".into(), "dv_4".into())]);
        assert_eq!(
            home.write_pairing(&creds("ag_c", "dv_5")).expect("write"),
            home.devices_dir().join("ag_c.json")
        );
        assert!(home.write_pairing(&creds("../x", "dv_6")).is_err());
    }
}
