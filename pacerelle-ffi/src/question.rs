//! Questions from the agent and the answers this device gives.

use std::time::SystemTime;

pub use pacerelle_client::{QuestionKind, QuestionState};

use crate::time::system_time;

/// What kind of answer a question expects.
#[uniffi::remote(Enum)]
pub enum QuestionKind {
    /// Yes or no: answer with `Answer.Yes` or `Answer.No`.
    YesNo,
    /// One of `options`, or several when `multiple`: answer with `Answer.Options`.
    Choice,
    /// Free text: answer with `Answer.Text`.
    Text,
}

/// Where a question stands.
#[uniffi::remote(Enum)]
pub enum QuestionState {
    /// Waiting for an answer.
    Pending,
    /// Answered: on a device, or at the computer (see `channel`).
    Answered,
    /// Nobody answered in time (the agent takes it as a no).
    Expired,
    /// The agent withdrew it.
    Cancelled,
}

/// How an answer reached the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, uniffi::Enum)]
pub enum AnswerChannel {
    /// On a paired device (this one or another): `answeredBy` names it.
    Phone,
    /// At the computer: the person answered through the agent's host (its terminal or editor), so no device
    /// answered and `answeredBy` is absent. Show it as "answered at the computer".
    Host,
}

impl AnswerChannel {
    /// The channel the relay reports for an answer. A relay that predates channels reports none: its answers
    /// all came from a device, named in `answered_by`, and read as `Phone` (docs/relay-api.md).
    pub(crate) fn of(channel: Option<pacerelle_client::Channel>, answered_by: Option<&str>) -> Option<Self> {
        channel
            .map(AnswerChannel::from)
            .or(answered_by.map(|_| AnswerChannel::Phone))
    }
}

impl From<pacerelle_client::Channel> for AnswerChannel {
    fn from(c: pacerelle_client::Channel) -> Self {
        match c {
            pacerelle_client::Channel::Phone => AnswerChannel::Phone,
            pacerelle_client::Channel::Host => AnswerChannel::Host,
        }
    }
}

/// A question from the agent, opened on this device.
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
    pub channel: Option<AnswerChannel>,
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

impl From<pacerelle_client::OpenedQuestion> for Question {
    fn from(q: pacerelle_client::OpenedQuestion) -> Self {
        Question {
            is_open: q.is_open(),
            channel: AnswerChannel::of(q.channel, q.answered_by.as_deref()),
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
            answer: q.answer.map(Answer::from),
            created_at: system_time(q.created_at),
            grants: q.grants,
            approvals: q.approvals,
            answers: q.answers,
        }
    }
}

/// An answer to a question. The agent acts only on an explicit yes (or chosen options).
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum Answer {
    /// Yes, to a yes/no question.
    Yes,
    /// No, to a yes/no question.
    No,
    /// The chosen options of a choice question (exactly one unless it allows several; distinct).
    Options {
        /// The options chosen, as the question wrote them.
        options: Vec<String>,
    },
    /// A written answer to a text question.
    Text {
        /// The text.
        text: String,
    },
}

impl From<Answer> for pacerelle_client::Answer {
    fn from(a: Answer) -> Self {
        match a {
            Answer::Yes => pacerelle_client::Answer::Yes,
            Answer::No => pacerelle_client::Answer::No,
            Answer::Options { options } => pacerelle_client::Answer::Options(options),
            Answer::Text { text } => pacerelle_client::Answer::Text(text),
        }
    }
}

impl From<pacerelle_client::Answer> for Answer {
    fn from(a: pacerelle_client::Answer) -> Self {
        match a {
            pacerelle_client::Answer::Yes => Answer::Yes,
            pacerelle_client::Answer::No => Answer::No,
            pacerelle_client::Answer::Options(options) => Answer::Options { options },
            pacerelle_client::Answer::Text(text) => Answer::Text { text },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pacerelle_client::Channel;

    #[test]
    fn the_channel_is_the_relays_and_a_device_answer_without_one_is_a_phones() {
        assert_eq!(
            AnswerChannel::of(Some(Channel::Host), None),
            Some(AnswerChannel::Host)
        );
        assert_eq!(
            AnswerChannel::of(Some(Channel::Phone), Some("dev_1")),
            Some(AnswerChannel::Phone)
        );
        // From a relay that predates channels.
        assert_eq!(AnswerChannel::of(None, Some("dev_1")), Some(AnswerChannel::Phone));
        assert_eq!(AnswerChannel::of(None, None), None);
    }
}
