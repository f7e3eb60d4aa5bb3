//! The router and the state every handler shares.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{delete, get, post, put};
use pacerelle_core::wire::MAX_BODY_BYTES;
use tower_http::trace::TraceLayer;

use crate::config::Config;
use crate::presence::Activity;
use crate::ratelimit::RateLimiter;
use crate::routes::{agent, device, grants, health, messages, pairing, push, questions, session, webhook};
use crate::store::Store;
use crate::wake::{Shutdown, Wakes};
use crate::webhook::WebhookSettings;

/// What the handlers share.
#[derive(Debug)]
pub(crate) struct Inner {
    pub config: Config,
    pub store: Store,
    /// `GET /metrics` (when the configuration turns it on).
    pub metrics: crate::metrics::Metrics,
    pub wakes: Wakes,
    pub activity: Activity,
    pub limiter: RateLimiter,
    pub shutdown: Shutdown,
    /// How webhook events are delivered.
    pub webhooks: WebhookSettings,
    /// Wakes the webhook deliverer (an event was queued, or the relay is stopping).
    pub webhook_kick: Arc<tokio::sync::Notify>,
    /// Wakes the expirer (a question was created, or the relay is stopping).
    pub expiry_kick: Arc<tokio::sync::Notify>,
    /// The relay's base URL as pushes name it: the public URL, or else `http://<address>` once
    /// [`crate::Relay::serve`] knows where it listens.
    pub relay_url: Arc<std::sync::OnceLock<String>>,
    /// The relay's VAPID key (`push.key`): signs Web Push requests.
    pub vapid: Arc<pacerelle_core::webpush::VapidKey>,
    /// The deliverer and the expirer, awaited when the relay stops.
    pub background: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl Inner {
    /// Stops the deliverer and the expirer and waits for them: an attempt in flight finishes and its outcome
    /// is recorded, so a relay opened next on the same file does not send the event again.
    pub(crate) async fn stop_background(&self) {
        self.shutdown.trigger();
        self.webhook_kick.notify_one();
        self.expiry_kick.notify_one();
        self.wakes.any.notify_one();
        let tasks = std::mem::take(
            &mut *self
                .background
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        );
        let limit = self.webhooks.timeout + std::time::Duration::from_secs(5);
        for task in tasks {
            if tokio::time::timeout(limit, task).await.is_err() {
                tracing::warn!("a background task did not stop in time");
            }
        }
    }
}

impl crate::store::WakeHost for Inner {
    fn wakes(&self) -> &Wakes {
        &self.wakes
    }

    fn shutdown(&self) -> &Shutdown {
        &self.shutdown
    }
}

/// The handlers' state.
pub(crate) type AppState = Arc<Inner>;

/// The relay's routes (the table in [`pacerelle_core::wire`]), usable without a socket.
///
/// Every request, the unmatched ones included, passes through [`crate::metrics::track`], which counts it by
/// the route template it matched (ids never become labels).
pub(crate) fn app(state: AppState) -> Router {
    Router::new()
        .route("/v1/health", get(health::health))
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(crate::metrics::metrics))
        .route("/v1/agents", post(agent::register))
        .route("/v1/agent", get(agent::me))
        .route("/v1/agent/pairings", post(pairing::create))
        .route("/v1/agent/devices", get(agent::devices))
        .route("/v1/agent/roster", get(agent::roster).put(agent::put_roster))
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
        .route("/v1/agent/questions", post(questions::create).get(questions::log))
        .route("/v1/agent/questions/{question_id}", get(questions::get))
        .route(
            "/v1/agent/questions/{question_id}/cancel",
            post(questions::cancel),
        )
        .route(
            "/v1/agent/questions/{question_id}/answer",
            post(questions::answer_at_host),
        )
        .route("/v1/agent/notifications", post(questions::notify))
        .route("/v1/agent/grants/{grant_id}", put(grants::put))
        .route("/v1/agent/grants/{grant_id}/uses", post(grants::use_one))
        .route(
            "/v1/agent/webhook",
            put(webhook::set).get(webhook::get).delete(webhook::delete),
        )
        .route("/v1/agent/webhook/deliveries", get(webhook::deliveries))
        .route("/v1/pairings/{pairing_id}", get(pairing::offer))
        .route("/v1/pairings/{pairing_id}/claim", post(pairing::claim))
        .route("/v1/device", get(device::me).delete(device::leave))
        .route("/v1/device/messages", post(messages::send))
        .route("/v1/device/conversation", get(messages::conversation))
        .route("/v1/device/status", get(device::status))
        .route("/v1/device/signing-key", put(device::register_signing_key))
        .route("/v1/device/push", post(push::subscribe).delete(push::unsubscribe))
        .route("/v1/push/key", get(push::key))
        .route("/v1/device/questions", get(questions::for_device))
        .route("/v1/device/grants", get(grants::list))
        .route("/v1/device/grants/{grant_id}", delete(grants::revoke))
        .route(
            "/v1/device/questions/{question_id}/answer",
            post(questions::answer),
        )
        .merge(crate::web::routes())
        .fallback(health::no_route)
        .method_not_allowed_fallback(health::method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(TraceLayer::new_for_http())
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::metrics::track,
        ))
        .with_state(state)
}
