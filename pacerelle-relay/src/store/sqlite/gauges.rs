//! Figures `GET /metrics` reads at each scrape: how many webhook events and Web Push messages wait in their
//! outboxes, and since when the oldest one waits. Two small reads on the read pool, beside the writer.

use super::{Result, SqliteStore};
use crate::store::{OutboxFigures, Outboxes};

impl SqliteStore {
    /// The depth and age of the webhook and push outboxes. The webhook count reads the partial index of
    /// pending events; the push outbox holds only pushes not yet delivered, so it is counted whole.
    pub(crate) async fn outboxes(&self) -> Result<Outboxes> {
        let webhook: (i64, Option<i64>) =
            sqlx::query_as("SELECT COUNT(*), MIN(created_at) FROM webhook_events WHERE state = 'pending'")
                .fetch_one(&self.read)
                .await?;
        let push: (i64, Option<i64>) = sqlx::query_as("SELECT COUNT(*), MIN(created_at) FROM push_outbox")
            .fetch_one(&self.read)
            .await?;
        Ok(Outboxes {
            webhook: OutboxFigures::of(webhook),
            push: OutboxFigures::of(push),
        })
    }
}
