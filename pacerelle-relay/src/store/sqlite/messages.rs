//! The stream of tasks and replies: a device's tasks, their delivery to the agent and acknowledgement, the
//! agent's replies, and what one device sees of the stream (its conversation).

use crate::store::commands::{NewReply, NewTask, TaskAt, WaitQuery};
use pacerelle_core::wire::{AgentMessage, ItemState, Stored};
use pacerelle_core::{Cursor, Timestamp};
use rusqlite::{Connection, OptionalExtension, params};

use super::{Result, SqliteStore, cursor, lease as session, seq_of, ts, updates};
use crate::store::{Marked, Put, ReplyPut, WaitRead};

/// The agent's tasks not yet processed: stored minus processed, both counted by triggers in the transactions
/// that store and mark them (migrations 0007 and 0010), so the count costs one row read however many tasks
/// there are.
fn pending_tasks(conn: &Connection, agent_id: &str) -> Result<i64> {
    Ok(conn
        .prepare_cached(
            "SELECT COALESCE((SELECT messages - processed FROM agent_counts WHERE agent_id = ?1), 0)",
        )?
        .query_row([agent_id], |r| r.get(0))?)
}

/// The greatest sequence number ever given to an item, deleted ones included (`sqlite_sequence` keeps it for
/// an `AUTOINCREMENT` table): retention deleting the newest items must not make the cursors that named them
/// invalid.
const GLOBAL_HEAD_SQL: &str =
    "SELECT MAX(COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'items'), 0),
                                   COALESCE((SELECT MAX(seq) FROM items), 0))";

/// The delivered mark ([`crate::store::Store::mark_delivered`]): the agent's tasks after `?3` up to `?4` that the
/// session named `?5` was handed — its own, and those sent to any session that no other took meanwhile, which
/// become its — delivered at `?2` unless they were before.
const SET_DELIVERED_SQL: &str = "UPDATE items SET delivered_at = COALESCE(delivered_at, ?2),
                                        session_name = COALESCE(session_name, ?5)
     WHERE agent_id = ?1 AND kind = 'message' AND processed_at IS NULL AND seq > ?3 AND seq <= ?4
       AND (session_name IS NULL OR (session_name = ?5 AND delivered_at IS NULL))";

impl SqliteStore {
    /// The greatest sequence number ever given to any item (0 when there is none), even if that item was
    /// deleted since: no valid cursor is beyond.
    pub(crate) async fn global_head(&self) -> Result<Cursor> {
        let seq: i64 = sqlx::query_scalar(GLOBAL_HEAD_SQL).fetch_one(&self.read).await?;
        Ok(cursor(seq))
    }

    /// Stores a task sent by a device, or finds the one already stored under this id. A new task is refused
    /// ([`Put::QuotaExceeded`], nothing stored) when the agent already has `max_pending` tasks not yet
    /// processed: the count runs in the storing transaction, so concurrent sends never pass the cap, and reads
    /// one row of counters (`agent_counts`), however many tasks are stored.
    pub(crate) async fn put_message(&self, task: &NewTask<'_>) -> Result<Put> {
        let (max_pending, now) = (task.max_pending, task.now);
        let agent_id = task.agent_id.to_string();
        let device_id = task.device_id.to_string();
        let message_id = task.message_id.to_string();
        let envelope = task.envelope.to_string();
        let session = task.session.map(str::to_string);
        self.write(move |conn| {
            let existing: Option<(i64, Option<String>, i64)> = conn
                .prepare_cached(
                    "SELECT seq, device_id, created_at FROM items
                     WHERE agent_id = ?1 AND kind = 'message' AND item_id = ?2",
                )?
                .query_row(params![agent_id, message_id], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })
                .optional()?;
            if let Some((seq, sender, created_at)) = existing {
                if sender.as_deref() != Some(device_id.as_str()) {
                    return Ok(Put::Conflict(crate::store::types::ID_OF_ANOTHER_DEVICE));
                }
                return Ok(Put::Stored(Stored {
                    id: message_id,
                    cursor: cursor(seq),
                    created_at: ts(created_at),
                    created: false,
                }));
            }
            if pending_tasks(conn, &agent_id)? >= i64::from(max_pending) {
                return Ok(Put::QuotaExceeded);
            }
            let seq: i64 = conn
                .prepare_cached(
                    "INSERT INTO items (agent_id, kind, item_id, device_id, envelope, created_at, session_name)
                     VALUES (?1, 'message', ?2, ?3, ?4, ?5, ?6) RETURNING seq",
                )?
                .query_row(
                    params![agent_id, message_id, device_id, envelope, now.millis(), session],
                    |r| r.get(0),
                )?;
            Ok(Put::Stored(Stored {
                id: message_id,
                cursor: cursor(seq),
                created_at: now,
                created: true,
            }))
        })
        .await
    }

    /// One step of the agent's long-poll, read in one snapshot on one read connection: the caller's session and
    /// its name's lease, the relay's head (to check the caller's cursor), and the tasks not yet processed after
    /// `after` that are for that name or for any session and not taken yet (oldest first, at most `limit`), with
    /// the cursor to continue from.
    ///
    /// Nothing is written here. The `delivered` bookkeeping of the tasks returned is [`crate::store::Store::mark_delivered`],
    /// which rides in the writer's next batch: the wait answers after the task's one synced write (its insert),
    /// not after a second one (ADR 0001, point 6).
    pub(crate) async fn wait_read(&self, query: &WaitQuery<'_>) -> Result<WaitRead> {
        let (after, limit, now) = (query.after, query.limit, query.now);
        let (agent_id, session_id) = (query.agent_id.to_string(), query.session_id.map(str::to_string));
        // A delivered mark not yet committed for tasks this read may return again: let it commit first, so that
        // their `redelivered` flag is exact (an agent that restarts at once). Not on the hot path: an agent that
        // goes on from its cursor reads beyond every mark it caused.
        self.marks.settle(&agent_id, seq_of(after)).await;
        self.read_now(move |conn| {
            let after = seq_of(after);
            let named = match &session_id {
                Some(session) => session::session_name_on(conn, &agent_id, session)?,
                None => None,
            };
            let known = named.is_some();
            let name = named.unwrap_or_else(|| pacerelle_core::ids::DEFAULT_SESSION.to_string());
            let lease = session::lease_on(conn, &agent_id, &name, now)?;
            let global: i64 = conn
                .prepare_cached(GLOBAL_HEAD_SQL)?
                .query_row([], |r| r.get(0))?;
            let head: i64 = conn
                .prepare_cached("SELECT COALESCE(MAX(seq), 0) FROM items WHERE agent_id = ?1")?
                .query_row([&agent_id], |r| r.get(0))?;
            let messages = conn
                .prepare_cached(
                    "SELECT i.seq, i.item_id, COALESCE(i.device_id, ''), COALESCE(d.name, ''),
                            COALESCE(i.envelope, ''), i.created_at, i.delivered_at, i.session_name
                     FROM items i LEFT JOIN devices d ON d.device_id = i.device_id
                     WHERE i.agent_id = ?1 AND i.kind = 'message' AND i.processed_at IS NULL AND i.seq > ?2
                       AND (i.session_name IS NULL OR i.session_name = ?4)
                     ORDER BY i.seq LIMIT ?3",
                )?
                .query_map(params![agent_id, after, i64::from(limit), name], |r| {
                    Ok(AgentMessage {
                        cursor: cursor(r.get(0)?),
                        message_id: r.get(1)?,
                        from: r.get(2)?,
                        from_name: r.get(3)?,
                        envelope: r.get(4)?,
                        sent_at: ts(r.get(5)?),
                        redelivered: r.get::<_, Option<i64>>(6)?.is_some(),
                        session: r.get(7)?,
                    })
                })?
                .collect::<Result<Vec<_>, _>>()?;
            let roster: i64 = conn
                .prepare_cached("SELECT COALESCE((SELECT version FROM rosters WHERE agent_id = ?1), 0)")?
                .query_row([&agent_id], |r| r.get(0))?;
            Ok(WaitRead::new(name, lease, known, global, head, after, messages, limit).with_roster(roster))
        })
        .await
    }

    /// The write of [`crate::store::Store::mark_delivered`] (the tasks after `seqs.0` up to `seqs.1`), in the
    /// writer's next batch.
    pub(crate) async fn set_delivered(
        &self,
        agent_id: &str,
        session: &str,
        seqs: (i64, i64),
        now: Timestamp,
    ) -> Result<()> {
        let (after, through) = seqs;
        let (agent_id, session) = (agent_id.to_string(), session.to_string());
        self.write(move |conn| {
            conn.prepare_cached(SET_DELIVERED_SQL)?.execute(params![
                agent_id,
                now.millis(),
                after,
                through,
                session
            ])?;
            Ok(())
        })
        .await
    }

    /// Marks a task processed, once [`crate::store::Store::mark_processed`] has read that it is not (the first
    /// time is kept; a concurrent one changes nothing). The first time, in the same transaction, stores the
    /// `update` item that tells the sending device ([`updates::insert_update`]). `None` when the agent has no such task.
    pub(crate) async fn mark_processed(&self, task: &TaskAt<'_>) -> Result<Option<Marked>> {
        let now = task.now;
        let (agent_id, message_id) = (task.agent_id.to_string(), task.message_id.to_string());
        let session = task.session.to_string();
        self.write(move |conn| {
            // Only the first acknowledgement sets it; a concurrent one finds it set and changes nothing.
            let first: Option<i64> = conn
                .prepare_cached(
                    "UPDATE items SET processed_at = ?3, session_name = COALESCE(session_name, ?4)
                     WHERE agent_id = ?1 AND kind = 'message' AND item_id = ?2 AND processed_at IS NULL
                       AND (session_name IS NULL OR session_name = ?4)
                     RETURNING seq",
                )?
                .query_row(params![agent_id, message_id, now.millis(), session], |r| r.get(0))
                .optional()?;
            let update = match first {
                Some(seq) => updates::insert_update(conn, &agent_id, seq, ItemState::Processed, now)?,
                None => None,
            };
            let at: Option<Option<i64>> = conn
                .prepare_cached(
                    "SELECT processed_at FROM items WHERE agent_id = ?1 AND kind = 'message' AND item_id = ?2",
                )?
                .query_row(params![agent_id, message_id], |r| r.get(0))
                .optional()?;
            Ok(at.flatten().map(|at| Marked {
                processed_at: ts(at),
                update,
            }))
        })
        .await
    }

    /// Stores a reply with one envelope per device, or finds the one already stored under this id.
    pub(crate) async fn put_reply(&self, reply: &NewReply<'_>) -> Result<ReplyPut> {
        let now = reply.now;
        let agent_id = reply.agent_id.to_string();
        let reply_id = reply.reply_id.to_string();
        let source_message_id = reply.source_message_id.to_string();
        let envelopes = reply.envelopes.to_vec();
        self.write(move |conn| {
            let existing: Option<(i64, Option<String>, i64)> = conn
                .prepare_cached(
                    "SELECT seq, source_message_id, created_at FROM items
                     WHERE agent_id = ?1 AND kind = 'reply' AND item_id = ?2",
                )?
                .query_row(params![agent_id, reply_id], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })
                .optional()?;
            if let Some((seq, source, created_at)) = existing {
                if source.as_deref() != Some(source_message_id.as_str()) {
                    return Ok(ReplyPut::Conflict);
                }
                return Ok(ReplyPut::Stored(Stored {
                    id: reply_id,
                    cursor: cursor(seq),
                    created_at: ts(created_at),
                    created: false,
                }));
            }
            let source_known: bool = conn
                .prepare_cached(
                    "SELECT EXISTS (SELECT 1 FROM items
                                    WHERE agent_id = ?1 AND kind = 'message' AND item_id = ?2)",
                )?
                .query_row(params![agent_id, source_message_id], |r| r.get(0))?;
            if !source_known {
                return Ok(ReplyPut::NoSource);
            }
            for e in &envelopes {
                let known: bool = conn
                    .prepare_cached(
                        "SELECT EXISTS (SELECT 1 FROM devices WHERE agent_id = ?1 AND device_id = ?2)",
                    )?
                    .query_row(params![agent_id, e.device_id], |r| r.get(0))?;
                if !known {
                    return Ok(ReplyPut::UnknownDevice(e.device_id.clone()));
                }
            }
            let seq: i64 = conn
                .prepare_cached(
                    "INSERT INTO items (agent_id, kind, item_id, source_message_id, created_at)
                     VALUES (?1, 'reply', ?2, ?3, ?4) RETURNING seq",
                )?
                .query_row(
                    params![agent_id, reply_id, source_message_id, now.millis()],
                    |r| r.get(0),
                )?;
            for e in &envelopes {
                conn.prepare_cached(
                    "INSERT INTO item_envelopes (item_seq, device_id, envelope) VALUES (?1, ?2, ?3)",
                )?
                .execute(params![seq, e.device_id, e.envelope])?;
            }
            super::push::enqueue(conn, &agent_id, seq, now)?;
            Ok(ReplyPut::Stored(Stored {
                id: reply_id,
                cursor: cursor(seq),
                created_at: now,
                created: true,
            }))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    //! What only SQLite has — its migrations. The tests both backends share are in
    //! `crate::store::suite::messages`.

    use super::super::tests::{T0, database_at};
    use super::*;
    use crate::store::Store;
    use crate::store::suite::Backend;

    impl SqliteStore {
        /// The agent's tasks not yet processed, as the quota reads them (the counters), for the suite's
        /// `Backend::pending_both_ways`.
        pub(in crate::store) async fn pending_counted(&self, agent_id: &str) -> i64 {
            let agent_id = agent_id.to_string();
            self.write(move |conn| pending_tasks(conn, &agent_id))
                .await
                .expect("counted")
        }
    }

    #[tokio::test]
    async fn migration_0010_counts_the_tasks_already_processed() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("t.db");
        let pool = database_at(&path, 9).await;
        for statement in [
            "INSERT INTO agents (agent_id, name, auth_hash, created_at) VALUES ('ag_1', 'a', x'01', 1)",
            "INSERT INTO devices (device_id, agent_id, name, role, token_hash, created_at)
             VALUES ('dv_1', 'ag_1', 'phone', 'owner', x'00', 1)",
            "INSERT INTO items (agent_id, kind, item_id, device_id, envelope, created_at, processed_at)
             VALUES ('ag_1', 'message', 'm1', 'dv_1', 'AQ', 1, 5), ('ag_1', 'message', 'm2', 'dv_1', 'AQ', 2, 6),
                    ('ag_1', 'message', 'm3', 'dv_1', 'AQ', 3, NULL)",
        ] {
            sqlx::query(statement).execute(&pool).await.expect("a row");
        }
        pool.close().await;
        let store = SqliteStore::open(&path).await.expect("migrated");
        let backend = Backend::of(Store::Sqlite(store.clone()), path.display().to_string(), dir);
        assert_eq!(backend.pending_both_ways("ag_1").await, (1, 1));
        store
            .as_store()
            .mark_processed("ag_1", "m3", "default", Timestamp(T0))
            .await
            .expect("processed");
        assert_eq!(backend.pending_both_ways("ag_1").await, (0, 0));
    }
}
