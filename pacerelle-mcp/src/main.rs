//! `pacerelle-mcp`: the MCP server an MCP host runs to receive tasks from the phone. Logs go to stderr;
//! stdout carries the protocol.

use std::net::SocketAddr;
use std::process::ExitCode;

use clap::Parser;
use pacerelle_mcp::{Config, State, serve_http, serve_stdio};

/// Pacerelle's MCP server: gives an MCP host (Claude Code, Codex, Claude Desktop, Cursor) an end-to-end
/// encrypted inbox of tasks sent from the person's phone.
#[derive(Debug, Parser)]
#[command(
    name = "pacerelle-mcp",
    version,
    about,
    after_help = "Environment:\n  PACERELLE_AGENT_ID     the agent's id (ag_…), required\n  \
                  PACERELLE_AGENT_TOKEN  the agent's token (pcr1_…), required; keep it secret\n  \
                  PACERELLE_RELAY_URL    the relay (default http://127.0.0.1:8787)\n  \
                  RUST_LOG               log filter (default info); logs go to stderr"
)]
struct Cli {
    /// Serve streamable HTTP at http://ADDR/mcp (loopback only, e.g. 127.0.0.1:8788) instead of stdio.
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
    /// Take the agent's lease even if another session holds it (that session stops receiving tasks).
    #[arg(long)]
    takeover: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,rmcp=warn")),
        )
        .init();
    let config = match Config::from_env(cli.takeover) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("pacerelle-mcp: {e}");
            return ExitCode::from(2);
        }
    };
    let state = match State::new(&config) {
        Ok(state) => state,
        Err(e) => {
            eprintln!("pacerelle-mcp: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("pacerelle-mcp: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    tracing::info!(agent = %config.agent_id, relay = %config.relay_url, "pacerelle-mcp starting");
    let outcome = runtime.block_on(async move {
        match cli.http {
            Some(addr) => serve_http(state, addr).await,
            None => serve_stdio(state).await,
        }
    });
    // Do not wait for blocked reads of stdin: the lease is released, the process may end.
    runtime.shutdown_timeout(std::time::Duration::from_millis(500));
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pacerelle-mcp: {e:#}");
            ExitCode::FAILURE
        }
    }
}
