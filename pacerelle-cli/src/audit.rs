//! `pacerelle audit export|search`: the answer log, decrypted on this machine.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use pacerelle_client::{AuditEntry, AuditFilter, QuestionState, Timestamp};

use crate::Global;
use crate::home;
use crate::output;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// One JSON object per line.
    Jsonl,
    /// Comma-separated values with a header row.
    Csv,
}

#[derive(Debug, clap::Args)]
pub struct FilterArgs {
    /// Only questions asked at or after this time (RFC 3339, a date, or a duration ago such as 24h or 7d).
    #[arg(long, value_parser = crate::time::parse_time)]
    since: Option<Timestamp>,
    /// Only questions asked before this time.
    #[arg(long, value_parser = crate::time::parse_time)]
    until: Option<Timestamp>,
    /// Only questions in this state (as the relay records it).
    #[arg(long, value_parser = parse_state)]
    state: Option<QuestionState>,
    /// At most this many questions, newest first.
    #[arg(long)]
    limit: Option<usize>,
}

impl FilterArgs {
    fn filter(&self) -> AuditFilter {
        AuditFilter {
            state: self.state,
            since: self.since,
            until: self.until,
            limit: self.limit,
        }
    }
}

#[derive(Debug, clap::Subcommand)]
pub enum AuditCommand {
    /// Export the answer log, newest first.
    Export {
        /// The format.
        #[arg(long, value_enum, default_value = "jsonl")]
        format: Format,
        /// Write to this file instead of standard output.
        #[arg(long, short)]
        output: Option<PathBuf>,
        #[command(flatten)]
        filter: FilterArgs,
    },
    /// Find questions whose text, details or answer contain TEXT (ignoring case).
    Search {
        /// What to look for.
        text: String,
        #[command(flatten)]
        filter: FilterArgs,
    },
}

fn parse_state(text: &str) -> Result<QuestionState, String> {
    QuestionState::parse(text).ok_or_else(|| "one of pending, answered, expired, cancelled".into())
}

fn print_entry(e: &AuditEntry) {
    let outcome = match (e.state, e.approved, &e.answer) {
        (_, _, _) if e.rejected.is_some() => "rejected".to_string(),
        (QuestionState::Answered, true, Some(a)) => format!("approved: {a}"),
        (QuestionState::Answered, false, Some(a)) => format!("answered: {a}"),
        (state, _, _) => state.as_str().to_string(),
    };
    let by = e
        .answered_by_name
        .as_deref()
        .or(e.answered_by.as_deref())
        .map(|n| format!(" — {n}"))
        .unwrap_or_default();
    println!(
        "{}  {}  {}  [{}]{by}",
        e.created_at, e.question_id, e.question, outcome
    );
}

pub async fn run(global: &Global, cmd: AuditCommand) -> Result<()> {
    let agent = home::agent_client(global)?;
    match cmd {
        AuditCommand::Export {
            format,
            output,
            filter,
        } => {
            let entries = agent.answer_log(&filter.filter()).await?;
            let mut sink: Box<dyn Write> = match &output {
                Some(path) => Box::new(std::io::BufWriter::new(
                    std::fs::File::create(path)
                        .with_context(|| format!("cannot write {}", path.display()))?,
                )),
                None => Box::new(std::io::stdout().lock()),
            };
            let count = match format {
                Format::Jsonl => pacerelle_client::write_jsonl(&entries, &mut sink)?,
                Format::Csv => pacerelle_client::write_csv(&entries, &mut sink)?,
            };
            sink.flush()?;
            if let Some(path) = output {
                eprintln!("{count} questions written to {}", path.display());
            }
            Ok(())
        }
        AuditCommand::Search { text, filter } => {
            let found = agent.search_answer_log(&text, &filter.filter()).await?;
            if global.json {
                return output::json(&found);
            }
            if found.is_empty() {
                eprintln!("nothing found");
            }
            found.iter().for_each(print_entry);
            Ok(())
        }
    }
}
