//! `wait_for_answer` as an MCP task (the `io.modelcontextprotocol/tasks` extension, SEP-2663), for hosts
//! that declared it.
//!
//! A plain `wait_for_answer` returns within `timeoutSeconds` (at most 55), often `pending`, and the model
//! calls it again: an approval that takes the person ten minutes costs a dozen calls, and a host whose tool
//! timeout is shorter than the wait ends it early. A host that declared tasks gets a task at once instead;
//! this server waits for the answer until the question is answered, expires or is cancelled (the question's
//! own expiry bounds the wait, never beyond it: no answer is a no), and the host polls `tasks/get` for the
//! result — exactly the result the plain call gives once the question has settled. Like the plain call, a task
//! judges only the question this server asked under the id (its remembered digest), and a task that ends
//! says how in its status message ("Approved by … at …", "Expired at … with no answer: that is a no").
//!
//! `ask_user` becomes a task only when it asks to wait (`wait: true`): it asks as the plain call does, then
//! waits as `wait_for_answer`'s task does, and the task's result is the ask's result with the answer's fields
//! beside it — one call that asks and returns the final answer, however long the person takes. Without
//! `wait`, `ask_user` returns as soon as the relay stored the question, well within any host's timeout. A
//! question that has already settled when the wait starts (or that cannot be read) is answered at once, as a
//! plain result: the host has nothing to wait for.
//!
//! `tasks/cancel` stops this server's wait (the task ends `cancelled`); it does not withdraw the question on
//! the phone: that is `cancel_question`. Hosts without tasks see none of this: their calls take the plain
//! path, byte for byte as before.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use pacerelle_client::{
    Error, ErrorKind, Timestamp, agent::AnswerOutcome, agent::AskedQuestion, gate::Conclusion,
};
use rmcp::ErrorData as McpError;
use rmcp::RoleServer;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CreateTaskResult, GetTaskResult,
};
use rmcp::service::RequestContext;
use rmcp::task_manager::{TaskExit, TaskManager, TaskOptions};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::config::ResultText;
use crate::server::State;
use crate::tools::questions::{WaitAnswerArgs, answer_call_result, not_asked_here};
use crate::tools::{check_id, result_text};
use crate::wait::{ANSWER_GRACE, Parked, park, timeout_of};

/// The tool that becomes a task for hosts that declared tasks.
pub const TASK_TOOL: &str = "wait_for_answer";

/// The tool that becomes a task for hosts that declared tasks when it asks to wait (`wait: true`).
pub const ASK_TOOL: &str = "ask_user";

/// How long a task is kept beyond its question's expiry: its wait ends at the expiry (plus the relay's
/// reply), and the host still has this long to read the result.
pub const TTL_MARGIN: Duration = Duration::from_secs(120);

/// How often the host is asked to poll `tasks/get`: a person answers in seconds at best.
pub const POLL_INTERVAL: Duration = Duration::from_secs(2);

/// How long past the question's expiry the wait may last, for the relay's last reply to arrive.
const SETTLE_GRACE: Duration = Duration::from_secs(10);

/// The tasks of this server: shared by every MCP session, so that `tasks/get` finds a task whatever
/// connection (or, on 2026-07-28 without sessions, whatever request) created it.
#[derive(Clone, Default)]
pub struct Tasks {
    manager: TaskManager,
}

impl fmt::Debug for Tasks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tasks").finish_non_exhaustive()
    }
}

impl Tasks {
    /// `tasks/get`: where the task stands, with the result once it settled.
    pub fn get(&self, task_id: &str) -> Result<GetTaskResult, McpError> {
        Ok(GetTaskResult::new(self.manager.get_task(task_id)?))
    }

    /// `tasks/cancel`: stops the wait (the question stays open on the phone).
    pub fn cancel(&self, task_id: &str) -> Result<(), McpError> {
        self.manager.cancel_task(task_id)
    }
}

/// Whether the client declared the tasks extension (at `initialize`, or in this request's capabilities).
pub fn declared(context: &RequestContext<RoleServer>) -> bool {
    context
        .client_capabilities()
        .is_some_and(|capabilities| capabilities.supports_tasks())
}

/// Time left until `expires_at`, by this machine's clock (zero once past).
fn until(expires_at: Timestamp) -> Duration {
    Duration::from_millis(u64::try_from(expires_at.millis() - Timestamp::now().millis()).unwrap_or(0))
}

/// `wait_for_answer` for a client that declared tasks: a task while the question is pending, the plain
/// result when it has already settled or could not be read. `None` when the first read did not come back
/// in time (or the call was cancelled meanwhile): the plain call then answers, as it always has.
pub async fn wait_for_answer(
    state: &Arc<State>,
    request: &CallToolRequestParams,
    ct: &CancellationToken,
) -> Result<Option<CallToolResponse>, McpError> {
    // The same checks, with the same messages, as the plain call.
    let arguments = request.arguments.clone().unwrap_or_default();
    let args: WaitAnswerArgs = serde_json::from_value(serde_json::Value::Object(arguments))
        .map_err(|e| McpError::invalid_params(format!("invalid arguments: {e}"), None))?;
    check_id("question id", &args.question_id)?;
    // timeoutSeconds is checked but does not bound a task: the question's expiry does.
    timeout_of(args.timeout_seconds)?;
    // As the plain call: only a question this server asked, and only that exact question under its id.
    let Some(asked) = state.asked.get(&args.question_id) else {
        return not_asked_here(&args.question_id).map(|result| Some(CallToolResponse::Complete(result)));
    };
    wait_as_task(state, asked, ct, |waited| waited).await
}

/// Whether an `ask_user` call asks to wait for the answer (`"wait": true`).
pub fn asks_to_wait(request: &CallToolRequestParams) -> bool {
    request
        .arguments
        .as_ref()
        .and_then(|arguments| arguments.get("wait"))
        .and_then(Value::as_bool)
        == Some(true)
}

/// `ask_user` with `wait` for a client that declared tasks, once the plain call asked (`asked`, its
/// response): a task that waits for the answer, whose result is the ask's result with the answer's fields
/// beside it ([`with_answer`]); the plain result at once when the question already settled. A call that did
/// not ask (a tool error), or whose first read did not come back in time, returns the plain ask's response:
/// the model then waits with wait_for_answer, as it always could.
pub async fn ask_then_wait(
    state: &Arc<State>,
    asked: CallToolResponse,
    ct: &CancellationToken,
) -> Result<CallToolResponse, McpError> {
    let CallToolResponse::Complete(result) = asked else {
        return Ok(asked);
    };
    let question = match &result.structured_content {
        Some(json) if result.is_error != Some(true) => json
            .get("questionId")
            .and_then(Value::as_str)
            .and_then(|id| state.asked.get(id))
            .map(|question| (json.clone(), question)),
        _ => None,
    };
    let Some((ask_json, question)) = question else {
        return Ok(CallToolResponse::Complete(result));
    };
    let finish =
        move |waited: Result<CallToolResult, McpError>| waited.map(|waited| with_answer(&ask_json, waited));
    Ok(wait_as_task(state, question, ct, finish)
        .await?
        .unwrap_or(CallToolResponse::Complete(result)))
}

/// The result of `ask_user` with `wait`: the ask's structured content with the answer's fields beside it (the
/// two share `questionId` and `expiresAt`), and the answer's text, what to do next; in the `json` text mode
/// the JSON block carries the whole. A tool error (no answer could be read) stays as it is: not approved.
fn with_answer(asked: &Value, mut waited: CallToolResult) -> CallToolResult {
    if waited.is_error == Some(true) {
        return waited;
    }
    let (Value::Object(asked), Some(Value::Object(answer))) = (asked, &waited.structured_content) else {
        return waited;
    };
    let mut merged = asked.clone();
    merged.extend(answer.clone());
    let merged = Value::Object(merged);
    if result_text() == ResultText::Json
        && let Some(last) = waited.content.last_mut()
    {
        *last = ContentBlock::text(merged.to_string());
    }
    waited.structured_content = Some(merged);
    waited
}

/// Waits for the answer to `asked` as a task: its first state (`working`), the wait going on in the
/// background, or the plain result when the question already settled (or could not be read). `finish` turns
/// the plain `wait_for_answer` result into the call's. `None` when the first read did not come back in time
/// (or the call was cancelled meanwhile).
async fn wait_as_task<F>(
    state: &Arc<State>,
    asked: AskedQuestion,
    ct: &CancellationToken,
    finish: F,
) -> Result<Option<CallToolResponse>, McpError>
where
    F: FnOnce(Result<CallToolResult, McpError>) -> Result<CallToolResult, McpError> + Send + 'static,
{
    let bound = asked.asked();
    let first = state.client.wait_for_answer_to(&bound, Duration::ZERO);
    let outcome = match park(first, ANSWER_GRACE, ct, None).await {
        Parked::Done(Ok(outcome)) if !outcome.is_final() => outcome,
        Parked::Done(read) => {
            return finish(answer_call_result(&state.relay_url, &asked, read))
                .map(|result| Some(CallToolResponse::Complete(result)));
        }
        Parked::Deadline | Parked::Cancelled => return Ok(None),
    };
    Ok(Some(CallToolResponse::Task(CreateTaskResult::new(spawn(
        state, asked, outcome, finish,
    )))))
}

/// Starts the wait for the pending question `asked` as a task and returns its first state. When the task
/// ends, its status message says how ([`settled_status`]), and its result is `finish` of the plain result.
fn spawn<F>(state: &Arc<State>, asked: AskedQuestion, pending: AnswerOutcome, finish: F) -> rmcp::model::Task
where
    F: FnOnce(Result<CallToolResult, McpError>) -> Result<CallToolResult, McpError> + Send + 'static,
{
    let left = until(pending.expires_at);
    let options = TaskOptions::new()
        .with_ttl_ms(duration_ms(left + TTL_MARGIN))
        .with_poll_interval_ms(duration_ms(POLL_INTERVAL))
        .with_status_message(format!(
            "Waiting for the person's answer on the phone to question \"{}\" (it expires at {}).",
            pending.question_id, pending.expires_at
        ));
    let deadline = tokio::time::Instant::now() + left + SETTLE_GRACE;
    let waiting = state.clone();
    state.tasks.manager.spawn(options, move |context| {
        let state = waiting;
        let bound = asked.asked();
        Box::pin(async move {
            tokio::select! {
                // Only this wait stops: the question stays open on the phone.
                _ = context.cancelled() => {
                    context.set_status_message(format!(
                        "Cancelled: this server stopped waiting for question \"{}\"; the question stays \
                         open on the phone. Nothing is approved.",
                        asked.question_id
                    ));
                    Err(TaskExit::Cancelled)
                }
                read = state.client.wait_until_final(&bound, deadline) => {
                    context.set_status_message(settled_status(&asked.question_id, &read));
                    finish(answer_call_result(&state.relay_url, &asked, read)).map_err(TaskExit::Error)
                }
            }
        })
    })
}

/// The status message of a task whose wait ended with `read`: what happened to the question, in words.
fn settled_status(question_id: &str, read: &Result<AnswerOutcome, Error>) -> String {
    let outcome = match read {
        Ok(outcome) => outcome,
        Err(e) if e.kind() == ErrorKind::QuestionIdConflict => {
            return format!(
                "The relay serves another question under \"{question_id}\" than the one asked \
                 (question_id_conflict): not approved."
            );
        }
        Err(e) => {
            return format!("No answer could be read for question \"{question_id}\" ({e}): not approved.");
        }
    };
    let by = outcome
        .answered_by_name
        .as_deref()
        .or(outcome.answered_by.as_deref())
        .map(|d| format!("by {d}"))
        .unwrap_or_else(|| "here at the computer".to_string());
    let at = outcome
        .answered_at
        .or(outcome.device_answered_at)
        .map(|t| format!(" at {t}"))
        .unwrap_or_default();
    match Conclusion::of(outcome) {
        Conclusion::Approved => format!("Approved {by}{at}: question \"{question_id}\" was answered yes."),
        Conclusion::Answered => format!("Answered {by}{at}: question \"{question_id}\" (see the result)."),
        Conclusion::Denied => format!("Denied {by}{at}: question \"{question_id}\" was answered no."),
        Conclusion::Expired => format!(
            "Expired at {} with no answer to question \"{question_id}\": that is a no.",
            outcome.expires_at
        ),
        Conclusion::Cancelled => {
            format!("Question \"{question_id}\" was cancelled (withdrawn): that is a no.")
        }
        Conclusion::Rejected => format!(
            "An answer to question \"{question_id}\" was refused: it could not be authenticated as the \
             person's. Not approved."
        ),
        Conclusion::Pending => {
            format!("No answer to question \"{question_id}\" by the end of the wait: not approved.")
        }
        _ => format!("Question \"{question_id}\" settled: not approved."),
    }
}

fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(state: pacerelle_client::QuestionState, approved: bool) -> AnswerOutcome {
        AnswerOutcome {
            grant: None,
            grant_refused: None,
            question_id: "q_1".into(),
            state,
            approved,
            answer: approved.then_some(pacerelle_client::Answer::Yes),
            answered_by: None,
            answered_by_name: None,
            answered_at: None,
            device_answered_at: approved.then_some(Timestamp(1_000)),
            expires_at: Timestamp(2_000),
            rejected: None,
            signed: false,
            channel: approved.then_some(pacerelle_client::Channel::Host),
        }
    }

    #[test]
    fn a_settled_task_says_how_it_ended_and_never_approved_without_a_verdict() {
        use pacerelle_client::QuestionState;
        let yes = settled_status("q_1", &Ok(outcome(QuestionState::Answered, true)));
        assert!(yes.starts_with("Approved here at the computer at "), "{yes}");
        let expired = settled_status("q_1", &Ok(outcome(QuestionState::Expired, false)));
        assert!(
            expired.starts_with("Expired at ") && expired.ends_with("that is a no."),
            "{expired}"
        );
        let conflict = Error::Api {
            status: 409,
            code: pacerelle_client::core::wire::code::QUESTION_ID_CONFLICT.into(),
            message: "another question".into(),
            details: None,
        };
        let swapped = settled_status("q_1", &Err(conflict));
        assert!(
            swapped.contains("question_id_conflict") && swapped.contains("not approved"),
            "{swapped}"
        );
        let pending = settled_status("q_1", &Ok(outcome(QuestionState::Pending, false)));
        assert!(pending.contains("not approved"), "{pending}");
    }

    #[test]
    fn the_time_left_is_zero_once_the_expiry_passed() {
        let past = Timestamp(Timestamp::now().millis() - 5_000);
        assert_eq!(until(past), Duration::ZERO);
        let later = Timestamp(Timestamp::now().millis() + 60_000);
        let left = until(later);
        assert!(
            left > Duration::from_secs(55) && left <= Duration::from_secs(60),
            "{left:?}"
        );
    }
}
