//! Web Push routes: the relay's VAPID key, and a device's push subscriptions (`docs/push.md`).

use axum::extract::State;
use axum::http::StatusCode;
use pacerelle_core::wire::code;
use pacerelle_core::{Timestamp, b64, webpush};
use serde::{Deserialize, Serialize};

use crate::app::AppState;
use crate::auth::DeviceAuth;
use crate::error::AppError;
use crate::extract::Json;
use crate::store::{MAX_PER_DEVICE, PushPut};

/// Longest endpoint accepted.
const MAX_ENDPOINT_LEN: usize = 2048;

/// `GET /v1/push/key`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PushKey {
    /// The VAPID public key, base64url (65 bytes): the `applicationServerKey` of `PushManager.subscribe`.
    public_key: String,
}

/// `POST /v1/device/push`: `PushSubscription.toJSON()`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Subscription {
    endpoint: String,
    #[serde(default)]
    #[allow(dead_code)]
    // Accepted as browsers send it; the push service's 404/410 is what ends a subscription.
    expiration_time: Option<serde_json::Value>,
    keys: Keys,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Keys {
    p256dh: String,
    auth: String,
}

/// `DELETE /v1/device/push`.
#[derive(Debug, Deserialize)]
pub(crate) struct Unsubscribe {
    endpoint: String,
}

/// The answer of `POST /v1/device/push`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Subscribed {
    endpoint: String,
    created_at: Timestamp,
}

/// `GET /v1/push/key` (no authentication).
pub(crate) async fn key(State(state): State<AppState>) -> Json<PushKey> {
    Json(PushKey {
        public_key: state.vapid.public_key_b64(),
    })
}

/// `POST /v1/device/push`: registers (201) or renews (200) a subscription of the calling device.
pub(crate) async fn subscribe(
    State(state): State<AppState>,
    auth: DeviceAuth,
    Json(body): Json<Subscription>,
) -> Result<(StatusCode, Json<Subscribed>), AppError> {
    if body.endpoint.is_empty() || body.endpoint.len() > MAX_ENDPOINT_LEN {
        return Err(AppError::invalid_input(format!(
            "endpoint must be a URL of at most {MAX_ENDPOINT_LEN} bytes"
        )));
    }
    let p256dh = b64::decode(&body.keys.p256dh)
        .ok_or_else(|| AppError::invalid_input("keys.p256dh must be base64url without padding"))?;
    webpush::parse_public_key(&p256dh).map_err(|_| {
        AppError::invalid_input(
            "keys.p256dh must be an uncompressed P-256 public key (65 bytes, on the curve)",
        )
    })?;
    let auth_secret = b64::decode(&body.keys.auth)
        .filter(|a| a.len() == webpush::AUTH_LEN)
        .ok_or_else(|| AppError::invalid_input("keys.auth must be 16 bytes of base64url without padding"))?;
    let allow_private = state.config.allow_private_push_endpoints;
    match crate::push::check_endpoint(&body.endpoint, allow_private).await {
        Ok(_) => {}
        Err(None) => {
            return Err(AppError::invalid_input(
                "endpoint must be an http(s) URL with a host",
            ));
        }
        Err(Some(forbidden)) => {
            return Err(AppError::new(
                StatusCode::BAD_REQUEST,
                code::PUSH_ENDPOINT_FORBIDDEN,
                forbidden.0,
            ));
        }
    }
    let put = state
        .store
        .put_push_subscription(
            &auth.agent_id,
            &auth.device_id,
            &body.endpoint,
            &p256dh,
            &auth_secret,
            Timestamp::now(),
        )
        .await?;
    let (status, created_at) = match put {
        PushPut::Created(at) => (StatusCode::CREATED, at),
        PushPut::Replaced(at) => (StatusCode::OK, at),
        PushPut::TooMany => {
            return Err(AppError::invalid_input(format!(
                "a device holds at most {MAX_PER_DEVICE} push subscriptions: remove one first"
            )));
        }
    };
    Ok((
        status,
        Json(Subscribed {
            endpoint: body.endpoint,
            created_at,
        }),
    ))
}

/// `DELETE /v1/device/push`: removes a subscription of the calling device (204, also when unknown).
pub(crate) async fn unsubscribe(
    State(state): State<AppState>,
    auth: DeviceAuth,
    Json(body): Json<Unsubscribe>,
) -> Result<StatusCode, AppError> {
    state
        .store
        .delete_push_subscription(&auth.device_id, &body.endpoint)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
