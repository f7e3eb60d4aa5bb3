//! The router and the state every handler shares.

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{delete, get, post};
use pacerelle_core::wire::MAX_BODY_BYTES;
use tower_http::trace::TraceLayer;

use crate::config::Config;
use crate::presence::Activity;
use crate::ratelimit::RateLimiter;
use crate::routes::{agent, device, health, messages, pairing, session};
use crate::store::Store;
use crate::wake::{Shutdown, Wakes};

/// What the handlers share.
#[derive(Debug)]
pub(crate) struct Inner {
    pub config: Config,
    pub store: Store,
    pub wakes: Wakes,
    pub activity: Activity,
    pub limiter: RateLimiter,
    pub shutdown: Shutdown,
}

/// The handlers' state.
pub(crate) type AppState = Arc<Inner>;

/// The relay's routes (the table in [`pacerelle_core::wire`]), usable without a socket.
pub(crate) fn app(state: AppState) -> Router {
    Router::new()
        .route("/v1/health", get(health::health))
        .route("/v1/agents", post(agent::register))
        .route("/v1/agent", get(agent::me))
        .route("/v1/agent/pairings", post(pairing::create))
        .route("/v1/agent/devices", get(agent::devices))
        .route("/v1/agent/devices/{device_id}", delete(agent::revoke_device))
        .route("/v1/agent/messages", get(messages::wait))
        .route(
            "/v1/agent/messages/{message_id}/processed",
            post(messages::processed),
        )
        .route("/v1/agent/replies", post(messages::reply))
        .route(
            "/v1/agent/checkpoints",
            post(agent::save_checkpoint).get(agent::checkpoints),
        )
        .route("/v1/agent/sessions", post(session::open))
        .route(
            "/v1/agent/sessions/{session_id}/heartbeat",
            post(session::heartbeat),
        )
        .route("/v1/agent/sessions/{session_id}", delete(session::release))
        .route("/v1/agent/status", get(agent::status))
        .route("/v1/pairings/{pairing_id}", get(pairing::offer))
        .route("/v1/pairings/{pairing_id}/claim", post(pairing::claim))
        .route("/v1/device", get(device::me).delete(device::leave))
        .route("/v1/device/messages", post(messages::send))
        .route("/v1/device/conversation", get(messages::conversation))
        .route("/v1/device/status", get(device::status))
        .fallback(health::no_route)
        .method_not_allowed_fallback(health::method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}
