//! A real relay on 127.0.0.1:0 over a SQLite file in a temporary directory, driven over HTTP — or over a fresh
//! PostgreSQL database when `PACERELLE_TEST_POSTGRES` asks for one (`docs/testing.md`): the same tests then run
//! against the PostgreSQL backend, except those that read the SQLite file itself ([`sqlite_only`]).

use std::path::PathBuf;

use std::time::Duration;

use pacerelle_core::message::{TaskPayload, task_aad};
use pacerelle_core::pairing::{OfferPayload, PairingSecret, Role, seal_offer};
use pacerelle_core::question::{
    Answer, AnswerPayload, QuestionKind, QuestionPayload, QuestionState, answer_aad, answer_copy_aad,
    host_answer_aad, question_aad,
};
use pacerelle_core::wire::{
    AgentInfo, AnswerQuestion, ClaimPairing, CreatePairing, DeviceEnvelope, ErrorBody, PairingClaimed,
    QuestionView, RegisterAgent, SendMessage, Stored,
};
use pacerelle_core::{AgentToken, ContentKey, Cursor, Timestamp, b64, envelope, ids};
use pacerelle_relay::{Config, Relay, WebhookSettings};
use reqwest::{Method, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tempfile::TempDir;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// `POST /v1/agent/messages/{id}/processed`, which must succeed.
pub async fn processed(relay: &TestRelay, agent: &Agent, id: &str) -> pacerelle_core::wire::Processed {
    relay
        .call(
            Method::POST,
            &format!("/v1/agent/messages/{id}/processed"),
            Some(&agent.bearer),
            None,
        )
        .await
        .ok()
}

/// A relay serving on a loopback port.
pub struct TestRelay {
    pub base: String,
    pub dir: TempDir,
    http: reqwest::Client,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

/// An answer: status and JSON body (`Null` when the body is empty or not JSON).
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub body: Value,
}

impl Reply {
    /// The body as `T`, after checking the status is a success.
    #[track_caller]
    pub fn ok<T: DeserializeOwned>(self) -> T {
        assert!(
            self.status.is_success(),
            "expected success, got {} {}",
            self.status,
            self.body
        );
        serde_json::from_value(self.body).expect("the body has the documented shape")
    }

    /// Checks an error answer: status, stable code, and the documented body shape.
    #[track_caller]
    pub fn error(self, status: StatusCode, code: &str) -> ErrorBody {
        assert_eq!(self.status, status, "body: {}", self.body);
        let body: ErrorBody = serde_json::from_value(self.body).expect("an error body");
        assert_eq!(body.code, code, "message: {}", body.error);
        assert!(!body.error.is_empty());
        body
    }
}

pub fn db_path(dir: &TempDir) -> PathBuf {
    dir.path().join("relay.db")
}

/// Open registration, new database.
pub async fn start() -> TestRelay {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let config = Config {
        open_registration: true,
        ..Config::new(db_path(&dir))
    };
    start_with(config, dir).await
}

pub async fn start_with(config: Config, dir: TempDir) -> TestRelay {
    start_with_settings(config, dir, WebhookSettings::default()).await
}

/// Webhook delivery settings with short delays, for tests.
pub fn fast_webhooks() -> WebhookSettings {
    WebhookSettings {
        timeout: Duration::from_secs(5),
        backoff_base: Duration::from_millis(100),
        backoff_max: Duration::from_millis(400),
        poll_every: Duration::from_millis(200),
        ..WebhookSettings::default()
    }
}

/// Open registration on the database in `dir`, with these webhook settings.
pub async fn start_in(dir: TempDir, settings: WebhookSettings) -> TestRelay {
    let config = Config {
        open_registration: true,
        ..Config::new(db_path(&dir))
    };
    start_with_settings(config, dir, settings).await
}

/// Whether this run uses PostgreSQL (`PACERELLE_TEST_POSTGRES`).
pub fn on_postgres() -> bool {
    pacerelle_test_support::postgres::Cluster::requested().is_some()
}

/// `true` (and a line saying so) when the test must be skipped because it reads or changes the SQLite file
/// itself and this run uses PostgreSQL.
pub fn sqlite_only(why: &str) -> bool {
    let skip = on_postgres();
    if skip {
        eprintln!("skipped on PostgreSQL: {why}");
    }
    skip
}

/// The PostgreSQL database of the relay whose folder is `dir`: a fresh one the first time, then the same one
/// (a relay restarted on the same folder finds its data), remembered in a file of the folder.
async fn database_of(dir: &TempDir) -> Option<String> {
    let cluster = pacerelle_test_support::postgres::Cluster::requested()?;
    let file = dir.path().join("postgres-url");
    if let Ok(url) = std::fs::read_to_string(&file) {
        return Some(url);
    }
    let url = cluster.fresh_database().await;
    std::fs::write(&file, &url).expect("the database URL is written");
    Some(url)
}

pub async fn start_with_settings(mut config: Config, dir: TempDir, settings: WebhookSettings) -> TestRelay {
    // reqwest is built without a default TLS provider; plain HTTP still needs one installed to build a client.
    let _ = rustls::crypto::ring::default_provider().install_default();
    if config.database_url.is_none() {
        config.database_url = database_of(&dir).await;
    }
    let relay = Relay::open_with(config, settings).await.expect("the relay opens");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let addr = listener.local_addr().expect("bound");
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(relay.serve(listener, async {
        let _ = stopped.await;
    }));
    TestRelay {
        base: format!("http://{addr}"),
        dir,
        http: reqwest::Client::new(),
        stop: Some(stop),
        task: Some(task),
    }
}

impl TestRelay {
    /// A client for a relay served elsewhere (another process) over the database in `dir`.
    pub fn external(base: String, dir: TempDir) -> TestRelay {
        let _ = rustls::crypto::ring::default_provider().install_default();
        TestRelay {
            base,
            dir,
            http: reqwest::Client::new(),
            stop: None,
            task: None,
        }
    }

    /// Shuts the relay down gracefully and hands back its directory (to open it again).
    pub async fn stop(mut self) -> TempDir {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.await
                .expect("the server task")
                .expect("the server ends cleanly");
        }
        self.dir
    }

    pub async fn call(&self, method: Method, path: &str, bearer: Option<&str>, body: Option<Value>) -> Reply {
        self.request(
            method,
            path,
            bearer,
            &[],
            body.map(|b| b.to_string().into_bytes()),
        )
        .await
    }

    /// The full form: extra headers and a raw body.
    pub async fn request(
        &self,
        method: Method,
        path: &str,
        bearer: Option<&str>,
        headers: &[(&str, &str)],
        body: Option<Vec<u8>>,
    ) -> Reply {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(bearer) = bearer {
            req = req.bearer_auth(bearer);
        }
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        if let Some(body) = body {
            req = req.header("content-type", "application/json").body(body);
        }
        let resp = req.send().await.expect("the relay answers");
        let status = resp.status();
        let bytes = resp.bytes().await.expect("a body");
        Reply {
            status,
            body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        }
    }

    pub async fn get(&self, path: &str, bearer: &str) -> Reply {
        self.call(Method::GET, path, Some(bearer), None).await
    }

    pub async fn post<T: Serialize>(&self, path: &str, bearer: &str, body: &T) -> Reply {
        let body = serde_json::to_value(body).expect("serialisable");
        self.call(Method::POST, path, Some(bearer), Some(body)).await
    }

    pub async fn delete(&self, path: &str, bearer: &str) -> Reply {
        self.call(Method::DELETE, path, Some(bearer), None).await
    }

    pub async fn put<T: Serialize>(&self, path: &str, bearer: &str, body: &T) -> Reply {
        let body = serde_json::to_value(body).expect("serialisable");
        self.call(Method::PUT, path, Some(bearer), Some(body)).await
    }
}

/// An agent: its token stays here, the relay gets the hash of the auth secret.
pub struct Agent {
    pub id: String,
    pub token: AgentToken,
    pub bearer: String,
}

pub fn new_agent() -> (Agent, RegisterAgent) {
    let id = ids::generate(ids::AGENT);
    let token = AgentToken::generate();
    let body = RegisterAgent {
        agent_id: id.clone(),
        name: "laptop".into(),
        auth_hash: b64::encode(&token.auth_hash()),
    };
    let bearer = token.bearer(&id).expose().to_string();
    (Agent { id, token, bearer }, body)
}

/// Registers a new agent on an open relay.
pub async fn register(relay: &TestRelay) -> Agent {
    let (agent, body) = new_agent();
    let info: AgentInfo = relay
        .call(
            Method::POST,
            "/v1/agents",
            None,
            Some(serde_json::to_value(&body).expect("json")),
        )
        .await
        .ok();
    assert_eq!(info.agent_id, agent.id);
    agent
}

/// A paired device: its credential and the key it shares with the agent.
pub struct Device {
    pub id: String,
    pub agent_id: String,
    pub bearer: String,
    pub key: ContentKey,
}

/// An offer for a new device, sealed as the agent side does it.
pub fn offer_for(agent: &Agent, device_id: &str, expires_at: Timestamp) -> (PairingSecret, CreatePairing) {
    let secret = PairingSecret::generate();
    let payload = OfferPayload {
        v: 1,
        agent_id: agent.id.clone(),
        agent_name: "laptop".into(),
        device_id: device_id.to_string(),
        device_key: b64::encode(&agent.token.device_key(&agent.id, device_id).to_bytes()),
        role: Role::Owner,
        expires_at,
        branding: None,
        user: None,
    };
    let body = CreatePairing {
        pairing_id: secret.pairing_id(),
        device_id: device_id.to_string(),
        label: Some("phone".into()),
        role: Role::Owner,
        claim_hash: b64::encode(&secret.claim_hash()),
        offer: seal_offer(&secret, &payload),
        expires_at,
    };
    (secret, body)
}

pub fn claim_body(secret: &PairingSecret) -> ClaimPairing {
    ClaimPairing {
        claim_secret: b64::encode(&secret.claim_secret()),
        name: "Ana's phone".into(),
        signing_key: None,
        signing_key_seal: None,
    }
}

/// Pairs a new device with `agent` (offer, claim) and returns it.
pub async fn pair(relay: &TestRelay, agent: &Agent) -> Device {
    pair_as(relay, agent, Role::Owner).await
}

/// [`pair`] with the role the relay records for the device (`user`: a Partner-mode user's device).
pub async fn pair_as(relay: &TestRelay, agent: &Agent, role: Role) -> Device {
    let device_id = ids::generate(ids::DEVICE);
    let (secret, mut offer) = offer_for(agent, &device_id, Timestamp::now().plus_millis(600_000));
    offer.role = role;
    relay
        .post("/v1/agent/pairings", &agent.bearer, &offer)
        .await
        .ok::<Value>();
    let claimed: PairingClaimed = relay
        .call(
            Method::POST,
            &format!("/v1/pairings/{}/claim", offer.pairing_id),
            None,
            Some(serde_json::to_value(claim_body(&secret)).expect("json")),
        )
        .await
        .ok();
    assert_eq!(claimed.device_id, device_id);
    Device {
        id: device_id.clone(),
        agent_id: agent.id.clone(),
        bearer: claimed.device_token,
        key: agent.token.device_key(&agent.id, &device_id),
    }
}

/// A task sealed by `device` as a phone would.
pub fn seal_task(device: &Device, message_id: &str, text: &str) -> String {
    let payload = serde_json::to_vec(&TaskPayload {
        text: text.into(),
        session: None,
    })
    .expect("json");
    envelope::seal(
        &device.key,
        &task_aad(&device.agent_id, &device.id, message_id),
        &payload,
    )
}

/// Sends a task and returns the raw answer.
pub async fn send_task_reply(relay: &TestRelay, device: &Device, message_id: &str, text: &str) -> Reply {
    let body = SendMessage {
        message_id: message_id.into(),
        envelope: seal_task(device, message_id, text),
        session: None,
    };
    relay.post("/v1/device/messages", &device.bearer, &body).await
}

/// Sends a task that must be stored.
pub async fn send_task(relay: &TestRelay, device: &Device, message_id: &str, text: &str) -> Stored {
    send_task_reply(relay, device, message_id, text).await.ok()
}

/// `GET /v1/agent/messages` with an optional cursor, wait and session header.
pub async fn wait_messages(
    relay: &TestRelay,
    agent: &Agent,
    cursor: Option<Cursor>,
    wait: u64,
    session: Option<&str>,
) -> Reply {
    let mut path = format!("/v1/agent/messages?wait={wait}");
    if let Some(c) = cursor {
        path.push_str(&format!("&cursor={c}"));
    }
    let headers: Vec<(&str, &str)> = session
        .map(|s| vec![(pacerelle_core::wire::SESSION_HEADER, s)])
        .unwrap_or_default();
    relay
        .request(Method::GET, &path, Some(&agent.bearer), &headers, None)
        .await
}

/// Ids of a batch, in order.
pub fn ids_of(batch: &pacerelle_core::wire::MessageBatch) -> Vec<&str> {
    batch.messages.iter().map(|m| m.message_id.as_str()).collect()
}

/// A yes/no question for these devices, expiring in `expires_in_ms`.
pub fn yes_no(text: &str, devices: &[&Device], expires_in_ms: i64) -> QuestionPayload {
    QuestionPayload {
        grants: None,
        question: text.into(),
        kind: QuestionKind::YesNo,
        options: vec![],
        multiple: false,
        details: None,
        expires_at: Timestamp::now().plus_millis(expires_in_ms),
        recipients: devices.iter().map(|d| d.id.clone()).collect(),
        answer_key: None,
        channels: Vec::new(),
        user: None,
        approvals: 1,
    }
}

/// The question sealed as the agent side does it: once for itself, once for each recipient, with the
/// payload's user in clear.
pub fn seal_question(
    agent: &Agent,
    question_id: &str,
    payload: &QuestionPayload,
    devices: &[&Device],
) -> pacerelle_core::wire::CreateQuestion {
    pacerelle_core::wire::CreateQuestion {
        question_id: question_id.into(),
        kind: payload.kind,
        expires_at: payload.expires_at,
        self_envelope: envelope::seal_json(
            &agent.token.self_key(&agent.id),
            &question_aad(&agent.id, "", question_id),
            payload,
        ),
        envelopes: devices
            .iter()
            .map(|d| DeviceEnvelope {
                device_id: d.id.clone(),
                envelope: envelope::seal_json(&d.key, &question_aad(&agent.id, &d.id, question_id), payload),
            })
            .collect(),
        // In clear beside the sealed addressee, as the agent side sends it.
        user_id: payload.user.clone(),
        approvals: 1,
    }
}

/// Asks a yes/no question of these devices; it must be stored.
pub async fn ask(
    relay: &TestRelay,
    agent: &Agent,
    question_id: &str,
    devices: &[&Device],
    expires_in_ms: i64,
) -> (QuestionPayload, QuestionView) {
    let payload = yes_no(&format!("may I run {question_id}?"), devices, expires_in_ms);
    let body = seal_question(agent, question_id, &payload, devices);
    let reply = relay.post("/v1/agent/questions", &agent.bearer, &body).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
    let view: QuestionView = reply.ok();
    assert_eq!(view.state, QuestionState::Pending);
    (payload, view)
}

/// An answer sealed by `device` as a phone would (the relay never sees the question's digest inside).
pub fn seal_answer(device: &Device, question_id: &str, answer: Answer) -> (AnswerPayload, AnswerQuestion) {
    seal_answer_to(device, question_id, answer, None)
}

/// An answer naming the question's digest, as a phone computes it from the question it opened.
pub fn seal_answer_to(
    device: &Device,
    question_id: &str,
    answer: Answer,
    question_digest: Option<String>,
) -> (AnswerPayload, AnswerQuestion) {
    let payload = AnswerPayload {
        grant: None,
        question_id: question_id.into(),
        answer,
        answered_at: Timestamp::now(),
        question_digest,
        signature: None,
    };
    let envelope = envelope::seal_json(
        &device.key,
        &answer_aad(&device.agent_id, &device.id, question_id),
        &payload,
    );
    (
        payload,
        AnswerQuestion {
            envelope,
            copy: None,
            closes: false,
        },
    )
}

/// Answers a question from `device`; the raw answer.
pub async fn answer(relay: &TestRelay, device: &Device, question_id: &str, answer: Answer) -> Reply {
    let (_, body) = seal_answer(device, question_id, answer);
    relay
        .post(
            &format!("/v1/device/questions/{question_id}/answer"),
            &device.bearer,
            &body,
        )
        .await
}

/// An answer given at the computer, sealed by the agent with its own key as its host does it, with a copy
/// sealed for the devices with an answer key of the question's.
pub fn seal_host_answer(agent: &Agent, question_id: &str, answer: Answer) -> (AnswerPayload, AnswerQuestion) {
    seal_host_answer_to(agent, question_id, answer, None)
}

/// [`seal_host_answer`] naming the digest of the question the agent opened, as its host does.
pub fn seal_host_answer_to(
    agent: &Agent,
    question_id: &str,
    answer: Answer,
    question_digest: Option<String>,
) -> (AnswerPayload, AnswerQuestion) {
    let payload = AnswerPayload {
        grant: None,
        question_id: question_id.into(),
        answer,
        answered_at: Timestamp::now(),
        question_digest,
        signature: None,
    };
    let sealed = envelope::seal_json(
        &agent.token.self_key(&agent.id),
        &host_answer_aad(&agent.id, question_id),
        &payload,
    );
    let copy = envelope::seal_json(
        &ContentKey::from_bytes([7; 32]),
        &answer_copy_aad(&agent.id, "", question_id),
        &payload,
    );
    (
        payload,
        AnswerQuestion {
            envelope: sealed,
            copy: Some(copy),
            closes: false,
        },
    )
}

/// Posts an answer given at the computer; the raw reply.
pub async fn answer_at_host(
    relay: &TestRelay,
    agent: &Agent,
    question_id: &str,
    body: &AnswerQuestion,
) -> Reply {
    relay
        .post(
            &format!("/v1/agent/questions/{question_id}/answer"),
            &agent.bearer,
            body,
        )
        .await
}

/// Polls `check` every 50 ms until it gives a value, for at most `secs` seconds.
pub async fn eventually<T, F, Fut>(secs: u64, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
