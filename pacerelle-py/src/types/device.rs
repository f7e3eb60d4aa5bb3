//! The device side (client `device`): credentials, the device's record, its conversation.

use pacerelle_client as client;
use pyo3::prelude::*;
use pyo3::types::PyList;

use super::agent::PyAgentInfo;
use super::inbox::rejected_list;
use super::questions::PyQuestion;
use super::{Time, repr_of};
use crate::convert::name;

to_py_via! {
    client::core::wire::DeviceSelf => PyDeviceSelf,
    client::device::ConversationPage => PyConversationPage,
}

/// What a device keeps after joining. A secret: `repr` hides the token and key; store
/// `to_secret_string()` where only its owner can read it.
#[pyclass(frozen, name = "DeviceCredentials", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PyDeviceCredentials {
    pub(crate) inner: client::device::DeviceCredentials,
}

#[pymethods]
impl PyDeviceCredentials {
    /// Parses `to_secret_string()`'s `pcrdev1_…` string.
    #[staticmethod]
    fn from_secret_string(text: &str) -> PyResult<Self> {
        client::device::DeviceCredentials::from_secret_string(text)
            .map(|inner| PyDeviceCredentials { inner })
            .map_err(crate::errors::to_py_err)
    }

    /// One opaque `pcrdev1_…` string holding everything.
    fn to_secret_string(&self) -> String {
        self.inner.to_secret_string()
    }

    /// The relay's base URL.
    #[getter]
    fn relay_url(&self) -> String {
        self.inner.relay_url.clone()
    }

    /// The agent paired with.
    #[getter]
    fn agent_id(&self) -> String {
        self.inner.agent_id.clone()
    }

    /// Its display name.
    #[getter]
    fn agent_name(&self) -> String {
        self.inner.agent_name.clone()
    }

    /// This device's id.
    #[getter]
    fn device_id(&self) -> String {
        self.inner.device_id.clone()
    }

    /// 'owner' or 'user'.
    #[getter]
    fn role(&self) -> &'static str {
        self.inner.role.as_str()
    }

    /// Partner mode: the `external_id` of the user this device belongs to, as the pairing offer sealed it;
    /// None for an owner's device.
    #[getter]
    fn user(&self) -> Option<String> {
        self.inner.user.as_ref().map(|u| u.external_id.clone())
    }

    /// Partner mode: that user's name.
    #[getter]
    fn user_name(&self) -> Option<String> {
        self.inner.user.as_ref().map(|u| u.name.clone())
    }

    /// Partner mode: the accent colour (`#rrggbb`) to show the agent with, as the offer sealed it.
    #[getter]
    fn accent_color(&self) -> Option<String> {
        self.inner.branding.as_ref().and_then(|b| b.accent_color.clone())
    }

    /// Partner mode: the agent's icon (a `data:image/…;base64,…` URL), as the offer sealed it.
    #[getter]
    fn icon(&self) -> Option<String> {
        self.inner.branding.as_ref().and_then(|b| b.icon.clone())
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        // The secret that `to_secret_string` gives is never shown.
        repr_of(
            slf.as_any(),
            &["relay_url", "agent_id", "agent_name", "device_id", "role"],
            &[],
        )
    }
}

wrapper! {
    /// A paired device.
    PyDeviceInfo("DeviceInfo", client::core::wire::DeviceInfo) {
        /// Its id.
        device_id: |v| &v.device_id,
        /// The name it gave when it joined.
        name: |v| &v.name,
        /// The label the agent side gave the pairing offer.
        label: |v| v.label.as_deref(),
        /// 'owner' or 'user'.
        role: |v| v.role.as_str(),
        /// When it paired.
        created_at: |v| Time(v.created_at),
        /// When it was revoked, if it was.
        revoked_at: |v| v.revoked_at.map(Time),
    }
}

/// A device and its agent, as the relay knows them.
#[pyclass(frozen, name = "DeviceSelf", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PyDeviceSelf {
    device: Py<PyDeviceInfo>,
    agent: Py<PyAgentInfo>,
}

impl PyDeviceSelf {
    fn from_client(py: Python<'_>, s: client::core::wire::DeviceSelf) -> PyResult<Self> {
        Ok(PyDeviceSelf {
            device: Py::new(py, PyDeviceInfo { inner: s.device })?,
            agent: Py::new(py, PyAgentInfo { inner: s.agent })?,
        })
    }
}

#[pymethods]
impl PyDeviceSelf {
    /// The device.
    #[getter]
    fn device(&self, py: Python<'_>) -> Py<PyDeviceInfo> {
        self.device.clone_ref(py)
    }

    /// Its agent.
    #[getter]
    fn agent(&self, py: Python<'_>) -> Py<PyAgentInfo> {
        self.agent.clone_ref(py)
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        repr_of(slf.as_any(), &["device", "agent"], &[])
    }
}

wrapper! {
    /// One item of a device's conversation, opened.
    PyConversationItem("ConversationItem", client::device::ConversationItem, kept {
        /// `inner.question` as Python sees it, built once: every read gives the same object.
        question: Option<Py<PyQuestion>>,
    }) {
        /// 'message' (a task this device sent), 'reply', 'question' or 'notification'.
        kind: |v| name(&v.kind),
        /// The message, reply, question or notification id.
        id: |v| &v.id,
        /// The text (for a question, the question).
        text: |v| &v.text,
        /// For a reply, the task it answers.
        source_message_id: |v| v.source_message_id.as_deref(),
        /// For a task: 'sent', 'delivered' or 'processed'.
        state: |v| v.state.as_ref().map(name),
        /// For a question: the question, with its state as of this read.
        question: |_v, py, this| this.question.as_ref().map(|q| q.clone_ref(py)),
        /// For a notification, its title.
        title: |v| v.title.as_deref(),
        /// For a notification: 'info', 'warning', 'error' or 'success'.
        level: |v| v.level.as_ref().map(name),
        /// When the relay stored it.
        created_at: |v| Time(v.created_at),
        /// Its position in the stream.
        cursor: |v| v.cursor.to_string(),
    }
}

impl PyConversationItem {
    fn from_client(py: Python<'_>, inner: client::device::ConversationItem) -> PyResult<Self> {
        let question = inner
            .question
            .clone()
            .map(|q| Py::new(py, PyQuestion::from_client(py, q)?))
            .transpose()?;
        Ok(PyConversationItem { inner, question })
    }
}

/// A page of a device's conversation.
#[pyclass(frozen, name = "ConversationPage", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PyConversationPage {
    items: Py<PyList>,
    rejected: Py<PyList>,
    /// Where to continue.
    #[pyo3(get)]
    cursor: String,
}

impl PyConversationPage {
    fn from_client(py: Python<'_>, page: client::device::ConversationPage) -> PyResult<Self> {
        let items = page
            .items
            .into_iter()
            .map(|i| Py::new(py, PyConversationItem::from_client(py, i)?))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(PyConversationPage {
            items: PyList::new(py, items)?.unbind(),
            rejected: rejected_list(py, page.rejected)?,
            cursor: page.cursor.to_string(),
        })
    }
}

#[pymethods]
impl PyConversationPage {
    /// Oldest first.
    #[getter]
    fn items(&self, py: Python<'_>) -> Py<PyList> {
        self.items.clone_ref(py)
    }

    /// Items whose envelopes did not open.
    #[getter]
    fn rejected(&self, py: Python<'_>) -> Py<PyList> {
        self.rejected.clone_ref(py)
    }

    fn __len__(&self, py: Python<'_>) -> usize {
        self.items.bind(py).len()
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        repr_of(slf.as_any(), &["items", "rejected", "cursor"], &[])
    }
}
