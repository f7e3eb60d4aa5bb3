//! The PostgreSQL backend: the stream of tasks and replies — a device's tasks, their delivery to the agent and
//! acknowledgement, the agent's replies, and what one device sees of the stream (its conversation). Mirrors
//! `sqlite/messages.rs`, with the same outcomes.
//!
//! Every write takes the agent's counter row lock first ([`super::lock_agent`], ADR 0003): the items it inserts
//! draw their sequence numbers in commit order, and its check-then-insert steps (an id already used, the quota
//! of tasks not yet processed, a task acknowledged twice at once) run one after another for one agent, as
//! SQLite's single writer runs them.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use pacerelle_core::wire::{AgentMessage, ItemKind, LeaseHolder, MessageState, SubjectKind};
use sqlx::Row;
use tokio::sync::Notify;

use super::prelude::*;
use super::updates::{conversation_meta, cursor, insert_update, seq_of};
use crate::store::lease_ttl_ms;

/// How long a wait's read waits for a delivered mark of the same agent still being written (see
/// [`PendingMarks`]) before it reads without it. Only a database that does not answer takes that long; the
/// read then returns what it finds, and only a `redelivered` flag can be missing.
const MARK_SETTLE: Duration = Duration::from_secs(10);

fn message_state(delivered_at: Option<i64>, processed_at: Option<i64>) -> MessageState {
    match (delivered_at, processed_at) {
        (_, Some(_)) => MessageState::Processed,
        (Some(_), None) => MessageState::Delivered,
        (None, None) => MessageState::Sent,
    }
}

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

/// Delivered marks started by this relay instance and not yet committed: per agent, how many, and the highest
/// sequence number they cover; and a signal each time one ends. A wait that may return those tasks again waits
/// for them first, so that their `redelivered` flag is exact (an agent that restarts at once). Marks written
/// by another instance are not seen here: an agent that moves to another instance within the moment a mark
/// takes to commit may get a task again without the flag (never lose one).
#[derive(Debug, Default)]
pub(super) struct PendingMarks {
    marks: Mutex<HashMap<String, (usize, i64)>>,
    ended: Notify,
}

impl PendingMarks {
    fn add(&self, agent_id: &str, through: i64) {
        let mut marks = self.marks.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let entry = marks.entry(agent_id.to_string()).or_insert((0, through));
        entry.0 += 1;
        entry.1 = entry.1.max(through);
    }

    fn done(&self, agent_id: &str) {
        {
            let mut marks = self.marks.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            if let Some(entry) = marks.get_mut(agent_id) {
                entry.0 = entry.0.saturating_sub(1);
                if entry.0 == 0 {
                    marks.remove(agent_id);
                }
            }
        }
        self.ended.notify_waiters();
    }

    /// Whether a mark not yet committed covers a task after `after`.
    fn pending_beyond(&self, agent_id: &str, after: i64) -> bool {
        self.marks
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(agent_id)
            .is_some_and(|(_, through)| *through > after)
    }

    /// Returns once no mark of this agent beyond `after` is pending (or after [`MARK_SETTLE`]).
    async fn settle(&self, agent_id: &str, after: i64) {
        let waited = tokio::time::timeout(MARK_SETTLE, async {
            loop {
                // Registered before the check: a mark that ends between the check and the await still wakes it.
                let ended = self.ended.notified();
                if !self.pending_beyond(agent_id, after) {
                    return;
                }
                ended.await;
            }
        })
        .await;
        if waited.is_err() {
            tracing::warn!("a delivered mark took too long to commit; the wait reads without it");
        }
    }
}

/// One row of the conversation query.
#[derive(sqlx::FromRow)]
struct ConversationRow {
    seq: i64,
    kind: String,
    item_id: String,
    envelope: String,
    source_message_id: Option<String>,
    created_at: i64,
    delivered_at: Option<i64>,
    processed_at: Option<i64>,
    update_state: Option<String>,
    subject_kind: Option<String>,
    subject_id: Option<String>,
    question_kind: Option<String>,
    question_state: Option<String>,
    expires_at: Option<i64>,
    answered_by: Option<String>,
    answered_at: Option<i64>,
    answered_by_name: Option<String>,
    answer_copy: Option<String>,
}

impl PgStore {
    /// The greatest sequence number ever given to any item still stored (0 when there is none): no valid cursor
    /// is beyond.
    pub(crate) async fn global_head(&self) -> Result<Cursor> {
        let seq: i64 = sqlx::query_scalar("SELECT COALESCE(MAX(seq), 0) FROM items")
            .fetch_one(&self.pool)
            .await?;
        Ok(cursor(seq))
    }

    /// Stores a task sent by a device, or finds the one already stored under this id. A new task is refused
    /// ([`Put::QuotaExceeded`], nothing stored) when the agent already has `max_pending` tasks not yet
    /// processed. The agent's lock is taken first, so concurrent sends of one agent count one after the other
    /// and never pass the cap, and a second send of the same id waits for the first and then finds it.
    pub(crate) async fn put_message(
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
                Put::Conflict("this message id was used by another device")
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
        self.counts.commits.inc();
        self.counts.writes.inc();
        Ok(put)
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
        if self.marks.pending_beyond(agent_id, after) {
            self.marks.settle(agent_id, after).await;
        }
        // One row at least (the facts); one row per task otherwise. At most one session is open per agent
        // (`sessions_open_per_agent`), so the join with it adds no rows. The caller's session is known when this
        // agent has (or had) a session with its id: the lease's own session is one of those.
        let rows = sqlx::query(
            "WITH facts AS (
                 SELECT (SELECT COALESCE(MAX(seq), 0) FROM items) AS global_head,
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
            (Some(session_id), Some(host), Some(since), Some(beat))
                if beat.saturating_add(lease_ttl_ms()) > now.millis() =>
            {
                Some(Lease {
                    session_id,
                    holder: LeaseHolder {
                        host,
                        since: Timestamp(since),
                        last_heartbeat_at: Timestamp(beat),
                    },
                })
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
        self.counts.commits.inc();
        self.counts.writes.inc();
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
        self.counts.commits.inc();
        self.counts.writes.inc();
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
        self.counts.commits.inc();
        self.counts.writes.inc();
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
                    q.answered_by_name, q.answer_copy
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
            .map(|r| {
                let kind = match r.kind.as_str() {
                    "message" => ItemKind::Message,
                    "reply" => ItemKind::Reply,
                    "question" => ItemKind::Question,
                    "notification" => ItemKind::Notification,
                    "update" => ItemKind::Update,
                    _ => ItemKind::Unknown,
                };
                let (state, subject_kind) = match kind {
                    ItemKind::Message => (Some(message_state(r.delivered_at, r.processed_at).into()), None),
                    ItemKind::Update => (
                        r.update_state.as_deref().map(update_state),
                        Some(match r.subject_kind.as_deref() {
                            Some("message") => SubjectKind::Message,
                            Some("question") => SubjectKind::Question,
                            _ => SubjectKind::Unknown,
                        }),
                    ),
                    _ => (None, None),
                };
                Ok(ConversationItem {
                    kind,
                    id: r.item_id,
                    envelope: r.envelope,
                    source_message_id: r.source_message_id,
                    state,
                    subject_id: r.subject_id.filter(|_| kind == ItemKind::Update),
                    subject_kind,
                    question: conversation_meta(
                        r.question_kind.as_deref(),
                        r.question_state.as_deref(),
                        r.expires_at,
                        r.answered_by,
                        r.answered_at,
                        r.answered_by_name,
                        r.answer_copy,
                        now,
                    )?,
                    created_at: Timestamp(r.created_at),
                    cursor: cursor(r.seq),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok((items, cursor(next)))
    }
}

/// The state an update row reports.
fn update_state(text: &str) -> ItemState {
    match text {
        "processed" => ItemState::Processed,
        "answered" => ItemState::Answered,
        "expired" => ItemState::Expired,
        "cancelled" => ItemState::Cancelled,
        _ => ItemState::Unknown,
    }
}
