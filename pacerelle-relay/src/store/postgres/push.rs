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
//! One subscription's pushes are therefore sent one at a time by each instance, but two instances may each send
//! one of them at the same time (a claimed push and one waiting for its retry look alike in the outbox); push
//! services keep no order between messages anyway.

use super::prelude::*;
use crate::store::MAX_PER_DEVICE;
use crate::store::rows::DuePushRow;
use crate::store::types::{PushItemRow, push_plan};

/// How long a claimed push stays out of every instance's reads: longer than an attempt can last (the push
/// service's timeouts, [`crate::push::PushSettings`], are 10 s each by default).
const CLAIM_MS: i64 = 120_000;
/// How many times [`PgStore::put_push_subscription`] starts over when a concurrent write registered the same
/// endpoint between its read and its insert.
const PUT_TRIES: u32 = 3;

/// The item at `$1` of agent `$2` as [`push_plan`] reads it: with its question's expiry and its subject.
const PUSH_ITEM_SQL: &str = "SELECT i.kind, i.item_id, i.subject_seq, q.expires_at, s.kind, s.item_id
     FROM items i LEFT JOIN questions q ON q.item_seq = i.seq
          LEFT JOIN items s ON s.seq = i.subject_seq AND s.agent_id = i.agent_id
     WHERE i.seq = $1 AND i.agent_id = $2";

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
    let row: Option<PushItemRow> = sqlx::query_as(PUSH_ITEM_SQL)
        .bind(seq)
        .bind(agent_id)
        .fetch_optional(&mut *conn)
        .await?;
    let Some((kind, (recipients_of, urgency, topic, expires_at))) = push_plan(seq, row, now) else {
        return Ok(0);
    };
    let now_ms = now.millis();
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
    .bind(kind)
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

impl PgStore {
    /// Registers a subscription of this device, replaces its keys if the device has it already, or moves it
    /// from another device (whose queued pushes to it are dropped).
    ///
    /// The agent's row is locked first, so two registrations for the agent's devices (the count of
    /// [`MAX_PER_DEVICE`]) run one after the other; the endpoint's row, when there is one, is locked before it
    /// is replaced or moved. A registration of the same endpoint by another agent that commits between the read
    /// and the insert makes the insert do nothing: the registration then starts over and finds that one.
    pub(crate) async fn put_push_subscription(&self, new: &NewSubscription<'_>) -> Result<PushPut> {
        let mut tx = self.pool.begin().await?;
        super::lock_agent(&mut tx, new.agent_id).await?;
        let mut tries = 0;
        let put = loop {
            tries += 1;
            let existing: Option<(i64, String, i64)> = sqlx::query_as(
                "SELECT subscription_id, device_id, created_at FROM push_subscriptions WHERE endpoint = $1
                 FOR UPDATE",
            )
            .bind(new.endpoint)
            .fetch_optional(&mut *tx)
            .await?;
            if let Some((_, owner, created_at)) = &existing
                && *owner == new.device_id
            {
                sqlx::query(
                    "UPDATE push_subscriptions SET p256dh = $2, auth = $3, updated_at = $4 WHERE endpoint = $1",
                )
                .bind(new.endpoint)
                .bind(new.p256dh)
                .bind(new.auth)
                .bind(new.now.millis())
                .execute(&mut *tx)
                .await?;
                break PushPut::Replaced(Timestamp(*created_at));
            }
            let count: i64 = sqlx::query_scalar(
                "SELECT COUNT(*) FROM push_subscriptions WHERE device_id = $1 AND endpoint <> $2",
            )
            .bind(new.device_id)
            .bind(new.endpoint)
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
            .bind(new.endpoint)
            .bind(new.agent_id)
            .bind(new.device_id)
            .bind(new.p256dh)
            .bind(new.auth)
            .bind(new.now.millis())
            .fetch_optional(&mut *tx)
            .await?;
            if inserted.is_some() {
                break PushPut::Created(new.now);
            }
            if tries >= PUT_TRIES {
                return Err(crate::error::StoreError::unavailable(
                    "the push subscription kept changing under concurrent registrations",
                ));
            }
        };
        tx.commit().await?;
        self.committed();
        Ok(put)
    }

    /// Removes a subscription of this device (nothing when it has none with this endpoint).
    pub(crate) async fn delete_push_subscription(&self, device_id: &str, endpoint: &str) -> Result<bool> {
        let done = sqlx::query("DELETE FROM push_subscriptions WHERE device_id = $1 AND endpoint = $2")
            .bind(device_id)
            .bind(endpoint)
            .execute(&self.pool)
            .await?;
        self.committed();
        Ok(done.rows_affected() > 0)
    }

    /// Claims up to `limit` pushes due at `now`, the oldest first, at most one per subscription (its push due
    /// first), none of the subscriptions in `busy` (those with an attempt in flight here) and none another
    /// instance is claiming. Each one's next attempt moves [`CLAIM_MS`] ahead until its outcome is recorded.
    pub(crate) async fn due_pushes(&self, due: &Due<'_, i64>) -> Result<Vec<DuePush>> {
        let mut tx = self.pool.begin().await?;
        let rows: Vec<DuePushRow> = sqlx::query_as(
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
        .bind(due.now.millis())
        .bind(i64::from(due.limit))
        .bind(due.busy)
        .bind(due.now.millis().saturating_add(CLAIM_MS))
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        if !rows.is_empty() {
            self.committed();
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
        self.committed();
        Ok(())
    }

    /// Records a failed attempt; the push is tried again at `next` (which also ends its claim).
    pub(crate) async fn push_retry(&self, failed: &FailedAttempt<'_, i64, Timestamp>) -> Result<()> {
        sqlx::query(
            "UPDATE push_outbox SET attempts = attempts + 1, last_status = $2, last_error = $3,
                                    next_attempt_at = $4
             WHERE push_id = $1",
        )
        .bind(failed.id)
        .bind(failed.status.map(i64::from))
        .bind(failed.error)
        .bind(failed.next.millis())
        .execute(&self.pool)
        .await?;
        self.committed();
        Ok(())
    }

    /// Deletes a subscription the push service says is gone (404, 410), with its queued pushes.
    pub(crate) async fn push_subscription_gone(&self, subscription_id: i64) -> Result<()> {
        sqlx::query("DELETE FROM push_subscriptions WHERE subscription_id = $1")
            .bind(subscription_id)
            .execute(&self.pool)
            .await?;
        self.committed();
        Ok(())
    }
}

#[cfg(test)]
pub(super) mod tests {
    //! Tests of the push outbox on PostgreSQL — its claims, several instances, what its writes never give
    //! [`enqueue`] — and the database the tests of `sweep`, `retention` and `gauges` share: they run when
    //! `PACERELLE_TEST_POSTGRES` asks for a cluster (`start` or a `postgres://` URL), and pass saying they were
    //! skipped otherwise. The tests both backends share are in `crate::store::suite::push`.

    use std::collections::HashSet;

    use crate::store::types::TTL_NORMAL_MS;

    use pacerelle_test_support::postgres::Cluster;

    use super::*;

    /// A time for fixtures.
    pub(in super::super) const T0: i64 = 1_800_000_000_000;

    /// A store on a new, empty database of the test cluster, with agent `ag_1` and its devices `dv_1`, `dv_2`,
    /// `dv_3`, and the database's URL (for a second instance); `None` (the test then skips) without a cluster.
    pub(in super::super) async fn store(test: &str) -> Option<(PgStore, String, tempfile::TempDir)> {
        let Some(cluster) = Cluster::shared() else {
            println!("{test}: skipped, PACERELLE_TEST_POSTGRES=off");
            return None;
        };
        let url = cluster.fresh_database().await;
        let dir = tempfile::tempdir().expect("a folder");
        let store = PgStore::open(&url, dir.path()).await.expect("opens");
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "INSERT INTO agents (agent_id, name, auth_hash, created_at) VALUES ('ag_1', 'laptop', '\\x00', {T0});
             INSERT INTO devices (device_id, agent_id, name, role, token_hash, created_at)
             VALUES ('dv_1', 'ag_1', 'phone', 'owner', '\\x00', {T0}),
                    ('dv_2', 'ag_1', 'tablet', 'owner', '\\x00', {T0}),
                    ('dv_3', 'ag_1', 'laptop', 'owner', '\\x00', {T0})"
        )))
        .execute(&store.pool)
        .await
        .expect("an agent and its devices");
        Some((store, url, dir))
    }

    /// Inserts an item of `ag_1` as the relay would (the agent locked first) and queues its pushes.
    pub(in super::super) async fn item(
        store: &PgStore,
        kind: &str,
        id: &str,
        subject: Option<(i64, &str)>,
        envelopes: &[&str],
        at: i64,
    ) -> (i64, u64) {
        let mut tx = store.pool.begin().await.expect("begins");
        super::super::lock_agent(&mut tx, "ag_1").await.expect("locks");
        let seq: i64 = sqlx::query_scalar(
            "INSERT INTO items (agent_id, kind, item_id, device_id, envelope, created_at, subject_seq,
                                update_state)
             VALUES ('ag_1', $1, $2, CASE WHEN $1 = 'message' THEN 'dv_1' END, 'AQ', $3, $4, $5)
             RETURNING seq",
        )
        .bind(kind)
        .bind(id)
        .bind(at)
        .bind(subject.map(|s| s.0))
        .bind(subject.map(|s| s.1))
        .fetch_one(&mut *tx)
        .await
        .expect("an item");
        if kind == "question" {
            sqlx::query(
                "INSERT INTO questions (item_seq, agent_id, kind, state, expires_at)
                 VALUES ($1, 'ag_1', 'yes_no', 'pending', $2)",
            )
            .bind(seq)
            .bind(at + 60_000)
            .execute(&mut *tx)
            .await
            .expect("a question");
        }
        for device in envelopes {
            sqlx::query("INSERT INTO item_envelopes (item_seq, device_id, envelope) VALUES ($1, $2, 'AQID')")
                .bind(seq)
                .bind(device)
                .execute(&mut *tx)
                .await
                .expect("an envelope");
        }
        let queued = enqueue(&mut tx, "ag_1", seq, Timestamp(at))
            .await
            .expect("queues");
        tx.commit().await.expect("commits");
        (seq, queued)
    }

    async fn subscribe(store: &PgStore, device: &str, endpoint: &str, at: i64) -> PushPut {
        store
            .as_store()
            .put_push_subscription("ag_1", device, endpoint, &[4; 65], &[0; 16], Timestamp(at))
            .await
            .expect("stored")
    }

    /// What no write of the relay gives [`enqueue`] (the pushes of items written through the store are in
    /// `crate::store::suite::push`): an item queued again, another agent's, one that does not exist, and one
    /// for a device revoked with its subscriptions left.
    #[tokio::test]
    async fn enqueue_queues_nothing_again_for_another_agent_a_missing_item_or_a_revoked_device() {
        let Some((store, _url, _dir)) = store("push enqueue").await else {
            return;
        };
        subscribe(&store, "dv_1", "a", T0).await;
        subscribe(&store, "dv_2", "c", T0).await;
        let (q, queued) = item(&store, "question", "q1", None, &["dv_1", "dv_3"], T0).await;
        assert_eq!(queued, 1);
        // The same item again (a retry) queues nothing more.
        let mut conn = store.pool.acquire().await.expect("a connection");
        assert_eq!(
            enqueue(&mut conn, "ag_1", q, Timestamp(T0))
                .await
                .expect("queues"),
            0
        );
        // Another agent's item, or one that does not exist, queues nothing.
        assert_eq!(
            enqueue(&mut conn, "ag_2", q, Timestamp(T0))
                .await
                .expect("queues"),
            0
        );
        assert_eq!(
            enqueue(&mut conn, "ag_1", q + 100, Timestamp(T0))
                .await
                .expect("queues"),
            0
        );
        drop(conn);

        // A revoked device gets no more pushes.
        sqlx::query("UPDATE devices SET revoked_at = $1 WHERE device_id = 'dv_2'")
            .bind(T0)
            .execute(&store.pool)
            .await
            .expect("revoked");
        let (_, queued) = item(&store, "reply", "r1", None, &["dv_2"], T0).await;
        assert_eq!(queued, 0);
        store.close().await;
    }

    #[tokio::test]
    async fn due_pushes_are_claimed_once_one_per_subscription_and_come_back_after_the_claim() {
        let Some((store, url, dir)) = store("push claims").await else {
            return;
        };
        subscribe(&store, "dv_1", "a", T0).await;
        subscribe(&store, "dv_2", "b", T0).await;
        let (_, queued) = item(&store, "notification", "n1", None, &["dv_1", "dv_2"], T0).await;
        assert_eq!(queued, 2);
        let (_, queued) = item(&store, "notification", "n2", None, &["dv_1"], T0 + 1).await;
        assert_eq!(queued, 1);
        let now = Timestamp(T0 + 10);
        assert_eq!(
            store.next_push_due(&[]).await.expect("reads"),
            Some(Timestamp(T0))
        );
        assert!(
            store
                .as_store()
                .due_pushes(Timestamp(T0 - 1), &[], 10)
                .await
                .expect("reads")
                .is_empty()
        );

        // A subscription in flight here is left out.
        let sub_a: i64 =
            sqlx::query_scalar("SELECT subscription_id FROM push_subscriptions WHERE endpoint = 'a'")
                .fetch_one(&store.pool)
                .await
                .expect("reads");
        let due = store
            .as_store()
            .due_pushes(now, &[sub_a], 10)
            .await
            .expect("claims");
        assert_eq!(due.len(), 1);
        assert_eq!(due[0].endpoint, "b");
        assert_eq!(
            (due[0].p256dh.len(), due[0].auth.len(), due[0].attempts),
            (65, 16, 0)
        );
        assert_eq!(due[0].expires_at, Timestamp(T0 + TTL_NORMAL_MS));
        // Claimed: no read returns it again, here or on another instance, until the claim ends.
        let other = PgStore::open(&url, dir.path()).await.expect("a second instance");
        let due = other.as_store().due_pushes(now, &[], 10).await.expect("claims");
        assert_eq!(due.len(), 1, "a's first push only: one per subscription");
        assert_eq!(
            (due[0].endpoint.as_str(), due[0].kind.as_str()),
            ("a", "notification")
        );
        let first_a = due[0].push_id;
        assert_eq!(
            store.next_push_due(&[]).await.expect("reads"),
            Some(Timestamp(T0 + 1))
        );
        assert_eq!(
            store.next_push_due(&[sub_a]).await.expect("reads"),
            Some(now.plus_millis(CLAIM_MS))
        );
        // An instance claims a subscription's pushes one at a time; another instance may take its next one
        // while the first is in flight (push services keep no order either).
        let due = store.as_store().due_pushes(now, &[], 10).await.expect("claims");
        assert_eq!(due.len(), 1);
        let second_a = due[0].push_id;
        assert!(second_a > first_a);
        assert!(
            store
                .as_store()
                .due_pushes(now, &[], 10)
                .await
                .expect("claims")
                .is_empty()
        );
        assert!(
            other
                .as_store()
                .due_pushes(now, &[], 10)
                .await
                .expect("claims")
                .is_empty()
        );

        // Delivered: gone. A retry sets the next attempt and counts it.
        other.push_done(first_a).await.expect("done");
        store
            .as_store()
            .push_retry(
                second_a,
                Some(500),
                "the push service answered HTTP 500",
                Timestamp(T0 + 100),
            )
            .await
            .expect("recorded");
        assert!(
            store
                .as_store()
                .due_pushes(Timestamp(T0 + 99), &[], 10)
                .await
                .expect("claims")
                .is_empty()
        );
        let due = store
            .as_store()
            .due_pushes(Timestamp(T0 + 100), &[], 10)
            .await
            .expect("claims");
        assert_eq!((due.len(), due[0].push_id, due[0].attempts), (1, second_a, 1));
        let (status, error): (Option<i64>, Option<String>) =
            sqlx::query_as("SELECT last_status, last_error FROM push_outbox WHERE push_id = $1")
                .bind(second_a)
                .fetch_one(&store.pool)
                .await
                .expect("reads");
        assert_eq!(
            (status, error.as_deref()),
            (Some(500), Some("the push service answered HTTP 500"))
        );

        // b's push, claimed and never recorded (its instance stopped), is due again once its claim ends.
        let later = now.plus_millis(CLAIM_MS);
        let due = store.as_store().due_pushes(later, &[], 10).await.expect("claims");
        assert_eq!(due.len(), 1);
        assert_eq!(due[0].endpoint, "b");
        // A subscription that is gone takes its pushes with it.
        store
            .push_subscription_gone(due[0].subscription_id)
            .await
            .expect("gone");
        store.push_subscription_gone(sub_a).await.expect("gone");
        assert_eq!(store.next_push_due(&[]).await.expect("reads"), None);
        other.close().await;
        store.close().await;
    }

    #[tokio::test]
    async fn instances_claiming_at_once_never_get_the_same_push() {
        let Some((store, url, dir)) = store("push concurrent claims").await else {
            return;
        };
        // 40 subscriptions over three devices' worth of endpoints, 5 pushes each.
        sqlx::query("UPDATE devices SET role = 'owner'")
            .execute(&store.pool)
            .await
            .expect("ok");
        let mut subscriptions = 0;
        for device in ["dv_1", "dv_2", "dv_3"] {
            for i in 0..MAX_PER_DEVICE {
                subscribe(&store, device, &format!("{device}-{i}"), T0).await;
                subscriptions += 1;
            }
        }
        for n in 0..5 {
            let (_, queued) = item(
                &store,
                "notification",
                &format!("n{n}"),
                None,
                &["dv_1", "dv_2", "dv_3"],
                T0 + n,
            )
            .await;
            assert_eq!(queued, u64::try_from(subscriptions).expect("positive"));
        }
        let instances: Vec<PgStore> = {
            let mut v = vec![store.clone()];
            for _ in 0..3 {
                v.push(PgStore::open(&url, dir.path()).await.expect("an instance"));
            }
            v
        };
        let now = Timestamp(T0 + 10);
        let mut claimed = HashSet::new();
        let mut total = 0;
        // Each round, every instance claims at once and delivers what it got.
        for _ in 0..50 {
            let tasks: Vec<_> = instances
                .iter()
                .map(|s| {
                    let s = s.clone();
                    tokio::spawn(async move { s.as_store().due_pushes(now, &[], 7).await })
                })
                .collect();
            let mut any = false;
            for task in tasks {
                let mut mine = HashSet::new();
                for push in task.await.expect("joined").expect("claims") {
                    any = true;
                    assert!(
                        claimed.insert(push.push_id),
                        "push {} claimed twice",
                        push.push_id
                    );
                    assert!(
                        mine.insert(push.subscription_id),
                        "one push per subscription in a read"
                    );
                    total += 1;
                }
            }
            for id in &claimed {
                store.push_done(*id).await.expect("done");
            }
            if !any {
                break;
            }
        }
        assert_eq!(total, subscriptions * 5);
        assert_eq!(store.next_push_due(&[]).await.expect("reads"), None);
        for s in &instances[1..] {
            s.close().await;
        }
        store.close().await;
    }
}
