//! Retention: what is older than the relay's settings ([`Retention`]) is deleted, in small write transactions
//! that let the other writes through between them.
//!
//! Each kind of row goes by its own age (migration 0011 indexes each one, so a purge reads only what it
//! deletes, oldest first):
//!
//! - tasks processed before the cut of [`Retention::items`], with the `update` items about them; replies,
//!   notifications and checkpoints stored before it, except each agent's newest checkpoint; webhook events
//!   delivered or failed, created before it; pushes whose TTL ended before it;
//! - questions closed (answered, expired, cancelled) before the cut of [`Retention::answers`], with their
//!   envelopes, updates and webhook events.
//!
//! Tasks not yet processed and open questions are never deleted. Nothing is renumbered: `seq` is
//! AUTOINCREMENT, so a cursor taken before a purge still orders after the same items, and finds fewer. The
//! counters of `agent_counts` count tasks ever stored and ever processed; only processed tasks are deleted, so
//! tasks not yet processed (their difference) stay exact.
//!
//! A write deletes at most [`BATCH_ROWS`] rows, then the purge queues its next write behind whatever other
//! writes arrived meanwhile; one purge runs at most [`MAX_BATCHES`] writes, and the next sweep goes on.

use rusqlite::{Connection, params};

use super::{Result, SqliteStore};
use crate::store::retention::{BATCH_ROWS, Step};

impl SqliteStore {
    /// Deletes up to [`BATCH_ROWS`] rows of `step` older than `cut` in one write: the rows deleted, and whether
    /// more may be left ([`crate::store::Store::purge`]).
    pub(in crate::store) async fn purge_batch(&self, step: Step, cut: i64) -> Result<(u64, bool)> {
        let (rows, more) = self.write(move |conn| batch(conn, step, cut)).await?;
        Ok((rows as u64, more))
    }
}

/// Deletes up to [`BATCH_ROWS`] rows of `step` older than `cut`: the rows deleted, and whether more may be left.
fn batch(conn: &Connection, step: Step, cut: i64) -> Result<(usize, bool)> {
    let limit = BATCH_ROWS as i64;
    let seqs: Vec<i64> = match step {
        Step::Tasks => conn
            .prepare_cached(
                "SELECT seq FROM items WHERE processed_at < ?1 AND kind = 'message'
                 ORDER BY processed_at LIMIT ?2",
            )?
            .query_map(params![cut, limit], |r| r.get(0))?
            .collect::<Result<_, _>>()?,
        Step::Sent => conn
            .prepare_cached(
                "SELECT seq FROM items i
                 WHERE kind IN ('reply', 'notification', 'checkpoint') AND created_at < ?1
                   AND NOT (kind = 'checkpoint'
                            AND seq = (SELECT MAX(seq) FROM items c
                                       WHERE c.agent_id = i.agent_id AND c.kind = 'checkpoint'))
                 ORDER BY created_at LIMIT ?2",
            )?
            .query_map(params![cut, limit], |r| r.get(0))?
            .collect::<Result<_, _>>()?,
        Step::Questions => conn
            .prepare_cached(
                "SELECT item_seq FROM questions WHERE closed_at < ?1 ORDER BY closed_at LIMIT ?2",
            )?
            .query_map(params![cut, limit], |r| r.get(0))?
            .collect::<Result<_, _>>()?,
        Step::Events => {
            let rows = conn
                .prepare_cached(
                    "DELETE FROM webhook_events WHERE event_id IN
                         (SELECT event_id FROM webhook_events WHERE state <> 'pending' AND created_at < ?1
                          ORDER BY created_at LIMIT ?2)",
                )?
                .execute(params![cut, limit])?;
            return Ok((rows, rows == BATCH_ROWS));
        }
        Step::Pushes => {
            // A push is tried until its TTL (`expires_at`), never later: one whose TTL ended before the cut
            // will not be sent. The range on `next_attempt_at` reads the outbox's own index.
            let rows = conn
                .prepare_cached(
                    "DELETE FROM push_outbox WHERE push_id IN
                         (SELECT push_id FROM push_outbox WHERE next_attempt_at < ?1 AND expires_at < ?1
                          LIMIT ?2)",
                )?
                .execute(params![cut, limit])?;
            return Ok((rows, rows == BATCH_ROWS));
        }
    };
    let found = seqs.len();
    let mut rows = 0;
    for seq in seqs {
        if rows >= BATCH_ROWS {
            // Items found are left: the next batch takes them.
            return Ok((rows, true));
        }
        rows += delete_item(conn, seq)?;
    }
    Ok((rows, found == BATCH_ROWS))
}

/// Deletes the item `seq` with what depends on it: a question's webhook events, grant and state, the `update` items
/// about it, its per-device envelopes. Returns the rows deleted. The foreign keys are checked through indexes
/// (migration 0011 adds the one on `subject_seq`).
fn delete_item(conn: &Connection, seq: i64) -> Result<usize> {
    let mut rows = 0;
    for sql in [
        "DELETE FROM webhook_events WHERE question_seq = ?1",
        "DELETE FROM grants WHERE item_seq = ?1",
        "DELETE FROM questions WHERE item_seq = ?1",
        "DELETE FROM items WHERE subject_seq = ?1 AND kind = 'update'",
        "DELETE FROM item_envelopes WHERE item_seq = ?1",
        "DELETE FROM items WHERE seq = ?1",
    ] {
        rows += conn.prepare_cached(sql)?.execute([seq])?;
    }
    Ok(rows)
}
