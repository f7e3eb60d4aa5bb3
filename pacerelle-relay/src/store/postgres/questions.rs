//! The PostgreSQL backend: questions, notifications and the expiry of questions (mirrors `sqlite/questions.rs`).
//!
//! The rules are SQLite's: every transition goes through [`QuestionRecord`] inside a write transaction, the row
//! is updated only from `pending` (`WHERE state = 'pending'`), and a question that the clock has expired is
//! written `expired` by whichever write meets it first (an answer, a cancel, the expirer), in the same
//! transaction as its `question.expired` webhook event and its `update` item, so each is stored exactly once.
//! Reads never write. What PostgreSQL's concurrent writers add (ADR 0003):
//!
//! - Every write here inserts items (the question or notification itself, or the `update` item of a closing),
//!   so each first locks the agent's `agent_counts` row ([`super::lock_agent`]). That lock also serialises the
//!   writes of one agent's questions: an answer, a cancel and the expirer never decide on one question at
//!   once, and the quota count of a new question sees every question stored before it.
//! - The expirer claims due questions with `FOR UPDATE SKIP LOCKED`, then takes each one's agent lock with
//!   `SKIP LOCKED` too: it never waits for a lock while it holds one, so it cannot deadlock with an answer
//!   (which holds the agent and waits for the question). A question whose agent is busy is left to the next
//!   pass, or to the write holding the lock if that write meets the expiry. Two relay instances never expire
//!   the same question.
//! - The devices a question or notification is sealed for are read `FOR SHARE`: a revocation under way
//!   finishes first and the device is then refused, or waits until the item is stored.

use std::collections::HashMap;

use pacerelle_core::question::{QuestionKind, QuestionRecord, QuestionState, Refusal};
use pacerelle_core::wire::QuestionMeta;

use super::prelude::*;
use crate::error::StoreError;

/// Event types of the webhook outbox.
pub(super) const ANSWERED: &str = "question.answered";
pub(super) const EXPIRED: &str = "question.expired";
pub(super) const CANCELLED: &str = "question.cancelled";

/// The columns of a question as [`QuestionRow`] reads them (`q`: questions, `i`: its item). A macro, so that
/// every query stays a constant string.
macro_rules! columns {
    () => {
        "i.seq, i.item_id, q.agent_id, q.kind, q.state, i.created_at, q.expires_at, q.closed_at,
         COALESCE(i.envelope, '') AS self_envelope,
         (SELECT string_agg(ie.device_id, ',') FROM item_envelopes ie WHERE ie.item_seq = i.seq) AS recipients,
         q.answered_by, q.answered_by_name, q.answered_at, q.answer_envelope, q.answer_copy"
    };
}

/// The question `question_id` (`$2`) of the agent `$1`.
macro_rules! row_of {
    () => {
        concat!(
            "SELECT ",
            columns!(),
            " FROM questions q JOIN items i ON i.seq = q.item_seq
             WHERE i.agent_id = $1 AND i.kind = 'question' AND i.item_id = $2"
        )
    };
}

/// The state a question has at the time bound to parameter `$now`, in SQL: the rule of
/// [`QuestionRecord::state_at`].
macro_rules! effective_state {
    ($now:literal) => {
        concat!(
            "(CASE WHEN q.state = 'pending' AND q.expires_at <= ",
            $now,
            " THEN 'expired' ELSE q.state END)"
        )
    };
}

fn ts(ms: i64) -> Timestamp {
    Timestamp(ms)
}

fn cursor(seq: i64) -> Cursor {
    Cursor(u64::try_from(seq).unwrap_or(0))
}

fn seq_of(c: Cursor) -> i64 {
    i64::try_from(c.seq()).unwrap_or(i64::MAX)
}

fn corrupt(what: String) -> StoreError {
    StoreError::internal(what)
}

fn kind_of(text: &str) -> Result<QuestionKind> {
    match text {
        "yes_no" => Ok(QuestionKind::YesNo),
        "choice" => Ok(QuestionKind::Choice),
        "text" => Ok(QuestionKind::Text),
        other => Err(corrupt(format!(
            "unknown question kind {other:?} in the database"
        ))),
    }
}

fn state_of(text: &str) -> Result<QuestionState> {
    QuestionState::parse(text)
        .ok_or_else(|| corrupt(format!("unknown question state {text:?} in the database")))
}

/// Counts a committed write transaction in the store's [`crate::store::WriterCounts`].
fn wrote(store: &PgStore) {
    store.counts.commits.inc();
    store.counts.writes.inc();
}

/// A question as stored.
#[derive(Debug, sqlx::FromRow)]
pub(super) struct QuestionRow {
    seq: i64,
    item_id: String,
    agent_id: String,
    kind: String,
    state: String,
    created_at: i64,
    expires_at: i64,
    closed_at: Option<i64>,
    self_envelope: String,
    recipients: Option<String>,
    answered_by: Option<String>,
    answered_by_name: Option<String>,
    answered_at: Option<i64>,
    answer_envelope: Option<String>,
    answer_copy: Option<String>,
}

/// A question and the envelope sealed for one device.
#[derive(Debug, sqlx::FromRow)]
struct DeviceRow {
    #[sqlx(flatten)]
    question: QuestionRow,
    device_envelope: String,
}

impl QuestionRow {
    /// The state machine's view of the row.
    fn record(&self) -> Result<QuestionRecord> {
        Ok(QuestionRecord {
            state: state_of(&self.state)?,
            expires_at: ts(self.expires_at),
            answered_by: self.answered_by.clone(),
            closed_at: self.closed_at.map(ts),
        })
    }

    /// The record as of `now`: a pending question past its expiry reads as expired (closed at its expiry).
    fn record_at(&self, now: Timestamp) -> Result<QuestionRecord> {
        let mut record = self.record()?;
        record.expire_if_due(now);
        Ok(record)
    }

    fn meta(&self, now: Timestamp) -> Result<QuestionMeta> {
        let record = self.record_at(now)?;
        Ok(QuestionMeta {
            kind: kind_of(&self.kind)?,
            state: record.state,
            expires_at: record.expires_at,
            answered_by: self.answered_by.clone(),
            answered_at: self.answered_at.map(ts),
            answered_by_name: self.answered_by_name.clone(),
            answer_copy: self.answer_copy.clone(),
        })
    }

    /// The question as the agent sees it at `now` (also the body of its webhook events).
    pub(super) fn view(self, now: Timestamp) -> Result<QuestionView> {
        let record = self.record_at(now)?;
        let mut recipients: Vec<String> = self
            .recipients
            .as_deref()
            .unwrap_or("")
            .split(',')
            .filter(|d| !d.is_empty())
            .map(str::to_string)
            .collect();
        recipients.sort();
        Ok(QuestionView {
            question_id: self.item_id,
            kind: kind_of(&self.kind)?,
            state: record.state,
            created_at: ts(self.created_at),
            expires_at: record.expires_at,
            closed_at: record.closed_at,
            self_envelope: self.self_envelope,
            recipients,
            answered_by: self.answered_by,
            answered_by_name: self.answered_by_name,
            answered_at: self.answered_at.map(ts),
            answer_envelope: self.answer_envelope,
            cursor: cursor(self.seq),
        })
    }

    fn device_question(&self, envelope: String, now: Timestamp) -> Result<DeviceQuestion> {
        Ok(DeviceQuestion {
            question_id: self.item_id.clone(),
            envelope,
            meta: self.meta(now)?,
            created_at: ts(self.created_at),
            cursor: cursor(self.seq),
        })
    }
}

/// The question `question_id` of this agent, its row locked until the transaction ends (`FOR UPDATE`).
async fn row_of_locked(
    conn: &mut PgConnection,
    agent_id: &str,
    question_id: &str,
) -> Result<Option<QuestionRow>> {
    Ok(sqlx::query_as(concat!(row_of!(), " FOR UPDATE OF q"))
        .bind(agent_id)
        .bind(question_id)
        .fetch_optional(conn)
        .await?)
}

/// The question stored at `seq`.
pub(super) async fn row_at(conn: &mut PgConnection, seq: i64) -> Result<QuestionRow> {
    Ok(sqlx::query_as(concat!(
        "SELECT ",
        columns!(),
        " FROM questions q JOIN items i ON i.seq = q.item_seq WHERE q.item_seq = $1"
    ))
    .bind(seq)
    .fetch_one(conn)
    .await?)
}

/// Writes the expiry `record` reached (it must have moved from pending to expired in this transaction), queues
/// its event and stores its `update` item. Returns whether an event was queued, and the update. The caller
/// holds the agent's lock.
async fn store_expiry(
    conn: &mut PgConnection,
    row: &QuestionRow,
    record: &QuestionRecord,
    now: Timestamp,
) -> Result<(bool, Option<NewUpdate>)> {
    let closed_at = record.closed_at.unwrap_or(record.expires_at);
    let changed = sqlx::query(
        "UPDATE questions SET state = 'expired', closed_at = $2 WHERE item_seq = $1 AND state = 'pending'",
    )
    .bind(row.seq)
    .bind(closed_at.millis())
    .execute(&mut *conn)
    .await?
    .rows_affected();
    if changed == 0 {
        return Ok((false, None));
    }
    let event = super::webhooks::queue_event(&mut *conn, &row.agent_id, row.seq, EXPIRED, now).await?;
    let update =
        super::updates::insert_update(&mut *conn, &row.agent_id, row.seq, ItemState::Expired, now).await?;
    Ok((event, update))
}

/// Whether every device is an active device of this agent; the first that is not, otherwise. Each device row
/// is read `FOR SHARE`, so that it cannot be revoked before this transaction ends.
async fn inactive_device(
    conn: &mut PgConnection,
    agent_id: &str,
    envelopes: &[DeviceEnvelope],
) -> Result<Option<String>> {
    for e in envelopes {
        let active: Option<bool> = sqlx::query_scalar(
            "SELECT revoked_at IS NULL FROM devices WHERE agent_id = $1 AND device_id = $2 FOR SHARE",
        )
        .bind(agent_id)
        .bind(&e.device_id)
        .fetch_optional(&mut *conn)
        .await?;
        if active != Some(true) {
            return Ok(Some(e.device_id.clone()));
        }
    }
    Ok(None)
}

/// The agent's open questions at `now` (pending, expiry still ahead), counted up to `cap` at most through the
/// index `questions_open_by_agent`, which holds only pending questions.
async fn open_questions(conn: &mut PgConnection, agent_id: &str, cap: u32, now: Timestamp) -> Result<i64> {
    Ok(sqlx::query_scalar(
        "SELECT COUNT(*) FROM (SELECT 1 FROM questions
                               WHERE agent_id = $1 AND state = 'pending' AND expires_at > $2
                               LIMIT $3) AS open",
    )
    .bind(agent_id)
    .bind(now.millis())
    .bind(i64::from(cap))
    .fetch_one(conn)
    .await?)
}

/// Stores the envelope sealed for each device, in one statement.
async fn insert_envelopes(conn: &mut PgConnection, seq: i64, envelopes: &[DeviceEnvelope]) -> Result<()> {
    let devices: Vec<&str> = envelopes.iter().map(|e| e.device_id.as_str()).collect();
    let sealed: Vec<&str> = envelopes.iter().map(|e| e.envelope.as_str()).collect();
    sqlx::query(
        "INSERT INTO item_envelopes (item_seq, device_id, envelope)
         SELECT $1, d, e FROM UNNEST($2::TEXT[], $3::TEXT[]) AS t (d, e)",
    )
    .bind(seq)
    .bind(devices)
    .bind(sealed)
    .execute(conn)
    .await?;
    Ok(())
}

/// The body of [`PgStore::put_question`], in its transaction.
async fn put_question_in(
    conn: &mut PgConnection,
    agent_id: &str,
    q: &NewQuestion<'_>,
    max_open: u32,
    now: Timestamp,
) -> Result<QuestionPut> {
    super::lock_agent(&mut *conn, agent_id).await?;
    let existing: Option<QuestionRow> = sqlx::query_as(row_of!())
        .bind(agent_id)
        .bind(q.question_id)
        .fetch_optional(&mut *conn)
        .await?;
    if let Some(row) = existing {
        return Ok(QuestionPut::Item(Box::new(ItemPut::Stored(
            row.view(now)?,
            false,
        ))));
    }
    if let Some(device_id) = inactive_device(&mut *conn, agent_id, q.envelopes).await? {
        return Ok(QuestionPut::Item(Box::new(ItemPut::UnknownDevice(device_id))));
    }
    if open_questions(&mut *conn, agent_id, max_open, now).await? >= i64::from(max_open) {
        return Ok(QuestionPut::QuotaExceeded);
    }
    let seq: i64 = sqlx::query_scalar(
        "INSERT INTO items (agent_id, kind, item_id, envelope, created_at)
         VALUES ($1, 'question', $2, $3, $4) RETURNING seq",
    )
    .bind(agent_id)
    .bind(q.question_id)
    .bind(q.self_envelope)
    .bind(now.millis())
    .fetch_one(&mut *conn)
    .await?;
    insert_envelopes(&mut *conn, seq, q.envelopes).await?;
    let record = QuestionRecord::new(q.expires_at);
    sqlx::query(
        "INSERT INTO questions (item_seq, agent_id, kind, state, expires_at) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(seq)
    .bind(agent_id)
    .bind(q.kind.as_str())
    .bind(record.state.as_str())
    .bind(record.expires_at.millis())
    .execute(&mut *conn)
    .await?;
    super::push::enqueue(&mut *conn, agent_id, seq, now).await?;
    let view = row_at(&mut *conn, seq).await?.view(now)?;
    Ok(QuestionPut::Item(Box::new(ItemPut::Stored(view, true))))
}

/// The body of [`PgStore::answer_question`], in its transaction.
async fn answer_in(
    conn: &mut PgConnection,
    agent_id: &str,
    device_id: &str,
    question_id: &str,
    answer_envelope: &str,
    answer_copy: Option<&str>,
    now: Timestamp,
) -> Result<(Transition<DeviceQuestion>, Effects)> {
    let mut effects = Effects::default();
    super::lock_agent(&mut *conn, agent_id).await?;
    let Some(row) = row_of_locked(&mut *conn, agent_id, question_id).await? else {
        return Ok((Transition::NotFound, effects));
    };
    let sealed_for_device: Option<String> =
        sqlx::query_scalar("SELECT envelope FROM item_envelopes WHERE item_seq = $1 AND device_id = $2")
            .bind(row.seq)
            .bind(device_id)
            .fetch_optional(&mut *conn)
            .await?;
    let Some(device_envelope) = sealed_for_device else {
        return Ok((Transition::NotFound, effects));
    };
    let mut record = row.record()?;
    let was = record.state;
    let outcome = record.answer(device_id, now);
    if was == QuestionState::Pending && record.state == QuestionState::Expired {
        effects.closed = true;
        (effects.event, effects.update) = store_expiry(&mut *conn, &row, &record, now).await?;
    }
    let transition = match outcome {
        Ok(()) => {
            let answered_at = record.closed_at.unwrap_or(now);
            let changed = sqlx::query(
                "UPDATE questions SET state = $2, closed_at = $3, answered_by = $4,
                        answered_by_name = (SELECT name FROM devices WHERE device_id = $4),
                        answered_at = $3, answer_envelope = $5, answer_copy = $6
                 WHERE item_seq = $1 AND state = 'pending'",
            )
            .bind(row.seq)
            .bind(record.state.as_str())
            .bind(answered_at.millis())
            .bind(device_id)
            .bind(answer_envelope)
            .bind(answer_copy)
            .execute(&mut *conn)
            .await?
            .rows_affected();
            if changed == 0 {
                // Cannot happen under the agent's lock and the row's; refuse rather than report an answer not
                // stored.
                return Err(corrupt("a pending question changed under its write lock".into()));
            }
            effects.closed = true;
            effects.event =
                super::webhooks::queue_event(&mut *conn, agent_id, row.seq, ANSWERED, now).await?;
            effects.update =
                super::updates::insert_update(&mut *conn, agent_id, row.seq, ItemState::Answered, now)
                    .await?;
            let stored = row_at(&mut *conn, row.seq).await?;
            Transition::Done(stored.device_question(device_envelope, now)?)
        }
        Err(Refusal::AlreadyAnswered) if record.answered_by.as_deref() == Some(device_id) => {
            Transition::Done(row.device_question(device_envelope, now)?)
        }
        Err(refusal) => Transition::Refused(refusal),
    };
    Ok((transition, effects))
}

/// The body of [`PgStore::cancel_question`], in its transaction.
async fn cancel_in(
    conn: &mut PgConnection,
    agent_id: &str,
    question_id: &str,
    now: Timestamp,
) -> Result<(Transition<QuestionView>, Effects)> {
    let mut effects = Effects::default();
    super::lock_agent(&mut *conn, agent_id).await?;
    let Some(row) = row_of_locked(&mut *conn, agent_id, question_id).await? else {
        return Ok((Transition::NotFound, effects));
    };
    let mut record = row.record()?;
    let was = record.state;
    let outcome = record.cancel(now);
    if was == QuestionState::Pending && record.state == QuestionState::Expired {
        effects.closed = true;
        (effects.event, effects.update) = store_expiry(&mut *conn, &row, &record, now).await?;
    }
    let transition = match outcome {
        Ok(()) if was == QuestionState::Pending => {
            sqlx::query(
                "UPDATE questions SET state = $2, closed_at = $3 WHERE item_seq = $1 AND state = 'pending'",
            )
            .bind(row.seq)
            .bind(record.state.as_str())
            .bind(record.closed_at.unwrap_or(now).millis())
            .execute(&mut *conn)
            .await?;
            effects.closed = true;
            effects.event =
                super::webhooks::queue_event(&mut *conn, agent_id, row.seq, CANCELLED, now).await?;
            effects.update =
                super::updates::insert_update(&mut *conn, agent_id, row.seq, ItemState::Cancelled, now)
                    .await?;
            Transition::Done(row_at(&mut *conn, row.seq).await?.view(now)?)
        }
        Ok(()) => Transition::Done(row.view(now)?),
        Err(refusal) => Transition::Refused(refusal),
    };
    Ok((transition, effects))
}

/// The body of [`PgStore::expire_due`] once something is due, in its transaction.
async fn expire_in(conn: &mut PgConnection, now: Timestamp, limit: u32) -> Result<ExpiryPass> {
    let mut pass = ExpiryPass::default();
    // Claimed until the transaction ends: another instance's pass skips them.
    let claimed: Vec<(i64, String)> = sqlx::query_as(
        "SELECT item_seq, agent_id FROM questions WHERE state = 'pending' AND expires_at <= $1
         ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED",
    )
    .bind(now.millis())
    .bind(i64::from(limit))
    .fetch_all(&mut *conn)
    .await?;
    pass.more = claimed.len() >= limit as usize;
    // Each agent's lock, taken only when free: a writer holding it may be answering one of these questions
    // and waiting for its row, which this transaction holds.
    let mut locked: HashMap<String, bool> = HashMap::new();
    for (seq, agent_id) in claimed {
        let free = match locked.get(&agent_id) {
            Some(free) => *free,
            None => {
                let free = sqlx::query_scalar::<_, String>(
                    "SELECT agent_id FROM agent_counts WHERE agent_id = $1 FOR UPDATE SKIP LOCKED",
                )
                .bind(&agent_id)
                .fetch_optional(&mut *conn)
                .await?
                .is_some();
                locked.insert(agent_id.clone(), free);
                free
            }
        };
        if !free {
            // Still pending and due: `next_expiry` gives its time, so the next pass comes at once.
            continue;
        }
        let row = row_at(&mut *conn, seq).await?;
        let mut record = row.record()?;
        if record.expire_if_due(now) {
            let (event, update) = store_expiry(&mut *conn, &row, &record, now).await?;
            pass.events |= event;
            pass.updates.extend(update);
            if !pass.agents.contains(&row.agent_id) {
                pass.agents.push(row.agent_id.clone());
            }
        }
    }
    Ok(pass)
}

/// The body of [`PgStore::put_notification`], in its transaction.
async fn put_notification_in(
    conn: &mut PgConnection,
    agent_id: &str,
    notification_id: &str,
    envelopes: &[DeviceEnvelope],
    now: Timestamp,
) -> Result<ItemPut<Stored>> {
    super::lock_agent(&mut *conn, agent_id).await?;
    let existing: Option<(i64, i64)> = sqlx::query_as(
        "SELECT seq, created_at FROM items WHERE agent_id = $1 AND kind = 'notification' AND item_id = $2",
    )
    .bind(agent_id)
    .bind(notification_id)
    .fetch_optional(&mut *conn)
    .await?;
    if let Some((seq, created_at)) = existing {
        return Ok(ItemPut::Stored(
            Stored {
                id: notification_id.to_string(),
                cursor: cursor(seq),
                created_at: ts(created_at),
                created: false,
            },
            false,
        ));
    }
    if let Some(device_id) = inactive_device(&mut *conn, agent_id, envelopes).await? {
        return Ok(ItemPut::UnknownDevice(device_id));
    }
    let seq: i64 = sqlx::query_scalar(
        "INSERT INTO items (agent_id, kind, item_id, created_at) VALUES ($1, 'notification', $2, $3)
         RETURNING seq",
    )
    .bind(agent_id)
    .bind(notification_id)
    .bind(now.millis())
    .fetch_one(&mut *conn)
    .await?;
    insert_envelopes(&mut *conn, seq, envelopes).await?;
    super::push::enqueue(&mut *conn, agent_id, seq, now).await?;
    Ok(ItemPut::Stored(
        Stored {
            id: notification_id.to_string(),
            cursor: cursor(seq),
            created_at: now,
            created: true,
        },
        true,
    ))
}

impl PgStore {
    /// Stores a question sealed for each device, or finds the one already stored under this id. A new
    /// question is refused ([`QuestionPut::QuotaExceeded`], nothing stored) when the agent already has
    /// `max_open` open questions (pending and not yet past their expiry): the count runs under the agent's
    /// lock, so two questions stored at once never both pass the last free place.
    pub(crate) async fn put_question(
        &self,
        agent_id: &str,
        q: &NewQuestion<'_>,
        max_open: u32,
        now: Timestamp,
    ) -> Result<QuestionPut> {
        let mut tx = self.pool.begin().await?;
        let put = put_question_in(&mut tx, agent_id, q, max_open, now).await?;
        tx.commit().await?;
        wrote(self);
        Ok(put)
    }

    /// A question of this agent, as of `now`.
    pub(crate) async fn question(
        &self,
        agent_id: &str,
        question_id: &str,
        now: Timestamp,
    ) -> Result<Option<QuestionView>> {
        let row: Option<QuestionRow> = sqlx::query_as(row_of!())
            .bind(agent_id)
            .bind(question_id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|row| row.view(now)).transpose()
    }

    /// Records a device's answer through [`QuestionRecord::answer`]: the first valid answer wins; the device
    /// that answered gets its answer again on a retry.
    pub(crate) async fn answer_question(
        &self,
        agent_id: &str,
        device_id: &str,
        question_id: &str,
        answer_envelope: &str,
        answer_copy: Option<&str>,
        now: Timestamp,
    ) -> Result<(Transition<DeviceQuestion>, Effects)> {
        let mut tx = self.pool.begin().await?;
        let outcome = answer_in(
            &mut tx,
            agent_id,
            device_id,
            question_id,
            answer_envelope,
            answer_copy,
            now,
        )
        .await?;
        tx.commit().await?;
        wrote(self);
        Ok(outcome)
    }

    /// Cancels a question through [`QuestionRecord::cancel`]; cancelling a cancelled question is a no-op.
    pub(crate) async fn cancel_question(
        &self,
        agent_id: &str,
        question_id: &str,
        now: Timestamp,
    ) -> Result<(Transition<QuestionView>, Effects)> {
        let mut tx = self.pool.begin().await?;
        let outcome = cancel_in(&mut tx, agent_id, question_id, now).await?;
        tx.commit().await?;
        wrote(self);
        Ok(outcome)
    }

    /// The questions sealed for this device in the given state (as of `now`): the most recent `limit`,
    /// oldest first.
    pub(crate) async fn device_questions(
        &self,
        agent_id: &str,
        device_id: &str,
        filter: StateFilter,
        limit: u32,
        now: Timestamp,
    ) -> Result<Vec<DeviceQuestion>> {
        let state = match filter {
            StateFilter::All => None,
            StateFilter::Only(s) => Some(s.as_str()),
        };
        let rows: Vec<DeviceRow> = sqlx::query_as(concat!(
            "SELECT ",
            columns!(),
            ", e.envelope AS device_envelope
             FROM questions q JOIN items i ON i.seq = q.item_seq
                  JOIN item_envelopes e ON e.item_seq = q.item_seq AND e.device_id = $2
             WHERE q.agent_id = $1 AND ($4::TEXT IS NULL OR ",
            effective_state!("$3"),
            " = $4)
             ORDER BY q.item_seq DESC LIMIT $5"
        ))
        .bind(agent_id)
        .bind(device_id)
        .bind(now.millis())
        .bind(state)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter()
            .rev()
            .map(|r| r.question.device_question(r.device_envelope, now))
            .collect()
    }

    /// A page of the answer log, newest first.
    pub(crate) async fn answer_log(&self, agent_id: &str, q: &LogQuery, now: Timestamp) -> Result<LogPage> {
        let state = match q.state {
            StateFilter::All => None,
            StateFilter::Only(s) => Some(s.as_str()),
        };
        let rows: Vec<QuestionRow> = sqlx::query_as(concat!(
            "SELECT ",
            columns!(),
            " FROM questions q JOIN items i ON i.seq = q.item_seq
             WHERE q.agent_id = $1
               AND ($2::BIGINT IS NULL OR q.item_seq < $2)
               AND ($3::BIGINT IS NULL OR i.created_at >= $3)
               AND ($4::BIGINT IS NULL OR i.created_at < $4)
               AND ($6::TEXT IS NULL OR ",
            effective_state!("$5"),
            " = $6)
             ORDER BY q.item_seq DESC LIMIT $7"
        ))
        .bind(agent_id)
        .bind(q.before.map(seq_of))
        .bind(q.since.map(Timestamp::millis))
        .bind(q.until.map(Timestamp::millis))
        .bind(now.millis())
        .bind(state)
        .bind(i64::from(q.limit) + 1)
        .fetch_all(&self.pool)
        .await?;
        let more = rows.len() > q.limit as usize;
        let questions = rows
            .into_iter()
            .take(q.limit as usize)
            .map(|r| r.view(now))
            .collect::<Result<Vec<_>>>()?;
        let next = if more {
            questions.last().map(|v| v.cursor)
        } else {
            None
        };
        Ok(LogPage { questions, next })
    }

    /// When the next pending question expires.
    pub(crate) async fn next_expiry(&self) -> Result<Option<Timestamp>> {
        let at: Option<i64> =
            sqlx::query_scalar("SELECT MIN(expires_at) FROM questions WHERE state = 'pending'")
                .fetch_one(&self.pool)
                .await?;
        Ok(at.map(ts))
    }

    /// Moves up to `limit` pending questions past their expiry to `expired` (closed at their expiry) through
    /// [`QuestionRecord::expire_if_due`], queueing each one's `question.expired` event in the same transaction.
    /// The questions are claimed with `FOR UPDATE SKIP LOCKED`: passes of several instances expire each
    /// question once (see the module's documentation).
    pub(crate) async fn expire_due(&self, now: Timestamp, limit: u32) -> Result<ExpiryPass> {
        // Most passes find nothing: ask before opening a write transaction.
        let due: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM questions WHERE state = 'pending' AND expires_at <= $1)",
        )
        .bind(now.millis())
        .fetch_one(&self.pool)
        .await?;
        if !due {
            return Ok(ExpiryPass::default());
        }
        let mut tx = self.pool.begin().await?;
        let pass = expire_in(&mut tx, now, limit).await?;
        tx.commit().await?;
        wrote(self);
        Ok(pass)
    }

    /// Stores a notification sealed for each device, or finds the one already stored under this id.
    pub(crate) async fn put_notification(
        &self,
        agent_id: &str,
        notification_id: &str,
        envelopes: &[DeviceEnvelope],
        now: Timestamp,
    ) -> Result<ItemPut<Stored>> {
        let mut tx = self.pool.begin().await?;
        let put = put_notification_in(&mut tx, agent_id, notification_id, envelopes, now).await?;
        tx.commit().await?;
        wrote(self);
        Ok(put)
    }
}
