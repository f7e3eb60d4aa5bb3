//! Webhook signatures: `verify_webhook` and `sign_webhook`, wrapping the client's.

use pacerelle_client::{Timestamp, agent::SIGNATURE_HEADER, agent::WebhookError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use crate::convert::{seconds, timestamp_arg};
use crate::errors;
use crate::types::ToPy;

fn bytes_arg(value: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<u8>> {
    if let Ok(b) = value.cast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    if let Ok(s) = value.cast::<PyString>() {
        return Ok(s.to_str()?.as_bytes().to_vec());
    }
    value
        .extract::<Vec<u8>>()
        .map_err(|_| errors::invalid(format!("{what} is bytes or str")))
}

/// The signature header's value from a mapping of headers (any case) or the value itself.
fn signature_arg(headers: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
    if let Ok(s) = headers.cast::<PyString>() {
        return Ok(Some(s.to_str()?.to_string()));
    }
    let items = headers.call_method0("items")?;
    for item in items.try_iter()? {
        let (key, value): (String, String) = item?.extract()?;
        if key.eq_ignore_ascii_case(SIGNATURE_HEADER) {
            return Ok(Some(value));
        }
    }
    Ok(None)
}

fn webhook_err(e: &WebhookError) -> PyErr {
    let reason = match e {
        WebhookError::MalformedHeader(_) => "malformed_header",
        WebhookError::OutsideTolerance { .. } => "outside_tolerance",
        WebhookError::BadSignature => "bad_signature",
        WebhookError::MalformedBody(_) => "malformed_body",
        _ => "invalid",
    };
    let err = errors::WebhookError::new_err(e.to_string());
    Python::attach(|py| {
        let _ = err.value(py).setattr("reason", reason);
    });
    err
}

/// Verifies a webhook request from the relay and returns its event; raises WebhookError otherwise.
/// `headers`: the request's headers (a mapping, any case) or the `Pacerelle-Signature` value;
/// `body`: the raw body, before any JSON parsing; `now`: the receiver's clock (default: now).
#[pyfunction]
#[pyo3(signature = (secret, headers, body, tolerance = 300.0, now = None))]
pub(crate) fn verify_webhook(
    py: Python<'_>,
    secret: &Bound<'_, PyAny>,
    headers: &Bound<'_, PyAny>,
    body: &Bound<'_, PyAny>,
    tolerance: f64,
    now: Option<&Bound<'_, PyAny>>,
) -> PyResult<Py<PyAny>> {
    let secret = bytes_arg(secret, "secret")?;
    let body = bytes_arg(body, "body")?;
    let tolerance = seconds("tolerance", tolerance)?;
    let now = now.map(timestamp_arg).transpose()?.unwrap_or_else(Timestamp::now);
    let Some(signature) = signature_arg(headers)? else {
        return Err(webhook_err(&WebhookError::MalformedHeader(
            "no pacerelle-signature header",
        )));
    };
    match pacerelle_client::agent::verify_webhook(&secret, &signature, &body, now, tolerance) {
        Ok(event) => event.to_py(py),
        Err(e) => Err(webhook_err(&e)),
    }
}

/// Signs a body as the relay does: the `Pacerelle-Signature` value at `timestamp` (unix seconds, default
/// now). For receivers' tests.
#[pyfunction]
#[pyo3(signature = (secret, body, timestamp = None))]
pub(crate) fn sign_webhook(
    secret: &Bound<'_, PyAny>,
    body: &Bound<'_, PyAny>,
    timestamp: Option<&Bound<'_, PyAny>>,
) -> PyResult<String> {
    let secret = bytes_arg(secret, "secret")?;
    let body = bytes_arg(body, "body")?;
    let t = timestamp
        .map(timestamp_arg)
        .transpose()?
        .unwrap_or_else(Timestamp::now);
    Ok(pacerelle_client::agent::sign_webhook(
        &secret,
        t.millis().div_euclid(1000),
        &body,
    ))
}
