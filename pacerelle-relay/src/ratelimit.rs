//! Per-address token buckets for sign-ups and pairing claims (DESIGN §11).
//!
//! Each client address has one bucket per [`Limit`]: a request takes a token; tokens come back at a steady
//! rate up to a burst. Loopback addresses get a much larger bucket, since everything on one machine (tests,
//! `pacerelle up`, a local reverse proxy) shares them. Buckets live in memory and start full after a restart.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

/// What is being limited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Limit {
    /// `POST /v1/agents`.
    Registration,
    /// `POST /v1/pairings/{id}/claim`.
    Claim,
}

/// Burst and refill per minute of one bucket.
#[derive(Debug, Clone, Copy)]
struct Rate {
    burst: f64,
    per_minute: f64,
}

/// Other addresses: 10 a minute, bursts of 20.
const REMOTE: Rate = Rate {
    burst: 20.0,
    per_minute: 10.0,
};
/// Loopback: 1000 a minute, bursts of 1000.
const LOOPBACK: Rate = Rate {
    burst: 1000.0,
    per_minute: 1000.0,
};

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// The buckets of every address seen recently.
#[derive(Debug, Default)]
pub(crate) struct RateLimiter {
    buckets: Mutex<HashMap<(Limit, IpAddr), Bucket>>,
}

fn rate_for(ip: IpAddr) -> Rate {
    let loopback = match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
    };
    if loopback { LOOPBACK } else { REMOTE }
}

impl RateLimiter {
    fn lock(&self) -> MutexGuard<'_, HashMap<(Limit, IpAddr), Bucket>> {
        self.buckets
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Takes a token for this address; false when its bucket is empty.
    pub(crate) fn allow(&self, limit: Limit, ip: IpAddr) -> bool {
        self.allow_at(limit, ip, Instant::now())
    }

    fn allow_at(&self, limit: Limit, ip: IpAddr, now: Instant) -> bool {
        let rate = rate_for(ip);
        let mut buckets = self.lock();
        let bucket = buckets.entry((limit, ip)).or_insert(Bucket {
            tokens: rate.burst,
            at: now,
        });
        let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * rate.per_minute / 60.0).min(rate.burst);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Drops buckets that have refilled completely (they behave like new ones).
    pub(crate) fn forget_full(&self) {
        let now = Instant::now();
        self.lock().retain(|(_, ip), b| {
            let rate = rate_for(*ip);
            let elapsed = now.saturating_duration_since(b.at).as_secs_f64();
            b.tokens + elapsed * rate.per_minute / 60.0 < rate.burst
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_remote_address_gets_its_burst_then_one_token_every_six_seconds() {
        let limiter = RateLimiter::default();
        let ip: IpAddr = "203.0.113.9".parse().expect("an address");
        let t0 = Instant::now();
        for _ in 0..20 {
            assert!(limiter.allow_at(Limit::Claim, ip, t0));
        }
        assert!(!limiter.allow_at(Limit::Claim, ip, t0));
        // Another kind and another address have their own buckets.
        assert!(limiter.allow_at(Limit::Registration, ip, t0));
        assert!(limiter.allow_at(Limit::Claim, "203.0.113.10".parse().expect("an address"), t0));
        assert!(!limiter.allow_at(Limit::Claim, ip, t0 + Duration::from_secs(5)));
        assert!(limiter.allow_at(Limit::Claim, ip, t0 + Duration::from_secs(7)));
    }

    #[test]
    fn loopback_is_generous() {
        let limiter = RateLimiter::default();
        let t0 = Instant::now();
        for ip in ["127.0.0.1", "::1", "::ffff:127.0.0.1"] {
            let ip: IpAddr = ip.parse().expect("an address");
            for _ in 0..500 {
                assert!(limiter.allow_at(Limit::Registration, ip, t0));
            }
        }
    }
}
