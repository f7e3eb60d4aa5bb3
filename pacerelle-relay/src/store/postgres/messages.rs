//! The PostgreSQL backend: the stream of tasks and replies — a device's tasks, their delivery to the agent and
//! acknowledgement, the agent's replies, and what one device sees of the stream (its conversation). Mirrors
//! `sqlite/messages.rs`, with the same outcomes.
//!
//! Every write takes the agent's counter row lock first ([`super::lock_agent`], ADR 0003): the items it inserts
//! draw their sequence numbers in commit order, and its check-then-insert steps (an id already used, the quota
//! of tasks not yet processed, a task acknowledged twice at once) run one after another for one agent, as
//! SQLite's single writer runs them.

use pacerelle_core::wire::AgentMessage;
use sqlx::Row;

use super::prelude::*;
use super::updates::insert_update;
use crate::error::StoreError;
use crate::store::{cursor, seq_of};

/// The agent's tasks not yet processed: stored minus processed, both counted by triggers in the transactions
/// that store and mark them, so the count costs one row read however many tasks there are.
async fn pending_tasks(conn: &mut PgConnection, agent_id: &str) -> Result<i64> {
    Ok(sqlx::query_scalar(
        "SELECT COALESCE((SELECT messages - processed FROM agent_counts WHERE agent_id = $1), 0)",
    )
    .bind(agent_id)
    .fetch_one(conn)
    .await?)
}

/// The greatest sequence number ever given to an item, deleted ones included (the identity sequence's last
/// value, which may also count a value taken by a transaction not yet committed: an upper bound, as a cursor
/// check needs): retention deleting the newest items must not make the cursors that named them invalid.
const GLOBAL_HEAD_SQL: &str = "SELECT GREATEST(
         (SELECT COALESCE(MAX(seq), 0) FROM items),
         COALESCE(pg_sequence_last_value(pg_get_serial_sequence('items', 'seq')::regclass), 0))";

impl PgStore {
    /// The greatest sequence number ever given to any item (0 when there is none), even if that item was
    /// deleted since (the sequence's last value): no valid cursor is beyond.
    pub(crate) async fn global_head(&self) -> Result<Cursor> {
        let seq: i64 = sqlx::query_scalar(GLOBAL_HEAD_SQL).fetch_one(&self.pool).await?;
        Ok(cursor(seq))
    }

    /// Stores a task sent by a device, or finds the one already stored under this id. A new task is refused
    /// ([`Put::QuotaExceeded`], nothing stored) when the agent already has `max_pending` tasks not yet
    /// processed. The task joins the tasks other devices are sending at the same moment, stored together in
    /// one statement and one commit ([`super::sends`]); the outcome is the one [`PgStore::put_message_alone`]
    /// would give.
    pub(crate) async fn put_message(&self, task: &NewTask<'_>) -> Result<Put> {
        // A task addressed to one session takes the path of its own: the batch statement
        // (`pacerelle_put_messages`) stores tasks for any session.
        let Some(queue) = self.sends.as_ref().filter(|_| task.session.is_none()) else {
            return self.put_message_alone(task).await;
        };
        let (reply, outcome) = tokio::sync::oneshot::channel();
        let send = super::sends::Send {
            agent_id: task.agent_id.to_string(),
            device_id: task.device_id.to_string(),
            message_id: task.message_id.to_string(),
            envelope: task.envelope.to_string(),
            max_pending: task.max_pending,
            now: task.now,
            reply,
        };
        queue
            .send(send)
            .await
            .map_err(|_| StoreError::internal("the sender of tasks is gone"))?;
        outcome
            .await
            .map_err(|_| StoreError::internal("the sender of tasks dropped a task"))?
    }

    /// [`PgStore::put_message`] in a transaction of its own. The agent's lock is taken first, so concurrent
    /// sends of one agent count one after the other and never pass the cap, and a second send of the same id
    /// waits for the first and then finds it.
    pub(crate) async fn put_message_alone(&self, task: &NewTask<'_>) -> Result<Put> {
        let (agent_id, device_id, message_id) = (task.agent_id, task.device_id, task.message_id);
        let (envelope, max_pending, now) = (task.envelope, task.max_pending, task.now);
        let mut tx = self.pool.begin().await?;
        super::lock_agent(&mut tx, agent_id).await?;
        let existing: Option<(i64, Option<String>, i64)> = sqlx::query_as(
            "SELECT seq, device_id, created_at FROM items
             WHERE agent_id = $1 AND kind = 'message' AND item_id = $2",
        )
        .bind(agent_id)
        .bind(message_id)
        .fetch_optional(&mut *tx)
        .await?;
        let put = if let Some((seq, sender, created_at)) = existing {
            if sender.as_deref() != Some(device_id) {
                Put::Conflict(crate::store::types::ID_OF_ANOTHER_DEVICE)
            } else {
                Put::Stored(Stored {
                    id: message_id.to_string(),
                    cursor: cursor(seq),
                    created_at: Timestamp(created_at),
                    created: false,
                })
            }
        } else if pending_tasks(&mut tx, agent_id).await? >= i64::from(max_pending) {
            Put::QuotaExceeded
        } else {
            let seq: i64 = sqlx::query_scalar(
                "INSERT INTO items (agent_id, kind, item_id, device_id, envelope, created_at, session_name)
                 VALUES ($1, 'message', $2, $3, $4, $5, $6) RETURNING seq",
            )
            .bind(agent_id)
            .bind(message_id)
            .bind(device_id)
            .bind(envelope)
            .bind(now.millis())
            .bind(task.session)
            .fetch_one(&mut *tx)
            .await?;
            Put::Stored(Stored {
                id: message_id.to_string(),
                cursor: cursor(seq),
                created_at: now,
                created: true,
            })
        };
        tx.commit().await?;
        self.committed();
        Ok(put)
    }

    /// One step of the agent's long-poll, read in one statement (one snapshot): the lease and the caller's
    /// session, the relay's head (to check the caller's cursor), and the agent's tasks not yet processed after
    /// `after` (oldest first, at most `limit`) with the cursor to continue from.
    ///
    /// Nothing is written here. The `delivered` bookkeeping of the tasks returned is [`crate::store::Store::mark_delivered`],
    /// which nobody awaits.
    pub(crate) async fn wait_read(&self, query: &WaitQuery<'_>) -> Result<WaitRead> {
        let (after, limit) = (seq_of(query.after), query.limit);
        // A delivered mark not yet committed for tasks this read may return again: let it commit first, so that
        // their `redelivered` flag is exact. Not on the hot path: an agent that goes on from its cursor reads
        // beyond every mark it caused.
        self.marks.settle(query.agent_id, after).await;
        // One row at least (the facts); one row per task otherwise. At most one session of a name is open per
        // agent (`sessions_open_per_name`), so the join with it adds no rows. The caller's session is known when
        // this agent has (or had) a session with its id; it consumes as that session's name, else as the default.
        let rows = sqlx::query(
            "WITH facts AS (
                 SELECT GREATEST(
                            (SELECT COALESCE(MAX(seq), 0) FROM items),
                            COALESCE(pg_sequence_last_value(pg_get_serial_sequence('items', 'seq')::regclass), 0)
                        ) AS global_head,
                        (SELECT COALESCE(MAX(seq), 0) FROM items WHERE agent_id = $1) AS head,
                        (SELECT name FROM sessions WHERE agent_id = $1 AND session_id = $2) AS named,
                        COALESCE((SELECT version FROM rosters WHERE agent_id = $1), 0) AS roster_version
             )
             SELECT f.global_head, f.head, f.named IS NOT NULL, COALESCE(f.named, $5),
                    l.session_id, l.host, l.since, l.last_heartbeat_at,
                    m.seq, m.item_id, m.device_id, m.device_name, m.envelope, m.created_at, m.delivered_at,
                    m.session_name, f.roster_version
             FROM facts f
                  LEFT JOIN sessions l
                         ON l.agent_id = $1 AND l.name = COALESCE(f.named, $5) AND l.ended_at IS NULL
                  LEFT JOIN LATERAL (
                      SELECT i.seq, i.item_id, COALESCE(i.device_id, '') AS device_id,
                             COALESCE(d.name, '') AS device_name, COALESCE(i.envelope, '') AS envelope,
                             i.created_at, i.delivered_at, i.session_name
                      FROM items i LEFT JOIN devices d ON d.device_id = i.device_id
                      WHERE i.agent_id = $1 AND i.kind = 'message' AND i.processed_at IS NULL AND i.seq > $3
                        AND (i.session_name IS NULL OR i.session_name = COALESCE(f.named, $5))
                      ORDER BY i.seq LIMIT $4
                  ) m ON TRUE
             ORDER BY m.seq",
        )
        .bind(query.agent_id)
        .bind(query.session_id)
        .bind(after)
        .bind(i64::from(query.limit))
        .bind(pacerelle_core::ids::DEFAULT_SESSION)
        .fetch_all(&self.pool)
        .await?;
        let Some(first) = rows.first() else {
            return Err(crate::error::StoreError::internal(
                "the wait's read returned no row",
            ));
        };
        let global: i64 = first.try_get(0)?;
        let head: i64 = first.try_get(1)?;
        let known: bool = first.try_get(2)?;
        let name: String = first.try_get(3)?;
        let roster_version: i64 = first.try_get(16)?;
        let lease_row: (Option<String>, Option<String>, Option<i64>, Option<i64>) = (
            first.try_get(4)?,
            first.try_get(5)?,
            first.try_get(6)?,
            first.try_get(7)?,
        );
        let lease = match lease_row {
            (Some(session_id), Some(host), Some(since), Some(beat)) => {
                Lease::live((session_id, host, since, beat), name.clone(), query.now)
            }
            _ => None,
        };
        let mut messages = Vec::with_capacity(rows.len());
        for row in &rows {
            let Some(seq) = row.try_get::<Option<i64>, _>(8)? else {
                continue;
            };
            messages.push(AgentMessage {
                cursor: cursor(seq),
                message_id: row.try_get(9)?,
                from: row.try_get(10)?,
                from_name: row.try_get(11)?,
                envelope: row.try_get(12)?,
                sent_at: Timestamp(row.try_get(13)?),
                redelivered: row.try_get::<Option<i64>, _>(14)?.is_some(),
                session: row.try_get(15)?,
            });
        }
        Ok(
            WaitRead::new(name, lease, known, global, head, after, messages, limit)
                .with_roster(roster_version),
        )
    }

    /// The write of [`crate::store::Store::mark_delivered`]. It takes the agent's lock first, like every write that
    /// changes several of the agent's items, so that two marks never lock the same rows in different orders.
    /// The tasks marked are those the session named `session` was handed (read `sqlite/messages.rs`'s
    /// `SET_DELIVERED_SQL`).
    pub(crate) async fn set_delivered(
        &self,
        agent_id: &str,
        session: &str,
        seqs: (i64, i64),
        now: Timestamp,
    ) -> Result<()> {
        let (after, through) = seqs;
        let mut tx = self.pool.begin().await?;
        super::lock_agent(&mut tx, agent_id).await?;
        sqlx::query(
            "UPDATE items SET delivered_at = COALESCE(delivered_at, $2),
                              session_name = COALESCE(session_name, $5)
             WHERE agent_id = $1 AND kind = 'message' AND processed_at IS NULL AND seq > $3 AND seq <= $4
               AND (session_name IS NULL OR (session_name = $5 AND delivered_at IS NULL))",
        )
        .bind(agent_id)
        .bind(now.millis())
        .bind(after)
        .bind(through)
        .bind(session)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        self.committed();
        Ok(())
    }

    /// Marks a task processed, once [`crate::store::Store::mark_processed`] has read that it is not (the first
    /// time is kept; a concurrent one changes nothing). The first time, in the same transaction, stores the
    /// `update` item that tells the sending device ([`insert_update`]). `None` when the agent has no such task.
    pub(crate) async fn mark_processed(&self, task: &TaskAt<'_>) -> Result<Option<Marked>> {
        let mut tx = self.pool.begin().await?;
        super::lock_agent(&mut tx, task.agent_id).await?;
        // Only the first acknowledgement sets it; a concurrent one waits for the agent's lock, then finds it set
        // and changes nothing.
        let first: Option<i64> = sqlx::query_scalar(
            "UPDATE items SET processed_at = $3, session_name = COALESCE(session_name, $4)
             WHERE agent_id = $1 AND kind = 'message' AND item_id = $2 AND processed_at IS NULL
               AND (session_name IS NULL OR session_name = $4)
             RETURNING seq",
        )
        .bind(task.agent_id)
        .bind(task.message_id)
        .bind(task.now.millis())
        .bind(task.session)
        .fetch_optional(&mut *tx)
        .await?;
        let update = match first {
            Some(seq) => insert_update(&mut tx, task.agent_id, seq, ItemState::Processed, task.now).await?,
            None => None,
        };
        let at: Option<Option<i64>> = sqlx::query_scalar(
            "SELECT processed_at FROM items WHERE agent_id = $1 AND kind = 'message' AND item_id = $2",
        )
        .bind(task.agent_id)
        .bind(task.message_id)
        .fetch_optional(&mut *tx)
        .await?;
        tx.commit().await?;
        self.committed();
        Ok(at.flatten().map(|at| Marked {
            processed_at: Timestamp(at),
            update,
        }))
    }

    /// Stores a reply with one envelope per device, or finds the one already stored under this id.
    pub(crate) async fn put_reply(&self, reply: &NewReply<'_>) -> Result<ReplyPut> {
        let mut tx = self.pool.begin().await?;
        super::lock_agent(&mut tx, reply.agent_id).await?;
        let put = self
            .put_reply_in(
                &mut tx,
                reply.agent_id,
                reply.reply_id,
                reply.source_message_id,
                reply.envelopes,
                reply.now,
            )
            .await?;
        tx.commit().await?;
        self.committed();
        Ok(put)
    }

    /// The checks and inserts of [`PgStore::put_reply`], in its transaction (the agent locked).
    async fn put_reply_in(
        &self,
        conn: &mut PgConnection,
        agent_id: &str,
        reply_id: &str,
        source_message_id: &str,
        envelopes: &[DeviceEnvelope],
        now: Timestamp,
    ) -> Result<ReplyPut> {
        let existing: Option<(i64, Option<String>, i64)> = sqlx::query_as(
            "SELECT seq, source_message_id, created_at FROM items
             WHERE agent_id = $1 AND kind = 'reply' AND item_id = $2",
        )
        .bind(agent_id)
        .bind(reply_id)
        .fetch_optional(&mut *conn)
        .await?;
        if let Some((seq, source, created_at)) = existing {
            if source.as_deref() != Some(source_message_id) {
                return Ok(ReplyPut::Conflict);
            }
            return Ok(ReplyPut::Stored(Stored {
                id: reply_id.to_string(),
                cursor: cursor(seq),
                created_at: Timestamp(created_at),
                created: false,
            }));
        }
        let source_known: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM items WHERE agent_id = $1 AND kind = 'message' AND item_id = $2)",
        )
        .bind(agent_id)
        .bind(source_message_id)
        .fetch_one(&mut *conn)
        .await?;
        if !source_known {
            return Ok(ReplyPut::NoSource);
        }
        let devices: Vec<&str> = envelopes.iter().map(|e| e.device_id.as_str()).collect();
        let sealed: Vec<&str> = envelopes.iter().map(|e| e.envelope.as_str()).collect();
        // The first device, in the order given, that is not one of this agent's.
        let unknown: Option<String> = sqlx::query_scalar(
            "SELECT t.device_id FROM unnest($2::text[]) WITH ORDINALITY AS t(device_id, n)
             WHERE NOT EXISTS (SELECT 1 FROM devices d WHERE d.agent_id = $1 AND d.device_id = t.device_id)
             ORDER BY t.n LIMIT 1",
        )
        .bind(agent_id)
        .bind(&devices)
        .fetch_optional(&mut *conn)
        .await?;
        if let Some(device_id) = unknown {
            return Ok(ReplyPut::UnknownDevice(device_id));
        }
        let seq: i64 = sqlx::query_scalar(
            "INSERT INTO items (agent_id, kind, item_id, source_message_id, created_at)
             VALUES ($1, 'reply', $2, $3, $4) RETURNING seq",
        )
        .bind(agent_id)
        .bind(reply_id)
        .bind(source_message_id)
        .bind(now.millis())
        .fetch_one(&mut *conn)
        .await?;
        sqlx::query(
            "INSERT INTO item_envelopes (item_seq, device_id, envelope)
             SELECT $1, t.device_id, t.envelope FROM unnest($2::text[], $3::text[]) AS t(device_id, envelope)",
        )
        .bind(seq)
        .bind(&devices)
        .bind(&sealed)
        .execute(&mut *conn)
        .await?;
        super::push::enqueue(&mut *conn, agent_id, seq, now).await?;
        Ok(ReplyPut::Stored(Stored {
            id: reply_id.to_string(),
            cursor: cursor(seq),
            created_at: now,
            created: true,
        }))
    }
}

#[cfg(test)]
pub(super) mod tests {
    //! What only PostgreSQL has — the agent's lock that orders the sequence numbers — on a fresh database of the
    //! test cluster when `PACERELLE_TEST_POSTGRES` asks for one (`start` or a `postgres://` URL), passing with a
    //! word that it was skipped otherwise; and the setup the other files' PostgreSQL tests share. The tests both
    //! backends share are in `crate::store::suite::messages`.

    use std::time::Duration;

    use pacerelle_test_support::postgres::Cluster;

    use super::*;
    use crate::store::Store;
    use crate::store::suite::Backend;
    use crate::store::suite::messages::{send, two_agents};

    /// The tests' "now".
    pub(in super::super) const T0: i64 = 1_800_000_000_000;

    /// A store on a fresh database of the test cluster, set up as the suite's [`two_agents`]: agent `ag_1` with
    /// devices `dv_1` (phone) and `dv_2` (tablet), agent `ag_2` with `dv_3`; with the suite's backend, which
    /// holds its folder. `None` (said on stdout) when no cluster is asked for.
    pub(in super::super) async fn store() -> Option<(PgStore, Backend)> {
        let Some(cluster) = Cluster::shared() else {
            println!("skipped: PACERELLE_TEST_POSTGRES=off");
            return None;
        };
        let backend = Backend::postgres(cluster.fresh_database().await).await;
        two_agents(&backend).await;
        Some((backend.pg().clone(), backend))
    }

    impl PgStore {
        /// The agent's tasks not yet processed, as the quota reads them (the counters), for the suite's
        /// `Backend::pending_both_ways`.
        pub(in crate::store) async fn pending_counted(&self, agent_id: &str) -> i64 {
            let mut conn = self.pool.acquire().await.expect("a connection");
            pending_tasks(&mut conn, agent_id).await.expect("counted")
        }
    }

    fn envelope(device_id: &str, envelope: &str) -> DeviceEnvelope {
        DeviceEnvelope {
            device_id: device_id.into(),
            envelope: envelope.into(),
        }
    }

    /// Stays here: on SQLite the delivered mark's write may reach the writer after the wait's settling write
    /// (it is spawned), so that a wait at once may not yet see it.
    /// Transaction A of `ag_1` holds the agent's lock and has drawn its seq, not yet committed, while B (a
    /// write of `ab`: a task or a reply) runs: B must draw its seq after A commits, or a reader's cursor
    /// could pass A's item before it commits. (A task would also wait for A in the trigger that counts it, but
    /// after drawing its seq: only the lock orders the draw.)
    async fn a_write_waits_for_an_uncommitted_item_of_its_agent(write: &str) {
        let Some((store, _dir)) = store().await else {
            return;
        };
        let m0 = send(&Store::Postgres(store.clone()), "m0").await;
        let mut a = store.pool.begin().await.expect("begins");
        super::super::lock_agent(&mut a, "ag_1").await.expect("locks");
        let a_seq: i64 = sqlx::query_scalar(
            "INSERT INTO items (agent_id, kind, item_id, device_id, envelope, created_at)
             VALUES ('ag_1', 'message', 'a', 'dv_1', 'AQ', $1) RETURNING seq",
        )
        .bind(T0)
        .fetch_one(&mut *a)
        .await
        .expect("inserts");
        let b = tokio::spawn({
            let store = store.clone();
            let write = write.to_string();
            async move {
                if write == "task" {
                    return send(&Store::Postgres(store), "b").await;
                }
                match store
                    .as_store()
                    .put_reply("ag_1", "b", "m0", &[envelope("dv_1", "R")], Timestamp(T0))
                    .await
                    .expect("stored")
                {
                    ReplyPut::Stored(stored) => stored,
                    other => panic!("stored, got {other:?}"),
                }
            }
        });
        // Time for B to get as far as it can (if it has not started yet, the test proves less, never fails).
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (items, next) = store
            .as_store()
            .conversation("ag_1", "dv_1", m0.cursor, 10, true, Timestamp(T0))
            .await
            .expect("reads");
        assert!(items.is_empty(), "{write}: B waits for A, got {items:?}");
        a.commit().await.expect("commits");
        let b = b.await.expect("joined");
        assert!(b.cursor > cursor(a_seq), "{write}: B numbered after A");
        let (items, _) = store
            .as_store()
            .conversation("ag_1", "dv_1", next, 10, true, Timestamp(T0))
            .await
            .expect("reads");
        let ids: Vec<&str> = items.iter().map(|i| i.id.as_str()).collect();
        assert_eq!(ids, ["a", "b"], "{write}: the first read's cursor passed neither");
    }

    #[tokio::test]
    async fn a_task_waits_for_an_uncommitted_item_of_its_agent() {
        a_write_waits_for_an_uncommitted_item_of_its_agent("task").await;
    }

    #[tokio::test]
    async fn a_reply_waits_for_an_uncommitted_item_of_its_agent() {
        a_write_waits_for_an_uncommitted_item_of_its_agent("reply").await;
    }
}
