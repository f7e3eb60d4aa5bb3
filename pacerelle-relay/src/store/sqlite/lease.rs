//! The lease as the wait path reads it: plain calls on a connection, inside a read of its own
//! ([`super::reader`]) or a write.

use pacerelle_core::Timestamp;
use rusqlite::{Connection, OptionalExtension};

use super::Result;
use crate::store::Lease;

/// The session holding this agent's lease at `now`: the open session whose last heartbeat is within the lease's
/// time-to-live.
pub(super) fn lease_on(conn: &Connection, agent_id: &str, now: Timestamp) -> Result<Option<Lease>> {
    let row: Option<(String, String, i64, i64)> = conn
        .prepare_cached(
            "SELECT session_id, host, since, last_heartbeat_at FROM sessions
             WHERE agent_id = ?1 AND ended_at IS NULL",
        )?
        .query_row([agent_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .optional()?;
    Ok(row.and_then(|(session_id, host, since, beat)| Lease::live(session_id, host, since, beat, now)))
}

/// Whether this agent has (or had, within the last day) a session with this id.
pub(super) fn session_known_on(conn: &Connection, agent_id: &str, session_id: &str) -> Result<bool> {
    Ok(conn
        .prepare_cached("SELECT EXISTS (SELECT 1 FROM sessions WHERE agent_id = ?1 AND session_id = ?2)")?
        .query_row([agent_id, session_id], |r| r.get(0))?)
}
