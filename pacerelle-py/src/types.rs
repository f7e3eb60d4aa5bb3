//! The typed results: frozen classes with a `__repr__`, each built from the client's value.
//!
//! Times are kept as the client's [`Timestamp`] and given to Python as aware UTC `datetime`s; wire enums
//! are given as their names (`"pending"`, `"yes_no"`…).

use pacerelle_client as client;
use pacerelle_client::{Answer, Timestamp};
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::convert::{datetime, name, opt_datetime, r, rl, ro};

/// A Rust value that becomes a Python object (inside `Python::attach`, at the end of a call).
pub(crate) trait ToPy: Send + 'static {
    fn to_py(self, py: Python<'_>) -> PyResult<Py<PyAny>>;
}

impl ToPy for () {
    fn to_py(self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(py.None())
    }
}

impl<T: ToPy> ToPy for Vec<T> {
    fn to_py(self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let items = self
            .into_iter()
            .map(|v| v.to_py(py))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(PyList::new(py, items)?.into_any().unbind())
    }
}

/// Implements [`ToPy`] for a client type through the pyclass built `From` it.
macro_rules! to_py_via {
    ($($client:ty => $class:ty),* $(,)?) => {$(
        impl ToPy for $client {
            fn to_py(self, py: Python<'_>) -> PyResult<Py<PyAny>> {
                Ok(Py::new(py, <$class>::from_client(py, self)?)?.into_any())
            }
        }
    )*};
}

to_py_via! {
    client::Inbox => PyInbox,
    client::Message => PyMessage,
    client::Checkpoint => PyCheckpoint,
    client::Stored => PyStored,
    client::Processed => PyProcessed,
    client::SessionInfo => PySessionInfo,
    client::Status => PyStatus,
    client::AgentInfo => PyAgentInfo,
    client::DeviceInfo => PyDeviceInfo,
    client::PairingLink => PyPairingLink,
    client::Asked => PyAsked,
    client::AnswerOutcome => PyAnswerOutcome,
    client::AuditEntry => PyAuditEntry,
    client::WebhookInfo => PyWebhookInfo,
    client::Delivery => PyDelivery,
    client::WebhookEvent => PyWebhookEvent,
    client::ConversationPage => PyConversationPage,
    client::OpenedQuestion => PyQuestion,
    client::QuestionList => PyQuestionList,
    client::DeviceSelf => PyDeviceSelf,
}

/// An answer as Python sees it: True (yes), False (no), a list of options, or the written text.
pub(crate) fn answer_to_py(py: Python<'_>, answer: &Answer) -> PyResult<Py<PyAny>> {
    Ok(match answer {
        Answer::Yes => true.into_pyobject(py)?.to_owned().into_any().unbind(),
        Answer::No => false.into_pyobject(py)?.to_owned().into_any().unbind(),
        Answer::Options(chosen) => PyList::new(py, chosen)?.into_any().unbind(),
        Answer::Text(text) => text.into_pyobject(py)?.into_any().unbind(),
        #[allow(unreachable_patterns)]
        _ => py.None(),
    })
}

fn ts(t: Timestamp) -> String {
    t.to_rfc3339()
}

fn ots(t: Option<Timestamp>) -> String {
    t.map_or_else(|| "None".into(), |t| r(&t.to_rfc3339()))
}

fn b(v: bool) -> &'static str {
    if v { "True" } else { "False" }
}

// ---------------------------------------------------------------- inbox

/// A task received by the agent, opened.
#[pyclass(frozen, name = "Message", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PyMessage {
    /// The id the device chose; reply with it.
    #[pyo3(get)]
    message_id: String,
    /// What the person asks.
    #[pyo3(get)]
    text: String,
    /// The device that sent it.
    #[pyo3(get)]
    device_id: String,
    /// That device's name.
    #[pyo3(get)]
    device_name: String,
    sent_at: Timestamp,
    /// Delivered before and not marked processed (for example before a crash).
    #[pyo3(get)]
    redelivered: bool,
    /// Its position in the stream.
    #[pyo3(get)]
    cursor: String,
}

impl PyMessage {
    fn from_client(_py: Python<'_>, m: client::Message) -> PyResult<Self> {
        Ok(PyMessage {
            message_id: m.message_id,
            text: m.text,
            device_id: m.from,
            device_name: m.from_name,
            sent_at: m.sent_at,
            redelivered: m.redelivered,
            cursor: m.cursor.to_string(),
        })
    }
}

#[pymethods]
impl PyMessage {
    /// When the relay stored it.
    #[getter]
    fn sent_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime(py, self.sent_at)
    }

    fn __repr__(&self) -> String {
        format!(
            "Message(message_id={}, text={}, device_id={}, device_name={}, sent_at={}, redelivered={}, cursor={})",
            r(&self.message_id),
            r(&self.text),
            r(&self.device_id),
            r(&self.device_name),
            r(&ts(self.sent_at)),
            b(self.redelivered),
            r(&self.cursor)
        )
    }
}

/// A task whose envelope did not open: not the person's instruction. Mark it processed to drop it.
#[pyclass(frozen, name = "Rejected", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PyRejected {
    /// Its id.
    #[pyo3(get)]
    message_id: String,
    /// The device (or, on the device side, the agent) it claims to come from.
    #[pyo3(get)]
    device_id: String,
    /// Why it was rejected.
    #[pyo3(get)]
    reason: String,
}

impl PyRejected {
    fn new(r: client::Rejected) -> Self {
        PyRejected {
            message_id: r.message_id,
            device_id: r.from,
            reason: r.reason.to_string(),
        }
    }
}

fn rejected_list(py: Python<'_>, rejected: Vec<client::Rejected>) -> PyResult<Py<PyList>> {
    let items = rejected
        .into_iter()
        .map(|x| Py::new(py, PyRejected::new(x)))
        .collect::<PyResult<Vec<_>>>()?;
    Ok(PyList::new(py, items)?.unbind())
}

#[pymethods]
impl PyRejected {
    fn __repr__(&self) -> String {
        format!(
            "Rejected(message_id={}, device_id={}, reason={})",
            r(&self.message_id),
            r(&self.device_id),
            r(&self.reason)
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
            .map(|m| Py::new(py, PyMessage::from_client(py, m)?))
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
    /// Its id.
    #[pyo3(get)]
    checkpoint_id: String,
    /// What has been done.
    #[pyo3(get)]
    summary: String,
    /// What to do next.
    #[pyo3(get)]
    next_action: String,
    /// The tasks it concerns.
    #[pyo3(get)]
    message_ids: Vec<String>,
    created_at: Timestamp,
}

impl PyCheckpoint {
    fn from_client(_py: Python<'_>, c: client::Checkpoint) -> PyResult<Self> {
        Ok(PyCheckpoint {
            checkpoint_id: c.checkpoint_id,
            summary: c.summary,
            next_action: c.next_action,
            message_ids: c.message_ids,
            created_at: c.created_at,
        })
    }
}

#[pymethods]
impl PyCheckpoint {
    /// When it was saved.
    #[getter]
    fn created_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime(py, self.created_at)
    }

    fn __repr__(&self) -> String {
        format!(
            "Checkpoint(checkpoint_id={}, summary={}, next_action={}, message_ids={}, created_at={})",
            r(&self.checkpoint_id),
            r(&self.summary),
            r(&self.next_action),
            rl(&self.message_ids),
            r(&ts(self.created_at))
        )
    }
}

/// An item as the relay stored it (idempotent sends return the first copy).
#[pyclass(frozen, name = "Stored", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PyStored {
    /// The item's id.
    #[pyo3(get)]
    id: String,
    /// Its position in the agent's stream.
    #[pyo3(get)]
    cursor: String,
    created_at: Timestamp,
    /// False when the id was already stored and this call changed nothing.
    #[pyo3(get)]
    created: bool,
}

impl PyStored {
    fn from_client(_py: Python<'_>, s: client::Stored) -> PyResult<Self> {
        Ok(PyStored {
            id: s.id,
            cursor: s.cursor.to_string(),
            created_at: s.created_at,
            created: s.created,
        })
    }
}

#[pymethods]
impl PyStored {
    /// When it was first stored.
    #[getter]
    fn created_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime(py, self.created_at)
    }

    fn __repr__(&self) -> String {
        format!(
            "Stored(id={}, cursor={}, created_at={}, created={})",
            r(&self.id),
            r(&self.cursor),
            r(&ts(self.created_at)),
            b(self.created)
        )
    }
}

/// A task marked processed.
#[pyclass(frozen, name = "Processed", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PyProcessed {
    /// The task.
    #[pyo3(get)]
    message_id: String,
    processed_at: Timestamp,
}

impl PyProcessed {
    fn from_client(_py: Python<'_>, p: client::Processed) -> PyResult<Self> {
        Ok(PyProcessed {
            message_id: p.message_id,
            processed_at: p.processed_at,
        })
    }
}

#[pymethods]
impl PyProcessed {
    /// When it was first marked processed.
    #[getter]
    fn processed_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime(py, self.processed_at)
    }

    fn __repr__(&self) -> String {
        format!(
            "Processed(message_id={}, processed_at={})",
            r(&self.message_id),
            r(&ts(self.processed_at))
        )
    }
}

/// A session holding the agent's lease.
#[pyclass(frozen, name = "SessionInfo", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PySessionInfo {
    /// Its id.
    #[pyo3(get)]
    session_id: String,
    /// Where it runs.
    #[pyo3(get)]
    host: String,
    since: Timestamp,
    lease_expires_at: Timestamp,
}

impl PySessionInfo {
    fn from_client(_py: Python<'_>, s: client::SessionInfo) -> PyResult<Self> {
        Ok(PySessionInfo {
            session_id: s.session_id,
            host: s.host,
            since: s.since,
            lease_expires_at: s.lease_expires_at,
        })
    }
}

#[pymethods]
impl PySessionInfo {
    /// When it took the lease.
    #[getter]
    fn since<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime(py, self.since)
    }

    /// When the lease lapses without a heartbeat (the client sends one every 10 s).
    #[getter]
    fn lease_expires_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime(py, self.lease_expires_at)
    }

    fn __repr__(&self) -> String {
        format!(
            "SessionInfo(session_id={}, host={}, since={}, lease_expires_at={})",
            r(&self.session_id),
            r(&self.host),
            r(&ts(self.since)),
            r(&ts(self.lease_expires_at))
        )
    }
}

/// The session holding the lease, as the status reports it.
#[pyclass(frozen, name = "LeaseHolder", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PyLeaseHolder {
    /// Where the holder runs.
    #[pyo3(get)]
    host: String,
    since: Timestamp,
    last_heartbeat_at: Timestamp,
}

#[pymethods]
impl PyLeaseHolder {
    /// Since when it holds the lease.
    #[getter]
    fn since<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime(py, self.since)
    }

    /// Its last heartbeat.
    #[getter]
    fn last_heartbeat_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime(py, self.last_heartbeat_at)
    }

    fn __repr__(&self) -> String {
        format!(
            "LeaseHolder(host={}, since={}, last_heartbeat_at={})",
            r(&self.host),
            r(&ts(self.since)),
            r(&ts(self.last_heartbeat_at))
        )
    }
}

/// What the agent is doing, as the phone sees it, with counts of tasks.
#[pyclass(frozen, name = "Status", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PyStatus {
    /// The agent's id.
    #[pyo3(get)]
    agent_id: String,
    /// The agent's name.
    #[pyo3(get)]
    agent_name: String,
    /// 'offline', 'connected', 'listening', 'busy' or 'waiting_confirmation'.
    #[pyo3(get)]
    presence: String,
    session: Option<Py<PyLeaseHolder>>,
    /// A wait is parked now.
    #[pyo3(get)]
    listening: bool,
    last_wait_at: Option<Timestamp>,
    /// Tasks stored, never delivered.
    #[pyo3(get)]
    waiting: u64,
    /// Tasks delivered, not processed.
    #[pyo3(get)]
    in_progress: u64,
    /// Tasks marked processed.
    #[pyo3(get)]
    processed: u64,
    last_checkpoint_at: Option<Timestamp>,
    /// Paired devices not revoked.
    #[pyo3(get)]
    devices: u64,
    relay_time: Timestamp,
}

impl PyStatus {
    fn from_client(py: Python<'_>, s: client::Status) -> PyResult<Self> {
        Ok(PyStatus {
            agent_id: s.agent.agent_id,
            agent_name: s.agent.name,
            presence: name(&s.presence),
            session: s
                .session
                .map(|h| {
                    Py::new(
                        py,
                        PyLeaseHolder {
                            host: h.host,
                            since: h.since,
                            last_heartbeat_at: h.last_heartbeat_at,
                        },
                    )
                })
                .transpose()?,
            listening: s.listening,
            last_wait_at: s.last_wait_at,
            waiting: s.messages.waiting,
            in_progress: s.messages.in_progress,
            processed: s.messages.processed,
            last_checkpoint_at: s.last_checkpoint_at,
            devices: s.devices,
            relay_time: s.relay_time,
        })
    }
}

#[pymethods]
impl PyStatus {
    /// The session holding the lease, if any.
    #[getter]
    fn session(&self, py: Python<'_>) -> Option<Py<PyLeaseHolder>> {
        self.session.as_ref().map(|s| s.clone_ref(py))
    }

    /// When the last wait started or ended.
    #[getter]
    fn last_wait_at<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        opt_datetime(py, self.last_wait_at)
    }

    /// When the last checkpoint was saved.
    #[getter]
    fn last_checkpoint_at<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        opt_datetime(py, self.last_checkpoint_at)
    }

    /// The relay's clock.
    #[getter]
    fn relay_time<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime(py, self.relay_time)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let session = match &self.session {
            Some(s) => s.bind(py).repr()?.to_string(),
            None => "None".into(),
        };
        Ok(format!(
            "Status(agent_id={}, agent_name={}, presence={}, session={}, listening={}, waiting={}, \
             in_progress={}, processed={}, devices={})",
            r(&self.agent_id),
            r(&self.agent_name),
            r(&self.presence),
            session,
            b(self.listening),
            self.waiting,
            self.in_progress,
            self.processed,
            self.devices
        ))
    }
}

/// An agent as the relay knows it.
#[pyclass(frozen, name = "AgentInfo", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PyAgentInfo {
    /// Its id.
    #[pyo3(get)]
    agent_id: String,
    /// Its name.
    #[pyo3(get)]
    name: String,
    created_at: Timestamp,
}

impl PyAgentInfo {
    fn from_client(_py: Python<'_>, a: client::AgentInfo) -> PyResult<Self> {
        Ok(PyAgentInfo {
            agent_id: a.agent_id,
            name: a.name,
            created_at: a.created_at,
        })
    }
}

#[pymethods]
impl PyAgentInfo {
    /// When it registered.
    #[getter]
    fn created_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime(py, self.created_at)
    }

    fn __repr__(&self) -> String {
        format!(
            "AgentInfo(agent_id={}, name={}, created_at={})",
            r(&self.agent_id),
            r(&self.name),
            r(&ts(self.created_at))
        )
    }
}

/// A paired device.
#[pyclass(frozen, name = "DeviceInfo", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PyDeviceInfo {
    /// Its id.
    #[pyo3(get)]
    device_id: String,
    /// The name it gave when it joined.
    #[pyo3(get)]
    name: String,
    /// The label the agent side gave the pairing offer.
    #[pyo3(get)]
    label: Option<String>,
    /// 'owner' or 'user'.
    #[pyo3(get)]
    role: String,
    created_at: Timestamp,
    revoked_at: Option<Timestamp>,
}

impl PyDeviceInfo {
    fn from_client(_py: Python<'_>, d: client::DeviceInfo) -> PyResult<Self> {
        Ok(PyDeviceInfo {
            device_id: d.device_id,
            name: d.name,
            label: d.label,
            role: d.role.as_str().to_string(),
            created_at: d.created_at,
            revoked_at: d.revoked_at,
        })
    }
}

#[pymethods]
impl PyDeviceInfo {
    /// When it paired.
    #[getter]
    fn created_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime(py, self.created_at)
    }

    /// When it was revoked, if it was.
    #[getter]
    fn revoked_at<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        opt_datetime(py, self.revoked_at)
    }

    fn __repr__(&self) -> String {
        format!(
            "DeviceInfo(device_id={}, name={}, label={}, role={}, created_at={}, revoked_at={})",
            r(&self.device_id),
            r(&self.name),
            ro(self.label.as_deref()),
            r(&self.role),
            r(&ts(self.created_at)),
            ots(self.revoked_at)
        )
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
    fn from_client(py: Python<'_>, s: client::DeviceSelf) -> PyResult<Self> {
        Ok(PyDeviceSelf {
            device: Py::new(py, PyDeviceInfo::from_client(py, s.device)?)?,
            agent: Py::new(py, PyAgentInfo::from_client(py, s.agent)?)?,
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

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "DeviceSelf(device={}, agent={})",
            self.device.bind(py).repr()?,
            self.agent.bind(py).repr()?
        ))
    }
}

/// A pairing offer: show `link` as a link or QR code; whoever opens it first becomes a device.
#[pyclass(frozen, name = "PairingLink", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PyPairingLink {
    /// `https://relay/pair#v1.…`: the secret is in the fragment, which never reaches the relay.
    #[pyo3(get)]
    link: String,
    /// The offer's public id.
    #[pyo3(get)]
    pairing_id: String,
    /// The device that claiming it will create.
    #[pyo3(get)]
    device_id: String,
    expires_at: Timestamp,
}

impl PyPairingLink {
    fn from_client(_py: Python<'_>, p: client::PairingLink) -> PyResult<Self> {
        Ok(PyPairingLink {
            link: p.link,
            pairing_id: p.pairing_id,
            device_id: p.device_id,
            expires_at: p.expires_at,
        })
    }
}

#[pymethods]
impl PyPairingLink {
    /// When it stops being claimable.
    #[getter]
    fn expires_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime(py, self.expires_at)
    }

    fn __repr__(&self) -> String {
        // The link carries the pairing secret: shown only on purpose (`.link`).
        format!(
            "PairingLink(link='…', pairing_id={}, device_id={}, expires_at={})",
            r(&self.pairing_id),
            r(&self.device_id),
            r(&ts(self.expires_at))
        )
    }
}

// ---------------------------------------------------------------- questions

/// A question the relay has stored.
#[pyclass(frozen, name = "Asked", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PyAsked {
    /// Its id: wait for it, cancel it.
    #[pyo3(get)]
    question_id: String,
    pub(crate) expires_at: Timestamp,
    /// The digest of the question as asked: waiting with this `Asked` accepts only that question.
    digest: Option<String>,
}

impl PyAsked {
    fn from_client(_py: Python<'_>, a: client::Asked) -> PyResult<Self> {
        Ok(PyAsked {
            question_id: a.question_id,
            expires_at: a.expires_at,
            digest: a.digest,
        })
    }

    pub(crate) fn to_client(&self) -> client::Asked {
        client::Asked {
            question_id: self.question_id.clone(),
            expires_at: self.expires_at,
            digest: self.digest.clone(),
        }
    }
}

#[pymethods]
impl PyAsked {
    /// When it expires (as sealed in the agent's own copy).
    #[getter]
    fn expires_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime(py, self.expires_at)
    }

    fn __repr__(&self) -> String {
        format!(
            "Asked(question_id={}, expires_at={})",
            r(&self.question_id),
            r(&ts(self.expires_at))
        )
    }
}

/// What the agent concludes about a question. Only an authenticated, timely yes (or chosen options) is
/// `approved`.
#[pyclass(frozen, name = "AnswerOutcome", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PyAnswerOutcome {
    /// The question.
    #[pyo3(get)]
    question_id: String,
    /// 'pending', 'answered', 'expired' or 'cancelled'.
    #[pyo3(get)]
    state: String,
    /// True only for an authenticated, timely, explicit yes or valid chosen options.
    #[pyo3(get)]
    approved: bool,
    answer: Option<Answer>,
    /// The device that answered, when its answer opened.
    #[pyo3(get)]
    answered_by: Option<String>,
    /// That device's name.
    #[pyo3(get)]
    answered_by_name: Option<String>,
    answered_at: Option<Timestamp>,
    expires_at: Timestamp,
    /// Why an answer the relay reported was not accepted (then it is never approved).
    #[pyo3(get)]
    rejected: Option<String>,
    /// True when waiting longer cannot change the outcome.
    #[pyo3(get)]
    is_final: bool,
}

impl PyAnswerOutcome {
    fn from_client(_py: Python<'_>, o: client::AnswerOutcome) -> PyResult<Self> {
        Ok(PyAnswerOutcome {
            is_final: o.is_final(),
            question_id: o.question_id,
            state: o.state.as_str().to_string(),
            approved: o.approved,
            answer: o.answer,
            answered_by: o.answered_by,
            answered_by_name: o.answered_by_name,
            answered_at: o.answered_at,
            expires_at: o.expires_at,
            rejected: o.rejected,
        })
    }
}

#[pymethods]
impl PyAnswerOutcome {
    /// The answer when one opened: True (yes), False (no), the chosen options, or the written text.
    #[getter]
    fn answer(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        self.answer.as_ref().map(|a| answer_to_py(py, a)).transpose()
    }

    /// The answer as text: 'yes', 'no', the options joined by ', ', or the written text.
    #[getter]
    fn answer_text(&self) -> Option<String> {
        self.answer.as_ref().map(client::answer_text)
    }

    /// When the person answered (by the device's clock).
    #[getter]
    fn answered_at<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        opt_datetime(py, self.answered_at)
    }

    /// When the question expires.
    #[getter]
    fn expires_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime(py, self.expires_at)
    }

    fn __repr__(&self) -> String {
        format!(
            "AnswerOutcome(question_id={}, state={}, approved={}, answer={}, answered_by={}, \
             answered_by_name={}, answered_at={}, expires_at={}, rejected={})",
            r(&self.question_id),
            r(&self.state),
            b(self.approved),
            ro(self.answer_text().as_deref()),
            ro(self.answered_by.as_deref()),
            ro(self.answered_by_name.as_deref()),
            ots(self.answered_at),
            r(&ts(self.expires_at)),
            ro(self.rejected.as_deref())
        )
    }
}

/// One question of the answer log, opened and judged on the agent side.
#[pyclass(frozen, name = "AuditEntry", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PyAuditEntry {
    /// The question's id.
    #[pyo3(get)]
    question_id: String,
    /// 'yes_no', 'choice' or 'text'.
    #[pyo3(get)]
    kind: String,
    /// The question (empty when the agent's own copy did not open: see `rejected`).
    #[pyo3(get)]
    question: String,
    /// The options of a choice question.
    #[pyo3(get)]
    options: Vec<String>,
    /// Its details.
    #[pyo3(get)]
    details: Option<String>,
    /// 'pending', 'answered', 'expired' or 'cancelled', as the agent concludes.
    #[pyo3(get)]
    state: String,
    /// True only for an authenticated, timely yes or chosen options.
    #[pyo3(get)]
    approved: bool,
    /// The answer as text.
    #[pyo3(get)]
    answer: Option<String>,
    /// The device that answered.
    #[pyo3(get)]
    answered_by: Option<String>,
    /// That device's name.
    #[pyo3(get)]
    answered_by_name: Option<String>,
    answered_at: Option<Timestamp>,
    expires_at: Timestamp,
    created_at: Timestamp,
    closed_at: Option<Timestamp>,
    /// Why what the relay reported was not accepted, if it was not.
    #[pyo3(get)]
    rejected: Option<String>,
    json: String,
}

impl PyAuditEntry {
    fn from_client(_py: Python<'_>, e: client::AuditEntry) -> PyResult<Self> {
        let json = serde_json::to_string(&e).unwrap_or_default();
        Ok(PyAuditEntry {
            question_id: e.question_id,
            kind: e.kind.as_str().to_string(),
            question: e.question,
            options: e.options,
            details: e.details,
            state: e.state.as_str().to_string(),
            approved: e.approved,
            answer: e.answer,
            answered_by: e.answered_by,
            answered_by_name: e.answered_by_name,
            answered_at: e.answered_at,
            expires_at: e.expires_at,
            created_at: e.created_at,
            closed_at: e.closed_at,
            rejected: e.rejected,
            json,
        })
    }
}

#[pymethods]
impl PyAuditEntry {
    /// When the person answered (device clock).
    #[getter]
    fn answered_at<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        opt_datetime(py, self.answered_at)
    }

    /// When the question expires or expired.
    #[getter]
    fn expires_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime(py, self.expires_at)
    }

    /// When it was asked.
    #[getter]
    fn created_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime(py, self.created_at)
    }

    /// When it was answered, expired or cancelled (relay's record).
    #[getter]
    fn closed_at<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        opt_datetime(py, self.closed_at)
    }

    /// The entry as one line of the JSON Lines export (camelCase, RFC 3339 times).
    fn to_json(&self) -> String {
        self.json.clone()
    }

    fn __repr__(&self) -> String {
        format!(
            "AuditEntry(question_id={}, kind={}, question={}, state={}, approved={}, answer={}, \
             answered_by={}, created_at={})",
            r(&self.question_id),
            r(&self.kind),
            r(&self.question),
            r(&self.state),
            b(self.approved),
            ro(self.answer.as_deref()),
            ro(self.answered_by.as_deref()),
            r(&ts(self.created_at))
        )
    }
}

// ---------------------------------------------------------------- webhooks

/// The agent's webhook (`url` is None when none is set).
#[pyclass(frozen, name = "WebhookInfo", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PyWebhookInfo {
    /// The URL the relay POSTs question events to.
    #[pyo3(get)]
    url: Option<String>,
    updated_at: Option<Timestamp>,
}

impl PyWebhookInfo {
    fn from_client(_py: Python<'_>, w: client::WebhookInfo) -> PyResult<Self> {
        Ok(PyWebhookInfo {
            url: w.url,
            updated_at: w.updated_at,
        })
    }
}

#[pymethods]
impl PyWebhookInfo {
    /// When it was set.
    #[getter]
    fn updated_at<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        opt_datetime(py, self.updated_at)
    }

    fn __repr__(&self) -> String {
        format!(
            "WebhookInfo(url={}, updated_at={})",
            ro(self.url.as_deref()),
            ots(self.updated_at)
        )
    }
}

/// One webhook event's delivery state.
#[pyclass(frozen, name = "Delivery", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PyDelivery {
    /// The event id, also in the `Pacerelle-Event-Id` header.
    #[pyo3(get)]
    event_id: String,
    /// 'question.answered', 'question.expired' or 'question.cancelled'.
    #[pyo3(get)]
    event_type: String,
    /// The question concerned.
    #[pyo3(get)]
    question_id: String,
    /// 'pending' (will be tried again), 'delivered' or 'failed'.
    #[pyo3(get)]
    state: String,
    /// Attempts made.
    #[pyo3(get)]
    attempts: u32,
    /// The last HTTP status received.
    #[pyo3(get)]
    last_status: Option<u16>,
    /// The last error.
    #[pyo3(get)]
    last_error: Option<String>,
    created_at: Timestamp,
    delivered_at: Option<Timestamp>,
}

impl PyDelivery {
    fn from_client(_py: Python<'_>, d: client::Delivery) -> PyResult<Self> {
        Ok(PyDelivery {
            event_id: d.event_id,
            event_type: d.event_type,
            question_id: d.question_id,
            state: d.state,
            attempts: d.attempts,
            last_status: d.last_status,
            last_error: d.last_error,
            created_at: d.created_at,
            delivered_at: d.delivered_at,
        })
    }
}

#[pymethods]
impl PyDelivery {
    /// When the event was created.
    #[getter]
    fn created_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime(py, self.created_at)
    }

    /// When it was delivered.
    #[getter]
    fn delivered_at<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        opt_datetime(py, self.delivered_at)
    }

    fn __repr__(&self) -> String {
        format!(
            "Delivery(event_id={}, event_type={}, question_id={}, state={}, attempts={}, last_status={})",
            r(&self.event_id),
            r(&self.event_type),
            r(&self.question_id),
            r(&self.state),
            self.attempts,
            self.last_status.map_or_else(|| "None".into(), |s| s.to_string())
        )
    }
}

/// A verified webhook event: metadata in clear. The content stays sealed: to learn whether the owner
/// approved, ask the agent (`agent.wait_for_answer(event.question_id, timeout=0)`).
#[pyclass(frozen, name = "WebhookEvent", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PyWebhookEvent {
    /// Unique per event; deduplicate by it.
    #[pyo3(get)]
    id: String,
    /// 'question.answered', 'question.expired' or 'question.cancelled'.
    #[pyo3(get)]
    r#type: String,
    created_at: Timestamp,
    /// The agent.
    #[pyo3(get)]
    agent_id: String,
    /// The question.
    #[pyo3(get)]
    question_id: String,
    /// The question's kind.
    #[pyo3(get)]
    kind: String,
    /// The question's state by the relay's record.
    #[pyo3(get)]
    state: String,
    /// The device that answered, by the relay's record.
    #[pyo3(get)]
    answered_by: Option<String>,
    /// That device's name.
    #[pyo3(get)]
    answered_by_name: Option<String>,
    expires_at: Timestamp,
    closed_at: Option<Timestamp>,
}

impl PyWebhookEvent {
    fn from_client(_py: Python<'_>, e: client::WebhookEvent) -> PyResult<Self> {
        Ok(PyWebhookEvent {
            id: e.id,
            r#type: e.event_type,
            created_at: e.created_at,
            agent_id: e.agent_id,
            question_id: e.question.question_id,
            kind: e.question.kind.as_str().to_string(),
            state: e.question.state.as_str().to_string(),
            answered_by: e.question.answered_by,
            answered_by_name: e.question.answered_by_name,
            expires_at: e.question.expires_at,
            closed_at: e.question.closed_at,
        })
    }
}

#[pymethods]
impl PyWebhookEvent {
    /// When the event happened.
    #[getter]
    fn created_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime(py, self.created_at)
    }

    /// When the question expires.
    #[getter]
    fn expires_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime(py, self.expires_at)
    }

    /// When it was answered, expired or cancelled.
    #[getter]
    fn closed_at<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        opt_datetime(py, self.closed_at)
    }

    fn __repr__(&self) -> String {
        format!(
            "WebhookEvent(id={}, type={}, agent_id={}, question_id={}, state={}, answered_by={})",
            r(&self.id),
            r(&self.r#type),
            r(&self.agent_id),
            r(&self.question_id),
            r(&self.state),
            ro(self.answered_by.as_deref())
        )
    }
}

// ---------------------------------------------------------------- device side

/// What a device keeps after joining. A secret: `repr` hides the token and key; store
/// `to_secret_string()` where only its owner can read it.
#[pyclass(frozen, name = "DeviceCredentials", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PyDeviceCredentials {
    pub(crate) inner: client::DeviceCredentials,
}

#[pymethods]
impl PyDeviceCredentials {
    /// Parses `to_secret_string()`'s `pcrdev1_…` string.
    #[staticmethod]
    fn from_secret_string(text: &str) -> PyResult<Self> {
        client::DeviceCredentials::from_secret_string(text)
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

    fn __repr__(&self) -> String {
        format!(
            "DeviceCredentials(relay_url={}, agent_id={}, agent_name={}, device_id={}, role={}, …)",
            r(&self.inner.relay_url),
            r(&self.inner.agent_id),
            r(&self.inner.agent_name),
            r(&self.inner.device_id),
            r(self.inner.role.as_str())
        )
    }
}

/// A question as a device sees it, opened.
#[pyclass(frozen, name = "Question", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PyQuestion {
    /// Its id; answer with it.
    #[pyo3(get)]
    question_id: String,
    /// The question.
    #[pyo3(get)]
    question: String,
    /// 'yes_no', 'choice' or 'text'.
    #[pyo3(get)]
    kind: String,
    /// The options of a choice question.
    #[pyo3(get)]
    options: Vec<String>,
    /// Whether several options may be chosen.
    #[pyo3(get)]
    multiple: bool,
    /// More context.
    #[pyo3(get)]
    details: Option<String>,
    /// 'pending', 'answered', 'expired' or 'cancelled', as of this read.
    #[pyo3(get)]
    state: String,
    expires_at: Timestamp,
    /// The device that answered.
    #[pyo3(get)]
    answered_by: Option<String>,
    answered_at: Option<Timestamp>,
    created_at: Timestamp,
    /// True when an answer can still be given.
    #[pyo3(get)]
    is_open: bool,
}

impl PyQuestion {
    fn from_client(_py: Python<'_>, q: client::OpenedQuestion) -> PyResult<Self> {
        Ok(PyQuestion {
            is_open: q.is_open(),
            question_id: q.question_id,
            question: q.question,
            kind: q.kind.as_str().to_string(),
            options: q.options,
            multiple: q.multiple,
            details: q.details,
            state: q.state.as_str().to_string(),
            expires_at: q.expires_at,
            answered_by: q.answered_by,
            answered_at: q.answered_at,
            created_at: q.created_at,
        })
    }
}

#[pymethods]
impl PyQuestion {
    /// When it expires.
    #[getter]
    fn expires_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime(py, self.expires_at)
    }

    /// When the relay accepted the answer.
    #[getter]
    fn answered_at<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        opt_datetime(py, self.answered_at)
    }

    /// When it was asked.
    #[getter]
    fn created_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime(py, self.created_at)
    }

    fn __repr__(&self) -> String {
        format!(
            "Question(question_id={}, question={}, kind={}, options={}, multiple={}, state={}, expires_at={})",
            r(&self.question_id),
            r(&self.question),
            r(&self.kind),
            rl(&self.options),
            b(self.multiple),
            r(&self.state),
            r(&ts(self.expires_at))
        )
    }
}

/// The questions addressed to a device.
#[pyclass(frozen, name = "QuestionList", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PyQuestionList {
    questions: Py<PyList>,
    rejected: Py<PyList>,
}

impl PyQuestionList {
    fn from_client(py: Python<'_>, l: client::QuestionList) -> PyResult<Self> {
        let questions = l
            .questions
            .into_iter()
            .map(|q| Py::new(py, PyQuestion::from_client(py, q)?))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(PyQuestionList {
            questions: PyList::new(py, questions)?.unbind(),
            rejected: rejected_list(py, l.rejected)?,
        })
    }
}

#[pymethods]
impl PyQuestionList {
    /// Oldest first.
    #[getter]
    fn questions(&self, py: Python<'_>) -> Py<PyList> {
        self.questions.clone_ref(py)
    }

    /// Questions whose envelopes did not open.
    #[getter]
    fn rejected(&self, py: Python<'_>) -> Py<PyList> {
        self.rejected.clone_ref(py)
    }

    fn __len__(&self, py: Python<'_>) -> usize {
        self.questions.bind(py).len()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "QuestionList(questions={}, rejected={})",
            self.questions.bind(py).repr()?,
            self.rejected.bind(py).repr()?
        ))
    }
}

/// One item of a device's conversation, opened.
#[pyclass(frozen, name = "ConversationItem", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PyConversationItem {
    /// 'message' (a task this device sent), 'reply', 'question' or 'notification'.
    #[pyo3(get)]
    kind: String,
    /// The message, reply, question or notification id.
    #[pyo3(get)]
    id: String,
    /// The text (for a question, the question).
    #[pyo3(get)]
    text: String,
    /// For a reply, the task it answers.
    #[pyo3(get)]
    source_message_id: Option<String>,
    /// For a task: 'sent', 'delivered' or 'processed'.
    #[pyo3(get)]
    state: Option<String>,
    question: Option<Py<PyQuestion>>,
    /// For a notification, its title.
    #[pyo3(get)]
    title: Option<String>,
    /// For a notification: 'info', 'warning', 'error' or 'success'.
    #[pyo3(get)]
    level: Option<String>,
    created_at: Timestamp,
    /// Its position in the stream.
    #[pyo3(get)]
    cursor: String,
}

#[pymethods]
impl PyConversationItem {
    /// For a question: the question, with its state as of this read.
    #[getter]
    fn question(&self, py: Python<'_>) -> Option<Py<PyQuestion>> {
        self.question.as_ref().map(|q| q.clone_ref(py))
    }

    /// When the relay stored it.
    #[getter]
    fn created_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime(py, self.created_at)
    }

    fn __repr__(&self) -> String {
        format!(
            "ConversationItem(kind={}, id={}, text={}, source_message_id={}, state={}, cursor={})",
            r(&self.kind),
            r(&self.id),
            r(&self.text),
            ro(self.source_message_id.as_deref()),
            ro(self.state.as_deref()),
            r(&self.cursor)
        )
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
    fn from_client(py: Python<'_>, page: client::ConversationPage) -> PyResult<Self> {
        let items = page
            .items
            .into_iter()
            .map(|i| {
                let question = i
                    .question
                    .map(|q| Py::new(py, PyQuestion::from_client(py, q)?))
                    .transpose()?;
                Py::new(
                    py,
                    PyConversationItem {
                        kind: name(&i.kind),
                        id: i.id,
                        text: i.text,
                        source_message_id: i.source_message_id,
                        state: i.state.map(|s| name(&s)),
                        question,
                        title: i.title,
                        level: i.level.map(|l| name(&l)),
                        created_at: i.created_at,
                        cursor: i.cursor.to_string(),
                    },
                )
            })
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

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "ConversationPage(items={}, rejected={}, cursor={})",
            self.items.bind(py).repr()?,
            self.rejected.bind(py).repr()?,
            r(&self.cursor)
        ))
    }
}
