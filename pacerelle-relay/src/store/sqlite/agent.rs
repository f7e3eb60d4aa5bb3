//! Agents and credentials: registration, the agent itself, and the principal behind a bearer id.

use crate::store::commands::NewAgent;
use pacerelle_core::keys;
use pacerelle_core::wire::AgentInfo;
use rusqlite::{Connection, OptionalExtension, params};

use super::{Result, SqliteStore, ts};
use crate::store::Registered;

impl SqliteStore {
    /// Registers an agent. The same id with the same hash again is a retry: it finds the stored agent.
    pub(crate) async fn register_agent(&self, new: &NewAgent<'_>) -> Result<Registered> {
        let (auth_hash, now) = (new.auth_hash, new.now);
        let (agent_id, name, auth_hash) = (new.agent_id.to_string(), new.name.to_string(), *auth_hash);
        self.write(move |conn: &Connection| {
            let existing: Option<(String, Vec<u8>, i64)> = conn
                .prepare_cached("SELECT name, auth_hash, created_at FROM agents WHERE agent_id = ?1")?
                .query_row(params![agent_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .optional()?;
            if let Some((stored_name, stored_hash, created_at)) = existing {
                if keys::constant_time_eq(&stored_hash, &auth_hash) {
                    return Ok(Registered::Again(AgentInfo {
                        agent_id,
                        name: stored_name,
                        created_at: ts(created_at),
                    }));
                }
                return Ok(Registered::Exists);
            }
            let taken: bool = conn
                .prepare_cached(
                    "SELECT EXISTS (SELECT 1 FROM devices WHERE device_id = ?1)
                         OR EXISTS (SELECT 1 FROM pairings WHERE device_id = ?1)",
                )?
                .query_row(params![agent_id], |r| r.get(0))?;
            if taken {
                return Ok(Registered::Exists);
            }
            conn.prepare_cached(
                "INSERT INTO agents (agent_id, name, auth_hash, created_at) VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute(params![agent_id, name, &auth_hash[..], now.millis()])?;
            Ok(Registered::Created(AgentInfo {
                agent_id,
                name,
                created_at: now,
            }))
        })
        .await
    }
}
