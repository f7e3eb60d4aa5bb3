//! One approval gate, the same conclusions everywhere: the scenarios of `gate_table.json` (yes, no, expiry,
//! cancel, relay down, an answer altered in the relay's SQLite, a protected path, the policy's allow and
//! deny) run through the real `pacerelle hook` binary and through the real `pacerelle-mcp` binary driven by
//! an MCP client over stdio, each against a real relay (`pacerelle serve`) and a device paired through the
//! agent's roster. `pacerelle-py/tests/test_approval.py` runs the same table through `require_approval`.
//!
//! The hook logs its conclusion at `info` (`pacerelle::gate`); the MCP tools report it as `conclusion`.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Output, Stdio};
use std::time::Duration;

use common::{Setup, next_question, run_with_stdin, stderr};
use pacerelle_client::{AgentClient, AgentToken, Answer, gate::Conclusion};
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Debug, Deserialize)]
struct Table {
    scenarios: Vec<Scenario>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Scenario {
    name: String,
    phone: String,
    #[serde(default)]
    relay: Option<String>,
    #[serde(default)]
    tamper: bool,
    #[serde(default)]
    policy: Option<String>,
    #[serde(default)]
    touches: Option<String>,
    conclusion: Conclusion,
    surfaces: Vec<String>,
}

impl Scenario {
    fn relay_down(&self) -> bool {
        self.relay.as_deref() == Some("down")
    }
}

fn table(surface: &str) -> Vec<Scenario> {
    let table: Table = serde_json::from_str(include_str!("../gate_table.json")).expect("gate_table.json");
    table
        .scenarios
        .into_iter()
        .filter(|s| s.surfaces.iter().any(|x| x == surface))
        .collect()
}

#[test]
fn the_table_holds_every_scenario_of_the_issue() {
    let all: Table = serde_json::from_str(include_str!("../gate_table.json")).expect("gate_table.json");
    for name in [
        "yes",
        "no",
        "expiry",
        "cancel",
        "relay_down",
        "rejected_answer",
        "protected_path",
    ] {
        let s = all
            .scenarios
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("{name} is missing"));
        assert!(
            s.surfaces.iter().any(|x| x == "hook") && s.surfaces.iter().any(|x| x == "python"),
            "{name}"
        );
    }
}

// ----- the relay's database -----

/// Every answer the relay stores from now on has one character of its sealed envelope changed, in the same
/// transaction (recursive triggers are off: the trigger's own update does not fire it again).
async fn tamper_with_answers(data: &Path) {
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(data.join("pacerelle.db"))
        .busy_timeout(Duration::from_secs(10));
    let pool = sqlx::SqlitePool::connect_with(options)
        .await
        .expect("open the relay's database");
    sqlx::query(
        "CREATE TRIGGER gate_table_tamper AFTER UPDATE OF answer_envelope ON questions
         WHEN NEW.answer_envelope IS NOT NULL
         BEGIN
           UPDATE questions SET answer_envelope =
             substr(NEW.answer_envelope, 1, length(NEW.answer_envelope) / 2)
             || CASE substr(NEW.answer_envelope, length(NEW.answer_envelope) / 2 + 1, 1)
                  WHEN 'A' THEN 'B' ELSE 'A' END
             || substr(NEW.answer_envelope, length(NEW.answer_envelope) / 2 + 2)
           WHERE item_seq = NEW.item_seq;
         END",
    )
    .execute(&pool)
    .await
    .expect("install the trigger");
    pool.close().await;
}

// ----- the agent and the phone -----

/// The agent created by `pacerelle agent create` in the setup.
fn agent_of(setup: &Setup) -> (String, String) {
    let file: Value = serde_json::from_slice(
        &std::fs::read(setup.agent_home.path().join("agent.json")).expect("agent.json"),
    )
    .expect("json");
    (
        file["agentId"].as_str().expect("agentId").to_string(),
        file["token"].as_str().expect("token").to_string(),
    )
}

fn agent_client(setup: &Setup) -> AgentClient {
    let (id, token) = agent_of(setup);
    AgentClient::new(&setup.url, &id, AgentToken::parse(&token).expect("token"))
        .expect("client")
        .with_home(Some(&pacerelle_test_support::home()))
}

/// What the phone does once the question reached it. For `cancel`, returns the question's id: the caller
/// withdraws it as the agent.
async fn play_phone(setup: &Setup, scenario: &Scenario) -> Option<String> {
    match scenario.phone.as_str() {
        "none" => None,
        "silent" => {
            next_question(&setup.device, &[]).await;
            None
        }
        "yes" | "no" => {
            if scenario.tamper {
                tamper_with_answers(setup.data.path()).await;
            }
            let q = next_question(&setup.device, &[]).await;
            let answer = if scenario.phone == "yes" {
                Answer::Yes
            } else {
                Answer::No
            };
            // With the trigger, the relay stores another answer than the one given: the phone may say so.
            let _ = setup.device.answer(&q.question_id, answer).await;
            None
        }
        "cancel" => Some(next_question(&setup.device, &[]).await.question_id),
        other => panic!("unknown phone action {other}"),
    }
}

/// No question reached the phone.
async fn nothing_asked(setup: &Setup) -> bool {
    setup
        .device
        .questions(None)
        .await
        .map(|list| list.questions.is_empty())
        .unwrap_or(true)
}

// ----- the hook -----

fn strip_ansi(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The conclusion the hook logged, and whether it allowed the call.
fn hook_conclusion(out: &Output) -> (String, bool) {
    assert_eq!(out.status.code(), Some(0), "{}", stderr(out));
    let decision: Value = serde_json::from_slice(&out.stdout).expect("decision JSON");
    let allow = match decision["hookSpecificOutput"]["permissionDecision"].as_str() {
        Some("allow") => true,
        Some("deny") => false,
        other => panic!("unexpected decision {other:?}"),
    };
    let log = strip_ansi(&stderr(out));
    let word = log
        .split("conclusion=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no conclusion in the hook's log: {log}"))
        .to_string();
    (word, allow)
}

async fn through_the_hook(scenario: &Scenario) {
    let setup = Setup::start().await;
    let project = tempfile::tempdir().expect("tempdir");
    if let Some(policy) = &scenario.policy {
        std::fs::create_dir_all(project.path().join(".pacerelle")).expect("mkdir");
        std::fs::write(project.path().join(".pacerelle/policy.toml"), policy).expect("policy");
    }
    let (tool, tool_input) = match &scenario.touches {
        Some(file) => (
            "Write",
            json!({"file_path": project.path().join(file), "content": "default = \"allow\"\n"}),
        ),
        None => ("Bash", json!({"command": "make deploy"})),
    };
    let stdin = serde_json::to_vec(&json!({
        "hook_event_name": "PreToolUse",
        "cwd": project.path(),
        "tool_name": tool,
        "tool_input": tool_input,
    }))
    .expect("json");
    let relay = if scenario.relay_down() {
        "http://127.0.0.1:9".to_string()
    } else {
        setup.url.clone()
    };
    let mut c = common::pacerelle(setup.agent_home.path(), &relay);
    let budget = if scenario.phone == "silent" { "3" } else { "30" };
    c.env("PACERELLE_LOG", "warn,pacerelle::gate=info")
        .args(["hook", "claude-code", "--budget", budget]);
    let running = tokio::task::spawn_blocking(move || run_with_stdin(c, &stdin));
    if let Some(id) = play_phone(&setup, scenario).await {
        agent_client(&setup).cancel_question(&id).await.expect("cancel");
    }
    let out = running.await.expect("join");
    let (word, allow) = hook_conclusion(&out);
    assert_eq!(
        word,
        scenario.conclusion.as_str(),
        "hook, scenario {}: {}",
        scenario.name,
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(
        allow,
        scenario.conclusion.lets_run(),
        "hook, scenario {}",
        scenario.name
    );
    if scenario.phone == "none" {
        assert!(nothing_asked(&setup).await, "hook, scenario {}", scenario.name);
    }
}

#[tokio::test]
async fn the_hook_concludes_as_the_table_says() {
    let scenarios = table("hook");
    assert!(scenarios.len() >= 7);
    for scenario in &scenarios {
        through_the_hook(scenario).await;
    }
}

// ----- the MCP tools -----

/// The `pacerelle-mcp` binary, built with the workspace's other programs (this test lives beside the hook's).
fn mcp_binary() -> PathBuf {
    pacerelle_test_support::binary("pacerelle-mcp")
}

/// An MCP client over stdio (newline-delimited JSON-RPC), as a host speaks to `pacerelle-mcp`.
struct Mcp {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl Drop for Mcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Mcp {
    fn start(binary: &Path, agent: &(String, String), relay: &str) -> Mcp {
        let mut child = Command::new(binary)
            .env("PACERELLE_AGENT_ID", &agent.0)
            .env("PACERELLE_AGENT_TOKEN", &agent.1)
            .env("PACERELLE_RELAY_URL", relay)
            .env("PACERELLE_HOME", pacerelle_test_support::home())
            .env("RUST_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn pacerelle-mcp");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut mcp = Mcp {
            child,
            stdin,
            stdout,
            next_id: 1,
        };
        let init = mcp.request(
            "initialize",
            json!({
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "gate-table", "version": "0"}
            }),
        );
        assert!(init["serverInfo"].is_object(), "{init}");
        mcp.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        mcp
    }

    fn send(&mut self, message: Value) {
        writeln!(self.stdin, "{message}").expect("write");
        self.stdin.flush().expect("flush");
    }

    /// Sends a request and returns its result, skipping notifications.
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let mut line = String::new();
            assert!(
                self.stdout.read_line(&mut line).expect("read") > 0,
                "pacerelle-mcp closed stdout"
            );
            let message: Value = serde_json::from_str(&line).expect("JSON-RPC");
            if message["id"] == json!(id) {
                assert!(message.get("error").is_none(), "{method}: {message}");
                return message["result"].clone();
            }
        }
    }

    fn call(&mut self, tool: &str, arguments: Value) -> Value {
        self.request("tools/call", json!({"name": tool, "arguments": arguments}))
    }
}

fn text_of(result: &Value) -> String {
    result["content"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// The conclusion of a tool's result: its `conclusion`, or for a tool error, `relay_unavailable` when it says
/// the relay is unreachable (else `error`).
fn mcp_conclusion(result: &Value) -> String {
    if result["isError"] == json!(true) {
        let text = text_of(result);
        return if text.contains("is unreachable") {
            "relay_unavailable".into()
        } else {
            format!("error: {text}")
        };
    }
    let conclusion = &result["structuredContent"]["conclusion"];
    conclusion.as_str().expect("conclusion").to_string()
}

async fn through_the_mcp_tools(binary: &Path, scenario: &Scenario) {
    let setup = Setup::start().await;
    let relay = if scenario.relay_down() {
        "http://127.0.0.1:9".to_string()
    } else {
        setup.url.clone()
    };
    let mut mcp = Mcp::start(binary, &agent_of(&setup), &relay);
    let expires = if scenario.phone == "silent" { 2 } else { 60 };
    let asked = mcp.call(
        "ask_user",
        json!({"question": "Deploy to production?", "kind": "yes_no", "expiresInSeconds": expires}),
    );
    let mut conclusion = mcp_conclusion_of_ask(&asked);
    if conclusion.is_none() {
        let id = asked["structuredContent"]["questionId"]
            .as_str()
            .expect("questionId")
            .to_string();
        if let Some(qid) = play_phone(&setup, scenario).await {
            let cancelled = mcp.call("cancel_question", json!({"questionId": qid}));
            assert_eq!(mcp_conclusion(&cancelled), "cancelled", "{cancelled}");
        }
        loop {
            let result = mcp.call("wait_for_answer", json!({"questionId": id, "timeoutSeconds": 10}));
            let word = mcp_conclusion(&result);
            if word != "pending" {
                assert_eq!(
                    result["structuredContent"]["approved"] == json!(true),
                    word == "approved",
                    "{result}"
                );
                conclusion = Some(word);
                break;
            }
        }
    }
    assert_eq!(
        conclusion.as_deref(),
        Some(scenario.conclusion.as_str()),
        "mcp, scenario {}",
        scenario.name
    );
    if scenario.phone == "none" {
        assert!(nothing_asked(&setup).await, "mcp, scenario {}", scenario.name);
    }
}

/// `ask_user` concludes only when it fails (the question may not have been asked).
fn mcp_conclusion_of_ask(result: &Value) -> Option<String> {
    (result["isError"] == json!(true)).then(|| mcp_conclusion(result))
}

#[tokio::test]
async fn the_mcp_tools_conclude_as_the_table_says() {
    let binary = tokio::task::spawn_blocking(mcp_binary).await.expect("join");
    let scenarios = table("mcp");
    assert!(scenarios.len() >= 6);
    for scenario in &scenarios {
        through_the_mcp_tools(&binary, scenario).await;
    }
}
