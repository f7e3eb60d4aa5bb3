//! The execution policy (DESIGN §8), from pacerelle-core: `Policy.evaluate(tool, input)`.

use pacerelle_client::core::policy::{Call, Evaluation, Policy};
use pyo3::prelude::*;

use crate::convert::{name, py_to_json, r};
use crate::errors::invalid;

/// A parsed execution policy: per call, 'allow', 'ask' or 'deny'; the first matching rule decides.
#[pyclass(frozen, name = "Policy", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PyPolicy {
    inner: Policy,
}

/// What a policy decided, and why.
#[pyclass(frozen, name = "Evaluation", module = "pacerelle")]
#[derive(Debug)]
pub(crate) struct PyEvaluation {
    /// 'allow', 'ask' or 'deny'.
    #[pyo3(get)]
    decision: String,
    /// Why, in words a person or a model can read.
    #[pyo3(get)]
    reason: String,
}

impl From<Evaluation> for PyEvaluation {
    fn from(e: Evaluation) -> Self {
        PyEvaluation {
            decision: name(&e.decision),
            reason: e.reason,
        }
    }
}

#[pymethods]
impl PyEvaluation {
    fn __repr__(&self) -> String {
        format!(
            "Evaluation(decision={}, reason={})",
            r(&self.decision),
            r(&self.reason)
        )
    }
}

#[pymethods]
impl PyPolicy {
    /// Parses a TOML policy (raises InvalidInput when it cannot be used).
    #[staticmethod]
    fn parse(text: &str) -> PyResult<Self> {
        Policy::parse(text)
            .map(|inner| PyPolicy { inner })
            .map_err(|e| invalid(e.to_string()))
    }

    /// Reads and parses a TOML policy file.
    #[staticmethod]
    fn load(path: std::path::PathBuf) -> PyResult<Self> {
        let text = std::fs::read_to_string(&path)
            .map_err(|e| invalid(format!("cannot read the policy {}: {e}", path.display())))?;
        Self::parse(&text)
    }

    /// The policy used when none is given: ask for everything.
    #[staticmethod]
    fn ask_everything() -> Self {
        PyPolicy {
            inner: Policy::ask_everything(),
        }
    }

    /// Decides a call of `tool` with `input` (a JSON-like value: `command` and `file_path`/`path` are
    /// what command and path rules look at).
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
        Ok(py
            .detach(|| self.inner.evaluate(Call { tool, input: &input }))
            .into())
    }

    fn __repr__(&self) -> String {
        "Policy(…)".to_string()
    }
}
