//! Real `pacerelle` processes: a relay (`pacerelle serve`), an agent home made by `pacerelle agent create`,
//! and a device home paired by `pacerelle device join`.
#![allow(dead_code, clippy::expect_used, clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use pacerelle_client::{
    AgentClient, DeviceClient, QuestionState, agent::AgentCredentials, device::DeviceCredentials,
    device::OpenedQuestion,
};

/// A child process killed when dropped.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The `pacerelle` command with a home, a relay URL and nothing inherited that could change its behaviour.
pub fn pacerelle(home: &Path, relay: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pacerelle"));
    c.env("PACERELLE_HOME", home)
        .env("PACERELLE_RELAY_URL", relay)
        .env("PACERELLE_LOG", "error")
        .env_remove("PACERELLE_AGENT_ID")
        .env_remove("PACERELLE_AGENT_TOKEN")
        .env_remove("PACERELLE_POLICY")
        .env_remove("PACERELLE_WEBHOOK_SECRET");
    c
}

/// Runs a command to its end and returns its output.
pub fn run(mut c: Command) -> Output {
    c.stdin(Stdio::null()).output().expect("run pacerelle")
}

/// Runs a command with `input` on its standard input.
pub fn run_with_stdin(mut c: Command, input: &[u8]) -> Output {
    let mut child = c
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    {
        let mut stdin = child.stdin.take().expect("stdin");
        // The gate may decide before reading everything; a closed pipe is fine.
        let _ = stdin.write_all(input);
    }
    child.wait_with_output().expect("wait")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).to_string()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

/// `pacerelle serve` on 127.0.0.1:0 with its database in `data`.
pub fn serve(data: &Path) -> (Proc, String) {
    serve_with(data, &[])
}

/// [`serve`] with more options.
pub fn serve_with(data: &Path, extra: &[&str]) -> (Proc, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pacerelle"))
        .args(["serve", "--json", "--listen", "127.0.0.1:0", "--data"])
        .arg(data)
        .args(extra)
        .env("PACERELLE_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut reader = BufReader::new(child.stdout.take().expect("stdout"));
    let mut text = String::new();
    while !text.trim_end().ends_with('}') {
        assert!(
            reader.read_line(&mut text).expect("read") > 0,
            "serve exited: {text}"
        );
    }
    let v: serde_json::Value = serde_json::from_str(&text).expect("json");
    (Proc(child), v["relayUrl"].as_str().expect("url").to_string())
}

/// A relay, an agent (created with the CLI in `agent_home`) and a device (paired with the CLI in
/// `device_home`, also usable as a [`DeviceClient`]).
pub struct Setup {
    pub relay: Proc,
    pub url: String,
    pub data: tempfile::TempDir,
    pub agent_home: tempfile::TempDir,
    pub device_home: tempfile::TempDir,
    pub device: DeviceClient,
}

impl Setup {
    pub async fn start() -> Setup {
        let data = tempfile::tempdir().expect("tempdir");
        let (relay, url) = serve(data.path());
        let agent_home = tempfile::tempdir().expect("tempdir");
        let device_home = tempfile::tempdir().expect("tempdir");
        let out = run({
            let mut c = pacerelle(agent_home.path(), &url);
            c.args(["agent", "create", "--name", "cli agent", "--json"]);
            c
        });
        assert!(out.status.success(), "agent create: {}", stderr(&out));
        let out = run({
            let mut c = pacerelle(agent_home.path(), &url);
            c.args(["pair", "--json"]);
            c
        });
        assert!(out.status.success(), "pair: {}", stderr(&out));
        let link: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        let out = run({
            let mut c = pacerelle(device_home.path(), &url);
            c.args([
                "device",
                "join",
                link["link"].as_str().expect("link"),
                "--name",
                "Ana's phone",
            ]);
            c
        });
        assert!(out.status.success(), "device join: {}", stderr(&out));
        let creds: DeviceCredentials = serde_json::from_slice(
            &std::fs::read(device_home.path().join("device.json")).expect("device.json"),
        )
        .expect("credentials");
        let device = DeviceClient::from_credentials(creds).expect("device");
        Setup {
            relay,
            url,
            data,
            agent_home,
            device_home,
            device,
        }
    }

    /// `pacerelle` as the agent.
    pub fn agent(&self) -> Command {
        pacerelle(self.agent_home.path(), &self.url)
    }

    /// `pacerelle` as the device.
    pub fn as_device(&self) -> Command {
        pacerelle(self.device_home.path(), &self.url)
    }

    /// Another owner device of the agent, paired by `pacerelle pair` and joined with the client as `name`.
    pub async fn second_device(&self, name: &str) -> DeviceClient {
        let out = run({
            let mut c = self.agent();
            c.args(["pair", "--json"]);
            c
        });
        assert!(out.status.success(), "pair: {}", stderr(&out));
        let link: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        DeviceClient::join(link["link"].as_str().expect("link"), name)
            .await
            .expect("join")
    }

    /// The PreToolUse gate (`pacerelle hook claude-code`) on shell `command` in `cwd`, within `budget` seconds.
    pub fn gate(&self, cwd: &Path, command: &str, budget: &str) -> Output {
        let mut c = self.agent();
        c.args(["hook", "claude-code", "--budget", budget]);
        run_with_stdin(c, &bash_call(cwd, command))
    }
}

/// `c` started with no standard input and its output captured.
pub fn spawn(mut c: Command) -> Child {
    c.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn")
}

/// `child`'s exit and output, waited for off the async runtime.
pub async fn finish(child: Child) -> Output {
    tokio::task::spawn_blocking(move || child.wait_with_output().expect("wait"))
        .await
        .expect("join")
}

/// A project folder with `.pacerelle/policy.toml` holding `policy`.
pub fn project(policy: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join(".pacerelle")).expect("mkdir");
    std::fs::write(dir.path().join(".pacerelle/policy.toml"), policy).expect("policy");
    dir
}

/// Claude Code's PreToolUse input for a shell command in `cwd`.
pub fn bash_call(cwd: &Path, command: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "session_id": "8f2d7c1e-1b2a-4c3d-9e8f-0a1b2c3d4e5f",
        "cwd": cwd.display().to_string(),
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": command},
    }))
    .expect("json")
}

/// The gate's decision: (allowed, reason).
pub fn decision(out: &Output) -> (bool, String) {
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("decision JSON");
    let h = &v["hookSpecificOutput"];
    let reason = h["permissionDecisionReason"]
        .as_str()
        .expect("reason")
        .to_string();
    (h["permissionDecision"] == "allow", reason)
}

/// `pacerelle audit verify FILE` as an auditor runs it: an empty home, a relay address where nothing
/// listens, no agent credentials.
pub fn audit_verify(file: &Path, json: bool) -> Output {
    let home = tempfile::tempdir().expect("tempdir");
    let mut c = pacerelle(home.path(), "http://127.0.0.1:9");
    c.args(["audit", "verify"]).arg(file);
    if json {
        c.arg("--json");
    }
    run(c)
}

/// The newest pending question the device sees, once there is one other than those in `seen`.
pub async fn next_question(device: &DeviceClient, seen: &[String]) -> OpenedQuestion {
    for _ in 0..400 {
        let list = device
            .questions(Some(QuestionState::Pending))
            .await
            .expect("questions");
        if let Some(q) = list
            .questions
            .into_iter()
            .rev()
            .find(|q| !seen.contains(&q.question_id))
        {
            return q;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("no question reached the device");
}

/// The agent whose home is `home` (made by `pacerelle agent create`), on the relay at `url`.
pub fn agent_on(home: &Path, url: &str) -> AgentClient {
    let found = AgentCredentials::find(|_| None, Some(home)).expect("agent.json");
    AgentClient::new(url, &found.agent_id, found.token)
        .expect("a client")
        .with_home(Some(home))
}

/// The device whose home is `home` (paired by `pacerelle device join`), on the relay at `url`.
pub fn device_on(home: &Path, url: &str) -> DeviceClient {
    let mut creds: DeviceCredentials =
        serde_json::from_slice(&std::fs::read(home.join("device.json")).expect("device.json"))
            .expect("credentials");
    creds.relay_url = url.to_string();
    DeviceClient::from_credentials(creds).expect("a device")
}

/// The homes of an agent created with `pacerelle agent create` and of a device paired with `pacerelle device
/// join`, both through `url`.
pub struct Homes {
    pub agent_home: tempfile::TempDir,
    pub device_home: tempfile::TempDir,
}

pub fn agent_and_device(url: &str) -> Homes {
    let agent_home = tempfile::tempdir().expect("tempdir");
    let device_home = tempfile::tempdir().expect("tempdir");
    let out = run({
        let mut c = pacerelle(agent_home.path(), url);
        c.args(["agent", "create", "--name", "agent", "--json"]);
        c
    });
    assert!(out.status.success(), "agent create: {}", stderr(&out));
    let out = run({
        let mut c = pacerelle(agent_home.path(), url);
        c.args(["pair", "--json"]);
        c
    });
    assert!(out.status.success(), "pair: {}", stderr(&out));
    let link: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let out = run({
        let mut c = pacerelle(device_home.path(), url);
        c.args([
            "device",
            "join",
            link["link"].as_str().expect("link"),
            "--name",
            "phone",
        ]);
        c
    });
    assert!(out.status.success(), "device join: {}", stderr(&out));
    Homes {
        agent_home,
        device_home,
    }
}
