//! `pacerelle serve` and `pacerelle up`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use pacerelle_client::{AgentClient, AgentToken, agent::PairingOptions, runner::shutdown_signal};
use pacerelle_relay::{Acme, AcmeSettings, AcmeStatus, Config, Relay, Retention, TlsConfig};

use crate::Global;
use crate::output;
use pacerelle_client::agent::AgentFile;

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on [default: 127.0.0.1:8787; with --domain 0.0.0.0:443].
    #[arg(long, env = "PACERELLE_LISTEN")]
    listen: Option<SocketAddr>,
    /// Folder of the relay's database and webhook key, for the relay alone: kept 0700, its files 0600
    /// (default: the user's data directory).
    #[arg(long, env = "PACERELLE_DATA")]
    data: Option<PathBuf>,
    /// A PostgreSQL database (`postgres://user:password@host/db`) instead of the SQLite file in the data folder:
    /// for several relays behind one address (docs/self-hosting.md). The data folder still holds the keys,
    /// which every instance of one relay shares.
    #[arg(
        long,
        env = "PACERELLE_DATABASE_URL",
        value_name = "URL",
        hide_env_values = true
    )]
    database: Option<String>,
    /// Secret that `pacerelle agent create` must present to register an agent. Without it, registration is
    /// open only when listening on loopback.
    #[arg(long, env = "PACERELLE_REGISTRATION_SECRET", hide_env_values = true)]
    registration_secret: Option<String>,
    /// The URL phones use to reach this relay, when it differs from the listening address (reverse proxy).
    #[arg(long, env = "PACERELLE_PUBLIC_URL")]
    public_url: Option<String>,
    /// Contact for push services, sent with every Web Push (the VAPID `sub`): a mailto: or https: URL
    /// (default: the public URL).
    #[arg(long, env = "PACERELLE_PUSH_CONTACT", value_name = "URL")]
    push_contact: Option<String>,
    /// Accept push endpoints over plain http or on private, loopback or link-local addresses (tests, home
    /// labs). Off by default: the relay would otherwise post to any address a device names.
    #[arg(long)]
    allow_private_push_endpoints: bool,
    /// A reverse proxy in front of the relay (an address or CIDR, repeatable): the rate limits then count the
    /// client it names in `Forwarded` or `X-Forwarded-For` instead of the proxy's address. Those headers are
    /// ignored from any other peer, since a client can write them.
    #[arg(
        long = "trusted-proxy",
        env = "PACERELLE_TRUSTED_PROXIES",
        value_name = "CIDR",
        value_delimiter = ','
    )]
    trusted_proxies: Vec<pacerelle_relay::Cidr>,
    /// Serve HTTPS with this certificate chain (PEM, the server's certificate first). A phone's browser runs
    /// the web app only over HTTPS. Needs --tls-key.
    #[arg(long, env = "PACERELLE_TLS_CERT", value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, env = "PACERELLE_TLS_KEY", value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Serve HTTPS for this domain with a certificate obtained and renewed automatically (ACME, Let's
    /// Encrypt by default; using it accepts the CA's terms). The domain must point at this computer and
    /// port 443 must reach the relay. Certificates are kept in the data folder's acme/.
    #[arg(
        long,
        env = "PACERELLE_DOMAIN",
        value_name = "NAME",
        conflicts_with = "tls_cert"
    )]
    domain: Option<String>,
    /// The ACME directory of the CA [default: Let's Encrypt].
    #[arg(
        long,
        env = "PACERELLE_ACME_DIRECTORY",
        value_name = "URL",
        requires = "domain",
        conflicts_with = "acme_staging"
    )]
    acme_directory: Option<String>,
    /// Let's Encrypt's staging directory: for trying --domain out (higher rate limits; browsers do not
    /// trust its certificates).
    #[arg(long, requires = "domain")]
    acme_staging: bool,
    /// Contact for the CA's notices about the certificate (mailto:you@example.com). Optional.
    #[arg(
        long,
        env = "PACERELLE_ACME_CONTACT",
        value_name = "mailto:…",
        requires = "domain"
    )]
    acme_contact: Option<String>,
    /// Trust this root certificate (PEM) for the ACME directory's own HTTPS: a test CA such as pebble.
    #[arg(
        long,
        env = "PACERELLE_ACME_CA_FILE",
        value_name = "FILE",
        requires = "domain"
    )]
    acme_ca_file: Option<PathBuf>,
    /// Seconds a connection may take to send a complete request head; slower ones are closed.
    #[arg(
        long,
        env = "PACERELLE_HEADER_TIMEOUT",
        value_name = "SECONDS",
        default_value_t = 10
    )]
    header_timeout: u64,
    /// Seconds a request's body may take to arrive after its head (answered 408 beyond).
    #[arg(
        long,
        env = "PACERELLE_BODY_TIMEOUT",
        value_name = "SECONDS",
        default_value_t = 30
    )]
    body_timeout: u64,
    /// Seconds a kept-alive connection may stay open with no request in progress.
    #[arg(
        long,
        env = "PACERELLE_IDLE_TIMEOUT",
        value_name = "SECONDS",
        default_value_t = 60
    )]
    idle_timeout: u64,
    /// Connections open at once at most (TLS handshakes included). Beyond it a new connection replaces the
    /// one longest without a request in progress, or is refused when all are busy [default: the file limit
    /// less 128, at most 65 536].
    #[arg(long, env = "PACERELLE_MAX_CONNECTIONS", value_name = "N")]
    max_connections: Option<usize>,
    /// Tasks one agent may have waiting (sent, not yet processed); more are refused with quota_exceeded.
    #[arg(
        long,
        env = "PACERELLE_MAX_PENDING_TASKS",
        value_name = "N",
        default_value_t = 10_000
    )]
    max_pending_tasks: u32,
    /// Questions one agent may have open at once; more are refused with quota_exceeded.
    #[arg(
        long,
        env = "PACERELLE_MAX_OPEN_QUESTIONS",
        value_name = "N",
        default_value_t = 1_000
    )]
    max_open_questions: u32,
    /// Webhook events one agent may have waiting for delivery; beyond it the oldest are dropped.
    #[arg(
        long,
        env = "PACERELLE_MAX_PENDING_EVENTS",
        value_name = "N",
        default_value_t = 1_000
    )]
    max_pending_events: u32,
    /// Days a processed task (with the updates about it), a reply, a notification, an old checkpoint (each
    /// agent's newest is kept), a finished webhook event or an expired push is kept before it is deleted; 0
    /// keeps them forever. Tasks not yet processed and open questions are never deleted.
    #[arg(long, env = "PACERELLE_RETAIN_DAYS", value_name = "N", default_value_t = 30)]
    retain_days: u32,
    /// Days an answered, expired or cancelled question (the answer log) is kept after it closed; 0 keeps them
    /// forever.
    #[arg(
        long,
        env = "PACERELLE_RETAIN_ANSWERS_DAYS",
        value_name = "N",
        default_value_t = 365
    )]
    retain_answers_days: u32,
    /// Answer `GET /metrics` (Prometheus: requests, store latency, outboxes…). Off by default: the figures
    /// tell how busy the relay is to whoever reaches it; put it behind your proxy's access rules.
    #[arg(long, env = "PACERELLE_METRICS")]
    metrics: bool,
    /// How the relay logs on stderr: `text` for people, `json` (one object a line) for a log collector.
    #[arg(long, env = "PACERELLE_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// What `--retain-days` and `--retain-answers-days` ask the relay to keep; 0 keeps forever.
fn retention(args: &ServeArgs) -> Retention {
    let days = |n: u32| (n > 0).then(|| Duration::from_secs(u64::from(n) * 24 * 3600));
    Retention {
        items: days(args.retain_days),
        answers: days(args.retain_answers_days),
    }
}

/// The relay's log format (`serve --log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Lines for people.
    Text,
    /// One JSON object a line: time, level, target, message and fields.
    Json,
}

#[derive(Debug, clap::Args)]
pub struct UpArgs {
    #[command(flatten)]
    serve: ServeArgs,
    /// Name of the local agent, if one is created (default: this computer's name).
    #[arg(long)]
    name: Option<String>,
}

impl ServeArgs {
    /// The address to listen on: --listen, else 0.0.0.0:443 with --domain, else 127.0.0.1:8787.
    fn listen(&self) -> SocketAddr {
        match (self.listen, &self.domain) {
            (Some(addr), _) => addr,
            (None, Some(_)) => SocketAddr::from(([0, 0, 0, 0], 443)),
            (None, None) => SocketAddr::from(([127, 0, 0, 1], 8787)),
        }
    }

    /// The ACME settings of --domain and its options, if --domain is given.
    fn acme(&self, data: &std::path::Path) -> Option<AcmeSettings> {
        let domain = self.domain.as_ref()?;
        let mut settings = AcmeSettings::new(domain, data);
        if self.acme_staging {
            settings.directory_url = pacerelle_relay::LETS_ENCRYPT_STAGING.to_string();
        }
        if let Some(url) = &self.acme_directory {
            settings.directory_url = url.clone();
        }
        settings.contact = self
            .acme_contact
            .iter()
            .map(|c| {
                if c.contains(':') {
                    c.clone()
                } else {
                    format!("mailto:{c}")
                }
            })
            .collect();
        settings.ca_file = self.acme_ca_file.clone();
        Some(settings)
    }
}

fn data_dir(explicit: Option<PathBuf>) -> Result<PathBuf> {
    match explicit {
        Some(p) => Ok(p),
        None => dirs::data_dir()
            .map(|d| d.join("pacerelle"))
            .ok_or_else(|| anyhow!("no data directory on this system: set PACERELLE_DATA or --data")),
    }
}

/// A relay ready to serve: its socket, the URL clients on this machine use, and its TLS settings.
struct Started {
    relay: Relay,
    listener: tokio::net::TcpListener,
    url: String,
    database: PathBuf,
    tls: Option<TlsConfig>,
    /// The certificates of --domain; renewals stop when it is dropped.
    acme: Option<Acme>,
}

impl Started {
    async fn serve(self) -> std::io::Result<()> {
        let _renewals = self.acme;
        match self.tls {
            Some(tls) => self.relay.serve_tls(self.listener, tls, shutdown_signal()).await,
            None => self.relay.serve(self.listener, shutdown_signal()).await,
        }
    }
}

/// Opens the relay and binds its socket. `registration_secret`: the one agents must present, if any.
async fn start(args: &ServeArgs, registration_secret: Option<String>) -> Result<Started> {
    // The certificate is checked before anything else starts.
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(TlsConfig::from_pem_files(cert, key)?),
        _ => None,
    };
    let data = data_dir(args.data.clone())?;
    // 0700, tightened if looser: the database and the webhook key are for this user alone.
    pacerelle_relay::prepare_data_folder(&data)?;
    let listen = args.listen();
    let acme_settings = args.acme(&data);
    if let Some(settings) = &acme_settings {
        // Refused before anything starts: a URL or an address instead of a name, a directory not in https.
        settings.check()?;
    }
    let open_registration = registration_secret.is_none() && listen.ip().is_loopback();
    if let Some(url) = &args.database
        && !(url.starts_with("postgres://") || url.starts_with("postgresql://"))
    {
        return Err(output::invalid_input(
            "--database takes a PostgreSQL URL (postgres://user:password@host/db); without it the relay keeps its SQLite file in --data",
        ));
    }
    let relay = Relay::open(Config {
        database_path: data.join("pacerelle.db"),
        open_registration,
        registration_secret: registration_secret.clone(),
        public_url: args.public_url.clone(),
        push_contact: args.push_contact.clone(),
        allow_private_push_endpoints: args.allow_private_push_endpoints,
        trusted_proxies: args.trusted_proxies.clone(),
        connections: pacerelle_relay::Connections {
            header_timeout: Duration::from_secs(args.header_timeout),
            body_timeout: Duration::from_secs(args.body_timeout),
            idle_timeout: Duration::from_secs(args.idle_timeout),
            max_connections: args.max_connections,
        },
        quotas: pacerelle_relay::Quotas {
            max_pending_tasks: args.max_pending_tasks,
            max_open_questions: args.max_open_questions,
            max_pending_events: args.max_pending_events,
        },
        retention: retention(args),
        metrics: args.metrics,
        database_url: args.database.clone(),
        ..Default::default()
    })
    .await
    .with_context(|| match args.database {
        Some(_) => "cannot open the relay's PostgreSQL database (--database)".to_string(),
        None => format!("cannot open the relay's database in {}", data.display()),
    })?;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| listen_error(listen, e))?;
    let local = listener.local_addr()?;
    // Once the socket is bound, so the CA's validation finds the listener. A stored certificate still valid
    // is served at once; otherwise one is ordered in the background.
    let acme = acme_settings.map(Acme::start).transpose()?;
    let tls = match (tls, &acme) {
        (Some(tls), _) => Some(tls),
        (None, Some(acme)) => Some(acme.tls_config()?),
        (None, None) => None,
    };
    let url = match (&tls, &args.public_url) {
        // The name the certificate is for, on the HTTPS port (443 reaches this listener).
        (Some(_), None) if acme.is_some() => {
            format!("https://{}", acme.as_ref().map(Acme::domain).unwrap_or_default())
        }
        // Over HTTPS, clients must use a name the certificate covers: the public URL when there is one.
        (Some(_), Some(public)) => public.trim_end_matches('/').to_string(),
        (Some(_), None) if local.ip().is_loopback() || local.ip().is_unspecified() => {
            format!("https://localhost:{}", local.port())
        }
        _ => {
            let host = if local.ip().is_unspecified() {
                "127.0.0.1".to_string()
            } else {
                local.ip().to_string()
            };
            let scheme = if tls.is_some() { "https" } else { "http" };
            if local.is_ipv6() && !local.ip().is_unspecified() {
                format!("{scheme}://[{host}]:{}", local.port())
            } else {
                format!("{scheme}://{host}:{}", local.port())
            }
        }
    };
    tracing::info!(%url, database = %data.join("pacerelle.db").display(), open_registration, "relay ready");
    if !open_registration && registration_secret.is_none() {
        eprintln!(
            "note: registration is closed (not on loopback and no PACERELLE_REGISTRATION_SECRET): no agent can be created"
        );
    }
    Ok(Started {
        relay,
        listener,
        url,
        database: data.join("pacerelle.db"),
        tls,
        acme,
    })
}

/// Why the relay cannot listen on `addr`, with what to do.
fn listen_error(addr: SocketAddr, e: std::io::Error) -> anyhow::Error {
    let hint = match e.kind() {
        std::io::ErrorKind::PermissionDenied if addr.port() < 1024 => format!(
            ": port {} needs more rights — run as root, or give the program the right once with \
             `sudo setcap cap_net_bind_service=+ep \"$(command -v pacerelle)\"`, or listen on a high port \
             (--listen 0.0.0.0:8443) with the router or the firewall forwarding 443 to it",
            addr.port()
        ),
        std::io::ErrorKind::AddrInUse => {
            " (another program listens there: another relay, or a web server on 443?)".to_string()
        }
        _ => String::new(),
    };
    anyhow!("cannot listen on {addr}: {e}{hint}")
}

/// Tells, on standard error, how the certificate of --domain is doing: obtained, renewed, failed and retried.
fn report_certificates(acme: &Acme) {
    let mut status = acme.status();
    let domain = acme.domain().to_string();
    tokio::spawn(async move {
        loop {
            let now = status.borrow_and_update().clone();
            match now {
                AcmeStatus::Obtaining => eprintln!("obtaining a certificate for {domain}…"),
                AcmeStatus::Ready(info) => eprintln!(
                    "certificate for {domain} in service, valid until {}",
                    pacerelle_core::time::Timestamp(info.not_after * 1000).to_rfc3339()
                ),
                AcmeStatus::Failed {
                    message,
                    retry_in,
                    serving,
                } => eprintln!(
                    "warning: could not obtain a certificate for {domain}: {message}. Trying again in {} s{}.",
                    retry_in.as_secs(),
                    if serving.is_some() {
                        "; the current certificate stays in service"
                    } else {
                        ""
                    }
                ),
            }
            if status.changed().await.is_err() {
                return;
            }
        }
    });
}

/// Waits until the certificate of --domain is served.
async fn wait_for_certificate(status: &mut tokio::sync::watch::Receiver<AcmeStatus>) -> Result<()> {
    loop {
        if matches!(*status.borrow_and_update(), AcmeStatus::Ready(_)) {
            return Ok(());
        }
        if status.changed().await.is_err() {
            return Err(anyhow!("the certificate renewal stopped"));
        }
    }
}

/// What to tell about reaching the web app from a phone at `base` (the pairing link's relay URL), if
/// anything: a phone needs HTTPS, at a name other than this computer's loopback.
fn phone_note(base: &str) -> Option<String> {
    let (https, rest) = match base.strip_prefix("https://") {
        Some(rest) => (true, rest),
        None => (false, base.trim_start_matches("http://")),
    };
    let authority = rest.split('/').next().unwrap_or_default();
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => authority.split(':').next().unwrap_or_default(),
    };
    let local = host == "localhost" || host == "::1" || host.starts_with("127.");
    let how = "serve HTTPS with --tls-cert/--tls-key, or put a reverse proxy or a tunnel with a certificate in \
               front and pass --public-url https://… (docs/self-hosting.md)";
    match (https, local) {
        (true, false) => None,
        (true, true) => Some(format!(
            "{base} names this computer, which a phone cannot reach: pass --public-url https://NAME:PORT with \
             a name the certificate covers (docs/self-hosting.md)."
        )),
        (false, true) => Some(format!(
            "{base} works in a browser on this computer only; a phone needs HTTPS: {how}."
        )),
        (false, false) => Some(format!(
            "phones run the web app only over HTTPS, not at {base}: {how}."
        )),
    }
}

/// The `claude mcp add` line for this agent (docs/hosts/claude-code.md); `mcp` is the program to run.
fn claude_code_command(url: &str, agent_id: &str, token: &str, mcp: &str) -> String {
    format!(
        "claude mcp add pacerelle --scope user -e PACERELLE_AGENT_ID={agent_id} \
         -e PACERELLE_AGENT_TOKEN={token} -e PACERELLE_RELAY_URL={url} -- {}",
        shell_word(mcp)
    )
}

/// The MCP server's entry through npm: `npx -y @pacerelle/mcp-server` (packaging/npm/mcp-server).
const NPX_COMMAND: &str = "npx";
const NPX_ARGS: [&str; 2] = ["-y", "@pacerelle/mcp-server"];

/// `word` for a POSIX shell: as it is when it has nothing special, else in single quotes.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:@%,=".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// The Codex `config.toml` entry for this agent (docs/hosts/codex.md): long waits need `tool_timeout_sec`.
fn codex_toml(url: &str, agent_id: &str, token: &str, mcp: &str) -> String {
    // A TOML basic string, escaped like JSON's.
    let command = serde_json::Value::from(mcp).to_string();
    format!(
        "[mcp_servers.pacerelle]\ncommand = {command}\nargs = []\nstartup_timeout_sec = 20\n\
         tool_timeout_sec = 120\n\n[mcp_servers.pacerelle.env]\nPACERELLE_AGENT_ID = \"{agent_id}\"\n\
         PACERELLE_AGENT_TOKEN = \"{token}\"\nPACERELLE_RELAY_URL = \"{url}\"\n"
    )
}

pub async fn serve(global: &Global, args: ServeArgs) -> Result<()> {
    let started = start(&args, args.registration_secret.clone()).await?;
    if let Some(acme) = &started.acme {
        report_certificates(acme);
    }
    let url = started.url.clone();
    if global.json {
        output::json(&serde_json::json!({ "relayUrl": url }))?;
    } else {
        eprintln!("pacerelle relay listening on {url} (Ctrl-C to stop)");
        let app = args.public_url.as_deref().unwrap_or(&url);
        eprintln!("web app: {}/", app.trim_end_matches('/'));
        if let Some(note) = phone_note(app) {
            eprintln!("note: {note}");
        }
    }
    started.serve().await.context("the relay stopped")?;
    Ok(())
}

/// Where `hook install --skill-only --global` puts the agent skill for each host: `up` says it and leaves
/// the writing to that command, as it leaves the MCP configuration to the host's own.
fn print_skill_commands() {
    use crate::hook::{Host, skill};
    let (Ok(claude), Ok(codex)) = (
        skill::path(Host::ClaudeCode, None),
        skill::path(Host::Codex, None),
    ) else {
        return;
    };
    println!(
        "\nAgent skill (when to ask, how to wait: the MCP server's instructions, as a file the host reads):\n\n  \
         pacerelle hook install claude-code --skill-only --global   writes {}\n  \
         pacerelle hook install codex --skill-only --global         adds a section to {}\n\n\
         (--dir PROJECT instead of --global for one project; without --skill-only the PreToolUse gate is \
         installed too: docs/hooks.md)",
        claude.display(),
        codex.display()
    );
}

pub async fn up(global: &Global, args: UpArgs) -> Result<()> {
    // Off loopback (--domain, --listen 0.0.0.0:…) registration is closed without a secret: `up` then makes
    // one for this run, to register its own agent.
    let secret = args.serve.registration_secret.clone().or_else(|| {
        (!args.serve.listen().ip().is_loopback())
            .then(|| pacerelle_core::b64::encode(&pacerelle_core::keys::random_array::<32>()))
    });
    let started = start(&args.serve, secret.clone()).await?;
    let (url, database) = (started.url.clone(), started.database.clone());
    let acme_status = started.acme.as_ref().map(|acme| {
        report_certificates(acme);
        acme.status()
    });
    let mut server = tokio::spawn(started.serve());
    if let Some(mut status) = acme_status {
        // The agent below reaches the relay at https://DOMAIN: wait for the certificate (failures are told
        // as they come, and retried).
        tokio::select! {
            ready = wait_for_certificate(&mut status) => ready?,
            stopped = &mut server => {
                stopped.context("the relay task failed")?.context("the relay stopped")?;
                return Ok(());
            }
        }
    }

    let name = args.name.unwrap_or_else(crate::host::default_agent_name);
    let agent = local_agent(global, &url, &name, secret.as_deref()).await?;
    let public = args.serve.public_url.clone();
    let app_url = public
        .as_deref()
        .unwrap_or(&url)
        .trim_end_matches('/')
        .to_string();
    let pairing = agent
        .create_pairing(PairingOptions {
            label: Some("phone".into()),
            public_url: public,
            ..Default::default()
        })
        .await?;
    let token = agent.token().expose();
    // The absolute path: Claude Desktop, Cursor and Codex start it without the shell's PATH.
    let mcp_path = crate::host::find_program("pacerelle-mcp");
    let mcp_command = mcp_path
        .as_ref()
        .map_or_else(|| "pacerelle-mcp".to_string(), |p| p.display().to_string());
    let mcp = serde_json::json!({
        "mcpServers": { "pacerelle": {
            "command": mcp_command,
            "env": {
                "PACERELLE_RELAY_URL": url,
                "PACERELLE_AGENT_ID": agent.agent_id(),
                "PACERELLE_AGENT_TOKEN": token,
            }
        }}
    });
    // The same entry through npm (`@pacerelle/mcp-server`, Node.js 20+): no path to keep up to date.
    let mcp_npx = serde_json::json!({
        "mcpServers": { "pacerelle": {
            "command": NPX_COMMAND,
            "args": NPX_ARGS,
            "env": {
                "PACERELLE_RELAY_URL": url,
                "PACERELLE_AGENT_ID": agent.agent_id(),
                "PACERELLE_AGENT_TOKEN": token,
            }
        }}
    });
    if global.json {
        output::json(&serde_json::json!({
            "relayUrl": url,
            "agentId": agent.agent_id(),
            "token": token,
            "link": pairing.link,
            "expiresAt": pairing.expires_at,
            "appUrl": app_url,
            "phoneReady": app_url.starts_with("https://"),
            "mcpConfig": mcp,
            "mcpConfigNpx": mcp_npx,
            "mcpCommand": mcp_path.as_ref().map(|p| p.display().to_string()),
            "claudeCode": claude_code_command(&url, agent.agent_id(), &token, &mcp_command),
            "codexToml": codex_toml(&url, agent.agent_id(), &token, &mcp_command),
        }))?;
    } else {
        println!("Pacerelle relay running at {url} — Ctrl-C to stop");
        println!("Database: {}\n", database.display());
        println!(
            "Agent {} — credentials saved in {}",
            agent.agent_id(),
            global.home.agent_path().display()
        );
        println!("\nFor an agent process:\n");
        println!("  export PACERELLE_RELAY_URL={url}");
        println!("  export PACERELLE_AGENT_ID={}", agent.agent_id());
        println!("  export PACERELLE_AGENT_TOKEN={token}");
        println!(
            "\nClaude Code:\n\n  {}",
            claude_code_command(&url, agent.agent_id(), &token, &mcp_command)
        );
        println!(
            "\nCodex (~/.codex/config.toml):\n\n{}",
            codex_toml(&url, agent.agent_id(), &token, &mcp_command)
        );
        println!(
            "Cursor (~/.cursor/mcp.json, or .cursor/mcp.json in a project) and Claude Desktop \
             (claude_desktop_config.json):\n"
        );
        println!("{}", serde_json::to_string_pretty(&mcp)?);
        println!(
            "\nOr through npm (Node.js 20 or later; Claude Code: `… -- npx -y @pacerelle/mcp-server`):\n"
        );
        println!("{}", serde_json::to_string_pretty(&mcp_npx)?);
        if mcp_path.is_none() {
            println!(
                "\nNote: pacerelle-mcp was found neither beside this pacerelle nor on PATH. Build it with \
                 `cargo build --release --locked -p pacerelle-mcp` (it lands beside pacerelle in \
                 target/release/), run `up` again, and the configurations above name its absolute path."
            );
        }
        print_skill_commands();
        println!(
            "\nAn agent on another machine (a CI runner, a cloud agent): serve pacerelle-mcp over HTTPS with a \
             bearer of your own, one `url` + `Authorization` entry in its host (docs/hosts/remote.md)."
        );
        println!(
            "\nSeveral projects at once: give each project's pacerelle-mcp its own session name \
             (PACERELLE_SESSION=api in its env); the phone then sends a task to one of them or to any \
             (docs/mcp.md, \"Several sessions of one agent\")."
        );
        println!("\nMore: docs/hosts/ (one page per host) and docs/hooks.md (the gate before tool calls).");
        println!(
            "\nPairing link (valid {}, single use):\n\n  {}\n",
            output::until(pairing.expires_at),
            pairing.link
        );
        if let Some(qr) = output::qr(&pairing.link) {
            println!("{qr}");
        }
        match phone_note(&app_url) {
            None => {
                println!("A phone opens the link (or scans the QR code) and uses the web app at {app_url}/")
            }
            Some(note) => println!("Note: {note}"),
        }
        // Not the link as an argument: other users can read command lines.
        println!("Pair this terminal as a device:  pacerelle device join -   (then paste the link)");
        println!("A new link at any time:          pacerelle pair");
    }
    server
        .await
        .context("the relay task failed")?
        .context("the relay stopped")?;
    Ok(())
}

/// Reuses the agent in `agent.json` when it is registered on this relay; otherwise registers a new one.
async fn local_agent(global: &Global, url: &str, name: &str, secret: Option<&str>) -> Result<AgentClient> {
    if let Some(file) = global.home.read_agent()?
        && file.relay_url == url
    {
        let token = AgentToken::parse(&file.token)
            .with_context(|| format!("the token in {} is malformed", global.home.agent_path().display()))?;
        let agent = AgentClient::new(url, &file.agent_id, token)?.with_home(Some(&global.home.0));
        match agent.info().await {
            Ok(_) => return Ok(agent),
            // The relay's answer for an agent it does not know (or a token that is not the agent's): any other
            // error (the relay down, a bug) must not replace the saved agent.
            Err(e) if e.kind() == pacerelle_client::ErrorKind::Unauthorized => {
                tracing::info!(error = %e, "the saved agent is not registered on this relay; creating a new one");
            }
            Err(e) => return Err(e.into()),
        }
    }
    let agent = AgentClient::register(url, name, secret)
        .await?
        .with_home(Some(&global.home.0));
    global.home.write_agent(&AgentFile {
        relay_url: url.to_string(),
        agent_id: agent.agent_id().to_string(),
        name: name.to_string(),
        token: agent.token().expose(),
    })?;
    Ok(agent)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use clap::Parser;
    use pacerelle_relay::Retention;

    use super::{ServeArgs, phone_note, retention};

    #[derive(clap::Parser)]
    struct Serve {
        #[command(flatten)]
        args: ServeArgs,
    }

    #[test]
    fn retention_days_become_the_relays_settings_and_zero_keeps_forever() {
        let defaults = Serve::try_parse_from(["serve"]).expect("parses").args;
        assert_eq!(retention(&defaults), Retention::default());
        assert_eq!(
            retention(&defaults).items,
            Some(Duration::from_secs(30 * 24 * 3600))
        );
        let set = Serve::try_parse_from(["serve", "--retain-days", "7", "--retain-answers-days", "0"])
            .expect("parses")
            .args;
        assert_eq!(
            retention(&set),
            Retention {
                items: Some(Duration::from_secs(7 * 24 * 3600)),
                answers: None,
            }
        );
        assert!(Serve::try_parse_from(["serve", "--retain-days", "-1"]).is_err());
    }

    #[test]
    fn phones_are_told_when_they_need_https() {
        assert_eq!(phone_note("https://relay.example"), None);
        assert!(
            phone_note("https://localhost:8787")
                .expect("a note")
                .contains("--public-url")
        );
        let local = phone_note("http://127.0.0.1:8787").expect("a note");
        assert!(local.contains("this computer only") && local.contains("--tls-cert"));
        assert!(
            phone_note("http://localhost:8787")
                .expect("a note")
                .contains("this computer only")
        );
        let lan = phone_note("http://192.168.1.20:8787").expect("a note");
        assert!(lan.contains("only over HTTPS") && lan.contains("docs/self-hosting.md"));
        assert!(
            phone_note("http://[::1]:8787")
                .expect("a note")
                .contains("this computer only")
        );
        assert!(
            phone_note("http://[2001:db8::1]:8787")
                .expect("a note")
                .contains("only over HTTPS")
        );
    }
}
