//! The echo agent: answers `echo: <text>` to each task, marks it processed, saves a checkpoint, and keeps
//! running across relay restarts.
//!
//! ```sh
//! PACERELLE_RELAY_URL=http://127.0.0.1:8787 PACERELLE_AGENT_ID=ag_… PACERELLE_AGENT_TOKEN=pcr1_… \
//!     cargo run -p echo-agent -- --takeover
//! ```

use std::time::Duration;

use anyhow::{Context, Result};
use pacerelle_client::{AgentClient, AgentToken, Cursor, Error, Inbox, reply_id_for};

/// Longest pause between two attempts to reach the relay.
const MAX_BACKOFF: Duration = Duration::from_secs(10);

#[tokio::main]
async fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("PACERELLE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let takeover = std::env::args().any(|a| a == "--takeover");
    let relay =
        std::env::var("PACERELLE_RELAY_URL").unwrap_or_else(|_| pacerelle_client::DEFAULT_RELAY_URL.into());
    let agent_id = std::env::var("PACERELLE_AGENT_ID").context("set PACERELLE_AGENT_ID")?;
    let token =
        AgentToken::parse(&std::env::var("PACERELLE_AGENT_TOKEN").context("set PACERELLE_AGENT_TOKEN")?)
            .context("PACERELLE_AGENT_TOKEN")?;
    let agent = AgentClient::new(&relay, &agent_id, token)?;

    tokio::select! {
        result = run(&agent, takeover) => result,
        _ = shutdown() => {
            tracing::info!("stopping");
            let _ = agent.close_session().await;
            Ok(())
        }
    }
}

async fn shutdown() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! { _ = tokio::signal::ctrl_c() => {}, _ = term.recv() => {} }
}

/// Runs forever: (re)opens the session, listens, answers; backs off while the relay is unreachable.
async fn run(agent: &AgentClient, takeover: bool) -> Result<()> {
    let mut backoff = Duration::from_millis(250);
    let mut held = false;
    loop {
        // A session this process opened before (lost in a relay restart or a network cut) is taken over:
        // it is our own.
        match listen(agent, takeover || held, &mut held).await {
            Err(e) if e.is_transient() => {
                tracing::warn!(error = %e, "relay unreachable; retrying in {backoff:?}")
            }
            Err(e) if e.code() == Some("agent_in_use") => {
                tracing::warn!(error = %e, "another session holds the lease (start with --takeover to take it)");
            }
            Err(e) if e.code() == Some("lease_lost") => tracing::warn!("lease lost; opening a new session"),
            Err(e) => return Err(e.into()),
            Ok(()) => {}
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

async fn listen(agent: &AgentClient, takeover: bool, held: &mut bool) -> Result<(), Error> {
    let session = agent.open_session("echo-agent", takeover).await?;
    *held = true;
    tracing::info!(session = %session.session_id, "listening");
    // No cursor at first: every task not yet processed, including those delivered before a crash.
    let mut cursor: Option<Cursor> = None;
    loop {
        let inbox = agent.wait_for_messages(cursor, Duration::from_secs(30)).await?;
        handle(agent, &inbox).await?;
        cursor = Some(inbox.cursor);
    }
}

async fn handle(agent: &AgentClient, inbox: &Inbox) -> Result<(), Error> {
    for rejected in &inbox.rejected {
        tracing::warn!(message_id = %rejected.message_id, "dropping a task that did not open");
        agent.mark_processed(&rejected.message_id).await?;
    }
    for task in &inbox.messages {
        tracing::info!(message_id = %task.message_id, redelivered = task.redelivered, "task");
        // The reply id is derived from the task, so a redelivered task is not answered twice.
        let reply_id = reply_id_for(&task.message_id);
        agent
            .reply(&task.message_id, &format!("echo: {}", task.text), Some(&reply_id))
            .await?;
        agent.mark_processed(&task.message_id).await?;
        agent
            .save_checkpoint(
                &format!("answered {}", task.message_id),
                "wait for the next task",
                std::slice::from_ref(&task.message_id),
            )
            .await?;
    }
    Ok(())
}
