//! Webhooks and their outbox (`docs/adr/0002-webhook-outbox.md`).
//!
//! An event is queued by [`queue_event`] inside the transaction that changes the question's state, so the
//! two commit or roll back together. The deliverer then reads due events, and records each attempt's outcome
//! in its own committed write.

use pacerelle_core::wire::{Delivery, WebhookEvent, WebhookInfo};
use pacerelle_core::{Timestamp, ids};
use sqlx::SqliteConnection;

use super::{Result, SqliteStore, ts};
use crate::error::StoreError;
use crate::store::DueEvent;

/// Prefix of event ids.
const EVENT: &str = "evt";

/// Queues a `event_type` event for the question at `seq` if the agent has a webhook now. The body is the
/// question as it stands in this transaction, frozen: every attempt sends the same bytes. At most one event
/// of each type per question. Returns whether an event was queued.
pub(super) async fn queue_event(
    conn: &mut SqliteConnection,
    agent_id: &str,
    seq: i64,
    event_type: &str,
    now: Timestamp,
) -> Result<bool> {
    let has_webhook: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM webhooks WHERE agent_id = ?1)")
        .bind(agent_id)
        .fetch_one(&mut *conn)
        .await?;
    if !has_webhook {
        return Ok(false);
    }
    let question = super::questions::row_at(conn, seq).await?.view(now)?;
    let event = WebhookEvent {
        id: ids::generate(EVENT),
        event_type: event_type.to_string(),
        created_at: now,
        agent_id: agent_id.to_string(),
        question,
    };
    let body =
        serde_json::to_string(&event).map_err(|e| StoreError::Internal(sqlx::Error::Encode(Box::new(e))))?;
    let queued = sqlx::query(
        "INSERT OR IGNORE INTO webhook_events
             (event_id, agent_id, event_type, question_seq, question_id, body, state, created_at, next_attempt_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'pending', ?7, ?7)",
    )
    .bind(&event.id)
    .bind(agent_id)
    .bind(event_type)
    .bind(seq)
    .bind(&event.question.question_id)
    .bind(&body)
    .bind(now.millis())
    .execute(&mut *conn)
    .await?
    .rows_affected();
    Ok(queued == 1)
}

type DeliveryRow = (
    String,
    String,
    String,
    String,
    i64,
    Option<i64>,
    Option<String>,
    i64,
    Option<i64>,
    Option<i64>,
);

fn delivery(
    (
        event_id,
        event_type,
        question_id,
        state,
        attempts,
        last_status,
        last_error,
        created_at,
        delivered_at,
        next_attempt_at,
    ): DeliveryRow,
) -> Delivery {
    Delivery {
        event_id,
        event_type,
        question_id,
        state,
        attempts: u32::try_from(attempts).unwrap_or(u32::MAX),
        last_status: last_status.and_then(|s| u16::try_from(s).ok()),
        last_error,
        created_at: ts(created_at),
        delivered_at: delivered_at.map(ts),
        next_attempt_at: next_attempt_at.map(ts),
    }
}

impl SqliteStore {
    /// Sets (or replaces) the agent's webhook.
    pub(crate) async fn set_webhook(
        &self,
        agent_id: &str,
        url: &str,
        secret: &str,
        now: Timestamp,
    ) -> Result<WebhookInfo> {
        let (agent_id, stored_url, secret) = (agent_id.to_string(), url.to_string(), secret.to_string());
        self.write(move |conn| {
            Box::pin(async move {
                sqlx::query(
                    "INSERT INTO webhooks (agent_id, url, secret, updated_at) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (agent_id) DO UPDATE SET url = excluded.url, secret = excluded.secret,
                                                          updated_at = excluded.updated_at",
                )
                .bind(&agent_id)
                .bind(&stored_url)
                .bind(&secret)
                .bind(now.millis())
                .execute(&mut *conn)
                .await?;
                Ok(())
            })
        })
        .await?;
        Ok(WebhookInfo {
            url: Some(url.to_string()),
            updated_at: Some(now),
        })
    }

    /// The agent's webhook (never its secret).
    pub(crate) async fn webhook(&self, agent_id: &str) -> Result<WebhookInfo> {
        let row: Option<(String, i64)> =
            sqlx::query_as("SELECT url, updated_at FROM webhooks WHERE agent_id = ?1")
                .bind(agent_id)
                .fetch_optional(&self.read)
                .await?;
        Ok(WebhookInfo {
            url: row.as_ref().map(|(url, _)| url.clone()),
            updated_at: row.map(|(_, at)| ts(at)),
        })
    }

    /// Removes the agent's webhook; its events still pending are failed (they have nowhere to go).
    pub(crate) async fn delete_webhook(&self, agent_id: &str) -> Result<WebhookInfo> {
        let agent_id = agent_id.to_string();
        self.write(move |conn| {
            Box::pin(async move {
                sqlx::query("DELETE FROM webhooks WHERE agent_id = ?1")
                    .bind(&agent_id)
                    .execute(&mut *conn)
                    .await?;
                sqlx::query(
                    "UPDATE webhook_events SET state = 'failed', next_attempt_at = NULL,
                            last_error = 'the webhook was removed'
                     WHERE agent_id = ?1 AND state = 'pending'",
                )
                .bind(&agent_id)
                .execute(&mut *conn)
                .await?;
                Ok(())
            })
        })
        .await?;
        Ok(WebhookInfo {
            url: None,
            updated_at: None,
        })
    }

    /// The agent's events, newest first.
    pub(crate) async fn deliveries(&self, agent_id: &str, limit: u32) -> Result<Vec<Delivery>> {
        let rows: Vec<DeliveryRow> = sqlx::query_as(
            "SELECT event_id, event_type, question_id, state, attempts, last_status, last_error, created_at,
                    delivered_at, next_attempt_at
             FROM webhook_events WHERE agent_id = ?1 ORDER BY created_at DESC, rowid DESC LIMIT ?2",
        )
        .bind(agent_id)
        .bind(i64::from(limit))
        .fetch_all(&self.read)
        .await?;
        Ok(rows.into_iter().map(delivery).collect())
    }

    /// Pending events whose next attempt is due, the most overdue first, with their agent's webhook now.
    pub(crate) async fn due_events(&self, now: Timestamp, limit: u32) -> Result<Vec<DueEvent>> {
        type Row = (String, String, i64, i64, Option<String>, Option<String>);
        let rows: Vec<Row> = sqlx::query_as(
            "SELECT e.event_id, e.body, e.attempts, e.created_at, w.url, w.secret
             FROM webhook_events e LEFT JOIN webhooks w ON w.agent_id = e.agent_id
             WHERE e.state = 'pending' AND e.next_attempt_at <= ?1
             ORDER BY e.next_attempt_at, e.rowid LIMIT ?2",
        )
        .bind(now.millis())
        .bind(i64::from(limit))
        .fetch_all(&self.read)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(event_id, body, attempts, created_at, url, secret)| DueEvent {
                event_id,
                body,
                attempts: u32::try_from(attempts).unwrap_or(u32::MAX),
                created_at: ts(created_at),
                target: url.zip(secret),
            })
            .collect())
    }

    /// When the next pending event is due.
    pub(crate) async fn next_event_due(&self) -> Result<Option<Timestamp>> {
        let at: Option<i64> =
            sqlx::query_scalar("SELECT MIN(next_attempt_at) FROM webhook_events WHERE state = 'pending'")
                .fetch_one(&self.read)
                .await?;
        Ok(at.map(ts))
    }

    /// Records a delivery (a 2xx answer): the event is never sent again.
    pub(crate) async fn event_delivered(&self, event_id: &str, status: u16, now: Timestamp) -> Result<()> {
        let event_id = event_id.to_string();
        self.write(move |conn| {
            Box::pin(async move {
                sqlx::query(
                    "UPDATE webhook_events
                     SET state = 'delivered', attempts = attempts + 1, last_status = ?2, last_error = NULL,
                         delivered_at = ?3, next_attempt_at = NULL
                     WHERE event_id = ?1 AND state = 'pending'",
                )
                .bind(&event_id)
                .bind(i64::from(status))
                .bind(now.millis())
                .execute(&mut *conn)
                .await?;
                Ok(())
            })
        })
        .await
    }

    /// Records a failed attempt: tried again at `next`, or failed for good when `next` is none.
    pub(crate) async fn event_attempt_failed(
        &self,
        event_id: &str,
        status: Option<u16>,
        error: &str,
        next: Option<Timestamp>,
    ) -> Result<()> {
        let (event_id, error) = (event_id.to_string(), error.to_string());
        self.write(move |conn| {
            Box::pin(async move {
                sqlx::query(
                    "UPDATE webhook_events
                     SET attempts = attempts + 1, last_status = ?2, last_error = ?3,
                         state = CASE WHEN ?4 IS NULL THEN 'failed' ELSE 'pending' END, next_attempt_at = ?4
                     WHERE event_id = ?1 AND state = 'pending'",
                )
                .bind(&event_id)
                .bind(status.map(i64::from))
                .bind(&error)
                .bind(next.map(Timestamp::millis))
                .execute(&mut *conn)
                .await?;
                Ok(())
            })
        })
        .await
    }
}
