//! The exception tree and its one conversion point, [`to_py_err`].

use pacerelle_client::{Error, ErrorKind};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyType;

/// Declares the exception classes, each with its base and docstring, and [`classes`], the list the module
/// registers: one list, so that no class is declared and left unregistered.
macro_rules! exceptions {
    ($($name:ident($base:ty): $doc:expr;)*) => {
        $(create_exception!(pacerelle, $name, $base, $doc);)*

        /// Every exception class, with its Python name.
        fn classes(py: Python<'_>) -> Vec<(&'static str, Bound<'_, PyType>)> {
            vec![$((stringify!($name), py.get_type::<$name>())),*]
        }
    };
}

exceptions! {
    PacerelleError(PyException):
        "Every error of Pacerelle. `code` is the relay's stable error code, or the one it would give for a \
         refusal decided here ('invalid_input') or a relay not reached ('unavailable'), else None; `status` \
         its HTTP status, `transient` tells whether the same call may succeed later.";
    RelayUnavailable(PacerelleError):
        "The relay could not be reached, or is overloaded or restarting: try again later.";
    AuthError(PacerelleError):
        "A credential was refused: wrong token, revoked device, closed registration.";
    AgentInUse(PacerelleError):
        "Another session holds the agent's lease; `host` and `since` name it. Open the session with \
         takeover=True to take it.";
    LeaseLost(PacerelleError):
        "This session no longer holds the lease: it expired or another session took it over.";
    NotApproved(PacerelleError):
        "The owner did not approve: `conclusion` is the gate's word ('denied', 'expired', 'cancelled', \
         'relay_unavailable', 'rejected', 'pending' or 'answered'), `reason` the gate's sentence saying why, \
         `outcome` the AnswerOutcome when there is one.";
    CryptoError(PacerelleError):
        "A sealed value did not open: altered, moved, or sealed with another key.";
    InvalidInput(PacerelleError):
        "An argument is out of range or malformed (also the relay's invalid_input, id_conflict…).";
    QuestionIdConflict(InvalidInput):
        "The question id already names a different question: one id carries one question. Ask under a new \
         id, or ask exactly the same question to resume it.";
    NotFound(PacerelleError):
        "No such item for this credential.";
    QuestionClosed(PacerelleError):
        "The question is no longer open: `state` is 'answered', 'expired' or 'cancelled'. When a device's \
         answer was refused, `answer` is the answer that counts (True, False, options or text; None when \
         unreadable) and `answered_by_name` its author: the refused answer was not recorded.";
    NoDevice(PacerelleError):
        "A question or notification needs a paired device: pair a phone first.";
    QuotaExceeded(PacerelleError):
        "The agent holds as much as the relay allows (`quota_exceeded`): tasks not yet processed, or open \
         questions. Nothing was stored, and `transient` is False: the same call succeeds only once the agent \
         has processed tasks, or questions were answered, cancelled or expired. `details` names the quota \
         and its limit.";
    PairingError(PacerelleError):
        "The pairing link expired, was already used, or its proof does not match.";
    WebhookError(PacerelleError):
        "A webhook request did not verify: `reason` is 'malformed_header', 'outside_tolerance', \
         'bad_signature' or 'malformed_body'.";
}

/// Adds the exceptions to the module, with their attributes' defaults on the classes.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    for (name, ty) in classes(py) {
        m.add(name, ty)?;
    }
    let base = py.get_type::<PacerelleError>();
    for attr in ["code", "status", "details"] {
        base.setattr(attr, py.None())?;
    }
    base.setattr("transient", false)?;
    // Raised from Python too (a bad argument caught before the native call): the code the relay would give.
    py.get_type::<InvalidInput>()
        .setattr("code", pacerelle_client::core::wire::code::INVALID_INPUT)?;
    let in_use = py.get_type::<AgentInUse>();
    in_use.setattr("host", py.None())?;
    in_use.setattr("since", py.None())?;
    let refused = py.get_type::<NotApproved>();
    refused.setattr("conclusion", py.None())?;
    refused.setattr("reason", py.None())?;
    refused.setattr("outcome", py.None())?;
    let closed = py.get_type::<QuestionClosed>();
    for attr in ["state", "answer", "answered_by_name"] {
        closed.setattr(attr, py.None())?;
    }
    py.get_type::<WebhookError>().setattr("reason", py.None())?;
    Ok(())
}

/// The one conversion point: a client error becomes the matching Python exception, with `code`, `status`,
/// `details` and `transient` set (and `host`/`since` for [`AgentInUse`], `state` for [`QuestionClosed`]).
pub(crate) fn to_py_err(e: Error) -> PyErr {
    Python::attach(|py| build(py, &e).unwrap_or_else(|err| err))
}

fn build(py: Python<'_>, e: &Error) -> PyResult<PyErr> {
    let transient = e.is_transient();
    let message = e.to_string();
    // The one classification of errors, the client's `ErrorKind`, for the relay's codes and the client's own
    // errors alike.
    let ty = match e.kind() {
        ErrorKind::Unauthorized | ErrorKind::DeviceRevoked => py.get_type::<AuthError>(),
        ErrorKind::AgentInUse => py.get_type::<AgentInUse>(),
        ErrorKind::LeaseLost => py.get_type::<LeaseLost>(),
        ErrorKind::NotFound | ErrorKind::UserNotFound => py.get_type::<NotFound>(),
        ErrorKind::QuestionClosed => py.get_type::<QuestionClosed>(),
        ErrorKind::NoDevice => py.get_type::<NoDevice>(),
        ErrorKind::QuotaExceeded => py.get_type::<QuotaExceeded>(),
        ErrorKind::QuestionIdConflict => py.get_type::<QuestionIdConflict>(),
        ErrorKind::Pairing => py.get_type::<PairingError>(),
        ErrorKind::InvalidInput | ErrorKind::BadCursor | ErrorKind::BodyTooLarge | ErrorKind::IdConflict => {
            py.get_type::<InvalidInput>()
        }
        ErrorKind::RateLimited | ErrorKind::Unavailable => py.get_type::<RelayUnavailable>(),
        ErrorKind::Crypto => py.get_type::<CryptoError>(),
        _ => py.get_type::<PacerelleError>(),
    };
    let (status, details) = match e {
        Error::Api { status, details, .. } => (Some(*status), details.clone()),
        _ => (None, None),
    };
    let err = PyErr::from_type(ty, message);
    let value = err.value(py);
    value.setattr("code", e.stable_code())?;
    value.setattr("status", status)?;
    value.setattr("transient", transient)?;
    if let Some(details) = &details {
        value.setattr("details", crate::convert::json_to_py(py, details)?)?;
        if let Some(holder) = e.lease_holder() {
            value.setattr("host", holder.host)?;
            value.setattr("since", crate::convert::datetime(py, holder.since)?)?;
        }
    }
    if let Some(state) = e.closed_state() {
        value.setattr("state", state.as_str())?;
        // A device's refused answer: the answer that counts (True, False, options or text), never the refused one.
        if let Some(closed) = pacerelle_client::device::ClosedQuestion::from_error(e) {
            value.setattr("state", closed.state.as_str())?;
            let answer = match &closed.answer {
                Some(a) => crate::types::answer_to_py(py, a)?,
                None => py.None(),
            };
            value.setattr("answer", answer)?;
            value.setattr("answered_by_name", closed.answered_by_name.as_deref())?;
        }
    }
    Ok(err)
}

/// An [`InvalidInput`] raised by the binding itself, before any request.
pub(crate) fn invalid(message: impl Into<String>) -> PyErr {
    to_py_err(Error::InvalidInput(message.into()))
}
