//! The one error of the binding, and its single mapping from [`pacerelle_client::Error`].

use std::time::SystemTime;

use pacerelle_client::{ErrorKind, device::ClosedQuestion};

use crate::question::{Answer, Channel, QuestionState};
use crate::time::system_time;

/// What went wrong, in the cases an app handles differently. None of them carries plaintext or key material.
///
/// Kotlin: `PacerelleException` with one subclass per variant; Swift: `PacerelleError` cases; Python:
/// `PacerelleError.<Variant>`.
#[derive(Debug, thiserror::Error, uniffi::Error)]
#[non_exhaustive]
pub enum PacerelleError {
    /// The relay could not be reached, or the connection broke before it answered: try again later.
    #[error("network: {reason}")]
    Network {
        /// What failed.
        reason: String,
    },
    /// The relay refused the request with a stable code (`pairing_expired`, `pairing_claimed`, `id_conflict`,
    /// `rate_limited`…; see `docs/relay-api.md`). Statuses 408, 429, 502, 503 and 504 are worth retrying.
    #[error("{reason} ({code}, HTTP {status})")]
    Relay {
        /// The HTTP status.
        status: u16,
        /// The stable error code.
        code: String,
        /// The relay's explanation.
        reason: String,
    },
    /// A sealed value did not open: altered, moved, or sealed with another key.
    #[error("crypto: {reason}")]
    Crypto {
        /// What did not open.
        reason: String,
    },
    /// The answer did not count: the question was already answered (by another device, or by this one with
    /// another answer), expired or was cancelled. Show `state` and `answer`, the answer that counts — never
    /// the refused one as if it stood.
    #[error("question closed ({state:?}): {reason}")]
    QuestionClosed {
        /// Where it stands: answered, expired or cancelled.
        state: QuestionState,
        /// The explanation (it never carries an answer).
        reason: String,
        /// The answer that counts, read from its copy; `None` when not answered, or when it has no readable copy.
        answer: Option<Answer>,
        /// The device whose answer counts; absent when it was given at the computer (`channel` is `Host`).
        answered_by: Option<String>,
        /// Its name, as the relay reports it.
        answered_by_name: Option<String>,
        /// When the relay accepted that answer.
        answered_at: Option<SystemTime>,
        /// True when the answer that counts is this device's own, given earlier.
        by_this_device: bool,
        /// How the answer that counts was given: on a device (`Phone`) or at the computer (`Host`); `null`/`nil`
        /// when not answered, or when the question could not be read again.
        channel: Option<Channel>,
    },
    /// The agent already holds as much as its relay allows (`quota_exceeded`): for a send, as many tasks not
    /// yet processed as the relay keeps for it. Nothing was stored. Sending again at once is refused the same
    /// way: show `reason` (it names the limit) and let the person send again once the agent has caught up.
    #[error("quota exceeded: {reason}")]
    QuotaExceeded {
        /// The relay's explanation: the limit, and what frees room.
        reason: String,
    },
    /// This device is not paired (any more): it left, was revoked, or its credentials are unknown to the relay.
    /// Forget the stored credentials and pair again.
    #[error("not paired: {reason}")]
    NotPaired {
        /// The explanation.
        reason: String,
    },
    /// An argument is malformed or out of range: a pairing link, credentials, a cursor, an id, an empty text,
    /// an answer that does not fit its question.
    #[error("invalid input: {reason}")]
    InvalidInput {
        /// What is wrong.
        reason: String,
    },
    /// A push body was refused by `openPush`: `code` is `push_not_registered` (no subscription stored: register
    /// and store the credentials again), `push_undecryptable` (altered, or for another subscription),
    /// `push_malformed`, `push_not_for_this_device` or `push_item_rejected` (its item did not open). Show
    /// nothing from it; the conversation still has every item.
    #[error("push refused ({code}): {reason}")]
    PushRefused {
        /// The stable code.
        code: String,
        /// The explanation (it never carries plaintext).
        reason: String,
    },
    /// Anything else: an app's listener threw, or an error this version does not know.
    #[error("internal: {reason}")]
    Internal {
        /// What happened.
        reason: String,
    },
}

/// Result with [`PacerelleError`].
pub type Result<T, E = PacerelleError> = std::result::Result<T, E>;

impl From<pacerelle_client::Error> for PacerelleError {
    fn from(e: pacerelle_client::Error) -> Self {
        use pacerelle_client::Error as E;
        let reason = e.to_string();
        let closed = ClosedQuestion::from_error(&e);
        let state = e.closed_state().unwrap_or(QuestionState::Answered);
        match e {
            E::Network { .. } => PacerelleError::Network { reason },
            E::Api {
                status,
                code,
                message,
                ..
            } => match ErrorKind::of_code(&code) {
                ErrorKind::DeviceRevoked | ErrorKind::Unauthorized => {
                    PacerelleError::NotPaired { reason: message }
                }
                ErrorKind::QuotaExceeded => PacerelleError::QuotaExceeded { reason: message },
                ErrorKind::QuestionClosed => question_closed(state, message, closed),
                _ => PacerelleError::Relay {
                    status,
                    code,
                    reason: message,
                },
            },
            E::Crypto(_) => PacerelleError::Crypto { reason },
            E::Core(pacerelle_client::core::Error::Payload { .. }) => PacerelleError::Crypto { reason },
            E::Core(_) | E::InvalidInput(_) => PacerelleError::InvalidInput { reason },
            _ => PacerelleError::Internal { reason },
        }
    }
}

/// `QuestionClosed` for a refusal code, with the answer that counts when the client read it.
fn question_closed(state: QuestionState, reason: String, closed: Option<ClosedQuestion>) -> PacerelleError {
    match closed {
        Some(c) => PacerelleError::QuestionClosed {
            channel: channel_of(&c),
            state: c.state,
            reason,
            answer: c.answer,
            answered_by: c.answered_by,
            answered_by_name: c.answered_by_name,
            answered_at: c.answered_at.map(system_time),
            by_this_device: c.by_this_device,
        },
        None => PacerelleError::QuestionClosed {
            state,
            reason,
            answer: None,
            answered_by: None,
            answered_by_name: None,
            answered_at: None,
            by_this_device: false,
            channel: None,
        },
    }
}

/// The channel of the answer that counts. The refusal states the question as read again without naming its
/// channel, so it is read from the wire's rule: an answered question was answered by a device, named in
/// `answered_by`, unless it was answered at the computer, which names no device.
fn channel_of(c: &ClosedQuestion) -> Option<Channel> {
    if c.state != QuestionState::Answered || c.answered_at.is_none() {
        return None;
    }
    Some(match c.answered_by {
        Some(_) => Channel::Phone,
        None => Channel::Host,
    })
}

impl From<uniffi::UnexpectedUniFFICallbackError> for PacerelleError {
    fn from(e: uniffi::UnexpectedUniFFICallbackError) -> Self {
        PacerelleError::Internal { reason: e.reason }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pacerelle_client::Error;

    fn api(status: u16, code: &str) -> Error {
        Error::local(status, code, "m".into())
    }

    #[test]
    fn codes_an_app_branches_on_have_their_own_variant() {
        assert!(matches!(
            api(401, "device_revoked").into(),
            PacerelleError::NotPaired { .. }
        ));
        assert!(matches!(
            api(401, "unauthorized").into(),
            PacerelleError::NotPaired { .. }
        ));
        assert!(matches!(
            api(409, "question_answered").into(),
            PacerelleError::QuestionClosed {
                state: QuestionState::Answered,
                ..
            }
        ));
        assert!(matches!(
            api(410, "question_expired").into(),
            PacerelleError::QuestionClosed {
                state: QuestionState::Expired,
                ..
            }
        ));
        assert!(matches!(
            api(409, "question_cancelled").into(),
            PacerelleError::QuestionClosed {
                state: QuestionState::Cancelled,
                ..
            }
        ));
        match api(410, "pairing_expired").into() {
            PacerelleError::Relay { status, code, reason } => {
                assert_eq!(
                    (status, code.as_str(), reason.as_str()),
                    (410, "pairing_expired", "m")
                )
            }
            other => panic!("{other:?}"),
        }
        match api(429, "quota_exceeded").into() {
            PacerelleError::QuotaExceeded { reason } => assert_eq!(reason, "m"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            api(429, "rate_limited").into(),
            PacerelleError::Relay { status: 429, .. }
        ));
        assert!(matches!(
            Error::InvalidInput("x".into()).into(),
            PacerelleError::InvalidInput { .. }
        ));
        assert!(matches!(
            Error::from(pacerelle_client::core::Error::MalformedLink).into(),
            PacerelleError::InvalidInput { .. }
        ));
        assert!(matches!(
            Error::Crypto(pacerelle_client::core::CryptoError::Open).into(),
            PacerelleError::Crypto { .. }
        ));
    }

    #[test]
    fn a_closed_question_names_the_channel_of_the_answer_that_counts() {
        let closed = |state, answered_by: Option<&str>, answered: bool| ClosedQuestion {
            question_id: "q_1".into(),
            state,
            answer: None,
            answered_by: answered_by.map(str::to_string),
            answered_by_name: None,
            answered_at: answered.then_some(pacerelle_client::Timestamp(1)),
            by_this_device: false,
            expires_at: None,
            channel: None,
        };
        let channel = |c| match question_closed(QuestionState::Answered, "m".into(), Some(c)) {
            PacerelleError::QuestionClosed { channel, .. } => channel,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            channel(closed(QuestionState::Answered, Some("dev_1"), true)),
            Some(Channel::Phone)
        );
        assert_eq!(
            channel(closed(QuestionState::Answered, None, true)),
            Some(Channel::Host)
        );
        assert_eq!(channel(closed(QuestionState::Answered, None, false)), None);
        assert_eq!(channel(closed(QuestionState::Expired, None, false)), None);
        assert!(matches!(
            question_closed(QuestionState::Answered, "m".into(), None),
            PacerelleError::QuestionClosed { channel: None, .. }
        ));
    }
}
