//! Latency at a fixed rate, open loop: sends start on a schedule (`i / rate` seconds after the first), each
//! on its own task and connection from a pool, never waiting on one another; every agent keeps one wait
//! parked at the relay and calls again as soon as it returns. A task's figure runs from its send's start to
//! the moment its agent's wait returned it (send → synced store → wake → read and synced `delivered` mark →
//! answer → open).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use pacerelle_client::{AgentClient, Cursor};
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::http::Conn;
use crate::relay::Relay;
use crate::setup::{Pair, interleaved};
use crate::stats::Summary;

/// A send that starts this much after its scheduled time counts as late.
const LATE: Duration = Duration::from_millis(5);
/// How long to wait for the last tasks to reach their agents after the last send answered.
const DRAIN: Duration = Duration::from_secs(15);
/// How long one wait parks at the relay.
const WAIT: Duration = Duration::from_secs(30);

/// The figures of one rate.
#[derive(Debug, Clone)]
pub struct RateResult {
    /// The rate asked for, tasks per second.
    pub rate: u32,
    /// Tasks sent.
    pub sent: usize,
    /// Tasks returned by the agents' waits.
    pub received: usize,
    /// Sends that failed (error or a status other than 201).
    pub errors: usize,
    /// The rate the sends actually started at.
    pub achieved: f64,
    /// Sends that started more than [`LATE`] after their scheduled time.
    pub late: usize,
    /// The latest start against its schedule.
    pub worst_lag: Duration,
    /// Send's start → the agent's wait returned it.
    pub delivered: Summary,
    /// Send's start → the send was acknowledged (durably stored).
    pub acked: Summary,
    /// The relay's synced commits per task over the rate (the store and the `delivered` marks), when it
    /// has `/metrics`.
    pub commits_per_task: Option<f64>,
}

impl RateResult {
    /// True when the load process kept the rate: the sends started at 97 % of it at least, and fewer than 1 %
    /// of them late.
    pub fn kept_rate(&self) -> bool {
        self.achieved >= 0.97 * f64::from(self.rate) && self.late * 100 <= self.sent
    }
}

/// Where each agent's waits continue, kept between rates.
#[derive(Debug, Default)]
pub struct Cursors(Vec<Mutex<Option<Cursor>>>);

impl Cursors {
    /// Each agent's cursor at the head of its stream now.
    pub async fn at_head(pairs: &[Pair]) -> Result<Arc<Cursors>> {
        let mut out = Vec::with_capacity(pairs.len());
        for pair in pairs {
            let mut cursor = None;
            // A read without a cursor returns at most 200 tasks: page until one comes back empty.
            loop {
                let inbox = pair.agent.wait_for_messages(cursor, Duration::ZERO).await?;
                let empty = inbox.messages.is_empty() && inbox.rejected.is_empty();
                cursor = Some(inbox.cursor);
                if empty {
                    break;
                }
            }
            out.push(Mutex::new(cursor));
        }
        Ok(Arc::new(Cursors(out)))
    }
}

/// What the senders and the waiters of one rate share.
#[derive(Debug)]
struct Shared {
    base: Instant,
    /// Each task's send start, in ns after `base`, plus one (0: not started).
    starts: Vec<AtomicU64>,
    delivered: Mutex<Vec<Duration>>,
    received: AtomicUsize,
    all_received: Notify,
    /// Message ids of this rate start with it.
    prefix: String,
}

impl Shared {
    fn index_of(&self, message_id: &str) -> Option<usize> {
        message_id.strip_prefix(&self.prefix)?.parse().ok()
    }
}

/// Runs one rate for `seconds` and returns its figures. Sends go to `relays[0]`; the agents' waits park where
/// their clients point (the last instance, see `main.rs`); the store counters are summed over every instance.
pub async fn run(
    relays: &[Relay],
    pairs: &[Pair],
    cursors: &Arc<Cursors>,
    rate: u32,
    seconds: f64,
) -> Result<RateResult> {
    let n = ((f64::from(rate) * seconds).round() as usize).max(1);
    let prefix = format!("lat{rate}-");
    let devices = interleaved(pairs);
    // Sealed now, not while timed.
    let requests: Vec<Arc<Vec<u8>>> = (0..n)
        .map(|i| Arc::new(devices[i % devices.len()].sealed_send(&format!("{prefix}{i}"))))
        .collect();
    let shared = Arc::new(Shared {
        base: Instant::now(),
        starts: (0..n).map(|_| AtomicU64::new(0)).collect(),
        delivered: Mutex::new(Vec::with_capacity(n)),
        received: AtomicUsize::new(0),
        all_received: Notify::new(),
        prefix,
    });

    let mut waiters = JoinSet::new();
    for (slot, pair) in pairs.iter().enumerate() {
        waiters.spawn(wait_loop(
            pair.agent.clone(),
            cursors.clone(),
            slot,
            shared.clone(),
            n,
        ));
    }
    // Let every wait park before the first send.
    tokio::time::sleep(Duration::from_millis(200)).await;

    let relay = &relays[0];
    let counters_before = crate::relay::store_counters(relays).await;
    let pool: Arc<Mutex<Vec<Conn>>> = Arc::new(Mutex::new(Vec::new()));
    for _ in 0..16 {
        let conn = Conn::open(relay.addr, None).await?;
        if let Ok(mut p) = pool.lock() {
            p.push(conn);
        }
    }
    let acked = Arc::new(Mutex::new(Vec::with_capacity(n)));
    let errors = Arc::new(AtomicUsize::new(0));
    let mut sends = JoinSet::new();
    let period = Duration::from_secs_f64(1.0 / f64::from(rate));
    let t0 = Instant::now();
    let (mut late, mut worst_lag) = (0usize, Duration::ZERO);
    let (mut first, mut last) = (None, t0);
    for (i, request) in requests.into_iter().enumerate() {
        let at = t0 + period * u32::try_from(i).unwrap_or(u32::MAX);
        tokio::time::sleep_until(at).await;
        let now = Instant::now();
        let lag = now - at;
        if lag > LATE {
            late += 1;
        }
        worst_lag = worst_lag.max(lag);
        first.get_or_insert(now);
        last = now;
        let (shared, pool, acked, errors) = (shared.clone(), pool.clone(), acked.clone(), errors.clone());
        let addr = relay.addr;
        sends.spawn(async move {
            let conn = pool.lock().ok().and_then(|mut p| p.pop());
            let start = Instant::now();
            shared.starts[i].store((start - shared.base).as_nanos() as u64 + 1, Ordering::SeqCst);
            let answer = async {
                if let Some(mut conn) = conn {
                    // A pooled connection may have sat unused past the relay's header timeout (it runs from
                    // the moment a connection opens) and been closed: the task is sent again on a fresh one,
                    // as HTTP clients do. Its message id makes that safe; its time counts from the first try.
                    if let Ok(answer) = conn.send(&request).await {
                        return anyhow::Ok((conn, answer));
                    }
                }
                let mut conn = Conn::open(addr, None).await?;
                let answer = conn.send(&request).await?;
                anyhow::Ok((conn, answer))
            }
            .await;
            match answer {
                Ok((conn, answer)) if answer.status == 201 => {
                    if let Ok(mut a) = acked.lock() {
                        a.push(start.elapsed());
                    }
                    if let Ok(mut p) = pool.lock() {
                        p.push(conn);
                    }
                }
                Ok((conn, answer)) => {
                    eprintln!("load: a send answered {}: {}", answer.status, answer.text());
                    errors.fetch_add(1, Ordering::Relaxed);
                    if let Ok(mut p) = pool.lock() {
                        p.push(conn);
                    }
                }
                Err(e) => {
                    eprintln!("load: a send failed: {e:#}");
                    errors.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
    }
    while sends.join_next().await.is_some() {}
    let errors = errors.load(Ordering::Relaxed);
    if shared.received.load(Ordering::SeqCst) + errors < n {
        let _ = tokio::time::timeout(DRAIN, shared.all_received.notified()).await;
    }
    waiters.abort_all();
    while waiters.join_next().await.is_some() {}
    let commits_per_task = counters_before
        .zip(crate::relay::store_counters(relays).await)
        .map(|(before, after)| (after.commits - before.commits) / n as f64);
    let span = first.map_or(Duration::ZERO, |f| last - f);
    let achieved = if n > 1 && !span.is_zero() {
        (n - 1) as f64 / span.as_secs_f64()
    } else {
        f64::from(rate)
    };
    let delivered = std::mem::take(&mut *shared.delivered.lock().map_err(|_| anyhow::anyhow!("poisoned"))?);
    let acked = std::mem::take(&mut *acked.lock().map_err(|_| anyhow::anyhow!("poisoned"))?);
    Ok(RateResult {
        rate,
        sent: n,
        received: shared.received.load(Ordering::SeqCst),
        errors,
        achieved,
        late,
        worst_lag,
        delivered: Summary::of(delivered),
        acked: Summary::of(acked),
        commits_per_task,
    })
}

/// One agent's waits, again and again, recording each task of this rate as it arrives and keeping its cursor
/// in `cursors[slot]` for the next rate. Runs until aborted.
async fn wait_loop(agent: AgentClient, cursors: Arc<Cursors>, slot: usize, shared: Arc<Shared>, n: usize) {
    let mut cursor = cursors.0[slot].lock().ok().and_then(|c| *c);
    loop {
        let inbox = match agent.wait_for_messages(cursor, WAIT).await {
            Ok(inbox) => inbox,
            Err(e) => {
                eprintln!("load: an agent's wait failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let now = Instant::now();
        let mut mine = Vec::with_capacity(inbox.messages.len());
        for m in &inbox.messages {
            if let Some(i) = shared.index_of(&m.message_id) {
                let start = shared.starts.get(i).map_or(0, |s| s.load(Ordering::SeqCst));
                if start > 0 {
                    let sent = shared.base + Duration::from_nanos(start - 1);
                    mine.push(now.saturating_duration_since(sent));
                }
            }
        }
        if let Ok(mut c) = cursors.0[slot].lock() {
            *c = Some(inbox.cursor);
        }
        cursor = Some(inbox.cursor);
        if !mine.is_empty() {
            let count = mine.len();
            if let Ok(mut d) = shared.delivered.lock() {
                d.extend(mine);
            }
            if shared.received.fetch_add(count, Ordering::SeqCst) + count >= n {
                shared.all_received.notify_one();
            }
        }
    }
}
