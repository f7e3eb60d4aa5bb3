//! `pacerelle._native.AgentClient`: the agent side, each relay call returned as a [`Call`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use pacerelle_client::core::pairing::Role;
use pacerelle_client::core::policy::Decision;
use pacerelle_client::gate::Gate;
use pacerelle_client::{
    AgentToken, Cursor, Level, QuestionKind, QuestionState, agent::AnswerOutcome, agent::AuditFilter,
    agent::GrantBook, agent::QuestionRequest,
};
use pyo3::prelude::*;
use tokio::sync::{Mutex as AsyncMutex, mpsc, oneshot};

use crate::Call;
use crate::convert::{answer_arg, count, parse_name, py_to_json, seconds, timestamp_arg};
use crate::errors::{invalid, to_py_err};
use crate::policy::{PyEvaluation, PyPolicy};
use crate::types::{PyAsked, ToPy};

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
    /// The agent's home, where the client keeps its roster mark and the gate its grants: `PACERELLE_HOME`
    /// when the client was made, else the user's config folder + `pacerelle` (the client's and the CLI's
    /// rule); `None` when there is neither, and then no grant is kept or used.
    home: Option<PathBuf>,
}

impl AgentClient {
    fn of(inner: pacerelle_client::AgentClient) -> Self {
        let home = match std::env::var_os("PACERELLE_HOME") {
            Some(home) if !home.is_empty() => Some(PathBuf::from(home)),
            _ => dirs::config_dir().map(|d| d.join("pacerelle")),
        };
        AgentClient { inner, home }
    }

    /// The grants book the CLI's hook keeps for this agent: `<home>/grants/<agentId>.json`.
    fn grant_book(&self) -> Option<GrantBook> {
        let home = self.home.as_ref()?;
        let file = format!("{}.json", self.inner.agent_id());
        Some(GrantBook::at(home.join("grants").join(file)))
    }
}

/// How many distinct owner devices must approve: 1 to `MAX_APPROVALS`, checked before anything is sent.
fn approvals_arg(approvals: i64) -> PyResult<u32> {
    let max = pacerelle_client::core::wire::MAX_APPROVALS;
    u32::try_from(approvals)
        .ok()
        .filter(|n| (1..=max).contains(n))
        .ok_or_else(|| invalid(format!("approvals is 1 to {max} (got {approvals})")))
}

/// What the gate needs to check and offer grants for one call: the policy, the call, its project folder and
/// the agent's grants book.
struct Granting {
    gate: Gate,
    tool: String,
    input: serde_json::Value,
    folder: Option<PathBuf>,
    book: GrantBook,
}

fn cursor_arg(cursor: Option<&str>) -> PyResult<Option<Cursor>> {
    cursor
        .map(|c| Cursor::parse(c).map_err(|e| to_py_err(e.into())))
        .transpose()
}

/// The answer log's filter from the Python arguments.
fn audit_filter(
    state: Option<&str>,
    since: Option<&Bound<'_, PyAny>>,
    until: Option<&Bound<'_, PyAny>>,
    limit: Option<i64>,
    user: Option<String>,
) -> PyResult<AuditFilter> {
    Ok(AuditFilter {
        state: state
            .map(|s| {
                QuestionState::parse(s)
                    .ok_or_else(|| invalid("state is 'pending', 'answered', 'expired' or 'cancelled'"))
            })
            .transpose()?,
        since: since.map(timestamp_arg).transpose()?,
        until: until.map(timestamp_arg).transpose()?,
        limit: limit.map(|l| count("limit", l).map(|l| l as usize)).transpose()?,
        user,
    })
}

/// A question named by its id or by an `Asked` (which also names the exact question asked).
fn question_arg(question: &Bound<'_, PyAny>) -> PyResult<(String, Option<pacerelle_client::agent::Asked>)> {
    match question.cast::<PyAsked>() {
        Ok(a) => {
            let a = a.get().to_client();
            Ok((a.question_id.clone(), Some(a)))
        }
        Err(_) => Ok((
            question
                .extract::<String>()
                .map_err(|_| invalid("question is a question id or an Asked"))?,
            None,
        )),
    }
}

/// A question request from the Python arguments; the kind is 'choice' when options are given, else 'yes_no'.
/// `answered_at_host` seals that an answer given at the computer (`answer_at_host`) counts too; `user`
/// (Partner mode) addresses it to that user's devices instead of the owner's; `approvals` (a yes/no question)
/// is how many distinct devices must approve, each with a signed yes.
#[allow(clippy::too_many_arguments)]
fn request(
    question: String,
    kind: Option<&str>,
    options: Option<Vec<String>>,
    multiple: bool,
    details: Option<String>,
    expires_in: f64,
    question_id: Option<String>,
    answered_at_host: bool,
    user: Option<String>,
    approvals: i64,
) -> PyResult<QuestionRequest> {
    let approvals = approvals_arg(approvals)?;
    let options = options.unwrap_or_default();
    let kind: QuestionKind = match kind {
        Some(k) => parse_name("kind", k, "'yes_no', 'choice' or 'text'")?,
        None if !options.is_empty() => QuestionKind::Choice,
        None => QuestionKind::YesNo,
    };
    let mut req = match kind {
        QuestionKind::Choice => QuestionRequest::choice(question, Vec::<String>::new()),
        QuestionKind::Text => QuestionRequest::text(question),
        QuestionKind::YesNo => QuestionRequest::yes_no(question),
    };
    // As given, whatever the kind: the client's one check refuses options on a question that is not a choice.
    req.options = options;
    req.multiple = multiple;
    req.details = details;
    req.expires_in = seconds("expires_in", expires_in)?;
    req.question_id = question_id;
    req.user = user;
    Ok(req.answered_at_host(answered_at_host).approvals(approvals))
}

#[pymethods]
impl AgentClient {
    /// A client for an existing agent (no request is made).
    #[new]
    fn new(relay_url: &str, agent_id: &str, token: &str) -> PyResult<Self> {
        let token = AgentToken::parse(token).map_err(|e| to_py_err(e.into()))?;
        pacerelle_client::AgentClient::new(relay_url, agent_id, token)
            .map(AgentClient::of)
            .map_err(to_py_err)
    }

    /// The client of the agent the client's one rule finds (`AgentCredentials::find`):
    /// `PACERELLE_AGENT_ID`/`PACERELLE_AGENT_TOKEN` in `environ`, else `agent.json` in `PACERELLE_HOME` (or
    /// the user's config folder); the relay is `relay_url` when given, else `PACERELLE_RELAY_URL`, else the
    /// file's, else the default. The token stays on this side.
    #[staticmethod]
    #[pyo3(signature = (environ, relay_url = None))]
    fn from_environ(
        environ: std::collections::HashMap<String, String>,
        relay_url: Option<String>,
    ) -> PyResult<Self> {
        let var = |name: &str| match (name, &relay_url) {
            (pacerelle_client::home::RELAY_URL_VAR, Some(url)) => Some(url.clone()),
            _ => environ.get(name).cloned(),
        };
        let found = pacerelle_client::agent::AgentCredentials::find(var, None).map_err(to_py_err)?;
        pacerelle_client::AgentClient::new(&found.relay_url, &found.agent_id, found.token)
            .map(AgentClient::of)
            .map_err(to_py_err)
    }

    /// Creates a new agent on the relay (its id and token are drawn here). Returns a Call of AgentClient.
    #[staticmethod]
    #[pyo3(signature = (relay_url, name, registration_secret = None))]
    fn register(relay_url: String, name: String, registration_secret: Option<String>) -> Call {
        Call::new(async move {
            pacerelle_client::AgentClient::register(&relay_url, &name, registration_secret.as_deref())
                .await
                .map(AgentClient::of)
        })
    }

    /// Starts the client's supervised loop (`pacerelle_client::runner::Runner`) in the background; `Agent.run` and
    /// `AsyncAgent.run` pull its steps with `RunLoop.next()` and call the handler in Python. Cancelling
    /// `cancel` stops it (the task at hand is settled first), then it releases the lease.
    #[pyo3(signature = (host, cancel, *, takeover = false, timeout = 30.0, max_backoff = 10.0, max_attempts = 3, session = None))]
    #[allow(clippy::too_many_arguments)] // Python's keyword arguments, one by one
    fn run_loop(
        &self,
        host: String,
        cancel: &crate::CancelToken,
        takeover: bool,
        timeout: f64,
        max_backoff: f64,
        max_attempts: i64,
        session: Option<String>,
    ) -> PyResult<RunLoop> {
        let mut runner = pacerelle_client::runner::Runner::new(self.inner.clone());
        if let Some(name) = session {
            runner = runner.session(name);
        }
        let runner = runner
            .host(host)
            .takeover(takeover)
            .wait(seconds("timeout", timeout)?)
            .backoff(pacerelle_client::backoff::Backoff {
                max: seconds("max_backoff", max_backoff)?,
                ..Default::default()
            })
            .max_attempts(count("max_attempts", max_attempts)?);
        Ok(RunLoop::start(runner, cancel.token.clone()))
    }

    /// The reply id the run loop uses for a task (derived from its id).
    #[staticmethod]
    #[pyo3(signature = (message_id, text = None))]
    fn reply_id_for(message_id: &str, text: Option<&str>) -> String {
        pacerelle_client::agent::reply_id_for(message_id, text)
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

    /// The agent's home (`PACERELLE_HOME` when the client was made, else the config folder + `pacerelle`),
    /// where `approve` keeps the grants (`grants/<agentId>.json`, as the CLI's hook); `None` when there is
    /// none (no grants then).
    #[getter]
    fn home(&self) -> Option<String> {
        self.home.as_ref().map(|h| h.display().to_string())
    }

    fn info(&self) -> Call {
        Call::with(&self.inner, move |c| async move { c.info().await })
    }

    #[pyo3(signature = (label = None, ttl = 600.0, role = "owner", public_url = None))]
    fn create_pairing(
        &self,
        label: Option<String>,
        ttl: f64,
        role: &str,
        public_url: Option<String>,
    ) -> PyResult<Call> {
        let options = pacerelle_client::agent::PairingOptions {
            label,
            ttl: seconds("ttl", ttl)?,
            role: parse_name::<Role>("role", role, "'owner' or 'user'")?,
            public_url,
            branding: None,
            user: None,
        };
        Ok(Call::with(&self.inner, move |c| async move {
            c.create_pairing(options).await
        }))
    }

    fn devices(&self) -> Call {
        Call::with(&self.inner, move |c| async move { c.devices().await })
    }

    fn revoke_device(&self, device_id: String) -> Call {
        Call::with(
            &self.inner,
            move |c| async move { c.revoke_device(&device_id).await },
        )
    }

    /// Requires signed answers from now on, or accepts again the unsigned answers of devices without a signing
    /// key (`AgentClient::require_signed`): since when signatures are required, or `None`.
    fn require_signed(&self, required: bool) -> Call {
        Call::with(&self.inner, move |c| async move {
            c.require_signed(required)
                .await
                .map(|roster| roster.require_signed_since)
        })
    }

    /// Partner mode: a pairing link for one user of the agent (`AgentClient::connect_user`), under the
    /// agent's name and the given branding; connecting a known user again gives another link and
    /// reconnects a disconnected one.
    #[pyo3(signature = (external_id, name, *, accent_color = None, icon = None, ttl = None, public_url = None))]
    fn connect_user(
        &self,
        external_id: String,
        name: String,
        accent_color: Option<String>,
        icon: Option<String>,
        ttl: Option<f64>,
        public_url: Option<String>,
    ) -> PyResult<Call> {
        let branding = (accent_color.is_some() || icon.is_some())
            .then_some(pacerelle_client::core::pairing::Branding { accent_color, icon });
        let options = pacerelle_client::agent::ConnectOptions {
            branding,
            ttl: ttl.map(|t| seconds("ttl_seconds", t)).transpose()?,
            public_url,
        };
        Ok(Call::with(&self.inner, move |c| async move {
            c.connect_user(&external_id, &name, options).await
        }))
    }

    /// Partner mode: every user ever connected, disconnected ones included.
    fn list_users(&self) -> Call {
        Call::with(&self.inner, move |c| async move { c.list_users().await })
    }

    /// Partner mode: one user; `NotFound` (code `user_not_found`) when never connected.
    fn get_user(&self, external_id: String) -> Call {
        Call::with(
            &self.inner,
            move |c| async move { c.get_user(&external_id).await },
        )
    }

    /// Partner mode: revokes every device of the user, in the roster then at the relay.
    fn disconnect_user(&self, external_id: String) -> Call {
        Call::with(&self.inner, move |c| async move {
            c.disconnect_user(&external_id).await
        })
    }

    #[pyo3(signature = (host, takeover = false, name = None, folder = None))]
    fn open_session(
        &self,
        host: String,
        takeover: bool,
        name: Option<String>,
        folder: Option<String>,
    ) -> Call {
        let open = pacerelle_client::core::wire::OpenSession {
            host,
            name,
            folder,
            takeover,
        };
        Call::with(&self.inner, move |c| async move { c.open_session(&open).await })
    }

    fn heartbeat(&self) -> Call {
        Call::with(&self.inner, move |c| async move { c.heartbeat().await })
    }

    fn close_session(&self) -> Call {
        Call::with(&self.inner, move |c| async move { c.close_session().await })
    }

    #[pyo3(signature = (cursor = None, timeout = 30.0))]
    fn wait_for_messages(&self, cursor: Option<&str>, timeout: f64) -> PyResult<Call> {
        let cursor = cursor_arg(cursor)?;
        let wait = seconds("timeout", timeout)?;
        Ok(Call::with(&self.inner, move |c| async move {
            c.wait_for_messages(cursor, wait).await
        }))
    }

    #[pyo3(signature = (source_message_id, text, reply_id = None))]
    fn reply(&self, source_message_id: String, text: String, reply_id: Option<String>) -> Call {
        Call::with(&self.inner, move |c| async move {
            c.reply(&source_message_id, &text, reply_id.as_deref()).await
        })
    }

    fn mark_processed(&self, message_id: String) -> Call {
        Call::with(&self.inner, move |c| async move {
            c.mark_processed(&message_id).await
        })
    }

    #[pyo3(signature = (summary, next_action, message_ids = None))]
    fn save_checkpoint(
        &self,
        summary: String,
        next_action: String,
        message_ids: Option<Vec<String>>,
    ) -> Call {
        let ids = message_ids.unwrap_or_default();
        Call::with(&self.inner, move |c| async move {
            c.save_checkpoint(&summary, &next_action, &ids).await
        })
    }

    #[pyo3(signature = (limit = 10))]
    fn get_checkpoints(&self, limit: i64) -> PyResult<Call> {
        let limit = count("limit", limit)?;
        Ok(Call::with(&self.inner, move |c| async move {
            c.checkpoints(limit).await
        }))
    }

    fn status(&self) -> Call {
        Call::with(&self.inner, move |c| async move { c.status().await })
    }

    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (question, *, kind = None, options = None, multiple = false, details = None, expires_in = 600.0, question_id = None, answered_at_host = false, user = None, approvals = 1))]
    fn ask_user(
        &self,
        question: String,
        kind: Option<&str>,
        options: Option<Vec<String>>,
        multiple: bool,
        details: Option<String>,
        expires_in: f64,
        question_id: Option<String>,
        answered_at_host: bool,
        user: Option<String>,
        approvals: i64,
    ) -> PyResult<Call> {
        let req = request(
            question,
            kind,
            options,
            multiple,
            details,
            expires_in,
            question_id,
            answered_at_host,
            user,
            approvals,
        )?;
        Ok(Call::with(
            &self.inner,
            move |c| async move { c.ask_user(req).await },
        ))
    }

    /// Waits until the outcome is final (answered, expired, cancelled, or an answer rejected) or `timeout`
    /// passes (then the pending outcome is returned). `timeout=None`: until the question expires.
    #[pyo3(signature = (question, timeout = Some(30.0)))]
    fn wait_for_answer(&self, question: &Bound<'_, PyAny>, timeout: Option<f64>) -> PyResult<Call> {
        let (question_id, asked) = question_arg(question)?;
        let timeout = timeout.map(|t| seconds("timeout", t)).transpose()?;
        Ok(Call::with(&self.inner, move |c| async move {
            match asked {
                // Accepts only the question as asked (its digest).
                Some(asked) => c.wait_until_final_within(&asked, timeout).await,
                None => c.wait_for_answer_by_id(&question_id, timeout).await,
            }
        }))
    }

    /// Asks, then waits as `wait_for_answer` does.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (question, *, kind = None, options = None, multiple = false, details = None, expires_in = 600.0, question_id = None, timeout = None, answered_at_host = false, user = None, approvals = 1))]
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
        answered_at_host: bool,
        user: Option<String>,
        approvals: i64,
    ) -> PyResult<Call> {
        let req = request(
            question,
            kind,
            options,
            multiple,
            details,
            expires_in,
            question_id,
            answered_at_host,
            user,
            approvals,
        )?;
        let overall = match timeout {
            Some(t) => seconds("timeout", t)?,
            None => req.expires_in + Duration::from_secs(60),
        };
        Ok(Call::with(&self.inner, move |c| async move {
            c.ask(req, overall).await
        }))
    }

    /// The approval gate (`pacerelle_client::gate`). With `policy` (a `Policy`), it decides the call of
    /// `tool` with `input` (a JSON-like value); with `evaluation` (a `Policy`'s word already given), that word
    /// decides: 'allow' and 'deny' conclude at once. Otherwise a yes/no question is asked and waited for until
    /// it is final or `timeout` passes (default: its expiry and a minute), and a question still open then — or
    /// when the call is interrupted — is withdrawn. `approvals` (1 to 10) is how many distinct owner devices
    /// must approve, each with a signed yes; a policy rule's `approvals` raises it.
    ///
    /// With `policy`, for a call it asks about, the gate of the CLI's hook also runs its grants: a live grant
    /// in the agent's grants book (`<home>/grants/<agentId>.json`) that covers the call made in the current
    /// directory lets it run without a question (conclusion 'granted'; each use checked against the roster
    /// and reported to the relay); otherwise the question offers the grants the policy allows, and a grant
    /// given with the yes is kept. No grant is used or offered without a home, for a question to a `user`
    /// (Partner mode), or when more than one approval is needed.
    ///
    /// Never raises for a relay error: returns a Call of Ruling, whose `lets_run` is true only for an allow
    /// rule, an authenticated yes or a live grant.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (question, *, details = None, expires_in = 600.0, timeout = None, evaluation = None, user = None, policy = None, tool = None, input = None, approvals = 1))]
    fn approve(
        &self,
        py: Python<'_>,
        question: String,
        details: Option<String>,
        expires_in: f64,
        timeout: Option<f64>,
        evaluation: Option<&Bound<'_, PyEvaluation>>,
        user: Option<String>,
        policy: Option<&Bound<'_, PyPolicy>>,
        tool: Option<String>,
        input: Option<&Bound<'_, PyAny>>,
        approvals: i64,
    ) -> PyResult<Call> {
        use pacerelle_client::gate::{self, Asking, Ruling};
        let mut needed = approvals_arg(approvals)?;
        let mut details = details;
        let mut call = None;
        let evaluation = match (policy, evaluation) {
            (Some(_), Some(_)) => return Err(invalid("give a policy or an evaluation, not both")),
            (Some(policy), None) => {
                let tool = tool.ok_or_else(|| invalid("a policy decides by the call's tool: give tool"))?;
                let input = match input {
                    Some(v) => py_to_json(v)?,
                    None => serde_json::Value::Object(Default::default()),
                };
                let gate = policy.get().gate().clone();
                let evaluation = py.detach(|| gate.evaluate(&tool, &input));
                if evaluation.decision == Decision::Ask {
                    // The rule's reason under the question, as the hook shows it.
                    details = Some(match details {
                        Some(d) if !d.trim().is_empty() => format!("{d}\n\n{}", evaluation.reason),
                        _ => evaluation.reason.clone(),
                    });
                }
                call = Some((gate, tool, input));
                Some(evaluation)
            }
            (None, evaluation) => {
                if tool.is_some() || input.is_some() {
                    return Err(invalid("tool and input go with a policy"));
                }
                evaluation.map(|e| e.get().evaluation().clone())
            }
        };
        let settled = evaluation.as_ref().and_then(Ruling::by_policy);
        if let Some(e) = &evaluation {
            needed = needed.max(e.approvals);
        }
        // Grants only for a call its policy asks about and offers grants for, asked of the owner, approved by
        // one device: a grant stands for one yes.
        let granting = match (call, evaluation.as_ref(), self.grant_book()) {
            (Some((gate, tool, input)), Some(e), Some(book))
                if settled.is_none() && user.is_none() && needed == 1 && !e.grant.is_empty() =>
            {
                Some(Granting {
                    gate,
                    tool,
                    input,
                    folder: std::env::current_dir().ok(),
                    book,
                })
            }
            _ => None,
        };
        let mut req = request(
            question, None, None, false, details, expires_in, None, false, user, 1,
        )?
        .approvals(needed);
        if let (Some(g), Some(e)) = (&granting, &evaluation) {
            req = req.offering(g.gate.offer(e, &g.tool, &g.input, g.folder.as_deref()));
        }
        let timeout = timeout.map(|t| seconds("timeout", t)).transpose()?;
        Ok(Call::with(&self.inner, move |c| async move {
            if let Some(ruling) = settled {
                return Ok(ruling);
            }
            if let Some(g) = &granting
                && let Some(ruling) =
                    gate::by_grant(&c, &g.book, &g.gate, &g.tool, &g.input, g.folder.as_deref()).await
            {
                return Ok(ruling);
            }
            let mut ruling = gate::ask(&c, Asking::until(req, timeout)).await;
            if let Some(g) = &granting
                && let Err(e) = gate::keep_grant(&c, &g.book, &ruling).await
            {
                ruling.reason.push_str(&format!(
                    " (the grant given with it could not be kept, so the next calls are asked: {e})"
                ));
            }
            Ok(ruling)
        }))
    }

    /// A notification for the owner's devices, or (Partner mode) for `user`'s devices only.
    #[pyo3(signature = (text, title = None, level = "info", user = None))]
    fn notify(
        &self,
        text: String,
        title: Option<String>,
        level: &str,
        user: Option<String>,
    ) -> PyResult<Call> {
        let level: Level = parse_name("level", level, "'info', 'warning', 'error' or 'success'")?;
        Ok(Call::with(&self.inner, move |c| async move {
            c.notify_user(user.as_deref(), &text, title.as_deref(), level)
                .await
        }))
    }

    /// Records an answer the person gave at the computer (`pacerelle_client::AgentClient::answer_at_host`),
    /// for a question asked with `answered_at_host=True`: the first answer wins, on either channel. With an
    /// `Asked`, the answer counts only for exactly the question this process asked.
    fn answer_at_host(&self, question: &Bound<'_, PyAny>, answer: &Bound<'_, PyAny>) -> PyResult<Call> {
        let (question_id, asked) = question_arg(question)?;
        let digest = asked.and_then(|a| a.digest);
        let answer = answer_arg(answer)?;
        Ok(Call::with(&self.inner, move |c| async move {
            c.answer_at_host(&question_id, digest.as_deref(), answer).await
        }))
    }

    fn cancel_question(&self, question_id: String) -> Call {
        Call::with(&self.inner, move |c| async move {
            let outcome: AnswerOutcome = c.cancel_question(&question_id).await?;
            Ok(outcome)
        })
    }

    /// The answer log, newest first, opened and judged here; `search` keeps the entries whose question,
    /// details or answer contain it (ignoring case).
    #[pyo3(signature = (*, state = None, since = None, until = None, limit = None, search = None, user = None))]
    fn answer_log(
        &self,
        state: Option<&str>,
        since: Option<&Bound<'_, PyAny>>,
        until: Option<&Bound<'_, PyAny>>,
        limit: Option<i64>,
        search: Option<String>,
        user: Option<String>,
    ) -> PyResult<Call> {
        let filter = audit_filter(state, since, until, limit, user)?;
        Ok(Call::with(&self.inner, move |c| async move {
            match search {
                Some(text) => c.search_answer_log(&text, &filter).await,
                None => c.answer_log(&filter).await,
            }
        }))
    }

    /// The answer log anyone can verify (`pacerelle audit export --format signed`), as JSON text: the
    /// accepted answers, oldest first, with the question's exact bytes, the device's signature and key.
    #[pyo3(signature = (*, state = None, since = None, until = None, limit = None, user = None))]
    fn export_answer_log(
        &self,
        state: Option<&str>,
        since: Option<&Bound<'_, PyAny>>,
        until: Option<&Bound<'_, PyAny>>,
        limit: Option<i64>,
        user: Option<String>,
    ) -> PyResult<Call> {
        let filter = audit_filter(state, since, until, limit, user)?;
        Ok(Call::with(&self.inner, move |c| async move {
            c.export_answer_log(&filter).await
        }))
    }

    fn set_webhook(&self, url: String, secret: String) -> Call {
        Call::with(
            &self.inner,
            move |c| async move { c.set_webhook(&url, &secret).await },
        )
    }

    fn webhook(&self) -> Call {
        Call::with(&self.inner, move |c| async move { c.webhook().await })
    }

    fn clear_webhook(&self) -> Call {
        Call::with(&self.inner, move |c| async move { c.clear_webhook().await })
    }

    #[pyo3(signature = (limit = 20))]
    fn webhook_deliveries(&self, limit: i64) -> PyResult<Call> {
        let limit = count("limit", limit)?;
        Ok(Call::with(&self.inner, move |c| async move {
            c.webhook_deliveries(limit).await
        }))
    }

    fn __repr__(&self) -> String {
        format!(
            "AgentClient(relay_url={}, agent_id={})",
            crate::convert::r(self.inner.relay_url()),
            crate::convert::r(self.inner.agent_id())
        )
    }
}

/// How the handler ended: the reply (if any), or its error.
type Outcome = Result<Option<String>, String>;

/// What the Rust loop hands to the Python thread that runs it: a task for the handler, or a log line.
enum Step {
    Task {
        message: pacerelle_client::agent::Message,
        attempt: u32,
        done: oneshot::Sender<Outcome>,
    },
    Log(pacerelle_client::runner::Event),
}

/// The next step, or `None` once the loop has ended.
struct Next(Option<Step>);

impl ToPy for Next {
    fn to_py(self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        match self.0 {
            None => Ok(py.None()),
            Some(Step::Task {
                message,
                attempt,
                done,
            }) => Ok(Py::new(
                py,
                RunTask {
                    message: message.to_py(py)?,
                    attempt,
                    done: std::sync::Mutex::new(Some(done)),
                },
            )?
            .into_any()),
            Some(Step::Log(event)) => {
                // Python's logging levels.
                let level = match event.level().as_str() {
                    "ERROR" => 40,
                    "WARN" => 30,
                    "INFO" => 20,
                    _ => 10,
                };
                let log = RunLog {
                    level,
                    text: event.to_string(),
                    message_id: event.message_id().map(str::to_string),
                };
                Ok(Py::new(py, log)?.into_any())
            }
        }
    }
}

type RunHandle = tokio::task::JoinHandle<pacerelle_client::Result<()>>;

/// The client's supervised loop running in the background; `next()` gives its steps to Python.
#[pyclass(frozen, module = "pacerelle._native")]
pub(crate) struct RunLoop {
    steps: Arc<AsyncMutex<mpsc::UnboundedReceiver<Step>>>,
    runner: Arc<AsyncMutex<Option<RunHandle>>>,
}

impl std::fmt::Debug for RunLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunLoop").finish_non_exhaustive()
    }
}

impl RunLoop {
    fn start(
        runner: pacerelle_client::runner::Runner,
        cancel: tokio_util::sync::CancellationToken,
    ) -> RunLoop {
        let (tx, rx) = mpsc::unbounded_channel();
        let tasks = tx.clone();
        // Each task goes to the Python thread, which answers through `RunTask.done` or `RunTask.fail`.
        let handler = move |message: pacerelle_client::agent::Message,
                            ctx: pacerelle_client::runner::Context| {
            let tasks = tasks.clone();
            async move {
                let (done, answer) = oneshot::channel();
                tasks
                    .send(Step::Task {
                        message,
                        attempt: ctx.attempt(),
                        done,
                    })
                    .map_err(|_| "the Python loop is gone".to_string())?;
                answer
                    .await
                    .unwrap_or_else(|_| Err("the handler was interrupted".to_string()))
            }
        };
        let runner = runner.on_event(move |event| {
            let _ = tx.send(Step::Log(event.clone()));
        });
        let handle = crate::runtime().spawn(runner.run(handler, cancel.cancelled_owned()));
        RunLoop {
            steps: Arc::new(AsyncMutex::new(rx)),
            runner: Arc::new(AsyncMutex::new(Some(handle))),
        }
    }
}

#[pymethods]
impl RunLoop {
    /// A Call of the next step: a `RunTask`, a `RunLog`, or None once the loop has ended (it raises the
    /// error that ended it, such as `AgentInUse`).
    fn next(&self) -> Call {
        let steps = self.steps.clone();
        let runner = self.runner.clone();
        Call::new(async move {
            if let Some(step) = steps.lock().await.recv().await {
                return Ok(Next(Some(step)));
            }
            match runner.lock().await.take() {
                Some(handle) => match handle.await {
                    Ok(result) => result.map(|()| Next(None)),
                    Err(_) => Err(pacerelle_client::Error::InvalidInput(
                        "the run loop panicked".into(),
                    )),
                },
                None => Ok(Next(None)),
            }
        })
    }
}

/// A task for the handler; answer it once with `done(reply)` or `fail(error)`.
#[pyclass(frozen, module = "pacerelle._native")]
pub(crate) struct RunTask {
    message: Py<PyAny>,
    attempt: u32,
    done: std::sync::Mutex<Option<oneshot::Sender<Outcome>>>,
}

impl std::fmt::Debug for RunTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunTask")
            .field("attempt", &self.attempt)
            .finish_non_exhaustive()
    }
}

impl RunTask {
    fn answer(&self, result: Outcome) {
        if let Some(done) = self.done.lock().ok().and_then(|mut d| d.take()) {
            let _ = done.send(result);
        }
    }
}

#[pymethods]
impl RunTask {
    /// The task (a `Message`).
    #[getter]
    fn message(&self, py: Python<'_>) -> Py<PyAny> {
        self.message.clone_ref(py)
    }

    /// 1 the first time the loop hands this task over, 2 after one failure…
    #[getter]
    fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The handler succeeded: `reply` is sent (None or blank: no reply), then the task is marked processed.
    #[pyo3(signature = (reply = None))]
    fn done(&self, reply: Option<String>) {
        self.answer(Ok(reply));
    }

    /// The handler failed with `error` (logged): the task stays unprocessed, and is set aside after
    /// `max_attempts` failures.
    fn fail(&self, error: String) {
        self.answer(Err(error));
    }
}

/// A log line of the loop, for the `pacerelle` logger.
#[pyclass(frozen, module = "pacerelle._native")]
#[derive(Debug)]
pub(crate) struct RunLog {
    /// A `logging` level (10, 20, 30, 40).
    #[pyo3(get)]
    level: i32,
    /// The line.
    #[pyo3(get)]
    text: String,
    /// The task it is about.
    #[pyo3(get)]
    message_id: Option<String>,
}
