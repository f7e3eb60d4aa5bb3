//! The PostgreSQL backend: grants, the three writes in PostgreSQL's SQL (mirrors `sqlite/grants.rs`; the rules
//! and the devices' list are in `store/grants.rs`).

use pacerelle_core::wire::GrantRecord;

use super::prelude::*;
use crate::store::grants::{GrantPut, GrantQuestion, GrantRow, registrable};

/// The grant row of item `$1`.
const ROW: &str = "SELECT device_id AS grant_device_id, granted_at, expires_at AS grant_expires_at, uses,
            last_used_at, revoked_at, revoked_by
     FROM grants WHERE item_seq = $1";

/// The item of agent `$1`'s question `$2`.
const ITEM: &str = "SELECT seq FROM items WHERE agent_id = $1 AND kind = 'question' AND item_id = $2";

impl PgStore {
    /// Registers a grant, or finds the one registered for its question.
    pub(crate) async fn put_grant(&self, new: &NewGrant<'_>) -> Result<GrantPut> {
        let found: Option<GrantQuestion> = sqlx::query_as(
            "SELECT q.item_seq, q.state, q.answered_by, q.channel
             FROM questions q JOIN items i ON i.seq = q.item_seq
             WHERE i.agent_id = $1 AND i.kind = 'question' AND i.item_id = $2",
        )
        .bind(new.agent_id)
        .bind(new.grant_id)
        .fetch_optional(&self.pool)
        .await?;
        let seq = match registrable(found, new.device_id) {
            Ok(seq) => seq,
            Err(refused) => return Ok(refused.into()),
        };
        // A question's answer never changes once given: checked outside the insert, it still holds at it.
        sqlx::query(
            "INSERT INTO grants (item_seq, agent_id, device_id, granted_at, expires_at)
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (item_seq) DO NOTHING",
        )
        .bind(seq)
        .bind(new.agent_id)
        .bind(new.device_id)
        .bind(new.granted_at.millis())
        .bind(new.expires_at.millis())
        .execute(&self.pool)
        .await?;
        self.committed();
        let stored: GrantRow = sqlx::query_as(ROW).bind(seq).fetch_one(&self.pool).await?;
        Ok(GrantPut::Stored(stored.record(new.grant_id)))
    }

    /// Counts a use of a live grant; returns the grant as stored (unchanged when revoked or expired), or
    /// `None` when there is none.
    pub(crate) async fn use_grant(&self, at: &GrantUse<'_>) -> Result<Option<GrantRecord>> {
        sqlx::query(
            "UPDATE grants SET uses = uses + 1, last_used_at = $3
             WHERE item_seq = (SELECT seq FROM items WHERE agent_id = $1 AND kind = 'question' AND item_id = $2)
               AND revoked_at IS NULL AND expires_at > $3",
        )
        .bind(at.agent_id)
        .bind(at.grant_id)
        .bind(at.now.millis())
        .execute(&self.pool)
        .await?;
        self.committed();
        self.grant(at.agent_id, at.grant_id).await
    }

    /// Revokes a grant (the first revocation is kept); returns it as stored, or `None` when there is none.
    pub(crate) async fn revoke_grant(&self, at: &GrantRevocation<'_>) -> Result<Option<GrantRecord>> {
        sqlx::query(
            "UPDATE grants SET revoked_at = $3, revoked_by = $4
             WHERE item_seq = (SELECT seq FROM items WHERE agent_id = $1 AND kind = 'question' AND item_id = $2)
               AND revoked_at IS NULL",
        )
        .bind(at.agent_id)
        .bind(at.grant_id)
        .bind(at.now.millis())
        .bind(at.by)
        .execute(&self.pool)
        .await?;
        self.committed();
        self.grant(at.agent_id, at.grant_id).await
    }

    /// The grant of agent `agent_id` with id `grant_id`, as stored.
    async fn grant(&self, agent_id: &str, grant_id: &str) -> Result<Option<GrantRecord>> {
        let Some(seq): Option<i64> = sqlx::query_scalar(ITEM)
            .bind(agent_id)
            .bind(grant_id)
            .fetch_optional(&self.pool)
            .await?
        else {
            return Ok(None);
        };
        let row: Option<GrantRow> = sqlx::query_as(ROW).bind(seq).fetch_optional(&self.pool).await?;
        Ok(row.map(|g| g.record(grant_id)))
    }
}
