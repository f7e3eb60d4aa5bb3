//! The PreToolUse gate with real processes, fed the documented input of Claude Code and of Codex: allow and
//! deny rules, ask + yes, ask + no, ask + no answer, relay down, malformed input, a bad policy file. It
//! prints the host's decision JSON and exits 0 every time, and never allows but by rule or an authenticated
//! yes.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::path::Path;
use std::process::{Command, Output};

use common::{Setup, next_question, run, run_with_stdin, stderr};
use pacerelle_client::Answer;
use serde_json::{Value, json};

const POLICY: &str = r#"
default = "ask"

[[rule]]
tool = ["Read", "Grep"]
decision = "allow"

[[rule]]
tool = "Bash"
command = ["git status*", "ls*"]
decision = "allow"

[[rule]]
tool = "Bash"
command = "rm -rf *"
decision = "deny"
reason = "never delete recursively"
"#;

const HOSTS: [&str; 2] = ["claude-code", "codex"];

/// The PreToolUse input each host documents, for a tool call in `cwd`.
fn input(host: &str, cwd: &Path, tool: &str, tool_input: Value) -> Vec<u8> {
    let cwd = cwd.display().to_string();
    let value = match host {
        "claude-code" => json!({
            "session_id": "8f2d7c1e-1b2a-4c3d-9e8f-0a1b2c3d4e5f",
            "transcript_path": "/home/ana/.claude/projects/repo/8f2d7c1e.jsonl",
            "cwd": cwd,
            "permission_mode": "default",
            "hook_event_name": "PreToolUse",
            "tool_name": tool,
            "tool_input": tool_input,
            "tool_use_id": "toolu_01ABCDEF",
        }),
        _ => json!({
            "session_id": "0199a213-81c0-7800-8aa1-bbab2a035a53",
            "transcript_path": null,
            "cwd": cwd,
            "hook_event_name": "PreToolUse",
            "model": "gpt-5-codex",
            "permission_mode": "default",
            "tool_name": tool,
            "tool_input": tool_input,
            "tool_use_id": "call_abc123",
            "turn_id": "turn_1",
        }),
    };
    serde_json::to_vec(&value).expect("json")
}

/// Checks the output is exactly the host's decision JSON, exit 0; returns (allowed, reason).
fn decision(out: &Output) -> (bool, String) {
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(out));
    let text = String::from_utf8(out.stdout.clone()).expect("utf-8");
    assert_eq!(text.lines().count(), 1, "one JSON line: {text}");
    let v: Value = serde_json::from_str(&text).expect("decision JSON");
    let root = v.as_object().expect("object");
    assert_eq!(root.keys().collect::<Vec<_>>(), vec!["hookSpecificOutput"]);
    let h = v["hookSpecificOutput"].as_object().expect("hookSpecificOutput");
    assert_eq!(h.len(), 3, "{v}");
    assert_eq!(h["hookEventName"], "PreToolUse");
    let reason = h["permissionDecisionReason"]
        .as_str()
        .expect("reason")
        .to_string();
    assert!(!reason.is_empty());
    match h["permissionDecision"].as_str().expect("decision") {
        "allow" => (true, reason),
        "deny" => (false, reason),
        other => panic!("unexpected decision {other}"),
    }
}

fn gate(setup: &Setup, host: &str, extra: &[&str]) -> Command {
    let mut c = setup.agent();
    c.args(["hook", host]).args(extra);
    c
}

/// A project folder with `.pacerelle/policy.toml`.
fn project(policy: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join(".pacerelle")).expect("mkdir");
    std::fs::write(dir.path().join(".pacerelle/policy.toml"), policy).expect("policy");
    dir
}

async fn gate_in_background(
    setup: &Setup,
    host: &str,
    extra: &[&str],
    stdin: Vec<u8>,
) -> tokio::task::JoinHandle<Output> {
    let c = gate(setup, host, extra);
    tokio::task::spawn_blocking(move || run_with_stdin(c, &stdin))
}

#[tokio::test]
async fn rules_decide_at_once_for_both_hosts() {
    let setup = Setup::start().await;
    let dir = project(POLICY);
    for host in HOSTS {
        let out = run_with_stdin(
            gate(&setup, host, &[]),
            &input(host, dir.path(), "Bash", json!({"command": "git status --short"})),
        );
        let (allowed, reason) = decision(&out);
        assert!(allowed, "{host}: {reason}");

        let out = run_with_stdin(
            gate(&setup, host, &[]),
            &input(host, dir.path(), "Bash", json!({"command": "rm -rf /"})),
        );
        let (allowed, reason) = decision(&out);
        assert!(!allowed);
        assert!(reason.contains("never delete recursively"), "{reason}");

        // A rule decides even when the relay is down: no question is needed.
        let mut c = common::pacerelle(setup.agent_home.path(), "http://127.0.0.1:9");
        c.args(["hook", host]);
        let out = run_with_stdin(c, &input(host, dir.path(), "Read", json!({"file_path": "/x"})));
        assert!(decision(&out).0);
    }
    // An allow rule never covers the gate's own files.
    let out = run_with_stdin(
        gate(&setup, "claude-code", &["--budget", "2"]),
        &input(
            "claude-code",
            dir.path(),
            "Bash",
            json!({"command": "ls .pacerelle && echo 'default = \"allow\"' > .pacerelle/policy.toml"}),
        ),
    );
    assert!(!decision(&out).0, "asked, and nobody answered");
}

#[tokio::test]
async fn ask_then_yes_allows_and_no_denies_for_both_hosts() {
    let setup = Setup::start().await;
    let dir = project(POLICY);
    for host in HOSTS {
        let running = gate_in_background(
            &setup,
            host,
            &[],
            input(
                host,
                dir.path(),
                "Bash",
                json!({"command": "git push origin main", "description": "Push"}),
            ),
        )
        .await;
        let q = next_question(&setup.device, &[]).await;
        assert!(q.question.contains("git push origin main"), "{}", q.question);
        let details = q.details.clone().expect("details");
        assert!(details.contains("\"description\": \"Push\""), "{details}");
        setup
            .device
            .answer(&q.question_id, Answer::Yes)
            .await
            .expect("yes");
        let (allowed, reason) = decision(&running.await.expect("join"));
        assert!(allowed, "{host}: {reason}");
        assert!(reason.contains("Ana's phone"), "{reason}");

        let running = gate_in_background(
            &setup,
            host,
            &[],
            input(
                host,
                dir.path(),
                "Write",
                json!({"file_path": "/repo/main.rs", "content": "fn main() {}"}),
            ),
        )
        .await;
        let q = next_question(&setup.device, &[]).await;
        assert!(q.question.contains("/repo/main.rs"), "{}", q.question);
        setup.device.answer(&q.question_id, Answer::No).await.expect("no");
        let (allowed, reason) = decision(&running.await.expect("join"));
        assert!(!allowed);
        assert!(reason.contains("answered no"), "{reason}");
    }
}

#[tokio::test]
async fn no_answer_within_the_budget_denies_for_both_hosts() {
    let setup = Setup::start().await;
    let dir = project(POLICY);
    for host in HOSTS {
        let out = run_with_stdin(
            gate(&setup, host, &["--budget", "3"]),
            &input(host, dir.path(), "Bash", json!({"command": "make deploy"})),
        );
        let (allowed, reason) = decision(&out);
        assert!(!allowed);
        assert!(reason.contains("no answer"), "{reason}");
    }
    // The log records them as expired, not as a human no.
    let out = run({
        let mut c = setup.agent();
        c.args(["audit", "export"]);
        c
    });
    let states: Vec<String> = common::stdout(&out)
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).expect("json")["state"]
                .as_str()
                .expect("state")
                .to_string()
        })
        .collect();
    assert_eq!(states, vec!["expired", "expired"]);
}

#[tokio::test]
async fn relay_down_malformed_input_and_bad_policies_deny_for_both_hosts() {
    let setup = Setup::start().await;
    let dir = project(POLICY);
    let bad = project("default = \"perhaps\"");
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let explicit = elsewhere.path().join("strict.toml");
    std::fs::write(&explicit, "default = \"deny\"").expect("write");
    for host in HOSTS {
        // Relay down: the call needs a question, which cannot be asked.
        let mut c = common::pacerelle(setup.agent_home.path(), "http://127.0.0.1:9");
        c.args(["hook", host, "--budget", "20"]);
        let out = run_with_stdin(
            c,
            &input(host, dir.path(), "Bash", json!({"command": "make deploy"})),
        );
        let (allowed, reason) = decision(&out);
        assert!(!allowed);
        assert!(reason.contains("unreachable"), "{reason}");

        // Malformed input, in many shapes.
        for stdin in [
            &b""[..],
            b"not json",
            b"[]",
            b"{\"tool_input\": {}}",
            b"{\"tool_name\": 7}",
            b"{\"hook_event_name\": \"PreToolUse\", \"tool_name\": \"Bash\", \"tool_input\": {\"command\": \"ls\"",
        ] {
            let out = run_with_stdin(gate(&setup, host, &[]), stdin);
            let (allowed, reason) = decision(&out);
            assert!(!allowed, "{stdin:?}");
            assert!(reason.contains("Pacerelle"), "{reason}");
        }

        // A bad policy file denies even calls it would have allowed.
        let out = run_with_stdin(
            gate(&setup, host, &[]),
            &input(host, bad.path(), "Read", json!({"file_path": "/x"})),
        );
        let (allowed, reason) = decision(&out);
        assert!(!allowed);
        assert!(reason.contains("not a valid policy"), "{reason}");

        // --policy, then PACERELLE_POLICY, win over the project's file; a missing one denies.
        let out = run_with_stdin(
            gate(&setup, host, &["--policy", explicit.to_str().expect("utf-8")]),
            &input(host, dir.path(), "Read", json!({"file_path": "/x"})),
        );
        assert!(!decision(&out).0);
        let mut c = gate(&setup, host, &[]);
        c.env("PACERELLE_POLICY", &explicit);
        let out = run_with_stdin(c, &input(host, dir.path(), "Read", json!({"file_path": "/x"})));
        assert!(!decision(&out).0);
        let mut c = gate(&setup, host, &[]);
        c.env("PACERELLE_POLICY", elsewhere.path().join("missing.toml"));
        let out = run_with_stdin(c, &input(host, dir.path(), "Read", json!({"file_path": "/x"})));
        let (allowed, reason) = decision(&out);
        assert!(!allowed);
        assert!(reason.contains("cannot read the policy file"), "{reason}");

        // Bad arguments still give a decision.
        let out = run_with_stdin(
            gate(&setup, host, &["--budget", "soon"]),
            &input(host, dir.path(), "Read", json!({"file_path": "/x"})),
        );
        assert!(!decision(&out).0);
    }
}

#[tokio::test]
async fn without_a_policy_file_every_call_is_asked() {
    let setup = Setup::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let running = gate_in_background(
        &setup,
        "codex",
        &[],
        input("codex", dir.path(), "Read", json!({"file_path": "/etc/hosts"})),
    )
    .await;
    let q = next_question(&setup.device, &[]).await;
    assert!(
        q.question.starts_with("Allow Codex to use Read on /etc/hosts"),
        "{}",
        q.question
    );
    setup
        .device
        .answer(&q.question_id, Answer::Yes)
        .await
        .expect("yes");
    assert!(decision(&running.await.expect("join")).0);
}

#[test]
fn install_prints_or_merges_the_settings_entry() {
    let home = tempfile::tempdir().expect("tempdir");
    let dir = tempfile::tempdir().expect("tempdir");
    let out = run({
        let mut c = common::pacerelle(home.path(), "http://127.0.0.1:9");
        c.args(["hook", "install", "claude-code"]);
        c
    });
    assert!(out.status.success(), "{}", stderr(&out));
    let printed: Value = serde_json::from_slice(&out.stdout).expect("json");
    let hook = &printed["hooks"]["PreToolUse"][0];
    assert_eq!(hook["matcher"], "*");
    assert_eq!(hook["hooks"][0]["type"], "command");
    assert_eq!(hook["hooks"][0]["command"], "pacerelle hook claude-code");
    assert_eq!(hook["hooks"][0]["timeout"], 600);

    let settings = dir.path().join(".claude/settings.json");
    std::fs::create_dir_all(settings.parent().expect("parent")).expect("mkdir");
    std::fs::write(
        &settings,
        r#"{"permissions": {"allow": ["Bash(ls:*)"]}, "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "mine"}]}]}}"#,
    )
    .expect("write");
    for _ in 0..2 {
        let out = run({
            let mut c = common::pacerelle(home.path(), "http://127.0.0.1:9");
            c.args([
                "hook",
                "install",
                "claude-code",
                "--write",
                "--budget",
                "300",
                "--dir",
            ])
            .arg(dir.path());
            c
        });
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let merged: Value = serde_json::from_slice(&std::fs::read(&settings).expect("read")).expect("json");
    assert_eq!(merged["permissions"]["allow"][0], "Bash(ls:*)");
    let groups = merged["hooks"]["PreToolUse"].as_array().expect("list");
    assert_eq!(groups.len(), 2, "installed once: {merged}");
    assert_eq!(groups[0]["hooks"][0]["command"], "mine");
    assert_eq!(
        groups[1]["hooks"][0]["command"],
        "pacerelle hook claude-code --budget 300"
    );

    let out = run({
        let mut c = common::pacerelle(home.path(), "http://127.0.0.1:9");
        c.args(["hook", "install", "codex", "--write", "--dir"])
            .arg(dir.path());
        c
    });
    assert!(out.status.success(), "{}", stderr(&out));
    let codex: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join(".codex/hooks.json")).expect("read"))
            .expect("json");
    assert_eq!(
        codex["hooks"]["PreToolUse"][0]["hooks"][0]["command"],
        "pacerelle hook codex"
    );
    assert_eq!(codex["hooks"]["PreToolUse"][0]["hooks"][0]["timeout"], 600);

    // A settings file that is not JSON is left alone.
    std::fs::write(&settings, "{ not json").expect("write");
    let out = run({
        let mut c = common::pacerelle(home.path(), "http://127.0.0.1:9");
        c.args(["hook", "install", "claude-code", "--write", "--dir"])
            .arg(dir.path());
        c
    });
    assert!(!out.status.success());
    assert_eq!(std::fs::read_to_string(&settings).expect("read"), "{ not json");
}

#[test]
fn a_host_that_never_closes_stdin_still_gets_a_deny_within_the_budget() {
    use std::io::Write;
    use std::process::Stdio;

    let home = tempfile::tempdir().expect("tempdir");
    let mut c = common::pacerelle(home.path(), "http://127.0.0.1:9");
    c.args(["hook", "claude-code", "--budget", "2"]);
    let mut child = c
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // Half an input, and the pipe stays open.
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(b"{\"tool_name\": \"Bash\", ").expect("write");
    stdin.flush().expect("flush");
    let out = child.wait_with_output().expect("wait");
    drop(stdin);
    let (allowed, reason) = decision(&out);
    assert!(!allowed);
    assert!(reason.contains("budget"), "{reason}");
}
