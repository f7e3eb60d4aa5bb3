//! The PostgreSQL backend: messages (mirrors `sqlite/messages.rs`).

use super::prelude::*;

impl PgStore {
    pub(crate) fn mark_delivered(&self, _agent_id: &str, _after: Cursor, _through: Cursor, _now: Timestamp) {}

    pub(crate) async fn global_head(&self) -> Result<Cursor> {
        Err(not_yet("global_head"))
    }

    pub(crate) async fn put_message(
        &self,
        _agent_id: &str,
        _device_id: &str,
        _message_id: &str,
        _envelope: &str,
        _max_pending: u32,
        _now: Timestamp,
    ) -> Result<Put> {
        Err(not_yet("put_message"))
    }

    pub(crate) async fn wait_read(
        &self,
        _agent_id: &str,
        _session_id: Option<&str>,
        _after: Cursor,
        _limit: u32,
        _now: Timestamp,
    ) -> Result<WaitRead> {
        Err(not_yet("wait_read"))
    }

    pub(crate) async fn mark_processed(
        &self,
        _agent_id: &str,
        _message_id: &str,
        _now: Timestamp,
    ) -> Result<Option<Marked>> {
        Err(not_yet("mark_processed"))
    }

    pub(crate) async fn put_reply(
        &self,
        _agent_id: &str,
        _reply_id: &str,
        _source_message_id: &str,
        _envelopes: &[DeviceEnvelope],
        _now: Timestamp,
    ) -> Result<ReplyPut> {
        Err(not_yet("put_reply"))
    }

    pub(crate) async fn conversation(
        &self,
        _agent_id: &str,
        _device_id: &str,
        _after: Cursor,
        _limit: u32,
        _updates: bool,
        _now: Timestamp,
    ) -> Result<(Vec<ConversationItem>, Cursor)> {
        Err(not_yet("conversation"))
    }
}
