//! The supervised agent loop: the one place that keeps an agent listening.
//!
//! [`Runner`] takes the lease, waits for tasks with a cursor, calls a [`Handler`] for each, replies with what
//! it returns and marks the task processed only after that; it backs off (with jitter) while the relay is
//! unreachable and reads the inbox again from the start after a cut, so a task delivered before is
//! delivered again (`redelivered`) until it is processed. A handler that fails leaves its task
//! unprocessed; a task that keeps failing — the handler fails [`Runner::max_attempts`] times, or its reply
//! can never be sent (too large, refused as invalid) — is set aside: the person gets a short error reply,
//! the task is marked processed and a log line says so. Nothing a task does ends the loop.
//!
//! The Python `Agent.run` / `AsyncAgent.run` and the echo agent run on it.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use pacerelle_core::{CryptoError, Cursor};
use tokio_util::sync::CancellationToken;

use crate::agent::{AgentClient, Checkpoint, Inbox, Message, reply_id_for};
use crate::backoff::Backoff;
use crate::error::{Error, ErrorKind, Result};
use crate::lease::Lease;
use pacerelle_core::wire::Stored;

/// How many times a task's handler may fail before the task is set aside.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;

/// What a [`Handler`] gets beside the task: the agent, checkpoints and intermediate replies about this
/// task, and a way to stop the loop. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Context {
    agent: AgentClient,
    message_id: String,
    attempt: u32,
    stop: CancellationToken,
}

impl Context {
    /// The agent's client (for questions, notifications…).
    pub fn agent(&self) -> &AgentClient {
        &self.agent
    }

    /// The task at hand.
    pub fn message_id(&self) -> &str {
        &self.message_id
    }

    /// 1 the first time this runner hands the task to the handler, 2 after one failure, and so on.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// Saves a checkpoint about this task.
    pub async fn save_checkpoint(&self, summary: &str, next_action: &str) -> Result<Checkpoint> {
        self.agent
            .save_checkpoint(summary, next_action, std::slice::from_ref(&self.message_id))
            .await
    }

    /// Sends an intermediate reply to this task (what the handler returns is the final one).
    pub async fn reply(&self, text: &str) -> Result<Stored> {
        self.agent.reply(&self.message_id, text, None).await
    }

    /// Stops the loop once this task is settled; the rest of the batch is delivered to the next run.
    pub fn stop(&self) {
        self.stop.cancel();
    }

    /// True once the loop was asked to stop.
    pub fn is_stopping(&self) -> bool {
        self.stop.is_cancelled()
    }
}

/// Handles one task: returns the reply text, or `None` for no reply. An error leaves the task unprocessed
/// (it is tried again, and set aside after [`Runner::max_attempts`] failures).
///
/// Implemented for every `Fn(Message, Context) -> impl Future<Output = Result<Option<String>, E>>` with
/// `E: Display`, so a closure is a handler.
pub trait Handler {
    /// Why handling failed; logged, never sent to the person.
    type Error: fmt::Display;

    /// Handles `message`.
    fn handle(
        &self,
        message: Message,
        ctx: Context,
    ) -> impl Future<Output = std::result::Result<Option<String>, Self::Error>> + Send;
}

impl<F, Fut, E> Handler for F
where
    F: Fn(Message, Context) -> Fut,
    Fut: Future<Output = std::result::Result<Option<String>, E>> + Send,
    E: fmt::Display,
{
    type Error = E;

    fn handle(
        &self,
        message: Message,
        ctx: Context,
    ) -> impl Future<Output = std::result::Result<Option<String>, E>> + Send {
        self(message, ctx)
    }
}

/// What the loop went through, for logs. Every event is also logged with `tracing` (target
/// `pacerelle_client::runner`); [`Runner::on_event`] sees them too (the Python binding logs them to the
/// `pacerelle` logger). Its `Display` is the log line; none carries a task's text.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// A session holds the lease; the loop listens.
    Listening {
        /// The session's id.
        session_id: String,
    },
    /// The relay could not be reached; the loop tries again after `retry_in`.
    RelayUnavailable {
        /// What failed.
        error: String,
        /// The pause before the next attempt.
        retry_in: Duration,
    },
    /// The session lost the lease (it lapsed or was taken over); a new session is opened, without
    /// takeover.
    LeaseLost,
    /// A task did not open (not the person's instruction): it is marked processed without a reply.
    Rejected {
        /// Its id.
        message_id: String,
        /// Why.
        reason: CryptoError,
    },
    /// The handler failed, or the reply or acknowledgement of its task failed; the task stays unprocessed.
    TaskFailed {
        /// The task.
        message_id: String,
        /// Which attempt this was.
        attempt: u32,
        /// How many are allowed.
        max_attempts: u32,
        /// The handler's error, or the relay's.
        error: String,
    },
    /// A task that kept failing, or whose reply can never be sent, was answered with an error reply and
    /// marked processed.
    SetAside {
        /// The task.
        message_id: String,
        /// Why, as in the log line.
        reason: String,
        /// The error reply could not be sent either (the task is marked processed all the same).
        unreplied: bool,
    },
    /// The loop stopped and released the lease.
    Stopped,
}

impl Event {
    /// How loud it is: `INFO` (listening, stopped), `WARN` (the relay, the lease, a task that did not
    /// open), `ERROR` (a task failed or was set aside).
    pub fn level(&self) -> tracing::Level {
        match self {
            Event::Listening { .. } | Event::Stopped => tracing::Level::INFO,
            Event::RelayUnavailable { .. } | Event::LeaseLost | Event::Rejected { .. } => {
                tracing::Level::WARN
            }
            Event::TaskFailed { .. } | Event::SetAside { .. } => tracing::Level::ERROR,
        }
    }

    /// The task it is about, if any.
    pub fn message_id(&self) -> Option<&str> {
        match self {
            Event::Rejected { message_id, .. }
            | Event::TaskFailed { message_id, .. }
            | Event::SetAside { message_id, .. } => Some(message_id),
            _ => None,
        }
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::Listening { session_id } => write!(f, "listening (session {session_id})"),
            Event::RelayUnavailable { error, retry_in } => write!(
                f,
                "relay unreachable ({error}); retrying in {:.2} s",
                retry_in.as_secs_f64()
            ),
            Event::LeaseLost => write!(
                f,
                "the lease was lost (expired or taken over); opening a new session"
            ),
            Event::Rejected { message_id, reason } => {
                write!(f, "dropping task {message_id}: it did not open ({reason})")
            }
            Event::TaskFailed {
                message_id,
                attempt,
                max_attempts,
                error,
            } => {
                let next = if attempt < max_attempts {
                    "it stays unprocessed and will be redelivered"
                } else {
                    "it is set aside"
                };
                write!(
                    f,
                    "the handler failed on task {message_id} (attempt {attempt} of {max_attempts}); {next}: {error}"
                )
            }
            Event::SetAside {
                message_id,
                reason,
                unreplied,
            } => {
                let told = if *unreplied {
                    "the error reply could not be sent"
                } else {
                    "the person got an error reply"
                };
                write!(
                    f,
                    "task {message_id} set aside ({reason}): {told}; it is marked processed"
                )
            }
            Event::Stopped => write!(f, "stopped"),
        }
    }
}

type Observer = Arc<dyn Fn(&Event) + Send + Sync>;

/// The supervised agent loop. Build it, then [`run`](Runner::run) it with a handler and a shutdown signal.
///
/// ```no_run
/// use pacerelle_client::{AgentClient, AgentToken, runner::Context, agent::Message, runner::Runner};
///
/// # async fn example() -> pacerelle_client::Result<()> {
/// let token = AgentToken::parse(&std::env::var("PACERELLE_AGENT_TOKEN").unwrap_or_default())?;
/// let agent = AgentClient::new("http://127.0.0.1:8787", "ag_example", token)?;
/// Runner::new(agent)
///     .host("my-agent")
///     .takeover(true)
///     .run(
///         |task: Message, ctx: Context| async move {
///             ctx.save_checkpoint(&format!("answered {}", task.message_id), "wait").await?;
///             Ok::<_, pacerelle_client::Error>(Some(format!("echo: {}", task.text)))
///         },
///         async {
///             let _ = tokio::signal::ctrl_c().await;
///         },
///     )
///     .await
/// # }
/// ```
#[derive(Clone)]
pub struct Runner {
    agent: AgentClient,
    host: String,
    session: Option<String>,
    takeover: bool,
    wait: Duration,
    backoff: Backoff,
    max_attempts: u32,
    observer: Option<Observer>,
}

impl fmt::Debug for Runner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runner")
            .field("agent_id", &self.agent.agent_id())
            .field("host", &self.host)
            .field("session", &self.session)
            .field("takeover", &self.takeover)
            .field("wait", &self.wait)
            .field("backoff", &self.backoff)
            .field("max_attempts", &self.max_attempts)
            .finish_non_exhaustive()
    }
}

/// Why a pass over a batch ended early.
enum Halt {
    /// Asked to stop.
    Stop,
    /// The session lost the lease.
    LeaseLost,
    /// An error no retry can fix (the agent is unknown, its token refused…).
    Fatal(Error),
}

/// How a pass over a batch ended.
enum Pass {
    /// Every task was settled.
    Done,
    /// A task failed and stays unprocessed: read the inbox from the start again, after a pause.
    Retry,
}

impl Runner {
    /// A loop for `agent`: host "pacerelle-client", no takeover, 30 s waits, the default [`Backoff`],
    /// [`DEFAULT_MAX_ATTEMPTS`].
    pub fn new(agent: AgentClient) -> Self {
        Runner {
            agent,
            host: "pacerelle-client".into(),
            session: None,
            takeover: false,
            wait: Duration::from_secs(30),
            backoff: Backoff::default(),
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            observer: None,
        }
    }

    /// Names this process to another session that finds the lease taken.
    pub fn host(mut self, host: impl Into<String>) -> Self {
        self.host = host.into();
        self
    }

    /// Runs as the agent's session `name` (the default session otherwise): it takes that name's lease and
    /// handles the tasks sent to that name or to any session. Several runners of one agent with different
    /// names run side by side.
    pub fn session(mut self, name: impl Into<String>) -> Self {
        self.session = Some(name.into());
        self
    }

    /// Whether the first session takes the lease over from a live holder. Without it, a held lease ends
    /// [`run`](Runner::run) with the relay's `agent_in_use` error. A session opened again after the lease was
    /// lost never takes over: if another session holds it by then, `run` ends with `agent_in_use`.
    pub fn takeover(mut self, takeover: bool) -> Self {
        self.takeover = takeover;
        self
    }

    /// How long one wait parks at the relay (at most 55 s).
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// The pauses while the relay is unreachable and between the attempts of a failing task.
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// How many times the handler may fail on one task before the task is set aside (at least 1).
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts.max(1);
        self
    }

    /// Called with each [`Event`], besides the `tracing` log.
    pub fn on_event(mut self, observer: impl Fn(&Event) + Send + Sync + 'static) -> Self {
        self.observer = Some(Arc::new(observer));
        self
    }

    /// Runs until `shutdown` completes or the handler calls [`Context::stop`], then releases the lease.
    ///
    /// Shutdown is cooperative: a handler already running finishes and its task is settled (reply, then
    /// processed); the rest of the batch stays for the next run. Returns an error only for what no retry can
    /// fix: the lease held by another session (`agent_in_use`) without [`takeover`](Runner::takeover), a
    /// refused token, an unknown agent.
    pub async fn run<H: Handler>(self, handler: H, shutdown: impl Future<Output = ()>) -> Result<()> {
        let stop = CancellationToken::new();
        let watch = async {
            shutdown.await;
            stop.cancel();
            std::future::pending::<()>().await
        };
        let result = tokio::select! {
            result = self.serve(&handler, &stop) => result,
            () = watch => unreachable!("the watch never ends"),
        };
        if let Err(e) = self.agent.close_session().await {
            tracing::debug!(error = %e, "could not release the lease");
        }
        self.emit(Event::Stopped);
        result
    }

    fn emit(&self, event: Event) {
        let message_id = event.message_id().unwrap_or("");
        match event.level() {
            tracing::Level::ERROR => tracing::error!(message_id, "{event}"),
            tracing::Level::WARN => tracing::warn!(message_id, "{event}"),
            _ => tracing::info!(message_id, "{event}"),
        }
        if let Some(observer) = &self.observer {
            observer(&event);
        }
    }

    async fn serve<H: Handler>(&self, handler: &H, stop: &CancellationToken) -> Result<()> {
        let mut unreachable = self.backoff.delays();
        let mut retries = self.backoff.delays();
        let mut lease = Lease::new(self.agent.clone(), self.host.clone(), self.takeover)
            .named(self.session.clone(), None);
        let mut cursor: Option<Cursor> = None;
        let mut attempts: HashMap<String, u32> = HashMap::new();
        loop {
            if stop.is_cancelled() {
                return Ok(());
            }
            let pause = if lease.session().is_none() {
                match until(stop, lease.ensure()).await {
                    None => return Ok(()),
                    Some(Ok(info)) => {
                        let session_id = info.map(|i| i.session_id.clone()).unwrap_or_default();
                        // From the start: tasks delivered before and not processed come again.
                        cursor = None;
                        self.emit(Event::Listening { session_id });
                        continue;
                    }
                    Some(Err(e)) if retryable(&e) => self.unreachable(&e, &mut unreachable),
                    Some(Err(e)) => return Err(e),
                }
            } else {
                match until(stop, self.agent.wait_for_messages(cursor, self.wait)).await {
                    None => return Ok(()),
                    Some(Ok(inbox)) => {
                        unreachable = self.backoff.delays();
                        match self.settle_batch(handler, &inbox, &mut attempts, stop).await {
                            Ok(Pass::Done) => {
                                retries = self.backoff.delays();
                                cursor = Some(inbox.cursor);
                                continue;
                            }
                            Ok(Pass::Retry) => {
                                cursor = None;
                                retries.next().unwrap_or(self.backoff.max)
                            }
                            Err(Halt::Stop) => return Ok(()),
                            Err(Halt::LeaseLost) => {
                                self.emit(Event::LeaseLost);
                                lease.lost();
                                unreachable.next().unwrap_or(self.backoff.max)
                            }
                            Err(Halt::Fatal(e)) => return Err(e),
                        }
                    }
                    Some(Err(e)) if e.kind() == ErrorKind::LeaseLost => {
                        self.emit(Event::LeaseLost);
                        lease.lost();
                        unreachable.next().unwrap_or(self.backoff.max)
                    }
                    Some(Err(e)) if retryable(&e) => {
                        cursor = None;
                        self.unreachable(&e, &mut unreachable)
                    }
                    Some(Err(e)) => return Err(e),
                }
            };
            if until(stop, tokio::time::sleep(pause)).await.is_none() {
                return Ok(());
            }
        }
    }

    fn unreachable(&self, e: &Error, delays: &mut impl Iterator<Item = Duration>) -> Duration {
        let retry_in = delays.next().unwrap_or(self.backoff.max);
        self.emit(Event::RelayUnavailable {
            error: e.to_string(),
            retry_in,
        });
        retry_in
    }

    /// Hands each task of a batch to the handler and settles it.
    async fn settle_batch<H: Handler>(
        &self,
        handler: &H,
        inbox: &Inbox,
        attempts: &mut HashMap<String, u32>,
        stop: &CancellationToken,
    ) -> std::result::Result<Pass, Halt> {
        for rejected in &inbox.rejected {
            self.emit(Event::Rejected {
                message_id: rejected.message_id.clone(),
                reason: rejected.reason.clone(),
            });
            self.acknowledge(&rejected.message_id, stop).await?;
        }
        let mut pass = Pass::Done;
        for message in &inbox.messages {
            if stop.is_cancelled() {
                // The rest is delivered to the next run.
                return Err(Halt::Stop);
            }
            let id = message.message_id.clone();
            let attempt = {
                let n = attempts.entry(id.clone()).or_insert(0);
                *n += 1;
                *n
            };
            tracing::debug!(message_id = %id, redelivered = message.redelivered, attempt, "task");
            let ctx = Context {
                agent: self.agent.clone(),
                message_id: id.clone(),
                attempt,
                stop: stop.clone(),
            };
            let failure = match handler.handle(message.clone(), ctx).await {
                Ok(reply) => match self.send_reply(&id, reply, stop).await {
                    Ok(()) => None,
                    Err(Failure::Halt(h)) => return Err(h),
                    Err(Failure::Permanent(reason)) => {
                        attempts.remove(&id);
                        self.set_aside(&id, reason, stop).await?;
                        continue;
                    }
                    Err(Failure::Again(e)) => Some(e.to_string()),
                },
                Err(e) => Some(e.to_string()),
            };
            match failure {
                None => {
                    self.acknowledge(&id, stop).await?;
                    attempts.remove(&id);
                }
                Some(error) => {
                    self.emit(Event::TaskFailed {
                        message_id: id.clone(),
                        attempt,
                        max_attempts: self.max_attempts,
                        error,
                    });
                    if attempt >= self.max_attempts {
                        attempts.remove(&id);
                        let reason = format!("it failed {attempt} times");
                        self.set_aside(&id, reason, stop).await?;
                    } else {
                        pass = Pass::Retry;
                    }
                }
            }
        }
        Ok(pass)
    }

    /// Sends the handler's reply (a blank one is no reply), idempotent by the task's reply id.
    async fn send_reply(
        &self,
        message_id: &str,
        reply: Option<String>,
        stop: &CancellationToken,
    ) -> std::result::Result<(), Failure> {
        let Some(text) = reply.filter(|t| !t.trim().is_empty()) else {
            return Ok(());
        };
        let reply_id = reply_id_for(message_id, None);
        match self
            .settle(stop, || self.agent.reply(message_id, &text, Some(&reply_id)))
            .await
        {
            Ok(_) => Ok(()),
            Err(Halt::Fatal(e)) if refused_for_good(&e) => Err(Failure::Permanent(format!(
                "its reply cannot be sent: {}",
                why_refused(&e)
            ))),
            Err(Halt::Fatal(e)) if fatal(&e) => Err(Failure::Halt(Halt::Fatal(e))),
            Err(Halt::Fatal(e)) => Err(Failure::Again(e)),
            Err(h) => Err(Failure::Halt(h)),
        }
    }

    /// Tells the person the task was set aside, and marks it processed.
    async fn set_aside(
        &self,
        message_id: &str,
        reason: String,
        stop: &CancellationToken,
    ) -> std::result::Result<(), Halt> {
        let text = format!("Sorry, this task could not be handled and was set aside: {reason}.");
        let reply_id = reply_id_for(message_id, None);
        let unreplied = match self
            .settle(stop, || self.agent.reply(message_id, &text, Some(&reply_id)))
            .await
        {
            Ok(_) => false,
            Err(Halt::Fatal(e)) if !fatal(&e) => {
                tracing::warn!(message_id, error = %e, "the error reply could not be sent");
                true
            }
            Err(h) => return Err(h),
        };
        self.acknowledge(message_id, stop).await?;
        self.emit(Event::SetAside {
            message_id: message_id.to_string(),
            reason,
            unreplied,
        });
        Ok(())
    }

    /// Marks a task processed, retrying while the relay is unreachable.
    async fn acknowledge(&self, message_id: &str, stop: &CancellationToken) -> std::result::Result<(), Halt> {
        match self.settle(stop, || self.agent.mark_processed(message_id)).await {
            Ok(_) => Ok(()),
            Err(Halt::Fatal(e)) if e.kind() == ErrorKind::LeaseLost => Err(Halt::LeaseLost),
            Err(Halt::Fatal(e)) if e.kind() == ErrorKind::NotFound => {
                tracing::warn!(message_id, "the task is gone from the relay");
                Ok(())
            }
            Err(h) => Err(h),
        }
    }

    /// Runs an idempotent call until it succeeds, pausing while the relay is unreachable. Gives up when asked
    /// to stop while the relay is unreachable (the task stays unprocessed: delivered to the next run).
    async fn settle<T, F, Fut>(&self, stop: &CancellationToken, mut call: F) -> std::result::Result<T, Halt>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let mut delays = self.backoff.delays();
        loop {
            match call().await {
                Ok(value) => return Ok(value),
                Err(e) if e.is_transient() => {
                    if stop.is_cancelled() {
                        return Err(Halt::Stop);
                    }
                    let pause = self.unreachable(&e, &mut delays);
                    // Woken by a stop, it tries once more before giving up.
                    let _ = until(stop, tokio::time::sleep(pause)).await;
                }
                Err(e) => return Err(Halt::Fatal(e)),
            }
        }
    }
}

/// Why a task's reply was not sent.
enum Failure {
    Halt(Halt),
    /// It can never be sent: set the task aside now.
    Permanent(String),
    /// Perhaps later: counts as a failed attempt.
    Again(Error),
}

/// Resolves on Ctrl-C (SIGINT) or SIGTERM: the shutdown a long-running listener (a [`Runner`], the MCP
/// server) is usually given. Where a signal cannot be watched, that one never comes.
pub async fn shutdown_signal() {
    let interrupt = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {}
        () = terminate => {}
    }
}

/// Awaits `future` unless `stop` comes first (then `None`, and the future is dropped).
async fn until<T>(stop: &CancellationToken, future: impl Future<Output = T>) -> Option<T> {
    tokio::select! {
        biased;
        () = stop.cancelled() => None,
        value = future => Some(value),
    }
}

/// Worth trying again later: the relay is unreachable, restarting, busy or failing inside.
fn retryable(e: &Error) -> bool {
    e.kind().worth_retrying()
}

/// No retry can fix it, for any task: the loop ends with it.
fn fatal(e: &Error) -> bool {
    matches!(e.kind(), ErrorKind::Unauthorized | ErrorKind::AgentInUse)
}

/// The same request would be refused again whatever happens: too large or invalid (given here, or refused by
/// the relay as `invalid_input`, `body_too_large`…).
fn refused_for_good(e: &Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::InvalidInput | ErrorKind::BadCursor | ErrorKind::BodyTooLarge
    )
}

/// A short reason for the person, without any text of the task.
fn why_refused(e: &Error) -> String {
    match e {
        Error::InvalidInput(reason) => reason.clone(),
        _ if e.kind() == ErrorKind::BodyTooLarge => "it is larger than the relay accepts".into(),
        _ => "the relay refused it as invalid".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pacerelle_core::wire::code;

    #[test]
    fn a_reply_too_large_or_invalid_is_refused_for_good_and_a_network_error_is_not() {
        assert!(refused_for_good(&Error::InvalidInput(
            "a reply is at most 64 KiB of text".into()
        )));
        let api = |status, code: &str| Error::Api {
            status,
            code: code.into(),
            message: String::new(),
            details: None,
        };
        assert!(refused_for_good(&api(413, code::BODY_TOO_LARGE)));
        assert!(refused_for_good(&api(400, code::INVALID_INPUT)));
        assert!(!refused_for_good(&api(503, code::UNAVAILABLE)));
        assert!(!refused_for_good(&Error::Network {
            url: "http://127.0.0.1:1".into(),
            reason: "refused".into()
        }));
        assert!(retryable(&api(500, code::INTERNAL)));
        assert!(fatal(&api(401, code::UNAUTHORIZED)));
    }

    #[test]
    fn the_log_lines_name_the_task_and_what_happens_to_it() {
        let failed = Event::TaskFailed {
            message_id: "msg_1".into(),
            attempt: 1,
            max_attempts: 3,
            error: "boom".into(),
        };
        assert_eq!(
            failed.to_string(),
            "the handler failed on task msg_1 (attempt 1 of 3); it stays unprocessed and will be redelivered: boom"
        );
        let aside = Event::SetAside {
            message_id: "msg_1".into(),
            reason: "it failed 3 times".into(),
            unreplied: false,
        };
        assert_eq!(
            aside.to_string(),
            "task msg_1 set aside (it failed 3 times): the person got an error reply; it is marked processed"
        );
        assert_eq!(aside.level(), tracing::Level::ERROR);
    }
}
