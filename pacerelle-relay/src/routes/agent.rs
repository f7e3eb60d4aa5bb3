//! Agent routes: registration, the agent itself, its devices, checkpoints and status.

use axum::extract::State;
use axum::http::StatusCode;
use pacerelle_core::Timestamp;
use pacerelle_core::wire::{
    AgentInfo, CheckpointList, DeviceInfo, DeviceList, MAX_CHECKPOINT_LIMIT, PutRoster, RegisterAgent,
    RosterView, SaveCheckpoint, SessionSummary, Status, Stored, code,
};
use serde::Deserialize;

use super::{MAX_NAME_CHARS, check_envelope, check_id, check_text, decode_fixed, stored};
use crate::app::AppState;
use crate::auth::{AgentAuth, RegistrationGate};
use crate::error::AppError;
use crate::extract::{Json, Path, Query};
use crate::presence;
use crate::store::RosterPut;
use crate::store::{Lease, Registered};
use crate::wake::Topic;

/// Default number of checkpoints listed.
const DEFAULT_CHECKPOINT_LIMIT: u32 = 10;

/// `POST /v1/agents`: idempotent for the same `agentId` and `authHash`; an id taken otherwise is `agent_exists`.
pub(crate) async fn register(
    State(state): State<AppState>,
    _gate: RegistrationGate,
    Json(body): Json<RegisterAgent>,
) -> Result<(StatusCode, Json<AgentInfo>), AppError> {
    check_id("agent id", &body.agent_id)?;
    let name = check_text("name", &body.name, MAX_NAME_CHARS)?;
    let auth_hash = decode_fixed::<32>("authHash", &body.auth_hash)?;
    match state
        .store
        .register_agent(&body.agent_id, &name, &auth_hash, Timestamp::now())
        .await?
    {
        Registered::Created(info) => {
            tracing::info!(agent = %info.agent_id, "agent registered");
            Ok((StatusCode::CREATED, Json(info)))
        }
        Registered::Again(info) => Ok((StatusCode::OK, Json(info))),
        Registered::Exists => Err(AppError::new(
            StatusCode::CONFLICT,
            code::AGENT_EXISTS,
            "this agent id is already taken on this relay",
        )),
    }
}

/// `GET /v1/agent`.
pub(crate) async fn me(State(state): State<AppState>, auth: AgentAuth) -> Result<Json<AgentInfo>, AppError> {
    let info = state
        .store
        .agent(&auth.agent_id)
        .await?
        .ok_or_else(|| AppError::not_found("agent"))?;
    Ok(Json(info))
}

/// `GET /v1/agent/devices`.
pub(crate) async fn devices(
    State(state): State<AppState>,
    auth: AgentAuth,
) -> Result<Json<DeviceList>, AppError> {
    Ok(Json(DeviceList {
        devices: state.store.devices(&auth.agent_id).await?,
    }))
}

/// `GET /v1/agent/roster`: the newest sealed device roster (version 0, no envelope: none stored yet). The
/// relay cannot open it; agent hosts do, and decide from it which devices may approve.
pub(crate) async fn roster(
    State(state): State<AppState>,
    auth: AgentAuth,
) -> Result<Json<RosterView>, AppError> {
    Ok(Json(state.store.roster(&auth.agent_id).await?))
}

/// `PUT /v1/agent/roster`: a compare-and-set on the version, so that two agent hosts never overwrite each
/// other's change; `409 roster_conflict` with the stored version when it moved.
pub(crate) async fn put_roster(
    State(state): State<AppState>,
    auth: AgentAuth,
    Json(body): Json<PutRoster>,
) -> Result<Json<RosterView>, AppError> {
    check_envelope("envelope", &body.envelope)?;
    if body.version > i64::MAX as u64 || body.version <= body.previous_version {
        return Err(AppError::new(
            StatusCode::BAD_REQUEST,
            code::INVALID_INPUT,
            "version must be greater than previousVersion",
        ));
    }
    match state
        .store
        .put_roster(
            &auth.agent_id,
            body.previous_version,
            body.version,
            &body.envelope,
            Timestamp::now(),
        )
        .await?
    {
        RosterPut::Stored(view) => Ok(Json(view)),
        RosterPut::Conflict { current } => Err(AppError::new(
            StatusCode::CONFLICT,
            code::ROSTER_CONFLICT,
            format!(
                "the roster is at version {current}, not at the previous version given: read it again and retry"
            ),
        )
        .with_details(serde_json::json!({ "version": current }))),
    }
}

/// `DELETE /v1/agent/devices/{deviceId}`: idempotent; the first revocation time is kept.
pub(crate) async fn revoke_device(
    State(state): State<AppState>,
    auth: AgentAuth,
    Path(device_id): Path<String>,
) -> Result<Json<DeviceInfo>, AppError> {
    let info = state
        .store
        .revoke_device(&auth.agent_id, &device_id, Timestamp::now())
        .await?
        .ok_or_else(|| AppError::not_found("device"))?;
    // A parked conversation wait of that device ends and finds it revoked.
    state.wakes.publish(&Topic::Conversation(auth.agent_id), 0);
    Ok(Json(info))
}

/// `POST /v1/agent/checkpoints`: idempotent by `checkpointId`.
pub(crate) async fn save_checkpoint(
    State(state): State<AppState>,
    auth: AgentAuth,
    Json(body): Json<SaveCheckpoint>,
) -> Result<(StatusCode, Json<Stored>), AppError> {
    check_id("checkpoint id", &body.checkpoint_id)?;
    check_envelope("envelope", &body.envelope)?;
    let item = state
        .store
        .put_checkpoint(
            &auth.agent_id,
            &body.checkpoint_id,
            &body.envelope,
            Timestamp::now(),
        )
        .await?;
    Ok(stored(item.created, item))
}

/// Query of `GET /v1/agent/checkpoints`.
#[derive(Debug, Deserialize)]
pub(crate) struct CheckpointQuery {
    #[serde(default)]
    limit: Option<u32>,
}

/// `GET /v1/agent/checkpoints?limit=`: latest first; `limit` defaults to 10 and is kept within 1..=100.
pub(crate) async fn checkpoints(
    State(state): State<AppState>,
    auth: AgentAuth,
    Query(q): Query<CheckpointQuery>,
) -> Result<Json<CheckpointList>, AppError> {
    let limit = q
        .limit
        .unwrap_or(DEFAULT_CHECKPOINT_LIMIT)
        .clamp(1, MAX_CHECKPOINT_LIMIT);
    Ok(Json(CheckpointList {
        checkpoints: state.store.checkpoints(&auth.agent_id, limit).await?,
    }))
}

/// `GET /v1/agent/status`.
pub(crate) async fn status(State(state): State<AppState>, auth: AgentAuth) -> Result<Json<Status>, AppError> {
    status_of(&state, &auth.agent_id, None).await.map(Json)
}

/// The status of an agent, for its own credential (`device_id` `None`) or one of its devices', whose open
/// questions are those sent to it.
pub(crate) async fn status_of(
    state: &AppState,
    agent_id: &str,
    device_id: Option<&str>,
) -> Result<Status, AppError> {
    let now = Timestamp::now();
    let agent = state
        .store
        .agent(agent_id)
        .await?
        .ok_or_else(|| AppError::not_found("agent"))?;
    let facts = state.store.status_facts(agent_id).await?;
    let open_questions = state.store.open_question_count(agent_id, device_id, now).await?;
    let open = state.store.sessions(agent_id).await?;
    let sessions: Vec<SessionSummary> = open
        .iter()
        .map(|row| presence::session_summary(now, row, &state.activity.session_snapshot(agent_id, &row.name)))
        .collect();
    // The agent's lease, as one session shows it: its live session open longest.
    let lease = open.into_iter().find(|row| row.live(now)).map(Lease::from);
    let waits = state.activity.snapshot(agent_id);
    Ok(Status {
        agent,
        presence: presence::presence(now, &waits, &facts, lease.as_ref()),
        session: lease.map(|l| l.holder),
        sessions,
        listening: waits.parked > 0,
        last_wait_at: waits.last_wait_at(),
        messages: facts.messages,
        last_checkpoint_at: facts.last_checkpoint_at,
        devices: facts.devices,
        relay_time: now,
        open_questions,
    })
}
