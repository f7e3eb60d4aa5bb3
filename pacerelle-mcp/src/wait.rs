//! Long waits that survive MCP hosts: bounded by a deadline, ended at once by the client's cancellation,
//! and reported by progress notifications when the client asked for them.
//!
//! The wait itself is one relay long-poll; the progress ticker runs beside it. Ending the wait drops the
//! in-flight request, which closes its connection, so the relay stops parking it too.
//!
//! `wait_for_messages` and `wait_for_answer` follow the same rules: `timeoutSeconds` from 0 to 55, default
//! 30 ([`timeout_of`]), and the wait is ended here [`ANSWER_GRACE`] after it if the relay has not answered.

use std::future::Future;
use std::time::{Duration, Instant};

use pacerelle_client::core::wire::MAX_WAIT_SECONDS;
use rmcp::ErrorData as McpError;
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleServer};
use tokio_util::sync::CancellationToken;

/// Progress is notified this often (the issue asks for at least every 15 s).
pub const PROGRESS_EVERY: Duration = Duration::from_secs(10);
/// The first notification comes this soon, so that a wait answered at once sends none.
pub const FIRST_PROGRESS: Duration = Duration::from_secs(1);

/// Seconds a wait lasts when `timeoutSeconds` is not given.
pub const DEFAULT_TIMEOUT_SECONDS: u64 = 30;
/// Time allowed beyond `timeoutSeconds` for the relay's answer to travel before the wait is ended here.
pub const ANSWER_GRACE: Duration = Duration::from_secs(2);

/// Checks a `timeoutSeconds` argument: 0 to 55, default 30.
pub fn timeout_of(seconds: Option<i64>) -> Result<u64, McpError> {
    match seconds {
        None => Ok(DEFAULT_TIMEOUT_SECONDS),
        Some(s) if (0..=MAX_WAIT_SECONDS as i64).contains(&s) => Ok(s as u64),
        Some(s) => Err(McpError::invalid_params(
            format!("timeoutSeconds must be between 0 and {MAX_WAIT_SECONDS} (got {s})"),
            None,
        )),
    }
}

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

    #[test]
    fn timeouts() {
        assert_eq!(timeout_of(None).expect("default"), 30);
        assert_eq!(timeout_of(Some(0)).expect("zero"), 0);
        assert_eq!(timeout_of(Some(55)).expect("max"), 55);
        assert!(timeout_of(Some(56)).is_err());
        assert!(timeout_of(Some(-1)).is_err());
    }

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
