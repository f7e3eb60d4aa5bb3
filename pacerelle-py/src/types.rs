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

/// A Rust value that becomes a Python object (inside `Python::attach`, at the end of a call).
pub(crate) trait ToPy: Send + 'static {
    fn to_py(self, py: Python<'_>) -> PyResult<Py<PyAny>>;
}

impl ToPy for () {
    fn to_py(self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(py.None())
    }
}

/// A time that may be absent: an aware UTC `datetime`, or `None`.
impl ToPy for Option<Timestamp> {
    fn to_py(self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        match self {
            Some(ts) => Ok(crate::convert::datetime(py, ts)?.unbind()),
            None => Ok(py.None()),
        }
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

/// A frozen class that shows one client value: a thin `PyX { inner }` wrapper with one getter per field, and
/// a `__repr__` that shows every field, in order, as Python's `repr` of what its getter gives. The getters and
/// the repr come from one list, so they cannot drift apart. A class that keeps nothing beside `inner` also gets
/// the client type's [`ToPy`].
///
/// A field is written `name: |v| expression`, `v` being `&inner` (`|v, py|` when the expression needs the
/// interpreter, `|v, py, this|` when it reads what the class keeps beside `inner`); the value goes to Python
/// through `IntoPyObject`, times through [`Time`]. A field marked `[secret]` shows as `'…'` in the repr (a
/// pairing link, a credential): read on purpose only. What a class keeps beside `inner` (the objects it builds
/// once, so that every read gives the same one) is declared in `kept { … }` after the client type; other
/// methods of the class follow the fields in a `methods { … }` block.
macro_rules! wrapper {
    (
        $(#[$meta:meta])*
        $class:ident($name:literal, $client:ty $(, kept { $($(#[$kept_meta:meta])* $kept:ident: $kept_ty:ty),* $(,)? })?) {
            $(
                $(#[$field_meta:meta])*
                $([$secret:ident])? $field:ident: |$v:ident $(, $py:ident $(, $this:ident)?)?| $value:expr
            ),* $(,)?
        }
        $(methods { $($methods:tt)* })?
    ) => {
        $(#[$meta])*
        #[pyclass(frozen, name = $name, module = "pacerelle")]
        #[derive(Debug)]
        pub(crate) struct $class {
            pub(super) inner: $client,
            $($($(#[$kept_meta])* $kept: $kept_ty,)*)?
        }

        #[pymethods]
        impl $class {
            $(
                $(#[$field_meta])*
                #[getter]
                fn $field<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
                    let $v = &self.inner;
                    $(let $py = py; $(let $this = self;)?)?
                    pyo3::IntoPyObjectExt::into_bound_py_any($value, py)
                }
            )*

            $($($methods)*)?

            fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
                let fields: &[&str] = &[$(stringify!($field).trim_start_matches("r#")),*];
                let secret: &[&str] = &[$($(wrapper!(@name $secret $field),)?)*];
                crate::types::repr_of(slf.as_any(), fields, secret)
            }
        }

        wrapper!(@to_py $class, $client, [$($($kept)*)?]);
    };
    (@name $secret:ident $field:ident) => {
        stringify!($field)
    };
    // A class that keeps nothing beside `inner` is built from the client's value as is: its `ToPy`.
    (@to_py $class:ident, $client:ty, []) => {
        impl crate::types::ToPy for $client {
            fn to_py(self, py: Python<'_>) -> PyResult<Py<PyAny>> {
                Ok(Py::new(py, $class { inner: self })?.into_any())
            }
        }
    };
    // One that keeps objects builds them in its own `from_client` ([`to_py_via!`]).
    (@to_py $class:ident, $client:ty, [$($kept:tt)+]) => {};
}

/// `Name(field=value, …)`: the class's name, then each field as Python's `repr` of what its getter gives, in
/// the order given. A field listed in `secret` (a pairing link, a credential) shows as `'…'`.
pub(crate) fn repr_of(obj: &Bound<'_, PyAny>, fields: &[&str], secret: &[&str]) -> PyResult<String> {
    let shown = fields
        .iter()
        .map(|&field| {
            if secret.contains(&field) {
                Ok(format!("{field}='…'"))
            } else {
                Ok(format!("{field}={}", obj.getattr(field)?.repr()?))
            }
        })
        .collect::<PyResult<Vec<_>>>()?;
    Ok(format!("{}({})", obj.get_type().name()?, shown.join(", ")))
}

/// A time for a [`wrapper!`] field: an aware `datetime` in UTC.
pub(crate) struct Time(pub(crate) Timestamp);

impl<'py> IntoPyObject<'py> for Time {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::convert::datetime(py, self.0)
    }
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

pub(crate) use agent::{
    PyAgentInfo, PyLeaseHolder, PyPairingLink, PySessionInfo, PySessionSummary, PyStatus,
};
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
