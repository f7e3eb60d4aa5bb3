//! The webhook deliverer: sends the events of the outbox (`docs/webhooks.md`, `docs/adr/0002-webhook-outbox.md`).
//!
//! Events are queued in the database in the same transaction as the question's state change (an agent's
//! oldest pending events beyond `--max-pending-events` are dropped then). This task reads the due ones, POSTs
//! each to its agent's webhook as it is at that moment, signed with its secret, and records the outcome in a
//! committed write: a 2xx marks the event delivered (it is never sent again, across restarts too); anything
//! else schedules another attempt with exponential backoff, until the event is given up as `failed`. It wakes
//! when an event is queued and polls every few seconds.
//!
//! Delivery is fair ([`deliver`], which the push deliverer shares): attempts run beside each other, at most
//! [`WebhookSettings::concurrency`] and one per agent at a time, so an agent's events are first attempted one
//! after the other in the order they were created, and one agent's slow or silent receiver delays no other
//! agent's events.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use pacerelle_core::Timestamp;
use pacerelle_core::wire::{EVENT_ID_HEADER, SIGNATURE_HEADER};
use tokio::sync::Notify;

use crate::app::Inner;
use crate::error::StoreError;
use crate::store::Target;
use crate::store::{DueEvent, Store};

/// The delivery log's error for an event whose webhook secret does not open.
const UNREADABLE: &str = "the webhook secret does not open with this relay's webhook.key (lost or replaced): set \
                          the webhook again";

/// How the relay delivers webhook events. [`WebhookSettings::default`] is what `pacerelle serve` uses; tests
/// shorten the delays.
#[derive(Debug, Clone)]
pub struct WebhookSettings {
    /// How long one attempt may take (connect, send, answer headers) before it counts as failed.
    pub timeout: Duration,
    /// The wait after the first failed attempt; it doubles after each further one.
    pub backoff_base: Duration,
    /// The longest wait between two attempts.
    pub backoff_max: Duration,
    /// Attempts after which an event is failed.
    pub max_attempts: u32,
    /// Age after which an event not yet delivered is failed (counted from the event's creation).
    pub give_up_after: Duration,
    /// How often the deliverer looks for due events when nothing wakes it.
    pub poll_every: Duration,
    /// Attempts in flight at most, each to a different agent's webhook (an agent has one in flight at most).
    pub concurrency: usize,
}

impl Default for WebhookSettings {
    /// 10 s per attempt; retries after 1 s, 2 s, 4 s … at most every 10 minutes; given up after 24 hours or
    /// 150 attempts (about 24 hours at that pace); a poll every 5 s; 32 attempts in flight.
    fn default() -> Self {
        WebhookSettings {
            timeout: Duration::from_secs(10),
            backoff_base: Duration::from_secs(1),
            backoff_max: Duration::from_secs(600),
            max_attempts: 150,
            give_up_after: Duration::from_secs(24 * 3600),
            poll_every: Duration::from_secs(5),
            concurrency: 32,
        }
    }
}

impl WebhookSettings {
    /// The wait before the next attempt, after `attempts` failed ones (1 or more).
    pub(crate) fn backoff(&self, attempts: u32) -> Duration {
        doubling(self.backoff_base, self.backoff_max, attempts)
    }
}

/// The wait before the next attempt of an outbox (webhooks, pushes) after `attempts` failed ones (1 or more):
/// `base`, doubling after each further failure, at most `max`.
pub(crate) fn doubling(base: Duration, max: Duration, attempts: u32) -> Duration {
    let doublings = attempts.saturating_sub(1).min(31);
    base.checked_mul(1u32 << doublings).unwrap_or(max).min(max)
}

/// The value of the signature header: `t=<unix seconds>,v1=<lowercase hex HMAC-SHA256(secret, "<t>." ‖ body)>`.
pub(crate) fn signature(secret: &str, t: i64, body: &[u8]) -> String {
    pacerelle_core::webhook::sign_webhook(secret, t, body)
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

fn client(settings: &WebhookSettings) -> Result<reqwest::Client, reqwest::Error> {
    // reqwest is built with `rustls-no-provider`: ring is the process-wide provider (an error means one is
    // already installed, which is fine).
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(settings.timeout)
        .connect_timeout(settings.timeout)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("pacerelle-relay/", env!("CARGO_PKG_VERSION")))
        .build()
}

/// The outcome of one attempt: the status of a 2xx answer, or the status (if any) and what went wrong.
type Attempt = Result<u16, (Option<u16>, String)>;

/// POSTs the event, signed with `secret`, to `url`.
async fn send(client: &reqwest::Client, event: &DueEvent, url: &str, secret: &str) -> Attempt {
    let t = Timestamp::now().millis().div_euclid(1000);
    let signature = signature(secret, t, event.body.as_bytes());
    let sent = client
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header(EVENT_ID_HEADER, &event.event_id)
        .header(SIGNATURE_HEADER, signature)
        .body(event.body.clone())
        .send()
        .await;
    match sent {
        Ok(resp) if resp.status().is_success() => Ok(resp.status().as_u16()),
        Ok(resp) => {
            let status = resp.status();
            Err((
                Some(status.as_u16()),
                format!("the receiver answered HTTP {status}"),
            ))
        }
        Err(e) if e.is_timeout() => Err((None, "no answer within the time limit".to_string())),
        Err(e) if e.is_connect() => Err((None, format!("cannot connect: {}", e.without_url()))),
        Err(e) => Err((None, format!("request failed: {}", e.without_url()))),
    }
}

/// What the webhook deliverer needs besides the relay: the store, the HTTP client and the settings.
#[derive(Clone)]
struct Webhooks {
    store: Store,
    client: reqwest::Client,
    settings: WebhookSettings,
    /// The attempts' outcomes, for `GET /metrics`.
    counts: crate::metrics::WebhookDeliveries,
}

impl Webhooks {
    /// Records an attempt's outcome. A failed attempt is tried again after the backoff, unless the event is
    /// too old or was tried too often.
    async fn record(&self, event: &DueEvent, outcome: Attempt) -> Result<(), StoreError> {
        let now = Timestamp::now();
        match outcome {
            Ok(status) => {
                tracing::debug!(event = %event.event_id, status, "webhook event delivered");
                self.store
                    .event_delivered(&event.event_id, status, now)
                    .await
                    .inspect(|()| {
                        self.counts.delivered.inc();
                    })
            }
            Err((status, error)) => {
                let settings = &self.settings;
                let attempts = event.attempts.saturating_add(1);
                let too_old =
                    now.millis().saturating_sub(event.created_at.millis()) >= millis(settings.give_up_after);
                let next = (attempts < settings.max_attempts && !too_old)
                    .then(|| now.plus_millis(millis(settings.backoff(attempts))));
                if next.is_none() {
                    tracing::warn!(event = %event.event_id, attempts, %error, "webhook event given up");
                } else {
                    tracing::debug!(event = %event.event_id, attempts, %error, "webhook attempt failed");
                }
                let given_up = next.is_none();
                self.store
                    .event_attempt_failed(&event.event_id, status, &error, next)
                    .await
                    .inspect(|()| {
                        if given_up {
                            self.counts.given_up.inc();
                        } else {
                            self.counts.failed.inc();
                        }
                    })
            }
        }
    }
}

impl Outbox for Webhooks {
    type Item = DueEvent;
    type Key = String;
    const NAME: &'static str = "webhook";

    fn key(event: &DueEvent) -> String {
        event.agent_id.clone()
    }

    async fn due(&self, now: Timestamp, busy: &[String], limit: u32) -> Result<Vec<DueEvent>, StoreError> {
        self.store.due_events(now, busy, limit).await
    }

    async fn next_due(&self, busy: &[String]) -> Result<Option<Timestamp>, StoreError> {
        self.store.next_event_due(busy).await
    }

    async fn attempt(self, event: DueEvent) -> Result<(), StoreError> {
        match event.target.clone() {
            Target::Webhook { url, secret } => {
                let outcome = send(&self.client, &event, &url, &secret).await;
                self.record(&event, outcome).await
            }
            // The webhook was removed after the event was read; nowhere to send it.
            Target::Removed => self
                .store
                .event_attempt_failed(&event.event_id, None, "the webhook was removed", None)
                .await
                .inspect(|()| {
                    self.counts.given_up.inc();
                }),
            // Nothing can sign it; tried again with the usual backoff, so a webhook set again in time still
            // gets it.
            Target::Unreadable => self.record(&event, Err((None, UNREADABLE.to_string()))).await,
        }
    }
}

/// The deliverer task: runs until the relay shuts down or is dropped.
pub(crate) async fn deliverer(relay: Weak<Inner>, kick: Arc<Notify>) {
    let (webhooks, pace) = {
        let Some(inner) = relay.upgrade() else {
            return;
        };
        let client = match client(&inner.webhooks) {
            Ok(client) => client,
            Err(e) => {
                tracing::error!(error = %e, "cannot build the webhook HTTP client; webhooks are not delivered");
                return;
            }
        };
        let pace = Pace {
            concurrency: inner.webhooks.concurrency,
            poll_every: inner.webhooks.poll_every,
        };
        let webhooks = Webhooks {
            store: inner.store.clone(),
            client,
            settings: inner.webhooks.clone(),
            counts: inner.metrics.webhook_deliveries.clone(),
        };
        (webhooks, pace)
    };
    deliver(relay, webhooks, pace, kick).await;
}

// ------------------------------------------------------------------------- fair delivery, shared with pushes

/// An outbox that [`deliver`] drains fairly: webhook events, at most one attempt in flight per agent, and Web
/// Push messages ([`crate::push`]), at most one per subscription.
pub(crate) trait Outbox: Clone + Send + Sync + 'static {
    /// What one attempt sends.
    type Item: Send + 'static;
    /// Who has one attempt in flight at most: an agent (webhooks), a subscription (pushes).
    type Key: Eq + Clone + Send + Sync + 'static;
    /// The outbox's name in the log.
    const NAME: &'static str;

    /// The item's key.
    fn key(item: &Self::Item) -> Self::Key;

    /// Up to `limit` items due at `now`, the most overdue first (so a key's first item is the one due first),
    /// none whose key is in `busy`.
    fn due(
        &self,
        now: Timestamp,
        busy: &[Self::Key],
        limit: u32,
    ) -> impl Future<Output = Result<Vec<Self::Item>, StoreError>> + Send;

    /// When the next item of a key not in `busy` is due, if any is queued.
    fn next_due(
        &self,
        busy: &[Self::Key],
    ) -> impl Future<Output = Result<Option<Timestamp>, StoreError>> + Send;

    /// Sends the item (each step bounded by the client's timeouts) and records the outcome in a committed
    /// write. An error means the outcome could not be recorded.
    fn attempt(self, item: Self::Item) -> impl Future<Output = Result<(), StoreError>> + Send + 'static;
}

/// How [`deliver`] paces itself.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pace {
    /// Attempts in flight at most (each of a different key).
    pub concurrency: usize,
    /// How often it looks for due items when nothing wakes it.
    pub poll_every: Duration,
}

/// Drains `outbox` until the relay shuts down or is dropped. Attempts run beside each other, at most
/// `pace.concurrency` and one per key at a time; an attempt that ends frees its slot at once, and the next
/// due item of a key not in flight starts then, without waiting for the others. A key with a backlog takes
/// one slot, never more, and its rows are left out of the reads while it is in flight, so one slow receiver
/// delays no other. Wakes when `kick` is notified (an item was
/// queued), when an attempt ends, when the next item is due, or every `pace.poll_every`. At shutdown it lets
/// the attempts in flight finish and record their outcome, so none is sent again.
pub(crate) async fn deliver<O: Outbox>(relay: Weak<Inner>, outbox: O, pace: Pace, kick: Arc<Notify>) {
    let concurrency = pace.concurrency.max(1);
    let mut in_flight: tokio::task::JoinSet<()> = tokio::task::JoinSet::new();
    // The key of each attempt in flight, by its task.
    let mut busy: HashMap<tokio::task::Id, O::Key> = HashMap::new();
    loop {
        {
            let Some(inner) = relay.upgrade() else {
                return;
            };
            if inner.shutdown.is_triggered() {
                while in_flight.join_next().await.is_some() {}
                return;
            }
        }
        // Fill the free slots. Rows come the most overdue first, so a key's first row is its item due first;
        // when one key's rows filled a read, read again without the keys just started.
        let mut reads = 0;
        while in_flight.len() < concurrency && reads <= concurrency {
            reads += 1;
            let free = concurrency - in_flight.len();
            let keys: Vec<O::Key> = busy.values().cloned().collect();
            let limit = u32::try_from(free).unwrap_or(u32::MAX);
            let due = match outbox.due(Timestamp::now(), &keys, limit).await {
                Ok(due) => due,
                Err(e) => {
                    tracing::warn!(error = %e, outbox = O::NAME, "cannot read the due items");
                    break;
                }
            };
            let (read, mut skipped) = (due.len(), false);
            for item in due {
                let key = O::key(&item);
                if in_flight.len() >= concurrency || busy.values().any(|k| *k == key) {
                    skipped = true;
                    continue;
                }
                let attempt = outbox.clone().attempt(item);
                let handle = in_flight.spawn(async move {
                    if let Err(e) = attempt.await {
                        tracing::warn!(error = %e, outbox = O::NAME, "cannot record an attempt");
                        // The item is still due: not at once again. The key stays busy a while (short, so
                        // a shutdown still waits for it).
                        tokio::time::sleep(pace.poll_every.min(AFTER_UNRECORDED)).await;
                    }
                });
                busy.insert(handle.id(), key);
            }
            if !(skipped && read >= free) {
                break;
            }
        }
        let wait = if in_flight.len() >= concurrency {
            // Every slot is taken: an attempt that ends wakes the loop.
            pace.poll_every
        } else {
            let keys: Vec<O::Key> = busy.values().cloned().collect();
            let next = outbox.next_due(&keys).await.unwrap_or_else(|e| {
                tracing::warn!(error = %e, outbox = O::NAME, "cannot read when the next item is due");
                None
            });
            match next {
                // Due now but not started (it came due meanwhile, or the read failed): look again shortly.
                Some(at) if until(at).is_zero() => RECHECK,
                Some(at) => until(at).min(pace.poll_every),
                None => pace.poll_every,
            }
        };
        tokio::select! {
            Some(done) = in_flight.join_next_with_id(), if !in_flight.is_empty() => {
                // This one and any other that ended meanwhile: their slots and keys are free again.
                let mut done = Some(done);
                while let Some(ended) = done {
                    let id = match ended {
                        Ok((id, ())) => id,
                        Err(e) => {
                            tracing::error!(error = %e, outbox = O::NAME, "an attempt panicked");
                            e.id()
                        }
                    };
                    busy.remove(&id);
                    done = in_flight.try_join_next_with_id();
                }
            }
            () = kick.notified() => {}
            () = tokio::time::sleep(wait) => {}
        }
    }
}

/// How long a key stays busy after an attempt whose outcome could not be recorded.
const AFTER_UNRECORDED: Duration = Duration::from_secs(1);

/// The wait of [`deliver`] when items are due but were not started although slots are free.
const RECHECK: Duration = Duration::from_millis(50);

/// The time from now until `at` (zero when past).
fn until(at: Timestamp) -> Duration {
    let ms = at.millis().saturating_sub(Timestamp::now().millis());
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::hmac;

    #[test]
    fn backoff_doubles_up_to_its_cap() {
        let s = WebhookSettings::default();
        let waits: Vec<u64> = (1..=12).map(|n| s.backoff(n).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 600, 600]);
        assert_eq!(s.backoff(u32::MAX), Duration::from_secs(600));
    }

    #[test]
    fn the_signature_is_hmac_sha256_over_time_dot_body() {
        let body = br#"{"id":"evt_1"}"#;
        let header = signature("whsec_0123456789abcdef", 1_800_000_000, body);
        // Computed independently with Python's hmac module (the snippet of docs/webhooks.md).
        assert_eq!(
            header,
            "t=1800000000,v1=1b747fba732f4b4d62dd4147ec50c7ed04a385c1290c2ae75c2cb2b1ae03aa9b"
        );
        let (_, v1) = header.split_once(",v1=").expect("two parts");
        let key = hmac::Key::new(hmac::HMAC_SHA256, b"whsec_0123456789abcdef");
        let mut message = b"1800000000.".to_vec();
        message.extend_from_slice(body);
        let tag = data_encoding::HEXLOWER
            .decode(v1.as_bytes())
            .expect("lowercase hex");
        hmac::verify(&key, &message, &tag).expect("valid");
        assert_eq!(v1.len(), 64);
    }
}
