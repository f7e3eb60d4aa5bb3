//! The agent's sealed device roster: stored as given, replaced only by a compare-and-set on its version.

use crate::store::commands::NewRoster;
use rusqlite::{Connection, params};

use super::{Result, SqliteStore};
use crate::store::RosterPut;

impl SqliteStore {
    /// Stores roster `version` if the stored one is still `previous` (0: none) and `version` is greater.
    pub(crate) async fn put_roster(&self, new: &NewRoster<'_>) -> Result<RosterPut> {
        let (now, previous, version) = (new.now, new.previous, new.version);
        let (agent_id, envelope) = (new.agent_id.to_string(), new.envelope.to_string());
        // Versions beyond i64 are refused by the route; clamp defensively.
        let (previous, version) = RosterPut::versions(previous, version);
        self.write(move |conn: &Connection| {
            let current: i64 = conn
                .prepare_cached("SELECT COALESCE((SELECT version FROM rosters WHERE agent_id = ?1), 0)")?
                .query_row(params![agent_id], |r| r.get(0))?;
            if let Some(conflict) = RosterPut::conflict(current, previous, version) {
                return Ok(conflict);
            }
            conn.prepare_cached(
                "INSERT INTO rosters (agent_id, version, envelope, updated_at) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (agent_id) DO UPDATE
                     SET version = excluded.version, envelope = excluded.envelope, updated_at = excluded.updated_at",
            )?
            .execute(params![agent_id, version, envelope, now.millis()])?;
            Ok(RosterPut::stored(version, envelope))
        })
        .await
    }
}
