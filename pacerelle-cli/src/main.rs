//! `pacerelle`: run a relay, create agents, pair devices, act as a device from a terminal, ask the owner, and
//! gate an agent's tool calls.

mod agent;
mod answer;
mod ask;
mod audit;
mod device;
mod grants;
mod home;
mod hook;
mod host;
mod output;
mod secret;
mod serve;
mod store;
mod text;
mod time;
mod user;
mod webhook;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Pacerelle connects an AI agent on a computer with its person's phone, end to end encrypted.
#[derive(Debug, Parser)]
// The commit comes from build.rs: the archive, the npm package and the wheel name the same one.
#[command(
    name = "pacerelle",
    version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("PACERELLE_COMMIT"), ")"),
    about,
    long_about = None
)]
struct Cli {
    /// Print machine-readable JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
    /// The relay's base URL; overrides the one stored with the agent's or the device's credentials.
    #[arg(long, global = true, env = "PACERELLE_RELAY_URL")]
    relay: Option<String>,
    /// Where credentials are kept (default: the user's config directory).
    #[arg(long, global = true, env = "PACERELLE_HOME")]
    home: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a relay.
    Serve(serve::ServeArgs),
    /// Run a local relay with an agent and print a pairing link: the quickest start.
    Up(serve::UpArgs),
    /// Manage agents (agent side).
    #[command(subcommand)]
    Agent(agent::AgentCommand),
    /// Create a pairing link for a new device (agent side).
    Pair(agent::PairArgs),
    /// Partner mode: connect, list and disconnect the agent's own users, each answering on their own
    /// device the questions addressed to them (agent side).
    #[command(subcommand)]
    User(user::UserCommand),
    /// Act as a device from this terminal.
    #[command(subcommand)]
    Device(device::DeviceCommand),
    /// Send a task to the agent (device side).
    Send(device::SendArgs),
    /// Show the conversation: tasks, replies, questions and notifications (device side).
    Inbox(device::InboxArgs),
    /// Answer a question (device side).
    Answer(answer::AnswerArgs),
    /// The grants given to the agent's gate: list and revoke them (device side, owner).
    #[command(subcommand)]
    Grants(grants::GrantsCommand),
    /// Show the agent's presence, from the agent side or the device side.
    Status(device::StatusArgs),
    /// Ask the owner (or, with `--user`, one of the agent's users) a question on the phone and wait for the
    /// answer (agent side).
    ///
    /// Exit status: 0 on yes, a chosen option or a written answer; 1 on no; 2 when the question expired or
    /// was cancelled; 3 on any error (relay unreachable, bad input, an answer that could not be authenticated).
    Ask(ask::AskArgs),
    /// Send a notification to the owner's devices, or a user's (`--user`); no answer expected (agent side).
    Notify(ask::NotifyArgs),
    /// Cancel a pending question (agent side).
    Cancel(ask::CancelArgs),
    /// The answer log, decrypted here: export and search (agent side).
    #[command(subcommand)]
    Audit(audit::AuditCommand),
    /// The webhook that receives question events (agent side).
    #[command(subcommand)]
    Webhook(webhook::WebhookCommand),
    /// The PreToolUse gate for Claude Code and Codex, and its installation.
    #[command(subcommand)]
    Hook(hook::HookCommand),
    /// The relay's storage: copy a relay's data from SQLite into PostgreSQL.
    #[command(subcommand)]
    Store(store::StoreCommand),
}

/// What every command gets besides its own arguments.
#[derive(Debug, Clone)]
pub struct Global {
    pub json: bool,
    pub relay: Option<String>,
    pub home: home::Home,
}

/// The subcommand named on a command line that clap refused, found without clap: the first word that is
/// not an option or the value of a global option. The words are the command line read losslessly
/// (`args_os`) and converted for this search only, so a non-UTF-8 argument never panics.
fn command_word(args: &[String]) -> Option<(&str, Option<&str>)> {
    let mut words = args.iter().skip(1).filter(|a| !a.is_empty());
    let mut skip_value = false;
    let mut found = Vec::new();
    for arg in words.by_ref() {
        if skip_value {
            skip_value = false;
            continue;
        }
        if arg == "--relay" || arg == "--home" {
            skip_value = true;
            continue;
        }
        if arg.starts_with('-') {
            continue;
        }
        found.push(arg.as_str());
        if found.len() == 2 {
            break;
        }
    }
    found.first().map(|first| (*first, found.get(1).copied()))
}

/// jemalloc as the program's allocator (the `jemalloc` feature, on by default; see this crate's `Cargo.toml`).
#[cfg(all(feature = "jemalloc", not(target_env = "msvc")))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    // `args_os`, not `args`: `std::env::args` panics on a non-UTF-8 argument; clap refuses one where a
    // text value is expected (a usage error, exit 2, or 3 for `ask`) and accepts it where a path is.
    let args_os: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let args: Vec<String> = args_os.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    let cli = match Cli::try_parse_from(&args_os) {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                let _ = e.print();
                return ExitCode::SUCCESS;
            }
            match command_word(&args) {
                // The gate never fails open: a bad command line still denies, in the host's JSON.
                Some(("hook", Some(host))) if hook::is_gate(host) => {
                    let _ = e.print();
                    hook::print_decision(&hook::Decision::deny(format!(
                        "pacerelle hook: bad arguments ({}); denied",
                        e.kind()
                    )));
                    return ExitCode::SUCCESS;
                }
                Some(("ask", _)) => {
                    let _ = e.print();
                    return ExitCode::from(ask::EXIT_ERROR);
                }
                _ => e.exit(),
            }
        }
    };
    // The gate must answer with a decision whatever happens: a crash would let the host run the tool.
    let gate = matches!(&cli.command, Command::Hook(cmd) if cmd.is_gate());
    if gate {
        hook::guard_against_panics();
    }
    let logs = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("PACERELLE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,pacerelle_relay=info")),
        );
    match &cli.command {
        Command::Serve(args) if args.log_format == serve::LogFormat::Json => logs.json().init(),
        _ => logs.init(),
    }
    let failure = match &cli.command {
        Command::Ask(_) => ExitCode::from(ask::EXIT_ERROR),
        Command::Audit(cmd) if cmd.is_verify() => ExitCode::from(audit::EXIT_UNCHECKED),
        _ => ExitCode::FAILURE,
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            if gate {
                hook::print_decision(&hook::Decision::deny(format!(
                    "pacerelle hook: cannot start ({e}); denied"
                )));
                return ExitCode::SUCCESS;
            }
            eprintln!("error: cannot start the async runtime: {e}");
            return failure;
        }
    };
    let json = cli.json;
    let result = runtime.block_on(async move {
        let global = Global {
            json: cli.json,
            relay: cli.relay,
            home: home::Home::resolve(cli.home)?,
        };
        let done = |r: anyhow::Result<()>| r.map(|()| ExitCode::SUCCESS);
        match cli.command {
            Command::Serve(args) => done(serve::serve(&global, args).await),
            Command::Up(args) => done(serve::up(&global, args).await),
            Command::Agent(cmd) => done(agent::run(&global, cmd).await),
            Command::Pair(args) => done(agent::pair(&global, args).await),
            Command::User(cmd) => done(user::run(&global, cmd).await),
            Command::Device(cmd) => done(device::run(&global, cmd).await),
            Command::Send(args) => done(device::send(&global, args).await),
            Command::Inbox(args) => done(device::inbox(&global, args).await),
            Command::Answer(args) => done(answer::answer(&global, args).await),
            Command::Grants(command) => done(grants::run(&global, command).await),
            Command::Status(args) => done(device::status(&global, args).await),
            Command::Ask(args) => ask::ask(&global, args).await,
            Command::Notify(args) => done(ask::notify(&global, args).await),
            Command::Cancel(args) => done(ask::cancel(&global, args).await),
            Command::Audit(cmd) => audit::run(&global, cmd).await,
            Command::Webhook(cmd) => done(webhook::run(&global, cmd).await),
            Command::Hook(cmd) => hook::run(&global, cmd).await,
            Command::Store(cmd) => done(store::run(&global, cmd).await),
        }
    });
    if gate {
        // Do not wait for a read of standard input that the host never closes: the decision is printed.
        runtime.shutdown_background();
    }
    match result {
        Ok(code) => code,
        Err(e) if gate => {
            hook::print_decision(&hook::Decision::deny(format!("pacerelle hook: {e:#}; denied")));
            ExitCode::SUCCESS
        }
        Err(e) => {
            output::error(json, &e);
            failure
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        line.split(' ').map(str::to_string).collect()
    }

    #[test]
    fn the_command_word_skips_global_options() {
        assert_eq!(
            command_word(&words("pacerelle --relay http://x --json ask --bogus")),
            Some(("ask", None))
        );
        assert_eq!(
            command_word(&words("pacerelle --home /h hook codex --budget x")),
            Some(("hook", Some("codex")))
        );
        assert_eq!(command_word(&words("pacerelle --json")), None);
    }

    #[test]
    fn the_command_line_parses() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
