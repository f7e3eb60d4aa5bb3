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

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, Result, bail};
use clap::{Parser, Subcommand};
use pacerelle_client::core::ids;
use pacerelle_client::{AgentClient, DeviceClient, agent::PairingOptions, device::ConversationItem};
use pacerelle_test_support::postgres::Cluster;
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
    /// The relays' store: `sqlite` (one relay) or `postgres` (two relays on a throw-away PostgreSQL cluster
    /// with fsync on, which the chaos also SIGKILLs).
    #[arg(long, value_enum, default_value_t = Database::Sqlite)]
    database: Database,
    /// The shortest time between two kills, in ms [default: 500; on postgres 200].
    #[arg(long)]
    kill_min_ms: Option<u64>,
    /// The longest time between two kills, in ms [default: 4000; on postgres 1000].
    #[arg(long)]
    kill_max_ms: Option<u64>,
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

pub use pacerelle_test_support::Rng;

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
    /// SIGKILLs of each relay (one on SQLite, A and B on PostgreSQL).
    relay_kills: Vec<u32>,
    /// Of those, the ones followed by an outage longer than a client's retries.
    long_outages: u32,
    /// SIGKILLs of the agent.
    agent_kills: u32,
    /// SIGKILLs of the PostgreSQL server (postmaster and backends), each followed by crash recovery.
    database_kills: u32,
}

impl Chaos {
    /// Every relay kill, whichever relay.
    fn relay_total(&self) -> u32 {
        self.relay_kills.iter().sum()
    }
}

/// Which store the relays run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Database {
    /// One relay on its SQLite file.
    Sqlite,
    /// Two relays on one throw-away PostgreSQL cluster (fsync on), which the chaos SIGKILLs too.
    Postgres,
}

/// On PostgreSQL, in a run of 60 s, the chaos kills the database at least this often (scaled to the run's
/// length), and the run fails otherwise: a run that did not crash the database proves nothing about it.
const MIN_DATABASE_KILLS_PER_MINUTE: u64 = 3;
/// On PostgreSQL, in a run of 60 s, the relays are killed at least this often (scaled), or the run fails.
const MIN_RELAY_KILLS_PER_MINUTE: u64 = 20;
/// How long a sender goes on sending one task again (same id, alternating relays) on PostgreSQL: longer than a
/// database outage and its crash recovery, so that acknowledged sends stay the rule.
const SEND_RETRY_FOR: Duration = Duration::from_secs(30);

/// A minimum per minute scaled to `duration` (at least one).
fn scaled(per_minute: u64, duration: Duration) -> u64 {
    (per_minute * duration.as_secs() / 60).max(1)
}

/// One relay the soak runs: its process, port and URL.
struct Relay {
    proc: Proc,
    port: u16,
    url: String,
}

/// Starts the relay whose process ended by itself or was not started again.
async fn revive(relays: &mut [Relay]) -> Result<()> {
    for relay in relays {
        if relay.proc.ended()? || !relay.proc.running() {
            start_relay(&mut relay.proc, relay.port).await?;
        }
    }
    Ok(())
}

/// Runs a blocking call of the PostgreSQL harness (which panics on failure) on a blocking thread, turning a
/// panic into an error that says what was being done.
async fn harness<T: Send + 'static>(what: &str, call: impl FnOnce() -> T + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(call)
        .await
        .map_err(|e| anyhow::anyhow!("{what}: {e}"))
}

async fn soak(args: SoakArgs) -> Result<ExitCode> {
    let duration = Duration::from_secs(match (args.minutes, args.seconds) {
        (Some(m), _) => m * 60,
        (None, Some(s)) => s,
        (None, None) => 60,
    });
    let postgres = args.database == Database::Postgres;
    // On PostgreSQL the kills come faster: two relays and the database share the chaos, and the run must reach
    // its minimums (see MIN_RELAY_KILLS_PER_MINUTE).
    let (kill_min_ms, kill_max_ms) = match (args.kill_min_ms, args.kill_max_ms, postgres) {
        (min, max, true) => (min.unwrap_or(200), max.unwrap_or(1_000)),
        (min, max, false) => (min.unwrap_or(500), max.unwrap_or(4_000)),
    };
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
    let home = dir.join("home");
    std::fs::create_dir_all(&home)?;
    println!(
        "soak: {} s on {}, seed {seed}, {} senders, work folder {}",
        duration.as_secs(),
        if postgres {
            "PostgreSQL (two relays)"
        } else {
            "SQLite"
        },
        args.senders,
        dir.display()
    );

    // The database: a throw-away cluster at its durable defaults (fsync on), one fresh database in it.
    let cluster = if postgres {
        let cluster = harness("cannot start PostgreSQL", Cluster::start_durable).await?;
        Some(Arc::new(cluster))
    } else {
        None
    };
    let database = match &cluster {
        Some(cluster) => {
            let cluster = cluster.clone();
            let url = tokio::spawn(async move { cluster.fresh_database().await })
                .await
                .map_err(|e| anyhow::anyhow!("cannot create the soak's database: {e}"))?;
            Some(url)
        }
        None => None,
    };

    // The relays: one on SQLite; A and B on PostgreSQL, each its own port and data folder, B given A's keys
    // (docs/self-hosting.md: every instance needs the same webhook.key and push.key).
    let names: &[(&'static str, &str)] = if postgres {
        &[("relay A", "a"), ("relay B", "b")]
    } else {
        &[("relay", "")]
    };
    let mut relays = Vec::new();
    for (i, (name, suffix)) in names.iter().enumerate() {
        let port = free_port()?;
        let data = dir.join(if suffix.is_empty() {
            "data".to_string()
        } else {
            format!("data-{suffix}")
        });
        let log = dir.join(if suffix.is_empty() {
            "relay.log".to_string()
        } else {
            format!("relay-{suffix}.log")
        });
        if i > 0 {
            share_keys(&dir.join("data-a"), &data)?;
        }
        let mut proc = Proc::relay(name, &pacerelle, port, &data, database.as_deref(), &home, log);
        start_relay(&mut proc, port).await?;
        relays.push(Relay {
            proc,
            port,
            url: format!("http://127.0.0.1:{port}"),
        });
    }
    let urls: Vec<String> = relays.iter().map(|r| r.url.clone()).collect();

    let agent = AgentClient::register(&urls[0], "soak agent", None)
        .await
        .context("cannot register the agent")?
        .with_home(None);
    // The agent's credentials on every relay, for its status (backlog, drain) whichever relay is up.
    let mut agents = vec![agent.clone()];
    for url in &urls[1..] {
        agents.push(AgentClient::new(url, agent.agent_id(), agent.token().clone())?.with_home(None));
    }
    let mut devices = Vec::new();
    for i in 0..args.senders {
        let link = agent.create_pairing(PairingOptions::default()).await?;
        devices.push(DeviceClient::join(&link.link, &format!("soak sender {i}")).await?);
    }
    let mut agent_args = vec![
        "agent".to_string(),
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
    let mut agent_starts = vec![0u32; urls.len()];
    start_agent(&mut runner, &mut rng, &urls, &mut agent_starts)?;

    let pace = Arc::new(Pace {
        stop: AtomicBool::new(false),
        backlog: AtomicU64::new(0),
        max_backlog: args.max_backlog,
    });
    let watcher = tokio::spawn(watch_backlog(agents.clone(), pace.clone()));
    let mut senders = Vec::new();
    for (i, device) in devices.iter().enumerate() {
        // Sender i sends through relay i mod 2 first, and to the other when that one fails, as a client
        // given two addresses would.
        let mut clients = Vec::new();
        for k in 0..urls.len() {
            let mut credentials = device.credentials().clone();
            credentials.relay_url = urls[(i + k) % urls.len()].clone();
            clients.push(DeviceClient::from_credentials(credentials)?);
        }
        let rng = Rng::new(rng.next_u64());
        let retry_for = if postgres { SEND_RETRY_FOR } else { Duration::ZERO };
        senders.push(tokio::spawn(send_tasks(
            clients,
            i,
            rng,
            args.send_pause_ms,
            retry_for,
            pace.clone(),
        )));
    }

    // The chaos.
    let started = Instant::now();
    let end = started + duration;
    let mut chaos = Chaos {
        relay_kills: vec![0; relays.len()],
        ..Chaos::default()
    };
    // The database's kills are spread over the run at fixed times (so that the minimum is reached whatever
    // the draws), the others drawn at random between them.
    let database_kills_due = if postgres {
        scaled(MIN_DATABASE_KILLS_PER_MINUTE + 1, duration)
    } else {
        0
    };
    let database_kill_at = |n: u64| started + duration.mul_f64((n as f64 + 0.5) / database_kills_due as f64);
    let mut next_report = started + Duration::from_secs(30);
    // On a slow machine the restarts take longer and fewer kills fit in the run: the chaos then goes on past
    // its end (up to as long again) until the relays were killed as often as the run requires, rather than
    // ending with a run too calm to mean anything.
    let relay_min = if postgres {
        scaled(MIN_RELAY_KILLS_PER_MINUTE, duration)
    } else {
        0
    };
    let end_at_last = end + duration;
    let mut end = end;
    loop {
        if Instant::now() >= end {
            if u64::from(chaos.relay_total()) >= relay_min || Instant::now() >= end_at_last {
                break;
            }
            end = (Instant::now() + Duration::from_millis(kill_max_ms)).min(end_at_last);
        }
        let pause = Duration::from_millis(rng.between(kill_min_ms, kill_max_ms));
        tokio::time::sleep_until((Instant::now() + pause).min(end)).await;
        if runner.ended()? {
            start_agent(&mut runner, &mut rng, &urls, &mut agent_starts)?;
        }
        revive(&mut relays).await?;
        if Instant::now() >= end {
            continue;
        }
        if let Some(cluster) = &cluster
            && u64::from(chaos.database_kills) < database_kills_due
            && Instant::now() >= database_kill_at(u64::from(chaos.database_kills))
        {
            // A crash of the whole server; down for a moment, then crash recovery at the restart.
            let killed = cluster.clone();
            harness("cannot kill PostgreSQL", move || killed.kill()).await?;
            chaos.database_kills += 1;
            tokio::time::sleep(Duration::from_millis(rng.between(500, 2_000))).await;
            let restarted = cluster.clone();
            harness("cannot restart PostgreSQL", move || restarted.restart()).await?;
        } else if postgres && rng.below(4) < 3 || !postgres && rng.below(2) == 0 {
            let which = rng.below(relays.len() as u64) as usize;
            let relay = &mut relays[which];
            relay.proc.kill(true).await?;
            chaos.relay_kills[which] += 1;
            // Mostly back at once; now and then down for longer than a client's own retries (about 3 s), so
            // that some sends fail (or, on PostgreSQL, go to the other relay) and the runner backs off.
            let down = if postgres && rng.below(10) == 0 {
                chaos.long_outages += 1;
                rng.between(2_000, 4_000)
            } else if !postgres && rng.below(5) == 0 {
                chaos.long_outages += 1;
                rng.between(3_000, 6_000)
            } else {
                rng.below(500)
            };
            tokio::time::sleep(Duration::from_millis(down)).await;
            start_relay(&mut relay.proc, relay.port).await?;
        } else {
            runner.kill(true).await?;
            chaos.agent_kills += 1;
            tokio::time::sleep(Duration::from_millis(rng.below(200))).await;
            start_agent(&mut runner, &mut rng, &urls, &mut agent_starts)?;
        }
        if Instant::now() >= next_report {
            next_report += Duration::from_secs(30);
            println!(
                "soak: {:>4} s: {} relay kills, {} agent kills, {} database kills",
                started.elapsed().as_secs(),
                chaos.relay_total(),
                chaos.agent_kills,
                chaos.database_kills
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
    let mut send_retries = 0;
    for handle in senders {
        let (tasks, retries) = handle.await.context("a sender panicked")?;
        sent.extend(tasks);
        send_retries += retries;
    }

    // The drain: the relays and the agent run undisturbed until every task stored is processed.
    let drain_start = Instant::now();
    let drain_end = drain_start + Duration::from_secs(args.drain_seconds);
    let mut drained = false;
    while Instant::now() < drain_end {
        if runner.ended()? || !runner.running() {
            start_agent(&mut runner, &mut rng, &urls, &mut agent_starts)?;
        }
        revive(&mut relays).await?;
        if let Some(status) = status_anywhere(&agents).await
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

    // Read what the devices see, then stop everything.
    let mut views = Vec::new();
    for device in &devices {
        views.push(DeviceView::from_items(&read_conversation(device).await?));
    }
    runner.kill(false).await?;
    for relay in &mut relays {
        relay.proc.kill(false).await?;
    }
    if let Some(cluster) = cluster {
        // The server's log beside the relays' (the cluster's own folder goes with it).
        if let Some(log) = cluster.dir().map(|d| d.join("log")) {
            let _ = std::fs::copy(log, dir.join("postgres.log"));
        }
        harness("cannot stop PostgreSQL", move || drop(cluster)).await?;
    }

    let (recs, malformed) = records::read(&dir.join(records::RECORDS))?;
    let (invocations, _) = records::read(&dir.join(records::INVOCATIONS))?;
    let (failures, _) = records::read(&dir.join(records::FAILURES))?;
    let report = check::check(&sent, &views, &recs, &invocations, &failures, malformed);

    let send_errors = sent.iter().filter(|s| !s.acked).count();
    println!("soak: figures (seed {seed}, {} s of chaos)", duration.as_secs());
    println!("  tasks acknowledged:        {}", report.acknowledged);
    println!("  acknowledged and delivered: {}", report.delivered);
    println!("  acknowledged and lost:     {}", report.lost);
    println!("  duplicates:                {}", report.duplicates);
    println!(
        "  sends not acknowledged:    {send_errors} (handled anyway: {})",
        report.unacknowledged_handled
    );
    if postgres {
        println!("  sends tried again:         {send_retries} (same id, the other relay or later)");
    }
    let kills: Vec<String> = relays
        .iter()
        .zip(&chaos.relay_kills)
        .map(|(r, k)| format!("{} {k}", r.proc.name()))
        .collect();
    println!(
        "  relay SIGKILLs:            {} ({}; {} followed by a long outage)",
        chaos.relay_total(),
        kills.join(", "),
        chaos.long_outages
    );
    println!("  agent SIGKILLs:            {}", chaos.agent_kills);
    if postgres {
        println!(
            "  database SIGKILLs:         {} (postmaster and backends; crash recovery at each restart)",
            chaos.database_kills
        );
        println!(
            "  agent starts on A / B:     {} / {}",
            agent_starts[0],
            agent_starts.get(1).copied().unwrap_or(0)
        );
    }
    let ended: u32 = relays.iter().map(|r| r.proc.exits).sum();
    println!("  relays ended by themselves: {ended}");
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

    // On PostgreSQL a run that did not crash the database and the relays often enough proves too little.
    let mut too_few = Vec::new();
    if postgres {
        let (db_min, relay_min) = (
            scaled(MIN_DATABASE_KILLS_PER_MINUTE, duration),
            scaled(MIN_RELAY_KILLS_PER_MINUTE, duration),
        );
        if u64::from(chaos.database_kills) < db_min {
            too_few.push(format!(
                "{} database kills, fewer than {db_min}",
                chaos.database_kills
            ));
        }
        if u64::from(chaos.relay_total()) < relay_min {
            too_few.push(format!(
                "{} relay kills, fewer than {relay_min}",
                chaos.relay_total()
            ));
        }
    }
    let failed = !report.violations.is_empty() || !drained || !too_few.is_empty();
    if failed {
        if !drained {
            println!(
                "soak: FAILED: the backlog was not drained within {} s",
                args.drain_seconds
            );
        }
        for why in &too_few {
            println!("soak: FAILED: too little chaos: {why}");
        }
        if !report.violations.is_empty() {
            println!("soak: FAILED: {} violation(s):", report.violations.len());
            print!("{}", report.violations_summary(5));
        }
    } else {
        println!(
            "soak: passed: every acknowledged task was recorded once, processed, and replied to once; no cursor \
             skipped one, none was handed out again once processed"
        );
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

/// Gives relay B relay A's keys before its first start: `webhook.key` and `push.key` (mode 0600), which every
/// instance of one relay must share (docs/self-hosting.md), in a data folder of its own (mode 0700).
fn share_keys(from: &Path, to: &Path) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new()
        .mode(0o700)
        .recursive(true)
        .create(to)
        .with_context(|| format!("cannot create {}", to.display()))?;
    for key in ["webhook.key", "push.key"] {
        let (source, target) = (from.join(key), to.join(key));
        std::fs::copy(&source, &target)
            .with_context(|| format!("cannot copy {} to {}", source.display(), target.display()))?;
    }
    Ok(())
}

/// Starts the agent on one of the relays, drawn at each start, with a seed of its own for its handler's
/// pauses (also its run id in the handler's files). On PostgreSQL this puts the agent's wait on A half the
/// time and on B the other half, so that tasks sent through the other relay must wake it across instances.
fn start_agent(runner: &mut Proc, rng: &mut Rng, urls: &[String], starts: &mut [u32]) -> Result<()> {
    let on = rng.below(urls.len() as u64) as usize;
    starts[on] += 1;
    runner.start(&[
        "--relay".into(),
        urls[on].clone(),
        "--seed".into(),
        rng.next_u64().to_string(),
    ])
}

/// The agent's status from the first relay that answers.
async fn status_anywhere(agents: &[AgentClient]) -> Option<pacerelle_client::core::wire::Status> {
    for agent in agents {
        if let Ok(status) = agent.status().await {
            return Some(status);
        }
    }
    None
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

/// Reads the agent's backlog from its status every 250 ms, through whichever relay answers (keeping the last
/// figure while none does).
async fn watch_backlog(agents: Vec<AgentClient>, pace: Arc<Pace>) {
    while !pace.stop.load(Ordering::Relaxed) {
        if let Some(status) = status_anywhere(&agents).await {
            let backlog = status.messages.waiting + status.messages.in_progress;
            pace.backlog.store(backlog, Ordering::Relaxed);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// One sender: sends tasks with random pauses until told to stop, pausing while the agent's backlog is
/// over its bound, and returns every task it tried and how many sends it tried again.
///
/// `clients` are the same device on each relay, its own first. A send that fails for a reason that passes (the
/// relay unreachable, or answering `unavailable` while its database is down) goes again under the same id —
/// the relay stores a task once per id — to the next relay, then the next, for up to `retry_for` (zero: one
/// try, as on SQLite's single relay, where a failed send is counted and left).
async fn send_tasks(
    clients: Vec<DeviceClient>,
    index: usize,
    mut rng: Rng,
    pause_ms: u64,
    retry_for: Duration,
    pace: Arc<Pace>,
) -> (Vec<Sent>, u32) {
    let mut sent = Vec::new();
    let mut retries = 0;
    let mut n = 0u64;
    while !pace.stop.load(Ordering::Relaxed) {
        if pace.backlog.load(Ordering::Relaxed) > pace.max_backlog {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        }
        n += 1;
        let message_id = ids::generate(ids::MESSAGE);
        let text = format!("soak task {index}-{n}");
        let sent_ms = now_ms();
        let give_up = Instant::now() + retry_for;
        let mut attempt = 0usize;
        let acked = loop {
            let client = &clients[attempt % clients.len()];
            match client.send(&text, Some(&message_id)).await {
                Ok(stored) => break stored.id == message_id,
                Err(e) if e.kind() == pacerelle_client::ErrorKind::QuotaExceeded => {
                    eprintln!("soak: sender {index}: the backlog quota is reached");
                    break false;
                }
                Err(e) if e.is_transient() && Instant::now() < give_up => {
                    attempt += 1;
                    retries += 1;
                    // The other relay at once; the same one again after a pause.
                    if attempt.is_multiple_of(clients.len()) {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                }
                Err(_) => break false,
            }
        };
        sent.push(Sent {
            message_id,
            device: index,
            sent_ms,
            acked,
            acked_ms: if acked { now_ms() } else { 0 },
        });
        tokio::time::sleep(Duration::from_millis(rng.below(pause_ms + 1))).await;
    }
    (sent, retries)
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
