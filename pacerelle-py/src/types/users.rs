//! Partner mode's users (client `users`): a user of the agent and its devices.

use pacerelle_client as client;
use pyo3::prelude::*;
use pyo3::types::PyList;

use super::{Time, ToPy};

to_py_via! {
    client::agent::UserInfo => PyUser,
}

wrapper! {
    /// One device of a user: a phone that opened the user's link, or a link not yet used.
    PyUserDevice("UserDevice", client::agent::UserDevice) {
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

wrapper! {
    /// A user of the agent (Partner mode): the integrator's `external_id`, a name, and the user's devices.
    PyUser("User", client::agent::UserInfo, kept {
        /// `inner.devices` as Python sees them, built once: every read gives the same list.
        devices: Py<PyList>,
        /// `inner.last_answer` as an `AuditEntry`, built once.
        last_answer: Option<Py<PyAny>>,
    }) {
        /// The integrator's id for the user.
        external_id: |v| &v.external_id,
        /// The user's name, as the app shows it.
        name: |v| &v.name,
        /// When the agent first connected the user.
        connected_at: |v| Time(v.connected_at),
        /// When the agent disconnected the user; None while connected.
        disconnected_at: |v| v.disconnected_at.map(Time),
        /// True until the user is disconnected.
        connected: |v| v.disconnected_at.is_none(),
        /// The user's devices (`UserDevice`), the links not yet used included, oldest first.
        devices: |_v, py, this| this.devices.clone_ref(py),
        /// The newest question addressed to the user that was answered (an `AuditEntry`), when the recent log
        /// holds one.
        last_answer: |_v, py, this| this.last_answer.as_ref().map(|e| e.clone_ref(py)),
    }
    methods {
        /// The user as JSON (camelCase, RFC 3339 times), as `pacerelle user show --json` prints it.
        fn to_json(&self) -> String {
            serde_json::to_string(&self.inner).unwrap_or_default()
        }
    }
}

impl PyUser {
    fn from_client(py: Python<'_>, inner: client::agent::UserInfo) -> PyResult<Self> {
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
