//! `GET /v1/health`, the probes `GET /healthz` and `GET /readyz`, and the answers for unknown routes and
//! methods.

use axum::extract::State;
use axum::http::StatusCode;
use pacerelle_core::wire::{Health, code};

use crate::app::AppState;
use crate::error::AppError;
use crate::extract::Json;

/// `GET /v1/health`.
pub(crate) async fn health(State(state): State<AppState>) -> Json<Health> {
    Json(Health {
        ok: true,
        version: env!("CARGO_PKG_VERSION").to_string(),
        open_registration: state.config.open_registration,
    })
}

/// `GET /healthz`: the process answers (a liveness probe). Touches nothing else, so a slow database never
/// makes an orchestrator restart a relay that is only waiting for it.
pub(crate) async fn healthz() -> &'static str {
    "ok\n"
}

/// `GET /readyz`: the relay can serve (a readiness probe, for a load balancer): not shutting down, the database
/// answers a read within a second, and it holds every migration this relay knows. Otherwise 503 `unavailable`,
/// with the reason.
pub(crate) async fn readyz(State(state): State<AppState>) -> Result<&'static str, AppError> {
    let unready = |why: &str| {
        AppError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            code::UNAVAILABLE,
            why.to_string(),
        )
    };
    if state.shutdown.is_triggered() {
        return Err(unready("the relay is shutting down"));
    }
    match tokio::time::timeout(READY_WITHIN, state.store.ready()).await {
        Ok(Ok(true)) => Ok("ready\n"),
        Ok(Ok(false)) => Err(unready(
            "the database lacks migrations this relay needs; restart the relay to apply them",
        )),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "readiness: the database does not answer");
            Err(unready("the relay's storage is unavailable"))
        }
        Err(_) => Err(unready("the relay's storage did not answer within a second")),
    }
}

/// How long `/readyz` waits for the database.
const READY_WITHIN: std::time::Duration = std::time::Duration::from_secs(1);

/// Any path that is not a route: 404 `no_route`. The path is not quoted: it is part of the request, and
/// errors quote nothing of it.
pub(crate) async fn no_route() -> AppError {
    AppError::new(
        StatusCode::NOT_FOUND,
        code::NO_ROUTE,
        "no route has this method and path (docs/relay-api.md lists them)",
    )
}

/// A route called with a method it does not have: 405 `method_not_allowed`. Neither is quoted.
pub(crate) async fn method_not_allowed() -> AppError {
    AppError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        code::METHOD_NOT_ALLOWED,
        "this path does not accept this method (docs/relay-api.md lists the routes)",
    )
}
