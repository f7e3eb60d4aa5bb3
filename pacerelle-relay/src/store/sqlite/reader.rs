//! Reads that run as plain calls on a read-only `rusqlite` connection, on Tokio's blocking threads: a read that
//! needs several statements (the agent's wait: lease, cursor, tasks and head) pays one hop between threads for
//! all of them, instead of one round trip to sqlx's connection thread per statement.
//!
//! Each read runs in a read transaction of its own, so its statements see one snapshot of the database (WAL lets
//! it run beside the writer). Connections are opened on first use, kept for the next read, and at most
//! [`super::READERS`] are in use at once.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};
use tokio::sync::Semaphore;

use super::Result;
use crate::error::StoreError;

/// Prepared statements kept on each read connection.
const STATEMENT_CACHE: usize = 64;

/// The pool of read connections.
#[derive(Debug)]
pub(super) struct Readers {
    path: PathBuf,
    busy_timeout: Duration,
    acquire_timeout: Duration,
    /// Connections not in use.
    idle: Mutex<Vec<Connection>>,
    /// One permit per connection that may be in use.
    permits: Arc<Semaphore>,
}

impl Readers {
    /// A pool of at most `size` read-only connections on the database at `path` (already created and migrated).
    pub(super) fn new(
        path: &Path,
        size: usize,
        busy_timeout: Duration,
        acquire_timeout: Duration,
    ) -> Readers {
        Readers {
            path: path.to_path_buf(),
            busy_timeout,
            acquire_timeout,
            idle: Mutex::new(Vec::new()),
            permits: Arc::new(Semaphore::new(size)),
        }
    }

    fn open(&self) -> Result<Connection> {
        let conn = Connection::open_with_flags(
            &self.path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(self.busy_timeout)?;
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        Ok(conn)
    }

    /// Runs `f` on a read connection, in a read transaction, on a blocking thread.
    pub(super) async fn read<T, F>(self: &Arc<Self>, f: F) -> Result<T>
    where
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let permit = tokio::time::timeout(self.acquire_timeout, self.permits.clone().acquire_owned())
            .await
            .map_err(|_| StoreError::unavailable("every read connection is busy"))?
            .map_err(|_| StoreError::unavailable("the store is closed"))?;
        let readers = self.clone();
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let idle = readers
                .idle
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .pop();
            let conn = match idle {
                Some(conn) => conn,
                None => readers.open()?,
            };
            let outcome = in_snapshot(&conn, f);
            // A connection left inside a transaction (a failed ROLLBACK) is not kept.
            if conn.is_autocommit() {
                readers
                    .idle
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .push(conn);
            }
            outcome
        })
        .await
        .unwrap_or_else(|_| Err(StoreError::internal("a read panicked")))
    }

    /// Closes the idle connections and refuses new reads.
    pub(super) fn close(&self) {
        self.permits.close();
        self.idle
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clear();
    }
}

/// Runs `f` between `BEGIN` and the end of the read transaction.
fn in_snapshot<T>(conn: &Connection, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
    conn.prepare_cached("BEGIN")?.execute([])?;
    let outcome = f(conn);
    // Nothing was written: ending the transaction only releases the snapshot.
    if let Err(e) = conn.prepare_cached("ROLLBACK").and_then(|mut s| s.execute([])) {
        tracing::warn!(error = %e, "a read transaction did not end");
    }
    outcome
}
