//! Questions (client `question`, and the device's view of them): asked, concluded, opened, listed.

use pacerelle_client as client;
use pyo3::prelude::*;
use pyo3::types::PyList;

use super::inbox::rejected_list;
use super::{Time, answer_to_py, repr_of};

to_py_via! {
    client::device::OpenedQuestion => PyQuestion,
    client::device::QuestionList => PyQuestionList,
}

wrapper! {
    /// A question the relay has stored.
    /// It keeps its digest (the question as asked): waiting with this `Asked` accepts only that question.
    PyAsked("Asked", client::agent::Asked) {
        /// Its id: wait for it, cancel it.
        question_id: |v| &v.question_id,
        /// When it expires (as sealed in the agent's own copy). For a resumed question, its first expiry.
        expires_at: |v| Time(v.expires_at),
        /// True when `question_id` already named this same question: asking again resumed it (nothing new was
        /// asked), and `expires_at` is the expiry set when it was first asked, not the one asked for now.
        resumed: |v| v.resumed,
    }
}

impl PyAsked {
    pub(crate) fn to_client(&self) -> client::agent::Asked {
        self.inner.clone()
    }
}

wrapper! {
    /// What the agent concludes about a question. Only an authenticated, timely yes (or chosen options) is
    /// `approved`.
    PyAnswerOutcome("AnswerOutcome", client::agent::AnswerOutcome) {
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

wrapper! {
    /// A question as a device sees it, opened.
    PyQuestion("Question", client::device::OpenedQuestion, kept {
        /// Judged by this machine's clock when it was read.
        is_open: bool,
    }) {
        /// Its id; answer with it.
        question_id: |v| &v.question_id,
        /// The question.
        question: |v| &v.question,
        /// 'yes_no', 'choice' or 'text'.
        kind: |v| v.kind.as_str(),
        /// The options of a choice question.
        options: |v| v.options.clone(),
        /// Whether several options may be chosen.
        multiple: |v| v.multiple,
        /// More context.
        details: |v| v.details.as_deref(),
        /// 'pending', 'answered', 'expired' or 'cancelled', as of this read.
        state: |v| v.state.as_str(),
        /// When it expires.
        expires_at: |v| Time(v.expires_at),
        /// The device that answered.
        answered_by: |v| v.answered_by.as_deref(),
        /// That device's name, as the relay reports it.
        answered_by_name: |v| v.answered_by_name.as_deref(),
        /// The answer that counts, for display (True, False, options or text), read from the copy sealed for every
        /// recipient; None while unanswered, or for an answer given without a copy.
        answer: |v, py| v.answer.as_ref().map(|a| answer_to_py(py, a)).transpose()?,
        /// When the relay accepted the answer.
        answered_at: |v| v.answered_at.map(Time),
        /// How it was answered: 'phone' (a device; `answered_by` names it) or 'host' (the person answered at the
        /// computer, through the agent; `answered_by` is None). None while unanswered.
        channel: |v| v.channel.map(client::Channel::as_str),
        /// When it was asked.
        created_at: |v| Time(v.created_at),
        /// True when an answer can still be given.
        is_open: |_v, _py, this| this.is_open,
    }
}

impl PyQuestion {
    /// `is_open` is judged now, by this machine's clock, and kept.
    pub(super) fn from_client(_py: Python<'_>, inner: client::device::OpenedQuestion) -> PyResult<Self> {
        Ok(PyQuestion {
            is_open: inner.is_open(),
            inner,
        })
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
    fn from_client(py: Python<'_>, l: client::device::QuestionList) -> PyResult<Self> {
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
