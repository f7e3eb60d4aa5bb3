//! The lease as the wait path reads it: plain calls on a connection, inside a read of its own
//! ([`super::reader`]) or a write.

use pacerelle_core::Timestamp;
use rusqlite::{Connection, OptionalExtension};

use super::Result;
use crate::store::Lease;

/// The session holding the lease of this agent's session `name` at `now`: the open session of that name whose
/// last heartbeat is within the lease's time-to-live.
pub(super) fn lease_on(
    conn: &Connection,
    agent_id: &str,
    name: &str,
    now: Timestamp,
) -> Result<Option<Lease>> {
    let row: Option<(String, String, i64, i64)> = conn
        .prepare_cached(
            "SELECT session_id, host, since, last_heartbeat_at FROM sessions
             WHERE agent_id = ?1 AND name = ?2 AND ended_at IS NULL",
        )?
        .query_row([agent_id, name], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })
        .optional()?;
    Ok(row.and_then(|row| Lease::live(row, name.to_string(), now)))
}

/// The name of this agent's session with this id, if it has (or had, within the last day) one.
pub(super) fn session_name_on(conn: &Connection, agent_id: &str, session_id: &str) -> Result<Option<String>> {
    Ok(conn
        .prepare_cached("SELECT name FROM sessions WHERE agent_id = ?1 AND session_id = ?2")?
        .query_row([agent_id, session_id], |r| r.get(0))
        .optional()?)
}
