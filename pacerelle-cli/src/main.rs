//! `pacerelle`: run a relay, create agents, pair devices, and act as a device from a terminal.

mod agent;
mod device;
mod home;
mod output;
mod serve;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Pacerelle connects an AI agent on a computer with its person's phone, end to end encrypted.
#[derive(Debug, Parser)]
#[command(name = "pacerelle", version, about, long_about = None)]
struct Cli {
    /// Print machine-readable JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
    /// The relay's base URL.
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
    /// Act as a device from this terminal.
    #[command(subcommand)]
    Device(device::DeviceCommand),
    /// Send a task to the agent (device side).
    Send(device::SendArgs),
    /// Show the conversation (device side).
    Inbox(device::InboxArgs),
    /// Show the agent's presence, from the agent side or the device side.
    Status(device::StatusArgs),
}

/// What every command gets besides its own arguments.
#[derive(Debug, Clone)]
pub struct Global {
    pub json: bool,
    pub relay: Option<String>,
    pub home: home::Home,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("PACERELLE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,pacerelle_relay=info")),
        )
        .init();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let json = cli.json;
    let result = runtime.block_on(async move {
        let global = Global {
            json: cli.json,
            relay: cli.relay,
            home: home::Home::resolve(cli.home)?,
        };
        match cli.command {
            Command::Serve(args) => serve::serve(&global, args).await,
            Command::Up(args) => serve::up(&global, args).await,
            Command::Agent(cmd) => agent::run(&global, cmd).await,
            Command::Pair(args) => agent::pair(&global, args).await,
            Command::Device(cmd) => device::run(&global, cmd).await,
            Command::Send(args) => device::send(&global, args).await,
            Command::Inbox(args) => device::inbox(&global, args).await,
            Command::Status(args) => device::status(&global, args).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            output::error(json, &e);
            ExitCode::FAILURE
        }
    }
}
