//! The one table printed at the end (Markdown, to paste into `docs/performance.md`), each figure beside the
//! target it is read against, and the machine line: cores, load average, date.

use pacerelle_client::Timestamp;

use crate::floor::ms;
use crate::latency::RateResult;
use crate::parked::ParkedResult;
use crate::saturation::LevelResult;
use crate::stats::Summary;

/// Everything measured, gathered for the table.
#[derive(Debug, Default)]
pub struct Report {
    quick: bool,
    started: String,
    load_at_start: String,
    notes: Vec<String>,
    /// The relay's `serve` flags.
    pub relay_flags: Vec<String>,
    /// Relay instances on one database (1 unless `--instances`).
    pub instances: usize,
    /// The floor before the phases (the `f` of the targets).
    pub floor_start: Option<Summary>,
    /// The floor after them.
    pub floor_end: Option<Summary>,
    /// Latency, one entry per rate.
    pub latency: Vec<RateResult>,
    /// Throughput, one entry per sender count.
    pub throughput: Vec<LevelResult>,
    /// Parked waits.
    pub parked: Option<ParkedResult>,
}

/// The load average, as `/proc/loadavg` gives it (1, 5, 15 minutes).
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "n/a".into())
}

fn yes(met: bool) -> &'static str {
    if met { "yes" } else { "**no**" }
}

/// `12345.6` as `12 346`.
fn grouped(v: f64) -> String {
    let digits = format!("{:.0}", v.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

impl Report {
    /// An empty report, stamped with the time and load average now.
    pub fn new(quick: bool) -> Report {
        Report {
            quick,
            started: Timestamp::now().to_rfc3339(),
            load_at_start: load_average(),
            ..Report::default()
        }
    }

    /// A line printed under the table.
    pub fn note(&mut self, line: String) {
        self.notes.push(line);
    }

    /// Prints the machine line and the table.
    pub fn print(&self) {
        let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
        println!();
        println!(
            "machine: {cores} cores; load average {} at start, {} at end; started {}{}",
            self.load_at_start,
            load_average(),
            self.started,
            if self.quick {
                "; --quick (figures too small to quote)"
            } else {
                ""
            }
        );
        if !self.relay_flags.is_empty() {
            println!(
                "relay: pacerelle serve {}{}",
                crate::relay::redacted(&self.relay_flags).join(" "),
                if self.instances > 1 {
                    format!(
                        " ({} instances: senders spread over them, the agents' waits on the last)",
                        self.instances
                    )
                } else {
                    String::new()
                }
            );
        }
        println!();
        println!("| figure | measured | target | met |");
        println!("|---|---|---|---|");
        let f = self.floor_start.map(|s| s.p50);
        if let Some(s) = self.floor_start {
            println!(
                "| floor f: synced 4 KiB write, before (p50 / mean / p99, {} writes) | {:.3} / {:.3} / {:.3} ms | | |",
                s.count,
                ms(s.p50),
                ms(s.mean),
                ms(s.p99)
            );
        }
        for r in &self.latency {
            let rate = format!(
                "{} tasks sent, {} received, started at {:.0}/s{}{}",
                r.sent,
                r.received,
                r.achieved,
                if r.kept_rate() {
                    String::new()
                } else {
                    format!(
                        "; **this process did not keep the rate** ({} sends late by > 5 ms, worst {:.1} ms)",
                        r.late,
                        ms(r.worst_lag)
                    )
                },
                if r.errors > 0 {
                    format!("; {} sends failed", r.errors)
                } else {
                    String::new()
                }
            );
            let (t50, t99) = match f {
                Some(f) => (
                    format!("≤ f + 0.5 = {:.3} ms", ms(f) + 0.5),
                    format!("≤ 3f + 2 = {:.3} ms", 3.0 * ms(f) + 2.0),
                ),
                None => ("≤ f + 0.5 ms".into(), "≤ 3f + 2 ms".into()),
            };
            let met50 = f.map_or("n/a", |f| yes(ms(r.delivered.p50) <= ms(f) + 0.5));
            let met99 = f.map_or("n/a", |f| yes(ms(r.delivered.p99) <= 3.0 * ms(f) + 2.0));
            println!(
                "| send → parked wait at {}/s, p50 ({rate}) | {:.3} ms | {t50} | {met50} |",
                r.rate,
                ms(r.delivered.p50)
            );
            println!(
                "| send → parked wait at {}/s, p99 / max | {:.3} / {:.3} ms | {t99} | {met99} |",
                r.rate,
                ms(r.delivered.p99),
                ms(r.delivered.max)
            );
            println!(
                "| send acknowledged at {}/s, p50 / p99; synced commits per task (store and delivery) | {:.3} / {:.3} ms; {} | | |",
                r.rate,
                ms(r.acked.p50),
                ms(r.acked.p99),
                r.commits_per_task
                    .map_or("n/a".to_string(), |c| format!("{c:.2}"))
            );
        }
        for r in &self.throughput {
            let (target, met) = if r.senders == 64 {
                ("≥ 10 000", yes(r.per_second() >= 10_000.0))
            } else {
                ("", "")
            };
            println!(
                "| durable tasks/s, {} senders ({} tasks in {:.2} s) | {} | {target} | {met} |",
                r.senders,
                r.tasks,
                r.elapsed.as_secs_f64(),
                grouped(r.per_second())
            );
            let half = 0.5 * r.senders as f64;
            match r.commits() {
                Some((per_task, writes_per_commit)) => println!(
                    "| {} senders: synced commits per task / writes per commit | {per_task:.3} / {writes_per_commit:.2} | writes per commit ≥ {half} | {} |",
                    r.senders,
                    yes(writes_per_commit >= half)
                ),
                None => println!(
                    "| {} senders: synced commits per task / writes per commit | n/a (no store counters at /metrics) | writes per commit ≥ {half} | n/a |",
                    r.senders
                ),
            }
            let wall = r.elapsed.as_secs_f64().max(1e-9);
            let tasks = r.tasks.max(1) as f64;
            println!(
                "| {} senders: CPU of the relay / this process / everything else, in cores (relay and this process, µs per task) | {:.2} / {:.2} / {:.2} ({:.0} / {:.0} µs) | | |",
                r.senders,
                r.relay_cpu.as_secs_f64() / wall,
                r.load_cpu.as_secs_f64() / wall,
                r.machine_cpu
                    .saturating_sub(r.relay_cpu + r.load_cpu)
                    .as_secs_f64()
                    / wall,
                r.relay_cpu.as_secs_f64() * 1e6 / tasks,
                r.load_cpu.as_secs_f64() * 1e6 / tasks
            );
        }
        if let Some(p) = &self.parked {
            let limit_mib = 100.0 * (p.waits.max(10_000) as f64 / 10_000.0);
            let parked_mib = p.rss_kib.2 as f64 / 1024.0;
            println!(
                "| relay RSS with {} parked waits (before registering / after / with the waits) | {:.1} / {:.1} / {:.1} MiB | ≤ {limit_mib:.0} MiB | {} |",
                p.parked,
                p.rss_kib.0 as f64 / 1024.0,
                p.rss_kib.1 as f64 / 1024.0,
                parked_mib,
                yes(parked_mib <= limit_mib)
            );
            println!(
                "| relay memory per parked wait | {:.1} KiB | | |",
                p.per_wait_kib()
            );
            println!(
                "| {} agents registered / waits parked in | {:.1} s / {:.1} s{} | | |",
                p.waits,
                p.registering.as_secs_f64(),
                p.parking.as_secs_f64(),
                if p.answered_early > 0 {
                    format!("; **{} waits answered early**", p.answered_early)
                } else {
                    String::new()
                }
            );
            println!(
                "| this process's RSS with the waits | {:.1} MiB | | |",
                p.load_rss_kib as f64 / 1024.0
            );
        }
        if let Some(s) = self.floor_end {
            println!(
                "| floor, after (p50 / mean / p99, {} writes) | {:.3} / {:.3} / {:.3} ms | | |",
                s.count,
                ms(s.p50),
                ms(s.mean),
                ms(s.p99)
            );
        }
        for note in &self.notes {
            println!();
            println!("{note}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_are_grouped_by_spaces() {
        assert_eq!(grouped(0.4), "0");
        assert_eq!(grouped(999.0), "999");
        assert_eq!(grouped(1000.0), "1 000");
        assert_eq!(grouped(1_234_567.0), "1 234 567");
    }
}
