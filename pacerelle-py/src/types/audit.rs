//! The answer log (client `audit`), its signed export and the check of one.

use pacerelle_client as client;
use pyo3::create_exception;
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

    /// True when the answer carried the device's signature and it verified with the key pinned in the
    /// roster: the answer is in the log anyone can verify (`Agent.export_answer_log`).
    #[getter]
    fn signed(&self) -> bool {
        self.inner.signed
    }

    /// Where the answer that opened was given: 'phone' or 'host' (at the computer, through the agent; never
    /// signed, so not in the log anyone can verify). None without one.
    #[getter]
    fn channel(&self) -> Option<&'static str> {
        self.inner.channel.map(client::Channel::as_str)
    }

    /// Partner mode: the `external_id` of the user the question was addressed to; None for the owner.
    #[getter]
    fn user(&self) -> Option<&str> {
        self.inner.user.as_deref()
    }

    /// The entry as one line of the JSON Lines export (camelCase, RFC 3339 times).
    fn to_json(&self) -> String {
        serde_json::to_string(&self.inner).unwrap_or_default()
    }

    fn __repr__(&self) -> String {
        let e = &self.inner;
        format!(
            "AuditEntry(question_id={}, kind={}, question={}, user={}, state={}, approved={}, answer={}, \
             answered_by={}, channel={}, signed={}, created_at={})",
            r(&e.question_id),
            r(e.kind.as_str()),
            r(&e.question),
            ro(e.user.as_deref()),
            r(e.state.as_str()),
            b(e.approved),
            ro(e.answer.as_deref()),
            ro(e.answered_by.as_deref()),
            ro(e.channel.map(client::Channel::as_str)),
            b(e.signed),
            r(&ts(e.created_at))
        )
    }
}

/// The signed export travels to Python as its JSON text (pretty, as `pacerelle audit export --format signed`
/// writes it): the Python layer gives it as a dict or as that text.
impl crate::types::ToPy for client::AnswerLogExport {
    fn to_py(self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let text = serde_json::to_string_pretty(&self)
            .map_err(|e| crate::errors::invalid(format!("cannot write the export: {e}")))?;
        Ok(text.into_pyobject(py)?.into_any().unbind())
    }
}

create_exception!(
    pacerelle,
    VerificationFailed,
    crate::errors::PacerelleError,
    "A record of an answer-log export does not verify (or the data is not an export): `record` is its \
     position from 1 (0 when the data is not an export), `question_id` its question, `reason` what failed."
);

/// Adds [`VerificationFailed`] to the module, with its attributes' defaults.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let ty = py.get_type::<VerificationFailed>();
    ty.setattr("code", "verification_failed")?;
    ty.setattr("record", 0)?;
    ty.setattr("question_id", py.None())?;
    ty.setattr("reason", "")?;
    m.add("VerificationFailed", ty)
}

/// Verifies every record of an answer-log export (the bytes of the file `Agent.export_answer_log` or
/// `pacerelle audit export --format signed` wrote); needs no key and no relay. Returns how many answers
/// verify; raises `VerificationFailed` naming the first record that does not.
#[pyfunction]
pub(crate) fn verify_answer_log(py: Python<'_>, data: &[u8]) -> PyResult<usize> {
    client::verify_answer_log(data).map_err(|failure| {
        let message = if failure.index == 0 {
            failure.reason.to_string()
        } else {
            failure.to_string()
        };
        let err = VerificationFailed::new_err(message);
        let value = err.value(py);
        let set = || -> PyResult<()> {
            value.setattr("record", failure.index)?;
            if failure.index > 0 {
                value.setattr("question_id", &failure.question_id)?;
            }
            value.setattr("reason", failure.reason)?;
            Ok(())
        };
        match set() {
            Ok(()) => err,
            Err(e) => e,
        }
    })
}
