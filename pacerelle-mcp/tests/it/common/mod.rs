//! A real relay on 127.0.0.1 with a SQLite file in a temporary folder (from `pacerelle-test-support`), the
//! real `pacerelle-mcp` binary spawned over stdio, and a real rmcp client driving it.
#![allow(dead_code, unused_imports, clippy::expect_used, clippy::unwrap_used)]

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pacerelle_client::AgentClient;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ErrorCode, Implementation,
    ProgressNotificationParam, ProtocolVersion,
};
use rmcp::service::{NotificationContext, RunningService, ServiceError};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, RoleClient, ServiceExt};
use serde_json::Value;
use tokio::process::Command;

// ----- the relay -----

pub use pacerelle_test_support::{TestRelay, assert_no_plaintext, file_contains, files_in};

// ----- the MCP client -----

/// Which lifecycle the test client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// `initialize` handshake, protocol 2025-11-25.
    Legacy,
    /// `server/discover`, protocol 2026-07-28.
    Modern,
}

impl Era {
    /// How a test client of this era starts: the `initialize` handshake, or `server/discover`.
    pub fn lifecycle(self) -> ClientLifecycleMode {
        match self {
            Era::Legacy => ClientLifecycleMode::Initialize,
            Era::Modern => ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        }
    }
}

/// A client that records the progress notifications it receives.
#[derive(Clone, Default)]
pub struct TestClient {
    pub progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
}

impl ClientHandler for TestClient {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("pacerelle-mcp-tests", "0"),
        )
        .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params);
    }
}

pub type Client = RunningService<RoleClient, TestClient>;

/// A running `pacerelle-mcp` and the client connected to it.
pub struct Server {
    pub client: Client,
    pub pid: u32,
    pub progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
}

/// The binary under test, configured for `agent` on `relay_url`.
pub fn command(agent: &AgentClient, relay_url: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pacerelle-mcp"));
    cmd.args(args)
        .env("PACERELLE_AGENT_ID", agent.agent_id())
        .env("PACERELLE_AGENT_TOKEN", agent.token().expose())
        .env("PACERELLE_RELAY_URL", relay_url)
        .env("PACERELLE_HOME", pacerelle_test_support::home())
        .env("RUST_LOG", "info,rmcp=warn");
    cmd
}

pub async fn spawn(agent: &AgentClient, relay_url: &str, args: &[&str], era: Era) -> Server {
    spawn_with(agent, relay_url, args, &[], era).await
}

/// As [`spawn`], with more environment variables (`PACERELLE_MCP_RESULT_TEXT=guide`).
pub async fn spawn_with(
    agent: &AgentClient,
    relay_url: &str,
    args: &[&str],
    env: &[(&str, &str)],
    era: Era,
) -> Server {
    let mut cmd = command(agent, relay_url, args);
    cmd.envs(env.iter().copied());
    spawn_command(cmd, era).await
}

/// As [`spawn_with`], the server started in `folder` (an MCP host starts it in the project's folder).
pub async fn spawn_in(
    agent: &AgentClient,
    relay_url: &str,
    env: &[(&str, &str)],
    folder: &std::path::Path,
    era: Era,
) -> Server {
    let mut cmd = command(agent, relay_url, &[]);
    cmd.envs(env.iter().copied()).current_dir(folder);
    spawn_command(cmd, era).await
}

async fn spawn_command(cmd: Command, era: Era) -> Server {
    let (transport, _) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn pacerelle-mcp");
    let pid = transport.id().expect("pid");
    let handler = TestClient::default();
    let progress = handler.progress.clone();
    let client = handler
        .serve_with_lifecycle(transport, era.lifecycle())
        .await
        .expect("start the MCP session");
    Server {
        client,
        pid,
        progress,
    }
}

impl Server {
    /// Calls a tool; panics on a protocol error.
    pub async fn call(&self, name: &'static str, args: Value) -> CallToolResult {
        self.try_call(name, args)
            .await
            .unwrap_or_else(|e| panic!("{name} failed at the protocol level: {e:?}"))
    }

    pub async fn try_call(&self, name: &'static str, args: Value) -> Result<CallToolResult, ServiceError> {
        let args = match args {
            Value::Object(map) => map,
            other => panic!("arguments must be an object, not {other}"),
        };
        self.client
            .call_tool(CallToolRequestParams::new(name).with_arguments(args))
            .await
    }

    /// Starts a call in the background (a wait to park while something else happens).
    pub fn spawn_call(
        &self,
        name: &'static str,
        args: Value,
    ) -> tokio::task::JoinHandle<Result<CallToolResult, ServiceError>> {
        let client = self.client.clone();
        let args = match args {
            Value::Object(map) => map,
            other => panic!("arguments must be an object, not {other}"),
        };
        tokio::spawn(async move {
            client
                .call_tool(CallToolRequestParams::new(name).with_arguments(args))
                .await
        })
    }

    /// Calls a tool that must succeed and returns its structured content.
    pub async fn ok(&self, name: &'static str, args: Value) -> Value {
        let result = self.call(name, args).await;
        assert_ne!(
            result.is_error,
            Some(true),
            "{name} returned a tool error: {}",
            text(&result)
        );
        result
            .structured_content
            .clone()
            .unwrap_or_else(|| panic!("{name} returned no structured content"))
    }

    /// Calls a tool that must return a tool error and returns its text.
    pub async fn tool_error(&self, name: &'static str, args: Value) -> String {
        let result = self.call(name, args).await;
        assert_eq!(
            result.is_error,
            Some(true),
            "{name} should have failed: {}",
            text(&result)
        );
        text(&result)
    }

    /// Calls a tool that must be refused with `invalid_params` and returns the message.
    pub async fn invalid_params(&self, name: &'static str, args: Value) -> String {
        match self.try_call(name, args.clone()).await {
            Err(ServiceError::McpError(e)) => {
                assert_eq!(e.code, ErrorCode::INVALID_PARAMS, "{name} {args}: {e:?}");
                e.message.to_string()
            }
            other => panic!("{name} {args} should be invalid_params, got {other:?}"),
        }
    }

    /// Closes stdin and waits for the server to exit (it releases the lease first).
    pub async fn stop(self) {
        self.client.cancel().await.expect("close the MCP session");
    }
}

/// All text blocks of a result, joined.
pub fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// How many times `needle` occurs in a whole result: every content block and the structured content, as
/// they travel (JSON).
pub fn occurrences(result: &CallToolResult, needle: &str) -> usize {
    serde_json::to_string(result)
        .expect("a result serialises")
        .matches(needle)
        .count()
}

/// Polls `check` every 50 ms until it returns true or `limit` passes.
pub async fn eventually<F, Fut>(limit: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if check().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// ----- a hostile relay -----

/// Plays a relay that swaps the agent's own sealed copy of question `question_id` for the copy of another
/// question under the same id (it received one with a refused ask): the copy of `other`, sealed with the
/// agent's own key for that id, replaces the stored one in the relay's SQLite file.
pub async fn swap_self_copy(relay: &TestRelay, agent: &AgentClient, question_id: &str, other: &str) {
    use pacerelle_client::core::envelope;
    use pacerelle_client::core::question::{QuestionPayload, question_aad};
    let payload = QuestionPayload {
        grants: None,
        question: other.to_string(),
        kind: pacerelle_client::QuestionKind::YesNo,
        options: Vec::new(),
        multiple: false,
        details: None,
        expires_at: pacerelle_client::Timestamp::now().plus_millis(600_000),
        recipients: Vec::new(),
        answer_key: None,
        channels: Vec::new(),
        user: None,
        approvals: 1,
    };
    let swapped = envelope::seal_json(
        &agent.token().self_key(agent.agent_id()),
        &question_aad(agent.agent_id(), "", question_id),
        &payload,
    );
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(relay.dir.path().join("pacerelle.db"))
        .busy_timeout(Duration::from_secs(10));
    let pool = sqlx::SqlitePool::connect_with(options)
        .await
        .expect("open the relay's database");
    let done = sqlx::query("UPDATE items SET envelope = ? WHERE kind = 'question' AND item_id = ?")
        .bind(&swapped)
        .bind(question_id)
        .execute(&pool)
        .await
        .expect("swap the self copy");
    assert_eq!(done.rows_affected(), 1, "question {question_id} is stored");
    pool.close().await;
}
