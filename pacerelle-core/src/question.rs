//! Questions (DESIGN §6): the agent asks, a device answers, and **no answer is a no**.
//!
//! The relay keeps a question's state in clear (`pending` → `answered` | `expired` | `cancelled`; terminal
//! states final; the first valid answer wins), enforced by [`QuestionRecord`]. But whether the agent may act
//! is decided only by [`verdict`], on the agent side: `approved` holds only for an explicit yes (or chosen
//! options) in an answer that opened with the answering device's key, bound to this question, given before
//! the expiry the agent itself sealed into the question. Nothing the relay says in clear can make it hold.

use serde::{Deserialize, Serialize};

#[cfg(feature = "content")]
use crate::envelope;
use crate::envelope::{Aad, Direction};
use crate::keys;
#[cfg(feature = "content")]
use crate::keys::ContentKey;
#[cfg(feature = "content")]
use crate::roster::DeviceSigning;
use crate::time::Timestamp;

/// Object kind of a question in the additional data.
pub const KIND_QUESTION: &str = "question";
/// Object kind of an answer in the additional data.
pub const KIND_ANSWER: &str = "answer";
/// Object kind of an answer's copy for the other recipients, sealed with the question's answer key.
pub const KIND_ANSWER_COPY: &str = "answer_copy";
/// Default lifetime of a question: 10 minutes.
pub const DEFAULT_EXPIRES_SECONDS: u64 = 600;
/// Longest lifetime of a question: 7 days.
pub const MAX_EXPIRES_SECONDS: u64 = 7 * 24 * 3600;
/// Most options of a choice question.
pub const MAX_OPTIONS: usize = 20;

/// What kind of answer a question expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
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
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
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

/// The way an answer reached the agent (docs/mcp.md, "Asking at the computer too").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[serde(rename_all = "snake_case")]
pub enum Channel {
    /// On a paired device: sealed by that device, signed with its key when it has one.
    Phone,
    /// At the computer, through the agent's host (an MCP elicitation): sealed by the agent itself, with its
    /// own key. The host is the party a gate watches, so such an answer counts only for a question whose
    /// sealed [`QuestionPayload::channels`] accepts it.
    Host,
}

impl Channel {
    /// The channel's wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Channel::Phone => "phone",
            Channel::Host => "host",
        }
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
    /// A fresh 32-byte key (base64url) shared by the recipients, with which the answering device also seals
    /// a copy of its answer so that every recipient can show which answer counts. Never a reason to approve.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_key: Option<String>,
    /// The channels whose answers count besides the phone: empty (the default) for the phone only,
    /// `[host]` when the agent also asks at the computer. Sealed, so neither the relay nor a host can widen
    /// it after the question is asked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub channels: Vec<Channel>,
    /// Partner mode: the `externalId` of the user the question is addressed to; absent when it is asked of
    /// the owner. Only that user's devices receive it and only their answers count
    /// ([`crate::roster::Roster::may_answer_for`]); sealed, so the relay cannot re-address it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// A gate question's grant offer (§4.8b): the durations and scopes a `yes` may extend to, under the
    /// policy that offers them. Sealed, so neither the relay nor a device can widen it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grants: Option<crate::grant::GrantOffer>,
    /// How many distinct owner devices must approve with a signed `yes` (§4.7b): absent = 1, the first
    /// answer decides. Only for `yes_no`, at most [`crate::wire::MAX_APPROVALS`].
    #[serde(
        default = "crate::wire::one_approval",
        skip_serializing_if = "crate::wire::is_one_approval"
    )]
    pub approvals: u32,
}

impl QuestionPayload {
    /// True when an answer given at the computer counts for this question.
    pub fn accepts_host(&self) -> bool {
        self.channels.contains(&Channel::Host)
    }

    /// True when `other` asks the same thing: same text, kind, options, `multiple`, details and accepted
    /// channels, and the same user. The expiry, recipients and answer key are drawn at each ask and not
    /// compared.
    pub fn same_question(&self, other: &QuestionPayload) -> bool {
        self.question == other.question
            && self.kind == other.kind
            && self.options == other.options
            && self.multiple == other.multiple
            && self.details == other.details
            && self.accepts_host() == other.accepts_host()
            && self.user == other.user
            && self.grants == other.grants
            && self.approvals == other.approvals
    }

    /// The answer key, when the question carries a valid one.
    #[cfg(feature = "content")]
    pub fn answer_key(&self) -> Option<ContentKey> {
        let key = self.answer_key.as_deref()?;
        crate::b64::decode_array::<32>(key).map(ContentKey)
    }

    /// Checks the shape: non-empty text, options only for choice ([`check_options`]), grants and approvals
    /// only for a yes/no question.
    pub fn validate(&self) -> Result<(), String> {
        if self.question.trim().is_empty() {
            return Err("a question needs some text".into());
        }
        if let Some(offer) = &self.grants {
            if self.kind != QuestionKind::YesNo {
                return Err("only a yes/no question offers grants".into());
            }
            offer.validate()?;
        }
        if self.approvals != 1 {
            if self.kind != QuestionKind::YesNo {
                return Err("only a yes/no question needs several approvals".into());
            }
            if !(2..=crate::wire::MAX_APPROVALS).contains(&self.approvals) {
                return Err("a question needs 1 to 10 approvals".into());
            }
            if self.grants.is_some() {
                return Err("a question that needs several approvals offers no grants".into());
            }
        }
        check_options(self.kind, &self.options, self.multiple)
    }
}

/// The one check of a question's options for its kind, wherever a question enters (the client's request,
/// the sealed payload, the adapters' arguments): a choice has 2 to 20 options, none blank, all distinct; a
/// yes/no or text question has none and is not `multiple`.
pub fn check_options(kind: QuestionKind, options: &[String], multiple: bool) -> Result<(), String> {
    match kind {
        QuestionKind::Choice => {
            let n = options.len();
            if !(2..=MAX_OPTIONS).contains(&n) {
                return Err(format!(
                    "a choice question needs 2 to {MAX_OPTIONS} options (got {n})"
                ));
            }
            if options.iter().any(|o| o.trim().is_empty()) {
                return Err("options must not be blank".into());
            }
            let mut seen = std::collections::HashSet::new();
            if let Some(twice) = options.iter().find(|o| !seen.insert(o.as_str())) {
                return Err(format!("options must be distinct ({twice:?} is given twice)"));
            }
        }
        QuestionKind::YesNo | QuestionKind::Text => {
            let kind = kind.as_str();
            if !options.is_empty() {
                return Err(format!("options are only for kind \"choice\", not \"{kind}\""));
            }
            if multiple {
                return Err(format!("multiple is only for kind \"choice\", not \"{kind}\""));
            }
        }
    }
    Ok(())
}

/// The one range of a question's expiry, in seconds from now: 1 s to 7 days ([`MAX_EXPIRES_SECONDS`]).
pub fn check_expiry(seconds: i64) -> Result<(), String> {
    if (1..=MAX_EXPIRES_SECONDS as i64).contains(&seconds) {
        Ok(())
    } else {
        Err(format!(
            "a question expires between 1 second and 7 days ({MAX_EXPIRES_SECONDS} s) from now (got {seconds} s)"
        ))
    }
}

/// An answer's content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[serde(tag = "type", content = "value", rename_all = "snake_case")]
pub enum Answer {
    /// An explicit yes.
    Yes,
    /// An explicit no.
    No,
    /// The chosen options.
    Options(#[cfg_attr(feature = "uniffi", uniffi(name = "options"))] Vec<String>),
    /// A written answer.
    Text(#[cfg_attr(feature = "uniffi", uniffi(name = "text"))] String),
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
    /// [`question_digest`] of the question as this device opened it: the answer counts only for exactly
    /// that question (text, kind, options, details, expiry, recipients), never for another one asked later
    /// under the same id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question_digest: Option<String>,
    /// base64url of the device's Ed25519 signature of [`crate::signing::SignedAnswer::bytes`]: absent only
    /// from a device that has no signing key (paired before keys existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// A grant attached to a `yes` to a question that offers grants (§4.8b): the same answer, extended to the
    /// calls of its scope until it ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<crate::grant::Grant>,
}

/// `base64url(SHA-256(plaintext))` of a question's sealed payload, as opened. The agent seals the same bytes
/// for itself and for every recipient, so each computes the same digest.
pub fn question_digest(plaintext: &[u8]) -> String {
    crate::b64::encode(&keys::sha256(plaintext))
}

/// A question as the agent sealed it for itself: the payload and the digest of its exact bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnQuestion {
    /// The question's id.
    pub question_id: String,
    /// What it asks.
    pub payload: QuestionPayload,
    /// [`question_digest`] of the sealed bytes.
    pub digest: String,
    /// The sealed bytes, as opened (what an answer-log export carries for a verifier).
    pub plaintext: Vec<u8>,
}

impl OwnQuestion {
    /// Opens the agent's own copy of a question.
    #[cfg(feature = "content")]
    pub fn open(
        self_key: &ContentKey,
        agent_id: &str,
        question_id: &str,
        sealed: &str,
    ) -> crate::Result<Self> {
        let plain = envelope::open(self_key, &question_aad(agent_id, "", question_id), sealed)?;
        let payload = envelope::read_payload(&plain).ok_or(crate::Error::Payload { kind: KIND_QUESTION })?;
        Ok(OwnQuestion {
            question_id: question_id.to_string(),
            payload,
            digest: question_digest(&plain),
            plaintext: plain,
        })
    }
}

/// How much a notification matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
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

/// The context of the copy of an answer that `device_id` seals with the question's answer key.
pub fn answer_copy_aad<'a>(agent_id: &'a str, device_id: &'a str, question_id: &'a str) -> Aad<'a> {
    Aad {
        agent_id,
        device_id,
        direction: Direction::DeviceToAgent,
        kind: KIND_ANSWER_COPY,
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

/// The context of an answer given at the computer, which the agent seals for itself (`deviceId` = "").
pub fn host_answer_aad<'a>(agent_id: &'a str, question_id: &'a str) -> Aad<'a> {
    Aad {
        agent_id,
        device_id: "",
        direction: Direction::AgentToSelf,
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

    /// Records the first answer as given at the computer (channel `host`: no device). The same rules as
    /// [`QuestionRecord::answer`]: later, late and cancelled are refused.
    pub fn answer_at_host(&mut self, now: Timestamp) -> Result<(), Refusal> {
        self.expire_if_due(now);
        if self.state != QuestionState::Pending {
            return Err(Self::refusal(self.state));
        }
        self.state = QuestionState::Answered;
        self.answered_by = None;
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
    /// The channel it says the answer came through (none: the phone, as from a relay that predates
    /// channels).
    pub channel: Option<Channel>,
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
    /// The answer's signature, present only when it verified with the device's pinned signing key.
    pub signature: Option<String>,
    /// Why an answer the relay reported was not accepted.
    pub rejected: Option<&'static str>,
    /// The channel of the answer that opened.
    pub channel: Option<Channel>,
    /// The grant the approving `yes` carried, when it checked against the agent's own copy and the device's
    /// pinned key ([`crate::grant::Grant::check`]).
    pub grant: Option<crate::grant::Grant>,
    /// Why a grant the answer carried was not accepted (the answer itself still counts).
    pub grant_refused: Option<crate::grant::GrantRefusal>,
    /// For a question that needs several approvals: the signed yeses that counted, one per device, in the
    /// order they came ([`quorum_verdict`]); empty otherwise.
    pub approvals: Vec<Approval>,
}

/// One device's signed yes that counted toward a question's approvals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approval {
    /// The device.
    pub device_id: String,
    /// When the person answered (the device's clock, as signed).
    pub answered_at: Timestamp,
    /// Its signature, verified with the device's pinned key.
    pub signature: String,
}

impl Verdict {
    /// No answer the agent accepts: `cancelled` if the relay says so; otherwise `expired` once `now` reaches
    /// the expiry of the agent's own copy, or if the relay says `expired`; otherwise `pending`. Never approved.
    #[cfg(feature = "content")]
    fn unanswered(
        reported: QuestionState,
        expires_at: Timestamp,
        now: Timestamp,
        rejected: Option<&'static str>,
    ) -> Verdict {
        Verdict {
            state: match reported {
                QuestionState::Cancelled => QuestionState::Cancelled,
                _ if now >= expires_at => QuestionState::Expired,
                QuestionState::Expired => QuestionState::Expired,
                _ => QuestionState::Pending,
            },
            approved: false,
            answer: None,
            answered_by: None,
            answered_at: None,
            rejected,
            signature: None,
            channel: None,
            grant: None,
            grant_refused: None,
            approvals: Vec::new(),
        }
    }
}

/// The reason [`verdict_signed`] gives for an unsigned answer from a device with a pinned signing key.
pub const UNSIGNED_BUT_KEYED: &str = "the answer is not signed, but the device has a signing key";

/// Decides what a question's report means, on the agent side, for an agent that pins no signing key:
/// [`verdict_signed`] with no key for any device (an unsigned answer from a trusted device still counts; a
/// signed one is refused, since the agent cannot check it).
#[cfg(feature = "content")]
pub fn verdict(
    agent_id: &str,
    own: &OwnQuestion,
    report: &RelayReport<'_>,
    device_key: impl Fn(&str) -> ContentKey,
    may_approve: impl Fn(&str) -> bool,
    now: Timestamp,
) -> Verdict {
    verdict_signed(agent_id, own, report, device_key, may_approve, |_| None, now)
}

/// [`verdict_with`] where `signing_key` gives the Ed25519 key the roster pins for a device: when there is
/// one, the answer must carry that key's signature; when there is none, a signed answer is refused (a key the
/// agent never received) and an unsigned one counts, unsigned.
#[cfg(feature = "content")]
pub fn verdict_signed(
    agent_id: &str,
    own: &OwnQuestion,
    report: &RelayReport<'_>,
    device_key: impl Fn(&str) -> ContentKey,
    may_approve: impl Fn(&str) -> bool,
    signing_key: impl Fn(&str) -> Option<crate::signing::PublicKey>,
    now: Timestamp,
) -> Verdict {
    let signing = |device: &str| signing_key(device).map_or(DeviceSigning::Unsigned, DeviceSigning::Pinned);
    verdict_with(agent_id, own, report, device_key, may_approve, signing, now)
}

/// Decides what a question's report means, on the agent side (docs/crypto.md §4.7).
///
/// `own` is the agent's own copy of the question (opened from its self-sealed envelope) and its digest: an
/// answer counts only if it names exactly these bytes. `device_key` derives the key of the device the relay
/// names, and `may_approve` says whether the agent's roster lets that device approve (listed, owner, not
/// revoked: [`crate::roster::Roster::may_approve`]). `signing` says what the roster requires of a device's
/// signatures ([`crate::roster::Roster::signing`]): a pinned key's signature of
/// [`crate::signing::SignedAnswer::bytes`]; with no key pinned, a signed answer is refused (a key the agent
/// never received), and an unsigned one counts, unsigned, only for [`DeviceSigning::Unsigned`]. `now` is the
/// agent's clock. A report the agent cannot verify is treated as no answer: `expired` once the expiry has
/// passed, else `pending`; it is never approved.
#[cfg(feature = "content")]
pub fn verdict_with(
    agent_id: &str,
    own: &OwnQuestion,
    report: &RelayReport<'_>,
    device_key: impl Fn(&str) -> ContentKey,
    may_approve: impl Fn(&str) -> bool,
    signing: impl Fn(&str) -> DeviceSigning,
    now: Timestamp,
) -> Verdict {
    let question = &own.payload;
    let question_id = own.question_id.as_str();
    let unanswered = |rejected| Verdict::unanswered(report.state, question.expires_at, now, rejected);
    if report.state != QuestionState::Answered {
        return unanswered(None);
    }
    if report.channel == Some(Channel::Host) {
        return unanswered(Some(
            "the relay reported an answer given at the computer, which only host_verdict judges",
        ));
    }
    let (Some(device), Some(sealed)) = (report.answered_by, report.answer_envelope) else {
        return unanswered(Some("the relay reported an answer without its sealed content"));
    };
    if !question.recipients.iter().any(|r| r == device) {
        return unanswered(Some(
            "the answer comes from a device the question was not sent to",
        ));
    }
    if !may_approve(device) {
        return unanswered(Some(
            "the answer comes from a device the agent's roster does not trust (unknown, revoked or not an owner)",
        ));
    }
    let key = device_key(device);
    let payload = match envelope::open_json::<AnswerPayload>(
        &key,
        &answer_aad(agent_id, device, question_id),
        sealed,
    ) {
        Ok(payload) => payload,
        Err(crate::Error::Payload { .. }) => {
            return unanswered(Some(
                "the answer opened with the answering device's key but is malformed",
            ));
        }
        Err(_) => return unanswered(Some("the answer did not open with the answering device's key")),
    };
    if payload.question_id != question_id {
        return unanswered(Some("the answer names another question"));
    }
    if payload.question_digest.as_deref() != Some(own.digest.as_str()) {
        return unanswered(Some(
            "the answer was given to a different question asked under the same id",
        ));
    }
    match (signing(device), payload.signature.as_deref()) {
        (DeviceSigning::Pinned(public), Some(signature)) => {
            let signed = crate::signing::SignedAnswer {
                agent_id,
                device_id: device,
                question_id,
                question_digest: &own.digest,
                answered_at: payload.answered_at,
                answer: &payload.answer,
            };
            if !signed.verifies(&public, signature) {
                return unanswered(Some(
                    "the answer's signature does not verify with the device's signing key",
                ));
            }
        }
        (DeviceSigning::Pinned(_), None) => {
            return unanswered(Some(UNSIGNED_BUT_KEYED));
        }
        (DeviceSigning::Unsigned | DeviceSigning::MustSign(_), Some(_)) => {
            return unanswered(Some(
                "the answer is signed with a key the agent never received from the device",
            ));
        }
        (DeviceSigning::MustSign(reason), None) => return unanswered(Some(reason)),
        (DeviceSigning::Unsigned, None) => {}
    }
    let in_time = payload.answered_at < question.expires_at
        && report.answered_at.is_none_or(|t| t < question.expires_at);
    if !in_time {
        return unanswered(Some("the answer came after the expiry"));
    }
    if !crate::signing::answer_fits(question, &payload.answer) {
        return unanswered(Some("the answer does not fit the question"));
    }
    let approved = matches!(payload.answer, Answer::Yes | Answer::Options(_));
    let (grant, grant_refused) = match payload.grant {
        None => (None, None),
        Some(_) if payload.answer != Answer::Yes => (None, Some(crate::grant::GrantRefusal::NotOffered)),
        Some(grant) => {
            let of = crate::grant::SignedGrantOf {
                agent_id,
                device_id: device,
                question_id,
                question_digest: &own.digest,
                granted_at: payload.answered_at,
            };
            let key = match signing(device) {
                DeviceSigning::Pinned(public) => Some(public),
                _ => None,
            };
            match grant.check(question.grants.as_ref(), of, key.as_ref()) {
                Ok(()) => (Some(grant), None),
                Err(refusal) => (None, Some(refusal)),
            }
        }
    };
    Verdict {
        state: QuestionState::Answered,
        approved,
        answer: Some(payload.answer),
        answered_by: Some(device.to_string()),
        answered_at: Some(payload.answered_at),
        rejected: None,
        signature: payload.signature,
        channel: Some(Channel::Phone),
        grant,
        grant_refused,
        approvals: Vec::new(),
    }
}

/// One device's answer to a question that needs several approvals, as the relay reports it.
#[derive(Debug, Clone, Copy)]
pub struct ReportedAnswer<'a> {
    /// The device the relay says answered.
    pub device_id: &'a str,
    /// When the relay says the answer arrived.
    pub answered_at: Timestamp,
    /// The answer, sealed by the device for the agent.
    pub envelope: &'a str,
}

/// Decides what a question that needs several approvals ([`QuestionPayload::approvals`], as sealed) means, on
/// the agent side (docs/crypto.md §4.7b): each answer the relay reports is judged alone as
/// [`verdict_with`] judges one, and only the first of each device counts. One counted `no` denies at once. The
/// question is approved when at least `approvals` distinct devices gave a counted, **signed** `yes`; each is
/// listed in [`Verdict::approvals`]. Fewer is no approval: the question reads `pending` while the relay says so,
/// then as [`verdict_with`] reads an unanswered one (expired, cancelled), with the count in `rejected`. An
/// answer given at the computer never counts toward approvals.
#[cfg(feature = "content")]
#[allow(clippy::too_many_arguments)] // the report, the keys and the roster's rules, as verdict_with takes them
pub fn quorum_verdict(
    agent_id: &str,
    own: &OwnQuestion,
    reported: QuestionState,
    answers: &[ReportedAnswer<'_>],
    device_key: impl Fn(&str) -> ContentKey,
    may_approve: impl Fn(&str) -> bool,
    signing: impl Fn(&str) -> DeviceSigning,
    now: Timestamp,
) -> Verdict {
    let needed = own.payload.approvals.max(1) as usize;
    let mut seen: Vec<&str> = Vec::new();
    let mut yeses: Vec<Verdict> = Vec::new();
    for answer in answers {
        if seen.contains(&answer.device_id) {
            continue;
        }
        seen.push(answer.device_id);
        let report = RelayReport {
            state: QuestionState::Answered,
            answered_by: Some(answer.device_id),
            answered_at: Some(answer.answered_at),
            answer_envelope: Some(answer.envelope),
            channel: Some(Channel::Phone),
        };
        let one = verdict_with(agent_id, own, &report, &device_key, &may_approve, &signing, now);
        if one.state != QuestionState::Answered {
            continue;
        }
        if one.answer == Some(Answer::No) {
            return Verdict {
                grant: None,
                grant_refused: None,
                ..one
            };
        }
        if one.approved && one.signature.is_some() {
            yeses.push(one);
        }
    }
    if yeses.len() >= needed {
        let approvals = yeses
            .iter()
            .map(|v| Approval {
                device_id: v.answered_by.clone().unwrap_or_default(),
                answered_at: v.answered_at.unwrap_or(Timestamp(0)),
                signature: v.signature.clone().unwrap_or_default(),
            })
            .collect();
        let last = yeses
            .pop()
            .unwrap_or_else(|| Verdict::unanswered(reported, own.payload.expires_at, now, None));
        return Verdict {
            grant: None,
            grant_refused: None,
            approvals,
            ..last
        };
    }
    // As verdict_with reads an answer it does not accept: no answer, with the reason when the relay closed it.
    let shortfall = (reported == QuestionState::Answered).then_some(
        "the question closed with fewer signed approvals from distinct owner devices than it needs",
    );
    Verdict::unanswered(reported, own.payload.expires_at, now, shortfall)
}

/// Why [`host_verdict`] refuses an answer given at the computer to a question that did not accept one.
pub const HOST_NOT_ACCEPTED: &str =
    "the answer was given at the computer, and this question accepts answers from the phone only";

/// Decides what a report of an answer given at the computer means, on the agent side.
///
/// Such an answer is sealed by the agent itself with `self_key` ([`host_answer_aad`]): the relay can neither
/// read nor forge it. It counts only for a question whose sealed payload accepts the host channel
/// ([`QuestionPayload::accepts_host`]), for exactly that question (its digest), and before the expiry;
/// otherwise it is treated as no answer and never approved. It carries no device signature: it is not in the
/// log a verifier can check without the agent's keys.
#[cfg(feature = "content")]
pub fn host_verdict(
    agent_id: &str,
    own: &OwnQuestion,
    report: &RelayReport<'_>,
    self_key: &ContentKey,
    now: Timestamp,
) -> Verdict {
    let question = &own.payload;
    let question_id = own.question_id.as_str();
    let unanswered = |rejected| Verdict::unanswered(report.state, question.expires_at, now, rejected);
    if report.state != QuestionState::Answered || report.channel != Some(Channel::Host) {
        return unanswered(None);
    }
    let Some(sealed) = report.answer_envelope else {
        return unanswered(Some("the relay reported an answer without its sealed content"));
    };
    if report.answered_by.is_some() {
        return unanswered(Some("the relay reported an answer at the computer from a device"));
    }
    let payload =
        match envelope::open_json::<AnswerPayload>(self_key, &host_answer_aad(agent_id, question_id), sealed)
        {
            Ok(payload) => payload,
            Err(_) => {
                return unanswered(Some(
                    "the answer at the computer did not open with the agent's key",
                ));
            }
        };
    if payload.question_id != question_id || payload.question_digest.as_deref() != Some(own.digest.as_str()) {
        return unanswered(Some(
            "the answer was given to a different question asked under the same id",
        ));
    }
    if !question.accepts_host() {
        return unanswered(Some(HOST_NOT_ACCEPTED));
    }
    let in_time = payload.answered_at < question.expires_at
        && report.answered_at.is_none_or(|t| t < question.expires_at);
    if !in_time {
        return unanswered(Some("the answer came after the expiry"));
    }
    if !crate::signing::answer_fits(question, &payload.answer) {
        return unanswered(Some("the answer does not fit the question"));
    }
    Verdict {
        state: QuestionState::Answered,
        approved: matches!(payload.answer, Answer::Yes | Answer::Options(_)),
        answer: Some(payload.answer),
        answered_by: None,
        answered_at: Some(payload.answered_at),
        rejected: None,
        signature: None,
        channel: Some(Channel::Host),
        // A grant is a device's, signed: never one recorded at the computer.
        grant: None,
        grant_refused: None,
        approvals: Vec::new(),
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
            grants: None,
            question: "deploy?".into(),
            kind: QuestionKind::YesNo,
            options: vec![],
            multiple: false,
            details: None,
            expires_at: Timestamp(expires),
            recipients: vec!["dv_0".into(), "dv_1".into(), "dv_2".into()],
            answer_key: None,
            channels: Vec::new(),
            user: None,
            approvals: 1,
        }
    }

    fn own(q: &QuestionPayload) -> OwnQuestion {
        let plaintext = serde_json::to_vec(q).expect("json");
        OwnQuestion {
            question_id: "q1".into(),
            payload: q.clone(),
            digest: question_digest(&plaintext),
            plaintext,
        }
    }

    /// An answer to `yes_no(100)`, the question most tests ask.
    fn seal_answer(device: &str, qid: &str, answer: Answer, at: i64) -> String {
        seal_answer_to(&yes_no(100), device, qid, answer, at)
    }

    fn seal_answer_to(q: &QuestionPayload, device: &str, qid: &str, answer: Answer, at: i64) -> String {
        let payload = AnswerPayload {
            grant: None,
            question_id: qid.into(),
            answer,
            answered_at: Timestamp(at),
            question_digest: Some(own(q).digest),
            signature: None,
        };
        envelope::seal_json(&key(device), &answer_aad(AGENT, device, qid), &payload)
    }

    /// The verdict on `q1` with a roster that trusts every recipient.
    fn judge(q: &QuestionPayload, report: &RelayReport<'_>, now: i64) -> Verdict {
        verdict(AGENT, &own(q), report, key, |_| true, Timestamp(now))
    }

    fn report<'a>(state: QuestionState, by: &'a str, at: i64, env: &'a str) -> RelayReport<'a> {
        RelayReport {
            state,
            answered_by: Some(by),
            answered_at: Some(Timestamp(at)),
            answer_envelope: Some(env),
            channel: None,
        }
    }

    fn self_key() -> ContentKey {
        crate::keys::self_key(&[7; 32], AGENT)
    }

    fn seal_host_answer(q: &QuestionPayload, qid: &str, answer: Answer, at: i64) -> String {
        let payload = AnswerPayload {
            grant: None,
            question_id: qid.into(),
            answer,
            answered_at: Timestamp(at),
            question_digest: Some(own(q).digest),
            signature: None,
        };
        envelope::seal_json(&self_key(), &host_answer_aad(AGENT, qid), &payload)
    }

    fn host_report(env: &str, at: i64) -> RelayReport<'_> {
        RelayReport {
            state: QuestionState::Answered,
            answered_by: None,
            answered_at: Some(Timestamp(at)),
            answer_envelope: Some(env),
            channel: Some(Channel::Host),
        }
    }

    fn also_here(expires: i64) -> QuestionPayload {
        QuestionPayload {
            channels: vec![Channel::Host],
            ..yes_no(expires)
        }
    }

    #[test]
    fn a_yes_at_the_computer_approves_only_a_question_that_accepts_it() {
        let q = also_here(100);
        let env = seal_host_answer(&q, "q1", Answer::Yes, 50);
        let v = host_verdict(
            AGENT,
            &own(&q),
            &host_report(&env, 51),
            &self_key(),
            Timestamp(60),
        );
        assert!(v.approved);
        assert_eq!(v.channel, Some(Channel::Host));
        assert_eq!(v.answered_by, None);
        assert_eq!(v.signature, None);

        // The same answer to a question asked for the phone only is no answer at all.
        let phone_only = yes_no(100);
        let env = seal_host_answer(&phone_only, "q1", Answer::Yes, 50);
        let v = host_verdict(
            AGENT,
            &own(&phone_only),
            &host_report(&env, 51),
            &self_key(),
            Timestamp(60),
        );
        assert!(!v.approved);
        assert_eq!(v.rejected, Some(HOST_NOT_ACCEPTED));
        assert_eq!(v.state, QuestionState::Pending);
    }

    #[test]
    fn the_phone_verdict_never_accepts_a_host_report() {
        let q = also_here(100);
        let env = seal_host_answer(&q, "q1", Answer::Yes, 50);
        let v = judge(&q, &host_report(&env, 51), 60);
        assert!(!v.approved);
        assert!(v.rejected.is_some());
    }

    #[test]
    fn a_host_answer_that_is_late_forged_or_for_another_question_is_no_answer() {
        let q = also_here(100);
        let judge_host = |env: &str, at: i64, now: i64| {
            host_verdict(
                AGENT,
                &own(&q),
                &host_report(env, at),
                &self_key(),
                Timestamp(now),
            )
        };
        // Late by the sealed time, then by the relay's time.
        let late = seal_host_answer(&q, "q1", Answer::Yes, 100);
        assert!(!judge_host(&late, 99, 120).approved);
        let in_time = seal_host_answer(&q, "q1", Answer::Yes, 50);
        assert!(!judge_host(&in_time, 100, 120).approved);
        // Sealed by a device (the relay relabelling a phone answer as host) or with another key.
        let by_device = seal_answer_to(&q, "dv_1", "q1", Answer::Yes, 50);
        assert!(!judge_host(&by_device, 51, 60).approved);
        // For another question under the same id.
        let other = QuestionPayload {
            question: "delete?".into(),
            ..also_here(100)
        };
        let env = seal_host_answer(&other, "q1", Answer::Yes, 50);
        assert!(!judge_host(&env, 51, 60).approved);
        // A host answer the relay attributes to a device.
        let env = seal_host_answer(&q, "q1", Answer::Yes, 50);
        let mut report = host_report(&env, 51);
        report.answered_by = Some("dv_1");
        assert!(!host_verdict(AGENT, &own(&q), &report, &self_key(), Timestamp(60)).approved);
        // A no at the computer is a final answer, not an approval.
        let no = seal_host_answer(&q, "q1", Answer::No, 50);
        let v = judge_host(&no, 51, 60);
        assert_eq!((v.state, v.approved), (QuestionState::Answered, false));
    }

    #[test]
    fn a_question_that_accepts_the_host_is_another_question() {
        assert!(!yes_no(100).same_question(&also_here(100)));
        assert!(also_here(100).same_question(&also_here(200)));
        // Phone-only questions seal the same bytes as before channels existed.
        let json = serde_json::to_string(&yes_no(100)).expect("json");
        assert!(!json.contains("channels"));
    }

    #[test]
    fn a_host_answer_is_recorded_like_a_first_answer() {
        let mut q = QuestionRecord::new(Timestamp(100));
        assert_eq!(q.answer_at_host(Timestamp(10)), Ok(()));
        assert_eq!(q.answered_by, None);
        assert_eq!(q.answer("dv_1", Timestamp(11)), Err(Refusal::AlreadyAnswered));
        let mut q = QuestionRecord::new(Timestamp(100));
        assert_eq!(q.answer("dv_1", Timestamp(10)), Ok(()));
        assert_eq!(q.answer_at_host(Timestamp(11)), Err(Refusal::AlreadyAnswered));
        let mut q = QuestionRecord::new(Timestamp(100));
        assert_eq!(q.answer_at_host(Timestamp(100)), Err(Refusal::Expired));
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
        let v = judge(
            &yes_no(100),
            &report(QuestionState::Answered, "dv_1", 51, &env),
            60,
        );
        assert!(v.approved);
        assert_eq!(v.state, QuestionState::Answered);
        assert_eq!(v.answered_by.as_deref(), Some("dv_1"));
    }

    #[test]
    fn no_is_answered_but_not_approved() {
        let env = seal_answer("dv_1", "q1", Answer::No, 50);
        let v = judge(
            &yes_no(100),
            &report(QuestionState::Answered, "dv_1", 51, &env),
            60,
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
        let v = judge(&q, &report(QuestionState::Answered, "dv_2", 51, &yes), 60);
        assert!(!v.approved && v.rejected.is_some());
        // Copied from another question.
        let other = seal_answer("dv_1", "q2", Answer::Yes, 50);
        let v = judge(&q, &report(QuestionState::Answered, "dv_1", 51, &other), 60);
        assert!(!v.approved);
        // Given after the expiry by the device's clock, or accepted late by the relay.
        let late = seal_answer("dv_1", "q1", Answer::Yes, 150);
        let v = judge(&q, &report(QuestionState::Answered, "dv_1", 51, &late), 160);
        assert!(!v.approved);
        assert_eq!(v.state, QuestionState::Expired);
        let v = judge(&q, &report(QuestionState::Answered, "dv_1", 150, &yes), 160);
        assert!(!v.approved);
        // A yes to a choice question, or an option not offered.
        let choice = QuestionPayload {
            kind: QuestionKind::Choice,
            options: vec!["a".into(), "b".into()],
            ..yes_no(100)
        };
        let v = judge(&choice, &report(QuestionState::Answered, "dv_1", 51, &yes), 60);
        assert!(!v.approved);
        let c = seal_answer_to(&choice, "dv_1", "q1", Answer::Options(vec!["c".into()]), 50);
        let v = judge(&choice, &report(QuestionState::Answered, "dv_1", 51, &c), 60);
        assert!(!v.approved);
        let ab = seal_answer_to(
            &choice,
            "dv_1",
            "q1",
            Answer::Options(vec!["a".into(), "b".into()]),
            50,
        );
        let v = judge(&choice, &report(QuestionState::Answered, "dv_1", 51, &ab), 60);
        assert!(!v.approved, "several options when only one is allowed");
        // The relay says answered but gives nothing.
        let bare = RelayReport {
            state: QuestionState::Answered,
            answered_by: Some("dv_1"),
            answered_at: None,
            answer_envelope: None,
            channel: None,
        };
        assert!(!judge(&q, &bare, 60).approved);
    }

    #[test]
    fn a_yes_counts_only_for_the_question_it_answered() {
        // "Run the tests?" approved under q1; "Drop the database?" asked later under the same id.
        let tests = QuestionPayload {
            question: "Run the tests?".into(),
            ..yes_no(100)
        };
        let drop = QuestionPayload {
            question: "Drop the database?".into(),
            ..yes_no(100)
        };
        let yes = seal_answer_to(&tests, "dv_1", "q1", Answer::Yes, 50);
        let rep = report(QuestionState::Answered, "dv_1", 51, &yes);
        assert!(judge(&tests, &rep, 60).approved);
        let v = judge(&drop, &rep, 60);
        assert!(!v.approved);
        assert_eq!(
            v.rejected,
            Some("the answer was given to a different question asked under the same id")
        );
        // The same text with another expiry is another question too: the digest covers every byte.
        assert!(
            !judge(
                &yes_no(101),
                &report(
                    QuestionState::Answered,
                    "dv_1",
                    51,
                    &seal_answer("dv_1", "q1", Answer::Yes, 50)
                ),
                60
            )
            .approved
        );
        // An answer without a digest (an older device) never approves.
        let bare = AnswerPayload {
            grant: None,
            question_id: "q1".into(),
            answer: Answer::Yes,
            answered_at: Timestamp(50),
            question_digest: None,
            signature: None,
        };
        let env = envelope::seal_json(&key("dv_1"), &answer_aad(AGENT, "dv_1", "q1"), &bare);
        assert!(
            !judge(
                &yes_no(100),
                &report(QuestionState::Answered, "dv_1", 51, &env),
                60
            )
            .approved
        );
    }

    #[test]
    fn an_unsigned_yes_counts_only_where_the_roster_lets_the_device_answer_unsigned() {
        let q = yes_no(100);
        let env = seal_answer("dv_1", "q1", Answer::Yes, 50);
        let with = |signing: DeviceSigning| {
            verdict_with(
                AGENT,
                &own(&q),
                &report(QuestionState::Answered, "dv_1", 51, &env),
                key,
                |_| true,
                |_| signing,
                Timestamp(60),
            )
        };
        let unsigned = with(DeviceSigning::Unsigned);
        assert!(unsigned.approved && unsigned.signature.is_none());
        for reason in [
            crate::roster::SIGNING_KEY_REFUSED,
            crate::roster::SIGNATURE_REQUIRED,
        ] {
            let v = with(DeviceSigning::MustSign(reason));
            assert!(!v.approved, "{reason}");
            assert_eq!(v.rejected, Some(reason));
            assert_eq!(v.state, QuestionState::Pending);
        }
        let key = crate::signing::SigningKey::from_seed([5; 32]).expect("key");
        let v = with(DeviceSigning::Pinned(key.public_key()));
        assert_eq!(v.rejected, Some(UNSIGNED_BUT_KEYED));
    }

    /// A signed answer of `device` (signing key seeded by `seed`) to `q`, sealed for the agent.
    fn seal_signed(q: &QuestionPayload, device: &str, seed: u8, answer: Answer, at: i64) -> String {
        let key_pair = crate::signing::SigningKey::from_seed([seed; 32]).expect("key");
        let digest = own(q).digest;
        let signature = crate::signing::SignedAnswer {
            agent_id: AGENT,
            device_id: device,
            question_id: "q1",
            question_digest: &digest,
            answered_at: Timestamp(at),
            answer: &answer,
        }
        .sign(&key_pair);
        let payload = AnswerPayload {
            grant: None,
            question_id: "q1".into(),
            answer,
            answered_at: Timestamp(at),
            question_digest: Some(digest),
            signature: Some(signature),
        };
        envelope::seal_json(&key(device), &answer_aad(AGENT, device, "q1"), &payload)
    }

    #[test]
    fn two_approvals_need_two_distinct_signed_yeses_and_one_no_denies() {
        let q = QuestionPayload {
            approvals: 2,
            ..yes_no(100)
        };
        let seed = |d: &str| match d {
            "dv_0" => 10u8,
            "dv_1" => 11,
            _ => 12,
        };
        let pinned = |d: &str| {
            let key_pair = crate::signing::SigningKey::from_seed([seed(d); 32]).expect("key");
            DeviceSigning::Pinned(key_pair.public_key())
        };
        let judge = |state: QuestionState, answers: &[(&str, &str)], may: &dyn Fn(&str) -> bool| {
            let reported: Vec<ReportedAnswer<'_>> = answers
                .iter()
                .enumerate()
                .map(|(n, (device, envelope))| ReportedAnswer {
                    device_id: device,
                    answered_at: Timestamp(40 + n as i64),
                    envelope,
                })
                .collect();
            quorum_verdict(AGENT, &own(&q), state, &reported, key, may, pinned, Timestamp(60))
        };
        let all = |_: &str| true;
        let yes0 = seal_signed(&q, "dv_0", 10, Answer::Yes, 30);
        let yes1 = seal_signed(&q, "dv_1", 11, Answer::Yes, 31);
        let no2 = seal_signed(&q, "dv_2", 12, Answer::No, 32);

        // One yes: still open, not approved.
        let one = judge(QuestionState::Pending, &[("dv_0", &yes0)], &all);
        assert_eq!((one.state, one.approved), (QuestionState::Pending, false));
        // Two distinct signed yeses: approved, both listed.
        let two = judge(QuestionState::Answered, &[("dv_0", &yes0), ("dv_1", &yes1)], &all);
        assert!(two.approved, "{two:?}");
        let by: Vec<&str> = two.approvals.iter().map(|a| a.device_id.as_str()).collect();
        assert_eq!(by, ["dv_0", "dv_1"]);
        assert!(two.approvals.iter().all(|a| !a.signature.is_empty()));
        // The same device twice counts once (a relay replaying its answer).
        let twice = judge(QuestionState::Answered, &[("dv_0", &yes0), ("dv_0", &yes0)], &all);
        assert!(!twice.approved);
        assert!(
            twice
                .rejected
                .is_some_and(|r| r.contains("fewer signed approvals"))
        );
        // A yes moved under another device's name does not open, and does not count.
        let moved = judge(QuestionState::Answered, &[("dv_0", &yes0), ("dv_1", &yes0)], &all);
        assert!(!moved.approved);
        // A device the roster does not trust does not count.
        let untrusted = judge(
            QuestionState::Answered,
            &[("dv_0", &yes0), ("dv_1", &yes1)],
            &|d| d != "dv_1",
        );
        assert!(!untrusted.approved);
        // A yes and a no: denied, whatever the order, and a no closes it at once.
        for answers in [
            [("dv_0", yes0.as_str()), ("dv_2", no2.as_str())],
            [("dv_2", no2.as_str()), ("dv_0", yes0.as_str())],
        ] {
            let v = judge(QuestionState::Answered, &answers, &all);
            assert_eq!(
                (v.state, v.approved, v.answer.as_ref()),
                (QuestionState::Answered, false, Some(&Answer::No))
            );
            assert_eq!(v.answered_by.as_deref(), Some("dv_2"));
        }
        // Unsigned yeses never count toward approvals.
        let unsigned0 = seal_answer_to(&q, "dv_0", "q1", Answer::Yes, 30);
        let unsigned1 = seal_answer_to(&q, "dv_1", "q1", Answer::Yes, 31);
        let reported = [
            ReportedAnswer {
                device_id: "dv_0",
                answered_at: Timestamp(40),
                envelope: &unsigned0,
            },
            ReportedAnswer {
                device_id: "dv_1",
                answered_at: Timestamp(41),
                envelope: &unsigned1,
            },
        ];
        let v = quorum_verdict(
            AGENT,
            &own(&q),
            QuestionState::Answered,
            &reported,
            key,
            all,
            |_| DeviceSigning::Unsigned,
            Timestamp(60),
        );
        assert!(!v.approved);
    }

    #[test]
    fn only_a_device_the_roster_trusts_approves() {
        let q = yes_no(100);
        let yes = seal_answer("dv_1", "q1", Answer::Yes, 50);
        let rep = report(QuestionState::Answered, "dv_1", 51, &yes);
        let v = verdict(AGENT, &own(&q), &rep, key, |d| d != "dv_1", Timestamp(60));
        assert!(!v.approved);
        assert!(v.rejected.is_some_and(|r| r.contains("roster")));
        assert!(verdict(AGENT, &own(&q), &rep, key, |d| d == "dv_1", Timestamp(60)).approved);
    }

    #[test]
    fn an_answer_that_opens_but_does_not_parse_is_called_malformed() {
        let env = envelope::seal(
            &key("dv_1"),
            &answer_aad(AGENT, "dv_1", "q1"),
            b"{\"not\": \"an answer\"}",
        );
        let v = judge(
            &yes_no(100),
            &report(QuestionState::Answered, "dv_1", 51, &env),
            60,
        );
        assert!(!v.approved);
        assert_eq!(
            v.rejected,
            Some("the answer opened with the answering device's key but is malformed")
        );
        let other = envelope::seal(&key("dv_2"), &answer_aad(AGENT, "dv_1", "q1"), b"{}");
        let v = judge(
            &yes_no(100),
            &report(QuestionState::Answered, "dv_1", 51, &other),
            60,
        );
        assert_eq!(
            v.rejected,
            Some("the answer did not open with the answering device's key")
        );
        // A yes whose bytes two JSON readers would read differently (a member given twice, known or not), or
        // an array in place of the object, is malformed too (docs/crypto.md §5, "How JSON is read").
        let digest = own(&yes_no(100)).digest;
        let good = format!(
            r#"{{"questionId":"q1","answer":{{"type":"yes"}},"answeredAt":"1970-01-01T00:00:00.050Z","questionDigest":"{digest}"}}"#
        );
        let sealed =
            |bytes: &str| envelope::seal(&key("dv_1"), &answer_aad(AGENT, "dv_1", "q1"), bytes.as_bytes());
        let env = sealed(&good);
        assert!(
            judge(
                &yes_no(100),
                &report(QuestionState::Answered, "dv_1", 51, &env),
                60
            )
            .approved
        );
        for bad in [
            good.replacen("{\"questionId\"", "{\"questionId\":\"q2\",\"questionId\"", 1),
            good.replacen("{\"questionId\"", "{\"note\":1,\"note\":2,\"questionId\"", 1),
            good.replacen("{\"type\":\"yes\"}", "{\"type\":\"no\",\"type\":\"yes\"}", 1),
            format!(r#"["q1",{{"type":"yes"}},"1970-01-01T00:00:00.050Z","{digest}"]"#),
        ] {
            let env = sealed(&bad);
            let v = judge(
                &yes_no(100),
                &report(QuestionState::Answered, "dv_1", 51, &env),
                60,
            );
            assert!(!v.approved, "{bad}");
            assert_eq!(
                v.rejected,
                Some("the answer opened with the answering device's key but is malformed"),
                "{bad}"
            );
        }
    }

    #[test]
    fn same_question_compares_what_is_asked_not_when() {
        let a = yes_no(100);
        let later = QuestionPayload {
            recipients: vec!["dv_9".into()],
            answer_key: Some("k".into()),
            ..yes_no(900)
        };
        assert!(a.same_question(&later));
        for other in [
            QuestionPayload {
                question: "deploy now?".into(),
                ..yes_no(100)
            },
            QuestionPayload {
                details: Some("prod".into()),
                ..yes_no(100)
            },
            QuestionPayload {
                kind: QuestionKind::Text,
                ..yes_no(100)
            },
            QuestionPayload {
                multiple: true,
                ..yes_no(100)
            },
            QuestionPayload {
                options: vec!["a".into()],
                ..yes_no(100)
            },
        ] {
            assert!(!a.same_question(&other), "{other:?}");
        }
    }

    #[test]
    fn expired_and_cancelled_stay_distinct_and_never_approved() {
        let q = yes_no(100);
        let none = RelayReport {
            state: QuestionState::Pending,
            answered_by: None,
            answered_at: None,
            answer_envelope: None,
            channel: None,
        };
        assert_eq!(judge(&q, &none, 50).state, QuestionState::Pending);
        // The relay says pending past the expiry: the agent's clock says expired.
        assert_eq!(judge(&q, &none, 100).state, QuestionState::Expired);
        let cancelled = RelayReport {
            state: QuestionState::Cancelled,
            ..none.clone()
        };
        let v = judge(&q, &cancelled, 50);
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
            (0u8..3, any::<bool>(), 0i64..200, 0u8..5).prop_map(|(device, yes, at, forged)| Event::Answer {
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
                            3 => {
                                let other = QuestionPayload { question: "drop the database?".into(), ..q.clone() };
                                (seal_answer_to(&other, &dv, "q1", answer, clock), false)
                            }
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
                Some((dv, env, _, _)) => RelayReport { state, answered_by: Some(dv), answered_at: record.closed_at, answer_envelope: Some(env), channel: None,  },
                None => RelayReport { state, answered_by: None, answered_at: None, answer_envelope: None, channel: None,  },
            };
            let v = judge(&q, &rep, clock);
            let expected = matches!(&stored, Some((_, _, true, true))) && state == QuestionState::Answered;
            prop_assert_eq!(v.approved, expected);
            if v.approved {
                prop_assert!(v.answered_at.expect("time") < q.expires_at);
            }
        }
    }
}
