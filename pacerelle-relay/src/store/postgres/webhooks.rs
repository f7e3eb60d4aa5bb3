//! The PostgreSQL backend: webhooks and their outbox (mirrors `sqlite/webhooks.rs`,
//! `docs/adr/0002-webhook-outbox.md`).
//!
//! An event is queued by [`crate::store::questions`] inside the transaction that changes the question's state
//! (which holds the agent's lock), so the two commit or roll back together; in that transaction too, the
//! agent's oldest pending events beyond the outbox cap are dropped. The agent's webhook row is read `FOR
//! SHARE`: a removal under way finishes first (and no event is queued), or waits until the event is stored
//! (and then fails it with the other pending ones).
//!
//! Several relay instances deliver from one outbox (ADR 0003). [`PgStore::due_events`] therefore *claims* what
//! it returns: it locks the due rows with `FOR UPDATE SKIP LOCKED` and moves their next attempt [`CLAIM`]
//! ahead in the same transaction, so no other instance reads them while the attempt is in flight; the attempt's
//! outcome ([`PgStore::event_delivered`], [`PgStore::event_attempt_failed`]) then replaces that time. An
//! instance that dies mid-attempt leaves the event to be sent again once the claim lapses (at least once, as
//! the outbox promises). It returns one event per agent, the agent's most overdue: the deliverer starts one
//! attempt per agent at a time, and an event it left unstarted would otherwise wait out the claim.
//!
//! Secrets are stored sealed with the relay's webhook key, never in clear, as in SQLite; a database copied
//! from SQLite holds no clear secret (`store copy` reads them sealed), but a row in clear is still opened.

use std::time::Duration;

use super::prelude::*;
use crate::error::StoreError;
use crate::store::rows::{DROPPED, DueEventRow, due_event};

/// How long an event claimed by [`PgStore::due_events`] stays out of other reads: well beyond an attempt's
/// time limits (10 s by default), so only an instance that stopped mid-attempt lets it lapse.
pub(super) const CLAIM: Duration = Duration::from_secs(300);

fn seal_error() -> StoreError {
    StoreError::internal("cannot seal the webhook secret (system random generator)")
}

/// Counts a committed write transaction in the store's [`crate::store::WriterCounts`].
fn wrote(store: &PgStore) {
    store.committed();
}

impl PgStore {
    /// Sets (or replaces) the agent's webhook.
    pub(crate) async fn set_webhook(&self, hook: &NewWebhook<'_>) -> Result<WebhookInfo> {
        let (agent_id, url, secret, now) = (hook.agent_id, hook.url, hook.secret, hook.now);
        let sealed = self.key.seal(agent_id, secret).map_err(|_| seal_error())?;
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO webhooks (agent_id, url, sealed_secret, updated_at) VALUES ($1, $2, $3, $4)
             ON CONFLICT (agent_id) DO UPDATE SET url = EXCLUDED.url, secret = NULL,
                                                  sealed_secret = EXCLUDED.sealed_secret,
                                                  updated_at = EXCLUDED.updated_at",
        )
        .bind(agent_id)
        .bind(url)
        .bind(sealed)
        .bind(now.millis())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        wrote(self);
        Ok(WebhookInfo {
            url: Some(url.to_string()),
            updated_at: Some(now),
        })
    }

    /// Removes the agent's webhook; its events still pending are failed (they have nowhere to go).
    pub(crate) async fn delete_webhook(&self, agent_id: &str) -> Result<WebhookInfo> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("DELETE FROM webhooks WHERE agent_id = $1")
            .bind(agent_id)
            .execute(&mut *tx)
            .await?;
        // A statement of its own, after the row's lock: it sees an event queued by a transaction that held
        // the row `FOR SHARE` and committed meanwhile.
        sqlx::query(
            "UPDATE webhook_events SET state = 'failed', next_attempt_at = NULL,
                    last_error = 'the webhook was removed'
             WHERE agent_id = $1 AND state = 'pending'",
        )
        .bind(agent_id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        wrote(self);
        Ok(WebhookInfo {
            url: None,
            updated_at: None,
        })
    }

    /// Claims pending events whose next attempt is due, the most overdue first, one per agent (its event due
    /// first), with their agent's webhook now (its secret opened), none of the agents in `busy` (those with an
    /// attempt in flight here). Claimed rows are skipped by other instances' reads until their attempt is
    /// recorded or [`CLAIM`] has passed (see the module's documentation).
    pub(crate) async fn due_events(&self, due: &Due<'_, String>) -> Result<Vec<DueEvent>> {
        let claim_until = due
            .now
            .millis()
            .saturating_add(i64::try_from(CLAIM.as_millis()).unwrap_or(i64::MAX));
        let mut tx = self.pool.begin().await?;
        // Each agent's first due event (by the partial index of pending events per agent), then those rows
        // locked, skipping any another instance is claiming right due.now. The lock re-checks the row: one whose
        // claim committed meanwhile is no longer due.
        let claimed: Vec<String> = sqlx::query_scalar(
            "SELECT e.event_id FROM webhook_events e
             WHERE e.event_id IN (SELECT DISTINCT ON (agent_id) event_id FROM webhook_events
                                  WHERE state = 'pending' AND next_attempt_at <= $1
                                    AND agent_id <> ALL ($3::TEXT[])
                                  ORDER BY agent_id, next_attempt_at, rowid)
               AND e.state = 'pending' AND e.next_attempt_at <= $1
             ORDER BY e.next_attempt_at, e.rowid LIMIT $2
             FOR UPDATE SKIP LOCKED",
        )
        .bind(due.now.millis())
        .bind(i64::from(due.limit))
        .bind(due.busy)
        .fetch_all(&mut *tx)
        .await?;
        if claimed.is_empty() {
            tx.commit().await?;
            return Ok(Vec::new());
        }
        let rows: Vec<DueEventRow> = sqlx::query_as(
            "WITH claimed AS (
                 UPDATE webhook_events SET next_attempt_at = $2 WHERE event_id = ANY ($1::TEXT[])
                 RETURNING event_id, agent_id, body, attempts, created_at
             )
             SELECT c.event_id, c.agent_id, c.body, c.attempts, c.created_at, w.url, w.sealed_secret, w.secret
             FROM claimed c LEFT JOIN webhooks w ON w.agent_id = c.agent_id",
        )
        .bind(&claimed)
        .bind(claim_until)
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        wrote(self);
        // In the order claimed: the most overdue first.
        let mut due: Vec<DueEvent> = rows.into_iter().map(|row| due_event(row, &self.key)).collect();
        due.sort_by_key(|e| {
            claimed
                .iter()
                .position(|id| *id == e.event_id)
                .unwrap_or(usize::MAX)
        });
        Ok(due)
    }

    /// When the next pending event of an agent not in `busy` is due (an event claimed by another instance:
    /// when its claim lapses).
    pub(crate) async fn next_event_due(&self, busy: &[String]) -> Result<Option<Timestamp>> {
        let at: Option<i64> = sqlx::query_scalar(
            "SELECT MIN(next_attempt_at) FROM webhook_events
             WHERE state = 'pending' AND agent_id <> ALL ($1::TEXT[])",
        )
        .bind(busy)
        .fetch_one(&self.pool)
        .await?;
        Ok(at.map(ts))
    }

    /// Sets the outbox cap: the most events one agent may have pending (at least 1). Called when the relay
    /// opens, before it serves; the next event queued for an agent above the cap drops its oldest.
    pub(crate) async fn set_max_pending_events(&self, cap: u32) -> Result<()> {
        let cap = i64::from(cap.max(1));
        let mut tx = self.pool.begin().await?;
        sqlx::query("UPDATE webhook_outbox_cap SET max_pending = $1")
            .bind(cap)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        wrote(self);
        Ok(())
    }

    /// Records a delivery (a 2xx answer): the event is never sent again. An event dropped from a full outbox
    /// while its attempt was in flight is recorded as delivered too: the receiver has it.
    pub(crate) async fn event_delivered(&self, event_id: &str, status: u16, now: Timestamp) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "UPDATE webhook_events
             SET state = 'delivered', attempts = attempts + 1, last_status = $2, last_error = NULL,
                 delivered_at = $3, next_attempt_at = NULL
             WHERE event_id = $1
               AND (state = 'pending' OR (state = 'failed' AND starts_with(last_error, $4)))",
        )
        .bind(event_id)
        .bind(i64::from(status))
        .bind(now.millis())
        .bind(DROPPED)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        wrote(self);
        Ok(())
    }

    /// Records a failed attempt: tried again at `next`, or failed for good when `next` is none.
    pub(crate) async fn event_attempt_failed(
        &self,
        failed: &FailedAttempt<'_, &str, Option<Timestamp>>,
    ) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "UPDATE webhook_events
             SET attempts = attempts + 1, last_status = $2, last_error = $3,
                 state = CASE WHEN $4::BIGINT IS NULL THEN 'failed' ELSE 'pending' END, next_attempt_at = $4
             WHERE event_id = $1 AND state = 'pending'",
        )
        .bind(failed.id)
        .bind(failed.status.map(i64::from))
        .bind(failed.error)
        .bind(failed.next.map(Timestamp::millis))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        wrote(self);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    //! The claim that lets several instances deliver, on a fresh database of the test cluster when
    //! `PACERELLE_TEST_POSTGRES` asks for one, passing with a word that it was skipped otherwise. The tests both
    //! backends share are in `crate::store::suite::webhooks`.

    use super::super::questions::tests::{T0, database, futures_join, open};
    use super::*;
    use crate::store::Store;
    use crate::store::Target;
    use crate::store::suite::webhooks::{backlog, cancelled, due_questions, pair, with_webhook};

    #[tokio::test]
    async fn the_due_read_claims_each_agents_first_event_until_its_outcome_or_the_claim_lapses() {
        let Some(url) = database().await else {
            return;
        };
        let dir = tempfile::tempdir().expect("a temporary directory");
        let store = Store::Postgres(open(&url, &dir).await);
        backlog(&store).await;
        let now = Timestamp(T0 + 100);
        let busy = ["ag_1".to_string()];
        // The most overdue first, one per agent: an agent's is its event due first.
        let due = store.due_events(now, &[], 10).await.expect("due");
        assert!(
            matches!(&due[0].target, Target::Webhook { secret, .. } if secret == "whsec_0123456789abcdef")
        );
        assert_eq!(due_questions(due), [pair("ag_1", "a1"), pair("ag_2", "b1")]);
        // Claimed: no read takes them again until their claim lapses; the agent's next one is due.
        let claim = i64::try_from(CLAIM.as_millis()).expect("millis");
        assert_eq!(
            due_questions(store.due_events(now, &[], 10).await.expect("due")),
            [pair("ag_1", "a2")]
        );
        for next in ["a3", "a4"] {
            assert_eq!(
                due_questions(store.due_events(now, &[], 10).await.expect("due")),
                [pair("ag_1", next)]
            );
        }
        assert!(store.due_events(now, &[], 10).await.expect("due").is_empty());
        let log = store.deliveries("ag_2", 1).await.expect("log");
        assert_eq!(log[0].next_attempt_at, Some(now.plus_millis(claim)));
        // The attempt's outcome replaces the claim.
        store
            .event_attempt_failed(
                &log[0].event_id,
                None,
                "connection refused",
                Some(Timestamp(T0 + 150)),
            )
            .await
            .expect("recorded");
        assert_eq!(
            store.next_event_due(&busy).await.expect("next"),
            Some(Timestamp(T0 + 150))
        );
        assert!(
            store
                .due_events(Timestamp(T0 + 149), &busy, 10)
                .await
                .expect("due")
                .is_empty()
        );
        let again = store
            .due_events(Timestamp(T0 + 150), &busy, 10)
            .await
            .expect("due");
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].attempts, 1);
        // A lapsed claim (its instance stopped mid-attempt) is due again.
        let lapsed = store
            .due_events(now.plus_millis(claim), &[], 10)
            .await
            .expect("due");
        assert_eq!(due_questions(lapsed), [pair("ag_1", "a1")]);
    }

    #[tokio::test]
    async fn two_instances_reading_at_once_never_claim_the_same_event() {
        let Some(url) = database().await else {
            return;
        };
        let dir = tempfile::tempdir().expect("a temporary directory");
        let first = open(&url, &dir).await;
        let store = Store::Postgres(first.clone());
        for i in 0..30 {
            let agent = format!("ag_m{i}");
            with_webhook(&store, &agent, u8::try_from(i + 10).expect("small")).await;
            cancelled(&store, &agent, &format!("{agent}_q"), 10).await;
        }
        let other = open(&url, &dir).await;
        let mut reads = Vec::new();
        for instance in [first.clone(), other.clone(), first, other] {
            reads.push(tokio::spawn(async move {
                let mut got = Vec::new();
                loop {
                    let due = instance
                        .as_store()
                        .due_events(Timestamp(T0 + 100), &[], 4)
                        .await
                        .expect("due");
                    if due.is_empty() {
                        return got;
                    }
                    got.extend(due.into_iter().map(|e| e.event_id));
                }
            }));
        }
        let mut claimed: Vec<String> = futures_join(reads).await.into_iter().flatten().collect();
        let total = claimed.len();
        claimed.sort();
        claimed.dedup();
        assert_eq!(
            (total, claimed.len()),
            (30, 30),
            "each event claimed once, by one reader"
        );
    }
}
