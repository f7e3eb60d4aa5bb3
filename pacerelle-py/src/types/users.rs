//! Partner mode's users (client `users`): a user of the agent and its devices.

use pacerelle_client as client;
use pyo3::prelude::*;
use pyo3::types::PyList;

use super::{Time, ToPy, repr_of};
use crate::convert::{datetime, opt_datetime};

to_py_via! {
    client::UserInfo => PyUser,
}

wrapper! {
    /// One device of a user: a phone that opened the user's link, or a link not yet used.
    PyUserDevice("UserDevice", client::UserDevice) {
        /// Its id.
        device_id: |v| &v.device_id,
        /// The name the device gave when it opened the link; None while the link is unused.
        name: |v| v.name.as_deref(),
        /// True once the user opened the link in the app (the device is paired).
        paired: |v| v.paired,
        /// When it paired.
        paired_at: |v| v.paired_at.map(Time),
        /// When it was revoked (by the agent, or when its user was disconnected).
        revoked_at: |v| v.revoked_at.map(Time),
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

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        repr_of(
            slf.as_any(),
            &[
                "external_id",
                "name",
                "connected_at",
                "disconnected_at",
                "devices",
            ],
            &[],
        )
    }
}
