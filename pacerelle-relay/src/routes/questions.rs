//! Questions and notifications (DESIGN §6): the agent asks, a device answers (or the agent records an answer
//! given at the computer), and no answer is a no.
//!
//! The relay keeps each question's state in clear and moves it only through
//! [`pacerelle_core::question::QuestionRecord`]; it never reads a question or an answer, and never decides
//! whether anything is approved (the agent does, after opening the answer). Expiry is by the relay's clock:
//! every read shows a pending question past its expiry as expired, every write refuses it.

use std::collections::HashSet;
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use pacerelle_core::Timestamp;
use pacerelle_core::question::{MAX_EXPIRES_SECONDS, QuestionKind, QuestionState};
use pacerelle_core::wire::{
    AnswerLog, AnswerQuestion, CreateQuestion, DeviceEnvelope, DeviceQuestion, DeviceQuestions,
    MAX_APPROVALS, MAX_WAIT_SECONDS, QuestionView, SendNotification, Stored,
};
use serde::Deserialize;

use super::messages::{issued_cursor, park};
use super::{check_envelope, check_id, stored};
use crate::app::AppState;
use crate::auth::{AgentAuth, DeviceAuth};
use crate::error::AppError;
use crate::extract::{Json, Path, Query};
use crate::store::{Effects, ItemPut, LogQuery, NewQuestion, QuestionPut, StateFilter, Transition};
use crate::wake::Topic;

/// Clock skew tolerated on the far end of `expiresAt` (the agent's clock may run ahead of the relay's).
const EXPIRY_SKEW_MS: i64 = 60 * 1000;
/// Answer-log page size when none is given.
const DEFAULT_LOG_LIMIT: u32 = 50;
/// Largest answer-log page.
pub(crate) const MAX_LOG_LIMIT: u32 = 200;
/// Most questions a device listing returns (the most recent ones).
const DEVICE_LIST_LIMIT: u32 = 200;

/// Recipients of a question or notification: at least one (`no_device`), each a valid id with a non-empty
/// envelope, no device twice (`invalid_input`).
fn check_recipients(envelopes: &[DeviceEnvelope]) -> Result<(), AppError> {
    if envelopes.is_empty() {
        return Err(AppError::no_device());
    }
    let mut seen = HashSet::new();
    for e in envelopes {
        check_id("device id", &e.device_id)?;
        check_envelope("envelope", &e.envelope)?;
        if !seen.insert(e.device_id.as_str()) {
            return Err(AppError::invalid_input(
                "two envelopes for one device: send one per device",
            ));
        }
    }
    Ok(())
}

/// An envelope for a device that is not an active device of the agent, named by its place in `envelopes`:
/// errors quote nothing of the request, not even an id.
fn inactive(envelopes: &[DeviceEnvelope], device_id: &str) -> AppError {
    AppError::invalid_input(format!(
        "envelopes[{}].deviceId is not an active device of this agent",
        envelopes
            .iter()
            .position(|e| e.device_id == device_id)
            .unwrap_or_default()
    ))
}

/// Wakes what a transition concerns: the agent's question waiters, the webhook deliverer, and the devices'
/// conversations when it stored an `update` item.
fn after(state: &AppState, agent_id: &str, effects: &Effects) {
    if effects.closed {
        state.wakes.publish(&Topic::Questions(agent_id.to_string()), 0);
    }
    if effects.event {
        state.webhook_kick.notify_one();
    }
    if let Some(update) = &effects.update {
        state
            .wakes
            .publish(&Topic::Conversation(agent_id.to_string()), update.cursor().seq());
    }
}

/// A question's `approvals`: 1 to [`MAX_APPROVALS`], only for a yes/no question, and no more than the devices
/// it is sealed for (distinct devices approve).
fn check_approvals(approvals: u32, kind: QuestionKind, devices: usize) -> Result<(), AppError> {
    if approvals == 1 {
        return Ok(());
    }
    if !(2..=MAX_APPROVALS).contains(&approvals) {
        return Err(AppError::invalid_input(format!(
            "approvals must be 1 to {MAX_APPROVALS}"
        )));
    }
    if kind != QuestionKind::YesNo {
        return Err(AppError::invalid_input(
            "approvals above 1 are for yes/no questions",
        ));
    }
    if usize::try_from(approvals).unwrap_or(usize::MAX) > devices {
        return Err(AppError::invalid_input(format!(
            "approvals is {approvals}, but the question is sealed for {devices} device(s): distinct devices approve"
        )));
    }
    Ok(())
}

/// `POST /v1/agent/questions`: idempotent by `questionId` (the same id again returns the stored question). A
/// new question beyond the agent's quota of open questions is refused `quota_exceeded`.
pub(crate) async fn create(
    State(state): State<AppState>,
    auth: AgentAuth,
    Json(body): Json<CreateQuestion>,
) -> Result<(StatusCode, Json<QuestionView>), AppError> {
    let now = Timestamp::now();
    check_id("question id", &body.question_id)?;
    check_envelope("selfEnvelope", &body.self_envelope)?;
    check_recipients(&body.envelopes)?;
    if let Some(user_id) = &body.user_id {
        pacerelle_core::roster::check_external_id(user_id)
            .map_err(|e| AppError::invalid_input(format!("userId: {e}")))?;
    }
    check_approvals(body.approvals, body.kind, body.envelopes.len())?;
    // A retry gets the stored question even once its expiry has passed.
    if let Some(view) = state
        .store
        .question(&auth.agent_id, &body.question_id, now)
        .await?
    {
        return Ok((StatusCode::OK, Json(view)));
    }
    if body.expires_at <= now {
        return Err(AppError::invalid_input("expiresAt must be in the future"));
    }
    let max_ms = i64::try_from(MAX_EXPIRES_SECONDS * 1000).unwrap_or(i64::MAX);
    if body.expires_at > now.plus_millis(max_ms + EXPIRY_SKEW_MS) {
        return Err(AppError::invalid_input("expiresAt must be at most 7 days away"));
    }
    let question = NewQuestion {
        question_id: &body.question_id,
        kind: body.kind,
        expires_at: body.expires_at,
        self_envelope: &body.self_envelope,
        envelopes: &body.envelopes,
        user_id: body.user_id.as_deref(),
        approvals: body.approvals,
    };
    let max_open = state.config.quotas.max_open_questions;
    let item = match state
        .store
        .put_question(&auth.agent_id, &question, max_open, now)
        .await?
    {
        QuestionPut::Item(item) => *item,
        QuestionPut::QuotaExceeded => {
            return Err(AppError::quota_exceeded(
                "max_open_questions",
                max_open,
                "open questions",
                "ask again once some are answered, cancelled or expired",
            ));
        }
    };
    match item {
        ItemPut::Stored(view, created) => {
            if created {
                state
                    .wakes
                    .publish(&Topic::Conversation(auth.agent_id), view.cursor.seq());
                // The expirer may be sleeping past this question's expiry.
                state.expiry_kick.notify_one();
            }
            Ok(stored(created, view))
        }
        ItemPut::UnknownDevice(device_id) => Err(inactive(&body.envelopes, &device_id)),
    }
}

/// Query of `GET /v1/agent/questions/{questionId}`.
#[derive(Debug, Deserialize)]
pub(crate) struct QuestionWait {
    #[serde(default)]
    wait: Option<u64>,
}

/// `GET /v1/agent/questions/{questionId}?wait=`: the question; while it is pending and `wait` (seconds,
/// default 0, capped at 55) is not over, parks until it is answered, cancelled or expires.
pub(crate) async fn get(
    State(state): State<AppState>,
    auth: AgentAuth,
    Path(question_id): Path<String>,
    Query(q): Query<QuestionWait>,
) -> Result<Json<QuestionView>, AppError> {
    let wait = Duration::from_secs(q.wait.unwrap_or(0).min(MAX_WAIT_SECONDS));
    let deadline = tokio::time::Instant::now() + wait;
    // Subscribe before reading: a transition committed after the read still wakes this wait.
    let mut sub = state.wakes.subscribe(Topic::Questions(auth.agent_id.clone()));
    loop {
        let now = Timestamp::now();
        let view = state
            .store
            .question(&auth.agent_id, &question_id, now)
            .await?
            .ok_or_else(|| AppError::not_found("question"))?;
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if view.state != QuestionState::Pending || left.is_zero() || state.shutdown.is_triggered() {
            return Ok(Json(view));
        }
        // Park at most until the expiry: the question then reads as expired.
        let to_expiry = u64::try_from(view.expires_at.millis().saturating_sub(now.millis())).unwrap_or(0);
        park(&state, &mut sub, left.min(Duration::from_millis(to_expiry + 1))).await;
    }
}

/// `POST /v1/agent/questions/{questionId}/cancel`: pending → cancelled; cancelled again → the same.
pub(crate) async fn cancel(
    State(state): State<AppState>,
    auth: AgentAuth,
    Path(question_id): Path<String>,
) -> Result<Json<QuestionView>, AppError> {
    let (outcome, effects) = state
        .store
        .cancel_question(&auth.agent_id, &question_id, Timestamp::now())
        .await?;
    after(&state, &auth.agent_id, &effects);
    match outcome {
        Transition::Done(view) => Ok(Json(view)),
        Transition::Refused(refusal) => Err(AppError::refused(refusal)),
        Transition::NotFound => Err(AppError::not_found("question")),
    }
}

/// A `state` parameter: one of the four states, `all`, or absent (`default`).
fn state_filter(text: Option<&str>, default: StateFilter) -> Result<StateFilter, AppError> {
    match text.filter(|t| !t.is_empty()) {
        None => Ok(default),
        Some("all") => Ok(StateFilter::All),
        Some(t) => QuestionState::parse(t).map(StateFilter::Only).ok_or_else(|| {
            AppError::invalid_input("state must be pending, answered, expired, cancelled or all")
        }),
    }
}

/// Query of `GET /v1/device/questions`.
#[derive(Debug, Deserialize)]
pub(crate) struct DeviceFilter {
    #[serde(default)]
    state: Option<String>,
}

/// `GET /v1/device/questions?state=`: the questions sealed for this device in that state (default
/// `pending`), oldest first (the most recent 200).
pub(crate) async fn for_device(
    State(state): State<AppState>,
    auth: DeviceAuth,
    Query(q): Query<DeviceFilter>,
) -> Result<Json<DeviceQuestions>, AppError> {
    let filter = state_filter(q.state.as_deref(), StateFilter::Only(QuestionState::Pending))?;
    let questions = state
        .store
        .device_questions(
            &auth.agent_id,
            &auth.device_id,
            filter,
            DEVICE_LIST_LIMIT,
            Timestamp::now(),
        )
        .await?;
    Ok(Json(DeviceQuestions { questions }))
}

/// The envelopes of an answer (`AnswerQuestion`), checked as the relay checks every envelope: it opens none.
fn check_answer(body: &AnswerQuestion) -> Result<(), AppError> {
    check_envelope("envelope", &body.envelope)?;
    if let Some(copy) = &body.copy {
        check_envelope("copy", copy)?;
    }
    Ok(())
}

/// `POST /v1/agent/questions/{questionId}/answer`: an answer given at the computer (channel `host`), sealed by
/// the agent with its own key, and for the devices with the question's answer key (`copy`). The same rule as a
/// device's answer: the first wins. A retry once the question is answered at the host gets it again; an answer
/// from a device came first: `question_answered`.
pub(crate) async fn answer_at_host(
    State(state): State<AppState>,
    auth: AgentAuth,
    Path(question_id): Path<String>,
    Json(body): Json<AnswerQuestion>,
) -> Result<Json<QuestionView>, AppError> {
    check_answer(&body)?;
    let (outcome, effects) = state
        .store
        .answer_question_at_host(
            &auth.agent_id,
            &question_id,
            &body.envelope,
            body.copy.as_deref(),
            Timestamp::now(),
        )
        .await?;
    after(&state, &auth.agent_id, &effects);
    match outcome {
        Transition::Done(view) => Ok(Json(view)),
        Transition::Refused(refusal) => Err(AppError::refused(refusal)),
        Transition::NotFound => Err(AppError::not_found("question")),
    }
}

/// `POST /v1/device/questions/{questionId}/answer`: the first valid answer wins; the device that answered
/// gets its answer again on a retry.
pub(crate) async fn answer(
    State(state): State<AppState>,
    auth: DeviceAuth,
    Path(question_id): Path<String>,
    Json(body): Json<AnswerQuestion>,
) -> Result<Json<DeviceQuestion>, AppError> {
    check_answer(&body)?;
    let (outcome, effects) = state
        .store
        .answer_question_closing(
            &auth.agent_id,
            &auth.device_id,
            &question_id,
            &body.envelope,
            body.copy.as_deref(),
            body.closes,
            Timestamp::now(),
        )
        .await?;
    after(&state, &auth.agent_id, &effects);
    match outcome {
        Transition::Done(question) => Ok(Json(question)),
        Transition::Refused(refusal) => Err(AppError::refused(refusal)),
        Transition::NotFound => Err(AppError::not_found("question")),
    }
}

/// Query of `GET /v1/agent/questions`: strings, parsed here so that each bad value gets its stable code.
#[derive(Debug, Deserialize)]
pub(crate) struct LogParams {
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    since: Option<String>,
    #[serde(default)]
    until: Option<String>,
    #[serde(default)]
    cursor: Option<String>,
    #[serde(default)]
    limit: Option<String>,
}

fn time_param(what: &str, text: Option<&str>) -> Result<Option<Timestamp>, AppError> {
    match text.filter(|t| !t.is_empty()) {
        None => Ok(None),
        Some(t) => Timestamp::parse(t).map(Some).ok_or_else(|| {
            AppError::invalid_input(format!(
                "{what} must be an RFC 3339 time such as 2026-11-30T23:57:14Z"
            ))
        }),
    }
}

/// `GET /v1/agent/questions?state=&since=&until=&cursor=&limit=`: the answer log, newest first.
pub(crate) async fn log(
    State(state): State<AppState>,
    auth: AgentAuth,
    Query(q): Query<LogParams>,
) -> Result<Json<AnswerLog>, AppError> {
    let filter = state_filter(q.state.as_deref(), StateFilter::All)?;
    let since = time_param("since", q.since.as_deref())?;
    let until = time_param("until", q.until.as_deref())?;
    if let (Some(since), Some(until)) = (since, until)
        && since > until
    {
        return Err(AppError::invalid_input("since must not be after until"));
    }
    let limit = match q.limit.as_deref().filter(|t| !t.is_empty()) {
        None => DEFAULT_LOG_LIMIT,
        Some(t) => t
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=MAX_LOG_LIMIT).contains(n))
            .ok_or_else(|| AppError::invalid_input("limit must be a number from 1 to 200"))?,
    };
    let before = issued_cursor(&state, q.cursor.as_deref()).await?;
    let query = LogQuery {
        state: filter,
        since,
        until,
        before,
        limit,
    };
    let page = state
        .store
        .answer_log(&auth.agent_id, &query, Timestamp::now())
        .await?;
    Ok(Json(AnswerLog {
        questions: page.questions,
        next: page.next,
    }))
}

/// `POST /v1/agent/notifications`: sealed for each device; idempotent by `notificationId`.
pub(crate) async fn notify(
    State(state): State<AppState>,
    auth: AgentAuth,
    Json(body): Json<SendNotification>,
) -> Result<(StatusCode, Json<Stored>), AppError> {
    check_id("notification id", &body.notification_id)?;
    check_recipients(&body.envelopes)?;
    match state
        .store
        .put_notification(
            &auth.agent_id,
            &body.notification_id,
            &body.envelopes,
            Timestamp::now(),
        )
        .await?
    {
        ItemPut::Stored(item, created) => {
            if created {
                state
                    .wakes
                    .publish(&Topic::Conversation(auth.agent_id), item.cursor.seq());
            }
            Ok(stored(created, item))
        }
        ItemPut::UnknownDevice(device_id) => Err(inactive(&body.envelopes, &device_id)),
    }
}
