//! Questions on the device: read, opened, answered (signed), and refused locally when the answer cannot count.

use pacerelle_core::envelope;
use pacerelle_core::grant::SignedGrantOf;
use pacerelle_core::keys::ContentKey;
use pacerelle_core::question::{
    Answer, AnswerPayload, Channel, QuestionKind, QuestionPayload, QuestionState, answer_aad,
    answer_copy_aad, question_aad, question_digest,
};
use pacerelle_core::signing::SignedAnswer;
use pacerelle_core::wire::{self, AnswerQuestion, DeviceQuestion, DeviceQuestions, QuestionMeta};
use pacerelle_core::{CryptoError, Timestamp, b64, ids};
use reqwest::Method;
use serde::{Deserialize, Serialize};

use crate::agent::Rejected;
use crate::error::{Error, Result};
use crate::http::Req;

use super::grants::{GrantChoice, grant_for};
use super::{DeviceClient, open};

/// Questions remembered as last read, to refuse locally answers that cannot count.
const MAX_REMEMBERED_QUESTIONS: usize = 1024;

/// A question as a device sees it, opened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OpenedQuestion {
    /// Its id; answer with it.
    pub question_id: String,
    /// The question.
    pub question: String,
    /// What kind of answer it expects.
    pub kind: QuestionKind,
    /// The options of a choice question.
    pub options: Vec<String>,
    /// Whether several options may be chosen.
    pub multiple: bool,
    /// More context.
    pub details: Option<String>,
    /// Where it stands, as of this read (a pending question past its expiry reads as expired).
    pub state: QuestionState,
    /// When it expires (as the agent sealed it).
    pub expires_at: Timestamp,
    /// The device that answered.
    pub answered_by: Option<String>,
    /// When the relay accepted the answer.
    pub answered_at: Option<Timestamp>,
    /// The answering device's name, as the relay reports it.
    pub answered_by_name: Option<String>,
    /// The answer that counts, read from the copy the answering device sealed for every recipient: for
    /// display (the agent decides from the answer sealed for it alone). `None` while unanswered, or for an
    /// answer given without a copy.
    pub answer: Option<Answer>,
    /// How the answer came: `phone` (a device; `answered_by` names it) or `host` (the person answered at the
    /// computer, through the agent). `None` while unanswered.
    #[serde(default)]
    pub channel: Option<Channel>,
    /// When it was asked.
    pub created_at: Timestamp,
    /// [`pacerelle_core::question::question_digest`] of the question as opened: an answer names it.
    #[serde(skip)]
    pub digest: String,
    /// The question's answer key (base64url), with which an answer's copy for the other recipients is sealed.
    #[serde(skip)]
    pub answer_key: Option<String>,
    /// A gate question's grant offer (docs/crypto.md §4.8b): a `yes` may be extended to one of these scopes
    /// for one of these durations ([`DeviceClient::answer_granting`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grants: Option<pacerelle_core::grant::GrantOffer>,
    /// How many distinct owner devices must approve (as the agent sealed it; docs/crypto.md §4.7b).
    #[serde(default = "wire::one_approval", skip_serializing_if = "wire::is_one_approval")]
    pub approvals: u32,
    /// For a question that needs several approvals: the devices that answered so far, as the relay reports
    /// them (while it is pending, each approved: "1 of 2 approvals").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub answers: Vec<String>,
}

impl OpenedQuestion {
    /// True when an answer can still be given: pending and not past its expiry by this machine's clock.
    pub fn is_open(&self) -> bool {
        self.state == QuestionState::Pending && Timestamp::now() < self.expires_at
    }

    /// Checks that `answer` fits this question: yes/no for a yes/no question, offered options (one unless
    /// several are allowed, distinct) for a choice, text for a text question.
    pub fn check_answer(&self, answer: &Answer) -> Result<()> {
        let fits = match (answer, self.kind) {
            (Answer::Yes | Answer::No, QuestionKind::YesNo) => true,
            (Answer::Options(chosen), QuestionKind::Choice) => {
                let distinct: std::collections::HashSet<&String> = chosen.iter().collect();
                if let Some(unknown) = chosen.iter().find(|c| !self.options.contains(c)) {
                    return Err(Error::InvalidInput(format!(
                        "{unknown:?} is not one of the options: {}",
                        self.options.join(", ")
                    )));
                }
                !chosen.is_empty() && distinct.len() == chosen.len() && (self.multiple || chosen.len() == 1)
            }
            (Answer::Text(text), QuestionKind::Text) => !text.trim().is_empty(),
            _ => false,
        };
        if fits {
            Ok(())
        } else {
            Err(Error::InvalidInput(format!(
                "this answer does not fit a {} question{}",
                self.kind.as_str().replace('_', "/"),
                match self.kind {
                    QuestionKind::YesNo => " (answer yes or no)",
                    QuestionKind::Choice if self.multiple => " (choose one or more distinct options)",
                    QuestionKind::Choice => " (choose exactly one option)",
                    QuestionKind::Text => " (answer with some text)",
                }
            )))
        }
    }
}

/// Why an answer did not count: the question was already answered (by another device, or by this one with
/// another answer), had expired or was cancelled. Carried in the `details` of the [`Error::Api`] that
/// [`DeviceClient::answer`] returns with the code `question_answered`, `question_cancelled` or
/// `question_expired`; read it with [`ClosedQuestion::from_error`].
///
/// It states the answer that counts, never the refused one. The error's message carries no answer (no error
/// message carries plaintext); `answer` does, for the person's own screen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClosedQuestion {
    /// The question.
    pub question_id: String,
    /// Where it stands: `answered`, `expired` or `cancelled`.
    pub state: QuestionState,
    /// The answer that counts, read from the copy its device sealed for every recipient (see
    /// [`OpenedQuestion::answer`]); `None` when not answered, or when that answer has no readable copy.
    #[serde(default)]
    pub answer: Option<Answer>,
    /// The device whose answer counts.
    #[serde(default)]
    pub answered_by: Option<String>,
    /// Its name, as the relay reports it.
    #[serde(default)]
    pub answered_by_name: Option<String>,
    /// When the relay accepted that answer.
    #[serde(default)]
    pub answered_at: Option<Timestamp>,
    /// True when the answer that counts is this device's own (given earlier).
    #[serde(default)]
    pub by_this_device: bool,
    /// Where the answer that counts was given: `phone`, or `host` (at the computer; no `answered_by`).
    #[serde(default)]
    pub channel: Option<Channel>,
    /// When it expires (or expired), as the agent sealed it; `None` when the question could not be read again.
    #[serde(default)]
    pub expires_at: Option<Timestamp>,
}

impl ClosedQuestion {
    /// The closed question an error of [`DeviceClient::answer`] describes, if it is one.
    pub fn from_error(e: &Error) -> Option<ClosedQuestion> {
        match e {
            Error::Api {
                details: Some(details),
                ..
            } if e.closed_state().is_some() => serde_json::from_value((**details).clone()).ok(),
            _ => None,
        }
    }

    fn of(q: &OpenedQuestion, state: QuestionState, device_id: &str) -> Self {
        let answered = state == QuestionState::Answered;
        ClosedQuestion {
            question_id: q.question_id.clone(),
            state,
            answer: q.answer.clone().filter(|_| answered),
            answered_by: q.answered_by.clone().filter(|_| answered),
            answered_by_name: q.answered_by_name.clone().filter(|_| answered),
            answered_at: q.answered_at.filter(|_| answered),
            by_this_device: answered && q.answered_by.as_deref() == Some(device_id),
            channel: q.channel.filter(|_| answered),
            expires_at: Some(q.expires_at),
        }
    }

    /// The refusal: the relay's status and code for the state, a message without any answer in it, and this
    /// as its details.
    fn into_error(self) -> Error {
        let (status, code) = match self.state {
            QuestionState::Expired => (410, wire::code::QUESTION_EXPIRED),
            QuestionState::Cancelled => (409, wire::code::QUESTION_CANCELLED),
            _ => (409, wire::code::QUESTION_ANSWERED),
        };
        let message = match self.state {
            QuestionState::Expired => match self.expires_at {
                Some(at) => format!("the question expired at {at}: this answer was not recorded"),
                None => "the question has expired: this answer was not recorded".to_string(),
            },
            QuestionState::Cancelled => {
                "the question was cancelled: this answer was not recorded".to_string()
            }
            _ => {
                let by = if self.by_this_device {
                    "this device".to_string()
                } else if self.channel == Some(Channel::Host) {
                    "the person at the computer".to_string()
                } else {
                    self.answered_by_name
                        .clone()
                        .or_else(|| self.answered_by.clone())
                        .unwrap_or_else(|| "another device".to_string())
                };
                let at = self.answered_at.map(|t| format!(" at {t}")).unwrap_or_default();
                format!("the question is already answered, by {by}{at}: this answer was not recorded")
            }
        };
        Error::Api {
            status,
            code: code.to_string(),
            message,
            details: serde_json::to_value(&self).ok().map(Box::new),
        }
    }
}

/// The questions addressed to this device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuestionList {
    /// Oldest first.
    pub questions: Vec<OpenedQuestion>,
    /// Questions whose envelopes did not open.
    pub rejected: Vec<Rejected>,
}

impl DeviceClient {
    /// The remembered question `question_id` with the state `meta` reports, kept; `None` when not remembered.
    pub(super) fn refresh_question(&self, question_id: &str, meta: &QuestionMeta) -> Option<OpenedQuestion> {
        let mut cache = self.inner.questions.lock().ok()?;
        let q = cache.get_mut(question_id)?;
        q.state = meta.state;
        q.answered_by = meta.answered_by.clone();
        q.answered_at = meta.answered_at;
        q.answered_by_name = meta.answered_by_name.clone();
        q.channel = meta.channel;
        let key = q
            .answer_key
            .as_deref()
            .and_then(b64::decode_array::<32>)
            .map(ContentKey::from_bytes);
        q.answer = Self::answer_copy(self.agent_id(), question_id, key, &q.digest, meta);
        Some(q.clone())
    }

    pub(super) fn open_question(
        &self,
        question_id: &str,
        sealed: &str,
        meta: &QuestionMeta,
        created_at: Timestamp,
    ) -> std::result::Result<OpenedQuestion, CryptoError> {
        let aad = question_aad(self.agent_id(), self.device_id(), question_id);
        let plain = envelope::open(&self.inner.key, &aad, sealed)?;
        let payload: QuestionPayload = envelope::read_payload(&plain).ok_or(CryptoError::Open)?;
        // The kind is in clear at the relay; the sealed one must agree, and this device must be a recipient.
        if payload.kind != meta.kind || !payload.recipients.iter().any(|r| r == self.device_id()) {
            return Err(CryptoError::Open);
        }
        // The agent enforces the expiry it sealed; a pending question past it cannot be answered.
        let state = if meta.state == QuestionState::Pending && Timestamp::now() >= payload.expires_at {
            QuestionState::Expired
        } else {
            meta.state
        };
        let digest = question_digest(&plain);
        let answer = Self::answer_copy(self.agent_id(), question_id, payload.answer_key(), &digest, meta);
        Ok(OpenedQuestion {
            question_id: question_id.to_string(),
            question: payload.question,
            kind: payload.kind,
            options: payload.options,
            multiple: payload.multiple,
            details: payload.details,
            state,
            expires_at: payload.expires_at,
            answered_by: meta.answered_by.clone(),
            answered_at: meta.answered_at,
            answered_by_name: meta.answered_by_name.clone(),
            answer,
            channel: meta.channel,
            created_at,
            digest,
            answer_key: payload.answer_key,
            grants: payload.grants,
            approvals: payload.approvals,
            answers: meta.answers.clone(),
        })
    }

    /// Opens the copy of the answer that counts, sealed by the answering device with the question's answer key.
    pub(super) fn answer_copy(
        agent_id: &str,
        question_id: &str,
        key: Option<ContentKey>,
        digest: &str,
        meta: &QuestionMeta,
    ) -> Option<Answer> {
        Self::answer_copy_payload(agent_id, question_id, key, digest, meta).map(|copy| copy.answer)
    }

    /// The whole copy of the answer that counts ([`DeviceClient::answer_copy`]): with the grant it carries.
    pub(super) fn answer_copy_payload(
        agent_id: &str,
        question_id: &str,
        key: Option<ContentKey>,
        digest: &str,
        meta: &QuestionMeta,
    ) -> Option<AnswerPayload> {
        // An answer given at the computer has its copy sealed by the agent itself (device "").
        let by = match (meta.channel, &meta.answered_by) {
            (Some(Channel::Host), None) => "",
            (Some(Channel::Host), Some(_)) => return None,
            (_, by) => by.as_deref()?,
        };
        let (Some(copy), Some(key)) = (&meta.answer_copy, key) else {
            return None;
        };
        let copy: AnswerPayload = open(&key, &answer_copy_aad(agent_id, by, question_id), copy).ok()?;
        // A copy counts for display only if it answers this very question, as the web app checks too.
        (copy.question_id == question_id && copy.question_digest.as_deref() == Some(digest)).then_some(copy)
    }

    pub(super) fn open_device_question(
        &self,
        q: &DeviceQuestion,
    ) -> std::result::Result<OpenedQuestion, CryptoError> {
        let opened = self.open_question(&q.question_id, &q.envelope, &q.meta, q.created_at)?;
        self.remember(&opened);
        Ok(opened)
    }

    pub(super) fn remember(&self, q: &OpenedQuestion) {
        if let Ok(mut cache) = self.inner.questions.lock() {
            // Bounded: a long-running device forgets old questions (the relay still refuses late answers).
            if cache.len() >= MAX_REMEMBERED_QUESTIONS && !cache.contains_key(&q.question_id) {
                cache.retain(|_, known| known.is_open());
                if cache.len() >= MAX_REMEMBERED_QUESTIONS {
                    cache.clear();
                }
            }
            cache.insert(q.question_id.clone(), q.clone());
        }
    }

    /// The questions addressed to this device (the most recent ones), oldest first: only those in `state`
    /// when given (`Some(QuestionState::Pending)`: the ones waiting for an answer), all of them otherwise.
    pub async fn questions(&self, state: Option<QuestionState>) -> Result<QuestionList> {
        let state = state.map_or("all", QuestionState::as_str);
        let query = [("state", state.to_string())];
        let list: DeviceQuestions = self
            .inner
            .http
            .send(Req {
                query: &query,
                ..self.req::<()>(Method::GET, "/v1/device/questions")
            })
            .await?;
        let mut out = QuestionList {
            questions: Vec::new(),
            rejected: Vec::new(),
        };
        for q in &list.questions {
            match self.open_device_question(q) {
                Ok(opened) => out.questions.push(opened),
                Err(reason) => out.rejected.push(Rejected {
                    message_id: q.question_id.clone(),
                    from: self.agent_id().to_string(),
                    reason,
                }),
            }
        }
        Ok(out)
    }

    /// Answers a question: the answer is sealed for the agent with this device's key, bound to the question,
    /// and stamped with this device's clock. The first valid answer wins; the same answer again from this
    /// device (a retry) returns the question as answered.
    ///
    /// An answer that does not count is never reported as given: when the question is expired, cancelled or
    /// already answered — by another device, or by this one with another answer — the error has the relay's
    /// code (`question_expired`, `question_cancelled`, `question_answered`) and a [`ClosedQuestion`] with the
    /// state and the answer that counts ([`ClosedQuestion::from_error`]). It is decided without a request when
    /// the question as last read by [`DeviceClient::questions`] or [`DeviceClient::conversation`] was already
    /// closed, and otherwise from the relay's refusal and the question read again. An answer that does not fit
    /// the question is [`Error::InvalidInput`].
    ///
    /// The answer is signed with this device's signing key ([`SignedAnswer`]: the agent, this device, the
    /// question's id and the digest of its bytes as opened here, the answer and this device's time), and the
    /// signature travels inside the sealed answer. A device paired before signing keys registers one first,
    /// once ([`DeviceClient::register_signing_key`]), then signs: store [`DeviceClient::credentials_to_store`]
    /// after such an answer, or the key is lost with the process. Against a relay that does not know signing
    /// keys (it answers the registration with 404 or 405) the answer goes unsigned, as before.
    pub async fn answer(&self, question_id: &str, answer: Answer) -> Result<OpenedQuestion> {
        self.answer_with(question_id, answer, None).await
    }

    pub(super) async fn answer_with(
        &self,
        question_id: &str,
        answer: Answer,
        choice: Option<GrantChoice>,
    ) -> Result<OpenedQuestion> {
        ids::validate("question id", question_id)?;
        if let Answer::Text(text) = &answer {
            crate::agent::check_text("an answer", text)?;
        }
        let cached = self
            .inner
            .questions
            .lock()
            .ok()
            .and_then(|cache| cache.get(question_id).cloned());
        // The answer names the exact question it answers (its digest): read it first if it was not.
        let known = match cached {
            Some(q) => q,
            None => self
                .questions(None)
                .await?
                .questions
                .into_iter()
                .find(|q| q.question_id == question_id)
                .ok_or_else(|| {
                    Error::local(
                        404,
                        wire::code::NOT_FOUND,
                        "no such question for this device".into(),
                    )
                })?,
        };
        known.check_answer(&answer)?;
        if let Some(closed) = self.closed_before(&known, &answer) {
            return Err(closed.into_error());
        }
        let signing = self.key_for_answer().await?;
        let mut payload = AnswerPayload {
            grant: None,
            question_id: question_id.to_string(),
            answer,
            answered_at: Timestamp::now(),
            question_digest: Some(known.digest.clone()),
            signature: None,
        };
        if let Some(choice) = choice {
            let key = signing.as_ref().ok_or_else(|| {
                Error::InvalidInput("this device has no signing key: it cannot grant (pair it again)".into())
            })?;
            let mut grant = grant_for(&known, choice, payload.answered_at)?;
            let of = SignedGrantOf {
                agent_id: self.agent_id(),
                device_id: self.device_id(),
                question_id,
                question_digest: &known.digest,
                granted_at: payload.answered_at,
            };
            grant.signature = grant.signed(of).sign(key);
            payload.grant = Some(grant);
        }
        // Signed over the question's digest as this device computed it from the bytes it opened and shows.
        payload.signature = signing.map(|key| {
            SignedAnswer {
                agent_id: self.agent_id(),
                device_id: self.device_id(),
                question_id,
                question_digest: &known.digest,
                answered_at: payload.answered_at,
                answer: &payload.answer,
            }
            .sign(&key)
        });
        let aad = answer_aad(self.agent_id(), self.device_id(), question_id);
        let copy = known
            .answer_key
            .as_deref()
            .and_then(b64::decode_array::<32>)
            .map(|key| {
                let aad = answer_copy_aad(self.agent_id(), self.device_id(), question_id);
                envelope::seal_json(&ContentKey::from_bytes(key), &aad, &payload)
            });
        let body = AnswerQuestion {
            envelope: envelope::seal_json(&self.inner.key, &aad, &payload),
            copy,
            // A no to a question that needs several approvals denies at once: it closes the question.
            closes: known.approvals > 1 && payload.answer == Answer::No,
        };
        let path = format!("/v1/device/questions/{question_id}/answer");
        let sent = self
            .inner
            .http
            .send::<_, DeviceQuestion>(Req {
                body: Some(&body),
                ..self.req(Method::POST, &path)
            })
            .await;
        let stored = match sent {
            Ok(stored) => stored,
            Err(e) => return Err(self.refused(question_id, e).await),
        };
        let opened = self.open_device_question(&stored).map_err(Error::Crypto)?;
        // A question that needs several approvals keeps this device's answer, open or closed by another's.
        let kept = opened.approvals > 1 && opened.answers.iter().any(|d| d == self.device_id());
        if kept && matches!(opened.state, QuestionState::Pending | QuestionState::Answered) {
            return Ok(opened);
        }
        // A retry from this device gets the answer stored first: when it is another one, this one did not count.
        let theirs = opened.answered_by.as_deref() != Some(self.device_id());
        let other_answer = opened
            .answer
            .as_ref()
            .is_some_and(|counted| *counted != payload.answer);
        if opened.state != QuestionState::Answered || theirs || other_answer {
            let state = if opened.state.is_terminal() {
                opened.state
            } else {
                QuestionState::Answered
            };
            return Err(ClosedQuestion::of(&opened, state, self.device_id()).into_error());
        }
        Ok(opened)
    }

    /// The refusal of an answer to a question already closed as last read: expired (by the relay, or past the
    /// expiry the agent sealed), cancelled, or answered — by another device, or by this one with another
    /// answer. `None` when the answer may still count: pending, or the same answer again from this device
    /// (the relay then returns it), or an earlier answer from this device that cannot be read (no copy).
    fn closed_before(&self, q: &OpenedQuestion, answer: &Answer) -> Option<ClosedQuestion> {
        let state = match q.state {
            QuestionState::Pending if Timestamp::now() >= q.expires_at => QuestionState::Expired,
            QuestionState::Pending => return None,
            QuestionState::Answered if q.answered_by.as_deref() == Some(self.device_id()) => {
                match &q.answer {
                    Some(counted) if counted != answer => QuestionState::Answered,
                    _ => return None,
                }
            }
            state => state,
        };
        Some(ClosedQuestion::of(q, state, self.device_id()))
    }

    /// The relay refused an answer: when because the question is closed, the refusal states the question as
    /// read again (its state, the answer that counts); any other error is returned as it is.
    async fn refused(&self, question_id: &str, e: Error) -> Error {
        let Some(state) = e.closed_state() else {
            return e;
        };
        let again = self
            .questions(None)
            .await
            .ok()
            .and_then(|list| list.questions.into_iter().find(|q| q.question_id == question_id));
        match again {
            Some(q) => {
                // The state read again, unless it is older than the refusal.
                let state = if q.state.is_terminal() { q.state } else { state };
                ClosedQuestion::of(&q, state, self.device_id()).into_error()
            }
            None => ClosedQuestion {
                question_id: question_id.to_string(),
                state,
                answer: None,
                answered_by: None,
                answered_by_name: None,
                answered_at: None,
                by_this_device: false,
                channel: None,
                expires_at: None,
            }
            .into_error(),
        }
    }
}
