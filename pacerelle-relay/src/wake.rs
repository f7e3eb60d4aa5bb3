//! Long-poll wake-ups and shutdown.
//!
//! A waiter subscribes to its topic **before** it queries the database, then parks on the subscription.
//! Writers publish after their commit. A `tokio::sync::watch` channel remembers that a value was published
//! since the subscription, so a commit that lands between the query and the park still wakes the waiter:
//! no wake-up is lost. A topic's channel is dropped when its last subscriber goes.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use tokio::sync::watch;

/// What a waiter waits for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Topic {
    /// New tasks for an agent (its inbox), or a change of its lease.
    Inbox(String),
    /// New items in the conversations of an agent's devices.
    Conversation(String),
    /// A question of an agent changed state (answered, cancelled, expired).
    Questions(String),
}

impl Topic {
    /// The topic as text, for another instance: `inbox:<agent>`, `conversation:<agent>`, `questions:<agent>`.
    pub(crate) fn key(&self) -> String {
        match self {
            Topic::Inbox(agent) => format!("inbox:{agent}"),
            Topic::Conversation(agent) => format!("conversation:{agent}"),
            Topic::Questions(agent) => format!("questions:{agent}"),
        }
    }

    /// The topic a [`Topic::key`] names.
    fn from_key(key: &str) -> Option<Topic> {
        let (kind, agent) = key.split_once(':')?;
        let agent = agent.to_string();
        match kind {
            "inbox" => Some(Topic::Inbox(agent)),
            "conversation" => Some(Topic::Conversation(agent)),
            "questions" => Some(Topic::Questions(agent)),
            _ => None,
        }
    }
}

/// The channels of every topic that has a waiter now.
#[derive(Debug, Default)]
pub(crate) struct Wakes {
    topics: Mutex<HashMap<Topic, watch::Sender<u64>>>,
    /// Where this instance's publications go to reach the other instances (several relays on one PostgreSQL
    /// database, ADR 0003); unset for a relay alone.
    outbound: std::sync::OnceLock<tokio::sync::mpsc::UnboundedSender<String>>,
    /// Notified at every publication that may follow queued pushes ([`Wakes::publish`], and one from another
    /// instance; not [`Wakes::publish_no_push`]): the push deliverer listens. Also notified when the relay stops.
    pub(crate) any: std::sync::Arc<tokio::sync::Notify>,
}

impl Wakes {
    fn lock(&self) -> MutexGuard<'_, HashMap<Topic, watch::Sender<u64>>> {
        // The map stays consistent even if a holder panicked: every operation is a single insert or remove.
        self.topics
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Subscribes to a topic; publications from now on wake the subscription.
    pub(crate) fn subscribe(&self, topic: Topic) -> Subscription<'_> {
        let rx = self
            .lock()
            .entry(topic.clone())
            .or_insert_with(|| watch::channel(0).0)
            .subscribe();
        Subscription {
            rx: Some(rx),
            topic,
            wakes: self,
        }
    }

    /// Wakes every subscriber of a topic (call after the commit that they should see), and the push deliverer:
    /// the commit may have queued pushes.
    pub(crate) fn publish(&self, topic: &Topic, seq: u64) {
        self.publish_here(topic, seq);
        self.any.notify_one();
        self.forward(topic);
    }

    /// [`Wakes::publish`] after a commit that queued no push — a phone's task: pushes carry what an agent
    /// sends to phones, never what a phone sent. The push deliverer sleeps on; woken, it would read its outbox
    /// for nothing (two reads per wake, a tenth of the relay's time under a flood of tasks).
    pub(crate) fn publish_no_push(&self, topic: &Topic, seq: u64) {
        self.publish_here(topic, seq);
        self.forward(topic);
    }

    /// Sends a publication to the other instances, if any.
    fn forward(&self, topic: &Topic) {
        if let Some(out) = self.outbound.get() {
            let _ = out.send(topic.key());
        }
    }

    /// Wakes this instance's waiters on `topic` only.
    fn publish_here(&self, topic: &Topic, seq: u64) {
        if let Some(tx) = self.lock().get(topic) {
            tx.send_replace(seq);
        }
    }

    /// Sends this instance's publications to `out` from now on, for the other instances.
    pub(crate) fn forward_to(&self, out: tokio::sync::mpsc::UnboundedSender<String>) {
        let _ = self.outbound.set(out);
    }

    /// A publication from another instance ([`Topic::key`]); keys this relay does not know are ignored.
    pub(crate) fn publish_from_elsewhere(&self, key: &str) {
        if let Some(topic) = Topic::from_key(key) {
            self.publish_here(&topic, 0);
            // The other instance's commit may have queued pushes that this instance's deliverer can take.
            self.any.notify_one();
        }
    }

    /// Wakes every waiter of this instance (after a gap in the publications from the others: each re-reads).
    pub(crate) fn wake_all(&self) {
        for tx in self.lock().values() {
            tx.send_modify(|v| *v = v.wrapping_add(1));
        }
        self.any.notify_one();
    }

    /// Topics with a subscriber now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }
}

/// A subscription to one topic; dropping it removes the topic's channel if it was the last subscriber.
#[derive(Debug)]
pub(crate) struct Subscription<'a> {
    rx: Option<watch::Receiver<u64>>,
    topic: Topic,
    wakes: &'a Wakes,
}

impl Subscription<'_> {
    /// Resolves at the first publication since the subscription (or the previous `changed`).
    pub(crate) async fn changed(&mut self) {
        if let Some(rx) = self.rx.as_mut() {
            // An error means the channel is gone, which cannot happen while we hold a receiver; return.
            let _ = rx.changed().await;
        }
    }
}

impl Drop for Subscription<'_> {
    fn drop(&mut self) {
        let mut topics = self.wakes.lock();
        self.rx = None;
        if topics.get(&self.topic).is_some_and(|tx| tx.receiver_count() == 0) {
            topics.remove(&self.topic);
        }
    }
}

/// The relay's shutdown signal: parked waits end when it fires.
#[derive(Debug)]
pub(crate) struct Shutdown {
    tx: watch::Sender<bool>,
}

impl Default for Shutdown {
    fn default() -> Self {
        Shutdown {
            tx: watch::channel(false).0,
        }
    }
}

impl Shutdown {
    /// Fires the signal (idempotent).
    pub(crate) fn trigger(&self) {
        self.tx.send_replace(true);
    }

    /// Whether the signal fired.
    pub(crate) fn is_triggered(&self) -> bool {
        *self.tx.borrow()
    }

    /// Resolves once the signal fired (at once if it already did).
    pub(crate) async fn fired(&self) {
        let mut rx = self.tx.subscribe();
        // The sender lives as long as `self`, so this only returns when the value is true.
        let _ = rx.wait_for(|fired| *fired).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_publication_between_subscribe_and_park_is_not_lost() {
        let wakes = Wakes::default();
        let topic = Topic::Inbox("ag_1".into());
        let mut sub = wakes.subscribe(topic.clone());
        wakes.publish(&topic, 7); // lands before the waiter parks
        tokio::time::timeout(Duration::from_secs(5), sub.changed())
            .await
            .expect("the earlier publication wakes the waiter");
    }

    #[tokio::test]
    async fn other_topics_do_not_wake() {
        let wakes = Wakes::default();
        let mut sub = wakes.subscribe(Topic::Inbox("ag_1".into()));
        wakes.publish(&Topic::Inbox("ag_2".into()), 1);
        wakes.publish(&Topic::Conversation("ag_1".into()), 1);
        assert!(
            tokio::time::timeout(Duration::from_millis(50), sub.changed())
                .await
                .is_err()
        );
    }

    #[tokio::test]
    async fn a_phones_task_wakes_its_waiters_but_not_the_push_deliverer() {
        let wakes = Wakes::default();
        let (out, mut sent) = tokio::sync::mpsc::unbounded_channel();
        wakes.forward_to(out);
        let topic = Topic::Inbox("ag_1".into());
        let mut sub = wakes.subscribe(topic.clone());
        wakes.publish_no_push(&topic, 4);
        tokio::time::timeout(Duration::from_secs(5), sub.changed())
            .await
            .expect("the agent's wait is woken");
        assert_eq!(sent.recv().await.as_deref(), Some("inbox:ag_1"));
        let push = wakes.any.clone();
        assert!(
            tokio::time::timeout(Duration::from_millis(50), push.notified())
                .await
                .is_err(),
            "no push can have been queued"
        );
        wakes.publish(&Topic::Conversation("ag_1".into()), 5);
        tokio::time::timeout(Duration::from_secs(5), push.notified())
            .await
            .expect("a commit that may have queued pushes wakes the deliverer");
        wakes.publish_from_elsewhere("questions:ag_1");
        tokio::time::timeout(Duration::from_secs(5), push.notified())
            .await
            .expect("so does another instance's");
    }

    #[tokio::test]
    async fn publications_go_out_and_come_in_by_key() {
        let wakes = Wakes::default();
        let (out, mut sent) = tokio::sync::mpsc::unbounded_channel();
        wakes.forward_to(out);
        let topic = Topic::Questions("ag_1".into());
        let mut sub = wakes.subscribe(topic.clone());
        wakes.publish(&topic, 3);
        assert_eq!(sent.recv().await.as_deref(), Some("questions:ag_1"));
        tokio::time::timeout(Duration::from_secs(5), sub.changed())
            .await
            .expect("woken here too");
        // From elsewhere: woken here, not sent out again.
        wakes.publish_from_elsewhere("questions:ag_1");
        tokio::time::timeout(Duration::from_secs(5), sub.changed())
            .await
            .expect("woken by the other instance");
        assert!(sent.try_recv().is_err());
        wakes.publish_from_elsewhere("nonsense");
        wakes.wake_all();
        tokio::time::timeout(Duration::from_secs(5), sub.changed())
            .await
            .expect("woken by wake_all");
    }

    #[test]
    fn channels_go_with_their_last_subscriber() {
        let wakes = Wakes::default();
        let a = wakes.subscribe(Topic::Inbox("ag_1".into()));
        let b = wakes.subscribe(Topic::Inbox("ag_1".into()));
        assert_eq!(wakes.len(), 1);
        drop(a);
        assert_eq!(wakes.len(), 1);
        drop(b);
        assert_eq!(wakes.len(), 0);
    }

    #[tokio::test]
    async fn shutdown_releases_waiters_even_after_the_fact() {
        let s = Shutdown::default();
        assert!(!s.is_triggered());
        s.trigger();
        tokio::time::timeout(Duration::from_secs(5), s.fired())
            .await
            .expect("already fired");
    }
}
