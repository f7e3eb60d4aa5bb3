//! The PostgreSQL backend: agents and credentials — registration, the agent itself, and the principal behind a
//! bearer id (mirrors `sqlite/agent.rs`).
//!
//! Agent ids and device ids share one name space: registration refuses an id that a device or a pairing offer
//! holds, and a pairing refuses a device id that an agent holds. SQLite's single writer makes each check and the
//! insert after it one step; here two transactions could both pass the check, so both take a transaction-scoped
//! advisory lock on the id first ([`lock_ids`]) and the second one's check sees what the first committed.

use pacerelle_core::keys;

use super::prelude::*;

/// Takes, until the transaction ends, an advisory lock on each of `ids` (an agent, device or pairing id): two
/// transactions that check and then claim the same id run one after the other. The locks are taken in the
/// order of their keys, so two transactions that lock several ids cannot wait for each other in a circle.
pub(super) async fn lock_ids(conn: &mut PgConnection, ids: &[&str]) -> Result<()> {
    sqlx::query(
        "SELECT pg_advisory_xact_lock(k)
         FROM (SELECT DISTINCT hashtextextended(id, 0) AS k FROM unnest($1::text[]) AS id) AS keys
         ORDER BY k",
    )
    .bind(ids)
    .execute(conn)
    .await?;
    Ok(())
}

impl PgStore {
    /// Registers an agent. The same id with the same hash again is a retry: it finds the stored agent.
    pub(crate) async fn register_agent(
        &self,
        agent_id: &str,
        name: &str,
        auth_hash: &[u8; 32],
        now: Timestamp,
    ) -> Result<Registered> {
        let mut tx = self.pool.begin().await?;
        lock_ids(&mut tx, &[agent_id]).await?;
        let existing: Option<(String, Vec<u8>, i64)> =
            sqlx::query_as("SELECT name, auth_hash, created_at FROM agents WHERE agent_id = $1")
                .bind(agent_id)
                .fetch_optional(&mut *tx)
                .await?;
        let outcome = match existing {
            Some((stored_name, stored_hash, created_at)) => {
                if keys::constant_time_eq(&stored_hash, auth_hash) {
                    Registered::Again(AgentInfo {
                        agent_id: agent_id.to_string(),
                        name: stored_name,
                        created_at: Timestamp(created_at),
                    })
                } else {
                    Registered::Exists
                }
            }
            None => {
                let taken: bool = sqlx::query_scalar(
                    "SELECT EXISTS (SELECT 1 FROM devices WHERE device_id = $1)
                         OR EXISTS (SELECT 1 FROM pairings WHERE device_id = $1)",
                )
                .bind(agent_id)
                .fetch_one(&mut *tx)
                .await?;
                if taken {
                    Registered::Exists
                } else {
                    sqlx::query(
                        "INSERT INTO agents (agent_id, name, auth_hash, created_at) VALUES ($1, $2, $3, $4)",
                    )
                    .bind(agent_id)
                    .bind(name)
                    .bind(&auth_hash[..])
                    .bind(now.millis())
                    .execute(&mut *tx)
                    .await?;
                    Registered::Created(AgentInfo {
                        agent_id: agent_id.to_string(),
                        name: name.to_string(),
                        created_at: now,
                    })
                }
            }
        };
        tx.commit().await?;
        self.counts.commits.inc();
        self.counts.writes.inc();
        Ok(outcome)
    }

    /// The agent, if it is registered.
    pub(crate) async fn agent(&self, agent_id: &str) -> Result<Option<AgentInfo>> {
        let row: Option<(String, String, i64)> =
            sqlx::query_as("SELECT agent_id, name, created_at FROM agents WHERE agent_id = $1")
                .bind(agent_id)
                .fetch_optional(&self.pool)
                .await?;
        Ok(row.map(|(agent_id, name, created_at)| AgentInfo {
            agent_id,
            name,
            created_at: Timestamp(created_at),
        }))
    }

    /// The agent or device named `id`, read from the database at every call (one query): several relay
    /// instances share the database, and a revocation on one must hold on all at once, so no instance keeps
    /// principals in memory. The secret is compared with the hash in constant time by the caller
    /// ([`crate::auth`]).
    pub(crate) async fn principal(&self, id: &str) -> Result<Option<Principal>> {
        let row: Option<(Option<String>, Vec<u8>, bool)> = sqlx::query_as(
            "SELECT owner, hash, revoked FROM (
                 SELECT 0 AS rank, NULL::text AS owner, auth_hash AS hash, FALSE AS revoked
                 FROM agents WHERE agent_id = $1
                 UNION ALL
                 SELECT 1, agent_id, token_hash, revoked_at IS NOT NULL
                 FROM devices WHERE device_id = $1
             ) AS found
             ORDER BY rank LIMIT 1",
        )
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|(owner, hash, revoked)| match owner {
            None => Principal::Agent {
                agent_id: id.to_string(),
                hash,
            },
            Some(agent_id) => Principal::Device {
                agent_id,
                device_id: id.to_string(),
                hash,
                revoked,
            },
        }))
    }
}
