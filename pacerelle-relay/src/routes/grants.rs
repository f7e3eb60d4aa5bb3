//! Grants (docs/relay-api.md, "Grants"): the agent registers each grant it kept and reports each use before a
//! call runs; owner devices list them and revoke them. The relay holds metadata only — what a grant covers and
//! its signature are sealed in the answer — so it can refuse a use (a revocation) but never allow one: the
//! agent checks the signed grant at every use.

use axum::extract::State;
use pacerelle_core::Timestamp;
use pacerelle_core::grant::MAX_GRANT_SECONDS;
use pacerelle_core::pairing::Role;
use pacerelle_core::wire::{DeviceGrants, GrantRecord, PutGrant};

use super::check_id;
use crate::app::AppState;
use crate::auth::{AgentAuth, DeviceAuth};
use crate::error::AppError;
use crate::extract::{Json, Path};
use crate::store::grants::GrantPut;

/// `PUT /v1/agent/grants/{grantId}`: registers a grant the agent kept, under its question's id. Idempotent:
/// a registration again returns the grant as first registered.
pub(crate) async fn put(
    State(state): State<AppState>,
    auth: AgentAuth,
    Path(grant_id): Path<String>,
    Json(body): Json<PutGrant>,
) -> Result<Json<GrantRecord>, AppError> {
    check_id("grant id", &grant_id)?;
    check_id("device id", &body.device_id)?;
    let lasts = body.expires_at.millis() - body.granted_at.millis();
    let longest = i64::try_from(MAX_GRANT_SECONDS * 1000).unwrap_or(i64::MAX);
    if lasts <= 0 || lasts > longest {
        return Err(AppError::invalid_input(format!(
            "a grant ends after it starts and lasts at most {} hours",
            MAX_GRANT_SECONDS / 3600
        )));
    }
    let put = state
        .store
        .put_grant(
            &auth.agent_id,
            &grant_id,
            &body.device_id,
            body.granted_at,
            body.expires_at,
        )
        .await?;
    match put {
        GrantPut::Stored(record) => Ok(Json(record)),
        GrantPut::NoQuestion => Err(AppError::not_found("question")),
        GrantPut::NotItsAnswer => Err(AppError::invalid_input(
            "a grant is given with a question's answer: this question was not answered on that device",
        )),
    }
}

/// `POST /v1/agent/grants/{grantId}/uses`: counts one use of a live grant and returns the grant. A revoked or
/// expired grant is returned unchanged (`revokedAt` says which): the gate then asks instead.
pub(crate) async fn use_one(
    State(state): State<AppState>,
    auth: AgentAuth,
    Path(grant_id): Path<String>,
) -> Result<Json<GrantRecord>, AppError> {
    check_id("grant id", &grant_id)?;
    state
        .store
        .use_grant(&auth.agent_id, &grant_id, Timestamp::now())
        .await?
        .map(Json)
        .ok_or_else(|| AppError::not_found("grant"))
}

/// Only an owner device sees and revokes grants: they extend an owner's approvals.
fn owner(auth: &DeviceAuth) -> Result<(), AppError> {
    if auth.role == Role::Owner {
        Ok(())
    } else {
        Err(AppError::forbidden(
            "only an owner device sees and revokes grants",
        ))
    }
}

/// `GET /v1/device/grants`: the agent's grants not ended more than a day ago, newest first, each with its
/// question sealed for this device.
pub(crate) async fn list(
    State(state): State<AppState>,
    auth: DeviceAuth,
) -> Result<Json<DeviceGrants>, AppError> {
    owner(&auth)?;
    let grants = state
        .store
        .device_grants(&auth.agent_id, &auth.device_id, Timestamp::now())
        .await?;
    Ok(Json(DeviceGrants { grants }))
}

/// `DELETE /v1/device/grants/{grantId}`: revokes a grant. Idempotent: the first revocation is kept.
pub(crate) async fn revoke(
    State(state): State<AppState>,
    auth: DeviceAuth,
    Path(grant_id): Path<String>,
) -> Result<Json<GrantRecord>, AppError> {
    owner(&auth)?;
    check_id("grant id", &grant_id)?;
    state
        .store
        .revoke_grant(&auth.agent_id, &grant_id, &auth.device_id, Timestamp::now())
        .await?
        .map(Json)
        .ok_or_else(|| AppError::not_found("grant"))
}
