//! `GET /v1/health` and the answers for unknown routes and methods.

use axum::extract::State;
use axum::http::{Method, StatusCode, Uri};
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

/// Any path that is not a route: 404 `no_route`.
pub(crate) async fn no_route(method: Method, uri: Uri) -> AppError {
    AppError::new(
        StatusCode::NOT_FOUND,
        code::NO_ROUTE,
        format!("no route {method} {}", uri.path()),
    )
}

/// A route called with a method it does not have: 405 `method_not_allowed`.
pub(crate) async fn method_not_allowed(method: Method, uri: Uri) -> AppError {
    AppError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        code::METHOD_NOT_ALLOWED,
        format!("{method} is not allowed on {}", uri.path()),
    )
}
