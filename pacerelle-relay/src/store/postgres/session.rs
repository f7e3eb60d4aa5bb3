//! The PostgreSQL backend: agent sessions and the lease — one session per name consumes the inbox at a time (mirrors
//! `sqlite/session.rs`). The lease is read from the database, so every relay instance sees the same holder.

use super::prelude::*;
use crate::store::{ReleasedRow, lease_ttl_ms, released};

impl PgStore {
    /// Opens a session that takes the lease, unless a live one holds it and `takeover` is false. The agent's
    /// counter row is locked first: of two concurrent opens, the second finds the first one's session.
    pub(crate) async fn open_session(&self, new: &NewSession<'_>) -> Result<SessionOpened> {
        let mut tx = self.pool.begin().await?;
        super::lock_agent(&mut tx, new.agent_id).await?;
        let outcome = open_session_in(&mut tx, new).await?;
        tx.commit().await?;
        self.committed();
        Ok(outcome)
    }

    /// Renews the lease if this session still holds it when the statement runs (its own transaction): whether
    /// it did ([`crate::store::Store::heartbeat`]).
    pub(in crate::store) async fn renew(&self, session: &SessionAt<'_>) -> Result<bool> {
        let renewed = sqlx::query(
            "UPDATE sessions SET last_heartbeat_at = $3
             WHERE agent_id = $1 AND session_id = $2 AND ended_at IS NULL
               AND last_heartbeat_at + $4 > $3",
        )
        .bind(session.agent_id)
        .bind(session.session_id)
        .bind(session.now.millis())
        .bind(lease_ttl_ms())
        .execute(&self.pool)
        .await?
        .rows_affected();
        self.committed();
        Ok(renewed > 0)
    }

    /// Ends a session (idempotent). `None` when the agent has no such session.
    pub(crate) async fn release(&self, session: &SessionAt<'_>) -> Result<Option<SessionInfo>> {
        // One statement, its own transaction.
        let row: Option<ReleasedRow> = sqlx::query_as(
            "UPDATE sessions SET ended_at = COALESCE(ended_at, LEAST($3, last_heartbeat_at + $4))
             WHERE agent_id = $1 AND session_id = $2
             RETURNING host, since, ended_at, name, folder",
        )
        .bind(session.agent_id)
        .bind(session.session_id)
        .bind(session.now.millis())
        .bind(lease_ttl_ms())
        .fetch_optional(&self.pool)
        .await?;
        self.committed();
        Ok(row.map(|row| released(session.session_id, row)))
    }
}

/// [`PgStore::open_session`] within its transaction, the agent already locked.
async fn open_session_in(conn: &mut PgConnection, new: &NewSession<'_>) -> Result<SessionOpened> {
    let open: Option<(String, String, i64, i64)> = sqlx::query_as(
        "SELECT session_id, host, since, last_heartbeat_at FROM sessions
         WHERE agent_id = $1 AND name = $2 AND ended_at IS NULL",
    )
    .bind(new.agent_id)
    .bind(new.name)
    .fetch_optional(&mut *conn)
    .await?;
    if let Some(open) = open {
        let (old_id, ended) = match SessionOpened::end_open(open, new.name, new.takeover, new.now) {
            Ok(end) => end,
            Err(in_use) => return Ok(in_use),
        };
        sqlx::query("UPDATE sessions SET ended_at = $2 WHERE session_id = $1")
            .bind(&old_id)
            .bind(ended)
            .execute(&mut *conn)
            .await?;
    }
    sqlx::query(
        "INSERT INTO sessions (session_id, agent_id, host, since, last_heartbeat_at, name, folder)
         VALUES ($1, $2, $3, $4, $4, $5, $6)",
    )
    .bind(new.session_id)
    .bind(new.agent_id)
    .bind(new.host)
    .bind(new.now.millis())
    .bind(new.name)
    .bind(new.folder)
    .execute(&mut *conn)
    .await?;
    Ok(SessionOpened::opened(new.session_id.to_string(), new))
}
