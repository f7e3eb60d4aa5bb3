//! `GET /metrics`: off by default; when on, requests, the store's writer, parked waits, the webhook outbox and
//! its deliveries move the figures it shows, and the text parses with an OpenMetrics parser.

use std::time::Duration;

use axum::http::StatusCode as AxumStatus;
use openmetrics_parser::{MetricsExposition, OpenMetricsType, OpenMetricsValue};
use pacerelle_core::wire::{MessageBatch, SetWebhook, WebhookInfo, code};
use pacerelle_relay::{Config, WebhookSettings};
use reqwest::StatusCode;
use tempfile::TempDir;

use crate::common::{
    TestRelay, ask, db_path, eventually, fast_webhooks, pair, processed, register, send_task, start,
    start_with_settings, wait_messages,
};

type Exposition = MetricsExposition<OpenMetricsType, OpenMetricsValue>;

/// A relay with metrics on and open registration.
async fn start_metrics(settings: WebhookSettings) -> TestRelay {
    let dir = TempDir::new().expect("a temporary directory");
    let config = Config {
        open_registration: true,
        metrics: true,
        ..Config::new(db_path(&dir))
    };
    start_with_settings(config, dir, settings).await
}

/// `GET /metrics`, parsed. The content type must be OpenMetrics' and the text must parse whole.
async fn scrape(relay: &TestRelay) -> Exposition {
    let resp = reqwest::get(format!("{}/metrics", relay.base))
        .await
        .expect("the relay answers");
    assert_eq!(resp.status(), StatusCode::OK);
    let content_type = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    assert!(
        content_type.starts_with("application/openmetrics-text; version=1.0.0"),
        "{content_type}"
    );
    let text = resp.text().await.expect("a body");
    openmetrics_parser::openmetrics::parse_openmetrics(&text)
        .unwrap_or_else(|e| panic!("/metrics does not parse: {e:?}\n{text}"))
}

/// The value of the series of `family` whose labels include `labels`: a counter's or a gauge's value, a
/// histogram's count. `None` when no series matches.
fn value(metrics: &Exposition, family: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let family = metrics.families.get(family)?;
    family.iter_samples().find_map(|sample| {
        let set = sample.get_labelset().ok()?;
        if !labels
            .iter()
            .all(|(name, value)| set.get_label_value(name) == Some(*value))
        {
            return None;
        }
        Some(match &sample.value {
            OpenMetricsValue::Counter(c) => c.value.as_f64(),
            OpenMetricsValue::Gauge(n) | OpenMetricsValue::Unknown(n) => n.as_f64(),
            OpenMetricsValue::Histogram(h) => h.count.map_or(0.0, |c| c as f64),
            other => panic!("unexpected value {other:?}"),
        })
    })
}

/// [`value`], with 0 for a series not there yet (a label set no request has had).
fn count(metrics: &Exposition, family: &str, labels: &[(&str, &str)]) -> f64 {
    value(metrics, family, labels).unwrap_or(0.0)
}

/// Every value of the label `name` across the series of `family`.
fn label_values(metrics: &Exposition, family: &str, name: &str) -> Vec<String> {
    let Some(family) = metrics.families.get(family) else {
        return Vec::new();
    };
    family
        .iter_samples()
        .filter_map(|s| s.get_labelset().ok()?.get_label_value(name).map(str::to_string))
        .collect()
}

const TASK_ROUTE: &str = "/v1/device/messages";
const PROCESSED_ROUTE: &str = "/v1/agent/messages/{message_id}/processed";

#[tokio::test]
async fn metrics_are_off_by_default() {
    let relay = start().await;
    relay
        .get("/metrics", "")
        .await
        .error(StatusCode::NOT_FOUND, code::NO_ROUTE);
}

#[tokio::test]
async fn requests_the_store_and_parked_waits_move_the_figures() {
    let relay = start_metrics(WebhookSettings::default()).await;
    let before = scrape(&relay).await;
    assert_eq!(
        count(&before, "pacerelle_http_requests", &[("route", TASK_ROUTE)]),
        0.0
    );
    assert_eq!(value(&before, "pacerelle_parked_waits", &[]), Some(0.0));
    for outcome in ["delivered", "failed", "given_up"] {
        assert_eq!(
            value(&before, "pacerelle_webhook_deliveries", &[("outcome", outcome)]),
            Some(0.0),
            "every outcome is there from the start"
        );
    }
    for outcome in ["delivered", "failed", "gone", "dropped"] {
        assert_eq!(
            value(&before, "pacerelle_push_deliveries", &[("outcome", outcome)]),
            Some(0.0)
        );
    }
    assert_eq!(value(&before, "pacerelle_webhook_outbox_pending", &[]), Some(0.0));
    assert_eq!(
        value(&before, "pacerelle_push_outbox_oldest_age_seconds", &[]),
        Some(0.0)
    );

    let agent = register(&relay).await;
    let phone = pair(&relay, &agent).await;
    const TASKS: usize = 3;
    let mut ids = Vec::new();
    for i in 0..TASKS {
        let id = pacerelle_core::ids::generate(pacerelle_core::ids::MESSAGE);
        send_task(&relay, &phone, &id, &format!("task {i}")).await;
        ids.push(id);
    }
    let batch: MessageBatch = wait_messages(&relay, &agent, None, 0, None).await.ok();
    assert_eq!(batch.messages.len(), TASKS);
    processed(&relay, &agent, &ids[0]).await;
    relay
        .get("/v1/no/such/route", &agent.bearer)
        .await
        .error(StatusCode::NOT_FOUND, code::NO_ROUTE);

    let after = scrape(&relay).await;
    let sent = [("route", TASK_ROUTE), ("method", "POST"), ("code", "201")];
    assert_eq!(
        count(&after, "pacerelle_http_requests", &sent),
        TASKS as f64,
        "one count per task sent, under the route's template"
    );
    assert_eq!(
        count(
            &after,
            "pacerelle_http_request_duration_seconds",
            &[("route", TASK_ROUTE), ("method", "POST")]
        ),
        TASKS as f64
    );
    assert_eq!(
        count(
            &after,
            "pacerelle_http_requests",
            &[("route", PROCESSED_ROUTE), ("method", "POST"), ("code", "200")]
        ),
        1.0
    );
    assert_eq!(
        count(
            &after,
            "pacerelle_http_requests",
            &[("route", "none"), ("method", "GET"), ("code", "404")]
        ),
        1.0,
        "an unmatched path counts under `none`"
    );
    let routes = label_values(&after, "pacerelle_http_requests", "route");
    assert!(routes.iter().any(|r| r == PROCESSED_ROUTE), "{routes:?}");
    for route in &routes {
        assert!(
            !route.contains("msg_")
                && !route.contains("ag_")
                && !route.contains("dv_")
                && !route.contains("/no/"),
            "no id or raw path in a route label: {route}"
        );
    }
    let commits = count(&after, "pacerelle_store_commits", &[]);
    assert!(commits >= 1.0, "commits: {commits}");
    assert!(count(&after, "pacerelle_store_writes", &[]) >= commits);
    if !crate::common::on_postgres() {
        // The SQLite writer's queue; PostgreSQL has no writer of ours.
        assert!(count(&after, "pacerelle_store_write_duration_seconds", &[]) >= TASKS as f64);
    }
    assert!(count(&after, "pacerelle_store_batch_writes", &[]) >= commits);

    // A wait that finds nothing parks: the gauge shows it while it waits, and drops when a task ends it.
    let waiting = {
        let base = relay.base.clone();
        let bearer = agent.bearer.clone();
        let cursor = batch.cursor;
        tokio::spawn(async move {
            reqwest::Client::new()
                .get(format!("{base}/v1/agent/messages?wait=30&cursor={cursor}"))
                .bearer_auth(bearer)
                .send()
                .await
                .expect("the relay answers")
                .status()
        })
    };
    eventually(10, "the wait parked", || async {
        (value(&scrape(&relay).await, "pacerelle_parked_waits", &[]) == Some(1.0)).then_some(())
    })
    .await;
    let wakes = pacerelle_core::ids::generate(pacerelle_core::ids::MESSAGE);
    send_task(&relay, &phone, &wakes, "wake up").await;
    assert_eq!(waiting.await.expect("the wait"), StatusCode::OK);
    eventually(10, "no wait parked", || async {
        (value(&scrape(&relay).await, "pacerelle_parked_waits", &[]) == Some(0.0)).then_some(())
    })
    .await;
    let last = scrape(&relay).await;
    assert_eq!(count(&last, "pacerelle_http_requests", &sent), (TASKS + 1) as f64);
    assert_eq!(
        count(
            &last,
            "pacerelle_http_requests",
            &[
                ("route", "/v1/agent/messages"),
                ("method", "GET"),
                ("code", "200")
            ]
        ),
        2.0
    );
}

/// A webhook receiver on a loopback port that answers every POST with 200.
async fn receiver() -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let addr = listener.local_addr().expect("bound");
    let app = axum::Router::new().route("/hook", axum::routing::post(|| async { AxumStatus::OK }));
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.expect("the receiver serves");
    });
    (format!("http://{addr}/hook"), task)
}

async fn set_webhook(relay: &TestRelay, bearer: &str, url: &str) {
    relay
        .put(
            "/v1/agent/webhook",
            bearer,
            &SetWebhook {
                url: url.into(),
                secret: "whsec_test_0123456789abcdef".into(),
            },
        )
        .await
        .ok::<WebhookInfo>();
}

async fn cancel(relay: &TestRelay, bearer: &str, question_id: &str) {
    relay
        .call(
            reqwest::Method::POST,
            &format!("/v1/agent/questions/{question_id}/cancel"),
            Some(bearer),
            None,
        )
        .await
        .ok::<serde_json::Value>();
}

#[tokio::test]
async fn the_webhook_outbox_and_its_deliveries_are_counted() {
    // Attempts 100 to 400 ms apart; an event not delivered within 4 s is given up at its next attempt.
    let settings = WebhookSettings {
        give_up_after: Duration::from_secs(4),
        ..fast_webhooks()
    };
    let relay = start_metrics(settings).await;
    let agent = register(&relay).await;
    let phone = pair(&relay, &agent).await;

    // Nobody listens on this port: the event stays pending, each attempt fails, and it grows older…
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port")
        .local_addr()
        .expect("bound");
    set_webhook(&relay, &agent.bearer, &format!("http://{closed}/hook")).await;
    ask(&relay, &agent, "stuck", &[&phone], 600_000).await;
    cancel(&relay, &agent.bearer, "stuck").await;
    let stuck = eventually(
        30,
        "a failed attempt on a pending event older than 300 ms",
        || async {
            let m = scrape(&relay).await;
            let failed = count(&m, "pacerelle_webhook_deliveries", &[("outcome", "failed")]);
            let age = count(&m, "pacerelle_webhook_outbox_oldest_age_seconds", &[]);
            (failed >= 1.0 && age >= 0.3).then_some(m)
        },
    )
    .await;
    assert_eq!(value(&stuck, "pacerelle_webhook_outbox_pending", &[]), Some(1.0));
    assert_eq!(
        count(&stuck, "pacerelle_webhook_deliveries", &[("outcome", "given_up")]),
        0.0
    );

    // …until it is too old: given up, and the outbox is empty again.
    eventually(30, "the event given up", || async {
        let m = scrape(&relay).await;
        (count(&m, "pacerelle_webhook_deliveries", &[("outcome", "given_up")]) == 1.0
            && value(&m, "pacerelle_webhook_outbox_pending", &[]) == Some(0.0)
            && value(&m, "pacerelle_webhook_outbox_oldest_age_seconds", &[]) == Some(0.0))
        .then_some(())
    })
    .await;

    // A receiver that answers 200: the next event is delivered once.
    let (url, task) = receiver().await;
    set_webhook(&relay, &agent.bearer, &url).await;
    ask(&relay, &agent, "fine", &[&phone], 600_000).await;
    cancel(&relay, &agent.bearer, "fine").await;
    eventually(30, "the event delivered", || async {
        let m = scrape(&relay).await;
        (count(&m, "pacerelle_webhook_deliveries", &[("outcome", "delivered")]) == 1.0
            && value(&m, "pacerelle_webhook_outbox_pending", &[]) == Some(0.0))
        .then_some(())
    })
    .await;
    let end = scrape(&relay).await;
    assert_eq!(
        count(&end, "pacerelle_webhook_deliveries", &[("outcome", "given_up")]),
        1.0
    );
    task.abort();
}

/// A local push service: answers each push with the next status of `answers`, 201 once it is empty.
async fn push_service(
    answers: std::sync::Arc<std::sync::Mutex<std::collections::VecDeque<u16>>>,
) -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let addr = listener.local_addr().expect("bound");
    let app = axum::Router::new().route(
        "/push/{id}",
        axum::routing::post(move || {
            let answers = answers.clone();
            async move {
                let next = answers.lock().expect("the answers").pop_front().unwrap_or(201);
                AxumStatus::from_u16(next).expect("a status")
            }
        }),
    );
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.expect("the push service serves");
    });
    (format!("http://{addr}/push/1"), task)
}

#[tokio::test]
async fn push_deliveries_are_counted_by_outcome() {
    let dir = TempDir::new().expect("a temporary directory");
    let config = Config {
        open_registration: true,
        metrics: true,
        allow_private_push_endpoints: true,
        push: pacerelle_relay::PushSettings {
            backoff_base: Duration::from_millis(100),
            backoff_max: Duration::from_millis(300),
            poll_every: Duration::from_millis(200),
            ..pacerelle_relay::PushSettings::default()
        },
        ..Config::new(db_path(&dir))
    };
    let relay = start_with_settings(config, dir, WebhookSettings::default()).await;
    let agent = register(&relay).await;
    let phone = pair(&relay, &agent).await;
    let answers = std::sync::Arc::new(std::sync::Mutex::new(std::collections::VecDeque::from([500])));
    let (endpoint, task) = push_service(answers.clone()).await;

    // A browser's subscription keys: an uncompressed P-256 point and 16 random bytes.
    let rng = ring::rand::SystemRandom::new();
    let key =
        ring::agreement::EphemeralPrivateKey::generate(&ring::agreement::ECDH_P256, &rng).expect("a key");
    let public = key.compute_public_key().expect("its public key");
    let auth: [u8; 16] = ring::rand::generate(&rng).expect("random bytes").expose();
    let subscribed = relay
        .call(
            reqwest::Method::POST,
            "/v1/device/push",
            Some(&phone.bearer),
            Some(serde_json::json!({
                "endpoint": endpoint,
                "expirationTime": null,
                "keys": {
                    "p256dh": pacerelle_core::b64::encode(public.as_ref()),
                    "auth": pacerelle_core::b64::encode(&auth),
                },
            })),
        )
        .await;
    assert_eq!(subscribed.status, StatusCode::CREATED, "{}", subscribed.body);

    // The question's push: 500 (a failed attempt, tried again), then 201.
    ask(&relay, &agent, "pushed", &[&phone], 600_000).await;
    eventually(30, "the push delivered after a failed attempt", || async {
        let m = scrape(&relay).await;
        (count(&m, "pacerelle_push_deliveries", &[("outcome", "delivered")]) == 1.0
            && value(&m, "pacerelle_push_outbox_pending", &[]) == Some(0.0))
        .then_some(m)
    })
    .await;
    // 410: the subscription is gone, removed with its pushes.
    answers.lock().expect("the answers").push_back(410);
    ask(&relay, &agent, "gone", &[&phone], 600_000).await;
    // The outbox is read at each scrape: wait for it to be empty too, as for the first push, rather than
    // read it at the instant the counter moved (a loaded PostgreSQL run once saw one push still there).
    let end = eventually(30, "the subscription gone and the outbox empty", || async {
        let m = scrape(&relay).await;
        (count(&m, "pacerelle_push_deliveries", &[("outcome", "gone")]) == 1.0
            && value(&m, "pacerelle_push_outbox_pending", &[]) == Some(0.0))
        .then_some(m)
    })
    .await;
    assert_eq!(
        count(&end, "pacerelle_push_deliveries", &[("outcome", "failed")]),
        1.0
    );
    assert_eq!(
        count(&end, "pacerelle_push_deliveries", &[("outcome", "delivered")]),
        1.0
    );
    assert_eq!(
        count(&end, "pacerelle_push_deliveries", &[("outcome", "dropped")]),
        0.0
    );
    assert_eq!(value(&end, "pacerelle_push_outbox_pending", &[]), Some(0.0));
    task.abort();
}
