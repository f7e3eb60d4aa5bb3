//! The client's errors: network, the relay's coded errors, crypto, and bad input given by the caller.

use pacerelle_core::CryptoError;
use pacerelle_core::question::QuestionState;
use pacerelle_core::wire::LeaseHolder;

/// Errors of the client. None of them carries plaintext or key material.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The relay could not be reached, or the connection broke before it answered.
    #[error("relay unreachable at {url}: {reason}")]
    Network {
        /// The relay's base URL.
        url: String,
        /// What failed.
        reason: String,
    },
    /// The relay answered with an error (see `docs/relay-api.md` for the codes).
    #[error("{message} ({code}, HTTP {status})")]
    Api {
        /// The HTTP status.
        status: u16,
        /// The stable error code.
        code: String,
        /// The relay's explanation.
        message: String,
        /// Extra facts, such as the lease holder of `agent_in_use` (boxed: it is rare, and keeps the error
        /// small whatever `serde_json` features the build enables).
        details: Option<Box<serde_json::Value>>,
    },
    /// A sealed value did not open: altered, moved, or sealed with another key.
    #[error("crypto: {0}")]
    Crypto(#[from] CryptoError),
    /// A value from the relay or a link did not have the expected form.
    #[error(transparent)]
    Core(pacerelle_core::Error),
    /// An argument given by the caller is out of range or malformed.
    #[error("invalid input: {0}")]
    InvalidInput(String),
}

impl From<pacerelle_core::Error> for Error {
    fn from(e: pacerelle_core::Error) -> Self {
        match e {
            pacerelle_core::Error::Crypto(c) => Error::Crypto(c),
            other => Error::Core(other),
        }
    }
}

impl Error {
    /// A refusal decided on this side before any request, with the code the relay would give (`no_device`,
    /// `question_expired`…), so that callers branch on [`Error::code`] alone. Public for the bindings' tests,
    /// which map such errors.
    pub fn local(status: u16, code: &str, message: String) -> Self {
        Error::Api {
            status,
            code: code.to_string(),
            message,
            details: None,
        }
    }

    /// The relay's error code, for [`Error::Api`].
    pub fn code(&self) -> Option<&str> {
        match self {
            Error::Api { code, .. } => Some(code),
            _ => None,
        }
    }

    /// The code an adapter shows for this error (the CLI's `--json`, Python's `code`): the relay's, else the
    /// one the relay would give for the error's [`ErrorKind`] — `invalid_input` for an argument refused here
    /// before anything was sent (a malformed token, link or id included; `bad_cursor` for a cursor this
    /// protocol did not issue), `unavailable` for a relay not reached. `None` for a value that did not open or
    /// parse.
    pub fn stable_code(&self) -> Option<&str> {
        use pacerelle_core::wire::code as c;
        match (self, self.kind()) {
            (Error::Api { code, .. }, _) => Some(code),
            (_, ErrorKind::BadCursor) => Some(c::BAD_CURSOR),
            (_, ErrorKind::InvalidInput) => Some(c::INVALID_INPUT),
            (_, ErrorKind::Unavailable) => Some(c::UNAVAILABLE),
            _ => None,
        }
    }

    /// The session that holds the lease, as the relay names it in an `agent_in_use` error's details; `None`
    /// for any other error, or details not of that shape.
    pub fn lease_holder(&self) -> Option<LeaseHolder> {
        match self {
            Error::Api {
                code,
                details: Some(details),
                ..
            } if ErrorKind::of_code(code) == ErrorKind::AgentInUse => {
                serde_json::from_value(details.as_ref().clone()).ok()
            }
            _ => None,
        }
    }

    /// The state of the question a [`ErrorKind::QuestionClosed`] error is about (`question_answered`,
    /// `question_expired`, `question_cancelled`); `None` for any other error.
    pub fn closed_state(&self) -> Option<QuestionState> {
        use pacerelle_core::wire::code as c;
        match self.code()? {
            c::QUESTION_ANSWERED => Some(QuestionState::Answered),
            c::QUESTION_EXPIRED => Some(QuestionState::Expired),
            c::QUESTION_CANCELLED => Some(QuestionState::Cancelled),
            _ => None,
        }
    }

    /// What went wrong, for branching (see [`ErrorKind`]).
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Network { .. } => ErrorKind::Unavailable,
            Error::Api { status, code, .. } => match ErrorKind::of_code(code) {
                ErrorKind::Internal if matches!(status, 502..=504) => ErrorKind::Unavailable,
                kind => kind,
            },
            Error::Crypto(_) => ErrorKind::Crypto,
            Error::Core(pacerelle_core::Error::Payload { .. } | pacerelle_core::Error::Crypto(_)) => {
                ErrorKind::Crypto
            }
            Error::Core(pacerelle_core::Error::MalformedCursor) => ErrorKind::BadCursor,
            Error::Core(_) | Error::InvalidInput(_) => ErrorKind::InvalidInput,
        }
    }

    /// True when the same call may succeed later: the relay was unreachable, overloaded or restarting, or
    /// the request's body reached it too slowly. Not `quota_exceeded` (also HTTP 429): that one lasts until
    /// the agent has processed, answered or cancelled something, so retrying at once only repeats it.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Network { .. } => true,
            Error::Api { status, code, .. } => {
                ErrorKind::of_code(code) != ErrorKind::QuotaExceeded
                    && matches!(status, 408 | 429 | 502 | 503 | 504)
            }
            _ => false,
        }
    }
}

/// What went wrong, for branching: every adapter (CLI, MCP, Python, FFI) maps an [`Error`] through this one
/// classification of the relay's stable codes and the client's own errors, never by matching code strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The relay could not be reached, or is overloaded, restarting or its storage unavailable, or the
    /// request's body reached it too slowly (`request_timeout`): try later.
    Unavailable,
    /// Too many requests of this kind: try in a minute.
    RateLimited,
    /// The agent holds as much as the relay allows (`quota_exceeded`): tasks not yet processed, or open
    /// questions; nothing was stored. Not worth retrying at once: room comes back only when the agent
    /// processes tasks, or questions are answered, cancelled or expire. The details name the quota and its
    /// limit.
    QuotaExceeded,
    /// A credential was refused (`unauthorized`, `forbidden`, `registration_closed`).
    Unauthorized,
    /// This device was revoked (`device_revoked`).
    DeviceRevoked,
    /// No such item for this credential (`not_found`, `no_route`).
    NotFound,
    /// Partner mode: no connected user has this `externalId` (`user_not_found`): never connected, or
    /// disconnected.
    UserNotFound,
    /// A malformed or out-of-range argument, given here or refused by the relay (`invalid_input`,
    /// `invalid_json`, `method_not_allowed`, `push_endpoint_forbidden`).
    InvalidInput,
    /// The request is larger than the relay accepts (`body_too_large`; the limit is in the message). An
    /// argument error like [`ErrorKind::InvalidInput`]: the same request is refused again.
    BodyTooLarge,
    /// A cursor this protocol did not issue, or one the relay no longer serves (`bad_cursor`): read again
    /// without it. An argument error like [`ErrorKind::InvalidInput`], with its own remedy.
    BadCursor,
    /// The id is taken by a different item (`id_conflict`, `agent_exists`), or the device already registered
    /// another signing key (`signing_key_exists`).
    IdConflict,
    /// The question id already names a different question (`question_id_conflict`).
    QuestionIdConflict,
    /// Another session holds the lease (`agent_in_use`; the holder is in the details).
    AgentInUse,
    /// This session no longer holds the lease (`lease_lost`).
    LeaseLost,
    /// The question is answered, expired or cancelled (`question_answered`, `question_expired`,
    /// `question_cancelled`).
    QuestionClosed,
    /// A question or notification needs a paired device the agent trusts (`no_device`).
    NoDevice,
    /// The pairing link expired, was used, or its proof does not match (`pairing_*`).
    Pairing,
    /// The agent's device roster from the relay was rolled back, forked or did not open (`roster_*`): no
    /// device is trusted until it is fixed.
    Roster,
    /// The roster changed under an update (`roster_conflict`): read it again.
    RosterConflict,
    /// A sealed value did not open or its content was malformed.
    Crypto,
    /// A failure inside the relay, or a code this version does not know.
    Internal,
}

impl ErrorKind {
    /// Worth trying again after a pause: the relay is unreachable, restarting, busy or failing inside. The
    /// one rule of the loops that wait out an outage (the [`Runner`](crate::runner::Runner), the MCP server's waits).
    pub fn worth_retrying(self) -> bool {
        matches!(
            self,
            ErrorKind::Unavailable | ErrorKind::RateLimited | ErrorKind::Internal
        )
    }

    /// The kind of a relay error code (and of the codes the client raises itself).
    pub fn of_code(code: &str) -> ErrorKind {
        use pacerelle_core::wire::code as c;
        match code {
            c::UNAUTHORIZED | c::FORBIDDEN | c::REGISTRATION_CLOSED => ErrorKind::Unauthorized,
            c::DEVICE_REVOKED => ErrorKind::DeviceRevoked,
            c::NOT_FOUND | c::NO_ROUTE => ErrorKind::NotFound,
            c::USER_NOT_FOUND => ErrorKind::UserNotFound,
            c::INVALID_INPUT | c::INVALID_JSON | c::METHOD_NOT_ALLOWED | c::PUSH_ENDPOINT_FORBIDDEN => {
                ErrorKind::InvalidInput
            }
            c::BAD_CURSOR => ErrorKind::BadCursor,
            c::BODY_TOO_LARGE => ErrorKind::BodyTooLarge,
            c::ID_CONFLICT | c::AGENT_EXISTS | c::SIGNING_KEY_EXISTS => ErrorKind::IdConflict,
            c::QUESTION_ID_CONFLICT => ErrorKind::QuestionIdConflict,
            c::AGENT_IN_USE => ErrorKind::AgentInUse,
            c::LEASE_LOST => ErrorKind::LeaseLost,
            c::QUESTION_ANSWERED | c::QUESTION_EXPIRED | c::QUESTION_CANCELLED => ErrorKind::QuestionClosed,
            c::NO_DEVICE => ErrorKind::NoDevice,
            c::PAIRING_EXPIRED | c::PAIRING_CLAIMED | c::PAIRING_PROOF => ErrorKind::Pairing,
            c::ROSTER_ROLLBACK | c::ROSTER_INVALID => ErrorKind::Roster,
            c::ROSTER_CONFLICT => ErrorKind::RosterConflict,
            c::RATE_LIMITED => ErrorKind::RateLimited,
            c::QUOTA_EXCEEDED => ErrorKind::QuotaExceeded,
            c::UNAVAILABLE | c::REQUEST_TIMEOUT => ErrorKind::Unavailable,
            _ => ErrorKind::Internal,
        }
    }
}

/// Result with the client [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use pacerelle_core::wire::code;

    fn api(status: u16, code: &str) -> Error {
        Error::local(status, code, "m".into())
    }

    #[test]
    fn lease_holder_from_details() {
        let in_use = |details: Option<serde_json::Value>| Error::Api {
            status: 409,
            code: code::AGENT_IN_USE.into(),
            message: "in use".into(),
            details: details.map(Box::new),
        };
        let named = in_use(Some(serde_json::json!({
            "host": "desk / codex",
            "since": "2026-11-30T10:00:00.000Z",
            "lastHeartbeatAt": "2026-11-30T10:05:00.000Z"
        })))
        .lease_holder()
        .expect("named");
        assert_eq!(named.host, "desk / codex");
        assert_eq!(named.since.to_string(), "2026-11-30T10:00:00.000Z");
        assert_eq!(in_use(None).lease_holder(), None);
        assert_eq!(
            in_use(Some(serde_json::json!({"host": "x"}))).lease_holder(),
            None
        );
        assert_eq!(api(409, code::LEASE_LOST).lease_holder(), None);
    }

    #[test]
    fn closed_states() {
        assert_eq!(
            api(409, code::QUESTION_ANSWERED).closed_state(),
            Some(QuestionState::Answered)
        );
        assert_eq!(
            api(410, code::QUESTION_EXPIRED).closed_state(),
            Some(QuestionState::Expired)
        );
        assert_eq!(
            api(409, code::QUESTION_CANCELLED).closed_state(),
            Some(QuestionState::Cancelled)
        );
        assert_eq!(api(409, code::AGENT_IN_USE).closed_state(), None);
        assert_eq!(Error::InvalidInput("x".into()).closed_state(), None);
    }

    #[test]
    fn the_stable_code_is_the_relays_else_the_one_it_would_give() {
        assert_eq!(api(404, code::NOT_FOUND).stable_code(), Some(code::NOT_FOUND));
        assert_eq!(
            Error::InvalidInput("x".into()).stable_code(),
            Some(code::INVALID_INPUT)
        );
        let down = Error::Network {
            url: "http://127.0.0.1:9".into(),
            reason: "refused".into(),
        };
        assert_eq!(down.stable_code(), Some(code::UNAVAILABLE));
        // `code` stays the relay's own: a caller can tell a refusal from the relay from one decided here.
        assert_eq!(
            (down.code(), Error::InvalidInput("x".into()).code()),
            (None, None)
        );
        let core = |e| Error::from(e);
        assert_eq!(
            core(pacerelle_core::Error::MalformedLink).stable_code(),
            Some(code::INVALID_INPUT)
        );
        assert_eq!(
            core(pacerelle_core::Error::MalformedCursor).stable_code(),
            Some(code::BAD_CURSOR)
        );
        // A value that did not open has no code: it is not the caller's input.
        assert_eq!(core(pacerelle_core::CryptoError::Open.into()).stable_code(), None);
        assert_eq!(
            core(pacerelle_core::Error::Payload { kind: "task" }).stable_code(),
            None
        );
    }

    #[test]
    fn every_code_has_one_kind() {
        assert_eq!(
            api(409, code::QUESTION_ANSWERED).kind(),
            ErrorKind::QuestionClosed
        );
        assert_eq!(api(410, code::QUESTION_EXPIRED).kind(), ErrorKind::QuestionClosed);
        assert_eq!(
            api(409, code::QUESTION_ID_CONFLICT).kind(),
            ErrorKind::QuestionIdConflict
        );
        assert_eq!(api(409, code::ROSTER_ROLLBACK).kind(), ErrorKind::Roster);
        assert_eq!(api(403, code::DEVICE_REVOKED).kind(), ErrorKind::DeviceRevoked);
        assert_eq!(api(400, code::BAD_CURSOR).kind(), ErrorKind::BadCursor);
        assert_eq!(api(413, code::BODY_TOO_LARGE).kind(), ErrorKind::BodyTooLarge);
        assert_eq!(
            Error::Core(pacerelle_core::Error::MalformedCursor).stable_code(),
            Some(code::BAD_CURSOR)
        );
        // Codes that once fell through to `internal`, which counts as worth retrying: none of them is.
        assert_eq!(
            api(400, code::PUSH_ENDPOINT_FORBIDDEN).kind(),
            ErrorKind::InvalidInput
        );
        assert_eq!(api(409, code::SIGNING_KEY_EXISTS).kind(), ErrorKind::IdConflict);
        assert_eq!(api(404, code::USER_NOT_FOUND).kind(), ErrorKind::UserNotFound);
        for c in [
            code::PUSH_ENDPOINT_FORBIDDEN,
            code::SIGNING_KEY_EXISTS,
            code::USER_NOT_FOUND,
        ] {
            assert!(!ErrorKind::of_code(c).worth_retrying(), "{c}");
        }
        assert_eq!(api(503, "something_new").kind(), ErrorKind::Unavailable);
        assert_eq!(api(500, "something_new").kind(), ErrorKind::Internal);
        assert_eq!(
            Error::Network {
                url: "u".into(),
                reason: "r".into()
            }
            .kind(),
            ErrorKind::Unavailable
        );
        assert_eq!(Error::InvalidInput("x".into()).kind(), ErrorKind::InvalidInput);
        assert_eq!(Error::Crypto(CryptoError::Open).kind(), ErrorKind::Crypto);
        // A rolled-back roster is not a relay outage: waits must not retry it.
        assert!(!api(409, code::ROSTER_ROLLBACK).is_transient());
        // A quota lasts until the agent catches up: 429 like rate_limited, but neither transient nor worth
        // retrying at once.
        let quota = api(429, code::QUOTA_EXCEEDED);
        assert_eq!(quota.kind(), ErrorKind::QuotaExceeded);
        assert!(!quota.is_transient());
        assert!(!quota.kind().worth_retrying());
        assert!(api(429, code::RATE_LIMITED).is_transient());
        // A body that reached the relay too slowly: send it again.
        let slow = api(408, code::REQUEST_TIMEOUT);
        assert_eq!(slow.kind(), ErrorKind::Unavailable);
        assert!(slow.is_transient());
        assert!(slow.kind().worth_retrying());
    }
}
