//! The answer log (client `audit`), its signed export and the check of one.

use pacerelle_client as client;
use pyo3::create_exception;
use pyo3::prelude::*;

use super::Time;

wrapper! {
    /// One question of the answer log, opened and judged on the agent side.
    PyAuditEntry("AuditEntry", client::agent::AuditEntry) {
        /// The question's id.
        question_id: |v| &v.question_id,
        /// 'yes_no', 'choice' or 'text'.
        kind: |v| v.kind.as_str(),
        /// The question (empty when the agent's own copy did not open: see `rejected`).
        question: |v| &v.question,
        /// The options of a choice question.
        options: |v| v.options.clone(),
        /// Its details.
        details: |v| v.details.as_deref(),
        /// 'pending', 'answered', 'expired' or 'cancelled', as the agent concludes.
        state: |v| v.state.as_str(),
        /// True only for an authenticated, timely yes or chosen options.
        approved: |v| v.approved,
        /// The answer as text.
        answer: |v| v.answer.as_deref(),
        /// The device that answered.
        answered_by: |v| v.answered_by.as_deref(),
        /// That device's name.
        answered_by_name: |v| v.answered_by_name.as_deref(),
        /// When the relay accepted the answer (the relay's clock).
        answered_at: |v| v.answered_at.map(Time),
        /// When the person answered, by the answering device's clock (sealed in its answer).
        device_answered_at: |v| v.device_answered_at.map(Time),
        /// When the question expires or expired.
        expires_at: |v| Time(v.expires_at),
        /// When it was asked.
        created_at: |v| Time(v.created_at),
        /// When it was answered, expired or cancelled (relay's record).
        closed_at: |v| v.closed_at.map(Time),
        /// Why what the relay reported was not accepted, if it was not.
        rejected: |v| v.rejected.as_deref(),
        /// True when the answer carried the device's signature and it verified with the key pinned in the
        /// roster: the answer is in the log anyone can verify (`Agent.export_answer_log`).
        signed: |v| v.signed,
        /// Where the answer that opened was given: 'phone' or 'host' (at the computer, through the agent; never
        /// signed, so not in the log anyone can verify). None without one.
        channel: |v| v.channel.map(client::Channel::as_str),
        /// Partner mode: the `external_id` of the user the question was addressed to; None for the owner.
        user: |v| v.user.as_deref(),
    }
    methods {
        /// The entry as one line of the JSON Lines export (camelCase, RFC 3339 times).
        fn to_json(&self) -> String {
            serde_json::to_string(&self.inner).unwrap_or_default()
        }
    }
}

/// The signed export travels to Python as its JSON text (pretty, as `pacerelle audit export --format signed`
/// writes it): the Python layer gives it as a dict or as that text.
impl crate::types::ToPy for client::core::signing::AnswerLogExport {
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
    client::agent::verify_answer_log(data).map_err(|failure| {
        let err = VerificationFailed::new_err(failure.to_string());
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
