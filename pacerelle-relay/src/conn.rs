//! The relay's side of its accept loop ([`pacerelle_serve`], shared with the MCP endpoint): the connection
//! cap of [`Connections`] (derived from the file limit, raised at start, when not given), and the relay's own
//! answers — `503 unavailable` to a connection refused at the cap, `408 request_timeout` to a body that did
//! not arrive in time, both with the relay's error codes. The phases, timeouts and displacement at the cap
//! are `pacerelle_serve`'s (its `conn` module's documentation).

use std::future::Future;
use std::net::SocketAddr;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderValue, Response, StatusCode, header};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::config::Connections;

/// File descriptors left to the rest of the relay when the cap is derived from the file limit: the database
/// and its journal, outgoing webhook and push deliveries, certificate renewals, logs, the listener, and a
/// connection being displaced or refused at the cap.
pub(crate) const FILE_RESERVE: u64 = 128;
/// The derived cap never goes below this (a tiny file limit still serves a few clients)…
const MIN_DERIVED_CAP: usize = 32;
/// …nor above this, whatever the file limit: memory, not descriptors, is then what runs out.
const MAX_DERIVED_CAP: usize = 65_536;
/// The cap when the file limit cannot be read (not a Unix system).
const CAP_WITHOUT_FILE_LIMIT: usize = 1_024;

/// What a refused plain-HTTP connection is sent, written without reading its request.
const REFUSAL: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
connection: close\r\ncontent-length: 72\r\n\r\n\
{\"code\":\"unavailable\",\"error\":\"the relay has too many connections open\"}";

/// Serves `router` on `listener` (over TLS with `tls`) until `signal` resolves; then stops accepting, closes
/// the connections that have no request in progress, lets the others finish their request, and returns once
/// every connection is closed.
pub(crate) async fn serve(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    router: Router,
    settings: &Connections,
    signal: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    let file_limit = raise_file_limit();
    let cap = match settings.max_connections {
        Some(0) => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "the connection cap (--max-connections) must be at least 1",
            ));
        }
        Some(n) => {
            if let Some(limit) = file_limit
                && n as u64 + FILE_RESERVE > limit
            {
                tracing::warn!(
                    max_connections = n,
                    file_limit = limit,
                    "the connection cap leaves less than {FILE_RESERVE} files to the rest of the relay: \
                     connections may fail with \"too many open files\""
                );
            }
            n
        }
        None => derived_cap(file_limit),
    };
    let limits = pacerelle_serve::Limits {
        max_connections: cap,
        header_timeout: settings.header_timeout,
        idle_timeout: settings.idle_timeout,
        body_timeout: settings.body_timeout,
    };
    tracing::info!(
        max_connections = cap,
        file_limit = file_limit.map(|l| l.to_string()).unwrap_or_else(|| "-".into()),
        header_timeout_s = limits.header_timeout.as_secs_f64(),
        body_timeout_s = limits.body_timeout.as_secs_f64(),
        idle_timeout_s = limits.idle_timeout.as_secs_f64(),
        "connection limits"
    );
    let answers = pacerelle_serve::Answers {
        refusal: REFUSAL,
        request_timeout,
        refused,
    };
    let tls = tls.map(crate::tls::serving);
    pacerelle_serve::serve(listener, tls, router, limits, answers, signal).await
}

/// Logs a connection refused at the cap (at debug: a relay at its cap would otherwise log each one).
fn refused(addr: SocketAddr, _cap: usize) {
    tracing::debug!(%addr, "connection refused: every connection has a request in progress");
}

/// Raises the soft limit on open files to the hard limit where the system allows, and returns the soft
/// limit then in force (`None` where there is no such limit to read).
fn raise_file_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        match rlimit::increase_nofile_limit(u64::MAX) {
            Ok(limit) => Some(limit),
            Err(e) => {
                tracing::debug!(error = %e, "cannot raise the file limit");
                rlimit::getrlimit(rlimit::Resource::NOFILE)
                    .ok()
                    .map(|(soft, _)| soft)
            }
        }
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// The cap on connections for a soft file limit of `file_limit`: the limit less [`FILE_RESERVE`], within
/// [`MIN_DERIVED_CAP`]..=[`MAX_DERIVED_CAP`].
pub(crate) fn derived_cap(file_limit: Option<u64>) -> usize {
    match file_limit {
        Some(limit) => usize::try_from(limit.saturating_sub(FILE_RESERVE))
            .unwrap_or(usize::MAX)
            .clamp(MIN_DERIVED_CAP, MAX_DERIVED_CAP),
        None => CAP_WITHOUT_FILE_LIMIT,
    }
}

/// `408 request_timeout`, closing the connection.
fn request_timeout() -> Response<Body> {
    let body = serde_json::json!({
        "code": pacerelle_core::wire::code::REQUEST_TIMEOUT,
        "error": "the request body did not arrive in time",
    });
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = StatusCode::REQUEST_TIMEOUT;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_derived_cap_leaves_a_reserve_within_bounds() {
        assert_eq!(derived_cap(Some(1_024)), 1_024 - FILE_RESERVE as usize);
        assert_eq!(derived_cap(Some(65_536)), 65_536 - FILE_RESERVE as usize);
        assert_eq!(derived_cap(Some(100)), MIN_DERIVED_CAP);
        assert_eq!(derived_cap(Some(1 << 20)), MAX_DERIVED_CAP);
        assert_eq!(derived_cap(Some(u64::MAX)), MAX_DERIVED_CAP);
        assert_eq!(derived_cap(None), CAP_WITHOUT_FILE_LIMIT);
    }

    #[test]
    fn the_refusal_is_a_complete_response() {
        let text = std::str::from_utf8(REFUSAL).expect("ASCII");
        let (head, body) = text.split_once("\r\n\r\n").expect("a head and a body");
        assert!(head.contains(&format!("content-length: {}", body.len())));
        let json: serde_json::Value = serde_json::from_str(body).expect("JSON");
        assert_eq!(json["code"], pacerelle_core::wire::code::UNAVAILABLE);
    }

    #[test]
    fn the_request_timeout_is_the_relay_error_and_closes() {
        let response = request_timeout();
        assert_eq!(response.status(), StatusCode::REQUEST_TIMEOUT);
        assert_eq!(response.headers()[header::CONNECTION], "close");
    }
}
