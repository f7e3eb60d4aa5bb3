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

use pacerelle_core::question::{Channel, QuestionRecord, QuestionState, Refusal};

use super::prelude::*;
use crate::store::Answerer;
use crate::store::rows::{QuestionRow, corrupt};

// Event types of the webhook outbox.
pub(super) use crate::store::rows::{ANSWERED, CANCELLED, EXPIRED};

/// The question `question_id` (`$2`) of the agent `$1`.
macro_rules! row_of {
    () => {
        concat!(
            "SELECT ",
            question_columns!(),
            " FROM questions q JOIN items i ON i.seq = q.item_seq
             WHERE i.agent_id = $1 AND i.kind = 'question' AND i.item_id = $2"
        )
    };
}

/// Counts a committed write transaction in the store's [`crate::store::WriterCounts`].
fn wrote(store: &PgStore) {
    store.committed();
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
        question_columns!(),
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
        "INSERT INTO questions (item_seq, agent_id, kind, state, expires_at, user_id)
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(seq)
    .bind(agent_id)
    .bind(q.kind.as_str())
    .bind(record.state.as_str())
    .bind(record.expires_at.millis())
    .bind(q.user_id)
    .execute(&mut *conn)
    .await?;
    super::push::enqueue(&mut *conn, agent_id, seq, now).await?;
    let view = row_at(&mut *conn, seq).await?.view(now)?;
    Ok(QuestionPut::Item(Box::new(ItemPut::Stored(view, true))))
}

/// An answer to store: who gives it, sealed for the agent (`envelope`) and with the question's answer key
/// (`copy`).
#[derive(Debug, Clone, Copy)]
struct Answer<'a> {
    by: Answerer<'a>,
    envelope: &'a str,
    copy: Option<&'a str>,
}

/// Records `answer` to the question `row` (locked, under the agent's lock) through the state machine and, when
/// it is accepted, what an answer stores with it: the answered row, its `question.answered` event and its
/// `update` item ([`Effects`]). An answer that meets the question's expiry writes the expiry first
/// ([`store_expiry`]). Returns the row as stored now, or the refusal; the caller decides whether a refusal is a
/// retry of the answer already stored.
async fn store_answer(
    conn: &mut PgConnection,
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
        (effects.event, effects.update) = store_expiry(&mut *conn, row, &record, now).await?;
    }
    if let Err(refusal) = outcome {
        return Ok(Err(refusal));
    }
    let (device_id, channel) = answer.by.device_and_channel();
    let answered_at = record.closed_at.unwrap_or(now);
    let changed = sqlx::query(
        "UPDATE questions SET state = $2, closed_at = $3, answered_by = $4,
                answered_by_name = (SELECT name FROM devices WHERE device_id = $4),
                answered_at = $3, answer_envelope = $5, answer_copy = $6, channel = $7
         WHERE item_seq = $1 AND state = 'pending'",
    )
    .bind(row.seq)
    .bind(record.state.as_str())
    .bind(answered_at.millis())
    .bind(device_id)
    .bind(answer.envelope)
    .bind(answer.copy)
    .bind(channel.as_str())
    .execute(&mut *conn)
    .await?
    .rows_affected();
    if changed == 0 {
        // Cannot happen under the agent's lock and the row's; refuse rather than report an answer not stored.
        return Err(corrupt("a pending question changed under its write lock".into()));
    }
    effects.closed = true;
    effects.event = super::webhooks::queue_event(&mut *conn, agent_id, row.seq, ANSWERED, now).await?;
    effects.update =
        super::updates::insert_update(&mut *conn, agent_id, row.seq, ItemState::Answered, now).await?;
    Ok(Ok(row_at(&mut *conn, row.seq).await?))
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
    let answer = Answer {
        by: Answerer::Device(device_id),
        envelope: answer_envelope,
        copy: answer_copy,
    };
    let transition = match store_answer(&mut *conn, agent_id, &row, answer, now, &mut effects).await? {
        Ok(stored) => Transition::Done(stored.device_question(device_envelope, now)?),
        Err(Refusal::AlreadyAnswered) if row.answered_by.as_deref() == Some(device_id) => {
            Transition::Done(row.device_question(device_envelope, now)?)
        }
        Err(refusal) => Transition::Refused(refusal),
    };
    Ok((transition, effects))
}

/// The body of [`PgStore::answer_question_at_host`], in its transaction.
async fn answer_at_host_in(
    conn: &mut PgConnection,
    agent_id: &str,
    question_id: &str,
    answer_envelope: &str,
    answer_copy: Option<&str>,
    now: Timestamp,
) -> Result<(Transition<QuestionView>, Effects)> {
    let mut effects = Effects::default();
    super::lock_agent(&mut *conn, agent_id).await?;
    let Some(row) = row_of_locked(&mut *conn, agent_id, question_id).await? else {
        return Ok((Transition::NotFound, effects));
    };
    let answer = Answer {
        by: Answerer::Host,
        envelope: answer_envelope,
        copy: answer_copy,
    };
    let transition = match store_answer(&mut *conn, agent_id, &row, answer, now, &mut effects).await? {
        Ok(stored) => Transition::Done(stored.view(now)?),
        Err(Refusal::AlreadyAnswered) if row.channel()? == Some(Channel::Host) => {
            Transition::Done(row.view(now)?)
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
        let mut tx = self.pool.begin().await?;
        let outcome =
            answer_at_host_in(&mut tx, agent_id, question_id, answer_envelope, answer_copy, now).await?;
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

#[cfg(test)]
pub(super) mod tests {
    //! What only PostgreSQL has — its migrations, concurrent writers, two instances — on a fresh database of
    //! the test cluster when `PACERELLE_TEST_POSTGRES` asks for one (`start` or a `postgres://` URL), passing
    //! with a word that it was skipped otherwise. The tests both backends share are in `crate::store::suite`.

    use std::sync::Arc;

    use pacerelle_test_support::postgres::Cluster;

    use super::*;
    use crate::store::suite::Backend;
    use crate::store::suite::questions::{self as suite, ask, ask_ready, envelopes, events};
    use crate::store::{LogQuery, StateFilter, Store};

    /// The tests' "now".
    pub(in super::super) const T0: i64 = 1_800_000_000_000;

    /// A new, empty database of the test cluster, or `None` (said on stdout) when no cluster is asked for.
    pub(in super::super) async fn database() -> Option<String> {
        let Some(cluster) = Cluster::shared() else {
            println!("skipped: PACERELLE_TEST_POSTGRES=off");
            return None;
        };
        Some(cluster.fresh_database().await)
    }

    /// A store on `url` with its webhook key in `dir`.
    pub(in super::super) async fn open(url: &str, dir: &tempfile::TempDir) -> PgStore {
        PgStore::open(url, dir.path()).await.expect("opens")
    }

    /// The setup of [`ask_ready`] (agent `ag_1` with devices `dv_1` and `dv_2`, and a webhook) on a fresh
    /// database; also its URL and the suite's backend holding its folder, so that a second store (another relay
    /// instance) can open the same database with the same key.
    pub(in super::super) async fn store() -> Option<(PgStore, String, Backend)> {
        let url = database().await?;
        let backend = Backend::postgres(url.clone()).await;
        ask_ready(&backend).await;
        Some((backend.pg().clone(), url, backend))
    }

    /// [`put`] at [`T0`] on this store.
    async fn put(store: &PgStore, id: &str, expires_at: i64, max_open: u32) -> QuestionPut {
        suite::put(&Store::Postgres(store.clone()), id, T0, expires_at, max_open).await
    }

    #[tokio::test]
    async fn migrating_a_version_3_database_gives_its_questions_no_user_and_stores_the_user_of_new_ones() {
        let Some(url) = database().await else {
            return;
        };
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(1)
            .connect(&url)
            .await
            .expect("connects");
        super::super::MIGRATOR.run_to(3, &pool).await.expect("migrated");
        for sql in [
            "INSERT INTO agents (agent_id, name, auth_hash, created_at) VALUES ('ag_1', 'laptop', '\\x01', 1)",
            "INSERT INTO devices (device_id, agent_id, name, role, token_hash, created_at)
             VALUES ('dv_1', 'ag_1', 'phone', 'owner', '\\x00', 1)",
            // The first of the sequence: seq 1.
            "INSERT INTO items (agent_id, kind, item_id, envelope, created_at)
             VALUES ('ag_1', 'question', 'q1', 'SELF', 2)",
            "INSERT INTO item_envelopes (item_seq, device_id, envelope) VALUES (1, 'dv_1', 'Q1')",
            "INSERT INTO questions (item_seq, agent_id, kind, state, expires_at)
             VALUES (1, 'ag_1', 'yes_no', 'pending', 9000000000000)",
        ] {
            sqlx::query(sql).execute(&pool).await.expect(sql);
        }
        pool.close().await;

        let dir = tempfile::tempdir().expect("a temporary directory");
        let store = open(&url, &dir).await;
        suite::users_after_migration(&store.as_store()).await;
    }

    #[tokio::test]
    async fn migrating_a_version_2_database_reads_its_answers_as_phone_and_admits_answers_at_the_host() {
        let Some(url) = database().await else {
            return;
        };
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(1)
            .connect(&url)
            .await
            .expect("connects");
        super::super::MIGRATOR.run_to(2, &pool).await.expect("migrated");
        for sql in [
            "INSERT INTO agents (agent_id, name, auth_hash, created_at) VALUES ('ag_1', 'laptop', '\\x01', 1)",
            "INSERT INTO devices (device_id, agent_id, name, role, token_hash, created_at)
             VALUES ('dv_1', 'ag_1', 'phone', 'owner', '\\x00', 1)",
            "INSERT INTO items (seq, agent_id, kind, item_id, envelope, created_at)
             VALUES (1, 'ag_1', 'question', 'q1', 'SELF', 2), (2, 'ag_1', 'question', 'q2', 'SELF', 3)",
            "INSERT INTO item_envelopes (item_seq, device_id, envelope) VALUES (1, 'dv_1', 'Q1'), (2, 'dv_1', 'Q2')",
            "INSERT INTO questions (item_seq, agent_id, kind, state, expires_at, closed_at, answered_by,
                                    answered_by_name, answered_at, answer_envelope, answer_copy)
             VALUES (1, 'ag_1', 'yes_no', 'answered', 9000000000000, 5, 'dv_1', 'phone', 5, 'ANS', 'COPY')",
            "INSERT INTO questions (item_seq, agent_id, kind, state, expires_at)
             VALUES (2, 'ag_1', 'text', 'pending', 9000000000000)",
        ] {
            sqlx::query(sql).execute(&pool).await.expect(sql);
        }
        pool.close().await;

        let dir = tempfile::tempdir().expect("a temporary directory");
        let store = open(&url, &dir).await;
        let now = Timestamp(10);
        let q1 = store
            .as_store()
            .question("ag_1", "q1", now)
            .await
            .expect("ok")
            .expect("found");
        assert_eq!(
            (q1.state, q1.channel),
            (QuestionState::Answered, Some(Channel::Phone))
        );
        assert_eq!(q1.answered_by.as_deref(), Some("dv_1"));
        let stored: Option<String> = sqlx::query_scalar("SELECT channel FROM questions WHERE item_seq = 1")
            .fetch_one(&store.pool)
            .await
            .expect("a row");
        assert_eq!(stored.as_deref(), Some("phone"));
        let q2 = store
            .as_store()
            .question("ag_1", "q2", now)
            .await
            .expect("ok")
            .expect("found");
        assert_eq!((q2.state, q2.channel), (QuestionState::Pending, None));

        // The new rule: an answer at the host has no device; a phone answer keeps its device.
        sqlx::query(
            "UPDATE questions SET state = 'answered', closed_at = 11, answered_at = 11, answer_envelope = 'HOST',
                                  channel = 'host'
             WHERE item_seq = 2",
        )
        .execute(&store.pool)
        .await
        .expect("an answer at the host is admitted");
        let q2 = store
            .as_store()
            .question("ag_1", "q2", now)
            .await
            .expect("ok")
            .expect("found");
        assert_eq!((q2.channel, q2.answered_by), (Some(Channel::Host), None));
        let refused = sqlx::query("UPDATE questions SET answered_by = NULL WHERE item_seq = 1")
            .execute(&store.pool)
            .await;
        assert!(
            refused.is_err(),
            "a phone answer without its device breaks the check"
        );
        let refused = sqlx::query("UPDATE questions SET channel = NULL WHERE item_seq = 2")
            .execute(&store.pool)
            .await;
        assert!(refused.is_err(), "an answer without a channel breaks the check");
    }

    #[tokio::test]
    async fn a_retried_put_finds_the_question_and_a_revoked_device_is_refused() {
        let Some((store, _url, _dir)) = store().await else {
            return;
        };
        ask(&Store::Postgres(store.clone()), "q4", T0, T0 + 60_000).await;
        let again = put(&store, "q4", T0 + 1, u32::MAX).await;
        let QuestionPut::Item(item) = again else {
            panic!("stored")
        };
        let ItemPut::Stored(view, false) = *item else {
            panic!("found, not stored again")
        };
        assert_eq!(view.expires_at, Timestamp(T0 + 60_000), "the first one's");
        sqlx::query("UPDATE devices SET revoked_at = $1 WHERE device_id = 'dv_2'")
            .bind(T0)
            .execute(&store.pool)
            .await
            .expect("revoked");
        let refused = put(&store, "q5", T0 + 60_000, u32::MAX).await;
        assert!(
            matches!(refused, QuestionPut::Item(item) if matches!(*item, ItemPut::UnknownDevice(ref d) if d == "dv_2"))
        );
        let note = store
            .put_notification("ag_1", "n1", &envelopes()[..1], Timestamp(T0 + 2))
            .await
            .expect("ok");
        let ItemPut::Stored(first, true) = note else {
            panic!("stored")
        };
        let again = store
            .put_notification("ag_1", "n1", &envelopes()[..1], Timestamp(T0 + 3))
            .await
            .expect("ok");
        let ItemPut::Stored(second, false) = again else {
            panic!("found")
        };
        assert_eq!(
            (second.cursor, second.created_at),
            (first.cursor, Timestamp(T0 + 2))
        );
        assert!(matches!(
            store.put_notification("ag_1", "n2", &envelopes(), Timestamp(T0 + 4)).await.expect("ok"),
            ItemPut::UnknownDevice(ref d) if d == "dv_2"
        ));
    }

    #[tokio::test]
    async fn listings_filter_by_the_state_at_the_time_of_the_read_and_page_newest_first() {
        let Some((store, _url, _dir)) = store().await else {
            return;
        };
        for (id, expires) in [("a", T0 + 1000), ("b", T0 + 60_000), ("c", T0 + 60_000)] {
            ask(&Store::Postgres(store.clone()), id, T0, expires).await;
        }
        store
            .cancel_question("ag_1", "c", Timestamp(T0 + 5))
            .await
            .expect("ok");
        let now = Timestamp(T0 + 2000);
        let ids = |qs: Vec<DeviceQuestion>| qs.into_iter().map(|q| q.question_id).collect::<Vec<_>>();
        let all = store
            .as_store()
            .device_questions("ag_1", "dv_1", StateFilter::All, 10, now)
            .await
            .expect("ok");
        assert_eq!(ids(all), ["a", "b", "c"], "oldest first");
        let expired = store
            .as_store()
            .device_questions("ag_1", "dv_1", StateFilter::Only(QuestionState::Expired), 10, now)
            .await
            .expect("ok");
        assert_eq!(ids(expired), ["a"], "expired by the clock, not yet swept");
        let pending = store
            .as_store()
            .device_questions("ag_1", "dv_2", StateFilter::Only(QuestionState::Pending), 10, now)
            .await
            .expect("ok");
        assert_eq!(ids(pending), ["b"]);
        let last_two = store
            .as_store()
            .device_questions("ag_1", "dv_1", StateFilter::All, 2, now)
            .await
            .expect("ok");
        assert_eq!(ids(last_two), ["b", "c"], "the most recent, oldest first");

        let mut query = LogQuery {
            state: StateFilter::All,
            since: None,
            until: None,
            before: None,
            limit: 2,
        };
        let page = store
            .as_store()
            .answer_log("ag_1", &query, now)
            .await
            .expect("ok");
        let names: Vec<&str> = page.questions.iter().map(|q| q.question_id.as_str()).collect();
        assert_eq!(names, ["c", "b"]);
        query.before = page.next;
        let page = store
            .as_store()
            .answer_log("ag_1", &query, now)
            .await
            .expect("ok");
        let names: Vec<&str> = page.questions.iter().map(|q| q.question_id.as_str()).collect();
        assert_eq!((names, page.next), (vec!["a"], None));
        query.before = None;
        query.state = StateFilter::Only(QuestionState::Cancelled);
        query.since = Some(Timestamp(T0));
        query.until = Some(Timestamp(T0 + 1));
        let page = store
            .as_store()
            .answer_log("ag_1", &query, now)
            .await
            .expect("ok");
        assert_eq!(page.questions.len(), 1);
        assert_eq!(page.questions[0].state, QuestionState::Cancelled);
        query.since = Some(Timestamp(T0 + 1));
        assert!(
            store
                .as_store()
                .answer_log("ag_1", &query, now)
                .await
                .expect("ok")
                .questions
                .is_empty()
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_puts_never_pass_the_quota_of_open_questions() {
        let Some((store, _url, _dir)) = store().await else {
            return;
        };
        warm(&store).await;
        let puts = (0..12).map(|i| {
            let store = store.clone();
            tokio::spawn(async move { put(&store, &format!("q{i}"), T0 + 60_000, 3).await })
        });
        let mut stored = 0;
        let mut refused = 0;
        for put in futures_join(puts).await {
            match put {
                QuestionPut::QuotaExceeded => refused += 1,
                QuestionPut::Item(item) if matches!(*item, ItemPut::Stored(_, true)) => stored += 1,
                QuestionPut::Item(other) => panic!("{other:?}"),
            }
        }
        assert_eq!((stored, refused), (3, 9));
        // The same id stored at once by several: one stores it, the others find it.
        let puts = (0..8).map(|_| {
            let store = store.clone();
            tokio::spawn(async move { put(&store, "same", T0 + 60_000, u32::MAX).await })
        });
        let created = futures_join(puts)
            .await
            .into_iter()
            .filter(|p| matches!(p, QuestionPut::Item(item) if matches!(**item, ItemPut::Stored(_, true))))
            .count();
        assert_eq!(created, 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_answers_and_cancels_close_a_question_once() {
        let Some((store, _url, _dir)) = store().await else {
            return;
        };
        warm(&store).await;
        for round in 0..10 {
            let id = format!("r{round}");
            ask(&Store::Postgres(store.clone()), &id, T0, T0 + 60_000).await;
            let mut tasks = Vec::new();
            for (i, device) in ["dv_1", "dv_2", "dv_1", "dv_2"].into_iter().enumerate() {
                let (store, id) = (store.clone(), id.clone());
                tasks.push(tokio::spawn(async move {
                    let (t, e) = store
                        .answer_question("ag_1", device, &id, "AQID", None, Timestamp(T0 + 10 + i as i64))
                        .await
                        .expect("ok");
                    (matches!(t, Transition::Done(_)), e.closed, e.event)
                }));
            }
            let (store2, id2) = (store.clone(), id.clone());
            tasks.push(tokio::spawn(async move {
                let (t, e) = store2
                    .cancel_question("ag_1", &id2, Timestamp(T0 + 10))
                    .await
                    .expect("ok");
                (matches!(t, Transition::Done(_)), e.closed, e.event)
            }));
            let outcomes = futures_join(tasks).await;
            let closings = outcomes.iter().filter(|(_, closed, _)| *closed).count();
            let events_queued = outcomes.iter().filter(|(_, _, event)| *event).count();
            assert_eq!((closings, events_queued), (1, 1), "round {round}: {outcomes:?}");
        }
        assert_eq!(events(&Store::Postgres(store.clone())).await.len(), 10);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn two_instances_expiring_at_once_expire_each_question_once() {
        let Some((store, url, backend)) = store().await else {
            return;
        };
        for i in 0..60 {
            ask(
                &Store::Postgres(store.clone()),
                &format!("e{i}"),
                T0,
                T0 + 1000 + i,
            )
            .await;
        }
        let other = Arc::new(open(&url, backend.dir()).await);
        let now = Timestamp(T0 + 5000);
        // Two instances' expirers, and answers racing them; each expirer pass holds 7 questions at most.
        let mut tasks = Vec::new();
        for instance in [Arc::new(store.clone()), other.clone()] {
            tasks.push(tokio::spawn(async move {
                let mut updates = Vec::new();
                loop {
                    let pass = instance.expire_due(now, 7).await.expect("a pass");
                    updates.extend(pass.updates.into_iter().map(|u| u.subject_id));
                    if !pass.more && instance.as_store().next_expiry().await.expect("ok").is_none() {
                        return updates;
                    }
                    tokio::task::yield_now().await;
                }
            }));
        }
        let answers: Vec<_> = (0..60)
            .step_by(3)
            .map(|i| {
                let store = store.clone();
                tokio::spawn(async move {
                    let (_, e) = store
                        .answer_question("ag_1", "dv_1", &format!("e{i}"), "AQID", None, now)
                        .await
                        .expect("ok");
                    e.update.map(|u| u.subject_id).into_iter().collect::<Vec<_>>()
                })
            })
            .collect();
        let mut expired: Vec<String> = futures_join(tasks).await.into_iter().flatten().collect();
        expired.extend(futures_join(answers).await.into_iter().flatten());
        expired.sort();
        let mut expected: Vec<String> = (0..60).map(|i| format!("e{i}")).collect();
        expected.sort();
        assert_eq!(expired, expected, "each question's expiry stored once");
        assert_eq!(events(&Store::Postgres(store.clone())).await.len(), 60);
        let pending: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM questions WHERE state = 'pending'")
            .fetch_one(&store.pool)
            .await
            .expect("count");
        assert_eq!(pending, 0);
    }

    /// Opens every connection of the store's pool, so that concurrent calls run at once rather than one after
    /// the other while connections are being made.
    pub(in super::super) async fn warm(store: &PgStore) {
        let sleeps = (0..super::super::CONNECTIONS).map(|_| {
            let pool = store.pool.clone();
            tokio::spawn(async move {
                sqlx::query("SELECT pg_sleep(0.05)")
                    .execute(&pool)
                    .await
                    .expect("a connection")
            })
        });
        futures_join(sleeps).await;
    }

    /// Awaits tasks, in order, spawning them all first.
    pub(in super::super) async fn futures_join<T>(
        tasks: impl IntoIterator<Item = tokio::task::JoinHandle<T>>,
    ) -> Vec<T> {
        // Spawned all before the first is awaited (a lazy iterator would spawn one after the other).
        let tasks: Vec<_> = tasks.into_iter().collect();
        let mut out = Vec::new();
        for task in tasks {
            out.push(task.await.expect("the task ran"));
        }
        out
    }
}
