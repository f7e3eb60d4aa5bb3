//! Checkpoints: the agent's sealed progress notes, kept in its stream.

use crate::store::commands::NewCheckpoint;
use pacerelle_core::wire::Stored;
use rusqlite::{Connection, OptionalExtension, params};

use super::{Result, SqliteStore, cursor, ts};

impl SqliteStore {
    /// Stores a checkpoint, or finds the one already stored under this id.
    pub(crate) async fn put_checkpoint(&self, new: &NewCheckpoint<'_>) -> Result<Stored> {
        let now = new.now;
        let agent_id = new.agent_id.to_string();
        let checkpoint_id = new.checkpoint_id.to_string();
        let envelope = new.envelope.to_string();
        self.write(move |conn: &Connection| {
            let existing: Option<(i64, i64)> = conn
                .prepare_cached(
                    "SELECT seq, created_at FROM items
                     WHERE agent_id = ?1 AND kind = 'checkpoint' AND item_id = ?2",
                )?
                .query_row(params![agent_id, checkpoint_id], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?;
            if let Some((seq, created_at)) = existing {
                return Ok(Stored {
                    id: checkpoint_id,
                    cursor: cursor(seq),
                    created_at: ts(created_at),
                    created: false,
                });
            }
            let seq: i64 = conn
                .prepare_cached(
                    "INSERT INTO items (agent_id, kind, item_id, envelope, created_at)
                     VALUES (?1, 'checkpoint', ?2, ?3, ?4) RETURNING seq",
                )?
                .query_row(params![agent_id, checkpoint_id, envelope, now.millis()], |r| {
                    r.get(0)
                })?;
            Ok(Stored {
                id: checkpoint_id,
                cursor: cursor(seq),
                created_at: now,
                created: true,
            })
        })
        .await
    }
}
