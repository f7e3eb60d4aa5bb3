//! The answer log (client `audit`).

use pacerelle_client as client;
use pyo3::prelude::*;

use super::{b, ts};
use crate::convert::{datetime, opt_datetime, r, ro};

to_py_wrap! {
    client::AuditEntry => PyAuditEntry,
}

/// One question of the answer log, opened and judged on the agent side.
#[pyclass(frozen, name = "AuditEntry", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PyAuditEntry {
    inner: client::AuditEntry,
}

#[pymethods]
impl PyAuditEntry {
    /// The question's id.
    #[getter]
    fn question_id(&self) -> &str {
        &self.inner.question_id
    }

    /// 'yes_no', 'choice' or 'text'.
    #[getter]
    fn kind(&self) -> &'static str {
        self.inner.kind.as_str()
    }

    /// The question (empty when the agent's own copy did not open: see `rejected`).
    #[getter]
    fn question(&self) -> &str {
        &self.inner.question
    }

    /// The options of a choice question.
    #[getter]
    fn options(&self) -> Vec<String> {
        self.inner.options.clone()
    }

    /// Its details.
    #[getter]
    fn details(&self) -> Option<&str> {
        self.inner.details.as_deref()
    }

    /// 'pending', 'answered', 'expired' or 'cancelled', as the agent concludes.
    #[getter]
    fn state(&self) -> &'static str {
        self.inner.state.as_str()
    }

    /// True only for an authenticated, timely yes or chosen options.
    #[getter]
    fn approved(&self) -> bool {
        self.inner.approved
    }

    /// The answer as text.
    #[getter]
    fn answer(&self) -> Option<&str> {
        self.inner.answer.as_deref()
    }

    /// The device that answered.
    #[getter]
    fn answered_by(&self) -> Option<&str> {
        self.inner.answered_by.as_deref()
    }

    /// That device's name.
    #[getter]
    fn answered_by_name(&self) -> Option<&str> {
        self.inner.answered_by_name.as_deref()
    }

    /// When the relay accepted the answer (the relay's clock).
    #[getter]
    fn answered_at<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        opt_datetime(py, self.inner.answered_at)
    }

    /// When the person answered, by the answering device's clock (sealed in its answer).
    #[getter]
    fn device_answered_at<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        opt_datetime(py, self.inner.device_answered_at)
    }

    /// When the question expires or expired.
    #[getter]
    fn expires_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime(py, self.inner.expires_at)
    }

    /// When it was asked.
    #[getter]
    fn created_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime(py, self.inner.created_at)
    }

    /// When it was answered, expired or cancelled (relay's record).
    #[getter]
    fn closed_at<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        opt_datetime(py, self.inner.closed_at)
    }

    /// Why what the relay reported was not accepted, if it was not.
    #[getter]
    fn rejected(&self) -> Option<&str> {
        self.inner.rejected.as_deref()
    }

    /// The entry as one line of the JSON Lines export (camelCase, RFC 3339 times).
    fn to_json(&self) -> String {
        serde_json::to_string(&self.inner).unwrap_or_default()
    }

    fn __repr__(&self) -> String {
        let e = &self.inner;
        format!(
            "AuditEntry(question_id={}, kind={}, question={}, state={}, approved={}, answer={}, \
             answered_by={}, created_at={})",
            r(&e.question_id),
            r(e.kind.as_str()),
            r(&e.question),
            r(e.state.as_str()),
            b(e.approved),
            ro(e.answer.as_deref()),
            ro(e.answered_by.as_deref()),
            r(&ts(e.created_at))
        )
    }
}
