//! `pacerelle._native.AgentClient`: the agent side, each relay call returned as a [`Call`].

use std::time::Duration;

use pacerelle_client::core::pairing::Role;
use pacerelle_client::{
    AgentToken, AnswerOutcome, AuditFilter, Cursor, Level, QuestionKind, QuestionRequest, QuestionState,
};
use pyo3::prelude::*;

use crate::Call;
use crate::convert::{parse_name, seconds, timestamp_arg};
use crate::errors::{invalid, to_py_err};
use crate::types::{PyAsked, ToPy};

/// Longest single long-poll the relay parks.
const MAX_WAIT: Duration = Duration::from_secs(pacerelle_client::core::wire::MAX_WAIT_SECONDS);

impl ToPy for AgentClient {
    fn to_py(self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(Py::new(py, self)?.into_any())
    }
}

/// The agent's native client. Cheap to share between threads; every relay call returns a `Call`.
#[pyclass(frozen, module = "pacerelle._native")]
#[derive(Debug)]
pub(crate) struct AgentClient {
    inner: pacerelle_client::AgentClient,
}

fn cursor_arg(cursor: Option<&str>) -> PyResult<Option<Cursor>> {
    cursor
        .map(|c| Cursor::parse(c).map_err(|e| to_py_err(e.into())))
        .transpose()
}

/// A question request from the Python arguments; the kind is 'choice' when options are given, else 'yes_no'.
#[allow(clippy::too_many_arguments)]
fn request(
    question: String,
    kind: Option<&str>,
    options: Option<Vec<String>>,
    multiple: bool,
    details: Option<String>,
    expires_in: f64,
    question_id: Option<String>,
) -> PyResult<QuestionRequest> {
    let options = options.unwrap_or_default();
    let kind: QuestionKind = match kind {
        Some(k) => parse_name("kind", k, "'yes_no', 'choice' or 'text'")?,
        None if !options.is_empty() => QuestionKind::Choice,
        None => QuestionKind::YesNo,
    };
    if kind != QuestionKind::Choice && (!options.is_empty() || multiple) {
        return Err(invalid("only a choice question has options"));
    }
    let mut req = match kind {
        QuestionKind::Choice => QuestionRequest::choice(question, options),
        QuestionKind::Text => QuestionRequest::text(question),
        QuestionKind::YesNo => QuestionRequest::yes_no(question),
    };
    req.multiple = multiple;
    req.details = details;
    req.expires_in = seconds("expires_in", expires_in)?;
    req.question_id = question_id;
    Ok(req)
}

#[pymethods]
impl AgentClient {
    /// A client for an existing agent (no request is made).
    #[new]
    fn new(relay_url: &str, agent_id: &str, token: &str) -> PyResult<Self> {
        let token = AgentToken::parse(token).map_err(|e| to_py_err(e.into()))?;
        pacerelle_client::AgentClient::new(relay_url, agent_id, token)
            .map(|inner| AgentClient { inner })
            .map_err(to_py_err)
    }

    /// Creates a new agent on the relay (its id and token are drawn here). Returns a Call of AgentClient.
    #[staticmethod]
    #[pyo3(signature = (relay_url, name, registration_secret = None))]
    fn register(relay_url: String, name: String, registration_secret: Option<String>) -> Call {
        Call::new(async move {
            pacerelle_client::AgentClient::register(&relay_url, &name, registration_secret.as_deref())
                .await
                .map(|inner| AgentClient { inner })
        })
    }

    /// The reply id the run loop uses for a task (derived from its id).
    #[staticmethod]
    fn reply_id_for(message_id: &str) -> String {
        pacerelle_client::reply_id_for(message_id)
    }

    #[getter]
    fn agent_id(&self) -> String {
        self.inner.agent_id().to_string()
    }

    #[getter]
    fn token(&self) -> String {
        self.inner.token().expose()
    }

    #[getter]
    fn relay_url(&self) -> String {
        self.inner.relay_url().to_string()
    }

    fn info(&self) -> Call {
        let c = self.inner.clone();
        Call::new(async move { c.info().await })
    }

    #[pyo3(signature = (label = None, ttl = 600.0, role = "owner", public_url = None))]
    fn create_pairing(
        &self,
        label: Option<String>,
        ttl: f64,
        role: &str,
        public_url: Option<String>,
    ) -> PyResult<Call> {
        let options = pacerelle_client::PairingOptions {
            label,
            ttl: seconds("ttl", ttl)?,
            role: parse_name::<Role>("role", role, "'owner' or 'user'")?,
            public_url,
        };
        let c = self.inner.clone();
        Ok(Call::new(async move { c.create_pairing(options).await }))
    }

    fn devices(&self) -> Call {
        let c = self.inner.clone();
        Call::new(async move { c.devices().await })
    }

    fn revoke_device(&self, device_id: String) -> Call {
        let c = self.inner.clone();
        Call::new(async move { c.revoke_device(&device_id).await })
    }

    #[pyo3(signature = (host, takeover = false))]
    fn open_session(&self, host: String, takeover: bool) -> Call {
        let c = self.inner.clone();
        Call::new(async move { c.open_session(&host, takeover).await })
    }

    fn heartbeat(&self) -> Call {
        let c = self.inner.clone();
        Call::new(async move { c.heartbeat().await })
    }

    fn close_session(&self) -> Call {
        let c = self.inner.clone();
        Call::new(async move { c.close_session().await })
    }

    #[pyo3(signature = (cursor = None, timeout = 30.0))]
    fn wait_for_messages(&self, cursor: Option<&str>, timeout: f64) -> PyResult<Call> {
        let cursor = cursor_arg(cursor)?;
        let wait = seconds("timeout", timeout)?;
        let c = self.inner.clone();
        Ok(Call::new(async move { c.wait_for_messages(cursor, wait).await }))
    }

    #[pyo3(signature = (source_message_id, text, reply_id = None))]
    fn reply(&self, source_message_id: String, text: String, reply_id: Option<String>) -> Call {
        let c = self.inner.clone();
        Call::new(async move { c.reply(&source_message_id, &text, reply_id.as_deref()).await })
    }

    fn mark_processed(&self, message_id: String) -> Call {
        let c = self.inner.clone();
        Call::new(async move { c.mark_processed(&message_id).await })
    }

    #[pyo3(signature = (summary, next_action, message_ids = None))]
    fn save_checkpoint(
        &self,
        summary: String,
        next_action: String,
        message_ids: Option<Vec<String>>,
    ) -> Call {
        let c = self.inner.clone();
        let ids = message_ids.unwrap_or_default();
        Call::new(async move { c.save_checkpoint(&summary, &next_action, &ids).await })
    }

    #[pyo3(signature = (limit = 10))]
    fn get_checkpoints(&self, limit: u32) -> Call {
        let c = self.inner.clone();
        Call::new(async move { c.checkpoints(limit).await })
    }

    fn status(&self) -> Call {
        let c = self.inner.clone();
        Call::new(async move { c.status().await })
    }

    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (question, *, kind = None, options = None, multiple = false, details = None, expires_in = 600.0, question_id = None))]
    fn ask_user(
        &self,
        question: String,
        kind: Option<&str>,
        options: Option<Vec<String>>,
        multiple: bool,
        details: Option<String>,
        expires_in: f64,
        question_id: Option<String>,
    ) -> PyResult<Call> {
        let req = request(
            question,
            kind,
            options,
            multiple,
            details,
            expires_in,
            question_id,
        )?;
        let c = self.inner.clone();
        Ok(Call::new(async move { c.ask_user(req).await }))
    }

    /// Waits until the outcome is final (answered, expired, cancelled, or an answer rejected) or `timeout`
    /// passes (then the pending outcome is returned). `timeout=None`: until the question expires.
    #[pyo3(signature = (question, timeout = Some(30.0)))]
    fn wait_for_answer(&self, question: &Bound<'_, PyAny>, timeout: Option<f64>) -> PyResult<Call> {
        let (question_id, asked) = match question.cast::<PyAsked>() {
            Ok(a) => {
                let a = a.get().to_client();
                (a.question_id.clone(), Some(a))
            }
            Err(_) => (
                question
                    .extract::<String>()
                    .map_err(|_| invalid("question is a question id or an Asked"))?,
                None,
            ),
        };
        let timeout = timeout.map(|t| seconds("timeout", t)).transpose()?;
        let c = self.inner.clone();
        Ok(Call::new(async move {
            let started = tokio::time::Instant::now();
            let asked = match asked {
                Some(a) => a,
                None => {
                    // One bounded read first: it tells the expiry, and is often the whole wait.
                    let first = c
                        .wait_for_answer(&question_id, timeout.unwrap_or(MAX_WAIT).min(MAX_WAIT))
                        .await?;
                    if first.is_final() || timeout.is_some_and(|t| started.elapsed() >= t) {
                        return Ok(first);
                    }
                    pacerelle_client::Asked {
                        question_id,
                        expires_at: first.expires_at,
                        digest: None,
                    }
                }
            };
            let deadline = match timeout {
                Some(t) => started + t,
                // Past the expiry the outcome is final: a day beyond the longest expiry is "never".
                None => started + Duration::from_secs(8 * 24 * 3600),
            };
            c.wait_until_final(&asked, deadline).await
        }))
    }

    /// Asks, then waits as `wait_for_answer` does.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (question, *, kind = None, options = None, multiple = false, details = None, expires_in = 600.0, question_id = None, timeout = None))]
    fn ask(
        &self,
        question: String,
        kind: Option<&str>,
        options: Option<Vec<String>>,
        multiple: bool,
        details: Option<String>,
        expires_in: f64,
        question_id: Option<String>,
        timeout: Option<f64>,
    ) -> PyResult<Call> {
        let req = request(
            question,
            kind,
            options,
            multiple,
            details,
            expires_in,
            question_id,
        )?;
        let overall = match timeout {
            Some(t) => seconds("timeout", t)?,
            None => req.expires_in + Duration::from_secs(60),
        };
        let c = self.inner.clone();
        Ok(Call::new(async move { c.ask(req, overall).await }))
    }

    #[pyo3(signature = (text, title = None, level = "info"))]
    fn notify(&self, text: String, title: Option<String>, level: &str) -> PyResult<Call> {
        let level: Level = parse_name("level", level, "'info', 'warning', 'error' or 'success'")?;
        let c = self.inner.clone();
        Ok(Call::new(async move {
            c.notify(&text, title.as_deref(), level).await
        }))
    }

    fn cancel_question(&self, question_id: String) -> Call {
        let c = self.inner.clone();
        Call::new(async move {
            let outcome: AnswerOutcome = c.cancel_question(&question_id).await?;
            Ok(outcome)
        })
    }

    /// The answer log, newest first, opened and judged here; `search` keeps the entries whose question,
    /// details or answer contain it (ignoring case).
    #[pyo3(signature = (*, state = None, since = None, until = None, limit = None, search = None))]
    fn answer_log(
        &self,
        state: Option<&str>,
        since: Option<&Bound<'_, PyAny>>,
        until: Option<&Bound<'_, PyAny>>,
        limit: Option<usize>,
        search: Option<String>,
    ) -> PyResult<Call> {
        let filter = AuditFilter {
            state: state
                .map(|s| {
                    QuestionState::parse(s)
                        .ok_or_else(|| invalid("state is 'pending', 'answered', 'expired' or 'cancelled'"))
                })
                .transpose()?,
            since: since.map(timestamp_arg).transpose()?,
            until: until.map(timestamp_arg).transpose()?,
            limit,
        };
        let c = self.inner.clone();
        Ok(Call::new(async move {
            match search {
                Some(text) => c.search_answer_log(&text, &filter).await,
                None => c.answer_log(&filter).await,
            }
        }))
    }

    fn set_webhook(&self, url: String, secret: String) -> Call {
        let c = self.inner.clone();
        Call::new(async move { c.set_webhook(&url, &secret).await })
    }

    fn webhook(&self) -> Call {
        let c = self.inner.clone();
        Call::new(async move { c.webhook().await })
    }

    fn clear_webhook(&self) -> Call {
        let c = self.inner.clone();
        Call::new(async move { c.clear_webhook().await })
    }

    #[pyo3(signature = (limit = 20))]
    fn webhook_deliveries(&self, limit: u32) -> Call {
        let c = self.inner.clone();
        Call::new(async move { c.webhook_deliveries(limit).await })
    }

    fn __repr__(&self) -> String {
        format!(
            "AgentClient(relay_url={}, agent_id={})",
            crate::convert::r(self.inner.relay_url()),
            crate::convert::r(self.inner.agent_id())
        )
    }
}
