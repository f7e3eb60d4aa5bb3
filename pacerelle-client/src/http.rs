//! One place that talks HTTP: bearer headers, JSON bodies, coded errors, retries with backoff.

use std::time::Duration;

use pacerelle_core::wire::{ErrorBody, MAX_BODY_BYTES, SESSION_HEADER, code};
use reqwest::{Method, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Error, Result};

/// Attempts of an idempotent request before its error is returned.
///
/// Not the loops' [`Backoff`](crate::backoff::Backoff): these are a few quick retries of one request, bounded (5
/// attempts, 3 s of pauses in all) so that a caller's own budget — the gate's, a tool call's — knows what one
/// call may cost; the loops that keep going across a relay restart (the runner, the phone listener, `inbox
/// --follow`) back off with jitter around these calls.
const ATTEMPTS: u32 = 5;
/// First pause between attempts; doubled each time, capped at [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(200);
const MAX_BACKOFF: Duration = Duration::from_secs(3);
/// Time for a request that does not park.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Extra time allowed beyond a long-poll's own wait.
const WAIT_MARGIN: Duration = Duration::from_secs(15);

/// Whether a request may be sent again after an uncertain failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retry {
    /// Idempotent: retried with backoff on network errors and 429/502/503/504.
    Yes,
    /// Sent once.
    No,
}

/// A request to send.
#[derive(Debug)]
pub(crate) struct Req<'a, B: Serialize> {
    pub method: Method,
    pub path: &'a str,
    pub query: &'a [(&'a str, String)],
    pub body: Option<&'a B>,
    pub bearer: Option<&'a str>,
    pub session: Option<String>,
    pub headers: &'a [(&'static str, String)],
    /// How long the relay may park this request.
    pub wait: Option<Duration>,
    pub retry: Retry,
}

impl<'a, B: Serialize> Req<'a, B> {
    pub fn new(method: Method, path: &'a str) -> Self {
        Req {
            method,
            path,
            query: &[],
            body: None,
            bearer: None,
            session: None,
            headers: &[],
            wait: None,
            retry: Retry::Yes,
        }
    }
}

/// A relay's base URL and a connection pool.
#[derive(Debug, Clone)]
pub(crate) struct Http {
    client: reqwest::Client,
    base: String,
}

fn install_crypto_provider() {
    // reqwest is built without a bundled TLS provider; use ring, which the project already depends on.
    // Installing twice is harmless (the second call returns an error we ignore).
    let _ = rustls::crypto::ring::default_provider().install_default();
}

impl Http {
    pub fn new(base: &str) -> Result<Self> {
        let base = base.trim().trim_end_matches('/').to_string();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(Error::InvalidInput(format!(
                "relay URL must start with http:// or https://: {base:?}"
            )));
        }
        install_crypto_provider();
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .pool_idle_timeout(Duration::from_secs(50))
            .user_agent(concat!("pacerelle-client/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| Error::Network {
                url: base.clone(),
                reason: e.to_string(),
            })?;
        Ok(Http { client, base })
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    pub async fn send<B: Serialize, T: DeserializeOwned>(&self, req: Req<'_, B>) -> Result<T> {
        // The body is written once, and checked against the relay's limit before anything is sent.
        let body = req.body.map(body_bytes).transpose()?;
        let mut backoff = FIRST_BACKOFF;
        let mut attempt = 1;
        loop {
            match self.send_once(&req, body.as_deref()).await {
                Err(e) if req.retry == Retry::Yes && e.is_transient() && attempt < ATTEMPTS => {
                    tracing::debug!(path = req.path, attempt, error = %e, "retrying");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    async fn send_once<B: Serialize, T: DeserializeOwned>(
        &self,
        req: &Req<'_, B>,
        body: Option<&[u8]>,
    ) -> Result<T> {
        let url = format!("{}{}", self.base, req.path);
        let timeout = req.wait.map_or(REQUEST_TIMEOUT, |w| w + WAIT_MARGIN);
        let mut builder = self.client.request(req.method.clone(), &url).timeout(timeout);
        if !req.query.is_empty() {
            builder = builder.query(req.query);
        }
        if let Some(bearer) = req.bearer {
            builder = builder.bearer_auth(bearer);
        }
        if let Some(session) = &req.session {
            builder = builder.header(SESSION_HEADER, session);
        }
        for (name, value) in req.headers {
            builder = builder.header(*name, value);
        }
        if let Some(body) = body {
            builder = builder
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.to_vec());
        }
        let network = |e: reqwest::Error| Error::Network {
            url: self.base.clone(),
            reason: describe(&e),
        };
        let response = builder.send().await.map_err(network)?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(network)?;
        if status.is_success() {
            // A `204 No Content` reads as JSON `null`, which `()` accepts.
            let bytes: &[u8] = if bytes.is_empty() { b"null" } else { &bytes };
            return serde_json::from_slice(bytes).map_err(|e| Error::Api {
                status: status.as_u16(),
                code: "invalid_response".into(),
                message: format!("the relay's answer to {} is not the expected JSON: {e}", req.path),
                details: None,
            });
        }
        Err(api_error(status, &bytes))
    }
}

fn api_error(status: StatusCode, bytes: &[u8]) -> Error {
    match serde_json::from_slice::<ErrorBody>(bytes) {
        Ok(body) => Error::Api {
            status: status.as_u16(),
            code: body.code,
            message: body.error,
            details: body.details.map(Box::new),
        },
        // A proxy in front of the relay may answer in HTML or plain text.
        Err(_) => Error::Api {
            status: status.as_u16(),
            code: format!("http_{}", status.as_u16()),
            message: status.canonical_reason().unwrap_or("error").to_string(),
            details: None,
        },
    }
}

fn describe(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        "timed out".into()
    } else if e.is_connect() {
        "connection refused or unreachable".into()
    } else {
        let mut text = e.to_string();
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            text.push_str(": ");
            text.push_str(&s.to_string());
            source = s.source();
        }
        text
    }
}

/// A request's JSON body, refused here with the relay's own code (`body_too_large`, 413) when it exceeds the
/// relay's limit ([`MAX_BODY_BYTES`]): nothing is sent, and the message says which limit and why a text that
/// fits one device may not fit several (each recipient device gets its own sealed copy).
fn body_bytes<B: Serialize>(body: &B) -> Result<Vec<u8>> {
    let json = serde_json::to_vec(body)
        .map_err(|e| Error::InvalidInput(format!("the request's body could not be written as JSON: {e}")))?;
    if json.len() > MAX_BODY_BYTES {
        return Err(Error::local(
            413,
            code::BODY_TOO_LARGE,
            format!(
                "this request would be {} bytes, over the relay's limit of {MAX_BODY_BYTES} bytes for one \
                 request: nothing was sent. A text is sealed once for each recipient device, so a long text \
                 for several devices can exceed it; send a shorter text, or split it",
                json.len()
            ),
        ));
    }
    Ok(json)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    /// Over the limit, the request is refused here: nothing reaches the network (port 9 would refuse it
    /// with a network error otherwise).
    #[tokio::test]
    async fn a_body_over_the_relays_limit_is_refused_before_anything_is_sent() {
        let http = Http::new("http://127.0.0.1:9").expect("client");
        let text = "x".repeat(MAX_BODY_BYTES);
        let body = serde_json::json!({ "text": text });
        let e = http
            .send::<_, serde_json::Value>(Req {
                body: Some(&body),
                ..Req::new(Method::POST, "/v1/agent/notifications")
            })
            .await
            .expect_err("too large");
        assert_eq!(e.kind(), ErrorKind::BodyTooLarge, "{e}");
        assert_eq!(e.code(), Some(code::BODY_TOO_LARGE));
        let message = e.to_string();
        assert!(
            message.contains(&MAX_BODY_BYTES.to_string()) && message.contains("nothing was sent"),
            "{message}"
        );

        // Within the limit, the same client does reach for the network.
        let small = serde_json::json!({ "text": "hello" });
        let e = http
            .send::<_, serde_json::Value>(Req {
                body: Some(&small),
                retry: Retry::No,
                ..Req::new(Method::POST, "/v1/agent/notifications")
            })
            .await
            .expect_err("nothing listens on port 9");
        assert!(matches!(e, Error::Network { .. }), "{e}");
    }
}
