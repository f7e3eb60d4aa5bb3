//! `pacerelle serve` and `pacerelle up`.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, Result, anyhow};
use pacerelle_client::{AgentClient, AgentToken, PairingOptions};
use pacerelle_relay::{Config, Relay};

use crate::Global;
use crate::home::AgentFile;
use crate::output;

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "PACERELLE_LISTEN", default_value = "127.0.0.1:8787")]
    listen: SocketAddr,
    /// Folder of the relay's database (default: the user's data directory).
    #[arg(long, env = "PACERELLE_DATA")]
    data: Option<PathBuf>,
    /// Secret that `pacerelle agent create` must present to register an agent. Without it, registration is
    /// open only when listening on loopback.
    #[arg(long, env = "PACERELLE_REGISTRATION_SECRET", hide_env_values = true)]
    registration_secret: Option<String>,
    /// The URL phones use to reach this relay, when it differs from the listening address (reverse proxy).
    #[arg(long, env = "PACERELLE_PUBLIC_URL")]
    public_url: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct UpArgs {
    #[command(flatten)]
    serve: ServeArgs,
    /// Name of the local agent, if one is created.
    #[arg(long, default_value = "local agent")]
    name: String,
}

fn data_dir(explicit: Option<PathBuf>) -> Result<PathBuf> {
    match explicit {
        Some(p) => Ok(p),
        None => dirs::data_dir()
            .map(|d| d.join("pacerelle"))
            .ok_or_else(|| anyhow!("no data directory on this system: set PACERELLE_DATA or --data")),
    }
}

/// Opens the relay and binds its socket; returns them with the URL clients use.
async fn start(args: &ServeArgs) -> Result<(Relay, tokio::net::TcpListener, String, PathBuf)> {
    let data = data_dir(args.data.clone())?;
    std::fs::create_dir_all(&data).with_context(|| format!("cannot create {}", data.display()))?;
    let open_registration = args.registration_secret.is_none() && args.listen.ip().is_loopback();
    let relay = Relay::open(Config {
        database_path: data.join("pacerelle.db"),
        open_registration,
        registration_secret: args.registration_secret.clone(),
        public_url: args.public_url.clone(),
    })
    .await
    .with_context(|| format!("cannot open the relay's database in {}", data.display()))?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {} (is another relay running?)", args.listen))?;
    let local = listener.local_addr()?;
    let host = if local.ip().is_unspecified() {
        "127.0.0.1".to_string()
    } else {
        local.ip().to_string()
    };
    let url = if local.is_ipv6() {
        format!("http://[{host}]:{}", local.port())
    } else {
        format!("http://{host}:{}", local.port())
    };
    tracing::info!(%url, database = %data.join("pacerelle.db").display(), open_registration, "relay ready");
    if !open_registration && args.registration_secret.is_none() {
        eprintln!(
            "note: registration is closed (not on loopback and no PACERELLE_REGISTRATION_SECRET): no agent can be created"
        );
    }
    Ok((relay, listener, url, data.join("pacerelle.db")))
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
}

pub async fn serve(global: &Global, args: ServeArgs) -> Result<()> {
    let (relay, listener, url, _) = start(&args).await?;
    if global.json {
        output::json(&serde_json::json!({ "relayUrl": url }))?;
    } else {
        eprintln!("pacerelle relay listening on {url} (Ctrl-C to stop)");
    }
    relay
        .serve(listener, shutdown_signal())
        .await
        .context("the relay stopped")?;
    Ok(())
}

pub async fn up(global: &Global, args: UpArgs) -> Result<()> {
    let (relay, listener, url, database) = start(&args.serve).await?;
    let server = tokio::spawn(relay.serve(listener, shutdown_signal()));

    let agent = local_agent(global, &url, &args.name).await?;
    let public = args.serve.public_url.clone();
    let pairing = agent
        .create_pairing(PairingOptions {
            label: Some("phone".into()),
            public_url: public,
            ..Default::default()
        })
        .await?;
    let token = agent.token().expose();
    let mcp = serde_json::json!({
        "mcpServers": { "pacerelle": {
            "command": "pacerelle-mcp",
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
            "mcpConfig": mcp,
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
        println!("\nMCP host configuration (.mcp.json, Claude Desktop, Cursor):\n");
        println!("{}", serde_json::to_string_pretty(&mcp)?);
        println!(
            "\nPairing link (valid {}, single use):\n\n  {}\n",
            output::until(pairing.expires_at),
            pairing.link
        );
        if let Some(qr) = output::qr(&pairing.link) {
            println!("{qr}");
        }
        println!(
            "Pair this terminal as a device:  pacerelle device join '{}'",
            pairing.link
        );
        println!("A new link at any time:          pacerelle pair");
    }
    server
        .await
        .context("the relay task failed")?
        .context("the relay stopped")?;
    Ok(())
}

/// Reuses the agent in `agent.json` when it is registered on this relay; otherwise registers a new one.
async fn local_agent(global: &Global, url: &str, name: &str) -> Result<AgentClient> {
    if let Some(file) = global.home.read_agent()?
        && file.relay_url == url
    {
        let token = AgentToken::parse(&file.token)
            .with_context(|| format!("the token in {} is malformed", global.home.agent_path().display()))?;
        let agent = AgentClient::new(url, &file.agent_id, token)?;
        match agent.info().await {
            Ok(_) => return Ok(agent),
            Err(e) if e.code().is_some() => {
                tracing::info!(error = %e, "the saved agent is not registered on this relay; creating a new one");
            }
            Err(e) => return Err(e.into()),
        }
    }
    let agent = AgentClient::register(url, name, None).await?;
    global.home.write_agent(&AgentFile {
        relay_url: url.to_string(),
        agent_id: agent.agent_id().to_string(),
        name: name.to_string(),
        token: agent.token().expose(),
    })?;
    Ok(agent)
}
