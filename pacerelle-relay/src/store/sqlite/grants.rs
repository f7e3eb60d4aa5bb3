//! Grants: the three writes in SQLite's SQL (the rules and the devices' list are in `store/grants.rs`).

use pacerelle_core::wire::GrantRecord;
use rusqlite::{Connection, OptionalExtension, params};

use super::{Result, SqliteStore};
use crate::store::commands::{GrantRevocation, GrantUse, NewGrant};
use crate::store::grants::{GRANT_ITEM, GrantPut, GrantRow, QUESTION_OF_GRANT, registrable};

/// The grant row of item `?1`.
const ROW: &str = "SELECT device_id, granted_at, expires_at, uses, last_used_at, revoked_at, revoked_by
     FROM grants WHERE item_seq = ?1";

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<GrantRow> {
    Ok(GrantRow {
        grant_device_id: r.get(0)?,
        granted_at: r.get(1)?,
        grant_expires_at: r.get(2)?,
        uses: r.get(3)?,
        last_used_at: r.get(4)?,
        revoked_at: r.get(5)?,
        revoked_by: r.get(6)?,
    })
}

/// The grant of agent `agent_id` with id `grant_id`, as stored.
fn find(conn: &Connection, agent_id: &str, grant_id: &str) -> rusqlite::Result<Option<GrantRecord>> {
    let seq: Option<i64> = conn
        .prepare_cached(&format!("SELECT {GRANT_ITEM}"))?
        .query_row(params![agent_id, grant_id], |r| r.get(0))
        .optional()?
        .flatten();
    let Some(seq) = seq else { return Ok(None) };
    Ok(conn
        .prepare_cached(ROW)?
        .query_row(params![seq], row)
        .optional()?
        .map(|g| g.record(grant_id)))
}

impl SqliteStore {
    /// Registers a grant, or finds the one registered for its question.
    pub(crate) async fn put_grant(&self, new: &NewGrant<'_>) -> Result<GrantPut> {
        let (agent_id, grant_id, device_id) = (
            new.agent_id.to_string(),
            new.grant_id.to_string(),
            new.device_id.to_string(),
        );
        let (granted_at, expires_at) = (new.granted_at.millis(), new.expires_at.millis());
        self.write(move |conn: &Connection| {
            let found = conn
                .prepare_cached(QUESTION_OF_GRANT)?
                .query_row(params![agent_id, grant_id], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
                })
                .optional()?;
            let seq = match registrable(found, &device_id) {
                Ok(seq) => seq,
                Err(refused) => return Ok(refused.into()),
            };
            conn.prepare_cached(
                "INSERT INTO grants (item_seq, agent_id, device_id, granted_at, expires_at)
                 VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (item_seq) DO NOTHING",
            )?
            .execute(params![seq, agent_id, device_id, granted_at, expires_at])?;
            let stored = conn.prepare_cached(ROW)?.query_row(params![seq], row)?;
            Ok(GrantPut::Stored(stored.record(&grant_id)))
        })
        .await
    }

    /// Counts a use of a live grant; returns the grant as stored (unchanged when revoked or expired), or
    /// `None` when there is none.
    pub(crate) async fn use_grant(&self, at: &GrantUse<'_>) -> Result<Option<GrantRecord>> {
        let (agent_id, grant_id, now) = (at.agent_id.to_string(), at.grant_id.to_string(), at.now.millis());
        self.write(move |conn: &Connection| {
            conn.prepare_cached(&format!(
                "UPDATE grants SET uses = uses + 1, last_used_at = ?3
                 WHERE item_seq = {GRANT_ITEM} AND revoked_at IS NULL AND expires_at > ?3"
            ))?
            .execute(params![agent_id, grant_id, now])?;
            Ok(find(conn, &agent_id, &grant_id)?)
        })
        .await
    }

    /// Revokes a grant (the first revocation is kept); returns it as stored, or `None` when there is none.
    pub(crate) async fn revoke_grant(&self, at: &GrantRevocation<'_>) -> Result<Option<GrantRecord>> {
        let (agent_id, grant_id, by) = (
            at.agent_id.to_string(),
            at.grant_id.to_string(),
            at.by.to_string(),
        );
        let now = at.now.millis();
        self.write(move |conn: &Connection| {
            conn.prepare_cached(&format!(
                "UPDATE grants SET revoked_at = ?3, revoked_by = ?4
                 WHERE item_seq = {GRANT_ITEM} AND revoked_at IS NULL"
            ))?
            .execute(params![agent_id, grant_id, now, by])?;
            Ok(find(conn, &agent_id, &grant_id)?)
        })
        .await
    }
}
