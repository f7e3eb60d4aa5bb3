//! Small conversions between Python values and the client's: times, durations, wire names, JSON.

use std::time::Duration;

use pacerelle_client::{Answer, Timestamp};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyString};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::errors::invalid;

/// A timestamp as an aware `datetime` in UTC.
pub(crate) fn datetime(py: Python<'_>, ts: Timestamp) -> PyResult<Bound<'_, PyAny>> {
    let module = py.import("datetime")?;
    let utc = module.getattr("timezone")?.getattr("utc")?;
    module
        .getattr("datetime")?
        .call_method1("fromtimestamp", (ts.millis() as f64 / 1000.0, utc))
}

/// A time given by Python: a `datetime` (naive ones are taken as UTC) or unix seconds.
pub(crate) fn timestamp_arg(value: &Bound<'_, PyAny>) -> PyResult<Timestamp> {
    let seconds: f64 = if value.hasattr("timestamp")? {
        let aware = if value.getattr("tzinfo")?.is_none() {
            let utc = value
                .py()
                .import("datetime")?
                .getattr("timezone")?
                .getattr("utc")?;
            let kwargs = pyo3::types::PyDict::new(value.py());
            kwargs.set_item("tzinfo", utc)?;
            value.call_method("replace", (), Some(&kwargs))?
        } else {
            value.clone()
        };
        aware.call_method0("timestamp")?.extract()?
    } else {
        value
            .extract()
            .map_err(|_| invalid("a time is a datetime or unix seconds"))?
    };
    if !seconds.is_finite() {
        return Err(invalid("a time must be finite"));
    }
    Ok(Timestamp((seconds * 1000.0).round() as i64))
}

/// A duration given in seconds: finite and not negative.
pub(crate) fn seconds(what: &str, value: f64) -> PyResult<Duration> {
    if !value.is_finite() || value < 0.0 {
        return Err(invalid(format!("{what} is a number of seconds, 0 or more")));
    }
    Duration::try_from_secs_f64(value).map_err(|_| invalid(format!("{what} is too large")))
}

/// A count (a limit, a number of attempts): a whole number, 0 or more, that fits in 32 bits. Python's own
/// conversion would raise an `OverflowError` that names no argument.
pub(crate) fn count(what: &str, value: i64) -> PyResult<u32> {
    if value < 0 {
        return Err(invalid(format!(
            "{what} is a whole number, 0 or more (got {value})"
        )));
    }
    u32::try_from(value).map_err(|_| invalid(format!("{what} is too large (got {value})")))
}

/// The wire name of a unit enum (`"pending"`, `"yes_no"`, `"owner"`…).
pub(crate) fn name<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        _ => String::from("unknown"),
    }
}

/// Parses a wire name into a unit enum, naming the accepted values on failure.
pub(crate) fn parse_name<T: DeserializeOwned>(what: &str, text: &str, accepted: &str) -> PyResult<T> {
    serde_json::from_value(serde_json::Value::String(text.to_string()))
        .map_err(|_| invalid(format!("{what} is one of {accepted}, not {text:?}")))
}

/// An answer from Python: True/False for yes/no, a list of options for a choice, a string for text (the
/// device's `answer` and the agent's `answer_at_host` alike).
pub(crate) fn answer_arg(answer: &Bound<'_, PyAny>) -> PyResult<Answer> {
    if let Ok(yes) = answer.cast::<PyBool>() {
        return Ok(if yes.is_true() { Answer::Yes } else { Answer::No });
    }
    if let Ok(text) = answer.cast::<PyString>() {
        return Ok(Answer::Text(text.to_str()?.to_string()));
    }
    answer.extract::<Vec<String>>().map(Answer::Options).map_err(|_| {
        invalid("an answer is True or False (yes/no), a list of options (choice) or a string (text)")
    })
}

/// A JSON value as the Python value `json.loads` would give.
pub(crate) fn json_to_py<'py>(py: Python<'py>, value: &serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
    py.import("json")?.call_method1("loads", (value.to_string(),))
}

/// A Python value as JSON, through `json.dumps` (values it cannot encode are written with `str`).
pub(crate) fn py_to_json(value: &Bound<'_, PyAny>) -> PyResult<serde_json::Value> {
    let py = value.py();
    let kwargs = pyo3::types::PyDict::new(py);
    kwargs.set_item("default", py.get_type::<pyo3::types::PyString>())?;
    let text: String = py
        .import("json")?
        .call_method("dumps", (value,), Some(&kwargs))?
        .extract()?;
    serde_json::from_str(&text).map_err(|e| invalid(format!("not JSON: {e}")))
}

/// A Rust string as Python would `repr` it, for the `__repr__` of the result types.
pub(crate) fn r(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    let quote = if text.contains('\'') && !text.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(quote);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}
