//! The PostgreSQL backend: the agent's sealed device roster, stored as given and replaced only by a
//! compare-and-set on its version (mirrors `sqlite/roster.rs`).

use super::prelude::*;

impl PgStore {
    /// Stores roster `version` if the stored one is still `previous` (0: none) and `version` is greater. The
    /// agent's counter row is locked first: of two concurrent updates based on the same version, the second
    /// reads the first one's version and gets a conflict, also when no roster was stored before (no row to
    /// lock then).
    pub(crate) async fn put_roster(&self, new: &NewRoster<'_>) -> Result<RosterPut> {
        // Versions beyond i64 are refused by the route; clamp defensively.
        let (previous, version) = RosterPut::versions(new.previous, new.version);
        let mut tx = self.pool.begin().await?;
        super::lock_agent(&mut tx, new.agent_id).await?;
        let current: i64 =
            sqlx::query_scalar("SELECT COALESCE((SELECT version FROM rosters WHERE agent_id = $1), 0)")
                .bind(new.agent_id)
                .fetch_one(&mut *tx)
                .await?;
        let outcome = if let Some(conflict) = RosterPut::conflict(current, previous, version) {
            conflict
        } else {
            sqlx::query(
                "INSERT INTO rosters (agent_id, version, envelope, updated_at) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (agent_id) DO UPDATE
                 SET version = excluded.version, envelope = excluded.envelope, updated_at = excluded.updated_at",
            )
            .bind(new.agent_id)
            .bind(version)
            .bind(new.envelope)
            .bind(new.now.millis())
            .execute(&mut *tx)
            .await?;
            RosterPut::stored(version, new.envelope.to_string())
        };
        tx.commit().await?;
        self.committed();
        Ok(outcome)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tokio::sync::Barrier;

    use super::super::agent::tests::{T0, store};
    use super::*;
    use pacerelle_core::wire::RosterView;

    #[tokio::test]
    async fn a_roster_is_replaced_only_from_the_version_it_was_based_on() {
        let Some((store, _dir)) = store().await else {
            return;
        };
        let none = store.as_store().roster("ag_1").await.expect("read");
        assert_eq!((none.version, none.envelope), (0, None));
        let t = Timestamp(T0);
        assert_eq!(
            store
                .as_store()
                .put_roster("ag_1", 0, 1, "r1", t)
                .await
                .expect("ok"),
            RosterPut::Stored(RosterView {
                version: 1,
                envelope: Some("r1".into())
            })
        );
        // Based on a version that is no longer the stored one, or not greater: refused, the stored one named.
        assert_eq!(
            store
                .as_store()
                .put_roster("ag_1", 0, 2, "r2", t)
                .await
                .expect("ok"),
            RosterPut::Conflict { current: 1 }
        );
        assert_eq!(
            store
                .as_store()
                .put_roster("ag_1", 1, 1, "r1b", t)
                .await
                .expect("ok"),
            RosterPut::Conflict { current: 1 }
        );
        assert!(matches!(
            store
                .as_store()
                .put_roster("ag_1", 1, 5, "r5", t)
                .await
                .expect("ok"),
            RosterPut::Stored(_)
        ));
        let now = store.as_store().roster("ag_1").await.expect("read");
        assert_eq!((now.version, now.envelope.as_deref()), (5, Some("r5")));
    }

    /// Eight first rosters at once, all based on "none": one is stored, seven get a conflict naming it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_updates_from_one_version_store_one() {
        let Some((store, _dir)) = store().await else {
            return;
        };
        let start = Arc::new(Barrier::new(8));
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..8u64 {
            let (store, start) = (store.clone(), start.clone());
            tasks.spawn(async move {
                start.wait().await;
                store
                    .as_store()
                    .put_roster("ag_1", 0, i + 1, &format!("r{i}"), Timestamp(T0))
                    .await
                    .expect("ok")
            });
        }
        let outcomes = tasks.join_all().await;
        let stored: Vec<&RosterView> = outcomes
            .iter()
            .filter_map(|o| match o {
                RosterPut::Stored(view) => Some(view),
                RosterPut::Conflict { .. } => None,
            })
            .collect();
        assert_eq!(stored.len(), 1, "{outcomes:?}");
        let winner = stored[0].version;
        assert!(outcomes.iter().all(|o| match o {
            RosterPut::Stored(_) => true,
            RosterPut::Conflict { current } => *current == winner,
        }));
        assert_eq!(
            store.as_store().roster("ag_1").await.expect("read").version,
            winner
        );
    }
}
