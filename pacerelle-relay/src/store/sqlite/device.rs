//! An agent's devices: listing, reading and revoking them.

use crate::store::commands::{DeviceAt, NewSigningKey};
use pacerelle_core::wire::DeviceInfo;
use rusqlite::{OptionalExtension, params};

use super::{Result, SqliteStore};
use crate::store::SigningKeyPut;
use crate::store::rows::{DeviceRow, device_info};

/// Reads a [`DeviceRow`] from a rusqlite row holding `device_columns!()`.
pub(super) fn device_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<DeviceRow> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
        r.get(7)?,
    ))
}

impl SqliteStore {
    /// Registers the signing key of a device paired before keys: stored if the device has none; the same key
    /// and seal again is a retry; anything else is refused, since a device's key never changes.
    pub(crate) async fn register_signing_key(&self, new: &NewSigningKey<'_>) -> Result<SigningKeyPut> {
        let signing = new.signing;
        let (agent_id, device_id) = (new.agent_id.to_string(), new.device_id.to_string());
        let (key, seal) = (signing.key.to_string(), signing.seal.to_string());
        self.write(move |conn| {
            let stored = conn
                .prepare_cached(concat!(
                    "UPDATE devices SET signing_key = ?3, signing_key_seal = ?4
                     WHERE agent_id = ?1 AND device_id = ?2 AND signing_key IS NULL
                     RETURNING ",
                    device_columns!()
                ))?
                .query_row(params![agent_id, device_id, key, seal], device_row)
                .optional()?;
            if let Some(row) = stored {
                return Ok(SigningKeyPut::Stored(device_info(row)?));
            }
            let existing = conn
                .prepare_cached(concat!(
                    "SELECT ",
                    device_columns!(),
                    " FROM devices WHERE agent_id = ?1 AND device_id = ?2"
                ))?
                .query_row(params![agent_id, device_id], device_row)
                .optional()?;
            Ok(match existing {
                None => SigningKeyPut::NotFound,
                Some(row) if row.6.as_deref() == Some(&key) && row.7.as_deref() == Some(&seal) => {
                    SigningKeyPut::Again(device_info(row)?)
                }
                Some(_) => SigningKeyPut::Exists,
            })
        })
        .await
    }

    /// Revokes a device of this agent (idempotent: the first revocation time is kept).
    pub(crate) async fn revoke_device(&self, device: &DeviceAt<'_>) -> Result<Option<DeviceInfo>> {
        let now = device.now;
        let changed = device.device_id.to_string();
        let (agent_id, device_id) = (device.agent_id.to_string(), device.device_id.to_string());
        let written: Result<Option<DeviceRow>> = self
            .write(move |conn| {
                super::push::drop_device(conn, &agent_id, &device_id)?;
                Ok(conn
                    .prepare_cached(concat!(
                        "UPDATE devices SET revoked_at = COALESCE(revoked_at, ?3)
                         WHERE agent_id = ?1 AND device_id = ?2
                         RETURNING ",
                        device_columns!()
                    ))?
                    .query_row(params![agent_id, device_id, now.millis()], device_row)
                    .optional()?)
            })
            .await;
        // Committed (or, after a failed commit, perhaps): the next request of this device reads the database.
        self.principals.changed(&changed);
        written?.map(device_info).transpose()
    }
}
