//! The PostgreSQL steps of the question writes ([`crate::store::questions`]), in a transaction of their own.
//!
//! What PostgreSQL's concurrent writers add (ADR 0003): every write inserts items (the question or notification
//! itself, or the `update` item of a closing), so each first locks the agent's `agent_counts` row
//! ([`super::lock_agent`]), which also serialises the writes of one agent's questions; the expirer claims due
//! questions with `FOR UPDATE SKIP LOCKED` and takes each agent's lock with `SKIP LOCKED` too; the devices an
//! item is sealed for are read `FOR SHARE`, so that a revocation under way finishes first.

use pacerelle_core::question::QuestionState;

use super::prelude::*;
use crate::store::questions::{
    AnswerRow, KeptAnswer, NewItem, NewQuestionRow, QuestionTx, QueuedEvent, StoredUpdate,
};
use crate::store::rows::QuestionRow;

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

/// A transaction's connection, as the question writes take it.
pub(crate) struct Pg<'c>(pub &'c mut PgConnection);

impl QuestionTx for Pg<'_> {
    async fn lock_agent(&mut self, agent_id: &str) -> Result<()> {
        super::lock_agent(&mut *self.0, agent_id).await
    }

    async fn try_lock_agent(&mut self, agent_id: &str) -> Result<bool> {
        let locked: Option<String> = sqlx::query_scalar(
            "SELECT agent_id FROM agent_counts WHERE agent_id = $1 FOR UPDATE SKIP LOCKED",
        )
        .bind(agent_id)
        .fetch_optional(&mut *self.0)
        .await?;
        Ok(locked.is_some())
    }

    async fn question(&mut self, agent_id: &str, question_id: &str) -> Result<Option<QuestionRow>> {
        let sql = concat!(
            "SELECT ",
            question_columns!(),
            " FROM questions q JOIN items i ON i.seq = q.item_seq
             WHERE i.agent_id = $1 AND i.kind = 'question' AND i.item_id = $2 FOR UPDATE OF q"
        );
        let query = sqlx::query_as(sql).bind(agent_id).bind(question_id);
        Ok(query.fetch_optional(&mut *self.0).await?)
    }

    async fn question_at(&mut self, seq: i64) -> Result<QuestionRow> {
        row_at(&mut *self.0, seq).await
    }

    async fn sealed_for(&mut self, seq: i64, device_id: &str) -> Result<Option<String>> {
        let query =
            sqlx::query_scalar("SELECT envelope FROM item_envelopes WHERE item_seq = $1 AND device_id = $2");
        Ok(query
            .bind(seq)
            .bind(device_id)
            .fetch_optional(&mut *self.0)
            .await?)
    }

    /// The device's row is read `FOR SHARE`, so that it cannot be revoked before this transaction ends.
    async fn device_active(&mut self, agent_id: &str, device_id: &str) -> Result<bool> {
        let active: Option<bool> = sqlx::query_scalar(
            "SELECT revoked_at IS NULL FROM devices WHERE agent_id = $1 AND device_id = $2 FOR SHARE",
        )
        .bind(agent_id)
        .bind(device_id)
        .fetch_optional(&mut *self.0)
        .await?;
        Ok(active == Some(true))
    }

    /// Through the index `questions_open_by_agent`, which holds only pending questions.
    async fn open_questions(&mut self, agent_id: &str, cap: u32, now: Timestamp) -> Result<i64> {
        let query = sqlx::query_scalar(
            "SELECT COUNT(*) FROM (SELECT 1 FROM questions
                                   WHERE agent_id = $1 AND state = 'pending' AND expires_at > $2
                                   LIMIT $3) AS open",
        );
        let query = query.bind(agent_id).bind(now.millis()).bind(i64::from(cap));
        Ok(query.fetch_one(&mut *self.0).await?)
    }

    async fn notification(&mut self, agent_id: &str, id: &str) -> Result<Option<(i64, i64)>> {
        let query = sqlx::query_as(
            "SELECT seq, created_at FROM items WHERE agent_id = $1 AND kind = 'notification' AND item_id = $2",
        );
        Ok(query.bind(agent_id).bind(id).fetch_optional(&mut *self.0).await?)
    }

    async fn insert_item(&mut self, item: &NewItem<'_>) -> Result<i64> {
        let query = sqlx::query_scalar(
            "INSERT INTO items (agent_id, kind, item_id, envelope, created_at)
             VALUES ($1, $2, $3, $4, $5) RETURNING seq",
        );
        let query = query
            .bind(item.agent_id)
            .bind(item.kind)
            .bind(item.item_id)
            .bind(item.envelope);
        Ok(query
            .bind(item.created_at.millis())
            .fetch_one(&mut *self.0)
            .await?)
    }

    /// In one statement.
    async fn insert_envelopes(&mut self, seq: i64, envelopes: &[DeviceEnvelope]) -> Result<()> {
        let devices: Vec<&str> = envelopes.iter().map(|e| e.device_id.as_str()).collect();
        let sealed: Vec<&str> = envelopes.iter().map(|e| e.envelope.as_str()).collect();
        sqlx::query(
            "INSERT INTO item_envelopes (item_seq, device_id, envelope)
             SELECT $1, d, e FROM UNNEST($2::TEXT[], $3::TEXT[]) AS t (d, e)",
        )
        .bind(seq)
        .bind(devices)
        .bind(sealed)
        .execute(&mut *self.0)
        .await?;
        Ok(())
    }

    async fn insert_question(&mut self, seq: i64, row: &NewQuestionRow<'_>) -> Result<()> {
        let query = sqlx::query(
            "INSERT INTO questions (item_seq, agent_id, kind, state, expires_at, user_id, approvals)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        );
        let query = query.bind(seq).bind(row.agent_id).bind(row.kind).bind(row.state);
        query
            .bind(row.expires_at.millis())
            .bind(row.user_id)
            .bind(row.approvals)
            .execute(&mut *self.0)
            .await?;
        Ok(())
    }

    async fn has_answer(&mut self, seq: i64, device_id: &str) -> Result<bool> {
        Ok(sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM approvals WHERE item_seq = $1 AND device_id = $2)",
        )
        .bind(seq)
        .bind(device_id)
        .fetch_one(&mut *self.0)
        .await?)
    }

    async fn keep_answer(&mut self, seq: i64, answer: &KeptAnswer<'_>) -> Result<i64> {
        sqlx::query(
            "INSERT INTO approvals (item_seq, device_id, answered_at, envelope, copy)
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (item_seq, device_id) DO NOTHING",
        )
        .bind(seq)
        .bind(answer.device_id)
        .bind(answer.answered_at.millis())
        .bind(answer.envelope)
        .bind(answer.copy)
        .execute(&mut *self.0)
        .await?;
        Ok(
            sqlx::query_scalar("SELECT COUNT(*) FROM approvals WHERE item_seq = $1")
                .bind(seq)
                .fetch_one(&mut *self.0)
                .await?,
        )
    }

    async fn enqueue_push(&mut self, agent_id: &str, seq: i64, now: Timestamp) -> Result<u64> {
        super::push::enqueue(&mut *self.0, agent_id, seq, now).await
    }

    async fn close(&mut self, seq: i64, state: QuestionState, closed_at: Timestamp) -> Result<u64> {
        let query = sqlx::query(
            "UPDATE questions SET state = $2, closed_at = $3 WHERE item_seq = $1 AND state = 'pending'",
        );
        let query = query.bind(seq).bind(state.as_str()).bind(closed_at.millis());
        Ok(query.execute(&mut *self.0).await?.rows_affected())
    }

    async fn store_answer(&mut self, seq: i64, a: &AnswerRow<'_>) -> Result<u64> {
        let query = sqlx::query(
            "UPDATE questions SET state = $2, closed_at = $3, answered_by = $4,
                    answered_by_name = (SELECT name FROM devices WHERE device_id = $4),
                    answered_at = $3, answer_envelope = $5, answer_copy = $6, channel = $7
             WHERE item_seq = $1 AND state = 'pending'",
        );
        let query = query
            .bind(seq)
            .bind(a.state)
            .bind(a.answered_at.millis())
            .bind(a.device_id);
        let query = query.bind(a.envelope).bind(a.copy).bind(a.channel);
        Ok(query.execute(&mut *self.0).await?.rows_affected())
    }

    /// The webhook row is read `FOR SHARE`: a removal under way finishes first (and no event is queued), or
    /// waits until the event is stored (and then fails it with the other pending ones).
    async fn has_webhook(&mut self, agent_id: &str) -> Result<bool> {
        let query =
            sqlx::query_scalar::<_, String>("SELECT agent_id FROM webhooks WHERE agent_id = $1 FOR SHARE");
        Ok(query.bind(agent_id).fetch_optional(&mut *self.0).await?.is_some())
    }

    async fn insert_event(&mut self, e: &QueuedEvent<'_>) -> Result<bool> {
        let query = sqlx::query(
            "INSERT INTO webhook_events
             (event_id, agent_id, event_type, question_seq, question_id, body, state, created_at, next_attempt_at)
             VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7, $7)
             ON CONFLICT DO NOTHING",
        );
        let query = query
            .bind(e.event_id)
            .bind(e.agent_id)
            .bind(e.event_type)
            .bind(e.question_seq);
        let query = query.bind(e.question_id).bind(e.body).bind(e.created_at.millis());
        Ok(query.execute(&mut *self.0).await?.rows_affected() == 1)
    }

    async fn outbox(&mut self, agent_id: &str) -> Result<(i64, Option<i64>)> {
        let query = sqlx::query_as(
            "SELECT (SELECT COUNT(*) FROM webhook_events WHERE agent_id = $1 AND state = 'pending'),
                    (SELECT max_pending FROM webhook_outbox_cap)",
        );
        Ok(query.bind(agent_id).fetch_one(&mut *self.0).await?)
    }

    async fn drop_oldest(&mut self, agent_id: &str, count: i64, error: &str) -> Result<u64> {
        let query = sqlx::query(
            "UPDATE webhook_events SET state = 'failed', next_attempt_at = NULL, last_error = $3
             WHERE event_id IN (SELECT event_id FROM webhook_events WHERE agent_id = $1 AND state = 'pending'
                                ORDER BY created_at, rowid LIMIT $2)",
        );
        let query = query.bind(agent_id).bind(count).bind(error);
        Ok(query.execute(&mut *self.0).await?.rows_affected())
    }

    async fn update(&mut self, row: &QuestionRow, to: ItemState, now: Timestamp) -> Result<StoredUpdate> {
        super::updates::insert_update(&mut *self.0, &row.agent_id, row.seq, to, now).await
    }

    /// Claimed with `FOR UPDATE SKIP LOCKED` until the transaction ends.
    async fn due_questions(&mut self, now: Timestamp, limit: u32) -> Result<Vec<(i64, String)>> {
        let query = sqlx::query_as(
            "SELECT item_seq, agent_id FROM questions WHERE state = 'pending' AND expires_at <= $1
             ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED",
        );
        Ok(query
            .bind(now.millis())
            .bind(i64::from(limit))
            .fetch_all(&mut *self.0)
            .await?)
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
    use crate::store::{ItemPut, LogQuery, QuestionPut, StateFilter, Store, Transition};
    use pacerelle_core::question::Channel;
    use pacerelle_core::wire::DeviceQuestion;

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
        suite::answers_after_migration(&store.as_store()).await;
        let stored: Option<String> = sqlx::query_scalar("SELECT channel FROM questions WHERE item_seq = 1")
            .fetch_one(&store.pool)
            .await
            .expect("a row");
        assert_eq!(stored.as_deref(), Some("phone"));

        // The new rule: an answer at the host has no device; a phone answer keeps its device.
        sqlx::query(
            "UPDATE questions SET state = 'answered', closed_at = 11, answered_at = 11, answer_envelope = 'HOST',
                                  channel = 'host'
             WHERE item_seq = 2",
        )
        .execute(&store.pool)
        .await
        .expect("an answer at the host is admitted");
        let q2 = suite::read(&store.as_store(), "q2", now).await;
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
            .as_store()
            .put_notification("ag_1", "n1", &envelopes()[..1], Timestamp(T0 + 2))
            .await
            .expect("ok");
        let ItemPut::Stored(first, true) = note else {
            panic!("stored")
        };
        let again = store
            .as_store()
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
            store.as_store().put_notification("ag_1", "n2", &envelopes(), Timestamp(T0 + 4)).await.expect("ok"),
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
            .as_store()
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
                        .as_store()
                        .answer_question("ag_1", device, &id, "AQID", None, Timestamp(T0 + 10 + i as i64))
                        .await
                        .expect("ok");
                    (matches!(t, Transition::Done(_)), e.closed, e.event)
                }));
            }
            let (store2, id2) = (store.clone(), id.clone());
            tasks.push(tokio::spawn(async move {
                let (t, e) = store2
                    .as_store()
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
                    let pass = instance.as_store().expire_due(now, 7).await.expect("a pass");
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
                        .as_store()
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
