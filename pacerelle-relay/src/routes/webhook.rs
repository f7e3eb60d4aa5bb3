//! The agent's webhook: where question events are POSTed, the secret that signs them, and the delivery log
//! (`docs/webhooks.md`).

use axum::extract::State;
use pacerelle_core::Timestamp;
use pacerelle_core::wire::{DeliveryLog, SetWebhook, WebhookInfo};
use serde::Deserialize;

use super::questions::MAX_LOG_LIMIT;
use crate::app::AppState;
use crate::auth::AgentAuth;
use crate::error::AppError;
use crate::extract::{Json, Query};

/// Longest webhook URL, in characters.
pub(crate) const MAX_URL_CHARS: usize = 2048;
/// Shortest signing secret, in characters.
pub(crate) const MIN_SECRET_CHARS: usize = 16;
/// Longest signing secret, in characters.
pub(crate) const MAX_SECRET_CHARS: usize = 256;
/// Deliveries listed when no limit is given.
const DEFAULT_DELIVERY_LIMIT: u32 = 50;

/// An `http://` or `https://` URL with a host, at most 2048 characters.
fn check_url(url: &str) -> Result<(), AppError> {
    let bad = || {
        AppError::invalid_input(format!(
            "url must be an http:// or https:// URL with a host, at most {MAX_URL_CHARS} characters"
        ))
    };
    if url.is_empty() || url.chars().count() > MAX_URL_CHARS || url.chars().any(char::is_control) {
        return Err(bad());
    }
    let parsed = reqwest::Url::parse(url).map_err(|_| bad())?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none_or(str::is_empty) {
        return Err(bad());
    }
    Ok(())
}

fn check_secret(secret: &str) -> Result<(), AppError> {
    let chars = secret.chars().count();
    if !(MIN_SECRET_CHARS..=MAX_SECRET_CHARS).contains(&chars) {
        return Err(AppError::invalid_input(format!(
            "secret must have {MIN_SECRET_CHARS} to {MAX_SECRET_CHARS} characters"
        )));
    }
    Ok(())
}

/// `PUT /v1/agent/webhook`: sets or replaces the webhook. Events not yet delivered go to the new URL, signed
/// with the new secret.
pub(crate) async fn set(
    State(state): State<AppState>,
    auth: AgentAuth,
    Json(body): Json<SetWebhook>,
) -> Result<Json<WebhookInfo>, AppError> {
    check_url(&body.url)?;
    check_secret(&body.secret)?;
    let info = state
        .store
        .set_webhook(&auth.agent_id, &body.url, &body.secret, Timestamp::now())
        .await?;
    // Events waiting for a webhook that was unreachable may now be deliverable.
    state.webhook_kick.notify_one();
    Ok(Json(info))
}

/// `GET /v1/agent/webhook`: the URL and when it was set, never the secret.
pub(crate) async fn get(
    State(state): State<AppState>,
    auth: AgentAuth,
) -> Result<Json<WebhookInfo>, AppError> {
    Ok(Json(state.store.webhook(&auth.agent_id).await?))
}

/// `DELETE /v1/agent/webhook`: removes the webhook (idempotent); its pending events are failed.
pub(crate) async fn delete(
    State(state): State<AppState>,
    auth: AgentAuth,
) -> Result<Json<WebhookInfo>, AppError> {
    Ok(Json(state.store.delete_webhook(&auth.agent_id).await?))
}

/// Query of `GET /v1/agent/webhook/deliveries`.
#[derive(Debug, Deserialize)]
pub(crate) struct DeliveryParams {
    #[serde(default)]
    limit: Option<String>,
}

/// `GET /v1/agent/webhook/deliveries?limit=`: events and their delivery state, newest first.
pub(crate) async fn deliveries(
    State(state): State<AppState>,
    auth: AgentAuth,
    Query(q): Query<DeliveryParams>,
) -> Result<Json<DeliveryLog>, AppError> {
    let limit = match q.limit.as_deref().filter(|t| !t.is_empty()) {
        None => DEFAULT_DELIVERY_LIMIT,
        Some(t) => t
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=MAX_LOG_LIMIT).contains(n))
            .ok_or_else(|| AppError::invalid_input("limit must be a number from 1 to 200"))?,
    };
    Ok(Json(DeliveryLog {
        deliveries: state.store.deliveries(&auth.agent_id, limit).await?,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        for good in [
            "http://127.0.0.1:9000/hook",
            "https://hooks.example/pacerelle?x=1",
            "https://[::1]:8443/",
        ] {
            check_url(good).unwrap_or_else(|_| panic!("{good} is fine"));
        }
        let long = format!("https://example.com/{}", "a".repeat(MAX_URL_CHARS));
        for bad in [
            "",
            "example.com/hook",
            "ftp://example.com/",
            "file:///etc/passwd",
            "http://",
            "javascript:alert(1)",
            "http://exa mple.com/",
            "http://example.com/\n",
            long.as_str(),
        ] {
            assert!(check_url(bad).is_err(), "{bad:?} is refused");
        }
    }

    #[test]
    fn secrets() {
        assert!(check_secret("short").is_err());
        assert!(check_secret(&"s".repeat(257)).is_err());
        check_secret(&"s".repeat(16)).expect("16 is fine");
        check_secret(&"é".repeat(256)).expect("256 characters are fine");
    }
}
