//! Errors of the core. None of them carries plaintext or key material.

/// A sealed value that could not be opened, or a key that could not be used.
///
/// Deliberately without detail: an envelope that was altered, moved to another object, or sealed with
/// another key fails in the same way.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CryptoError {
    /// The envelope is not base64url, too short, or of an unknown version.
    #[error("malformed envelope")]
    Malformed,
    /// Authentication failed: wrong key, altered bytes, or additional data that does not match.
    #[error("envelope does not open with this key and context")]
    Open,
    /// The system random generator failed.
    #[error("random generator failed")]
    Random,
    /// It opened, but the device that sealed it is not one the agent's roster lists as active (unknown or
    /// revoked): whatever it says, it is not from the person.
    #[error("sealed by a device the agent's roster does not trust")]
    NotTrusted,
    /// It opened, but its sender addressed it to another session of the agent: the relay handed it to the
    /// wrong one (the session name in clear was changed or dropped).
    #[error("addressed to another session of the agent")]
    Misrouted,
}

/// Errors of the core.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Sealing or opening failed.
    #[error(transparent)]
    Crypto(#[from] CryptoError),
    /// An agent token that is not `pcr1_…` with a valid checksum.
    #[error("malformed agent token (expected pcr1_… as printed by `pacerelle agent create`)")]
    MalformedToken,
    /// A pairing link without a valid `#v1.…` fragment.
    #[error("malformed pairing link (expected https://relay/pair#v1.…)")]
    MalformedLink,
    /// A cursor that this protocol did not issue.
    #[error("malformed cursor")]
    MalformedCursor,
    /// An id that is empty, too long or has characters outside `A-Z a-z 0-9 _ - . :`.
    #[error("invalid {what}: {reason}")]
    InvalidId {
        what: &'static str,
        reason: &'static str,
    },
    /// A decrypted payload that is not the JSON expected for its kind.
    #[error("payload of kind {kind} is not valid")]
    Payload { kind: &'static str },
}

/// Result with the core [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
