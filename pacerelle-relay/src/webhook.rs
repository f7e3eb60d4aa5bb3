//! The webhook deliverer: sends the events of the outbox (`docs/webhooks.md`, `docs/adr/0002-webhook-outbox.md`).
//!
//! Events are queued in the database in the same transaction as the question's state change. This task reads
//! the due ones, POSTs each to its agent's webhook as it is at that moment, signed with its secret, and
//! records the outcome in a committed write: a 2xx marks the event delivered (it is never sent again, across
//! restarts too); anything else schedules another attempt with exponential backoff, until the event is given
//! up as `failed`. It wakes when an event is queued and polls every few seconds.

use std::sync::{Arc, Weak};
use std::time::Duration;

use pacerelle_core::Timestamp;
use pacerelle_core::wire::{EVENT_ID_HEADER, SIGNATURE_HEADER};
use tokio::sync::Notify;

use crate::app::Inner;
use crate::store::DueEvent;
use crate::store::sqlite::Target;

/// Events attempted together at most.
const BATCH: u32 = 16;
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
}

impl Default for WebhookSettings {
    /// 10 s per attempt; retries after 1 s, 2 s, 4 s … at most every 10 minutes; given up after 24 hours or
    /// 150 attempts (about 24 hours at that pace); a poll every 5 s.
    fn default() -> Self {
        WebhookSettings {
            timeout: Duration::from_secs(10),
            backoff_base: Duration::from_secs(1),
            backoff_max: Duration::from_secs(600),
            max_attempts: 150,
            give_up_after: Duration::from_secs(24 * 3600),
            poll_every: Duration::from_secs(5),
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

async fn attempt(
    client: reqwest::Client,
    event: DueEvent,
    url: String,
    secret: String,
) -> (DueEvent, Attempt) {
    let t = Timestamp::now().millis().div_euclid(1000);
    let signature = signature(&secret, t, event.body.as_bytes());
    let sent = client
        .post(&url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header(EVENT_ID_HEADER, &event.event_id)
        .header(SIGNATURE_HEADER, signature)
        .body(event.body.clone())
        .send()
        .await;
    let outcome = match sent {
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
    };
    (event, outcome)
}

/// Records an attempt's outcome. A failed attempt is tried again after the backoff, unless the event is too
/// old or was tried too often.
async fn record(inner: &Inner, event: &DueEvent, outcome: Attempt) -> Result<(), crate::StoreError> {
    let now = Timestamp::now();
    match outcome {
        Ok(status) => {
            tracing::debug!(event = %event.event_id, status, "webhook event delivered");
            inner.store.event_delivered(&event.event_id, status, now).await
        }
        Err((status, error)) => {
            let settings = &inner.webhooks;
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
            inner
                .store
                .event_attempt_failed(&event.event_id, status, &error, next)
                .await
        }
    }
}

/// Attempts every due event (a batch at a time, in parallel within a batch). Returns when the next event is
/// due, or none when none is pending; an error ends the round (the next poll retries).
async fn round(inner: &Inner, client: &reqwest::Client) -> Result<Option<Timestamp>, crate::StoreError> {
    loop {
        let due = inner.store.due_events(Timestamp::now(), BATCH).await?;
        let full = due.len() >= BATCH as usize;
        let mut attempts = tokio::task::JoinSet::new();
        for event in due {
            match event.target.clone() {
                Target::Webhook { url, secret } => {
                    attempts.spawn(attempt(client.clone(), event, url, secret));
                }
                Target::Removed => {
                    // The webhook was removed after the event was read; nowhere to send it.
                    inner
                        .store
                        .event_attempt_failed(&event.event_id, None, "the webhook was removed", None)
                        .await?;
                }
                Target::Unreadable => {
                    // Nothing can sign it; tried again with the usual backoff, so a webhook set again in time
                    // still gets it.
                    record(inner, &event, Err((None, UNREADABLE.to_string()))).await?;
                }
            }
        }
        while let Some(done) = attempts.join_next().await {
            match done {
                Ok((event, outcome)) => record(inner, &event, outcome).await?,
                Err(e) => tracing::error!(error = %e, "a webhook attempt panicked"),
            }
        }
        if !full {
            return inner.store.next_event_due().await;
        }
    }
}

/// The deliverer task: runs until the relay shuts down or is dropped.
pub(crate) async fn deliverer(relay: Weak<Inner>, kick: Arc<Notify>) {
    let (client, poll_every) = {
        let Some(inner) = relay.upgrade() else {
            return;
        };
        match client(&inner.webhooks) {
            Ok(client) => (client, inner.webhooks.poll_every),
            Err(e) => {
                tracing::error!(error = %e, "cannot build the webhook HTTP client; webhooks are not delivered");
                return;
            }
        }
    };
    loop {
        let next = {
            let Some(inner) = relay.upgrade() else {
                return;
            };
            if inner.shutdown.is_triggered() {
                return;
            }
            match round(&inner, &client).await {
                Ok(next) => next,
                Err(e) => {
                    tracing::warn!(error = %e, "webhook delivery round failed");
                    None
                }
            }
        };
        let now = Timestamp::now();
        let wait = match next {
            Some(at) => {
                Duration::from_millis(u64::try_from(at.millis().saturating_sub(now.millis())).unwrap_or(0))
                    .min(poll_every)
            }
            None => poll_every,
        };
        tokio::select! {
            () = kick.notified() => {}
            () = tokio::time::sleep(wait) => {}
        }
    }
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
