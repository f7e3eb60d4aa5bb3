//! Questions, notifications and the expiry of questions.
//!
//! Every transition goes through [`QuestionRecord`] inside a write transaction: the record is rebuilt from the
//! row, the state machine decides, and the row is updated only from `pending` (`WHERE state = 'pending'`). A
//! question that the clock has expired is written `expired` by whichever write meets it first (an answer, a
//! cancel, the expirer), in the same transaction as its `question.expired` webhook event, so that event is
//! queued exactly once. Reads never write: they show the state [`QuestionRecord::state_at`] gives.

use pacerelle_core::Timestamp;
use pacerelle_core::question::{Channel, QuestionRecord, QuestionState, Refusal};
use pacerelle_core::wire::{DeviceEnvelope, DeviceQuestion, ItemState, QuestionView, Stored};
use rusqlite::{Connection, OptionalExtension, params};

use super::updates::insert_update;
use super::{Result, SqliteStore, cursor, ts};
use crate::store::rows::{QuestionRow, corrupt};
use crate::store::{Answerer, Effects, ExpiryPass, ItemPut, NewQuestion, NewUpdate, QuestionPut, Transition};

// Event types of the webhook outbox.
pub(super) use crate::store::rows::{ANSWERED, CANCELLED, EXPIRED};

impl QuestionRow {
    /// The row from the writer's connection, by the names [`question_columns!`] gives its columns.
    fn from_row(r: &rusqlite::Row) -> rusqlite::Result<Self> {
        Ok(QuestionRow {
            seq: r.get("seq")?,
            item_id: r.get("item_id")?,
            agent_id: r.get("agent_id")?,
            kind: r.get("kind")?,
            state: r.get("state")?,
            created_at: r.get("created_at")?,
            expires_at: r.get("expires_at")?,
            closed_at: r.get("closed_at")?,
            self_envelope: r.get("self_envelope")?,
            recipients: r.get("recipients")?,
            answered_by: r.get("answered_by")?,
            answered_by_name: r.get("answered_by_name")?,
            answered_at: r.get("answered_at")?,
            answer_envelope: r.get("answer_envelope")?,
            answer_copy: r.get("answer_copy")?,
            channel: r.get("channel")?,
            user_id: r.get("user_id")?,
        })
    }
}

/// The question `question_id` (`?2`) of the agent `?1`: the query of [`row_of`], also run on the read pool.
const ROW_OF: &str = concat!(
    "SELECT ",
    question_columns!(),
    " FROM questions q JOIN items i ON i.seq = q.item_seq
         WHERE i.agent_id = ?1 AND i.kind = 'question' AND i.item_id = ?2"
);

/// The question `question_id` of this agent.
fn row_of(conn: &Connection, agent_id: &str, question_id: &str) -> Result<Option<QuestionRow>> {
    Ok(conn
        .prepare_cached(ROW_OF)?
        .query_row(params![agent_id, question_id], QuestionRow::from_row)
        .optional()?)
}

/// The question stored at `seq`.
pub(super) fn row_at(conn: &Connection, seq: i64) -> Result<QuestionRow> {
    Ok(conn
        .prepare_cached(concat!(
            "SELECT ",
            question_columns!(),
            " FROM questions q JOIN items i ON i.seq = q.item_seq WHERE q.item_seq = ?1"
        ))?
        .query_row([seq], QuestionRow::from_row)?)
}

/// Writes the expiry `record` reached (it must have moved from pending to expired in this transaction), queues
/// its event and stores its `update` item. Returns whether an event was queued, and the update.
fn store_expiry(
    conn: &Connection,
    row: &QuestionRow,
    record: &QuestionRecord,
    now: Timestamp,
) -> Result<(bool, Option<NewUpdate>)> {
    let closed_at = record.closed_at.unwrap_or(record.expires_at);
    let changed = conn
        .prepare_cached(
            "UPDATE questions SET state = 'expired', closed_at = ?2 WHERE item_seq = ?1 AND state = 'pending'",
        )?
        .execute(params![row.seq, closed_at.millis()])?;
    if changed == 0 {
        return Ok((false, None));
    }
    let event = super::webhooks::queue_event(conn, &row.agent_id, row.seq, EXPIRED, now)?;
    let update = insert_update(conn, &row.agent_id, row.seq, ItemState::Expired, now)?;
    Ok((event, update))
}

/// An answer to store: who gives it, sealed for the agent (`envelope`) and with the question's answer key
/// (`copy`).
#[derive(Debug, Clone, Copy)]
struct Answer<'a> {
    by: Answerer<'a>,
    envelope: &'a str,
    copy: Option<&'a str>,
}

/// Records `answer` to the question `row` through the state machine and, when it is accepted, what an answer
/// stores with it: the answered row, its `question.answered` event and its `update` item ([`Effects`]). An
/// answer that meets the question's expiry writes the expiry first ([`store_expiry`]). Returns the row as
/// stored now, or the refusal; the caller decides whether a refusal is a retry of the answer already stored.
fn store_answer(
    conn: &Connection,
    agent_id: &str,
    row: &QuestionRow,
    answer: Answer<'_>,
    now: Timestamp,
    effects: &mut Effects,
) -> Result<Result<QuestionRow, Refusal>> {
    let mut record = row.record()?;
    let was = record.state;
    let outcome = answer.by.answer(&mut record, now);
    if was == QuestionState::Pending && record.state == QuestionState::Expired {
        effects.closed = true;
        (effects.event, effects.update) = store_expiry(conn, row, &record, now)?;
    }
    if let Err(refusal) = outcome {
        return Ok(Err(refusal));
    }
    let (device_id, channel) = answer.by.device_and_channel();
    let answered_at = record.closed_at.unwrap_or(now);
    let changed = conn
        .prepare_cached(
            "UPDATE questions SET state = ?2, closed_at = ?3, answered_by = ?4,
                    answered_by_name = (SELECT name FROM devices WHERE device_id = ?4),
                    answered_at = ?3, answer_envelope = ?5, answer_copy = ?6, channel = ?7
             WHERE item_seq = ?1 AND state = 'pending'",
        )?
        .execute(params![
            row.seq,
            record.state.as_str(),
            answered_at.millis(),
            device_id,
            answer.envelope,
            answer.copy,
            channel.as_str()
        ])?;
    if changed == 0 {
        // Cannot happen inside this transaction; refuse rather than report an answer not stored.
        return Err(corrupt("a pending question changed under its write lock".into()));
    }
    effects.closed = true;
    effects.event = super::webhooks::queue_event(conn, agent_id, row.seq, ANSWERED, now)?;
    effects.update = insert_update(conn, agent_id, row.seq, ItemState::Answered, now)?;
    Ok(Ok(row_at(conn, row.seq)?))
}

/// Whether every device is an active device of this agent; the first that is not, otherwise.
fn inactive_device(
    conn: &Connection,
    agent_id: &str,
    envelopes: &[DeviceEnvelope],
) -> Result<Option<String>> {
    let mut active = conn.prepare_cached(
        "SELECT EXISTS (SELECT 1 FROM devices WHERE agent_id = ?1 AND device_id = ?2 AND revoked_at IS NULL)",
    )?;
    for e in envelopes {
        let active: bool = active.query_row(params![agent_id, e.device_id], |r| r.get(0))?;
        if !active {
            return Ok(Some(e.device_id.clone()));
        }
    }
    Ok(None)
}

/// The agent's open questions at `now` (pending, expiry still ahead), counted up to `cap` at most through the
/// index `questions_open_by_agent`, which holds only pending questions.
fn open_questions(conn: &Connection, agent_id: &str, cap: u32, now: Timestamp) -> Result<i64> {
    Ok(conn
        .prepare_cached(
            "SELECT COUNT(*) FROM (SELECT 1 FROM questions INDEXED BY questions_open_by_agent
                               WHERE agent_id = ?1 AND state = 'pending' AND expires_at > ?2
                               LIMIT ?3)",
        )?
        .query_row(params![agent_id, now.millis(), i64::from(cap)], |r| r.get(0))?)
}

fn insert_envelopes(conn: &Connection, seq: i64, envelopes: &[DeviceEnvelope]) -> Result<()> {
    let mut insert = conn
        .prepare_cached("INSERT INTO item_envelopes (item_seq, device_id, envelope) VALUES (?1, ?2, ?3)")?;
    for e in envelopes {
        insert.execute(params![seq, e.device_id, e.envelope])?;
    }
    Ok(())
}

impl SqliteStore {
    /// Stores a question sealed for each device, or finds the one already stored under this id. A new
    /// question is refused ([`ItemPut::QuotaExceeded`], nothing stored) when the agent already has `max_open`
    /// open questions (pending and not yet past their expiry): the count runs in the storing transaction and
    /// reads at most `max_open` entries of the index of pending questions (migration 0009).
    pub(crate) async fn put_question(
        &self,
        agent_id: &str,
        q: &NewQuestion<'_>,
        max_open: u32,
        now: Timestamp,
    ) -> Result<QuestionPut> {
        let agent_id = agent_id.to_string();
        let question_id = q.question_id.to_string();
        let self_envelope = q.self_envelope.to_string();
        let envelopes = q.envelopes.to_vec();
        let (kind, expires_at) = (q.kind, q.expires_at);
        let user_id = q.user_id.map(str::to_string);
        self.write(move |conn| {
            if let Some(row) = row_of(conn, &agent_id, &question_id)? {
                return Ok(QuestionPut::Item(Box::new(ItemPut::Stored(
                    row.view(now)?,
                    false,
                ))));
            }
            if let Some(device_id) = inactive_device(conn, &agent_id, &envelopes)? {
                return Ok(QuestionPut::Item(Box::new(ItemPut::UnknownDevice(device_id))));
            }
            if open_questions(conn, &agent_id, max_open, now)? >= i64::from(max_open) {
                return Ok(QuestionPut::QuotaExceeded);
            }
            let seq: i64 = conn
                .prepare_cached(
                    "INSERT INTO items (agent_id, kind, item_id, envelope, created_at)
                     VALUES (?1, 'question', ?2, ?3, ?4) RETURNING seq",
                )?
                .query_row(params![agent_id, question_id, self_envelope, now.millis()], |r| {
                    r.get(0)
                })?;
            insert_envelopes(conn, seq, &envelopes)?;
            let record = QuestionRecord::new(expires_at);
            conn.prepare_cached(
                "INSERT INTO questions (item_seq, agent_id, kind, state, expires_at, user_id)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?
            .execute(params![
                seq,
                agent_id,
                kind.as_str(),
                record.state.as_str(),
                record.expires_at.millis(),
                user_id
            ])?;
            super::push::enqueue(conn, &agent_id, seq, now)?;
            let view = row_at(conn, seq)?.view(now)?;
            Ok(QuestionPut::Item(Box::new(ItemPut::Stored(view, true))))
        })
        .await
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
        let agent_id = agent_id.to_string();
        let device_id = device_id.to_string();
        let question_id = question_id.to_string();
        let answer_envelope = answer_envelope.to_string();
        let answer_copy = answer_copy.map(str::to_string);
        // A refusal writes nothing: its savepoint is released empty, as the transaction used to be dropped.
        self.write(move |conn| {
            let mut effects = Effects::default();
            let Some(row) = row_of(conn, &agent_id, &question_id)? else {
                return Ok((Transition::NotFound, effects));
            };
            let sealed_for_device: Option<String> = conn
                .prepare_cached("SELECT envelope FROM item_envelopes WHERE item_seq = ?1 AND device_id = ?2")?
                .query_row(params![row.seq, device_id], |r| r.get(0))
                .optional()?;
            let Some(device_envelope) = sealed_for_device else {
                return Ok((Transition::NotFound, effects));
            };
            let answer = Answer {
                by: Answerer::Device(&device_id),
                envelope: &answer_envelope,
                copy: answer_copy.as_deref(),
            };
            let transition = match store_answer(conn, &agent_id, &row, answer, now, &mut effects)? {
                Ok(stored) => Transition::Done(stored.device_question(device_envelope, now)?),
                Err(Refusal::AlreadyAnswered) if row.answered_by.as_deref() == Some(device_id.as_str()) => {
                    Transition::Done(row.device_question(device_envelope, now)?)
                }
                Err(refusal) => Transition::Refused(refusal),
            };
            Ok((transition, effects))
        })
        .await
    }

    /// Records an answer given at the computer, sealed by the agent itself, through
    /// [`QuestionRecord::answer_at_host`]: the same rule as a device's (the first valid answer wins), channel
    /// `host` and no device. A retry once the question is answered at the host gets the stored question again;
    /// an answer from a device came first: refused.
    pub(crate) async fn answer_question_at_host(
        &self,
        agent_id: &str,
        question_id: &str,
        answer_envelope: &str,
        answer_copy: Option<&str>,
        now: Timestamp,
    ) -> Result<(Transition<QuestionView>, Effects)> {
        let agent_id = agent_id.to_string();
        let question_id = question_id.to_string();
        let answer_envelope = answer_envelope.to_string();
        let answer_copy = answer_copy.map(str::to_string);
        self.write(move |conn| {
            let mut effects = Effects::default();
            let Some(row) = row_of(conn, &agent_id, &question_id)? else {
                return Ok((Transition::NotFound, effects));
            };
            let answer = Answer {
                by: Answerer::Host,
                envelope: &answer_envelope,
                copy: answer_copy.as_deref(),
            };
            let transition = match store_answer(conn, &agent_id, &row, answer, now, &mut effects)? {
                Ok(stored) => Transition::Done(stored.view(now)?),
                Err(Refusal::AlreadyAnswered) if row.channel()? == Some(Channel::Host) => {
                    Transition::Done(row.view(now)?)
                }
                Err(refusal) => Transition::Refused(refusal),
            };
            Ok((transition, effects))
        })
        .await
    }

    /// Cancels a question through [`QuestionRecord::cancel`]; cancelling a cancelled question is a no-op.
    pub(crate) async fn cancel_question(
        &self,
        agent_id: &str,
        question_id: &str,
        now: Timestamp,
    ) -> Result<(Transition<QuestionView>, Effects)> {
        let (agent_id, question_id) = (agent_id.to_string(), question_id.to_string());
        // A refusal or a second cancel writes nothing: its savepoint is released empty.
        self.write(move |conn| {
            let mut effects = Effects::default();
            let Some(row) = row_of(conn, &agent_id, &question_id)? else {
                return Ok((Transition::NotFound, effects));
            };
            let mut record = row.record()?;
            let was = record.state;
            let outcome = record.cancel(now);
            if was == QuestionState::Pending && record.state == QuestionState::Expired {
                effects.closed = true;
                (effects.event, effects.update) = store_expiry(conn, &row, &record, now)?;
            }
            let transition = match outcome {
                Ok(()) if was == QuestionState::Pending => {
                    conn.prepare_cached(
                        "UPDATE questions SET state = ?2, closed_at = ?3
                             WHERE item_seq = ?1 AND state = 'pending'",
                    )?
                    .execute(params![
                        row.seq,
                        record.state.as_str(),
                        record.closed_at.unwrap_or(now).millis()
                    ])?;
                    effects.closed = true;
                    effects.event = super::webhooks::queue_event(conn, &agent_id, row.seq, CANCELLED, now)?;
                    effects.update = insert_update(conn, &agent_id, row.seq, ItemState::Cancelled, now)?;
                    Transition::Done(row_at(conn, row.seq)?.view(now)?)
                }
                Ok(()) => Transition::Done(row.view(now)?),
                Err(refusal) => Transition::Refused(refusal),
            };
            Ok((transition, effects))
        })
        .await
    }

    /// Moves up to `limit` pending questions past their expiry to `expired` (closed at their expiry) through
    /// [`QuestionRecord::expire_if_due`], queueing each one's `question.expired` event in the same transaction.
    pub(crate) async fn expire_due(&self, now: Timestamp, limit: u32) -> Result<ExpiryPass> {
        // Most passes find nothing: ask a reader before taking the write lock.
        let due: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM questions WHERE state = 'pending' AND expires_at <= ?1)",
        )
        .bind(now.millis())
        .fetch_one(&self.read)
        .await?;
        let mut pass = ExpiryPass::default();
        if !due {
            return Ok(pass);
        }
        self.write(move |conn| {
            let seqs: Vec<i64> = conn
                .prepare_cached(
                    "SELECT item_seq FROM questions WHERE state = 'pending' AND expires_at <= ?1
                     ORDER BY expires_at LIMIT ?2",
                )?
                .query_map(params![now.millis(), i64::from(limit)], |r| r.get(0))?
                .collect::<Result<_, _>>()?;
            pass.more = seqs.len() >= limit as usize;
            for seq in seqs {
                let row = row_at(conn, seq)?;
                let mut record = row.record()?;
                if record.expire_if_due(now) {
                    let (event, update) = store_expiry(conn, &row, &record, now)?;
                    pass.events |= event;
                    pass.updates.extend(update);
                    if !pass.agents.contains(&row.agent_id) {
                        pass.agents.push(row.agent_id.clone());
                    }
                }
            }
            Ok(pass)
        })
        .await
    }

    /// Stores a notification sealed for each device, or finds the one already stored under this id.
    pub(crate) async fn put_notification(
        &self,
        agent_id: &str,
        notification_id: &str,
        envelopes: &[DeviceEnvelope],
        now: Timestamp,
    ) -> Result<ItemPut<Stored>> {
        let (agent_id, notification_id) = (agent_id.to_string(), notification_id.to_string());
        let envelopes = envelopes.to_vec();
        self.write(move |conn| {
            let existing: Option<(i64, i64)> = conn
                .prepare_cached(
                    "SELECT seq, created_at FROM items
                     WHERE agent_id = ?1 AND kind = 'notification' AND item_id = ?2",
                )?
                .query_row(params![agent_id, notification_id], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?;
            if let Some((seq, created_at)) = existing {
                return Ok(ItemPut::Stored(
                    Stored {
                        id: notification_id,
                        cursor: cursor(seq),
                        created_at: ts(created_at),
                        created: false,
                    },
                    false,
                ));
            }
            if let Some(device_id) = inactive_device(conn, &agent_id, &envelopes)? {
                return Ok(ItemPut::UnknownDevice(device_id));
            }
            let seq: i64 = conn
                .prepare_cached(
                    "INSERT INTO items (agent_id, kind, item_id, created_at)
                     VALUES (?1, 'notification', ?2, ?3) RETURNING seq",
                )?
                .query_row(params![agent_id, notification_id, now.millis()], |r| r.get(0))?;
            insert_envelopes(conn, seq, &envelopes)?;
            super::push::enqueue(conn, &agent_id, seq, now)?;
            Ok(ItemPut::Stored(
                Stored {
                    id: notification_id,
                    cursor: cursor(seq),
                    created_at: now,
                    created: true,
                },
                true,
            ))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::suite::questions::{self as suite, events};
    use crate::store::{StateFilter, Store};
    use pacerelle_core::Cursor;

    #[tokio::test]
    async fn migrating_a_version_13_database_gives_its_questions_no_user_and_stores_the_user_of_new_ones() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("v13.db");
        let pool = super::super::tests::database_at(&path, 13).await;
        for sql in [
            "INSERT INTO agents (agent_id, name, auth_hash, created_at) VALUES ('ag_1', 'laptop', x'01', 1)",
            "INSERT INTO devices (device_id, agent_id, name, role, token_hash, created_at)
             VALUES ('dv_1', 'ag_1', 'phone', 'owner', x'00', 1)",
            "INSERT INTO items (agent_id, kind, item_id, envelope, created_at) VALUES ('ag_1', 'question', 'q1', 'SELF', 2)",
            "INSERT INTO item_envelopes (item_seq, device_id, envelope) VALUES (1, 'dv_1', 'Q1')",
            "INSERT INTO questions (item_seq, agent_id, kind, state, expires_at)
             VALUES (1, 'ag_1', 'yes_no', 'pending', 9000000000000)",
        ] {
            sqlx::query(sql).execute(&pool).await.expect(sql);
        }
        pool.close().await;

        let store = SqliteStore::open(&path).await.expect("migrates");
        suite::users_after_migration(&store.as_store()).await;
    }

    #[tokio::test]
    async fn migrating_a_version_12_database_keeps_questions_and_events_and_reads_answers_as_phone() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("v12.db");
        let pool = super::super::tests::database_at(&path, 12).await;
        for sql in [
            "INSERT INTO agents (agent_id, name, auth_hash, created_at) VALUES ('ag_1', 'laptop', x'01', 1)",
            "INSERT INTO devices (device_id, agent_id, name, role, token_hash, created_at)
             VALUES ('dv_1', 'ag_1', 'phone', 'owner', x'00', 1)",
            // seq 1: answered; 2: pending; 3: expired; 4: the update of the answer.
            "INSERT INTO items (agent_id, kind, item_id, envelope, created_at) VALUES ('ag_1', 'question', 'q1', 'SELF', 2)",
            "INSERT INTO items (agent_id, kind, item_id, envelope, created_at) VALUES ('ag_1', 'question', 'q2', 'SELF', 3)",
            "INSERT INTO items (agent_id, kind, item_id, envelope, created_at) VALUES ('ag_1', 'question', 'q3', 'SELF', 4)",
            "INSERT INTO item_envelopes (item_seq, device_id, envelope)
             VALUES (1, 'dv_1', 'Q1'), (2, 'dv_1', 'Q2'), (3, 'dv_1', 'Q3')",
            "INSERT INTO questions (item_seq, agent_id, kind, state, expires_at, closed_at, answered_by,
                                    answered_by_name, answered_at, answer_envelope, answer_copy)
             VALUES (1, 'ag_1', 'yes_no', 'answered', 9000000000000, 5, 'dv_1', 'phone', 5, 'ANS', 'COPY')",
            "INSERT INTO questions (item_seq, agent_id, kind, state, expires_at)
             VALUES (2, 'ag_1', 'text', 'pending', 9000000000000)",
            "INSERT INTO questions (item_seq, agent_id, kind, state, expires_at, closed_at)
             VALUES (3, 'ag_1', 'choice', 'expired', 6, 6)",
            "INSERT INTO items (agent_id, kind, item_id, created_at, subject_seq, update_state)
             VALUES ('ag_1', 'update', 'upd_1', 5, 1, 'answered')",
            "INSERT INTO webhooks (agent_id, url, sealed_secret, updated_at) VALUES ('ag_1', 'https://h.example/', x'01', 1)",
            "INSERT INTO webhook_events (event_id, agent_id, event_type, question_seq, question_id, body, state,
                                         attempts, created_at, delivered_at)
             VALUES ('evt_1', 'ag_1', 'question.answered', 1, 'q1', '{}', 'delivered', 1, 5, 6)",
            "INSERT INTO webhook_events (event_id, agent_id, event_type, question_seq, question_id, body, state,
                                         attempts, created_at, next_attempt_at)
             VALUES ('evt_2', 'ag_1', 'question.expired', 3, 'q3', '{}', 'pending', 0, 6, 6)",
        ] {
            sqlx::query(sql).execute(&pool).await.expect(sql);
        }
        pool.close().await;

        let store = SqliteStore::open(&path).await.expect("migrates");
        let now = Timestamp(10);
        let q1 = store
            .as_store()
            .question("ag_1", "q1", now)
            .await
            .expect("ok")
            .expect("found");
        assert_eq!(q1.state, QuestionState::Answered);
        assert_eq!(q1.channel, Some(Channel::Phone));
        assert_eq!(q1.answered_by.as_deref(), Some("dv_1"));
        assert_eq!(q1.answered_by_name.as_deref(), Some("phone"));
        assert_eq!(q1.answered_at, Some(Timestamp(5)));
        assert_eq!(q1.answer_envelope.as_deref(), Some("ANS"));
        let q2 = store
            .as_store()
            .question("ag_1", "q2", now)
            .await
            .expect("ok")
            .expect("found");
        assert_eq!((q2.state, q2.channel), (QuestionState::Pending, None));
        let q3 = store
            .as_store()
            .question("ag_1", "q3", now)
            .await
            .expect("ok")
            .expect("found");
        assert_eq!(
            (q3.state, q3.closed_at, q3.channel),
            (QuestionState::Expired, Some(Timestamp(6)), None)
        );
        let listed = store
            .as_store()
            .device_questions("ag_1", "dv_1", StateFilter::All, 10, now)
            .await
            .expect("ok");
        let metas: Vec<(&str, Option<Channel>, Option<&str>)> = listed
            .iter()
            .map(|q| {
                (
                    q.question_id.as_str(),
                    q.meta.channel,
                    q.meta.answer_copy.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            metas,
            [
                ("q1", Some(Channel::Phone), Some("COPY")),
                ("q2", None, None),
                ("q3", None, None)
            ]
        );
        let (items, _) = store
            .as_store()
            .conversation("ag_1", "dv_1", Cursor::START, 10, true, now)
            .await
            .expect("reads");
        let update = items.iter().find(|i| i.id == "upd_1").expect("the update");
        assert_eq!(
            update.question.as_ref().and_then(|m| m.channel),
            Some(Channel::Phone)
        );
        assert_eq!(
            events(&Store::Sqlite(store.clone())).await,
            [
                ("q1".to_string(), ANSWERED.to_string()),
                ("q3".to_string(), EXPIRED.to_string())
            ]
        );
        let violations: Vec<(String, i64, String, i64)> = sqlx::query_as("PRAGMA foreign_key_check")
            .fetch_all(&store.read)
            .await
            .expect("checks");
        assert!(violations.is_empty(), "{violations:?}");
        let parent: String = sqlx::query_scalar(
            "SELECT \"table\" FROM pragma_foreign_key_list('webhook_events') WHERE \"from\" = 'question_seq'",
        )
        .fetch_one(&store.read)
        .await
        .expect("a foreign key");
        assert_eq!(parent, "questions");
        let mut indexes: Vec<String> = sqlx::query_scalar(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'questions' AND sql IS NOT NULL",
        )
        .fetch_all(&store.read)
        .await
        .expect("indexes");
        indexes.sort();
        assert_eq!(
            indexes,
            [
                "questions_by_agent",
                "questions_closed_by_age",
                "questions_open_by_agent",
                "questions_pending_by_expiry"
            ]
        );

        // The new rule admits an answer without a device, at the host, and still refuses a second answer.
        let (host, _) = store
            .answer_question_at_host("ag_1", "q2", "HOST", None, Timestamp(11))
            .await
            .expect("ok");
        assert!(matches!(host, Transition::Done(ref v) if v.channel == Some(Channel::Host)));
        let bad = store
            .write(|conn| {
                conn.execute("UPDATE questions SET answered_by = NULL WHERE item_seq = 1", [])?;
                Ok(())
            })
            .await;
        assert!(bad.is_err(), "a phone answer without its device breaks the CHECK");
    }

    #[tokio::test]
    async fn migrating_a_version_1_database_keeps_items_envelopes_and_the_sequence() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("v1.db");
        let pool = super::super::tests::database_at(&path, 1).await;
        for sql in [
            "INSERT INTO agents (agent_id, name, auth_hash, created_at) VALUES ('ag_1', 'laptop', x'01', 1)",
            "INSERT INTO devices (device_id, agent_id, name, role, token_hash, created_at)
             VALUES ('dv_1', 'ag_1', 'phone', 'owner', x'00', 1)",
            "INSERT INTO items (agent_id, kind, item_id, device_id, envelope, created_at, delivered_at)
             VALUES ('ag_1', 'message', 'm1', 'dv_1', 'AQID', 2, 3)",
            "INSERT INTO items (agent_id, kind, item_id, source_message_id, created_at)
             VALUES ('ag_1', 'reply', 'r1', 'm1', 4)",
            "INSERT INTO item_envelopes (item_seq, device_id, envelope) VALUES (2, 'dv_1', 'BAUG')",
            "INSERT INTO items (agent_id, kind, item_id, envelope, created_at) VALUES ('ag_1', 'checkpoint', 'c1', 'AA', 5)",
            // The last item goes: the sequence's high-water mark is now above MAX(seq).
            "DELETE FROM items WHERE item_id = 'c1'",
        ] {
            sqlx::query(sql).execute(&pool).await.expect(sql);
        }
        pool.close().await;

        let store = SqliteStore::open(&path).await.expect("migrates");
        let (items, cursor) = store
            .as_store()
            .conversation("ag_1", "dv_1", Cursor::START, 10, true, Timestamp(10))
            .await
            .expect("reads");
        let kept: Vec<(&str, &str)> = items
            .iter()
            .map(|i| (i.id.as_str(), i.envelope.as_str()))
            .collect();
        assert_eq!(kept, [("m1", "AQID"), ("r1", "BAUG")]);
        assert_eq!(items[0].state, Some(pacerelle_core::wire::ItemState::Delivered));
        assert_eq!(cursor, Cursor(2));
        let violations: Vec<(String, i64, String, i64)> = sqlx::query_as("PRAGMA foreign_key_check")
            .fetch_all(&store.read)
            .await
            .expect("checks");
        assert!(violations.is_empty());
        let parent: String = sqlx::query_scalar(
            "SELECT \"table\" FROM pragma_foreign_key_list('item_envelopes') WHERE \"from\" = 'item_seq'",
        )
        .fetch_one(&store.read)
        .await
        .expect("a foreign key");
        assert_eq!(parent, "items");
        let next = store
            .put_checkpoint("ag_1", "c2", "AA", Timestamp(20))
            .await
            .expect("stores");
        assert_eq!(
            next.cursor,
            Cursor(4),
            "seq 3 was used once and is never given again"
        );
        // The new kinds are admitted.
        store
            .put_notification(
                "ag_1",
                "n1",
                &[DeviceEnvelope {
                    device_id: "dv_1".into(),
                    envelope: "AQID".into(),
                }],
                Timestamp(21),
            )
            .await
            .expect("stores");
    }
}
