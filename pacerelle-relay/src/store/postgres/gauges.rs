//! The PostgreSQL backend: gauges (mirrors `sqlite/gauges.rs`).

use super::prelude::*;

impl PgStore {
    pub(crate) async fn outboxes(&self) -> Result<Outboxes> {
        Err(not_yet("outboxes"))
    }
}
