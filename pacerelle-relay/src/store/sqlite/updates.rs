//! State changes as conversation items (kind `update`): a task processed, a question answered, cancelled or
//! expired.
//!
//! Every update is written by [`insert_update`], inside the write transaction of the state change it reports,
//! so that the change and its item commit together or not at all. The unique index `updates_once` keeps it to
//! one item per (subject, state): a retried acknowledgement or answer adds nothing. The caller wakes the
//! agent's conversations after the commit.

use pacerelle_core::Timestamp;
use pacerelle_core::wire::ItemState;
use rusqlite::{Connection, OptionalExtension, params};

use super::Result;
use crate::store::NewUpdate;
use crate::store::types::{QuestionMetaRow, UpdateDraft};

/// Inserts the `update` item saying that the item at `subject_seq` (a task or a question of `agent_id`)
/// reached `state`, unless one was already stored for that subject and state. Call it inside the write that
/// changes the state. Returns the new item, or `None` when it existed already (or the subject is not a task
/// or a question of this agent, or the state not one it can reach).
pub(crate) fn insert_update(
    conn: &Connection,
    agent_id: &str,
    subject_seq: i64,
    state: ItemState,
    now: Timestamp,
) -> Result<Option<NewUpdate>> {
    let subject: Option<(String, String, Option<String>)> = conn
        .prepare_cached("SELECT kind, item_id, device_id FROM items WHERE seq = ?1 AND agent_id = ?2")?
        .query_row(params![subject_seq, agent_id], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .optional()?;
    let Some(draft) = subject.and_then(|subject| UpdateDraft::of(subject, state)) else {
        return Ok(None);
    };
    let seq: Option<i64> = conn
        .prepare_cached(
            "INSERT INTO items (agent_id, kind, item_id, device_id, created_at, subject_seq, update_state)
             VALUES (?1, 'update', ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT (subject_seq, update_state) WHERE kind = 'update' DO NOTHING
             RETURNING seq",
        )?
        .query_row(
            params![
                agent_id,
                draft.id,
                draft.device_id,
                now.millis(),
                subject_seq,
                state.as_str()
            ],
            |r| r.get(0),
        )
        .optional()?;
    let Some(seq) = seq else {
        return Ok(None);
    };
    super::push::enqueue(conn, agent_id, seq, now)?;
    let recipients: Vec<String> = match &draft.device_id {
        Some(sender) => conn
            .prepare_cached("SELECT device_id FROM devices WHERE device_id = ?1 AND revoked_at IS NULL")?
            .query_map([sender], |r| r.get(0))?
            .collect::<Result<_, _>>()?,
        None => conn
            .prepare_cached(
                "SELECT e.device_id FROM item_envelopes e JOIN devices d ON d.device_id = e.device_id
                 WHERE e.item_seq = ?1 AND d.revoked_at IS NULL ORDER BY e.device_id",
            )?
            .query_map([subject_seq], |r| r.get(0))?
            .collect::<Result<_, _>>()?,
    };
    // The question's metadata as it now stands (the caller wrote the state change before this).
    let meta: Option<QuestionMetaRow> = conn
        .prepare_cached(
            "SELECT kind, state, expires_at, answered_by, answered_at, answered_by_name, answer_copy, channel
             FROM questions WHERE item_seq = ?1",
        )?
        .query_row([subject_seq], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
                r.get(7)?,
            ))
        })
        .optional()?;
    Ok(Some(draft.stored(agent_id, seq, recipients, meta, now)?))
}

#[cfg(test)]
mod tests {
    //! What only SQLite has — its migrations. The tests both backends share are in
    //! `crate::store::suite::updates`.

    use pacerelle_core::Cursor;
    use pacerelle_core::wire::{DeviceEnvelope, ItemKind};

    use super::super::SqliteStore;
    use super::super::tests::T0;
    use super::*;

    impl SqliteStore {
        /// [`insert_update`] for item `seq` of `ag_1` at [`T0`], in a write of its own: the suite's
        /// `Backend::insert_update`.
        pub(in crate::store) async fn update_alone(&self, seq: i64, state: ItemState) -> Option<NewUpdate> {
            self.write(move |conn| insert_update(conn, "ag_1", seq, state, Timestamp(T0)))
                .await
                .expect("writes")
        }
    }

    #[tokio::test]
    async fn migrating_a_version_4_database_keeps_every_row_and_admits_updates() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("v4.db");
        let pool = super::super::tests::database_at(&path, 4).await;
        for sql in [
            "INSERT INTO agents (agent_id, name, auth_hash, created_at) VALUES ('ag_1', 'laptop', x'01', 1)",
            "INSERT INTO devices (device_id, agent_id, name, role, token_hash, created_at)
             VALUES ('dv_1', 'ag_1', 'phone', 'owner', x'00', 1), ('dv_2', 'ag_1', 'tablet', 'owner', x'00', 1)",
            // seq 1: a task delivered; 2: its reply; 3: a question answered; 4: a notification; 5: a pending
            // question; 6: a checkpoint, deleted (the high-water mark stays above MAX(seq)).
            "INSERT INTO items (agent_id, kind, item_id, device_id, envelope, created_at, delivered_at)
             VALUES ('ag_1', 'message', 'm1', 'dv_1', 'AQID', 2, 3)",
            "INSERT INTO items (agent_id, kind, item_id, source_message_id, created_at)
             VALUES ('ag_1', 'reply', 'r1', 'm1', 4)",
            "INSERT INTO item_envelopes (item_seq, device_id, envelope) VALUES (2, 'dv_1', 'BAUG')",
            "INSERT INTO items (agent_id, kind, item_id, envelope, created_at) VALUES ('ag_1', 'question', 'q1', 'SELF', 5)",
            "INSERT INTO item_envelopes (item_seq, device_id, envelope) VALUES (3, 'dv_1', 'Q1D1'), (3, 'dv_2', 'Q1D2')",
            "INSERT INTO questions (item_seq, agent_id, kind, state, expires_at, closed_at, answered_by,
                                    answered_by_name, answered_at, answer_envelope, answer_copy)
             VALUES (3, 'ag_1', 'yes_no', 'answered', 9000000000000, 6, 'dv_2', 'tablet', 6, 'ANS', 'COPY')",
            "INSERT INTO webhook_events (event_id, agent_id, event_type, question_seq, question_id, body, state,
                                         attempts, created_at, delivered_at)
             VALUES ('evt_1', 'ag_1', 'question.answered', 3, 'q1', '{}', 'delivered', 1, 6, 7)",
            "INSERT INTO items (agent_id, kind, item_id, created_at) VALUES ('ag_1', 'notification', 'n1', 8)",
            "INSERT INTO item_envelopes (item_seq, device_id, envelope) VALUES (4, 'dv_1', 'N1D1')",
            "INSERT INTO items (agent_id, kind, item_id, envelope, created_at) VALUES ('ag_1', 'question', 'q2', 'SELF', 9)",
            "INSERT INTO item_envelopes (item_seq, device_id, envelope) VALUES (5, 'dv_1', 'Q2D1')",
            "INSERT INTO questions (item_seq, agent_id, kind, state, expires_at)
             VALUES (5, 'ag_1', 'text', 'pending', 9000000000000)",
            "INSERT INTO webhooks (agent_id, url, sealed_secret, updated_at) VALUES ('ag_1', 'https://h.example/', x'01', 1)",
            "INSERT INTO rosters (agent_id, version, envelope, updated_at) VALUES ('ag_1', 3, 'ROSTER', 1)",
            "INSERT INTO items (agent_id, kind, item_id, envelope, created_at) VALUES ('ag_1', 'checkpoint', 'c1', 'AA', 10)",
            "DELETE FROM items WHERE item_id = 'c1'",
        ] {
            sqlx::query(sql).execute(&pool).await.expect(sql);
        }
        pool.close().await;

        let store = SqliteStore::open(&path).await.expect("migrates");
        let (items, cursor) = store
            .as_store()
            .conversation("ag_1", "dv_1", Cursor::START, 50, true, Timestamp(10))
            .await
            .expect("reads");
        let kept: Vec<(ItemKind, &str, &str)> = items
            .iter()
            .map(|i| (i.kind, i.id.as_str(), i.envelope.as_str()))
            .collect();
        assert_eq!(
            kept,
            [
                (ItemKind::Message, "m1", "AQID"),
                (ItemKind::Reply, "r1", "BAUG"),
                (ItemKind::Question, "q1", "Q1D1"),
                (ItemKind::Notification, "n1", "N1D1"),
                (ItemKind::Question, "q2", "Q2D1"),
            ]
        );
        assert_eq!(items[0].state, Some(ItemState::Delivered));
        let q1 = items[2].question.as_ref().expect("meta");
        assert_eq!(q1.answered_by.as_deref(), Some("dv_2"));
        assert_eq!(q1.answered_by_name.as_deref(), Some("tablet"));
        assert_eq!(q1.answer_copy.as_deref(), Some("COPY"));
        assert_eq!(cursor, Cursor(5));
        let q1 = store
            .as_store()
            .question("ag_1", "q1", Timestamp(10))
            .await
            .expect("reads")
            .expect("kept");
        assert_eq!(q1.answer_envelope.as_deref(), Some("ANS"));
        assert_eq!(q1.recipients, ["dv_1", "dv_2"]);
        let events: Vec<(String, String)> = sqlx::query_as("SELECT event_id, state FROM webhook_events")
            .fetch_all(&store.read)
            .await
            .expect("reads");
        assert_eq!(events, [("evt_1".to_string(), "delivered".to_string())]);
        let roster: i64 = sqlx::query_scalar("SELECT version FROM rosters WHERE agent_id = 'ag_1'")
            .fetch_one(&store.read)
            .await
            .expect("kept");
        assert_eq!(roster, 3);

        // The foreign keys hold and name the rebuilt tables.
        let violations: Vec<(String, i64, String, i64)> = sqlx::query_as("PRAGMA foreign_key_check")
            .fetch_all(&store.read)
            .await
            .expect("checks");
        assert!(violations.is_empty());
        for (table, column, parent) in [
            ("item_envelopes", "item_seq", "items"),
            ("questions", "item_seq", "items"),
            ("webhook_events", "question_seq", "questions"),
            ("items", "subject_seq", "items"),
        ] {
            let named: String =
                sqlx::query_scalar("SELECT \"table\" FROM pragma_foreign_key_list(?1) WHERE \"from\" = ?2")
                    .bind(table)
                    .bind(column)
                    .fetch_one(&store.read)
                    .await
                    .expect("a foreign key");
            assert_eq!(named, parent, "{table}.{column}");
        }

        // Old rows take part in the new behaviour: the old task gets its update, at a seq never used before.
        let marked = store
            .as_store()
            .mark_processed("ag_1", "m1", "default", Timestamp(20))
            .await
            .expect("writes")
            .expect("found");
        let update = marked.update.expect("the first acknowledgement stores an update");
        assert_eq!(update.seq, 7, "seq 6 was used once and is never given again");
        assert_eq!(update.recipients, ["dv_1"]);
        let (cancel, effects) = store
            .as_store()
            .cancel_question("ag_1", "q2", Timestamp(21))
            .await
            .expect("writes");
        assert!(matches!(cancel, crate::store::Transition::Done(_)));
        let cancelled = effects.update.expect("an update");
        assert_eq!(cancelled.state, ItemState::Cancelled);
        assert_eq!(cancelled.recipients, ["dv_1"]);
        let (items, _) = store
            .as_store()
            .conversation("ag_1", "dv_1", Cursor(5), 50, true, Timestamp(30))
            .await
            .expect("reads");
        let states: Vec<(Option<&str>, Option<ItemState>)> =
            items.iter().map(|i| (i.subject_id.as_deref(), i.state)).collect();
        assert_eq!(
            states,
            [
                (Some("m1"), Some(ItemState::Processed)),
                (Some("q2"), Some(ItemState::Cancelled))
            ]
        );
        // What a push would carry is what the conversation returns, question metadata included.
        assert_eq!(items[0], update.item);
        assert_eq!(items[1], cancelled.item);
        assert_eq!(
            cancelled.item.question.as_ref().map(|m| m.state),
            Some(pacerelle_core::question::QuestionState::Cancelled)
        );
        store
            .as_store()
            .put_notification(
                "ag_1",
                "n2",
                &[DeviceEnvelope {
                    device_id: "dv_1".into(),
                    envelope: "AQID".into(),
                }],
                Timestamp(31),
            )
            .await
            .expect("the other kinds are still admitted");
    }
}
