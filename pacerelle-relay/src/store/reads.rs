//! Reads written once: each method here runs one SQL text on whichever database the store holds — the same
//! text for both where the dialects agree (both drivers take `$N` placeholders), one per dialect where they do
//! not ([`Db::pick`]) — and makes the wire's values of its rows once. A backend keeps a read only where what it
//! does differs beyond its SQL: a lock, a claim, a snapshot over several statements, the SQLite writer's own
//! connection.

use pacerelle_core::Cursor;
use pacerelle_core::Timestamp;
use pacerelle_core::wire::{
    AgentInfo, CheckpointRecord, ConversationItem, Delivery, DeviceInfo, DeviceQuestion, MessageCounts,
    QuestionView, RosterView, SessionInfo, WebhookInfo,
};
use sqlx::{PgPool, SqlitePool};

use crate::store::principals::Cached;
use crate::store::rows::{
    ConversationRow, DeliveryRow, DeviceQuestionRow, DeviceRow, QuestionRow, delivery, device_info,
};
use crate::store::types::roster_view;
use pacerelle_core::ids::DEFAULT_SESSION;

use crate::store::{
    Caller, Lease, LogPage, LogQuery, Marked, OpenSessionRow, OutboxFigures, Outboxes, PairingRow, Principal,
    Renewal, SessionRow, StateFilter, StatusFacts, Store, cursor, lease_ttl_ms, seq_of, ts,
};

type Result<T, E = crate::error::StoreError> = std::result::Result<T, E>;

/// The pool of the database the store holds, for a read that runs alike on both.
#[derive(Debug, Clone, Copy)]
pub(in crate::store) enum Db<'a> {
    /// The SQLite backend's read pool.
    Sqlite(&'a SqlitePool),
    /// The PostgreSQL backend's pool.
    Postgres(&'a PgPool),
}

impl Db<'_> {
    /// The SQL text of this database's dialect, for a read whose text differs between the two.
    pub(in crate::store) fn pick(self, sqlite: &'static str, postgres: &'static str) -> &'static str {
        match self {
            Db::Sqlite(_) => sqlite,
            Db::Postgres(_) => postgres,
        }
    }
}

/// Runs a sqlx query, built by the same expression for either database, with `$how` (`fetch_one`,
/// `fetch_optional`, `fetch_all`) on the pool `$db` names; the expression is type-checked once per database.
macro_rules! on_db {
    ($db:expr, $how:ident, $query:expr) => {
        match $db {
            $crate::store::reads::Db::Sqlite(pool) => $query.$how(pool).await,
            $crate::store::reads::Db::Postgres(pool) => $query.$how(pool).await,
        }
    };
}

/// The SQL text of the question reads: a state filter's `NULL` and the log's optional bounds, typed so that
/// PostgreSQL can infer the parameters (SQLite ignores the casts' types).
macro_rules! typed {
    ($param:literal, $ty:literal) => {
        concat!("CAST(", $param, " AS ", $ty, ")")
    };
}

#[cfg(test)]
impl crate::store::sqlite::SqliteStore {
    /// This store as the relay holds it, for tests of one backend that read through the shared reads.
    pub(crate) fn as_store(&self) -> Store {
        Store::Sqlite(self.clone())
    }
}

#[cfg(test)]
impl crate::store::postgres::PgStore {
    /// This store as the relay holds it, for tests of one backend that read through the shared reads.
    pub(crate) fn as_store(&self) -> Store {
        Store::Postgres(self.clone())
    }
}

impl Store {
    /// The pool of the store's database.
    pub(in crate::store) fn db(&self) -> Db<'_> {
        match self {
            Store::Sqlite(s) => Db::Sqlite(s.pool()),
            Store::Postgres(p) => Db::Postgres(p.pool()),
        }
    }

    /// Whether the database answers a read and holds every migration this relay knows (`GET /readyz`).
    /// `Ok(false)` when it lags behind this relay's schema (a database replaced under a running relay, or
    /// migrated by an older relay's instance).
    pub(crate) async fn ready(&self) -> Result<bool> {
        let migrator = match self {
            Store::Sqlite(_) => &crate::store::sqlite::MIGRATOR,
            Store::Postgres(_) => &crate::store::postgres::MIGRATOR,
        };
        let newest = migrator.iter().map(|m| m.version).max().unwrap_or(0);
        let applied: Option<i64> = on_db!(
            self.db(),
            fetch_one,
            sqlx::query_scalar("SELECT MAX(version) FROM _sqlx_migrations WHERE success")
        )?;
        Ok(applied.unwrap_or(0) >= newest)
    }

    /// The agent, if it is registered.
    pub(crate) async fn agent(&self, agent_id: &str) -> Result<Option<AgentInfo>> {
        let row: Option<(String, String, i64)> = on_db!(
            self.db(),
            fetch_optional,
            sqlx::query_as("SELECT agent_id, name, created_at FROM agents WHERE agent_id = $1")
                .bind(agent_id)
        )?;
        Ok(row.map(|(agent_id, name, created_at)| AgentInfo {
            agent_id,
            name,
            created_at: ts(created_at),
        }))
    }

    /// The agent or device named `id`, from memory when it was found before ([`crate::store::principals`]),
    /// else read (one query). Agent ids and device ids never collide: registration and pairing refuse an id
    /// that the other already uses. On PostgreSQL, a revocation committed by any instance is forgotten here when
    /// its notification arrives, and an entry is read again after `PRINCIPAL_MAX_AGE`
    /// in any case. The secret is compared with the hash in constant time by the caller ([`crate::auth`]).
    pub(crate) async fn principal(&self, id: &str) -> Result<Option<Principal>> {
        let generation = match self.principals().get(id) {
            Cached::Hit(principal) => return Ok(Some(principal)),
            Cached::Miss { generation } => generation,
        };
        // The device's agent (none for an agent), its role, the credential's hash, revoked.
        type Found = (Option<String>, Option<String>, Vec<u8>, bool);
        let row: Option<Found> = on_db!(
            self.db(),
            fetch_optional,
            sqlx::query_as(
                "SELECT owner, role, hash, revoked FROM (
                     SELECT 0 AS rank, CAST(NULL AS TEXT) AS owner, CAST(NULL AS TEXT) AS role, auth_hash AS hash,
                            FALSE AS revoked
                     FROM agents WHERE agent_id = $1
                     UNION ALL
                     SELECT 1, agent_id, role, token_hash, revoked_at IS NOT NULL
                     FROM devices WHERE device_id = $1
                 ) AS found
                 ORDER BY rank LIMIT 1",
            )
            .bind(id)
        )?;
        let found = row
            .map(|(owner, role, hash, revoked)| match owner {
                None => Ok::<_, crate::error::StoreError>(Principal::Agent {
                    agent_id: id.to_string(),
                    hash,
                }),
                Some(agent_id) => Ok(Principal::Device {
                    agent_id,
                    device_id: id.to_string(),
                    role: crate::store::rows::role(role.as_deref().unwrap_or_default())?,
                    hash,
                    revoked,
                }),
            })
            .transpose()?;
        if let Some(principal) = &found {
            self.principals().keep(id, principal, generation);
        }
        Ok(found)
    }

    /// The agent's devices, revoked ones included, in the order they paired.
    pub(crate) async fn devices(&self, agent_id: &str) -> Result<Vec<DeviceInfo>> {
        let rows: Vec<DeviceRow> = on_db!(
            self.db(),
            fetch_all,
            sqlx::query_as(concat!(
                "SELECT ",
                device_columns!(),
                " FROM devices WHERE agent_id = $1 ORDER BY created_at, rowid"
            ))
            .bind(agent_id)
        )?;
        rows.into_iter().map(device_info).collect()
    }

    /// One device of this agent, revoked or not.
    pub(crate) async fn device(&self, agent_id: &str, device_id: &str) -> Result<Option<DeviceInfo>> {
        let row: Option<DeviceRow> = on_db!(
            self.db(),
            fetch_optional,
            sqlx::query_as(concat!(
                "SELECT ",
                device_columns!(),
                " FROM devices WHERE agent_id = $1 AND device_id = $2"
            ))
            .bind(agent_id)
            .bind(device_id)
        )?;
        row.map(device_info).transpose()
    }

    /// The newest roster of the agent; version 0 and no envelope when none was stored.
    pub(crate) async fn roster(&self, agent_id: &str) -> Result<RosterView> {
        let row: Option<(i64, String)> = on_db!(
            self.db(),
            fetch_optional,
            sqlx::query_as("SELECT version, envelope FROM rosters WHERE agent_id = $1").bind(agent_id)
        )?;
        Ok(roster_view(row))
    }

    /// The latest checkpoints, latest first.
    pub(crate) async fn checkpoints(&self, agent_id: &str, limit: u32) -> Result<Vec<CheckpointRecord>> {
        let rows: Vec<(String, String, i64)> = on_db!(
            self.db(),
            fetch_all,
            sqlx::query_as(
                "SELECT item_id, COALESCE(envelope, ''), created_at FROM items
                 WHERE agent_id = $1 AND kind = 'checkpoint' ORDER BY seq DESC LIMIT $2",
            )
            .bind(agent_id)
            .bind(i64::from(limit))
        )?;
        Ok(rows
            .into_iter()
            .map(|(checkpoint_id, envelope, created_at)| CheckpointRecord {
                checkpoint_id,
                envelope,
                created_at: ts(created_at),
            })
            .collect())
    }

    /// The offer (or its tombstone) stored under `pairing_id`.
    pub(crate) async fn pairing(&self, pairing_id: &str) -> Result<Option<PairingRow>> {
        type Row = (
            String,
            String,
            String,
            Option<String>,
            i64,
            Option<i64>,
            Option<String>,
        );
        let row: Option<Row> = on_db!(
            self.db(),
            fetch_optional,
            sqlx::query_as(
                "SELECT pairing_id, agent_id, device_id, offer, expires_at, claimed_at, label
                 FROM pairings WHERE pairing_id = $1",
            )
            .bind(pairing_id)
        )?;
        Ok(row.map(
            |(pairing_id, agent_id, device_id, offer, expires_at, claimed_at, label)| PairingRow {
                pairing_id,
                agent_id,
                device_id,
                offer,
                expires_at: ts(expires_at),
                claimed_at: claimed_at.map(ts),
                label,
            },
        ))
    }

    /// The agent's webhook (never its secret).
    pub(crate) async fn webhook(&self, agent_id: &str) -> Result<WebhookInfo> {
        let row: Option<(String, i64)> = on_db!(
            self.db(),
            fetch_optional,
            sqlx::query_as("SELECT url, updated_at FROM webhooks WHERE agent_id = $1").bind(agent_id)
        )?;
        Ok(WebhookInfo {
            url: row.as_ref().map(|(url, _)| url.clone()),
            updated_at: row.map(|(_, at)| ts(at)),
        })
    }

    /// Renews the lease if this session still holds it: read first, then one statement that renews only a
    /// lease still held when it runs.
    pub(crate) async fn heartbeat(
        &self,
        agent_id: &str,
        session_id: &str,
        now: Timestamp,
    ) -> Result<Renewal> {
        type Row = (String, i64, i64, Option<i64>, String, Option<String>);
        let row: Option<Row> = on_db!(
            self.db(),
            fetch_optional,
            sqlx::query_as(
                "SELECT host, since, last_heartbeat_at, ended_at, name, folder FROM sessions
                 WHERE agent_id = $1 AND session_id = $2",
            )
            .bind(agent_id)
            .bind(session_id)
        )?;
        let Some((host, since, beat, ended_at, name, folder)) = row else {
            return Ok(Renewal::NotFound);
        };
        if ended_at.is_some() || beat.saturating_add(lease_ttl_ms()) <= now.millis() {
            return Ok(Renewal::Lost);
        }
        let session = super::commands::SessionAt {
            agent_id,
            session_id,
            now,
        };
        let renewed = match self {
            Store::Sqlite(s) => s.renew(&session).await?,
            Store::Postgres(p) => p.renew(&session).await?,
        };
        if !renewed {
            return Ok(Renewal::Lost);
        }
        Ok(Renewal::Renewed(SessionInfo {
            session_id: session_id.to_string(),
            host,
            since: ts(since),
            lease_expires_at: now.plus_millis(lease_ttl_ms()),
            name,
            folder,
        }))
    }

    /// Who consumes the inbox with a request that names `session_id` (or none), at `now` ([`Caller`]).
    pub(crate) async fn caller(
        &self,
        agent_id: &str,
        session_id: Option<&str>,
        now: Timestamp,
    ) -> Result<Caller> {
        let named: Option<String> = match session_id {
            Some(id) => on_db!(
                self.db(),
                fetch_optional,
                sqlx::query_scalar("SELECT name FROM sessions WHERE agent_id = $1 AND session_id = $2")
                    .bind(agent_id)
                    .bind(id)
            )?,
            None => None,
        };
        let known = named.is_some();
        let name = named.unwrap_or_else(|| DEFAULT_SESSION.to_string());
        let row: Option<SessionRow> = on_db!(
            self.db(),
            fetch_optional,
            sqlx::query_as(
                "SELECT session_id, host, since, last_heartbeat_at FROM sessions
                 WHERE agent_id = $1 AND name = $2 AND ended_at IS NULL",
            )
            .bind(agent_id)
            .bind(&name)
        )?;
        let lease = row.and_then(|row| Lease::live(row, name.clone(), now));
        Ok(Caller { name, lease, known })
    }

    /// The agent's open sessions (those whose lease lapsed included), the one open longest first, each with its
    /// tasks delivered and not processed. The partial index of open sessions bounds the sessions read, that of
    /// unprocessed tasks the tasks.
    pub(crate) async fn sessions(&self, agent_id: &str) -> Result<Vec<OpenSessionRow>> {
        self.marks().settle(agent_id, 0).await;
        type Row = (String, String, String, Option<String>, i64, i64, i64, Option<i64>);
        let rows: Vec<Row> = on_db!(
            self.db(),
            fetch_all,
            sqlx::query_as(
                "SELECT s.session_id, s.name, s.host, s.folder, s.since, s.last_heartbeat_at,
                        (SELECT COUNT(*) FROM items i
                         WHERE i.agent_id = s.agent_id AND i.kind = 'message' AND i.processed_at IS NULL
                           AND i.delivered_at IS NOT NULL AND i.session_name = s.name),
                        (SELECT MIN(i.delivered_at) FROM items i
                         WHERE i.agent_id = s.agent_id AND i.kind = 'message' AND i.processed_at IS NULL
                           AND i.delivered_at IS NOT NULL AND i.session_name = s.name)
                 FROM sessions s WHERE s.agent_id = $1 AND s.ended_at IS NULL
                 ORDER BY s.since, s.session_id",
            )
            .bind(agent_id)
        )?;
        Ok(rows
            .into_iter()
            .map(
                |(session_id, name, host, folder, since, beat, in_progress, oldest)| OpenSessionRow {
                    session_id,
                    name,
                    host,
                    folder,
                    since: ts(since),
                    last_heartbeat_at: ts(beat),
                    in_progress: u64::try_from(in_progress).unwrap_or(0),
                    oldest_in_progress: oldest.map(ts),
                },
            )
            .collect())
    }

    /// The agent's webhook events, newest first.
    pub(crate) async fn deliveries(&self, agent_id: &str, limit: u32) -> Result<Vec<Delivery>> {
        let rows: Vec<DeliveryRow> = on_db!(
            self.db(),
            fetch_all,
            sqlx::query_as(
                "SELECT event_id, event_type, question_id, state, attempts, last_status, last_error, created_at,
                        delivered_at, next_attempt_at
                 FROM webhook_events WHERE agent_id = $1 ORDER BY created_at DESC, rowid DESC LIMIT $2",
            )
            .bind(agent_id)
            .bind(i64::from(limit))
        )?;
        Ok(rows.into_iter().map(delivery).collect())
    }

    /// The depth and age of the webhook and push outboxes (`GET /metrics`). The webhook count reads the partial
    /// index of pending events; the push outbox holds only pushes not yet delivered, so it is counted whole.
    pub(crate) async fn outboxes(&self) -> Result<Outboxes> {
        let webhook: (i64, Option<i64>) = on_db!(
            self.db(),
            fetch_one,
            sqlx::query_as("SELECT COUNT(*), MIN(created_at) FROM webhook_events WHERE state = 'pending'")
        )?;
        let push: (i64, Option<i64>) = on_db!(
            self.db(),
            fetch_one,
            sqlx::query_as("SELECT COUNT(*), MIN(created_at) FROM push_outbox")
        )?;
        Ok(Outboxes {
            webhook: OutboxFigures::of(webhook),
            push: OutboxFigures::of(push),
        })
    }

    /// The facts behind an agent's status, in one statement (one snapshot). It reads only what is unprocessed
    /// (the partial index `items_unprocessed`), the agent's stored-task counter (`agent_counts`) and its newest
    /// checkpoint: the time does not grow with the tasks processed. A delivered mark of this agent still being
    /// written by this relay is let commit first, so that the tasks a wait has handed out count as in progress,
    /// not as waiting.
    pub(crate) async fn status_facts(&self, agent_id: &str) -> Result<StatusFacts> {
        self.marks().settle(agent_id, 0).await;
        type Row = (i64, i64, Option<i64>, Option<i64>, Option<i64>, i64);
        let db = self.db();
        let sql = db.pick(
            "SELECT COALESCE(SUM(delivered_at IS NULL), 0),
                    COALESCE(SUM(delivered_at IS NOT NULL), 0),
                    MIN(delivered_at),
                    (SELECT messages FROM agent_counts WHERE agent_id = $1),
                    (SELECT created_at FROM items WHERE agent_id = $1 AND kind = 'checkpoint'
                     ORDER BY seq DESC LIMIT 1),
                    (SELECT COUNT(*) FROM devices WHERE agent_id = $1 AND revoked_at IS NULL)
             FROM items INDEXED BY items_unprocessed
             WHERE agent_id = $1 AND kind = 'message' AND processed_at IS NULL",
            "SELECT COUNT(*) FILTER (WHERE delivered_at IS NULL),
                    COUNT(*) FILTER (WHERE delivered_at IS NOT NULL),
                    MIN(delivered_at),
                    (SELECT messages FROM agent_counts WHERE agent_id = $1),
                    (SELECT created_at FROM items WHERE agent_id = $1 AND kind = 'checkpoint'
                     ORDER BY seq DESC LIMIT 1),
                    (SELECT COUNT(*) FROM devices WHERE agent_id = $1 AND revoked_at IS NULL)
             FROM items
             WHERE agent_id = $1 AND kind = 'message' AND processed_at IS NULL",
        );
        let (waiting, in_progress, oldest, stored, last_checkpoint, devices): Row =
            on_db!(db, fetch_one, sqlx::query_as(sql).bind(agent_id))?;
        let processed = stored.unwrap_or(0) - waiting - in_progress;
        let count = |n: i64| u64::try_from(n).unwrap_or(0);
        Ok(StatusFacts {
            messages: MessageCounts {
                waiting: count(waiting),
                in_progress: count(in_progress),
                processed: count(processed),
            },
            oldest_in_progress: oldest.map(ts),
            last_checkpoint_at: last_checkpoint.map(ts),
            devices: count(devices),
        })
    }

    /// How many questions of this agent are still open at `now`; with `device_id`, only those sent to that
    /// device that it has not answered yet (a question that needs several approvals stays open after one).
    /// The partial index of open questions (`questions_open_by_agent`) bounds the rows read.
    pub(crate) async fn open_question_count(
        &self,
        agent_id: &str,
        device_id: Option<&str>,
        now: Timestamp,
    ) -> Result<u64> {
        let sql = concat!(
            "SELECT COUNT(*) FROM questions q
             WHERE q.agent_id = $1 AND q.state = 'pending' AND q.expires_at > $2
               AND (",
            typed!("$3", "TEXT"),
            " IS NULL
                    OR (EXISTS (SELECT 1 FROM item_envelopes e WHERE e.item_seq = q.item_seq AND e.device_id = $3)
                        AND NOT EXISTS (SELECT 1 FROM approvals a
                                        WHERE a.item_seq = q.item_seq AND a.device_id = $3)))"
        );
        let db = self.db();
        let count: i64 = on_db!(
            db,
            fetch_one,
            sqlx::query_scalar(sql)
                .bind(agent_id)
                .bind(now.millis())
                .bind(device_id)
        )?;
        Ok(u64::try_from(count).unwrap_or(0))
    }

    /// A question of this agent, as of `now`.
    pub(crate) async fn question(
        &self,
        agent_id: &str,
        question_id: &str,
        now: Timestamp,
    ) -> Result<Option<QuestionView>> {
        let row: Option<QuestionRow> = on_db!(
            self.db(),
            fetch_optional,
            sqlx::query_as(concat!(
                "SELECT ",
                question_columns!(),
                " FROM questions q JOIN items i ON i.seq = q.item_seq
                 WHERE i.agent_id = $1 AND i.kind = 'question' AND i.item_id = $2"
            ))
            .bind(agent_id)
            .bind(question_id)
        )?;
        row.map(|row| row.view(now)).transpose()
    }

    /// The questions sealed for one device, in any state or in one, the oldest of the newest `limit` first,
    /// each with the envelope sealed for that device, as of `now`.
    pub(crate) async fn device_questions(
        &self,
        agent_id: &str,
        device_id: &str,
        filter: StateFilter,
        limit: u32,
        now: Timestamp,
    ) -> Result<Vec<DeviceQuestion>> {
        let rows: Vec<DeviceQuestionRow> = on_db!(
            self.db(),
            fetch_all,
            sqlx::query_as(concat!(
                "SELECT ",
                question_columns!(),
                ", e.envelope AS device_envelope
                 FROM questions q JOIN items i ON i.seq = q.item_seq
                      JOIN item_envelopes e ON e.item_seq = q.item_seq AND e.device_id = $2
                 WHERE q.agent_id = $1 AND (",
                typed!("$4", "TEXT"),
                " IS NULL OR ",
                effective_state!("$3"),
                " = $4)
                 ORDER BY q.item_seq DESC LIMIT $5"
            ))
            .bind(agent_id)
            .bind(device_id)
            .bind(now.millis())
            .bind(filter.state())
            .bind(i64::from(limit))
        )?;
        rows.into_iter()
            .rev()
            .map(|r| r.question.device_question(r.device_envelope, now))
            .collect()
    }

    /// A page of the answer log, newest first.
    pub(crate) async fn answer_log(&self, agent_id: &str, q: &LogQuery, now: Timestamp) -> Result<LogPage> {
        let rows: Vec<QuestionRow> = on_db!(
            self.db(),
            fetch_all,
            sqlx::query_as(concat!(
                "SELECT ",
                question_columns!(),
                " FROM questions q JOIN items i ON i.seq = q.item_seq
                 WHERE q.agent_id = $1
                   AND (",
                typed!("$2", "BIGINT"),
                " IS NULL OR q.item_seq < $2)
                   AND (",
                typed!("$3", "BIGINT"),
                " IS NULL OR i.created_at >= $3)
                   AND (",
                typed!("$4", "BIGINT"),
                " IS NULL OR i.created_at < $4)
                   AND (",
                typed!("$6", "TEXT"),
                " IS NULL OR ",
                effective_state!("$5"),
                " = $6)
                 ORDER BY q.item_seq DESC LIMIT $7"
            ))
            .bind(agent_id)
            .bind(q.before.map(seq_of))
            .bind(q.since.map(Timestamp::millis))
            .bind(q.until.map(Timestamp::millis))
            .bind(now.millis())
            .bind(q.state.state())
            .bind(i64::from(q.limit) + 1)
        )?;
        LogPage::of(rows, q.limit, |r| r.view(now))
    }

    /// When the next pending question expires.
    pub(crate) async fn next_expiry(&self) -> Result<Option<Timestamp>> {
        let at: Option<i64> = on_db!(
            self.db(),
            fetch_one,
            sqlx::query_scalar("SELECT MIN(expires_at) FROM questions WHERE state = 'pending'")
        )?;
        Ok(at.map(ts))
    }

    /// Marks a task processed (idempotent: the first time is kept); the first time, the backend stores in the
    /// same transaction the `update` item that tells the sending device. `None` when the agent has no such
    /// task. Read first: repeated acknowledgements then cost no write.
    ///
    /// `session` is the name of the session marking it: a task another session took, or one addressed to
    /// another session, is not its (`None`, as for a task the agent does not have); one sent to any session and
    /// not handed out yet becomes its.
    pub(crate) async fn mark_processed(
        &self,
        agent_id: &str,
        message_id: &str,
        session: &str,
        now: Timestamp,
    ) -> Result<Option<Marked>> {
        let known: Option<(Option<i64>, Option<String>)> = on_db!(
            self.db(),
            fetch_optional,
            sqlx::query_as(
                "SELECT processed_at, session_name FROM items
                 WHERE agent_id = $1 AND kind = 'message' AND item_id = $2",
            )
            .bind(agent_id)
            .bind(message_id)
        )?;
        let known = known.and_then(|(at, owner)| owner.is_none_or(|o| o == session).then_some(at));
        match known {
            None => Ok(None),
            Some(Some(at)) => Ok(Some(Marked {
                processed_at: ts(at),
                update: None,
            })),
            Some(None) => {
                let task = super::commands::TaskAt {
                    agent_id,
                    message_id,
                    session,
                    now,
                };
                match self {
                    Store::Sqlite(s) => s.mark_processed(&task).await,
                    Store::Postgres(p) => p.mark_processed(&task).await,
                }
            }
        }
    }

    /// What one device can open after `after`: the tasks it sent, the replies, questions and notifications
    /// sealed for it, and the updates about them (its tasks processed; the questions sealed for it answered,
    /// cancelled or expired). A question, in its item or an update, carries its state as of `now`.
    pub(crate) async fn conversation(
        &self,
        agent_id: &str,
        device_id: &str,
        after: Cursor,
        limit: u32,
        updates: bool,
        now: Timestamp,
    ) -> Result<(Vec<ConversationItem>, Cursor)> {
        let after = seq_of(after);
        let db = self.db();
        // Read the head first: anything stored later has a greater seq and is left for the next call. Every item
        // of this agent up to the head has committed (the agent's items commit in the order of their seq).
        let head: i64 = on_db!(
            db,
            fetch_one,
            sqlx::query_scalar("SELECT COALESCE(MAX(seq), 0) FROM items WHERE agent_id = $1").bind(agent_id)
        )?;
        // An update is about its subject `s`: the device that sent the task sees it (`i.device_id`), or every
        // device the question was sealed for (the question's envelopes). Its question metadata is the
        // subject's.
        let rows: Vec<ConversationRow> = on_db!(
            db,
            fetch_all,
            sqlx::query_as(concat!(
                "SELECT i.seq, i.kind, i.item_id, COALESCE(e.envelope, i.envelope, '') AS envelope,
                        i.source_message_id, i.created_at, i.delivered_at, i.processed_at,
                        i.update_state, s.kind AS subject_kind, s.item_id AS subject_id,
                        q.kind AS question_kind, q.state AS question_state, q.expires_at, q.answered_by,
                        q.answered_at, q.answered_by_name, q.answer_copy, q.channel, q.approvals, ",
                answers_column!(),
                " FROM items i
                      LEFT JOIN item_envelopes e ON e.item_seq = i.seq AND e.device_id = $2
                      LEFT JOIN items s ON s.seq = i.subject_seq
                      LEFT JOIN questions q ON q.item_seq = COALESCE(i.subject_seq, i.seq)
                 WHERE i.agent_id = $1 AND i.seq > $3 AND i.seq <= $4 AND ($6 OR i.kind <> 'update')
                   AND ((i.kind = 'message' AND i.device_id = $2)
                        OR (i.kind IN ('reply', 'question', 'notification') AND e.envelope IS NOT NULL)
                        OR (i.kind = 'update' AND s.kind = 'message' AND i.device_id = $2)
                        OR (i.kind = 'update' AND s.kind = 'question'
                            AND EXISTS (SELECT 1 FROM item_envelopes se
                                        WHERE se.item_seq = i.subject_seq AND se.device_id = $2)))
                 ORDER BY i.seq LIMIT $5"
            ))
            .bind(agent_id)
            .bind(device_id)
            .bind(after)
            .bind(head)
            .bind(i64::from(limit))
            .bind(updates)
        )?;
        let next = match rows.last() {
            Some(last) if rows.len() >= limit as usize => last.seq,
            _ => head.max(after),
        };
        let items = rows
            .into_iter()
            .map(|r| r.item(now))
            .collect::<Result<Vec<_>>>()?;
        Ok((items, cursor(next)))
    }
}
