//! State changes as conversation items (kind `update`): a task processed, a question answered, cancelled or
//! expired.
//!
//! Every update is written by [`insert_update`], inside the write transaction of the state change it reports,
//! so that the change and its item commit together or not at all. The unique index `updates_once` keeps it to
//! one item per (subject, state): a retried acknowledgement or answer adds nothing. The caller wakes the
//! agent's conversations after the commit.

use pacerelle_core::wire::{ItemState, SubjectKind};
use pacerelle_core::{Cursor, Timestamp, ids};
use sqlx::SqliteConnection;

use super::{Result, cursor};

/// Prefix of update ids.
const UPDATE: &str = "upd";

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
}

impl NewUpdate {
    /// Its position in the agent's stream.
    pub(crate) fn cursor(&self) -> Cursor {
        cursor(self.seq)
    }
}

/// Inserts the `update` item saying that the item at `subject_seq` (a task or a question of `agent_id`)
/// reached `state`, unless one was already stored for that subject and state. Call it inside the write that
/// changes the state. Returns the new item, or `None` when it existed already (or the subject is not a task or
/// a question of this agent).
pub(crate) async fn insert_update(
    conn: &mut SqliteConnection,
    agent_id: &str,
    subject_seq: i64,
    state: ItemState,
    now: Timestamp,
) -> Result<Option<NewUpdate>> {
    let subject: Option<(String, String, Option<String>)> =
        sqlx::query_as("SELECT kind, item_id, device_id FROM items WHERE seq = ?1 AND agent_id = ?2")
            .bind(subject_seq)
            .bind(agent_id)
            .fetch_optional(&mut *conn)
            .await?;
    let Some((kind, subject_id, sender)) = subject else {
        return Ok(None);
    };
    let (subject_kind, device_id) = match (kind.as_str(), state) {
        ("message", ItemState::Processed) => (SubjectKind::Message, sender),
        ("question", ItemState::Answered | ItemState::Expired | ItemState::Cancelled) => {
            (SubjectKind::Question, None)
        }
        _ => return Ok(None),
    };
    let id = ids::generate(UPDATE);
    let seq: Option<i64> = sqlx::query_scalar(
        "INSERT INTO items (agent_id, kind, item_id, device_id, created_at, subject_seq, update_state)
         VALUES (?1, 'update', ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (subject_seq, update_state) WHERE kind = 'update' DO NOTHING
         RETURNING seq",
    )
    .bind(agent_id)
    .bind(&id)
    .bind(&device_id)
    .bind(now.millis())
    .bind(subject_seq)
    .bind(state.as_str())
    .fetch_optional(&mut *conn)
    .await?;
    let Some(seq) = seq else {
        return Ok(None);
    };
    let recipients: Vec<String> = match &device_id {
        Some(sender) => {
            sqlx::query_scalar("SELECT device_id FROM devices WHERE device_id = ?1 AND revoked_at IS NULL")
                .bind(sender)
                .fetch_all(&mut *conn)
                .await?
        }
        None => {
            sqlx::query_scalar(
                "SELECT e.device_id FROM item_envelopes e JOIN devices d ON d.device_id = e.device_id
             WHERE e.item_seq = ?1 AND d.revoked_at IS NULL ORDER BY e.device_id",
            )
            .bind(subject_seq)
            .fetch_all(&mut *conn)
            .await?
        }
    };
    Ok(Some(NewUpdate {
        agent_id: agent_id.to_string(),
        seq,
        id,
        subject_id,
        subject_kind,
        state,
        recipients,
        created_at: now,
    }))
}
