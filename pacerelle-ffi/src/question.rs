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
    /// A device answered.
    Answered,
    /// Nobody answered in time (the agent takes it as a no).
    Expired,
    /// The agent withdrew it.
    Cancelled,
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
    /// The device that answered.
    pub answered_by: Option<String>,
    /// When the relay accepted the answer.
    pub answered_at: Option<SystemTime>,
    /// The answering device's name, as the relay reports it.
    pub answered_by_name: Option<String>,
    /// The answer that counts, read from the copy the answering device sealed for every recipient: to show
    /// which answer was given. `None` while unanswered, or for an answer given without a copy.
    pub answer: Option<Answer>,
    /// When it was asked.
    pub created_at: SystemTime,
}

impl From<pacerelle_client::OpenedQuestion> for Question {
    fn from(q: pacerelle_client::OpenedQuestion) -> Self {
        Question {
            is_open: q.is_open(),
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
