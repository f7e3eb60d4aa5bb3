//! `cargo xtask fuzz [--time 10m] [--target NAME]... [--seed N] [--cases N]`: runs the fuzz targets, the
//! time split evenly between them, and prints cases and cases per second for each and in total. A failed
//! case is written to `pacerelle-fuzz/regressions/<target>/<hash>.bin`, to be committed as a regression
//! case, and the run fails naming it.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use pacerelle_fuzz::engine::{self, Budget};
use pacerelle_fuzz::{TARGET_NAMES, target};

const USAGE: &str = "\
usage: pacerelle-fuzz [--time DURATION] [--target NAME]... [--seed N] [--cases N] [--list]

  --time DURATION   total time, split evenly between the targets: 90s, 10m, 1h (default 1m)
  --target NAME     only this target (repeatable); --list shows them
  --seed N          the random seed (default: from the clock; printed either way)
  --cases N         at most N cases per target
";

/// Parses `90s`, `10m`, `1h` or a number of seconds.
fn parse_duration(text: &str) -> Result<Duration> {
    let (number, unit) = match text.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => text.split_at(i),
        None => (text, "s"),
    };
    let n: u64 = number.parse().with_context(|| format!("bad duration {text:?}"))?;
    let seconds = match unit {
        "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        _ => bail!("bad duration {text:?}: use s, m or h"),
    };
    Ok(Duration::from_secs(seconds))
}

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<ExitCode> {
    let mut time = Duration::from_secs(60);
    let mut names: Vec<String> = Vec::new();
    let mut seed: Option<u64> = None;
    let mut cases: Option<u64> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |what: &str| args.next().with_context(|| format!("{arg} needs {what}"));
        match arg.as_str() {
            "--time" => time = parse_duration(&value("a duration")?)?,
            "--target" => names.extend(value("a name")?.split(',').map(str::to_string)),
            "--seed" => seed = Some(value("a number")?.parse().context("bad --seed")?),
            "--cases" => cases = Some(value("a number")?.parse().context("bad --cases")?),
            "--list" => {
                println!("{}", TARGET_NAMES.join("\n"));
                return Ok(ExitCode::SUCCESS);
            }
            "-h" | "--help" => {
                print!("{USAGE}");
                return Ok(ExitCode::SUCCESS);
            }
            other => bail!("unknown argument {other:?}\n\n{USAGE}"),
        }
    }
    if names.is_empty() {
        names = TARGET_NAMES.iter().map(|s| s.to_string()).collect();
    }
    let seed = seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    let share = time / names.len() as u32;
    println!(
        "fuzzing {} target(s) for {:?} each, seed {seed} (repeat with --seed {seed})",
        names.len(),
        share
    );
    engine::quiet_panics();
    let mut total_cases = 0u64;
    let mut total_time = Duration::ZERO;
    let mut crashes = Vec::new();
    for name in &names {
        let target = target(name)?;
        let outcome = engine::fuzz(
            target.as_ref(),
            seed,
            Budget {
                cases,
                time: Some(share),
            },
        );
        total_cases += outcome.cases;
        total_time += outcome.elapsed;
        let rate = outcome.cases as f64 / outcome.elapsed.as_secs_f64().max(1e-9);
        println!(
            "{name:>10}: {:>10} cases in {:>6.1} s ({rate:>9.0}/s), {} distinct outcomes{}",
            outcome.cases,
            outcome.elapsed.as_secs_f64(),
            outcome.signals,
            if outcome.crash.is_some() {
                ", FAILED"
            } else {
                ", no failure"
            }
        );
        if let Some(crash) = outcome.crash {
            let path = engine::save_crash(&engine::regressions_dir(), name, &crash.input)
                .context("cannot write the failing input")?;
            println!(
                "            {}\n            input written to {}",
                crash.message,
                path.display()
            );
            crashes.push(path);
        }
    }
    let rate = total_cases as f64 / total_time.as_secs_f64().max(1e-9);
    println!(
        "     total: {total_cases:>10} cases in {:>6.1} s ({rate:>9.0}/s)",
        total_time.as_secs_f64()
    );
    if crashes.is_empty() {
        println!("no failure");
        Ok(ExitCode::SUCCESS)
    } else {
        println!(
            "{} target(s) failed; commit the inputs as regression cases once fixed:",
            crashes.len()
        );
        for path in &crashes {
            println!("  {}", path.display());
        }
        Ok(ExitCode::FAILURE)
    }
}
