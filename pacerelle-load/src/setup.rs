//! Agents and their paired devices, made through `pacerelle-client` (registration, pairing link, claim), and
//! tasks sealed ahead of a phase with each device's key, so that sealing is not timed with the sends.

use std::sync::Arc;

use anyhow::{Context as _, Result};
use pacerelle_client::core::keys::ContentKey;
use pacerelle_client::core::message::{TaskPayload, task_aad};
use pacerelle_client::core::{b64, envelope};
use pacerelle_client::{AgentClient, DeviceClient, agent::PairingOptions};

use crate::http;

/// The text of every task: ordinary length, about sixty bytes.
const TASK_TEXT: &str = "a task of ordinary length, about sixty bytes long, for the load";

/// What a sender needs to seal and send a task as one device.
#[derive(Debug)]
pub struct Device {
    agent_id: String,
    device_id: String,
    token: String,
    key: ContentKey,
}

impl Device {
    fn from_client(client: &DeviceClient) -> Result<Device> {
        let c = client.credentials();
        let key = b64::decode_array::<32>(&c.device_key)
            .map(ContentKey::from_bytes)
            .context("a device key that is not 32 bytes")?;
        Ok(Device {
            agent_id: c.agent_id.clone(),
            device_id: c.device_id.clone(),
            token: c.device_token.clone(),
            key,
        })
    }

    /// The complete `POST /v1/device/messages` request of task `message_id`, sealed now.
    pub fn sealed_send(&self, message_id: &str) -> Vec<u8> {
        let aad = task_aad(&self.agent_id, &self.device_id, message_id);
        let sealed = envelope::seal_json(
            &self.key,
            &aad,
            &TaskPayload {
                text: TASK_TEXT.to_string(),
                session: None,
            },
        );
        // Ids and base64url need no JSON escaping.
        let body = format!("{{\"messageId\":\"{message_id}\",\"envelope\":\"{sealed}\"}}");
        http::request("POST", "/v1/device/messages", Some(&self.token), Some(&body))
    }
}

/// An agent and the devices paired with it.
#[derive(Debug)]
pub struct Pair {
    /// The agent, through the real client (it waits and opens tasks).
    pub agent: AgentClient,
    /// Its devices.
    pub devices: Vec<Arc<Device>>,
}

/// Registers `agents` agents and pairs `devices` devices with each.
pub async fn pair(url: &str, agents: usize, devices: usize) -> Result<Vec<Pair>> {
    let mut out = Vec::with_capacity(agents);
    for a in 0..agents {
        let agent = AgentClient::register(url, &format!("load agent {a}"), None)
            .await
            .context("cannot register an agent")?
            .with_home(None);
        let mut list = Vec::with_capacity(devices);
        for d in 0..devices {
            let link = agent
                .create_pairing(PairingOptions::default())
                .await
                .context("cannot create a pairing link")?;
            let client = DeviceClient::join(&link.link, &format!("load device {a}.{d}"))
                .await
                .context("cannot pair a device")?;
            list.push(Arc::new(Device::from_client(&client)?));
        }
        out.push(Pair { agent, devices: list });
    }
    Ok(out)
}

/// Every device of `pairs`, interleaved across agents (device 0 of each agent, then device 1, …), so that
/// taking them in turn spreads tasks over the agents.
pub fn interleaved(pairs: &[Pair]) -> Vec<Arc<Device>> {
    let most = pairs.iter().map(|p| p.devices.len()).max().unwrap_or(0);
    (0..most)
        .flat_map(|d| pairs.iter().filter_map(move |p| p.devices.get(d).cloned()))
        .collect()
}
