//! The one backoff of the client: pauses that double up to a cap, with jitter.

use std::future::Future;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};

/// Pauses between attempts: exponential from `first`, doubling up to `max`, each one lengthened by a
/// random jitter of up to as much again (so restarted agents do not all come back at the same instant).
///
/// The one backoff of the client's loops; built on `backon`'s exponential builder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The first pause.
    pub first: Duration,
    /// The longest pause before jitter.
    pub max: Duration,
}

impl Default for Backoff {
    /// 250 ms, doubling up to 10 s.
    fn default() -> Self {
        Backoff {
            first: Duration::from_millis(250),
            max: Duration::from_secs(10),
        }
    }
}

impl Backoff {
    /// Runs `call` until it succeeds, fails in a way no retry fixes, or the next pause would end after
    /// `deadline`, pausing by these delays while `again` says the error is worth another try (the runner's
    /// rule: [`ErrorKind::worth_retrying`](crate::ErrorKind::worth_retrying)). Returns the last result. For waits bounded by a caller's time,
    /// such as the MCP server's `wait_for_messages` across a relay restart.
    pub async fn retry_until<T, E, F, Fut>(
        &self,
        deadline: tokio::time::Instant,
        mut call: F,
        again: impl Fn(&E) -> bool,
    ) -> std::result::Result<T, E>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = std::result::Result<T, E>>,
    {
        let mut delays = self.delays();
        loop {
            match call().await {
                Err(e) if again(&e) => {
                    let pause = delays.next().unwrap_or(self.max);
                    if tokio::time::Instant::now() + pause >= deadline {
                        return Err(e);
                    }
                    tokio::time::sleep(pause).await;
                }
                other => return other,
            }
        }
    }

    /// An endless sequence of pauses; start a new one after a success.
    pub fn delays(&self) -> impl Iterator<Item = Duration> + Send + use<> {
        let first = self.first.min(self.max);
        ExponentialBuilder::new()
            .with_min_delay(first)
            .with_max_delay(self.max)
            .with_factor(2.0)
            .with_jitter()
            .without_max_times()
            .build()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_up_to_its_cap_with_jitter_of_up_to_as_much_again() {
        let backoff = Backoff {
            first: Duration::from_millis(100),
            max: Duration::from_millis(400),
        };
        let delays: Vec<Duration> = backoff.delays().take(6).collect();
        let bases = [100, 200, 400, 400, 400, 400];
        for (d, base) in delays.iter().zip(bases) {
            let base = Duration::from_millis(base);
            assert!(*d >= base && *d <= base * 2, "{d:?} for {base:?}");
        }
    }
}
