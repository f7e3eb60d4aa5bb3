//! `pacerelle-load`: a load generator in its own process (issue 15, `cargo xtask bench --load`).
//!
//! It starts a release relay alone (`pacerelle serve`, a child process with its database in a temporary
//! folder), and drives it over loopback from this process:
//!
//! 1. **floor**: the disk's synced-write time in that same folder (4 KiB appended and `fdatasync`ed, many
//!    times), measured first and again at the end, so that every other figure can be read against it;
//! 2. **latency**: open-loop sends at fixed rates (100/s, 500/s, 2 000/s by default) to agents that each keep
//!    a wait parked; per task, the time from the send's start to the return of the wait that carried it;
//! 3. **throughput**: 1, 16, 64 and 256 concurrent senders; acknowledged (durably stored) tasks per second,
//!    the relay's synced commits per task from `GET /metrics` when it has them, and who used the CPU;
//! 4. **parked**: `--parked N` agents each with one parked wait; the relay's resident memory per wait.
//!
//! Tasks are sealed ahead of each phase with the real device keys (pairing goes through `pacerelle-client`)
//! and sent by a plain HTTP/1.1 driver, so that the load process spends its CPU on little more than the
//! sockets; the agents' side is the real client, which opens every task it receives. The relay is killed at
//! the end, on an error and on Ctrl-C. Everything is printed as one table at the end.
//!
//! With `--database postgres` (a throw-away cluster, `fsync=on`) or `--database postgres://…`, the relays store
//! in PostgreSQL, and `--instances 2` starts two of them on the one database: the throughput phase spreads its
//! senders over both, the latency phase sends to the first while the agents' waits park on the second, so each
//! task crosses instances (the wake-up goes through `LISTEN/NOTIFY`).

mod floor;
mod http;
mod latency;
mod parked;
mod relay;
mod report;
mod saturation;
mod setup;
mod stats;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};
use clap::{Parser, ValueEnum};

use crate::relay::Relay;
use crate::report::Report;

/// Command line.
#[derive(Debug, Parser)]
#[command(
    name = "pacerelle-load",
    about = "Drive a release relay in its own process and print its figures"
)]
struct Args {
    /// The relay binary [default: `pacerelle` beside this program].
    #[arg(long, value_name = "PATH")]
    relay_bin: Option<PathBuf>,
    /// Make every phase small (seconds), for a smoke run.
    #[arg(long)]
    quick: bool,
    /// Run only these phases (comma-separated) [default: all].
    #[arg(long, value_delimiter = ',', value_name = "PHASE")]
    only: Vec<Phase>,
    /// Parked waits to hold at once [default: 10000; 500 with --quick].
    #[arg(long, value_name = "N")]
    parked: Option<usize>,
    /// Rates of the latency phase, tasks per second (comma-separated).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "100,500,2000",
        value_name = "RATES"
    )]
    rates: Vec<u32>,
    /// Seconds each rate runs [default: 10; 1 with --quick].
    #[arg(long, value_name = "SECONDS")]
    seconds: Option<f64>,
    /// Concurrent senders of the throughput phase (comma-separated).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1,16,64,256",
        value_name = "COUNTS"
    )]
    senders: Vec<usize>,
    /// Tasks sent at each sender count [default: 40000, and 5000 per sender below 8 senders; 300 per sender,
    /// at most 3000, with --quick].
    #[arg(long, value_name = "N")]
    tasks: Option<usize>,
    /// Synced writes of each floor measurement [default: 2000; 200 with --quick].
    #[arg(long, value_name = "N")]
    floor_writes: Option<usize>,
    /// The relays' store: a `postgres://…` URL (a database used as is, shared by every instance), or
    /// `postgres` for a throw-away cluster started here with `fsync=on` [default: each relay's SQLite file].
    #[arg(long, value_name = "URL")]
    database: Option<String>,
    /// Relay instances on the one PostgreSQL database (needs --database): the throughput phase spreads its
    /// senders over them, the latency phase sends to the first and parks the agents' waits on the last.
    #[arg(long, default_value_t = 1, value_name = "N")]
    instances: usize,
    /// Pins the throw-away PostgreSQL cluster (its server and every backend it starts) to these CPUs, a
    /// `taskset` list such as `0`: PostgreSQL then has a fixed share of the machine, and what more relay
    /// instances add shows (needs --database postgres).
    #[arg(long, value_name = "CPUS")]
    postgres_cpus: Option<String>,
    /// Pins the relays and this process to these CPUs (a `taskset` list such as `1`).
    #[arg(long, value_name = "CPUS")]
    relay_cpus: Option<String>,
    /// Gives each relay at most this much CPU time, in cores (such as `0.1`), through a cgroup of its own
    /// (needs write access to the cgroup file system, v1 or v2): the relays are then what runs out, and what
    /// a second instance adds shows.
    #[arg(long, value_name = "CORES")]
    relay_cpu_limit: Option<f64>,
}

/// A phase of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Phase {
    /// The disk's synced-write floor.
    Floor,
    /// Send → parked wait at fixed rates.
    Latency,
    /// Durable tasks per second at several sender counts.
    Throughput,
    /// Memory of parked waits.
    Parked,
}

/// Agents of the latency and throughput phases.
const AGENTS: usize = 8;
/// Devices paired with each of them (64 senders' devices in all).
const DEVICES_PER_AGENT: usize = 8;

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("pacerelle-load: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(async {
        tokio::select! {
            outcome = run(args) => outcome,
            _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted")),
        }
    });
    // Dropping the run (on Ctrl-C too) has killed the relay and removed the work folder.
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pacerelle-load: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<()> {
    let wants = |p: Phase| args.only.is_empty() || args.only.contains(&p);
    let quick = args.quick;
    let parked_n = args.parked.unwrap_or(if quick { 500 } else { 10_000 });
    let seconds = args.seconds.unwrap_or(if quick { 1.0 } else { 10.0 });
    let floor_writes = args.floor_writes.unwrap_or(if quick { 200 } else { 2000 });
    if args.senders.contains(&0) || args.rates.contains(&0) || seconds <= 0.0 || args.instances == 0 {
        bail!("--senders, --rates, --seconds and --instances must be positive");
    }
    let mut report_notes = Vec::new();
    if args.postgres_cpus.is_some() && args.database.as_deref() != Some("postgres") {
        bail!("--postgres-cpus pins the throw-away cluster of --database postgres");
    }
    if let Some(cpus) = &args.relay_cpus {
        relay::pin(std::process::id(), cpus).await?;
        report_notes.push(format!("relays and the load process pinned to CPUs {cpus}"));
    }
    if let Some(cores) = args.relay_cpu_limit {
        if !(cores > 0.0 && cores.is_finite()) {
            bail!("--relay-cpu-limit must be a positive number of cores");
        }
        report_notes.push(format!(
            "each relay limited to {cores} of a core (a cgroup CPU quota)"
        ));
    }
    if args.instances > 1 && args.database.is_none() {
        bail!("--instances above 1 needs --database: SQLite relays cannot share a store");
    }

    let bin = match &args.relay_bin {
        Some(path) => path.clone(),
        None => std::env::current_exe()
            .context("cannot find this program's path")?
            .with_file_name(format!("pacerelle{}", std::env::consts::EXE_SUFFIX)),
    };
    let needs_relay = wants(Phase::Latency) || wants(Phase::Throughput) || wants(Phase::Parked);
    if needs_relay && !bin.is_file() {
        bail!(
            "no relay binary at {} (cargo build --release -p pacerelle-cli, or give --relay-bin)",
            bin.display()
        );
    }

    let mut report = Report::new(quick);
    for note in report_notes {
        report.note(note);
    }
    // Every parked wait is a connection here and one at the relay, which inherits this limit.
    if wants(Phase::Parked) {
        let need = parked_n as u64 + 512;
        let got = raise_file_limit(need);
        if got < need {
            bail!(
                "--parked {parked_n} needs {need} open files here and at the relay; this process may open {got} \
                 (the hard limit, `ulimit -Hn`, can be raised only by a process with CAP_SYS_RESOURCE)"
            );
        }
        report.note(format!("open-file limit of this process and the relay: {got}"));
    }

    let work = tempfile::Builder::new().prefix("pacerelle-load-").tempdir()?;
    println!(
        "pacerelle-load: work folder {} ({}); relay {}",
        work.path().display(),
        if quick { "quick run" } else { "full run" },
        bin.display()
    );

    if wants(Phase::Floor) {
        let f = floor::measure_async(work.path(), floor_writes).await?;
        println!(
            "floor: {} synced 4 KiB writes, p50 {:.3} ms, mean {:.3} ms",
            f.count,
            floor::ms(f.p50),
            floor::ms(f.mean)
        );
        report.floor_start = Some(f);
    }

    if needs_relay {
        let mut flags = vec![
            // Senders here outrun any agent: no quota refusal may cut a phase short.
            "--max-pending-tasks".to_string(),
            u32::MAX.to_string(),
            // Above the relay's derived cap when --parked is large.
            "--max-connections".into(),
            (parked_n + 1024).to_string(),
        ];
        if relay::serve_has_flag(&bin, "--metrics").await {
            // The store counters (commits, writes) of `GET /metrics`; a relay without the flag gets n/a.
            flags.push("--metrics".into());
        }
        // Kept until the relays are gone: dropping it stops the throw-away cluster.
        let cluster = match args.database.as_deref() {
            Some("postgres") => {
                let started =
                    tokio::task::spawn_blocking(pacerelle_test_support::postgres::Cluster::start_durable)
                        .await
                        .context(
                            "cannot start a throw-away PostgreSQL cluster (initdb and postgres on the PATH?)",
                        )?;
                let url = started.fresh_database().await;
                println!(
                    "postgres: a throw-away cluster (fsync=on) in {}",
                    started.dir().map(|d| d.display().to_string()).unwrap_or_default()
                );
                if let (Some(cpus), Some(dir)) = (&args.postgres_cpus, started.dir()) {
                    relay::pin_postgres(dir, cpus).await?;
                    report.note(format!("PostgreSQL pinned to CPUs {cpus}"));
                }
                flags.extend(["--database".to_string(), url]);
                Some(started)
            }
            Some(url) => {
                flags.extend(["--database".to_string(), url.to_string()]);
                None
            }
            None => None,
        };
        let mut relays = Vec::with_capacity(args.instances);
        let mut limits = Vec::new();
        for i in 0..args.instances {
            let dir = work.path().join(format!("relay{i}"));
            std::fs::create_dir_all(&dir)?;
            let relay = Relay::start(&bin, &dir, &flags).await?;
            if let Some(cpus) = &args.relay_cpus {
                relay::pin(relay.pid, cpus).await?;
            }
            if let Some(cores) = args.relay_cpu_limit {
                limits.push(relay::CpuLimit::apply(relay.pid, cores, &format!("relay{i}"))?);
            }
            println!("relay {i}: pid {} on {}", relay.pid, relay.addr);
            relays.push(relay);
        }
        report.relay_flags = relays[0].flags.clone();
        report.instances = args.instances;
        let outcome = phases(&args, &mut relays, &mut report, seconds, parked_n).await;
        let tails: Vec<String> = relays.iter().map(Relay::log_tail).collect();
        for relay in relays {
            relay.stop().await?;
        }
        drop(limits);
        drop(cluster);
        if let Err(e) = outcome {
            bail!("{e:#}\nthe relays' last lines:\n{}", tails.join("\n--\n"));
        }
    }

    if wants(Phase::Floor) {
        report.floor_end = Some(floor::measure_async(work.path(), floor_writes).await?);
    }
    report.print();
    Ok(())
}

/// The phases that need the relay.
async fn phases(
    args: &Args,
    relays: &mut [Relay],
    report: &mut Report,
    seconds: f64,
    parked_n: usize,
) -> Result<()> {
    let wants = |p: Phase| args.only.is_empty() || args.only.contains(&p);
    if wants(Phase::Latency) || wants(Phase::Throughput) {
        // The agents' waits park on the last instance; the latency phase sends to the first.
        let url = format!("http://{}", relays[relays.len() - 1].addr);
        let pairs = setup::pair(&url, AGENTS, DEVICES_PER_AGENT).await?;
        println!("paired {AGENTS} agents with {DEVICES_PER_AGENT} devices each");
        if wants(Phase::Latency) {
            let cursors = latency::Cursors::at_head(&pairs).await?;
            for &rate in &args.rates {
                let r = latency::run(relays, &pairs, &cursors, rate, seconds).await?;
                println!(
                    "latency at {rate}/s: {} sent, {} received, p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms{}",
                    r.sent,
                    r.received,
                    floor::ms(r.delivered.p50),
                    floor::ms(r.delivered.p99),
                    floor::ms(r.delivered.max),
                    if r.kept_rate() {
                        String::new()
                    } else {
                        format!(" — this process did not keep the rate ({:.0}/s)", r.achieved)
                    }
                );
                report.latency.push(r);
                check_alive(relays)?;
            }
        }
        if wants(Phase::Throughput) {
            let devices = setup::interleaved(&pairs);
            for &senders in &args.senders {
                let tasks = args.tasks.unwrap_or(if args.quick {
                    (300 * senders).min(3000)
                } else if senders < 8 {
                    5000 * senders
                } else {
                    40_000
                });
                let r = saturation::run(relays, &devices, senders, tasks, &format!("sat{senders}")).await?;
                println!(
                    "throughput with {senders} senders: {} tasks in {:.2} s, {:.0} tasks/s",
                    r.tasks,
                    r.elapsed.as_secs_f64(),
                    r.per_second()
                );
                report.throughput.push(r);
                check_alive(relays)?;
            }
        }
    }
    if wants(Phase::Parked) {
        let relay = &mut relays[0];
        let r = parked::run(relay, parked_n).await?;
        println!(
            "parked: {} waits parked in {:.1} s ({} agents registered in {:.1} s), relay RSS {} → {} KiB",
            r.parked,
            r.parking.as_secs_f64(),
            r.waits,
            r.registering.as_secs_f64(),
            r.rss_kib.1,
            r.rss_kib.2
        );
        report.parked = Some(r);
        relay.check_alive()?;
    }
    Ok(())
}

/// Fails when one of the relays has ended.
fn check_alive(relays: &mut [Relay]) -> Result<()> {
    relays.iter_mut().try_for_each(Relay::check_alive)
}

/// Raises this process's file limit (soft and hard: as root the hard one can grow) to `need` if it is lower;
/// returns the soft limit it ends with. Children (the relay) inherit it.
fn raise_file_limit(need: u64) -> u64 {
    use rlimit::Resource;
    let Ok((soft, hard)) = rlimit::getrlimit(Resource::NOFILE) else {
        return 0;
    };
    if soft >= need {
        return soft;
    }
    if rlimit::setrlimit(Resource::NOFILE, need, need.max(hard)).is_ok() {
        return need;
    }
    rlimit::increase_nofile_limit(need).unwrap_or(soft)
}
