//! The PostgreSQL backend: an agent's devices — listing, reading and revoking them (mirrors `sqlite/device.rs`).

use super::prelude::*;
use crate::store::rows::{DeviceRow, device_info};

impl PgStore {
    /// Registers the signing key of a device paired before keys (mirrors `sqlite/device.rs`): stored if the
    /// device has none; the same key and seal again is a retry; anything else is refused. The device's row is
    /// locked while it is read, so of two concurrent registrations the second sees the first's key.
    pub(crate) async fn register_signing_key(&self, new: &NewSigningKey<'_>) -> Result<SigningKeyPut> {
        let mut tx = self.pool.begin().await?;
        let existing: Option<DeviceRow> = sqlx::query_as(concat!(
            "SELECT ",
            device_columns!(),
            " FROM devices WHERE agent_id = $1 AND device_id = $2 FOR UPDATE"
        ))
        .bind(new.agent_id)
        .bind(new.device_id)
        .fetch_optional(&mut *tx)
        .await?;
        let outcome = match existing {
            None => SigningKeyPut::NotFound,
            Some(row) if row.6.is_none() => {
                let row: DeviceRow = sqlx::query_as(concat!(
                    "UPDATE devices SET signing_key = $3, signing_key_seal = $4
                     WHERE agent_id = $1 AND device_id = $2
                     RETURNING ",
                    device_columns!()
                ))
                .bind(new.agent_id)
                .bind(new.device_id)
                .bind(new.signing.key)
                .bind(new.signing.seal)
                .fetch_one(&mut *tx)
                .await?;
                SigningKeyPut::Stored(device_info(row)?)
            }
            Some(row)
                if row.6.as_deref() == Some(new.signing.key)
                    && row.7.as_deref() == Some(new.signing.seal) =>
            {
                SigningKeyPut::Again(device_info(row)?)
            }
            Some(_) => SigningKeyPut::Exists,
        };
        tx.commit().await?;
        self.committed();
        Ok(outcome)
    }

    /// Revokes a device of this agent (idempotent: the first revocation time is kept) and drops its push
    /// subscriptions in the same transaction. The agent's counter row is locked first, as every write that
    /// stores items for the agent's devices does: a write that found the device active commits before the
    /// revocation, or waits for it and then finds it revoked.
    pub(crate) async fn revoke_device(&self, device: &DeviceAt<'_>) -> Result<Option<DeviceInfo>> {
        let mut tx = self.pool.begin().await?;
        super::lock_agent(&mut tx, device.agent_id).await?;
        super::push::drop_device(&mut tx, device.agent_id, device.device_id).await?;
        let row: Option<DeviceRow> = sqlx::query_as(concat!(
            "UPDATE devices SET revoked_at = COALESCE(revoked_at, $3)
             WHERE agent_id = $1 AND device_id = $2
             RETURNING ",
            device_columns!()
        ))
        .bind(device.agent_id)
        .bind(device.device_id)
        .bind(device.now.millis())
        .fetch_optional(&mut *tx)
        .await?;
        // Delivered to every instance when (and only if) this transaction commits: each forgets the device's
        // credential from memory and reads it, revoked, at its next request.
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(super::wakes::PRINCIPALS_CHANNEL)
            .bind(device.device_id)
            .execute(&mut *tx)
            .await?;
        let committed = tx.commit().await;
        // Committed (or, after a failed commit, perhaps): the next request of this device reads the database.
        self.principals.changed(device.device_id);
        committed?;
        self.committed();
        row.map(device_info).transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::super::agent::tests::{T0, pair, store};
    use super::*;
    use crate::store::PushPut;
    use pacerelle_core::pairing::Role;

    #[tokio::test]
    async fn devices_are_listed_in_pairing_order_and_revoked_once() {
        let Some((store, _dir)) = store().await else {
            return;
        };
        pair(&store, "AAAAAAAAAAAAAAAAAAAAAA", "dv_1").await;
        pair(&store, "BBBBBBBBBBBBBBBBBBBBBB", "dv_2").await;
        let listed = store.as_store().devices("ag_1").await.expect("read");
        let ids: Vec<&str> = listed.iter().map(|d| d.device_id.as_str()).collect();
        assert_eq!(ids, ["dv_1", "dv_2"]);
        let one = store
            .as_store()
            .device("ag_1", "dv_2")
            .await
            .expect("read")
            .expect("found");
        assert_eq!(
            (one.name.as_str(), one.label.as_deref(), one.role, one.revoked_at),
            ("phone", Some("kitchen"), Role::User, None)
        );
        assert!(
            store
                .as_store()
                .device("ag_2", "dv_2")
                .await
                .expect("read")
                .is_none()
        );

        let revoked = store
            .as_store()
            .revoke_device("ag_1", "dv_1", Timestamp(T0 + 10))
            .await
            .expect("revoked")
            .expect("found");
        assert_eq!(revoked.revoked_at, Some(Timestamp(T0 + 10)));
        // Again: the first time is kept.
        let again = store
            .as_store()
            .revoke_device("ag_1", "dv_1", Timestamp(T0 + 20))
            .await
            .expect("revoked")
            .expect("found");
        assert_eq!(again.revoked_at, Some(Timestamp(T0 + 10)));
        // Another agent's device, or none: nothing.
        assert!(
            store
                .as_store()
                .revoke_device("ag_2", "dv_2", Timestamp(T0 + 20))
                .await
                .expect("ok")
                .is_none()
        );
        assert!(
            store
                .as_store()
                .revoke_device("ag_1", "dv_9", Timestamp(T0 + 20))
                .await
                .expect("ok")
                .is_none()
        );
        let dv2 = store
            .as_store()
            .device("ag_1", "dv_2")
            .await
            .expect("read")
            .expect("found");
        assert_eq!(dv2.revoked_at, None);
    }

    #[tokio::test]
    async fn a_revocation_drops_the_devices_push_subscriptions_only() {
        let Some((store, _dir)) = store().await else {
            return;
        };
        pair(&store, "AAAAAAAAAAAAAAAAAAAAAA", "dv_1").await;
        pair(&store, "BBBBBBBBBBBBBBBBBBBBBB", "dv_2").await;
        for (device, endpoint) in [
            ("dv_1", "https://push.example/1"),
            ("dv_2", "https://push.example/2"),
        ] {
            let put = store
                .as_store()
                .put_push_subscription("ag_1", device, endpoint, &[4; 65], &[5; 16], Timestamp(T0 + 2))
                .await
                .expect("stored");
            assert!(matches!(put, PushPut::Created(_)), "{put:?}");
        }
        store
            .as_store()
            .revoke_device("ag_1", "dv_1", Timestamp(T0 + 3))
            .await
            .expect("revoked")
            .expect("found");
        let left: Vec<String> =
            sqlx::query_scalar("SELECT device_id FROM push_subscriptions ORDER BY device_id")
                .fetch_all(&store.pool)
                .await
                .expect("read");
        assert_eq!(left, ["dv_2"]);
    }
}
