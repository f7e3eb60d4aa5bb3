//! The PostgreSQL backend: questions (mirrors `sqlite/questions.rs`).

use super::prelude::*;

impl PgStore {
    pub(crate) async fn put_question(
        &self,
        _agent_id: &str,
        _q: &NewQuestion<'_>,
        _max_open: u32,
        _now: Timestamp,
    ) -> Result<QuestionPut> {
        Err(not_yet("put_question"))
    }

    pub(crate) async fn question(
        &self,
        _agent_id: &str,
        _question_id: &str,
        _now: Timestamp,
    ) -> Result<Option<QuestionView>> {
        Err(not_yet("question"))
    }

    pub(crate) async fn answer_question(
        &self,
        _agent_id: &str,
        _device_id: &str,
        _question_id: &str,
        _answer_envelope: &str,
        _answer_copy: Option<&str>,
        _now: Timestamp,
    ) -> Result<(Transition<DeviceQuestion>, Effects)> {
        Err(not_yet("answer_question"))
    }

    pub(crate) async fn cancel_question(
        &self,
        _agent_id: &str,
        _question_id: &str,
        _now: Timestamp,
    ) -> Result<(Transition<QuestionView>, Effects)> {
        Err(not_yet("cancel_question"))
    }

    pub(crate) async fn device_questions(
        &self,
        _agent_id: &str,
        _device_id: &str,
        _filter: StateFilter,
        _limit: u32,
        _now: Timestamp,
    ) -> Result<Vec<DeviceQuestion>> {
        Err(not_yet("device_questions"))
    }

    pub(crate) async fn answer_log(
        &self,
        _agent_id: &str,
        _q: &LogQuery,
        _now: Timestamp,
    ) -> Result<LogPage> {
        Err(not_yet("answer_log"))
    }

    pub(crate) async fn next_expiry(&self) -> Result<Option<Timestamp>> {
        Err(not_yet("next_expiry"))
    }

    pub(crate) async fn expire_due(&self, _now: Timestamp, _limit: u32) -> Result<ExpiryPass> {
        Err(not_yet("expire_due"))
    }

    pub(crate) async fn put_notification(
        &self,
        _agent_id: &str,
        _notification_id: &str,
        _envelopes: &[DeviceEnvelope],
        _now: Timestamp,
    ) -> Result<ItemPut<Stored>> {
        Err(not_yet("put_notification"))
    }
}
