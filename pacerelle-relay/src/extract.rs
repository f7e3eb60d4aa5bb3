//! Extractors whose rejections are [`AppError`]s, so bad input gets the same JSON error shape as
//! everything else: a body that is not JSON → 400 `invalid_json`, too large → 413 `body_too_large`, a bad
//! query or path → 400 `invalid_input`.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use pacerelle_core::wire::code;
use serde::de::DeserializeOwned;

use crate::error::AppError;

/// A JSON body (any or no `Content-Type`), limited by the router's body limit.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Json<T>(pub T);

impl<T, S> FromRequest<S> for Json<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = AppError;

    async fn from_request(req: Request, state: &S) -> Result<Self, AppError> {
        let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                AppError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    code::BODY_TOO_LARGE,
                    format!(
                        "the body exceeds the relay's limit of {} bytes",
                        pacerelle_core::wire::MAX_BODY_BYTES
                    ),
                )
            } else {
                AppError::invalid_json("the body could not be read")
            }
        })?;
        let mut de = serde_json::Deserializer::from_slice(&bytes);
        let value = serde_path_to_error::deserialize(&mut de)
            .map_err(|e| AppError::invalid_json(describe(Some(e.path()), e.inner())))?;
        de.end().map_err(|e| AppError::invalid_json(describe(None, &e)))?;
        Ok(Json(value))
    }
}

impl<T: serde::Serialize> IntoResponse for Json<T> {
    fn into_response(self) -> Response {
        axum::Json(self.0).into_response()
    }
}

/// Explains a JSON error by the field path and the expected shape, quoting nothing of the body: its strings
/// may be envelopes or secrets, and an error text is logged and shown.
fn describe(path: Option<&serde_path_to_error::Path>, e: &serde_json::Error) -> String {
    use serde_json::error::Category;
    match e.classify() {
        Category::Data => {
            // An unknown field's path ends with the name sent: the path stops at its parent instead.
            let unknown = e.to_string().starts_with("unknown field `");
            let at = path.map(|p| field_path(p, unknown)).unwrap_or_default();
            let what = shape(&e.to_string());
            if at.is_empty() {
                format!("the body does not have the expected fields: {what}")
            } else {
                format!("the body does not have the expected fields: at {at}: {what}")
            }
        }
        Category::Syntax | Category::Eof | Category::Io => format!(
            "the body is not valid JSON (line {}, column {})",
            e.line(),
            e.column()
        ),
    }
}

/// A field path such as `envelopes[0].deviceId`. Names come from the request's field names, so only plain
/// identifiers are written out; any other name reads `…`. `drop_last` leaves out the last segment: the
/// name of an unknown field, which the request chose.
fn field_path(path: &serde_path_to_error::Path, drop_last: bool) -> String {
    use serde_path_to_error::Segment;
    let mut out = String::new();
    let segments: Vec<&Segment> = path.iter().collect();
    let keep = segments.len() - usize::from(drop_last && !segments.is_empty());
    for segment in &segments[..keep] {
        match segment {
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            Segment::Map { key } | Segment::Enum { variant: key } => {
                if !out.is_empty() {
                    out.push('.');
                }
                let plain = !key.is_empty()
                    && key.len() <= 64
                    && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                out.push_str(if plain { key } else { "…" });
            }
            Segment::Unknown => out.push_str(".?"),
        }
    }
    out
}

/// What a serde error says of the expected shape, without the value that was sent. serde's messages put the
/// received value first (`invalid type: string "…", expected …`, ``unknown variant `…`, expected one of …``)
/// and the expectation — written by the relay's types — last, so only that last part is kept. A message of
/// another form is kept only when it quotes nothing.
fn shape(message: &str) -> String {
    // serde_json appends the position; the path says where instead.
    let message = match message.rfind(" at line ") {
        Some(i) => &message[..i],
        None => message,
    };
    let expected = || message.rfind(", expected ").map(|i| &message[i + 2..]);
    let kept = if message.starts_with("missing field `") || message.starts_with("duplicate field `") {
        // The field named is one of the request type's own.
        Some(message.to_string())
    } else if let Some(prefix) = [
        ("invalid type", "invalid type: "),
        ("invalid value", "invalid value: "),
        ("invalid length", "invalid length "),
        ("unknown value", "unknown variant `"),
        ("unknown field", "unknown field `"),
    ]
    .iter()
    .find(|(_, start)| message.starts_with(start))
    {
        Some(match expected() {
            Some(rest) => format!("{}, {rest}", prefix.0),
            None => prefix.0.to_string(),
        })
    } else if !message.contains(['"', '`', '\'']) {
        Some(message.to_string())
    } else {
        None
    };
    kept.unwrap_or_else(|| "a value does not have the expected shape".to_string())
}

/// Replaces every double-quoted or backquoted part of a message (the query string's or the path's values) by `…`.
fn redact(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut open: Option<char> = None;
    for c in message.chars() {
        match open {
            Some(q) if c == q => {
                out.push('…');
                out.push(c);
                open = None;
            }
            Some(_) => {}
            None if c == '"' || c == '`' => {
                out.push(c);
                open = Some(c);
            }
            None => out.push(c),
        }
    }
    out
}

/// A query string; a rejection is `invalid_input`.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Query<T>(pub T);

impl<T, S> FromRequestParts<S> for Query<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, AppError> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| Query(q.0))
            .map_err(|rejection| {
                let text = rejection.body_text();
                let message = text
                    .strip_prefix("Failed to deserialize query string: ")
                    .unwrap_or(&text);
                AppError::invalid_input(format!("bad query string: {}", shape(message)))
            })
    }
}

/// Path parameters; a rejection is `invalid_input`.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Path<T>(pub T);

impl<T, S> FromRequestParts<S> for Path<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, AppError> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| Path(p.0))
            .map_err(|rejection| {
                AppError::invalid_input(format!("bad path: {}", redact(&rejection.body_text())))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    struct Envelope {
        device_id: String,
        kind: Kind,
    }

    #[derive(serde::Deserialize, Debug)]
    #[serde(rename_all = "snake_case")]
    enum Kind {
        YesNo,
        Text,
    }

    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct Body {
        n: u64,
        envelopes: Vec<Envelope>,
    }

    fn error_of(body: &str) -> String {
        let mut de = serde_json::Deserializer::from_str(body);
        match serde_path_to_error::deserialize::<_, Body>(&mut de) {
            Err(e) => describe(Some(e.path()), e.inner()),
            Ok(_) => match de.end() {
                Err(e) => describe(None, &e),
                Ok(()) => panic!("{body} was accepted"),
            },
        }
    }

    #[test]
    fn errors_name_the_field_and_the_expected_shape_and_quote_nothing_sent() {
        let secret = "s3cret";
        for (body, says) in [
            (
                format!(r#"{{"n": "{secret}", "envelopes": []}}"#),
                "at n: invalid type, expected u64",
            ),
            (
                format!(r#"{{"n": 1, "envelopes": [{{"deviceId": "d", "kind": "{secret}"}}]}}"#),
                "at envelopes[0].kind: unknown value, expected `yes_no` or `text`",
            ),
            (
                // Backticks and escaped quotes in the value cannot break out of the redaction.
                format!(
                    r#"{{"n": 1, "envelopes": [{{"deviceId": "d", "kind": "a`, expected {secret}\" `x"}}]}}"#
                ),
                "at envelopes[0].kind: unknown value, expected `yes_no` or `text`",
            ),
            (
                format!(r#"{{"n": 1, "envelopes": [{{"deviceId": ["{secret}"], "kind": "text"}}]}}"#),
                "at envelopes[0].deviceId: invalid type, expected a string",
            ),
            (r#"{"n": 1}"#.to_string(), "missing field `envelopes`"),
            (
                r#"{"n": 1, "envelopes": [{"deviceId": "d"}]}"#.to_string(),
                "at envelopes[0]: missing field `kind`",
            ),
            (
                format!(r#"{{"n": -1, "envelopes": [], "{secret}": 1}}"#),
                "at n: invalid value, expected u64",
            ),
            (
                // Found by pacerelle-fuzz (regressions/relay): an unknown field's name was the path's end.
                format!(r#"{{"n": 1, "envelopes": [{{"deviceId": "d", "kind": "text", "{secret}": 1}}]}}"#),
                "at envelopes[0]: unknown field, expected `deviceId` or `kind`",
            ),
        ] {
            let text = error_of(&body);
            assert!(!text.contains(secret), "{body} → {text}");
            assert!(text.contains(says), "{body} → {text}, not {says}");
        }
        let text = error_of(&format!(r#"{{"n": 1, "envelopes": []}} "{secret}""#));
        assert!(
            text.contains("not valid JSON") && !text.contains(secret),
            "{text}"
        );
        assert!(error_of("{nope").contains("not valid JSON"));
    }

    #[test]
    fn a_message_of_an_unknown_form_is_kept_only_when_it_quotes_nothing() {
        assert_eq!(shape("malformed cursor at line 1 column 9"), "malformed cursor");
        assert_eq!(
            shape(r#"odd "s3cret" thing"#),
            "a value does not have the expected shape"
        );
        assert_eq!(
            shape("odd `s3cret` thing"),
            "a value does not have the expected shape"
        );
    }

    #[test]
    fn redaction_hides_double_and_back_quoted_values() {
        assert_eq!(
            redact(r#"invalid type: string "s3cret", expected u64"#),
            r#"invalid type: string "…", expected u64"#
        );
        assert_eq!(
            redact("Failed to deserialize query string: unknown variant `s3cret`, expected `all`"),
            "Failed to deserialize query string: unknown variant `…`, expected `…`"
        );
    }
}
