//! Tasks and replies: a device sends a task, the agent long-polls for tasks, marks them processed and
//! replies; a device long-polls its conversation.
//!
//! A long-poll subscribes to its wake-up topic before it queries; when the query finds nothing it parks until
//! a writer publishes after its commit, the wait ends, or the relay shuts down, then queries once more.

use std::collections::HashSet;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use pacerelle_core::wire::{
    AgentMessage, Conversation, MAX_WAIT_SECONDS, MessageBatch, Processed, SendMessage, SendReply, Stored,
    WaitQuery,
};
use pacerelle_core::{Cursor, Timestamp, ids};

use super::session::{SessionHeader, lease_verdict, require_lease};
use super::{check_envelope, check_id, stored};
use crate::app::AppState;
use crate::auth::{AgentAuth, DeviceAuth};
use crate::error::AppError;
use crate::extract::{Json, Path, Query};
use crate::store::{PAGE_LIMIT, Put, ReplyPut, WaitRead};
use crate::wake::{Subscription, Topic};

/// Wait when the query gives none, in seconds.
pub(crate) const DEFAULT_WAIT_SECONDS: u64 = 30;

fn wait_of(q: &WaitQuery) -> Duration {
    Duration::from_secs(q.wait.unwrap_or(DEFAULT_WAIT_SECONDS).min(MAX_WAIT_SECONDS))
}

/// The cursor of a long-poll: none, or one this relay issued (never beyond the last sequence number).
async fn cursor_of(state: &AppState, q: &WaitQuery) -> Result<Option<Cursor>, AppError> {
    issued_cursor(state, q.cursor.as_deref()).await
}

/// A cursor parameter: none (absent or empty), or one this relay issued; anything else is `bad_cursor`.
pub(crate) async fn issued_cursor(state: &AppState, text: Option<&str>) -> Result<Option<Cursor>, AppError> {
    let Some(text) = text.filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    let cursor = Cursor::parse(text).map_err(|_| AppError::bad_cursor())?;
    if cursor > state.store.global_head().await? {
        return Err(AppError::bad_cursor());
    }
    Ok(Some(cursor))
}

/// Parks until the subscription is woken, `wait` passes, or the relay shuts down.
pub(crate) async fn park(state: &AppState, sub: &mut Subscription<'_>, wait: Duration) {
    tokio::select! {
        () = sub.changed() => {}
        () = tokio::time::sleep(wait) => {}
        () = state.shutdown.fired() => {}
    }
}

/// `GET /v1/agent/messages?cursor=&wait=` (needs the lease if a session holds it).
///
/// Each step (before parking, and after) is one read of the store ([`Store::wait_read`]: lease, head and tasks
/// in one snapshot); the `delivered` mark of the tasks handed out rides in the writer's next batch, so the answer
/// never waits for a synced write of its own.
pub(crate) async fn wait(
    State(state): State<AppState>,
    auth: AgentAuth,
    session: SessionHeader,
    Query(q): Query<WaitQuery>,
) -> Result<Json<MessageBatch>, AppError> {
    let wait = wait_of(&q);
    let given = match q.cursor.as_deref().filter(|t| !t.is_empty()) {
        Some(text) => Some(Cursor::parse(text).map_err(|_| AppError::bad_cursor())?),
        None => None,
    };
    drop(q);
    let agent_id = auth.agent_id;
    let session = session.as_str();
    let after = given.unwrap_or(Cursor::START);
    let mut sub = state.wakes.subscribe(Topic::Inbox(agent_id.clone()));
    // The reads are boxed: their room is not part of what a parked wait keeps.
    let read = Box::pin(step(&state, &agent_id, session, after)).await?;
    if given.is_some_and(|given| given > read.global_head) {
        return Err(AppError::bad_cursor());
    }
    let mut activity = state.activity.begin_wait(&agent_id, &read.name);
    if !read.messages.is_empty() || wait.is_zero() || state.shutdown.is_triggered() {
        return Ok(Json(handed(&state, &agent_id, after, read, given)));
    }

    activity.park();
    park(&state, &mut sub, wait).await;
    drop(sub);
    // The lease may have changed hands while this wait was parked: the step reads it again.
    let read = Box::pin(step(&state, &agent_id, session, after)).await?;
    Ok(Json(handed(&state, &agent_id, after, read, given)))
}

/// One read of the wait, refused unless the caller may consume the inbox ([`lease_verdict`]).
async fn step(
    state: &AppState,
    agent_id: &str,
    session: Option<&str>,
    after: Cursor,
) -> Result<WaitRead, AppError> {
    let read = state
        .store
        .wait_read(agent_id, session, after, PAGE_LIMIT, Timestamp::now())
        .await?;
    lease_verdict(read.lease.as_ref(), session, read.session_known)?;
    Ok(read)
}

/// The answer to a wait; queues the `delivered` mark of the tasks it hands out.
fn handed(
    state: &AppState,
    agent_id: &str,
    after: Cursor,
    read: WaitRead,
    given: Option<Cursor>,
) -> MessageBatch {
    if let Some(last) = read.messages.last() {
        state
            .store
            .mark_delivered(agent_id, &read.name, after, last.cursor, Timestamp::now());
    }
    batch(read.messages, read.next, given, read.roster_version)
}

/// An empty answer keeps the caller's cursor (DESIGN §5); without one it is the stream's head.
fn keep_if_empty(empty: bool, next: Cursor, given: Option<Cursor>) -> Cursor {
    match given {
        Some(given) if empty => given,
        _ => next,
    }
}

fn batch(messages: Vec<AgentMessage>, next: Cursor, given: Option<Cursor>, roster: u64) -> MessageBatch {
    MessageBatch {
        cursor: keep_if_empty(messages.is_empty(), next, given),
        messages,
        roster_version: Some(roster),
    }
}

/// `POST /v1/agent/messages/{messageId}/processed` (needs the lease if a session holds it). Idempotent: only
/// the first call stores the `update` item the sending device sees.
pub(crate) async fn processed(
    State(state): State<AppState>,
    auth: AgentAuth,
    headers: HeaderMap,
    Path(message_id): Path<String>,
) -> Result<Json<Processed>, AppError> {
    let session = require_lease(&state, &auth.agent_id, &headers).await?;
    let marked = state
        .store
        .mark_processed(&auth.agent_id, &message_id, &session, Timestamp::now())
        .await?
        .ok_or_else(|| AppError::not_found("message"))?;
    if let Some(update) = &marked.update {
        // The sending device's conversation shows the task processed.
        state
            .wakes
            .publish(&Topic::Conversation(auth.agent_id.clone()), update.cursor().seq());
    }
    Ok(Json(Processed {
        message_id,
        processed_at: marked.processed_at,
    }))
}

/// `POST /v1/agent/replies`: one envelope per device; idempotent by `replyId`. Needs no lease.
pub(crate) async fn reply(
    State(state): State<AppState>,
    auth: AgentAuth,
    Json(body): Json<SendReply>,
) -> Result<(StatusCode, Json<Stored>), AppError> {
    check_id("reply id", &body.reply_id)?;
    check_id("source message id", &body.source_message_id)?;
    let mut seen = HashSet::new();
    for e in &body.envelopes {
        check_id("device id", &e.device_id)?;
        check_envelope("envelope", &e.envelope)?;
        if !seen.insert(e.device_id.as_str()) {
            return Err(AppError::invalid_input(
                "two envelopes for one device: send one per device",
            ));
        }
    }
    let outcome = state
        .store
        .put_reply(
            &auth.agent_id,
            &body.reply_id,
            &body.source_message_id,
            &body.envelopes,
            Timestamp::now(),
        )
        .await?;
    match outcome {
        ReplyPut::Stored(item) => {
            if item.created {
                state
                    .wakes
                    .publish(&Topic::Conversation(auth.agent_id), item.cursor.seq());
            }
            Ok(stored(item.created, item))
        }
        ReplyPut::Conflict => Err(AppError::id_conflict(
            "this reply id was already used for a reply to another message",
        )),
        ReplyPut::NoSource => Err(AppError::not_found("message")),
        ReplyPut::UnknownDevice(device_id) => Err(AppError::invalid_input(format!(
            "envelopes[{}].deviceId is not a device paired with this agent",
            body.envelopes
                .iter()
                .position(|e| e.device_id == device_id)
                .unwrap_or_default()
        ))),
    }
}

/// `POST /v1/device/messages`: a task; idempotent by `messageId` (a retry may carry a re-sealed envelope). A
/// new task beyond the agent's quota of tasks not yet processed is refused `quota_exceeded`; a retry of a
/// stored one is answered as always.
pub(crate) async fn send(
    State(state): State<AppState>,
    auth: DeviceAuth,
    Json(body): Json<SendMessage>,
) -> Result<(StatusCode, Json<Stored>), AppError> {
    check_id("message id", &body.message_id)?;
    check_envelope("envelope", &body.envelope)?;
    if let Some(session) = &body.session {
        ids::validate_session_name(session).map_err(|e| AppError::invalid_input(e.to_string()))?;
    }
    let outcome = state
        .store
        .put_message(
            &auth.agent_id,
            &auth.device_id,
            &body.message_id,
            &body.envelope,
            body.session.as_deref(),
            state.config.quotas.max_pending_tasks,
            Timestamp::now(),
        )
        .await?;
    match outcome {
        Put::Stored(item) => {
            if item.created {
                let seq = item.cursor.seq();
                state
                    .wakes
                    .publish_no_push(&Topic::Inbox(auth.agent_id.clone()), seq);
                state
                    .wakes
                    .publish_no_push(&Topic::Conversation(auth.agent_id), seq);
            }
            Ok(stored(item.created, item))
        }
        Put::Conflict(why) => Err(AppError::id_conflict(why)),
        Put::QuotaExceeded => Err(AppError::quota_exceeded(
            "max_pending_tasks",
            state.config.quotas.max_pending_tasks,
            "tasks not yet processed",
            "send again once the agent has processed some",
        )),
    }
}

/// `GET /v1/device/conversation?cursor=&wait=`: what this device can open after the cursor, oldest first.
pub(crate) async fn conversation(
    State(state): State<AppState>,
    auth: DeviceAuth,
    Query(q): Query<WaitQuery>,
) -> Result<Json<Conversation>, AppError> {
    let wait = wait_of(&q);
    let given = Box::pin(cursor_of(&state, &q)).await?;
    let after = given.unwrap_or(Cursor::START);
    let updates = q.updates.unwrap_or(false);

    let mut sub = state.wakes.subscribe(Topic::Conversation(auth.agent_id.clone()));
    // The reads are boxed: their room is not part of what a parked wait keeps.
    let read = || {
        Box::pin(state.store.conversation(
            &auth.agent_id,
            &auth.device_id,
            after,
            PAGE_LIMIT,
            updates,
            Timestamp::now(),
        ))
    };
    let (items, cursor) = read().await?;
    if !items.is_empty() || wait.is_zero() || state.shutdown.is_triggered() {
        return Ok(Json(Conversation {
            cursor: keep_if_empty(items.is_empty(), cursor, given),
            items,
        }));
    }

    park(&state, &mut sub, wait).await;
    drop(sub);
    Box::pin(auth.still_valid(&state)).await?;
    let (items, cursor) = read().await?;
    Ok(Json(Conversation {
        cursor: keep_if_empty(items.is_empty(), cursor, given),
        items,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The size of the future `f` returns, without calling it.
    fn future_of<F, A, B, C, D, Fut>(_: &F) -> usize
    where
        F: Fn(A, B, C, D) -> Fut,
    {
        std::mem::size_of::<Fut>()
    }

    /// The same for a function of three arguments.
    fn future_of3<F, A, B, C, Fut>(_: &F) -> usize
    where
        F: Fn(A, B, C) -> Fut,
    {
        std::mem::size_of::<Fut>()
    }

    #[test]
    fn a_parked_wait_keeps_no_room_for_the_store_reads() {
        // What a parked wait holds is the wait's future: the park and what the wait keeps across it. The store's
        // reads before and after are boxed, so their room is not part of it.
        let wait = future_of(&wait);
        let park = future_of3(&park);
        let read = future_of(&step);
        assert!(
            wait < park + read,
            "the wait's future ({wait} bytes) holds the park ({park}) and a store read ({read})"
        );
    }
}
