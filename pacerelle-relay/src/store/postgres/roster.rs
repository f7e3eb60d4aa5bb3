//! The PostgreSQL backend: the agent's sealed device roster, stored as given and replaced only by a
//! compare-and-set on its version (mirrors `sqlite/roster.rs`).

use super::prelude::*;

impl PgStore {
    /// The newest roster of the agent; version 0 and no envelope when none was stored.
    pub(crate) async fn roster(&self, agent_id: &str) -> Result<RosterView> {
        let row: Option<(i64, String)> =
            sqlx::query_as("SELECT version, envelope FROM rosters WHERE agent_id = $1")
                .bind(agent_id)
                .fetch_optional(&self.pool)
                .await?;
        Ok(match row {
            Some((version, envelope)) => RosterView {
                version: u64::try_from(version).unwrap_or(0),
                envelope: Some(envelope),
            },
            None => RosterView {
                version: 0,
                envelope: None,
            },
        })
    }

    /// Stores roster `version` if the stored one is still `previous` (0: none) and `version` is greater. The
    /// agent's counter row is locked first: of two concurrent updates based on the same version, the second
    /// reads the first one's version and gets a conflict, also when no roster was stored before (no row to
    /// lock then).
    pub(crate) async fn put_roster(
        &self,
        agent_id: &str,
        previous: u64,
        version: u64,
        envelope: &str,
        now: Timestamp,
    ) -> Result<RosterPut> {
        // Versions beyond i64 are refused by the route; clamp defensively.
        let (previous, version) = (
            i64::try_from(previous).unwrap_or(i64::MAX),
            i64::try_from(version).unwrap_or(i64::MAX),
        );
        let mut tx = self.pool.begin().await?;
        super::lock_agent(&mut tx, agent_id).await?;
        let current: i64 =
            sqlx::query_scalar("SELECT COALESCE((SELECT version FROM rosters WHERE agent_id = $1), 0)")
                .bind(agent_id)
                .fetch_one(&mut *tx)
                .await?;
        let outcome = if current != previous || version <= current {
            RosterPut::Conflict {
                current: u64::try_from(current).unwrap_or(0),
            }
        } else {
            sqlx::query(
                "INSERT INTO rosters (agent_id, version, envelope, updated_at) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (agent_id) DO UPDATE
                 SET version = excluded.version, envelope = excluded.envelope, updated_at = excluded.updated_at",
            )
            .bind(agent_id)
            .bind(version)
            .bind(envelope)
            .bind(now.millis())
            .execute(&mut *tx)
            .await?;
            RosterPut::Stored(RosterView {
                version: u64::try_from(version).unwrap_or(0),
                envelope: Some(envelope.to_string()),
            })
        };
        tx.commit().await?;
        self.counts.commits.inc();
        self.counts.writes.inc();
        Ok(outcome)
    }
}
