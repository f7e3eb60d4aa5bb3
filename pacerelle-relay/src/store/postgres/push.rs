//! The PostgreSQL backend: Web Push subscriptions and the push outbox (mirrors `sqlite/push.rs`).
//!
//! [`enqueue`] is called inside the write transaction that stores an item, so the item and its pushes commit
//! together. The deliverer ([`crate::push`]) claims due rows with [`PgStore::due_pushes`] and records each
//! outcome in a committed write of its own, as with SQLite.
//!
//! Several relay instances may deliver from one outbox. A claim locks the due rows with `FOR UPDATE SKIP
//! LOCKED` (a row another instance is claiming is skipped, never waited for) and moves their next attempt
//! [`CLAIM_MS`] ahead in the same transaction, so no other instance reads them while the attempt runs; the
//! attempt's outcome then deletes the row or sets its next attempt. A push whose instance stopped during the
//! attempt is tried again once its claim ends. A read returns at most one push per subscription (its push due
//! first), so that every push claimed is attempted at once: the deliverer runs one attempt per subscription at a
//! time, and a second push of the same subscription claimed with the first would wait for its claim to end.

use super::prelude::*;
use crate::store::sqlite::push::MAX_PER_DEVICE;

/// TTL of reply and notification pushes.
const TTL_NORMAL_MS: i64 = 86_400_000;
/// TTL of the push that closes a question.
const TTL_UPDATE_MS: i64 = 3_600_000;
/// How long a claimed push stays out of every instance's reads: longer than an attempt can last (the push
/// service's timeouts, [`crate::push::PushSettings`], are 10 s each by default).
const CLAIM_MS: i64 = 120_000;
/// How many times [`PgStore::put_push_subscription`] starts over when a concurrent write registered the same
/// endpoint between its read and its insert.
const PUT_TRIES: u32 = 3;

/// Queues the pushes of the item at `seq` (just inserted by the caller, in the same transaction): one per
/// subscription of each active device that the item (or, for an `update`, its question) is sealed for. A
/// task's `update` (processed) and items of other kinds push nothing. Returns how many were queued (mirrors
/// `sqlite::push::enqueue`).
pub(super) async fn enqueue(
    conn: &mut PgConnection,
    agent_id: &str,
    seq: i64,
    now: Timestamp,
) -> Result<u64> {
    let item: Option<(String, String, Option<i64>)> =
        sqlx::query_as("SELECT kind, item_id, subject_seq FROM items WHERE seq = $1 AND agent_id = $2")
            .bind(seq)
            .bind(agent_id)
            .fetch_optional(&mut *conn)
            .await?;
    let Some((kind, item_id, subject_seq)) = item else {
        return Ok(0);
    };
    let now_ms = now.millis();
    // (whose envelopes name the recipients, urgency, topic, expiry)
    let (recipients_of, urgency, topic, expires_at) = match kind.as_str() {
        "question" => {
            let expires: Option<i64> =
                sqlx::query_scalar("SELECT expires_at FROM questions WHERE item_seq = $1")
                    .bind(seq)
                    .fetch_optional(&mut *conn)
                    .await?;
            let Some(expires) = expires else {
                return Ok(0);
            };
            // A TTL of at least one second.
            let expires = expires.max(now_ms.saturating_add(1000));
            (
                seq,
                "high",
                Some(pacerelle_core::webpush::topic(&item_id)),
                expires,
            )
        }
        "reply" | "notification" => (seq, "normal", None, now_ms.saturating_add(TTL_NORMAL_MS)),
        "update" => {
            let Some(subject_seq) = subject_seq else {
                return Ok(0);
            };
            let subject: Option<(String, String)> =
                sqlx::query_as("SELECT kind, item_id FROM items WHERE seq = $1 AND agent_id = $2")
                    .bind(subject_seq)
                    .bind(agent_id)
                    .fetch_optional(&mut *conn)
                    .await?;
            match subject {
                Some((subject_kind, question_id)) if subject_kind == "question" => (
                    subject_seq,
                    "high",
                    Some(pacerelle_core::webpush::topic(&question_id)),
                    now_ms.saturating_add(TTL_UPDATE_MS),
                ),
                _ => return Ok(0),
            }
        }
        _ => return Ok(0),
    };
    let queued = sqlx::query(
        "INSERT INTO push_outbox (subscription_id, agent_id, device_id, item_seq, kind, urgency, topic,
                                  expires_at, created_at, next_attempt_at)
         SELECT s.subscription_id, s.agent_id, s.device_id, $2, $3, $4, $5, $6, $7, $7
         FROM push_subscriptions s JOIN devices d ON d.device_id = s.device_id
         WHERE s.agent_id = $1 AND d.revoked_at IS NULL
           AND s.device_id IN (SELECT device_id FROM item_envelopes WHERE item_seq = $8)
         ON CONFLICT (subscription_id, item_seq) DO NOTHING",
    )
    .bind(agent_id)
    .bind(seq)
    .bind(&kind)
    .bind(urgency)
    .bind(topic)
    .bind(expires_at)
    .bind(now_ms)
    .bind(recipients_of)
    .execute(&mut *conn)
    .await?;
    Ok(queued.rows_affected())
}

/// Deletes every subscription of a device of this agent (and, by the foreign key's cascade, their queued
/// pushes): call it in the write that revokes it.
pub(super) async fn drop_device(conn: &mut PgConnection, agent_id: &str, device_id: &str) -> Result<()> {
    sqlx::query("DELETE FROM push_subscriptions WHERE agent_id = $1 AND device_id = $2")
        .bind(agent_id)
        .bind(device_id)
        .execute(conn)
        .await?;
    Ok(())
}

/// A push due for an attempt, with its subscription, as read.
#[derive(sqlx::FromRow)]
struct DueRow {
    push_id: i64,
    subscription_id: i64,
    endpoint: String,
    p256dh: Vec<u8>,
    auth: Vec<u8>,
    agent_id: String,
    device_id: String,
    item_seq: i64,
    kind: String,
    urgency: String,
    topic: Option<String>,
    expires_at: i64,
    attempts: i64,
}

impl From<DueRow> for DuePush {
    fn from(r: DueRow) -> Self {
        DuePush {
            push_id: r.push_id,
            subscription_id: r.subscription_id,
            endpoint: r.endpoint,
            p256dh: r.p256dh,
            auth: r.auth,
            agent_id: r.agent_id,
            device_id: r.device_id,
            item_seq: r.item_seq,
            kind: r.kind,
            urgency: r.urgency,
            topic: r.topic,
            expires_at: Timestamp(r.expires_at),
            attempts: u32::try_from(r.attempts).unwrap_or(u32::MAX),
        }
    }
}

impl PgStore {
    /// Registers a subscription of this device, replaces its keys if the device has it already, or moves it
    /// from another device (whose queued pushes to it are dropped).
    ///
    /// The agent's row is locked first, so two registrations for the agent's devices (the count of
    /// [`MAX_PER_DEVICE`]) run one after the other; the endpoint's row, when there is one, is locked before it
    /// is replaced or moved. A registration of the same endpoint by another agent that commits between the read
    /// and the insert makes the insert do nothing: the registration then starts over and finds that one.
    pub(crate) async fn put_push_subscription(
        &self,
        agent_id: &str,
        device_id: &str,
        endpoint: &str,
        p256dh: &[u8],
        auth: &[u8],
        now: Timestamp,
    ) -> Result<PushPut> {
        let mut tx = self.pool.begin().await?;
        super::lock_agent(&mut tx, agent_id).await?;
        let mut tries = 0;
        let put = loop {
            tries += 1;
            let existing: Option<(i64, String, i64)> = sqlx::query_as(
                "SELECT subscription_id, device_id, created_at FROM push_subscriptions WHERE endpoint = $1
                 FOR UPDATE",
            )
            .bind(endpoint)
            .fetch_optional(&mut *tx)
            .await?;
            if let Some((_, owner, created_at)) = &existing
                && *owner == device_id
            {
                sqlx::query(
                    "UPDATE push_subscriptions SET p256dh = $2, auth = $3, updated_at = $4 WHERE endpoint = $1",
                )
                .bind(endpoint)
                .bind(p256dh)
                .bind(auth)
                .bind(now.millis())
                .execute(&mut *tx)
                .await?;
                break PushPut::Replaced(Timestamp(*created_at));
            }
            let count: i64 = sqlx::query_scalar(
                "SELECT COUNT(*) FROM push_subscriptions WHERE device_id = $1 AND endpoint <> $2",
            )
            .bind(device_id)
            .bind(endpoint)
            .fetch_one(&mut *tx)
            .await?;
            if count >= MAX_PER_DEVICE {
                break PushPut::TooMany;
            }
            if let Some((subscription_id, _, _)) = existing {
                sqlx::query("DELETE FROM push_subscriptions WHERE subscription_id = $1")
                    .bind(subscription_id)
                    .execute(&mut *tx)
                    .await?;
            }
            let inserted: Option<i64> = sqlx::query_scalar(
                "INSERT INTO push_subscriptions (endpoint, agent_id, device_id, p256dh, auth, created_at, updated_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $6)
                 ON CONFLICT (endpoint) DO NOTHING
                 RETURNING subscription_id",
            )
            .bind(endpoint)
            .bind(agent_id)
            .bind(device_id)
            .bind(p256dh)
            .bind(auth)
            .bind(now.millis())
            .fetch_optional(&mut *tx)
            .await?;
            if inserted.is_some() {
                break PushPut::Created(now);
            }
            if tries >= PUT_TRIES {
                return Err(crate::error::StoreError::unavailable(
                    "the push subscription kept changing under concurrent registrations",
                ));
            }
        };
        tx.commit().await?;
        self.counts.commits.inc();
        self.counts.writes.inc();
        Ok(put)
    }

    /// Removes a subscription of this device (nothing when it has none with this endpoint).
    pub(crate) async fn delete_push_subscription(&self, device_id: &str, endpoint: &str) -> Result<bool> {
        let done = sqlx::query("DELETE FROM push_subscriptions WHERE device_id = $1 AND endpoint = $2")
            .bind(device_id)
            .bind(endpoint)
            .execute(&self.pool)
            .await?;
        self.counts.commits.inc();
        self.counts.writes.inc();
        Ok(done.rows_affected() > 0)
    }

    /// Claims up to `limit` pushes due at `now`, the oldest first, at most one per subscription (its push due
    /// first), none of the subscriptions in `busy` (those with an attempt in flight here) and none another
    /// instance is claiming. Each one's next attempt moves [`CLAIM_MS`] ahead until its outcome is recorded.
    pub(crate) async fn due_pushes(&self, now: Timestamp, busy: &[i64], limit: u32) -> Result<Vec<DuePush>> {
        let mut tx = self.pool.begin().await?;
        let rows: Vec<DueRow> = sqlx::query_as(
            "WITH firsts AS (
                 SELECT DISTINCT ON (subscription_id) push_id
                 FROM push_outbox
                 WHERE next_attempt_at <= $1 AND NOT (subscription_id = ANY($3))
                 ORDER BY subscription_id, next_attempt_at, push_id
             ), claimed AS (
                 SELECT o.push_id, o.next_attempt_at AS due_at FROM push_outbox o
                 WHERE o.push_id IN (SELECT push_id FROM firsts) AND o.next_attempt_at <= $1
                 ORDER BY o.next_attempt_at, o.push_id LIMIT $2
                 FOR UPDATE SKIP LOCKED
             ), done AS (
                 UPDATE push_outbox o SET next_attempt_at = $4
                 FROM claimed c, push_subscriptions s
                 WHERE o.push_id = c.push_id AND s.subscription_id = o.subscription_id
                 RETURNING o.push_id, o.subscription_id, s.endpoint, s.p256dh, s.auth, o.agent_id, o.device_id,
                           o.item_seq, o.kind, o.urgency, o.topic, o.expires_at, o.attempts, c.due_at
             )
             SELECT * FROM done ORDER BY due_at, push_id",
        )
        .bind(now.millis())
        .bind(i64::from(limit))
        .bind(busy)
        .bind(now.millis().saturating_add(CLAIM_MS))
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        if !rows.is_empty() {
            self.counts.commits.inc();
            self.counts.writes.inc();
        }
        Ok(rows.into_iter().map(DuePush::from).collect())
    }

    /// When the next push of a subscription not in `busy` is due, if any is queued.
    pub(crate) async fn next_push_due(&self, busy: &[i64]) -> Result<Option<Timestamp>> {
        let at: Option<i64> = sqlx::query_scalar(
            "SELECT MIN(next_attempt_at) FROM push_outbox WHERE NOT (subscription_id = ANY($1))",
        )
        .bind(busy)
        .fetch_one(&self.pool)
        .await?;
        Ok(at.map(Timestamp))
    }

    /// Removes a push from the outbox: delivered (never sent again), expired, or given up.
    pub(crate) async fn push_done(&self, push_id: i64) -> Result<()> {
        sqlx::query("DELETE FROM push_outbox WHERE push_id = $1")
            .bind(push_id)
            .execute(&self.pool)
            .await?;
        self.counts.commits.inc();
        self.counts.writes.inc();
        Ok(())
    }

    /// Records a failed attempt; the push is tried again at `next` (which also ends its claim).
    pub(crate) async fn push_retry(
        &self,
        push_id: i64,
        status: Option<u16>,
        error: &str,
        next: Timestamp,
    ) -> Result<()> {
        sqlx::query(
            "UPDATE push_outbox SET attempts = attempts + 1, last_status = $2, last_error = $3,
                                    next_attempt_at = $4
             WHERE push_id = $1",
        )
        .bind(push_id)
        .bind(status.map(i64::from))
        .bind(error)
        .bind(next.millis())
        .execute(&self.pool)
        .await?;
        self.counts.commits.inc();
        self.counts.writes.inc();
        Ok(())
    }

    /// Deletes a subscription the push service says is gone (404, 410), with its queued pushes.
    pub(crate) async fn push_subscription_gone(&self, subscription_id: i64) -> Result<()> {
        sqlx::query("DELETE FROM push_subscriptions WHERE subscription_id = $1")
            .bind(subscription_id)
            .execute(&self.pool)
            .await?;
        self.counts.commits.inc();
        self.counts.writes.inc();
        Ok(())
    }
}
