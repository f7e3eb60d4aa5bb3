//! `pacerelle-mcp`: the MCP server an MCP host runs to receive tasks from the phone. Logs go to stderr;
//! stdout carries the protocol.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use pacerelle_mcp::http::Limits;
use pacerelle_mcp::{
    Bearer, Config, HttpError, HttpOptions, Origin, State, TlsConfig, serve_http, serve_stdio,
};

/// Pacerelle's MCP server: gives an MCP host (Claude Code, Codex, Claude Desktop, Cursor) an end-to-end
/// encrypted inbox of tasks sent from the person's phone.
#[derive(Debug, Parser)]
#[command(
    name = "pacerelle-mcp",
    // The commit comes from build.rs: the archive, the npm package and the wheel name the same one.
    version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("PACERELLE_COMMIT"), ")"),
    about,
    after_help = "Environment:\n  PACERELLE_AGENT_ID     the agent's id (ag_…), required\n  \
                  PACERELLE_AGENT_TOKEN  the agent's token (pcr1_…), required; keep it secret\n  \
                  PACERELLE_RELAY_URL    the relay (default http://127.0.0.1:8787)\n  \
                  PACERELLE_MCP_BEARER   with --http: the bearer HTTP clients must send (at least 32 \
                  characters, e.g. `openssl rand -hex 32`; not the agent token)\n  \
                  PACERELLE_MCP_RESULT_TEXT  json (default) or guide: what a result's text carries\n  \
                  RUST_LOG               log filter (default info); logs go to stderr"
)]
struct Cli {
    /// Serve streamable HTTP at http(s)://ADDR/mcp (e.g. 127.0.0.1:8788) instead of stdio. Beyond loopback
    /// a bearer (PACERELLE_MCP_BEARER or --bearer-file) and TLS (or --insecure-http) are required.
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
    /// Read the bearer HTTP clients must send from this file (instead of PACERELLE_MCP_BEARER).
    #[arg(long, value_name = "PATH", requires = "http")]
    bearer_file: Option<PathBuf>,
    /// Serve HTTPS with this certificate chain (PEM, the server's certificate first).
    #[arg(long, value_name = "PEM", requires_all = ["http", "tls_key"])]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, value_name = "PEM", requires_all = ["http", "tls_cert"])]
    tls_key: Option<PathBuf>,
    /// Allow plain HTTP beyond loopback, for a proxy in front that terminates TLS.
    #[arg(long, requires = "http", conflicts_with = "tls_cert")]
    insecure_http: bool,
    /// A browser origin allowed to call the endpoint (repeatable, e.g. https://app.example.com); a request
    /// with another Origin header gets 403, one without (not a browser) is allowed.
    #[arg(long, value_name = "ORIGIN", requires = "http")]
    allowed_origin: Vec<String>,
    /// A host name clients reach the endpoint by (repeatable), checked against the Host header.
    #[arg(long, value_name = "HOST", requires = "http")]
    allowed_host: Vec<String>,
    /// With --http: a connection must have sent a complete request head (line and headers) this many seconds
    /// after it opened, or after the first byte of a next request; otherwise it is closed.
    #[arg(long, value_name = "SECONDS", requires = "http", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..))]
    header_timeout: u64,
    /// With --http: a kept-alive connection with no request in progress is closed after this many seconds (an
    /// SSE stream or a streaming answer is a request in progress).
    #[arg(long, value_name = "SECONDS", requires = "http", default_value_t = 60,
          value_parser = clap::value_parser!(u64).range(1..))]
    idle_timeout: u64,
    /// With --http: connections open at once at most. Beyond it a new connection replaces the one longest
    /// without a request in progress; if every one has a request in progress, it is refused.
    #[arg(long, value_name = "N", requires = "http", default_value_t = 256,
          value_parser = clap::value_parser!(u64).range(1..=65_536))]
    max_connections: u64,
    /// Take the agent's lease even if another session holds it (that session stops receiving tasks).
    #[arg(long)]
    takeover: bool,
    /// This server's session of the agent (default: PACERELLE_SESSION, else the default session). Sessions
    /// with different names listen side by side, one per project folder for example; each receives the tasks
    /// sent to it or to any session.
    #[arg(long, value_name = "NAME")]
    session: Option<String>,
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
    let config = match Config::from_env(cli.takeover).and_then(|c| c.with_session(cli.session.clone())) {
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
    let http = match cli.http.map(|addr| http_options(&cli, addr, &config)).transpose() {
        Ok(http) => http,
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
        match http {
            Some(options) => serve_http(state, options).await,
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

/// The HTTP endpoint's options from the flags and the environment, checked before anything starts.
fn http_options(cli: &Cli, addr: SocketAddr, config: &Config) -> Result<HttpOptions, HttpError> {
    let bearer = Bearer::from_sources(
        |name| std::env::var(name).ok(),
        cli.bearer_file.as_deref(),
        &config.token,
    )?;
    let tls = match (&cli.tls_cert, &cli.tls_key) {
        (Some(cert), Some(key)) => {
            Some(TlsConfig::from_pem_files(cert, key).map_err(|e| HttpError::Tls(e.to_string()))?)
        }
        _ => None,
    };
    let allowed_origins = cli
        .allowed_origin
        .iter()
        .map(|text| Origin::parse(text).ok_or_else(|| HttpError::Origin(text.clone())))
        .collect::<Result<_, _>>()?;
    let options = HttpOptions {
        bearer,
        tls,
        insecure_http: cli.insecure_http,
        allowed_origins,
        allowed_hosts: cli.allowed_host.clone(),
        limits: Limits {
            header_timeout: Duration::from_secs(cli.header_timeout),
            idle_timeout: Duration::from_secs(cli.idle_timeout),
            max_connections: usize::try_from(cli.max_connections).unwrap_or(usize::MAX),
        },
        ..HttpOptions::loopback(addr)
    };
    options.check()?;
    Ok(options)
}
