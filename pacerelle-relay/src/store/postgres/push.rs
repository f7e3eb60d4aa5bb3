//! The PostgreSQL backend: push (mirrors `sqlite/push.rs`).

use super::prelude::*;

/// Queues the pushes an item calls for (mirrors `sqlite::push::enqueue`); call it in the write that stores it.
pub(super) async fn enqueue(
    _conn: &mut PgConnection,
    _agent_id: &str,
    _seq: i64,
    _now: Timestamp,
) -> Result<u64> {
    Err(not_yet("push enqueue"))
}

/// Deletes every subscription of a device of this agent (and their queued pushes): call it in the write that
/// revokes it.
pub(super) async fn drop_device(_conn: &mut PgConnection, _agent_id: &str, _device_id: &str) -> Result<()> {
    Err(not_yet("push drop_device"))
}

impl PgStore {
    pub(crate) async fn put_push_subscription(
        &self,
        _agent_id: &str,
        _device_id: &str,
        _endpoint: &str,
        _p256dh: &[u8],
        _auth: &[u8],
        _now: Timestamp,
    ) -> Result<PushPut> {
        Err(not_yet("put_push_subscription"))
    }

    pub(crate) async fn delete_push_subscription(&self, _device_id: &str, _endpoint: &str) -> Result<bool> {
        Err(not_yet("delete_push_subscription"))
    }

    pub(crate) async fn due_pushes(
        &self,
        _now: Timestamp,
        _busy: &[i64],
        _limit: u32,
    ) -> Result<Vec<DuePush>> {
        Err(not_yet("due_pushes"))
    }

    pub(crate) async fn next_push_due(&self, _busy: &[i64]) -> Result<Option<Timestamp>> {
        Err(not_yet("next_push_due"))
    }

    pub(crate) async fn push_done(&self, _push_id: i64) -> Result<()> {
        Err(not_yet("push_done"))
    }

    pub(crate) async fn push_retry(
        &self,
        _push_id: i64,
        _status: Option<u16>,
        _error: &str,
        _next: Timestamp,
    ) -> Result<()> {
        Err(not_yet("push_retry"))
    }

    pub(crate) async fn push_subscription_gone(&self, _subscription_id: i64) -> Result<()> {
        Err(not_yet("push_subscription_gone"))
    }
}
