//! Device routes: the device itself, its signing key, leaving, status.

use axum::extract::State;
use axum::http::StatusCode;
use pacerelle_core::pairing::Role;
use pacerelle_core::wire::{DeviceInfo, DeviceSelf, MessageCounts, RegisterSigningKey, Status, code};
use pacerelle_core::{Timestamp, b64, signing};

use crate::app::AppState;
use crate::auth::DeviceAuth;
use crate::error::AppError;
use crate::extract::Json;
use crate::routes::agent::status_of;
use crate::store::{SigningKeyCopy, SigningKeyPut};
use crate::wake::Topic;

/// Largest sealed signing key, in bytes once decoded. The seal holds a payload of about 150 bytes
/// (`pacerelle_core::signing::SigningKeyPayload`) and the envelope's overhead; 1 KiB leaves room and bounds
/// what a device may make the relay store.
pub(crate) const MAX_SIGNING_KEY_SEAL_BYTES: usize = 1024;

/// Checks a device's signing key as it gives it: `signingKey` base64url of exactly 32 bytes and
/// `signingKeySeal` non-empty base64url of at most [`MAX_SIGNING_KEY_SEAL_BYTES`]. The relay cannot open the
/// seal; the agent does, and refuses a key that differs from the clear copy.
pub(crate) fn check_signing_key<'a>(key: &'a str, seal: &'a str) -> Result<SigningKeyCopy<'a>, AppError> {
    if signing::PublicKey::parse(key).is_none() {
        return Err(AppError::invalid_input(format!(
            "signingKey must be base64url of {} bytes",
            signing::PUBLIC_KEY_LEN
        )));
    }
    match b64::decode(seal) {
        Some(bytes) if !bytes.is_empty() && bytes.len() <= MAX_SIGNING_KEY_SEAL_BYTES => {}
        _ => {
            return Err(AppError::invalid_input(format!(
                "signingKeySeal must be non-empty base64url of at most {MAX_SIGNING_KEY_SEAL_BYTES} bytes"
            )));
        }
    }
    Ok(SigningKeyCopy { key, seal })
}

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

/// `PUT /v1/device/signing-key`: a device paired before signing keys registers its key, once. The same key and
/// seal again answers as the first time (a retry); another is `409 signing_key_exists`.
pub(crate) async fn register_signing_key(
    State(state): State<AppState>,
    auth: DeviceAuth,
    Json(body): Json<RegisterSigningKey>,
) -> Result<Json<DeviceInfo>, AppError> {
    let signing = check_signing_key(&body.signing_key, &body.signing_key_seal)?;
    match state
        .store
        .register_signing_key(&auth.agent_id, &auth.device_id, signing)
        .await?
    {
        SigningKeyPut::Stored(info) => {
            tracing::info!(agent = %auth.agent_id, device = %auth.device_id, "device signing key registered");
            Ok(Json(info))
        }
        SigningKeyPut::Again(info) => Ok(Json(info)),
        SigningKeyPut::Exists => Err(AppError::new(
            StatusCode::CONFLICT,
            code::SIGNING_KEY_EXISTS,
            "this device already has a signing key; it never changes (pair the device again for a new one)",
        )),
        SigningKeyPut::NotFound => Err(AppError::not_found("device")),
    }
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

/// `GET /v1/device/status`: the agent's status as the phone sees it. A Partner-mode user's device (role
/// `user`) learns whether the agent is there (presence, listening, last wait), not the agent's own figures,
/// which count the owner's and the other users' work: no session host, no sessions (their names, hosts and
/// folders), no task or device counts, nor checkpoint time.
pub(crate) async fn status(
    State(state): State<AppState>,
    auth: DeviceAuth,
) -> Result<Json<Status>, AppError> {
    let status = status_of(&state, &auth.agent_id, Some(&auth.device_id)).await?;
    if auth.role != Role::User {
        return Ok(Json(status));
    }
    Ok(Json(Status {
        session: None,
        sessions: Vec::new(),
        messages: MessageCounts::default(),
        last_checkpoint_at: None,
        devices: 0,
        ..status
    }))
}
