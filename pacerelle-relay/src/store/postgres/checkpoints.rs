//! The PostgreSQL backend: checkpoints, the agent's sealed progress notes kept in its stream (mirrors
//! `sqlite/checkpoints.rs`).

use super::prelude::*;

impl PgStore {
    /// Stores a checkpoint, or finds the one already stored under this id. The agent's counter row is locked
    /// first (ADR 0003): the checkpoint draws its sequence number in commit order, and a second store of the
    /// same id waits for the first and then finds it.
    pub(crate) async fn put_checkpoint(&self, new: &NewCheckpoint<'_>) -> Result<Stored> {
        let mut tx = self.pool.begin().await?;
        super::lock_agent(&mut tx, new.agent_id).await?;
        let existing: Option<(i64, i64)> = sqlx::query_as(
            "SELECT seq, created_at FROM items
             WHERE agent_id = $1 AND kind = 'checkpoint' AND item_id = $2",
        )
        .bind(new.agent_id)
        .bind(new.checkpoint_id)
        .fetch_optional(&mut *tx)
        .await?;
        let stored = match existing {
            Some((seq, created_at)) => Stored {
                id: new.checkpoint_id.to_string(),
                cursor: Cursor(u64::try_from(seq).unwrap_or(0)),
                created_at: Timestamp(created_at),
                created: false,
            },
            None => {
                let seq: i64 = sqlx::query_scalar(
                    "INSERT INTO items (agent_id, kind, item_id, envelope, created_at)
                     VALUES ($1, 'checkpoint', $2, $3, $4) RETURNING seq",
                )
                .bind(new.agent_id)
                .bind(new.checkpoint_id)
                .bind(new.envelope)
                .bind(new.now.millis())
                .fetch_one(&mut *tx)
                .await?;
                Stored {
                    id: new.checkpoint_id.to_string(),
                    cursor: Cursor(u64::try_from(seq).unwrap_or(0)),
                    created_at: new.now,
                    created: true,
                }
            }
        };
        tx.commit().await?;
        self.committed();
        Ok(stored)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tokio::sync::Barrier;

    use super::super::agent::tests::{T0, store};
    use super::*;

    #[tokio::test]
    async fn a_checkpoint_is_stored_once_and_listed_latest_first() {
        let Some((store, _dir)) = store().await else {
            return;
        };
        let first = store
            .as_store()
            .put_checkpoint("ag_1", "c1", "AQ", Timestamp(T0))
            .await
            .expect("stored");
        assert!(first.created);
        let again = store
            .as_store()
            .put_checkpoint("ag_1", "c1", "other", Timestamp(T0 + 5))
            .await
            .expect("found");
        assert!(!again.created);
        assert_eq!((again.cursor, again.created_at), (first.cursor, Timestamp(T0)));
        let second = store
            .as_store()
            .put_checkpoint("ag_1", "c2", "Ag", Timestamp(T0 + 1))
            .await
            .expect("stored");
        assert!(second.cursor.seq() > first.cursor.seq());
        let listed = store.as_store().checkpoints("ag_1", 10).await.expect("read");
        let ids: Vec<(&str, &str)> = listed
            .iter()
            .map(|c| (c.checkpoint_id.as_str(), c.envelope.as_str()))
            .collect();
        assert_eq!(ids, [("c2", "Ag"), ("c1", "AQ")]);
        assert_eq!(
            store.as_store().checkpoints("ag_1", 1).await.expect("read").len(),
            1
        );
        assert!(
            store
                .as_store()
                .checkpoints("ag_2", 10)
                .await
                .expect("read")
                .is_empty()
        );
    }

    /// Eight stores of one checkpoint id at once: one creates it, the others find it at the same cursor.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_stores_of_one_checkpoint_create_it_once() {
        let Some((store, _dir)) = store().await else {
            return;
        };
        let start = Arc::new(Barrier::new(8));
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..8 {
            let (store, start) = (store.clone(), start.clone());
            tasks.spawn(async move {
                start.wait().await;
                store
                    .as_store()
                    .put_checkpoint("ag_1", "same", "AQ", Timestamp(T0 + i))
                    .await
                    .expect("ok")
            });
        }
        let outcomes = tasks.join_all().await;
        assert_eq!(outcomes.iter().filter(|s| s.created).count(), 1);
        assert!(outcomes.iter().all(|s| s.cursor == outcomes[0].cursor));
        assert_eq!(
            store
                .as_store()
                .checkpoints("ag_1", 10)
                .await
                .expect("read")
                .len(),
            1
        );
    }
}
