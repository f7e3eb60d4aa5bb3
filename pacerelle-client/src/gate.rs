//! The approval gate (DESIGN §8, §12), once for every adapter: the execution policy, the gate's own files,
//! asking the owner within a budget, withdrawing a question that is not final, and one [`Conclusion`].
//!
//! The CLI's PreToolUse hook, Python's `require_approval` (and its context-manager form) and the MCP question
//! tools all come here; they keep only argument parsing, type mapping and wording.
//!
//! ```no_run
//! # async fn demo(client: pacerelle_client::AgentClient) {
//! use std::time::Duration;
//! use pacerelle_client::gate::{Asking, Gate, Ruling};
//! use pacerelle_client::agent::QuestionRequest;
//!
//! let gate = Gate::load(None, Some(std::path::Path::new("/repo"))).expect("a usable policy");
//! let input = serde_json::json!({"command": "git push"});
//! let evaluation = gate.evaluate("Bash", &input);
//! let ruling = match Ruling::by_policy(&evaluation) {
//!     Some(ruling) => ruling,
//!     None => {
//!         let question = QuestionRequest::yes_no("Allow `git push`?");
//!         pacerelle_client::gate::ask(&client, Asking::within(question, Duration::from_secs(540))).await
//!     }
//! };
//! if ruling.lets_run() { /* run the call */ } else { eprintln!("{}", ruling.reason); }
//! # }
//! ```
//!
//! **It fails closed.** Only an allow rule ([`Conclusion::Allowed`]) or an authenticated, timely yes
//! ([`Conclusion::Approved`], that is [`AnswerOutcome::approved`] on a yes) lets a call run. Everything else —
//! a no, an expiry, a cancel, an answer that could not be trusted, a relay that cannot be reached, any error —
//! does not, and [`Ruling::reason`] says why in words shown to the model.

use std::path::{Path, PathBuf};
use std::time::Duration;

use pacerelle_core::policy::{self, Call, Decision, Evaluation, Policy};
use pacerelle_core::question::{Answer, QuestionState};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use pacerelle_core::grant::{CommandMatch, GrantOffer, GrantScope};

use crate::agent::AgentClient;
use crate::agent::grants::{GrantBook, GrantedCall, KeptGrant};
use crate::agent::questions::{AnswerOutcome, QuestionRequest};
use crate::error::{Error, ErrorKind};

/// The policy file looked for in a project folder.
pub const PROJECT_POLICY: &str = ".pacerelle/policy.toml";

/// The gate's own files: a call that touches one (by path or in its shell command) is asked even when an
/// allow rule matches, so that an agent allowed to write files cannot rewrite its policy or remove the hook.
/// The policy file in use is protected too (see [`Gate::touches_the_gate`]).
pub const PROTECTED: [&str; 5] = [
    ".pacerelle/",
    ".claude/settings",
    ".codex/",
    "pacerelle/agent.json",
    "pacerelle/grants/",
];

/// Time left after a question's own expiry to read its last state, when no time limit is given.
pub const GRACE: Duration = Duration::from_secs(60);

/// Longest wait for the withdrawal of a question once the time limit has passed (when the expiry was not
/// fitted inside the budget).
const WITHDRAW_TIMEOUT: Duration = Duration::from_secs(5);

/// What the gate concludes about one call or one question: one word for every surface (the hook's log, the
/// `reason` of Python's `NotApproved`, the `conclusion` of the MCP tools).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema), schemars(inline))]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Conclusion {
    /// The policy allowed the call: nothing was asked.
    Allowed,
    /// The owner answered an authenticated, timely yes.
    Approved,
    /// A live grant the owner gave from a device with an earlier yes covered the call: nothing was asked.
    Granted,
    /// The owner chose options or wrote a text (the outcome's `answer`): an answer, never a yes.
    Answered,
    /// The owner answered no, or a deny rule matched.
    Denied,
    /// Nobody answered before the question's expiry: a no.
    Expired,
    /// The question was withdrawn (by the agent, or by the gate when its time ran out): a no.
    Cancelled,
    /// The relay reported an answer that could not be trusted: a no, and no valid answer can follow.
    Rejected,
    /// No answer yet: not a yes.
    Pending,
    /// The relay could not be reached: nothing could be asked or read, so a no.
    RelayUnavailable,
    /// Anything else that stopped the gate (no paired device, bad input, refused credentials…): a no.
    Error,
}

impl Conclusion {
    /// The word: `allowed`, `approved`, `granted`, `answered`, `denied`, `expired`, `cancelled`, `rejected`,
    /// `pending`, `relay_unavailable` or `error`.
    pub fn as_str(self) -> &'static str {
        match self {
            Conclusion::Allowed => "allowed",
            Conclusion::Approved => "approved",
            Conclusion::Granted => "granted",
            Conclusion::Answered => "answered",
            Conclusion::Denied => "denied",
            Conclusion::Expired => "expired",
            Conclusion::Cancelled => "cancelled",
            Conclusion::Rejected => "rejected",
            Conclusion::Pending => "pending",
            Conclusion::RelayUnavailable => "relay_unavailable",
            Conclusion::Error => "error",
        }
    }

    /// Sorts what the agent concluded about a question (the client's verdict): the only place outcomes are
    /// sorted. An answer that was rejected is [`Conclusion::Rejected`] whatever the state; an answered
    /// question is [`Conclusion::Approved`] only for a yes that [`AnswerOutcome::approved`] accepts, and an
    /// answer that is neither a yes, a no, valid options nor a text is [`Conclusion::Rejected`] (fail closed).
    pub fn of(outcome: &AnswerOutcome) -> Conclusion {
        if outcome.rejected.is_some() {
            return Conclusion::Rejected;
        }
        match outcome.state {
            QuestionState::Pending => Conclusion::Pending,
            QuestionState::Expired => Conclusion::Expired,
            QuestionState::Cancelled => Conclusion::Cancelled,
            QuestionState::Answered => match (&outcome.answer, outcome.approved) {
                (Some(Answer::Yes), true) => Conclusion::Approved,
                (Some(Answer::No), _) => Conclusion::Denied,
                (Some(Answer::Options(_)), true) | (Some(Answer::Text(_)), _) => Conclusion::Answered,
                _ => Conclusion::Rejected,
            },
        }
    }

    /// True when the call may run: allowed by the policy, approved by an authenticated yes, or inside a live
    /// grant.
    pub fn lets_run(self) -> bool {
        matches!(
            self,
            Conclusion::Allowed | Conclusion::Approved | Conclusion::Granted
        )
    }
}

impl std::fmt::Display for Conclusion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The gate's conclusion about one call, the reason shown to the model, and what it rests on.
#[derive(Debug)]
#[non_exhaustive]
pub struct Ruling {
    /// What the gate concluded.
    pub conclusion: Conclusion,
    /// Why, in words a model or a person can read (no content of the call beyond the policy's own words).
    pub reason: String,
    /// The question's outcome, when one was read.
    pub outcome: Option<AnswerOutcome>,
    /// The error that stopped the gate, for [`Conclusion::RelayUnavailable`] and [`Conclusion::Error`].
    pub error: Option<Error>,
}

impl Ruling {
    fn new(conclusion: Conclusion, reason: impl Into<String>) -> Ruling {
        Ruling {
            conclusion,
            reason: reason.into(),
            outcome: None,
            error: None,
        }
    }

    /// True when the call may run ([`Conclusion::lets_run`]).
    pub fn lets_run(&self) -> bool {
        self.conclusion.lets_run()
    }

    /// What the policy settles by itself: `allow` and `deny`; `None` for `ask`.
    pub fn by_policy(evaluation: &Evaluation) -> Option<Ruling> {
        match evaluation.decision {
            Decision::Allow => Some(Ruling::new(
                Conclusion::Allowed,
                format!("allowed by the Pacerelle policy: {}", evaluation.reason),
            )),
            Decision::Deny => Some(Ruling::new(
                Conclusion::Denied,
                format!("denied by the Pacerelle policy: {}", evaluation.reason),
            )),
            Decision::Ask => None,
        }
    }

    /// The ruling on a question's outcome, with its reason.
    pub fn of(outcome: AnswerOutcome) -> Ruling {
        let conclusion = Conclusion::of(&outcome);
        let who = outcome
            .answered_by_name
            .clone()
            .or_else(|| outcome.answered_by.clone())
            .unwrap_or_else(|| "the owner".into());
        let reason = match conclusion {
            Conclusion::Approved => {
                let when = outcome
                    .device_answered_at
                    .map(|t| format!(" at {t}"))
                    .unwrap_or_default();
                let granted = outcome
                    .grant
                    .as_ref()
                    .map(|g| format!(", and granted for the same calls until {}", g.grant.expires_at))
                    .unwrap_or_default();
                format!("approved on the phone by {who}{when}{granted}")
            }
            Conclusion::Denied => format!(
                "{who} answered no on the phone: do not run this call; ask the person what to do instead"
            ),
            Conclusion::Answered => {
                format!("{who} answered on the phone, but an option or a written answer is not a yes; denied")
            }
            Conclusion::Expired => format!(
                "no answer on the phone before the question expired at {}; denied (no answer is a no)",
                outcome.expires_at
            ),
            Conclusion::Cancelled => "the question was cancelled; denied".to_string(),
            Conclusion::Rejected => format!(
                "Pacerelle: an answer arrived but could not be trusted ({}); denied",
                outcome.rejected.as_deref().unwrap_or("it is not an explicit yes")
            ),
            _ => "no answer on the phone yet; denied (no answer is a no)".to_string(),
        };
        Ruling {
            outcome: Some(outcome),
            ..Ruling::new(conclusion, reason)
        }
    }

    /// The ruling on an error that stopped the gate: [`Conclusion::RelayUnavailable`] for a relay that could
    /// not be reached (or was overloaded), else [`Conclusion::Error`].
    pub fn failed(error: Error, doing: &str) -> Ruling {
        let conclusion = if error.is_transient() {
            Conclusion::RelayUnavailable
        } else {
            Conclusion::Error
        };
        Ruling {
            reason: format!("Pacerelle could not {doing} ({error}); denied"),
            error: Some(error),
            ..Ruling::new(conclusion, "")
        }
    }
}

/// A policy file that could not be used: the gate denies every call until it is fixed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PolicyFileError(pub String);

/// The execution policy and the gate's own files.
#[derive(Debug, Clone)]
pub struct Gate {
    policy: Policy,
    file: Option<PathBuf>,
}

impl Gate {
    /// A gate with `policy`, read from `file` when it came from one (that file is then protected).
    pub fn new(policy: Policy, file: Option<PathBuf>) -> Gate {
        Gate { policy, file }
    }

    /// Asks for everything.
    pub fn ask_everything() -> Gate {
        Gate::new(Policy::ask_everything(), None)
    }

    /// Reads and parses a policy file.
    pub fn from_file(path: &Path) -> Result<Gate, PolicyFileError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| PolicyFileError(format!("cannot read the policy file {}: {e}", path.display())))?;
        let policy = Policy::parse(&text)
            .map_err(|e| PolicyFileError(format!("{} is not a valid policy: {e}", path.display())))?;
        Ok(Gate::new(policy, Some(path.to_path_buf())))
    }

    /// The policy in this order: `explicit` (a file that must exist), else [`PROJECT_POLICY`] in `project`
    /// (default: the current directory) when it exists, else ask for everything. A file that cannot be read
    /// or does not parse is an error: never a silently open gate.
    pub fn load(explicit: Option<&Path>, project: Option<&Path>) -> Result<Gate, PolicyFileError> {
        if let Some(path) = explicit.filter(|p| !p.as_os_str().is_empty()) {
            return Gate::from_file(path);
        }
        let dir = match project {
            Some(dir) => dir.to_path_buf(),
            None => {
                std::env::current_dir().map_err(|e| PolicyFileError(format!("no working directory: {e}")))?
            }
        };
        let path = dir.join(PROJECT_POLICY);
        match std::fs::metadata(&path) {
            Ok(_) => Gate::from_file(&path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Gate::ask_everything()),
            Err(e) => Err(PolicyFileError(format!(
                "cannot read the policy file {}: {e}",
                path.display()
            ))),
        }
    }

    /// The gate's question for a call: yes or no, with the channels the policy accepts (the phone only,
    /// unless the policy's `channels` lists `host`).
    pub fn question(&self, question: String) -> QuestionRequest {
        QuestionRequest::yes_no(question).answered_at_host(self.policy.accepts_host())
    }

    /// [`Gate::question`] for a call the policy evaluated: with the approvals its rule needs (several
    /// approvals come from owner devices only, never from the computer).
    pub fn question_for(&self, question: String, evaluation: &Evaluation) -> QuestionRequest {
        match evaluation.approvals {
            1 => self.question(question),
            n => QuestionRequest::yes_no(question).approvals(n),
        }
    }

    /// The digest of the policy's text: a grant counts only under the policy that offered it.
    pub fn policy_digest(&self) -> &str {
        self.policy.digest()
    }

    /// The grants a `yes` to this call's question may extend to (docs/crypto.md §4.8b): none when the
    /// policy offers no duration for it, when it touches the gate's own files, or without a working
    /// directory; else the exact call first, then each of the rule's `grant_prefix` that covers its command.
    /// A call of another tool than a shell is grantable only when every path it touches is inside `folder`.
    pub fn offer(
        &self,
        evaluation: &Evaluation,
        tool: &str,
        input: &serde_json::Value,
        folder: Option<&Path>,
    ) -> Option<GrantOffer> {
        let folder = folder?.to_str()?.to_string();
        if evaluation.decision != Decision::Ask
            || evaluation.grant.is_empty()
            || self.touches_the_gate(tool, input)
        {
            return None;
        }
        let command = policy::command_of(input);
        let paths = policy::paths_of(tool, input);
        let scope = |command: Option<&str>, matching| GrantScope {
            tool: tool.to_string(),
            command: command.map(str::to_string),
            matching,
            folder: folder.clone(),
        };
        let mut scopes = vec![match &command {
            Some(c) => scope(Some(c), Some(CommandMatch::Exact)),
            None => scope(None, None),
        }];
        if command.is_none() && !scopes[0].covers(tool, None, &paths, &folder) {
            return None;
        }
        if let Some(c) = &command {
            scopes.extend(
                evaluation
                    .grant_prefix
                    .iter()
                    .map(|p| scope(Some(p), Some(CommandMatch::Prefix)))
                    .filter(|s| s.covers(tool, Some(c), &paths, &folder)),
            );
        }
        let offer = GrantOffer {
            durations: evaluation.grant.clone(),
            scopes,
            policy: self.policy_digest().to_string(),
        };
        offer.validate().is_ok().then_some(offer)
    }

    /// The file the policy came from, if any.
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// Where the policy comes from, in words.
    pub fn source(&self) -> String {
        match &self.file {
            Some(path) => path.display().to_string(),
            None => "no policy file: ask for everything".into(),
        }
    }

    /// True when the call touches the gate's own files ([`PROTECTED`], or the policy file in use when its
    /// path is absolute), by a path or in its shell command.
    pub fn touches_the_gate(&self, tool: &str, input: &serde_json::Value) -> bool {
        let own = self
            .file
            .as_deref()
            .filter(|p| p.is_absolute())
            .map(|p| p.display().to_string());
        let hit = |text: &str| {
            PROTECTED.iter().any(|p| text.contains(p)) || own.as_deref().is_some_and(|own| text.contains(own))
        };
        policy::paths_of(tool, input).iter().any(|p| hit(p))
            || policy::command_of(input).is_some_and(|c| hit(&c))
    }

    /// Decides a call: the policy's first matching rule (else its default), except that an `allow` for a
    /// call touching the gate's own files becomes `ask`.
    pub fn evaluate(&self, tool: &str, input: &serde_json::Value) -> Evaluation {
        let evaluation = self.policy.evaluate(Call { tool, input });
        if evaluation.decision == Decision::Allow && self.touches_the_gate(tool, input) {
            return Evaluation {
                decision: Decision::Ask,
                reason: "the call touches the gate's own settings, which no rule allows without asking"
                    .into(),
                grant: Vec::new(),
                grant_prefix: Vec::new(),
                approvals: 1,
            };
        }
        evaluation
    }
}

/// A question the gate asks, and how long it may take.
#[derive(Debug, Clone)]
pub struct Asking {
    /// The question (a yes/no question for a gate).
    pub request: QuestionRequest,
    /// The most time the gate may take: asking, waiting and withdrawing.
    pub budget: Duration,
    /// Whether the question's expiry is fitted inside the budget (else it is kept, and a question still
    /// open when the budget ends is withdrawn).
    pub fit_expiry: bool,
}

impl Asking {
    /// Asks within `budget`, all included: the question expires a little before the budget ends (a fifth
    /// of it, at most 5 s, at least 1 s of expiry), leaving time to read its last state. The hook's rule.
    pub fn within(request: QuestionRequest, budget: Duration) -> Asking {
        Asking {
            request,
            budget,
            fit_expiry: true,
        }
    }

    /// Asks with the request's own expiry and waits up to `timeout` (default: the expiry and [`GRACE`]);
    /// a question still open then is withdrawn, so that a late yes approves nothing.
    pub fn until(request: QuestionRequest, timeout: Option<Duration>) -> Asking {
        let budget = timeout.unwrap_or(request.expires_in + GRACE);
        Asking {
            request,
            budget,
            fit_expiry: false,
        }
    }

    /// The expiry fitted inside a budget.
    pub fn fitted_expiry(budget: Duration) -> Duration {
        let margin = (budget / 5).min(Duration::from_secs(5));
        budget.saturating_sub(margin).max(Duration::from_secs(1))
    }
}

/// Withdraws the question if the gate is interrupted (its future dropped: Ctrl-C in Python, a cancelled
/// asyncio task, a caller's timeout) before it concluded.
struct Withdraw {
    client: AgentClient,
    question_id: String,
    armed: bool,
}

impl Drop for Withdraw {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let client = self.client.clone();
            let question_id = std::mem::take(&mut self.question_id);
            tracing::debug!(%question_id, "gate interrupted: withdrawing the question");
            runtime.spawn(async move {
                let _ = client.cancel_question(&question_id).await;
            });
        }
    }
}

/// Lets a call run under a live grant of `book` (docs/crypto.md §4.8b): one given under this gate's policy,
/// whose scope covers the call made in `folder`, by a device the roster — read from the relay now — still lets
/// approve, for a call whose own rule offers grants (not `grant = false`, one approval). Its use is recorded in
/// the book. `None` when no grant covers the call, or when the roster cannot be read or the book cannot be
/// used: the gate then asks, which is the safe default.
pub async fn by_grant(
    client: &AgentClient,
    book: &GrantBook,
    gate: &Gate,
    tool: &str,
    input: &serde_json::Value,
    folder: Option<&Path>,
) -> Option<Ruling> {
    let folder = folder?.to_str()?;
    if gate.touches_the_gate(tool, input) {
        return None;
    }
    // Only a call whose own rule offers grants runs by one: a grant given under a broad rule never covers a
    // call that a narrower rule asks every time (`grant = false`) or lets several people approve.
    let evaluation = gate.evaluate(tool, input);
    if evaluation.decision != Decision::Ask || evaluation.grant.is_empty() || evaluation.approvals > 1 {
        return None;
    }
    let command = policy::command_of(input);
    let paths = policy::paths_of(tool, input);
    let call = GrantedCall {
        tool,
        command: command.as_deref(),
        paths: &paths,
        folder,
    };
    let now = pacerelle_core::Timestamp::now();
    let policy = gate.policy_digest();
    // Cheap first: no live grant covers the call, nothing to ask the relay.
    let covering = book
        .candidates(call, policy, now, |_| true)
        .map_err(|e| tracing::warn!(error = %e, "the grants file cannot be read: asking"))
        .ok()?;
    if covering.is_empty() {
        return None;
    }
    let roster = match client.roster().await {
        Ok(roster) => roster,
        Err(e) => {
            tracing::info!(error = %e, "a grant covers the call, but the roster cannot be read: asking");
            return None;
        }
    };
    // Checked again at each use, with the key pinned now: a grant edited in the file fails like a forged one,
    // and a device revoked (or no longer an owner) grants nothing.
    let usable = |g: &KeptGrant| {
        let device = &g.given.device_id;
        let key = match roster.signing(device) {
            pacerelle_core::roster::DeviceSigning::Pinned(key) => Some(key),
            _ => None,
        };
        roster.may_approve(device) && g.given.verifies(client.agent_id(), key.as_ref())
    };
    for grant in covering.iter().filter(|g| usable(g)) {
        // The relay says whether an owner device revoked it, and counts the use. Without that answer the
        // gate cannot know, and asks (docs/hooks.md, "Grants").
        let record = match client.use_grant(&grant.given).await {
            Ok(record) => record,
            Err(e) => {
                tracing::info!(grant = %grant.given.id, error = %e, "cannot learn whether the grant was revoked: asking");
                return None;
            }
        };
        if let Some(at) = record.revoked_at {
            tracing::info!(grant = %grant.given.id, by = ?record.revoked_by, "the grant was revoked");
            if let Err(e) = book.revoked(&grant.given.id, at) {
                tracing::warn!(error = %e, "the revocation could not be written in the grants file");
            }
            continue;
        }
        if !record.live_at(pacerelle_core::Timestamp::now()) {
            continue;
        }
        let used = book
            .record_use(&grant.given.id, call, now)
            .map_err(|e| tracing::warn!(error = %e, "the grants file cannot be written: asking"))
            .ok()??;
        return Some(Ruling::new(Conclusion::Granted, granted_reason(&used)));
    }
    None
}

/// The reason of a call a grant let run.
fn granted_reason(g: &KeptGrant) -> String {
    let by = g.device_name.as_deref().unwrap_or(&g.given.device_id);
    format!(
        "allowed by grant {}, given on {by} at {} until {}",
        g.given.id, g.given.granted_at, g.given.grant.expires_at
    )
}

/// Keeps the grant an approving answer carried, checked when it was judged, so that the calls of its scope
/// run without a question until it ends, and registers it at the relay. Returns whether one was kept.
pub async fn keep_grant(client: &AgentClient, book: &GrantBook, ruling: &Ruling) -> std::io::Result<bool> {
    let Some(outcome) = ruling.outcome.as_ref().filter(|o| o.approved) else {
        return Ok(false);
    };
    if let Some(refused) = &outcome.grant_refused {
        tracing::warn!(question = %outcome.question_id, %refused, "the answer's grant was refused");
    }
    let Some(given) = &outcome.grant else {
        return Ok(false);
    };
    book.keep(KeptGrant {
        given: given.clone(),
        device_name: outcome.answered_by_name.clone(),
        uses: Vec::new(),
        revoked_at: None,
    })?;
    // Listed on the owner's devices from now on; if the relay cannot be reached, the first use registers it.
    if let Err(e) = client.register_grant(given).await {
        tracing::info!(grant = %given.id, error = %e, "the grant is kept; it will be registered at its first use");
    }
    Ok(true)
}

/// Asks the owner and concludes, within the budget. Never fails: every error is a ruling that does not let
/// the call run. A question that is not final when the budget ends (or when this future is dropped) is
/// withdrawn.
pub async fn ask(client: &AgentClient, asking: Asking) -> Ruling {
    let started = Instant::now();
    let end = started + asking.budget;
    let mut request = asking.request;
    // The id is drawn here so that the question can be withdrawn even if asking is interrupted half-way.
    let question_id = request.ensure_id().to_string();
    let (stop_waiting, withdraw_within) = if asking.fit_expiry {
        request.expires_in = Asking::fitted_expiry(asking.budget);
        let reserve = (asking.budget / 4).min(Duration::from_millis(250));
        (end - reserve, reserve)
    } else {
        (end, WITHDRAW_TIMEOUT)
    };
    let mut guard = Withdraw {
        client: client.clone(),
        question_id: question_id.clone(),
        armed: true,
    };
    let asked = match tokio::time::timeout_at(stop_waiting, client.ask_user(request)).await {
        Ok(Ok(asked)) => asked,
        Ok(Err(e)) => {
            // `no_device`, bad input: nothing was asked.
            if !e.is_transient() {
                guard.armed = false;
            }
            return Ruling::failed(e, "ask the owner");
        }
        Err(_) => {
            return Ruling::new(
                Conclusion::RelayUnavailable,
                "Pacerelle: the relay did not take the question within the time budget; denied",
            );
        }
    };
    let outcome = match client.wait_until_final(&asked, stop_waiting).await {
        Ok(outcome) => outcome,
        Err(e) => return Ruling::failed(e, "get the owner's answer"),
    };
    if outcome.is_final() {
        guard.armed = false;
        return Ruling::of(outcome);
    }
    // The budget ends with the question open: withdraw it, so that a late yes approves nothing.
    let budget = asking.budget.as_secs_f64();
    let withdrawn = tokio::time::timeout(withdraw_within, client.cancel_question(&question_id)).await;
    let outcome = match withdrawn {
        Ok(Ok(outcome)) => outcome,
        // Answered or expired meanwhile: what counts is what the question holds.
        Ok(Err(e)) if e.kind() == ErrorKind::QuestionClosed => {
            match client.wait_for_answer(&question_id, Duration::ZERO).await {
                Ok(outcome) => outcome,
                Err(e) => return Ruling::failed(e, "read the owner's answer"),
            }
        }
        Ok(Err(e)) => {
            let mut ruling = Ruling::failed(e, "withdraw the unanswered question");
            ruling.outcome = Some(outcome);
            return ruling;
        }
        Err(_) => {
            return Ruling {
                outcome: Some(outcome),
                ..Ruling::new(
                    Conclusion::Pending,
                    format!(
                        "no answer on the phone within the {budget} s budget, and the question could not be \
                         withdrawn in time; denied (no answer is a no)"
                    ),
                )
            };
        }
    };
    guard.armed = false;
    let mut ruling = Ruling::of(outcome);
    if ruling.conclusion == Conclusion::Cancelled {
        ruling.reason = format!(
            "no answer on the phone within the {budget} s budget, so the question was withdrawn; denied (no \
             answer is a no)"
        );
    }
    ruling
}

#[cfg(test)]
mod tests {
    use super::*;
    use pacerelle_core::Timestamp;
    use serde_json::json;

    fn outcome(state: QuestionState, approved: bool, answer: Option<Answer>) -> AnswerOutcome {
        AnswerOutcome {
            grant: None,
            grant_refused: None,
            question_id: "q".into(),
            state,
            approved,
            answered_by: answer.as_ref().map(|_| "dv_1".into()),
            answered_by_name: answer.as_ref().map(|_| "phone".into()),
            answered_at: None,
            device_answered_at: None,
            answer,
            expires_at: Timestamp(0),
            rejected: None,
            signed: false,
            channel: None,
        }
    }

    #[test]
    fn only_an_approved_yes_or_an_allow_rule_lets_a_call_run() {
        let yes = Ruling::of(outcome(QuestionState::Answered, true, Some(Answer::Yes)));
        assert_eq!(yes.conclusion, Conclusion::Approved);
        assert!(yes.lets_run() && yes.reason.contains("phone"), "{}", yes.reason);
        let cases = [
            (
                outcome(QuestionState::Answered, false, Some(Answer::Yes)),
                Conclusion::Rejected,
            ),
            (
                outcome(QuestionState::Answered, false, Some(Answer::No)),
                Conclusion::Denied,
            ),
            (
                outcome(
                    QuestionState::Answered,
                    true,
                    Some(Answer::Options(vec!["a".into()])),
                ),
                Conclusion::Answered,
            ),
            (
                outcome(
                    QuestionState::Answered,
                    false,
                    Some(Answer::Options(vec!["a".into()])),
                ),
                Conclusion::Rejected,
            ),
            (
                outcome(QuestionState::Answered, false, Some(Answer::Text("yes".into()))),
                Conclusion::Answered,
            ),
            (outcome(QuestionState::Answered, true, None), Conclusion::Rejected),
            (outcome(QuestionState::Pending, false, None), Conclusion::Pending),
            (outcome(QuestionState::Expired, false, None), Conclusion::Expired),
            (
                outcome(QuestionState::Cancelled, false, None),
                Conclusion::Cancelled,
            ),
            (
                AnswerOutcome {
                    rejected: Some("did not open".into()),
                    ..outcome(QuestionState::Answered, true, Some(Answer::Yes))
                },
                Conclusion::Rejected,
            ),
        ];
        for (o, expected) in cases {
            let ruling = Ruling::of(o);
            assert_eq!(ruling.conclusion, expected, "{ruling:?}");
            assert!(!ruling.lets_run());
            assert!(!ruling.reason.is_empty());
        }
        let network = Error::Network {
            url: "http://127.0.0.1:9".into(),
            reason: "refused".into(),
        };
        let down = Ruling::failed(network, "ask the owner");
        assert_eq!(down.conclusion, Conclusion::RelayUnavailable);
        assert!(down.reason.contains("unreachable") && !down.lets_run());
        let no_device = Ruling::failed(Error::InvalidInput("x".into()), "ask the owner");
        assert_eq!(no_device.conclusion, Conclusion::Error);
        assert_eq!(
            serde_json::to_value(Conclusion::RelayUnavailable).expect("json"),
            "relay_unavailable"
        );
    }

    #[test]
    fn allow_rules_do_not_cover_the_gates_own_files() {
        let gate = Gate::new(
            Policy::parse("default = \"allow\"").expect("policy"),
            Some(PathBuf::from("/etc/policy.toml")),
        );
        let ask = |tool: &str, input: serde_json::Value| gate.evaluate(tool, &input).decision;
        assert_eq!(
            ask("Write", json!({"file_path": "/repo/.pacerelle/policy.toml"})),
            Decision::Ask
        );
        assert_eq!(
            ask("Bash", json!({"command": "echo '{}' > .claude/settings.json"})),
            Decision::Ask
        );
        assert_eq!(
            ask("Bash", json!({"command": "cat /etc/policy.toml"})),
            Decision::Ask
        );
        assert_eq!(
            ask("Edit", json!({"path": "/repo/.codex/hooks.json"})),
            Decision::Ask
        );
        assert_eq!(ask("Bash", json!({"command": "ls"})), Decision::Allow);
        let deny = Gate::new(Policy::parse("default = \"deny\"").expect("policy"), None);
        assert_eq!(
            deny.evaluate("Write", &json!({"file_path": "/r/.pacerelle/x"}))
                .decision,
            Decision::Deny,
            "protection only turns an allow into an ask"
        );
    }

    #[test]
    fn policy_sources() {
        let dir = tempfile::tempdir().expect("tempdir");
        let gate = Gate::load(None, Some(dir.path())).expect("none: ask everything");
        assert!(gate.source().contains("ask for everything"));
        assert!(Gate::load(Some(&dir.path().join("missing.toml")), None).is_err());
        std::fs::create_dir_all(dir.path().join(".pacerelle")).expect("mkdir");
        let file = dir.path().join(PROJECT_POLICY);
        std::fs::write(&file, "default = \"sometimes\"").expect("write");
        let e = Gate::load(None, Some(dir.path())).expect_err("invalid");
        assert!(e.0.contains("not a valid policy"), "{e}");
        std::fs::write(&file, "default = \"deny\"").expect("write");
        let gate = Gate::load(None, Some(dir.path())).expect("valid");
        assert_eq!(gate.file(), Some(file.as_path()));
        assert_eq!(gate.evaluate("Bash", &json!({})).decision, Decision::Deny);
    }

    #[test]
    fn the_expiry_fits_inside_the_budget() {
        assert_eq!(
            Asking::fitted_expiry(Duration::from_secs(540)),
            Duration::from_secs(535)
        );
        assert_eq!(
            Asking::fitted_expiry(Duration::from_secs(3)),
            Duration::from_millis(2400)
        );
        assert_eq!(
            Asking::fitted_expiry(Duration::from_millis(500)),
            Duration::from_secs(1)
        );
        let until = Asking::until(QuestionRequest::yes_no("x"), None);
        assert_eq!(until.budget, Duration::from_secs(660));
        assert!(!until.fit_expiry);
    }

    /// A real relay on 127.0.0.1:0 with a fresh SQLite file (kept while the folder lives), and an agent on it.
    async fn agent_on_a_relay() -> (tempfile::TempDir, AgentClient) {
        let dir = tempfile::tempdir().expect("tempdir");
        let relay = pacerelle_relay::Relay::open(pacerelle_relay::Config {
            database_path: dir.path().join("pacerelle.db"),
            open_registration: true,
            registration_secret: None,
            public_url: None,
            ..Default::default()
        })
        .await
        .expect("relay");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        tokio::spawn(relay.serve(listener, std::future::pending::<()>()));
        let agent = AgentClient::register(&url, "gate", None)
            .await
            .expect("register")
            .with_home(None);
        (dir, agent)
    }

    /// A rule's `approvals` against a real relay: with one owner device the question is refused before it is
    /// asked, naming the count; with two, one yes keeps it open until the budget withdraws it, and two yeses
    /// approve.
    #[tokio::test]
    async fn a_rule_that_needs_two_approvals_asks_two_devices() {
        use crate::DeviceClient;
        use crate::agent::PairingOptions;

        let (_dir, agent) = agent_on_a_relay().await;
        let pair = |name: &'static str| {
            let agent = agent.clone();
            async move {
                let link = agent
                    .create_pairing(PairingOptions::default())
                    .await
                    .expect("pairing");
                DeviceClient::join(&link.link, name).await.expect("join")
            }
        };
        let policy = "default = \"allow\"\n[[rule]]\ntool = \"deploy\"\ndecision = \"ask\"\napprovals = 2";
        let gate = Gate::new(Policy::parse(policy).expect("policy"), None);
        let evaluation = gate.evaluate("deploy", &json!({}));
        assert_eq!((evaluation.decision, evaluation.approvals), (Decision::Ask, 2));
        let question = |text: &str| gate.question_for(text.to_string(), &evaluation);

        let ana = pair("Ana's phone").await;
        let ruling = ask(&agent, Asking::within(question("One?"), Duration::from_secs(5))).await;
        assert_eq!(ruling.conclusion, Conclusion::Error, "{ruling:?}");
        assert!(
            ruling.reason.contains("needs 2 approvals, but only 1 device"),
            "{}",
            ruling.reason
        );

        let ben = pair("Ben's phone").await;
        let open = |device: DeviceClient| async move {
            for _ in 0..200 {
                let list = device
                    .questions(Some(QuestionState::Pending))
                    .await
                    .expect("questions");
                if let Some(q) = list.questions.into_iter().next() {
                    return q.question_id;
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            panic!("no question reached the device");
        };
        // One yes: still open when the budget ends, so withdrawn.
        let waiting = tokio::spawn({
            let agent = agent.clone();
            let request = question("Only one?");
            async move { ask(&agent, Asking::until(request, Some(Duration::from_secs(2)))).await }
        });
        let id = open(ana.clone()).await;
        ana.answer(&id, Answer::Yes).await.expect("ana's yes");
        let ruling = waiting.await.expect("join");
        assert_eq!(ruling.conclusion, Conclusion::Cancelled, "{ruling:?}");
        // Two yeses: approved.
        let waiting = tokio::spawn({
            let agent = agent.clone();
            let request = question("Both?");
            async move { ask(&agent, Asking::until(request, Some(Duration::from_secs(20)))).await }
        });
        let id = open(ana.clone()).await;
        ana.answer(&id, Answer::Yes).await.expect("ana's yes");
        ben.answer(&id, Answer::Yes).await.expect("ben's yes");
        let ruling = waiting.await.expect("join");
        assert_eq!(ruling.conclusion, Conclusion::Approved, "{ruling:?}");
    }

    /// The gate against a real relay: the budget's end and an interruption withdraw the question; a fitted
    /// expiry concludes `expired`. (The same scenarios through every adapter: `pacerelle-cli/tests/it/gate_table.rs`.)
    #[tokio::test]
    async fn an_open_question_is_withdrawn_when_the_budget_ends_or_the_gate_is_dropped() {
        use crate::DeviceClient;
        use crate::agent::PairingOptions;

        let (_dir, agent) = agent_on_a_relay().await;
        let link = agent
            .create_pairing(PairingOptions::default())
            .await
            .expect("pairing");
        let device = DeviceClient::join(&link.link, "phone").await.expect("join");
        let cancelled = |id: String| {
            let device = device.clone();
            async move {
                for _ in 0..200 {
                    let list = device
                        .questions(Some(QuestionState::Cancelled))
                        .await
                        .expect("questions");
                    if list.questions.iter().any(|q| q.question_id == id) {
                        return true;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                false
            }
        };

        // The budget ends first: the question keeps its own expiry, and is withdrawn.
        let ruling = ask(
            &agent,
            Asking::until(
                QuestionRequest::yes_no("Budget?").with_id("q_budget"),
                Some(Duration::from_secs(1)),
            ),
        )
        .await;
        assert_eq!(ruling.conclusion, Conclusion::Cancelled, "{ruling:?}");
        assert!(ruling.reason.contains("withdrawn") && !ruling.lets_run());
        assert!(cancelled("q_budget".into()).await);

        // Fitted inside the budget, the question expires first.
        let ruling = ask(
            &agent,
            Asking::within(QuestionRequest::yes_no("Fitted?"), Duration::from_secs(2)),
        )
        .await;
        assert_eq!(ruling.conclusion, Conclusion::Expired, "{ruling:?}");

        // Interrupted: the future is dropped while it waits.
        let gate = tokio::spawn({
            let agent = agent.clone();
            async move {
                ask(
                    &agent,
                    Asking::until(QuestionRequest::yes_no("Interrupted?").with_id("q_drop"), None),
                )
                .await
            }
        });
        for _ in 0..200 {
            let open = device
                .questions(Some(QuestionState::Pending))
                .await
                .expect("questions");
            if !open.questions.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        gate.abort();
        assert!(gate.await.is_err(), "aborted");
        assert!(cancelled("q_drop".into()).await, "withdrawn on interruption");
    }
}
