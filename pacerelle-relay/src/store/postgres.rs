//! The PostgreSQL backend (sqlx): for several relay instances behind one address (ADR 0003).
//!
//! Same methods and outcomes as [`super::sqlite`], one file per concern mirroring it. Every transaction that
//! inserts items first locks the agent's counter row (`agent_counts … FOR UPDATE`), so that the sequence numbers
//! of one agent's items are drawn in the order their transactions commit and a reader's cursor never skips one.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

use crate::at_rest::key::WebhookKey;
use crate::error::{Error, StoreError};
use crate::store::WriterCounts;

mod agent;
mod checkpoints;
mod device;
mod grants;
mod messages;
mod pairing;
mod push;
mod questions;
pub(crate) use questions::Pg;
mod retention;
mod roster;
mod sends;
mod session;
mod sweep;
mod updates;
mod wakes;
mod webhooks;

/// What the concern files use.
mod prelude {
    pub(super) use pacerelle_core::wire::ItemState;
    pub(super) use pacerelle_core::wire::{
        AgentInfo, DeviceEnvelope, DeviceInfo, SessionInfo, Stored, WebhookInfo,
    };
    pub(super) use pacerelle_core::{Cursor, Timestamp};
    pub(super) use sqlx::PgConnection;

    pub(super) use super::{PgStore, Result};

    pub(super) use crate::store::commands::*;
    pub(super) use crate::store::{
        Claim, DueEvent, DuePush, Lease, Marked, NewPairing, NewUpdate, PairingStored, PushPut, Put,
        Registered, ReplyPut, RosterPut, SessionOpened, SigningKeyCopy, SigningKeyPut, WaitRead,
    };
    pub(super) use crate::store::{cursor, ts};
}

pub(crate) use wakes::WakeHost;

type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Connections in the pool.
const CONNECTIONS: u32 = 16;
/// How long a request waits for a connection before the relay answers `unavailable`.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);

pub(in crate::store) static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations-postgres");

/// Locks the agent's counter row until the transaction ends. Every transaction that inserts items calls it
/// before its first insert, so that one agent's items draw their sequence numbers in the order their
/// transactions commit, and a reader's cursor never passes an item that commits later (ADR 0003).
pub(super) async fn lock_agent(conn: &mut sqlx::PgConnection, agent_id: &str) -> Result<()> {
    sqlx::query("SELECT 1 FROM agent_counts WHERE agent_id = $1 FOR UPDATE")
        .bind(agent_id)
        .execute(conn)
        .await?;
    Ok(())
}

/// The PostgreSQL store. Cheap to clone (the pool and the key are reference-counted).
#[derive(Debug, Clone)]
pub(crate) struct PgStore {
    pool: PgPool,
    /// Seals the webhook secrets stored and opens them for the deliverer (the same `webhook.key` as SQLite's,
    /// in the relay's data folder).
    key: Arc<WebhookKey>,
    /// Write transactions committed and writes run (each write is a transaction of its own here).
    counts: Arc<WriterCounts>,
    /// Delivered marks of this instance not yet committed, so that a wait's `redelivered` flags are exact.
    marks: Arc<crate::store::marks::PendingMarks>,
    /// The principals found recently ([`crate::store::principals`]): credentials from memory, forgotten when
    /// any instance revokes one (`NOTIFY`, see `wakes.rs`) and read again after [`PRINCIPAL_MAX_AGE`].
    principals: Arc<crate::store::principals::Principals>,
    /// The queue of the instance's sender task, which stores the tasks sent at the same moment together
    /// ([`sends`]). `None` in the sender task's own copy (so that the queue closes when the relay's copies are
    /// gone); [`PgStore::put_message`] then stores alone.
    sends: Option<sends::Queue>,
}

/// How long an instance uses a principal it read before reading it again: the bound on how long a revocation
/// whose notification this instance missed (its listening connection lost without its knowing) goes unseen.
pub(super) const PRINCIPAL_MAX_AGE: std::time::Duration = std::time::Duration::from_secs(10);

impl PgStore {
    /// The pool, for the reads written once for both backends ([`crate::store::reads`]).
    pub(in crate::store) fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The principals found recently; a revocation committed by any instance is announced with `NOTIFY` and
    /// forgotten here when it arrives ([`wakes`]).
    pub(in crate::store) fn principals(&self) -> &crate::store::principals::Principals {
        &self.principals
    }

    /// The delivered marks of this instance not yet committed.
    pub(in crate::store) fn marks(&self) -> &crate::store::marks::PendingMarks {
        &self.marks
    }
}

impl PgStore {
    /// Connects to the database at `url`, brings its schema up to date, and reads (or creates) the webhook key
    /// in `data`.
    pub(crate) async fn open(url: &str, data: &Path) -> Result<Self, Error> {
        let key = Arc::new(WebhookKey::load_or_create(data)?);
        let pool = PgPoolOptions::new()
            .max_connections(CONNECTIONS)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect(url)
            .await
            .map_err(|source| Error::Open {
                path: redacted(url),
                source,
            })?;
        MIGRATOR.run(&pool).await?;
        // A relay serves this database from now on: a copy may no longer delete what the SQLite file lacks
        // (migration 0007).
        sqlx::query("DELETE FROM store_copy_pending")
            .execute(&pool)
            .await
            .map_err(|source| Error::Open {
                path: redacted(url),
                source,
            })?;
        let store = PgStore {
            pool,
            key,
            counts: Default::default(),
            marks: Default::default(),
            principals: Arc::new(crate::store::principals::Principals::with_max_age(
                PRINCIPAL_MAX_AGE,
            )),
            sends: None,
        };
        Ok(PgStore {
            sends: Some(sends::start(store.clone())),
            ..store
        })
    }

    /// Counts a committed write transaction (`GET /metrics`): a write other than a task's is a transaction of its
    /// own here, so a "batch" of one.
    pub(super) fn committed(&self) {
        self.counts.commits.inc();
        self.counts.writes.inc();
        self.counts.batch.observe(1.0);
    }

    /// Counts a committed statement that stored `writes` tasks together ([`sends`]).
    pub(super) fn committed_batch(&self, writes: usize) {
        self.counts.commits.inc();
        self.counts.writes.inc_by(writes as u64);
        self.counts.batch.observe(writes as f64);
    }

    /// What the store's writes have done since it opened.
    pub(crate) fn writer_counts(&self) -> Arc<WriterCounts> {
        self.counts.clone()
    }

    /// Closes the pool, waiting for connections in use to be returned.
    pub(crate) async fn close(&self) {
        self.pool.close().await;
    }
}

/// A database URL without its password, for messages.
fn redacted(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => format!("{}://…{}", &url[..scheme], &url[at..]),
        _ => url.to_string(),
    }
}
