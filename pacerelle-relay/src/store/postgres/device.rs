//! The PostgreSQL backend: an agent's devices — listing, reading and revoking them (mirrors `sqlite/device.rs`).

use pacerelle_core::pairing::Role;

use super::prelude::*;
use crate::error::StoreError;

/// A device as read: id, name, label, role, created, revoked.
type DeviceRow = (String, String, Option<String>, String, i64, Option<i64>);

/// The role stored as `text`.
pub(super) fn role(text: &str) -> Result<Role> {
    match text {
        "owner" => Ok(Role::Owner),
        "user" => Ok(Role::User),
        other => Err(StoreError::internal(format!(
            "unknown role {other:?} in the database"
        ))),
    }
}

fn device_info(row: DeviceRow) -> Result<DeviceInfo> {
    let (device_id, name, label, role_text, created_at, revoked_at) = row;
    Ok(DeviceInfo {
        device_id,
        name,
        label,
        role: role(&role_text)?,
        created_at: Timestamp(created_at),
        revoked_at: revoked_at.map(Timestamp),
    })
}

impl PgStore {
    /// The agent's devices, revoked ones included, in the order they paired.
    pub(crate) async fn devices(&self, agent_id: &str) -> Result<Vec<DeviceInfo>> {
        let rows: Vec<DeviceRow> = sqlx::query_as(
            "SELECT device_id, name, label, role, created_at, revoked_at
             FROM devices WHERE agent_id = $1 ORDER BY created_at, rowid",
        )
        .bind(agent_id)
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter().map(device_info).collect()
    }

    /// One device of this agent, revoked or not.
    pub(crate) async fn device(&self, agent_id: &str, device_id: &str) -> Result<Option<DeviceInfo>> {
        let row: Option<DeviceRow> = sqlx::query_as(
            "SELECT device_id, name, label, role, created_at, revoked_at
             FROM devices WHERE agent_id = $1 AND device_id = $2",
        )
        .bind(agent_id)
        .bind(device_id)
        .fetch_optional(&self.pool)
        .await?;
        row.map(device_info).transpose()
    }

    /// Revokes a device of this agent (idempotent: the first revocation time is kept) and drops its push
    /// subscriptions in the same transaction. The agent's counter row is locked first, as every write that
    /// stores items for the agent's devices does: a write that found the device active commits before the
    /// revocation, or waits for it and then finds it revoked.
    pub(crate) async fn revoke_device(
        &self,
        agent_id: &str,
        device_id: &str,
        now: Timestamp,
    ) -> Result<Option<DeviceInfo>> {
        let mut tx = self.pool.begin().await?;
        super::lock_agent(&mut tx, agent_id).await?;
        super::push::drop_device(&mut tx, agent_id, device_id).await?;
        let row: Option<DeviceRow> = sqlx::query_as(
            "UPDATE devices SET revoked_at = COALESCE(revoked_at, $3)
             WHERE agent_id = $1 AND device_id = $2
             RETURNING device_id, name, label, role, created_at, revoked_at",
        )
        .bind(agent_id)
        .bind(device_id)
        .bind(now.millis())
        .fetch_optional(&mut *tx)
        .await?;
        tx.commit().await?;
        self.counts.commits.inc();
        self.counts.writes.inc();
        row.map(device_info).transpose()
    }
}
