//! Delivered marks queued and not yet committed, per agent: the one piece both backends use to keep the
//! `redelivered` flag exact while the mark rides outside the wait's answer (ADR 0001, point 6).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::Notify;

/// How long a wait's read waits for a delivered mark of the same agent still being written (see
/// [`PendingMarks`]) before it reads without it. Only a database that does not answer takes that long; the
/// read then returns what it finds, and only a `redelivered` flag can be missing.
const MARK_SETTLE: Duration = Duration::from_secs(10);

/// Delivered marks started by this relay instance and not yet committed: per agent, how many, and the highest
/// sequence number they cover; and a signal each time one ends. A wait that may return those tasks again waits
/// for them first, so that their `redelivered` flag is exact (an agent that restarts at once). Marks written
/// by another instance are not seen here: an agent that moves to another instance within the moment a mark
/// takes to commit may get a task again without the flag (never lose one).
#[derive(Debug, Default)]
pub(crate) struct PendingMarks {
    marks: Mutex<HashMap<String, (usize, i64)>>,
    ended: Notify,
}

impl PendingMarks {
    /// A mark of this agent's tasks up to `through` is queued.
    pub(crate) fn add(&self, agent_id: &str, through: i64) {
        let mut marks = self.marks.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let entry = marks.entry(agent_id.to_string()).or_insert((0, through));
        entry.0 += 1;
        entry.1 = entry.1.max(through);
    }

    /// One of this agent's marks is written (or failed): it no longer holds a wait back.
    pub(crate) fn done(&self, agent_id: &str) {
        {
            let mut marks = self.marks.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            if let Some(entry) = marks.get_mut(agent_id) {
                entry.0 = entry.0.saturating_sub(1);
                if entry.0 == 0 {
                    marks.remove(agent_id);
                }
            }
        }
        self.ended.notify_waiters();
    }

    /// Whether a mark not yet committed covers a task after `after`.
    pub(crate) fn pending_beyond(&self, agent_id: &str, after: i64) -> bool {
        self.marks
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(agent_id)
            .is_some_and(|(_, through)| *through > after)
    }

    /// Returns once no mark of this agent beyond `after` is pending (or after [`MARK_SETTLE`]): at once, with no
    /// timer, when none is.
    pub(crate) async fn settle(&self, agent_id: &str, after: i64) {
        if !self.pending_beyond(agent_id, after) {
            return;
        }
        let waited = tokio::time::timeout(MARK_SETTLE, async {
            loop {
                // Registered before the check: a mark that ends between the check and the await still wakes it.
                let ended = self.ended.notified();
                if !self.pending_beyond(agent_id, after) {
                    return;
                }
                ended.await;
            }
        })
        .await;
        if waited.is_err() {
            tracing::warn!("a delivered mark took too long to commit; the wait reads without it");
        }
    }
}
