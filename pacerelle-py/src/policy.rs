//! The execution policy and the approval gate (DESIGN §8), from `pacerelle_client::gate`:
//! `Policy.evaluate(tool, input)` (the policy and the gate's own files) and the `Ruling` that
//! `AgentClient.approve` returns.

use pacerelle_client::core::policy::Evaluation;
use pacerelle_client::gate::{Gate, Ruling};
use pyo3::prelude::*;

use crate::convert::{name, py_to_json, r};
use crate::errors::{invalid, to_py_err};
use crate::types::ToPy;

/// A parsed execution policy: per call, 'allow', 'ask' or 'deny'; the first matching rule decides, and a
/// call that touches the gate's own files (or the policy file) is asked even when a rule allows it.
#[pyclass(frozen, name = "Policy", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PyPolicy {
    inner: Gate,
}

/// What a policy decided, and why.
#[pyclass(frozen, name = "Evaluation", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PyEvaluation {
    inner: Evaluation,
}

impl PyEvaluation {
    /// The client's evaluation.
    pub(crate) fn evaluation(&self) -> &Evaluation {
        &self.inner
    }
}

#[pymethods]
impl PyEvaluation {
    /// 'allow', 'ask' or 'deny'.
    #[getter]
    fn decision(&self) -> String {
        name(&self.inner.decision)
    }

    /// Why, in words a person or a model can read.
    #[getter]
    fn reason(&self) -> String {
        self.inner.reason.clone()
    }

    /// For 'ask': how many distinct owner devices must approve (the rule's `approvals`; 1 by default).
    #[getter]
    fn approvals(&self) -> u32 {
        self.inner.approvals
    }

    fn __repr__(&self) -> String {
        format!(
            "Evaluation(decision={}, reason={})",
            r(&self.decision()),
            r(&self.inner.reason)
        )
    }
}

impl PyPolicy {
    /// The gate: the policy and the gate's own files.
    pub(crate) fn gate(&self) -> &Gate {
        &self.inner
    }
}

#[pymethods]
impl PyPolicy {
    /// Parses a TOML policy (raises InvalidInput when it cannot be used).
    #[staticmethod]
    fn parse(text: &str) -> PyResult<Self> {
        pacerelle_client::core::policy::Policy::parse(text)
            .map(|policy| PyPolicy {
                inner: Gate::new(policy, None),
            })
            .map_err(|e| invalid(e.to_string()))
    }

    /// Reads and parses a TOML policy file (the file is then one of the gate's own files).
    #[staticmethod]
    fn load(path: std::path::PathBuf) -> PyResult<Self> {
        let path = std::path::absolute(&path).unwrap_or(path);
        Gate::from_file(&path)
            .map(|inner| PyPolicy { inner })
            .map_err(|e| invalid(e.to_string()))
    }

    /// The policy used when none is given: ask for everything.
    #[staticmethod]
    fn ask_everything() -> Self {
        PyPolicy {
            inner: Gate::ask_everything(),
        }
    }

    /// Decides a call of `tool` with `input` (a JSON-like value: `command` and `file_path`/`path` are
    /// what command and path rules, and the gate's own files, look at).
    #[pyo3(signature = (tool, input = None))]
    fn evaluate(
        &self,
        py: Python<'_>,
        tool: &str,
        input: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyEvaluation> {
        let input = match input {
            Some(v) => py_to_json(v)?,
            None => serde_json::Value::Object(Default::default()),
        };
        let inner = py.detach(|| self.inner.evaluate(tool, &input));
        Ok(PyEvaluation { inner })
    }

    fn __repr__(&self) -> String {
        format!("Policy({})", r(&self.inner.source()))
    }
}

/// What the approval gate concluded about one call.
#[pyclass(frozen, name = "Ruling", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PyRuling {
    /// 'allowed', 'approved', 'granted', 'answered', 'denied', 'expired', 'cancelled', 'rejected', 'pending',
    /// 'relay_unavailable' or 'error'.
    #[pyo3(get)]
    conclusion: String,
    /// Why, in words shown to the model.
    #[pyo3(get)]
    reason: String,
    /// The question's AnswerOutcome, when one was read.
    #[pyo3(get)]
    outcome: Option<Py<PyAny>>,
    /// The exception that stopped the gate (relay_unavailable, error).
    #[pyo3(get)]
    error: Option<Py<PyAny>>,
    /// True only when the call may run: allowed by the policy, approved by an authenticated yes, or inside a
    /// live grant.
    #[pyo3(get)]
    lets_run: bool,
}

#[pymethods]
impl PyRuling {
    fn __repr__(&self) -> String {
        format!(
            "Ruling(conclusion={}, reason={})",
            r(&self.conclusion),
            r(&self.reason)
        )
    }
}

impl ToPy for Ruling {
    fn to_py(self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let ruling = PyRuling {
            conclusion: self.conclusion.as_str().to_string(),
            lets_run: self.lets_run(),
            reason: self.reason,
            outcome: self.outcome.map(|o| o.to_py(py)).transpose()?,
            error: self.error.map(|e| to_py_err(e).into_value(py).into_any()),
        };
        Ok(Py::new(py, ruling)?.into_any())
    }
}
