//! Group commit in one thread: every write transaction runs on the writer's own SQLite connection, in a thread
//! of its own, and the writes waiting for it share one transaction and one synced commit.
//!
//! A write is a plain closure over a [`rusqlite::Connection`]: its statements are calls on that connection,
//! with prepared statements cached on it (`prepare_cached`), so a write costs no hop between threads and no
//! task wake-up until it is answered.
//!
//! The writer takes the first waiting write, opens `BEGIN IMMEDIATE` and runs it. Then, while writes are
//! **already** waiting (it never waits to fill a batch, so a lone write pays nothing extra), it runs each in
//! its own `SAVEPOINT`, released when the write succeeds and rolled back when it fails, so that one write's
//! failure undoes only itself — until [`MAX_BATCH`] writes. The batch thus grows with the queue: under load,
//! as many writes as arrived while the last commit was syncing. [`MAX_BATCH_WORK`] is a backstop for writes
//! that are each slow (large envelopes), not a cut that ordinary writes reach. Then `COMMIT`: one `fsync` of
//! the WAL for the whole batch (`synchronous = FULL`). Only then is each write answered, so an acknowledgement
//! still means "on disk" (ADR 0001). When the commit fails, every write of the batch gets the error; none of
//! them is on disk.
//!
//! Writes run one after the other on one connection, so each one sees what the writes before it in the same
//! batch did, exactly as if they had been committed one by one: outcomes such as "already stored" stay true.

use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags};
use tokio::sync::{mpsc, oneshot};

use super::Result;
use crate::error::StoreError;
use crate::store::WriterCounts;

/// At most this many writes share one commit.
pub(super) const MAX_BATCH: usize = 1024;
/// No write joins a batch that has already run this long. Ordinary writes take tens of microseconds, so a
/// full batch stays far below it; it bounds what a run of slow writes adds to the first one's latency.
pub(super) const MAX_BATCH_WORK: Duration = Duration::from_millis(50);
/// Writes queued for the writer at most; more callers wait for room (and give up after the acquire timeout).
const QUEUE: usize = 4096;
/// Prepared statements kept on the writer's connection.
const STATEMENT_CACHE: usize = 128;

/// One write as the writer sees it: its closure, type-erased, and the channel of its caller.
trait Write: Send {
    /// Runs the write on `conn` (once). Its result is kept for [`Write::answer`]; returned here is only whether
    /// it succeeded, with a copy of its error when it did not.
    fn run(&mut self, conn: &Connection) -> Result<()>;

    /// Answers the caller once the batch's fate is known: its own error if it failed (or never ran because
    /// the batch could not start), else the batch's error if the commit failed, else its result.
    fn answer(self: Box<Self>, batch: Result<()>);
}

struct Pending<T, F> {
    f: Option<F>,
    result: Option<Result<T>>,
    reply: oneshot::Sender<Result<T>>,
}

impl<T, F> Write for Pending<T, F>
where
    F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    T: Send + 'static,
{
    fn run(&mut self, conn: &Connection) -> Result<()> {
        let Some(f) = self.f.take() else {
            return Err(StoreError::internal("a write ran twice"));
        };
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| f(conn)))
            .unwrap_or_else(|_| Err(StoreError::internal("a write panicked")));
        let ran = match &result {
            Ok(_) => Ok(()),
            Err(e) => Err(copy(e)),
        };
        self.result = Some(result);
        ran
    }

    fn answer(self: Box<Self>, batch: Result<()>) {
        let answer = match (self.result, batch) {
            (Some(Err(e)), _) => Err(e),
            (Some(Ok(value)), Ok(())) => Ok(value),
            (Some(Ok(_)), Err(e)) => Err(e),
            // It never ran (the transaction could not start).
            (None, Err(e)) => Err(e),
            (None, Ok(())) => Err(StoreError::internal("the write did not complete")),
        };
        // The caller may have gone (its request was dropped): nobody to tell.
        let _ = self.reply.send(answer);
    }
}

/// A copy of a storage error for another write of the same batch (the sources are not `Clone`); it keeps the
/// kind (unavailable or internal) and the message.
fn copy(e: &StoreError) -> StoreError {
    match e {
        StoreError::Unavailable(cause) => StoreError::unavailable(cause.to_string()),
        StoreError::Internal(cause) => StoreError::internal(cause.to_string()),
    }
}

fn closed() -> StoreError {
    StoreError::unavailable("the store is closed")
}

/// The handle on the writer thread, shared by every clone of the store.
#[derive(Debug)]
pub(super) struct Writer {
    /// `None` once the store is closing: new writes are refused, queued ones still run.
    queue: Mutex<Option<mpsc::Sender<Box<dyn Write>>>>,
    /// Fires when the writer's thread has finished.
    stopped: Mutex<Option<oneshot::Receiver<()>>>,
    counts: Arc<WriterCounts>,
}

impl Writer {
    /// Opens the write connection on the database at `path` (already created and migrated, in WAL mode) and
    /// starts the writer thread; no write joins a batch that has run for `max_work` ([`MAX_BATCH_WORK`] but in
    /// tests).
    pub(super) fn start(path: &Path, busy_timeout: Duration, max_work: Duration) -> Result<Writer> {
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(busy_timeout)?;
        // `synchronous = FULL`: every commit syncs the WAL (ADR 0001). The journal mode is the file's, WAL.
        // `temp_store = MEMORY`: the sub-journal of each write's savepoint in a batch lives in memory. In a
        // temporary file it outgrew SQLite's 64 KiB in-memory start within a batch and was then written page by
        // page with a system call each, and never truncated until the commit (a sixth of the writer's time with
        // 64 senders, docs/performance.md). It holds nothing a crash needs: the WAL does.
        conn.execute_batch(
            "PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON; PRAGMA temp_store = MEMORY;",
        )?;
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        let (tx, rx) = mpsc::channel(QUEUE);
        let counts = Arc::new(WriterCounts::default());
        let (stopped_tx, stopped) = oneshot::channel();
        let thread_counts = counts.clone();
        std::thread::Builder::new()
            .name("pacerelle-writer".into())
            .spawn(move || {
                writer(conn, rx, max_work, &thread_counts);
                let _ = stopped_tx.send(());
            })
            .map_err(|e| StoreError::Unavailable(Box::new(e)))?;
        Ok(Writer {
            queue: Mutex::new(Some(tx)),
            stopped: Mutex::new(Some(stopped)),
            counts,
        })
    }

    /// What the writer has done so far.
    pub(super) fn counts(&self) -> &Arc<WriterCounts> {
        &self.counts
    }

    /// Writes waiting in the queue now.
    #[cfg(test)]
    pub(super) fn queued(&self) -> usize {
        self.sender().map_or(0, |q| q.max_capacity() - q.capacity())
    }

    fn sender(&self) -> Result<mpsc::Sender<Box<dyn Write>>> {
        self.queue
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
            .ok_or_else(closed)
    }

    /// Queues a write and waits until its batch is committed (or it failed).
    pub(super) async fn write<T, F>(&self, f: F, acquire_timeout: Duration) -> Result<T>
    where
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let called = Instant::now();
        let (reply, answer) = oneshot::channel();
        let write: Box<dyn Write> = Box::new(Pending {
            f: Some(f),
            result: None,
            reply,
        });
        let queue = self.sender()?;
        match tokio::time::timeout(acquire_timeout, queue.send(write)).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return Err(closed()),
            Err(_) => return Err(StoreError::unavailable("the writer is too busy")),
        }
        drop(queue);
        // The writer answers every write it received; only a writer that died drops one unanswered.
        let answered = answer
            .await
            .unwrap_or_else(|_| Err(StoreError::internal("the writer stopped before answering")));
        self.counts.latency.observe(called.elapsed().as_secs_f64());
        answered
    }

    /// Refuses new writes, lets the writer finish those already queued, and waits for it to stop.
    pub(super) async fn close(&self) {
        drop(
            self.queue
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .take(),
        );
        let stopped = self
            .stopped
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        if let Some(stopped) = stopped
            && stopped.await.is_err()
        {
            tracing::error!("the writer thread failed");
        }
    }
}

/// The writer thread: one batch after another, until every sender is gone (the store was closed or dropped)
/// and the queue is empty. The connection closes when it returns.
fn writer(
    conn: Connection,
    mut queue: mpsc::Receiver<Box<dyn Write>>,
    max_work: Duration,
    counts: &WriterCounts,
) {
    let mut batch: Vec<Box<dyn Write>> = Vec::with_capacity(MAX_BATCH);
    while let Some(first) = queue.blocking_recv() {
        batch.push(first);
        let outcome = run_batch(&conn, &mut queue, &mut batch, max_work);
        counts
            .writes
            .inc_by(u64::try_from(batch.len()).unwrap_or(u64::MAX));
        counts.batch.observe(batch.len() as f64);
        match &outcome {
            Ok(true) => {
                counts.commits.inc();
            }
            Ok(false) => {}
            Err(e) => tracing::warn!(error = %e, writes = batch.len(), "a write batch failed"),
        }
        let failure = outcome.err();
        for write in batch.drain(..) {
            write.answer(failure.as_ref().map_or(Ok(()), |e| Err(copy(e))));
        }
    }
}

/// Runs a statement without parameters or rows, from the connection's cache of prepared statements.
fn exec(conn: &Connection, sql: &str) -> Result<()> {
    conn.prepare_cached(sql)?.execute([])?;
    Ok(())
}

/// Runs `batch[0]` and the writes waiting behind it in one transaction, pushing each one it takes onto
/// `batch`, and commits. `Ok(true)` when the transaction committed, `Ok(false)` when the lone first write
/// failed and was rolled back; each write's own failure is kept in the write.
fn run_batch(
    conn: &Connection,
    queue: &mut mpsc::Receiver<Box<dyn Write>>,
    batch: &mut Vec<Box<dyn Write>>,
    max_work: Duration,
) -> Result<bool> {
    // `BEGIN IMMEDIATE` takes the write lock at once, so a write that reads before it writes never fails to
    // upgrade its lock (another process may share the file). Busy: the batch fails, the next one tries again.
    exec(conn, "BEGIN IMMEDIATE")?;
    let started = Instant::now();
    // The first write needs no savepoint: if it fails, the transaction holds nothing else to keep.
    let Some(first) = batch.first_mut() else {
        return Ok(false);
    };
    if first.run(conn).is_err() {
        rollback(conn);
        return Ok(false);
    }
    let mut in_savepoint = false;
    while batch.len() < MAX_BATCH && started.elapsed() < max_work {
        let Ok(mut write) = queue.try_recv() else {
            break;
        };
        let step = if in_savepoint {
            exec(conn, "RELEASE w").and_then(|()| exec(conn, "SAVEPOINT w"))
        } else {
            exec(conn, "SAVEPOINT w")
        };
        if let Err(e) = step {
            batch.push(write);
            rollback(conn);
            return Err(e);
        }
        in_savepoint = true;
        let ran = write.run(conn);
        batch.push(write);
        if let Err(own) = ran {
            // Undo this write only; its savepoint, now empty, is released with the next step.
            if let Err(e) = exec(conn, "ROLLBACK TO w") {
                // Some failures (disk full, I/O error) make SQLite roll back the whole transaction,
                // savepoints included: the writes before this one are gone too, and the batch fails with
                // the cause.
                tracing::debug!(error = %e, "no savepoint to roll back to");
                rollback(conn);
                return Err(own);
            }
        }
    }
    if let Err(e) = exec(conn, "COMMIT") {
        // A failed commit may leave the transaction open (a deferred constraint, busy): end it.
        rollback(conn);
        return Err(e);
    }
    Ok(true)
}

/// Ends a transaction that will not commit (SQLite may already have rolled it back: then there is nothing to
/// do, and nothing to say).
fn rollback(conn: &Connection) {
    if !conn.is_autocommit()
        && let Err(e) = exec(conn, "ROLLBACK")
    {
        tracing::warn!(error = %e, "the writer could not end a transaction");
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use pacerelle_core::Timestamp;
    use pacerelle_core::wire::Stored;
    use tokio::task::JoinHandle;

    use super::super::SqliteStore;
    use super::*;
    use crate::store::{Put, Registered};

    const T0: i64 = 1_800_000_000_000;
    /// Generous enough that, in these tests, every write waiting when a batch starts joins it.
    const PATIENT: Duration = Duration::from_secs(60);

    async fn open(path: &Path, max_work: Duration) -> SqliteStore {
        let store = SqliteStore::open_with(path, max_work).await.expect("opens");
        let registered = store
            .as_store()
            .register_agent("ag_1", "laptop", &[1; 32], Timestamp(T0))
            .await
            .expect("stored");
        if matches!(registered, Registered::Created(_)) {
            store
                .write(|conn| {
                    conn.execute(
                        "INSERT INTO devices (device_id, agent_id, name, role, token_hash, created_at)
                         VALUES ('dv_1', 'ag_1', 'phone', 'owner', x'00', ?1),
                                ('dv_2', 'ag_1', 'tablet', 'owner', x'00', ?1)",
                        [T0],
                    )?;
                    Ok(())
                })
                .await
                .expect("devices");
        }
        store
    }

    fn commits(store: &SqliteStore) -> u64 {
        store.writer.counts().commits.get()
    }

    /// Sends a task in a task of its own.
    fn send(store: &SqliteStore, device: &str, id: &str) -> JoinHandle<Result<Put>> {
        let (store, device, id) = (store.clone(), device.to_string(), id.to_string());
        tokio::spawn(async move {
            store
                .as_store()
                .put_message("ag_1", &device, &id, "AQID", None, u32::MAX, Timestamp(T0))
                .await
        })
    }

    /// A write of its own, in a task of its own.
    fn spawn_write<T, F>(store: &SqliteStore, f: F) -> JoinHandle<Result<T>>
    where
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let store = store.clone();
        tokio::spawn(async move { store.write(f).await })
    }

    /// Keeps the writer busy inside a transaction until the returned sender fires (or is dropped), so that
    /// the writes queued meanwhile all wait together; they then join the holder's batch.
    async fn hold(store: &SqliteStore) -> (std::sync::mpsc::Sender<()>, JoinHandle<Result<()>>) {
        let (release, held) = std::sync::mpsc::channel::<()>();
        let (running, started) = oneshot::channel::<()>();
        let holder = spawn_write(store, move |_conn| {
            let _ = running.send(());
            let _ = held.recv();
            Ok(())
        });
        started.await.expect("the writer runs the holder");
        (release, holder)
    }

    /// Waits until `n` writes are queued behind the holder.
    async fn queued(store: &SqliteStore, n: usize) {
        while store.writer.queued() < n {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    fn stored(put: Result<Put>) -> Stored {
        match put.expect("no storage error") {
            Put::Stored(stored) => stored,
            Put::Conflict(why) => panic!("a conflict: {why}"),
            Put::QuotaExceeded => panic!("refused by a quota"),
        }
    }

    async fn message_ids(store: &SqliteStore) -> Vec<String> {
        sqlx::query_scalar("SELECT item_id FROM items WHERE kind = 'message' ORDER BY seq")
            .fetch_all(&store.read)
            .await
            .expect("reads")
    }

    fn insert_doomed(conn: &Connection, id: &str) -> Result<()> {
        conn.execute(
            "INSERT INTO items (agent_id, kind, item_id, device_id, envelope, created_at)
             VALUES ('ag_1', 'message', ?1, 'dv_1', 'AQID', 1)",
            [id],
        )?;
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_writes_are_all_acknowledged_and_all_on_disk_after_reopening() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("w.db");
        let store = open(&path, MAX_BATCH_WORK).await;
        let before = commits(&store);
        let n = 300;
        let sends: Vec<_> = (0..n)
            .map(|i| send(&store, if i % 2 == 0 { "dv_1" } else { "dv_2" }, &format!("m{i}")))
            .collect();
        let mut cursors = Vec::new();
        for send in sends {
            let put = stored(send.await.expect("joins"));
            assert!(put.created);
            cursors.push(put.cursor);
        }
        cursors.sort();
        cursors.dedup();
        assert_eq!(cursors.len(), n, "every task has a sequence number of its own");
        let commits = commits(&store) - before;
        assert!(commits >= 1 && commits <= n as u64);
        store.close().await;

        let store = open(&path, MAX_BATCH_WORK).await;
        let mut ids = message_ids(&store).await;
        ids.sort();
        let mut expected: Vec<String> = (0..n).map(|i| format!("m{i}")).collect();
        expected.sort();
        assert_eq!(ids, expected);
    }

    #[tokio::test]
    async fn writes_waiting_together_share_one_commit() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let store = open(&dir.path().join("w.db"), PATIENT).await;
        let (release, holder) = hold(&store).await;
        let before = commits(&store);
        let sends: Vec<_> = (0..10).map(|i| send(&store, "dv_1", &format!("m{i}"))).collect();
        queued(&store, 10).await;
        release.send(()).expect("the holder waits");
        holder.await.expect("joins").expect("the holder's write");
        for send in sends {
            assert!(stored(send.await.expect("joins")).created);
        }
        assert_eq!(commits(&store), before + 1, "one commit for the eleven writes");
        assert_eq!(message_ids(&store).await.len(), 10);
    }

    #[tokio::test]
    async fn the_same_message_twice_in_one_batch_is_stored_once() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let store = open(&dir.path().join("w.db"), PATIENT).await;
        let (release, holder) = hold(&store).await;
        let before = commits(&store);
        let first = send(&store, "dv_1", "m1");
        queued(&store, 1).await;
        let again = send(&store, "dv_1", "m1");
        queued(&store, 2).await;
        let other = send(&store, "dv_2", "m1");
        queued(&store, 3).await;
        release.send(()).expect("the holder waits");
        holder.await.expect("joins").expect("the holder's write");

        let first = stored(first.await.expect("joins"));
        let again = stored(again.await.expect("joins"));
        assert!(first.created);
        assert!(!again.created, "the second write saw the first, uncommitted then");
        assert_eq!(again.cursor, first.cursor);
        assert_eq!(again.created_at, first.created_at);
        assert!(matches!(
            other.await.expect("joins").expect("no storage error"),
            Put::Conflict(_)
        ));
        assert_eq!(commits(&store), before + 1, "all in one batch");
        assert_eq!(message_ids(&store).await, ["m1"]);
    }

    #[tokio::test]
    async fn a_failing_write_in_a_batch_rolls_back_only_itself() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("w.db");
        let store = open(&path, PATIENT).await;
        let (release, holder) = hold(&store).await;
        let before = commits(&store);
        let a = send(&store, "dv_1", "a");
        queued(&store, 1).await;
        // Stores a task, then fails: the task must not stay.
        let failing = spawn_write(&store, |conn| {
            insert_doomed(conn, "doomed")?;
            conn.execute("INSERT INTO no_such_table VALUES (1)", [])?;
            Ok(())
        });
        queued(&store, 2).await;
        let panicking = spawn_write(&store, |conn| {
            insert_doomed(conn, "doomed too")?;
            if std::hint::black_box(true) {
                panic!("a bug in a write");
            }
            Ok(())
        });
        queued(&store, 3).await;
        let b = send(&store, "dv_2", "b");
        queued(&store, 4).await;
        release.send(()).expect("the holder waits");
        holder.await.expect("joins").expect("the holder's write");

        assert!(stored(a.await.expect("joins")).created);
        assert!(stored(b.await.expect("joins")).created);
        assert!(matches!(
            failing.await.expect("joins"),
            Err(StoreError::Internal(_))
        ));
        assert!(matches!(
            panicking.await.expect("joins"),
            Err(StoreError::Internal(_))
        ));
        assert_eq!(commits(&store), before + 1, "all in one batch");
        store.close().await;

        let store = open(&path, PATIENT).await;
        assert_eq!(message_ids(&store).await, ["a", "b"]);
    }

    #[tokio::test]
    async fn a_failing_first_write_is_rolled_back_and_the_writes_behind_it_go_on() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let store = open(&dir.path().join("w.db"), PATIENT).await;
        let before = commits(&store);
        // The first write of a batch runs without a savepoint: its failure rolls back the transaction.
        let (release, held) = std::sync::mpsc::channel::<()>();
        let (running, started) = oneshot::channel::<()>();
        let first = spawn_write(&store, move |conn| {
            insert_doomed(conn, "doomed")?;
            let _ = running.send(());
            let _ = held.recv();
            conn.execute("INSERT INTO no_such_table VALUES (1)", [])?;
            Ok(())
        });
        started.await.expect("the writer runs the first write");
        let a = send(&store, "dv_1", "a");
        let b = send(&store, "dv_2", "b");
        queued(&store, 2).await;
        release.send(()).expect("the first write waits");
        assert!(matches!(
            first.await.expect("joins"),
            Err(StoreError::Internal(_))
        ));
        assert!(stored(a.await.expect("joins")).created);
        assert!(stored(b.await.expect("joins")).created);
        assert_eq!(commits(&store), before + 1, "a and b in the next batch");
        assert_eq!(message_ids(&store).await, ["a", "b"]);
    }

    #[tokio::test]
    async fn when_the_commit_fails_every_write_of_the_batch_gets_the_error() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("w.db");
        let store = open(&path, PATIENT).await;
        let (release, holder) = hold(&store).await;
        let before = commits(&store);
        let a = send(&store, "dv_1", "a");
        queued(&store, 1).await;
        // A foreign key checked only at COMMIT: the commit of the whole batch fails.
        let breaking = spawn_write(&store, |conn| {
            conn.execute_batch("PRAGMA defer_foreign_keys = ON")?;
            conn.execute(
                "INSERT INTO items (agent_id, kind, item_id, envelope, created_at)
                 VALUES ('no such agent', 'checkpoint', 'c', 'AA', 1)",
                [],
            )?;
            Ok(())
        });
        queued(&store, 2).await;
        let b = send(&store, "dv_2", "b");
        queued(&store, 3).await;
        release.send(()).expect("the holder waits");

        assert!(holder.await.expect("joins").is_err());
        assert!(a.await.expect("joins").is_err(), "not acknowledged: not on disk");
        assert!(breaking.await.expect("joins").is_err());
        assert!(b.await.expect("joins").is_err());
        assert_eq!(commits(&store), before);
        assert!(message_ids(&store).await.is_empty());

        // The writer goes on with a clean transaction.
        assert!(stored(send(&store, "dv_1", "c").await.expect("joins")).created);
        store.close().await;
        let store = open(&path, PATIENT).await;
        assert_eq!(message_ids(&store).await, ["c"]);
    }

    #[tokio::test]
    async fn closing_finishes_the_queued_writes_and_refuses_new_ones() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("w.db");
        let store = open(&path, PATIENT).await;
        let (release, holder) = hold(&store).await;
        let a = send(&store, "dv_1", "a");
        let b = send(&store, "dv_2", "b");
        queued(&store, 2).await;
        let closing = {
            let store = store.clone();
            tokio::spawn(async move { store.close().await })
        };
        while store.writer.sender().is_ok() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert!(matches!(
            send(&store, "dv_1", "late").await.expect("joins"),
            Err(StoreError::Unavailable(_))
        ));
        release.send(()).expect("the holder waits");
        holder.await.expect("joins").expect("the holder's write");
        assert!(stored(a.await.expect("joins")).created);
        assert!(stored(b.await.expect("joins")).created);
        closing.await.expect("closes");

        let store = open(&path, PATIENT).await;
        assert_eq!(message_ids(&store).await, ["a", "b"]);
    }
}
