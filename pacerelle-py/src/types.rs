//! The typed results: frozen classes with a `__repr__`, each built from the client's value, one file per
//! client module (`inbox`, `agent`, `questions`, `device`, `audit`, `users`, `webhook`).
//!
//! A class that shows one client value is a thin `PyX { inner }` wrapper with getters; a class holding other
//! classes (an `Inbox`'s messages, a `Status`'s session…) builds them once, so that every read gives the
//! same Python object. Times are kept as the client's [`Timestamp`] and given to Python as aware UTC
//! `datetime`s; wire enums are given as their names (`"pending"`, `"yes_no"`…).

use pacerelle_client::{Answer, Timestamp};
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::convert::r;

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

/// Implements [`ToPy`] for client types that a pyclass wraps as `{ inner }`.
macro_rules! to_py_wrap {
    ($($client:ty => $class:ident),* $(,)?) => {$(
        impl crate::types::ToPy for $client {
            fn to_py(self, py: Python<'_>) -> PyResult<Py<PyAny>> {
                Ok(Py::new(py, $class { inner: self })?.into_any())
            }
        }
    )*};
}

/// Implements [`ToPy`] for client types through their pyclass's `from_client`.
macro_rules! to_py_via {
    ($($client:ty => $class:ty),* $(,)?) => {$(
        impl crate::types::ToPy for $client {
            fn to_py(self, py: Python<'_>) -> PyResult<Py<PyAny>> {
                Ok(Py::new(py, <$class>::from_client(py, self)?)?.into_any())
            }
        }
    )*};
}

mod agent;
mod audit;
mod device;
mod inbox;
mod questions;
mod users;
mod webhook;

pub(crate) use agent::{PyAgentInfo, PyLeaseHolder, PyPairingLink, PySessionInfo, PyStatus};
pub(crate) use audit::{PyAuditEntry, register as register_audit, verify_answer_log};
pub(crate) use device::{
    PyConversationItem, PyConversationPage, PyDeviceCredentials, PyDeviceInfo, PyDeviceSelf,
};
pub(crate) use inbox::{PyCheckpoint, PyInbox, PyMessage, PyProcessed, PyRejected, PyStored};
pub(crate) use questions::{PyAnswerOutcome, PyAsked, PyQuestion, PyQuestionList};
pub(crate) use users::{PyUser, PyUserDevice};
pub(crate) use webhook::{PyDelivery, PyWebhookEvent, PyWebhookInfo};

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
