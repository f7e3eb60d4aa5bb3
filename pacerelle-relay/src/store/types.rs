//! The values both backends return and take beyond those of [`crate::store`] itself: outcomes, rows due for the
//! deliverers, figures for `GET /metrics`. Neither backend owns them; each builds them from its own SQL.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

use pacerelle_core::wire::{ConversationItem, ItemKind, ItemState, RosterView, SubjectKind};
use pacerelle_core::{Cursor, Timestamp};

use crate::store::rows::item_kind;
use crate::store::{cursor, ts};

/// Why a task is refused whose id its agent already holds from another device (both backends).
pub(crate) const ID_OF_ANOTHER_DEVICE: &str = "this message id was used by another device";

/// What the store's writes have done since the relay started, for `GET /metrics` and the tests: SQLite's
/// writer counts its batches; PostgreSQL counts its batches of tasks and each other write as a transaction.
#[derive(Debug)]
pub(crate) struct WriterCounts {
    /// Transactions committed (one synced commit each; a batch whose writes all failed commits nothing).
    pub commits: Counter,
    /// Writes run, whatever their outcome.
    pub writes: Counter,
    /// Writes per batch.
    pub batch: Histogram,
    /// Seconds from a call of the SQLite writer's `write` to its answer: the wait in the queue, the batch's
    /// work and its synced commit.
    pub latency: Histogram,
}

/// Upper bounds of [`WriterCounts::latency`]'s buckets, in seconds: 100 µs to 5 s.
const LATENCY_BUCKETS: [f64; 15] = [
    0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

impl Default for WriterCounts {
    fn default() -> Self {
        WriterCounts {
            commits: Counter::default(),
            writes: Counter::default(),
            // 1, 2, 4 … 1024: up to the SQLite writer's MAX_BATCH.
            batch: Histogram::new(exponential_buckets(1.0, 2.0, 11)),
            latency: Histogram::new(LATENCY_BUCKETS),
        }
    }
}

/// One outbox's depth and age.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct OutboxFigures {
    /// Entries waiting for delivery (a first attempt or another).
    pub pending: u64,
    /// When the oldest of them was queued; `None` when the outbox is empty.
    pub oldest: Option<Timestamp>,
}

impl OutboxFigures {
    /// An outbox's figures from its `(count, oldest created_at)` row.
    pub(in crate::store) fn of((pending, oldest): (i64, Option<i64>)) -> OutboxFigures {
        OutboxFigures {
            pending: u64::try_from(pending).unwrap_or(0),
            oldest: oldest.map(ts),
        }
    }
}

/// The figures of both outboxes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Outboxes {
    /// Webhook events in the state `pending`.
    pub webhook: OutboxFigures,
    /// Web Push messages queued (a push leaves the outbox once delivered, dropped or given up).
    pub push: OutboxFigures,
}

/// Subscriptions one device may hold.
pub(crate) const MAX_PER_DEVICE: i64 = 10;

/// TTL of reply and notification pushes.
pub(in crate::store) const TTL_NORMAL_MS: i64 = 86_400_000;
/// TTL of the push that closes a question.
pub(in crate::store) const TTL_UPDATE_MS: i64 = 3_600_000;

/// How one item's pushes go: the seq of the item whose envelopes name their recipients, their urgency, their
/// topic, and when they expire (milliseconds).
pub(in crate::store) type PushPlan = (i64, &'static str, Option<String>, i64);

/// The pushes of the question stored at `seq`, expiring at `expires_at`: high urgency, the question's topic,
/// until it expires (a TTL of at least one second).
pub(in crate::store) fn question_push(
    seq: i64,
    question_id: &str,
    expires_at: i64,
    now: Timestamp,
) -> PushPlan {
    let expires = expires_at.max(now.millis().saturating_add(1000));
    (
        seq,
        "high",
        Some(pacerelle_core::webpush::topic(question_id)),
        expires,
    )
}

/// The pushes of the reply or the notification stored at `seq`: normal urgency, no topic, [`TTL_NORMAL_MS`].
pub(in crate::store) fn sent_push(seq: i64, now: Timestamp) -> PushPlan {
    (seq, "normal", None, now.millis().saturating_add(TTL_NORMAL_MS))
}

/// The pushes of an update about the question stored at `subject_seq`: to the question's recipients, high
/// urgency, the question's topic (so it replaces the question's push), [`TTL_UPDATE_MS`].
pub(in crate::store) fn update_push(subject_seq: i64, question_id: &str, now: Timestamp) -> PushPlan {
    (
        subject_seq,
        "high",
        Some(pacerelle_core::webpush::topic(question_id)),
        now.millis().saturating_add(TTL_UPDATE_MS),
    )
}

/// An item as the push outbox reads it when it is stored: its kind, its id, its subject's seq, a question's
/// expiry, its subject's kind and id ([`push_plan`]).
pub(in crate::store) type PushItemRow = (
    String,
    String,
    Option<i64>,
    Option<i64>,
    Option<String>,
    Option<String>,
);

/// How the item stored at `seq` is pushed, from its [`PushItemRow`] (`None`: no such item), with its kind: a
/// question, a reply or a notification to the devices it is sealed for, an update about a question to that
/// question's recipients; `None` for what pushes nothing (a task's update, a checkpoint, a task).
pub(in crate::store) fn push_plan(
    seq: i64,
    row: Option<PushItemRow>,
    now: Timestamp,
) -> Option<(String, PushPlan)> {
    let (kind, item_id, subject_seq, expires_at, subject_kind, subject_id) = row?;
    let plan = match item_kind(&kind) {
        ItemKind::Question => question_push(seq, &item_id, expires_at?, now),
        ItemKind::Reply | ItemKind::Notification => sent_push(seq, now),
        ItemKind::Update if item_kind(subject_kind.as_deref()?) == ItemKind::Question => {
            update_push(subject_seq?, subject_id.as_deref()?, now)
        }
        _ => return None,
    };
    Some((kind, plan))
}

/// Outcome of registering a subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PushPut {
    /// A new subscription (or one moved from another device), created at this time.
    Created(Timestamp),
    /// This device had it already: its keys were replaced. When it was first registered.
    Replaced(Timestamp),
    /// The device already holds [`MAX_PER_DEVICE`] subscriptions.
    TooMany,
}

/// A push due for an attempt, with its subscription.
#[derive(Debug, Clone)]
pub(crate) struct DuePush {
    pub push_id: i64,
    pub subscription_id: i64,
    pub endpoint: String,
    pub p256dh: Vec<u8>,
    pub auth: Vec<u8>,
    pub agent_id: String,
    pub device_id: String,
    pub item_seq: i64,
    pub kind: String,
    pub urgency: String,
    pub topic: Option<String>,
    pub expires_at: Timestamp,
    pub attempts: u32,
}

/// What a purge did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Purged {
    /// Rows deleted, dependents (envelopes, updates, events) included.
    pub rows: u64,
    /// Write transactions run.
    pub batches: u32,
    /// Whether the purge stopped at its bound while rows may be left to delete (the next sweep goes on).
    pub more: bool,
}

/// An update item just inserted: what the conversations and a push need to know of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NewUpdate {
    /// The agent whose stream holds it.
    pub agent_id: String,
    /// Its sequence number in the stream (its cursor is `c1.<seq>`).
    pub seq: i64,
    /// Its id, `upd_…`.
    pub id: String,
    /// The task or question whose state changed.
    pub subject_id: String,
    /// Which of the two.
    pub subject_kind: SubjectKind,
    /// The state it reached.
    pub state: ItemState,
    /// The devices whose conversation shows it, not revoked: the sender of the task, or every device the
    /// question was sealed for.
    pub recipients: Vec<String>,
    /// When it was stored.
    pub created_at: Timestamp,
    /// The item exactly as `GET /v1/device/conversation` returns it to each of `recipients` (an update
    /// carries no envelope, so it is the same for all of them), as of `created_at`.
    pub item: ConversationItem,
}

/// Prefix of update ids.
const UPDATE: &str = "upd";

/// A question's metadata as an update reads it back after the state change: kind, state, expiry, answered by,
/// answered at, answerer's name, answer copy, channel.
pub(in crate::store) type QuestionMetaRow = (
    String,
    String,
    i64,
    Option<String>,
    Option<i64>,
    Option<String>,
    Option<String>,
    Option<String>,
);

/// An update about to be stored: its new id, its subject, the state reached, and the device it goes to alone.
#[derive(Debug)]
pub(in crate::store) struct UpdateDraft {
    pub id: String,
    pub subject_id: String,
    pub subject_kind: SubjectKind,
    /// The task's sender, the one device that sees the update; `None` for every device the question was
    /// sealed for.
    pub device_id: Option<String>,
    pub state: ItemState,
}

impl UpdateDraft {
    /// The update saying that an item — of the stored kind, id and sender `subject` — reached `state`, with a
    /// new id. `None` when an item of that kind never reaches that state (no update is stored).
    pub(in crate::store) fn of(
        (kind, subject_id, sender): (String, String, Option<String>),
        state: ItemState,
    ) -> Option<UpdateDraft> {
        let (subject_kind, device_id) = match (item_kind(&kind), state) {
            (ItemKind::Message, ItemState::Processed) => (SubjectKind::Message, sender),
            (ItemKind::Question, ItemState::Answered | ItemState::Expired | ItemState::Cancelled) => {
                (SubjectKind::Question, None)
            }
            _ => return None,
        };
        Some(UpdateDraft {
            id: pacerelle_core::ids::generate(UPDATE),
            subject_id,
            subject_kind,
            device_id,
            state,
        })
    }

    /// The update once stored at `seq` at `now`, with its recipients and its conversation item (`meta`: the
    /// subject question's metadata as it now stands, read after the state change; ignored for a task).
    pub(in crate::store) fn stored(
        self,
        agent_id: &str,
        seq: i64,
        recipients: Vec<String>,
        meta: Option<QuestionMetaRow>,
        now: Timestamp,
    ) -> Result<NewUpdate, crate::error::StoreError> {
        let question = match meta.filter(|_| self.subject_kind == SubjectKind::Question) {
            Some((kind, state, expires_at, by, at, by_name, copy, channel)) => {
                crate::store::rows::conversation_meta(
                    Some(&kind),
                    Some(&state),
                    Some(expires_at),
                    by,
                    at,
                    by_name,
                    copy,
                    channel.as_deref(),
                    (None, None),
                    now,
                )?
            }
            None => None,
        };
        let item = ConversationItem {
            kind: ItemKind::Update,
            id: self.id.clone(),
            envelope: String::new(),
            source_message_id: None,
            state: Some(self.state),
            subject_id: Some(self.subject_id.clone()),
            subject_kind: Some(self.subject_kind),
            question,
            created_at: now,
            cursor: cursor(seq),
        };
        Ok(NewUpdate {
            agent_id: agent_id.to_string(),
            seq,
            id: self.id,
            subject_id: self.subject_id,
            subject_kind: self.subject_kind,
            state: self.state,
            recipients,
            created_at: now,
            item,
        })
    }
}

impl NewUpdate {
    /// Its position in the agent's stream.
    pub(crate) fn cursor(&self) -> Cursor {
        cursor(self.seq)
    }
}

/// What storing a roster did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RosterPut {
    /// Stored: the new view.
    Stored(RosterView),
    /// The stored version is not the one the update was based on, or the new version is not greater.
    Conflict {
        /// The stored version (0: none).
        current: u64,
    },
}

impl RosterPut {
    /// A put's versions as stored, `(previous, version)`: versions beyond i64 are refused by the route, and
    /// clamped here defensively.
    pub(in crate::store) fn versions(previous: u64, version: u64) -> (i64, i64) {
        (
            i64::try_from(previous).unwrap_or(i64::MAX),
            i64::try_from(version).unwrap_or(i64::MAX),
        )
    }

    /// The conflict of a put of `version` based on `previous` while the stored roster is at `current` (0:
    /// none), or `None` when it may be stored: the stored one is still `previous` and `version` is greater.
    pub(in crate::store) fn conflict(current: i64, previous: i64, version: i64) -> Option<RosterPut> {
        (current != previous || version <= current).then(|| RosterPut::Conflict {
            current: u64::try_from(current).unwrap_or(0),
        })
    }

    /// The outcome of a roster stored at `version` with `envelope`.
    pub(in crate::store) fn stored(version: i64, envelope: String) -> RosterPut {
        RosterPut::Stored(RosterView {
            version: u64::try_from(version).unwrap_or(0),
            envelope: Some(envelope),
        })
    }
}

/// The roster as read, `(version, envelope)`; version 0 and no envelope when none was stored.
pub(in crate::store) fn roster_view(row: Option<(i64, String)>) -> RosterView {
    match row {
        Some((version, envelope)) => RosterView {
            version: u64::try_from(version).unwrap_or(0),
            envelope: Some(envelope),
        },
        None => RosterView {
            version: 0,
            envelope: None,
        },
    }
}

/// Where a due event goes, as the agent's webhook is at the time of the read.
#[derive(Debug, Clone)]
pub(crate) enum Target {
    /// The agent removed its webhook: nowhere.
    Removed,
    /// The webhook's URL and its secret, opened.
    Webhook { url: String, secret: String },
    /// The secret was sealed with another webhook key (`webhook.key` lost or replaced since): nothing can sign
    /// the event until the agent sets its webhook again.
    Unreadable,
}
