//! The client's errors: network, the relay's coded errors, crypto, and bad input given by the caller.

use pacerelle_core::CryptoError;

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
    /// `question_expired`…), so that callers branch on [`Error::code`] alone.
    pub(crate) fn local(status: u16, code: &str, message: String) -> Self {
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

    /// True when the same call may succeed later: the relay was unreachable, overloaded or restarting.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Network { .. } => true,
            Error::Api { status, .. } => matches!(status, 429 | 502 | 503 | 504),
            _ => false,
        }
    }
}

/// Result with the client [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
