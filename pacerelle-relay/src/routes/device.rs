//! Device routes: the device itself, leaving, status.

use axum::extract::State;
use pacerelle_core::Timestamp;
use pacerelle_core::wire::{DeviceInfo, DeviceSelf, Status};

use crate::app::AppState;
use crate::auth::DeviceAuth;
use crate::error::AppError;
use crate::extract::Json;
use crate::routes::agent::status_of;
use crate::wake::Topic;

/// `GET /v1/device`: the calling device and its agent.
pub(crate) async fn me(
    State(state): State<AppState>,
    auth: DeviceAuth,
) -> Result<Json<DeviceSelf>, AppError> {
    let device = state
        .store
        .device(&auth.agent_id, &auth.device_id)
        .await?
        .ok_or_else(|| AppError::not_found("device"))?;
    let agent = state
        .store
        .agent(&auth.agent_id)
        .await?
        .ok_or_else(|| AppError::not_found("agent"))?;
    Ok(Json(DeviceSelf { device, agent }))
}

/// `DELETE /v1/device`: the device leaves (it is revoked; its credential stops working).
pub(crate) async fn leave(
    State(state): State<AppState>,
    auth: DeviceAuth,
) -> Result<Json<DeviceInfo>, AppError> {
    let info = state
        .store
        .revoke_device(&auth.agent_id, &auth.device_id, Timestamp::now())
        .await?
        .ok_or_else(|| AppError::not_found("device"))?;
    state.wakes.publish(&Topic::Conversation(auth.agent_id), 0);
    Ok(Json(info))
}

/// `GET /v1/device/status`: the agent's status as the phone sees it.
pub(crate) async fn status(
    State(state): State<AppState>,
    auth: DeviceAuth,
) -> Result<Json<Status>, AppError> {
    status_of(&state, &auth.agent_id).await.map(Json)
}
