//! What the agent receives and stores (client `agent`): tasks, rejected items, checkpoints, stored items.

use pacerelle_client as client;
use pyo3::prelude::*;
use pyo3::types::PyList;

use super::{b, ts};
use crate::convert::{datetime, r, rl, ro};

to_py_wrap! {
    client::Message => PyMessage,
    client::Checkpoint => PyCheckpoint,
    client::Stored => PyStored,
    client::Processed => PyProcessed,
}

to_py_via! {
    client::Inbox => PyInbox,
}

/// A task received by the agent, opened.
#[pyclass(frozen, name = "Message", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PyMessage {
    inner: client::Message,
}

#[pymethods]
impl PyMessage {
    /// The id the device chose; reply with it.
    #[getter]
    fn message_id(&self) -> &str {
        &self.inner.message_id
    }

    /// What the person asks.
    #[getter]
    fn text(&self) -> &str {
        &self.inner.text
    }

    /// The device that sent it.
    #[getter]
    fn device_id(&self) -> &str {
        &self.inner.from
    }

    /// That device's name.
    #[getter]
    fn device_name(&self) -> &str {
        &self.inner.from_name
    }

    /// When the relay stored it.
    #[getter]
    fn sent_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime(py, self.inner.sent_at)
    }

    /// Delivered before and not marked processed (for example before a crash).
    #[getter]
    fn redelivered(&self) -> bool {
        self.inner.redelivered
    }

    /// Its position in the stream.
    #[getter]
    fn cursor(&self) -> String {
        self.inner.cursor.to_string()
    }

    /// Partner mode: the `external_id` of the user whose device sent it, as the agent's roster says; None
    /// when the owner sent it. A user's task is that user's request, not the owner's instruction.
    #[getter]
    fn user(&self) -> Option<&str> {
        self.inner.user.as_deref()
    }

    fn __repr__(&self) -> String {
        let m = &self.inner;
        format!(
            "Message(message_id={}, text={}, device_id={}, device_name={}, user={}, sent_at={}, redelivered={}, \
             cursor={})",
            r(&m.message_id),
            r(&m.text),
            r(&m.from),
            r(&m.from_name),
            ro(m.user.as_deref()),
            r(&ts(m.sent_at)),
            b(m.redelivered),
            r(&m.cursor.to_string())
        )
    }
}

/// A task whose envelope did not open: not the person's instruction. Mark it processed to drop it.
#[pyclass(frozen, name = "Rejected", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PyRejected {
    inner: client::Rejected,
}

/// Rejected items as a Python list (of an inbox, a question list or a conversation page).
pub(super) fn rejected_list(py: Python<'_>, rejected: Vec<client::Rejected>) -> PyResult<Py<PyList>> {
    let items = rejected
        .into_iter()
        .map(|inner| Py::new(py, PyRejected { inner }))
        .collect::<PyResult<Vec<_>>>()?;
    Ok(PyList::new(py, items)?.unbind())
}

#[pymethods]
impl PyRejected {
    /// Its id.
    #[getter]
    fn message_id(&self) -> &str {
        &self.inner.message_id
    }

    /// The device (or, on the device side, the agent) it claims to come from.
    #[getter]
    fn device_id(&self) -> &str {
        &self.inner.from
    }

    /// Why it was rejected.
    #[getter]
    fn reason(&self) -> String {
        self.inner.reason.to_string()
    }

    fn __repr__(&self) -> String {
        format!(
            "Rejected(message_id={}, device_id={}, reason={})",
            r(&self.inner.message_id),
            r(&self.inner.from),
            r(&self.inner.reason.to_string())
        )
    }
}

/// The result of a wait.
#[pyclass(frozen, name = "Inbox", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PyInbox {
    messages: Py<PyList>,
    rejected: Py<PyList>,
    /// Where to continue listening.
    #[pyo3(get)]
    cursor: String,
}

impl PyInbox {
    fn from_client(py: Python<'_>, inbox: client::Inbox) -> PyResult<Self> {
        let messages = inbox
            .messages
            .into_iter()
            .map(|inner| Py::new(py, PyMessage { inner }))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(PyInbox {
            messages: PyList::new(py, messages)?.unbind(),
            rejected: rejected_list(py, inbox.rejected)?,
            cursor: inbox.cursor.to_string(),
        })
    }
}

#[pymethods]
impl PyInbox {
    /// Tasks, oldest first; empty when the wait ended without one.
    #[getter]
    fn messages(&self, py: Python<'_>) -> Py<PyList> {
        self.messages.clone_ref(py)
    }

    /// Tasks that failed to open.
    #[getter]
    fn rejected(&self, py: Python<'_>) -> Py<PyList> {
        self.rejected.clone_ref(py)
    }

    fn __len__(&self, py: Python<'_>) -> usize {
        self.messages.bind(py).len()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "Inbox(messages={}, rejected={}, cursor={})",
            self.messages.bind(py).repr()?,
            self.rejected.bind(py).repr()?,
            r(&self.cursor)
        ))
    }
}

/// A checkpoint, opened.
#[pyclass(frozen, name = "Checkpoint", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PyCheckpoint {
    inner: client::Checkpoint,
}

#[pymethods]
impl PyCheckpoint {
    /// Its id.
    #[getter]
    fn checkpoint_id(&self) -> &str {
        &self.inner.checkpoint_id
    }

    /// What has been done.
    #[getter]
    fn summary(&self) -> &str {
        &self.inner.summary
    }

    /// What to do next.
    #[getter]
    fn next_action(&self) -> &str {
        &self.inner.next_action
    }

    /// The tasks it concerns.
    #[getter]
    fn message_ids(&self) -> Vec<String> {
        self.inner.message_ids.clone()
    }

    /// When it was saved.
    #[getter]
    fn created_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime(py, self.inner.created_at)
    }

    fn __repr__(&self) -> String {
        let c = &self.inner;
        format!(
            "Checkpoint(checkpoint_id={}, summary={}, next_action={}, message_ids={}, created_at={})",
            r(&c.checkpoint_id),
            r(&c.summary),
            r(&c.next_action),
            rl(&c.message_ids),
            r(&ts(c.created_at))
        )
    }
}

/// An item as the relay stored it (idempotent sends return the first copy).
#[pyclass(frozen, name = "Stored", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PyStored {
    inner: client::Stored,
}

#[pymethods]
impl PyStored {
    /// The item's id.
    #[getter]
    fn id(&self) -> &str {
        &self.inner.id
    }

    /// Its position in the agent's stream.
    #[getter]
    fn cursor(&self) -> String {
        self.inner.cursor.to_string()
    }

    /// When it was first stored.
    #[getter]
    fn created_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime(py, self.inner.created_at)
    }

    /// False when the id was already stored and this call changed nothing.
    #[getter]
    fn created(&self) -> bool {
        self.inner.created
    }

    fn __repr__(&self) -> String {
        let s = &self.inner;
        format!(
            "Stored(id={}, cursor={}, created_at={}, created={})",
            r(&s.id),
            r(&s.cursor.to_string()),
            r(&ts(s.created_at)),
            b(s.created)
        )
    }
}

/// A task marked processed.
#[pyclass(frozen, name = "Processed", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PyProcessed {
    inner: client::Processed,
}

#[pymethods]
impl PyProcessed {
    /// The task.
    #[getter]
    fn message_id(&self) -> &str {
        &self.inner.message_id
    }

    /// When it was first marked processed.
    #[getter]
    fn processed_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime(py, self.inner.processed_at)
    }

    fn __repr__(&self) -> String {
        format!(
            "Processed(message_id={}, processed_at={})",
            r(&self.inner.message_id),
            r(&ts(self.inner.processed_at))
        )
    }
}
