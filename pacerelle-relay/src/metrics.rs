//! `GET /metrics`: the relay's figures in the Prometheus text format, when the operator turns it on
//! (`--metrics`; off by default, since the figures tell how busy the relay is and whoever can reach the relay
//! can read them).

use std::sync::Arc;

use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;

use crate::app::AppState;
use crate::error::AppError;
use crate::store::{Store, WriterCounts};

/// The registry of the relay's metrics.
#[derive(Debug)]
pub(crate) struct Metrics {
    registry: Registry,
    /// Kept so that the counters live as long as the registry.
    _writer: Arc<WriterCounts>,
}

impl Metrics {
    /// The metrics of a relay on `store`.
    pub(crate) fn new(store: &Store) -> Metrics {
        let mut registry = Registry::with_prefix("pacerelle");
        let writer = store.writer_counts();
        registry.register(
            "store_commits",
            "Write transactions committed, each with one synced commit",
            writer.commits.clone(),
        );
        registry.register("store_writes", "Writes run by the store's writer", writer.writes.clone());
        registry.register(
            "store_batch_writes",
            "Writes that shared one commit (group commit)",
            writer.batch.clone(),
        );
        Metrics {
            registry,
            _writer: writer,
        }
    }

    /// The metrics as Prometheus text.
    fn text(&self) -> Result<String, std::fmt::Error> {
        let mut text = String::new();
        encode(&mut text, &self.registry)?;
        Ok(text)
    }
}

/// `GET /metrics`: 404 `no_route` unless the operator turned metrics on.
pub(crate) async fn metrics(State(state): State<AppState>) -> Result<Response, AppError> {
    if !state.config.metrics {
        return Err(crate::routes::health::no_route().await);
    }
    let text = state
        .metrics
        .text()
        .map_err(|e| AppError::internal(&e))?;
    Ok((
        [(CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")],
        text,
    )
        .into_response())
}
