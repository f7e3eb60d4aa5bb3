//! `pacerelle store copy`: a relay's data from its SQLite file into PostgreSQL (docs/self-hosting.md, "Moving
//! from SQLite to PostgreSQL").

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::{Args, Subcommand};
use pacerelle_relay::copy::{self, CopyOptions, CopyReport};

use crate::Global;
use crate::output;

/// Set to a number of batches, the copy stops (sleeps) after that many batches committed and says so on
/// stderr: for the test that kills a copy midway. Not for users.
const PAUSE_ENV: &str = "PACERELLE_TEST_COPY_PAUSE_AFTER";

/// The relay's storage.
#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// Copy a relay's data from its SQLite file into a PostgreSQL database, then verify it.
    ///
    /// Stop the relay first, or copy with `--live` while it serves and then again once it is stopped: the
    /// second copy writes only what changed. The copy can be run again: an interrupted copy continues, a
    /// finished one changes nothing. Then start the relay with `pacerelle serve --data <the same folder>
    /// --database <URL>`: the folder keeps the keys.
    Copy(CopyArgs),
}

/// `pacerelle store copy`.
#[derive(Debug, Args)]
pub struct CopyArgs {
    /// The relay's SQLite file or its data folder (`sqlite:PATH` or `PATH`).
    #[arg(long)]
    from: String,
    /// The PostgreSQL database (`postgres://user:password@host/db`); it should be empty, or hold an earlier
    /// copy of this same relay.
    #[arg(long, env = "PACERELLE_DATABASE_URL")]
    to: String,
    /// Rows per transaction.
    #[arg(long, default_value_t = copy::DEFAULT_BATCH_ROWS)]
    batch: usize,
    /// Copy while the SQLite relay still serves (a snapshot of its file): then stop the relay and copy again
    /// without `--live`, which takes only the changes, and start it on PostgreSQL.
    #[arg(long)]
    live: bool,
}

/// Runs a `store` command.
pub async fn run(global: &Global, cmd: StoreCommand) -> Result<()> {
    match cmd {
        StoreCommand::Copy(args) => copy_command(global, args).await,
    }
}

async fn copy_command(global: &Global, args: CopyArgs) -> Result<()> {
    let from = args.from.strip_prefix("sqlite:").unwrap_or(&args.from);
    let from = from.strip_prefix("//").unwrap_or(from);
    if from.is_empty() {
        return Err(output::invalid_input(
            "--from takes the relay's SQLite file or its data folder",
        ));
    }
    if !(args.to.starts_with("postgres://") || args.to.starts_with("postgresql://")) {
        return Err(output::invalid_input(
            "--to takes a PostgreSQL URL (postgres://user:password@host/db)",
        ));
    }
    let file = copy::sqlite_file(&PathBuf::from(from));
    let pause: Option<u64> = std::env::var(PAUSE_ENV).ok().and_then(|v| v.parse().ok());
    let mut batches = 0u64;
    let quiet = global.json;
    let options = CopyOptions {
        batch_rows: args.batch,
        live: args.live,
        on_batch: Some(Box::new(move |table: &str, rows: u64| {
            batches += 1;
            if !quiet {
                eprint!("\r{table}: {rows} rows read          ");
                let _ = std::io::stderr().flush();
            }
            if pause == Some(batches) {
                eprintln!("\npaused after {batches} batches");
                loop {
                    std::thread::sleep(std::time::Duration::from_secs(3600));
                }
            }
        })),
    };
    let report = copy::copy(&file, &args.to, options).await?;
    if !global.json {
        eprint!("\r{:60}\r", "");
    }
    print_report(global, &file, &report, args.live)?;
    let differ: Vec<&str> = report
        .tables
        .iter()
        .filter(|t| !t.verified())
        .map(|t| t.table.as_str())
        .collect();
    if !differ.is_empty() {
        bail!(
            "the copy differs from the source in {}: run the copy again; if it still differs, keep the SQLite relay",
            differ.join(", ")
        );
    }
    Ok(())
}

fn print_report(global: &Global, file: &std::path::Path, report: &CopyReport, live: bool) -> Result<()> {
    if global.json {
        return output::json(&serde_json::json!({
            "from": file.display().to_string(),
            "verified": report.verified(),
            "tables": report.tables,
            "sequences": report.sequences,
            "skipped": report.skipped,
        }));
    }
    println!("Copied {} into PostgreSQL.\n", file.display());
    let width = report
        .tables
        .iter()
        .map(|t| t.table.len())
        .max()
        .unwrap_or(5)
        .max(5);
    println!(
        "{:width$}  {:>9}  {:>9}  {:>9}  {:>9}  keys",
        "table", "source", "target", "written", "deleted"
    );
    for t in &report.tables {
        println!(
            "{:width$}  {:>9}  {:>9}  {:>9}  {:>9}  {}",
            t.table,
            t.source_rows,
            t.target_rows,
            t.written,
            t.deleted,
            if t.verified() { "same" } else { "DIFFER" }
        );
    }
    for s in &report.sequences {
        println!("sequence {} at {}", s.column, s.last);
    }
    if !report.skipped.is_empty() {
        println!(
            "not copied (only one side has them): {}",
            report.skipped.join(", ")
        );
    }
    if report.verified() && live {
        println!(
            "\nVerified against the snapshot copied. Next: stop the relay, run this copy again without --live (it \
             takes only the changes), then pacerelle serve --data <the same folder> --database <URL>."
        );
    } else if report.verified() {
        println!(
            "\nVerified: every table holds the same rows on both sides.\nNext: pacerelle serve --data <the same \
             folder> --database <URL> (the folder keeps the keys)."
        );
    }
    Ok(())
}
