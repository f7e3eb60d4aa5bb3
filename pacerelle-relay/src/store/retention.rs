//! Retention rules both backends keep: what a purge deletes in which order, by which cut, and within which
//! bounds. Each backend deletes one batch of a step in its own SQL (`sqlite/retention.rs` says what goes and
//! when).

use std::future::Future;

use pacerelle_core::Timestamp;

use crate::config::Retention;
use crate::error::StoreError;
use crate::store::{Purged, Store};

/// Rows one write transaction deletes at most (an item deleted with its dependents may pass it by those).
pub(in crate::store) const BATCH_ROWS: usize = 500;
/// Write transactions one purge runs at most; what is left goes at the next sweep.
pub(in crate::store) const MAX_BATCHES: u32 = 100;

/// How long the sweep keeps expired pairing tombstones and ended sessions.
pub(in crate::store) const KEEP_MS: i64 = 24 * 3600 * 1000;

/// The kinds of rows a purge deletes, one after the other.
#[derive(Debug, Clone, Copy)]
pub(in crate::store) enum Step {
    /// Processed tasks, by `items` (with their updates).
    Tasks,
    /// Replies, notifications, checkpoints but each agent's newest, by `items`.
    Sent,
    /// Closed questions, by `answers` (with their envelopes, updates and events).
    Questions,
    /// Delivered or failed webhook events, by `items`.
    Events,
    /// Pushes past their TTL, by `items`.
    Pushes,
}

/// The time before which rows `age` old at `now` are deleted, in milliseconds.
fn cut(now: Timestamp, age: std::time::Duration) -> i64 {
    now.millis()
        .saturating_sub(i64::try_from(age.as_millis()).unwrap_or(i64::MAX))
}

/// Runs a purge of what is older than `retention` at `now`: each step in turn, batch after batch (`batch`
/// deletes one of a step older than a cut and says how many rows went and whether more may be left), at most
/// `max_batches` batches in all. With `pace`, other tasks run between two batches of a step (SQLite's writes
/// waiting for the writer queue theirs before the next batch).
pub(in crate::store) async fn purge<F, Fut>(
    now: Timestamp,
    retention: &Retention,
    max_batches: u32,
    pace: bool,
    mut batch: F,
) -> Result<Purged, StoreError>
where
    F: FnMut(Step, i64) -> Fut,
    Fut: Future<Output = Result<(u64, bool), StoreError>>,
{
    let items = retention.items.map(|age| cut(now, age));
    let answers = retention.answers.map(|age| cut(now, age));
    let steps = [
        (Step::Tasks, items),
        (Step::Sent, items),
        (Step::Questions, answers),
        (Step::Events, items),
        (Step::Pushes, items),
    ];
    let mut purged = Purged::default();
    for (step, cut) in steps {
        let Some(cut) = cut else { continue };
        loop {
            if purged.batches >= max_batches {
                purged.more = true;
                return Ok(purged);
            }
            let (rows, more) = batch(step, cut).await?;
            purged.batches += 1;
            purged.rows += rows;
            if !more {
                break;
            }
            if pace {
                tokio::task::yield_now().await;
            }
        }
    }
    Ok(purged)
}

impl Store {
    /// Deletes what is older than `retention` at `now`, in write transactions of at most [`BATCH_ROWS`] rows,
    /// at most [`MAX_BATCHES`] of them.
    pub(crate) async fn purge(&self, now: Timestamp, retention: &Retention) -> Result<Purged, StoreError> {
        self.purge_bounded(now, retention, MAX_BATCHES).await
    }

    /// [`Store::purge`] with another bound on the write transactions. On SQLite the purge is paced: the tasks
    /// whose writes wait for the writer queue them before the next batch. On PostgreSQL, where each batch is a
    /// transaction of its own beside the others, and several instances may purge at once, it is not.
    pub(in crate::store) async fn purge_bounded(
        &self,
        now: Timestamp,
        retention: &Retention,
        max_batches: u32,
    ) -> Result<Purged, StoreError> {
        match self {
            Store::Sqlite(s) => {
                purge(now, retention, max_batches, true, |step, cut| {
                    s.purge_batch(step, cut)
                })
                .await
            }
            Store::Postgres(p) => {
                purge(now, retention, max_batches, false, |step, cut| {
                    p.purge_batch(step, cut)
                })
                .await
            }
        }
    }
}
