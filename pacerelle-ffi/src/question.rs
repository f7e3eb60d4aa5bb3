//! Questions from the agent and the answers this device gives.

use std::time::SystemTime;

pub use pacerelle_core::question::{Answer, Channel, QuestionKind, QuestionState};

use crate::time::system_time;

/// The channel the relay reports for an answer. A relay that predates channels reports none: its answers all
/// came from a device, named in `answered_by`, and read as `Phone` (docs/relay-api.md).
pub(crate) fn channel_of(channel: Option<Channel>, answered_by: Option<&str>) -> Option<Channel> {
    channel.or(answered_by.map(|_| Channel::Phone))
}

/// A question from the agent, opened on this device.
///
/// Not the client's `OpenedQuestion` itself: its times are the core's `Timestamp` newtype (milliseconds),
/// which crosses as `SystemTime`, and it holds the answer key, which stays in Rust.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct Question {
    /// Its id: answer with it.
    pub question_id: String,
    /// The question.
    pub question: String,
    /// What kind of answer it expects.
    pub kind: QuestionKind,
    /// The options of a choice question.
    pub options: Vec<String>,
    /// Whether several options may be chosen.
    pub multiple: bool,
    /// More context, shown under the question.
    pub details: Option<String>,
    /// Where it stands as of this read (a pending question past its expiry reads as expired).
    pub state: QuestionState,
    /// True while an answer can still count: pending and not past its expiry by this device's clock.
    pub is_open: bool,
    /// When it expires, as the agent sealed it.
    pub expires_at: SystemTime,
    /// The device that answered; absent for an answer given at the computer (`channel` is `Host`).
    pub answered_by: Option<String>,
    /// When the relay accepted the answer.
    pub answered_at: Option<SystemTime>,
    /// The answering device's name, as the relay reports it.
    pub answered_by_name: Option<String>,
    /// How it was answered: on a device (`Phone`) or at the computer (`Host`). `null`/`nil` while unanswered.
    pub channel: Option<Channel>,
    /// The answer that counts, read from the copy the answering device sealed for every recipient: to show
    /// which answer was given. `None` while unanswered, or for an answer given without a copy.
    pub answer: Option<Answer>,
    /// When it was asked.
    pub created_at: SystemTime,
    /// A gate question's grant offer: answer `answerGranting` to allow the same calls for a while.
    pub grants: Option<crate::grants::GrantOffer>,
    /// How many distinct owner devices must approve (1: the first answer decides).
    pub approvals: u32,
    /// For a question that needs several approvals: the devices that answered so far (while it is pending,
    /// each approved): show "1 of 2 approvals".
    pub answers: Vec<String>,
}

impl From<pacerelle_client::device::OpenedQuestion> for Question {
    fn from(q: pacerelle_client::device::OpenedQuestion) -> Self {
        Question {
            is_open: q.is_open(),
            channel: channel_of(q.channel, q.answered_by.as_deref()),
            question_id: q.question_id,
            question: q.question,
            kind: q.kind,
            options: q.options,
            multiple: q.multiple,
            details: q.details,
            state: q.state,
            expires_at: system_time(q.expires_at),
            answered_by: q.answered_by,
            answered_at: q.answered_at.map(system_time),
            answered_by_name: q.answered_by_name,
            answer: q.answer,
            created_at: system_time(q.created_at),
            grants: q.grants,
            approvals: q.approvals,
            answers: q.answers,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_channel_is_the_relays_and_a_device_answer_without_one_is_a_phones() {
        assert_eq!(channel_of(Some(Channel::Host), None), Some(Channel::Host));
        assert_eq!(
            channel_of(Some(Channel::Phone), Some("dev_1")),
            Some(Channel::Phone)
        );
        // From a relay that predates channels.
        assert_eq!(channel_of(None, Some("dev_1")), Some(Channel::Phone));
        assert_eq!(channel_of(None, None), None);
    }
}
