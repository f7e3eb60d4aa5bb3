//! The PostgreSQL backend: webhooks (mirrors `sqlite/webhooks.rs`).

use super::prelude::*;

/// Queues the webhook event of a question's closing (mirrors `sqlite::webhooks::queue_event`); call it in the
/// write that closes it. Returns whether an event was queued.
pub(super) async fn queue_event(
    _conn: &mut PgConnection,
    _agent_id: &str,
    _seq: i64,
    _event_type: &str,
    _now: Timestamp,
) -> Result<bool> {
    Err(not_yet("webhook queue_event"))
}

impl PgStore {
    pub(crate) async fn set_webhook(
        &self,
        _agent_id: &str,
        _url: &str,
        _secret: &str,
        _now: Timestamp,
    ) -> Result<WebhookInfo> {
        Err(not_yet("set_webhook"))
    }

    pub(crate) async fn webhook(&self, _agent_id: &str) -> Result<WebhookInfo> {
        Err(not_yet("webhook"))
    }

    pub(crate) async fn delete_webhook(&self, _agent_id: &str) -> Result<WebhookInfo> {
        Err(not_yet("delete_webhook"))
    }

    pub(crate) async fn deliveries(&self, _agent_id: &str, _limit: u32) -> Result<Vec<Delivery>> {
        Err(not_yet("deliveries"))
    }

    pub(crate) async fn due_events(
        &self,
        _now: Timestamp,
        _busy: &[String],
        _limit: u32,
    ) -> Result<Vec<DueEvent>> {
        Err(not_yet("due_events"))
    }

    pub(crate) async fn next_event_due(&self, _busy: &[String]) -> Result<Option<Timestamp>> {
        Err(not_yet("next_event_due"))
    }

    pub(crate) async fn set_max_pending_events(&self, _cap: u32) -> Result<()> {
        Err(not_yet("set_max_pending_events"))
    }

    pub(crate) async fn event_delivered(&self, _event_id: &str, _status: u16, _now: Timestamp) -> Result<()> {
        Err(not_yet("event_delivered"))
    }

    pub(crate) async fn event_attempt_failed(
        &self,
        _event_id: &str,
        _status: Option<u16>,
        _error: &str,
        _next: Option<Timestamp>,
    ) -> Result<()> {
        Err(not_yet("event_attempt_failed"))
    }
}
