//! The PostgreSQL backend: sweep (mirrors `sqlite/sweep.rs`).

use super::prelude::*;

impl PgStore {
    pub(crate) async fn sweep(&self, _now: Timestamp) -> Result<()> {
        Err(not_yet("sweep"))
    }
}
