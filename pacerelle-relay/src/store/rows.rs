//! The rows both backends read, and what the relay makes of them: one mapping from a stored row to the wire's
//! views, whichever database holds it. A row is read by sqlx (`FromRow` is generic over the database) or, on
//! SQLite's writer connection, by a `from_row` of the SQLite backend.

use pacerelle_core::Timestamp;
use pacerelle_core::pairing::Role;
use pacerelle_core::question::{Channel, QuestionKind, QuestionRecord, QuestionState};
use pacerelle_core::wire::{
    ConversationItem, Delivery, DeviceAnswer, DeviceInfo, DeviceQuestion, ItemKind, ItemState, MessageState,
    QuestionMeta, QuestionView, SubjectKind,
};

use crate::at_rest::key::WebhookKey;
use crate::error::StoreError;
use crate::store::{DueEvent, DuePush, Target, channel_of, cursor, ts};

type Result<T, E = StoreError> = std::result::Result<T, E>;

/// A stored value the relay does not know: an internal error, never the caller's.
pub(in crate::store) fn corrupt(what: String) -> StoreError {
    StoreError::internal(what)
}

/// An item kind as stored; one this relay does not know reads as [`ItemKind::Unknown`].
pub(in crate::store) fn item_kind(text: &str) -> ItemKind {
    match text {
        "message" => ItemKind::Message,
        "reply" => ItemKind::Reply,
        "question" => ItemKind::Question,
        "notification" => ItemKind::Notification,
        "update" => ItemKind::Update,
        _ => ItemKind::Unknown,
    }
}

/// The kind of an update's subject, as stored (its item's kind); any other reads as [`SubjectKind::Unknown`].
pub(in crate::store) fn subject_kind(text: Option<&str>) -> SubjectKind {
    match text {
        Some("message") => SubjectKind::Message,
        Some("question") => SubjectKind::Question,
        _ => SubjectKind::Unknown,
    }
}

/// The state an update row reports, as stored; one this relay does not know reads as [`ItemState::Unknown`].
pub(in crate::store) fn update_state(text: &str) -> ItemState {
    match text {
        "processed" => ItemState::Processed,
        "answered" => ItemState::Answered,
        "expired" => ItemState::Expired,
        "cancelled" => ItemState::Cancelled,
        _ => ItemState::Unknown,
    }
}

/// A task's state from its stored delivery and processing times.
pub(in crate::store) fn message_state(delivered_at: Option<i64>, processed_at: Option<i64>) -> MessageState {
    match (delivered_at, processed_at) {
        (_, Some(_)) => MessageState::Processed,
        (Some(_), None) => MessageState::Delivered,
        (None, None) => MessageState::Sent,
    }
}

/// Event type of the webhook event queued when a question is answered, as stored.
pub(in crate::store) const ANSWERED: &str = "question.answered";
/// Event type of the webhook event queued when a question expires, as stored.
pub(in crate::store) const EXPIRED: &str = "question.expired";
/// Event type of the webhook event queued when a question is cancelled, as stored.
pub(in crate::store) const CANCELLED: &str = "question.cancelled";
/// How the delivery log's error of an event dropped because its agent's outbox was full begins.
pub(in crate::store) const DROPPED: &str = "dropped:";

/// A question kind as stored.
pub(in crate::store) fn kind_of(text: &str) -> Result<QuestionKind> {
    match text {
        "yes_no" => Ok(QuestionKind::YesNo),
        "choice" => Ok(QuestionKind::Choice),
        "text" => Ok(QuestionKind::Text),
        other => Err(corrupt(format!(
            "unknown question kind {other:?} in the database"
        ))),
    }
}

/// A question state as stored.
pub(in crate::store) fn state_of(text: &str) -> Result<QuestionState> {
    QuestionState::parse(text)
        .ok_or_else(|| corrupt(format!("unknown question state {text:?} in the database")))
}

/// A question as stored.
#[derive(Debug, sqlx::FromRow)]
pub(in crate::store) struct QuestionRow {
    pub(in crate::store) seq: i64,
    pub(in crate::store) item_id: String,
    pub(in crate::store) agent_id: String,
    pub(in crate::store) kind: String,
    pub(in crate::store) state: String,
    pub(in crate::store) created_at: i64,
    pub(in crate::store) expires_at: i64,
    pub(in crate::store) closed_at: Option<i64>,
    pub(in crate::store) self_envelope: String,
    pub(in crate::store) recipients: Option<String>,
    pub(in crate::store) answered_by: Option<String>,
    pub(in crate::store) answered_by_name: Option<String>,
    pub(in crate::store) answered_at: Option<i64>,
    pub(in crate::store) answer_envelope: Option<String>,
    pub(in crate::store) answer_copy: Option<String>,
    pub(in crate::store) channel: Option<String>,
    pub(in crate::store) user_id: Option<String>,
    pub(in crate::store) approvals: i64,
    pub(in crate::store) answers: Option<String>,
}

/// A question and the envelope sealed for one device.
#[derive(Debug, sqlx::FromRow)]
pub(in crate::store) struct DeviceQuestionRow {
    #[sqlx(flatten)]
    pub(in crate::store) question: QuestionRow,
    pub(in crate::store) device_envelope: String,
}

impl QuestionRow {
    /// The state machine's view of the row.
    pub(in crate::store) fn record(&self) -> Result<QuestionRecord> {
        Ok(QuestionRecord {
            state: state_of(&self.state)?,
            expires_at: ts(self.expires_at),
            answered_by: self.answered_by.clone(),
            closed_at: self.closed_at.map(ts),
        })
    }

    /// The channel of its answer (none while unanswered).
    pub(in crate::store) fn channel(&self) -> Result<Option<Channel>> {
        channel_of(state_of(&self.state)?, self.channel.as_deref())
    }

    /// The record as of `now`: a pending question past its expiry reads as expired (closed at its expiry).
    pub(in crate::store) fn record_at(&self, now: Timestamp) -> Result<QuestionRecord> {
        let mut record = self.record()?;
        record.expire_if_due(now);
        Ok(record)
    }

    pub(in crate::store) fn meta(&self, now: Timestamp) -> Result<QuestionMeta> {
        let record = self.record_at(now)?;
        Ok(QuestionMeta {
            kind: kind_of(&self.kind)?,
            state: record.state,
            expires_at: record.expires_at,
            channel: self.channel()?,
            answered_by: self.answered_by.clone(),
            answered_at: self.answered_at.map(ts),
            answered_by_name: self.answered_by_name.clone(),
            answer_copy: self.answer_copy.clone(),
            approvals: approvals(self.approvals),
            answers: answers(self.answers.as_deref())?
                .into_iter()
                .map(|a| a.device_id)
                .collect(),
        })
    }

    /// The question as the agent sees it at `now` (also the body of its webhook events).
    pub(in crate::store) fn view(self, now: Timestamp) -> Result<QuestionView> {
        let record = self.record_at(now)?;
        let channel = self.channel()?;
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
            channel,
            answered_by: self.answered_by,
            answered_by_name: self.answered_by_name,
            answered_at: self.answered_at.map(ts),
            answer_envelope: self.answer_envelope,
            user_id: self.user_id,
            approvals: approvals(self.approvals),
            answers: answers(self.answers.as_deref())?,
            cursor: cursor(self.seq),
        })
    }

    pub(in crate::store) fn device_question(
        &self,
        envelope: String,
        now: Timestamp,
    ) -> Result<DeviceQuestion> {
        Ok(DeviceQuestion {
            question_id: self.item_id.clone(),
            envelope,
            meta: self.meta(now)?,
            created_at: ts(self.created_at),
            cursor: cursor(self.seq),
        })
    }
}

/// The question metadata of a conversation item, from the columns the conversation query selects (a pending
/// question past its expiry reads as expired at `now`). `None` when the item is no question and no update about
/// one.
#[allow(clippy::too_many_arguments)] // one argument per selected column
pub(in crate::store) fn conversation_meta(
    kind: Option<&str>,
    state: Option<&str>,
    expires_at: Option<i64>,
    answered_by: Option<String>,
    answered_at: Option<i64>,
    answered_by_name: Option<String>,
    answer_copy: Option<String>,
    channel: Option<&str>,
    quorum: (Option<i64>, Option<&str>),
    now: Timestamp,
) -> Result<Option<QuestionMeta>> {
    let (Some(kind), Some(state), Some(expires_at)) = (kind, state, expires_at) else {
        return Ok(None);
    };
    let record = QuestionRecord {
        state: state_of(state)?,
        expires_at: ts(expires_at),
        answered_by: answered_by.clone(),
        closed_at: None,
    };
    Ok(Some(QuestionMeta {
        kind: kind_of(kind)?,
        state: record.state_at(now),
        expires_at: record.expires_at,
        channel: channel_of(record.state, channel)?,
        answered_by,
        answered_at: answered_at.map(ts),
        answered_by_name,
        answer_copy,
        approvals: approvals(quorum.0.unwrap_or(1)),
        answers: answers(quorum.1)?.into_iter().map(|a| a.device_id).collect(),
    }))
}

/// A question's `approvals` as stored (1 for a value out of range, which the relay never writes).
pub(in crate::store) fn approvals(n: i64) -> u32 {
    u32::try_from(n).ok().filter(|n| *n >= 1).unwrap_or(1)
}

/// The devices' answers to a question that needs several approvals, as [`question_columns`] aggregates them:
/// `device answeredAt envelope`, comma-separated, in the order they came. Ids and envelopes hold no space and
/// no comma (the routes check them).
pub(in crate::store) fn answers(text: Option<&str>) -> Result<Vec<DeviceAnswer>> {
    let Some(text) = text.filter(|t| !t.is_empty()) else {
        return Ok(Vec::new());
    };
    text.split(',')
        .map(|one| {
            let mut parts = one.split(' ');
            match (
                parts.next(),
                parts.next().and_then(|t| t.parse().ok()),
                parts.next(),
            ) {
                (Some(device), Some(at), Some(envelope)) => Ok(DeviceAnswer {
                    device_id: device.to_string(),
                    answered_at: ts(at),
                    envelope: envelope.to_string(),
                }),
                _ => Err(corrupt("a malformed approval in the database".into())),
            }
        })
        .collect()
}

/// The role stored as `text`.
pub(in crate::store) fn role(text: &str) -> Result<Role> {
    match text {
        "owner" => Ok(Role::Owner),
        "user" => Ok(Role::User),
        other => Err(corrupt(format!("unknown role {other:?} in the database"))),
    }
}

/// A device as read: id, name, label, role, created, revoked, signing key, its seal (`device_columns!()`).
pub(in crate::store) type DeviceRow = (
    String,
    String,
    Option<String>,
    String,
    i64,
    Option<i64>,
    Option<String>,
    Option<String>,
);

/// The columns of a [`DeviceRow`], in its order (a literal, for `concat!`).
macro_rules! device_columns {
    () => {
        "device_id, name, label, role, created_at, revoked_at, signing_key, signing_key_seal"
    };
}

/// The columns of a question as [`QuestionRow`] reads them (`q`: questions, `i`: its item), in both dialects. A
/// macro, so that every query stays a constant string.
macro_rules! question_columns {
    () => {
        concat!(
            "i.seq, i.item_id, q.agent_id, q.kind, q.state, i.created_at, q.expires_at, q.closed_at,
             COALESCE(i.envelope, '') AS self_envelope,
             (SELECT string_agg(ie.device_id, ',') FROM item_envelopes ie WHERE ie.item_seq = i.seq) AS recipients,
             q.answered_by, q.answered_by_name, q.answered_at, q.answer_envelope, q.answer_copy, q.channel,
             q.user_id, q.approvals, ",
            answers_column!()
        )
    };
}

/// The devices' answers of question `q` that needs several approvals, aggregated as [`answers`] reads them.
macro_rules! answers_column {
    () => {
        "(SELECT string_agg(a.device_id || ' ' || CAST(a.answered_at AS TEXT) || ' ' || a.envelope, ','
                            ORDER BY a.answered_at, a.device_id)
          FROM approvals a WHERE a.item_seq = q.item_seq) AS answers"
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

/// A device as the wire shows it.
pub(in crate::store) fn device_info(row: DeviceRow) -> Result<DeviceInfo> {
    let (device_id, name, label, role_text, created_at, revoked_at, signing_key, signing_key_seal) = row;
    Ok(DeviceInfo {
        device_id,
        name,
        label,
        role: role(&role_text)?,
        created_at: ts(created_at),
        revoked_at: revoked_at.map(ts),
        signing_key,
        signing_key_seal,
    })
}

/// One row of the conversation query: an item, its envelope for the device, and what it is about.
#[derive(Debug, sqlx::FromRow)]
pub(in crate::store) struct ConversationRow {
    pub(in crate::store) seq: i64,
    pub(in crate::store) kind: String,
    pub(in crate::store) item_id: String,
    pub(in crate::store) envelope: String,
    pub(in crate::store) source_message_id: Option<String>,
    pub(in crate::store) created_at: i64,
    pub(in crate::store) delivered_at: Option<i64>,
    pub(in crate::store) processed_at: Option<i64>,
    pub(in crate::store) update_state: Option<String>,
    pub(in crate::store) subject_kind: Option<String>,
    pub(in crate::store) subject_id: Option<String>,
    pub(in crate::store) question_kind: Option<String>,
    pub(in crate::store) question_state: Option<String>,
    pub(in crate::store) expires_at: Option<i64>,
    pub(in crate::store) answered_by: Option<String>,
    pub(in crate::store) answered_at: Option<i64>,
    pub(in crate::store) answered_by_name: Option<String>,
    pub(in crate::store) answer_copy: Option<String>,
    pub(in crate::store) channel: Option<String>,
    pub(in crate::store) approvals: Option<i64>,
    pub(in crate::store) answers: Option<String>,
}

impl ConversationRow {
    /// The item as the device's conversation shows it at `now`.
    pub(in crate::store) fn item(self, now: Timestamp) -> Result<ConversationItem> {
        let kind = item_kind(&self.kind);
        let (state, subject_kind) = match kind {
            ItemKind::Message => (
                Some(message_state(self.delivered_at, self.processed_at).into()),
                None,
            ),
            ItemKind::Update => (
                self.update_state.as_deref().map(update_state),
                Some(subject_kind(self.subject_kind.as_deref())),
            ),
            _ => (None, None),
        };
        Ok(ConversationItem {
            kind,
            id: self.item_id,
            envelope: self.envelope,
            source_message_id: self.source_message_id,
            state,
            subject_id: self.subject_id.filter(|_| kind == ItemKind::Update),
            subject_kind,
            question: conversation_meta(
                self.question_kind.as_deref(),
                self.question_state.as_deref(),
                self.expires_at,
                self.answered_by,
                self.answered_at,
                self.answered_by_name,
                self.answer_copy,
                self.channel.as_deref(),
                (self.approvals, self.answers.as_deref()),
                now,
            )?,
            created_at: ts(self.created_at),
            cursor: cursor(self.seq),
        })
    }
}

/// A webhook event as the delivery log reads it: id, type, question, state, attempts, last status, last
/// error, created, delivered, next attempt.
pub(in crate::store) type DeliveryRow = (
    String,
    String,
    String,
    String,
    i64,
    Option<i64>,
    Option<String>,
    i64,
    Option<i64>,
    Option<i64>,
);

/// A webhook event as the delivery log shows it (its state as stored).
pub(in crate::store) fn delivery(
    (
        event_id,
        event_type,
        question_id,
        state,
        attempts,
        last_status,
        last_error,
        created_at,
        delivered_at,
        next_attempt_at,
    ): DeliveryRow,
) -> Delivery {
    Delivery {
        event_id,
        event_type,
        question_id,
        state,
        attempts: u32::try_from(attempts).unwrap_or(u32::MAX),
        last_status: last_status.and_then(|s| u16::try_from(s).ok()),
        last_error,
        created_at: ts(created_at),
        delivered_at: delivered_at.map(ts),
        next_attempt_at: next_attempt_at.map(ts),
    }
}

/// A push due for an attempt, with its subscription, as both backends' due reads give it.
#[derive(Debug, sqlx::FromRow)]
pub(in crate::store) struct DuePushRow {
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

impl From<DuePushRow> for DuePush {
    fn from(r: DuePushRow) -> Self {
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
            expires_at: ts(r.expires_at),
            attempts: u32::try_from(r.attempts).unwrap_or(u32::MAX),
        }
    }
}

/// A due webhook event as both backends' due reads give it, with its agent's webhook now: id, agent, body,
/// attempts, created, the webhook's URL, its sealed secret, a secret still in clear.
pub(in crate::store) type DueEventRow = (
    String,
    String,
    String,
    i64,
    i64,
    Option<String>,
    Option<Vec<u8>>,
    Option<String>,
);

/// A due event for the deliverer, its webhook's secret opened with `key`.
pub(in crate::store) fn due_event(
    (event_id, agent_id, body, attempts, created_at, url, sealed, clear): DueEventRow,
    key: &WebhookKey,
) -> DueEvent {
    let target = match (url, sealed, clear) {
        (None, _, _) => Target::Removed,
        (Some(url), Some(sealed), _) => match key.open(&agent_id, &sealed) {
            Some(secret) => Target::Webhook { url, secret },
            None => Target::Unreadable,
        },
        // Only before the start-up step has sealed it; never once the relay runs.
        (Some(url), None, Some(secret)) => Target::Webhook { url, secret },
        (Some(_), None, None) => Target::Unreadable,
    };
    DueEvent {
        event_id,
        agent_id,
        body,
        attempts: u32::try_from(attempts).unwrap_or(u32::MAX),
        created_at: ts(created_at),
        target,
    }
}
