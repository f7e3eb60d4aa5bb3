//! Webhooks: set the agent's URL and secret, read the delivery log, and verify a received event.
//!
//! The relay POSTs `question.answered`, `question.expired` and `question.cancelled` events with the header
//! `pacerelle-signature: t=<unix seconds>,v1=<lowercase hex HMAC-SHA256(secret, "<t>." ‖ body)>`.
//! [`verify_webhook`] (from the core, which the relay's signing uses too) checks it in constant time, within
//! a tolerance window either way, and parses the body.

use std::time::Duration;

use pacerelle_core::wire::{DeliveryLog, SetWebhook, WebhookInfo};
use reqwest::Method;

use crate::agent::AgentClient;
use crate::error::{Error, Result};
use crate::http::Req;

pub use pacerelle_core::webhook::{WebhookError, sign_webhook, verify_webhook};
pub use pacerelle_core::wire::{Delivery, EVENT_ID_HEADER, SIGNATURE_HEADER};

/// A sensible tolerance for [`verify_webhook`]: five minutes.
pub const DEFAULT_TOLERANCE: Duration = Duration::from_secs(300);
/// Shortest and longest webhook secret the relay accepts, in characters.
pub const SECRET_LEN: std::ops::RangeInclusive<usize> = 16..=256;
const PATH: &str = "/v1/agent/webhook";

impl AgentClient {
    /// Sets the agent's webhook: the relay POSTs question events to `url`, signed with `secret` (16 to 256
    /// characters; never returned by the relay).
    pub async fn set_webhook(&self, url: &str, secret: &str) -> Result<WebhookInfo> {
        let url = url.trim();
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(Error::InvalidInput(
                "a webhook URL starts with http:// or https://".into(),
            ));
        }
        if !SECRET_LEN.contains(&secret.chars().count()) {
            return Err(Error::InvalidInput(
                "a webhook secret has 16 to 256 characters".into(),
            ));
        }
        let body = SetWebhook {
            url: url.to_string(),
            secret: secret.to_string(),
        };
        self.inner
            .http
            .send(Req {
                body: Some(&body),
                ..self.req(Method::PUT, PATH)
            })
            .await
    }

    /// The agent's webhook (`url` is none when none is set).
    pub async fn webhook(&self) -> Result<WebhookInfo> {
        self.inner.http.send(self.req::<()>(Method::GET, PATH)).await
    }

    /// Removes the agent's webhook; events are no longer sent.
    pub async fn clear_webhook(&self) -> Result<WebhookInfo> {
        self.inner.http.send(self.req::<()>(Method::DELETE, PATH)).await
    }

    /// The latest deliveries, newest first.
    pub async fn webhook_deliveries(&self, limit: u32) -> Result<Vec<Delivery>> {
        let query = [("limit", limit.clamp(1, 100).to_string())];
        let path = format!("{PATH}/deliveries");
        let log: DeliveryLog = self
            .inner
            .http
            .send(Req {
                query: &query,
                ..self.req::<()>(Method::GET, &path)
            })
            .await?;
        Ok(log.deliveries)
    }
}
