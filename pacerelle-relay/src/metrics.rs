//! `GET /metrics`: the relay's figures in the Prometheus text format (OpenMetrics), when the operator turns it
//! on (`--metrics`; off by default, since the figures tell how busy the relay is and whoever can reach the relay
//! can read them).
//!
//! Every metric is registered here, with its help text; the modules that move a figure hold only cheap clones of
//! its `Counter`, `Gauge` or `Histogram`, handed to them at construction: the store's writer
//! ([`WriterCounts`]), presence (the parked waits), the webhook and push deliverers ([`WebhookDeliveries`],
//! [`PushDeliveries`]) and the request layer ([`track`]). The outboxes' depth and age are read from the store
//! at each scrape. `docs/self-hosting.md` ("Metrics") lists them all with their meaning.
//!
//! Durations carry their unit in their name (`_seconds`) but no `# UNIT` line: OpenMetrics allows one on a
//! histogram, yet some parsers refuse it, and Prometheus needs none.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::Method;
use axum::http::header::CONTENT_TYPE;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use pacerelle_core::Timestamp;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

use crate::app::AppState;
use crate::error::AppError;
use crate::presence::Activity;
use crate::store::{Store, WriterCounts};

/// The route label of a request that matched no route (404 `no_route`).
const NO_ROUTE: &str = "none";

/// Upper bounds of the request duration buckets, in seconds: 1 ms to 60 s, so that a long-poll that waited its
/// whole time (at most 55 s) lands in the last finite bucket.
const REQUEST_BUCKETS: [f64; 15] = [
    0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// The labels of `pacerelle_http_requests_total`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RequestLabels {
    /// The route template that matched (`/v1/agent/messages/{message_id}/processed`), never the path itself,
    /// or `none`.
    route: String,
    /// The request's method (`other` for a method HTTP does not define).
    method: &'static str,
    /// The answer's HTTP status.
    code: u16,
}

/// The labels of `pacerelle_http_request_duration_seconds`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RouteLabels {
    route: String,
    method: &'static str,
}

/// The label of the delivery counters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: &'static str,
}

/// A histogram of request durations, for the family's new label sets.
fn request_histogram() -> Histogram {
    Histogram::new(REQUEST_BUCKETS)
}

/// The counters of webhook delivery attempts, one per outcome (`pacerelle_webhook_deliveries_total`).
#[derive(Debug, Clone)]
pub(crate) struct WebhookDeliveries {
    /// The receiver answered 2xx: the event is delivered.
    pub delivered: Counter,
    /// An attempt failed; the event is tried again after the backoff.
    pub failed: Counter,
    /// An attempt failed and the event is given up (too many attempts, too old, or the webhook was removed).
    pub given_up: Counter,
}

/// The counters of Web Push delivery attempts, one per outcome (`pacerelle_push_deliveries_total`).
#[derive(Debug, Clone)]
pub(crate) struct PushDeliveries {
    /// The push service accepted the push (2xx).
    pub delivered: Counter,
    /// An attempt failed; the push is tried again after the backoff.
    pub failed: Counter,
    /// The push service said the subscription is gone (404, 410): it is removed with its pushes.
    pub gone: Counter,
    /// The push is removed unsent: its TTL ended, or the device no longer sees the item.
    pub dropped: Counter,
}

/// The gauges of one outbox, set at each scrape.
#[derive(Debug, Clone, Default)]
struct OutboxGauges {
    pending: Gauge,
    oldest_age: Gauge<f64, AtomicU64>,
}

impl OutboxGauges {
    /// Registers the two gauges of the outbox `name` (`webhook`, `push`).
    fn register(registry: &mut Registry, name: &str, what: &str) -> OutboxGauges {
        let gauges = OutboxGauges::default();
        registry.register(
            format!("{name}_outbox_pending"),
            format!("{what} waiting for delivery now"),
            gauges.pending.clone(),
        );
        registry.register(
            format!("{name}_outbox_oldest_age_seconds"),
            format!("Age in seconds of the oldest of the {what} waiting for delivery (0 when none waits)"),
            gauges.oldest_age.clone(),
        );
        gauges
    }

    /// Sets the gauges from the store's figures (`pending` entries, the oldest queued at `oldest`), as of
    /// `now`.
    fn set(&self, pending: u64, oldest: Option<Timestamp>, now: Timestamp) {
        self.pending.set(i64::try_from(pending).unwrap_or(i64::MAX));
        let age_ms = oldest.map_or(0, |t| now.millis().saturating_sub(t.millis()).max(0));
        self.oldest_age.set(age_ms as f64 / 1000.0);
    }
}

/// The registry of the relay's metrics, and the handles of those it moves itself.
#[derive(Debug)]
pub(crate) struct Metrics {
    registry: Registry,
    /// Kept so that the counters live as long as the registry.
    _writer: Arc<WriterCounts>,
    requests: Family<RequestLabels, Counter>,
    durations: Family<RouteLabels, Histogram>,
    webhook_outbox: OutboxGauges,
    push_outbox: OutboxGauges,
    /// Handed to the webhook deliverer.
    pub webhook_deliveries: WebhookDeliveries,
    /// Handed to the push deliverer.
    pub push_deliveries: PushDeliveries,
}

impl Metrics {
    /// The metrics of a relay on `store`, whose parked waits `activity` counts.
    pub(crate) fn new(store: &Store, activity: &Activity) -> Metrics {
        let mut registry = Registry::with_prefix("pacerelle");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "http_requests",
            "HTTP requests answered, by route template, method and status code",
            requests.clone(),
        );
        let durations =
            Family::<RouteLabels, Histogram>::new_with_constructor(request_histogram as fn() -> Histogram);
        registry.register(
            "http_request_duration_seconds",
            "Seconds from a request's arrival to its answer's headers, by route template and method \
             (long-polls count the time they waited)",
            durations.clone(),
        );
        let writer = store.writer_counts();
        registry.register(
            "store_commits",
            "Write transactions committed, each with one synced commit",
            writer.commits.clone(),
        );
        registry.register(
            "store_writes",
            "Writes run by the store's writer",
            writer.writes.clone(),
        );
        registry.register(
            "store_batch_writes",
            "Writes that shared one commit (group commit)",
            writer.batch.clone(),
        );
        registry.register(
            "store_write_duration_seconds",
            "Seconds from a write's call to its answer: its wait in the queue, its batch and the synced commit",
            writer.latency.clone(),
        );
        registry.register(
            "parked_waits",
            "Agent long-polls (GET /v1/agent/messages) parked now, waiting for a task",
            activity.parked_gauge(),
        );
        let webhook_outbox = OutboxGauges::register(&mut registry, "webhook", "webhook events");
        let push_outbox = OutboxGauges::register(&mut registry, "push", "Web Push messages");
        let [delivered, failed, given_up] = outcomes(
            &mut registry,
            "webhook_deliveries",
            "Webhook delivery attempts, by outcome",
            ["delivered", "failed", "given_up"],
        );
        let webhook_deliveries = WebhookDeliveries {
            delivered,
            failed,
            given_up,
        };
        let [delivered, failed, gone, dropped] = outcomes(
            &mut registry,
            "push_deliveries",
            "Web Push delivery attempts, by outcome",
            ["delivered", "failed", "gone", "dropped"],
        );
        let push_deliveries = PushDeliveries {
            delivered,
            failed,
            gone,
            dropped,
        };
        Metrics {
            registry,
            _writer: writer,
            requests,
            durations,
            webhook_outbox,
            push_outbox,
            webhook_deliveries,
            push_deliveries,
        }
    }

    /// Counts one answered request.
    fn request(&self, route: String, method: &'static str, code: u16, seconds: f64) {
        self.durations
            .get_or_create(&RouteLabels {
                route: route.clone(),
                method,
            })
            .observe(seconds);
        self.requests
            .get_or_create(&RequestLabels { route, method, code })
            .inc();
    }

    /// The metrics as text, after reading the outboxes' figures.
    async fn scrape(&self, store: &Store) -> Result<String, AppError> {
        let now = Timestamp::now();
        let outboxes = store.outboxes().await?;
        let (webhook, push) = (outboxes.webhook, outboxes.push);
        self.webhook_outbox.set(webhook.pending, webhook.oldest, now);
        self.push_outbox.set(push.pending, push.oldest, now);
        let mut text = String::new();
        encode(&mut text, &self.registry).map_err(|e| AppError::internal(&e))?;
        Ok(text)
    }
}

/// Registers the family `name` with one label, `outcome`, and returns its series for `outcomes`, created now so
/// that each appears from the start, at 0: clones that share their value with the family's.
fn outcomes<const N: usize>(
    registry: &mut Registry,
    name: &str,
    help: &str,
    outcomes: [&'static str; N],
) -> [Counter; N] {
    let family = Family::<OutcomeLabel, Counter>::default();
    registry.register(name, help, family.clone());
    outcomes.map(|outcome| family.get_or_create_owned(&OutcomeLabel { outcome }))
}

/// The method as a label value: its name when HTTP defines it, else `other` (so that no client can add series).
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        Method::PATCH => "PATCH",
        Method::CONNECT => "CONNECT",
        Method::TRACE => "TRACE",
        _ => "other",
    }
}

/// The request layer: counts each request by the route template it matched (`none` when it matched none),
/// its method and its answer's status, and observes the time until the answer's headers.
pub(crate) async fn track(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| NO_ROUTE.to_string(), |m| m.as_str().to_string());
    let method = method_label(request.method());
    let response = next.run(request).await;
    state.metrics.request(
        route,
        method,
        response.status().as_u16(),
        started.elapsed().as_secs_f64(),
    );
    response
}

/// `GET /metrics`: 404 `no_route` unless the operator turned metrics on; 503 `unavailable` when the store
/// cannot be read for the outboxes' figures.
pub(crate) async fn metrics(State(state): State<AppState>) -> Result<Response, AppError> {
    if !state.config.metrics {
        return Err(crate::routes::health::no_route().await);
    }
    let text = state.metrics.scrape(&state.store).await?;
    Ok((
        [(
            CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
        .into_response())
}
