//! Questions (client `question`, and the device's view of them): asked, concluded, opened, listed.

use pacerelle_client as client;
use pyo3::prelude::*;
use pyo3::types::PyList;

use super::inbox::rejected_list;
use super::{Time, answer_to_py, repr_of};
use crate::convert::{datetime, opt_datetime};

to_py_wrap! {
    client::Asked => PyAsked,
    client::AnswerOutcome => PyAnswerOutcome,
}

to_py_via! {
    client::OpenedQuestion => PyQuestion,
    client::QuestionList => PyQuestionList,
}

wrapper! {
    /// A question the relay has stored.
    /// It keeps its digest (the question as asked): waiting with this `Asked` accepts only that question.
    PyAsked("Asked", client::Asked) {
        /// Its id: wait for it, cancel it.
        question_id: |v| &v.question_id,
        /// When it expires (as sealed in the agent's own copy).
        expires_at: |v| Time(v.expires_at),
    }
}

impl PyAsked {
    pub(crate) fn to_client(&self) -> client::Asked {
        self.inner.clone()
    }
}

wrapper! {
    /// What the agent concludes about a question. Only an authenticated, timely yes (or chosen options) is
    /// `approved`.
    PyAnswerOutcome("AnswerOutcome", client::AnswerOutcome) {
        /// The question.
        question_id: |v| &v.question_id,
        /// 'pending', 'answered', 'expired' or 'cancelled'.
        state: |v| v.state.as_str(),
        /// True only for an authenticated, timely, explicit yes or valid chosen options.
        approved: |v| v.approved,
        /// The answer when one opened: True (yes), False (no), the chosen options, or the written text.
        answer: |v, py| v.answer.as_ref().map(|a| answer_to_py(py, a)).transpose()?,
        /// The answer as text: 'yes', 'no', the options joined by ', ', or the written text.
        answer_text: |v| v.answer_text(),
        /// The device that answered, when its answer opened.
        answered_by: |v| v.answered_by.as_deref(),
        /// That device's name.
        answered_by_name: |v| v.answered_by_name.as_deref(),
        /// When the relay accepted the answer (the relay's clock).
        answered_at: |v| v.answered_at.map(Time),
        /// When the person answered, by the answering device's clock (sealed in its answer).
        device_answered_at: |v| v.device_answered_at.map(Time),
        /// When the question expires.
        expires_at: |v| Time(v.expires_at),
        /// Why an answer the relay reported was not accepted (then it is never approved).
        rejected: |v| v.rejected.as_deref(),
        /// True when the answer carried the device's signature and it verified with the key pinned in the
        /// roster (docs/crypto.md §4.8).
        signed: |v| v.signed,
        /// Where the answer that opened was given: 'phone' (a device; `answered_by` names it) or 'host' (at the
        /// computer, through `answer_at_host`; `answered_by` is None, never signed). None without an answer.
        channel: |v| v.channel.map(client::Channel::as_str),
        /// True when waiting longer cannot change the outcome.
        is_final: |v| v.is_final(),
    }
}

/// A question as a device sees it, opened.
#[pyclass(frozen, name = "Question", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PyQuestion {
    inner: client::OpenedQuestion,
    /// True when an answer can still be given.
    #[pyo3(get)]
    is_open: bool,
}

impl PyQuestion {
    /// `is_open` is judged now, by this machine's clock, and kept.
    pub(super) fn from_client(_py: Python<'_>, inner: client::OpenedQuestion) -> PyResult<Self> {
        Ok(PyQuestion {
            is_open: inner.is_open(),
            inner,
        })
    }
}

#[pymethods]
impl PyQuestion {
    /// Its id; answer with it.
    #[getter]
    fn question_id(&self) -> &str {
        &self.inner.question_id
    }

    /// The question.
    #[getter]
    fn question(&self) -> &str {
        &self.inner.question
    }

    /// 'yes_no', 'choice' or 'text'.
    #[getter]
    fn kind(&self) -> &'static str {
        self.inner.kind.as_str()
    }

    /// The options of a choice question.
    #[getter]
    fn options(&self) -> Vec<String> {
        self.inner.options.clone()
    }

    /// Whether several options may be chosen.
    #[getter]
    fn multiple(&self) -> bool {
        self.inner.multiple
    }

    /// More context.
    #[getter]
    fn details(&self) -> Option<&str> {
        self.inner.details.as_deref()
    }

    /// 'pending', 'answered', 'expired' or 'cancelled', as of this read.
    #[getter]
    fn state(&self) -> &'static str {
        self.inner.state.as_str()
    }

    /// When it expires.
    #[getter]
    fn expires_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime(py, self.inner.expires_at)
    }

    /// The device that answered.
    #[getter]
    fn answered_by(&self) -> Option<&str> {
        self.inner.answered_by.as_deref()
    }

    /// That device's name, as the relay reports it.
    #[getter]
    fn answered_by_name(&self) -> Option<&str> {
        self.inner.answered_by_name.as_deref()
    }

    /// The answer that counts, for display (True, False, options or text), read from the copy sealed for every
    /// recipient; None while unanswered, or for an answer given without a copy.
    #[getter]
    fn answer(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        self.inner
            .answer
            .as_ref()
            .map(|a| answer_to_py(py, a))
            .transpose()
    }

    /// When the relay accepted the answer.
    #[getter]
    fn answered_at<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        opt_datetime(py, self.inner.answered_at)
    }

    /// How it was answered: 'phone' (a device; `answered_by` names it) or 'host' (the person answered at the
    /// computer, through the agent; `answered_by` is None). None while unanswered.
    #[getter]
    fn channel(&self) -> Option<&'static str> {
        self.inner.channel.map(client::Channel::as_str)
    }

    /// When it was asked.
    #[getter]
    fn created_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime(py, self.inner.created_at)
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        repr_of(
            slf.as_any(),
            &[
                "question_id",
                "question",
                "kind",
                "options",
                "multiple",
                "state",
                "expires_at",
            ],
            &[],
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

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        repr_of(slf.as_any(), &["questions", "rejected"], &[])
    }
}
