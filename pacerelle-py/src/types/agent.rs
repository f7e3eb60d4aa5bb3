//! The agent and its session (client `agent`, core `wire`): sessions, the lease holder, the status, the
//! agent's record and pairing links.

use pacerelle_client as client;
use pacerelle_client::core::wire::{LeaseHolder, SessionSummary};
use pyo3::prelude::*;
use pyo3::types::PyList;

use super::Time;
use crate::convert::name;

to_py_via! {
    client::core::wire::Status => PyStatus,
}

wrapper! {
    /// A session holding the agent's lease.
    PySessionInfo("SessionInfo", client::core::wire::SessionInfo) {
        /// Its id.
        session_id: |v| &v.session_id,
        /// Where it runs.
        host: |v| &v.host,
        /// When it took the lease.
        since: |v| Time(v.since),
        /// When the lease lapses without a heartbeat (the client sends one every 10 s).
        lease_expires_at: |v| Time(v.lease_expires_at),
        /// Its name: the lease is this name's ('default' unless the session was named).
        name: |v| &v.name,
        /// The folder it works in, if it said.
        folder: |v| v.folder.as_deref(),
    }
}

wrapper! {
    /// One open session of the agent, as the status lists it.
    PySessionSummary("SessionSummary", SessionSummary) {
        /// Its name.
        name: |v| &v.name,
        /// Where it runs.
        host: |v| &v.host,
        /// The folder it works in, if it said.
        folder: |v| v.folder.as_deref(),
        /// When it took its lease.
        since: |v| Time(v.since),
        /// Its last heartbeat.
        last_heartbeat_at: |v| Time(v.last_heartbeat_at),
        /// When its last wait for tasks started or ended, if the relay saw one.
        last_wait_at: |v| v.last_wait_at.map(Time),
        /// 'offline', 'connected', 'listening', 'busy' or 'waiting_confirmation'.
        presence: |v| name(&v.presence),
        /// Its tasks delivered and not processed.
        in_progress: |v| v.in_progress,
    }
}

wrapper! {
    /// The session holding the lease, as the status reports it.
    PyLeaseHolder("LeaseHolder", LeaseHolder) {
        /// Where the holder runs.
        host: |v| &v.host,
        /// The session name whose lease it holds.
        name: |v| &v.name,
        /// Since when it holds the lease.
        since: |v| Time(v.since),
        /// Its last heartbeat.
        last_heartbeat_at: |v| Time(v.last_heartbeat_at),
    }
}

wrapper! {
    /// What the agent is doing, as the phone sees it, with counts of tasks.
    PyStatus("Status", client::core::wire::Status, kept {
        /// `inner.session` as Python sees it, built once: every read gives the same object.
        session: Option<Py<PyLeaseHolder>>,
        /// `inner.sessions` as Python sees them, built once: every read gives the same list.
        sessions: Py<PyList>,
    }) {
        /// The agent's id.
        agent_id: |v| &v.agent.agent_id,
        /// The agent's name.
        agent_name: |v| &v.agent.name,
        /// What the agent is doing, the word every surface shows: 'asking', 'working', 'listening' or
        /// 'offline'.
        activity: |v| v.activity().as_str(),
        /// The relay's finer reading: 'offline', 'connected', 'listening', 'busy' or 'waiting_confirmation'.
        presence: |v| name(&v.presence),
        /// Open questions: for the agent, all still pending; for a device, those sent to it not yet answered.
        open_questions: |v| v.open_questions,
        /// The session holding a lease, if any (of several, the one open longest).
        session: |_v, py, this| this.session.as_ref().map(|s| s.clone_ref(py)),
        /// Every open session of the agent (`SessionSummary`), the one open longest first.
        sessions: |_v, py, this| this.sessions.clone_ref(py),
        /// A wait is parked now.
        listening: |v| v.listening,
        /// When the last wait started or ended.
        last_wait_at: |v| v.last_wait_at.map(Time),
        /// Tasks stored, never delivered.
        waiting: |v| v.messages.waiting,
        /// Tasks delivered, not processed.
        in_progress: |v| v.messages.in_progress,
        /// Tasks marked processed.
        processed: |v| v.messages.processed,
        /// When the last checkpoint was saved.
        last_checkpoint_at: |v| v.last_checkpoint_at.map(Time),
        /// Paired devices not revoked.
        devices: |v| v.devices,
        /// The relay's clock.
        relay_time: |v| Time(v.relay_time),
    }
}

impl PyStatus {
    fn from_client(py: Python<'_>, inner: client::core::wire::Status) -> PyResult<Self> {
        let session = inner
            .session
            .clone()
            .map(|inner| Py::new(py, PyLeaseHolder { inner }))
            .transpose()?;
        let sessions = inner
            .sessions
            .iter()
            .cloned()
            .map(|inner| Py::new(py, PySessionSummary { inner }))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(PyStatus {
            inner,
            session,
            sessions: PyList::new(py, sessions)?.unbind(),
        })
    }
}

wrapper! {
    /// An agent as the relay knows it.
    PyAgentInfo("AgentInfo", client::core::wire::AgentInfo) {
        /// Its id.
        agent_id: |v| &v.agent_id,
        /// Its name.
        name: |v| &v.name,
        /// When it registered.
        created_at: |v| Time(v.created_at),
    }
}

wrapper! {
    /// A pairing offer: show `link` as a link or QR code; whoever opens it first becomes a device.
    PyPairingLink("PairingLink", client::agent::PairingLink) {
        /// `https://relay/pair#v1.…`: the secret is in the fragment, which never reaches the relay.
        [secret] link: |v| &v.link,
        /// The offer's public id.
        pairing_id: |v| &v.pairing_id,
        /// The device that claiming it will create.
        device_id: |v| &v.device_id,
        /// When it stops being claimable.
        expires_at: |v| Time(v.expires_at),
    }
}
