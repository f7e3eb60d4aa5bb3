//! The SQLite backend (sqlx): WAL journal, `synchronous = FULL`, one writer connection, a small read pool.
//!
//! Every write goes through [`SqliteStore::write`]: one writer task owns the single write connection and runs
//! the writes waiting for it in one transaction with one synced commit (group commit, [`writer`]), so they
//! queue in the relay instead of meeting `SQLITE_BUSY` and share the cost of the `fsync`. Reads use up to
//! [`READERS`] read-only connections, which WAL lets run beside the writer.
//! `docs/adr/0001-sqlite-durability.md` explains why every commit is synced and how batching keeps that.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use pacerelle_core::pairing::Role;
use pacerelle_core::wire::{
    AgentInfo, AgentMessage, CheckpointRecord, ConversationItem, DeviceEnvelope, DeviceInfo, ItemKind,
    LeaseHolder, MessageCounts, MessageState, PairingClaimed, PairingCreated, SessionInfo, Stored,
};
use pacerelle_core::{Bearer, Cursor, Timestamp, keys};
use sqlx::SqliteConnection;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use super::{
    Claim, Lease, NewPairing, PairingRow, PairingStored, Principal, Put, Registered, Renewal, ReplyPut,
    SessionOpened, StatusFacts, lease_ttl_ms,
};
use crate::at_rest::{self, key::WebhookKey};
use crate::error::{Error, StoreError};

mod questions;
mod roster;
mod webhooks;
mod writer;

pub(crate) use roster::RosterPut;
pub(crate) use webhooks::Target;
pub(crate) use writer::BoxFuture;

type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Read-only connections in the read pool.
const READERS: u32 = 4;
/// How long SQLite waits on a lock before answering busy.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a request waits for a connection before the relay answers `unavailable`.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long expired pairing tombstones and ended sessions are kept.
const KEEP_MS: i64 = 24 * 3600 * 1000;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!();

/// The SQLite store. Cheap to clone (pools and the writer are reference-counted).
#[derive(Debug, Clone)]
pub(crate) struct SqliteStore {
    /// The single write connection; only the writer task uses it once the store is open (and tests, for
    /// fixtures).
    write: SqlitePool,
    read: SqlitePool,
    writer: Arc<writer::Writer>,
    /// Seals the webhook secrets stored and opens them for the deliverer ([`webhooks`]).
    key: Arc<WebhookKey>,
}

fn ts(ms: i64) -> Timestamp {
    Timestamp(ms)
}

fn cursor(seq: i64) -> Cursor {
    Cursor(u64::try_from(seq).unwrap_or(0))
}

fn seq_of(c: Cursor) -> i64 {
    i64::try_from(c.seq()).unwrap_or(i64::MAX)
}

fn role(text: &str) -> Result<Role> {
    match text {
        "owner" => Ok(Role::Owner),
        "user" => Ok(Role::User),
        other => Err(StoreError::Internal(sqlx::Error::Decode(
            format!("unknown role {other:?} in the database").into(),
        ))),
    }
}

type DeviceRow = (String, String, Option<String>, String, i64, Option<i64>);

fn device_info(row: DeviceRow) -> Result<DeviceInfo> {
    let (device_id, name, label, role_text, created_at, revoked_at) = row;
    Ok(DeviceInfo {
        device_id,
        name,
        label,
        role: role(&role_text)?,
        created_at: ts(created_at),
        revoked_at: revoked_at.map(ts),
    })
}

fn message_state(delivered_at: Option<i64>, processed_at: Option<i64>) -> MessageState {
    match (delivered_at, processed_at) {
        (_, Some(_)) => MessageState::Processed,
        (Some(_), None) => MessageState::Delivered,
        (None, None) => MessageState::Sent,
    }
}

impl SqliteStore {
    /// Opens (or creates) the database file and brings its schema up to date. The database file is created
    /// `0600` (SQLite gives its `-wal` and `-shm` the same mode) and loose files beside it are tightened; the
    /// webhook key is read from `webhook.key` beside it, or created there ([`at_rest`]). Webhook secrets still
    /// stored in clear by an earlier version are sealed before anything else runs.
    pub(crate) async fn open(path: &Path) -> Result<Self, Error> {
        Self::open_with(path, writer::MAX_BATCH_WORK).await
    }

    /// [`SqliteStore::open`] with another bound on a batch's work (tests make batches deterministic).
    async fn open_with(path: &Path, max_batch_work: Duration) -> Result<Self, Error> {
        let open_err = |source| Error::Open {
            path: path.display().to_string(),
            source,
        };
        at_rest::prepare_database(path)?;
        let key = Arc::new(WebhookKey::load_or_create(&at_rest::folder_of(path))?);
        let base = SqliteConnectOptions::new()
            .filename(path)
            .busy_timeout(BUSY_TIMEOUT)
            .foreign_keys(true)
            .synchronous(SqliteSynchronous::Full);
        let write = SqlitePoolOptions::new()
            .max_connections(1)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            // A local file: no ping before each batch.
            .test_before_acquire(false)
            .connect_with(
                base.clone()
                    .create_if_missing(true)
                    .journal_mode(SqliteJournalMode::Wal),
            )
            .await
            .map_err(open_err)?;
        MIGRATOR.run(&write).await?;
        // Before the readers and the writer: it may compact the database.
        webhooks::seal_clear_secrets(&write, &key).await?;
        // The -wal and -shm files SQLite just created.
        at_rest::tighten_database(path)?;
        // The journal mode is a property of the file, already WAL: readers need not (and cannot) set it.
        let read = SqlitePoolOptions::new()
            .max_connections(READERS)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect_with(base.read_only(true))
            .await
            .map_err(open_err)?;
        let writer = writer::Writer::start(write.clone(), max_batch_work)
            .map_err(|e| StoreError::Unavailable(sqlx::Error::Io(e)))?;
        let writer = Arc::new(writer);
        Ok(SqliteStore {
            write,
            read,
            writer,
            key,
        })
    }

    /// Runs `f` in a write transaction and returns its result once that transaction is committed — synced to
    /// disk — or its error.
    ///
    /// `f` runs on the writer task, inside a `BEGIN IMMEDIATE` transaction that it may share with other
    /// writes (group commit, [`writer`]): in a savepoint of its own, after the writes queued before it, whose
    /// changes it sees. It must not commit or roll back. When `f` fails, its changes are rolled back and its
    /// error returned; when the shared commit fails, every write of the batch gets the error.
    pub(crate) async fn write<T, F>(&self, f: F) -> Result<T>
    where
        F: for<'c> FnOnce(&'c mut SqliteConnection) -> BoxFuture<'c, Result<T>> + Send + 'static,
        T: Send + 'static,
    {
        self.writer.write(f, ACQUIRE_TIMEOUT).await
    }

    /// Stops taking writes, lets the writer commit those already queued, then closes both pools, waiting for
    /// connections in use to be returned.
    pub(crate) async fn close(&self) {
        self.writer.close().await;
        self.read.close().await;
        self.write.close().await;
    }

    // ----- agents and credentials -----

    /// Registers an agent. The same id with the same hash again is a retry: it finds the stored agent.
    pub(crate) async fn register_agent(
        &self,
        agent_id: &str,
        name: &str,
        auth_hash: &[u8; 32],
        now: Timestamp,
    ) -> Result<Registered> {
        let (agent_id, name, auth_hash) = (agent_id.to_string(), name.to_string(), *auth_hash);
        self.write(move |conn| {
            Box::pin(async move {
                let existing: Option<(String, Vec<u8>, i64)> =
                    sqlx::query_as("SELECT name, auth_hash, created_at FROM agents WHERE agent_id = ?1")
                        .bind(&agent_id)
                        .fetch_optional(&mut *conn)
                        .await?;
                if let Some((stored_name, stored_hash, created_at)) = existing {
                    if keys::constant_time_eq(&stored_hash, &auth_hash) {
                        return Ok(Registered::Again(AgentInfo {
                            agent_id,
                            name: stored_name,
                            created_at: ts(created_at),
                        }));
                    }
                    return Ok(Registered::Exists);
                }
                let taken: bool = sqlx::query_scalar(
                    "SELECT EXISTS (SELECT 1 FROM devices WHERE device_id = ?1)
                         OR EXISTS (SELECT 1 FROM pairings WHERE device_id = ?1)",
                )
                .bind(&agent_id)
                .fetch_one(&mut *conn)
                .await?;
                if taken {
                    return Ok(Registered::Exists);
                }
                sqlx::query(
                    "INSERT INTO agents (agent_id, name, auth_hash, created_at) VALUES (?1, ?2, ?3, ?4)",
                )
                .bind(&agent_id)
                .bind(&name)
                .bind(&auth_hash[..])
                .bind(now.millis())
                .execute(&mut *conn)
                .await?;
                Ok(Registered::Created(AgentInfo {
                    agent_id,
                    name,
                    created_at: now,
                }))
            })
        })
        .await
    }

    pub(crate) async fn agent(&self, agent_id: &str) -> Result<Option<AgentInfo>> {
        let row: Option<(String, String, i64)> =
            sqlx::query_as("SELECT agent_id, name, created_at FROM agents WHERE agent_id = ?1")
                .bind(agent_id)
                .fetch_optional(&self.read)
                .await?;
        Ok(row.map(|(agent_id, name, created_at)| AgentInfo {
            agent_id,
            name,
            created_at: ts(created_at),
        }))
    }

    /// The agent or device named `id`. Agent ids and device ids never collide: registration and pairing
    /// refuse an id that the other already uses.
    pub(crate) async fn principal(&self, id: &str) -> Result<Option<Principal>> {
        let agent: Option<Vec<u8>> = sqlx::query_scalar("SELECT auth_hash FROM agents WHERE agent_id = ?1")
            .bind(id)
            .fetch_optional(&self.read)
            .await?;
        if let Some(hash) = agent {
            return Ok(Some(Principal::Agent {
                agent_id: id.to_string(),
                hash,
            }));
        }
        let device: Option<(String, Vec<u8>, bool)> = sqlx::query_as(
            "SELECT agent_id, token_hash, revoked_at IS NOT NULL FROM devices WHERE device_id = ?1",
        )
        .bind(id)
        .fetch_optional(&self.read)
        .await?;
        Ok(device.map(|(agent_id, hash, revoked)| Principal::Device {
            agent_id,
            device_id: id.to_string(),
            hash,
            revoked,
        }))
    }

    // ----- pairing and devices -----

    pub(crate) async fn create_pairing(&self, p: &NewPairing<'_>) -> Result<PairingStored> {
        let pairing_id = p.pairing_id.to_string();
        let agent_id = p.agent_id.to_string();
        let device_id = p.device_id.to_string();
        let label = p.label.map(str::to_string);
        let offer = p.offer.to_string();
        let (role, claim_hash, expires_at, now) = (p.role, p.claim_hash, p.expires_at, p.now);
        self.write(move |conn| {
            Box::pin(async move {
                let existing: Option<(String, String, i64, Option<i64>)> = sqlx::query_as(
                    "SELECT agent_id, device_id, expires_at, claimed_at FROM pairings WHERE pairing_id = ?1",
                )
                .bind(&pairing_id)
                .fetch_optional(&mut *conn)
                .await?;
                if let Some((stored_agent, stored_device, stored_expiry, claimed_at)) = existing {
                    // A retry of the same upload gets the stored offer; anything else is a conflict.
                    if stored_agent == agent_id && stored_device == device_id && claimed_at.is_none() {
                        return Ok(PairingStored::Created(PairingCreated {
                            pairing_id,
                            device_id: stored_device,
                            expires_at: ts(stored_expiry),
                        }));
                    }
                    return Ok(PairingStored::Conflict("this pairing id is already in use"));
                }
                let taken: bool = sqlx::query_scalar(
                    "SELECT EXISTS (SELECT 1 FROM devices WHERE device_id = ?1)
                         OR EXISTS (SELECT 1 FROM pairings WHERE device_id = ?1)
                         OR EXISTS (SELECT 1 FROM agents WHERE agent_id = ?1)",
                )
                .bind(&device_id)
                .fetch_one(&mut *conn)
                .await?;
                if taken {
                    return Ok(PairingStored::Conflict("this device id is already in use"));
                }
                sqlx::query(
                    "INSERT INTO pairings (pairing_id, agent_id, device_id, label, role, claim_hash, offer,
                                           expires_at, created_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                )
                .bind(&pairing_id)
                .bind(&agent_id)
                .bind(&device_id)
                .bind(label.as_deref())
                .bind(role.as_str())
                .bind(&claim_hash[..])
                .bind(&offer)
                .bind(expires_at.millis())
                .bind(now.millis())
                .execute(&mut *conn)
                .await?;
                Ok(PairingStored::Created(PairingCreated {
                    pairing_id,
                    device_id,
                    expires_at,
                }))
            })
        })
        .await
    }

    pub(crate) async fn pairing(&self, pairing_id: &str) -> Result<Option<PairingRow>> {
        type Row = (String, String, String, Option<String>, i64, Option<i64>);
        let row: Option<Row> = sqlx::query_as(
            "SELECT pairing_id, agent_id, device_id, offer, expires_at, claimed_at
             FROM pairings WHERE pairing_id = ?1",
        )
        .bind(pairing_id)
        .fetch_optional(&self.read)
        .await?;
        Ok(row.map(
            |(pairing_id, agent_id, device_id, offer, expires_at, claimed_at)| PairingRow {
                pairing_id,
                agent_id,
                device_id,
                offer,
                expires_at: ts(expires_at),
                claimed_at: claimed_at.map(ts),
            },
        ))
    }

    /// Claims an offer: checks the proof, then in one transaction marks the offer claimed (dropping its
    /// ciphertext), creates the device and stores the hash of its new token.
    pub(crate) async fn claim_pairing(
        &self,
        pairing_id: &str,
        proof_hash: &[u8; 32],
        name: &str,
        now: Timestamp,
    ) -> Result<Claim> {
        let (pairing_id, proof_hash, name) = (pairing_id.to_string(), *proof_hash, name.to_string());
        self.write(move |conn| {
            Box::pin(async move {
                type Row = (String, String, Option<String>, String, Vec<u8>, i64, Option<i64>);
                let row: Option<Row> = sqlx::query_as(
                    "SELECT agent_id, device_id, label, role, claim_hash, expires_at, claimed_at
                     FROM pairings WHERE pairing_id = ?1",
                )
                .bind(&pairing_id)
                .fetch_optional(&mut *conn)
                .await?;
                let Some((agent_id, device_id, label, role_text, claim_hash, expires_at, claimed_at)) = row
                else {
                    return Ok(Claim::NotFound);
                };
                if !keys::constant_time_eq(&claim_hash, &proof_hash) {
                    return Ok(Claim::WrongProof);
                }
                if claimed_at.is_some() {
                    return Ok(Claim::AlreadyClaimed);
                }
                if expires_at <= now.millis() {
                    return Ok(Claim::Expired);
                }
                let (token, token_hash) = Bearer::issue(&device_id);
                sqlx::query(
                    "UPDATE pairings SET offer = NULL, claimed_at = ?2
                     WHERE pairing_id = ?1 AND claimed_at IS NULL",
                )
                .bind(&pairing_id)
                .bind(now.millis())
                .execute(&mut *conn)
                .await?;
                sqlx::query(
                    "INSERT INTO devices (device_id, agent_id, name, label, role, token_hash, created_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                )
                .bind(&device_id)
                .bind(&agent_id)
                .bind(&name)
                .bind(label)
                .bind(role(&role_text)?.as_str())
                .bind(&token_hash[..])
                .bind(now.millis())
                .execute(&mut *conn)
                .await?;
                Ok(Claim::Claimed(PairingClaimed {
                    agent_id,
                    device_id,
                    device_token: token.expose().to_string(),
                }))
            })
        })
        .await
    }

    pub(crate) async fn devices(&self, agent_id: &str) -> Result<Vec<DeviceInfo>> {
        let rows: Vec<DeviceRow> = sqlx::query_as(
            "SELECT device_id, name, label, role, created_at, revoked_at
             FROM devices WHERE agent_id = ?1 ORDER BY created_at, rowid",
        )
        .bind(agent_id)
        .fetch_all(&self.read)
        .await?;
        rows.into_iter().map(device_info).collect()
    }

    pub(crate) async fn device(&self, agent_id: &str, device_id: &str) -> Result<Option<DeviceInfo>> {
        let row: Option<DeviceRow> = sqlx::query_as(
            "SELECT device_id, name, label, role, created_at, revoked_at
             FROM devices WHERE agent_id = ?1 AND device_id = ?2",
        )
        .bind(agent_id)
        .bind(device_id)
        .fetch_optional(&self.read)
        .await?;
        row.map(device_info).transpose()
    }

    /// Revokes a device of this agent (idempotent: the first revocation time is kept).
    pub(crate) async fn revoke_device(
        &self,
        agent_id: &str,
        device_id: &str,
        now: Timestamp,
    ) -> Result<Option<DeviceInfo>> {
        let (agent_id, device_id) = (agent_id.to_string(), device_id.to_string());
        let row: Option<DeviceRow> = self
            .write(move |conn| {
                Box::pin(async move {
                    Ok(sqlx::query_as(
                        "UPDATE devices SET revoked_at = COALESCE(revoked_at, ?3)
                         WHERE agent_id = ?1 AND device_id = ?2
                         RETURNING device_id, name, label, role, created_at, revoked_at",
                    )
                    .bind(&agent_id)
                    .bind(&device_id)
                    .bind(now.millis())
                    .fetch_optional(&mut *conn)
                    .await?)
                })
            })
            .await?;
        row.map(device_info).transpose()
    }

    // ----- the stream: tasks, replies, checkpoints -----

    /// The greatest sequence number ever given to any item (0 when there is none): no valid cursor is beyond.
    pub(crate) async fn global_head(&self) -> Result<Cursor> {
        let seq: i64 = sqlx::query_scalar("SELECT COALESCE(MAX(seq), 0) FROM items")
            .fetch_one(&self.read)
            .await?;
        Ok(cursor(seq))
    }

    /// Stores a task sent by a device, or finds the one already stored under this id.
    pub(crate) async fn put_message(
        &self,
        agent_id: &str,
        device_id: &str,
        message_id: &str,
        envelope: &str,
        now: Timestamp,
    ) -> Result<Put> {
        let agent_id = agent_id.to_string();
        let device_id = device_id.to_string();
        let message_id = message_id.to_string();
        let envelope = envelope.to_string();
        self.write(move |conn| {
            Box::pin(async move {
                let existing: Option<(i64, Option<String>, i64)> = sqlx::query_as(
                    "SELECT seq, device_id, created_at FROM items
                     WHERE agent_id = ?1 AND kind = 'message' AND item_id = ?2",
                )
                .bind(&agent_id)
                .bind(&message_id)
                .fetch_optional(&mut *conn)
                .await?;
                if let Some((seq, sender, created_at)) = existing {
                    if sender.as_deref() != Some(device_id.as_str()) {
                        return Ok(Put::Conflict("this message id was used by another device"));
                    }
                    return Ok(Put::Stored(Stored {
                        id: message_id,
                        cursor: cursor(seq),
                        created_at: ts(created_at),
                        created: false,
                    }));
                }
                let seq: i64 = sqlx::query_scalar(
                    "INSERT INTO items (agent_id, kind, item_id, device_id, envelope, created_at)
                     VALUES (?1, 'message', ?2, ?3, ?4, ?5) RETURNING seq",
                )
                .bind(&agent_id)
                .bind(&message_id)
                .bind(&device_id)
                .bind(&envelope)
                .bind(now.millis())
                .fetch_one(&mut *conn)
                .await?;
                Ok(Put::Stored(Stored {
                    id: message_id,
                    cursor: cursor(seq),
                    created_at: now,
                    created: true,
                }))
            })
        })
        .await
    }

    /// Whether tasks not yet processed exist after `after`, and the agent's head; one consistent read.
    async fn pending_after(&self, agent_id: &str, after: i64) -> Result<(bool, i64)> {
        let (pending, head): (bool, i64) = sqlx::query_as(
            "SELECT EXISTS (SELECT 1 FROM items
                            WHERE agent_id = ?1 AND kind = 'message' AND processed_at IS NULL AND seq > ?2),
                    (SELECT COALESCE(MAX(seq), 0) FROM items WHERE agent_id = ?1)",
        )
        .bind(agent_id)
        .bind(after)
        .fetch_one(&self.read)
        .await?;
        Ok((pending, head))
    }

    /// Hands the agent its tasks not yet processed after `after` (oldest first, at most `limit`), marking
    /// them delivered; `redelivered` is true for those delivered before. Returns the tasks and the cursor to
    /// continue from.
    pub(crate) async fn deliver(
        &self,
        agent_id: &str,
        after: Cursor,
        limit: u32,
        now: Timestamp,
    ) -> Result<(Vec<AgentMessage>, Cursor)> {
        let after = seq_of(after);
        // Most polls find nothing: answer those from a reader without touching the writer.
        let (pending, head) = self.pending_after(agent_id, after).await?;
        if !pending {
            return Ok((Vec::new(), cursor(head.max(after))));
        }
        type Row = (i64, String, String, String, String, i64, Option<i64>);
        let agent_id = agent_id.to_string();
        let (rows, next) = self
            .write(move |conn| {
                Box::pin(async move {
                    let head: i64 =
                        sqlx::query_scalar("SELECT COALESCE(MAX(seq), 0) FROM items WHERE agent_id = ?1")
                            .bind(&agent_id)
                            .fetch_one(&mut *conn)
                            .await?;
                    let rows: Vec<Row> = sqlx::query_as(
                        "SELECT i.seq, i.item_id, COALESCE(i.device_id, ''), COALESCE(d.name, ''),
                                COALESCE(i.envelope, ''), i.created_at, i.delivered_at
                         FROM items i LEFT JOIN devices d ON d.device_id = i.device_id
                         WHERE i.agent_id = ?1 AND i.kind = 'message' AND i.processed_at IS NULL
                           AND i.seq > ?2 AND i.seq <= ?3
                         ORDER BY i.seq LIMIT ?4",
                    )
                    .bind(&agent_id)
                    .bind(after)
                    .bind(head)
                    .bind(i64::from(limit))
                    .fetch_all(&mut *conn)
                    .await?;
                    let full = rows.len() >= limit as usize;
                    let next = match rows.last() {
                        Some(last) if full => last.0,
                        _ => head.max(after),
                    };
                    if let Some(last) = rows.last() {
                        sqlx::query(
                            "UPDATE items SET delivered_at = ?2
                             WHERE agent_id = ?1 AND kind = 'message' AND processed_at IS NULL
                               AND delivered_at IS NULL AND seq > ?3 AND seq <= ?4",
                        )
                        .bind(&agent_id)
                        .bind(now.millis())
                        .bind(after)
                        .bind(last.0)
                        .execute(&mut *conn)
                        .await?;
                    }
                    Ok((rows, next))
                })
            })
            .await?;
        let messages = rows
            .into_iter()
            .map(
                |(seq, message_id, from, from_name, envelope, created_at, delivered_at)| AgentMessage {
                    message_id,
                    from,
                    from_name,
                    envelope,
                    sent_at: ts(created_at),
                    redelivered: delivered_at.is_some(),
                    cursor: cursor(seq),
                },
            )
            .collect();
        Ok((messages, cursor(next)))
    }

    /// Marks a task processed (idempotent: the first time is kept). `None` when the agent has no such task.
    pub(crate) async fn mark_processed(
        &self,
        agent_id: &str,
        message_id: &str,
        now: Timestamp,
    ) -> Result<Option<Timestamp>> {
        // Read first: repeated acknowledgements then cost no synced write.
        let known: Option<Option<i64>> = sqlx::query_scalar(
            "SELECT processed_at FROM items WHERE agent_id = ?1 AND kind = 'message' AND item_id = ?2",
        )
        .bind(agent_id)
        .bind(message_id)
        .fetch_optional(&self.read)
        .await?;
        match known {
            None => return Ok(None),
            Some(Some(at)) => return Ok(Some(ts(at))),
            Some(None) => {}
        }
        let (agent_id, message_id) = (agent_id.to_string(), message_id.to_string());
        let at: Option<i64> = self
            .write(move |conn| {
                Box::pin(async move {
                    Ok(sqlx::query_scalar(
                        "UPDATE items SET processed_at = COALESCE(processed_at, ?3)
                         WHERE agent_id = ?1 AND kind = 'message' AND item_id = ?2
                         RETURNING processed_at",
                    )
                    .bind(&agent_id)
                    .bind(&message_id)
                    .bind(now.millis())
                    .fetch_optional(&mut *conn)
                    .await?)
                })
            })
            .await?;
        Ok(at.map(ts))
    }

    /// Stores a reply with one envelope per device, or finds the one already stored under this id.
    pub(crate) async fn put_reply(
        &self,
        agent_id: &str,
        reply_id: &str,
        source_message_id: &str,
        envelopes: &[DeviceEnvelope],
        now: Timestamp,
    ) -> Result<ReplyPut> {
        let agent_id = agent_id.to_string();
        let reply_id = reply_id.to_string();
        let source_message_id = source_message_id.to_string();
        let envelopes = envelopes.to_vec();
        self.write(move |conn| {
            Box::pin(async move {
                let existing: Option<(i64, Option<String>, i64)> = sqlx::query_as(
                    "SELECT seq, source_message_id, created_at FROM items
                     WHERE agent_id = ?1 AND kind = 'reply' AND item_id = ?2",
                )
                .bind(&agent_id)
                .bind(&reply_id)
                .fetch_optional(&mut *conn)
                .await?;
                if let Some((seq, source, created_at)) = existing {
                    if source.as_deref() != Some(source_message_id.as_str()) {
                        return Ok(ReplyPut::Conflict);
                    }
                    return Ok(ReplyPut::Stored(Stored {
                        id: reply_id,
                        cursor: cursor(seq),
                        created_at: ts(created_at),
                        created: false,
                    }));
                }
                let source_known: bool = sqlx::query_scalar(
                    "SELECT EXISTS (SELECT 1 FROM items
                                    WHERE agent_id = ?1 AND kind = 'message' AND item_id = ?2)",
                )
                .bind(&agent_id)
                .bind(&source_message_id)
                .fetch_one(&mut *conn)
                .await?;
                if !source_known {
                    return Ok(ReplyPut::NoSource);
                }
                for e in &envelopes {
                    let known: bool = sqlx::query_scalar(
                        "SELECT EXISTS (SELECT 1 FROM devices WHERE agent_id = ?1 AND device_id = ?2)",
                    )
                    .bind(&agent_id)
                    .bind(&e.device_id)
                    .fetch_one(&mut *conn)
                    .await?;
                    if !known {
                        return Ok(ReplyPut::UnknownDevice(e.device_id.clone()));
                    }
                }
                let seq: i64 = sqlx::query_scalar(
                    "INSERT INTO items (agent_id, kind, item_id, source_message_id, created_at)
                     VALUES (?1, 'reply', ?2, ?3, ?4) RETURNING seq",
                )
                .bind(&agent_id)
                .bind(&reply_id)
                .bind(&source_message_id)
                .bind(now.millis())
                .fetch_one(&mut *conn)
                .await?;
                for e in &envelopes {
                    sqlx::query(
                        "INSERT INTO item_envelopes (item_seq, device_id, envelope) VALUES (?1, ?2, ?3)",
                    )
                    .bind(seq)
                    .bind(&e.device_id)
                    .bind(&e.envelope)
                    .execute(&mut *conn)
                    .await?;
                }
                Ok(ReplyPut::Stored(Stored {
                    id: reply_id,
                    cursor: cursor(seq),
                    created_at: now,
                    created: true,
                }))
            })
        })
        .await
    }

    /// What one device can open after `after`: the tasks it sent, and the replies, questions and notifications
    /// sealed for it. A question carries its state as of `now`.
    pub(crate) async fn conversation(
        &self,
        agent_id: &str,
        device_id: &str,
        after: Cursor,
        limit: u32,
        now: Timestamp,
    ) -> Result<(Vec<ConversationItem>, Cursor)> {
        let after = seq_of(after);
        // Read the head first: anything stored later has a greater seq and is left for the next call.
        let head: i64 = sqlx::query_scalar("SELECT COALESCE(MAX(seq), 0) FROM items WHERE agent_id = ?1")
            .bind(agent_id)
            .fetch_one(&self.read)
            .await?;
        #[derive(sqlx::FromRow)]
        struct Row {
            seq: i64,
            kind: String,
            item_id: String,
            envelope: String,
            source_message_id: Option<String>,
            created_at: i64,
            delivered_at: Option<i64>,
            processed_at: Option<i64>,
            question_kind: Option<String>,
            question_state: Option<String>,
            expires_at: Option<i64>,
            answered_by: Option<String>,
            answered_at: Option<i64>,
            answered_by_name: Option<String>,
            answer_copy: Option<String>,
        }
        let rows: Vec<Row> = sqlx::query_as(
            "SELECT i.seq, i.kind, i.item_id, COALESCE(e.envelope, i.envelope, '') AS envelope,
                    i.source_message_id, i.created_at, i.delivered_at, i.processed_at,
                    q.kind AS question_kind, q.state AS question_state, q.expires_at, q.answered_by, q.answered_at,
                    q.answered_by_name, q.answer_copy
             FROM items i
                  LEFT JOIN item_envelopes e ON e.item_seq = i.seq AND e.device_id = ?2
                  LEFT JOIN questions q ON q.item_seq = i.seq
             WHERE i.agent_id = ?1 AND i.seq > ?3 AND i.seq <= ?4
               AND ((i.kind = 'message' AND i.device_id = ?2)
                    OR (i.kind IN ('reply', 'question', 'notification') AND e.envelope IS NOT NULL))
             ORDER BY i.seq LIMIT ?5",
        )
        .bind(agent_id)
        .bind(device_id)
        .bind(after)
        .bind(head)
        .bind(i64::from(limit))
        .fetch_all(&self.read)
        .await?;
        let next = match rows.last() {
            Some(last) if rows.len() >= limit as usize => last.seq,
            _ => head.max(after),
        };
        let items = rows
            .into_iter()
            .map(|r| {
                let kind = match r.kind.as_str() {
                    "message" => ItemKind::Message,
                    "reply" => ItemKind::Reply,
                    "question" => ItemKind::Question,
                    "notification" => ItemKind::Notification,
                    _ => ItemKind::Unknown,
                };
                Ok(ConversationItem {
                    kind,
                    id: r.item_id,
                    envelope: r.envelope,
                    source_message_id: r.source_message_id,
                    state: (kind == ItemKind::Message).then(|| message_state(r.delivered_at, r.processed_at)),
                    question: questions::conversation_meta(
                        r.question_kind.as_deref(),
                        r.question_state.as_deref(),
                        r.expires_at,
                        r.answered_by,
                        r.answered_at,
                        r.answered_by_name,
                        r.answer_copy,
                        now,
                    )?,
                    created_at: ts(r.created_at),
                    cursor: cursor(r.seq),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok((items, cursor(next)))
    }

    /// Stores a checkpoint, or finds the one already stored under this id.
    pub(crate) async fn put_checkpoint(
        &self,
        agent_id: &str,
        checkpoint_id: &str,
        envelope: &str,
        now: Timestamp,
    ) -> Result<Stored> {
        let agent_id = agent_id.to_string();
        let checkpoint_id = checkpoint_id.to_string();
        let envelope = envelope.to_string();
        self.write(move |conn| {
            Box::pin(async move {
                let existing: Option<(i64, i64)> = sqlx::query_as(
                    "SELECT seq, created_at FROM items
                     WHERE agent_id = ?1 AND kind = 'checkpoint' AND item_id = ?2",
                )
                .bind(&agent_id)
                .bind(&checkpoint_id)
                .fetch_optional(&mut *conn)
                .await?;
                if let Some((seq, created_at)) = existing {
                    return Ok(Stored {
                        id: checkpoint_id,
                        cursor: cursor(seq),
                        created_at: ts(created_at),
                        created: false,
                    });
                }
                let seq: i64 = sqlx::query_scalar(
                    "INSERT INTO items (agent_id, kind, item_id, envelope, created_at)
                     VALUES (?1, 'checkpoint', ?2, ?3, ?4) RETURNING seq",
                )
                .bind(&agent_id)
                .bind(&checkpoint_id)
                .bind(&envelope)
                .bind(now.millis())
                .fetch_one(&mut *conn)
                .await?;
                Ok(Stored {
                    id: checkpoint_id,
                    cursor: cursor(seq),
                    created_at: now,
                    created: true,
                })
            })
        })
        .await
    }

    /// The latest checkpoints, latest first.
    pub(crate) async fn checkpoints(&self, agent_id: &str, limit: u32) -> Result<Vec<CheckpointRecord>> {
        let rows: Vec<(String, String, i64)> = sqlx::query_as(
            "SELECT item_id, COALESCE(envelope, ''), created_at FROM items
             WHERE agent_id = ?1 AND kind = 'checkpoint' ORDER BY seq DESC LIMIT ?2",
        )
        .bind(agent_id)
        .bind(i64::from(limit))
        .fetch_all(&self.read)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(checkpoint_id, envelope, created_at)| CheckpointRecord {
                checkpoint_id,
                envelope,
                created_at: ts(created_at),
            })
            .collect())
    }

    // ----- sessions and the lease -----

    /// The session holding the agent's lease now, if any.
    pub(crate) async fn lease(&self, agent_id: &str, now: Timestamp) -> Result<Option<Lease>> {
        let row: Option<(String, String, i64, i64)> = sqlx::query_as(
            "SELECT session_id, host, since, last_heartbeat_at FROM sessions
             WHERE agent_id = ?1 AND ended_at IS NULL",
        )
        .bind(agent_id)
        .fetch_optional(&self.read)
        .await?;
        Ok(row.and_then(|(session_id, host, since, beat)| {
            (beat.saturating_add(lease_ttl_ms()) > now.millis()).then(|| Lease {
                session_id,
                holder: LeaseHolder {
                    host,
                    since: ts(since),
                    last_heartbeat_at: ts(beat),
                },
            })
        }))
    }

    /// Whether this agent has (or had, within the last day) a session with this id.
    pub(crate) async fn session_known(&self, agent_id: &str, session_id: &str) -> Result<bool> {
        Ok(sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM sessions WHERE agent_id = ?1 AND session_id = ?2)",
        )
        .bind(agent_id)
        .bind(session_id)
        .fetch_one(&self.read)
        .await?)
    }

    /// Opens a session that takes the lease, unless a live one holds it and `takeover` is false.
    pub(crate) async fn open_session(
        &self,
        agent_id: &str,
        session_id: &str,
        host: &str,
        takeover: bool,
        now: Timestamp,
    ) -> Result<SessionOpened> {
        let (agent_id, session_id, host) = (agent_id.to_string(), session_id.to_string(), host.to_string());
        self.write(move |conn| {
            Box::pin(async move {
                let open: Option<(String, String, i64, i64)> = sqlx::query_as(
                    "SELECT session_id, host, since, last_heartbeat_at FROM sessions
                     WHERE agent_id = ?1 AND ended_at IS NULL",
                )
                .bind(&agent_id)
                .fetch_optional(&mut *conn)
                .await?;
                if let Some((old_id, old_host, since, beat)) = open {
                    let live = beat.saturating_add(lease_ttl_ms()) > now.millis();
                    if live && !takeover {
                        return Ok(SessionOpened::InUse(LeaseHolder {
                            host: old_host,
                            since: ts(since),
                            last_heartbeat_at: ts(beat),
                        }));
                    }
                    let ended = if live {
                        now.millis()
                    } else {
                        beat.saturating_add(lease_ttl_ms())
                    };
                    sqlx::query("UPDATE sessions SET ended_at = ?2 WHERE session_id = ?1")
                        .bind(&old_id)
                        .bind(ended)
                        .execute(&mut *conn)
                        .await?;
                }
                sqlx::query(
                    "INSERT INTO sessions (session_id, agent_id, host, since, last_heartbeat_at)
                     VALUES (?1, ?2, ?3, ?4, ?4)",
                )
                .bind(&session_id)
                .bind(&agent_id)
                .bind(&host)
                .bind(now.millis())
                .execute(&mut *conn)
                .await?;
                Ok(SessionOpened::Opened(SessionInfo {
                    session_id,
                    host,
                    since: now,
                    lease_expires_at: now.plus_millis(lease_ttl_ms()),
                }))
            })
        })
        .await
    }

    /// Renews the lease if this session still holds it.
    pub(crate) async fn heartbeat(
        &self,
        agent_id: &str,
        session_id: &str,
        now: Timestamp,
    ) -> Result<Renewal> {
        let row: Option<(String, i64, i64, Option<i64>)> = sqlx::query_as(
            "SELECT host, since, last_heartbeat_at, ended_at FROM sessions
             WHERE agent_id = ?1 AND session_id = ?2",
        )
        .bind(agent_id)
        .bind(session_id)
        .fetch_optional(&self.read)
        .await?;
        let Some((host, since, beat, ended_at)) = row else {
            return Ok(Renewal::NotFound);
        };
        if ended_at.is_some() || beat.saturating_add(lease_ttl_ms()) <= now.millis() {
            return Ok(Renewal::Lost);
        }
        let (owner, session) = (agent_id.to_string(), session_id.to_string());
        let renewed = self
            .write(move |conn| {
                Box::pin(async move {
                    Ok(sqlx::query(
                        "UPDATE sessions SET last_heartbeat_at = ?3
                         WHERE agent_id = ?1 AND session_id = ?2 AND ended_at IS NULL
                           AND last_heartbeat_at + ?4 > ?3",
                    )
                    .bind(&owner)
                    .bind(&session)
                    .bind(now.millis())
                    .bind(lease_ttl_ms())
                    .execute(&mut *conn)
                    .await?
                    .rows_affected())
                })
            })
            .await?;
        if renewed == 0 {
            return Ok(Renewal::Lost);
        }
        Ok(Renewal::Renewed(SessionInfo {
            session_id: session_id.to_string(),
            host,
            since: ts(since),
            lease_expires_at: now.plus_millis(lease_ttl_ms()),
        }))
    }

    /// Ends a session (idempotent). `None` when the agent has no such session.
    pub(crate) async fn release(
        &self,
        agent_id: &str,
        session_id: &str,
        now: Timestamp,
    ) -> Result<Option<SessionInfo>> {
        let (owner, session) = (agent_id.to_string(), session_id.to_string());
        let row: Option<(String, i64, i64)> = self
            .write(move |conn| {
                Box::pin(async move {
                    Ok(sqlx::query_as(
                        "UPDATE sessions SET ended_at = COALESCE(ended_at, MIN(?3, last_heartbeat_at + ?4))
                         WHERE agent_id = ?1 AND session_id = ?2
                         RETURNING host, since, ended_at",
                    )
                    .bind(&owner)
                    .bind(&session)
                    .bind(now.millis())
                    .bind(lease_ttl_ms())
                    .fetch_optional(&mut *conn)
                    .await?)
                })
            })
            .await?;
        Ok(row.map(|(host, since, ended_at)| SessionInfo {
            session_id: session_id.to_string(),
            host,
            since: ts(since),
            lease_expires_at: ts(ended_at),
        }))
    }

    // ----- status and upkeep -----

    pub(crate) async fn status_facts(&self, agent_id: &str) -> Result<StatusFacts> {
        type Row = (i64, i64, i64, Option<i64>, Option<i64>, i64);
        let (waiting, in_progress, processed, oldest, last_checkpoint, devices): Row = sqlx::query_as(
            "SELECT COALESCE(SUM(delivered_at IS NULL AND processed_at IS NULL), 0),
                    COALESCE(SUM(delivered_at IS NOT NULL AND processed_at IS NULL), 0),
                    COALESCE(SUM(processed_at IS NOT NULL), 0),
                    MIN(CASE WHEN processed_at IS NULL THEN delivered_at END),
                    (SELECT MAX(created_at) FROM items WHERE agent_id = ?1 AND kind = 'checkpoint'),
                    (SELECT COUNT(*) FROM devices WHERE agent_id = ?1 AND revoked_at IS NULL)
             FROM items WHERE agent_id = ?1 AND kind = 'message'",
        )
        .bind(agent_id)
        .fetch_one(&self.read)
        .await?;
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

    /// Drops the ciphertext of expired offers, forgets old tombstones, ends sessions whose lease lapsed.
    pub(crate) async fn sweep(&self, now: Timestamp) -> Result<()> {
        let now = now.millis();
        self.write(move |conn| {
            Box::pin(async move {
                sqlx::query(
                    "UPDATE pairings SET offer = NULL
                     WHERE offer IS NOT NULL AND claimed_at IS NULL AND expires_at <= ?1",
                )
                .bind(now)
                .execute(&mut *conn)
                .await?;
                sqlx::query("DELETE FROM pairings WHERE expires_at < ?1")
                    .bind(now.saturating_sub(KEEP_MS))
                    .execute(&mut *conn)
                    .await?;
                sqlx::query(
                    "UPDATE sessions SET ended_at = last_heartbeat_at + ?2
                     WHERE ended_at IS NULL AND last_heartbeat_at + ?2 <= ?1",
                )
                .bind(now)
                .bind(lease_ttl_ms())
                .execute(&mut *conn)
                .await?;
                sqlx::query("DELETE FROM sessions WHERE ended_at IS NOT NULL AND ended_at < ?1")
                    .bind(now.saturating_sub(KEEP_MS))
                    .execute(&mut *conn)
                    .await?;
                Ok(())
            })
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_800_000_000_000;

    async fn store() -> (SqliteStore, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let store = SqliteStore::open(&dir.path().join("t.db")).await.expect("opens");
        let registered = store
            .register_agent("ag_1", "laptop", &[1; 32], Timestamp(T0))
            .await
            .expect("stored");
        assert!(matches!(registered, Registered::Created(_)));
        (store, dir)
    }

    #[tokio::test]
    async fn the_database_is_in_wal_mode_with_full_sync() {
        let (store, _dir) = store().await;
        // Asked of the write connection itself, through the writer.
        let (mode, sync, fk): (String, i64, i64) = store
            .write(|conn| {
                Box::pin(async move {
                    let mode = sqlx::query_scalar("PRAGMA journal_mode")
                        .fetch_one(&mut *conn)
                        .await?;
                    let sync = sqlx::query_scalar("PRAGMA synchronous")
                        .fetch_one(&mut *conn)
                        .await?;
                    let fk = sqlx::query_scalar("PRAGMA foreign_keys")
                        .fetch_one(&mut *conn)
                        .await?;
                    Ok((mode, sync, fk))
                })
            })
            .await
            .expect("pragmas");
        assert_eq!(mode, "wal");
        // 2 = FULL
        assert_eq!(sync, 2);
        assert_eq!(fk, 1);
    }

    #[tokio::test]
    async fn a_lease_lapses_without_heartbeat_and_then_anyone_may_take_it() {
        let (store, _dir) = store().await;
        let ttl = lease_ttl_ms();
        let opened = store
            .open_session("ag_1", "ses_a", "laptop", false, Timestamp(T0))
            .await
            .expect("stored");
        assert!(matches!(opened, SessionOpened::Opened(_)));
        // Within the TTL: held, renewable, refused to others.
        let renewed = store
            .heartbeat("ag_1", "ses_a", Timestamp(T0 + ttl - 1))
            .await
            .expect("ok");
        assert!(matches!(renewed, Renewal::Renewed(_)));
        let refused = store
            .open_session("ag_1", "ses_b", "desktop", false, Timestamp(T0 + ttl))
            .await
            .expect("ok");
        assert!(matches!(refused, SessionOpened::InUse(ref h) if h.host == "laptop"));
        // A full TTL after the last heartbeat: lapsed.
        let late = Timestamp(T0 + 2 * ttl);
        assert!(store.lease("ag_1", late).await.expect("ok").is_none());
        assert!(matches!(
            store.heartbeat("ag_1", "ses_a", late).await.expect("ok"),
            Renewal::Lost
        ));
        let taken = store
            .open_session("ag_1", "ses_b", "desktop", false, late)
            .await
            .expect("ok");
        assert!(matches!(taken, SessionOpened::Opened(_)));
        let lease = store.lease("ag_1", late).await.expect("ok").expect("held");
        assert_eq!(lease.session_id, "ses_b");
    }

    #[tokio::test]
    async fn the_sweeper_drops_expired_offers_and_lapsed_sessions() {
        let (store, _dir) = store().await;
        let offer = NewPairing {
            agent_id: "ag_1",
            pairing_id: "AAAAAAAAAAAAAAAAAAAAAA",
            device_id: "dv_1",
            label: None,
            role: Role::Owner,
            claim_hash: keys::sha256(b"claim"),
            offer: "AQID",
            expires_at: Timestamp(T0 + 1000),
            now: Timestamp(T0),
        };
        assert!(matches!(
            store.create_pairing(&offer).await.expect("ok"),
            PairingStored::Created(_)
        ));
        store
            .open_session("ag_1", "ses_a", "laptop", false, Timestamp(T0))
            .await
            .expect("ok");
        store.sweep(Timestamp(T0 + 999)).await.expect("sweeps");
        let row = store.pairing(offer.pairing_id).await.expect("ok").expect("kept");
        assert!(row.offer.is_some());

        store.sweep(Timestamp(T0 + 60_000)).await.expect("sweeps");
        let row = store
            .pairing(offer.pairing_id)
            .await
            .expect("ok")
            .expect("tombstone");
        assert!(row.offer.is_none(), "the ciphertext of an expired offer is gone");
        let ended: Option<i64> =
            sqlx::query_scalar("SELECT ended_at FROM sessions WHERE session_id = 'ses_a'")
                .fetch_one(&store.read)
                .await
                .expect("a row");
        assert_eq!(ended, Some(T0 + lease_ttl_ms()));
        // A day after expiry the tombstone goes too.
        store.sweep(Timestamp(T0 + KEEP_MS + 2000)).await.expect("sweeps");
        assert!(store.pairing(offer.pairing_id).await.expect("ok").is_none());
    }

    #[tokio::test]
    async fn sequence_numbers_only_grow_across_agents_and_kinds() {
        let (store, _dir) = store().await;
        store
            .register_agent("ag_2", "other", &[2; 32], Timestamp(T0))
            .await
            .expect("ok");
        let mut last = Cursor::START;
        for (i, agent) in ["ag_1", "ag_2", "ag_1"].into_iter().enumerate() {
            let c = store
                .put_checkpoint(agent, &format!("c{i}"), "AQID", Timestamp(T0))
                .await
                .expect("ok");
            assert!(c.cursor > last);
            last = c.cursor;
        }
        assert_eq!(store.global_head().await.expect("ok"), last);
    }

    #[tokio::test]
    async fn agent_and_device_ids_never_collide() {
        let (store, _dir) = store().await;
        let offer = NewPairing {
            agent_id: "ag_1",
            pairing_id: "BBBBBBBBBBBBBBBBBBBBBB",
            device_id: "ag_1",
            label: None,
            role: Role::Owner,
            claim_hash: keys::sha256(b"claim"),
            offer: "AQID",
            expires_at: Timestamp(T0 + 1000),
            now: Timestamp(T0),
        };
        assert!(matches!(
            store.create_pairing(&offer).await.expect("ok"),
            PairingStored::Conflict(_)
        ));
        let offer = NewPairing {
            device_id: "dv_x",
            ..offer
        };
        store.create_pairing(&offer).await.expect("ok");
        assert!(matches!(
            store
                .register_agent("dv_x", "impostor", &[3; 32], Timestamp(T0))
                .await
                .expect("ok"),
            Registered::Exists
        ));
    }
}
