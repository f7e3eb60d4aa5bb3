//! Questions (DESIGN §6): the agent asks, a device answers, and **no answer is a no**.
//!
//! The relay keeps a question's state in clear (`pending` → `answered` | `expired` | `cancelled`; terminal
//! states final; the first valid answer wins), enforced by [`QuestionRecord`]. But whether the agent may act
//! is decided only by [`verdict`], on the agent side: `approved` holds only for an explicit yes (or chosen
//! options) in an answer that opened with the answering device's key, bound to this question, given before
//! the expiry the agent itself sealed into the question. Nothing the relay says in clear can make it hold.

use serde::{Deserialize, Serialize};

use crate::envelope::{self, Aad, Direction};
use crate::keys::ContentKey;
use crate::time::Timestamp;

/// Object kind of a question in the additional data.
pub const KIND_QUESTION: &str = "question";
/// Object kind of an answer in the additional data.
pub const KIND_ANSWER: &str = "answer";
/// Default lifetime of a question: 10 minutes.
pub const DEFAULT_EXPIRES_SECONDS: u64 = 600;
/// Longest lifetime of a question: 7 days.
pub const MAX_EXPIRES_SECONDS: u64 = 7 * 24 * 3600;
/// Most options of a choice question.
pub const MAX_OPTIONS: usize = 20;

/// What kind of answer a question expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QuestionKind {
    /// Yes or no.
    YesNo,
    /// One option, or several when `multiple`.
    Choice,
    /// Free text.
    Text,
}

impl QuestionKind {
    /// The kind's wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            QuestionKind::YesNo => "yes_no",
            QuestionKind::Choice => "choice",
            QuestionKind::Text => "text",
        }
    }
}

/// Where a question stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QuestionState {
    /// Waiting for an answer.
    Pending,
    /// A device answered (yes, no, options or text).
    Answered,
    /// Nobody answered in time: a no, never a human rejection.
    Expired,
    /// The agent withdrew it.
    Cancelled,
}

impl QuestionState {
    /// The state's wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            QuestionState::Pending => "pending",
            QuestionState::Answered => "answered",
            QuestionState::Expired => "expired",
            QuestionState::Cancelled => "cancelled",
        }
    }

    /// Parses a wire name.
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "pending" => QuestionState::Pending,
            "answered" => QuestionState::Answered,
            "expired" => QuestionState::Expired,
            "cancelled" => QuestionState::Cancelled,
            _ => return None,
        })
    }

    /// True for `answered`, `expired` and `cancelled`: nothing changes it any more.
    pub fn is_terminal(self) -> bool {
        self != QuestionState::Pending
    }
}

/// What a question carries, sealed for each device and for the agent itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QuestionPayload {
    /// The question.
    pub question: String,
    /// Its kind.
    pub kind: QuestionKind,
    /// The options of a choice question.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
    /// Whether several options may be chosen.
    #[serde(default)]
    pub multiple: bool,
    /// More context shown under the question.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<String>,
    /// The expiry, sealed so that the relay cannot extend it.
    pub expires_at: Timestamp,
    /// The devices it was sent to: only their answers count.
    #[serde(default)]
    pub recipients: Vec<String>,
}

impl QuestionPayload {
    /// Checks the shape: non-empty text, options only for choice (2 to 20, distinct, non-empty).
    pub fn validate(&self) -> Result<(), &'static str> {
        if self.question.trim().is_empty() {
            return Err("a question needs some text");
        }
        match self.kind {
            QuestionKind::Choice => {
                if self.options.len() < 2 || self.options.len() > MAX_OPTIONS {
                    return Err("a choice question has 2 to 20 options");
                }
                if self.options.iter().any(|o| o.trim().is_empty()) {
                    return Err("an option cannot be empty");
                }
                let mut seen = std::collections::HashSet::new();
                if !self.options.iter().all(|o| seen.insert(o.as_str())) {
                    return Err("options must be distinct");
                }
            }
            QuestionKind::YesNo | QuestionKind::Text => {
                if !self.options.is_empty() || self.multiple {
                    return Err("only a choice question has options");
                }
            }
        }
        Ok(())
    }
}

/// An answer's content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", content = "value", rename_all = "snake_case")]
pub enum Answer {
    /// An explicit yes.
    Yes,
    /// An explicit no.
    No,
    /// The chosen options.
    Options(Vec<String>),
    /// A written answer.
    Text(String),
}

/// What an answer carries, sealed by the answering device for the agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AnswerPayload {
    /// The question answered (also bound in the additional data).
    pub question_id: String,
    /// The answer.
    pub answer: Answer,
    /// When the person answered, by the device's clock.
    pub answered_at: Timestamp,
}

/// How much a notification matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// For information.
    #[default]
    Info,
    /// Something needs attention.
    Warning,
    /// Something failed.
    Error,
    /// A task is done.
    Success,
}

/// Object kind of a notification in the additional data.
pub const KIND_NOTIFICATION: &str = "notification";

/// What a notification carries, sealed for each device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NotificationPayload {
    /// The text.
    pub text: String,
    /// A short title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// How much it matters.
    #[serde(default)]
    pub level: Level,
}

/// The context of a notification sealed for `device_id`.
pub fn notification_aad<'a>(agent_id: &'a str, device_id: &'a str, notification_id: &'a str) -> Aad<'a> {
    Aad {
        agent_id,
        device_id,
        direction: Direction::AgentToDevice,
        kind: KIND_NOTIFICATION,
        object_id: notification_id,
    }
}

/// The context of a question sealed for `device_id` (`""`: the agent's own copy, with its self key).
pub fn question_aad<'a>(agent_id: &'a str, device_id: &'a str, question_id: &'a str) -> Aad<'a> {
    let direction = if device_id.is_empty() {
        Direction::AgentToSelf
    } else {
        Direction::AgentToDevice
    };
    Aad {
        agent_id,
        device_id,
        direction,
        kind: KIND_QUESTION,
        object_id: question_id,
    }
}

/// The context of an answer sealed by `device_id`.
pub fn answer_aad<'a>(agent_id: &'a str, device_id: &'a str, question_id: &'a str) -> Aad<'a> {
    Aad {
        agent_id,
        device_id,
        direction: Direction::DeviceToAgent,
        kind: KIND_ANSWER,
        object_id: question_id,
    }
}

/// Why the relay refuses a transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The question expired before this answer.
    #[error("the question has expired")]
    Expired,
    /// The question was cancelled.
    #[error("the question was cancelled")]
    Cancelled,
    /// Another answer came first.
    #[error("the question is already answered")]
    AlreadyAnswered,
}

/// The state the relay keeps for a question, and the only transitions it allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuestionRecord {
    /// Current state (read it through [`QuestionRecord::state_at`], which applies expiry).
    pub state: QuestionState,
    /// When it expires.
    pub expires_at: Timestamp,
    /// The device that answered.
    pub answered_by: Option<String>,
    /// When the relay accepted the answer, or when it expired or was cancelled.
    pub closed_at: Option<Timestamp>,
}

impl QuestionRecord {
    /// A new pending question.
    pub fn new(expires_at: Timestamp) -> Self {
        QuestionRecord {
            state: QuestionState::Pending,
            expires_at,
            answered_by: None,
            closed_at: None,
        }
    }

    /// The state at `now`: a pending question past its expiry is expired.
    pub fn state_at(&self, now: Timestamp) -> QuestionState {
        if self.state == QuestionState::Pending && now >= self.expires_at {
            QuestionState::Expired
        } else {
            self.state
        }
    }

    fn refusal(state: QuestionState) -> Refusal {
        match state {
            QuestionState::Cancelled => Refusal::Cancelled,
            QuestionState::Answered => Refusal::AlreadyAnswered,
            _ => Refusal::Expired,
        }
    }

    /// Records the first answer; later ones, late ones and answers to cancelled questions are refused.
    pub fn answer(&mut self, device_id: &str, now: Timestamp) -> Result<(), Refusal> {
        self.expire_if_due(now);
        if self.state != QuestionState::Pending {
            return Err(Self::refusal(self.state));
        }
        self.state = QuestionState::Answered;
        self.answered_by = Some(device_id.to_string());
        self.closed_at = Some(now);
        Ok(())
    }

    /// Cancels a pending question. Cancelling a cancelled one is a no-op; other terminal states refuse.
    pub fn cancel(&mut self, now: Timestamp) -> Result<(), Refusal> {
        self.expire_if_due(now);
        match self.state {
            QuestionState::Pending => {
                self.state = QuestionState::Cancelled;
                self.closed_at = Some(now);
                Ok(())
            }
            QuestionState::Cancelled => Ok(()),
            other => Err(Self::refusal(other)),
        }
    }

    /// Moves a pending question past its expiry to `expired`; true when it did.
    pub fn expire_if_due(&mut self, now: Timestamp) -> bool {
        if self.state == QuestionState::Pending && now >= self.expires_at {
            self.state = QuestionState::Expired;
            self.closed_at = Some(self.expires_at);
            true
        } else {
            false
        }
    }
}

/// What the relay reports about a question, untrusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayReport<'a> {
    /// The state it claims.
    pub state: QuestionState,
    /// The device it says answered.
    pub answered_by: Option<&'a str>,
    /// When it says the answer arrived.
    pub answered_at: Option<Timestamp>,
    /// The sealed answer it returned.
    pub answer_envelope: Option<&'a str>,
}

/// The agent's conclusion about a question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// The state the agent accepts: `answered` only with an answer that opened and was in time.
    pub state: QuestionState,
    /// True only for an authenticated, timely, explicit yes or valid chosen options.
    pub approved: bool,
    /// The answer, when one opened.
    pub answer: Option<Answer>,
    /// The device that answered, when its answer opened.
    pub answered_by: Option<String>,
    /// When the person answered (device clock), when the answer opened.
    pub answered_at: Option<Timestamp>,
    /// Why an answer the relay reported was not accepted.
    pub rejected: Option<&'static str>,
}

/// Decides what a question's report means, on the agent side.
///
/// `question` is the agent's own copy (opened from its self-sealed envelope), `device_key` derives the key
/// of the device the relay names. `now` is the agent's clock. A report the agent cannot verify is treated as
/// no answer: `expired` once the expiry has passed, else `pending`; it is never approved.
pub fn verdict(
    agent_id: &str,
    question_id: &str,
    question: &QuestionPayload,
    report: &RelayReport<'_>,
    device_key: impl Fn(&str) -> ContentKey,
    now: Timestamp,
) -> Verdict {
    let unanswered = |rejected: Option<&'static str>| {
        let state = match report.state {
            QuestionState::Cancelled => QuestionState::Cancelled,
            _ if now >= question.expires_at => QuestionState::Expired,
            QuestionState::Expired => QuestionState::Expired,
            _ => QuestionState::Pending,
        };
        Verdict {
            state,
            approved: false,
            answer: None,
            answered_by: None,
            answered_at: None,
            rejected,
        }
    };
    if report.state != QuestionState::Answered {
        return unanswered(None);
    }
    let (Some(device), Some(sealed)) = (report.answered_by, report.answer_envelope) else {
        return unanswered(Some("the relay reported an answer without its sealed content"));
    };
    if !question.recipients.iter().any(|r| r == device) {
        return unanswered(Some(
            "the answer comes from a device the question was not sent to",
        ));
    }
    let key = device_key(device);
    let Ok(payload) =
        envelope::open_json::<AnswerPayload>(&key, &answer_aad(agent_id, device, question_id), sealed)
    else {
        return unanswered(Some("the answer did not open with the answering device's key"));
    };
    if payload.question_id != question_id {
        return unanswered(Some("the answer names another question"));
    }
    let in_time = payload.answered_at < question.expires_at
        && report.answered_at.is_none_or(|t| t < question.expires_at);
    if !in_time {
        return unanswered(Some("the answer came after the expiry"));
    }
    let valid = match (&payload.answer, question.kind) {
        (Answer::Yes | Answer::No, QuestionKind::YesNo) => true,
        (Answer::Options(chosen), QuestionKind::Choice) => {
            let distinct: std::collections::HashSet<&String> = chosen.iter().collect();
            !chosen.is_empty()
                && distinct.len() == chosen.len()
                && (question.multiple || chosen.len() == 1)
                && chosen.iter().all(|c| question.options.contains(c))
        }
        (Answer::Text(_), QuestionKind::Text) => true,
        _ => false,
    };
    if !valid {
        return unanswered(Some("the answer does not fit the question"));
    }
    let approved = matches!(payload.answer, Answer::Yes | Answer::Options(_));
    Verdict {
        state: QuestionState::Answered,
        approved,
        answer: Some(payload.answer),
        answered_by: Some(device.to_string()),
        answered_at: Some(payload.answered_at),
        rejected: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const AGENT: &str = "ag_q";

    fn key(device: &str) -> ContentKey {
        crate::keys::device_key(&[7; 32], AGENT, device)
    }

    fn yes_no(expires: i64) -> QuestionPayload {
        QuestionPayload {
            question: "deploy?".into(),
            kind: QuestionKind::YesNo,
            options: vec![],
            multiple: false,
            details: None,
            expires_at: Timestamp(expires),
            recipients: vec!["dv_0".into(), "dv_1".into(), "dv_2".into()],
        }
    }

    fn seal_answer(device: &str, qid: &str, answer: Answer, at: i64) -> String {
        let payload = AnswerPayload {
            question_id: qid.into(),
            answer,
            answered_at: Timestamp(at),
        };
        envelope::seal_json(&key(device), &answer_aad(AGENT, device, qid), &payload)
    }

    fn report<'a>(state: QuestionState, by: &'a str, at: i64, env: &'a str) -> RelayReport<'a> {
        RelayReport {
            state,
            answered_by: Some(by),
            answered_at: Some(Timestamp(at)),
            answer_envelope: Some(env),
        }
    }

    #[test]
    fn transitions() {
        let mut q = QuestionRecord::new(Timestamp(100));
        assert_eq!(q.answer("dv_1", Timestamp(10)), Ok(()));
        assert_eq!(q.answer("dv_2", Timestamp(11)), Err(Refusal::AlreadyAnswered));
        assert_eq!(q.cancel(Timestamp(12)), Err(Refusal::AlreadyAnswered));
        assert_eq!(q.answered_by.as_deref(), Some("dv_1"));

        let mut q = QuestionRecord::new(Timestamp(100));
        assert_eq!(q.cancel(Timestamp(10)), Ok(()));
        assert_eq!(q.cancel(Timestamp(11)), Ok(()));
        assert_eq!(q.answer("dv_1", Timestamp(12)), Err(Refusal::Cancelled));
        assert_eq!(q.state, QuestionState::Cancelled);

        let mut q = QuestionRecord::new(Timestamp(100));
        assert_eq!(q.state_at(Timestamp(99)), QuestionState::Pending);
        assert_eq!(q.state_at(Timestamp(100)), QuestionState::Expired);
        assert_eq!(q.answer("dv_1", Timestamp(100)), Err(Refusal::Expired));
        assert_eq!(q.cancel(Timestamp(101)), Err(Refusal::Expired));
        assert_eq!(q.state, QuestionState::Expired);
        assert!(!q.expire_if_due(Timestamp(200)));
    }

    #[test]
    fn an_authenticated_yes_in_time_is_approved() {
        let env = seal_answer("dv_1", "q1", Answer::Yes, 50);
        let v = verdict(
            AGENT,
            "q1",
            &yes_no(100),
            &report(QuestionState::Answered, "dv_1", 51, &env),
            key,
            Timestamp(60),
        );
        assert!(v.approved);
        assert_eq!(v.state, QuestionState::Answered);
        assert_eq!(v.answered_by.as_deref(), Some("dv_1"));
    }

    #[test]
    fn no_is_answered_but_not_approved() {
        let env = seal_answer("dv_1", "q1", Answer::No, 50);
        let v = verdict(
            AGENT,
            "q1",
            &yes_no(100),
            &report(QuestionState::Answered, "dv_1", 51, &env),
            key,
            Timestamp(60),
        );
        assert!(!v.approved);
        assert_eq!(v.state, QuestionState::Answered);
        assert_eq!(v.answer, Some(Answer::No));
    }

    #[test]
    fn forged_moved_or_late_answers_are_never_approved() {
        let q = yes_no(100);
        let yes = seal_answer("dv_1", "q1", Answer::Yes, 50);
        // Claimed by another device.
        let v = verdict(
            AGENT,
            "q1",
            &q,
            &report(QuestionState::Answered, "dv_2", 51, &yes),
            key,
            Timestamp(60),
        );
        assert!(!v.approved && v.rejected.is_some());
        // Copied from another question.
        let other = seal_answer("dv_1", "q2", Answer::Yes, 50);
        let v = verdict(
            AGENT,
            "q1",
            &q,
            &report(QuestionState::Answered, "dv_1", 51, &other),
            key,
            Timestamp(60),
        );
        assert!(!v.approved);
        // Given after the expiry by the device's clock, or accepted late by the relay.
        let late = seal_answer("dv_1", "q1", Answer::Yes, 150);
        let v = verdict(
            AGENT,
            "q1",
            &q,
            &report(QuestionState::Answered, "dv_1", 51, &late),
            key,
            Timestamp(160),
        );
        assert!(!v.approved);
        assert_eq!(v.state, QuestionState::Expired);
        let v = verdict(
            AGENT,
            "q1",
            &q,
            &report(QuestionState::Answered, "dv_1", 150, &yes),
            key,
            Timestamp(160),
        );
        assert!(!v.approved);
        // A yes to a choice question, or an option not offered.
        let choice = QuestionPayload {
            kind: QuestionKind::Choice,
            options: vec!["a".into(), "b".into()],
            ..yes_no(100)
        };
        let v = verdict(
            AGENT,
            "q1",
            &choice,
            &report(QuestionState::Answered, "dv_1", 51, &yes),
            key,
            Timestamp(60),
        );
        assert!(!v.approved);
        let c = seal_answer("dv_1", "q1", Answer::Options(vec!["c".into()]), 50);
        let v = verdict(
            AGENT,
            "q1",
            &choice,
            &report(QuestionState::Answered, "dv_1", 51, &c),
            key,
            Timestamp(60),
        );
        assert!(!v.approved);
        let ab = seal_answer("dv_1", "q1", Answer::Options(vec!["a".into(), "b".into()]), 50);
        let v = verdict(
            AGENT,
            "q1",
            &choice,
            &report(QuestionState::Answered, "dv_1", 51, &ab),
            key,
            Timestamp(60),
        );
        assert!(!v.approved, "several options when only one is allowed");
        // The relay says answered but gives nothing.
        let bare = RelayReport {
            state: QuestionState::Answered,
            answered_by: Some("dv_1"),
            answered_at: None,
            answer_envelope: None,
        };
        assert!(!verdict(AGENT, "q1", &q, &bare, key, Timestamp(60)).approved);
    }

    #[test]
    fn expired_and_cancelled_stay_distinct_and_never_approved() {
        let q = yes_no(100);
        let none = RelayReport {
            state: QuestionState::Pending,
            answered_by: None,
            answered_at: None,
            answer_envelope: None,
        };
        assert_eq!(
            verdict(AGENT, "q1", &q, &none, key, Timestamp(50)).state,
            QuestionState::Pending
        );
        // The relay says pending past the expiry: the agent's clock says expired.
        assert_eq!(
            verdict(AGENT, "q1", &q, &none, key, Timestamp(100)).state,
            QuestionState::Expired
        );
        let cancelled = RelayReport {
            state: QuestionState::Cancelled,
            ..none.clone()
        };
        let v = verdict(AGENT, "q1", &q, &cancelled, key, Timestamp(50));
        assert_eq!(v.state, QuestionState::Cancelled);
        assert!(!v.approved);
    }

    #[derive(Debug, Clone)]
    enum Event {
        Answer {
            device: u8,
            yes: bool,
            at: i64,
            forged: u8,
        },
        Cancel {
            at: i64,
        },
        Tick {
            at: i64,
        },
    }

    fn event() -> impl Strategy<Value = Event> {
        prop_oneof![
            (0u8..3, any::<bool>(), 0i64..200, 0u8..4).prop_map(|(device, yes, at, forged)| Event::Answer {
                device,
                yes,
                at,
                forged
            }),
            (0i64..200).prop_map(|at| Event::Cancel { at }),
            (0i64..200).prop_map(|at| Event::Tick { at }),
        ]
    }

    proptest! {
        /// Whatever happens — duplicates, late answers, expiry, cancel, tampered or moved ciphertext — the
        /// verdict is approved only if the first accepted answer is an authentic, timely yes from the device
        /// the relay names.
        #[test]
        fn approved_only_for_the_first_authentic_timely_yes(events in proptest::collection::vec(event(), 1..12)) {
            let q = yes_no(100);
            let mut record = QuestionRecord::new(q.expires_at);
            let mut stored: Option<(String, String, bool, bool)> = None; // device, envelope, yes, authentic
            let mut clock = 0i64;
            for e in &events {
                match *e {
                    Event::Answer { device, yes, at, forged } => {
                        clock = clock.max(at);
                        let dv = format!("dv_{device}");
                        let answer = if yes { Answer::Yes } else { Answer::No };
                        let (env, authentic) = match forged {
                            0 => (seal_answer(&dv, "q1", answer, clock), true),
                            1 => (seal_answer(&dv, "q_other", answer, clock), false),
                            2 => (seal_answer("dv_9", "q1", answer, clock), false),
                            _ => {
                                let env = seal_answer(&dv, "q1", answer, clock);
                                let mut bytes = crate::b64::decode(&env).expect("b64");
                                let last = bytes.len() - 1;
                                bytes[last] ^= 1;
                                (crate::b64::encode(&bytes), false)
                            }
                        };
                        if record.answer(&dv, Timestamp(clock)).is_ok() {
                            stored = Some((dv, env, yes, authentic));
                        }
                    }
                    Event::Cancel { at } => { clock = clock.max(at); let _ = record.cancel(Timestamp(clock)); }
                    Event::Tick { at } => { clock = clock.max(at); record.expire_if_due(Timestamp(clock)); }
                }
            }
            let state = record.state_at(Timestamp(clock));
            let rep = match &stored {
                Some((dv, env, _, _)) => RelayReport { state, answered_by: Some(dv), answered_at: record.closed_at, answer_envelope: Some(env) },
                None => RelayReport { state, answered_by: None, answered_at: None, answer_envelope: None },
            };
            let v = verdict(AGENT, "q1", &q, &rep, key, Timestamp(clock));
            let expected = matches!(&stored, Some((_, _, true, true))) && state == QuestionState::Answered;
            prop_assert_eq!(v.approved, expected);
            if v.approved {
                prop_assert!(v.answered_at.expect("time") < q.expires_at);
            }
        }
    }
}
