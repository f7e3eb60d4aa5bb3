//! The SQLite steps of the question writes ([`crate::store::questions`]), on the writer's connection: the
//! writer is the only one, so an agent's lock is held already and the rows need no locking.

use pacerelle_core::Timestamp;
use pacerelle_core::question::QuestionState;
use pacerelle_core::wire::{DeviceEnvelope, ItemState};
use rusqlite::{Connection, OptionalExtension, params};

use super::Result;
use crate::store::questions::{
    AnswerRow, KeptAnswer, NewItem, NewQuestionRow, QuestionTx, QueuedEvent, StoredUpdate,
};
use crate::store::rows::QuestionRow;

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
            approvals: r.get("approvals")?,
            answers: r.get("answers")?,
        })
    }
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

/// The writer's connection, as the question writes take it.
pub(crate) struct Lite<'c>(pub &'c Connection);

impl QuestionTx for Lite<'_> {
    async fn lock_agent(&mut self, _agent_id: &str) -> Result<()> {
        Ok(())
    }

    async fn try_lock_agent(&mut self, _agent_id: &str) -> Result<bool> {
        Ok(true)
    }

    async fn question(&mut self, agent_id: &str, question_id: &str) -> Result<Option<QuestionRow>> {
        let sql = concat!(
            "SELECT ",
            question_columns!(),
            " FROM questions q JOIN items i ON i.seq = q.item_seq
             WHERE i.agent_id = ?1 AND i.kind = 'question' AND i.item_id = ?2"
        );
        let mut statement = self.0.prepare_cached(sql)?;
        Ok(statement
            .query_row(params![agent_id, question_id], QuestionRow::from_row)
            .optional()?)
    }

    async fn question_at(&mut self, seq: i64) -> Result<QuestionRow> {
        row_at(self.0, seq)
    }

    async fn sealed_for(&mut self, seq: i64, device_id: &str) -> Result<Option<String>> {
        let mut statement = self
            .0
            .prepare_cached("SELECT envelope FROM item_envelopes WHERE item_seq = ?1 AND device_id = ?2")?;
        Ok(statement
            .query_row(params![seq, device_id], |r| r.get(0))
            .optional()?)
    }

    async fn device_active(&mut self, agent_id: &str, device_id: &str) -> Result<bool> {
        Ok(self
            .0
            .prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM devices WHERE agent_id = ?1 AND device_id = ?2 AND revoked_at IS NULL)",
            )?
            .query_row(params![agent_id, device_id], |r| r.get(0))?)
    }

    /// Through the index `questions_open_by_agent`, which holds only pending questions.
    async fn open_questions(&mut self, agent_id: &str, cap: u32, now: Timestamp) -> Result<i64> {
        Ok(self
            .0
            .prepare_cached(
                "SELECT COUNT(*) FROM (SELECT 1 FROM questions INDEXED BY questions_open_by_agent
                                   WHERE agent_id = ?1 AND state = 'pending' AND expires_at > ?2
                                   LIMIT ?3)",
            )?
            .query_row(params![agent_id, now.millis(), i64::from(cap)], |r| r.get(0))?)
    }

    async fn notification(&mut self, agent_id: &str, id: &str) -> Result<Option<(i64, i64)>> {
        let mut statement = self.0.prepare_cached(
            "SELECT seq, created_at FROM items WHERE agent_id = ?1 AND kind = 'notification' AND item_id = ?2",
        )?;
        Ok(statement
            .query_row(params![agent_id, id], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?)
    }

    async fn insert_item(&mut self, item: &NewItem<'_>) -> Result<i64> {
        let mut statement = self.0.prepare_cached(
            "INSERT INTO items (agent_id, kind, item_id, envelope, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5) RETURNING seq",
        )?;
        let values = params![
            item.agent_id,
            item.kind,
            item.item_id,
            item.envelope,
            item.created_at.millis()
        ];
        Ok(statement.query_row(values, |r| r.get(0))?)
    }

    async fn insert_envelopes(&mut self, seq: i64, envelopes: &[DeviceEnvelope]) -> Result<()> {
        let mut insert = self.0.prepare_cached(
            "INSERT INTO item_envelopes (item_seq, device_id, envelope) VALUES (?1, ?2, ?3)",
        )?;
        for e in envelopes {
            insert.execute(params![seq, e.device_id, e.envelope])?;
        }
        Ok(())
    }

    async fn insert_question(&mut self, seq: i64, row: &NewQuestionRow<'_>) -> Result<()> {
        let mut statement = self.0.prepare_cached(
            "INSERT INTO questions (item_seq, agent_id, kind, state, expires_at, user_id, approvals)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )?;
        let expires_at = row.expires_at.millis();
        statement.execute(params![
            seq,
            row.agent_id,
            row.kind,
            row.state,
            expires_at,
            row.user_id,
            row.approvals
        ])?;
        Ok(())
    }

    async fn has_answer(&mut self, seq: i64, device_id: &str) -> Result<bool> {
        Ok(self
            .0
            .prepare_cached("SELECT EXISTS (SELECT 1 FROM approvals WHERE item_seq = ?1 AND device_id = ?2)")?
            .query_row(params![seq, device_id], |r| r.get(0))?)
    }

    async fn keep_answer(&mut self, seq: i64, answer: &KeptAnswer<'_>) -> Result<i64> {
        self.0
            .prepare_cached(
                "INSERT INTO approvals (item_seq, device_id, answered_at, envelope, copy)
                 VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (item_seq, device_id) DO NOTHING",
            )?
            .execute(params![
                seq,
                answer.device_id,
                answer.answered_at.millis(),
                answer.envelope,
                answer.copy
            ])?;
        Ok(self
            .0
            .prepare_cached("SELECT COUNT(*) FROM approvals WHERE item_seq = ?1")?
            .query_row([seq], |r| r.get(0))?)
    }

    async fn enqueue_push(&mut self, agent_id: &str, seq: i64, now: Timestamp) -> Result<u64> {
        super::push::enqueue(self.0, agent_id, seq, now)
    }

    async fn close(&mut self, seq: i64, state: QuestionState, closed_at: Timestamp) -> Result<u64> {
        let mut statement = self.0.prepare_cached(
            "UPDATE questions SET state = ?2, closed_at = ?3 WHERE item_seq = ?1 AND state = 'pending'",
        )?;
        Ok(statement.execute(params![seq, state.as_str(), closed_at.millis()])? as u64)
    }

    async fn store_answer(&mut self, seq: i64, a: &AnswerRow<'_>) -> Result<u64> {
        let mut statement = self.0.prepare_cached(
            "UPDATE questions SET state = ?2, closed_at = ?3, answered_by = ?4,
                    answered_by_name = (SELECT name FROM devices WHERE device_id = ?4),
                    answered_at = ?3, answer_envelope = ?5, answer_copy = ?6, channel = ?7
             WHERE item_seq = ?1 AND state = 'pending'",
        )?;
        let at = a.answered_at.millis();
        Ok(statement.execute(params![
            seq,
            a.state,
            at,
            a.device_id,
            a.envelope,
            a.copy,
            a.channel
        ])? as u64)
    }

    async fn has_webhook(&mut self, agent_id: &str) -> Result<bool> {
        let mut statement = self
            .0
            .prepare_cached("SELECT EXISTS (SELECT 1 FROM webhooks WHERE agent_id = ?1)")?;
        Ok(statement.query_row([agent_id], |r| r.get(0))?)
    }

    async fn insert_event(&mut self, e: &QueuedEvent<'_>) -> Result<bool> {
        let mut statement = self.0.prepare_cached(
            "INSERT OR IGNORE INTO webhook_events
             (event_id, agent_id, event_type, question_seq, question_id, body, state, created_at, next_attempt_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'pending', ?7, ?7)",
        )?;
        let at = e.created_at.millis();
        let values = params![
            e.event_id,
            e.agent_id,
            e.event_type,
            e.question_seq,
            e.question_id,
            e.body,
            at
        ];
        Ok(statement.execute(values)? == 1)
    }

    async fn outbox(&mut self, agent_id: &str) -> Result<(i64, Option<i64>)> {
        let mut statement = self.0.prepare_cached(
            "SELECT (SELECT COUNT(*) FROM webhook_events WHERE agent_id = ?1 AND state = 'pending'),
                    (SELECT max_pending FROM webhook_outbox_cap)",
        )?;
        Ok(statement.query_row([agent_id], |r| Ok((r.get(0)?, r.get(1)?)))?)
    }

    async fn drop_oldest(&mut self, agent_id: &str, count: i64, error: &str) -> Result<u64> {
        let mut statement = self.0.prepare_cached(
            "UPDATE webhook_events SET state = 'failed', next_attempt_at = NULL, last_error = ?3
             WHERE event_id IN (SELECT event_id FROM webhook_events WHERE agent_id = ?1 AND state = 'pending'
                                ORDER BY created_at, rowid LIMIT ?2)",
        )?;
        Ok(statement.execute(params![agent_id, count, error])? as u64)
    }

    async fn update(&mut self, row: &QuestionRow, to: ItemState, now: Timestamp) -> Result<StoredUpdate> {
        super::updates::insert_update(self.0, &row.agent_id, row.seq, to, now)
    }

    async fn due_questions(&mut self, now: Timestamp, limit: u32) -> Result<Vec<(i64, String)>> {
        let mut statement = self.0.prepare_cached(
            "SELECT item_seq, agent_id FROM questions WHERE state = 'pending' AND expires_at <= ?1
             ORDER BY expires_at LIMIT ?2",
        )?;
        let rows = statement.query_map(params![now.millis(), i64::from(limit)], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::rows::{ANSWERED, EXPIRED};
    use crate::store::sqlite::SqliteStore;
    use crate::store::suite::questions::{self as suite, events};
    use crate::store::{StateFilter, Store, Transition};
    use pacerelle_core::Cursor;
    use pacerelle_core::question::Channel;

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
        suite::answers_after_migration(&store.as_store()).await;
        let q3 = suite::read(&store.as_store(), "q3", now).await;
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
            .as_store()
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
            .as_store()
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
            .as_store()
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
