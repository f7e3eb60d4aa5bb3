//! Web Push subscriptions and the push outbox (`docs/push.md`, migration `0006_push.sql`).
//!
//! [`enqueue`] is called inside the write transaction that stores an item (a question, a reply, a
//! notification, an `update`), so the item and its pushes commit together. The deliverer ([`crate::push`])
//! reads due rows with [`SqliteStore::due_pushes`] and records each outcome in its own committed write: a
//! push the push service accepted is deleted, so it is never sent again.

use crate::store::commands::{Due, FailedAttempt, NewSubscription};
use pacerelle_core::Timestamp;
use rusqlite::{Connection, OptionalExtension, params};

use super::{Result, SqliteStore, ts};
use crate::store::rows::DuePushRow;
use crate::store::types::{PushItemRow, push_plan};
use crate::store::{DuePush, MAX_PER_DEVICE, PushPut};

/// The item at `?1` of agent `?2` as [`push_plan`] reads it: with its question's expiry and its subject.
const PUSH_ITEM_SQL: &str = "SELECT i.kind, i.item_id, i.subject_seq, q.expires_at, s.kind, s.item_id
     FROM items i LEFT JOIN questions q ON q.item_seq = i.seq
          LEFT JOIN items s ON s.seq = i.subject_seq AND s.agent_id = i.agent_id
     WHERE i.seq = ?1 AND i.agent_id = ?2";

/// Queues the pushes of the item at `seq` (just inserted by the caller, in the same transaction): one per
/// subscription of each active device that the item (or, for an `update`, its question) is sealed for. A
/// task's `update` (processed) and items of other kinds push nothing. Returns how many were queued.
pub(crate) fn enqueue(conn: &Connection, agent_id: &str, seq: i64, now: Timestamp) -> Result<u64> {
    let row: Option<PushItemRow> = conn
        .prepare_cached(PUSH_ITEM_SQL)?
        .query_row(params![seq, agent_id], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?))
        })
        .optional()?;
    let Some((kind, (recipients_of, urgency, topic, expires_at))) = push_plan(seq, row, now) else {
        return Ok(0);
    };
    let now_ms = now.millis();
    let queued = conn
        .prepare_cached(
            "INSERT INTO push_outbox (subscription_id, agent_id, device_id, item_seq, kind, urgency, topic,
                                  expires_at, created_at, next_attempt_at)
         SELECT s.subscription_id, s.agent_id, s.device_id, ?2, ?3, ?4, ?5, ?6, ?7, ?7
         FROM push_subscriptions s JOIN devices d ON d.device_id = s.device_id
         WHERE s.agent_id = ?1 AND d.revoked_at IS NULL
           AND s.device_id IN (SELECT device_id FROM item_envelopes WHERE item_seq = ?8)
         ON CONFLICT (subscription_id, item_seq) DO NOTHING",
        )?
        .execute(params![
            agent_id,
            seq,
            kind,
            urgency,
            topic,
            expires_at,
            now_ms,
            recipients_of
        ])?;
    Ok(u64::try_from(queued).unwrap_or(u64::MAX))
}

/// Deletes every subscription of a device of this agent (and their queued pushes): call it in the write that
/// revokes it.
pub(crate) fn drop_device(conn: &Connection, agent_id: &str, device_id: &str) -> Result<()> {
    conn.prepare_cached("DELETE FROM push_subscriptions WHERE agent_id = ?1 AND device_id = ?2")?
        .execute(params![agent_id, device_id])?;
    Ok(())
}

impl SqliteStore {
    /// Registers a subscription of this device, replaces its keys if the device has it already, or moves it
    /// from another device (whose queued pushes to it are dropped).
    pub(crate) async fn put_push_subscription(&self, new: &NewSubscription<'_>) -> Result<PushPut> {
        let now = new.now;
        let (agent_id, device_id) = (new.agent_id.to_string(), new.device_id.to_string());
        let endpoint = new.endpoint.to_string();
        let (p256dh, auth) = (new.p256dh.to_vec(), new.auth.to_vec());
        self.write(move |conn| {
            let existing: Option<(String, i64)> = conn
                .prepare_cached("SELECT device_id, created_at FROM push_subscriptions WHERE endpoint = ?1")?
                .query_row([&endpoint], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?;
            if let Some((owner, created_at)) = existing
                && owner == device_id
            {
                conn.prepare_cached(
                    "UPDATE push_subscriptions SET p256dh = ?2, auth = ?3, updated_at = ?4
                             WHERE endpoint = ?1",
                )?
                .execute(params![endpoint, p256dh, auth, now.millis()])?;
                return Ok(PushPut::Replaced(ts(created_at)));
            }
            let count: i64 = conn
                .prepare_cached(
                    "SELECT COUNT(*) FROM push_subscriptions WHERE device_id = ?1 AND endpoint <> ?2",
                )?
                .query_row(params![device_id, endpoint], |r| r.get(0))?;
            if count >= MAX_PER_DEVICE {
                return Ok(PushPut::TooMany);
            }
            conn.prepare_cached("DELETE FROM push_subscriptions WHERE endpoint = ?1")?
                .execute([&endpoint])?;
            conn.prepare_cached(
                "INSERT INTO push_subscriptions (endpoint, agent_id, device_id, p256dh, auth, created_at,
                                                     updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)",
            )?
            .execute(params![endpoint, agent_id, device_id, p256dh, auth, now.millis()])?;
            Ok(PushPut::Created(now))
        })
        .await
    }

    /// Removes a subscription of this device (nothing when it has none with this endpoint).
    pub(crate) async fn delete_push_subscription(&self, device_id: &str, endpoint: &str) -> Result<bool> {
        let (device_id, endpoint) = (device_id.to_string(), endpoint.to_string());
        self.write(move |conn| {
            let done = conn
                .prepare_cached("DELETE FROM push_subscriptions WHERE device_id = ?1 AND endpoint = ?2")?
                .execute(params![device_id, endpoint])?;
            Ok(done > 0)
        })
        .await
    }

    /// Up to `limit` pushes due at `now`, the oldest first, none of the subscriptions in `busy` (those with an
    /// attempt in flight), so a subscription's backlog in flight never fills the read.
    pub(crate) async fn due_pushes(&self, due: &Due<'_, i64>) -> Result<Vec<DuePush>> {
        let (limit, now) = (due.limit, due.now);
        let rows: Vec<DuePushRow> = sqlx::query_as(
            "SELECT o.push_id, o.subscription_id, s.endpoint, s.p256dh, s.auth, o.agent_id, o.device_id,
                    o.item_seq, o.kind, o.urgency, o.topic, o.expires_at, o.attempts
             FROM push_outbox o JOIN push_subscriptions s ON s.subscription_id = o.subscription_id
             WHERE o.next_attempt_at <= ?1
               AND o.subscription_id NOT IN (SELECT value FROM json_each(?3))
             ORDER BY o.next_attempt_at, o.push_id LIMIT ?2",
        )
        .bind(now.millis())
        .bind(i64::from(limit))
        .bind(super::webhooks::json_keys(due.busy)?)
        .fetch_all(&self.read)
        .await?;
        Ok(rows.into_iter().map(DuePush::from).collect())
    }

    /// When the next push of a subscription not in `busy` is due, if any is queued.
    pub(crate) async fn next_push_due(&self, busy: &[i64]) -> Result<Option<Timestamp>> {
        let at: Option<i64> = sqlx::query_scalar(
            "SELECT next_attempt_at FROM push_outbox
             WHERE subscription_id NOT IN (SELECT value FROM json_each(?1))
             ORDER BY next_attempt_at LIMIT 1",
        )
        .bind(super::webhooks::json_keys(busy)?)
        .fetch_optional(&self.read)
        .await?;
        Ok(at.map(ts))
    }

    /// Removes a push from the outbox: delivered (never sent again), expired, or given up.
    pub(crate) async fn push_done(&self, push_id: i64) -> Result<()> {
        self.write(move |conn| {
            conn.prepare_cached("DELETE FROM push_outbox WHERE push_id = ?1")?
                .execute([push_id])?;
            Ok(())
        })
        .await
    }

    /// Records a failed attempt; the push is tried again at `next`.
    pub(crate) async fn push_retry(&self, failed: &FailedAttempt<'_, i64, Timestamp>) -> Result<()> {
        let (push_id, next, status) = (failed.id, failed.next, failed.status);
        let error = failed.error.to_string();
        self.write(move |conn| {
            conn.prepare_cached(
                "UPDATE push_outbox SET attempts = attempts + 1, last_status = ?2, last_error = ?3,
                                            next_attempt_at = ?4
                     WHERE push_id = ?1",
            )?
            .execute(params![push_id, status.map(i64::from), error, next.millis()])?;
            Ok(())
        })
        .await
    }

    /// Deletes a subscription the push service says is gone (404, 410), with its queued pushes.
    pub(crate) async fn push_subscription_gone(&self, subscription_id: i64) -> Result<()> {
        self.write(move |conn| {
            conn.prepare_cached("DELETE FROM push_subscriptions WHERE subscription_id = ?1")?
                .execute([subscription_id])?;
            Ok(())
        })
        .await
    }
}
