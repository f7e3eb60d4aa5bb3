//! Questions (client `question`, and the device's view of them): asked, concluded, opened, listed.

use pacerelle_client as client;
use pyo3::prelude::*;
use pyo3::types::PyList;

use super::inbox::rejected_list;
use super::{answer_to_py, b, ots, ts};
use crate::convert::{datetime, opt_datetime, r, rl, ro};

to_py_wrap! {
    client::Asked => PyAsked,
    client::AnswerOutcome => PyAnswerOutcome,
}

to_py_via! {
    client::OpenedQuestion => PyQuestion,
    client::QuestionList => PyQuestionList,
}

/// A question the relay has stored.
#[pyclass(frozen, name = "Asked", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PyAsked {
    /// Its digest (the question as asked) is kept: waiting with this `Asked` accepts only that question.
    inner: client::Asked,
}

impl PyAsked {
    pub(crate) fn to_client(&self) -> client::Asked {
        self.inner.clone()
    }
}

#[pymethods]
impl PyAsked {
    /// Its id: wait for it, cancel it.
    #[getter]
    fn question_id(&self) -> &str {
        &self.inner.question_id
    }

    /// When it expires (as sealed in the agent's own copy).
    #[getter]
    fn expires_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime(py, self.inner.expires_at)
    }

    fn __repr__(&self) -> String {
        format!(
            "Asked(question_id={}, expires_at={})",
            r(&self.inner.question_id),
            r(&ts(self.inner.expires_at))
        )
    }
}

/// What the agent concludes about a question. Only an authenticated, timely yes (or chosen options) is
/// `approved`.
#[pyclass(frozen, name = "AnswerOutcome", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PyAnswerOutcome {
    inner: client::AnswerOutcome,
}

#[pymethods]
impl PyAnswerOutcome {
    /// The question.
    #[getter]
    fn question_id(&self) -> &str {
        &self.inner.question_id
    }

    /// 'pending', 'answered', 'expired' or 'cancelled'.
    #[getter]
    fn state(&self) -> &'static str {
        self.inner.state.as_str()
    }

    /// True only for an authenticated, timely, explicit yes or valid chosen options.
    #[getter]
    fn approved(&self) -> bool {
        self.inner.approved
    }

    /// The answer when one opened: True (yes), False (no), the chosen options, or the written text.
    #[getter]
    fn answer(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        self.inner
            .answer
            .as_ref()
            .map(|a| answer_to_py(py, a))
            .transpose()
    }

    /// The answer as text: 'yes', 'no', the options joined by ', ', or the written text.
    #[getter]
    fn answer_text(&self) -> Option<String> {
        self.inner.answer_text()
    }

    /// The device that answered, when its answer opened.
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

    /// When the question expires.
    #[getter]
    fn expires_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime(py, self.inner.expires_at)
    }

    /// Why an answer the relay reported was not accepted (then it is never approved).
    #[getter]
    fn rejected(&self) -> Option<&str> {
        self.inner.rejected.as_deref()
    }

    /// True when the answer carried the device's signature and it verified with the key pinned in the
    /// roster (docs/crypto.md §4.8).
    #[getter]
    fn signed(&self) -> bool {
        self.inner.signed
    }

    /// Where the answer that opened was given: 'phone' (a device; `answered_by` names it) or 'host' (at the
    /// computer, through `answer_at_host`; `answered_by` is None, never signed). None without an answer.
    #[getter]
    fn channel(&self) -> Option<&'static str> {
        self.inner.channel.map(client::Channel::as_str)
    }

    /// True when waiting longer cannot change the outcome.
    #[getter]
    fn is_final(&self) -> bool {
        self.inner.is_final()
    }

    fn __repr__(&self) -> String {
        let o = &self.inner;
        format!(
            "AnswerOutcome(question_id={}, state={}, approved={}, answer={}, answered_by={}, \
             answered_by_name={}, answered_at={}, device_answered_at={}, expires_at={}, rejected={}, \
             channel={})",
            r(&o.question_id),
            r(o.state.as_str()),
            b(o.approved),
            ro(o.answer_text().as_deref()),
            ro(o.answered_by.as_deref()),
            ro(o.answered_by_name.as_deref()),
            ots(o.answered_at),
            ots(o.device_answered_at),
            r(&ts(o.expires_at)),
            ro(o.rejected.as_deref()),
            ro(o.channel.map(client::Channel::as_str))
        )
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

    fn __repr__(&self) -> String {
        let q = &self.inner;
        format!(
            "Question(question_id={}, question={}, kind={}, options={}, multiple={}, state={}, expires_at={})",
            r(&q.question_id),
            r(&q.question),
            r(q.kind.as_str()),
            rl(&q.options),
            b(q.multiple),
            r(q.state.as_str()),
            r(&ts(q.expires_at))
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
