//! Agent sessions and the lease: one session consumes the inbox at a time.

use pacerelle_core::Timestamp;
use pacerelle_core::wire::{LeaseHolder, SessionInfo};
use rusqlite::{Connection, OptionalExtension, params};

use super::{Result, SqliteStore, ts};
use crate::store::{Lease, Renewal, SessionOpened, lease_ttl_ms};

impl SqliteStore {
    /// The session holding the agent's lease now, if any.
    pub(crate) async fn lease(&self, agent_id: &str, now: Timestamp) -> Result<Option<Lease>> {
        let agent_id = agent_id.to_string();
        self.read_now(move |conn| super::lease::lease_on(conn, &agent_id, now))
            .await
    }

    /// Whether this agent has (or had, within the last day) a session with this id.
    pub(crate) async fn session_known(&self, agent_id: &str, session_id: &str) -> Result<bool> {
        let (agent_id, session_id) = (agent_id.to_string(), session_id.to_string());
        self.read_now(move |conn| super::lease::session_known_on(conn, &agent_id, &session_id))
            .await
    }

    /// Opens a session that takes the lease, unless a live one holds it and `takeover` is false.
    pub(crate) async fn open_session(
        &self,
        agent_id: &str,
        session_id: &str,
        host: &str,
        takeover: bool,
        now: Timestamp,
    ) -> Result<SessionOpened> {
        let (agent_id, session_id, host) = (agent_id.to_string(), session_id.to_string(), host.to_string());
        self.write(move |conn: &Connection| {
            let open: Option<(String, String, i64, i64)> = conn
                .prepare_cached(
                    "SELECT session_id, host, since, last_heartbeat_at FROM sessions
                     WHERE agent_id = ?1 AND ended_at IS NULL",
                )?
                .query_row(params![agent_id], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
                })
                .optional()?;
            if let Some((old_id, old_host, since, beat)) = open {
                let live = beat.saturating_add(lease_ttl_ms()) > now.millis();
                if live && !takeover {
                    return Ok(SessionOpened::InUse(LeaseHolder {
                        host: old_host,
                        since: ts(since),
                        last_heartbeat_at: ts(beat),
                    }));
                }
                let ended = if live {
                    now.millis()
                } else {
                    beat.saturating_add(lease_ttl_ms())
                };
                conn.prepare_cached("UPDATE sessions SET ended_at = ?2 WHERE session_id = ?1")?
                    .execute(params![old_id, ended])?;
            }
            conn.prepare_cached(
                "INSERT INTO sessions (session_id, agent_id, host, since, last_heartbeat_at)
                     VALUES (?1, ?2, ?3, ?4, ?4)",
            )?
            .execute(params![session_id, agent_id, host, now.millis()])?;
            Ok(SessionOpened::Opened(SessionInfo {
                session_id,
                host,
                since: now,
                lease_expires_at: now.plus_millis(lease_ttl_ms()),
            }))
        })
        .await
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
             WHERE agent_id = ?1 AND session_id = ?2",
        )
        .bind(agent_id)
        .bind(session_id)
        .fetch_optional(&self.read)
        .await?;
        let Some((host, since, beat, ended_at)) = row else {
            return Ok(Renewal::NotFound);
        };
        if ended_at.is_some() || beat.saturating_add(lease_ttl_ms()) <= now.millis() {
            return Ok(Renewal::Lost);
        }
        let (owner, session) = (agent_id.to_string(), session_id.to_string());
        let renewed = self
            .write(move |conn: &Connection| {
                Ok(conn
                    .prepare_cached(
                        "UPDATE sessions SET last_heartbeat_at = ?3
                         WHERE agent_id = ?1 AND session_id = ?2 AND ended_at IS NULL
                           AND last_heartbeat_at + ?4 > ?3",
                    )?
                    .execute(params![owner, session, now.millis(), lease_ttl_ms()])?)
            })
            .await?;
        if renewed == 0 {
            return Ok(Renewal::Lost);
        }
        Ok(Renewal::Renewed(SessionInfo {
            session_id: session_id.to_string(),
            host,
            since: ts(since),
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
        let (owner, session) = (agent_id.to_string(), session_id.to_string());
        let row: Option<(String, i64, i64)> = self
            .write(move |conn: &Connection| {
                Ok(conn
                    .prepare_cached(
                        "UPDATE sessions SET ended_at = COALESCE(ended_at, MIN(?3, last_heartbeat_at + ?4))
                         WHERE agent_id = ?1 AND session_id = ?2
                         RETURNING host, since, ended_at",
                    )?
                    .query_row(params![owner, session, now.millis(), lease_ttl_ms()], |r| {
                        Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                    })
                    .optional()?)
            })
            .await?;
        Ok(row.map(|(host, since, ended_at)| SessionInfo {
            session_id: session_id.to_string(),
            host,
            since: ts(since),
            lease_expires_at: ts(ended_at),
        }))
    }
}
