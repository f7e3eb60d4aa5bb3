//! The PostgreSQL backend: status (mirrors `sqlite/status.rs`).

use super::prelude::*;

impl PgStore {
    pub(crate) async fn status_facts(&self, _agent_id: &str) -> Result<StatusFacts> {
        Err(not_yet("status_facts"))
    }
}
