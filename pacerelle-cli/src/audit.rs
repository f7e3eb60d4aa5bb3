//! `pacerelle audit export|search|verify`: the answer log, decrypted on this machine, and the check of a
//! signed export that anyone can run.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use pacerelle_client::{QuestionState, Timestamp, agent::AuditEntry, agent::AuditFilter, agent::GrantBook};

use crate::Global;
use crate::home;
use crate::output;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// One JSON object per line.
    Jsonl,
    /// Comma-separated values with a header row.
    Csv,
    /// The answer log anyone can verify (`pacerelle audit verify`): one pretty JSON document with, per
    /// accepted answer, the question's exact bytes, the answer, the device's signature and key, oldest first;
    /// and the grants this host's gate keeps for those answers, each with the calls it let run.
    Signed,
}

/// `pacerelle audit verify`: every record (and every grant) verifies.
pub const EXIT_VERIFIED: u8 = 0;
/// `pacerelle audit verify`: a record does not verify (the first is named).
pub const EXIT_NOT_VERIFIED: u8 = 1;
/// `pacerelle audit verify`: the file could not be checked: it cannot be read, it is not an answer-log
/// export (of version 1), or the command line is wrong.
pub const EXIT_UNCHECKED: u8 = 2;
/// The error code `pacerelle audit verify` gives a record that does not verify (with `--json`).
pub const VERIFICATION_FAILED: &str = "verification_failed";

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
    /// Partner mode: only questions addressed to this user of the agent (their `externalId`).
    #[arg(long, value_name = "EXTERNAL_ID")]
    user: Option<String>,
}

impl FilterArgs {
    fn filter(&self) -> AuditFilter {
        AuditFilter {
            state: self.state,
            since: self.since,
            until: self.until,
            limit: self.limit,
            user: self.user.clone(),
        }
    }
}

#[derive(Debug, clap::Subcommand)]
pub enum AuditCommand {
    /// Export the answer log, newest first (`--format signed`: oldest first, for `audit verify`).
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
    /// Verify a signed export (`audit export --format signed`): needs no credentials and no relay.
    ///
    /// Exit status: 0 when every record and every grant verifies; 1 when one does not (the first is named);
    /// 2 when the file cannot be read or is not an answer-log export.
    Verify {
        /// The export to check.
        file: PathBuf,
    },
}

impl AuditCommand {
    /// True for `audit verify`, which has its own exit statuses.
    pub fn is_verify(&self) -> bool {
        matches!(self, AuditCommand::Verify { .. })
    }
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
    // Whom the question was asked of: the owner, or a user of the agent (Partner mode).
    let user = match &e.user {
        Some(user) => format!("user:{user}"),
        None => "owner".to_string(),
    };
    println!(
        "{}  {}  {user}  {}  [{}]{by}",
        e.created_at, e.question_id, e.question, outcome
    );
}

/// `n` and the noun, singular or plural: `1 answer`, `3 grants`.
fn count(n: usize, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

/// `pacerelle audit verify FILE`: reads the file, verifies every record and grant, prints `✓ N answers
/// verify` (`✓ N answers and M grants (K uses) verify` when it holds grants) or the first failure.
fn verify(global: &Global, file: &std::path::Path) -> Result<ExitCode> {
    let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    match pacerelle_client::agent::verify_answer_log(&bytes) {
        Ok(answers) => {
            // Verified, so it reads.
            let grants = pacerelle_client::core::signing::read_export(&bytes)
                .map(|e| e.grants)
                .unwrap_or_default();
            let uses = grants.iter().map(|g| g.uses.len()).sum::<usize>();
            if global.json {
                output::json(&serde_json::json!({
                    "verified": true,
                    "answers": answers,
                    "grants": grants.len(),
                    "uses": uses,
                }))?;
            } else if grants.is_empty() {
                let verb = if answers == 1 { "verifies" } else { "verify" };
                println!("✓ {} {verb}", count(answers, "answer"));
            } else {
                println!(
                    "✓ {} and {} ({}) verify",
                    count(answers, "answer"),
                    count(grants.len(), "grant"),
                    count(uses, "use")
                );
            }
            Ok(ExitCode::from(EXIT_VERIFIED))
        }
        Err(failure) => {
            let message = failure.to_string();
            if global.json {
                let record = (failure.index > 0).then_some(failure.index);
                let named = failure.index > 0 || failure.grant.is_some();
                let question = named.then_some(failure.question_id.as_str());
                output::json(&serde_json::json!({
                    "verified": false,
                    "code": VERIFICATION_FAILED,
                    "record": record,
                    "grant": failure.grant,
                    "use": failure.grant_use,
                    "questionId": question,
                    "step": failure.step,
                    "error": message,
                }))?;
            } else {
                eprintln!("✗ {message}");
            }
            // Not an export of version 1's shape: nothing was checked. A device listed twice was found by
            // checking, like a record that does not verify.
            let status = if failure.unchecked() {
                EXIT_UNCHECKED
            } else {
                EXIT_NOT_VERIFIED
            };
            Ok(ExitCode::from(status))
        }
    }
}

/// Writes the signed export (pretty JSON), with the grants this host keeps for the agent
/// (`<home>/grants/<agentId>.json`), to `output` or standard output; returns how many records and grants.
async fn export_signed(
    global: &Global,
    agent: &pacerelle_client::AgentClient,
    filter: &AuditFilter,
    sink: &mut dyn Write,
) -> Result<(usize, usize)> {
    let book = GrantBook::at(home::grants_path(global, agent.agent_id()));
    let export = agent.export_answer_log_with_grants(filter, &book).await?;
    serde_json::to_writer_pretty(&mut *sink, &export)?;
    sink.write_all(b"\n")?;
    Ok((export.records.len(), export.grants.len()))
}

pub async fn run(global: &Global, cmd: AuditCommand) -> Result<ExitCode> {
    if let AuditCommand::Verify { file } = &cmd {
        return verify(global, file);
    }
    let agent = home::agent_client(global)?;
    match cmd {
        AuditCommand::Export {
            format,
            output,
            filter,
        } => {
            let mut sink: Box<dyn Write> = match &output {
                Some(path) => Box::new(std::io::BufWriter::new(
                    std::fs::File::create(path)
                        .with_context(|| format!("cannot write {}", path.display()))?,
                )),
                None => Box::new(std::io::stdout().lock()),
            };
            let written = match format {
                Format::Jsonl => count(
                    pacerelle_client::agent::write_jsonl(
                        &agent.answer_log(&filter.filter()).await?,
                        &mut sink,
                    )?,
                    "question",
                ),
                Format::Csv => count(
                    pacerelle_client::agent::write_csv(
                        &agent.answer_log(&filter.filter()).await?,
                        &mut sink,
                    )?,
                    "question",
                ),
                Format::Signed => match export_signed(global, &agent, &filter.filter(), &mut sink).await? {
                    (answers, 0) => count(answers, "answer"),
                    (answers, grants) => {
                        format!("{} and {}", count(answers, "answer"), count(grants, "grant"))
                    }
                },
            };
            sink.flush()?;
            if let Some(path) = output {
                eprintln!("{written} written to {}", path.display());
            }
            Ok(ExitCode::SUCCESS)
        }
        AuditCommand::Search { text, filter } => {
            let found = agent.search_answer_log(&text, &filter.filter()).await?;
            if global.json {
                output::json(&found)?;
                return Ok(ExitCode::SUCCESS);
            }
            if found.is_empty() {
                eprintln!("nothing found");
            }
            found.iter().for_each(print_entry);
            Ok(ExitCode::SUCCESS)
        }
        AuditCommand::Verify { file } => verify(global, &file),
    }
}
