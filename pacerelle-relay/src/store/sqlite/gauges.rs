//! Figures `GET /metrics` reads at each scrape: how many webhook events and Web Push messages wait in their
//! outboxes, and since when the oldest one waits. Two small reads on the read pool, beside the writer.

use pacerelle_core::Timestamp;

use super::{Result, SqliteStore, ts};

/// One outbox's depth and age.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct OutboxFigures {
    /// Entries waiting for delivery (a first attempt or another).
    pub pending: u64,
    /// When the oldest of them was queued; `None` when the outbox is empty.
    pub oldest: Option<Timestamp>,
}

/// The figures of both outboxes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Outboxes {
    /// Webhook events in the state `pending`.
    pub webhook: OutboxFigures,
    /// Web Push messages queued (a push leaves the outbox once delivered, dropped or given up).
    pub push: OutboxFigures,
}

fn figures((pending, oldest): (i64, Option<i64>)) -> OutboxFigures {
    OutboxFigures {
        pending: u64::try_from(pending).unwrap_or(0),
        oldest: oldest.map(ts),
    }
}

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
            webhook: figures(webhook),
            push: figures(push),
        })
    }
}
