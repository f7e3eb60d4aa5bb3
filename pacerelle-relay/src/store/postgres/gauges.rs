//! The PostgreSQL backend: the figures `GET /metrics` reads at each scrape (mirrors `sqlite/gauges.rs`): how many
//! webhook events and Web Push messages wait in their outboxes, and since when the oldest one waits.

use super::prelude::*;
use crate::store::OutboxFigures;

impl PgStore {
    /// The depth and age of the webhook and push outboxes. The webhook count reads the partial index of
    /// pending events; the push outbox holds only pushes not yet delivered, so it is counted whole.
    pub(crate) async fn outboxes(&self) -> Result<Outboxes> {
        let webhook: (i64, Option<i64>) =
            sqlx::query_as("SELECT COUNT(*), MIN(created_at) FROM webhook_events WHERE state = 'pending'")
                .fetch_one(&self.pool)
                .await?;
        let push: (i64, Option<i64>) = sqlx::query_as("SELECT COUNT(*), MIN(created_at) FROM push_outbox")
            .fetch_one(&self.pool)
            .await?;
        Ok(Outboxes {
            webhook: OutboxFigures::of(webhook),
            push: OutboxFigures::of(push),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::push::tests::{T0, item, store};
    use super::*;

    #[tokio::test]
    async fn the_outboxes_give_their_depth_and_oldest_entry() {
        let Some((store, _url, _dir)) = store("gauges").await else {
            return;
        };
        assert_eq!(store.outboxes().await.expect("reads"), Outboxes::default());
        store
            .put_push_subscription("ag_1", "dv_1", "a", &[4; 65], &[0; 16], Timestamp(T0))
            .await
            .expect("subscribed");
        item(&store, "notification", "n1", None, &["dv_1"], T0 + 5).await;
        item(&store, "notification", "n2", None, &["dv_1"], T0 + 9).await;
        let (q, _) = item(&store, "question", "q1", None, &[], T0).await;
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "INSERT INTO webhook_events (event_id, agent_id, event_type, question_seq, question_id, body, state,
                                         created_at, next_attempt_at, delivered_at)
             VALUES ('evt_1', 'ag_1', 'question.expired', {q}, 'q1', '{{}}', 'pending', {a}, {a}, NULL),
                    ('evt_2', 'ag_1', 'question.cancelled', {q}, 'q1', '{{}}', 'delivered', {b}, NULL, {b})",
            a = T0 + 3,
            b = T0 + 1
        )))
        .execute(&store.pool)
        .await
        .expect("events");
        let figures = store.outboxes().await.expect("reads");
        assert_eq!(
            (figures.push.pending, figures.push.oldest),
            (2, Some(Timestamp(T0 + 5)))
        );
        assert_eq!(
            (figures.webhook.pending, figures.webhook.oldest),
            (1, Some(Timestamp(T0 + 3)))
        );
        store.close().await;
    }
}
