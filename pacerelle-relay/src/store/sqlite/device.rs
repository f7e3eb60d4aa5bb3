//! An agent's devices: listing, reading and revoking them.

use pacerelle_core::Timestamp;
use pacerelle_core::wire::DeviceInfo;
use rusqlite::{OptionalExtension, params};

use super::{Result, SqliteStore, role, ts};

type DeviceRow = (String, String, Option<String>, String, i64, Option<i64>);

fn device_info(row: DeviceRow) -> Result<DeviceInfo> {
    let (device_id, name, label, role_text, created_at, revoked_at) = row;
    Ok(DeviceInfo {
        device_id,
        name,
        label,
        role: role(&role_text)?,
        created_at: ts(created_at),
        revoked_at: revoked_at.map(ts),
        signing_key: None,
        signing_key_seal: None,
    })
}

impl SqliteStore {
    pub(crate) async fn devices(&self, agent_id: &str) -> Result<Vec<DeviceInfo>> {
        let rows: Vec<DeviceRow> = sqlx::query_as(
            "SELECT device_id, name, label, role, created_at, revoked_at
             FROM devices WHERE agent_id = ?1 ORDER BY created_at, rowid",
        )
        .bind(agent_id)
        .fetch_all(&self.read)
        .await?;
        rows.into_iter().map(device_info).collect()
    }

    pub(crate) async fn device(&self, agent_id: &str, device_id: &str) -> Result<Option<DeviceInfo>> {
        let row: Option<DeviceRow> = sqlx::query_as(
            "SELECT device_id, name, label, role, created_at, revoked_at
             FROM devices WHERE agent_id = ?1 AND device_id = ?2",
        )
        .bind(agent_id)
        .bind(device_id)
        .fetch_optional(&self.read)
        .await?;
        row.map(device_info).transpose()
    }

    /// Revokes a device of this agent (idempotent: the first revocation time is kept).
    pub(crate) async fn revoke_device(
        &self,
        agent_id: &str,
        device_id: &str,
        now: Timestamp,
    ) -> Result<Option<DeviceInfo>> {
        let changed = device_id.to_string();
        let (agent_id, device_id) = (agent_id.to_string(), device_id.to_string());
        let written: Result<Option<DeviceRow>> = self
            .write(move |conn| {
                super::push::drop_device(conn, &agent_id, &device_id)?;
                Ok(conn
                    .prepare_cached(
                        "UPDATE devices SET revoked_at = COALESCE(revoked_at, ?3)
                         WHERE agent_id = ?1 AND device_id = ?2
                         RETURNING device_id, name, label, role, created_at, revoked_at",
                    )?
                    .query_row(params![agent_id, device_id, now.millis()], |r| {
                        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?))
                    })
                    .optional()?)
            })
            .await;
        // Committed (or, after a failed commit, perhaps): the next request of this device reads the database.
        self.principals.changed(&changed);
        written?.map(device_info).transpose()
    }
}
