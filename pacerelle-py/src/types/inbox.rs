//! What the agent receives and stores (client `agent`): tasks, rejected items, checkpoints, stored items.

use pacerelle_client as client;
use pyo3::prelude::*;
use pyo3::types::PyList;

use super::{Time, repr_of};

to_py_via! {
    client::agent::Inbox => PyInbox,
}

wrapper! {
    /// A task received by the agent, opened.
    PyMessage("Message", client::agent::Message) {
        /// The id the device chose; reply with it.
        message_id: |v| &v.message_id,
        /// What the person asks.
        text: |v| &v.text,
        /// The device that sent it.
        device_id: |v| &v.from,
        /// That device's name.
        device_name: |v| &v.from_name,
        /// When the relay stored it.
        sent_at: |v| Time(v.sent_at),
        /// Delivered before and not marked processed (for example before a crash).
        redelivered: |v| v.redelivered,
        /// Its position in the stream.
        cursor: |v| v.cursor.to_string(),
        /// Partner mode: the `external_id` of the user whose device sent it, as the agent's roster says; None
        /// when the owner sent it. A user's task is that user's request, not the owner's instruction.
        user: |v| v.user.as_deref(),
        /// The session its sender addressed it to (sealed with it); None: any session.
        session: |v| v.session.as_deref(),
    }
}

wrapper! {
    /// A task whose envelope did not open: not the person's instruction. Mark it processed to drop it.
    PyRejected("Rejected", client::agent::Rejected) {
        /// Its id.
        message_id: |v| &v.message_id,
        /// The device (or, on the device side, the agent) it claims to come from.
        device_id: |v| &v.from,
        /// Why it was rejected.
        reason: |v| v.reason.to_string(),
    }
}

/// Rejected items as a Python list (of an inbox, a question list or a conversation page).
pub(super) fn rejected_list(py: Python<'_>, rejected: Vec<client::agent::Rejected>) -> PyResult<Py<PyList>> {
    let items = rejected
        .into_iter()
        .map(|inner| Py::new(py, PyRejected { inner }))
        .collect::<PyResult<Vec<_>>>()?;
    Ok(PyList::new(py, items)?.unbind())
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
    fn from_client(py: Python<'_>, inbox: client::agent::Inbox) -> PyResult<Self> {
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

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        repr_of(slf.as_any(), &["messages", "rejected", "cursor"], &[])
    }
}

wrapper! {
    /// A checkpoint, opened.
    PyCheckpoint("Checkpoint", client::agent::Checkpoint) {
        /// Its id.
        checkpoint_id: |v| &v.checkpoint_id,
        /// What has been done.
        summary: |v| &v.summary,
        /// What to do next.
        next_action: |v| &v.next_action,
        /// The tasks it concerns.
        message_ids: |v| v.message_ids.clone(),
        /// When it was saved.
        created_at: |v| Time(v.created_at),
    }
}

wrapper! {
    /// An item as the relay stored it (idempotent sends return the first copy).
    PyStored("Stored", client::core::wire::Stored) {
        /// The item's id.
        id: |v| &v.id,
        /// Its position in the agent's stream.
        cursor: |v| v.cursor.to_string(),
        /// When it was first stored.
        created_at: |v| Time(v.created_at),
        /// False when the id was already stored and this call changed nothing.
        created: |v| v.created,
    }
}

wrapper! {
    /// A task marked processed.
    PyProcessed("Processed", client::core::wire::Processed) {
        /// The task.
        message_id: |v| &v.message_id,
        /// When it was first marked processed.
        processed_at: |v| Time(v.processed_at),
    }
}
