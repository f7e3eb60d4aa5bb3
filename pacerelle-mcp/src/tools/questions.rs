//! `ask_user`, `wait_for_answer`, `send_notification` and `cancel_question`: the human in the loop.
//!
//! The person answers on their phone, maybe long after the question was asked, so asking returns at once and
//! waiting follows the same rules as `wait_for_messages` (bounded, with progress, cancellable).
//!
//! **No answer is a no.** This adapter never decides whether the agent may act: `approved` is the client's
//! verdict ([`pacerelle_client::agent::AnswerOutcome::approved`], decided by `pacerelle_core::question::verdict`
//! with this agent's keys and clock), copied as is. Every other path — pending, expired, cancelled, a no, an
//! answer that did not open, a failure to read the answer — is reported as not approved, and its text tells
//! the model not to act. None of these tools needs the agent's lease.
//!
//! **One id, one question.** Each question `ask_user` asked is remembered ([`pacerelle_client::agent::AskedStore`],
//! kept in a file so that a restart keeps it), and `wait_for_answer` judges only that exact question under its
//! id, naming its text: an answer to another question served under the id is a `question_id_conflict`, and an
//! id this server did not ask is refused (`question_not_asked_here`) instead of read.

use std::time::Duration;

use crate::tools::output_schema;
use pacerelle_client::core::question::{self, DEFAULT_EXPIRES_SECONDS};
use pacerelle_client::{
    Answer, Channel, Error, ErrorKind, Level, QuestionKind, QuestionState, agent::AnswerOutcome,
    agent::AskedQuestion, agent::NOT_ASKED_HERE, agent::QuestionRequest, gate::Conclusion,
};
use rmcp::ErrorData as McpError;
use rmcp::handler::server::tool::{InputResponses, RequestState};
use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock, RequestMetaObject};
use rmcp::service::RequestContext;
use rmcp::{Peer, RoleServer, tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::here;
use crate::server::{PacerelleServer, State};
use crate::tools::users::{is_user_failure, user_failure};
use crate::tools::{Args, check_id, failure, input_schema, lock, output, output_reading, relay_failure};
use crate::wait::{ANSWER_GRACE, Parked, Progress, park, timeout_of};

/// Longest title of a notification, in bytes.
pub const MAX_TITLE_BYTES: usize = 1024;

/// What kind of answer a question expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "snake_case")]
pub enum KindArg {
    /// Yes or no: to get approval before an action. Only an explicit yes approves.
    YesNo,
    /// One of `options` (several when `multiple` is true).
    Choice,
    /// A written answer.
    Text,
}

impl From<KindArg> for QuestionKind {
    fn from(kind: KindArg) -> Self {
        match kind {
            KindArg::YesNo => QuestionKind::YesNo,
            KindArg::Choice => QuestionKind::Choice,
            KindArg::Text => QuestionKind::Text,
        }
    }
}

/// How much a notification matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "snake_case")]
pub enum LevelArg {
    /// For information (the default).
    Info,
    /// Something needs the person's attention.
    Warning,
    /// Something failed.
    Error,
    /// A task is done.
    Success,
}

impl From<LevelArg> for Level {
    fn from(level: LevelArg) -> Self {
        match level {
            LevelArg::Info => Level::Info,
            LevelArg::Warning => Level::Warning,
            LevelArg::Error => Level::Error,
            LevelArg::Success => Level::Success,
        }
    }
}

/// Arguments of `ask_user`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AskArgs {
    /// The question, short and self-contained, as the person will read it on their phone: what you are
    /// about to do and on what ("Push 3 commits to origin/main?").
    pub question: String,
    /// `yes_no` (approval before an action), `choice` (among `options`) or `text` (a written answer).
    pub kind: KindArg,
    /// The options of a `choice` question: 2 to 20, distinct, not blank. Only for `choice`.
    pub options: Option<Vec<String>>,
    /// For `choice` only: whether several options may be chosen (default false).
    pub multiple: Option<bool>,
    /// More context shown under the question: the exact command, the files, what could go wrong.
    pub details: Option<String>,
    /// How long the question may be answered, in seconds (1 to 604800 = 7 days, default 600). Past it the
    /// question expires, which counts as a no.
    #[schemars(range(min = 1, max = 604_800))]
    pub expires_in_seconds: Option<i64>,
    /// Your own id for this question, to ask again safely after an uncertain failure: the same id never
    /// asks twice (the first question with that id is kept). One is drawn when omitted.
    pub question_id: Option<String>,
    /// Also ask at this computer, in the host's own dialog, when the host supports it (MCP elicitation):
    /// the first answer, here or on the phone, counts, and the other is withdrawn. Default: the server's
    /// setting (PACERELLE_MCP_ALSO_ASK_HERE, off unless set).
    pub also_ask_here: Option<bool>,
    /// Partner mode: the externalId of the user to ask (connected with connect_user): only that user's
    /// devices see the question and only their answer counts. Omitted: the person who owns this agent.
    pub user_id: Option<String>,
    /// For a yes/no question about something that matters most: how many distinct owner devices must
    /// approve, each with a signed yes (one no denies at once). Default 1. Answered on devices only.
    #[schemars(range(min = 1, max = 10))]
    pub approvals: Option<u32>,
    /// Ask and wait for the answer in this one call, for a host that runs tool calls as MCP tasks (it
    /// declared the tasks extension): the call returns a task at once, and its result, once the question
    /// settles, is this result with the answer's fields (those of wait_for_answer: state, approved, answer, …).
    /// A host without tasks ignores it: call wait_for_answer.
    pub wait: Option<bool>,
}

/// Arguments of `wait_for_answer`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WaitAnswerArgs {
    /// The questionId returned by ask_user.
    pub question_id: String,
    /// How long to wait for the answer, in seconds (0 to 55, default 30). The call returns by then with
    /// state "pending" if the person has not answered yet.
    #[schemars(range(min = 0, max = 55))]
    pub timeout_seconds: Option<i64>,
}

/// Arguments of `send_notification`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NotifyArgs {
    /// What to tell the person.
    pub text: String,
    /// A short title.
    pub title: Option<String>,
    /// `info` (default), `warning`, `error` or `success`.
    pub level: Option<LevelArg>,
    /// Partner mode: the externalId of the user to notify (connected with connect_user): only that user's
    /// devices receive it. Omitted: the person who owns this agent.
    pub user_id: Option<String>,
}

/// Arguments of `cancel_question`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CancelArgs {
    /// The questionId returned by ask_user.
    pub question_id: String,
}

/// The result of `ask_user`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AskResult {
    /// Pass it to wait_for_answer (and cancel_question).
    pub question_id: String,
    /// When the question expires (RFC 3339): after it, no answer counts, and it is a no. For a resumed
    /// question, the expiry set when it was first asked.
    pub expires_at: String,
    /// True when questionId already named this same question: nothing new was asked, the question asked
    /// earlier goes on (with its answer, if it has one), and expiresAt is its first expiry (this call's
    /// expiresInSeconds does not change it).
    pub resumed: bool,
    /// True when the question is also asked at this computer (the host's dialog): an answer there counts
    /// like the phone's.
    pub asked_here: bool,
    /// Why it was not asked here too, when `alsoAskHere` asked for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_asked_here: Option<String>,
}

/// The output schema of `ask_user`: the question asked, and, when it was asked with `wait` by a host that runs
/// it as a task ([`crate::tasks`]), the answer once the question settled, with the fields of `wait_for_answer`
/// at the same level (the two share `questionId` and `expiresAt`).
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AskOutput {
    /// The question asked.
    #[serde(flatten)]
    pub asked: AskResult,
    /// With `wait` in a task: the answer as wait_for_answer gives it. Absent otherwise.
    #[serde(flatten)]
    pub settled: Option<AnswerResult>,
}

/// Where a question stands (its state), as this agent reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "snake_case")]
pub enum QuestionStateWord {
    /// No answer yet: call wait_for_answer again with the same questionId. Not a yes.
    Pending,
    /// The person answered (see `answer` and `approved`).
    Answered,
    /// Nobody answered in time: a no. Do not act.
    Expired,
    /// The question was withdrawn: a no. Do not act.
    Cancelled,
}

impl From<QuestionState> for QuestionStateWord {
    fn from(state: QuestionState) -> Self {
        match state {
            QuestionState::Pending => QuestionStateWord::Pending,
            QuestionState::Answered => QuestionStateWord::Answered,
            QuestionState::Expired => QuestionStateWord::Expired,
            QuestionState::Cancelled => QuestionStateWord::Cancelled,
        }
    }
}

/// An answer: `"yes"` or `"no"` for a yes_no question, the written text for a text question, the list of
/// chosen options for a choice question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(inline)]
#[serde(untagged)]
pub enum AnswerValue {
    /// `"yes"` or `"no"` (yes_no), or the written text (text).
    Text(String),
    /// The chosen options (choice), always a list.
    Options(Vec<String>),
}

impl From<&Answer> for AnswerValue {
    fn from(answer: &Answer) -> Self {
        match answer {
            Answer::Yes => AnswerValue::Text("yes".into()),
            Answer::No => AnswerValue::Text("no".into()),
            Answer::Options(chosen) => AnswerValue::Options(chosen.clone()),
            Answer::Text(text) => AnswerValue::Text(text.clone()),
        }
    }
}

/// Where an answer was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "snake_case")]
pub enum ChannelWord {
    /// On the person's paired phone.
    Phone,
    /// At this computer, in the host's dialog.
    Host,
}

impl From<Channel> for ChannelWord {
    fn from(channel: Channel) -> Self {
        match channel {
            Channel::Phone => ChannelWord::Phone,
            Channel::Host => ChannelWord::Host,
        }
    }
}

/// The result of `wait_for_answer` and `cancel_question`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AnswerResult {
    /// The question.
    pub question_id: String,
    /// The text of the question this server asked under questionId: the one judged. An answer counts only
    /// for exactly that question. Null only when this server did not ask it (cancel_question).
    pub question: Option<String>,
    /// The question's state: `pending`, `answered`, `expired` or `cancelled`.
    pub state: QuestionStateWord,
    /// What this agent concludes, the same word as the PreToolUse hook and Python's `NotApproved.reason`:
    /// `approved` (an authenticated yes), `answered` (options chosen or a text written), `denied` (a no),
    /// `expired`, `cancelled`, `rejected` (an answer that could not be authenticated) or `pending`.
    pub conclusion: Conclusion,
    /// True only for an explicit yes (or chosen options) that opened with the answering phone's key, bound
    /// to this question, given before its expiry. Act only when it is true.
    pub approved: bool,
    /// `"yes"`/`"no"`, the chosen options (a list), or the written text; null when no answer opened.
    pub answer: Option<AnswerValue>,
    /// The id of the device that answered (`dv_…`, as everywhere else); null without an answer that opened.
    pub answered_by: Option<String>,
    /// That device's name, as the relay reports it (for wording only); null without an answer that opened.
    pub answered_by_name: Option<String>,
    /// When the relay accepted the answer (RFC 3339, the relay's clock, as the phone shows it); null without
    /// an answer that opened.
    pub answered_at: Option<String>,
    /// When the person answered (RFC 3339), by the answering device's clock, as sealed in its answer.
    pub device_answered_at: Option<String>,
    /// True when the answer carries the answering device's own signature, checked with the key the agent
    /// pinned for it: it then appears, verifiable, in `pacerelle audit export --format signed`.
    pub signed: bool,
    /// Where the answer was given: `phone`, or `host` (at this computer, in the host's dialog, for a
    /// question asked with alsoAskHere); null without an answer that opened.
    pub channel: Option<ChannelWord>,
    /// When the question expires (RFC 3339). Null only when the relay did not answer in time.
    pub expires_at: Option<String>,
    /// Set when the relay reported an answer that could not be authenticated (why): not approved, whatever
    /// it says, and no valid answer can follow.
    pub rejected: Option<String>,
}

impl From<&AnswerOutcome> for AnswerResult {
    fn from(o: &AnswerOutcome) -> Self {
        AnswerResult {
            question_id: o.question_id.clone(),
            question: None,
            state: o.state.into(),
            conclusion: Conclusion::of(o),
            // The verdict, copied: never decided here.
            approved: o.approved,
            answer: o.answer.as_ref().map(AnswerValue::from),
            answered_by: o.answered_by.clone(),
            answered_by_name: o.answered_by_name.clone(),
            answered_at: o.answered_at.map(|t| t.to_string()),
            device_answered_at: o.device_answered_at.map(|t| t.to_string()),
            signed: o.signed,
            channel: o.channel.map(ChannelWord::from),
            expires_at: Some(o.expires_at.to_string()),
            rejected: o.rejected.clone(),
        }
    }
}

/// The result of `send_notification`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NotifyResult {
    /// The notification's id.
    pub notification_id: String,
    /// When the relay stored it (RFC 3339).
    pub created_at: String,
}

/// `expiresInSeconds`, checked by the one rule ([`question::check_expiry`]) before it becomes a duration.
fn expires_in(seconds: Option<i64>) -> Result<Duration, McpError> {
    let seconds = seconds.unwrap_or(DEFAULT_EXPIRES_SECONDS as i64);
    question::check_expiry(seconds).map_err(|e| invalid(format!("expiresInSeconds: {e}")))?;
    Ok(Duration::from_secs(seconds.unsigned_abs()))
}

fn invalid(text: impl Into<String>) -> McpError {
    McpError::invalid_params(text.into(), None)
}

/// Checks `ask_user`'s arguments and builds the request (with an id drawn here when none is given, so that
/// a failure can name the id to retry with).
pub fn question_request(args: AskArgs) -> Result<QuestionRequest, McpError> {
    let expires = expires_in(args.expires_in_seconds)?;
    let mut request = QuestionRequest {
        grants: None,
        question: args.question,
        kind: args.kind.into(),
        options: args.options.unwrap_or_default(),
        multiple: args.multiple.unwrap_or(false),
        details: args.details,
        expires_in: expires,
        question_id: args.question_id,
        channels: Vec::new(),
        user: args.user_id,
        approvals: args.approvals.unwrap_or(1),
    };
    // The client's checks, with its messages as they are.
    request.check().map_err(|e| match e {
        Error::InvalidInput(message) => invalid(message),
        other => invalid(other.to_string()),
    })?;
    request.ensure_id();
    Ok(request)
}

/// Why a question for a user is not asked at this computer too.
const FOR_USER_NOT_HERE: &str = "a question for a user is answered on that user's devices only";

/// Why a question that needs several approvals is not asked at this computer too.
const SEVERAL_NOT_HERE: &str = "a question that needs several approvals is answered on owner devices only";

/// The sentence every path that is not an approval ends with.
const NOT_A_YES: &str = "Until wait_for_answer returns approved: true, this is not a yes: do not do what you \
                         asked about.";

/// What the model should do with an outcome: `result`, and the answer as it opened (`None` without one).
/// The case comes from the client's [`Conclusion`] (the one sorting of outcomes, shared with the hook and
/// Python), never from the answer's words; only the wording is this adapter's.
pub fn answer_next_step(result: &AnswerResult, answer: Option<&Answer>) -> String {
    let id = &result.question_id;
    let by = result
        .answered_by_name
        .as_deref()
        .or(result.answered_by.as_deref())
        .map(|d| format!(" on \"{d}\""))
        .or_else(|| (result.channel == Some(ChannelWord::Host)).then(|| " here at the computer".to_string()))
        .unwrap_or_default();
    let to = result
        .question
        .as_deref()
        .map(|q| format!(" to \"{}\"", quoted(q)))
        .unwrap_or_default();
    match result.conclusion {
        Conclusion::Rejected => match &result.rejected {
            Some(why) => format!(
                "An answer was reported for question \"{id}\" but it could not be authenticated as the \
                 person's ({why}). It is NOT approved: do not act. Tell the person (reply or \
                 send_notification) that an answer was refused; no valid answer can follow, so ask a new \
                 question if you still need a decision."
            ),
            None => format!("Not approved: do not act. {NOT_A_YES}"),
        },
        Conclusion::Pending => {
            let until = result
                .expires_at
                .as_deref()
                .map(|t| format!(" (the question expires at {t})"))
                .unwrap_or_default();
            format!(
                "No answer yet{until}. Call wait_for_answer again with questionId \"{id}\". Do not act \
                 meanwhile: pending is not a yes."
            )
        }
        Conclusion::Expired => "Nobody answered before the question expired: treat it as a NO and do \
                                 not act. (It is not a refusal by the person, only no answer: tell them \
                                 you did not proceed, and ask again later if it is still needed.)"
            .to_string(),
        Conclusion::Cancelled => {
            "The question was cancelled: treat it as a NO and do not act on it.".to_string()
        }
        Conclusion::Approved => format!(
            "The person answered YES{by}{to}: approved. Proceed with exactly what you asked about, nothing \
             more."
        ),
        Conclusion::Denied => format!(
            "The person answered NO{by}{to}: not approved. Do not act; carry on without it or ask them what \
             to do instead."
        ),
        Conclusion::Answered => match answer {
            Some(Answer::Options(chosen)) if result.approved => format!(
                "The person chose {}{by}: proceed with that choice only.",
                chosen
                    .iter()
                    .map(|c| format!("\"{c}\""))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            _ => format!(
                "The person wrote an answer{by} (see answer): use it as their reply to your question. A \
                 written answer is not an approval: before a risky action, ask a yes_no question."
            ),
        },
        // Anything else is not an approval: fail closed.
        _ => format!("Not approved: do not act. {NOT_A_YES}"),
    }
}

/// A question's result: a written answer (up to 64 KiB) is content the model must read; a yes, a no or
/// chosen options are already in `next`.
fn answer_output(
    result: &AnswerResult,
    next: String,
    answer: Option<&Answer>,
) -> Result<CallToolResult, McpError> {
    match answer {
        Some(Answer::Text(text)) => output_reading(
            result,
            next,
            format!(
                "The written answer: structuredContent.answer ({} bytes)",
                text.len()
            ),
        ),
        Some(Answer::Options(_)) if !result.approved => {
            output_reading(result, next, "The chosen options: structuredContent.answer")
        }
        _ => output(result, next),
    }
}

/// Adds to a tool error that nothing was approved.
fn not_approved(
    result: Result<CallToolResult, McpError>,
    question_id: &str,
) -> Result<CallToolResult, McpError> {
    result.map(|mut r| {
        if r.is_error == Some(true) {
            r.content.push(ContentBlock::text(format!(
                "No answer could be read for question \"{question_id}\", so it is not approved: do not act \
                 on it. Call wait_for_answer again with the same questionId once the problem is solved."
            )));
        }
        r
    })
}

/// At most this many characters of a question's text are quoted in a text for the model (the whole text is
/// in the result's `question`).
const QUOTED_CHARS: usize = 200;

/// A question's text as quoted in a text for the model: its first [`QUOTED_CHARS`] characters.
pub(crate) fn quoted(text: &str) -> String {
    match text.char_indices().nth(QUOTED_CHARS) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

/// What `wait_for_answer` returns for what it read of the question `asked` (the one this server asked under
/// its id): the answer as it stands, naming that question, or why none could be read (never approved then).
/// The plain call and its task ([`crate::tasks`]) both end here, so a task's result is exactly the plain
/// call's.
pub(crate) fn answer_call_result(
    relay_url: &str,
    asked: &AskedQuestion,
    read: Result<AnswerOutcome, Error>,
) -> Result<CallToolResult, McpError> {
    let question_id = asked.question_id.as_str();
    match read {
        Ok(outcome) => {
            let result = AnswerResult {
                question: Some(asked.question.clone()),
                ..AnswerResult::from(&outcome)
            };
            let next = answer_next_step(&result, outcome.answer.as_ref());
            answer_output(&result, next, outcome.answer.as_ref())
        }
        Err(e) if e.kind() == ErrorKind::NotFound => unknown_question(question_id),
        Err(e) if e.kind() == ErrorKind::QuestionIdConflict => another_question_served(asked),
        Err(e) => not_approved(relay_failure(relay_url, e), question_id),
    }
}

/// The relay serves, under the id of a question this server asked, another question (its own sealed copy
/// is not the one asked): whatever answer it carries, nothing is approved.
fn another_question_served(asked: &AskedQuestion) -> Result<CallToolResult, McpError> {
    let id = &asked.question_id;
    failure(format!(
        "The relay serves another question under questionId \"{id}\" than the one this server asked \
         (\"{}\") ({}). Its answer, whatever it says, is NOT an approval of what you asked: nothing is \
         approved, do not act on it. One id carries one question: to ask again, call ask_user without \
         questionId (or with a new one).",
        quoted(&asked.question),
        pacerelle_client::core::wire::code::QUESTION_ID_CONFLICT
    ))
}

/// A wait on an id this server did not ask (it remembers no question under it): it cannot be bound to the
/// question asked, so no answer is reported for it, and nothing is approved.
pub(crate) fn not_asked_here(question_id: &str) -> Result<CallToolResult, McpError> {
    failure(format!(
        "Question \"{question_id}\" was not asked by this server ({NOT_ASKED_HERE}): it keeps the \
         questions it asked, and this id is not one of them, so it cannot tell which question an answer \
         under it was given to, and it reports none. Nothing is approved: do not act on it. Pass the \
         questionId that ask_user returned. If you asked this exact question earlier under this id (from \
         another program, or before this server kept its questions), call ask_user again with the same \
         question and the same questionId: that resumes it, with its answer if it has one, and binds it \
         here."
    ))
}

/// `ask_user` called again on 2026-07-28 with `request_state`, the state of the input request its first call
/// returned, and the host's answer to it (`responses`): the answer is recorded for the question asked then
/// (the first answer wins), and the result is the ask's, saying what became of the answer here. A state this
/// server did not give, or whose question was answered here already, or another question in the arguments,
/// is refused (`invalid_params`): a request state never answers a question it was not given for.
async fn answered_here(
    state: &State,
    args: &AskArgs,
    request_state: &str,
    responses: Option<&rmcp::model::InputResponses>,
) -> Result<CallToolResult, McpError> {
    let refused = || {
        McpError::invalid_params(
            "requestState is not one this server gave for a question asked at the computer and not \
             answered yet: call ask_user without it",
            None,
        )
    };
    let question_id = here::question_of_state(request_state).ok_or_else(refused)?;
    if !lock(&state.asking_here).remove(question_id) {
        return Err(refused());
    }
    let Some(asked) = state
        .asked
        .get(question_id)
        .filter(|asked| asked.question == args.question)
    else {
        return Err(refused());
    };
    let id = &asked.question_id;
    let said = match here::answered_here(&state.client, &asked, responses).await {
        here::HereOutcome::Recorded => {
            "The person answered here at the computer; it is recorded on the relay (the phone shows it)."
                .to_string()
        }
        here::HereOutcome::TooLate => "The answer given here came after the question closed (answered on \
                                       the phone first, expired or cancelled): it does not count."
            .to_string(),
        here::HereOutcome::NotAnswered => {
            "The person did not answer here; the phone can still answer.".to_string()
        }
        here::HereOutcome::Failed(why) => {
            format!("The answer given here could not be recorded ({why}); the phone can still answer.")
        }
    };
    output(
        &AskResult {
            question_id: id.clone(),
            expires_at: asked.expires_at.to_string(),
            resumed: false,
            asked_here: true,
            not_asked_here: None,
        },
        format!(
            "{said} Now call wait_for_answer with questionId \"{id}\" for the answer that counts. Act only if \
             it returns approved: true; expired, cancelled or a no means do not act."
        ),
    )
}

fn no_device_text(what: &str) -> String {
    format!(
        "No phone is paired with this agent to receive {what}, so nothing was sent and nobody can answer. \
         Do not act on anything that needed the person's approval. Ask them to pair their phone (for example \
         with `pacerelle pair` on this computer), then try again."
    )
}

fn unknown_question(question_id: &str) -> Result<CallToolResult, McpError> {
    failure(format!(
        "No question \"{question_id}\" for this agent: pass the questionId returned by ask_user. Nothing is \
         approved."
    ))
}

#[tool_router(router = questions_router, vis = "pub(crate)")]
impl PacerelleServer {
    #[tool(
        name = "ask_user",
        input_schema = input_schema::<AskArgs>(),
        description = "Ask the person a question on their phone, end-to-end encrypted, and return at once \
                       with its questionId and expiresAt; then call wait_for_answer. The person may be far \
                       from the keyboard: they answer when they see it. Use kind yes_no to get approval \
                       BEFORE a risky or irreversible action (deleting, pushing, deploying, paying, sending \
                       something outside), choice to pick among options, text for a written answer. Put the \
                       exact command or files in details. No answer is a no: a question that expires never \
                       becomes a yes. The same questionId never asks twice. With alsoAskHere the question \
                       is also asked in this host's own dialog when it supports that: the first answer, \
                       here or on the phone, counts. Partner mode: userId (an externalId from connect_user) asks \
                       that user on their own devices instead. Does not need the lease.",
        output_schema = output_schema::<AskOutput>(),
        annotations(
            title = "Ask the person on their phone",
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = true
        )
    )]
    pub async fn ask_user(
        &self,
        Args(args): Args<AskArgs>,
        context: RequestContext<RoleServer>,
        RequestState(request_state): RequestState,
        InputResponses(responses): InputResponses,
    ) -> Result<CallToolResponse, McpError> {
        let state = &self.state;
        // 2026-07-28: the call again, with the answer to the input request the first one returned.
        if let Some(request_state) = request_state {
            return answered_here(state, &args, &request_state, responses.as_ref())
                .await
                .map(CallToolResponse::Complete);
        }
        let peer = context.peer.clone();
        // A user's question is answered on that user's devices only: the person at this computer is not them.
        let for_user = args.user_id.is_some();
        // Several approvals come from devices only: the person here is one of them at most.
        let several = args.approvals.is_some_and(|n| n > 1);
        let wanted_here = !for_user && !several && args.also_ask_here.unwrap_or(state.also_ask_here);
        let way = here::way(&context);
        let not_here = if wanted_here {
            way.err()
        } else if for_user && args.also_ask_here == Some(true) {
            Some(FOR_USER_NOT_HERE)
        } else if several && args.also_ask_here == Some(true) {
            Some(SEVERAL_NOT_HERE)
        } else {
            None
        };
        let here = wanted_here && not_here.is_none();
        let request = question_request(args)?.answered_at_host(here);
        let question_id = request.question_id.clone().unwrap_or_default();
        let user = request.user.clone();
        let (text, kind) = (request.question.clone(), request.kind);
        let form = here.then(|| here::Form {
            message: match request.details.as_deref().filter(|d| !d.trim().is_empty()) {
                Some(details) => format!("{}\n\n{details}", request.question),
                None => request.question.clone(),
            },
            kind: request.kind,
            options: request.options.clone(),
            multiple: request.multiple,
        });
        let result = match state.client.ask_user(request).await {
            Ok(asked) => {
                // Only a question the relay stored (or resumed) is remembered: every wait on its id judges it.
                if let Err(e) = state.asked.record(&asked, &text, kind) {
                    tracing::warn!(
                        question_id = %asked.question_id,
                        error = %e,
                        "cannot keep the question asked on disk; this process remembers it, a restart will not"
                    );
                }
                let mut input = None;
                let (where_, not_asked_here) = match (form, not_here) {
                    (Some(form), _) => {
                        if way == Ok(here::Way::InputRequest) {
                            input = here::input_required(&form, &asked.question_id);
                            if input.is_some() {
                                lock(&state.asking_here).insert(asked.question_id.clone());
                            }
                        } else {
                            here::spawn(state.client.clone(), peer, asked.clone(), form);
                        }
                        (
                            "the person's phone and here at the computer (the first answer counts)",
                            None,
                        )
                    }
                    (None, Some(why)) => ("the person's phone only", Some(why.to_string())),
                    (None, None) => ("the person's phone", None),
                };
                let asked_here = where_.contains("here");
                let where_ = match &user {
                    Some(user) => format!("the devices of user \"{user}\" only"),
                    None => where_.to_string(),
                };
                let sent = if asked.resumed {
                    format!(
                        "Question \"{}\" was already asked, this same question under this questionId: this \
                         call resumed it and sent nothing new (to {where_}). It expires at {}, the expiry set \
                         when it was first asked (expiresInSeconds does not change it).",
                        asked.question_id, asked.expires_at
                    )
                } else {
                    format!("Question sent to {where_}; it expires at {}.", asked.expires_at)
                };
                if let Some(input) = input {
                    // 2026-07-28: the host asks here, then calls again with the answer (answered_here).
                    return Ok(CallToolResponse::InputRequired(input));
                }
                let next = format!(
                    "{sent} Now call wait_for_answer with questionId \"{}\", again while it is pending. Act \
                     only if it returns approved: true; expired, cancelled or a no means do not act.",
                    asked.question_id
                );
                output(
                    &AskResult {
                        question_id: asked.question_id,
                        expires_at: asked.expires_at.to_string(),
                        resumed: asked.resumed,
                        asked_here,
                        not_asked_here,
                    },
                    next,
                )
            }
            Err(e) if user.is_some() && is_user_failure(&e) => user_failure(
                &state.relay_url,
                user.as_deref().unwrap_or_default(),
                "question",
                "Nothing was asked, so nothing is approved: do not act on what needed their approval.",
                e,
            ),
            Err(e) if e.kind() == ErrorKind::NoDevice => failure(no_device_text("a question")),
            Err(e) if e.kind() == ErrorKind::QuestionIdConflict => failure(format!(
                "questionId \"{question_id}\" already names a different question, so this one was NOT asked and \
                 nothing is approved. One id carries one question: call ask_user again without questionId (or \
                 with a new one). The same question under the same id resumes it."
            )),
            Err(e) if e.is_transient() => {
                let mut result = relay_failure(&state.relay_url, e)?;
                result.content.push(ContentBlock::text(format!(
                    "The question may or may not have reached the phone. To try again without asking twice, \
                     call ask_user with the same arguments and questionId \"{question_id}\". Until an answer \
                     is approved, do not act."
                )));
                Ok(result)
            }
            Err(e) => relay_failure(&state.relay_url, e),
        };
        result.map(CallToolResponse::Complete)
    }

    #[tool(
        name = "wait_for_answer",
        input_schema = input_schema::<WaitAnswerArgs>(),
        description = "Wait for the person's answer to a question asked with ask_user. Returns within \
                       timeoutSeconds (default 30, at most 55) with state pending, answered, expired or \
                       cancelled, conclusion, approved, answer (\"yes\"/\"no\", the chosen options, or \
                       the text), question (the text of the question asked under questionId, the one \
                       judged), answeredBy (the device id), answeredByName, answeredAt (the relay's clock), \
                       deviceAnsweredAt (the phone's) and signed (the phone's own signature checked). \
                       pending: call again with the same questionId. expired or cancelled: treat it as a no \
                       and do not act. answered with approved false (a no): do not act. Proceed only when \
                       approved is true. An answer that could not be authenticated is never approved, nor \
                       is a questionId this server did not ask with ask_user.",
        output_schema = output_schema::<AnswerResult>(),
        annotations(
            title = "Wait for the person's answer",
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = true
        )
    )]
    pub async fn wait_for_answer(
        &self,
        Args(args): Args<WaitAnswerArgs>,
        meta: RequestMetaObject,
        peer: Peer<RoleServer>,
        ct: CancellationToken,
    ) -> Result<CallToolResult, McpError> {
        check_id("question id", &args.question_id)?;
        let timeout = timeout_of(args.timeout_seconds)?;
        let total = Duration::from_secs(timeout);
        let state = &self.state;
        // Only a question this server asked is judged, and only that exact question under its id.
        let Some(asked) = state.asked.get(&args.question_id) else {
            return not_asked_here(&args.question_id);
        };
        let progress = meta
            .get_progress_token()
            .map(|token| Progress::new(peer, token, total, "Waiting for the person's answer on the phone"));
        let bound = asked.asked();
        let work = state.client.wait_for_answer_to(&bound, total);
        match park(work, total + ANSWER_GRACE, &ct, progress).await {
            Parked::Done(read) => answer_call_result(&state.relay_url, &asked, read),
            Parked::Deadline => {
                // The relay did not answer in time: nothing was read, so nothing is approved.
                let result = AnswerResult {
                    question_id: args.question_id,
                    question: Some(asked.question),
                    state: QuestionStateWord::Pending,
                    conclusion: Conclusion::Pending,
                    approved: false,
                    answer: None,
                    answered_by: None,
                    answered_by_name: None,
                    answered_at: None,
                    device_answered_at: None,
                    signed: false,
                    channel: None,
                    expires_at: None,
                    rejected: None,
                };
                let next = answer_next_step(&result, None);
                output(&result, next)
            }
            Parked::Cancelled => failure(format!(
                "The wait was cancelled. No answer was read, so nothing is approved. {NOT_A_YES}"
            )),
        }
    }

    #[tool(
        name = "send_notification",
        input_schema = input_schema::<NotifyArgs>(),
        description = "Send a notification to the person's phone, end-to-end encrypted; no answer is \
                       expected: a task finished, an error, something they should know. level: info \
                       (default), warning, error or success. It does not wait and approves nothing: to get a \
                       decision, use ask_user. Each call sends one more notification. userId (Partner mode) \
                       notifies that user's devices instead. Does not need the lease.",
        output_schema = output_schema::<NotifyResult>(),
        annotations(
            title = "Notify the person's phone",
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = true
        )
    )]
    pub async fn send_notification(&self, Args(args): Args<NotifyArgs>) -> Result<CallToolResult, McpError> {
        let title = args.title.as_deref().map(str::trim).filter(|t| !t.is_empty());
        if title.is_some_and(|t| t.len() > MAX_TITLE_BYTES) {
            return Err(invalid(format!("title is longer than {MAX_TITLE_BYTES} bytes")));
        }
        let level = args.level.map_or(Level::Info, Level::from);
        let state = &self.state;
        let user = args.user_id.as_deref();
        match state.client.notify_user(user, &args.text, title, level).await {
            Ok(stored) => output(
                &NotifyResult {
                    notification_id: stored.id,
                    created_at: stored.created_at.to_string(),
                },
                match user {
                    Some(user) => format!(
                        "Notification sent to the devices of user \"{user}\". It expects no answer: carry on."
                    ),
                    None => "Notification sent to the person's phone. It expects no answer: carry on.".into(),
                },
            ),
            Err(e) if user.is_some() && is_user_failure(&e) => user_failure(
                &state.relay_url,
                user.unwrap_or_default(),
                "notification",
                "Nothing was sent.",
                e,
            ),
            Err(e) if e.kind() == ErrorKind::NoDevice => failure(no_device_text("a notification")),
            Err(e) => relay_failure(&state.relay_url, e),
        }
    }

    #[tool(
        name = "cancel_question",
        input_schema = input_schema::<CancelArgs>(),
        description = "Withdraw a question that is still pending (no longer needed, or decided otherwise): \
                       the phone shows it cancelled and any later answer is refused. A cancelled question is \
                       a no. Cancelling twice changes nothing. Too late once it is answered or expired. Does \
                       not need the lease.",
        output_schema = output_schema::<AnswerResult>(),
        annotations(
            title = "Cancel a question",
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = true
        )
    )]
    pub async fn cancel_question(&self, Args(args): Args<CancelArgs>) -> Result<CallToolResult, McpError> {
        check_id("question id", &args.question_id)?;
        let id = &args.question_id;
        let state = &self.state;
        match state.client.cancel_question(id).await {
            Ok(outcome) => {
                let result = AnswerResult {
                    question: state.asked.get(id).map(|q| q.question),
                    ..AnswerResult::from(&outcome)
                };
                let next = if result.conclusion == Conclusion::Cancelled {
                    "Question cancelled: the phone shows it withdrawn and no answer will count. It is a no: \
                     do not act on it."
                        .to_string()
                } else {
                    answer_next_step(&result, outcome.answer.as_ref())
                };
                answer_output(&result, next, outcome.answer.as_ref())
            }
            Err(e) if e.kind() == ErrorKind::NotFound => unknown_question(id),
            Err(e) if e.closed_state() == Some(QuestionState::Answered) => failure(format!(
                "Too late to cancel: question \"{id}\" is already answered. Call wait_for_answer with \
                 questionId \"{id}\" to read the answer; act on it only if approved is true."
            )),
            Err(e) if e.closed_state() == Some(QuestionState::Expired) => failure(format!(
                "Too late to cancel: question \"{id}\" already expired, which counts as a no. Nothing to \
                 withdraw; do not act on it."
            )),
            Err(e) => relay_failure(&state.relay_url, e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pacerelle_client::Timestamp;
    use rmcp::model::ErrorCode;

    fn ask(kind: KindArg) -> AskArgs {
        AskArgs {
            question: "deploy?".into(),
            kind,
            options: None,
            multiple: None,
            details: None,
            expires_in_seconds: None,
            question_id: None,
            also_ask_here: None,
            user_id: None,
            approvals: None,
            wait: None,
        }
    }

    fn refused(args: AskArgs) -> String {
        let e = question_request(args).expect_err("refused");
        assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
        e.message.to_string()
    }

    #[test]
    fn requests_are_checked() {
        let r = question_request(ask(KindArg::YesNo)).expect("yes/no");
        assert_eq!(r.kind, QuestionKind::YesNo);
        assert_eq!(r.expires_in, Duration::from_secs(600));
        assert!(r.question_id.as_deref().is_some_and(|id| id.starts_with("qst_")));
        let choice = AskArgs {
            options: Some(vec!["a".into(), "b".into()]),
            multiple: Some(true),
            question_id: Some("q_1".into()),
            ..ask(KindArg::Choice)
        };
        let r = question_request(choice).expect("choice");
        assert_eq!(r.options, ["a", "b"]);
        assert!(r.multiple);
        assert_eq!(r.question_id.as_deref(), Some("q_1"));

        assert!(
            refused(AskArgs {
                question: " ".into(),
                ..ask(KindArg::Text)
            })
            .contains("question")
        );
        let with_options = AskArgs {
            options: Some(vec!["a".into(), "b".into()]),
            ..ask(KindArg::YesNo)
        };
        assert!(refused(with_options).contains("options"));
        assert!(
            refused(AskArgs {
                multiple: Some(true),
                ..ask(KindArg::Text)
            })
            .contains("multiple")
        );
        assert!(refused(ask(KindArg::Choice)).contains("2 to 20"));
        let one = AskArgs {
            options: Some(vec!["a".into()]),
            ..ask(KindArg::Choice)
        };
        assert!(refused(one).contains("2 to 20"));
        let twice = AskArgs {
            options: Some(vec!["a".into(), "a".into()]),
            ..ask(KindArg::Choice)
        };
        assert!(refused(twice).contains("distinct"));
        for s in [0, -5, 604_801] {
            let msg = refused(AskArgs {
                expires_in_seconds: Some(s),
                ..ask(KindArg::YesNo)
            });
            assert!(msg.contains("expiresInSeconds"), "{msg}");
        }
        let week = AskArgs {
            expires_in_seconds: Some(604_800),
            ..ask(KindArg::YesNo)
        };
        assert_eq!(
            question_request(week).expect("7 days").expires_in.as_secs(),
            604_800
        );
        refused(AskArgs {
            question_id: Some("a b".into()),
            ..ask(KindArg::YesNo)
        });
    }

    fn outcome(state: QuestionState, approved: bool, answer: Option<Answer>) -> AnswerOutcome {
        AnswerOutcome {
            grant: None,
            grant_refused: None,
            question_id: "q_1".into(),
            state,
            approved,
            answered_by: answer.as_ref().map(|_| "dv_1".into()),
            answered_by_name: answer.as_ref().map(|_| "phone".into()),
            answered_at: answer.as_ref().map(|_| Timestamp(1_000)),
            device_answered_at: answer.as_ref().map(|_| Timestamp(999)),
            answer,
            expires_at: Timestamp(2_000),
            rejected: None,
            signed: false,
            channel: None,
        }
    }

    /// The result and the next step of an outcome.
    fn judged(o: &AnswerOutcome) -> (AnswerResult, String) {
        let r = AnswerResult::from(o);
        let next = answer_next_step(&r, o.answer.as_ref());
        (r, next)
    }

    #[test]
    fn results_copy_the_verdict_and_say_what_to_do() {
        let (yes, next) = judged(&outcome(QuestionState::Answered, true, Some(Answer::Yes)));
        assert!(yes.approved);
        assert_eq!(yes.answered_by.as_deref(), Some("dv_1"));
        assert_eq!(yes.answered_by_name.as_deref(), Some("phone"));
        assert!(next.contains("YES") && next.contains("phone"), "{next}");
        let json = serde_json::to_value(&yes).expect("json");
        assert_eq!(json["state"], "answered");
        assert!(json.get("status").is_none(), "{json}");
        assert_eq!(json["answeredBy"], "dv_1");
        assert_eq!(json["answeredByName"], "phone");
        assert_eq!(json["answer"], "yes");
        assert_eq!(json["approved"], true);

        let (no, next) = judged(&outcome(QuestionState::Answered, false, Some(Answer::No)));
        assert!(!no.approved);
        assert_eq!(serde_json::to_value(&no).expect("json")["answer"], "no");
        assert!(next.contains("NO") && next.contains("Do not act"), "{next}");

        let (chosen, next) = judged(&outcome(
            QuestionState::Answered,
            true,
            Some(Answer::Options(vec!["staging".into()])),
        ));
        assert_eq!(
            serde_json::to_value(&chosen).expect("json")["answer"],
            serde_json::json!(["staging"])
        );
        assert!(next.contains("\"staging\""), "{next}");

        // A written "yes" is a text answer, not an approval.
        let (text, next) = judged(&outcome(
            QuestionState::Answered,
            false,
            Some(Answer::Text("yes".into())),
        ));
        assert_eq!(serde_json::to_value(&text).expect("json")["answer"], "yes");
        assert!(
            next.contains("not an approval") && !next.contains("YES"),
            "{next}"
        );

        for state in [QuestionState::Expired, QuestionState::Cancelled] {
            let (r, next) = judged(&outcome(state, false, None));
            assert!(!r.approved && r.answer.is_none());
            assert!(next.contains("NO") && next.contains("do not act"), "{next}");
        }
        let (_, next) = judged(&outcome(QuestionState::Pending, false, None));
        assert!(next.contains("again") && next.contains("q_1"), "{next}");
    }

    #[test]
    fn a_rejected_answer_is_reported_and_not_approved() {
        let mut o = outcome(QuestionState::Pending, false, None);
        o.rejected = Some("the answer did not open with the answering device's key".into());
        let (r, next) = judged(&o);
        assert!(!r.approved);
        assert!(r.rejected.is_some());
        assert!(
            next.contains("NOT approved") && next.contains("did not open"),
            "{next}"
        );
    }

    #[test]
    fn a_yes_without_the_verdict_is_not_an_approval() {
        // Defence in depth: the text follows `approved`, never the answer's words.
        let (_, next) = judged(&outcome(QuestionState::Answered, false, Some(Answer::Yes)));
        assert!(next.contains("do not act") && !next.contains("Proceed"), "{next}");
    }

    #[test]
    fn the_schema_lists_every_conclusion_a_question_can_take() {
        let schema = serde_json::to_value(schemars::schema_for!(AnswerResult)).expect("schema");
        let property = &schema["properties"]["conclusion"];
        let words: Vec<&str> = match property["oneOf"].as_array() {
            Some(variants) => variants.iter().filter_map(|v| v["const"].as_str()).collect(),
            None => property["enum"]
                .as_array()
                .map(|a| a.iter().filter_map(|w| w.as_str()).collect())
                .unwrap_or_default(),
        };
        for (state, approved, answer, rejected) in [
            (QuestionState::Answered, true, Some(Answer::Yes), None),
            (QuestionState::Answered, false, Some(Answer::No), None),
            (
                QuestionState::Answered,
                false,
                Some(Answer::Text("t".into())),
                None,
            ),
            (QuestionState::Expired, false, None, None),
            (QuestionState::Cancelled, false, None, None),
            (QuestionState::Pending, false, None, Some("x".to_string())),
            (QuestionState::Pending, false, None, None),
        ] {
            let mut o = outcome(state, approved, answer);
            o.rejected = rejected;
            let word = Conclusion::of(&o).as_str();
            assert!(words.contains(&word), "{word} is not in {schema}");
            assert_eq!(
                serde_json::to_value(AnswerResult::from(&o)).expect("json")["conclusion"],
                word
            );
        }
    }
}
