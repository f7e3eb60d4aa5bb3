//! Real processes end to end: `pacerelle serve`, the echo agent, and `pacerelle` acting as the phone.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A child process killed when dropped, so a failing test leaves nothing running.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The `pacerelle` binary, built beside this test's echo agent.
fn pacerelle_bin() -> PathBuf {
    let echo = PathBuf::from(env!("CARGO_BIN_EXE_echo-agent"));
    let bin = echo.with_file_name(format!("pacerelle{}", std::env::consts::EXE_SUFFIX));
    if !bin.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "-p", "pacerelle-cli", "--bin", "pacerelle"])
            .status();
        assert!(
            status.expect("cargo build").success(),
            "building pacerelle failed"
        );
    }
    bin
}

/// Starts `pacerelle serve` on `listen` with its database in `data`; returns it and its URL.
fn serve(data: &Path, listen: &str) -> (Proc, String) {
    let mut child = Command::new(pacerelle_bin())
        .args(["serve", "--json", "--listen", listen, "--data"])
        .arg(data)
        .env("PACERELLE_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn serve");
    let stdout = child.stdout.take().expect("stdout");
    let mut text = String::new();
    let mut reader = BufReader::new(stdout);
    // `--json` prints one pretty JSON object; read until it closes.
    while !text.trim_end().ends_with('}') {
        let n = reader.read_line(&mut text).expect("read serve output");
        assert!(n > 0, "serve exited early: {text}");
    }
    let v: Value = serde_json::from_str(&text).expect("serve prints JSON");
    (Proc(child), v["relayUrl"].as_str().expect("relayUrl").to_string())
}

/// Runs `pacerelle ARGS --json` with a home folder and returns its JSON output.
fn cli(home: &Path, relay: &str, args: &[&str]) -> Value {
    let out = Command::new(pacerelle_bin())
        .args(args)
        .arg("--json")
        .env("PACERELLE_HOME", home)
        .env("PACERELLE_RELAY_URL", relay)
        .env_remove("PACERELLE_AGENT_ID")
        .env_remove("PACERELLE_AGENT_TOKEN")
        .output()
        .expect("run pacerelle");
    assert!(
        out.status.success(),
        "pacerelle {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON output")
}

/// The echo agent of `agent`, with the agent's home (its roster mark) in `home`.
fn echo_agent(home: &Path, relay: &str, agent: &Value) -> Proc {
    Proc(
        Command::new(env!("CARGO_BIN_EXE_echo-agent"))
            .arg("--takeover")
            .env("PACERELLE_HOME", home)
            .env("PACERELLE_RELAY_URL", relay)
            .env("PACERELLE_AGENT_ID", agent["agentId"].as_str().expect("agentId"))
            .env("PACERELLE_AGENT_TOKEN", agent["token"].as_str().expect("token"))
            .env("PACERELLE_LOG", "warn")
            .spawn()
            .expect("spawn echo agent"),
    )
}

/// Reads the device's conversation until the reply to `message_id` is there and the task is processed.
fn wait_for_echo(device_home: &Path, relay: &str, message_id: &str, deadline: Duration) -> Vec<Value> {
    let start = Instant::now();
    loop {
        let items = cli(device_home, relay, &["inbox"]);
        let items = items.as_array().expect("array").clone();
        let processed = items
            .iter()
            .any(|i| i["id"] == message_id && i["state"] == "processed");
        let replied = items
            .iter()
            .any(|i| i["kind"] == "reply" && i["sourceMessageId"] == message_id);
        if processed && replied {
            return items;
        }
        assert!(
            start.elapsed() < deadline,
            "no echo for {message_id} after {deadline:?}: {items:#?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn contains(path: &Path, needle: &str) -> bool {
    std::fs::read(path)
        .expect("read")
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[test]
fn a_task_from_the_terminal_device_is_echoed_by_the_agent_across_a_relay_restart() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let agent_home = tmp.path().join("agent");
    let device_home = tmp.path().join("device");
    let (relay, url) = serve(&data, "127.0.0.1:0");

    let agent = cli(&agent_home, &url, &["agent", "create", "--name", "echo"]);
    let pairing = cli(&agent_home, &url, &["pair", "--name", "phone"]);
    let joined = cli(
        &device_home,
        &url,
        &["device", "join", pairing["link"].as_str().expect("link")],
    );
    assert_eq!(joined["agentId"], agent["agentId"]);
    let _echo = echo_agent(&agent_home, &url, &agent);

    let canary = "canary-e2e-4be19d";
    let sent = cli(&device_home, &url, &["send", &format!("hello {canary}")]);
    let id = sent["messageId"].as_str().expect("messageId").to_string();
    let items = wait_for_echo(&device_home, &url, &id, Duration::from_secs(30));
    let reply = items.iter().find(|i| i["kind"] == "reply").expect("reply");
    assert_eq!(reply["text"], format!("echo: hello {canary}"));
    assert_eq!(reply["sourceMessageId"], id.as_str());

    // Neither the database nor its write-ahead log holds the text.
    let files: Vec<_> = std::fs::read_dir(&data)
        .expect("data")
        .map(|e| e.expect("entry").path())
        .collect();
    assert!(files.iter().any(|f| f.ends_with("pacerelle.db")));
    for f in &files {
        assert!(!contains(f, canary), "plaintext found in {}", f.display());
    }

    // The relay dies (SIGKILL) and comes back on the same address; the agent keeps going.
    drop(relay);
    let listen = url.trim_start_matches("http://").to_string();
    let (_relay, url2) = serve(&data, &listen);
    assert_eq!(url2, url);
    let sent = cli(&device_home, &url, &["send", "after restart"]);
    let id = sent["messageId"].as_str().expect("messageId").to_string();
    let items = wait_for_echo(&device_home, &url, &id, Duration::from_secs(60));
    assert!(
        items
            .iter()
            .any(|i| i["kind"] == "reply" && i["text"] == "echo: after restart")
    );

    let status = cli(&agent_home, &url, &["status"]);
    assert_eq!(status["messages"]["processed"], 2);
    assert_eq!(status["devices"], 1);
}

#[test]
fn a_task_whose_echo_is_too_large_gets_an_error_reply_and_the_agent_goes_on() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let agent_home = tmp.path().join("agent");
    let device_home = tmp.path().join("device");
    let (_relay, url) = serve(&tmp.path().join("data"), "127.0.0.1:0");
    let agent = cli(&agent_home, &url, &["agent", "create", "--name", "echo"]);
    let pairing = cli(&agent_home, &url, &["pair", "--name", "phone"]);
    cli(
        &device_home,
        &url,
        &["device", "join", pairing["link"].as_str().expect("link")],
    );
    let mut echo = echo_agent(&agent_home, &url, &agent);

    // 64 KiB is the most a task may hold; `echo: ` in front of it is more than a reply may hold.
    let big = "x".repeat(pacerelle_core::message::MAX_TEXT_BYTES);
    let sent = cli(&device_home, &url, &["send", &big]);
    let id = sent["messageId"].as_str().expect("messageId").to_string();
    let items = wait_for_echo(&device_home, &url, &id, Duration::from_secs(30));
    let reply = items
        .iter()
        .find(|i| i["kind"] == "reply" && i["sourceMessageId"] == id.as_str())
        .expect("reply");
    let text = reply["text"].as_str().expect("text");
    assert!(text.contains("set aside") && text.contains("64 KiB"), "{text}");
    assert!(
        echo.0.try_wait().expect("try_wait").is_none(),
        "the echo agent exited"
    );

    let sent = cli(&device_home, &url, &["send", "after the big one"]);
    let id = sent["messageId"].as_str().expect("messageId").to_string();
    let items = wait_for_echo(&device_home, &url, &id, Duration::from_secs(30));
    assert!(
        items
            .iter()
            .any(|i| i["kind"] == "reply" && i["text"] == "echo: after the big one")
    );
    let status = cli(&agent_home, &url, &["status"]);
    assert_eq!(status["messages"]["processed"], 2);
}
