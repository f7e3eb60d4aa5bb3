//! The SQLite backend: WAL journal, `synchronous = FULL`, one writer connection, a small read pool.
//!
//! Every write goes through [`SqliteStore::write`]: one writer thread owns the write connection (`rusqlite`,
//! plain calls with cached prepared statements) and runs the writes waiting for it in one transaction with one
//! synced commit (group commit, [`writer`]), so they queue in the relay instead of meeting `SQLITE_BUSY` and
//! share the cost of the `fsync`. Reads use up to [`READERS`] read-only sqlx connections, which WAL lets run
//! beside the writer; sqlx also runs the migrations when the store opens.
//! `docs/adr/0001-sqlite-durability.md` explains why every commit is synced and how batching keeps that.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use crate::at_rest::{self, key::WebhookKey};
use crate::error::{Error, StoreError};

// One file per concern, as in `routes/`: each holds its own `impl SqliteStore` block.
mod agent;
mod checkpoints;
mod device;
mod grants;
mod lease;
mod messages;
mod pairing;
pub(crate) mod push;
mod questions;
pub(crate) use questions::Lite;
mod reader;
mod retention;
mod roster;
mod session;
mod sweep;
mod updates;
mod webhooks;
mod writer;

use crate::store::WriterCounts;

type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Read-only connections in the read pool.
const READERS: u32 = 4;
/// How long SQLite waits on a lock before answering busy.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a request waits for a connection before the relay answers `unavailable`.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);

pub(in crate::store) static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!();

/// The SQLite store. Cheap to clone (pools and the writer are reference-counted).
#[derive(Debug, Clone)]
pub(crate) struct SqliteStore {
    read: SqlitePool,
    writer: Arc<writer::Writer>,
    /// Reads that run several statements in one snapshot, in-thread ([`reader`]).
    readers: Arc<reader::Readers>,
    /// Seals the webhook secrets stored and opens them for the deliverer ([`webhooks`]).
    key: Arc<WebhookKey>,
    /// Delivered marks queued and not yet committed, per agent ([`messages`]).
    marks: Arc<crate::store::marks::PendingMarks>,
    /// The principals found recently ([`crate::store::principals`]): credentials from memory.
    principals: Arc<crate::store::principals::Principals>,
}

use crate::store::{cursor, seq_of, ts};

/// The output of `future`, which must be ready on its first poll: a question write on the writer's connection
/// ([`Lite`]), whose steps are synchronous and never wait. Polled here rather than on a runtime, since the
/// writer thread has none; a future that would wait is an error of the relay, not a hang.
pub(crate) fn at_once<T>(future: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    let mut future = std::pin::pin!(future);
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    match future.as_mut().poll(&mut context) {
        std::task::Poll::Ready(out) => out,
        std::task::Poll::Pending => Err(StoreError::internal("a write on the writer's connection waited")),
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
        // From here on the writer thread has the only write connection.
        write.close().await;
        // The journal mode is a property of the file, already WAL: readers need not (and cannot) set it.
        let read = SqlitePoolOptions::new()
            .max_connections(READERS)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect_with(base.read_only(true))
            .await
            .map_err(open_err)?;
        let writer = Arc::new(writer::Writer::start(path, BUSY_TIMEOUT, max_batch_work)?);
        let readers = Arc::new(reader::Readers::new(
            path,
            READERS as usize,
            BUSY_TIMEOUT,
            ACQUIRE_TIMEOUT,
        ));
        Ok(SqliteStore {
            read,
            writer,
            readers,
            key,
            marks: Default::default(),
            principals: Default::default(),
        })
    }

    /// Runs `f` in a write transaction and returns its result once that transaction is committed — synced to
    /// disk — or its error.
    ///
    /// `f` runs on the writer thread, inside a `BEGIN IMMEDIATE` transaction that it may share with other
    /// writes (group commit, [`writer`]): in a savepoint of its own, after the writes queued before it, whose
    /// changes it sees. It must not commit or roll back, and should take its statements from the connection's
    /// cache (`prepare_cached`). When `f` fails, its changes are rolled back and its error returned; when the
    /// shared commit fails, every write of the batch gets the error.
    pub(crate) async fn write<T, F>(&self, f: F) -> Result<T>
    where
        F: FnOnce(&rusqlite::Connection) -> Result<T> + Send + 'static,
        T: Send + 'static,
    {
        self.writer.write(f, ACQUIRE_TIMEOUT).await
    }

    /// Runs `f` on a read-only connection, in one read transaction (one snapshot), on a blocking thread: for
    /// reads of several statements that must agree with each other.
    pub(crate) async fn read_now<T, F>(&self, f: F) -> Result<T>
    where
        F: FnOnce(&rusqlite::Connection) -> Result<T> + Send + 'static,
        T: Send + 'static,
    {
        self.readers.read(f).await
    }

    /// The read pool, for the reads written once for both backends ([`crate::store::reads`]).
    pub(in crate::store) fn pool(&self) -> &SqlitePool {
        &self.read
    }

    /// The principals found recently.
    pub(in crate::store) fn principals(&self) -> &crate::store::principals::Principals {
        &self.principals
    }

    /// The delivered marks queued in the writer and not yet committed.
    pub(in crate::store) fn marks(&self) -> &crate::store::marks::PendingMarks {
        &self.marks
    }

    /// What the writer has done since the store opened.
    pub(crate) fn writer_counts(&self) -> Arc<WriterCounts> {
        self.writer.counts().clone()
    }

    /// Stops taking writes, lets the writer commit those already queued, then closes both pools, waiting for
    /// connections in use to be returned.
    pub(crate) async fn close(&self) {
        self.writer.close().await;
        self.readers.close();
        self.read.close().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) const T0: i64 = 1_800_000_000_000;

    /// A database file at `path` with the schema of migration `version` only, as an earlier relay left it: for
    /// the tests that open it with today's store and check what the later migrations do to its rows.
    pub(super) async fn database_at(path: &std::path::Path, version: i64) -> sqlx::SqlitePool {
        use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(
                SqliteConnectOptions::new()
                    .filename(path)
                    .create_if_missing(true)
                    .foreign_keys(true)
                    .journal_mode(SqliteJournalMode::Wal),
            )
            .await
            .expect("opens");
        MIGRATOR.run_to(version, &pool).await.expect("migrated");
        pool
    }

    /// A store in a temporary folder with one agent, `ag_1`.
    pub(super) async fn store() -> (SqliteStore, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let store = SqliteStore::open(&dir.path().join("t.db")).await.expect("opens");
        crate::store::suite::agent::register_ag_1(&store.as_store()).await;
        (store, dir)
    }

    #[tokio::test]
    async fn the_database_is_in_wal_mode_with_full_sync() {
        let (store, _dir) = store().await;
        // Asked of the write connection itself, through the writer.
        let (mode, sync, fk): (String, i64, i64) = store
            .write(|conn| {
                let mode = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0))?;
                let sync = conn.query_row("PRAGMA synchronous", [], |r| r.get(0))?;
                let fk = conn.query_row("PRAGMA foreign_keys", [], |r| r.get(0))?;
                Ok((mode, sync, fk))
            })
            .await
            .expect("pragmas");
        assert_eq!(mode, "wal");
        // 2 = FULL
        assert_eq!(sync, 2);
        assert_eq!(fk, 1);
    }
}
