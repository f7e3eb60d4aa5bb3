//! The agent side of the human in the loop (DESIGN §6): ask, wait for the answer, notify, cancel.
//!
//! Whether the agent may act is decided by [`pacerelle_core::question::verdict_signed`] alone, on this side,
//! with the agent's clock, its own sealed copy of the question and the signing keys its roster pins: nothing
//! the relay says in clear makes an [`AnswerOutcome`] approved. **No answer is a no**: an expired or
//! cancelled question is never approved, and neither is an answer that does not open, names another
//! question, comes from a device the question was not sent to, or lacks a valid signature from a device
//! whose signing key is pinned.

use std::time::Duration;

use pacerelle_core::envelope;
use pacerelle_core::question::{
    self, Answer, AnswerPayload, Channel, Level, NotificationPayload, OwnQuestion, QuestionKind,
    QuestionPayload, QuestionState, RelayReport, answer_copy_aad, host_answer_aad, notification_aad,
    question_aad,
};
use pacerelle_core::roster::{DeviceSigning, Roster};
use pacerelle_core::wire::{
    self, AnswerQuestion, CreateQuestion, DeviceEnvelope, QuestionView, SendNotification, Stored,
};
use pacerelle_core::{Timestamp, b64, ids, keys};
use reqwest::Method;
use serde::{Deserialize, Serialize};

use crate::agent::{AgentClient, check_text};
use crate::backoff::Backoff;
use crate::error::{Error, Result};
use crate::http::Req;

/// Most bytes of a question's text plus its details (the sealed copies must fit in one request).
pub const MAX_QUESTION_BYTES: usize = pacerelle_core::message::MAX_TEXT_BYTES;
/// The pauses while the relay cannot be reached during a wait: the client's one [`Backoff`], from 500 ms
/// doubling up to 5 s (with its jitter).
const WAIT_BACKOFF: Backoff = Backoff {
    first: Duration::from_millis(500),
    max: Duration::from_secs(5),
};

/// A question to ask the owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuestionRequest {
    /// The question.
    pub question: String,
    /// What kind of answer it expects.
    pub kind: QuestionKind,
    /// The options of a choice question (2 to 20, distinct).
    pub options: Vec<String>,
    /// Whether several options may be chosen.
    pub multiple: bool,
    /// More context, shown under the question.
    pub details: Option<String>,
    /// How long it may be answered (default 10 minutes, at most 7 days).
    pub expires_in: Duration,
    /// Your own id, to ask again safely after an uncertain failure or a restart (one is drawn when `None`).
    /// An id names one question for good: asking the same question under it again resumes it (and returns
    /// its answer if it has one); asking a different question under it fails with `question_id_conflict`.
    pub question_id: Option<String>,
    /// The channels whose answers count besides the phone: empty for the phone only (the default);
    /// `[Channel::Host]` when the agent also asks at the computer ([`AgentClient::answer_at_host`]). Sealed
    /// into the question, so it cannot be widened later.
    pub channels: Vec<Channel>,
    /// Partner mode: the `externalId` of the user to ask ([`AgentClient::connect_user`]); `None` asks the
    /// owner. Sealed into the question: only that user's devices receive it, and only their answers count.
    pub user: Option<String>,
    /// A gate question's grant offer ([`crate::gate::Gate::offer`]): a `yes` may extend to the offered
    /// scopes for one of the offered durations (docs/crypto.md §4.8b). Sealed into the question.
    pub grants: Option<pacerelle_core::grant::GrantOffer>,
    /// How many distinct owner devices must approve a yes/no question, each with a signed `yes` (1, the
    /// default: the first answer decides; at most 10; docs/crypto.md §4.7b). One `no` denies at once. Sealed
    /// into the question.
    pub approvals: u32,
}

impl QuestionRequest {
    /// Checks the request as `ask_user` will, with messages to show as they are (every adapter does): the
    /// text and details, the options of a choice (2 to 20, not blank, distinct) and only of a choice, the
    /// expiry (1 s to 7 days), the id, and the size.
    pub fn check(&self) -> Result<()> {
        check_text("a question", &self.question)?;
        if let Some(details) = self.details.as_deref().filter(|d| !d.trim().is_empty()) {
            check_text("a question's details", details)?;
        }
        let invalid = |text: String| Err(Error::InvalidInput(text));
        if let Some(user) = &self.user {
            super::check_user(user)?;
        }
        question::check_options(self.kind, &self.options, self.multiple).map_err(Error::InvalidInput)?;
        // In whole seconds, a part of one rounded up (7 days and 0.5 s is too long); under 1 s is too short.
        let seconds = match self.expires_in {
            short if short < Duration::from_secs(1) => 0,
            long => i64::try_from(long.as_millis().div_ceil(1000)).unwrap_or(i64::MAX),
        };
        question::check_expiry(seconds).map_err(Error::InvalidInput)?;
        if let Some(id) = &self.question_id {
            ids::validate("question id", id)?;
        }
        if self.approvals != 1 {
            let max = pacerelle_core::wire::MAX_APPROVALS;
            if !(2..=max).contains(&self.approvals) {
                return invalid(format!("approvals is 1 to {max} (got {})", self.approvals));
            }
            if self.kind != QuestionKind::YesNo {
                return invalid("several approvals are for a yes/no question".into());
            }
            if self.grants.is_some() {
                return invalid("a question that needs several approvals offers no grants".into());
            }
            if self.channels.contains(&Channel::Host) {
                return invalid("a question that needs several approvals is answered on devices only".into());
            }
        }
        let size = self.question.len() + self.details.as_deref().map_or(0, str::len);
        let options: usize = self.options.iter().map(String::len).sum();
        if size + options > MAX_QUESTION_BYTES {
            return invalid("a question with its details and options is at most 64 KiB of text".into());
        }
        Ok(())
    }

    /// The request's id, drawn now when it has none: the one place a question's id is drawn, so that a
    /// caller can name it (to retry) or withdraw the question before [`AgentClient::ask_user`] returns.
    pub fn ensure_id(&mut self) -> &str {
        self.question_id
            .get_or_insert_with(|| ids::generate(ids::QUESTION))
    }

    /// A yes/no question expiring in 10 minutes.
    pub fn yes_no(question: impl Into<String>) -> Self {
        QuestionRequest {
            question: question.into(),
            kind: QuestionKind::YesNo,
            options: Vec::new(),
            multiple: false,
            details: None,
            expires_in: Duration::from_secs(question::DEFAULT_EXPIRES_SECONDS),
            question_id: None,
            channels: Vec::new(),
            user: None,
            grants: None,
            approvals: 1,
        }
    }

    /// A choice among options (one, unless [`QuestionRequest::multiple`] is set).
    pub fn choice(question: impl Into<String>, options: impl IntoIterator<Item = impl Into<String>>) -> Self {
        QuestionRequest {
            kind: QuestionKind::Choice,
            options: options.into_iter().map(Into::into).collect(),
            ..QuestionRequest::yes_no(question)
        }
    }

    /// A question answered with free text.
    pub fn text(question: impl Into<String>) -> Self {
        QuestionRequest {
            kind: QuestionKind::Text,
            ..QuestionRequest::yes_no(question)
        }
    }

    /// Sets the details shown under the question.
    pub fn with_details(mut self, details: impl Into<String>) -> Self {
        self.details = Some(details.into());
        self
    }

    /// Sets how long the question may be answered.
    pub fn expires_in(mut self, expires_in: Duration) -> Self {
        self.expires_in = expires_in;
        self
    }

    /// Allows several options to be chosen.
    pub fn multiple(mut self, multiple: bool) -> Self {
        self.multiple = multiple;
        self
    }

    /// Sets the question's id.
    pub fn with_id(mut self, question_id: impl Into<String>) -> Self {
        self.question_id = Some(question_id.into());
        self
    }

    /// Addresses the question to a user of the agent (Partner mode) instead of the owner.
    pub fn for_user(mut self, external_id: impl Into<String>) -> Self {
        self.user = Some(external_id.into());
        self
    }

    /// Needs `n` distinct owner devices to approve (a yes/no question; 1 is the default).
    pub fn approvals(mut self, n: u32) -> Self {
        self.approvals = n;
        self
    }

    /// Offers grants with a yes/no question (the gate's).
    pub fn offering(mut self, grants: Option<pacerelle_core::grant::GrantOffer>) -> Self {
        self.grants = grants;
        self
    }

    /// Lets an answer given at the computer count too (`true`), or only the phone's (`false`, the default).
    pub fn answered_at_host(mut self, also: bool) -> Self {
        self.channels.retain(|c| *c != Channel::Host);
        if also {
            self.channels.push(Channel::Host);
        }
        self
    }
}

/// The end of a wait for an answer that lasts `timeout` from `started`, or (`None`) until the question
/// expires: past its expiry the outcome is final, so a day beyond the longest expiry stands for "never".
fn deadline_after(started: tokio::time::Instant, timeout: Option<Duration>) -> tokio::time::Instant {
    match timeout {
        Some(t) => started + t,
        None => started + Duration::from_secs(question::MAX_EXPIRES_SECONDS + 24 * 3600),
    }
}

/// A question the relay has stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Asked {
    /// Its id: wait for it, cancel it.
    pub question_id: String,
    /// When it expires (the expiry sealed in the agent's own copy).
    pub expires_at: Timestamp,
    /// The digest of the question as sealed (see [`pacerelle_core::question::question_digest`]): waiting
    /// with this `Asked` accepts only that exact question under its id. `None`: whatever question the id
    /// names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// True when the relay already stored this question under its id: asking it again resumed it, and
    /// `expires_at` is the expiry sealed when it was first asked, not the one this ask asked for.
    #[serde(default)]
    pub resumed: bool,
}

/// What the agent concludes about a question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AnswerOutcome {
    /// The question.
    pub question_id: String,
    /// `pending`, `answered` (an answer opened and was in time), `expired` or `cancelled`.
    pub state: QuestionState,
    /// True only for an authenticated, timely, explicit yes or valid chosen options.
    pub approved: bool,
    /// The answer, when one opened.
    pub answer: Option<Answer>,
    /// The device that answered, when its answer opened.
    pub answered_by: Option<String>,
    /// That device's name, as the relay reports it.
    pub answered_by_name: Option<String>,
    /// When the relay accepted the answer (the relay's clock, as the phone and the relay API show it), beside
    /// a device whose answer opened.
    pub answered_at: Option<Timestamp>,
    /// When the person answered, by the answering device's clock, as sealed in its answer.
    #[serde(default)]
    pub device_answered_at: Option<Timestamp>,
    /// When the question expires.
    pub expires_at: Timestamp,
    /// Why an answer the relay reported was not accepted: the question is not approved, whatever it says.
    pub rejected: Option<String>,
    /// True when the answer carried the device's signature and it verified with the signing key pinned in
    /// the roster (docs/crypto.md §4.8): the answer is in the log anyone can verify. False for no answer and
    /// for an accepted answer of a device paired before signing keys.
    #[serde(default)]
    pub signed: bool,
    /// How the answer that opened came: `phone` (a device; `answered_by` names it) or `host` (at the
    /// computer, through [`AgentClient::answer_at_host`]; never signed). None without an answer.
    #[serde(default)]
    pub channel: Option<Channel>,
    /// The grant the approving `yes` carried, checked (docs/crypto.md §4.8b), with the question it was given
    /// to: the gate keeps it and lets the calls of its scope run without asking until it ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<pacerelle_core::grant::GivenGrant>,
    /// Why a grant the answer carried was refused (the answer itself still counts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant_refused: Option<String>,
}

impl AnswerOutcome {
    /// True when waiting longer cannot change the outcome: a terminal state, or an answer that was rejected
    /// (the relay accepts only the first answer, so no valid one can follow).
    pub fn is_final(&self) -> bool {
        self.state.is_terminal() || self.rejected.is_some()
    }

    /// The answer as text: `yes`, `no`, the chosen options joined by `, `, or the written text.
    pub fn answer_text(&self) -> Option<String> {
        self.answer.as_ref().map(answer_text)
    }
}

/// True when the answer that opened is the one the relay reports (the same device, or both at the host):
/// only then are the relay's metadata in clear (device name, time of acceptance) shown beside it.
pub(crate) fn opened_as_reported(verdict: &question::Verdict, view: &QuestionView) -> bool {
    match (&verdict.answered_by, &view.answered_by) {
        (Some(a), Some(b)) => a == b,
        (None, None) => verdict.channel == Some(Channel::Host) && view.channel == Some(Channel::Host),
        _ => false,
    }
}

/// An answer as text: `yes`, `no`, the chosen options joined by `, `, or the written text.
pub fn answer_text(answer: &Answer) -> String {
    match answer {
        Answer::Yes => "yes".into(),
        Answer::No => "no".into(),
        Answer::Options(chosen) => chosen.join(", "),
        Answer::Text(text) => text.clone(),
    }
}

impl AgentClient {
    pub(crate) fn question_path(question_id: &str) -> String {
        format!("/v1/agent/questions/{question_id}")
    }

    /// Opens the agent's own copy of a question: its text, kind, options, expiry and recipients.
    pub(crate) fn open_own_question(&self, question_id: &str, self_envelope: &str) -> Result<OwnQuestion> {
        let key = self.inner.token.self_key(&self.inner.agent_id);
        Ok(OwnQuestion::open(
            &key,
            &self.inner.agent_id,
            question_id,
            self_envelope,
        )?)
    }

    /// Decides what a question's view means, with this machine's clock; `may_approve` is the roster's word
    /// on who may approve, and `roster` gives the signing keys it pins (an answer of a device with a pinned
    /// key must carry that key's signature; see [`question::verdict_signed`]).
    pub(crate) fn judge(
        &self,
        view: &QuestionView,
        own: &OwnQuestion,
        roster: &Roster,
        may_approve: impl Fn(&str) -> bool,
    ) -> question::Verdict {
        self.judge_with(view, own, may_approve, |device| roster.signing(device))
    }

    /// [`AgentClient::judge`] with what each device's signatures must be given by `signing`.
    pub(crate) fn judge_with(
        &self,
        view: &QuestionView,
        own: &OwnQuestion,
        may_approve: impl Fn(&str) -> bool,
        signing: impl Fn(&str) -> DeviceSigning,
    ) -> question::Verdict {
        let report = RelayReport {
            state: view.state,
            answered_by: view.answered_by.as_deref(),
            answered_at: view.answered_at,
            answer_envelope: view.answer_envelope.as_deref(),
            channel: view.channel,
        };
        if own.payload.approvals > 1 {
            let answers: Vec<question::ReportedAnswer<'_>> = view
                .answers
                .iter()
                .map(|a| question::ReportedAnswer {
                    device_id: &a.device_id,
                    answered_at: a.answered_at,
                    envelope: &a.envelope,
                })
                .collect();
            return question::quorum_verdict(
                &self.inner.agent_id,
                own,
                view.state,
                &answers,
                |device| self.inner.token.device_key(&self.inner.agent_id, device),
                may_approve,
                signing,
                Timestamp::now(),
            );
        }
        if view.channel == Some(Channel::Host) {
            let self_key = self.inner.token.self_key(&self.inner.agent_id);
            return question::host_verdict(&self.inner.agent_id, own, &report, &self_key, Timestamp::now());
        }
        question::verdict_with(
            &self.inner.agent_id,
            own,
            &report,
            |device| self.inner.token.device_key(&self.inner.agent_id, device),
            may_approve,
            signing,
            Timestamp::now(),
        )
    }

    /// The roster, with the signing key of `device` pinned when the relay lists one that checks out: read
    /// once more (with the relay's device list) only when the roster has no key for that device yet.
    pub(crate) async fn roster_for_judging(&self, roster: Roster, device: Option<&str>) -> Result<Roster> {
        let unpinned = device
            .and_then(|d| roster.device(d))
            .is_some_and(|d| d.signing_key.is_none());
        if !unpinned {
            return Ok(roster);
        }
        let listed = self.devices().await?;
        self.pin_signing_keys_from(&listed, roster).await
    }

    /// The outcome of a view. The roster is read only when the relay reports an answer: an answer counts only
    /// from a device the roster lets approve now (a device revoked since the question was asked does not).
    async fn outcome(&self, view: &QuestionView, expected: Option<&str>) -> Result<AnswerOutcome> {
        let own = self.open_own_question(&view.question_id, &view.self_envelope)?;
        if let Some(expected) = expected
            && expected != own.digest
        {
            return Err(Self::id_conflict(&view.question_id));
        }
        let roster = if view.state == QuestionState::Answered {
            let roster = self.roster().await?;
            self.roster_for_judging(roster, view.answered_by.as_deref())
                .await?
        } else {
            Roster::empty(&self.inner.agent_id)
        };
        let user = own.payload.user.as_deref();
        let verdict = self.judge(view, &own, &roster, |device| {
            roster.may_answer_for(device, user, None)
        });
        // The name and the relay's time are metadata in clear: shown only beside an answer that opened.
        let opened = opened_as_reported(&verdict, view);
        let grant = verdict
            .grant
            .zip(verdict.answered_by.clone().zip(verdict.answered_at))
            .map(
                |(grant, (device_id, granted_at))| pacerelle_core::grant::GivenGrant {
                    id: view.question_id.clone(),
                    device_id,
                    granted_at,
                    question: pacerelle_core::b64::encode(&own.plaintext),
                    grant,
                },
            );
        Ok(AnswerOutcome {
            question_id: view.question_id.clone(),
            state: verdict.state,
            approved: verdict.approved,
            answer: verdict.answer,
            answered_by: verdict.answered_by,
            answered_by_name: view.answered_by_name.clone().filter(|_| opened),
            answered_at: view.answered_at.filter(|_| opened),
            device_answered_at: verdict.answered_at,
            expires_at: own.payload.expires_at,
            // A rejected answer names the device the relay says gave it: the person can tell which one failed.
            rejected: verdict.rejected.map(|reason| match &view.answered_by {
                Some(device) => format!("{reason} (the answer of device {device})"),
                None => reason.to_string(),
            }),
            signed: verdict.signature.is_some(),
            channel: verdict.channel,
            grant,
            grant_refused: verdict.grant_refused.map(|r| r.to_string()),
        })
    }

    fn id_conflict(question_id: &str) -> Error {
        Error::local(
            409,
            wire::code::QUESTION_ID_CONFLICT,
            format!(
                "question id {question_id} already names a different question: one id carries one question \
                 (ask this one under a new id, or ask exactly the same question to resume it)"
            ),
        )
    }

    /// Asks the owner a question and returns at once. It is sealed for each active owner device (only their
    /// answers count) and for the agent itself. Idempotent by `question_id`.
    ///
    /// Fails with code `no_device` when no owner device is paired, and with [`Error::InvalidInput`] for a
    /// malformed question.
    pub async fn ask_user(&self, mut request: QuestionRequest) -> Result<Asked> {
        request.check()?;
        let question_id = request.ensure_id().to_string();
        let expires_at = Timestamp::now().plus_millis(request.expires_in.as_millis() as i64);
        let mut payload = QuestionPayload {
            grants: request.grants,
            question: request.question,
            kind: request.kind,
            options: request.options,
            multiple: request.multiple,
            details: request.details.filter(|d| !d.trim().is_empty()),
            expires_at,
            recipients: Vec::new(),
            answer_key: None,
            channels: request
                .channels
                .iter()
                .copied()
                .filter(|c| *c == Channel::Host)
                .take(1)
                .collect(),
            user: request.user,
            approvals: request.approvals,
        };
        // Its shape, before the relay is asked for the devices; the approvals are counted against them below.
        payload.validate().map_err(Error::InvalidInput)?;
        payload.recipients = self
            .devices_to_reach(payload.user.as_deref(), "a question")
            .await?;
        if payload.approvals as usize > payload.recipients.len() {
            return Err(Error::InvalidInput(format!(
                "this question needs {} approvals, but only {} device(s) can answer it: pair more owner devices",
                payload.approvals,
                payload.recipients.len()
            )));
        }
        payload.answer_key = Some(b64::encode(&keys::random_array::<32>()));

        // The same bytes for every copy: each recipient's digest of what it opened is the agent's.
        #[allow(clippy::unwrap_used)] // a payload of strings serialises infallibly
        let plain = serde_json::to_vec(&payload).unwrap();
        let agent_id = &self.inner.agent_id;
        let envelopes = payload
            .recipients
            .iter()
            .map(|device| DeviceEnvelope {
                device_id: device.clone(),
                envelope: envelope::seal(
                    &self.inner.token.device_key(agent_id, device),
                    &question_aad(agent_id, device, &question_id),
                    &plain,
                ),
            })
            .collect();
        let body = CreateQuestion {
            question_id: question_id.clone(),
            kind: payload.kind,
            expires_at,
            self_envelope: envelope::seal(
                &self.inner.token.self_key(agent_id),
                &question_aad(agent_id, "", &question_id),
                &plain,
            ),
            envelopes,
            // In clear beside the sealed addressee, for the integrator's webhooks; the sealed one decides.
            user_id: payload.user.clone(),
            // In clear so that the relay keeps the question open; the sealed number is the one counted.
            approvals: payload.approvals,
        };
        let view: QuestionView = self
            .inner
            .http
            .send(Req {
                body: Some(&body),
                ..self.req(Method::POST, "/v1/agent/questions")
            })
            .await?;
        if view.question_id != question_id {
            return Err(Error::InvalidInput(
                "the relay answered about another question".into(),
            ));
        }
        // An id already used returns the question as first stored. The same question resumes (its own sealed
        // expiry is the one that counts); a different one is refused: one id never carries two questions.
        let own = self.open_own_question(&view.question_id, &view.self_envelope)?;
        if !own.payload.same_question(&payload) {
            return Err(Self::id_conflict(&question_id));
        }
        // The bytes sealed here carry a fresh answer key: stored bytes that differ were stored before.
        let resumed = own.digest != question::question_digest(&plain);
        Ok(Asked {
            question_id,
            expires_at: own.payload.expires_at,
            digest: Some(own.digest),
            resumed,
        })
    }

    /// Reads a question, parking up to `wait` (at most 55 s) while it is pending, and decides what its
    /// answer means. Loops are the caller's job (see [`AgentClient::ask`]).
    pub async fn wait_for_answer(&self, question_id: &str, wait: Duration) -> Result<AnswerOutcome> {
        self.wait_for(question_id, None, wait).await
    }

    /// [`AgentClient::wait_for_answer`] for the question `asked` names: with its digest, the view of another
    /// question under its id fails with `question_id_conflict` instead of being judged.
    pub async fn wait_for_answer_to(&self, asked: &Asked, wait: Duration) -> Result<AnswerOutcome> {
        self.wait_for(&asked.question_id, asked.digest.as_deref(), wait)
            .await
    }

    /// [`AgentClient::wait_for_answer`], accepting only the question whose digest is `expected`.
    async fn wait_for(
        &self,
        question_id: &str,
        expected: Option<&str>,
        wait: Duration,
    ) -> Result<AnswerOutcome> {
        ids::validate("question id", question_id)?;
        let wait = wait.min(Duration::from_secs(wire::MAX_WAIT_SECONDS));
        // Whole seconds on the wire; round up so that a short remaining wait still parks.
        let secs = wait.as_millis().div_ceil(1000) as u64;
        let query = [("wait", secs.to_string())];
        let path = Self::question_path(question_id);
        let view: QuestionView = self
            .inner
            .http
            .send(Req {
                query: &query,
                wait: Some(Duration::from_secs(secs)),
                ..self.req::<()>(Method::GET, &path)
            })
            .await?;
        if view.question_id != question_id {
            return Err(Error::InvalidInput(
                "the relay answered about another question".into(),
            ));
        }
        self.outcome(&view, expected).await
    }

    /// Waits for the question `question_id`, known by its id only (no [`Asked`], so whatever question the id
    /// names), until its outcome is final or `timeout` passes (then the last, pending, outcome is returned);
    /// `None`: until the question expires. One bounded read first tells the expiry, and is often the whole
    /// wait; then [`AgentClient::wait_until_final`].
    pub async fn wait_for_answer_by_id(
        &self,
        question_id: &str,
        timeout: Option<Duration>,
    ) -> Result<AnswerOutcome> {
        let started = tokio::time::Instant::now();
        let max_wait = Duration::from_secs(wire::MAX_WAIT_SECONDS);
        let first = self
            .wait_for_answer(question_id, timeout.unwrap_or(max_wait).min(max_wait))
            .await?;
        if first.is_final() || timeout.is_some_and(|t| started.elapsed() >= t) {
            return Ok(first);
        }
        let asked = Asked {
            question_id: first.question_id.clone(),
            expires_at: first.expires_at,
            digest: None,
            resumed: false,
        };
        self.wait_until_final(&asked, deadline_after(started, timeout))
            .await
    }

    /// [`AgentClient::wait_until_final`] for `timeout` from now; `None`: until the question expires.
    pub async fn wait_until_final_within(
        &self,
        asked: &Asked,
        timeout: Option<Duration>,
    ) -> Result<AnswerOutcome> {
        let deadline = deadline_after(tokio::time::Instant::now(), timeout);
        self.wait_until_final(asked, deadline).await
    }

    /// Asks and waits: [`AgentClient::ask_user`], then [`AgentClient::wait_for_answer`] until the outcome is
    /// final, the question expires, or `overall_timeout` passes (then the last, pending, outcome is returned).
    ///
    /// While the relay cannot be reached the wait goes on until the question's expiry; after it the outcome
    /// is `expired`. Only an authenticated, timely yes (or chosen options) is ever `approved`.
    pub async fn ask(&self, request: QuestionRequest, overall_timeout: Duration) -> Result<AnswerOutcome> {
        let started = tokio::time::Instant::now();
        let asked = self.ask_user(request).await?;
        self.wait_until_final(&asked, started + overall_timeout).await
    }

    /// Waits for a question asked earlier until its outcome is final, it expires, or `deadline` passes
    /// (then the last, pending, outcome is returned).
    ///
    /// While the relay cannot be reached the wait goes on, with backoff, until the question's expiry or the
    /// deadline; if no outcome could be read by then, the network error is returned. Never approved unless
    /// an authenticated yes was read.
    pub async fn wait_until_final(
        &self,
        asked: &Asked,
        deadline: tokio::time::Instant,
    ) -> Result<AnswerOutcome> {
        let mut pauses = WAIT_BACKOFF.delays();
        let mut last: Option<AnswerOutcome> = None;
        loop {
            let to_expiry = Duration::from_millis(
                u64::try_from(asked.expires_at.millis() - Timestamp::now().millis()).unwrap_or(0),
            );
            let to_deadline = deadline.saturating_duration_since(tokio::time::Instant::now());
            let wait = to_expiry.min(to_deadline);
            let called = tokio::time::Instant::now();
            match self
                .wait_for(&asked.question_id, asked.digest.as_deref(), wait)
                .await
            {
                Ok(outcome) => {
                    pauses = WAIT_BACKOFF.delays();
                    // Past the expiry the verdict is `expired` (final) unless an answer in time opened.
                    if outcome.is_final() || tokio::time::Instant::now() >= deadline {
                        return Ok(outcome);
                    }
                    last = Some(outcome);
                    // A relay that does not park must not turn this into a busy loop.
                    let floor = Duration::from_millis(250);
                    if !wait.is_zero() && called.elapsed() < floor {
                        tokio::time::sleep(floor.min(wait)).await;
                    }
                }
                Err(e) if e.is_transient() => {
                    tracing::debug!(question_id = %asked.question_id, error = %e, "relay unreachable; waiting");
                    let now = tokio::time::Instant::now();
                    if Timestamp::now() >= asked.expires_at || now >= deadline {
                        return match last {
                            Some(outcome) if now >= deadline && Timestamp::now() < asked.expires_at => {
                                Ok(outcome)
                            }
                            _ => Err(e),
                        };
                    }
                    let pause = pauses.next().unwrap_or(WAIT_BACKOFF.max);
                    tokio::time::sleep(pause.min(wait).max(Duration::from_millis(50))).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Records an answer the person gave at the computer (through the agent's host, e.g. an MCP
    /// elicitation) for a question asked with [`QuestionRequest::answered_at_host`]: sealed with the agent's
    /// own key for itself, with a copy under the question's answer key so that every device shows it as
    /// answered at the computer. The first answer wins, on either channel: fails with `question_answered`
    /// when a device answered first (read the question again for that answer), `question_expired` or
    /// `question_cancelled` when it is too late. A retry after an uncertain failure returns the same outcome.
    ///
    /// `expected` is the digest from [`Asked`] when this process asked the question: the answer then counts
    /// only for exactly that question. The answer must fit the question (yes or no, listed options, text).
    pub async fn answer_at_host(
        &self,
        question_id: &str,
        expected: Option<&str>,
        answer: Answer,
    ) -> Result<AnswerOutcome> {
        ids::validate("question id", question_id)?;
        let path = Self::question_path(question_id);
        let view: QuestionView = self.inner.http.send(self.req::<()>(Method::GET, &path)).await?;
        let own = self.open_own_question(question_id, &view.self_envelope)?;
        if expected.is_some_and(|digest| digest != own.digest) {
            return Err(Self::id_conflict(question_id));
        }
        if !own.payload.accepts_host() {
            return Err(Error::InvalidInput(question::HOST_NOT_ACCEPTED.into()));
        }
        if !pacerelle_core::signing::answer_fits(&own.payload, &answer) {
            return Err(Error::InvalidInput(
                "the answer does not fit the question (yes or no, listed options, or text)".into(),
            ));
        }
        let payload = AnswerPayload {
            grant: None,
            question_id: question_id.to_string(),
            answer,
            answered_at: Timestamp::now(),
            question_digest: Some(own.digest.clone()),
            signature: None,
        };
        #[allow(clippy::unwrap_used)] // a payload of strings serialises infallibly
        let plain = serde_json::to_vec(&payload).unwrap();
        let agent_id = &self.inner.agent_id;
        let body = AnswerQuestion {
            envelope: envelope::seal(
                &self.inner.token.self_key(agent_id),
                &host_answer_aad(agent_id, question_id),
                &plain,
            ),
            copy: own
                .payload
                .answer_key()
                .map(|key| envelope::seal(&key, &answer_copy_aad(agent_id, "", question_id), &plain)),
            closes: false,
        };
        let path = format!("{path}/answer");
        let view: QuestionView = self
            .inner
            .http
            .send(Req {
                body: Some(&body),
                ..self.req(Method::POST, &path)
            })
            .await?;
        if view.question_id != question_id {
            return Err(Error::InvalidInput(
                "the relay answered about another question".into(),
            ));
        }
        self.outcome(&view, Some(&own.digest)).await
    }

    /// Withdraws a pending question; cancelling a cancelled one changes nothing. Fails with
    /// `question_answered` or `question_expired` when it is too late.
    pub async fn cancel_question(&self, question_id: &str) -> Result<AnswerOutcome> {
        ids::validate("question id", question_id)?;
        let path = format!("{}/cancel", Self::question_path(question_id));
        let view: QuestionView = self.inner.http.send(self.req::<()>(Method::POST, &path)).await?;
        self.outcome(&view, None).await
    }

    /// Sends a notification (no answer expected) to the owner, sealed for each active owner device.
    ///
    /// Fails with code `no_device` when no device is paired.
    pub async fn notify(&self, text: &str, title: Option<&str>, level: Level) -> Result<Stored> {
        self.notify_user(None, text, title, level).await
    }

    /// Sends a notification to a user of the agent (Partner mode: `Some(externalId)`, sealed for that user's
    /// devices only) or to the owner (`None`).
    ///
    /// Fails with code `user_not_found` for a user never connected or disconnected, and `no_device` when
    /// the addressee has no paired device.
    pub async fn notify_user(
        &self,
        user: Option<&str>,
        text: &str,
        title: Option<&str>,
        level: Level,
    ) -> Result<Stored> {
        if let Some(user) = user {
            super::check_user(user)?;
        }
        check_text("a notification", text)?;
        let title = title.map(str::trim).filter(|t| !t.is_empty());
        if title.is_some_and(|t| t.len() > 1024) {
            return Err(Error::InvalidInput(
                "a notification's title is at most 1 KiB".into(),
            ));
        }
        let notification_id = ids::generate(ids::NOTIFICATION);
        let payload = NotificationPayload {
            text: text.to_string(),
            title: title.map(str::to_string),
            level,
        };
        let agent_id = &self.inner.agent_id;
        let envelopes = self
            .devices_to_reach(user, "a notification")
            .await?
            .into_iter()
            .map(|device| DeviceEnvelope {
                envelope: envelope::seal_json(
                    &self.inner.token.device_key(agent_id, &device),
                    &notification_aad(agent_id, &device, &notification_id),
                    &payload,
                ),
                device_id: device,
            })
            .collect();
        let body = SendNotification {
            notification_id,
            envelopes,
        };
        self.inner
            .http
            .send(Req {
                body: Some(&body),
                ..self.req(Method::POST, "/v1/agent/notifications")
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_as_text() {
        assert_eq!(answer_text(&Answer::Yes), "yes");
        assert_eq!(answer_text(&Answer::No), "no");
        assert_eq!(
            answer_text(&Answer::Options(vec!["a".into(), "b".into()])),
            "a, b"
        );
        assert_eq!(answer_text(&Answer::Text("later".into())), "later");
    }

    #[test]
    fn requests_have_sensible_defaults() {
        let r = QuestionRequest::choice("which?", ["a", "b"]).multiple(true);
        assert_eq!(r.kind, QuestionKind::Choice);
        assert_eq!(r.options, vec!["a", "b"]);
        assert!(r.multiple);
        assert_eq!(r.expires_in, Duration::from_secs(600));
        assert_eq!(QuestionRequest::text("why?").kind, QuestionKind::Text);
    }

    #[test]
    fn a_rejected_answer_is_final_but_never_approved() {
        let o = AnswerOutcome {
            grant: None,
            grant_refused: None,
            question_id: "q".into(),
            state: QuestionState::Pending,
            approved: false,
            answer: None,
            answered_by: None,
            answered_by_name: None,
            answered_at: None,
            device_answered_at: None,
            expires_at: Timestamp(0),
            rejected: Some("x".into()),
            signed: false,
            channel: None,
        };
        assert!(o.is_final());
        assert!(!o.approved);
    }
}
