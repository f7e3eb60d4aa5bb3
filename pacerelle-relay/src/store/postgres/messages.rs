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
use crate::store::rows::ConversationRow;
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
    pub(crate) async fn put_message(
        &self,
        agent_id: &str,
        device_id: &str,
        message_id: &str,
        envelope: &str,
        max_pending: u32,
        now: Timestamp,
    ) -> Result<Put> {
        let Some(queue) = &self.sends else {
            return self
                .put_message_alone(agent_id, device_id, message_id, envelope, max_pending, now)
                .await;
        };
        let (reply, outcome) = tokio::sync::oneshot::channel();
        let send = super::sends::Send {
            agent_id: agent_id.to_string(),
            device_id: device_id.to_string(),
            message_id: message_id.to_string(),
            envelope: envelope.to_string(),
            max_pending,
            now,
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
    pub(crate) async fn put_message_alone(
        &self,
        agent_id: &str,
        device_id: &str,
        message_id: &str,
        envelope: &str,
        max_pending: u32,
        now: Timestamp,
    ) -> Result<Put> {
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
                "INSERT INTO items (agent_id, kind, item_id, device_id, envelope, created_at)
                 VALUES ($1, 'message', $2, $3, $4, $5) RETURNING seq",
            )
            .bind(agent_id)
            .bind(message_id)
            .bind(device_id)
            .bind(envelope)
            .bind(now.millis())
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

    /// Returns once no delivered mark of this agent beyond `after` is being written by this instance (or after
    /// the marks' settling time). Nothing to wait for in the usual case.
    pub(crate) async fn settle_marks(&self, agent_id: &str, after: i64) {
        if self.marks.pending_beyond(agent_id, after) {
            self.marks.settle(agent_id, after).await;
        }
    }

    /// One step of the agent's long-poll, read in one statement (one snapshot): the lease and the caller's
    /// session, the relay's head (to check the caller's cursor), and the agent's tasks not yet processed after
    /// `after` (oldest first, at most `limit`) with the cursor to continue from.
    ///
    /// Nothing is written here. The `delivered` bookkeeping of the tasks returned is [`PgStore::mark_delivered`],
    /// which nobody awaits.
    pub(crate) async fn wait_read(
        &self,
        agent_id: &str,
        session_id: Option<&str>,
        after: Cursor,
        limit: u32,
        now: Timestamp,
    ) -> Result<WaitRead> {
        let after = seq_of(after);
        // A delivered mark not yet committed for tasks this read may return again: let it commit first, so that
        // their `redelivered` flag is exact. Not on the hot path: an agent that goes on from its cursor reads
        // beyond every mark it caused.
        self.settle_marks(agent_id, after).await;
        // One row at least (the facts); one row per task otherwise. At most one session is open per agent
        // (`sessions_open_per_agent`), so the join with it adds no rows. The caller's session is known when this
        // agent has (or had) a session with its id: the lease's own session is one of those.
        let rows = sqlx::query(
            "WITH facts AS (
                 SELECT GREATEST(
                            (SELECT COALESCE(MAX(seq), 0) FROM items),
                            COALESCE(pg_sequence_last_value(pg_get_serial_sequence('items', 'seq')::regclass), 0)
                        ) AS global_head,
                        (SELECT COALESCE(MAX(seq), 0) FROM items WHERE agent_id = $1) AS head,
                        ($2::text IS NOT NULL
                         AND EXISTS (SELECT 1 FROM sessions WHERE agent_id = $1 AND session_id = $2))
                            AS session_known
             )
             SELECT f.global_head, f.head, f.session_known,
                    l.session_id, l.host, l.since, l.last_heartbeat_at,
                    m.seq, m.item_id, m.device_id, m.device_name, m.envelope, m.created_at, m.delivered_at
             FROM facts f
                  LEFT JOIN sessions l ON l.agent_id = $1 AND l.ended_at IS NULL
                  LEFT JOIN LATERAL (
                      SELECT i.seq, i.item_id, COALESCE(i.device_id, '') AS device_id,
                             COALESCE(d.name, '') AS device_name, COALESCE(i.envelope, '') AS envelope,
                             i.created_at, i.delivered_at
                      FROM items i LEFT JOIN devices d ON d.device_id = i.device_id
                      WHERE i.agent_id = $1 AND i.kind = 'message' AND i.processed_at IS NULL AND i.seq > $3
                      ORDER BY i.seq LIMIT $4
                  ) m ON TRUE
             ORDER BY m.seq",
        )
        .bind(agent_id)
        .bind(session_id)
        .bind(after)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        let Some(first) = rows.first() else {
            return Err(crate::error::StoreError::internal(
                "the wait's read returned no row",
            ));
        };
        let global_head: i64 = first.try_get(0)?;
        let head: i64 = first.try_get(1)?;
        let session_known: bool = first.try_get(2)?;
        let lease_row: (Option<String>, Option<String>, Option<i64>, Option<i64>) = (
            first.try_get(3)?,
            first.try_get(4)?,
            first.try_get(5)?,
            first.try_get(6)?,
        );
        let lease = match lease_row {
            (Some(session_id), Some(host), Some(since), Some(beat)) => {
                Lease::live(session_id, host, since, beat, now)
            }
            _ => None,
        };
        let mut messages = Vec::with_capacity(rows.len());
        for row in &rows {
            let Some(seq) = row.try_get::<Option<i64>, _>(7)? else {
                continue;
            };
            messages.push(AgentMessage {
                cursor: cursor(seq),
                message_id: row.try_get(8)?,
                from: row.try_get(9)?,
                from_name: row.try_get(10)?,
                envelope: row.try_get(11)?,
                sent_at: Timestamp(row.try_get(12)?),
                redelivered: row.try_get::<Option<i64>, _>(13)?.is_some(),
            });
        }
        let next = match messages.last() {
            Some(last) if messages.len() >= limit as usize => last.cursor,
            _ => cursor(head.max(after)),
        };
        Ok(WaitRead {
            lease,
            session_known,
            global_head: cursor(global_head),
            messages,
            next,
        })
    }

    /// Records that the agent was handed its tasks after `after` up to `through` (those not yet marked), so that
    /// a later delivery of them says `redelivered`. Nobody waits for it: it runs in a task of its own (the
    /// caller answers without a write of its own). A failure loses only the mark — the tasks stay stored and
    /// unprocessed, and their next delivery lacks the `redelivered` flag.
    pub(crate) fn mark_delivered(&self, agent_id: &str, after: Cursor, through: Cursor, now: Timestamp) {
        let (after, through) = (seq_of(after), seq_of(through));
        let agent_id = agent_id.to_string();
        self.marks.add(&agent_id, through);
        let store = self.clone();
        tokio::spawn(async move {
            if let Err(e) = store.write_delivered(&agent_id, after, through, now).await {
                tracing::warn!(error = %e, "a delivered mark was not stored");
            }
            store.marks.done(&agent_id);
        });
    }

    /// The write of [`PgStore::mark_delivered`]. It takes the agent's lock first, like every write that
    /// changes several of the agent's items, so that two marks never lock the same rows in different orders.
    async fn write_delivered(&self, agent_id: &str, after: i64, through: i64, now: Timestamp) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        super::lock_agent(&mut tx, agent_id).await?;
        sqlx::query(
            "UPDATE items SET delivered_at = $2
             WHERE agent_id = $1 AND kind = 'message' AND processed_at IS NULL
               AND delivered_at IS NULL AND seq > $3 AND seq <= $4",
        )
        .bind(agent_id)
        .bind(now.millis())
        .bind(after)
        .bind(through)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        self.committed();
        Ok(())
    }

    /// Marks a task processed (idempotent: the first time is kept). The first time, in the same transaction,
    /// stores the `update` item that tells the sending device ([`insert_update`]). `None` when the agent has no
    /// such task.
    pub(crate) async fn mark_processed(
        &self,
        agent_id: &str,
        message_id: &str,
        now: Timestamp,
    ) -> Result<Option<Marked>> {
        // Read first: repeated acknowledgements then cost no write.
        let known: Option<Option<i64>> = sqlx::query_scalar(
            "SELECT processed_at FROM items WHERE agent_id = $1 AND kind = 'message' AND item_id = $2",
        )
        .bind(agent_id)
        .bind(message_id)
        .fetch_optional(&self.pool)
        .await?;
        match known {
            None => return Ok(None),
            Some(Some(at)) => {
                return Ok(Some(Marked {
                    processed_at: Timestamp(at),
                    update: None,
                }));
            }
            Some(None) => {}
        }
        let mut tx = self.pool.begin().await?;
        super::lock_agent(&mut tx, agent_id).await?;
        // Only the first acknowledgement sets it; a concurrent one waits for the agent's lock, then finds it set
        // and changes nothing.
        let first: Option<i64> = sqlx::query_scalar(
            "UPDATE items SET processed_at = $3
             WHERE agent_id = $1 AND kind = 'message' AND item_id = $2 AND processed_at IS NULL
             RETURNING seq",
        )
        .bind(agent_id)
        .bind(message_id)
        .bind(now.millis())
        .fetch_optional(&mut *tx)
        .await?;
        let update = match first {
            Some(seq) => insert_update(&mut tx, agent_id, seq, ItemState::Processed, now).await?,
            None => None,
        };
        let at: Option<Option<i64>> = sqlx::query_scalar(
            "SELECT processed_at FROM items WHERE agent_id = $1 AND kind = 'message' AND item_id = $2",
        )
        .bind(agent_id)
        .bind(message_id)
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
    pub(crate) async fn put_reply(
        &self,
        agent_id: &str,
        reply_id: &str,
        source_message_id: &str,
        envelopes: &[DeviceEnvelope],
        now: Timestamp,
    ) -> Result<ReplyPut> {
        let mut tx = self.pool.begin().await?;
        super::lock_agent(&mut tx, agent_id).await?;
        let put = self
            .put_reply_in(&mut tx, agent_id, reply_id, source_message_id, envelopes, now)
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

    /// What one device can open after `after`: the tasks it sent, the replies, questions and notifications
    /// sealed for it, and the updates about them (its tasks processed; the questions sealed for it answered,
    /// cancelled or expired). A question, in its item or an update, carries its state as of `now`.
    pub(crate) async fn conversation(
        &self,
        agent_id: &str,
        device_id: &str,
        after: Cursor,
        limit: u32,
        updates: bool,
        now: Timestamp,
    ) -> Result<(Vec<ConversationItem>, Cursor)> {
        let after = seq_of(after);
        // Read the head first: anything stored later has a greater seq and is left for the next call. Every item
        // of this agent up to the head has committed (the agent's items commit in the order of their seq).
        let head: i64 = sqlx::query_scalar("SELECT COALESCE(MAX(seq), 0) FROM items WHERE agent_id = $1")
            .bind(agent_id)
            .fetch_one(&self.pool)
            .await?;
        // An update is about its subject `s`: the device that sent the task sees it (`i.device_id`), or every
        // device the question was sealed for (the question's envelopes). Its question metadata is the
        // subject's.
        let rows: Vec<ConversationRow> = sqlx::query_as(
            "SELECT i.seq, i.kind, i.item_id, COALESCE(e.envelope, i.envelope, '') AS envelope,
                    i.source_message_id, i.created_at, i.delivered_at, i.processed_at,
                    i.update_state, s.kind AS subject_kind, s.item_id AS subject_id,
                    q.kind AS question_kind, q.state AS question_state, q.expires_at, q.answered_by, q.answered_at,
                    q.answered_by_name, q.answer_copy, q.channel
             FROM items i
                  LEFT JOIN item_envelopes e ON e.item_seq = i.seq AND e.device_id = $2
                  LEFT JOIN items s ON s.seq = i.subject_seq
                  LEFT JOIN questions q ON q.item_seq = COALESCE(i.subject_seq, i.seq)
             WHERE i.agent_id = $1 AND i.seq > $3 AND i.seq <= $4 AND ($6 OR i.kind <> 'update')
               AND ((i.kind = 'message' AND i.device_id = $2)
                    OR (i.kind IN ('reply', 'question', 'notification') AND e.envelope IS NOT NULL)
                    OR (i.kind = 'update' AND s.kind = 'message' AND i.device_id = $2)
                    OR (i.kind = 'update' AND s.kind = 'question'
                        AND EXISTS (SELECT 1 FROM item_envelopes se
                                    WHERE se.item_seq = i.subject_seq AND se.device_id = $2)))
             ORDER BY i.seq LIMIT $5",
        )
        .bind(agent_id)
        .bind(device_id)
        .bind(after)
        .bind(head)
        .bind(i64::from(limit))
        .bind(updates)
        .fetch_all(&self.pool)
        .await?;
        let next = match rows.last() {
            Some(last) if rows.len() >= limit as usize => last.seq,
            _ => head.max(after),
        };
        let items = rows
            .into_iter()
            .map(|r| r.item(now))
            .collect::<Result<Vec<_>>>()?;
        Ok((items, cursor(next)))
    }
}

#[cfg(test)]
pub(super) mod tests {
    //! The SQLite file's tests, and what concurrent writers add (the cap, one id stored once, one update per
    //! acknowledgement, a cursor that never skips): each runs on a fresh database of the test cluster when
    //! `PACERELLE_TEST_POSTGRES` asks for one (`start` or a `postgres://` URL), and passes saying it was skipped
    //! otherwise.

    use std::collections::HashSet;
    use std::sync::Arc;
    use std::time::Duration;

    use pacerelle_core::question::{QuestionKind, QuestionState};
    use pacerelle_core::wire::ItemKind;
    use pacerelle_test_support::postgres::Cluster;
    use tokio::sync::Barrier;

    use super::*;
    use crate::store::{NewQuestion, QuestionPut, Registered, SessionOpened, Transition};

    /// The tests' "now".
    pub(in super::super) const T0: i64 = 1_800_000_000_000;

    /// A store on a fresh database of the test cluster: agent `ag_1` with devices `dv_1` (phone) and `dv_2`
    /// (tablet), agent `ag_2` with `dv_3`. `None` (said on stdout) when no cluster is asked for.
    pub(in super::super) async fn store() -> Option<(PgStore, tempfile::TempDir)> {
        let Some(cluster) = Cluster::from_env() else {
            println!("skipped: set PACERELLE_TEST_POSTGRES=start (or a postgres:// URL) to run it");
            return None;
        };
        let dir = tempfile::tempdir().expect("a temporary directory");
        let store = PgStore::open(&cluster.fresh_database().await, dir.path())
            .await
            .expect("opens");
        for (agent, name) in [("ag_1", "laptop"), ("ag_2", "other")] {
            let registered = store
                .register_agent(agent, name, &[1; 32], Timestamp(T0))
                .await
                .expect("stored");
            assert!(matches!(registered, Registered::Created(_)));
        }
        sqlx::query(
            "INSERT INTO devices (device_id, agent_id, name, role, token_hash, created_at)
             VALUES ('dv_1', 'ag_1', 'phone', 'owner', '\\x00', $1),
                    ('dv_2', 'ag_1', 'tablet', 'owner', '\\x00', $1),
                    ('dv_3', 'ag_2', 'phone', 'owner', '\\x00', $1)",
        )
        .bind(T0)
        .execute(&store.pool)
        .await
        .expect("devices");
        Some((store, dir))
    }

    /// Stores task `id` from `dv_1` of `ag_1` with room for any number of pending tasks.
    pub(in super::super) async fn send(store: &PgStore, id: &str) -> Stored {
        match store
            .put_message("ag_1", "dv_1", id, "AQID", u32::MAX, Timestamp(T0))
            .await
            .expect("stored")
        {
            Put::Stored(stored) => stored,
            other => panic!("stored, got {other:?}"),
        }
    }

    /// The agent's tasks not yet processed, as the quota reads them (the counters) and by scanning them all.
    async fn pending_both_ways(store: &PgStore, agent_id: &str) -> (i64, i64) {
        let mut conn = store.pool.acquire().await.expect("a connection");
        let counted = pending_tasks(&mut conn, agent_id).await.expect("counted");
        let scanned: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM items WHERE agent_id = $1 AND kind = 'message' AND processed_at IS NULL",
        )
        .bind(agent_id)
        .fetch_one(&mut *conn)
        .await
        .expect("scanned");
        (counted, scanned)
    }

    async fn count(store: &PgStore, sql: &'static str) -> i64 {
        sqlx::query_scalar(sql)
            .fetch_one(&store.pool)
            .await
            .expect("counts")
    }

    fn envelope(device_id: &str, envelope: &str) -> DeviceEnvelope {
        DeviceEnvelope {
            device_id: device_id.into(),
            envelope: envelope.into(),
        }
    }

    #[tokio::test]
    async fn the_pending_count_agrees_with_a_scan_and_the_cap_refuses_only_new_tasks() {
        let Some((store, _dir)) = store().await else {
            return;
        };
        assert_eq!(pending_both_ways(&store, "ag_1").await, (0, 0));
        for i in 0..3 {
            let put = store
                .put_message("ag_1", "dv_1", &format!("m{i}"), "AQ", 3, Timestamp(T0 + i))
                .await
                .expect("stored");
            assert!(matches!(put, Put::Stored(Stored { created: true, .. })));
        }
        store
            .put_message("ag_2", "dv_3", "m0", "AQ", 3, Timestamp(T0))
            .await
            .expect("another agent's task");
        assert_eq!(pending_both_ways(&store, "ag_1").await, (3, 3));
        assert_eq!(pending_both_ways(&store, "ag_2").await, (1, 1));
        let refused = store
            .put_message("ag_1", "dv_1", "m3", "AQ", 3, Timestamp(T0 + 3))
            .await
            .expect("no storage error");
        assert!(matches!(refused, Put::QuotaExceeded));
        // A retry of a stored task is found, not refused; the same id from another device is a conflict.
        let again = store
            .put_message("ag_1", "dv_1", "m1", "AQ", 3, Timestamp(T0 + 4))
            .await
            .expect("found");
        assert!(matches!(again, Put::Stored(Stored { created: false, .. })));
        let other = store
            .put_message("ag_1", "dv_2", "m1", "AQ", 3, Timestamp(T0 + 4))
            .await
            .expect("no storage error");
        assert!(matches!(other, Put::Conflict(_)));
        // Marking twice counts once, and only the first stores an update.
        let first = store
            .mark_processed("ag_1", "m1", Timestamp(T0 + 5))
            .await
            .expect("processed")
            .expect("found");
        assert!(first.update.is_some());
        let second = store
            .mark_processed("ag_1", "m1", Timestamp(T0 + 6))
            .await
            .expect("processed")
            .expect("found");
        assert!(second.update.is_none());
        assert_eq!(second.processed_at, Timestamp(T0 + 5), "the first time is kept");
        assert!(
            store
                .mark_processed("ag_1", "nope", Timestamp(T0))
                .await
                .expect("ok")
                .is_none()
        );
        assert!(
            store
                .mark_processed("ag_2", "m1", Timestamp(T0))
                .await
                .expect("ok")
                .is_none(),
            "another agent's task id is not this agent's"
        );
        assert_eq!(pending_both_ways(&store, "ag_1").await, (2, 2));
        assert_eq!(pending_both_ways(&store, "ag_2").await, (1, 1));
        let put = store
            .put_message("ag_1", "dv_1", "m3", "AQ", 3, Timestamp(T0 + 6))
            .await
            .expect("room again");
        assert!(matches!(put, Put::Stored(Stored { created: true, .. })));
        assert_eq!(pending_both_ways(&store, "ag_1").await, (3, 3));
    }

    #[tokio::test]
    async fn sequence_numbers_only_grow_across_agents_and_kinds() {
        let Some((store, _dir)) = store().await else {
            return;
        };
        assert_eq!(store.global_head().await.expect("ok"), Cursor::START);
        let mut last = Cursor::START;
        for (i, agent) in ["ag_1", "ag_2", "ag_1"].into_iter().enumerate() {
            let c = store
                .put_checkpoint(agent, &format!("c{i}"), "AQID", Timestamp(T0))
                .await
                .expect("ok");
            assert!(c.cursor > last);
            last = c.cursor;
        }
        let task = send(&store, "m1").await;
        assert!(task.cursor > last);
        assert_eq!(store.global_head().await.expect("ok"), task.cursor);
        // Retention deleting the newest items leaves the head where it was: the cursors that named them stay
        // valid, and the wait's own read agrees.
        sqlx::query("DELETE FROM items WHERE item_id IN ('c2', 'm1')")
            .execute(&store.pool)
            .await
            .expect("deleted");
        assert_eq!(store.global_head().await.expect("ok"), task.cursor);
        let read = store
            .wait_read("ag_1", None, task.cursor, 10, Timestamp(T0))
            .await
            .expect("reads");
        assert_eq!(read.global_head, task.cursor);
    }

    #[tokio::test]
    async fn concurrent_sends_never_pass_the_cap_and_store_an_id_once() {
        let Some((store, _dir)) = store().await else {
            return;
        };
        let barrier = Arc::new(Barrier::new(24));
        let mut sends = Vec::new();
        for i in 0..24 {
            let (store, barrier) = (store.clone(), barrier.clone());
            sends.push(tokio::spawn(async move {
                barrier.wait().await;
                // Twelve distinct ids, each sent twice at once.
                store
                    .put_message("ag_1", "dv_1", &format!("m{}", i % 12), "AQ", 5, Timestamp(T0))
                    .await
                    .expect("no storage error")
            }));
        }
        let (mut created, mut found, mut refused) = (HashSet::new(), 0, 0);
        for send in sends {
            match send.await.expect("joined") {
                Put::Stored(s) if s.created => {
                    assert!(created.insert(s.id.clone()), "{} created twice", s.id)
                }
                Put::Stored(_) => found += 1,
                Put::QuotaExceeded => refused += 1,
                Put::Conflict(why) => panic!("no conflict expected: {why}"),
            }
        }
        assert_eq!(created.len(), 5, "exactly the cap is stored");
        assert_eq!(created.len() + found + refused, 24);
        assert!(found <= 5, "only a stored id is found again");
        assert_eq!(pending_both_ways(&store, "ag_1").await, (5, 5));
    }

    #[tokio::test]
    async fn concurrent_acknowledgements_store_one_update() {
        let Some((store, _dir)) = store().await else {
            return;
        };
        send(&store, "m1").await;
        let barrier = Arc::new(Barrier::new(10));
        let mut marks = Vec::new();
        for i in 0..10 {
            let (store, barrier) = (store.clone(), barrier.clone());
            marks.push(tokio::spawn(async move {
                barrier.wait().await;
                store
                    .mark_processed("ag_1", "m1", Timestamp(T0 + 10 + i))
                    .await
                    .expect("no storage error")
                    .expect("found")
            }));
        }
        let mut marked = Vec::new();
        for mark in marks {
            marked.push(mark.await.expect("joined"));
        }
        let updates: Vec<&NewUpdate> = marked.iter().filter_map(|m| m.update.as_ref()).collect();
        assert_eq!(updates.len(), 1, "one acknowledgement is the first");
        let at = updates[0].created_at;
        assert!(
            marked.iter().all(|m| m.processed_at == at),
            "all see the first time"
        );
        assert_eq!(
            count(&store, "SELECT COUNT(*) FROM items WHERE kind = 'update'").await,
            1
        );
        assert_eq!(pending_both_ways(&store, "ag_1").await, (0, 0));
    }

    #[tokio::test]
    async fn a_wait_reads_the_lease_the_session_and_the_heads_and_resumes_from_its_cursor() {
        let Some((store, _dir)) = store().await else {
            return;
        };
        let read = store
            .wait_read("ag_1", None, Cursor::START, 10, Timestamp(T0))
            .await
            .expect("reads");
        assert!(read.lease.is_none() && !read.session_known && read.messages.is_empty());
        assert_eq!((read.global_head, read.next), (Cursor::START, Cursor::START));

        let opened = store
            .open_session("ag_1", "ses_1", "laptop", false, Timestamp(T0))
            .await
            .expect("opens");
        assert!(matches!(opened, SessionOpened::Opened(_)));
        let m1 = send(&store, "m1").await;
        let m2 = send(&store, "m2").await;
        let m3 = send(&store, "m3").await;
        let other = store
            .put_checkpoint("ag_2", "c1", "AQID", Timestamp(T0))
            .await
            .expect("another agent's item");
        let read = store
            .wait_read("ag_1", Some("ses_1"), Cursor::START, 2, Timestamp(T0 + 1))
            .await
            .expect("reads");
        let lease = read.lease.expect("held");
        assert_eq!(
            (lease.session_id.as_str(), lease.holder.host.as_str()),
            ("ses_1", "laptop")
        );
        assert_eq!(lease.holder.since, Timestamp(T0));
        assert!(read.session_known);
        assert_eq!(
            read.global_head, other.cursor,
            "the relay's head, every agent's items"
        );
        let ids: Vec<&str> = read.messages.iter().map(|m| m.message_id.as_str()).collect();
        assert_eq!(ids, ["m1", "m2"]);
        let first = &read.messages[0];
        assert_eq!(
            (
                first.from.as_str(),
                first.from_name.as_str(),
                first.envelope.as_str()
            ),
            ("dv_1", "phone", "AQID")
        );
        assert_eq!(
            (first.cursor, first.sent_at, first.redelivered),
            (m1.cursor, Timestamp(T0), false)
        );
        assert_eq!(read.next, m2.cursor, "a full page continues after its last task");

        let read = store
            .wait_read("ag_1", Some("ses_2"), read.next, 2, Timestamp(T0 + 2))
            .await
            .expect("reads");
        assert!(!read.session_known, "a session this agent never had");
        assert_eq!(read.messages.len(), 1);
        assert_eq!(
            read.next, m3.cursor,
            "a short page continues from the agent's head"
        );
        // A processed task is no longer handed out; the cursor still moves to the head.
        store
            .mark_processed("ag_1", "m3", Timestamp(T0 + 3))
            .await
            .expect("ok");
        let read = store
            .wait_read("ag_1", Some("ses_1"), m2.cursor, 2, Timestamp(T0 + 4))
            .await
            .expect("reads");
        assert!(read.messages.is_empty());
        assert!(read.next > m3.cursor, "the update item is the agent's head");

        // Past the lease's time-to-live the session no longer holds it, but stays known.
        let late = Timestamp(T0 + crate::store::lease_ttl_ms());
        let read = store
            .wait_read("ag_1", Some("ses_1"), Cursor::START, 10, late)
            .await
            .expect("reads");
        assert!(read.lease.is_none());
        assert!(read.session_known);
        let read = store
            .wait_read("ag_2", Some("ses_1"), Cursor::START, 10, Timestamp(T0))
            .await
            .expect("reads");
        assert!(
            read.lease.is_none() && !read.session_known,
            "another agent's session"
        );
    }

    #[tokio::test]
    async fn a_task_handed_out_again_says_redelivered_at_once() {
        let Some((store, _dir)) = store().await else {
            return;
        };
        for round in 0..20 {
            let task = send(&store, &format!("m{round}")).await;
            let after = Cursor(task.cursor.seq() - 1);
            let read = store
                .wait_read("ag_1", None, after, 10, Timestamp(T0))
                .await
                .expect("reads");
            assert_eq!(read.messages.len(), 1);
            assert!(!read.messages[0].redelivered, "round {round}: first delivery");
            store.mark_delivered("ag_1", after, task.cursor, Timestamp(T0 + 1));
            // At once, as an agent that restarts: the mark, not yet committed, is waited for.
            let read = store
                .wait_read("ag_1", None, after, 10, Timestamp(T0 + 2))
                .await
                .expect("reads");
            assert!(read.messages[0].redelivered, "round {round}: handed out again");
        }
        let delivered = count(
            &store,
            "SELECT COUNT(*) FROM items WHERE kind = 'message' AND delivered_at IS NOT NULL",
        )
        .await;
        assert_eq!(delivered, 20);
        // A processed task keeps no mark from a later delivery of the range.
        send(&store, "late").await;
        store
            .mark_processed("ag_1", "late", Timestamp(T0 + 3))
            .await
            .expect("ok");
        store.mark_delivered(
            "ag_1",
            Cursor::START,
            store.global_head().await.expect("ok"),
            Timestamp(T0 + 4),
        );
        store
            .wait_read("ag_1", None, Cursor::START, 1, Timestamp(T0 + 5))
            .await
            .expect("reads after the mark");
        let late: Option<i64> = sqlx::query_scalar("SELECT delivered_at FROM items WHERE item_id = 'late'")
            .fetch_one(&store.pool)
            .await
            .expect("reads");
        assert_eq!(late, None);
    }

    #[tokio::test]
    async fn replies_are_checked_stored_once_and_sealed_per_device() {
        let Some((store, _dir)) = store().await else {
            return;
        };
        let task = send(&store, "m1").await;
        let both = [envelope("dv_1", "R1D1"), envelope("dv_2", "R1D2")];
        let put = |id: &'static str, source: &'static str, envelopes: Vec<DeviceEnvelope>| {
            let store = store.clone();
            async move {
                store
                    .put_reply("ag_1", id, source, &envelopes, Timestamp(T0 + 1))
                    .await
                    .expect("no storage error")
            }
        };
        assert!(matches!(put("r1", "m9", both.to_vec()).await, ReplyPut::NoSource));
        let unknown = put(
            "r1",
            "m1",
            vec![
                envelope("dv_1", "A"),
                envelope("dv_3", "B"),
                envelope("dv_9", "C"),
            ],
        )
        .await;
        assert!(
            matches!(&unknown, ReplyPut::UnknownDevice(d) if d == "dv_3"),
            "the first device not of this agent, got {unknown:?}"
        );
        let ReplyPut::Stored(stored) = put("r1", "m1", both.to_vec()).await else {
            panic!("stored");
        };
        assert!(stored.created && stored.cursor > task.cursor);
        let ReplyPut::Stored(again) = put("r1", "m1", both.to_vec()).await else {
            panic!("found");
        };
        assert_eq!(
            (again.created, again.cursor, again.created_at),
            (false, stored.cursor, stored.created_at)
        );
        send(&store, "m2").await;
        assert!(matches!(put("r1", "m2", both.to_vec()).await, ReplyPut::Conflict));
        assert_eq!(
            count(&store, "SELECT COUNT(*) FROM items WHERE kind = 'reply'").await,
            1
        );
        assert_eq!(count(&store, "SELECT COUNT(*) FROM item_envelopes").await, 2);
        for (device, sealed) in [("dv_1", "R1D1"), ("dv_2", "R1D2")] {
            let (items, _) = store
                .conversation("ag_1", device, task.cursor, 10, true, Timestamp(T0 + 2))
                .await
                .expect("reads");
            let reply = items
                .iter()
                .find(|i| i.kind == ItemKind::Reply)
                .expect("the reply");
            assert_eq!((reply.id.as_str(), reply.envelope.as_str()), ("r1", sealed));
            assert_eq!(reply.source_message_id.as_deref(), Some("m1"));
        }
    }

    #[tokio::test]
    async fn a_conversation_shows_a_device_its_own_items_and_their_updates() {
        let Some((store, _dir)) = store().await else {
            return;
        };
        let m1 = send(&store, "m1").await;
        store
            .put_message("ag_1", "dv_2", "t1", "TABLET", u32::MAX, Timestamp(T0))
            .await
            .expect("the tablet's task");
        let only_dv1 = [envelope("dv_1", "Q1D1")];
        let q = NewQuestion {
            question_id: "q1",
            kind: QuestionKind::YesNo,
            expires_at: Timestamp(T0 + 60_000),
            self_envelope: "SELF",
            envelopes: &only_dv1,
            user_id: None,
        };
        let put = store
            .put_question("ag_1", &q, 100, Timestamp(T0))
            .await
            .expect("asked");
        assert!(matches!(put, QuestionPut::Item(_)));
        store.mark_delivered("ag_1", Cursor::START, m1.cursor, Timestamp(T0 + 1));
        let marked = store
            .mark_processed("ag_1", "m1", Timestamp(T0 + 2))
            .await
            .expect("ok")
            .expect("found");
        let processed = marked.update.expect("an update");
        assert_eq!(processed.recipients, ["dv_1"]);
        let (cancel, effects) = store
            .cancel_question("ag_1", "q1", Timestamp(T0 + 3))
            .await
            .expect("cancels");
        assert!(matches!(cancel, Transition::Done(_)));
        let cancelled = effects.update.expect("an update");

        let (items, next) = store
            .conversation("ag_1", "dv_1", Cursor::START, 50, true, Timestamp(T0 + 4))
            .await
            .expect("reads");
        let seen: Vec<(ItemKind, &str)> = items.iter().map(|i| (i.kind, i.id.as_str())).collect();
        assert_eq!(
            seen,
            [
                (ItemKind::Message, "m1"),
                (ItemKind::Question, "q1"),
                (ItemKind::Update, processed.id.as_str()),
                (ItemKind::Update, cancelled.id.as_str()),
            ]
        );
        assert_eq!(items[0].state, Some(ItemState::Processed));
        assert_eq!(items[0].envelope, "AQID");
        assert_eq!(items[1].envelope, "Q1D1");
        assert_eq!(
            items[1].question.as_ref().map(|m| (m.kind, m.state)),
            Some((QuestionKind::YesNo, QuestionState::Cancelled))
        );
        // What a push would carry is what the conversation returns, question metadata included.
        assert_eq!(items[2], processed.item);
        assert_eq!(items[3], cancelled.item);
        assert_eq!(items[3].subject_id.as_deref(), Some("q1"));
        assert_eq!(next, cancelled.cursor());

        // Without updates; and a page of one continues after its item.
        let (items, _) = store
            .conversation("ag_1", "dv_1", Cursor::START, 50, false, Timestamp(T0 + 4))
            .await
            .expect("reads");
        assert!(items.iter().all(|i| i.kind != ItemKind::Update));
        let (page, next) = store
            .conversation("ag_1", "dv_1", Cursor::START, 1, true, Timestamp(T0 + 4))
            .await
            .expect("reads");
        assert_eq!((page.len(), next), (1, m1.cursor));

        // The tablet sees its own task only: neither the phone's task, the question sealed for the phone, nor
        // their updates.
        let (items, next) = store
            .conversation("ag_1", "dv_2", Cursor::START, 50, true, Timestamp(T0 + 4))
            .await
            .expect("reads");
        let seen: Vec<(&str, Option<ItemState>)> = items.iter().map(|i| (i.id.as_str(), i.state)).collect();
        assert_eq!(seen, [("t1", Some(ItemState::Sent))]);
        assert_eq!(
            next,
            cancelled.cursor(),
            "an empty tail still moves the cursor to the head"
        );
    }

    #[tokio::test]
    async fn a_cursor_never_skips_an_item_that_commits_later() {
        let Some((store, _dir)) = store().await else {
            return;
        };
        const SENDERS: usize = 8;
        const EACH: usize = 40;
        let barrier = Arc::new(Barrier::new(SENDERS + 1));
        let mut senders = Vec::new();
        for s in 0..SENDERS {
            let (store, barrier) = (store.clone(), barrier.clone());
            senders.push(tokio::spawn(async move {
                barrier.wait().await;
                for i in 0..EACH {
                    // Another agent's item between, so that the relay's sequence interleaves the agents.
                    store
                        .put_checkpoint("ag_2", &format!("c{s}_{i}"), "AQ", Timestamp(T0))
                        .await
                        .expect("stored");
                    send(&store, &format!("m{s}_{i}")).await;
                }
            }));
        }
        barrier.wait().await;
        let mut seen = HashSet::new();
        let (mut after, mut conversation_after) = (Cursor::START, Cursor::START);
        let mut in_conversation = HashSet::new();
        loop {
            let done = senders.iter().all(|s| s.is_finished());
            let read = store
                .wait_read("ag_1", None, after, 7, Timestamp(T0))
                .await
                .expect("reads");
            for m in &read.messages {
                assert!(
                    seen.insert(m.message_id.clone()),
                    "{} handed out twice",
                    m.message_id
                );
            }
            after = read.next;
            let (items, next) = store
                .conversation("ag_1", "dv_1", conversation_after, 5, true, Timestamp(T0))
                .await
                .expect("reads");
            for i in items {
                assert!(in_conversation.insert(i.id.clone()), "{} shown twice", i.id);
            }
            conversation_after = next;
            if done && read.messages.is_empty() && conversation_after == after {
                break;
            }
        }
        for s in senders {
            s.await.expect("joined");
        }
        assert_eq!(
            seen.len(),
            SENDERS * EACH,
            "every task reached the agent's cursor"
        );
        assert_eq!(
            in_conversation.len(),
            SENDERS * EACH,
            "every task reached the device's cursor"
        );
    }

    /// Transaction A of `ag_1` holds the agent's lock and has drawn its seq, not yet committed, while B (a
    /// write of `ab`: a task or a reply) runs: B must draw its seq after A commits, or a reader's cursor
    /// could pass A's item before it commits. (A task would also wait for A in the trigger that counts it, but
    /// after drawing its seq: only the lock orders the draw.)
    async fn a_write_waits_for_an_uncommitted_item_of_its_agent(write: &str) {
        let Some((store, _dir)) = store().await else {
            return;
        };
        let m0 = send(&store, "m0").await;
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
                    return send(&store, "b").await;
                }
                match store
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
            .conversation("ag_1", "dv_1", m0.cursor, 10, true, Timestamp(T0))
            .await
            .expect("reads");
        assert!(items.is_empty(), "{write}: B waits for A, got {items:?}");
        a.commit().await.expect("commits");
        let b = b.await.expect("joined");
        assert!(b.cursor > cursor(a_seq), "{write}: B numbered after A");
        let (items, _) = store
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
