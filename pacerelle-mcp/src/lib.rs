#![doc = include_str!("../README.md")]

pub mod config;
pub mod host;
pub mod lease;
pub mod server;
pub mod tools;
pub mod wait;

use std::net::SocketAddr;
use std::sync::Arc;

use rmcp::ServiceExt;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

pub use config::{Config, ConfigError};
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
pub use pacerelle_client::shutdown_signal;

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

/// Serves MCP over streamable HTTP at `http://addr/mcp` (loopback only) until a signal arrives, then
/// releases the lease.
pub async fn serve_http(state: Arc<State>, addr: SocketAddr) -> anyhow::Result<()> {
    if !addr.ip().is_loopback() {
        anyhow::bail!(
            "--http {addr}: only a loopback address is allowed (127.0.0.1:PORT or [::1]:PORT); the endpoint \
             has no authentication of its own"
        );
    }
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    take_lease_early(&state);
    let ct = CancellationToken::new();
    let service = StreamableHttpService::new(
        {
            let state = state.clone();
            move || Ok(PacerelleServer::new(state.clone()))
        },
        LocalSessionManager::default().into(),
        StreamableHttpServerConfig::default().with_cancellation_token(ct.child_token()),
    );
    let app = axum::Router::new().nest_service(HTTP_PATH, service);
    tracing::info!("MCP endpoint at http://{local}{HTTP_PATH}");
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            shutdown_signal().await;
            tracing::info!("signal received; stopping");
            ct.cancel();
        })
        .await;
    state.lease.release().await;
    served.map_err(anyhow::Error::from)
}
