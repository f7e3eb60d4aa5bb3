//! Webhooks against a real local HTTP receiver (axum on 127.0.0.1) that records what it gets and can answer
//! 500 or be stopped, and a silent one (a TCP listener that accepts and never answers).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode as AxumStatus};
use pacerelle_core::Timestamp;
use pacerelle_core::question::{Answer, Channel, QuestionState};
use pacerelle_core::wire::{
    AnswerLog, DeliveryLog, DeviceQuestion, EVENT_ID_HEADER, QuestionView, SIGNATURE_HEADER, SetWebhook,
    WebhookEvent, WebhookInfo,
};
use pacerelle_relay::{Config, Quotas, WebhookSettings};
use reqwest::Method;
use tokio::io::AsyncReadExt;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::common::{
    Agent, TestRelay, answer, answer_at_host, ask, db_path, eventually, fast_webhooks, pair, register,
    seal_host_answer, seal_question, start_in, start_with_settings, yes_no,
};

const SECRET: &str = "whsec_test_0123456789abcdef";

/// One POST as the receiver got it.
#[derive(Debug, Clone)]
struct Received {
    event_id: String,
    signature: String,
    content_type: String,
    body: Vec<u8>,
    /// When it arrived.
    at: Instant,
}

type Log = Arc<Mutex<Vec<Received>>>;

/// A webhook receiver on a loopback port.
struct Receiver {
    addr: SocketAddr,
    got: Log,
    status: Arc<AtomicU16>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

async fn record(
    State((got, status)): State<(Log, Arc<AtomicU16>)>,
    headers: HeaderMap,
    body: Bytes,
) -> (AxumStatus, [(&'static str, &'static str); 1]) {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    got.lock().expect("the log").push(Received {
        event_id: header(EVENT_ID_HEADER),
        signature: header(SIGNATURE_HEADER),
        content_type: header("content-type"),
        body: body.to_vec(),
        at: Instant::now(),
    });
    let status = AxumStatus::from_u16(status.load(Ordering::SeqCst)).expect("a status");
    // No keep-alive: a stopped receiver is really unreachable.
    (status, [("connection", "close")])
}

impl Receiver {
    async fn start() -> Receiver {
        Self::start_on("127.0.0.1:0".parse().expect("an address")).await
    }

    async fn start_on(addr: SocketAddr) -> Receiver {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .expect("the receiver's port");
        let addr = listener.local_addr().expect("bound");
        let got: Log = Arc::default();
        let status = Arc::new(AtomicU16::new(200));
        let app = axum::Router::new()
            .route("/hook", axum::routing::post(record))
            .with_state((got.clone(), status.clone()));
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await
                .expect("the receiver serves");
        });
        Receiver {
            addr,
            got,
            status,
            stop: Some(stop),
            task: Some(task),
        }
    }

    fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    fn answer_with(&self, status: u16) {
        self.status.store(status, Ordering::SeqCst);
    }

    fn received(&self) -> Vec<Received> {
        self.got.lock().expect("the log").clone()
    }

    async fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.expect("the receiver stops");
        }
    }
}

/// A port nobody listens on (for now).
async fn free_port() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    listener.local_addr().expect("bound")
}

/// Checks the POST as a receiver must: signature over `"<t>." ‖ body` with the secret, a recent `t`, the
/// event id header equal to the body's id. Returns the event.
fn verify(r: &Received, secret: &str) -> Result<WebhookEvent, String> {
    let (t, v1) = r
        .signature
        .strip_prefix("t=")
        .and_then(|rest| rest.split_once(",v1="))
        .ok_or("malformed signature header")?;
    let t: i64 = t.parse().map_err(|_| "bad t")?;
    let now = Timestamp::now().millis() / 1000;
    if (now - t).abs() > 300 {
        return Err("stale timestamp".into());
    }
    let tag = data_encoding::HEXLOWER
        .decode(v1.as_bytes())
        .map_err(|_| "signature not lowercase hex")?;
    let mut signed = format!("{t}.").into_bytes();
    signed.extend_from_slice(&r.body);
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret.as_bytes());
    ring::hmac::verify(&key, &signed, &tag).map_err(|_| "bad signature")?;
    let event: WebhookEvent = serde_json::from_slice(&r.body).map_err(|e| e.to_string())?;
    if event.id != r.event_id {
        return Err("event id header differs from the body".into());
    }
    if r.content_type != "application/json" {
        return Err(format!("content type {}", r.content_type));
    }
    Ok(event)
}

async fn set_webhook(relay: &TestRelay, agent: &Agent, url: &str) -> WebhookInfo {
    relay
        .put(
            "/v1/agent/webhook",
            &agent.bearer,
            &SetWebhook {
                url: url.into(),
                secret: SECRET.into(),
            },
        )
        .await
        .ok()
}

async fn deliveries(relay: &TestRelay, agent: &Agent) -> DeliveryLog {
    relay
        .get("/v1/agent/webhook/deliveries", &agent.bearer)
        .await
        .ok()
}

async fn cancel(relay: &TestRelay, agent: &Agent, id: &str) -> QuestionView {
    relay
        .call(
            Method::POST,
            &format!("/v1/agent/questions/{id}/cancel"),
            Some(&agent.bearer),
            None,
        )
        .await
        .ok()
}

/// Waits until the delivery of `question_id`'s event satisfies `check`.
async fn delivery_where(
    relay: &TestRelay,
    agent: &Agent,
    question_id: &str,
    what: &str,
    check: impl Fn(&pacerelle_core::wire::Delivery) -> bool,
) -> pacerelle_core::wire::Delivery {
    eventually(30, what, || async {
        deliveries(relay, agent)
            .await
            .deliveries
            .into_iter()
            .find(|d| d.question_id == question_id && check(d))
    })
    .await
}

#[tokio::test]
async fn an_answer_at_the_computer_sends_one_answered_event_with_channel_host() {
    let dir = tempfile::tempdir().expect("a directory");
    let relay = start_in(dir, fast_webhooks()).await;
    let agent = register(&relay).await;
    let phone = pair(&relay, &agent).await;
    let receiver = Receiver::start().await;
    set_webhook(&relay, &agent, &receiver.url()).await;

    ask(&relay, &agent, "qh", &[&phone], 600_000).await;
    let (_, body) = seal_host_answer(&agent, "qh", Answer::Yes);
    let answered: QuestionView = answer_at_host(&relay, &agent, "qh", &body).await.ok();
    // A retry queues nothing more.
    answer_at_host(&relay, &agent, "qh", &body)
        .await
        .ok::<QuestionView>();

    let got = eventually(30, "the event", || async {
        let got = receiver.received();
        (!got.is_empty()).then_some(got)
    })
    .await;
    let event = verify(&got[0], SECRET).expect("a valid signature");
    assert_eq!(event.event_type, "question.answered");
    assert_eq!(event.question, answered);
    assert_eq!(event.question.channel, Some(Channel::Host));
    assert_eq!(event.question.answered_by, None);
    let raw: serde_json::Value = serde_json::from_slice(&got[0].body).expect("json");
    assert_eq!(raw["question"]["channel"], "host");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(receiver.received().len(), 1, "one event for the question");
}

#[tokio::test]
async fn a_question_for_a_user_names_that_user_in_its_views_and_events_and_the_owners_names_none() {
    let dir = tempfile::tempdir().expect("a directory");
    let relay = start_in(dir, fast_webhooks()).await;
    let agent = register(&relay).await;
    let phone = pair(&relay, &agent).await;
    let receiver = Receiver::start().await;
    set_webhook(&relay, &agent, &receiver.url()).await;

    // Asked for alice: the agent sends her externalId in clear beside the sealed question.
    let mut payload = yes_no("may I pay the invoice?", &[&phone], 600_000);
    payload.user = Some("alice".into());
    let body = seal_question(&agent, "qu", &payload, &[&phone]);
    assert_eq!(body.user_id.as_deref(), Some("alice"));
    let created = relay.post("/v1/agent/questions", &agent.bearer, &body).await;
    assert_eq!(created.status, reqwest::StatusCode::CREATED);
    assert_eq!(created.body["userId"], "alice");
    let created: QuestionView = created.ok();
    assert_eq!(created.user_id.as_deref(), Some("alice"));
    // A retry under the same id gets the question as first stored, as for its other clear metadata.
    for user_id in [None, Some("bob")] {
        let mut retry = body.clone();
        retry.user_id = user_id.map(str::to_string);
        let again = relay.post("/v1/agent/questions", &agent.bearer, &retry).await;
        assert_eq!(again.status, reqwest::StatusCode::OK);
        assert_eq!(again.ok::<QuestionView>(), created);
    }
    // Another for alice, cancelled; and the owner's, with no user.
    let cancelled = seal_question(&agent, "qc", &payload, &[&phone]);
    relay
        .post("/v1/agent/questions", &agent.bearer, &cancelled)
        .await
        .ok::<QuestionView>();
    let (_, owner) = ask(&relay, &agent, "qo", &[&phone], 600_000).await;
    assert_eq!(owner.user_id, None);
    let raw = relay.get("/v1/agent/questions/qo", &agent.bearer).await;
    assert!(!raw.body.to_string().contains("userId"), "{}", raw.body);

    // The agent's view and its answer log carry it.
    let view: QuestionView = relay.get("/v1/agent/questions/qu", &agent.bearer).await.ok();
    assert_eq!(view.user_id.as_deref(), Some("alice"));
    let log: AnswerLog = relay.get("/v1/agent/questions", &agent.bearer).await.ok();
    let users: Vec<(&str, Option<&str>)> = log
        .questions
        .iter()
        .map(|q| (q.question_id.as_str(), q.user_id.as_deref()))
        .collect();
    assert_eq!(
        users,
        [("qo", None), ("qc", Some("alice")), ("qu", Some("alice"))]
    );

    answer(&relay, &phone, "qu", Answer::Yes)
        .await
        .ok::<DeviceQuestion>();
    answer(&relay, &phone, "qo", Answer::No)
        .await
        .ok::<DeviceQuestion>();
    cancel(&relay, &agent, "qc").await;

    let got = eventually(30, "three events", || async {
        let got = receiver.received();
        (got.len() >= 3).then_some(got)
    })
    .await;
    let mut by_question = std::collections::HashMap::new();
    for r in &got {
        let event = verify(r, SECRET).expect("a valid signature");
        let text = String::from_utf8(r.body.clone()).expect("utf-8");
        by_question.insert(event.question.question_id.clone(), (event, text));
    }
    let (qu, text) = &by_question["qu"];
    assert_eq!(qu.event_type, "question.answered");
    assert!(text.contains(r#""userId":"alice""#), "{text}");
    let raw: serde_json::Value = serde_json::from_str(text).expect("json");
    assert_eq!(raw["userId"], "alice");
    assert_eq!(raw["question"]["userId"], "alice");
    assert_eq!(qu.user_id.as_deref(), Some("alice"));
    assert_eq!(qu.question.user_id.as_deref(), Some("alice"));
    let (qc, text) = &by_question["qc"];
    assert_eq!(qc.event_type, "question.cancelled");
    assert_eq!(
        (qc.user_id.as_deref(), qc.question.user_id.as_deref()),
        (Some("alice"), Some("alice"))
    );
    assert!(text.contains(r#""userId":"alice""#), "{text}");
    let (qo, text) = &by_question["qo"];
    assert_eq!(qo.event_type, "question.answered");
    assert!(!text.contains("userId"), "{text}");
    assert_eq!(
        (qo.user_id.as_deref(), qo.question.user_id.as_deref()),
        (None, None)
    );
}

#[tokio::test]
async fn answered_expired_and_cancelled_events_arrive_signed_once_each() {
    let dir = tempfile::tempdir().expect("a directory");
    let relay = start_in(dir, fast_webhooks()).await;
    let agent = register(&relay).await;
    let phone = pair(&relay, &agent).await;
    let mut receiver = Receiver::start().await;

    // Questions closed before a webhook is set queue nothing.
    ask(&relay, &agent, "before", &[&phone], 600_000).await;
    cancel(&relay, &agent, "before").await;

    let info = set_webhook(&relay, &agent, &receiver.url()).await;
    assert_eq!(info.url.as_deref(), Some(receiver.url().as_str()));
    let raw = relay.get("/v1/agent/webhook", &agent.bearer).await;
    assert!(
        !raw.body.to_string().contains(SECRET),
        "the secret is never returned"
    );
    let got: WebhookInfo = raw.ok();
    assert_eq!(got, info);

    ask(&relay, &agent, "qa", &[&phone], 600_000).await;
    ask(&relay, &agent, "qc", &[&phone], 600_000).await;
    ask(&relay, &agent, "qe", &[&phone], 1_000).await;
    answer(&relay, &phone, "qa", Answer::Yes)
        .await
        .ok::<DeviceQuestion>();
    cancel(&relay, &agent, "qc").await;
    cancel(&relay, &agent, "qc").await; // a second cancel changes nothing and queues nothing

    let events = eventually(30, "three events", || async {
        let got = receiver.received();
        (got.len() >= 3).then_some(got)
    })
    .await;
    let mut by_question = std::collections::HashMap::new();
    for r in &events {
        let event = verify(r, SECRET).expect("a valid signature");
        assert!(verify(r, "another secret of some length").is_err());
        assert_eq!(event.agent_id, agent.id);
        assert!(event.id.starts_with("evt_"));
        by_question.insert(event.question.question_id.clone(), event);
    }
    let qa = &by_question["qa"];
    assert_eq!(qa.event_type, "question.answered");
    assert_eq!(qa.question.state, QuestionState::Answered);
    assert_eq!(qa.question.answered_by.as_deref(), Some(phone.id.as_str()));
    assert_eq!(qa.question.channel, Some(Channel::Phone));
    assert!(qa.question.answer_envelope.is_some());
    let qc = &by_question["qc"];
    assert_eq!(qc.event_type, "question.cancelled");
    assert_eq!(qc.question.state, QuestionState::Cancelled);
    let qe = &by_question["qe"];
    assert_eq!(qe.event_type, "question.expired");
    assert_eq!(qe.question.state, QuestionState::Expired);
    assert_eq!(qe.question.closed_at, Some(qe.question.expires_at));
    assert!(qe.question.answer_envelope.is_none());

    // The delivery log: one event per question, each delivered on its first attempt. The receiver counts an
    // event when its request arrives, before the relay has read the 200 and recorded it: wait for the record.
    let log = eventually(10, "three deliveries recorded", || async {
        let log = deliveries(&relay, &agent).await;
        log.deliveries
            .iter()
            .all(|d| d.state == "delivered")
            .then_some(log)
    })
    .await;
    assert_eq!(log.deliveries.len(), 3);
    for d in &log.deliveries {
        assert_eq!(d.state, "delivered");
        assert_eq!(d.attempts, 1);
        assert_eq!(d.last_status, Some(200));
        assert!(d.delivered_at.is_some() && d.next_attempt_at.is_none() && d.last_error.is_none());
        assert_eq!(d.event_id, by_question[&d.question_id].id);
    }
    assert!(
        log.deliveries
            .windows(2)
            .all(|w| w[0].created_at >= w[1].created_at)
    );
    // Nothing is sent twice: a few more polls bring nothing new.
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(receiver.received().len(), 3);

    // Removing the webhook: nothing more is queued.
    let cleared: WebhookInfo = relay.delete("/v1/agent/webhook", &agent.bearer).await.ok();
    assert!(cleared.url.is_none());
    let none: WebhookInfo = relay.get("/v1/agent/webhook", &agent.bearer).await.ok();
    assert!(none.url.is_none() && none.updated_at.is_none());
    ask(&relay, &agent, "after", &[&phone], 600_000).await;
    cancel(&relay, &agent, "after").await;
    assert_eq!(deliveries(&relay, &agent).await.deliveries.len(), 3);
    receiver.stop().await;
}

#[tokio::test]
async fn a_receiver_that_fails_or_is_down_gets_the_event_when_it_comes_back() {
    let dir = tempfile::tempdir().expect("a directory");
    let relay = start_in(dir, fast_webhooks()).await;
    let agent = register(&relay).await;
    let phone = pair(&relay, &agent).await;

    // Answers 500 at first.
    let mut receiver = Receiver::start().await;
    receiver.answer_with(500);
    set_webhook(&relay, &agent, &receiver.url()).await;
    ask(&relay, &agent, "q500", &[&phone], 600_000).await;
    answer(&relay, &phone, "q500", Answer::No)
        .await
        .ok::<DeviceQuestion>();
    let failing = delivery_where(&relay, &agent, "q500", "two failed attempts", |d| d.attempts >= 2).await;
    assert_eq!(failing.state, "pending");
    assert_eq!(failing.last_status, Some(500));
    assert!(failing.last_error.is_some() && failing.next_attempt_at.is_some());
    receiver.answer_with(200);
    let done = delivery_where(&relay, &agent, "q500", "the delivery", |d| d.state == "delivered").await;
    assert_eq!(done.last_status, Some(200));
    assert!(done.attempts >= 3);
    let got = receiver.received();
    assert_eq!(got.len() as u32, done.attempts, "one POST per attempt");
    // Every attempt carries the same event and body, each validly signed.
    for r in &got {
        verify(r, SECRET).expect("valid");
        assert_eq!(r.event_id, done.event_id);
        assert_eq!(r.body, got[0].body);
    }
    receiver.stop().await;

    // Down: nobody listens on the port.
    let addr = free_port().await;
    set_webhook(&relay, &agent, &format!("http://{addr}/hook")).await;
    ask(&relay, &agent, "qdown", &[&phone], 600_000).await;
    cancel(&relay, &agent, "qdown").await;
    let down = delivery_where(&relay, &agent, "qdown", "failed attempts", |d| d.attempts >= 2).await;
    assert_eq!(down.state, "pending");
    assert!(down.last_status.is_none());
    assert!(down.last_error.as_deref().is_some_and(|e| !e.is_empty()));
    // Back up on the same port.
    let mut back = Receiver::start_on(addr).await;
    let done = delivery_where(&relay, &agent, "qdown", "the delivery", |d| {
        d.state == "delivered"
    })
    .await;
    let got = back.received();
    assert_eq!(got.len(), 1);
    let event = verify(&got[0], SECRET).expect("valid");
    assert_eq!(event.id, done.event_id);
    assert_eq!(event.event_type, "question.cancelled");
    back.stop().await;
}

#[tokio::test]
async fn an_event_is_failed_after_its_last_attempt_or_when_the_webhook_is_removed() {
    let dir = tempfile::tempdir().expect("a directory");
    let settings = WebhookSettings {
        max_attempts: 3,
        ..fast_webhooks()
    };
    let relay = start_in(dir, settings).await;
    let agent = register(&relay).await;
    let phone = pair(&relay, &agent).await;
    let mut receiver = Receiver::start().await;
    receiver.answer_with(503);
    set_webhook(&relay, &agent, &receiver.url()).await;

    ask(&relay, &agent, "doomed", &[&phone], 600_000).await;
    cancel(&relay, &agent, "doomed").await;
    let failed = delivery_where(&relay, &agent, "doomed", "failure", |d| d.state == "failed").await;
    assert_eq!(failed.attempts, 3);
    assert_eq!(failed.last_status, Some(503));
    assert!(failed.next_attempt_at.is_none() && failed.delivered_at.is_none());
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(receiver.received().len(), 3, "no attempt after the last");
    receiver.stop().await;

    // A pending event whose webhook is removed is failed, not sent anywhere.
    let addr = free_port().await;
    set_webhook(&relay, &agent, &format!("http://{addr}/hook")).await;
    ask(&relay, &agent, "orphan", &[&phone], 600_000).await;
    cancel(&relay, &agent, "orphan").await;
    delivery_where(&relay, &agent, "orphan", "an attempt", |d| d.attempts >= 1).await;
    relay
        .delete("/v1/agent/webhook", &agent.bearer)
        .await
        .ok::<WebhookInfo>();
    let orphan = delivery_where(&relay, &agent, "orphan", "failure", |d| d.state == "failed").await;
    assert!(
        orphan
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("removed"))
    );
}

#[tokio::test]
async fn after_a_restart_pending_events_are_sent_and_delivered_ones_never_again() {
    let dir = tempfile::tempdir().expect("a directory");
    let relay = start_in(dir, fast_webhooks()).await;
    let agent = register(&relay).await;
    let phone = pair(&relay, &agent).await;
    let mut receiver = Receiver::start().await;
    set_webhook(&relay, &agent, &receiver.url()).await;

    // Delivered before the restart.
    ask(&relay, &agent, "early", &[&phone], 600_000).await;
    answer(&relay, &phone, "early", Answer::Yes)
        .await
        .ok::<DeviceQuestion>();
    let early = delivery_where(&relay, &agent, "early", "the delivery", |d| {
        d.state == "delivered"
    })
    .await;
    assert_eq!(receiver.received().len(), 1);

    // The receiver goes down; an event fails, another question will expire while the relay is down.
    let addr = receiver.addr;
    receiver.stop().await;
    ask(&relay, &agent, "late", &[&phone], 600_000).await;
    cancel(&relay, &agent, "late").await;
    delivery_where(&relay, &agent, "late", "a failed attempt", |d| d.attempts >= 1).await;
    let (_, expiring) = ask(&relay, &agent, "lapsed", &[&phone], 1_000).await;
    let dir = relay.stop().await;
    assert!(crate::common::on_postgres() || db_path(&dir).exists());
    eventually(30, "the expiry to pass", || async {
        (Timestamp::now() > expiring.expires_at).then_some(())
    })
    .await;

    // Receiver back on its port, relay reopened on the same file.
    let mut receiver = Receiver::start_on(addr).await;
    let relay = start_in(dir, fast_webhooks()).await;
    let got = eventually(30, "the pending events", || async {
        let got = receiver.received();
        (got.len() >= 2).then_some(got)
    })
    .await;
    let mut types: Vec<(String, String)> = got
        .iter()
        .map(|r| {
            let e = verify(r, SECRET).expect("valid");
            (e.question.question_id, e.event_type)
        })
        .collect();
    types.sort();
    assert_eq!(
        types,
        [
            ("lapsed".to_string(), "question.expired".to_string()),
            ("late".to_string(), "question.cancelled".to_string()),
        ]
    );
    tokio::time::sleep(Duration::from_millis(800)).await;
    let got = receiver.received();
    assert_eq!(got.len(), 2, "each pending event once");
    assert!(
        got.iter().all(|r| r.event_id != early.event_id),
        "a delivered event is never sent again"
    );

    let log = deliveries(&relay, &agent).await;
    assert_eq!(log.deliveries.len(), 3);
    assert!(log.deliveries.iter().all(|d| d.state == "delivered"));
    let early_after = log
        .deliveries
        .iter()
        .find(|d| d.event_id == early.event_id)
        .expect("still logged");
    assert_eq!(early_after.attempts, 1);
    assert_eq!(early_after.delivered_at, early.delivered_at);
    let late = log
        .deliveries
        .iter()
        .find(|d| d.question_id == "late")
        .expect("logged");
    assert!(late.attempts >= 2);
    receiver.stop().await;
}

/// The bytes of the database file and of its WAL.
fn database_bytes(dir: &tempfile::TempDir) -> Vec<u8> {
    let db = db_path(dir);
    let mut bytes = std::fs::read(&db).expect("the database file");
    let mut wal = db.into_os_string();
    wal.push("-wal");
    if let Ok(more) = std::fs::read(wal) {
        bytes.extend(more);
    }
    bytes
}

fn holds(bytes: &[u8], text: &str) -> bool {
    bytes.windows(text.len()).any(|w| w == text.as_bytes())
}

#[tokio::test]
async fn the_secret_is_sealed_in_the_database_and_deliveries_are_still_signed_with_it() {
    if crate::common::sqlite_only("reads the SQLite file for the secret") {
        return;
    }
    let dir = tempfile::tempdir().expect("a directory");
    let relay = start_in(dir, fast_webhooks()).await;
    let agent = register(&relay).await;
    let phone = pair(&relay, &agent).await;
    let mut receiver = Receiver::start().await;
    set_webhook(&relay, &agent, &receiver.url()).await;
    ask(&relay, &agent, "sealed", &[&phone], 600_000).await;
    answer(&relay, &phone, "sealed", Answer::Yes)
        .await
        .ok::<DeviceQuestion>();
    delivery_where(&relay, &agent, "sealed", "the delivery", |d| {
        d.state == "delivered"
    })
    .await;
    let got = receiver.received();
    assert_eq!(got.len(), 1);
    verify(&got[0], SECRET).expect("signed with the secret");

    // Neither the database file nor its WAL holds the secret; the key is in a file of its own, 0600.
    let bytes = database_bytes(&relay.dir);
    assert!(holds(&bytes, &agent.id), "the search does find what is in clear");
    assert!(
        !holds(&bytes, SECRET),
        "the webhook secret is not in the database files"
    );
    let key = relay.dir.path().join("webhook.key");
    let text = std::fs::read_to_string(&key).expect("webhook.key beside the database");
    assert_eq!(text.trim().len(), 64);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&key).expect("exists").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
    // Still not after a restart, and the secret still signs.
    let dir = relay.stop().await;
    assert!(!holds(&database_bytes(&dir), SECRET));
    let relay = start_in(dir, fast_webhooks()).await;
    ask(&relay, &agent, "after", &[&phone], 600_000).await;
    cancel(&relay, &agent, "after").await;
    delivery_where(&relay, &agent, "after", "the delivery", |d| {
        d.state == "delivered"
    })
    .await;
    let got = receiver.received();
    assert_eq!(got.len(), 2);
    verify(&got[1], SECRET).expect("signed with the same secret after a restart");
    receiver.stop().await;
}

#[tokio::test]
async fn without_its_webhook_key_the_relay_cannot_sign_until_the_webhook_is_set_again() {
    let dir = tempfile::tempdir().expect("a directory");
    let relay = start_in(dir, fast_webhooks()).await;
    let agent = register(&relay).await;
    let phone = pair(&relay, &agent).await;
    let mut receiver = Receiver::start().await;
    set_webhook(&relay, &agent, &receiver.url()).await;
    let dir = relay.stop().await;

    // The database alone (as in a backup restored without webhook.key): the relay starts with a new key.
    std::fs::remove_file(dir.path().join("webhook.key")).expect("the key goes");
    let relay = start_in(dir, fast_webhooks()).await;
    let info: WebhookInfo = relay.get("/v1/agent/webhook", &agent.bearer).await.ok();
    assert_eq!(info.url.as_deref(), Some(receiver.url().as_str()));
    ask(&relay, &agent, "orphaned", &[&phone], 600_000).await;
    cancel(&relay, &agent, "orphaned").await;
    let stuck = delivery_where(&relay, &agent, "orphaned", "a failed attempt", |d| {
        d.attempts >= 1
    })
    .await;
    assert_eq!(
        stuck.state, "pending",
        "retried, so a webhook set again in time gets it"
    );
    assert!(
        stuck
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("webhook.key") && e.contains("set the webhook again")),
        "{stuck:?}"
    );
    assert!(
        receiver.received().is_empty(),
        "nothing unsigned or wrongly signed is sent"
    );

    // Setting the webhook again: the pending event goes out, signed.
    set_webhook(&relay, &agent, &receiver.url()).await;
    delivery_where(&relay, &agent, "orphaned", "the delivery", |d| {
        d.state == "delivered"
    })
    .await;
    let got = receiver.received();
    assert_eq!(got.len(), 1);
    verify(&got[0], SECRET).expect("signed with the secret set again");
    receiver.stop().await;
}

/// A receiver that accepts connections, reads what is sent and never answers; it counts the connections it
/// holds open.
struct Silent {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    most_open: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl Silent {
    async fn start() -> Silent {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("the silent receiver's port");
        let addr = listener.local_addr().expect("bound");
        let accepted = Arc::new(AtomicUsize::new(0));
        let open = Arc::new(AtomicUsize::new(0));
        let most_open = Arc::new(AtomicUsize::new(0));
        let (a, o, m) = (accepted.clone(), open.clone(), most_open.clone());
        let task = tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                a.fetch_add(1, Ordering::SeqCst);
                let now_open = o.fetch_add(1, Ordering::SeqCst) + 1;
                m.fetch_max(now_open, Ordering::SeqCst);
                let o = o.clone();
                tokio::spawn(async move {
                    // Read until the relay gives up and closes; never write a byte.
                    let mut buf = [0u8; 4096];
                    while matches!(socket.read(&mut buf).await, Ok(n) if n > 0) {}
                    o.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        Silent {
            addr,
            accepted,
            most_open,
            task,
        }
    }

    fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }
}

impl Drop for Silent {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn deliveries_up_to(relay: &TestRelay, agent: &Agent, limit: u32) -> DeliveryLog {
    relay
        .get(
            &format!("/v1/agent/webhook/deliveries?limit={limit}"),
            &agent.bearer,
        )
        .await
        .ok()
}

#[tokio::test]
async fn a_receiver_that_never_answers_delays_no_other_agents_events() {
    let dir = tempfile::tempdir().expect("a directory");
    let timeout = Duration::from_secs(2);
    let relay = start_in(
        dir,
        WebhookSettings {
            timeout,
            ..fast_webhooks()
        },
    )
    .await;
    let (a, b) = (register(&relay).await, register(&relay).await);
    let (phone_a, phone_b) = (pair(&relay, &a).await, pair(&relay, &b).await);
    let silent = Silent::start().await;
    let mut receiver = Receiver::start().await;
    set_webhook(&relay, &b, &silent.url()).await;
    set_webhook(&relay, &a, &receiver.url()).await;

    // B: 48 events for a receiver that accepts and never answers.
    const BACKLOG: usize = 48;
    for i in 0..BACKLOG {
        ask(&relay, &b, &format!("b{i}"), &[&phone_b], 600_000).await;
    }
    for i in 0..BACKLOG {
        cancel(&relay, &b, &format!("b{i}")).await;
    }
    eventually(30, "an attempt hanging at B's receiver", || async {
        (silent.accepted.load(Ordering::SeqCst) >= 1).then_some(())
    })
    .await;

    // A: three events, queued while B's receiver hangs.
    for id in ["a1", "a2", "a3"] {
        ask(&relay, &a, id, &[&phone_a], 600_000).await;
    }
    let queued = Instant::now();
    for id in ["a1", "a2", "a3"] {
        cancel(&relay, &a, id).await;
    }
    let got = eventually(30, "A's three events", || async {
        let got = receiver.received();
        (got.len() >= 3).then_some(got)
    })
    .await;
    let waited = got[2].at.duration_since(queued);
    println!("A's three events arrived {waited:?} after the first was queued, B's receiver hanging");
    assert!(
        waited < timeout,
        "A's events took {waited:?}, more than one attempt time ({timeout:?})"
    );
    // One at a time per agent: A's events arrive in the order they were queued.
    let order: Vec<String> = got
        .iter()
        .map(|r| verify(r, SECRET).expect("valid").question.question_id)
        .collect();
    assert_eq!(order, ["a1", "a2", "a3"]);

    // Meanwhile B's backlog is still there, and its receiver never had more than one request open.
    let log = deliveries_up_to(&relay, &b, 200).await;
    let pending = log.deliveries.iter().filter(|d| d.state == "pending").count();
    assert!(
        pending >= BACKLOG - 1,
        "B still has its backlog ({pending} pending)"
    );
    assert!(log.deliveries.iter().all(|d| d.state != "delivered"));
    assert_eq!(
        silent.most_open.load(Ordering::SeqCst),
        1,
        "one attempt in flight per agent"
    );
    receiver.stop().await;
}

#[tokio::test]
async fn a_full_outbox_drops_the_oldest_events_and_delivers_the_newest() {
    let dir = tempfile::tempdir().expect("a directory");
    let config = Config {
        open_registration: true,
        quotas: Quotas {
            max_pending_events: 5,
            ..Quotas::default()
        },
        ..Config::new(db_path(&dir))
    };
    let relay = start_with_settings(config, dir, fast_webhooks()).await;
    let agent = register(&relay).await;
    let phone = pair(&relay, &agent).await;
    let mut receiver = Receiver::start().await;
    receiver.answer_with(500);
    set_webhook(&relay, &agent, &receiver.url()).await;

    let ids: Vec<String> = (1..=8).map(|i| format!("q{i}")).collect();
    for id in &ids {
        ask(&relay, &agent, id, &[&phone], 600_000).await;
    }
    for id in &ids {
        cancel(&relay, &agent, id).await;
    }
    let log = deliveries(&relay, &agent).await;
    assert_eq!(log.deliveries.len(), 8);
    let state_of = |log: &DeliveryLog, id: &str| {
        log.deliveries
            .iter()
            .find(|d| d.question_id == id)
            .cloned()
            .expect("logged")
    };
    for id in &ids[..3] {
        let d = state_of(&log, id);
        assert_eq!(d.state, "failed", "{id} is dropped: {d:?}");
        assert!(d.next_attempt_at.is_none() && d.delivered_at.is_none());
        let error = d.last_error.expect("an error");
        assert!(
            error.starts_with("dropped:") && error.contains("outbox is full") && error.contains('5'),
            "{error}"
        );
    }
    for id in &ids[3..] {
        assert_eq!(state_of(&log, id).state, "pending", "{id}");
    }

    // The receiver comes back: the five kept are delivered, the three dropped never.
    delivery_where(&relay, &agent, "q8", "a failed attempt", |d| d.attempts >= 1).await;
    receiver.answer_with(200);
    for id in &ids[3..] {
        delivery_where(&relay, &agent, id, "the delivery", |d| d.state == "delivered").await;
    }
    tokio::time::sleep(Duration::from_millis(800)).await;
    let log = deliveries(&relay, &agent).await;
    for id in &ids[..3] {
        let d = state_of(&log, id);
        assert_eq!(d.state, "failed", "{id}");
        assert!(d.last_error.is_some_and(|e| e.starts_with("dropped:")));
    }
    let delivered: Vec<String> = receiver
        .received()
        .iter()
        .filter_map(|r| {
            let event = verify(r, SECRET).expect("valid");
            let d = state_of(&log, &event.question.question_id);
            (d.state == "delivered").then_some(event.question.question_id)
        })
        .collect();
    for id in &ids[3..] {
        assert!(delivered.contains(id), "{id} reached the receiver");
    }
    receiver.stop().await;
}
