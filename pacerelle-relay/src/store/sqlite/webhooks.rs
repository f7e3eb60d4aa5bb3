//! Webhooks and their outbox (`docs/adr/0002-webhook-outbox.md`).
//!
//! An event is queued by [`crate::store::questions`] inside the transaction that changes the question's state, so the
//! two commit or roll back together; in that transaction too, the agent's oldest pending events beyond the
//! outbox cap (`--max-pending-events`, stored by [`SqliteStore::set_max_pending_events`]) are dropped. The
//! deliverer then reads due events of the agents not already in flight, and records each attempt's outcome
//! in its own committed write.
//!
//! Secrets are stored sealed with the relay's webhook key (`sealed_secret`), never in clear: [`SqliteStore::
//! set_webhook`] seals, [`SqliteStore::due_events`] opens, and [`seal_clear_secrets`] seals at start what an
//! earlier version stored in clear (migration `0004_webhook_secret.sql`).

use crate::store::commands::{Due, FailedAttempt, NewWebhook};
use pacerelle_core::Timestamp;
use pacerelle_core::wire::WebhookInfo;
use rusqlite::params;
use sqlx::{Connection, SqlitePool};

use super::{Result, SqliteStore, ts};
use crate::at_rest::key::WebhookKey;
use crate::error::StoreError;
use crate::store::DueEvent;
use crate::store::rows::{DROPPED, DueEventRow, due_event};

fn seal_error() -> StoreError {
    StoreError::internal("cannot seal the webhook secret (system random generator)")
}

/// At start, on the write connection, before the readers and the writer exist: seals every secret stored in
/// clear by an earlier version, then compacts the database (`VACUUM`, then a truncating WAL checkpoint) so
/// that no copy in clear is left in the database file or its WAL. Logs the secrets that do not open with
/// this key (the key file was lost or replaced): their agents must set their webhook again.
pub(super) async fn seal_clear_secrets(pool: &SqlitePool, key: &WebhookKey) -> Result<()> {
    let mut conn = pool.acquire().await?;
    let clear: Vec<(String, String)> = sqlx::query_as(
        "SELECT agent_id, secret FROM webhooks WHERE sealed_secret IS NULL AND secret IS NOT NULL",
    )
    .fetch_all(&mut *conn)
    .await?;
    if !clear.is_empty() {
        let mut tx = conn.begin().await?;
        for (agent_id, secret) in &clear {
            let sealed = key.seal(agent_id, secret).map_err(|_| seal_error())?;
            sqlx::query("UPDATE webhooks SET sealed_secret = ?2, secret = NULL WHERE agent_id = ?1")
                .bind(agent_id)
                .bind(sealed)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        // Rewrites every page: the old rows' bytes, in freed cells and freed pages, are gone.
        sqlx::query("VACUUM").execute(&mut *conn).await?;
        let (busy, _, _): (i64, i64, i64) = sqlx::query_as("PRAGMA wal_checkpoint(TRUNCATE)")
            .fetch_one(&mut *conn)
            .await?;
        tracing::info!(
            count = clear.len(),
            "sealed the webhook secrets an earlier version stored in clear, and compacted the database"
        );
        if busy != 0 {
            tracing::warn!(
                "another process holds the database open: its WAL may keep old pages until the next checkpoint"
            );
        }
    }
    let sealed: Vec<(String, Vec<u8>)> =
        sqlx::query_as("SELECT agent_id, sealed_secret FROM webhooks WHERE sealed_secret IS NOT NULL")
            .fetch_all(&mut *conn)
            .await?;
    let unreadable = sealed
        .iter()
        .filter(|(agent_id, sealed)| key.open(agent_id, sealed).is_none())
        .count();
    if unreadable > 0 {
        tracing::warn!(
            count = unreadable,
            key = %key.path().display(),
            "webhook secrets do not open with this webhook key (was it lost or replaced?): their events fail \
             until each agent sets its webhook again"
        );
    }
    Ok(())
}

/// The busy keys as the JSON array that `json_each` reads in the due queries.
pub(super) fn json_keys<K: serde::Serialize>(keys: &[K]) -> Result<String> {
    serde_json::to_string(keys).map_err(|e| StoreError::Internal(Box::new(e)))
}

impl SqliteStore {
    /// Sets (or replaces) the agent's webhook.
    pub(crate) async fn set_webhook(&self, hook: &NewWebhook<'_>) -> Result<WebhookInfo> {
        let (agent_id, url, secret, now) = (hook.agent_id, hook.url, hook.secret, hook.now);
        let sealed = self.key.seal(agent_id, secret).map_err(|_| seal_error())?;
        let (agent_id, stored_url) = (agent_id.to_string(), url.to_string());
        self.write(move |conn| {
            conn.prepare_cached(
                "INSERT INTO webhooks (agent_id, url, sealed_secret, updated_at) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (agent_id) DO UPDATE SET url = excluded.url, secret = NULL,
                                                          sealed_secret = excluded.sealed_secret,
                                                          updated_at = excluded.updated_at",
            )?
            .execute(params![agent_id, stored_url, sealed, now.millis()])?;
            Ok(())
        })
        .await?;
        Ok(WebhookInfo {
            url: Some(url.to_string()),
            updated_at: Some(now),
        })
    }

    /// Removes the agent's webhook; its events still pending are failed (they have nowhere to go).
    pub(crate) async fn delete_webhook(&self, agent_id: &str) -> Result<WebhookInfo> {
        let agent_id = agent_id.to_string();
        self.write(move |conn| {
            conn.prepare_cached("DELETE FROM webhooks WHERE agent_id = ?1")?
                .execute([&agent_id])?;
            conn.prepare_cached(
                "UPDATE webhook_events SET state = 'failed', next_attempt_at = NULL,
                            last_error = 'the webhook was removed'
                     WHERE agent_id = ?1 AND state = 'pending'",
            )?
            .execute([&agent_id])?;
            Ok(())
        })
        .await?;
        Ok(WebhookInfo {
            url: None,
            updated_at: None,
        })
    }

    /// Pending events whose next attempt is due, the most overdue first (an agent's first is its event due
    /// first), with their agent's webhook now (its secret opened), none of the agents in `busy` (those with an
    /// attempt in flight): a backlog in flight is not read again and again.
    pub(crate) async fn due_events(&self, due: &Due<'_, String>) -> Result<Vec<DueEvent>> {
        let (limit, now) = (due.limit, due.now);
        let rows: Vec<DueEventRow> = sqlx::query_as(
            "SELECT e.event_id, e.agent_id, e.body, e.attempts, e.created_at, w.url, w.sealed_secret, w.secret
             FROM webhook_events e LEFT JOIN webhooks w ON w.agent_id = e.agent_id
             WHERE e.state = 'pending' AND e.next_attempt_at <= ?1
               AND e.agent_id NOT IN (SELECT value FROM json_each(?3))
             ORDER BY e.next_attempt_at, e.rowid LIMIT ?2",
        )
        .bind(now.millis())
        .bind(i64::from(limit))
        .bind(json_keys(due.busy)?)
        .fetch_all(&self.read)
        .await?;
        Ok(rows.into_iter().map(|row| due_event(row, &self.key)).collect())
    }

    /// When the next pending event of an agent not in `busy` is due.
    pub(crate) async fn next_event_due(&self, busy: &[String]) -> Result<Option<Timestamp>> {
        let at: Option<i64> = sqlx::query_scalar(
            "SELECT next_attempt_at FROM webhook_events
             WHERE state = 'pending' AND agent_id NOT IN (SELECT value FROM json_each(?1))
             ORDER BY next_attempt_at LIMIT 1",
        )
        .bind(json_keys(busy)?)
        .fetch_optional(&self.read)
        .await?;
        Ok(at.map(ts))
    }

    /// Sets the outbox cap: the most events one agent may have pending (at least 1). Called when the relay
    /// opens, before it serves; the next event queued for an agent above the cap drops its oldest.
    pub(crate) async fn set_max_pending_events(&self, cap: u32) -> Result<()> {
        let cap = i64::from(cap.max(1));
        self.write(move |conn| {
            conn.prepare_cached("UPDATE webhook_outbox_cap SET max_pending = ?1")?
                .execute([cap])?;
            Ok(())
        })
        .await
    }

    /// Records a delivery (a 2xx answer): the event is never sent again. An event dropped from a full outbox
    /// while its attempt was in flight is recorded as delivered too: the receiver has it.
    pub(crate) async fn event_delivered(&self, event_id: &str, status: u16, now: Timestamp) -> Result<()> {
        let event_id = event_id.to_string();
        self.write(move |conn| {
            conn.prepare_cached(
                "UPDATE webhook_events
                     SET state = 'delivered', attempts = attempts + 1, last_status = ?2, last_error = NULL,
                         delivered_at = ?3, next_attempt_at = NULL
                     WHERE event_id = ?1
                       AND (state = 'pending' OR (state = 'failed' AND substr(last_error, 1, length(?4)) = ?4))",
            )?
            .execute(params![event_id, i64::from(status), now.millis(), DROPPED])?;
            Ok(())
        })
        .await
    }

    /// Records a failed attempt: tried again at `next`, or failed for good when `next` is none.
    pub(crate) async fn event_attempt_failed(
        &self,
        failed: &FailedAttempt<'_, &str, Option<Timestamp>>,
    ) -> Result<()> {
        let (event_id, error) = (failed.id.to_string(), failed.error.to_string());
        let (status, next) = (failed.status, failed.next);
        self.write(move |conn| {
            conn.prepare_cached(
                "UPDATE webhook_events
                     SET attempts = attempts + 1, last_status = ?2, last_error = ?3,
                         state = CASE WHEN ?4 IS NULL THEN 'failed' ELSE 'pending' END, next_attempt_at = ?4
                     WHERE event_id = ?1 AND state = 'pending'",
            )?
            .execute(params![
                event_id,
                status.map(i64::from),
                error,
                next.map(Timestamp::millis)
            ])?;
            Ok(())
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    //! What only the SQLite file has: the secrets an earlier version left in clear, the due read of one relay.
    //! The tests both backends share are in `crate::store::suite::webhooks`.

    use super::super::tests::T0;
    use super::*;
    use crate::store::Store;
    use crate::store::Target;
    use crate::store::suite::webhooks::{backlog, due_questions, pair};

    const OLD: &str = "whsec_replaced_before_the_upgrade";
    const SECRET: &str = "whsec_stored_in_clear_by_version_2";

    /// The bytes of the database file and of its WAL, if any.
    fn file_bytes(path: &std::path::Path) -> Vec<u8> {
        let mut bytes = std::fs::read(path).expect("the database file");
        let [_, wal, ..] = crate::at_rest::database_files(path);
        if let Ok(more) = std::fs::read(wal) {
            bytes.extend(more);
        }
        bytes
    }

    fn contains(haystack: &[u8], needle: &str) -> bool {
        haystack.windows(needle.len()).any(|w| w == needle.as_bytes())
    }

    #[tokio::test]
    async fn a_secret_stored_in_clear_by_version_2_is_sealed_at_start_and_gone_from_the_file() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("v2.db");
        let pool = super::super::tests::database_at(&path, 2).await;
        for sql in [
            "INSERT INTO agents (agent_id, name, auth_hash, created_at) VALUES ('ag_1', 'laptop', x'01', 1)",
            "INSERT INTO agents (agent_id, name, auth_hash, created_at) VALUES ('ag_2', 'server', x'02', 1)",
            // Replaced once: the first secret's bytes may linger in the page's free space.
            "INSERT INTO webhooks (agent_id, url, secret, updated_at)
             VALUES ('ag_1', 'http://127.0.0.1:9/hook', 'whsec_replaced_before_the_upgrade', 1)",
            "UPDATE webhooks SET secret = 'whsec_stored_in_clear_by_version_2', updated_at = 2",
            "INSERT INTO items (agent_id, kind, item_id, envelope, created_at) VALUES ('ag_1', 'question', 'q1', 'AA', 3)",
            "INSERT INTO questions (item_seq, agent_id, kind, state, expires_at, closed_at)
             VALUES (1, 'ag_1', 'yes_no', 'cancelled', 10, 4)",
            "INSERT INTO webhook_events (event_id, agent_id, event_type, question_seq, question_id, body, state,
                                         created_at, next_attempt_at)
             VALUES ('evt_1', 'ag_1', 'question.cancelled', 1, 'q1', '{}', 'pending', 4, 4)",
        ] {
            sqlx::query(sql).execute(&pool).await.expect(sql);
        }
        pool.close().await;
        let before = file_bytes(&path);
        assert!(
            contains(&before, SECRET),
            "the test starts from a secret in clear"
        );

        let store = SqliteStore::open(&path).await.expect("migrates");
        let after = file_bytes(&path);
        assert!(
            !contains(&after, SECRET),
            "no clear copy of the secret in the file or its WAL"
        );
        // Freed space may hold a replaced secret before; never after.
        assert!(!contains(&after, OLD), "nor of the one it replaced");
        let (clear, sealed): (Option<String>, Option<Vec<u8>>) =
            sqlx::query_as("SELECT secret, sealed_secret FROM webhooks WHERE agent_id = 'ag_1'")
                .fetch_one(&store.read)
                .await
                .expect("the row");
        assert_eq!(clear, None);
        let sealed = sealed.expect("sealed");
        assert_eq!(store.key.open("ag_1", &sealed).as_deref(), Some(SECRET));
        assert_eq!(store.key.open("ag_2", &sealed), None, "bound to its agent");

        // The deliverer gets it opened.
        let due = store
            .as_store()
            .due_events(Timestamp(5), &[], 10)
            .await
            .expect("due");
        assert_eq!(due.len(), 1);
        assert!(
            matches!(&due[0].target, Target::Webhook { url, secret } if url == "http://127.0.0.1:9/hook" && secret == SECRET)
        );

        // A new secret is stored sealed, never in clear.
        const NEW: &str = "whsec_set_after_the_upgrade_0123";
        store
            .as_store()
            .set_webhook("ag_2", "https://hooks.example/p", NEW, Timestamp(6))
            .await
            .expect("set");
        store
            .as_store()
            .set_webhook("ag_1", "http://127.0.0.1:9/hook", NEW, Timestamp(6))
            .await
            .expect("replaced");
        let now = file_bytes(&path);
        assert!(!contains(&now, NEW) && !contains(&now, SECRET));
        let due = store
            .as_store()
            .due_events(Timestamp(7), &[], 10)
            .await
            .expect("due");
        assert!(matches!(&due[0].target, Target::Webhook { secret, .. } if secret == NEW));
        store.close().await;
    }

    /// The deliverer keeps its agents in flight in memory (one relay on the file), so a read may give several
    /// of an agent's events, in order; PostgreSQL's read claims one per agent instead (its own tests).
    #[tokio::test]
    async fn the_due_read_gives_several_of_an_agents_events_in_order() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let sqlite = SqliteStore::open(&dir.path().join("due.db"))
            .await
            .expect("opens");
        let store = Store::Sqlite(sqlite);
        backlog(&store).await;
        // The most overdue first: an agent's first row is its event due first.
        assert_eq!(
            due_questions(store.due_events(Timestamp(T0 + 100), &[], 2).await.expect("due")),
            [pair("ag_1", "a1"), pair("ag_1", "a2")]
        );
        store.close().await;
    }
}
