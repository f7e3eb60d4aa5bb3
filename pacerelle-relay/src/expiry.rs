//! The expirer: writes `expired` into the database for pending questions past their expiry, queues their
//! `question.expired` webhook events and stores their `update` items (once each: the state change, the event
//! and the item share a transaction), then wakes the agents' question waiters and the devices' conversations.
//!
//! Reads already show such a question as expired ([`pacerelle_core::question::QuestionRecord::state_at`]); this
//! task makes it durable and timely for the webhook. It sleeps until the next expiry (at most
//! [`EXPIRY_POLL`]) and is woken when a question is created, so an earlier expiry is never overslept.

use std::sync::{Arc, Weak};
use std::time::Duration;

use pacerelle_core::Timestamp;
use tokio::sync::Notify;

use crate::app::Inner;
use crate::wake::Topic;

/// Longest sleep between two passes.
const EXPIRY_POLL: Duration = Duration::from_secs(30);
/// Questions expired per transaction at most.
const EXPIRY_BATCH: u32 = 100;
/// Slack after an expiry before the pass, so that the relay's clock has certainly passed it.
const SLACK: Duration = Duration::from_millis(5);

/// One pass: expires what is due, wakes the agents' question waiters, the devices' conversations and the
/// deliverer. Returns when the next
/// pending question expires.
async fn pass(inner: &Inner) -> Result<Option<Timestamp>, crate::StoreError> {
    loop {
        let done = inner.store.expire_due(Timestamp::now(), EXPIRY_BATCH).await?;
        for agent_id in &done.agents {
            inner.wakes.publish(&Topic::Questions(agent_id.clone()), 0);
        }
        // Each expiry stored an `update` item for the devices the question was sealed for.
        for update in &done.updates {
            inner.wakes.publish(
                &Topic::Conversation(update.agent_id.clone()),
                update.cursor().seq(),
            );
        }
        if done.events {
            inner.webhook_kick.notify_one();
        }
        if !done.more {
            return inner.store.next_expiry().await;
        }
    }
}

/// The expirer task: runs until the relay shuts down or is dropped.
pub(crate) async fn expirer(relay: Weak<Inner>, kick: Arc<Notify>) {
    loop {
        let next = {
            let Some(inner) = relay.upgrade() else {
                return;
            };
            if inner.shutdown.is_triggered() {
                return;
            }
            match pass(&inner).await {
                Ok(next) => next,
                Err(e) => {
                    tracing::warn!(error = %e, "expiring questions failed");
                    None
                }
            }
        };
        let wait = match next {
            Some(at) => {
                let ms = at.millis().saturating_sub(Timestamp::now().millis());
                (Duration::from_millis(u64::try_from(ms).unwrap_or(0)) + SLACK).min(EXPIRY_POLL)
            }
            None => EXPIRY_POLL,
        };
        tokio::select! {
            () = kick.notified() => {}
            () = tokio::time::sleep(wait) => {}
        }
    }
}
