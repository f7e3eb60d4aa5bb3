//! Web Push from the relay, end to end: a real relay, the real client asking and a paired device, and a local
//! push service (an HTTP server on 127.0.0.1 standing in for a browser vendor's). The pushes are decrypted
//! here with an RFC 8291 implementation written in this file on `p256` and `ring` (not the core's), and their
//! VAPID signatures checked with `ring` against the key the relay serves.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use pacerelle_client::core::question::{QuestionPayload, question_aad};
use pacerelle_client::core::{envelope, keys::ContentKey};
use pacerelle_client::{
    AgentClient, Answer, DeviceClient, QuestionState, agent::PairingOptions, agent::QuestionRequest,
};
use pacerelle_relay::{Config, PushSettings, Relay};
use ring::rand::SecureRandom;
use tokio::sync::oneshot;

const CONTACT: &str = "mailto:ops@example.org";
const SECRET_TEXT: &str = "Deploy canary-7 to the production cluster?";

// ------------------------------------------------------------------------------------------- the relay

struct Served {
    url: String,
    port: u16,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

fn fast_push() -> PushSettings {
    PushSettings {
        timeout: Duration::from_secs(3),
        backoff_base: Duration::from_millis(100),
        backoff_max: Duration::from_millis(300),
        poll_every: Duration::from_millis(200),
        ..PushSettings::default()
    }
}

async fn serve(dir: &std::path::Path, port: u16, allow_private: bool) -> Served {
    serve_with(dir, port, allow_private, fast_push()).await
}

async fn serve_with(dir: &std::path::Path, port: u16, allow_private: bool, push: PushSettings) -> Served {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let relay = Relay::open(Config {
        open_registration: true,
        push_contact: Some(CONTACT.into()),
        allow_private_push_endpoints: allow_private,
        push,
        ..Config::new(dir.join("pacerelle.db"))
    })
    .await
    .expect("the relay opens");
    let listener = pacerelle_test_support::bind_on(port).await;
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(relay.serve(listener, async move {
        let _ = stopped.await;
    }));
    Served {
        url: format!("http://{addr}"),
        port: addr.port(),
        stop,
        task,
    }
}

impl Served {
    async fn stop(self) {
        let _ = self.stop.send(());
        self.task.await.expect("join").expect("serve");
    }
}

async fn agent_and_device(url: &str) -> (AgentClient, DeviceClient) {
    let agent = AgentClient::register(url, "push agent", None)
        .await
        .expect("register")
        .with_home(Some(&pacerelle_test_support::home()));
    let link = agent
        .create_pairing(PairingOptions::default())
        .await
        .expect("pairing");
    let device = DeviceClient::join(&link.link, "phone").await.expect("join");
    (agent, device)
}

// ------------------------------------------------------------------------------------------- the push service

#[derive(Debug, Clone)]
struct Received {
    headers: HeaderMap,
    body: Vec<u8>,
    at: Instant,
}

#[derive(Default)]
struct ServiceState {
    received: Mutex<Vec<Received>>,
    /// Answers to give, in order (status, Retry-After); 201 once empty.
    answers: Mutex<VecDeque<(u16, Option<&'static str>)>>,
}

struct PushService {
    state: Arc<ServiceState>,
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
}

impl PushService {
    async fn start_on(port: u16, state: Arc<ServiceState>) -> PushService {
        let listener = pacerelle_test_support::bind_on(port).await;
        let addr = listener.local_addr().unwrap();
        let shared = state.clone();
        let app = axum::Router::new()
            // A push service that never answers.
            .route(
                "/hang/{id}",
                axum::routing::post(|| async {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    StatusCode::CREATED
                }),
            )
            .route(
                "/push/{id}",
                axum::routing::post(move |headers: HeaderMap, body: Bytes| {
                    let state = shared.clone();
                    async move {
                        state.received.lock().unwrap().push(Received {
                            headers,
                            body: body.to_vec(),
                            at: Instant::now(),
                        });
                        let (status, retry_after) =
                            state.answers.lock().unwrap().pop_front().unwrap_or((201, None));
                        let mut headers = HeaderMap::new();
                        if let Some(r) = retry_after {
                            headers.insert("retry-after", r.parse().unwrap());
                        }
                        (StatusCode::from_u16(status).unwrap(), headers)
                    }
                }),
            );
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await
        });
        PushService {
            state,
            addr,
            stop: Some(stop),
        }
    }

    async fn start() -> PushService {
        Self::start_on(0, Arc::default()).await
    }

    fn endpoint(&self, id: &str) -> String {
        format!("http://{}/push/{id}", self.addr)
    }

    fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn received(&self) -> Vec<Received> {
        self.state.received.lock().unwrap().clone()
    }

    /// Waits until `n` pushes have arrived.
    async fn wait_for(&self, n: usize) -> Vec<Received> {
        for _ in 0..300 {
            let got = self.received();
            if got.len() >= n {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{n} pushes did not arrive (got {})", self.received().len());
    }

    fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

// ------------------------------------------------------------------------------------------- RFC 8291, independently

/// A subscription's keys as a browser makes them.
struct Subscription {
    secret: p256::SecretKey,
    public: Vec<u8>,
    auth: [u8; 16],
}

fn subscription() -> Subscription {
    use p256::elliptic_curve::sec1::ToEncodedPoint;
    let rng = ring::rand::SystemRandom::new();
    let secret = loop {
        let mut bytes = [0u8; 32];
        rng.fill(&mut bytes).unwrap();
        if let Ok(s) = p256::SecretKey::from_slice(&bytes) {
            break s;
        }
    };
    let mut auth = [0u8; 16];
    rng.fill(&mut auth).unwrap();
    let public = secret.public_key().to_encoded_point(false).as_bytes().to_vec();
    Subscription { secret, public, auth }
}

struct Len(usize);
impl ring::hkdf::KeyType for Len {
    fn len(&self) -> usize {
        self.0
    }
}

fn hkdf(salt: &[u8], ikm: &[u8], info: &[&[u8]], len: usize) -> Vec<u8> {
    let prk = ring::hkdf::Salt::new(ring::hkdf::HKDF_SHA256, salt).extract(ikm);
    let mut out = vec![0; len];
    prk.expand(info, Len(len)).unwrap().fill(&mut out).unwrap();
    out
}

/// RFC 8291 §3.4 and RFC 8188 §2, one record.
fn decrypt(sub: &Subscription, body: &[u8]) -> Vec<u8> {
    assert!(body.len() > 86 + 17, "a header and a record");
    let (salt, rest) = body.split_at(16);
    let rs = u32::from_be_bytes(rest[..4].try_into().unwrap());
    assert_eq!(rs, 4096);
    assert_eq!(rest[4], 65);
    let as_public = &rest[5..70];
    let record = &rest[70..];
    let point = p256::PublicKey::from_sec1_bytes(as_public).expect("the sender's key is a point");
    let shared = p256::ecdh::diffie_hellman(sub.secret.to_nonzero_scalar(), point.as_affine());
    let ecdh: &[u8] = shared.raw_secret_bytes();
    let ikm = hkdf(&sub.auth, ecdh, &[b"WebPush: info\0", &sub.public, as_public], 32);
    let cek = hkdf(salt, &ikm, &[b"Content-Encoding: aes128gcm\0"], 16);
    let nonce = hkdf(salt, &ikm, &[b"Content-Encoding: nonce\0"], 12);
    let key =
        ring::aead::LessSafeKey::new(ring::aead::UnboundKey::new(&ring::aead::AES_128_GCM, &cek).unwrap());
    let mut buf = record.to_vec();
    let plain = key
        .open_in_place(
            ring::aead::Nonce::try_assume_unique_for_key(&nonce).unwrap(),
            ring::aead::Aad::empty(),
            &mut buf,
        )
        .expect("decrypts with the subscription's keys");
    let end = plain.iter().rposition(|&b| b != 0).unwrap();
    assert_eq!(plain[end], 2, "the last record's delimiter");
    plain[..end].to_vec()
}

fn b64(bytes: &[u8]) -> String {
    data_encoding::BASE64URL_NOPAD.encode(bytes)
}

fn unb64(text: &str) -> Vec<u8> {
    data_encoding::BASE64URL_NOPAD
        .decode(text.as_bytes())
        .expect("base64url")
}

/// Checks the VAPID header against the relay's key; returns the JWT's claims.
fn verify_vapid(headers: &HeaderMap, relay_key: &str) -> serde_json::Value {
    let value = headers
        .get("authorization")
        .expect("Authorization")
        .to_str()
        .unwrap();
    let rest = value.strip_prefix("vapid t=").expect("vapid t=…");
    let (jwt, k) = rest.split_once(", k=").expect("…, k=…");
    assert_eq!(k, relay_key, "k is the relay's public key");
    let (input, signature) = jwt.rsplit_once('.').unwrap();
    ring::signature::UnparsedPublicKey::new(&ring::signature::ECDSA_P256_SHA256_FIXED, unb64(k))
        .verify(input.as_bytes(), &unb64(signature))
        .expect("the JWT verifies with the relay's key");
    let (header, claims) = input.split_once('.').unwrap();
    let header: serde_json::Value = serde_json::from_slice(&unb64(header)).unwrap();
    assert_eq!(header["alg"], "ES256");
    serde_json::from_slice(&unb64(claims)).unwrap()
}

fn topic(question_id: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, question_id.as_bytes());
    b64(digest.as_ref())[..32].to_string()
}

async fn relay_key(url: &str) -> String {
    let key: serde_json::Value = reqwest::get(format!("{url}/v1/push/key"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let key = key["publicKey"].as_str().unwrap().to_string();
    assert_eq!(unb64(&key).len(), 65);
    key
}

async fn register(url: &str, device: &DeviceClient, endpoint: &str, sub: &Subscription) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{url}/v1/device/push"))
        .bearer_auth(&device.credentials().device_token)
        .json(&serde_json::json!({
            "endpoint": endpoint,
            "expirationTime": null,
            "keys": {"p256dh": b64(&sub.public), "auth": b64(&sub.auth)},
        }))
        .send()
        .await
        .unwrap()
}

async fn subscriptions_in(dir: &std::path::Path) -> i64 {
    use sqlx::ConnectOptions;
    let mut conn = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(dir.join("pacerelle.db"))
        .read_only(true)
        .connect()
        .await
        .unwrap();
    sqlx::query_scalar("SELECT COUNT(*) FROM push_subscriptions")
        .fetch_one(&mut conn)
        .await
        .unwrap()
}

async fn ask(agent: &AgentClient, text: &str) -> String {
    agent
        .ask_user(QuestionRequest::yes_no(text).expires_in(Duration::from_secs(600)))
        .await
        .expect("asked")
        .question_id
}

// ------------------------------------------------------------------------------------------- tests

#[tokio::test]
async fn a_question_is_pushed_encrypted_and_signed_and_its_envelope_opens_with_the_device_key() {
    let dir = tempfile::tempdir().unwrap();
    let relay = serve(dir.path(), 0, true).await;
    let service = PushService::start().await;
    let (agent, device) = agent_and_device(&relay.url).await;
    let key = relay_key(&relay.url).await;
    let sub = subscription();
    let resp = register(&relay.url, &device, &service.endpoint("a"), &sub).await;
    assert_eq!(resp.status(), 201);
    let again = register(&relay.url, &device, &service.endpoint("a"), &sub).await;
    assert_eq!(again.status(), 200, "the same endpoint again replaces its keys");

    let question_id = ask(&agent, SECRET_TEXT).await;
    let got = service.wait_for(1).await;
    let push = &got[0];
    assert_eq!(push.headers["content-encoding"], "aes128gcm");
    assert_eq!(push.headers["urgency"], "high");
    assert_eq!(push.headers["topic"].to_str().unwrap(), topic(&question_id));
    let ttl: u64 = push.headers["ttl"].to_str().unwrap().parse().unwrap();
    assert!((1..=600).contains(&ttl), "TTL up to the expiry: {ttl}");
    assert!(push.body.len() <= 4096);
    let claims = verify_vapid(&push.headers, &key);
    assert_eq!(claims["aud"], service.origin());
    assert_eq!(claims["sub"], CONTACT);
    let now = pacerelle_client::Timestamp::now().millis() / 1000;
    let exp = claims["exp"].as_i64().unwrap();
    assert!(exp > now && exp <= now + 24 * 3600, "exp within 24 h");

    let plain = decrypt(&sub, &push.body);
    let text = String::from_utf8(plain).unwrap();
    assert!(
        !text.contains("canary-7"),
        "no plaintext of the question in the payload"
    );
    let payload: serde_json::Value = serde_json::from_str(&text).unwrap();
    let creds = device.credentials();
    assert_eq!(payload["v"], 1);
    assert_eq!(
        payload["relay"],
        relay.url.as_str(),
        "without a public URL, the address it serves on"
    );
    assert_eq!(payload["kind"], "question");
    assert_eq!(payload["id"], question_id.as_str());
    assert_eq!(payload["agentId"], creds.agent_id.as_str());
    assert_eq!(payload["deviceId"], creds.device_id.as_str());
    assert_eq!(payload["item"]["kind"], "question");
    assert_eq!(payload["item"]["cursor"], payload["cursor"]);
    let device_key = ContentKey::from_bytes(unb64(&creds.device_key).try_into().unwrap());
    let opened = envelope::open(
        &device_key,
        &question_aad(&creds.agent_id, &creds.device_id, &question_id),
        payload["item"]["envelope"].as_str().unwrap(),
    )
    .expect("the envelope opens with the device key");
    let question: QuestionPayload = serde_json::from_slice(&opened).unwrap();
    assert_eq!(question.question, SECRET_TEXT);

    // Answered: an `update` push with the question's Topic replaces it.
    device.questions(Some(QuestionState::Pending)).await.unwrap();
    device.answer(&question_id, Answer::Yes).await.expect("answered");
    let got = service.wait_for(2).await;
    let update = &got[1];
    assert_eq!(update.headers["topic"].to_str().unwrap(), topic(&question_id));
    assert_eq!(update.headers["urgency"], "high");
    assert_eq!(update.headers["ttl"], "3600");
    let payload: serde_json::Value = serde_json::from_slice(&decrypt(&sub, &update.body)).unwrap();
    assert_eq!(payload["kind"], "update");
    assert_eq!(payload["item"]["kind"], "update");
    assert_eq!(payload["item"]["subjectId"], question_id.as_str());
    assert_eq!(payload["item"]["state"], "answered");

    // A notification: normal urgency, a day to live, no Topic.
    agent
        .notify("build finished", None, pacerelle_client::Level::Info)
        .await
        .unwrap();
    let got = service.wait_for(3).await;
    assert_eq!(got[2].headers["urgency"], "normal");
    assert_eq!(got[2].headers["ttl"], "86400");
    assert!(got[2].headers.get("topic").is_none());
    let payload: serde_json::Value = serde_json::from_slice(&decrypt(&sub, &got[2].body)).unwrap();
    assert_eq!(payload["kind"], "notification");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(service.received().len(), 3, "each push once");
    relay.stop().await;
}

#[tokio::test]
async fn a_push_to_a_receiver_that_is_down_arrives_once_when_it_is_back_across_a_relay_restart() {
    let dir = tempfile::tempdir().unwrap();
    let relay = serve(dir.path(), 0, true).await;
    // A port with nothing listening: every attempt fails to connect.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let endpoint = format!("http://127.0.0.1:{port}/push/down");
    let (agent, device) = agent_and_device(&relay.url).await;
    let sub = subscription();
    assert_eq!(register(&relay.url, &device, &endpoint, &sub).await.status(), 201);
    let question_id = ask(&agent, SECRET_TEXT).await;
    // A few attempts fail meanwhile.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let relay_port = relay.port;
    relay.stop().await;

    let service = PushService::start_on(port, Arc::default()).await;
    let relay = serve(dir.path(), relay_port, true).await;
    let got = service.wait_for(1).await;
    let payload: serde_json::Value = serde_json::from_slice(&decrypt(&sub, &got[0].body)).unwrap();
    assert_eq!(payload["id"], question_id.as_str());
    tokio::time::sleep(Duration::from_secs(1)).await;
    relay.stop().await;
    // Once more across another restart: delivered pushes are never sent again.
    let relay = serve(dir.path(), relay_port, true).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(service.received().len(), 1, "the push arrived once");
    relay.stop().await;
}

#[tokio::test]
async fn gone_removes_the_subscription_and_retry_after_is_honoured() {
    let dir = tempfile::tempdir().unwrap();
    let relay = serve(dir.path(), 0, true).await;
    let service = PushService::start().await;
    let (agent, device) = agent_and_device(&relay.url).await;
    let sub = subscription();

    // 429 with Retry-After: 2, then accepted: the second attempt waits 2 s, not the 100 ms backoff.
    service.state.answers.lock().unwrap().push_back((429, Some("2")));
    assert_eq!(
        register(&relay.url, &device, &service.endpoint("r"), &sub)
            .await
            .status(),
        201
    );
    ask(&agent, "first?").await;
    let got = service.wait_for(2).await;
    let waited = got[1].at - got[0].at;
    assert!(waited >= Duration::from_millis(1900), "waited {waited:?}");
    // A 503 with Retry-After too.
    service.state.answers.lock().unwrap().push_back((503, Some("1")));
    ask(&agent, "second?").await;
    let got = service.wait_for(4).await;
    assert!(got[3].at - got[2].at >= Duration::from_millis(900));
    assert_eq!(subscriptions_in(dir.path()).await, 1);

    // 410: the subscription is deleted, and nothing more is sent to it.
    service.state.answers.lock().unwrap().push_back((410, None));
    ask(&agent, "third?").await;
    service.wait_for(5).await;
    for _ in 0..100 {
        if subscriptions_in(dir.path()).await == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        subscriptions_in(dir.path()).await,
        0,
        "410 removed the subscription"
    );
    ask(&agent, "fourth?").await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(service.received().len(), 5);
    relay.stop().await;
}

#[tokio::test]
async fn revoking_a_device_drops_its_subscriptions() {
    let dir = tempfile::tempdir().unwrap();
    let relay = serve(dir.path(), 0, true).await;
    let mut service = PushService::start().await;
    let (agent, device) = agent_and_device(&relay.url).await;
    for i in 0..3 {
        let sub = subscription();
        assert_eq!(
            register(&relay.url, &device, &service.endpoint(&i.to_string()), &sub)
                .await
                .status(),
            201
        );
    }
    assert_eq!(subscriptions_in(dir.path()).await, 3);
    agent
        .revoke_device(&device.credentials().device_id)
        .await
        .unwrap();
    assert_eq!(subscriptions_in(dir.path()).await, 0);
    let refused = register(&relay.url, &device, &service.endpoint("x"), &subscription()).await;
    assert_eq!(refused.status(), 403);
    let body: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(body["code"], "device_revoked");
    service.stop();
    relay.stop().await;
}

#[tokio::test]
async fn bad_and_forbidden_subscriptions_are_refused_with_their_codes() {
    let dir = tempfile::tempdir().unwrap();
    let relay = serve(dir.path(), 0, false).await;
    let (_agent, device) = agent_and_device(&relay.url).await;
    let sub = subscription();
    for endpoint in [
        "http://push.example.com/x",
        "http://127.0.0.1:9/x",
        "https://127.0.0.1/x",
        "https://10.1.2.3/x",
        "https://192.168.1.10/x",
        "https://169.254.169.254/latest",
        "https://[::1]/x",
        "https://[fd00::1]/x",
        "https://localhost/x",
    ] {
        let resp = register(&relay.url, &device, endpoint, &sub).await;
        assert_eq!(resp.status(), 400, "{endpoint}");
        let body: serde_json::Value = resp.json().await.unwrap();
        assert_eq!(body["code"], "push_endpoint_forbidden", "{endpoint}");
    }
    let client = reqwest::Client::new();
    let post = |body: serde_json::Value| {
        client
            .post(format!("{}/v1/device/push", relay.url))
            .bearer_auth(&device.credentials().device_token)
            .json(&body)
            .send()
    };
    let good_key = b64(&sub.public);
    let good_auth = b64(&sub.auth);
    let mut not_a_point = sub.public.clone();
    not_a_point[40] ^= 1;
    for (what, body) in [
        (
            "not a URL",
            serde_json::json!({"endpoint": "push", "keys": {"p256dh": good_key, "auth": good_auth}}),
        ),
        (
            "ftp",
            serde_json::json!({"endpoint": "ftp://a.example/x", "keys": {"p256dh": good_key, "auth": good_auth}}),
        ),
        (
            "short key",
            serde_json::json!({"endpoint": "https://a.example/x", "keys": {"p256dh": b64(&sub.public[..64]), "auth": good_auth}}),
        ),
        (
            "off the curve",
            serde_json::json!({"endpoint": "https://a.example/x", "keys": {"p256dh": b64(&not_a_point), "auth": good_auth}}),
        ),
        (
            "short auth",
            serde_json::json!({"endpoint": "https://a.example/x", "keys": {"p256dh": good_key, "auth": b64(&sub.auth[..15])}}),
        ),
        (
            "padded",
            serde_json::json!({"endpoint": "https://a.example/x", "keys": {"p256dh": good_key, "auth": format!("{good_auth}==")}}),
        ),
    ] {
        let resp = post(body).await.unwrap();
        assert_eq!(resp.status(), 400, "{what}");
        let body: serde_json::Value = resp.json().await.unwrap();
        assert_eq!(body["code"], "invalid_input", "{what}");
    }
    let resp = post(serde_json::json!({"endpoint": "https://a.example/x"}))
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    assert_eq!(subscriptions_in(dir.path()).await, 0, "nothing stored");
    let deleted = client
        .delete(format!("{}/v1/device/push", relay.url))
        .bearer_auth(&device.credentials().device_token)
        .json(&serde_json::json!({"endpoint": "https://unknown.example/x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 204);
    relay.stop().await;
}

#[tokio::test]
async fn a_device_holds_at_most_ten_subscriptions_and_an_endpoint_moves_between_devices() {
    let dir = tempfile::tempdir().unwrap();
    let relay = serve(dir.path(), 0, true).await;
    let service = PushService::start().await;
    let (agent, device) = agent_and_device(&relay.url).await;
    for i in 0..10 {
        assert_eq!(
            register(
                &relay.url,
                &device,
                &service.endpoint(&i.to_string()),
                &subscription()
            )
            .await
            .status(),
            201
        );
    }
    let eleventh = register(&relay.url, &device, &service.endpoint("10"), &subscription()).await;
    assert_eq!(eleventh.status(), 400);
    assert_eq!(
        eleventh.json::<serde_json::Value>().await.unwrap()["code"],
        "invalid_input"
    );
    // Renewing one of the ten is still allowed.
    assert_eq!(
        register(&relay.url, &device, &service.endpoint("3"), &subscription())
            .await
            .status(),
        200
    );

    let link = agent.create_pairing(PairingOptions::default()).await.unwrap();
    let other = DeviceClient::join(&link.link, "tablet").await.unwrap();
    assert_eq!(
        register(&relay.url, &other, &service.endpoint("3"), &subscription())
            .await
            .status(),
        201
    );
    assert_eq!(subscriptions_in(dir.path()).await, 10);
    let deleted = reqwest::Client::new()
        .delete(format!("{}/v1/device/push", relay.url))
        .bearer_auth(&device.credentials().device_token)
        .json(&serde_json::json!({"endpoint": service.endpoint("0")}))
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 204);
    assert_eq!(subscriptions_in(dir.path()).await, 9);
    relay.stop().await;
}

#[tokio::test]
async fn a_push_service_that_never_answers_delays_no_other() {
    let dir = tempfile::tempdir().unwrap();
    // Attempts may take a minute: delivered one after the other, the fast service would wait that long.
    let settings = PushSettings {
        timeout: Duration::from_secs(60),
        ..fast_push()
    };
    let relay = serve_with(dir.path(), 0, true, settings).await;
    let service = PushService::start().await;
    let (agent, device) = agent_and_device(&relay.url).await;
    let (slow, fast) = (subscription(), subscription());
    let hang = format!("http://{}/hang/1", service.addr);
    assert_eq!(register(&relay.url, &device, &hang, &slow).await.status(), 201);
    for i in 0..3 {
        ask(&agent, &format!("question {i}?")).await;
    }
    assert_eq!(
        register(&relay.url, &device, &service.endpoint("fast"), &fast)
            .await
            .status(),
        201
    );
    let question_id = ask(&agent, "after them?").await;
    // Well within the minute the hanging attempt may take.
    let got = service.wait_for(1).await;
    let payload: serde_json::Value = serde_json::from_slice(&decrypt(&fast, &got[0].body)).unwrap();
    assert_eq!(payload["id"], question_id.as_str());
}

#[tokio::test]
async fn a_push_past_its_ttl_is_dropped_unsent_and_the_closing_update_still_goes() {
    let dir = tempfile::tempdir().unwrap();
    let relay = serve(dir.path(), 0, true).await;
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let (agent, device) = agent_and_device(&relay.url).await;
    let sub = subscription();
    let endpoint = format!("http://127.0.0.1:{port}/push/late");
    assert_eq!(register(&relay.url, &device, &endpoint, &sub).await.status(), 201);
    let question_id = agent
        .ask_user(QuestionRequest::yes_no("quick?").expires_in(Duration::from_secs(2)))
        .await
        .expect("asked")
        .question_id;
    // The push service is unreachable until the question has expired.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let service = PushService::start_on(port, Arc::default()).await;
    let got = service.wait_for(1).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let kinds: Vec<serde_json::Value> = service
        .received()
        .iter()
        .map(|r| serde_json::from_slice::<serde_json::Value>(&decrypt(&sub, &r.body)).unwrap())
        .collect();
    assert_eq!(kinds.len(), 1, "only the update: {kinds:?}");
    assert_eq!(kinds[0]["kind"], "update");
    assert_eq!(kinds[0]["item"]["subjectId"], question_id.as_str());
    assert_eq!(kinds[0]["item"]["state"], "expired");
    assert_eq!(got[0].headers["topic"].to_str().unwrap(), topic(&question_id));
    relay.stop().await;
}

#[tokio::test]
async fn an_item_too_large_for_a_push_is_left_out_and_named_by_its_cursor() {
    let dir = tempfile::tempdir().unwrap();
    let relay = serve(dir.path(), 0, true).await;
    let service = PushService::start().await;
    let (agent, device) = agent_and_device(&relay.url).await;
    let sub = subscription();
    assert_eq!(
        register(&relay.url, &device, &service.endpoint("big"), &sub)
            .await
            .status(),
        201
    );
    let details = "a long diff line\n".repeat(400);
    let question_id = agent
        .ask_user(
            QuestionRequest::yes_no("apply this patch?")
                .with_details(details)
                .expires_in(Duration::from_secs(600)),
        )
        .await
        .expect("asked")
        .question_id;
    let got = service.wait_for(1).await;
    assert!(got[0].body.len() <= 4096);
    let payload: serde_json::Value = serde_json::from_slice(&decrypt(&sub, &got[0].body)).unwrap();
    assert_eq!(payload["kind"], "question");
    assert_eq!(payload["id"], question_id.as_str());
    assert!(payload.get("item").is_none(), "left out: {payload}");
    // The conversation read from just before the cursor starts with that question.
    let page = reqwest::Client::new()
        .get(format!("{}/v1/device/conversation", relay.url))
        .bearer_auth(&device.credentials().device_token)
        .send()
        .await
        .unwrap()
        .json::<serde_json::Value>()
        .await
        .unwrap();
    let item = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["cursor"] == payload["cursor"])
        .expect("the cursor names the item");
    assert_eq!(item["id"], question_id.as_str());
    relay.stop().await;
}
