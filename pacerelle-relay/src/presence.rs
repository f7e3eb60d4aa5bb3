//! Presence (DESIGN §7): what the agent is doing, as the phone sees it.
//!
//! The relay tracks in memory, per agent, how many inbox waits are parked and when the last one started and
//! ended; with the counts and times from storage and the lease, [`presence`] chooses one [`Presence`]. The
//! in-memory part starts empty after a restart.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use pacerelle_core::Timestamp;
use pacerelle_core::wire::{Presence, SessionSummary};
use prometheus_client::metrics::gauge::Gauge;

use crate::store::{Lease, OpenSessionRow, StatusFacts};

/// A wait that ended less than this long ago still counts as listening.
pub(crate) const LISTENING_GRACE_MS: i64 = 5_000;
/// An agent that waited or sent a heartbeat less than this long ago is active; a task delivered longer
/// ago than this, with no wait since, suggests the agent waits for a confirmation on the computer.
pub(crate) const ACTIVE_MS: i64 = 60_000;

/// One agent's waits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Waits {
    /// Waits parked now.
    pub parked: u32,
    pub last_started: Option<Timestamp>,
    pub last_ended: Option<Timestamp>,
}

impl Waits {
    /// When the last wait started or ended.
    pub(crate) fn last_wait_at(&self) -> Option<Timestamp> {
        self.last_started.max(self.last_ended)
    }
}

/// One agent's waits, all sessions together and by session name.
#[derive(Debug, Default)]
struct AgentWaits {
    all: Waits,
    sessions: HashMap<String, Waits>,
}

impl AgentWaits {
    /// Applies `change` to the agent's waits and to those of `session`.
    fn each(&mut self, session: &str, change: impl Fn(&mut Waits)) {
        change(&mut self.all);
        change(self.sessions.entry(session.to_string()).or_default());
    }
}

/// Every agent's waits.
#[derive(Debug, Default)]
pub(crate) struct Activity {
    agents: Mutex<HashMap<String, AgentWaits>>,
    /// Waits parked now, all agents together (`pacerelle_parked_waits`).
    parked: Gauge,
}

impl Activity {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, AgentWaits>> {
        self.agents
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Records the start of an inbox wait of the agent's session `session`; the returned guard records its end
    /// when dropped.
    pub(crate) fn begin_wait(&self, agent_id: &str, session: &str) -> WaitGuard<'_> {
        let now = Timestamp::now();
        self.lock()
            .entry(agent_id.to_string())
            .or_default()
            .each(session, |w| w.last_started = Some(now));
        WaitGuard {
            activity: self,
            agent_id: agent_id.to_string(),
            session: session.to_string(),
            parked: false,
        }
    }

    /// The gauge of the waits parked now, all agents together, for `GET /metrics`.
    pub(crate) fn parked_gauge(&self) -> Gauge {
        self.parked.clone()
    }

    /// This agent's waits now, all sessions together.
    pub(crate) fn snapshot(&self, agent_id: &str) -> Waits {
        self.lock().get(agent_id).map(|a| a.all).unwrap_or_default()
    }

    /// The waits of the agent's session `session` now.
    pub(crate) fn session_snapshot(&self, agent_id: &str, session: &str) -> Waits {
        self.lock()
            .get(agent_id)
            .and_then(|a| a.sessions.get(session).copied())
            .unwrap_or_default()
    }

    /// Forgets agents idle for longer than `idle_ms`.
    pub(crate) fn forget_idle(&self, now: Timestamp, idle_ms: i64) {
        let recent = |w: &Waits| {
            w.parked > 0
                || w.last_wait_at()
                    .is_some_and(|t| t.millis() > now.millis().saturating_sub(idle_ms))
        };
        self.lock().retain(|_, a| {
            a.sessions.retain(|_, w| recent(w));
            recent(&a.all)
        });
    }
}

/// An inbox wait in progress.
#[derive(Debug)]
pub(crate) struct WaitGuard<'a> {
    activity: &'a Activity,
    agent_id: String,
    session: String,
    parked: bool,
}

impl WaitGuard<'_> {
    /// Marks the wait as parked (until the guard is dropped).
    pub(crate) fn park(&mut self) {
        if !self.parked {
            self.parked = true;
            self.activity
                .lock()
                .entry(self.agent_id.clone())
                .or_default()
                .each(&self.session, |w| w.parked += 1);
            self.activity.parked.inc();
        }
    }
}

impl Drop for WaitGuard<'_> {
    fn drop(&mut self) {
        let (parked, now) = (self.parked, Timestamp::now());
        let mut agents = self.activity.lock();
        agents
            .entry(std::mem::take(&mut self.agent_id))
            .or_default()
            .each(&self.session, |w| {
                if parked {
                    w.parked = w.parked.saturating_sub(1);
                }
                w.last_ended = Some(now);
            });
        if parked {
            self.activity.parked.dec();
        }
    }
}

/// Chooses the presence shown to the phone.
///
/// 1. a wait is parked now → `listening`;
/// 2. tasks are delivered and not processed: the oldest was delivered more than a minute ago and no wait
///    started since → `waiting_confirmation`; else, if the agent waited or sent a heartbeat within the last
///    minute → `busy`;
/// 3. a wait ended less than 5 s ago → `listening`;
/// 4. a session holds the lease → `connected`;
/// 5. otherwise → `offline`.
pub(crate) fn presence(
    now: Timestamp,
    waits: &Waits,
    facts: &StatusFacts,
    lease: Option<&Lease>,
) -> Presence {
    let now = now.millis();
    if waits.parked > 0 {
        return Presence::Listening;
    }
    let heartbeat = lease.map(|l| l.holder.last_heartbeat_at);
    if let Some(delivered) = facts.oldest_in_progress {
        let no_wait_since = waits.last_started.is_none_or(|s| s < delivered);
        if no_wait_since && now.saturating_sub(delivered.millis()) > ACTIVE_MS {
            return Presence::WaitingConfirmation;
        }
        let last_active = waits.last_wait_at().max(heartbeat);
        if last_active.is_some_and(|t| now.saturating_sub(t.millis()) < ACTIVE_MS) {
            return Presence::Busy;
        }
    }
    if waits
        .last_ended
        .is_some_and(|t| now.saturating_sub(t.millis()) < LISTENING_GRACE_MS)
    {
        return Presence::Listening;
    }
    if lease.is_some() {
        return Presence::Connected;
    }
    Presence::Offline
}

/// One open session as the status lists it: its presence chosen by [`presence`] from its own waits, its own
/// tasks in progress and its own lease (none once lapsed: then it is offline, unless it waited moments ago).
pub(crate) fn session_summary(now: Timestamp, row: &OpenSessionRow, waits: &Waits) -> SessionSummary {
    let facts = StatusFacts {
        oldest_in_progress: row.oldest_in_progress,
        ..StatusFacts::default()
    };
    let lease = row.live(now).then(|| Lease::from(row.clone()));
    SessionSummary {
        name: row.name.clone(),
        host: row.host.clone(),
        folder: row.folder.clone(),
        since: row.since,
        last_heartbeat_at: row.last_heartbeat_at,
        last_wait_at: waits.last_wait_at(),
        presence: presence(now, waits, &facts, lease.as_ref()),
        in_progress: row.in_progress,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pacerelle_core::wire::LeaseHolder;

    const NOW: i64 = 10_000_000;

    fn at(ms_ago: i64) -> Option<Timestamp> {
        Some(Timestamp(NOW - ms_ago))
    }

    fn lease() -> Lease {
        Lease {
            session_id: "ses_1".into(),
            holder: LeaseHolder {
                host: "laptop".into(),
                name: "default".into(),
                since: Timestamp(NOW - 100_000),
                last_heartbeat_at: Timestamp(NOW - 1_000),
            },
        }
    }

    fn in_progress(delivered_ms_ago: i64) -> StatusFacts {
        StatusFacts {
            oldest_in_progress: at(delivered_ms_ago),
            ..StatusFacts::default()
        }
    }

    #[test]
    fn parked_wait_is_listening_even_with_work_in_progress() {
        let waits = Waits {
            parked: 1,
            last_started: at(10),
            last_ended: None,
        };
        assert_eq!(
            presence(Timestamp(NOW), &waits, &in_progress(120_000), None),
            Presence::Listening
        );
    }

    #[test]
    fn old_delivery_without_a_wait_since_is_waiting_confirmation() {
        let waits = Waits {
            parked: 0,
            last_started: at(130_000),
            last_ended: at(120_000),
        };
        let l = lease();
        assert_eq!(
            presence(Timestamp(NOW), &waits, &in_progress(120_000), Some(&l)),
            Presence::WaitingConfirmation
        );
    }

    #[test]
    fn recent_delivery_with_recent_activity_is_busy() {
        let waits = Waits {
            parked: 0,
            last_started: at(11_000),
            last_ended: at(10_000),
        };
        assert_eq!(
            presence(Timestamp(NOW), &waits, &in_progress(10_000), None),
            Presence::Busy
        );
    }

    #[test]
    fn a_wait_that_just_returned_is_listening_then_connected_or_offline() {
        let just = Waits {
            parked: 0,
            last_started: at(3_000),
            last_ended: at(1_000),
        };
        let facts = StatusFacts::default();
        assert_eq!(presence(Timestamp(NOW), &just, &facts, None), Presence::Listening);
        let later = Waits {
            last_ended: at(6_000),
            ..just
        };
        let l = lease();
        assert_eq!(
            presence(Timestamp(NOW), &later, &facts, Some(&l)),
            Presence::Connected
        );
        assert_eq!(presence(Timestamp(NOW), &later, &facts, None), Presence::Offline);
    }

    #[test]
    fn activity_counts_parked_waits() {
        let activity = Activity::default();
        {
            let mut wait = activity.begin_wait("ag_1", "default");
            assert_eq!(activity.snapshot("ag_1").parked, 0);
            wait.park();
            wait.park();
            assert_eq!(activity.snapshot("ag_1").parked, 1);
            let mut other = activity.begin_wait("ag_2", "default");
            other.park();
            assert_eq!(activity.parked_gauge().get(), 2, "all agents together");
        }
        let w = activity.snapshot("ag_1");
        assert_eq!(w.parked, 0);
        assert_eq!(activity.parked_gauge().get(), 0);
        assert!(w.last_ended.is_some());
        activity.forget_idle(Timestamp::now().plus_millis(10_000), 1_000);
        assert_eq!(activity.snapshot("ag_1"), Waits::default());
    }
}
