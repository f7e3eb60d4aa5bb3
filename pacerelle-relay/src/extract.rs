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
        serde_json::from_slice(&bytes)
            .map(Json)
            .map_err(|e| AppError::invalid_json(describe(&e)))
    }
}

impl<T: serde::Serialize> IntoResponse for Json<T> {
    fn into_response(self) -> Response {
        axum::Json(self.0).into_response()
    }
}

/// Explains a JSON error without quoting the body's strings (they may be envelopes or secrets).
fn describe(e: &serde_json::Error) -> String {
    use serde_json::error::Category;
    match e.classify() {
        Category::Data => format!(
            "the body does not have the expected fields: {}",
            redact(&e.to_string())
        ),
        Category::Syntax | Category::Eof | Category::Io => format!(
            "the body is not valid JSON (line {}, column {})",
            e.line(),
            e.column()
        ),
    }
}

/// Replaces every double-quoted part of a message by `"…"`.
fn redact(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut quoted = false;
    for c in message.chars() {
        if c == '"' {
            if quoted {
                out.push_str("…\"");
            } else {
                out.push('"');
            }
            quoted = !quoted;
        } else if !quoted {
            out.push(c);
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
                AppError::invalid_input(format!("bad query string: {}", redact(&rejection.body_text())))
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

    #[test]
    fn redaction_hides_quoted_values() {
        assert_eq!(
            redact(r#"invalid type: string "s3cret", expected u64 at line 1 column 9"#),
            r#"invalid type: string "…", expected u64 at line 1 column 9"#
        );
        assert_eq!(redact("missing field `name`"), "missing field `name`");
    }

    #[test]
    fn data_errors_do_not_echo_strings() {
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct T {
            n: u64,
        }
        let e = serde_json::from_str::<T>(r#"{"n": "top secret"}"#).expect_err("wrong type");
        let text = describe(&e);
        assert!(!text.contains("top secret"), "{text}");
        let e = serde_json::from_str::<T>("{nope").expect_err("not JSON");
        assert!(describe(&e).contains("not valid JSON"));
    }
}
