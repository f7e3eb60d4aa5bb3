//! Wake-ups across relay instances on one PostgreSQL database (ADR 0003): each instance sends its publications
//! with `NOTIFY` and listens for the others'.
//!
//! A payload is `<instance>|<topic>`: an instance hears its own notifications too, and ignores them — it woke its
//! own waiters when it published, and waking them again would end a wait that has nothing new.

use std::sync::Weak;
use std::time::Duration;

use sqlx::postgres::PgListener;
use tokio::sync::mpsc;

use super::PgStore;
use crate::wake::{Shutdown, Wakes};

/// What the bridge needs of the relay it serves: its local wake-ups and its shutdown signal. The relay's shared
/// state implements it, so the store never names the relay's types.
pub(crate) trait WakeHost: Send + Sync + 'static {
    /// The relay's local wake-ups: the bridge forwards their publications and delivers the other instances'.
    fn wakes(&self) -> &Wakes;
    /// The relay's shutdown signal: the listener stops when it fires.
    fn shutdown(&self) -> &Shutdown;
}

/// The notification channel of wake-ups.
const CHANNEL: &str = "pacerelle_wakes";
/// The notification channel of revocations: the payload is the id of a principal whose credential changed
/// (sent inside the revoking transaction, so delivered only once it committed).
pub(super) const PRINCIPALS_CHANNEL: &str = "pacerelle_principals";
/// How long the listener waits before it connects again after losing its connection.
const RECONNECT_AFTER: Duration = Duration::from_secs(1);

impl PgStore {
    /// Bridges the wake-ups of the relay `relay` with the other instances': its publications go out with
    /// `pg_notify` (after the commit they follow, as the routes publish them), the others' come in through a
    /// `LISTEN` connection. Each time that connection starts listening (at start, and after it was lost), every
    /// local waiter is woken to read again, since a publication may have passed meanwhile. Both tasks end with
    /// the relay.
    pub(crate) fn bridge_wakes<H: WakeHost>(&self, relay: Weak<H>) {
        let (out, queued) = mpsc::unbounded_channel();
        if let Some(inner) = relay.upgrade() {
            inner.wakes().forward_to(out);
        }
        let instance = pacerelle_core::ids::generate("rel");
        tokio::spawn(send(self.clone(), instance.clone(), queued));
        tokio::spawn(listen(self.clone(), instance, relay));
    }
}

/// Sends the queued publications, several at once when they pile up.
async fn send(store: PgStore, instance: String, mut queued: mpsc::UnboundedReceiver<String>) {
    let mut keys = Vec::new();
    while queued.recv_many(&mut keys, 256).await > 0 {
        keys.sort();
        keys.dedup();
        for key in &mut keys {
            *key = format!("{instance}|{key}");
        }
        // Committed without waiting for the disk (`synchronous_commit` off for this transaction alone): a
        // notification is delivered at commit all the same, and a wake-up is no data to keep — one lost in a
        // crash is made good by the listeners, which wake every waiter when they listen again. Waiting would
        // cost a synced commit per publication, and hold PostgreSQL's one lock on the notification queue
        // (which every notifying commit takes) through it.
        let sent = sqlx::query(
            "SELECT pg_notify($1, k) FROM set_config('synchronous_commit', 'off', true) AS c, unnest($2::text[]) AS k",
        )
            .bind(CHANNEL)
            .bind(&keys)
            .execute(&store.pool)
            .await;
        if let Err(e) = sent {
            // The other instances' waiters then find the change when their wait ends (at most 55 s).
            tracing::warn!(error = %e, "wake-ups not sent to the other instances");
        }
        keys.clear();
    }
}

/// Receives the other instances' publications until the relay is gone.
async fn listen<H: WakeHost>(store: PgStore, instance: String, relay: Weak<H>) {
    let own = format!("{instance}|");
    loop {
        if relay
            .upgrade()
            .is_none_or(|inner| inner.shutdown().is_triggered())
        {
            return;
        }
        let mut listener = match PgListener::connect_with(&store.pool).await {
            Ok(listener) => listener,
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for the other instances' wake-ups; trying again");
                tokio::time::sleep(RECONNECT_AFTER).await;
                continue;
            }
        };
        if let Err(e) = listener.listen_all([CHANNEL, PRINCIPALS_CHANNEL]).await {
            tracing::warn!(error = %e, "cannot listen for the other instances' wake-ups; trying again");
            tokio::time::sleep(RECONNECT_AFTER).await;
            continue;
        }
        // A publication or a revocation may have passed before this connection listened (at start, or while
        // it was lost): every waiter parked here reads again, and every credential is read again.
        store.principals.clear();
        if let Some(inner) = relay.upgrade() {
            inner.wakes().wake_all();
        }
        loop {
            let Some(inner) = relay.upgrade() else {
                return;
            };
            let shutdown = async { inner.shutdown().fired().await };
            tokio::select! {
                () = shutdown => return,
                received = listener.try_recv() => match received {
                    Ok(Some(note)) if note.channel() == PRINCIPALS_CHANNEL => {
                        store.principals.changed(note.payload());
                    }
                    Ok(Some(note)) => {
                        if let Some((_, key)) = note.payload().split_once('|')
                            && !note.payload().starts_with(&own)
                        {
                            inner.wakes().publish_from_elsewhere(key);
                        }
                    }
                    // The connection was lost: listen again on a new one.
                    Ok(None) => break,
                    Err(e) => {
                        tracing::warn!(error = %e, "lost the wake-ups of the other instances; listening again");
                        break;
                    }
                },
            }
        }
    }
}
