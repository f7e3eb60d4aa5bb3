//! Several agents on one phone: the pairings an app holds (one device per agent), one view of the questions
//! waiting across all of them, and each agent's presence. Unpairing one leaves the others untouched.

use std::sync::{Arc, Mutex};

use tokio::task::JoinSet;

use crate::device::{DeviceClient, DeviceIdentity};
use crate::error::{PacerelleError, Result};
use crate::question::{Question, QuestionState};
use crate::status::AgentStatus;

/// A question waiting for an answer, with the agent that asks it.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct AgentQuestion {
    /// The agent asking.
    pub agent_id: String,
    /// Its display name, to label the question.
    pub agent_name: String,
    /// The question; answer it through that agent's device (`Pairings.device(agentId)`).
    pub question: Question,
}

/// An agent whose pairing could not be read this time, and why (the others are read all the same).
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct PairingFailure {
    /// The agent.
    pub agent_id: String,
    /// Its display name.
    pub agent_name: String,
    /// What failed, as the error's message (for example a revoked device: pair again or unpair it).
    pub message: String,
    /// True when the device was revoked: it will never work again.
    pub not_paired: bool,
}

/// The questions waiting across every paired agent, the one expiring first first.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct PendingQuestions {
    /// Every open question of every agent that answered.
    pub questions: Vec<AgentQuestion>,
    /// The agents that could not be read.
    pub failures: Vec<PairingFailure>,
}

/// One agent's presence, or why it could not be read.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct AgentPresence {
    /// Who this device is for that agent.
    pub identity: DeviceIdentity,
    /// The agent's status (listening, its session's host, what waits); null when it could not be read.
    pub status: Option<AgentStatus>,
    /// Why it could not be read.
    pub failure: Option<PairingFailure>,
}

/// The pairings an app holds: one `DeviceClient` per agent. Thread-safe; keep one instance for the app and
/// store `credentials()` (every pairing's credentials) after each change.
#[derive(Debug, Default, uniffi::Object)]
pub struct Pairings {
    devices: Mutex<Vec<Arc<DeviceClient>>>,
}

impl Pairings {
    fn all(&self) -> Vec<Arc<DeviceClient>> {
        self.devices.lock().map(|d| d.clone()).unwrap_or_default()
    }
}

fn failure(identity: &DeviceIdentity, error: &PacerelleError) -> PairingFailure {
    PairingFailure {
        agent_id: identity.agent_id.clone(),
        agent_name: identity.agent_name.clone(),
        message: error.to_string(),
        not_paired: matches!(error, PacerelleError::NotPaired { .. }),
    }
}

#[uniffi::export(async_runtime = "tokio")]
impl Pairings {
    /// No pairing yet.
    #[uniffi::constructor]
    pub fn new() -> Arc<Self> {
        Arc::new(Pairings::default())
    }

    /// The pairings from the credentials `credentials()` returned. Makes no request. Malformed credentials
    /// fail with `InvalidInput`, and nothing is restored.
    #[uniffi::constructor]
    pub fn restore(credentials: Vec<String>) -> Result<Arc<Self>> {
        let pairings = Pairings::default();
        for c in credentials {
            pairings.add(DeviceClient::restore(c)?);
        }
        Ok(Arc::new(pairings))
    }

    /// Adds a pairing (a device just joined, or restored). A device of an agent already held replaces the
    /// one held for that agent: a phone holds one pairing per agent.
    pub fn add(&self, device: Arc<DeviceClient>) {
        let agent_id = device.identity().agent_id;
        if let Ok(mut devices) = self.devices.lock() {
            devices.retain(|d| d.identity().agent_id != agent_id);
            devices.push(device);
        }
    }

    /// The device paired with `agent_id`, to send, read or answer through it.
    pub fn device(&self, agent_id: String) -> Option<Arc<DeviceClient>> {
        self.all().into_iter().find(|d| d.identity().agent_id == agent_id)
    }

    /// Who this phone is for each agent, in the order the pairings were added.
    pub fn identities(&self) -> Vec<DeviceIdentity> {
        self.all().iter().map(|d| d.identity()).collect()
    }

    /// Every pairing's credentials (secrets: keep them in the Keychain or the Keystore), in order.
    pub fn credentials(&self) -> Vec<String> {
        self.all().iter().map(|d| d.credentials()).collect()
    }

    /// Unpairs from one agent: leaves at the relay (the device's credentials stop working) and forgets the
    /// pairing; the other pairings are untouched. A device the relay already revoked is forgotten too.
    /// Returns false when no pairing is held for `agent_id`.
    pub async fn unpair(&self, agent_id: String) -> Result<bool> {
        let Some(device) = self.device(agent_id.clone()) else {
            return Ok(false);
        };
        match device.leave().await {
            Ok(()) | Err(PacerelleError::NotPaired { .. }) => {}
            Err(e) => return Err(e),
        }
        if let Ok(mut devices) = self.devices.lock() {
            devices.retain(|d| d.identity().agent_id != agent_id);
        }
        Ok(true)
    }

    /// The questions waiting for an answer across every agent, read concurrently, the one expiring first
    /// first: the view to show before any single conversation. An agent that cannot be read is listed in
    /// `failures` and does not hide the others.
    pub async fn pending_questions(&self) -> PendingQuestions {
        let mut reads = JoinSet::new();
        for (i, device) in self.all().into_iter().enumerate() {
            reads.spawn(async move { (i, device.identity(), device.pending_questions().await) });
        }
        let mut results: Vec<_> = reads.join_all().await;
        results.sort_by_key(|(i, _, _)| *i);
        let mut out = PendingQuestions {
            questions: Vec::new(),
            failures: Vec::new(),
        };
        for (_, identity, read) in results {
            match read {
                Ok(questions) => out.questions.extend(
                    questions
                        .into_iter()
                        .filter(|q| q.state == QuestionState::Pending && q.is_open)
                        .map(|question| AgentQuestion {
                            agent_id: identity.agent_id.clone(),
                            agent_name: identity.agent_name.clone(),
                            question,
                        }),
                ),
                Err(e) => out.failures.push(failure(&identity, &e)),
            }
        }
        out.questions.sort_by_key(|q| q.question.expires_at);
        out
    }

    /// Each agent's presence (listening or not, its session's host, what waits), read concurrently, in the
    /// order the pairings were added.
    pub async fn presence(&self) -> Vec<AgentPresence> {
        let mut reads = JoinSet::new();
        for (i, device) in self.all().into_iter().enumerate() {
            reads.spawn(async move { (i, device.identity(), device.status().await) });
        }
        let mut results: Vec<_> = reads.join_all().await;
        results.sort_by_key(|(i, _, _)| *i);
        results
            .into_iter()
            .map(|(_, identity, read)| match read {
                Ok(status) => AgentPresence {
                    identity,
                    status: Some(status),
                    failure: None,
                },
                Err(e) => AgentPresence {
                    failure: Some(failure(&identity, &e)),
                    identity,
                    status: None,
                },
            })
            .collect()
    }
}
