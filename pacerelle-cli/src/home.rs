//! Where credentials live: `PACERELLE_HOME` (default: the user's config directory), files only the owner
//! can read.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow};
use pacerelle_client::{AgentClient, AgentCredentials, DeviceClient, DeviceCredentials};
use serde::{Deserialize, Serialize};

const AGENT_FILE: &str = AgentCredentials::FILE;
const DEVICE_FILE: &str = "device.json";

/// The credentials folder.
#[derive(Debug, Clone)]
pub struct Home(pub PathBuf);

/// What `agent.json` holds.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentFile {
    pub relay_url: String,
    pub agent_id: String,
    pub name: String,
    pub token: String,
}

impl Home {
    pub fn resolve(explicit: Option<PathBuf>) -> Result<Home> {
        match explicit {
            Some(p) => Ok(Home(p)),
            None => dirs::config_dir()
                .map(|d| Home(d.join("pacerelle")))
                .ok_or_else(|| anyhow!("no config directory on this system: set PACERELLE_HOME")),
        }
    }

    pub fn agent_path(&self) -> PathBuf {
        self.0.join(AGENT_FILE)
    }

    pub fn device_path(&self) -> PathBuf {
        self.0.join(DEVICE_FILE)
    }

    pub fn read_agent(&self) -> Result<Option<AgentFile>> {
        read_json(&self.agent_path())
    }

    pub fn write_agent(&self, file: &AgentFile) -> Result<()> {
        write_private(&self.agent_path(), &serde_json::to_vec_pretty(file)?)
    }

    pub fn read_device(&self) -> Result<Option<DeviceCredentials>> {
        read_json(&self.device_path())
    }

    pub fn write_device(&self, creds: &DeviceCredentials) -> Result<()> {
        write_private(&self.device_path(), &serde_json::to_vec_pretty(creds)?)
    }

    pub fn remove_device(&self) -> Result<()> {
        match std::fs::remove_file(self.device_path()) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        }
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

/// The relay URL: `--relay`/`PACERELLE_RELAY_URL`, else the one stored with the credentials, else the default.
pub fn relay_url(global: &crate::Global, stored: Option<&str>) -> String {
    global
        .relay
        .clone()
        .or_else(|| stored.map(str::to_string))
        .unwrap_or_else(|| pacerelle_client::DEFAULT_RELAY_URL.to_string())
}

/// The agent's client: `PACERELLE_AGENT_ID` and `PACERELLE_AGENT_TOKEN`, else `agent.json` (the client's one
/// rule, [`AgentCredentials::find`]); `--relay`/`PACERELLE_RELAY_URL` overrides the stored relay.
pub fn agent_client(global: &crate::Global) -> Result<AgentClient> {
    let var = |name: &str| match name {
        "PACERELLE_RELAY_URL" => global.relay.clone(),
        _ => std::env::var(name).ok(),
    };
    let found = AgentCredentials::find(var, Some(&global.home.0)).map_err(|e| match e {
        pacerelle_client::Error::InvalidInput(message) => anyhow!(message),
        other => other.into(),
    })?;
    let relay = relay_url(global, found.relay_url.as_deref());
    // The device roster's high-water mark lives beside the credentials, shared by every host of this home.
    Ok(AgentClient::new(&relay, &found.agent_id, found.token)?.with_home(Some(&global.home.0)))
}

/// The device's client, from `device.json`; `--relay`/`PACERELLE_RELAY_URL` overrides the relay stored there,
/// as it does the agent's.
pub fn device_client(global: &crate::Global) -> Result<DeviceClient> {
    let mut creds = global.home.read_device()?.ok_or_else(|| {
        anyhow!(
            "this terminal is not paired: run `pacerelle device join -` and paste a link from `pacerelle pair`"
        )
    })?;
    creds.relay_url = relay_url(global, Some(&creds.relay_url));
    DeviceClient::from_credentials(creds)
        .with_context(|| format!("the credentials in {}", global.home.device_path().display()))
}

/// Writes a credentials file readable by its owner only (0600 in a 0700 folder), replacing it atomically.
fn write_private(path: &Path, bytes: &[u8]) -> Result<()> {
    pacerelle_client::write_private(path, bytes).with_context(|| format!("cannot write {}", path.display()))
}
