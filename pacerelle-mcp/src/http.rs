//! The HTTP endpoint beyond loopback: who may call it (a bearer the operator sets, browser origins), the
//! rules checked before it starts, and TLS.
//!
//! On loopback the endpoint behaves as it always did: no bearer is needed (one that is set is enforced).
//! Beyond loopback a bearer is required, and TLS too unless `--insecure-http` says that a proxy in front
//! terminates it. The [`guard`] runs before rmcp: a request with a foreign `Origin` gets 403, one without the
//! right bearer 401 with `WWW-Authenticate: Bearer`; neither reaches an MCP session.
//!
//! The `Host` check is rmcp's (`allowed_hosts`, against DNS rebinding): on loopback its loopback names, with
//! `--allowed-host` the names given (plus the bound address and the loopback names). Beyond loopback without
//! `--allowed-host` it is off: a bearer is required there, and a page that rebinds a name to this address
//! cannot send it — the browser does not have it — so the check would add nothing but refusals of the names
//! clients really use.
//!
//! Connections are served by the relay's accept loop (`pacerelle_serve`, through [`conn`]), under
//! [`Limits`]: a header-read timeout, an idle timeout that never cuts a request in progress (an SSE stream, a
//! streaming answer), a body timeout, and a cap on connections at which a silent one gives way to a new one.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use pacerelle_client::AgentToken;
use pacerelle_client::core::keys::{constant_time_eq, sha256};
use pacerelle_serve::TlsConfig;
use tokio::net::TcpListener;

mod conn;
pub use conn::BODY_TIMEOUT;

/// Variable holding the bearer token HTTP clients must send (never on the command line: argv is public).
pub const BEARER_VAR: &str = "PACERELLE_MCP_BEARER";
/// The shortest bearer accepted, in characters (`openssl rand -hex 32` gives 64).
pub const MIN_BEARER_CHARS: usize = 32;
/// The fewest distinct characters in a bearer: refuses `aaaa…` and other patterns that only look long.
const MIN_DISTINCT_CHARS: usize = 8;
/// Host names rmcp accepts by default, kept when `--allowed-host` adds others.
const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];
/// A TLS handshake that has not finished by then is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Most TLS handshakes in progress at once; more connections wait to be accepted.
const MAX_HANDSHAKES: usize = 64;

/// What a connection may hold (`--header-timeout`, `--idle-timeout`, `--max-connections`): a client that
/// connects and sends nothing, sends a request head slowly, or keeps connections open without using them
/// cannot exhaust the process's file descriptors. A request in progress — a `GET /mcp` SSE stream, a `POST`
/// whose answer streams — is never cut by these; only its body's arrival is timed ([`BODY_TIMEOUT`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// A request head (line and headers) must be complete this long after the connection opened (after the
    /// TLS handshake), or after the first byte of a next request on a kept-alive connection. Default 10 s.
    pub header_timeout: Duration,
    /// A kept-alive connection with no request in progress is closed after this long. Default 60 s.
    pub idle_timeout: Duration,
    /// Connections open at once at most, TLS handshakes included. Beyond it a new connection takes the
    /// place of the one longest without a request in progress; when every one has a request in progress,
    /// the new one is refused at once. Default 256.
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_connections: 256,
        }
    }
}

/// Why the HTTP endpoint does not start. Messages name the flag or variable and never echo a secret.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HttpError {
    /// A non-loopback address without a bearer.
    #[error(
        "--http {0}: an address beyond loopback needs a bearer token. Set {BEARER_VAR} (or --bearer-file PATH) \
         to a secret of at least {MIN_BEARER_CHARS} characters, e.g. from `openssl rand -hex 32`, and give it \
         to the MCP host as `Authorization: Bearer …`; without one, only a loopback address is allowed \
         (127.0.0.1:PORT or [::1]:PORT)"
    )]
    NoBearer(SocketAddr),
    /// A non-loopback address over plain HTTP without `--insecure-http`.
    #[error(
        "--http {0}: an address beyond loopback is served over TLS: give --tls-cert PEM and --tls-key PEM, or \
         --insecure-http if a proxy in front of this endpoint terminates TLS (the bearer would otherwise \
         cross the network in clear)"
    )]
    NoTls(SocketAddr),
    /// Both the variable and the file are set.
    #[error("the bearer is given twice: set {BEARER_VAR} or --bearer-file, not both")]
    BearerTwice,
    /// The bearer file cannot be read.
    #[error("cannot read the bearer file {0}: {1}")]
    BearerFile(String, std::io::Error),
    /// The bearer is empty.
    #[error("the bearer ({0}) is empty")]
    BearerEmpty(&'static str),
    /// The bearer is the agent's token, or another agent token.
    #[error(
        "the bearer ({0}) must not be a Pacerelle agent token: the agent token opens the agent's messages and \
         stays with this server. Generate a separate secret, e.g. `openssl rand -hex 32`"
    )]
    BearerIsAgentToken(&'static str),
    /// The bearer has characters a bearer token cannot carry.
    #[error(
        "the bearer ({0}) may hold only letters, digits and - . _ ~ + / = (RFC 6750), e.g. from \
         `openssl rand -hex 32`"
    )]
    BearerCharacters(&'static str),
    /// The bearer is too short or too repetitive to be a secret.
    #[error(
        "the bearer ({0}) is too weak: it needs at least {MIN_BEARER_CHARS} characters and \
         {MIN_DISTINCT_CHARS} different ones, e.g. from `openssl rand -hex 32`"
    )]
    BearerWeak(&'static str),
    /// An `--allowed-origin` that is not an origin.
    #[error(
        "--allowed-origin {0:?} is not an origin: expected scheme://host[:port] (e.g. https://app.example.com), \
         or null"
    )]
    Origin(String),
    /// The certificate or key cannot be used.
    #[error("{0}")]
    Tls(String),
    /// A connection limit of zero.
    #[error("{0} must be at least 1")]
    Limit(&'static str),
}

/// The secret HTTP clients present as `Authorization: Bearer …`. Only its SHA-256 is kept; `Debug` shows
/// nothing of it.
#[derive(Clone)]
pub struct Bearer {
    digest: [u8; 32],
}

impl std::fmt::Debug for Bearer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Bearer(…)")
    }
}

impl Bearer {
    /// Checks `text` (from `source`, named in errors): not an agent token, only RFC 6750 characters, at
    /// least [`MIN_BEARER_CHARS`] long with enough different characters. Surrounding whitespace is dropped.
    pub fn new(text: &str, source: &'static str, agent_token: &AgentToken) -> Result<Bearer, HttpError> {
        let text = text.trim();
        if text.is_empty() {
            return Err(HttpError::BearerEmpty(source));
        }
        if text.contains(agent_token.expose().as_str()) || AgentToken::parse(text).is_ok() {
            return Err(HttpError::BearerIsAgentToken(source));
        }
        if !text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~+/=".contains(&b))
        {
            return Err(HttpError::BearerCharacters(source));
        }
        let mut distinct: Vec<u8> = text.bytes().collect();
        distinct.sort_unstable();
        distinct.dedup();
        if text.len() < MIN_BEARER_CHARS || distinct.len() < MIN_DISTINCT_CHARS {
            return Err(HttpError::BearerWeak(source));
        }
        Ok(Bearer {
            digest: sha256(text.as_bytes()),
        })
    }

    /// The bearer from [`BEARER_VAR`] (`var` reads the environment) or from `file`, if either is set.
    pub fn from_sources(
        var: impl Fn(&str) -> Option<String>,
        file: Option<&Path>,
        agent_token: &AgentToken,
    ) -> Result<Option<Bearer>, HttpError> {
        let from_var = var(BEARER_VAR).filter(|v| !v.trim().is_empty());
        match (from_var, file) {
            (Some(_), Some(_)) => Err(HttpError::BearerTwice),
            (Some(text), None) => Bearer::new(&text, BEARER_VAR, agent_token).map(Some),
            (None, Some(path)) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| HttpError::BearerFile(path.display().to_string(), e))?;
                Bearer::new(&text, "--bearer-file", agent_token).map(Some)
            }
            (None, None) => Ok(None),
        }
    }

    /// Whether `presented` is this bearer, in time independent of where they differ (digests compared).
    fn accepts(&self, presented: &[u8]) -> bool {
        constant_time_eq(&sha256(presented), &self.digest)
    }
}

/// A browser origin, `scheme://host:port` with the port always written, or `null`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin(String);

impl Origin {
    /// Parses an origin as browsers send it (`https://app.example.com`, `http://localhost:5173`, `null`);
    /// scheme and host are compared without case, and a missing port is the scheme's default.
    pub fn parse(text: &str) -> Option<Origin> {
        let text = text.trim();
        if text.eq_ignore_ascii_case("null") {
            return Some(Origin("null".into()));
        }
        let uri: Uri = text.parse().ok()?;
        let scheme = uri.scheme_str()?.to_ascii_lowercase();
        let authority = uri.authority()?;
        if authority.as_str().contains('@') || !matches!(uri.path(), "" | "/") || uri.query().is_some() {
            return None;
        }
        let port = match (authority.port_u16(), scheme.as_str()) {
            (Some(port), _) => port,
            (None, "https") => 443,
            (None, "http") => 80,
            (None, _) => return None,
        };
        let host = authority.host().to_ascii_lowercase();
        Some(Origin(format!("{scheme}://{host}:{port}")))
    }
}

/// How the HTTP endpoint is served.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Where to listen (`--http`).
    pub addr: SocketAddr,
    /// The bearer clients must send; required beyond loopback.
    pub bearer: Option<Bearer>,
    /// TLS (`--tls-cert`, `--tls-key`); required beyond loopback unless `insecure_http`.
    pub tls: Option<TlsConfig>,
    /// Plain HTTP beyond loopback, for a TLS-terminating proxy in front (`--insecure-http`).
    pub insecure_http: bool,
    /// Browser origins allowed to call (`--allowed-origin`); a request without `Origin` is always allowed.
    pub allowed_origins: Vec<Origin>,
    /// Names clients reach this endpoint by (`--allowed-host`), for rmcp's `Host` check.
    pub allowed_hosts: Vec<String>,
    /// Timeouts and the cap on connections.
    pub limits: Limits,
}

impl HttpOptions {
    /// Loopback, no bearer, no TLS: the endpoint as it always was.
    pub fn loopback(addr: SocketAddr) -> HttpOptions {
        HttpOptions {
            addr,
            bearer: None,
            tls: None,
            insecure_http: false,
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            limits: Limits::default(),
        }
    }

    /// The rules checked before listening: beyond loopback, a bearer, and TLS or `--insecure-http`.
    pub fn check(&self) -> Result<(), HttpError> {
        if self.limits.max_connections == 0 {
            return Err(HttpError::Limit("--max-connections"));
        }
        if self.limits.header_timeout.is_zero() {
            return Err(HttpError::Limit("--header-timeout"));
        }
        if self.limits.idle_timeout.is_zero() {
            return Err(HttpError::Limit("--idle-timeout"));
        }
        if self.addr.ip().is_loopback() {
            return Ok(());
        }
        if self.bearer.is_none() {
            return Err(HttpError::NoBearer(self.addr));
        }
        if self.tls.is_none() && !self.insecure_http {
            return Err(HttpError::NoTls(self.addr));
        }
        Ok(())
    }

    /// The `Host` values rmcp accepts once bound at `local`, or `None` for no check (see the module
    /// documentation: only beyond loopback, where a bearer is required, without `--allowed-host`).
    pub fn host_check(&self, local: SocketAddr) -> Option<Vec<String>> {
        let loopback = LOOPBACK_HOSTS.iter().map(|h| h.to_string());
        if local.ip().is_loopback() {
            return Some(loopback.chain(self.allowed_hosts.iter().cloned()).collect());
        }
        if self.allowed_hosts.is_empty() && self.bearer.is_some() {
            return None;
        }
        let bound = (!local.ip().is_unspecified()).then(|| local.ip().to_string());
        Some(
            loopback
                .chain(bound)
                .chain(self.allowed_hosts.iter().cloned())
                .collect(),
        )
    }

    pub(crate) fn guard(&self) -> Arc<Guard> {
        Arc::new(Guard {
            bearer: self.bearer.clone(),
            origins: self.allowed_origins.clone(),
        })
    }
}

/// What [`guard`] checks on every request.
#[derive(Debug)]
pub(crate) struct Guard {
    bearer: Option<Bearer>,
    origins: Vec<Origin>,
}

/// Refuses a request from a foreign browser origin (403) and one without the right bearer (401), before
/// rmcp sees it; removes the `Authorization` header from the requests it lets through.
pub(crate) async fn guard(State(guard): State<Arc<Guard>>, mut request: Request, next: Next) -> Response {
    let mut origins = request.headers().get_all(header::ORIGIN).iter();
    if let Some(origin) = origins.next() {
        let allowed = origins.next().is_none()
            && origin
                .to_str()
                .ok()
                .and_then(Origin::parse)
                .is_some_and(|o| guard.origins.contains(&o));
        if !allowed {
            tracing::warn!(
                ?origin,
                "refused a request from a browser origin not in --allowed-origin"
            );
            return (
                StatusCode::FORBIDDEN,
                "Forbidden: this Origin is not allowed (pacerelle-mcp --allowed-origin)\n",
            )
                .into_response();
        }
    }
    if let Some(bearer) = &guard.bearer {
        match presented_bearer(request.headers()) {
            None => return unauthorized("Bearer realm=\"pacerelle-mcp\""),
            Some(presented) if !bearer.accepts(presented) => {
                tracing::warn!("refused a request with a wrong bearer");
                return unauthorized("Bearer realm=\"pacerelle-mcp\", error=\"invalid_token\"");
            }
            Some(_) => {}
        }
        request.headers_mut().remove(header::AUTHORIZATION);
    }
    next.run(request).await
}

/// The token of the one `Authorization: Bearer …` header, if there is exactly one.
fn presented_bearer(headers: &HeaderMap) -> Option<&[u8]> {
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    let value = value.as_bytes();
    let split = value.iter().position(|b| *b == b' ')?;
    let (scheme, rest) = value.split_at(split);
    if !scheme.eq_ignore_ascii_case(b"bearer") {
        return None;
    }
    let token = rest.trim_ascii();
    (!token.is_empty()).then_some(token)
}

fn unauthorized(challenge: &'static str) -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, HeaderValue::from_static(challenge))],
        "Unauthorized: send the endpoint's bearer as `Authorization: Bearer …`\n",
    )
        .into_response()
}

/// Serves `app` on `listener` under `options`' TLS and [`Limits`] until `signal` resolves, then lets the
/// requests in progress finish (see [`conn`]).
pub(crate) async fn serve(
    listener: TcpListener,
    options: &HttpOptions,
    app: axum::Router,
    signal: impl std::future::Future<Output = ()> + Send,
) -> std::io::Result<()> {
    let tls = options.tls.as_ref().map(|tls| pacerelle_serve::Tls {
        acceptor: tls.acceptor(),
        max_handshakes: MAX_HANDSHAKES,
        handshake_timeout: HANDSHAKE_TIMEOUT,
        handshake_only_alpn: None,
    });
    conn::serve(listener, tls, app, options.limits, signal).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token() -> AgentToken {
        AgentToken::generate()
    }

    const GOOD: &str = "3f9a1c0b7e5d42a8b6c1f0e9d8a7b6c53f9a1c0b7e5d42a8b6c1f0e9d8a7b6c5";

    #[test]
    fn a_bearer_from_openssl_rand_is_accepted_and_compared_exactly() {
        let bearer = Bearer::new(&format!(" {GOOD}\n"), BEARER_VAR, &token()).expect("accepted");
        assert!(bearer.accepts(GOOD.as_bytes()));
        assert!(!bearer.accepts(&GOOD.as_bytes()[1..]));
        assert!(!bearer.accepts(GOOD.to_uppercase().as_bytes()));
        assert!(!format!("{bearer:?}").contains(GOOD));
    }

    #[test]
    fn an_agent_token_a_short_or_repetitive_bearer_is_refused() {
        let agent = token();
        assert!(matches!(
            Bearer::new(&agent.expose(), BEARER_VAR, &agent),
            Err(HttpError::BearerIsAgentToken(_))
        ));
        assert!(matches!(
            Bearer::new(&token().expose(), BEARER_VAR, &agent),
            Err(HttpError::BearerIsAgentToken(_))
        ));
        assert!(matches!(
            Bearer::new(&GOOD[..31], BEARER_VAR, &agent),
            Err(HttpError::BearerWeak(_))
        ));
        assert!(matches!(
            Bearer::new(&"ab".repeat(40), BEARER_VAR, &agent),
            Err(HttpError::BearerWeak(_))
        ));
        assert!(matches!(
            Bearer::new(&format!("{GOOD} x"), BEARER_VAR, &agent),
            Err(HttpError::BearerCharacters(_))
        ));
        let refused = Bearer::new(&format!("{GOOD}\u{e9}"), "--bearer-file", &agent).expect_err("refused");
        assert!(!refused.to_string().contains(GOOD), "{refused}");
    }

    #[test]
    fn the_bearer_comes_from_one_source() {
        let agent = token();
        let dir = tempfile::tempdir().expect("dir");
        let file = dir.path().join("bearer");
        std::fs::write(&file, format!("{GOOD}\n")).expect("write");
        let var = |value: Option<&str>| {
            let value = value.map(str::to_string);
            move |name: &str| (name == BEARER_VAR).then(|| value.clone()).flatten()
        };
        assert!(
            Bearer::from_sources(var(None), Some(&file), &agent)
                .expect("file")
                .expect("set")
                .accepts(GOOD.as_bytes())
        );
        assert!(
            Bearer::from_sources(var(Some(GOOD)), None, &agent)
                .expect("variable")
                .is_some()
        );
        assert!(
            Bearer::from_sources(var(Some(" ")), None, &agent)
                .expect("blank is unset")
                .is_none()
        );
        assert!(matches!(
            Bearer::from_sources(var(Some(GOOD)), Some(&file), &agent),
            Err(HttpError::BearerTwice)
        ));
        assert!(matches!(
            Bearer::from_sources(var(None), Some(&dir.path().join("none")), &agent),
            Err(HttpError::BearerFile(..))
        ));
    }

    #[test]
    fn origins_compare_by_scheme_host_and_port() {
        let o = |s: &str| Origin::parse(s);
        assert_eq!(o("https://App.Example.com"), o("https://app.example.com:443"));
        assert_eq!(o("http://localhost:5173/"), o("http://LOCALHOST:5173"));
        assert_ne!(o("http://app.example.com"), o("https://app.example.com"));
        assert_ne!(o("https://app.example.com:8443"), o("https://app.example.com"));
        assert_eq!(o("null"), Some(Origin("null".into())));
        for bad in [
            "app.example.com",
            "https://",
            "https://a.example/path",
            "https://u@a.example",
            "ftp://x",
        ] {
            assert_eq!(o(bad), None, "{bad}");
        }
    }

    #[test]
    fn beyond_loopback_a_bearer_and_tls_or_insecure_http_are_required() {
        let agent = token();
        let bearer = Bearer::new(GOOD, BEARER_VAR, &agent).expect("bearer");
        let mut options = HttpOptions::loopback("127.0.0.1:8788".parse().expect("addr"));
        options.check().expect("loopback as before");
        options.addr = "0.0.0.0:8788".parse().expect("addr");
        let refused = options.check().expect_err("no bearer");
        assert!(matches!(refused, HttpError::NoBearer(_)), "{refused}");
        assert!(refused.to_string().contains("loopback") && refused.to_string().contains(BEARER_VAR));
        options.bearer = Some(bearer);
        assert!(matches!(options.check(), Err(HttpError::NoTls(_))));
        options.insecure_http = true;
        options.check().expect("behind a TLS proxy");
    }

    #[test]
    fn the_host_check_is_off_only_beyond_loopback_with_a_bearer_and_no_allowed_host() {
        let agent = token();
        let mut options = HttpOptions::loopback("127.0.0.1:0".parse().expect("addr"));
        let local: SocketAddr = "127.0.0.1:8788".parse().expect("addr");
        assert_eq!(
            options.host_check(local),
            Some(LOOPBACK_HOSTS.map(String::from).to_vec())
        );
        options.bearer = Some(Bearer::new(GOOD, BEARER_VAR, &agent).expect("bearer"));
        let anywhere: SocketAddr = "0.0.0.0:8788".parse().expect("addr");
        assert_eq!(options.host_check(anywhere), None);
        let one: SocketAddr = "10.1.2.3:8788".parse().expect("addr");
        assert_eq!(options.host_check(one), None);
        options.allowed_hosts = vec!["mcp.example.com".into()];
        let hosts = options.host_check(one).expect("checked");
        assert!(hosts.contains(&"10.1.2.3".to_string()) && hosts.contains(&"mcp.example.com".to_string()));
        let hosts = options.host_check(anywhere).expect("checked");
        assert!(!hosts.contains(&"0.0.0.0".to_string()), "{hosts:?}");
    }

    #[test]
    fn only_one_bearer_authorization_header_counts() {
        let mut headers = HeaderMap::new();
        assert_eq!(presented_bearer(&headers), None);
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("bearer  abc "));
        assert_eq!(presented_bearer(&headers), Some(&b"abc"[..]));
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic abc"));
        assert_eq!(presented_bearer(&headers), None);
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer abc"));
        headers.append(header::AUTHORIZATION, HeaderValue::from_static("Bearer abc"));
        assert_eq!(presented_bearer(&headers), None);
    }
}
