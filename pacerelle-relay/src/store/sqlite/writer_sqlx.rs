//! The writer of the writes not yet moved to [`super::writer`] (sqlx, async closures); removed once every write
//! has moved. Group commit: every write transaction goes through one writer task, which runs the writes waiting for it
//! in one transaction and syncs once for all of them.
//!
//! The writer takes the first waiting write, opens `BEGIN IMMEDIATE` and runs it. Then, while writes are
//! **already** waiting (it never waits to fill a batch, so a lone write pays nothing extra), it runs each in
//! its own `SAVEPOINT`, released when the write succeeds and rolled back when it fails, so that one write's
//! failure undoes only itself — until [`MAX_BATCH`] writes or [`MAX_BATCH_WORK`] of work. Then `COMMIT`: one
//! `fsync` of the WAL for the whole batch (`synchronous = FULL`). Only then is each write answered, so an
//! acknowledgement still means "on disk" (ADR 0001). When the commit fails, every write of the batch gets the
//! error; none of them is on disk.
//!
//! Writes run one after the other on one connection, so each one sees what the writes before it in the same
//! batch did, exactly as if they had been committed one by one: outcomes such as "already stored" stay true.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use sqlx::pool::PoolConnection;
use sqlx::{Sqlite, SqliteConnection, SqlitePool};
use tokio::sync::{mpsc, oneshot};

use super::Result;
use crate::error::StoreError;

/// A boxed future that may borrow for `'a` (the writer's connection).
pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// At most this many writes share one commit.
pub(super) const MAX_BATCH: usize = 256;
/// No write joins a batch that has already run this long: the first write of a batch waits for the others'
/// work before its commit, so this bounds what batching adds to its latency.
pub(super) const MAX_BATCH_WORK: Duration = Duration::from_millis(4);
/// Writes queued for the writer at most; more callers wait for room (and give up after the acquire timeout).
const QUEUE: usize = 4096;

/// One write as the writer sees it: its closure, type-erased, and the channel of its caller.
trait Write: Send {
    /// Runs the write on `conn` (once). Its result is kept for [`Write::answer`]; returned here is only whether
    /// it succeeded, with a copy of its error when it did not.
    fn run<'a>(&'a mut self, conn: &'a mut SqliteConnection) -> BoxFuture<'a, Result<()>>;

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
    F: for<'c> FnOnce(&'c mut SqliteConnection) -> BoxFuture<'c, Result<T>> + Send + 'static,
    T: Send + 'static,
{
    fn run<'a>(&'a mut self, conn: &'a mut SqliteConnection) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let Some(f) = self.f.take() else {
                return Err(internal("a write ran twice"));
            };
            let result = f(conn).await;
            let ran = match &result {
                Ok(_) => Ok(()),
                Err(e) => Err(copy(e)),
            };
            self.result = Some(result);
            ran
        })
    }

    fn answer(self: Box<Self>, batch: Result<()>) {
        let answer = match (self.result, batch) {
            (Some(Err(e)), _) => Err(e),
            (Some(Ok(value)), Ok(())) => Ok(value),
            (Some(Ok(_)), Err(e)) => Err(e),
            // It never ran (the transaction could not start), or it panicked.
            (None, Err(e)) => Err(e),
            (None, Ok(())) => Err(internal("the write did not complete")),
        };
        // The caller may have gone (its request was dropped): nobody to tell.
        let _ = self.reply.send(answer);
    }
}

/// A copy of a storage error for another write of the same batch (`sqlx::Error` is not `Clone`); it keeps the
/// kind (unavailable or internal) and the message.
fn copy(e: &StoreError) -> StoreError {
    match e {
        StoreError::Unavailable(cause) => {
            StoreError::unavailable(cause.to_string())
        }
        StoreError::Internal(cause) => StoreError::internal(cause.to_string()),
    }
}

fn internal(what: &str) -> StoreError {
    StoreError::internal(what)
}

fn closed() -> StoreError {
    StoreError::unavailable("the store is closed")
}

/// The handle on the writer task, shared by every clone of the store.
#[derive(Debug)]
pub(super) struct Writer {
    /// `None` once the store is closing: new writes are refused, queued ones still run.
    queue: Mutex<Option<mpsc::Sender<Box<dyn Write>>>>,
    /// Fires when the writer's thread has finished.
    stopped: Mutex<Option<oneshot::Receiver<()>>>,
}

impl Writer {
    /// Starts the writer task on `pool` (the single write connection); no write joins a batch that has run
    /// for `max_work` ([`MAX_BATCH_WORK`] but in tests).
    ///
    /// The task runs on a thread of its own, in a single-threaded runtime. Every write is several round trips
    /// to SQLite's connection thread, and each answer wakes the writer from outside the relay's runtime: there
    /// it would wait in the runtime's shared queue behind the request handlers — under load, most of a
    /// write's time. On its own thread it runs as soon as it is woken.
    pub(super) fn start(pool: SqlitePool, max_work: Duration) -> std::io::Result<Writer> {
        let (tx, rx) = mpsc::channel(QUEUE);
        let commits = Arc::new(AtomicU64::new(0));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (stopped_tx, stopped) = oneshot::channel();
        let task = writer(pool, rx, max_work, commits.clone());
        std::thread::Builder::new()
            .name("pacerelle-writer-sqlx".into())
            .spawn(move || {
                runtime.block_on(task);
                // Tasks the pool spawned here (a connection going back) end with the runtime.
                drop(runtime);
                let _ = stopped_tx.send(());
            })?;
        Ok(Writer {
            queue: Mutex::new(Some(tx)),
            stopped: Mutex::new(Some(stopped)),
        })
    }

    /// Queues a write and waits until its batch is committed (or it failed).
    pub(super) async fn write<T, F>(&self, f: F, acquire_timeout: Duration) -> Result<T>
    where
        F: for<'c> FnOnce(&'c mut SqliteConnection) -> BoxFuture<'c, Result<T>> + Send + 'static,
        T: Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let write: Box<dyn Write> = Box::new(Pending {
            f: Some(f),
            result: None,
            reply,
        });
        let queue = self
            .queue
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
            .ok_or_else(closed)?;
        match tokio::time::timeout(acquire_timeout, queue.send(write)).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return Err(closed()),
            Err(_) => return Err(StoreError::unavailable("the writer is too busy")),
        }
        drop(queue);
        // The writer answers every write it received; only a writer that died drops one unanswered.
        answer
            .await
            .unwrap_or_else(|_| Err(internal("the writer stopped before answering")))
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

/// The writer task: one batch after another, until every sender is gone (the store was closed or dropped)
/// and the queue is empty.
async fn writer(
    pool: SqlitePool,
    mut queue: mpsc::Receiver<Box<dyn Write>>,
    max_work: Duration,
    commits: Arc<AtomicU64>,
) {
    let mut conn = Connection { pool, held: None };
    let mut batch: Vec<Box<dyn Write>> = Vec::with_capacity(MAX_BATCH);
    while let Some(first) = queue.recv().await {
        batch.push(first);
        let outcome = run_batch(&mut conn, &mut queue, &mut batch, max_work).await;
        match &outcome {
            Ok(true) => {
                commits.fetch_add(1, Ordering::Relaxed);
            }
            Ok(false) => {}
            Err(e) => tracing::warn!(error = %e, writes = batch.len(), "a write batch failed"),
        }
        let failure = outcome.err();
        for write in batch.drain(..) {
            write.answer(failure.as_ref().map_or(Ok(()), |e| Err(copy(e))));
        }
    }
    conn.release().await;
}

/// The write connection, kept by the writer between batches (taking it from the pool and giving it back for
/// every batch would cost a task and a round trip to SQLite's thread each time).
struct Connection {
    pool: SqlitePool,
    held: Option<PoolConnection<Sqlite>>,
}

impl Connection {
    async fn get(&mut self) -> Result<&mut PoolConnection<Sqlite>> {
        let conn = match self.held.take() {
            Some(conn) => conn,
            None => self.pool.acquire().await?,
        };
        Ok(self.held.insert(conn))
    }

    /// Closes the connection (its state is unknown); the next batch takes a fresh one from the pool.
    fn discard(&mut self) {
        if let Some(mut conn) = self.held.take() {
            conn.close_on_drop();
        }
    }

    /// Gives the connection back to the pool, which can then close.
    async fn release(&mut self) {
        if let Some(conn) = self.held.take()
            && let Err(e) = conn.close().await
        {
            tracing::warn!(error = %e, "the write connection did not close cleanly");
        }
    }
}

/// Runs `batch[0]` and the writes waiting behind it in one transaction, pushing each one it takes onto
/// `batch`, and commits. `Ok(true)` when the transaction committed, `Ok(false)` when the lone first write
/// failed and was rolled back; each write's own failure is kept in the write.
async fn run_batch(
    connection: &mut Connection,
    queue: &mut mpsc::Receiver<Box<dyn Write>>,
    batch: &mut Vec<Box<dyn Write>>,
    max_work: Duration,
) -> Result<bool> {
    let conn = connection.get().await?;
    // `BEGIN IMMEDIATE` takes the write lock at once, so a write that reads before it writes never fails to
    // upgrade its lock (another process may share the file).
    if let Err(e) = sqlx::query("BEGIN IMMEDIATE").execute(&mut **conn).await {
        // Busy (another process holds the file), or the connection is in a state it should never be in:
        // the next batch starts on a fresh connection either way.
        connection.discard();
        return Err(e.into());
    }
    let started = Instant::now();
    // The first write needs no savepoint: if it fails, the transaction holds nothing else to keep.
    let Some(first) = batch.first_mut() else {
        return Ok(false);
    };
    if run_guarded(first.as_mut(), conn).await.is_err() {
        if !rollback(conn).await {
            connection.discard();
        }
        return Ok(false);
    }
    // Each further write runs in savepoint `w`; releasing one and opening the next is one round trip, and
    // COMMIT releases the last one.
    let mut in_savepoint = false;
    while batch.len() < MAX_BATCH && started.elapsed() < max_work {
        let Ok(mut write) = queue.try_recv() else {
            break;
        };
        let step = if in_savepoint {
            "RELEASE w; SAVEPOINT w"
        } else {
            "SAVEPOINT w"
        };
        if let Err(e) = sqlx::raw_sql(step).execute(&mut **conn).await {
            batch.push(write);
            return Err(abort(connection, e.into()).await);
        }
        in_savepoint = true;
        let ran = run_guarded(write.as_mut(), conn).await;
        batch.push(write);
        if let Err(own) = ran {
            // Undo this write only; its savepoint, now empty, is released with the next step.
            if let Err(e) = sqlx::query("ROLLBACK TO w").execute(&mut **conn).await {
                // Some failures (disk full, I/O error) make SQLite roll back the whole transaction,
                // savepoints included: the writes before this one are gone too, and the batch fails with
                // the cause.
                tracing::debug!(error = %e, "no savepoint to roll back to");
                return Err(abort(connection, own).await);
            }
        }
    }
    if let Err(e) = sqlx::query("COMMIT").execute(&mut **conn).await {
        // A failed commit may leave the transaction open (a deferred constraint, busy): end it.
        return Err(abort(connection, e.into()).await);
    }
    Ok(true)
}

/// Rolls back the batch's transaction after `cause`, and returns `cause`.
async fn abort(connection: &mut Connection, cause: StoreError) -> StoreError {
    if let Some(conn) = connection.held.as_mut()
        && !rollback(conn).await
    {
        connection.discard();
    }
    cause
}

/// Runs one write, turning a panic into its failure (the writer must outlive any write).
async fn run_guarded(write: &mut dyn Write, conn: &mut PoolConnection<Sqlite>) -> Result<()> {
    CatchUnwind(write.run(conn))
        .await
        .unwrap_or_else(|_| Err(internal("a write panicked")))
}

/// Ends a transaction that will not commit. `false` when even that failed: the connection's state is then
/// unknown.
async fn rollback(conn: &mut PoolConnection<Sqlite>) -> bool {
    match sqlx::query("ROLLBACK").execute(&mut **conn).await {
        Ok(_) => true,
        // SQLite already rolled it back.
        Err(e) if e.to_string().contains("no transaction is active") => true,
        Err(e) => {
            tracing::warn!(error = %e, "the writer could not end a transaction; reopening its connection");
            false
        }
    }
}

/// A future that turns a panic while polling into `Err` (like `futures::FutureExt::catch_unwind`).
struct CatchUnwind<'a, T>(BoxFuture<'a, T>);

impl<T> Future for CatchUnwind<'_, T> {
    type Output = std::thread::Result<T>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = self.0.as_mut();
        match std::panic::catch_unwind(AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(value)) => Poll::Ready(Ok(value)),
            Err(panic) => Poll::Ready(Err(panic)),
        }
    }
}
