//! The PostgreSQL backend: session (mirrors `sqlite/session.rs`).

use super::prelude::*;

impl PgStore {
    pub(crate) async fn lease(&self, _agent_id: &str, _now: Timestamp) -> Result<Option<Lease>> {
        Err(not_yet("lease"))
    }

    pub(crate) async fn session_known(&self, _agent_id: &str, _session_id: &str) -> Result<bool> {
        Err(not_yet("session_known"))
    }

    pub(crate) async fn open_session(
        &self,
        _agent_id: &str,
        _session_id: &str,
        _host: &str,
        _takeover: bool,
        _now: Timestamp,
    ) -> Result<SessionOpened> {
        Err(not_yet("open_session"))
    }

    pub(crate) async fn heartbeat(
        &self,
        _agent_id: &str,
        _session_id: &str,
        _now: Timestamp,
    ) -> Result<Renewal> {
        Err(not_yet("heartbeat"))
    }

    pub(crate) async fn release(
        &self,
        _agent_id: &str,
        _session_id: &str,
        _now: Timestamp,
    ) -> Result<Option<SessionInfo>> {
        Err(not_yet("release"))
    }
}
