//! Saturation: `senders` concurrent senders, each on its own keep-alive connection, send tasks sealed ahead
//! one after the other as fast as they are acknowledged. The figure is acknowledged — durably stored — tasks
//! per second, with the relay's synced commits per task (from `/metrics`, when it has them) and the CPU time
//! the relay and this process used meanwhile.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Result, bail};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::http::Conn;
use crate::relay::{self, Relay, StoreCounters};
use crate::setup::Device;

/// The figures of one sender count.
#[derive(Debug, Clone)]
pub struct LevelResult {
    /// Concurrent senders.
    pub senders: usize,
    /// Tasks acknowledged.
    pub tasks: usize,
    /// From the first send to the last answer.
    pub elapsed: Duration,
    /// Relay store counters before and after, when it has `/metrics`.
    pub counters: Option<(StoreCounters, StoreCounters)>,
    /// The relay's CPU time meanwhile.
    pub relay_cpu: Duration,
    /// This process's CPU time meanwhile.
    pub load_cpu: Duration,
    /// The CPU time of every process on the machine meanwhile (the relay and this process included).
    pub machine_cpu: Duration,
}

impl LevelResult {
    /// Acknowledged tasks per second.
    pub fn per_second(&self) -> f64 {
        self.tasks as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Synced commits per task and writes per commit, when the relay counts them.
    pub fn commits(&self) -> Option<(f64, f64)> {
        let (before, after) = self.counters?;
        let commits = after.commits - before.commits;
        let writes = after.writes - before.writes;
        if commits <= 0.0 || self.tasks == 0 {
            return None;
        }
        Some((commits / self.tasks as f64, writes / commits))
    }
}

/// Sends `tasks` tasks (rounded up to a multiple of `senders`) from `senders` concurrent senders, sender `s`
/// as device `s % devices.len()` to instance `s % relays.len()`. Message ids start with `tag`. Store counters
/// and the relays' CPU are summed over the instances.
pub async fn run(
    relays: &[Relay],
    devices: &[Arc<Device>],
    senders: usize,
    tasks: usize,
    tag: &str,
) -> Result<LevelResult> {
    let per_sender = tasks.div_ceil(senders).max(1);
    let mut work = Vec::with_capacity(senders);
    for s in 0..senders {
        let device = &devices[s % devices.len()];
        // Sealed now, not while timed.
        let requests: Vec<Vec<u8>> = (0..per_sender)
            .map(|i| device.sealed_send(&format!("{tag}-{s}-{i}")))
            .collect();
        let addr = relays[s % relays.len()].addr;
        work.push((addr, Conn::open(addr, None).await?, requests));
    }
    let before = relay::store_counters(relays).await;
    let (relay_cpu, load_cpu, machine_cpu) = (relays_cpu(relays)?, relay::own_cpu()?, relay::machine_cpu()?);
    let start = Instant::now();
    let mut set = JoinSet::new();
    for (addr, mut conn, requests) in work {
        set.spawn(async move {
            for request in &requests {
                let answer = match conn.send(request).await {
                    Ok(answer) => answer,
                    // Once more on a new connection: the id makes a repeated store harmless.
                    Err(_) => {
                        conn = Conn::open(addr, None).await?;
                        conn.send(request).await?
                    }
                };
                if answer.status != 201 {
                    bail!("a send answered {}: {}", answer.status, answer.text());
                }
            }
            anyhow::Ok(requests.len())
        });
    }
    let mut done = 0;
    while let Some(joined) = set.join_next().await {
        done += joined??;
    }
    let elapsed = start.elapsed();
    let (relay_cpu, load_cpu, machine_cpu) = (
        relays_cpu(relays)? - relay_cpu,
        relay::own_cpu()? - load_cpu,
        relay::machine_cpu()? - machine_cpu,
    );
    let after = relay::store_counters(relays).await;
    Ok(LevelResult {
        senders,
        tasks: done,
        elapsed,
        counters: before.zip(after),
        relay_cpu,
        load_cpu,
        machine_cpu,
    })
}

/// The CPU time of every instance so far.
fn relays_cpu(relays: &[Relay]) -> Result<Duration> {
    relays.iter().map(Relay::cpu).sum()
}
