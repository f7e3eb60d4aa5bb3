//! The PostgreSQL backend: state changes as conversation items (kind `update`), mirroring `sqlite/updates.rs`.
//!
//! Every update is written by [`insert_update`], inside the write transaction of the state change it reports,
//! so that the change and its item commit together or not at all. The unique index `updates_once` keeps it to
//! one item per (subject, state): a retried acknowledgement or answer, or two transactions meeting the same
//! expiry at once, add nothing (`ON CONFLICT … DO NOTHING` waits for the other transaction and then inserts
//! nothing if it committed).

use pacerelle_core::wire::SubjectKind;

use super::prelude::*;
use crate::store::types::{QuestionMetaRow, UpdateDraft};

/// Inserts the `update` item saying that the item at `subject_seq` (a task or a question of `agent_id`)
/// reached `state`, unless one was already stored for that subject and state. Call it inside the write that
/// changes the state, after [`super::lock_agent`] (it takes the agent's lock itself too, which costs nothing
/// when the transaction holds it already, so that the update's `seq` is drawn in commit order in any case).
/// Returns the new item, or `None` when it existed already (or the subject is not a task or a question of this
/// agent, or the state not one it can reach).
pub(super) async fn insert_update(
    conn: &mut PgConnection,
    agent_id: &str,
    subject_seq: i64,
    state: ItemState,
    now: Timestamp,
) -> Result<Option<NewUpdate>> {
    let subject: Option<(String, String, Option<String>)> =
        sqlx::query_as("SELECT kind, item_id, device_id FROM items WHERE seq = $1 AND agent_id = $2")
            .bind(subject_seq)
            .bind(agent_id)
            .fetch_optional(&mut *conn)
            .await?;
    let Some(draft) = subject.and_then(|subject| UpdateDraft::of(subject, state)) else {
        return Ok(None);
    };
    super::lock_agent(&mut *conn, agent_id).await?;
    let seq: Option<i64> = sqlx::query_scalar(
        "INSERT INTO items (agent_id, kind, item_id, device_id, created_at, subject_seq, update_state)
         VALUES ($1, 'update', $2, $3, $4, $5, $6)
         ON CONFLICT (subject_seq, update_state) WHERE kind = 'update' DO NOTHING
         RETURNING seq",
    )
    .bind(agent_id)
    .bind(&draft.id)
    .bind(&draft.device_id)
    .bind(now.millis())
    .bind(subject_seq)
    .bind(state.as_str())
    .fetch_optional(&mut *conn)
    .await?;
    let Some(seq) = seq else {
        return Ok(None);
    };
    super::push::enqueue(&mut *conn, agent_id, seq, now).await?;
    let recipients: Vec<String> = match &draft.device_id {
        Some(sender) => {
            sqlx::query_scalar("SELECT device_id FROM devices WHERE device_id = $1 AND revoked_at IS NULL")
                .bind(sender)
                .fetch_all(&mut *conn)
                .await?
        }
        None => {
            sqlx::query_scalar(
                "SELECT e.device_id FROM item_envelopes e JOIN devices d ON d.device_id = e.device_id
                 WHERE e.item_seq = $1 AND d.revoked_at IS NULL ORDER BY e.device_id",
            )
            .bind(subject_seq)
            .fetch_all(&mut *conn)
            .await?
        }
    };
    // The question's metadata as it now stands (the caller wrote the state change before this); a task has none.
    let meta: Option<QuestionMetaRow> = if draft.subject_kind == SubjectKind::Question {
        sqlx::query_as(
            "SELECT kind, state, expires_at, answered_by, answered_at, answered_by_name, answer_copy, channel
             FROM questions WHERE item_seq = $1",
        )
        .bind(subject_seq)
        .fetch_optional(&mut *conn)
        .await?
    } else {
        None
    };
    Ok(Some(draft.stored(agent_id, seq, recipients, meta, now)?))
}

#[cfg(test)]
mod tests {
    //! The tests both backends share are in `crate::store::suite::updates`.

    use super::super::PgStore;
    use super::super::messages::tests::T0;
    use super::*;

    impl PgStore {
        /// [`insert_update`] for item `seq` of `ag_1` at [`T0`], in a transaction of its own: the suite's
        /// `Backend::insert_update`.
        pub(in crate::store) async fn update_alone(&self, seq: i64, state: ItemState) -> Option<NewUpdate> {
            let mut tx = self.pool.begin().await.expect("begins");
            let update = insert_update(&mut tx, "ag_1", seq, state, Timestamp(T0))
                .await
                .expect("writes");
            tx.commit().await.expect("commits");
            update
        }
    }
}
