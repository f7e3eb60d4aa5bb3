//! Webhooks (client `webhook`): the agent's webhook, deliveries, verified events.

use pacerelle_client as client;
use pyo3::prelude::*;

use super::ots;
use crate::convert::{datetime, opt_datetime, r, ro};

to_py_wrap! {
    client::WebhookInfo => PyWebhookInfo,
    client::Delivery => PyDelivery,
    client::WebhookEvent => PyWebhookEvent,
}

/// The agent's webhook (`url` is None when none is set).
#[pyclass(frozen, name = "WebhookInfo", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PyWebhookInfo {
    inner: client::WebhookInfo,
}

#[pymethods]
impl PyWebhookInfo {
    /// The URL the relay POSTs question events to.
    #[getter]
    fn url(&self) -> Option<&str> {
        self.inner.url.as_deref()
    }

    /// When it was set.
    #[getter]
    fn updated_at<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        opt_datetime(py, self.inner.updated_at)
    }

    fn __repr__(&self) -> String {
        format!(
            "WebhookInfo(url={}, updated_at={})",
            ro(self.inner.url.as_deref()),
            ots(self.inner.updated_at)
        )
    }
}

/// One webhook event's delivery state.
#[pyclass(frozen, name = "Delivery", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PyDelivery {
    inner: client::Delivery,
}

#[pymethods]
impl PyDelivery {
    /// The event id, also in the `Pacerelle-Event-Id` header.
    #[getter]
    fn event_id(&self) -> &str {
        &self.inner.event_id
    }

    /// 'question.answered', 'question.expired' or 'question.cancelled'.
    #[getter]
    fn event_type(&self) -> &str {
        &self.inner.event_type
    }

    /// The question concerned.
    #[getter]
    fn question_id(&self) -> &str {
        &self.inner.question_id
    }

    /// 'pending' (will be tried again), 'delivered' or 'failed'.
    #[getter]
    fn state(&self) -> &str {
        &self.inner.state
    }

    /// Attempts made.
    #[getter]
    fn attempts(&self) -> u32 {
        self.inner.attempts
    }

    /// The last HTTP status received.
    #[getter]
    fn last_status(&self) -> Option<u16> {
        self.inner.last_status
    }

    /// The last error.
    #[getter]
    fn last_error(&self) -> Option<&str> {
        self.inner.last_error.as_deref()
    }

    /// When the event was created.
    #[getter]
    fn created_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime(py, self.inner.created_at)
    }

    /// When it was delivered.
    #[getter]
    fn delivered_at<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        opt_datetime(py, self.inner.delivered_at)
    }

    fn __repr__(&self) -> String {
        let d = &self.inner;
        format!(
            "Delivery(event_id={}, event_type={}, question_id={}, state={}, attempts={}, last_status={})",
            r(&d.event_id),
            r(&d.event_type),
            r(&d.question_id),
            r(&d.state),
            d.attempts,
            d.last_status.map_or_else(|| "None".into(), |s| s.to_string())
        )
    }
}

/// A verified webhook event: metadata in clear. The content stays sealed: to learn whether the owner
/// approved, ask the agent (`agent.wait_for_answer(event.question_id, timeout=0)`).
#[pyclass(frozen, name = "WebhookEvent", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PyWebhookEvent {
    inner: client::WebhookEvent,
}

#[pymethods]
impl PyWebhookEvent {
    /// Unique per event; deduplicate by it.
    #[getter]
    fn id(&self) -> &str {
        &self.inner.id
    }

    /// 'question.answered', 'question.expired' or 'question.cancelled'.
    #[getter]
    fn r#type(&self) -> &str {
        &self.inner.event_type
    }

    /// When the event happened.
    #[getter]
    fn created_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime(py, self.inner.created_at)
    }

    /// The agent.
    #[getter]
    fn agent_id(&self) -> &str {
        &self.inner.agent_id
    }

    /// Partner mode: the `externalId` of the user the question was for, as the agent gave it; None for a
    /// question asked of the owner. Informational: approval is decided on the agent side.
    #[getter]
    fn user_id(&self) -> Option<&str> {
        self.inner.user_id.as_deref()
    }

    /// The question.
    #[getter]
    fn question_id(&self) -> &str {
        &self.inner.question.question_id
    }

    /// The question's kind.
    #[getter]
    fn kind(&self) -> &'static str {
        self.inner.question.kind.as_str()
    }

    /// The question's state by the relay's record.
    #[getter]
    fn state(&self) -> &'static str {
        self.inner.question.state.as_str()
    }

    /// The device that answered, by the relay's record.
    #[getter]
    fn answered_by(&self) -> Option<&str> {
        self.inner.question.answered_by.as_deref()
    }

    /// That device's name.
    #[getter]
    fn answered_by_name(&self) -> Option<&str> {
        self.inner.question.answered_by_name.as_deref()
    }

    /// How it was answered, by the relay's record: 'phone' (a device) or 'host' (at the computer, through
    /// the agent; no `answered_by`). None while unanswered.
    #[getter]
    fn channel(&self) -> Option<&'static str> {
        self.inner.question.channel.map(client::Channel::as_str)
    }

    /// When the question expires.
    #[getter]
    fn expires_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime(py, self.inner.question.expires_at)
    }

    /// When it was answered, expired or cancelled.
    #[getter]
    fn closed_at<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        opt_datetime(py, self.inner.question.closed_at)
    }

    fn __repr__(&self) -> String {
        let e = &self.inner;
        format!(
            "WebhookEvent(id={}, type={}, agent_id={}, question_id={}, state={}, answered_by={})",
            r(&e.id),
            r(&e.event_type),
            r(&e.agent_id),
            r(&e.question.question_id),
            r(e.question.state.as_str()),
            ro(e.question.answered_by.as_deref())
        )
    }
}
