//! `pacerelle-soak agent`: the supervised agent the soak kills and restarts.
//!
//! It runs `pacerelle-client`'s [`Runner`] (lease with takeover, waits, backoff across relay restarts, reply
//! and mark processed after the handler succeeded) with a handler that records each task in
//! [`records::RECORDS`], synced to disk before it returns, and replies `done <task id>`.
//!
//! Delivery is at least once: a task whose handler ran but whose reply or acknowledgement did not reach the
//! relay (the agent or the relay was killed in between) is delivered again, to this process or the next.
//! Handling it twice is then the handler's duty to avoid, as it would be for any real handler with an
//! effect outside the relay: this one is idempotent by task id — a task already in its records (read back
//! at start, kept in memory after) is not recorded again — and gives the same reply, which the runner sends
//! under the task's one reply id, so the relay stores it once.

use std::collections::HashSet;
use std::fs::File;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, Result, anyhow};
use pacerelle_client::{
    AgentClient, AgentToken, agent::Message, backoff::Backoff, runner::Context, runner::Event,
    runner::Runner, runner::shutdown_signal,
};

use crate::Rng;
use crate::records::{self, Entry};

/// The environment variable that carries the agent's token to the child (never its command line).
pub const TOKEN_VAR: &str = "PACERELLE_AGENT_TOKEN";

/// The arguments of `pacerelle-soak agent`.
#[derive(Debug, clap::Args)]
pub struct AgentArgs {
    /// The relay's URL.
    #[arg(long)]
    pub relay: String,
    /// The agent's id (its token comes in PACERELLE_AGENT_TOKEN).
    #[arg(long)]
    pub agent_id: String,
    /// The folder of records.log and invocations.log.
    #[arg(long)]
    pub dir: PathBuf,
    /// The longest time the handler takes, in ms (a random part of it before recording, the rest after),
    /// so that kills land inside handlers too.
    #[arg(long, default_value_t = 20)]
    pub handle_ms: u64,
    /// Seed of the handler's pauses.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Start without reading the records back: a handler that is not idempotent across restarts, to see
    /// the checker catch it.
    #[arg(long)]
    pub forgetful: bool,
}

/// The reply the handler gives to a task.
pub fn reply_text(message_id: &str) -> String {
    format!("done {message_id}")
}

/// The handler's files and what it recorded so far.
struct Journal {
    records: File,
    invocations: File,
    recorded: HashSet<String>,
    rng: Rng,
    /// This process's run id in the files: its seed.
    run: u64,
}

impl Journal {
    /// Notes a call, and records the task unless it was recorded before. Returns once it is on disk.
    fn handle(&mut self, task: &Message, attempt: u32) -> std::io::Result<()> {
        let entry = Entry {
            message_id: task.message_id.clone(),
            redelivered: task.redelivered,
            attempt,
            at_ms: crate::now_ms(),
            run: self.run,
        };
        records::append(&mut self.invocations, &entry, false)?;
        if !self.recorded.contains(&task.message_id) {
            records::append(&mut self.records, &entry, true)?;
            self.recorded.insert(task.message_id.clone());
        }
        Ok(())
    }
}

/// Runs the agent until SIGTERM, SIGINT, or an error no retry fixes.
pub async fn run(args: AgentArgs) -> Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::new("pacerelle_client=info"))
        .init();
    let token = std::env::var(TOKEN_VAR).with_context(|| format!("{TOKEN_VAR} is not set"))?;
    let agent = AgentClient::new(&args.relay, &args.agent_id, AgentToken::parse(&token)?)?.with_home(None);
    let records_path = args.dir.join(records::RECORDS);
    let journal = Journal {
        records: records::open_append(&records_path)?,
        invocations: records::open_append(&args.dir.join(records::INVOCATIONS))?,
        recorded: if args.forgetful {
            HashSet::new()
        } else {
            records::recorded_ids(&records_path)?
        },
        rng: Rng::new(args.seed),
        run: args.seed,
    };
    // The runner's reports of failed tasks, noted before it goes on (the observer runs inside the loop), so
    // that the checker knows which tasks were rightly handed out again.
    let failures = Mutex::new(records::open_append(&args.dir.join(records::FAILURES))?);
    let run = args.seed;
    let observer = move |event: &Event| {
        if let Event::TaskFailed {
            message_id, attempt, ..
        } = event
        {
            let entry = Entry {
                message_id: message_id.clone(),
                redelivered: false,
                attempt: *attempt,
                at_ms: crate::now_ms(),
                run,
            };
            let written = failures
                .lock()
                .map_err(|_| std::io::Error::other("poisoned"))
                .and_then(|mut file| records::append(&mut file, &entry, false));
            if let Err(e) = written {
                // The check may then flag this task; say why in the agent's log.
                eprintln!("pacerelle-soak agent: cannot note the failed task {message_id}: {e}");
            }
        }
    };
    let journal = Arc::new(Mutex::new(journal));
    let handle_ms = args.handle_ms;
    let handler = move |task: Message, ctx: Context| {
        let journal = journal.clone();
        async move {
            let (before, after) = {
                let mut j = journal
                    .lock()
                    .map_err(|_| anyhow!("the journal's lock is poisoned"))?;
                (j.rng.below(handle_ms + 1), j.rng.below(handle_ms + 1))
            };
            tokio::time::sleep(Duration::from_millis(before / 2)).await;
            journal
                .lock()
                .map_err(|_| anyhow!("the journal's lock is poisoned"))?
                .handle(&task, ctx.attempt())
                .context("cannot record the task")?;
            tokio::time::sleep(Duration::from_millis(after / 2)).await;
            Ok::<_, anyhow::Error>(Some(reply_text(&task.message_id)))
        }
    };
    Runner::new(agent)
        .host("pacerelle-soak")
        .takeover(true)
        .on_event(observer)
        .wait(Duration::from_secs(20))
        .backoff(Backoff {
            first: Duration::from_millis(50),
            max: Duration::from_secs(1),
        })
        .run(handler, shutdown_signal())
        .await?;
    Ok(())
}
