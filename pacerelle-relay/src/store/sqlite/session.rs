//! Agent sessions and the lease: one session per name consumes the inbox at a time.

use crate::store::commands::{NewSession, SessionAt};
use pacerelle_core::wire::SessionInfo;
use rusqlite::{Connection, OptionalExtension, params};

use super::{Result, SqliteStore};
use crate::store::{ReleasedRow, SessionOpened, lease_ttl_ms, released};

impl SqliteStore {
    /// Opens a session that takes its name's lease, unless a live session of that name holds it and `takeover`
    /// is false.
    pub(crate) async fn open_session(&self, new: &NewSession<'_>) -> Result<SessionOpened> {
        let (now, takeover) = (new.now, new.takeover);
        let (agent_id, session_id, host) = (
            new.agent_id.to_string(),
            new.session_id.to_string(),
            new.host.to_string(),
        );
        let (name, folder) = (new.name.to_string(), new.folder.map(str::to_string));
        let opened = SessionOpened::opened(session_id.clone(), new);
        self.write(move |conn: &Connection| {
            let open: Option<(String, String, i64, i64)> = conn
                .prepare_cached(
                    "SELECT session_id, host, since, last_heartbeat_at FROM sessions
                     WHERE agent_id = ?1 AND name = ?2 AND ended_at IS NULL",
                )?
                .query_row(params![agent_id, name], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
                })
                .optional()?;
            if let Some(open) = open {
                let (old_id, ended) = match SessionOpened::end_open(open, &name, takeover, now) {
                    Ok(end) => end,
                    Err(in_use) => return Ok(in_use),
                };
                conn.prepare_cached("UPDATE sessions SET ended_at = ?2 WHERE session_id = ?1")?
                    .execute(params![old_id, ended])?;
            }
            conn.prepare_cached(
                "INSERT INTO sessions (session_id, agent_id, host, since, last_heartbeat_at, name, folder)
                     VALUES (?1, ?2, ?3, ?4, ?4, ?5, ?6)",
            )?
            .execute(params![session_id, agent_id, host, now.millis(), name, folder])?;
            Ok(opened)
        })
        .await
    }

    /// Renews the lease if this session still holds it when the write runs: whether it did
    /// ([`crate::store::Store::heartbeat`]).
    pub(in crate::store) async fn renew(&self, session: &SessionAt<'_>) -> Result<bool> {
        let now = session.now;
        let (owner, session) = (session.agent_id.to_string(), session.session_id.to_string());
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
        Ok(renewed > 0)
    }

    /// Ends a session (idempotent). `None` when the agent has no such session.
    pub(crate) async fn release(&self, session: &SessionAt<'_>) -> Result<Option<SessionInfo>> {
        let now = session.now;
        let (owner, id) = (session.agent_id.to_string(), session.session_id.to_string());
        let row: Option<ReleasedRow> = self
            .write(move |conn: &Connection| {
                Ok(conn
                    .prepare_cached(
                        "UPDATE sessions SET ended_at = COALESCE(ended_at, MIN(?3, last_heartbeat_at + ?4))
                         WHERE agent_id = ?1 AND session_id = ?2
                         RETURNING host, since, ended_at, name, folder",
                    )?
                    .query_row(params![owner, id, now.millis(), lease_ttl_ms()], |r| {
                        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
                    })
                    .optional()?)
            })
            .await?;
        Ok(row.map(|row| released(session.session_id, row)))
    }
}
