#![doc = include_str!("../README.md")]

pub mod config;
mod here;
pub mod host;
pub mod http;
pub mod lease;
pub mod server;
mod tasks;
pub mod tools;
pub mod wait;

use std::sync::Arc;

use rmcp::ServiceExt;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

pub use config::{Config, ConfigError};
pub use http::{Bearer, HttpError, HttpOptions, Origin};
pub use pacerelle_serve::TlsConfig;
pub use server::{PacerelleServer, State};

/// Where the MCP endpoint is mounted in HTTP mode.
pub const HTTP_PATH: &str = "/mcp";

/// Takes the lease in the background so that the phone sees this session as connected at once; a failure
/// (relay unreachable, lease held elsewhere) is logged and retried by the tools that need the lease.
fn take_lease_early(state: &Arc<State>) {
    let state = state.clone();
    tokio::spawn(async move {
        if let Err(e) = state.lease.ensure().await {
            if e.kind() == pacerelle_client::ErrorKind::AgentInUse {
                let holder = lease::Holder::of(&e);
                tracing::warn!(
                    holder = %holder.host,
                    since = holder.since.as_deref().unwrap_or("?"),
                    "another session holds the agent's lease; waiting for tasks will fail until it stops \
                     (or restart with --takeover)"
                )
            } else {
                tracing::warn!(error = %e, "could not take the agent's lease yet; will retry when needed")
            }
        }
    });
}

/// Resolves on SIGINT or SIGTERM (the client's one watch of them).
pub use pacerelle_client::runner::shutdown_signal;

/// Serves MCP over stdin/stdout until stdin closes or a signal arrives, then releases the lease.
pub async fn serve_stdio(state: Arc<State>) -> anyhow::Result<()> {
    take_lease_early(&state);
    let outcome = match PacerelleServer::new(state.clone())
        .serve(rmcp::transport::stdio())
        .await
    {
        Ok(running) => {
            let ct = running.cancellation_token();
            tokio::select! {
                ended = running.waiting() => ended
                    .map(|reason| tracing::info!(?reason, "MCP client disconnected"))
                    .map_err(anyhow::Error::from),
                _ = shutdown_signal() => {
                    tracing::info!("signal received; stopping");
                    ct.cancel();
                    Ok(())
                }
            }
        }
        Err(e) => Err(anyhow::anyhow!("the MCP session did not start: {e}")),
    };
    state.lease.release().await;
    outcome
}

/// Serves MCP over streamable HTTP at `http(s)://addr/mcp` until a signal arrives, then releases the lease.
/// Checks `options` first ([`HttpOptions::check`]): beyond loopback, a bearer and TLS (or `--insecure-http`).
/// Every request passes the bearer and Origin guard ([`http`]) before it reaches rmcp's session handling.
pub async fn serve_http(state: Arc<State>, options: HttpOptions) -> anyhow::Result<()> {
    options.check()?;
    let listener = tokio::net::TcpListener::bind(options.addr).await?;
    let local = listener.local_addr()?;
    take_lease_early(&state);
    let ct = CancellationToken::new();
    let config = StreamableHttpServerConfig::default().with_cancellation_token(ct.child_token());
    let config = match options.host_check(local) {
        Some(hosts) => config.with_allowed_hosts(hosts),
        None => {
            tracing::info!(
                "no Host check: the endpoint is beyond loopback and requires the bearer (--allowed-host \
                 names the hosts clients use, to check it too)"
            );
            config.disable_allowed_hosts()
        }
    };
    let service = StreamableHttpService::new(
        {
            let state = state.clone();
            move || Ok(PacerelleServer::new(state.clone()))
        },
        LocalSessionManager::default().into(),
        config,
    );
    let app = axum::Router::new()
        .nest_service(HTTP_PATH, service)
        .layer(axum::middleware::from_fn_with_state(options.guard(), http::guard));
    let scheme = if options.tls.is_some() { "https" } else { "http" };
    let bearer = if options.bearer.is_some() {
        "required"
    } else {
        "none"
    };
    tracing::info!(bearer, "MCP endpoint at {scheme}://{local}{HTTP_PATH}");
    let shutdown = async move {
        shutdown_signal().await;
        tracing::info!("signal received; stopping");
        ct.cancel();
    };
    let served = http::serve(listener, &options, app, shutdown).await;
    state.lease.release().await;
    served.map_err(anyhow::Error::from)
}
