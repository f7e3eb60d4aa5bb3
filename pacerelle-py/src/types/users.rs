//! Partner mode's users (client `users`): a user of the agent and its devices.

use pacerelle_client as client;
use pyo3::prelude::*;
use pyo3::types::PyList;

use super::{ToPy, b, ots, ts};
use crate::convert::{datetime, opt_datetime, r, ro};

to_py_via! {
    client::UserInfo => PyUser,
}

/// One device of a user: a phone that opened the user's link, or a link not yet used.
#[pyclass(frozen, name = "UserDevice", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PyUserDevice {
    inner: client::UserDevice,
}

#[pymethods]
impl PyUserDevice {
    /// Its id.
    #[getter]
    fn device_id(&self) -> &str {
        &self.inner.device_id
    }

    /// The name the device gave when it opened the link; None while the link is unused.
    #[getter]
    fn name(&self) -> Option<&str> {
        self.inner.name.as_deref()
    }

    /// True once the user opened the link in the app (the device is paired).
    #[getter]
    fn paired(&self) -> bool {
        self.inner.paired
    }

    /// When it paired.
    #[getter]
    fn paired_at<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        opt_datetime(py, self.inner.paired_at)
    }

    /// When it was revoked (by the agent, or when its user was disconnected).
    #[getter]
    fn revoked_at<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        opt_datetime(py, self.inner.revoked_at)
    }

    fn __repr__(&self) -> String {
        let d = &self.inner;
        format!(
            "UserDevice(device_id={}, name={}, paired={}, paired_at={}, revoked_at={})",
            r(&d.device_id),
            ro(d.name.as_deref()),
            b(d.paired),
            ots(d.paired_at),
            ots(d.revoked_at)
        )
    }
}

/// A user of the agent (Partner mode): the integrator's `external_id`, a name, and the user's devices.
#[pyclass(frozen, name = "User", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PyUser {
    inner: client::UserInfo,
    /// `inner.devices` as Python sees them, built once: every read gives the same list.
    devices: Py<PyList>,
    /// `inner.last_answer` as an `AuditEntry`, built once.
    last_answer: Option<Py<PyAny>>,
}

impl PyUser {
    fn from_client(py: Python<'_>, inner: client::UserInfo) -> PyResult<Self> {
        let devices = inner
            .devices
            .iter()
            .cloned()
            .map(|inner| Py::new(py, PyUserDevice { inner }))
            .collect::<PyResult<Vec<_>>>()?;
        let last_answer = inner.last_answer.clone().map(|e| e.to_py(py)).transpose()?;
        Ok(PyUser {
            devices: PyList::new(py, devices)?.unbind(),
            last_answer,
            inner,
        })
    }
}

#[pymethods]
impl PyUser {
    /// The integrator's id for the user.
    #[getter]
    fn external_id(&self) -> &str {
        &self.inner.external_id
    }

    /// The user's name, as the app shows it.
    #[getter]
    fn name(&self) -> &str {
        &self.inner.name
    }

    /// When the agent first connected the user.
    #[getter]
    fn connected_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime(py, self.inner.connected_at)
    }

    /// When the agent disconnected the user; None while connected.
    #[getter]
    fn disconnected_at<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        opt_datetime(py, self.inner.disconnected_at)
    }

    /// True until the user is disconnected.
    #[getter]
    fn connected(&self) -> bool {
        self.inner.disconnected_at.is_none()
    }

    /// The user's devices (`UserDevice`), the links not yet used included, oldest first.
    #[getter]
    fn devices(&self, py: Python<'_>) -> Py<PyList> {
        self.devices.clone_ref(py)
    }

    /// The newest question addressed to the user that was answered (an `AuditEntry`), when the recent log
    /// holds one.
    #[getter]
    fn last_answer(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.last_answer.as_ref().map(|e| e.clone_ref(py))
    }

    /// The user as JSON (camelCase, RFC 3339 times), as `pacerelle user show --json` prints it.
    fn to_json(&self) -> String {
        serde_json::to_string(&self.inner).unwrap_or_default()
    }

    fn __repr__(&self) -> String {
        let u = &self.inner;
        format!(
            "User(external_id={}, name={}, connected_at={}, disconnected_at={}, devices={})",
            r(&u.external_id),
            r(&u.name),
            r(&ts(u.connected_at)),
            ots(u.disconnected_at),
            u.devices.len()
        )
    }
}
