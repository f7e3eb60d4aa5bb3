//! Parked waits and the relay's memory: `n` agents registered (concurrently, over raw HTTP, spread over
//! loopback source addresses so that the relay's per-address registration limit of 1 000 a minute is not
//! reached), then one `GET /v1/agent/messages?wait=55` per agent, each on its own connection, all parked at
//! once. The relay's resident memory is read before the waits and while they are all parked.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use pacerelle_client::AgentToken;
use pacerelle_client::core::{b64, ids};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::http::{self, Conn};
use crate::relay::{self, Relay};

/// Agents registered from one source address (the relay allows a burst of 1 000 per loopback address).
const PER_SOURCE: usize = 500;
/// Registrations in flight at once.
const REGISTRARS: usize = 32;
/// Connections being opened and written at once while parking.
const PARKING: usize = 256;
/// Waits parked from one source address (keeps each address's ephemeral ports far from running out).
const WAITS_PER_SOURCE: usize = 1000;
/// The relay is idle once a second of wall time costs it less than this much CPU.
const IDLE_CPU: Duration = Duration::from_millis(30);

/// The figures of the parked-wait phase.
#[derive(Debug, Clone)]
pub struct ParkedResult {
    /// Waits asked for.
    pub waits: usize,
    /// Waits written and not answered when memory was read.
    pub parked: usize,
    /// Waits answered (after their 55 s, then parked again at once) before memory was read.
    pub answered_early: usize,
    /// Time to register the agents.
    pub registering: Duration,
    /// Time to open and write every wait.
    pub parking: Duration,
    /// The relay's RSS before registering, after registering, and with every wait parked (KiB).
    pub rss_kib: (u64, u64, u64),
    /// This process's RSS with every wait parked (KiB).
    pub load_rss_kib: u64,
}

impl ParkedResult {
    /// The relay's memory per parked wait, in KiB.
    pub fn per_wait_kib(&self) -> f64 {
        (self.rss_kib.2 as f64 - self.rss_kib.1 as f64) / self.parked.max(1) as f64
    }
}

/// Registers `n` agents and parks one wait for each.
pub async fn run(relay: &Relay, n: usize) -> Result<ParkedResult> {
    let rss_start = relay.rss_kib()?;
    let start = Instant::now();
    let bearers = register(relay.addr, n).await?;
    let registering = start.elapsed();
    settle(relay).await?;
    let rss_registered = relay.rss_kib()?;

    let written = Arc::new(AtomicUsize::new(0));
    let in_flight = Arc::new(AtomicUsize::new(0));
    let answered = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let gate = Arc::new(Semaphore::new(PARKING));
    let mut waits = JoinSet::new();
    let start = Instant::now();
    for (i, bearer) in bearers.into_iter().enumerate() {
        let counters = (
            written.clone(),
            in_flight.clone(),
            answered.clone(),
            failed.clone(),
        );
        let (gate, addr) = (gate.clone(), relay.addr);
        waits.spawn(park(addr, i, bearer, gate, counters));
    }
    while written.load(Ordering::SeqCst) + failed.load(Ordering::SeqCst) < n {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let parking = start.elapsed();
    settle(relay).await?;
    let rss_parked = relay.rss_kib()?;
    let parked = in_flight.load(Ordering::SeqCst);
    let load_rss_kib = relay::own_rss_kib()?;
    let answered_early = answered.load(Ordering::SeqCst);
    let failed = failed.load(Ordering::SeqCst);
    if failed > 0 {
        eprintln!("load: {failed} parked waits could not be opened");
    }
    waits.abort_all();
    while waits.join_next().await.is_some() {}
    Ok(ParkedResult {
        waits: n,
        parked,
        answered_early,
        registering,
        parking,
        rss_kib: (rss_start, rss_registered, rss_parked),
        load_rss_kib,
    })
}

/// The counters of the parking tasks: waits written once at least, in flight now, answered, failed to open.
type Counters = (
    Arc<AtomicUsize>,
    Arc<AtomicUsize>,
    Arc<AtomicUsize>,
    Arc<AtomicUsize>,
);

/// Agent `i`'s wait, on a connection of its own from a source address shared by [`WAITS_PER_SOURCE`] waits,
/// opened under `gate`; parked again on the same connection each time it is answered, until aborted.
async fn park(addr: SocketAddr, i: usize, bearer: String, gate: Arc<Semaphore>, counters: Counters) {
    let (written, in_flight, answered, failed) = counters;
    let request = http::request("GET", "/v1/agent/messages?wait=55", Some(&bearer), None);
    drop(bearer);
    let opened = {
        let Ok(_permit) = gate.acquire().await else {
            return;
        };
        match Conn::open(addr, Some(http::loopback_source(2, i / WAITS_PER_SOURCE))).await {
            Ok(mut conn) => conn.write(&request).await.map(|()| conn),
            Err(e) => Err(e),
        }
    };
    let mut conn = match opened {
        Ok(conn) => conn,
        Err(e) => {
            if failed.fetch_add(1, Ordering::SeqCst) == 0 {
                eprintln!("load: a parked wait could not be opened: {e:#}");
            }
            return;
        }
    };
    in_flight.fetch_add(1, Ordering::SeqCst);
    written.fetch_add(1, Ordering::SeqCst);
    loop {
        let answer = conn.read_response().await;
        in_flight.fetch_sub(1, Ordering::SeqCst);
        answered.fetch_add(1, Ordering::SeqCst);
        match answer {
            Ok(answer) if answer.status == 200 => {}
            Ok(answer) => {
                if failed.fetch_add(1, Ordering::SeqCst) == 0 {
                    eprintln!(
                        "load: a parked wait answered {}: {}",
                        answer.status,
                        answer.text()
                    );
                }
                return;
            }
            Err(_) => return,
        }
        if conn.write(&request).await.is_err() {
            return;
        }
        in_flight.fetch_add(1, Ordering::SeqCst);
    }
}

/// Registers `n` agents over raw HTTP, `PER_SOURCE` from each loopback source address, `REGISTRARS` at once;
/// returns their bearer credentials.
async fn register(addr: SocketAddr, n: usize) -> Result<Vec<String>> {
    let chunks = n.div_ceil(PER_SOURCE);
    let next = Arc::new(AtomicUsize::new(0));
    let mut set = JoinSet::new();
    for _ in 0..REGISTRARS.min(chunks) {
        let next = next.clone();
        set.spawn(async move {
            let mut out = Vec::new();
            loop {
                let chunk = next.fetch_add(1, Ordering::Relaxed);
                if chunk >= chunks {
                    break;
                }
                let count = PER_SOURCE.min(n - chunk * PER_SOURCE);
                let mut conn = Conn::open(addr, Some(http::loopback_source(1, chunk))).await?;
                let mut bearers = Vec::with_capacity(count);
                for i in 0..count {
                    let token = AgentToken::generate();
                    let agent_id = ids::generate(ids::AGENT);
                    let body = format!(
                        "{{\"agentId\":\"{agent_id}\",\"name\":\"parked {chunk}.{i}\",\"authHash\":\"{}\"}}",
                        b64::encode(&token.auth_hash())
                    );
                    let answer = conn
                        .send(&http::request("POST", "/v1/agents", None, Some(&body)))
                        .await
                        .context("a registration failed")?;
                    if answer.status != 201 {
                        bail!("a registration answered {}: {}", answer.status, answer.text());
                    }
                    bearers.push(token.bearer(&agent_id).expose().to_string());
                }
                out.push((chunk, bearers));
            }
            anyhow::Ok(out)
        });
    }
    let mut chunks_done = Vec::with_capacity(chunks);
    while let Some(joined) = set.join_next().await {
        chunks_done.extend(joined??);
    }
    chunks_done.sort_by_key(|(chunk, _)| *chunk);
    Ok(chunks_done.into_iter().flat_map(|(_, b)| b).collect())
}

/// Waits until the relay is idle (less than [`IDLE_CPU`] of CPU in a second), at most 20 s.
async fn settle(relay: &Relay) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut before = relay.cpu()?;
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = relay.cpu()?;
        if now - before < IDLE_CPU {
            return Ok(());
        }
        before = now;
    }
    Ok(())
}
