//! The PostgreSQL backend: roster (mirrors `sqlite/roster.rs`).

use super::prelude::*;

impl PgStore {
    pub(crate) async fn roster(&self, _agent_id: &str) -> Result<RosterView> {
        Err(not_yet("roster"))
    }

    pub(crate) async fn put_roster(
        &self,
        _agent_id: &str,
        _previous: u64,
        _version: u64,
        _envelope: &str,
        _now: Timestamp,
    ) -> Result<RosterPut> {
        Err(not_yet("put_roster"))
    }
}
