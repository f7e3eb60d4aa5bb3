//! The PostgreSQL backend: retention (mirrors `sqlite/retention.rs`).

use super::prelude::*;

impl PgStore {
    pub(crate) async fn purge(&self, _now: Timestamp, _retention: &Retention) -> Result<Purged> {
        Err(not_yet("purge"))
    }
}
