//! The relay end to end: each case is one HTTP request through [`Relay::router`] in-process (tower's
//! `oneshot`), against a relay on a temporary SQLite file with one registered agent, one paired device, an
//! open session, a stored task, an open question and an unclaimed pairing offer.
//!
//! Input: `[route][auth] tail '\n' body`, where `route` picks a method and a path prefix, `tail` is appended
//! to the path (path parameters, further segments, the query string), and `auth` sends the agent's or the
//! device's credential, none, or (`4`) a header read from the input: `[route][4] header '\n' tail '\n' body`.
//!
//! Checked on every answer: no 5xx; every refusal is a JSON error body whose code is one of
//! [`pacerelle_core::wire::code`]; and a refusal never contains the input's marker ([`MARKER`]), which the
//! seeds carry in their values and the mutations move into keys, enum values, ids and headers — the
//! relay's promise that errors never echo request content.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use pacerelle_core::envelope;
use pacerelle_core::pairing::{OfferPayload, PairingSecret, Role};
use pacerelle_core::wire::{self, code};
use pacerelle_core::{AgentToken, Timestamp, b64};
use pacerelle_relay::{Config, Relay};
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::engine::{MARKER, Target};

/// Every code documented in [`pacerelle_core::wire::code`].
pub const DOCUMENTED_CODES: &[&str] = &[
    code::INVALID_JSON,
    code::INVALID_INPUT,
    code::BODY_TOO_LARGE,
    code::BAD_CURSOR,
    code::UNAUTHORIZED,
    code::FORBIDDEN,
    code::DEVICE_REVOKED,
    code::PUSH_ENDPOINT_FORBIDDEN,
    code::REGISTRATION_CLOSED,
    code::AGENT_EXISTS,
    code::NOT_FOUND,
    code::NO_ROUTE,
    code::METHOD_NOT_ALLOWED,
    code::PAIRING_EXPIRED,
    code::PAIRING_CLAIMED,
    code::PAIRING_PROOF,
    code::AGENT_IN_USE,
    code::LEASE_LOST,
    code::ID_CONFLICT,
    code::QUESTION_EXPIRED,
    code::QUESTION_CANCELLED,
    code::QUESTION_ANSWERED,
    code::NO_DEVICE,
    code::QUESTION_ID_CONFLICT,
    code::ROSTER_CONFLICT,
    code::ROSTER_ROLLBACK,
    code::ROSTER_INVALID,
    code::RATE_LIMITED,
    code::QUOTA_EXCEEDED,
    code::REQUEST_TIMEOUT,
    code::INTERNAL,
    code::UNAVAILABLE,
];

/// Who a route is called as by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum As {
    Agent,
    Device,
    Nobody,
}

/// The routes cases are sent to: method, path prefix, default caller.
const ROUTES: &[(&str, &str, As)] = &[
    ("POST", "/v1/agents", As::Nobody),
    ("GET", "/v1/agent", As::Agent),
    ("POST", "/v1/agent/pairings", As::Agent),
    ("GET", "/v1/agent/devices", As::Agent),
    ("PUT", "/v1/agent/roster", As::Agent),
    ("DELETE", "/v1/agent/devices/", As::Agent),
    ("GET", "/v1/agent/messages", As::Agent),
    ("POST", "/v1/agent/messages/", As::Agent),
    ("POST", "/v1/agent/replies", As::Agent),
    ("POST", "/v1/agent/checkpoints", As::Agent),
    ("GET", "/v1/agent/checkpoints", As::Agent),
    ("POST", "/v1/agent/sessions", As::Agent),
    ("POST", "/v1/agent/sessions/", As::Agent),
    ("DELETE", "/v1/agent/sessions/", As::Agent),
    ("GET", "/v1/agent/status", As::Agent),
    ("POST", "/v1/agent/questions", As::Agent),
    ("GET", "/v1/agent/questions", As::Agent),
    ("POST", "/v1/agent/questions/", As::Agent),
    ("POST", "/v1/agent/notifications", As::Agent),
    ("PUT", "/v1/agent/webhook", As::Agent),
    ("GET", "/v1/agent/webhook/deliveries", As::Agent),
    ("GET", "/v1/pairings/", As::Nobody),
    ("POST", "/v1/pairings/", As::Nobody),
    ("GET", "/v1/device", As::Device),
    ("POST", "/v1/device/messages", As::Device),
    ("GET", "/v1/device/conversation", As::Device),
    ("GET", "/v1/device/status", As::Device),
    ("POST", "/v1/device/push", As::Device),
    ("GET", "/v1/device/questions", As::Device),
    ("POST", "/v1/device/questions/", As::Device),
    ("GET", "/v1/health", As::Nobody),
    ("GET", "/", As::Nobody),
];

/// Index of a route in [`ROUTES`].
fn route(method: &str, prefix: &str) -> u8 {
    ROUTES
        .iter()
        .position(|(m, p, _)| *m == method && *p == prefix)
        .map_or(0, |i| i as u8)
}

/// The agent's id; the device's is long and unguessable so that no case revokes it.
const AGENT_ID: &str = "ag_fuzz";
const DEVICE_ID: &str = "dv_fuzzkeepq7x2m9w4r8t6y3";
const MESSAGE_ID: &str = "msg_seed";
const QUESTION_ID: &str = "qst_seed";

/// A relay in a temporary folder and the credentials of its agent and device.
#[derive(Debug)]
pub struct RelayTarget {
    runtime: tokio::runtime::Runtime,
    router: axum::Router,
    _relay: Relay,
    _dir: tempfile::TempDir,
    agent: String,
    device: String,
    offer_id: String,
    token: AgentToken,
    /// The agent's session id and when its lease was last renewed.
    session: Mutex<(String, Instant)>,
}

/// One answer: status and body.
struct Answer {
    status: StatusCode,
    body: Vec<u8>,
}

impl RelayTarget {
    /// Opens the relay and sets up its agent, device, session, task, question and offer.
    pub fn new() -> anyhow::Result<RelayTarget> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let dir = tempfile::tempdir()?;
        let mut config = Config::new(dir.path().join("relay.db"));
        config.open_registration = true;
        let relay = runtime.block_on(Relay::open(config))?;
        let router = relay.router();
        let token = AgentToken::from_secrets([0x11; 32], [0x22; 32]);
        let mut target = RelayTarget {
            runtime,
            router,
            _relay: relay,
            _dir: dir,
            agent: token.bearer(AGENT_ID).0,
            device: String::new(),
            offer_id: String::new(),
            token,
            session: Mutex::new((String::new(), Instant::now())),
        };
        target.set_up()?;
        Ok(target)
    }

    fn set_up(&mut self) -> anyhow::Result<()> {
        let ok = |a: Answer, what: &str| -> anyhow::Result<Value> {
            anyhow::ensure!(
                a.status.is_success(),
                "{what}: {} {}",
                a.status,
                String::from_utf8_lossy(&a.body)
            );
            Ok(serde_json::from_slice(&a.body)?)
        };
        let register =
            json!({"agentId": AGENT_ID, "name": "fuzz", "authHash": b64::encode(&self.token.auth_hash())});
        ok(
            self.send("POST", "/v1/agents", None, &register.to_string()),
            "register",
        )?;
        let agent = self.agent.clone();
        let paired = PairingSecret([0x33; 32]);
        let create = self.pairing(&paired, DEVICE_ID);
        ok(
            self.send("POST", "/v1/agent/pairings", Some(&agent), &create),
            "pairing",
        )?;
        let claim = json!({"claimSecret": b64::encode(&paired.claim_secret()), "name": "phone"});
        let claimed = ok(
            self.send(
                "POST",
                &format!("/v1/pairings/{}/claim", paired.pairing_id()),
                None,
                &claim.to_string(),
            ),
            "claim",
        )?;
        self.device = claimed["deviceToken"].as_str().unwrap_or_default().to_string();
        let unclaimed = PairingSecret([0x44; 32]);
        let create = self.pairing(&unclaimed, "dv_unclaimed");
        ok(
            self.send("POST", "/v1/agent/pairings", Some(&agent), &create),
            "second pairing",
        )?;
        self.offer_id = unclaimed.pairing_id();
        let device = self.device.clone();
        let key = self.token.device_key(AGENT_ID, DEVICE_ID);
        let task = envelope::seal_json(
            &key,
            &pacerelle_core::message::task_aad(AGENT_ID, DEVICE_ID, MESSAGE_ID),
            &json!({"text": "seed task"}),
        );
        let send = json!({"messageId": MESSAGE_ID, "envelope": task});
        ok(
            self.send("POST", "/v1/device/messages", Some(&device), &send.to_string()),
            "send",
        )?;
        let question = self.question_body(QUESTION_ID);
        ok(
            self.send("POST", "/v1/agent/questions", Some(&agent), &question),
            "question",
        )?;
        self.renew_session(true)?;
        Ok(())
    }

    /// A `CreatePairing` body for `secret`, creating `device_id`.
    fn pairing(&self, secret: &PairingSecret, device_id: &str) -> String {
        let expires_at = Timestamp::now().plus_millis(3_600_000);
        let offer = OfferPayload {
            v: 1,
            agent_id: AGENT_ID.into(),
            agent_name: "fuzz".into(),
            device_id: device_id.into(),
            device_key: b64::encode(&self.token.device_key(AGENT_ID, device_id).to_bytes()),
            role: Role::Owner,
            expires_at,
            branding: None,
            user: None,
        };
        json!({
            "pairingId": secret.pairing_id(), "deviceId": device_id, "role": "owner",
            "claimHash": b64::encode(&secret.claim_hash()),
            "offer": pacerelle_core::pairing::seal_offer(secret, &offer), "expiresAt": expires_at,
        })
        .to_string()
    }

    /// A `CreateQuestion` body for `question_id`, sealed for the device and the agent itself.
    fn question_body(&self, question_id: &str) -> String {
        let expires_at = Timestamp::now().plus_millis(6 * 24 * 3_600_000);
        let payload = json!({"question": "deploy?", "kind": "yes_no", "expiresAt": expires_at});
        let self_key = self.token.self_key(AGENT_ID);
        let device_key = self.token.device_key(AGENT_ID, DEVICE_ID);
        let self_envelope = envelope::seal_json(
            &self_key,
            &pacerelle_core::question::question_aad(AGENT_ID, "", question_id),
            &payload,
        );
        let device_envelope = envelope::seal_json(
            &device_key,
            &pacerelle_core::question::question_aad(AGENT_ID, DEVICE_ID, question_id),
            &payload,
        );
        json!({
            "questionId": question_id, "kind": "yes_no", "expiresAt": expires_at,
            "selfEnvelope": self_envelope, "envelopes": [{"deviceId": DEVICE_ID, "envelope": device_envelope}],
        })
        .to_string()
    }

    /// Takes the agent's lease again (with takeover) when it is older than 10 s, or when `now`.
    fn renew_session(&self, now: bool) -> anyhow::Result<()> {
        let mut session = self.session.lock().unwrap_or_else(|p| p.into_inner());
        if !now && session.1.elapsed() < Duration::from_secs(10) {
            return Ok(());
        }
        let answer = self.send(
            "POST",
            "/v1/agent/sessions",
            Some(&self.agent),
            r#"{"host": "fuzz", "takeover": true}"#,
        );
        anyhow::ensure!(answer.status.is_success(), "session: {}", answer.status);
        let info: wire::SessionInfo = serde_json::from_slice(&answer.body)?;
        *session = (info.session_id, Instant::now());
        Ok(())
    }

    /// Sends one request with a JSON body; a request that cannot be built is answered 0.
    fn send(&self, method: &str, uri: &str, bearer: Option<&str>, body: &str) -> Answer {
        let mut builder = Request::builder().method(method).uri(uri);
        if let Some(b) = bearer {
            builder = builder.header("authorization", format!("Bearer {b}"));
        }
        self.call(builder, body.as_bytes().to_vec())
    }

    fn call(&self, builder: axum::http::request::Builder, body: Vec<u8>) -> Answer {
        let Ok(request) = builder
            .header("content-type", "application/json")
            .body(Body::from(body))
        else {
            return Answer {
                status: StatusCode::from_u16(599).unwrap_or(StatusCode::IM_A_TEAPOT),
                body: Vec::new(),
            };
        };
        let router = self.router.clone();
        self.runtime.block_on(async move {
            let response = tokio::time::timeout(Duration::from_secs(20), router.oneshot(request))
                .await
                .expect("a request did not answer within 20 s")
                .unwrap_or_else(|never| match never {});
            let status = response.status();
            let body = axum::body::to_bytes(response.into_body(), usize::MAX)
                .await
                .map(|b| b.to_vec())
                .unwrap_or_default();
            Answer { status, body }
        })
    }

    /// The seeds of one route: `[route][0] tail '\n' body`.
    fn seed(method: &str, prefix: &str, tail: &str, body: &str) -> Vec<u8> {
        let mut seed = vec![route(method, prefix), 0];
        seed.extend_from_slice(tail.as_bytes());
        seed.push(b'\n');
        seed.extend_from_slice(body.as_bytes());
        seed
    }
}

/// Writes `tail` as URI text: bytes URIs allow as they are, others percent-encoded.
fn uri_text(tail: &[u8]) -> String {
    let mut out = String::with_capacity(tail.len());
    for &b in tail {
        if b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/?%".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Percent-decodes as `application/x-www-form-urlencoded` does (`+` is a space), lossily.
fn form_decode(text: &str) -> String {
    let hex = |b: u8| char::from(b).to_digit(16).map(|d| d as u8);
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(high), Some(low)) => {
                    out.push(high << 4 | low);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Keeps a request from parking: every `wait` of the query that asks for more than 0 s is dropped, and
/// `wait=0` is added when none is left (the task inbox waits 30 s by default).
fn no_waiting(uri: &str) -> String {
    let (path, query) = match uri.split_once('?') {
        Some((p, q)) => (p, q),
        None => (uri, ""),
    };
    let mut kept: Vec<&str> = Vec::new();
    let mut has_wait = false;
    for pair in query.split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        if form_decode(key) == "wait" {
            match form_decode(value).parse::<u64>() {
                Ok(0) | Err(_) => has_wait = true,
                Ok(_) => continue,
            }
        }
        if !pair.is_empty() {
            kept.push(pair);
        }
    }
    if !has_wait {
        kept.push("wait=0");
    }
    format!("{path}?{}", kept.join("&"))
}

/// Splits off the text before the first newline.
fn line(input: &[u8]) -> (&[u8], &[u8]) {
    match input.iter().position(|b| *b == b'\n') {
        Some(i) => (&input[..i], &input[i + 1..]),
        None => (input, &[]),
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

impl Target for RelayTarget {
    fn name(&self) -> &'static str {
        "relay"
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        let t = Timestamp::now().plus_millis(3_600_000);
        let envelope = format!("AQ{MARKER}");
        let envelopes = json!([{"deviceId": DEVICE_ID, "envelope": envelope}]).to_string();
        let session = self.session.lock().map(|s| s.0.clone()).unwrap_or_default();
        let pairing = self.pairing(&PairingSecret([0x55; 32]), "dv_new");
        let question = self.question_body("qst_new");
        vec![
            Self::seed(
                "POST",
                "/v1/agents",
                "",
                &format!(
                    r#"{{"agentId": "ag_{MARKER}", "name": "{MARKER}", "authHash": "{}"}}"#,
                    b64::encode(&[1; 32])
                ),
            ),
            Self::seed("GET", "/v1/agent", "", ""),
            Self::seed("POST", "/v1/agent/pairings", "", &pairing),
            Self::seed("GET", "/v1/agent/devices", "", ""),
            Self::seed(
                "PUT",
                "/v1/agent/roster",
                "",
                &format!(r#"{{"previousVersion": 0, "version": 1, "envelope": "{envelope}"}}"#),
            ),
            Self::seed("DELETE", "/v1/agent/devices/", "dv_other", ""),
            Self::seed("GET", "/v1/agent/messages", "?cursor=c1.AAAAAAAAAAE&wait=0", ""),
            Self::seed(
                "POST",
                "/v1/agent/messages/",
                &format!("{MESSAGE_ID}/processed"),
                "",
            ),
            Self::seed(
                "POST",
                "/v1/agent/replies",
                "",
                &format!(
                    r#"{{"replyId": "rep_{MARKER}", "sourceMessageId": "{MESSAGE_ID}", "envelopes": {envelopes}}}"#
                ),
            ),
            Self::seed(
                "POST",
                "/v1/agent/checkpoints",
                "",
                &format!(r#"{{"checkpointId": "ckp_1", "envelope": "{envelope}"}}"#),
            ),
            Self::seed("GET", "/v1/agent/checkpoints", "?limit=5", ""),
            Self::seed(
                "POST",
                "/v1/agent/sessions",
                "",
                &format!(r#"{{"host": "{MARKER}", "takeover": false}}"#),
            ),
            Self::seed("POST", "/v1/agent/sessions/", &format!("{session}/heartbeat"), ""),
            Self::seed("DELETE", "/v1/agent/sessions/", "ses_other", ""),
            Self::seed("GET", "/v1/agent/status", "", ""),
            Self::seed("POST", "/v1/agent/questions", "", &question),
            Self::seed(
                "POST",
                "/v1/agent/questions",
                "",
                &format!(
                    r#"{{"questionId": "qst_x", "kind": "text", "expiresAt": "{t}", "selfEnvelope": "{envelope}", "envelopes": {envelopes}}}"#
                ),
            ),
            Self::seed(
                "GET",
                "/v1/agent/questions",
                &format!("/{QUESTION_ID}?wait=0"),
                "",
            ),
            Self::seed(
                "GET",
                "/v1/agent/questions",
                "?state=pending&since=2026-01-01T00:00:00Z&limit=3",
                "",
            ),
            Self::seed("POST", "/v1/agent/questions/", "qst_other/cancel", ""),
            Self::seed(
                "POST",
                "/v1/agent/notifications",
                "",
                &format!(r#"{{"notificationId": "ntf_1", "envelopes": {envelopes}}}"#),
            ),
            Self::seed(
                "PUT",
                "/v1/agent/webhook",
                "",
                &format!(r#"{{"url": "https://hooks.invalid/{MARKER}", "secret": "{MARKER}"}}"#),
            ),
            Self::seed("GET", "/v1/agent/webhook/deliveries", "?limit=2", ""),
            Self::seed("GET", "/v1/pairings/", &self.offer_id, ""),
            Self::seed(
                "POST",
                "/v1/pairings/",
                &format!("{}/claim", self.offer_id),
                &format!(
                    r#"{{"claimSecret": "{}", "name": "{MARKER}"}}"#,
                    b64::encode(&[9; 32])
                ),
            ),
            Self::seed("GET", "/v1/device", "", ""),
            Self::seed(
                "POST",
                "/v1/device/messages",
                "",
                &format!(r#"{{"messageId": "msg_{MARKER}", "envelope": "{envelope}"}}"#),
            ),
            Self::seed(
                "GET",
                "/v1/device/conversation",
                "?cursor=c1.AAAAAAAAAAA&wait=0",
                "",
            ),
            Self::seed("GET", "/v1/device/status", "", ""),
            Self::seed(
                "POST",
                "/v1/device/push",
                "",
                &format!(
                    r#"{{"endpoint": "https://push.invalid/{MARKER}", "expirationTime": null, "keys": {{"p256dh": "{}", "auth": "{}"}}}}"#,
                    b64::encode(&[4; 65]),
                    b64::encode(&[5; 16])
                ),
            ),
            Self::seed("GET", "/v1/device/questions", "?state=pending", ""),
            Self::seed(
                "POST",
                "/v1/device/questions/",
                &format!("{QUESTION_ID}/answer"),
                &format!(r#"{{"envelope": "{envelope}", "copy": "{envelope}"}}"#),
            ),
            Self::seed("GET", "/v1/health", "", ""),
            Self::seed("GET", "/", "app/app.js", ""),
            {
                let mut custom = vec![route("GET", "/v1/agent"), 4];
                custom.extend(format!("Bearer {AGENT_ID}.{MARKER}\n\n").into_bytes());
                custom
            },
        ]
    }

    fn dictionary(&self) -> Vec<Vec<u8>> {
        [
            "?",
            "&",
            "=",
            "%",
            "/",
            "..",
            "%2F",
            "%00",
            "cursor=",
            "wait=0",
            "limit=",
            "state=",
            "since=",
            "until=",
            "/processed",
            "/heartbeat",
            "/cancel",
            "/answer",
            "/claim",
            MESSAGE_ID,
            QUESTION_ID,
            "Bearer ",
            "bearer  ",
            "Basic ",
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect()
    }

    fn run(&self, input: &[u8]) -> u64 {
        let [route_byte, auth, rest @ ..] = input else {
            return 0;
        };
        let (method, prefix, default_caller) = ROUTES[usize::from(*route_byte) % ROUTES.len()];
        let caller = match auth % 5 {
            0 => Some(default_caller),
            1 => Some(As::Agent),
            2 => Some(As::Device),
            3 => Some(As::Nobody),
            _ => None,
        };
        let (header, rest) = if caller.is_none() {
            line(rest)
        } else {
            (&[][..], rest)
        };
        let (tail, body) = line(rest);
        if self.renew_session(false).is_err() {
            panic!("the agent's session could not be renewed");
        }
        let uri = no_waiting(&format!("{prefix}{}", uri_text(tail)));
        // The fuzz device must stay paired, and its credential unchanged: revoking it is not a parser's bug.
        if method == "DELETE" && uri.contains(DEVICE_ID) {
            return 1;
        }
        let Ok(method_value) = Method::from_bytes(method.as_bytes()) else {
            return 0;
        };
        let mut builder = Request::builder().method(method_value).uri(uri.as_str());
        let session = self.session.lock().map(|s| s.0.clone()).unwrap_or_default();
        builder = builder.header(wire::SESSION_HEADER, session);
        match caller {
            Some(As::Agent) => builder = builder.header("authorization", format!("Bearer {}", self.agent)),
            Some(As::Device) => builder = builder.header("authorization", format!("Bearer {}", self.device)),
            Some(As::Nobody) => {}
            None => match axum::http::HeaderValue::from_bytes(header) {
                Ok(value) => builder = builder.header("authorization", value),
                Err(_) => return 2,
            },
        }
        let answer = self.call(builder, body.to_vec());
        if answer.status.as_u16() == 599 {
            return 3;
        }
        assert!(
            !answer.status.is_server_error(),
            "{method} {uri}: {} {}",
            answer.status,
            String::from_utf8_lossy(&answer.body)
        );
        let mut signal =
            u64::from(answer.status.as_u16()) << 8 | (usize::from(*route_byte) % ROUTES.len()) as u64;
        if answer.status.is_client_error() {
            // `agent_in_use` names the lease holder's host, as documented: text an earlier request stored,
            // which may carry the marker too.
            let names_holder = contains(&answer.body, br#""code":"agent_in_use""#);
            if contains(input, MARKER.as_bytes()) && !names_holder {
                assert!(
                    !contains(&answer.body, MARKER.as_bytes()),
                    "{method} {uri}: the refusal quotes the request: {}",
                    String::from_utf8_lossy(&answer.body)
                );
            }
            // Only the API (`/v1/…`) answers with JSON errors; the web app's files (`/`, `/pair`,
            // `/app/{name}`) are refused in plain text.
            if uri.starts_with("/v1/") {
                let error: wire::ErrorBody = serde_json::from_slice(&answer.body).unwrap_or_else(|_| {
                    panic!(
                        "{method} {uri}: a refusal that is not a JSON error: {} {}",
                        answer.status,
                        String::from_utf8_lossy(&answer.body)
                    )
                });
                let index = DOCUMENTED_CODES.iter().position(|c| *c == error.code);
                assert!(
                    index.is_some(),
                    "{method} {uri}: undocumented code {:?}",
                    error.code
                );
                signal = signal << 6 | index.unwrap_or_default() as u64;
            }
        }
        if answer.status.is_success() {
            self.undo_outside_effects(prefix, method, body);
        }
        signal
    }
}

impl RelayTarget {
    /// A webhook or push subscription a case set up would send requests to hosts on the network: removed
    /// at once.
    fn undo_outside_effects(&self, prefix: &str, method: &str, body: &[u8]) {
        if method == "PUT" && prefix == "/v1/agent/webhook" {
            self.send("DELETE", "/v1/agent/webhook", Some(&self.agent), "");
        }
        if method == "POST" && prefix == "/v1/device/push" {
            let endpoint = serde_json::from_slice::<Value>(body)
                .ok()
                .and_then(|v| v.get("endpoint").and_then(Value::as_str).map(str::to_string))
                .unwrap_or_default();
            let unsubscribe = json!({ "endpoint": endpoint }).to_string();
            self.send("DELETE", "/v1/device/push", Some(&self.device), &unsubscribe);
        }
    }
}
