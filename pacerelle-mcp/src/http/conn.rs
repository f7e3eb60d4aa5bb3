//! The endpoint's side of its accept loop ([`pacerelle_serve`], the relay's too, at the scale of an MCP
//! endpoint that serves a few hosts): its [`Limits`] and [`BODY_TIMEOUT`], and its own answers in plain
//! text — `503` to a connection refused at the cap, `408` to a body that did not arrive in time.
//!
//! A request in progress — a `GET /mcp` SSE stream, a `POST` whose answer streams (a `wait_for_messages`
//! parked until a task comes) — lasts as long as it does, never cut by the header or idle timeouts; only its
//! body's arrival is timed. The phases, timeouts and displacement at the cap are `pacerelle_serve`'s (its
//! `conn` module's documentation).

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderValue, Response, StatusCode, header};
use tokio::net::TcpListener;

use super::Limits;

/// A request body that has not fully arrived this long after its head is answered `408`.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// What a refused plain-HTTP connection is sent, written without reading its request.
const REFUSAL: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\n\
connection: close\r\ncontent-length: 64\r\n\r\n\
pacerelle-mcp has too many connections open (--max-connections)\n";

/// Serves `app` on `listener` (over TLS with `tls`) under `limits` until `signal` resolves; then stops
/// accepting, closes the connections that have no request in progress, lets the others finish, and returns
/// once every connection is closed.
pub(crate) async fn serve(
    listener: TcpListener,
    tls: Option<pacerelle_serve::Tls>,
    app: Router,
    limits: Limits,
    signal: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    tracing::info!(
        max_connections = limits.max_connections,
        header_timeout_s = limits.header_timeout.as_secs_f64(),
        idle_timeout_s = limits.idle_timeout.as_secs_f64(),
        "connection limits"
    );
    let limits = pacerelle_serve::Limits {
        max_connections: limits.max_connections,
        header_timeout: limits.header_timeout,
        idle_timeout: limits.idle_timeout,
        body_timeout: BODY_TIMEOUT,
    };
    let answers = pacerelle_serve::Answers {
        refusal: REFUSAL,
        request_timeout,
        refused,
    };
    pacerelle_serve::serve(listener, tls, app, limits, answers, signal).await
}

/// Logs a connection refused at the cap: with a few hosts, one is worth a warning.
fn refused(addr: SocketAddr, max_connections: usize) {
    tracing::warn!(
        %addr,
        max_connections,
        "connection refused: every connection has a request in progress (--max-connections)"
    );
}

/// `408 Request Timeout`, closing the connection.
fn request_timeout() -> Response<Body> {
    let mut response = Response::new(Body::from("the request body did not arrive in time\n"));
    *response.status_mut() = StatusCode::REQUEST_TIMEOUT;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_is_a_complete_response() {
        let text = std::str::from_utf8(REFUSAL).expect("ASCII");
        let (head, body) = text.split_once("\r\n\r\n").expect("a head and a body");
        assert!(head.starts_with("HTTP/1.1 503 "));
        assert!(
            head.contains(&format!("content-length: {}", body.len())),
            "{head}"
        );
    }

    #[test]
    fn the_request_timeout_closes() {
        let response = request_timeout();
        assert_eq!(response.status(), StatusCode::REQUEST_TIMEOUT);
        assert_eq!(response.headers()[header::CONNECTION], "close");
    }
}
