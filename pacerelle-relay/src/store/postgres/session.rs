//! The PostgreSQL backend: agent sessions and the lease — one session consumes the inbox at a time (mirrors
//! `sqlite/session.rs`). The lease is read from the database, so every relay instance sees the same holder.

use pacerelle_core::wire::LeaseHolder;

use super::prelude::*;
use crate::store::lease_ttl_ms;

impl PgStore {
    /// The session holding the agent's lease now, if any.
    pub(crate) async fn lease(&self, agent_id: &str, now: Timestamp) -> Result<Option<Lease>> {
        let row: Option<(String, String, i64, i64)> = sqlx::query_as(
            "SELECT session_id, host, since, last_heartbeat_at FROM sessions
             WHERE agent_id = $1 AND ended_at IS NULL",
        )
        .bind(agent_id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.and_then(|(session_id, host, since, beat)| Lease::live(session_id, host, since, beat, now)))
    }

    /// Whether this agent has (or had, within the last day) a session with this id.
    pub(crate) async fn session_known(&self, agent_id: &str, session_id: &str) -> Result<bool> {
        Ok(sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM sessions WHERE agent_id = $1 AND session_id = $2)",
        )
        .bind(agent_id)
        .bind(session_id)
        .fetch_one(&self.pool)
        .await?)
    }

    /// Opens a session that takes the lease, unless a live one holds it and `takeover` is false. The agent's
    /// counter row is locked first: of two concurrent opens, the second finds the first one's session.
    pub(crate) async fn open_session(
        &self,
        agent_id: &str,
        session_id: &str,
        host: &str,
        takeover: bool,
        now: Timestamp,
    ) -> Result<SessionOpened> {
        let mut tx = self.pool.begin().await?;
        super::lock_agent(&mut tx, agent_id).await?;
        let outcome = open_session_in(&mut tx, agent_id, session_id, host, takeover, now).await?;
        tx.commit().await?;
        self.committed();
        Ok(outcome)
    }

    /// Renews the lease if this session still holds it.
    pub(crate) async fn heartbeat(
        &self,
        agent_id: &str,
        session_id: &str,
        now: Timestamp,
    ) -> Result<Renewal> {
        let row: Option<(String, i64, i64, Option<i64>)> = sqlx::query_as(
            "SELECT host, since, last_heartbeat_at, ended_at FROM sessions
             WHERE agent_id = $1 AND session_id = $2",
        )
        .bind(agent_id)
        .bind(session_id)
        .fetch_optional(&self.pool)
        .await?;
        let Some((host, since, beat, ended_at)) = row else {
            return Ok(Renewal::NotFound);
        };
        if ended_at.is_some() || beat.saturating_add(lease_ttl_ms()) <= now.millis() {
            return Ok(Renewal::Lost);
        }
        // One statement, its own transaction: it renews only a lease still held when it runs.
        let renewed = sqlx::query(
            "UPDATE sessions SET last_heartbeat_at = $3
             WHERE agent_id = $1 AND session_id = $2 AND ended_at IS NULL
               AND last_heartbeat_at + $4 > $3",
        )
        .bind(agent_id)
        .bind(session_id)
        .bind(now.millis())
        .bind(lease_ttl_ms())
        .execute(&self.pool)
        .await?
        .rows_affected();
        self.committed();
        if renewed == 0 {
            return Ok(Renewal::Lost);
        }
        Ok(Renewal::Renewed(SessionInfo {
            session_id: session_id.to_string(),
            host,
            since: Timestamp(since),
            lease_expires_at: now.plus_millis(lease_ttl_ms()),
        }))
    }

    /// Ends a session (idempotent). `None` when the agent has no such session.
    pub(crate) async fn release(
        &self,
        agent_id: &str,
        session_id: &str,
        now: Timestamp,
    ) -> Result<Option<SessionInfo>> {
        // One statement, its own transaction.
        let row: Option<(String, i64, i64)> = sqlx::query_as(
            "UPDATE sessions SET ended_at = COALESCE(ended_at, LEAST($3, last_heartbeat_at + $4))
             WHERE agent_id = $1 AND session_id = $2
             RETURNING host, since, ended_at",
        )
        .bind(agent_id)
        .bind(session_id)
        .bind(now.millis())
        .bind(lease_ttl_ms())
        .fetch_optional(&self.pool)
        .await?;
        self.committed();
        Ok(row.map(|(host, since, ended_at)| SessionInfo {
            session_id: session_id.to_string(),
            host,
            since: Timestamp(since),
            lease_expires_at: Timestamp(ended_at),
        }))
    }
}

/// [`PgStore::open_session`] within its transaction, the agent already locked.
async fn open_session_in(
    conn: &mut PgConnection,
    agent_id: &str,
    session_id: &str,
    host: &str,
    takeover: bool,
    now: Timestamp,
) -> Result<SessionOpened> {
    let open: Option<(String, String, i64, i64)> = sqlx::query_as(
        "SELECT session_id, host, since, last_heartbeat_at FROM sessions
         WHERE agent_id = $1 AND ended_at IS NULL",
    )
    .bind(agent_id)
    .fetch_optional(&mut *conn)
    .await?;
    if let Some((old_id, old_host, since, beat)) = open {
        let live = beat.saturating_add(lease_ttl_ms()) > now.millis();
        if live && !takeover {
            return Ok(SessionOpened::InUse(LeaseHolder {
                host: old_host,
                since: Timestamp(since),
                last_heartbeat_at: Timestamp(beat),
            }));
        }
        let ended = if live {
            now.millis()
        } else {
            beat.saturating_add(lease_ttl_ms())
        };
        sqlx::query("UPDATE sessions SET ended_at = $2 WHERE session_id = $1")
            .bind(&old_id)
            .bind(ended)
            .execute(&mut *conn)
            .await?;
    }
    sqlx::query(
        "INSERT INTO sessions (session_id, agent_id, host, since, last_heartbeat_at)
         VALUES ($1, $2, $3, $4, $4)",
    )
    .bind(session_id)
    .bind(agent_id)
    .bind(host)
    .bind(now.millis())
    .execute(&mut *conn)
    .await?;
    Ok(SessionOpened::Opened(SessionInfo {
        session_id: session_id.to_string(),
        host: host.to_string(),
        since: now,
        lease_expires_at: now.plus_millis(lease_ttl_ms()),
    }))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tokio::sync::Barrier;

    use super::super::agent::tests::{T0, store};
    use super::*;

    #[tokio::test]
    async fn a_lease_lapses_without_heartbeat_and_then_anyone_may_take_it() {
        let Some((store, _dir)) = store().await else {
            return;
        };
        let ttl = lease_ttl_ms();
        let opened = store
            .open_session("ag_1", "ses_a", "laptop", false, Timestamp(T0))
            .await
            .expect("stored");
        assert!(matches!(opened, SessionOpened::Opened(_)));
        // Within the TTL: held, renewable, refused to others.
        let renewed = store
            .heartbeat("ag_1", "ses_a", Timestamp(T0 + ttl - 1))
            .await
            .expect("ok");
        assert!(matches!(renewed, Renewal::Renewed(_)));
        let refused = store
            .open_session("ag_1", "ses_b", "desktop", false, Timestamp(T0 + ttl))
            .await
            .expect("ok");
        assert!(matches!(refused, SessionOpened::InUse(ref h) if h.host == "laptop"));
        // A full TTL after the last heartbeat: lapsed.
        let late = Timestamp(T0 + 2 * ttl);
        assert!(store.lease("ag_1", late).await.expect("ok").is_none());
        assert!(matches!(
            store.heartbeat("ag_1", "ses_a", late).await.expect("ok"),
            Renewal::Lost
        ));
        let taken = store
            .open_session("ag_1", "ses_b", "desktop", false, late)
            .await
            .expect("ok");
        assert!(matches!(taken, SessionOpened::Opened(_)));
        let lease = store.lease("ag_1", late).await.expect("ok").expect("held");
        assert_eq!(lease.session_id, "ses_b");
        // The lapsed session ended when its lease ran out, not when it was taken over.
        let ended: Option<i64> =
            sqlx::query_scalar("SELECT ended_at FROM sessions WHERE session_id = 'ses_a'")
                .fetch_one(&store.pool)
                .await
                .expect("read");
        assert_eq!(ended, Some(T0 + ttl - 1 + ttl));
    }

    #[tokio::test]
    async fn a_takeover_ends_the_live_session_and_release_is_idempotent() {
        let Some((store, _dir)) = store().await else {
            return;
        };
        let ttl = lease_ttl_ms();
        store
            .open_session("ag_1", "ses_a", "laptop", false, Timestamp(T0))
            .await
            .expect("stored");
        let taken = store
            .open_session("ag_1", "ses_b", "desktop", true, Timestamp(T0 + 10))
            .await
            .expect("ok");
        assert!(matches!(taken, SessionOpened::Opened(_)));
        assert!(matches!(
            store
                .heartbeat("ag_1", "ses_a", Timestamp(T0 + 11))
                .await
                .expect("ok"),
            Renewal::Lost
        ));
        assert!(matches!(
            store
                .heartbeat("ag_1", "ses_x", Timestamp(T0 + 11))
                .await
                .expect("ok"),
            Renewal::NotFound
        ));
        assert!(store.session_known("ag_1", "ses_a").await.expect("read"));
        assert!(!store.session_known("ag_2", "ses_a").await.expect("read"));
        // Released: ended now; again: the same end.
        let released = store
            .release("ag_1", "ses_b", Timestamp(T0 + 20))
            .await
            .expect("ok")
            .expect("found");
        assert_eq!(released.lease_expires_at, Timestamp(T0 + 20));
        let again = store
            .release("ag_1", "ses_b", Timestamp(T0 + 30))
            .await
            .expect("ok")
            .expect("found");
        assert_eq!(again.lease_expires_at, Timestamp(T0 + 20));
        assert!(
            store
                .lease("ag_1", Timestamp(T0 + 30))
                .await
                .expect("ok")
                .is_none()
        );
        assert!(
            store
                .release("ag_1", "ses_x", Timestamp(T0))
                .await
                .expect("ok")
                .is_none()
        );
        // A session released after its lease lapsed ended when the lease ran out.
        store
            .open_session("ag_1", "ses_c", "laptop", false, Timestamp(T0 + 40))
            .await
            .expect("stored");
        let lapsed = store
            .release("ag_1", "ses_c", Timestamp(T0 + 40 + 3 * ttl))
            .await
            .expect("ok")
            .expect("found");
        assert_eq!(lapsed.lease_expires_at, Timestamp(T0 + 40 + ttl));
    }

    /// Eight sessions opened at once without takeover: one gets the lease, seven find it in use.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_opens_give_the_lease_to_one() {
        let Some((store, _dir)) = store().await else {
            return;
        };
        let start = Arc::new(Barrier::new(8));
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..8 {
            let (store, start) = (store.clone(), start.clone());
            tasks.spawn(async move {
                start.wait().await;
                store
                    .open_session("ag_1", &format!("ses_{i}"), "host", false, Timestamp(T0))
                    .await
                    .expect("ok")
            });
        }
        let outcomes = tasks.join_all().await;
        let opened = outcomes
            .iter()
            .filter(|o| matches!(o, SessionOpened::Opened(_)))
            .count();
        assert_eq!(opened, 1, "{outcomes:?}");
    }
}
