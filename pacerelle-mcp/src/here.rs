//! Asking at the computer too: an MCP elicitation beside the phone (docs/mcp.md, "Asking at the computer
//! too").
//!
//! When the host declared form elicitation, `ask_user` with `alsoAskHere` seals the question so that an
//! answer given at the computer counts
//! ([`QuestionRequest::answered_at_host`](pacerelle_client::agent::QuestionRequest::answered_at_host)) and asks
//! it here as well, the way the session's protocol allows ([`Way`]):
//! - up to 2025-11-25, with an elicitation request the server sends while the question waits ([`spawn`]);
//! - on 2026-07-28, where a server sends no request of its own, with an input request in the call's result
//!   (`resultType: "input_required"`, [`input_required`]): the host asks, then calls `ask_user` again with the
//!   answer and the request state, which names the question ([`answered_here`]).
//!
//! The first answer wins, on either channel:
//! - answered here: the answer is recorded on the relay ([`AgentClient::answer_at_host`]), so that the phone
//!   shows it answered at the computer and `wait_for_answer` returns it with channel `host`;
//! - answered on the phone, expired or cancelled first: the request here is withdrawn
//!   (`notifications/cancelled`); on 2026-07-28 nothing can be withdrawn (the host holds the request, not the
//!   server), so an answer that comes back after the phone's counts for nothing, and the result says so.
//!
//! Declining or dismissing the request here records nothing: the phone can still answer, and no answer is
//! still a no. This adapter decides nothing: what an answer means is the client's verdict, as for the phone.

use std::time::Duration;

use pacerelle_client::agent::{Asked, AskedQuestion};
use pacerelle_client::{AgentClient, Answer, QuestionKind, Timestamp};
use rmcp::model::{
    ClientResult, ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema,
    InputRequest, InputRequests, InputRequiredResult, ServerRequest,
};
use rmcp::service::{PeerRequestOptions, RequestContext};
use rmcp::{Peer, RoleServer};
use serde_json::{Value, json};

/// The property of the form that carries the answer.
const FIELD: &str = "answer";

/// How the question is asked at this host too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Way {
    /// An elicitation request from the server (up to 2025-11-25).
    Request,
    /// An input request in the call's result (2026-07-28).
    InputRequest,
}

/// How the request state that names a question asked here on 2026-07-28 begins.
const STATE_PREFIX: &str = "pacerelle-ask-here:";

/// How the question can also be asked at this host, or why it cannot.
pub(crate) fn way(context: &RequestContext<RoleServer>) -> Result<Way, &'static str> {
    let forms = context
        .client_capabilities()
        .and_then(|capabilities| capabilities.elicitation)
        // A capability that names neither mode is the older form-only one.
        .is_some_and(|e| e.form.is_some() || e.url.is_none());
    if !forms {
        return Err("the host did not declare elicitation (forms)");
    }
    match context.protocol_version() {
        Some(version) if version.has_initialize() => Ok(Way::Request),
        Some(_) => Ok(Way::InputRequest),
        None => Err("the session's protocol version is unknown"),
    }
}

/// The result of `ask_user` on 2026-07-28 for a question also asked here: an input request with the form,
/// and the request state that brings the answer back to [`answered_here`].
pub(crate) fn input_required(form: &Form, question_id: &str) -> Option<InputRequiredResult> {
    let schema = form.schema()?;
    let mut requests = InputRequests::new();
    requests.insert(
        FIELD.to_string(),
        InputRequest::Elicitation(ElicitRequest::new(ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: form.message(),
            requested_schema: schema,
        })),
    );
    Some(InputRequiredResult::new(
        Some(requests),
        Some(format!("{STATE_PREFIX}{question_id}")),
    ))
}

/// The question a request state names, when it is one [`input_required`] gave.
pub(crate) fn question_of_state(state: &str) -> Option<&str> {
    state.strip_prefix(STATE_PREFIX)
}

/// What became of the answer asked here on 2026-07-28.
#[derive(Debug)]
pub(crate) enum HereOutcome {
    /// Recorded on the relay: it counts (the verdict is `wait_for_answer`'s).
    Recorded,
    /// The question had closed first (answered on the phone, expired or cancelled): it does not count.
    TooLate,
    /// Declined or dismissed here, or an answer that does not fit: nothing recorded, the phone can answer.
    NotAnswered,
    /// The relay could not record it (why).
    Failed(String),
}

/// The host's answer to the input request of [`input_required`] (`responses`, keyed as it was asked),
/// recorded for `asked` when it is one: the first answer wins.
pub(crate) async fn answered_here(
    client: &AgentClient,
    asked: &AskedQuestion,
    responses: Option<&rmcp::model::InputResponses>,
) -> HereOutcome {
    let result = responses
        .and_then(|r| r.get(FIELD))
        .and_then(|v| serde_json::from_value::<ElicitResult>(v.clone()).ok());
    let Some(result) = result else {
        tracing::info!(question_id = %asked.question_id, "no answer came back from the computer; the phone can still answer");
        return HereOutcome::NotAnswered;
    };
    take(client, &asked.asked(), asked.kind, &result).await
}

/// The host's reply to the form asked here (either way it was asked): an accepted answer that fits the question
/// is recorded on the relay, where the first answer wins; anything else records nothing.
async fn take(client: &AgentClient, asked: &Asked, kind: QuestionKind, result: &ElicitResult) -> HereOutcome {
    let id = &asked.question_id;
    if result.action != ElicitationAction::Accept {
        tracing::info!(question_id = %id, action = ?result.action, "not answered at the computer; the phone can still answer");
        return HereOutcome::NotAnswered;
    }
    let Some(answer) = answer_of(kind, result.content.as_ref()) else {
        tracing::warn!(question_id = %id, "the answer given at the computer does not fit the question; nothing recorded");
        return HereOutcome::NotAnswered;
    };
    match client.answer_at_host(id, asked.digest.as_deref(), answer).await {
        Ok(outcome) => {
            tracing::info!(question_id = %id, approved = outcome.approved, "answered at the computer");
            HereOutcome::Recorded
        }
        Err(e) if e.kind() == pacerelle_client::ErrorKind::QuestionClosed => {
            tracing::info!(question_id = %id, error = %e, "closed before the answer at the computer (answered on the phone, expired or cancelled): it does not count");
            HereOutcome::TooLate
        }
        Err(e) => {
            tracing::warn!(question_id = %id, error = %e, "the answer at the computer could not be recorded");
            HereOutcome::Failed(e.to_string())
        }
    }
}

/// What the host shows: the question and how the answer will be used.
pub(crate) struct Form {
    /// The question's text, with its details.
    pub message: String,
    /// Its kind.
    pub kind: QuestionKind,
    /// The options of a choice.
    pub options: Vec<String>,
    /// Whether several options may be chosen.
    pub multiple: bool,
}

impl Form {
    fn message(&self) -> String {
        format!(
            "{}\n\n(Also asked on your phone through Pacerelle: the first answer, here or there, counts.)",
            self.message
        )
    }

    /// The form's schema: one required property, `answer`.
    pub(crate) fn schema(&self) -> Option<ElicitationSchema> {
        let property = match self.kind {
            QuestionKind::YesNo => json!({
                "type": "string",
                "title": "Your answer",
                "oneOf": [{"const": "yes", "title": "Yes"}, {"const": "no", "title": "No"}],
            }),
            QuestionKind::Choice if self.multiple => json!({
                "type": "array",
                "title": "Your choice",
                "minItems": 1,
                "items": {"type": "string", "enum": self.options},
            }),
            QuestionKind::Choice => json!({
                "type": "string",
                "title": "Your choice",
                "enum": self.options,
            }),
            QuestionKind::Text => json!({
                "type": "string",
                "title": "Your answer",
                "minLength": 1,
                "maxLength": pacerelle_client::core::message::MAX_TEXT_BYTES,
            }),
        };
        serde_json::from_value(json!({
            "type": "object",
            "properties": {FIELD: property},
            "required": [FIELD],
        }))
        .map_err(|e| tracing::warn!(error = %e, "no elicitation schema for this question"))
        .ok()
    }
}

/// The answer in an accepted form's content, when it is one for `kind` (the client checks it fits the
/// question before recording it).
pub(crate) fn answer_of(kind: QuestionKind, content: Option<&Value>) -> Option<Answer> {
    let value = content?.get(FIELD)?;
    match kind {
        QuestionKind::YesNo => match value.as_str()? {
            "yes" => Some(Answer::Yes),
            "no" => Some(Answer::No),
            _ => None,
        },
        QuestionKind::Choice => {
            let chosen: Vec<String> = match value {
                Value::String(one) => vec![one.clone()],
                Value::Array(many) => many
                    .iter()
                    .map(|v| v.as_str().map(str::to_string))
                    .collect::<Option<_>>()?,
                _ => return None,
            };
            Some(Answer::Options(chosen))
        }
        QuestionKind::Text => value
            .as_str()
            .filter(|t| !t.trim().is_empty())
            .map(|t| Answer::Text(t.to_string())),
    }
}

/// Asks `asked` here too, in the background, until the first answer on either channel or the expiry.
pub(crate) fn spawn(client: AgentClient, peer: Peer<RoleServer>, asked: Asked, form: Form) {
    let Some(schema) = form.schema() else { return };
    let request =
        ServerRequest::ElicitRequest(ElicitRequest::new(ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: form.message(),
            requested_schema: schema,
        }));
    let kind = form.kind;
    tokio::spawn(async move {
        let to_expiry = Duration::from_millis(
            u64::try_from(asked.expires_at.millis() - Timestamp::now().millis()).unwrap_or(0),
        );
        let id = asked.question_id.clone();
        let mut handle = match peer
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await
        {
            Ok(handle) => handle,
            Err(e) => {
                tracing::info!(question_id = %id, error = %e, "could not ask at the computer too");
                return;
            }
        };
        let phone = client.wait_until_final(&asked, tokio::time::Instant::now() + to_expiry);
        tokio::select! {
            reply = &mut handle.rx => match reply {
                Ok(Ok(ClientResult::ElicitResult(result))) => {
                    take(&client, &asked, kind, &result).await;
                }
                Ok(Ok(_)) => tracing::warn!(question_id = %id, "the host answered the elicitation with another result"),
                Ok(Err(e)) => tracing::info!(question_id = %id, error = %e, "the host did not ask at the computer"),
                Err(_) => tracing::debug!(question_id = %id, "the session ended before an answer at the computer"),
            },
            outcome = phone => {
                let why = match &outcome {
                    Ok(o) => format!("the question is {} on the phone's side", o.state.as_str()),
                    Err(e) => format!("the question could not be read: {e}"),
                };
                tracing::info!(question_id = %id, %why, "withdrawing the question asked at the computer");
                let _ = handle.cancel(Some(why)).await;
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(kind: QuestionKind, options: &[&str], multiple: bool) -> Form {
        Form {
            message: "Deploy?".into(),
            kind,
            options: options.iter().map(|o| o.to_string()).collect(),
            multiple,
        }
    }

    #[test]
    fn every_kind_has_a_form() {
        for f in [
            form(QuestionKind::YesNo, &[], false),
            form(QuestionKind::Choice, &["a", "b"], false),
            form(QuestionKind::Choice, &["a", "b"], true),
            form(QuestionKind::Text, &[], false),
        ] {
            let schema = f.schema().expect("schema");
            let json = serde_json::to_value(&schema).expect("json");
            assert_eq!(json["required"], json!([FIELD]), "{json}");
        }
    }

    #[test]
    fn answers_are_read_by_kind_and_anything_else_is_none() {
        let content = |v: Value| json!({ FIELD: v });
        assert_eq!(
            answer_of(QuestionKind::YesNo, Some(&content(json!("yes")))),
            Some(Answer::Yes)
        );
        assert_eq!(
            answer_of(QuestionKind::YesNo, Some(&content(json!("no")))),
            Some(Answer::No)
        );
        assert_eq!(answer_of(QuestionKind::YesNo, Some(&content(json!(true)))), None);
        assert_eq!(
            answer_of(QuestionKind::YesNo, Some(&content(json!("Yes!")))),
            None
        );
        assert_eq!(answer_of(QuestionKind::YesNo, None), None);
        assert_eq!(
            answer_of(QuestionKind::Choice, Some(&content(json!("a")))),
            Some(Answer::Options(vec!["a".into()]))
        );
        assert_eq!(
            answer_of(QuestionKind::Choice, Some(&content(json!(["a", "b"])))),
            Some(Answer::Options(vec!["a".into(), "b".into()]))
        );
        assert_eq!(answer_of(QuestionKind::Choice, Some(&content(json!([1])))), None);
        assert_eq!(
            answer_of(QuestionKind::Text, Some(&content(json!("ship it")))),
            Some(Answer::Text("ship it".into()))
        );
        assert_eq!(answer_of(QuestionKind::Text, Some(&content(json!("  ")))), None);
    }
}
