//! Benchmarks against a real relay on loopback with a durable SQLite file (synchronous = FULL).
//!
//! `cargo bench -p pacerelle-client --bench relay [-- --quick]`
//!
//! 1. Latency: an agent wait is parked; a device sends a task; time from the send's start until the parked
//!    wait returns with it. Sequential, so each figure is one full send → store → wake → deliver path.
//! 2. Throughput: many devices send concurrently; acknowledged (durably stored) tasks per second.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::{Duration, Instant};

use pacerelle_client::{AgentClient, DeviceClient, agent::PairingOptions};
use pacerelle_relay::{Config, Relay};

struct Bench {
    url: String,
    _dir: tempfile::TempDir,
}

async fn start() -> Bench {
    let dir = tempfile::tempdir().expect("tempdir");
    let relay = Relay::open(Config {
        database_path: dir.path().join("bench.db"),
        open_registration: true,
        registration_secret: None,
        public_url: None,
        ..Default::default()
    })
    .await
    .expect("relay");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(relay.serve(listener, std::future::pending()));
    Bench { url, _dir: dir }
}

async fn pair(url: &str, devices: usize) -> (AgentClient, Vec<DeviceClient>) {
    let agent = AgentClient::register(url, "bench", None).await.expect("register");
    let mut out = Vec::new();
    for i in 0..devices {
        let link = agent
            .create_pairing(PairingOptions::default())
            .await
            .expect("pairing");
        out.push(
            DeviceClient::join(&link.link, &format!("device {i}"))
                .await
                .expect("join"),
        );
    }
    (agent, out)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

async fn latency(url: &str, rounds: usize) {
    let (agent, devices) = pair(url, 1).await;
    let device = &devices[0];
    let mut cursor = agent
        .wait_for_messages(None, Duration::ZERO)
        .await
        .expect("head")
        .cursor;
    let mut samples = Vec::with_capacity(rounds);
    for i in 0..rounds + rounds / 10 {
        let waiter = {
            let agent = agent.clone();
            tokio::spawn(async move {
                agent
                    .wait_for_messages(Some(cursor), Duration::from_secs(30))
                    .await
            })
        };
        // Let the wait park at the relay before sending.
        tokio::time::sleep(Duration::from_millis(2)).await;
        let start = Instant::now();
        device.send("ping", None).await.expect("send");
        let inbox = waiter.await.expect("join").expect("wait");
        let elapsed = start.elapsed();
        assert_eq!(inbox.messages.len(), 1);
        cursor = inbox.cursor;
        if i >= rounds / 10 {
            samples.push(elapsed); // the first tenth warms up connections and caches
        }
    }
    samples.sort();
    println!(
        "send → parked wait returns   rounds={rounds:<6} p50={:>8.3} ms  p99={:>8.3} ms  max={:>8.3} ms",
        percentile(&samples, 0.50).as_secs_f64() * 1e3,
        percentile(&samples, 0.99).as_secs_f64() * 1e3,
        samples[samples.len() - 1].as_secs_f64() * 1e3
    );
}

async fn throughput(url: &str, senders: usize, per_sender: usize) {
    let (_agent, devices) = pair(url, senders.min(8)).await;
    let start = Instant::now();
    let tasks: Vec<_> = (0..senders)
        .map(|s| {
            let device = devices[s % devices.len()].clone();
            tokio::spawn(async move {
                for _ in 0..per_sender {
                    device
                        .send("a task of ordinary length, about sixty bytes long", None)
                        .await
                        .expect("send");
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("join");
    }
    let total = senders * per_sender;
    let secs = start.elapsed().as_secs_f64();
    println!(
        "durable stores               senders={senders:<4} tasks={total:<6} {:>9.0} stores/s  ({secs:.2} s)",
        total as f64 / secs
    );
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let bench = start().await;
        println!(
            "machine: {} cores; relay and clients in one process on loopback",
            std::thread::available_parallelism().map_or(0, |n| n.get())
        );
        latency(&bench.url, if quick { 200 } else { 2000 }).await;
        for senders in [1, 16, 64] {
            throughput(
                &bench.url,
                senders,
                if quick { 50 } else { 4000 / senders.max(1) },
            )
            .await;
        }
    });
}
