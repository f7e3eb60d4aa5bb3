//! Questions, notifications and the expiry of questions, written once for both backends.
//!
//! Every transition goes through [`QuestionRecord`] inside one write transaction: the record is rebuilt from the
//! row, the state machine decides, and the row is updated only from `pending` (`WHERE state = 'pending'`). A
//! question that the clock has expired is written `expired` by whichever write meets it first (an answer, a
//! cancel, the expirer), in the same transaction as its `question.expired` webhook event and its `update` item,
//! so each is stored exactly once. Reads never write: they show the state [`QuestionRecord::state_at`] gives.
//!
//! The steps run on a [`QuestionTx`], which each backend implements with its SQL and its driver: SQLite on the
//! writer's connection (one writer, so its agent locks are always free), PostgreSQL in a transaction of its own
//! (ADR 0003), where the locks matter:
//!
//! - every write first locks the agent ([`QuestionTx::lock_agent`]): an answer, a cancel and the expirer never
//!   decide on one question at once, and the quota count of a new question sees every question stored before it;
//! - the expirer claims due questions so that another instance's pass skips them, then takes each one's agent
//!   lock only if it is free ([`QuestionTx::try_lock_agent`]): it never waits for a lock while it holds one, so
//!   it cannot deadlock with an answer (which holds the agent and waits for the question); a question whose
//!   agent is busy is left to the next pass, or to the write holding the lock if that write meets the expiry;
//! - the devices an item is sealed for are read so that a revocation under way finishes first (and the device
//!   is then refused), or waits until the item is stored.
//!
//! [`QuestionRecord::state_at`]: pacerelle_core::question::QuestionRecord::state_at

use std::collections::HashMap;

use pacerelle_core::question::{Channel, QuestionRecord, QuestionState, Refusal};
use pacerelle_core::wire::{DeviceEnvelope, DeviceQuestion, ItemState, QuestionView, Stored, WebhookEvent};
use pacerelle_core::{Timestamp, ids};

use super::rows::{ANSWERED, CANCELLED, DROPPED, EXPIRED, QuestionRow, corrupt};
use super::{
    Answerer, Effects, ExpiryPass, ItemPut, NewQuestion, NewUpdate, QuestionPut, Result, Store, Transition,
    cursor, ts,
};
use crate::error::StoreError;

/// The steps of the question writes, inside one write transaction of a backend.
pub(in crate::store) trait QuestionTx {
    /// Takes the agent's write lock until the transaction ends.
    async fn lock_agent(&mut self, agent_id: &str) -> Result<()>;
    /// Takes the agent's write lock if no other transaction holds it now; whether it was taken.
    async fn try_lock_agent(&mut self, agent_id: &str) -> Result<bool>;
    /// The question `question_id` of this agent, its row locked until the transaction ends.
    async fn question(&mut self, agent_id: &str, question_id: &str) -> Result<Option<QuestionRow>>;
    /// The question stored at `seq`.
    async fn question_at(&mut self, seq: i64) -> Result<QuestionRow>;
    /// The envelope of item `seq` sealed for this device, if it is one of the item's recipients.
    async fn sealed_for(&mut self, seq: i64, device_id: &str) -> Result<Option<String>>;
    /// Whether this is an active device of the agent; its row is kept from a revocation until the end.
    async fn device_active(&mut self, agent_id: &str, device_id: &str) -> Result<bool>;
    /// The agent's open questions at `now` (pending, expiry still ahead), counted up to `cap` at most.
    async fn open_questions(&mut self, agent_id: &str, cap: u32, now: Timestamp) -> Result<i64>;
    /// The sequence number and time of the notification stored under this id.
    async fn notification(&mut self, agent_id: &str, id: &str) -> Result<Option<(i64, i64)>>;
    /// Stores an item; its sequence number.
    async fn insert_item(&mut self, item: &NewItem<'_>) -> Result<i64>;
    /// Stores the envelope of item `seq` sealed for each device.
    async fn insert_envelopes(&mut self, seq: i64, envelopes: &[DeviceEnvelope]) -> Result<()>;
    /// Stores the question row of item `seq`, as `record` starts it.
    async fn insert_question(&mut self, seq: i64, row: &NewQuestionRow<'_>) -> Result<()>;
    /// Queues the pushes of item `seq` to its recipients' subscriptions; how many.
    async fn enqueue_push(&mut self, agent_id: &str, seq: i64, now: Timestamp) -> Result<u64>;
    /// Closes the pending question `seq` in `state` at `closed_at`; how many rows changed (0 or 1).
    async fn close(&mut self, seq: i64, state: QuestionState, closed_at: Timestamp) -> Result<u64>;
    /// Stores the answer of the pending question `seq`; how many rows changed (0 or 1).
    async fn store_answer(&mut self, seq: i64, answer: &AnswerRow<'_>) -> Result<u64>;
    /// Whether device `device_id` has an answer kept for the question at `seq` (several approvals).
    async fn has_answer(&mut self, seq: i64, device_id: &str) -> Result<bool>;
    /// Keeps a device's answer to the question at `seq` (its first only); returns how many are kept.
    async fn keep_answer(&mut self, seq: i64, answer: &KeptAnswer<'_>) -> Result<i64>;
    /// Whether the agent has a webhook now; its row is kept from a removal until the end.
    async fn has_webhook(&mut self, agent_id: &str) -> Result<bool>;
    /// Stores a webhook event; whether it was stored (there is at most one of each type per question).
    async fn insert_event(&mut self, event: &QueuedEvent<'_>) -> Result<bool>;
    /// The agent's pending webhook events, and the outbox cap (`--max-pending-events`) if one is set.
    async fn outbox(&mut self, agent_id: &str) -> Result<(i64, Option<i64>)>;
    /// Fails the agent's `count` oldest pending events with `error`; how many.
    async fn drop_oldest(&mut self, agent_id: &str, count: i64, error: &str) -> Result<u64>;
    /// Stores the `update` item saying the question `row` is now in state `to`.
    async fn update(&mut self, row: &QuestionRow, to: ItemState, now: Timestamp) -> Result<StoredUpdate>;
    /// Up to `limit` pending questions past their expiry, the most overdue first, with their agents: claimed,
    /// so that another instance's pass skips them.
    async fn due_questions(&mut self, now: Timestamp, limit: u32) -> Result<Vec<(i64, String)>>;
}

/// What [`QuestionTx::update`] stored, if anything.
pub(in crate::store) type StoredUpdate = Option<NewUpdate>;

/// An item to store: a question (with the envelope sealed for the agent itself) or a notification.
pub(in crate::store) struct NewItem<'a> {
    pub agent_id: &'a str,
    /// `question` or `notification`.
    pub kind: &'static str,
    pub item_id: &'a str,
    pub envelope: Option<&'a str>,
    pub created_at: Timestamp,
}

/// A question's row as it starts.
pub(in crate::store) struct NewQuestionRow<'a> {
    pub agent_id: &'a str,
    pub kind: &'static str,
    pub state: &'static str,
    pub expires_at: Timestamp,
    pub user_id: Option<&'a str>,
    pub approvals: i64,
}

/// One device's answer kept for a question that needs several approvals.
pub(in crate::store) struct KeptAnswer<'a> {
    pub device_id: &'a str,
    pub answered_at: Timestamp,
    pub envelope: &'a str,
    pub copy: Option<&'a str>,
}

/// A webhook event to store: its body is the question as it stands in the transaction, frozen.
pub(in crate::store) struct QueuedEvent<'a> {
    pub event_id: &'a str,
    pub agent_id: &'a str,
    pub event_type: &'a str,
    pub question_seq: i64,
    pub question_id: &'a str,
    pub body: &'a str,
    pub created_at: Timestamp,
}

/// An answer as stored: the state it moves the question to, when, by which device (none at the host), the
/// answer sealed for the agent and with the question's answer key, and its channel.
pub(in crate::store) struct AnswerRow<'a> {
    pub state: &'static str,
    pub answered_at: Timestamp,
    pub device_id: Option<&'a str>,
    pub envelope: &'a str,
    pub copy: Option<&'a str>,
    pub channel: &'static str,
}

/// An answer to store: who gives it, sealed for the agent (`envelope`) and with the question's answer key
/// (`copy`).
#[derive(Debug, Clone, Copy)]
struct Answer<'a> {
    by: Answerer<'a>,
    envelope: &'a str,
    copy: Option<&'a str>,
    /// For a question that needs several approvals: this answer closes it whatever the count.
    closes: bool,
}

/// Prefix of event ids.
const EVENT: &str = "evt";

/// Queues an `event_type` event for the question at `seq` if the agent has a webhook now. The body is the
/// question as it stands in this transaction, frozen: every attempt sends the same bytes. At most one event
/// of each type per question. When the agent then has more pending events than the outbox cap, the oldest
/// are failed with an error beginning [`DROPPED`], in this transaction too, so that the cap holds at every
/// commit. Returns whether an event was queued.
async fn queue_event<T: QuestionTx>(
    tx: &mut T,
    agent_id: &str,
    seq: i64,
    event_type: &str,
    now: Timestamp,
) -> Result<bool> {
    if !tx.has_webhook(agent_id).await? {
        return Ok(false);
    }
    let question = tx.question_at(seq).await?.view(now)?;
    let event = WebhookEvent {
        id: ids::generate(EVENT),
        event_type: event_type.to_string(),
        created_at: now,
        agent_id: agent_id.to_string(),
        user_id: question.user_id.clone(),
        question,
    };
    let body = serde_json::to_string(&event).map_err(|e| StoreError::Internal(Box::new(e)))?;
    let queued = QueuedEvent {
        event_id: &event.id,
        agent_id,
        event_type,
        question_seq: seq,
        question_id: &event.question.question_id,
        body: &body,
        created_at: now,
    };
    if !tx.insert_event(&queued).await? {
        return Ok(false);
    }
    let (pending, cap) = tx.outbox(agent_id).await?;
    let excess = cap.map_or(0, |cap| pending.saturating_sub(cap));
    if let (Some(cap), true) = (cap, excess > 0) {
        let error = format!(
            "{DROPPED} the agent's outbox is full ({cap} pending events at most, the relay's \
             --max-pending-events): the oldest are dropped so the newest get through"
        );
        let dropped = tx.drop_oldest(agent_id, excess, &error).await?;
        tracing::warn!(agent = %agent_id, dropped, cap, "webhook outbox full: the oldest pending events dropped");
    }
    Ok(true)
}

/// Writes the expiry `record` reached (it must have moved from pending to expired in this transaction), queues
/// its event and stores its `update` item. Returns whether an event was queued, and the update. The caller
/// holds the agent's lock.
async fn store_expiry<T: QuestionTx>(
    tx: &mut T,
    row: &QuestionRow,
    record: &QuestionRecord,
    now: Timestamp,
) -> Result<(bool, StoredUpdate)> {
    let closed_at = record.closed_at.unwrap_or(record.expires_at);
    if tx.close(row.seq, QuestionState::Expired, closed_at).await? == 0 {
        return Ok((false, None));
    }
    let event = queue_event(tx, &row.agent_id, row.seq, EXPIRED, now).await?;
    let update = tx.update(row, ItemState::Expired, now).await?;
    Ok((event, update))
}

/// Writes the expiry of `record` if the transition that moved it from `was` met the question's expiry.
async fn expired_on_the_way<T: QuestionTx>(
    tx: &mut T,
    row: &QuestionRow,
    was: QuestionState,
    record: &QuestionRecord,
    now: Timestamp,
    effects: &mut Effects,
) -> Result<()> {
    if was == QuestionState::Pending && record.state == QuestionState::Expired {
        effects.closed = true;
        (effects.event, effects.update) = store_expiry(tx, row, record, now).await?;
    }
    Ok(())
}

/// Records `answer` to the question `row` (locked, under the agent's lock) through the state machine and, when
/// it is accepted, what an answer stores with it: the answered row, its `question.answered` event and its
/// `update` item ([`Effects`]). An answer that meets the question's expiry writes the expiry first
/// ([`store_expiry`]). Returns the row as stored now, or the refusal; the caller decides whether a refusal is a
/// retry of the answer already stored.
async fn store_answer<T: QuestionTx>(
    tx: &mut T,
    row: &QuestionRow,
    answer: Answer<'_>,
    now: Timestamp,
    effects: &mut Effects,
) -> Result<Result<QuestionRow, Refusal>> {
    let mut record = row.record()?;
    let was = record.state;
    let outcome = answer.by.answer(&mut record, now);
    expired_on_the_way(tx, row, was, &record, now, effects).await?;
    if let Err(refusal) = outcome {
        return Ok(Err(refusal));
    }
    let (device_id, channel) = answer.by.device_and_channel();
    let stored = AnswerRow {
        state: record.state.as_str(),
        answered_at: record.closed_at.unwrap_or(now),
        device_id,
        envelope: answer.envelope,
        copy: answer.copy,
        channel: channel.as_str(),
    };
    if tx.store_answer(row.seq, &stored).await? == 0 {
        // Cannot happen under the agent's lock; refuse rather than report an answer not stored.
        return Err(corrupt("a pending question changed under its write lock".into()));
    }
    effects.closed = true;
    effects.event = queue_event(tx, &row.agent_id, row.seq, ANSWERED, now).await?;
    effects.update = tx.update(row, ItemState::Answered, now).await?;
    Ok(Ok(tx.question_at(row.seq).await?))
}

/// The first device that is not an active device of this agent, if any.
async fn inactive_device<T: QuestionTx>(
    tx: &mut T,
    agent_id: &str,
    envelopes: &[DeviceEnvelope],
) -> Result<Option<String>> {
    for e in envelopes {
        if !tx.device_active(agent_id, &e.device_id).await? {
            return Ok(Some(e.device_id.clone()));
        }
    }
    Ok(None)
}

/// See [`Store::put_question`].
async fn put_question<T: QuestionTx>(
    tx: &mut T,
    agent_id: &str,
    q: &NewQuestion<'_>,
    max_open: u32,
    now: Timestamp,
) -> Result<QuestionPut> {
    tx.lock_agent(agent_id).await?;
    if let Some(row) = tx.question(agent_id, q.question_id).await? {
        return Ok(QuestionPut::Item(Box::new(ItemPut::Stored(
            row.view(now)?,
            false,
        ))));
    }
    if let Some(device_id) = inactive_device(tx, agent_id, q.envelopes).await? {
        return Ok(QuestionPut::Item(Box::new(ItemPut::UnknownDevice(device_id))));
    }
    if tx.open_questions(agent_id, max_open, now).await? >= i64::from(max_open) {
        return Ok(QuestionPut::QuotaExceeded);
    }
    let item = NewItem {
        agent_id,
        kind: "question",
        item_id: q.question_id,
        envelope: Some(q.self_envelope),
        created_at: now,
    };
    let seq = tx.insert_item(&item).await?;
    tx.insert_envelopes(seq, q.envelopes).await?;
    let record = QuestionRecord::new(q.expires_at);
    let row = NewQuestionRow {
        agent_id,
        kind: q.kind.as_str(),
        state: record.state.as_str(),
        expires_at: record.expires_at,
        user_id: q.user_id,
        approvals: i64::from(q.approvals),
    };
    tx.insert_question(seq, &row).await?;
    tx.enqueue_push(agent_id, seq, now).await?;
    let view = tx.question_at(seq).await?.view(now)?;
    Ok(QuestionPut::Item(Box::new(ItemPut::Stored(view, true))))
}

/// See [`Store::answer_question`].
async fn answer<T: QuestionTx>(
    tx: &mut T,
    agent_id: &str,
    device_id: &str,
    question_id: &str,
    answer: Answer<'_>,
    now: Timestamp,
) -> Result<(Transition<DeviceQuestion>, Effects)> {
    let mut effects = Effects::default();
    tx.lock_agent(agent_id).await?;
    let Some(row) = tx.question(agent_id, question_id).await? else {
        return Ok((Transition::NotFound, effects));
    };
    let Some(device_envelope) = tx.sealed_for(row.seq, device_id).await? else {
        return Ok((Transition::NotFound, effects));
    };
    // Several approvals: each device's first answer is kept while the question is pending; it stays pending
    // until that many devices answered, or an answer closes it (its device says so: a no).
    let several = row.approvals > 1;
    if several && row.record_at(now)?.state == QuestionState::Pending {
        let answered_here = tx.has_answer(row.seq, device_id).await?;
        if !answered_here {
            let kept = KeptAnswer {
                device_id,
                answered_at: now,
                envelope: answer.envelope,
                copy: answer.copy,
            };
            let count = tx.keep_answer(row.seq, &kept).await?;
            if count < row.approvals && !answer.closes {
                let stored = tx.question_at(row.seq).await?;
                return Ok((
                    Transition::Done(stored.device_question(device_envelope, now)?),
                    effects,
                ));
            }
        } else {
            // A retry: the first answer of this device stands, and the question is still open.
            return Ok((
                Transition::Done(row.device_question(device_envelope, now)?),
                effects,
            ));
        }
    }
    let transition = match store_answer(tx, &row, answer, now, &mut effects).await? {
        Ok(stored) => Transition::Done(stored.device_question(device_envelope, now)?),
        Err(Refusal::AlreadyAnswered) if row.answered_by.as_deref() == Some(device_id) => {
            Transition::Done(row.device_question(device_envelope, now)?)
        }
        Err(Refusal::AlreadyAnswered) if several && tx.has_answer(row.seq, device_id).await? => {
            Transition::Done(row.device_question(device_envelope, now)?)
        }
        Err(refusal) => Transition::Refused(refusal),
    };
    Ok((transition, effects))
}

/// See [`Store::answer_question_at_host`].
async fn answer_at_host<T: QuestionTx>(
    tx: &mut T,
    agent_id: &str,
    question_id: &str,
    answer: Answer<'_>,
    now: Timestamp,
) -> Result<(Transition<QuestionView>, Effects)> {
    let mut effects = Effects::default();
    tx.lock_agent(agent_id).await?;
    let Some(row) = tx.question(agent_id, question_id).await? else {
        return Ok((Transition::NotFound, effects));
    };
    let transition = match store_answer(tx, &row, answer, now, &mut effects).await? {
        Ok(stored) => Transition::Done(stored.view(now)?),
        Err(Refusal::AlreadyAnswered) if row.channel()? == Some(Channel::Host) => {
            Transition::Done(row.view(now)?)
        }
        Err(refusal) => Transition::Refused(refusal),
    };
    Ok((transition, effects))
}

/// See [`Store::cancel_question`].
async fn cancel<T: QuestionTx>(
    tx: &mut T,
    agent_id: &str,
    question_id: &str,
    now: Timestamp,
) -> Result<(Transition<QuestionView>, Effects)> {
    let mut effects = Effects::default();
    tx.lock_agent(agent_id).await?;
    let Some(row) = tx.question(agent_id, question_id).await? else {
        return Ok((Transition::NotFound, effects));
    };
    let mut record = row.record()?;
    let was = record.state;
    let outcome = record.cancel(now);
    expired_on_the_way(tx, &row, was, &record, now, &mut effects).await?;
    let transition = match outcome {
        Ok(()) if was == QuestionState::Pending => {
            tx.close(row.seq, record.state, record.closed_at.unwrap_or(now))
                .await?;
            effects.closed = true;
            effects.event = queue_event(tx, agent_id, row.seq, CANCELLED, now).await?;
            effects.update = tx.update(&row, ItemState::Cancelled, now).await?;
            Transition::Done(tx.question_at(row.seq).await?.view(now)?)
        }
        Ok(()) => Transition::Done(row.view(now)?),
        Err(refusal) => Transition::Refused(refusal),
    };
    Ok((transition, effects))
}

/// See [`Store::expire_due`]: the pass once something is due.
async fn expire<T: QuestionTx>(tx: &mut T, now: Timestamp, limit: u32) -> Result<ExpiryPass> {
    let mut pass = ExpiryPass::default();
    let claimed = tx.due_questions(now, limit).await?;
    pass.more = claimed.len() >= limit as usize;
    // Each agent's lock, taken only when free: a writer holding it may be answering one of these questions
    // and waiting for its row, which this transaction holds.
    let mut free: HashMap<String, bool> = HashMap::new();
    for (seq, agent_id) in claimed {
        let agent_free = match free.get(&agent_id) {
            Some(f) => *f,
            None => {
                let f = tx.try_lock_agent(&agent_id).await?;
                free.insert(agent_id, f);
                f
            }
        };
        if !agent_free {
            // Still pending and due: `next_expiry` gives its time, so the next pass comes at once.
            continue;
        }
        let row = tx.question_at(seq).await?;
        let mut record = row.record()?;
        if record.expire_if_due(now) {
            let (event, update) = store_expiry(tx, &row, &record, now).await?;
            pass.events |= event;
            pass.updates.extend(update);
            if !pass.agents.contains(&row.agent_id) {
                pass.agents.push(row.agent_id.clone());
            }
        }
    }
    Ok(pass)
}

/// See [`Store::put_notification`].
async fn put_notification<T: QuestionTx>(
    tx: &mut T,
    agent_id: &str,
    notification_id: &str,
    envelopes: &[DeviceEnvelope],
    now: Timestamp,
) -> Result<ItemPut<Stored>> {
    tx.lock_agent(agent_id).await?;
    let stored = |seq: i64, created_at: Timestamp, created: bool| Stored {
        id: notification_id.to_string(),
        cursor: cursor(seq),
        created_at,
        created,
    };
    if let Some((seq, created_at)) = tx.notification(agent_id, notification_id).await? {
        return Ok(ItemPut::Stored(stored(seq, ts(created_at), false), false));
    }
    if let Some(device_id) = inactive_device(tx, agent_id, envelopes).await? {
        return Ok(ItemPut::UnknownDevice(device_id));
    }
    let item = NewItem {
        agent_id,
        kind: "notification",
        item_id: notification_id,
        envelope: None,
        created_at: now,
    };
    let seq = tx.insert_item(&item).await?;
    tx.insert_envelopes(seq, envelopes).await?;
    tx.enqueue_push(agent_id, seq, now).await?;
    Ok(ItemPut::Stored(stored(seq, now, true), true))
}

/// Runs `$body` (a question write on `$tx`, a [`QuestionTx`], awaited) in one write transaction of the store's backend:
/// on the SQLite writer's connection, or in a PostgreSQL transaction committed when it succeeds. The body may
/// use only owned values (the SQLite writer runs it on its own thread).
macro_rules! in_tx {
    ($store:expr, |$tx:ident| $body:expr) => {
        match $store {
            Store::Sqlite(s) => {
                s.write(move |conn| {
                    crate::store::sqlite::at_once(async move {
                        let $tx = &mut crate::store::sqlite::Lite(conn);
                        $body
                    })
                })
                .await
            }
            Store::Postgres(p) => {
                let mut t = p.pool().begin().await?;
                let out = {
                    let $tx = &mut crate::store::postgres::Pg(&mut t);
                    $body?
                };
                t.commit().await?;
                p.committed();
                Ok(out)
            }
        }
    };
}

impl Store {
    /// Stores a question sealed for each device, or finds the one already stored under this id. A new
    /// question is refused ([`QuestionPut::QuotaExceeded`], nothing stored) when the agent already has
    /// `max_open` open questions (pending and not yet past their expiry): the count runs under the agent's
    /// lock, in the storing transaction, so two questions stored at once never both pass the last free place;
    /// it reads at most `max_open` entries of the index of pending questions (`questions_open_by_agent`).
    pub(crate) async fn put_question(
        &self,
        agent_id: &str,
        q: &NewQuestion<'_>,
        max_open: u32,
        now: Timestamp,
    ) -> Result<QuestionPut> {
        let agent_id = agent_id.to_string();
        let (question_id, self_envelope) = (q.question_id.to_string(), q.self_envelope.to_string());
        let (kind, expires_at, envelopes) = (q.kind, q.expires_at, q.envelopes.to_vec());
        let (user_id, approvals) = (q.user_id.map(str::to_string), q.approvals);
        in_tx!(self, |tx| {
            let q = NewQuestion {
                question_id: &question_id,
                kind,
                expires_at,
                self_envelope: &self_envelope,
                envelopes: &envelopes,
                user_id: user_id.as_deref(),
                approvals,
            };
            put_question(tx, &agent_id, &q, max_open, now).await
        })
    }

    /// Records a device's answer through [`QuestionRecord::answer`]: the first valid answer wins; the device
    /// that answered gets its answer again on a retry. A refusal writes nothing.
    #[cfg(test)]
    pub(crate) async fn answer_question(
        &self,
        agent_id: &str,
        device_id: &str,
        question_id: &str,
        answer_envelope: &str,
        answer_copy: Option<&str>,
        now: Timestamp,
    ) -> Result<(Transition<DeviceQuestion>, Effects)> {
        self.answer_question_closing(
            agent_id,
            device_id,
            question_id,
            answer_envelope,
            answer_copy,
            false,
            now,
        )
        .await
    }

    /// [`Store::answer_question`], where for a question that needs several approvals the answer is kept until
    /// that many devices answered, unless it `closes` the question (a device's no): docs/relay-api.md,
    /// "Several approvals". A device answers once: its retry gets the question as it stands.
    #[allow(clippy::too_many_arguments)] // the answer's parts, as the route has them
    pub(crate) async fn answer_question_closing(
        &self,
        agent_id: &str,
        device_id: &str,
        question_id: &str,
        answer_envelope: &str,
        answer_copy: Option<&str>,
        closes: bool,
        now: Timestamp,
    ) -> Result<(Transition<DeviceQuestion>, Effects)> {
        let (agent_id, device_id, question_id) = (
            agent_id.to_string(),
            device_id.to_string(),
            question_id.to_string(),
        );
        let (envelope, copy) = (answer_envelope.to_string(), answer_copy.map(str::to_string));
        in_tx!(self, |tx| {
            let by = Answerer::Device(&device_id);
            let given = Answer {
                by,
                envelope: &envelope,
                copy: copy.as_deref(),
                closes,
            };
            answer(tx, &agent_id, &device_id, &question_id, given, now).await
        })
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
        let (agent_id, question_id) = (agent_id.to_string(), question_id.to_string());
        let (envelope, copy) = (answer_envelope.to_string(), answer_copy.map(str::to_string));
        in_tx!(self, |tx| {
            let given = Answer {
                by: Answerer::Host,
                envelope: &envelope,
                copy: copy.as_deref(),
                closes: false,
            };
            answer_at_host(tx, &agent_id, &question_id, given, now).await
        })
    }

    /// Cancels a question through [`QuestionRecord::cancel`]; cancelling a cancelled question is a no-op. A
    /// refusal or a second cancel writes nothing.
    pub(crate) async fn cancel_question(
        &self,
        agent_id: &str,
        question_id: &str,
        now: Timestamp,
    ) -> Result<(Transition<QuestionView>, Effects)> {
        let (agent_id, question_id) = (agent_id.to_string(), question_id.to_string());
        in_tx!(self, |tx| cancel(tx, &agent_id, &question_id, now).await)
    }

    /// Moves up to `limit` pending questions past their expiry to `expired` (closed at their expiry) through
    /// [`QuestionRecord::expire_if_due`], queueing each one's `question.expired` event in the same transaction.
    /// Passes of several instances expire each question once (see the module's documentation).
    pub(crate) async fn expire_due(&self, now: Timestamp, limit: u32) -> Result<ExpiryPass> {
        // Most passes find nothing: ask a reader before taking the write lock.
        let due: bool = on_db!(
            self.db(),
            fetch_one,
            sqlx::query_scalar(
                "SELECT EXISTS (SELECT 1 FROM questions WHERE state = 'pending' AND expires_at <= $1)"
            )
            .bind(now.millis())
        )?;
        if !due {
            return Ok(ExpiryPass::default());
        }
        in_tx!(self, |tx| expire(tx, now, limit).await)
    }

    /// Stores a notification sealed for each device, or finds the one already stored under this id.
    pub(crate) async fn put_notification(
        &self,
        agent_id: &str,
        notification_id: &str,
        envelopes: &[DeviceEnvelope],
        now: Timestamp,
    ) -> Result<ItemPut<Stored>> {
        let (agent_id, id, envelopes) = (
            agent_id.to_string(),
            notification_id.to_string(),
            envelopes.to_vec(),
        );
        in_tx!(self, |tx| put_notification(tx, &agent_id, &id, &envelopes, now)
            .await)
    }
}
