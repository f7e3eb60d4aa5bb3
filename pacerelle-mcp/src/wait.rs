//! Long waits that survive MCP hosts: bounded by a deadline, ended at once by the client's cancellation,
//! and reported by progress notifications when the client asked for them.
//!
//! The wait itself is one relay long-poll; the progress ticker runs beside it. Ending the wait drops the
//! in-flight request, which closes its connection, so the relay stops parking it too.

use std::future::Future;
use std::time::{Duration, Instant};

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleServer};
use tokio_util::sync::CancellationToken;

/// Progress is notified this often (the issue asks for at least every 15 s).
pub const PROGRESS_EVERY: Duration = Duration::from_secs(10);
/// The first notification comes this soon, so that a wait answered at once sends none.
pub const FIRST_PROGRESS: Duration = Duration::from_secs(1);

/// How a parked future ended.
#[derive(Debug)]
pub enum Parked<T> {
    /// It finished.
    Done(T),
    /// The client cancelled the request.
    Cancelled,
    /// The deadline passed first.
    Deadline,
}

/// Where and how to report progress.
#[derive(Debug)]
pub struct Progress {
    peer: Peer<RoleServer>,
    token: ProgressToken,
    total: Duration,
    what: &'static str,
}

impl Progress {
    /// Progress for a wait of `total`, described as `what` ("Listening for tasks from the phone").
    pub fn new(peer: Peer<RoleServer>, token: ProgressToken, total: Duration, what: &'static str) -> Self {
        Progress {
            peer,
            token,
            total,
            what,
        }
    }

    async fn notify(&self, elapsed: Duration) {
        let secs = elapsed.as_secs();
        let param = ProgressNotificationParam::new(self.token.clone(), secs as f64)
            .with_total(self.total.as_secs() as f64)
            .with_message(format!("{} ({secs} s of {} s)", self.what, self.total.as_secs()));
        if let Err(e) = self.peer.notify_progress(param).await {
            tracing::debug!(error = %e, "progress notification not sent");
        }
    }
}

/// Runs `work` until it finishes, `ct` is cancelled or `deadline` passes, notifying progress after
/// [`FIRST_PROGRESS`] and then every [`PROGRESS_EVERY`] when `progress` is given. Whatever ends first drops
/// the others.
pub async fn park<T>(
    work: impl Future<Output = T>,
    deadline: Duration,
    ct: &CancellationToken,
    progress: Option<Progress>,
) -> Parked<T> {
    let started = Instant::now();
    let mut work = std::pin::pin!(work);
    let mut sleep = std::pin::pin!(tokio::time::sleep(deadline));
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + FIRST_PROGRESS, PROGRESS_EVERY);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            _ = ct.cancelled() => return Parked::Cancelled,
            out = &mut work => return Parked::Done(out),
            _ = &mut sleep => return Parked::Deadline,
            _ = ticker.tick(), if progress.is_some() => {
                if let Some(p) = &progress {
                    p.notify(started.elapsed()).await;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn finishes_cancels_and_times_out() {
        let ct = CancellationToken::new();
        assert!(matches!(
            park(async { 7 }, Duration::from_secs(5), &ct, None).await,
            Parked::Done(7)
        ));
        assert!(matches!(
            park(std::future::pending::<()>(), Duration::from_millis(10), &ct, None).await,
            Parked::Deadline
        ));
        ct.cancel();
        assert!(matches!(
            park(std::future::pending::<()>(), Duration::from_secs(60), &ct, None).await,
            Parked::Cancelled
        ));
    }
}
