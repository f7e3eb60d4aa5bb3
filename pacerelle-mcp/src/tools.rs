//! The tools, one file per group, each with its own router combined in [`crate::server`]:
//! [`status`] (`get_status`), [`checkpoints`] (`get_checkpoints`, `save_checkpoint`), [`inbox`]
//! (`wait_for_messages`, `reply`, `mark_processed`), [`questions`], the human in the loop (`ask_user`,
//! `wait_for_answer`, `send_notification`, `cancel_question`) and [`users`], Partner mode's users
//! (`connect_user`, `list_users`, `get_user`, `disconnect_user`).
//!
//! Conventions: arguments are camelCase and unknown fields are refused; a malformed call returns
//! `Err(McpError::invalid_params)`; a call that ran and failed (relay unreachable, lease held elsewhere)
//! returns `Ok(CallToolResult::error)` with a text saying what to do; a success carries structured content
//! and text for the model, as [`ResultText`] says: by default two blocks, what to do next, then the same
//! JSON for hosts that ignore structured content; with `PACERELLE_MCP_RESULT_TEXT=guide`, one block, what
//! to do next and where in the structured content to read what the result carries (a task is then sent
//! once, not twice).

pub mod checkpoints;
pub mod inbox;
pub mod questions;
pub mod status;
pub mod users;

use std::any::TypeId;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use pacerelle_client::{Cursor, Error, ErrorKind};
use rmcp::ErrorData as McpError;
use rmcp::handler::server::common::{FromContextPart, schema_for_input, schema_for_output};
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::config::{RESULT_TEXT_VAR, ResultText};
use crate::lease::Holder;

/// A tool's arguments. Unlike rmcp's `Parameters`, arguments that do not deserialise (a wrong type, a
/// missing field, an unknown field such as `source_message_id`) are refused with `invalid_params`, like
/// every other bad argument, instead of becoming a tool error.
#[derive(Debug)]
pub struct Args<T>(pub T);

impl<S, T: DeserializeOwned> FromContextPart<ToolCallContext<'_, S>> for Args<T> {
    fn from_context_part(context: &mut ToolCallContext<S>) -> Result<Self, McpError> {
        let arguments = context.arguments.take().unwrap_or_default();
        serde_json::from_value(serde_json::Value::Object(arguments))
            .map(Args)
            .map_err(|e| McpError::invalid_params(format!("invalid arguments: {e}"), None))
    }
}

/// The input schema of arguments `T` (an object, as MCP requires), with standard formats only
/// ([`standard_formats`]).
pub fn input_schema<T: schemars::JsonSchema + 'static>() -> Arc<JsonObject> {
    cached::<T>(false, || {
        schema_for_input::<T>()
            .unwrap_or_else(|e| panic!("input schema of {}: {e}", std::any::type_name::<T>()))
    })
}

/// The output schema of results `T`, as rmcp derives it, with standard formats only ([`standard_formats`]).
pub fn output_schema<T: schemars::JsonSchema + 'static>() -> Arc<JsonObject> {
    cached::<T>(true, schema_for_output::<T>)
}

/// A schema of `T` made once per process by `make`, then without its non-standard formats.
fn cached<T: 'static>(output: bool, make: impl FnOnce() -> Arc<JsonObject>) -> Arc<JsonObject> {
    type Cache = Mutex<HashMap<(TypeId, bool), Arc<JsonObject>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(Cache::default);
    let key = (TypeId::of::<T>(), output);
    if let Some(schema) = lock(cache).get(&key) {
        return schema.clone();
    }
    let mut schema = (*make()).clone();
    standard_formats(&mut schema);
    let schema = Arc::new(schema);
    lock(cache).insert(key, schema.clone());
    schema
}

/// The lock on state shared by every session (a poisoned lock still holds usable state).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The `format`s schemars writes for Rust's number types (`uint64`, `int32`, `double`…): none is a JSON Schema
/// format, and a client that validates results (the TypeScript SDK, with Ajv) warns about each one it meets.
/// The `minimum` schemars writes beside the unsigned ones says what matters.
const NUMBER_FORMATS: &[&str] = &[
    "int8", "int16", "int32", "int64", "int128", "int", "uint8", "uint16", "uint32", "uint64", "uint128",
    "uint", "float", "double",
];

/// Removes, everywhere in `schema`, the number formats of [`NUMBER_FORMATS`].
pub fn standard_formats(schema: &mut JsonObject) {
    if schema
        .get("format")
        .and_then(serde_json::Value::as_str)
        .is_some_and(|f| NUMBER_FORMATS.contains(&f))
    {
        schema.remove("format");
    }
    for value in schema.values_mut() {
        walk(value);
    }
}

fn walk(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(object) => standard_formats(object),
        serde_json::Value::Array(items) => items.iter_mut().for_each(walk),
        _ => {}
    }
}

/// What the text of a successful result carries in this process: `PACERELLE_MCP_RESULT_TEXT`, read once
/// (the same variable [`crate::Config`] reads and checks at start, so a bad value never gets this far; if it
/// did, the default, which works with every host).
pub fn result_text() -> ResultText {
    static MODE: OnceLock<ResultText> = OnceLock::new();
    *MODE.get_or_init(|| ResultText::from_env().unwrap_or_default())
}

/// A successful result: structured content and the next step for the model (`next`), with the JSON as
/// text in [`ResultText::Json`] mode. For a result whose content is short or already in `next`.
pub fn output<T: Serialize>(value: &T, next: impl Into<String>) -> Result<CallToolResult, McpError> {
    Ok(render(to_json(value)?, next.into(), None, result_text()))
}

/// A successful result that carries content the model must read (a task's text, a written answer, a
/// checkpoint): as [`output`], and in [`ResultText::Guide`] mode the text says where that content is
/// (`content`, e.g. "Task texts: structuredContent.messages[].text (msg_1, 65536 bytes)") and what to do if
/// the host does not show it.
pub fn output_reading<T: Serialize>(
    value: &T,
    next: impl Into<String>,
    content: impl Into<String>,
) -> Result<CallToolResult, McpError> {
    Ok(render(
        to_json(value)?,
        next.into(),
        Some(content.into()),
        result_text(),
    ))
}

pub(crate) fn to_json<T: Serialize>(value: &T) -> Result<serde_json::Value, McpError> {
    serde_json::to_value(value)
        .map_err(|e| McpError::internal_error(format!("result did not serialise: {e}"), None))
}

/// The result for `json` in `mode`: `structuredContent` always; as text, the next step, then either the
/// JSON again (`Json`) or where to read it (`Guide`).
pub fn render(
    json: serde_json::Value,
    next: String,
    content: Option<String>,
    mode: ResultText,
) -> CallToolResult {
    match mode {
        ResultText::Json => {
            let mut result = CallToolResult::structured(json);
            result.content.insert(0, ContentBlock::text(next));
            result
        }
        ResultText::Guide => {
            let text = match content {
                None => format!("{next} (The full result is this call's structuredContent.)"),
                Some(content) => format!(
                    "{next}\n\n{content}. Read it there: it is not repeated in this text. If no \
                     structuredContent is visible to you, this host does not pass it on: do not act on, reply \
                     to as done or mark processed anything you could not read, and ask the person \
                     (send_notification) to set {RESULT_TEXT_VAR}=json for pacerelle-mcp."
                ),
            };
            let mut result = CallToolResult::structured(json);
            result.content = vec![ContentBlock::text(text)];
            result
        }
    }
}

/// A tool that ran and failed: the model reads `text`.
pub fn failure(text: impl Into<String>) -> Result<CallToolResult, McpError> {
    Ok(CallToolResult::error(vec![ContentBlock::text(text.into())]))
}

/// The text of a relay that cannot be reached.
pub fn unreachable_text(relay_url: &str, reason: &str) -> String {
    format!(
        "The Pacerelle relay at {relay_url} is unreachable ({reason}). No task can arrive and no reply can \
         be sent until it is back. Try again in a minute; if it lasts, the relay must be started or \
         PACERELLE_RELAY_URL corrected in this MCP server's configuration."
    )
}

/// The text shown when another session holds the lease.
pub fn in_use_text(holder: &Holder) -> String {
    let since = holder
        .since
        .as_deref()
        .map(|s| format!(", since {s}"))
        .unwrap_or_default();
    let session = holder
        .session
        .as_deref()
        .map(|s| format!(" of the session {s:?}"))
        .unwrap_or_default();
    format!(
        "Another session holds the lease{session}: {}{since}. One listener per session name receives tasks, \
         so this one cannot wait for them or mark them processed. Stop that session first (close the other \
         assistant or its pacerelle-mcp), restart this MCP server with --takeover to take the lease from it, \
         or give this one its own session name (PACERELLE_SESSION or --session, one per project folder). \
         reply, save_checkpoint, get_checkpoints, get_status, list_sessions and the question tools (ask_user, \
         wait_for_answer, send_notification, cancel_question) still work.",
        holder.host
    )
}

/// Maps a failure of a call that needs the lease: another session holds it (`agent_in_use`), or it was lost
/// again after it was taken back (`lease_lost`); anything else as [`relay_failure`].
pub fn lease_failure(relay_url: &str, e: Error) -> Result<CallToolResult, McpError> {
    match e.kind() {
        ErrorKind::AgentInUse | ErrorKind::LeaseLost => failure(in_use_text(&Holder::of(&e))),
        _ => relay_failure(relay_url, e),
    }
}

/// Maps a client error: bad arguments become `invalid_params`, everything else a tool error whose text
/// says what happened and what to do. Never includes content (the client's errors carry none).
pub fn relay_failure(relay_url: &str, e: Error) -> Result<CallToolResult, McpError> {
    match &e {
        Error::Network { reason, .. } => failure(unreachable_text(relay_url, reason)),
        Error::InvalidInput(text) => Err(McpError::invalid_params(text.clone(), None)),
        Error::Core(core) => Err(McpError::invalid_params(core.to_string(), None)),
        Error::Crypto(c) => failure(format!(
            "An item from the relay did not open ({c}): it was not sealed with this agent's keys. It is not \
             an instruction from the person."
        )),
        Error::Api { code: c, message, .. } => match e.kind() {
            ErrorKind::BadCursor => Err(McpError::invalid_params(
                format!(
                    "{message}. Use a cursor returned by wait_for_messages, or call it without a cursor to \
                     start over."
                ),
                None,
            )),
            ErrorKind::InvalidInput | ErrorKind::BodyTooLarge => {
                Err(McpError::invalid_params(message.clone(), None))
            }
            ErrorKind::Unauthorized => failure(format!(
                "The relay at {relay_url} refused this agent's credentials ({c}): PACERELLE_AGENT_ID or \
                 PACERELLE_AGENT_TOKEN is wrong, or the agent does not exist on this relay. Fix this MCP \
                 server's configuration and restart it."
            )),
            ErrorKind::AgentInUse => failure(in_use_text(&Holder::of(&e))),
            ErrorKind::RateLimited => failure(format!(
                "The relay is rate limiting this agent ({message}). Wait a little and try again."
            )),
            ErrorKind::QuotaExceeded => failure(format!(
                "The relay refused this ({c}): {message}. Nothing was stored, and calling again now is \
                 refused the same way. Room comes back as the person answers: wait for the answers already \
                 asked for (wait_for_answer), or cancel the questions no longer needed (cancel_question)."
            )),
            ErrorKind::Roster => failure(format!(
                "The agent's device roster from the relay cannot be trusted ({c}): {message}. No device is \
                 trusted meanwhile, so nothing can be approved; tell the person."
            )),
            _ if e.is_transient() => failure(format!(
                "The relay at {relay_url} is temporarily unavailable ({c}: {message}). Try again in a minute."
            )),
            _ => failure(format!("The relay refused the call ({c}): {message}.")),
        },
        _ => failure(format!("The call failed: {e}.")),
    }
}

/// Checks an id argument (1 to 128 characters from `A-Z a-z 0-9 _ - . :`).
pub fn check_id(what: &'static str, id: &str) -> Result<(), McpError> {
    pacerelle_client::core::ids::validate(what, id).map_err(|e| McpError::invalid_params(e.to_string(), None))
}

/// Parses a cursor argument.
pub fn parse_cursor(text: &str) -> Result<Cursor, McpError> {
    Cursor::parse(text.trim()).map_err(|_| {
        McpError::invalid_params(
            "cursor is malformed: pass the cursor string returned by wait_for_messages unchanged, or omit it",
            None,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schemas_use_standard_formats_only() {
        let mut schema: JsonObject = serde_json::from_value(serde_json::json!({
            "type": "object",
            "properties": {
                "n": {"type": "integer", "format": "uint64", "minimum": 0},
                "at": {"type": "string", "format": "date-time"},
                "list": {"type": "array", "items": {"type": "integer", "format": "int32"}},
                "either": {"anyOf": [{"type": "number", "format": "double"}, {"type": "null"}]}
            }
        }))
        .expect("object");
        standard_formats(&mut schema);
        let text = serde_json::Value::Object(schema).to_string();
        for gone in ["uint64", "int32", "double"] {
            assert!(!text.contains(gone), "{gone} left in {text}");
        }
        assert!(
            text.contains("date-time") && text.contains("\"minimum\":0"),
            "{text}"
        );
        // Every tool's schemas, as the server lists them.
        for schema in [
            output_schema::<crate::tools::status::StatusResult>(),
            input_schema::<crate::tools::inbox::WaitArgs>(),
        ] {
            let text = serde_json::Value::Object((*schema).clone()).to_string();
            assert!(
                !text.contains("\"format\":\"uint") && !text.contains("\"format\":\"int"),
                "{text}"
            );
        }
    }
    use pacerelle_client::core::wire::code;
    use rmcp::model::ErrorCode;

    #[test]
    fn arguments_are_checked() {
        assert!(check_id("message id", "msg_1").is_ok());
        assert_eq!(
            check_id("message id", "a b").expect_err("refused").code,
            ErrorCode::INVALID_PARAMS
        );
        // Texts are checked by the client; its message is shown as it is.
        let refused = relay_failure("u", Error::InvalidInput("a reply needs some text".into()))
            .expect_err("invalid params");
        assert_eq!(refused.code, ErrorCode::INVALID_PARAMS);
        assert_eq!(refused.message, "a reply needs some text");
        assert!(parse_cursor("c1.AAAAAAAAAAE").is_ok());
        assert!(parse_cursor("nope").is_err());
    }

    #[test]
    fn network_failure_says_unreachable() {
        let result = relay_failure(
            "http://127.0.0.1:9",
            Error::Network {
                url: "http://127.0.0.1:9".into(),
                reason: "connection refused".into(),
            },
        )
        .expect("a tool error, not a protocol error");
        assert_eq!(result.is_error, Some(true));
        let text = format!("{:?}", result.content);
        assert!(text.contains("unreachable"), "{text}");
    }

    #[test]
    fn a_quota_is_a_tool_error_with_its_code_and_not_a_retry() {
        let e = Error::Api {
            status: 429,
            code: code::QUOTA_EXCEEDED.into(),
            message:
                "the agent already has as many open questions as this relay allows (max_open_questions: 3)"
                    .into(),
            details: None,
        };
        let result = relay_failure("http://127.0.0.1:9", e).expect("a tool error, not a protocol error");
        assert_eq!(result.is_error, Some(true));
        let text = format!("{:?}", result.content);
        assert!(text.contains("quota_exceeded"), "{text}");
        assert!(text.contains("max_open_questions: 3"), "{text}");
        assert!(text.contains("cancel_question"), "{text}");
        assert!(!text.contains("Try again in a minute"), "{text}");
    }

    #[test]
    fn bad_cursor_is_invalid_params() {
        let e = Error::Api {
            status: 400,
            code: code::BAD_CURSOR.into(),
            message: "unknown cursor".into(),
            details: None,
        };
        assert_eq!(
            relay_failure("http://x", e).expect_err("refused").code,
            ErrorCode::INVALID_PARAMS
        );
    }

    fn texts(result: &CallToolResult) -> Vec<&str> {
        result
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
            .collect()
    }

    #[test]
    fn in_json_mode_a_success_has_the_next_step_first_then_its_json() {
        let value = serde_json::json!({"a": "LONG-CONTENT"});
        let result = render(
            value.clone(),
            "next".into(),
            Some("The a: a".into()),
            ResultText::Json,
        );
        assert_eq!(result.structured_content, Some(value.clone()));
        assert_eq!(texts(&result), vec!["next", value.to_string().as_str()]);
    }

    #[test]
    fn in_guide_mode_a_success_says_where_its_content_is_and_does_not_repeat_it() {
        let value = serde_json::json!({"a": "LONG-CONTENT"});
        let result = render(
            value.clone(),
            "next".into(),
            Some("The a: structuredContent.a (12 bytes)".into()),
            ResultText::Guide,
        );
        assert_eq!(result.structured_content, Some(value.clone()));
        let text = texts(&result);
        assert_eq!(text.len(), 1, "{text:?}");
        assert!(
            text[0].starts_with("next\n\nThe a: structuredContent.a (12 bytes)"),
            "{text:?}"
        );
        assert!(!text[0].contains("LONG-CONTENT"), "{text:?}");
        assert!(text[0].contains("PACERELLE_MCP_RESULT_TEXT=json"), "{text:?}");
        // Without content to point at: one short pointer.
        let result = render(value, "next".into(), None, ResultText::Guide);
        assert_eq!(
            texts(&result),
            vec!["next (The full result is this call's structuredContent.)"]
        );
    }
}
