//! The agent and its session (client `agent`, core `wire`): sessions, the lease holder, the status, the
//! agent's record and pairing links.

use pacerelle_client as client;
use pacerelle_client::core::wire::LeaseHolder;
use pyo3::prelude::*;

use super::{Time, repr_of};
use crate::convert::{datetime, name, opt_datetime};

to_py_wrap! {
    client::SessionInfo => PySessionInfo,
    client::AgentInfo => PyAgentInfo,
    client::PairingLink => PyPairingLink,
}

to_py_via! {
    client::Status => PyStatus,
}

wrapper! {
    /// A session holding the agent's lease.
    PySessionInfo("SessionInfo", client::SessionInfo) {
        /// Its id.
        session_id: |v| &v.session_id,
        /// Where it runs.
        host: |v| &v.host,
        /// When it took the lease.
        since: |v| Time(v.since),
        /// When the lease lapses without a heartbeat (the client sends one every 10 s).
        lease_expires_at: |v| Time(v.lease_expires_at),
    }
}

wrapper! {
    /// The session holding the lease, as the status reports it.
    PyLeaseHolder("LeaseHolder", LeaseHolder) {
        /// Where the holder runs.
        host: |v| &v.host,
        /// Since when it holds the lease.
        since: |v| Time(v.since),
        /// Its last heartbeat.
        last_heartbeat_at: |v| Time(v.last_heartbeat_at),
    }
}

/// What the agent is doing, as the phone sees it, with counts of tasks.
#[pyclass(frozen, name = "Status", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PyStatus {
    inner: client::Status,
    /// `inner.session` as Python sees it, built once: every read gives the same object.
    session: Option<Py<PyLeaseHolder>>,
}

impl PyStatus {
    fn from_client(py: Python<'_>, inner: client::Status) -> PyResult<Self> {
        let session = inner
            .session
            .clone()
            .map(|inner| Py::new(py, PyLeaseHolder { inner }))
            .transpose()?;
        Ok(PyStatus { inner, session })
    }
}

#[pymethods]
impl PyStatus {
    /// The agent's id.
    #[getter]
    fn agent_id(&self) -> &str {
        &self.inner.agent.agent_id
    }

    /// The agent's name.
    #[getter]
    fn agent_name(&self) -> &str {
        &self.inner.agent.name
    }

    /// 'offline', 'connected', 'listening', 'busy' or 'waiting_confirmation'.
    #[getter]
    fn presence(&self) -> String {
        name(&self.inner.presence)
    }

    /// The session holding the lease, if any.
    #[getter]
    fn session(&self, py: Python<'_>) -> Option<Py<PyLeaseHolder>> {
        self.session.as_ref().map(|s| s.clone_ref(py))
    }

    /// A wait is parked now.
    #[getter]
    fn listening(&self) -> bool {
        self.inner.listening
    }

    /// When the last wait started or ended.
    #[getter]
    fn last_wait_at<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        opt_datetime(py, self.inner.last_wait_at)
    }

    /// Tasks stored, never delivered.
    #[getter]
    fn waiting(&self) -> u64 {
        self.inner.messages.waiting
    }

    /// Tasks delivered, not processed.
    #[getter]
    fn in_progress(&self) -> u64 {
        self.inner.messages.in_progress
    }

    /// Tasks marked processed.
    #[getter]
    fn processed(&self) -> u64 {
        self.inner.messages.processed
    }

    /// When the last checkpoint was saved.
    #[getter]
    fn last_checkpoint_at<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        opt_datetime(py, self.inner.last_checkpoint_at)
    }

    /// Paired devices not revoked.
    #[getter]
    fn devices(&self) -> u64 {
        self.inner.devices
    }

    /// The relay's clock.
    #[getter]
    fn relay_time<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime(py, self.inner.relay_time)
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        repr_of(
            slf.as_any(),
            &[
                "agent_id",
                "agent_name",
                "presence",
                "session",
                "listening",
                "waiting",
                "in_progress",
                "processed",
                "devices",
            ],
            &[],
        )
    }
}

wrapper! {
    /// An agent as the relay knows it.
    PyAgentInfo("AgentInfo", client::AgentInfo) {
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
    PyPairingLink("PairingLink", client::PairingLink) {
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
