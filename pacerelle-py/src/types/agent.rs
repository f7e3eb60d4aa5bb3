//! The agent and its session (client `agent`, core `wire`): sessions, the lease holder, the status, the
//! agent's record and pairing links.

use pacerelle_client as client;
use pacerelle_client::core::wire::LeaseHolder;
use pyo3::prelude::*;

use super::{b, ts};
use crate::convert::{datetime, name, opt_datetime, r};

to_py_wrap! {
    client::SessionInfo => PySessionInfo,
    client::AgentInfo => PyAgentInfo,
    client::PairingLink => PyPairingLink,
}

to_py_via! {
    client::Status => PyStatus,
}

/// A session holding the agent's lease.
#[pyclass(frozen, name = "SessionInfo", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PySessionInfo {
    inner: client::SessionInfo,
}

#[pymethods]
impl PySessionInfo {
    /// Its id.
    #[getter]
    fn session_id(&self) -> &str {
        &self.inner.session_id
    }

    /// Where it runs.
    #[getter]
    fn host(&self) -> &str {
        &self.inner.host
    }

    /// When it took the lease.
    #[getter]
    fn since<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime(py, self.inner.since)
    }

    /// When the lease lapses without a heartbeat (the client sends one every 10 s).
    #[getter]
    fn lease_expires_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime(py, self.inner.lease_expires_at)
    }

    fn __repr__(&self) -> String {
        let s = &self.inner;
        format!(
            "SessionInfo(session_id={}, host={}, since={}, lease_expires_at={})",
            r(&s.session_id),
            r(&s.host),
            r(&ts(s.since)),
            r(&ts(s.lease_expires_at))
        )
    }
}

/// The session holding the lease, as the status reports it.
#[pyclass(frozen, name = "LeaseHolder", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PyLeaseHolder {
    inner: LeaseHolder,
}

#[pymethods]
impl PyLeaseHolder {
    /// Where the holder runs.
    #[getter]
    fn host(&self) -> &str {
        &self.inner.host
    }

    /// Since when it holds the lease.
    #[getter]
    fn since<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime(py, self.inner.since)
    }

    /// Its last heartbeat.
    #[getter]
    fn last_heartbeat_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime(py, self.inner.last_heartbeat_at)
    }

    fn __repr__(&self) -> String {
        format!(
            "LeaseHolder(host={}, since={}, last_heartbeat_at={})",
            r(&self.inner.host),
            r(&ts(self.inner.since)),
            r(&ts(self.inner.last_heartbeat_at))
        )
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

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let s = &self.inner;
        let session = match &self.session {
            Some(h) => h.bind(py).repr()?.to_string(),
            None => "None".into(),
        };
        Ok(format!(
            "Status(agent_id={}, agent_name={}, presence={}, session={}, listening={}, waiting={}, \
             in_progress={}, processed={}, devices={})",
            r(&s.agent.agent_id),
            r(&s.agent.name),
            r(&name(&s.presence)),
            session,
            b(s.listening),
            s.messages.waiting,
            s.messages.in_progress,
            s.messages.processed,
            s.devices
        ))
    }
}

/// An agent as the relay knows it.
#[pyclass(frozen, name = "AgentInfo", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PyAgentInfo {
    pub(super) inner: client::AgentInfo,
}

#[pymethods]
impl PyAgentInfo {
    /// Its id.
    #[getter]
    fn agent_id(&self) -> &str {
        &self.inner.agent_id
    }

    /// Its name.
    #[getter]
    fn name(&self) -> &str {
        &self.inner.name
    }

    /// When it registered.
    #[getter]
    fn created_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime(py, self.inner.created_at)
    }

    fn __repr__(&self) -> String {
        format!(
            "AgentInfo(agent_id={}, name={}, created_at={})",
            r(&self.inner.agent_id),
            r(&self.inner.name),
            r(&ts(self.inner.created_at))
        )
    }
}

/// A pairing offer: show `link` as a link or QR code; whoever opens it first becomes a device.
#[pyclass(frozen, name = "PairingLink", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PyPairingLink {
    inner: client::PairingLink,
}

#[pymethods]
impl PyPairingLink {
    /// `https://relay/pair#v1.…`: the secret is in the fragment, which never reaches the relay.
    #[getter]
    fn link(&self) -> &str {
        &self.inner.link
    }

    /// The offer's public id.
    #[getter]
    fn pairing_id(&self) -> &str {
        &self.inner.pairing_id
    }

    /// The device that claiming it will create.
    #[getter]
    fn device_id(&self) -> &str {
        &self.inner.device_id
    }

    /// When it stops being claimable.
    #[getter]
    fn expires_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime(py, self.inner.expires_at)
    }

    fn __repr__(&self) -> String {
        // The link carries the pairing secret: shown only on purpose (`.link`).
        format!(
            "PairingLink(link='…', pairing_id={}, device_id={}, expires_at={})",
            r(&self.inner.pairing_id),
            r(&self.inner.device_id),
            r(&ts(self.inner.expires_at))
        )
    }
}
