//! The echo agent: answers `echo: <text>` to each task and saves a checkpoint, on the client's supervised
//! loop ([`pacerelle_client::runner::Runner`]): it keeps running across relay restarts, and a task it cannot answer
//! (a reply over the size limit) is set aside with an error reply instead of stopping it.
//!
//! ```sh
//! PACERELLE_RELAY_URL=http://127.0.0.1:8787 PACERELLE_AGENT_ID=ag_… PACERELLE_AGENT_TOKEN=pcr1_… \
//!     cargo run -p echo-agent -- --takeover
//! ```

use anyhow::{Context as _, Result};
use pacerelle_client::{
    AgentClient, AgentToken, ErrorKind, agent::Message, runner::Context, runner::Runner,
    runner::shutdown_signal,
};

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

    let run = Runner::new(agent)
        .host("echo-agent")
        .takeover(takeover)
        .run(echo, shutdown_signal());
    match run.await {
        Err(e) if e.kind() == ErrorKind::AgentInUse => {
            Err(anyhow::Error::new(e).context("start with --takeover to take the lease"))
        }
        other => Ok(other?),
    }
}

async fn echo(task: Message, ctx: Context) -> Result<Option<String>> {
    ctx.save_checkpoint(&format!("answered {}", task.message_id), "wait for the next task")
        .await?;
    Ok(Some(format!("echo: {}", task.text)))
}
