//! `cargo xtask soak`: senders, a supervised agent, random SIGKILLs, and a checker.
//!
//! The soak starts a real relay as a child process (`pacerelle serve`), registers an agent and pairs one
//! device per sender through `pacerelle-client`, starts the supervised agent as a child process (this
//! program re-run as `pacerelle-soak agent`, see [`agent`]), and lets the senders send tasks while a chaos
//! loop SIGKILLs the relay or the agent at random intervals (seeded, printed) and starts it again on the
//! same port and data folder. After the given time it stops the chaos and the senders, lets the agent
//! drain the backlog (bounded), reads every device's conversation and the handler's records, checks them
//! ([`check::check`]), prints the figures, and exits non-zero on any violation, naming the first tasks.

mod agent;
mod check;
mod procs;
mod records;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, Result, bail};
use clap::{Parser, Subcommand};
use pacerelle_client::core::{ids, wire};
use pacerelle_client::{AgentClient, ConversationItem, DeviceClient, PairingOptions};
use tokio::time::Instant;

use crate::check::{DeviceView, Sent};
use crate::procs::{Proc, start_relay};

/// A soak of the relay and the supervised agent under random SIGKILLs.
#[derive(Debug, Parser)]
#[command(name = "pacerelle-soak", args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Cmd>,
    #[command(flatten)]
    soak: SoakArgs,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// The supervised agent (started by the soak itself).
    Agent(agent::AgentArgs),
}

/// The soak's settings.
#[derive(Debug, clap::Args)]
struct SoakArgs {
    /// How long the chaos lasts, in minutes.
    #[arg(long, conflicts_with = "seconds")]
    minutes: Option<u64>,
    /// How long the chaos lasts, in seconds [default: 60].
    #[arg(long)]
    seconds: Option<u64>,
    /// Seed of every random choice (kills, pauses) [default: from the clock; printed].
    #[arg(long)]
    seed: Option<u64>,
    /// Concurrent senders, each a paired device.
    #[arg(long, default_value_t = 8)]
    senders: usize,
    /// The longest pause of a sender between two tasks, in ms (each pause is drawn from 0 to this).
    #[arg(long, default_value_t = 400)]
    send_pause_ms: u64,
    /// The senders pause while the agent has more tasks than this waiting or in progress, so that the
    /// backlog, the latency and the drain stay bounded however fast this machine handles tasks.
    #[arg(long, default_value_t = 300)]
    max_backlog: u64,
    /// The shortest time between two kills, in ms.
    #[arg(long, default_value_t = 500)]
    kill_min_ms: u64,
    /// The longest time between two kills, in ms.
    #[arg(long, default_value_t = 4_000)]
    kill_max_ms: u64,
    /// How long the agent may take to drain the backlog once the chaos stopped, in seconds.
    #[arg(long, default_value_t = 120)]
    drain_seconds: u64,
    /// The `pacerelle` binary [default: beside this program].
    #[arg(long)]
    pacerelle: Option<PathBuf>,
    /// Run the agent with a handler that forgets its records at every start (not idempotent): the check
    /// must then fail with tasks recorded more than once.
    #[arg(long)]
    forgetful_agent: bool,
    /// Keep the work folder (relay data, logs, the handler's records); it is kept anyway on a violation.
    #[arg(long)]
    keep: bool,
}

/// A small seeded generator (SplitMix64): the same seed gives the same kills and pauses.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number from 0 to `n - 1` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }

    /// A number from `low` to `high` included.
    pub fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.below(high.saturating_sub(low) + 1)
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("pacerelle-soak: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let result = match cli.command {
        Some(Cmd::Agent(args)) => runtime.block_on(agent::run(args)).map(|()| ExitCode::SUCCESS),
        None => runtime.block_on(soak(cli.soak)),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("pacerelle-soak: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// What the chaos loop did.
#[derive(Debug, Default)]
struct Chaos {
    /// SIGKILLs of the relay.
    relay_kills: u32,
    /// Of those, the ones followed by an outage longer than a client's retries.
    long_outages: u32,
    /// SIGKILLs of the agent.
    agent_kills: u32,
}

async fn soak(args: SoakArgs) -> Result<ExitCode> {
    let duration = Duration::from_secs(match (args.minutes, args.seconds) {
        (Some(m), _) => m * 60,
        (None, Some(s)) => s,
        (None, None) => 60,
    });
    let seed = args.seed.unwrap_or_else(now_ms);
    let soak_exe = std::env::current_exe().context("cannot find this program's path")?;
    let pacerelle = match args.pacerelle.clone() {
        Some(path) => path,
        None => soak_exe.with_file_name(format!("pacerelle{}", std::env::consts::EXE_SUFFIX)),
    };
    if !pacerelle.is_file() {
        bail!(
            "no pacerelle binary at {} (build it with `cargo build -p pacerelle-cli`, or give --pacerelle)",
            pacerelle.display()
        );
    }
    let work = tempfile::Builder::new().prefix("pacerelle-soak-").tempdir()?;
    let dir = work.path().to_path_buf();
    let (data, home) = (dir.join("data"), dir.join("home"));
    std::fs::create_dir_all(&home)?;
    println!(
        "soak: {} s, seed {seed}, {} senders, work folder {}",
        duration.as_secs(),
        args.senders,
        dir.display()
    );

    let port = free_port()?;
    let url = format!("http://127.0.0.1:{port}");
    let mut relay = Proc::relay(&pacerelle, port, &data, &home, dir.join("relay.log"));
    start_relay(&mut relay, port).await?;

    let agent = AgentClient::register(&url, "soak agent", None)
        .await
        .context("cannot register the agent")?
        .with_home(None);
    let mut devices = Vec::new();
    for i in 0..args.senders {
        let link = agent.create_pairing(PairingOptions::default()).await?;
        devices.push(DeviceClient::join(&link.link, &format!("soak sender {i}")).await?);
    }
    let mut agent_args = vec![
        "agent".to_string(),
        "--relay".into(),
        url.clone(),
        "--agent-id".into(),
        agent.agent_id().to_string(),
        "--dir".into(),
        dir.display().to_string(),
    ];
    if args.forgetful_agent {
        agent_args.push("--forgetful".into());
    }
    let mut runner = Proc::agent(
        &soak_exe,
        agent_args,
        agent.token().expose(),
        &home,
        dir.join("agent.log"),
    );
    let mut rng = Rng::new(seed);
    start_agent(&mut runner, &mut rng)?;

    let pace = Arc::new(Pace {
        stop: AtomicBool::new(false),
        backlog: AtomicU64::new(0),
        max_backlog: args.max_backlog,
    });
    let watcher = tokio::spawn(watch_backlog(agent.clone(), pace.clone()));
    let senders: Vec<_> = devices
        .iter()
        .enumerate()
        .map(|(i, device)| {
            let rng = Rng::new(rng.next_u64());
            tokio::spawn(send_tasks(
                device.clone(),
                i,
                rng,
                args.send_pause_ms,
                pace.clone(),
            ))
        })
        .collect();

    // The chaos.
    let started = Instant::now();
    let end = started + duration;
    let mut chaos = Chaos::default();
    let mut next_report = started + Duration::from_secs(30);
    while Instant::now() < end {
        let pause = Duration::from_millis(rng.between(args.kill_min_ms, args.kill_max_ms));
        tokio::time::sleep_until((Instant::now() + pause).min(end)).await;
        if runner.ended()? {
            start_agent(&mut runner, &mut rng)?;
        }
        if relay.ended()? {
            start_relay(&mut relay, port).await?;
        }
        if Instant::now() >= end {
            break;
        }
        if rng.below(2) == 0 {
            relay.kill(true).await?;
            chaos.relay_kills += 1;
            // Mostly back at once; one time in five, down for longer than a client's own retries (about
            // 3 s), so that some sends fail and the runner backs off.
            let down = if rng.below(5) == 0 {
                chaos.long_outages += 1;
                rng.between(3_000, 6_000)
            } else {
                rng.below(500)
            };
            tokio::time::sleep(Duration::from_millis(down)).await;
            start_relay(&mut relay, port).await?;
        } else {
            runner.kill(true).await?;
            chaos.agent_kills += 1;
            tokio::time::sleep(Duration::from_millis(rng.below(200))).await;
            start_agent(&mut runner, &mut rng)?;
        }
        if Instant::now() >= next_report {
            next_report += Duration::from_secs(30);
            println!(
                "soak: {:>4} s: {} relay kills, {} agent kills",
                started.elapsed().as_secs(),
                chaos.relay_kills,
                chaos.agent_kills
            );
        }
    }
    println!(
        "soak: chaos over after {:.1} s; stopping the senders",
        started.elapsed().as_secs_f64()
    );
    pace.stop.store(true, Ordering::Relaxed);
    watcher.abort();
    let mut sent = Vec::new();
    for handle in senders {
        sent.extend(handle.await.context("a sender panicked")?);
    }

    // The drain: the relay and the agent run undisturbed until every task stored is processed.
    let drain_start = Instant::now();
    let drain_end = drain_start + Duration::from_secs(args.drain_seconds);
    let mut drained = false;
    while Instant::now() < drain_end {
        if runner.ended()? || !runner.running() {
            start_agent(&mut runner, &mut rng)?;
        }
        if relay.ended()? || !relay.running() {
            start_relay(&mut relay, port).await?;
        }
        if let Ok(status) = agent.status().await
            && status.messages.waiting == 0
            && status.messages.in_progress == 0
        {
            drained = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    println!(
        "soak: {} after {:.1} s",
        if drained {
            "backlog drained"
        } else {
            "backlog NOT drained"
        },
        drain_start.elapsed().as_secs_f64()
    );

    // Read what the devices see, then stop both.
    let mut views = Vec::new();
    for device in &devices {
        views.push(DeviceView::from_items(&read_conversation(device).await?));
    }
    runner.kill(false).await?;
    relay.kill(false).await?;

    let (recs, malformed) = records::read(&dir.join(records::RECORDS))?;
    let (invocations, _) = records::read(&dir.join(records::INVOCATIONS))?;
    let report = check::check(&sent, &views, &recs, &invocations, malformed);

    let send_errors = sent.iter().filter(|s| !s.acked).count();
    println!("soak: figures (seed {seed}, {} s of chaos)", duration.as_secs());
    println!("  tasks acknowledged:        {}", report.acknowledged);
    println!(
        "  sends not acknowledged:    {send_errors} (handled anyway: {})",
        report.unacknowledged_handled
    );
    println!(
        "  relay SIGKILLs:            {} ({} followed by 3-6 s down)",
        chaos.relay_kills, chaos.long_outages
    );
    println!("  agent SIGKILLs:            {}", chaos.agent_kills);
    println!("  relay ended by itself:     {}", relay.exits);
    println!("  agent ended by itself:     {}", runner.exits);
    println!("  handler invocations:       {}", report.invocations);
    println!("  redelivered invocations:   {}", report.redelivered);
    println!("  repeated (a task seen before): {}", report.repeated);
    println!("  tasks recorded:            {}", report.recorded);
    if let Some((p50, p99, max)) = report.latency_ms {
        println!("  latency send→handled (ms): median {p50}, p99 {p99}, max {max}");
    }
    println!(
        "  drain and read:            {:.1} s",
        drain_start.elapsed().as_secs_f64()
    );

    let failed = !report.violations.is_empty() || !drained;
    if failed {
        if !drained {
            println!(
                "soak: FAILED: the backlog was not drained within {} s",
                args.drain_seconds
            );
        }
        if !report.violations.is_empty() {
            println!("soak: FAILED: {} violation(s):", report.violations.len());
            print!("{}", report.violations_summary(5));
        }
    } else {
        println!("soak: passed: every acknowledged task was recorded once, processed, and replied to once");
    }
    if failed || args.keep {
        let kept = work.keep();
        println!("soak: work folder kept: {}", kept.display());
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Starts the agent with a seed of its own for its handler's pauses.
fn start_agent(runner: &mut Proc, rng: &mut Rng) -> Result<()> {
    runner.start(&["--seed".into(), rng.next_u64().to_string()])
}

/// A port free now on 127.0.0.1, for the relay to listen on at every start.
fn free_port() -> Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

/// What the senders share: when to stop, and the agent's backlog as last read.
#[derive(Debug)]
struct Pace {
    stop: AtomicBool,
    /// Tasks stored and not yet processed, as the agent's status last said.
    backlog: AtomicU64,
    /// The senders pause while the backlog is larger.
    max_backlog: u64,
}

/// Reads the agent's backlog from its status every 250 ms (keeping the last figure while the relay is down).
async fn watch_backlog(agent: AgentClient, pace: Arc<Pace>) {
    while !pace.stop.load(Ordering::Relaxed) {
        if let Ok(status) = agent.status().await {
            let backlog = status.messages.waiting + status.messages.in_progress;
            pace.backlog.store(backlog, Ordering::Relaxed);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// One sender: sends tasks with random pauses until told to stop, pausing while the agent's backlog is
/// over its bound, and returns every task it tried.
async fn send_tasks(
    device: DeviceClient,
    index: usize,
    mut rng: Rng,
    pause_ms: u64,
    pace: Arc<Pace>,
) -> Vec<Sent> {
    let mut sent = Vec::new();
    let mut n = 0u64;
    while !pace.stop.load(Ordering::Relaxed) {
        if pace.backlog.load(Ordering::Relaxed) > pace.max_backlog {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        }
        n += 1;
        let message_id = ids::generate(ids::MESSAGE);
        let sent_ms = now_ms();
        let result = device
            .send(&format!("soak task {index}-{n}"), Some(&message_id))
            .await;
        let acked = match result {
            Ok(stored) => stored.id == message_id,
            Err(pacerelle_client::Error::Api { code, .. }) if code == wire::code::QUOTA_EXCEEDED => {
                eprintln!("soak: sender {index}: the backlog quota is reached");
                false
            }
            Err(_) => false,
        };
        sent.push(Sent {
            message_id,
            device: index,
            sent_ms,
            acked,
        });
        tokio::time::sleep(Duration::from_millis(rng.below(pause_ms + 1))).await;
    }
    sent
}

/// A device's whole conversation, from its start.
async fn read_conversation(device: &DeviceClient) -> Result<Vec<ConversationItem>> {
    let mut items = Vec::new();
    let mut cursor = None;
    loop {
        let page = device
            .conversation(cursor, Duration::ZERO)
            .await
            .context("cannot read a conversation")?;
        if page.items.is_empty() && page.rejected.is_empty() || cursor == Some(page.cursor) {
            return Ok(items);
        }
        items.extend(page.items);
        cursor = Some(page.cursor);
    }
}
