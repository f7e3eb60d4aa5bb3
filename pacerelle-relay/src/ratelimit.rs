//! Per-address token buckets for sign-ups, pairing claims and failed authentications (DESIGN §11), and the
//! client address they are kept for.
//!
//! Each client address has one bucket per [`Limit`]: a request takes a token; tokens come back at a steady
//! rate up to a burst. Loopback addresses get a much larger bucket, since everything on one machine (tests,
//! `pacerelle up`, a local reverse proxy) shares them. Buckets live in memory and start full after a restart.
//!
//! Behind a reverse proxy every request comes from the proxy's address. With `--trusted-proxy CIDR`, a request
//! whose peer is in one of those networks is counted for the client the proxy names (`Forwarded: for=`, else
//! `X-Forwarded-For`), read from the right and skipping trusted hops; those headers are ignored from anyone
//! else, since a client can write them.
//!
//! Failed authentications are counted per address, not per claimed principal. A secret is 32 random bytes:
//! guessing one is out of reach at any rate, so a per-principal bucket would protect nothing, while it would
//! let anyone who knows an agent's or a device's id (an agent's id is in its pairing links) lock it out by
//! sending wrong secrets in its name.

use std::collections::HashMap;
use std::net::IpAddr;
use std::str::FromStr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

/// What is being limited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Limit {
    /// `POST /v1/agents`.
    Registration,
    /// `POST /v1/pairings/{id}/claim`.
    Claim,
    /// A credential that is missing, malformed or not recognised, on any authenticated route. An address out of
    /// tokens is refused before its credential is looked at, until the bucket refills.
    FailedAuth,
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
    /// How many buckets exist, updated under the lock: while none does, [`RateLimiter::exhausted`] (asked on
    /// every authenticated request) answers without taking the lock.
    tracked: AtomicUsize,
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
        let bucket = buckets.entry((limit, ip)).or_insert_with(|| {
            self.tracked.fetch_add(1, Ordering::Relaxed);
            Bucket {
                tokens: rate.burst,
                at: now,
            }
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

    /// Whether this address's bucket is empty now (takes nothing).
    pub(crate) fn exhausted(&self, limit: Limit, ip: IpAddr) -> bool {
        if self.tracked.load(Ordering::Relaxed) == 0 {
            // Nobody was limited lately. A bucket being created at this instant is seen by the next request.
            return false;
        }
        let now = Instant::now();
        let rate = rate_for(ip);
        self.lock().get(&(limit, ip)).is_some_and(|b| {
            let elapsed = now.saturating_duration_since(b.at).as_secs_f64();
            b.tokens + elapsed * rate.per_minute / 60.0 < 1.0
        })
    }

    /// Drops buckets that have refilled completely (they behave like new ones).
    pub(crate) fn forget_full(&self) {
        let now = Instant::now();
        let mut buckets = self.lock();
        buckets.retain(|(_, ip), b| {
            let rate = rate_for(*ip);
            let elapsed = now.saturating_duration_since(b.at).as_secs_f64();
            b.tokens + elapsed * rate.per_minute / 60.0 < rate.burst
        });
        self.tracked.store(buckets.len(), Ordering::Relaxed);
    }
}

/// A network in CIDR notation (`10.0.0.0/8`, `2001:db8::/32`, or one address).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    net: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// Whether `ip` is in this network (an IPv4-mapped IPv6 address counts as its IPv4 address).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        match (self.net, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.prefix)).unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(self.prefix)).unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

impl FromStr for Cidr {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let bad = || format!("{text:?} is not a network: expected an address or CIDR such as 10.0.0.0/8");
        let (addr, prefix) = match text.trim().split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (text.trim(), None),
        };
        let net: IpAddr = addr.parse().map_err(|_| bad())?;
        let max = if net.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(p) => p.parse::<u8>().ok().filter(|p| *p <= max).ok_or_else(bad)?,
            None => max,
        };
        Ok(Cidr { net, prefix })
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.net, self.prefix)
    }
}

/// The address a request is counted for: the peer, or — when the peer is a trusted proxy — the client the
/// forwarding headers name.
pub(crate) fn client_ip(trusted: &[Cidr], peer: IpAddr, headers: &axum::http::HeaderMap) -> IpAddr {
    let is_trusted = |ip: IpAddr| trusted.iter().any(|c| c.contains(ip));
    if !is_trusted(peer) {
        return peer;
    }
    // The hops as the proxies appended them, oldest first.
    let forwarded: Vec<IpAddr> = headers
        .get_all(axum::http::header::FORWARDED)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|element| {
            element.split(';').find_map(|pair| {
                let (name, value) = pair.trim().split_once('=')?;
                name.trim()
                    .eq_ignore_ascii_case("for")
                    .then(|| forwarded_for(value.trim()))?
            })
        })
        .collect();
    let hops = if forwarded.is_empty() {
        headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .filter_map(|hop| hop.trim().parse::<IpAddr>().ok())
            .collect()
    } else {
        forwarded
    };
    // From the right: the first hop not one of ours is the client; if all are ours, the oldest.
    hops.iter()
        .rev()
        .find(|ip| !is_trusted(**ip))
        .or_else(|| hops.first())
        .copied()
        .unwrap_or(peer)
}

/// The address of a `Forwarded` `for=` value: `192.0.2.1`, `"192.0.2.1:443"`, `"[2001:db8::1]:443"`.
fn forwarded_for(value: &str) -> Option<IpAddr> {
    let value = value.trim_matches('"');
    if let Some(rest) = value.strip_prefix('[') {
        return rest.split_once(']')?.0.parse().ok();
    }
    value
        .parse()
        .ok()
        .or_else(|| value.rsplit_once(':').and_then(|(host, _port)| host.parse().ok()))
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
    fn cidrs_parse_and_contain() {
        let net: Cidr = "10.1.0.0/16".parse().expect("a network");
        assert!(net.contains("10.1.200.3".parse().expect("ip")));
        assert!(net.contains("::ffff:10.1.0.9".parse().expect("ip")));
        assert!(!net.contains("10.2.0.1".parse().expect("ip")));
        let one: Cidr = "2001:db8::1".parse().expect("an address");
        assert!(one.contains("2001:db8::1".parse().expect("ip")));
        assert!(!one.contains("2001:db8::2".parse().expect("ip")));
        assert!(
            "0.0.0.0/0"
                .parse::<Cidr>()
                .expect("all")
                .contains("203.0.113.1".parse().expect("ip"))
        );
        for bad in ["10.0.0.0/33", "nope", "10.0.0.0/x", ""] {
            assert!(bad.parse::<Cidr>().is_err(), "{bad}");
        }
    }

    #[test]
    fn the_client_is_read_from_forwarding_headers_only_behind_a_trusted_proxy() {
        use axum::http::{HeaderMap, HeaderValue};
        let trusted: Vec<Cidr> = vec![
            "127.0.0.1".parse().expect("net"),
            "10.0.0.0/8".parse().expect("net"),
        ];
        let ip = |s: &str| s.parse::<IpAddr>().expect("ip");
        let headers = |name: &'static str, value: &'static str| {
            let mut h = HeaderMap::new();
            h.append(name, HeaderValue::from_static(value));
            h
        };
        let xff = headers("x-forwarded-for", "198.51.100.7, 203.0.113.9, 10.0.0.2");
        // From the proxy: the right-most hop that is not ours (the left ones can be written by the client).
        assert_eq!(client_ip(&trusted, ip("127.0.0.1"), &xff), ip("203.0.113.9"));
        // From anyone else, the headers are ignored.
        assert_eq!(client_ip(&trusted, ip("192.0.2.50"), &xff), ip("192.0.2.50"));
        assert_eq!(client_ip(&[], ip("127.0.0.1"), &xff), ip("127.0.0.1"));
        // `Forwarded` wins over X-Forwarded-For, with ports and IPv6 brackets.
        let mut both = headers(
            "forwarded",
            r#"for="[2001:db8::7]:4711";proto=https, for=10.0.0.3"#,
        );
        both.append("x-forwarded-for", HeaderValue::from_static("198.51.100.1"));
        assert_eq!(client_ip(&trusted, ip("127.0.0.1"), &both), ip("2001:db8::7"));
        let port = headers("forwarded", r#"for="192.0.2.60:8080""#);
        assert_eq!(client_ip(&trusted, ip("127.0.0.1"), &port), ip("192.0.2.60"));
        // Nothing usable: the peer.
        let junk = headers("x-forwarded-for", "unknown, _hidden");
        assert_eq!(client_ip(&trusted, ip("127.0.0.1"), &junk), ip("127.0.0.1"));
    }

    #[test]
    fn exhausted_takes_nothing() {
        let limiter = RateLimiter::default();
        let ip: IpAddr = "203.0.113.9".parse().expect("an address");
        assert!(!limiter.exhausted(Limit::FailedAuth, ip));
        for _ in 0..20 {
            assert!(!limiter.exhausted(Limit::FailedAuth, ip));
            assert!(limiter.allow(Limit::FailedAuth, ip));
        }
        assert!(limiter.exhausted(Limit::FailedAuth, ip));
        // Full buckets are forgotten; the count that spares the lock follows.
        limiter.forget_full();
        assert_eq!(limiter.tracked.load(Ordering::Relaxed), 1);
        let other: IpAddr = "203.0.113.10".parse().expect("an address");
        assert!(limiter.allow(Limit::FailedAuth, other));
        limiter.forget_full();
        assert_eq!(limiter.tracked.load(Ordering::Relaxed), 2);
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
