//! One terminal "phone" paired with several agents, with real processes: two agents (each in its own home)
//! on one relay, the phone joins both links; `device list` shows both; each agent's question shows in the
//! phone's inbox labelled with its agent and is answered with or without `--agent`; `device leave --agent`
//! leaves one agent only; a command that needs one agent refuses to guess.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use common::{pacerelle, run, run_with_stdin, serve, stderr, stdout};
use serde_json::Value;

struct Relay {
    url: String,
}

impl Relay {
    fn at(&self, home: &Path) -> Command {
        pacerelle(home, &self.url)
    }

    fn ok(&self, home: &Path, args: &[&str]) -> Output {
        let out = run({
            let mut c = self.at(home);
            c.args(args);
            c
        });
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        out
    }

    fn json(&self, home: &Path, args: &[&str]) -> Value {
        serde_json::from_slice(&self.ok(home, args).stdout).expect("json")
    }

    /// `pacerelle ask QUESTION --json` from an agent home, in the background.
    fn ask(&self, home: &Path, question: &str) -> Child {
        self.at(home)
            .args(["ask", question, "--expires", "2m", "--json"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("ask")
    }

    /// The phone's open question whose text is `text`, once it shows in the inbox.
    async fn question(&self, phone: &Path, text: &str) -> Value {
        for _ in 0..200 {
            let items = self.json(phone, &["inbox", "--json"]);
            if let Some(q) = items
                .as_array()
                .expect("items")
                .iter()
                .find(|i| i["kind"] == "question" && i["text"] == text)
            {
                return q.clone();
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{text:?} did not reach the phone");
    }
}

/// An agent created by `pacerelle agent create` in a home of its own; its id.
fn agent(relay: &Relay, home: &Path, name: &str) -> String {
    let created = relay.json(home, &["agent", "create", "--name", name, "--json"]);
    created["agentId"].as_str().expect("agentId").to_string()
}

/// The phone joins a link of the agent in `agent_home` with `pacerelle device join -`.
fn join(relay: &Relay, agent_home: &Path, phone: &Path) -> Output {
    let link = relay.json(agent_home, &["pair", "--json"]);
    let out = run_with_stdin(
        {
            let mut c = relay.at(phone);
            c.args(["device", "join", "-", "--name", "terminal phone"]);
            c
        },
        format!("{}\n", link["link"].as_str().expect("link")).as_bytes(),
    );
    assert!(out.status.success(), "device join: {}", stderr(&out));
    out
}

async fn outcome(asking: Child) -> Output {
    tokio::task::spawn_blocking(move || asking.wait_with_output().expect("wait"))
        .await
        .expect("join")
}

#[tokio::test]
async fn one_terminal_answers_the_questions_of_two_agents() {
    let data = tempfile::tempdir().expect("tempdir");
    let (_relay, url) = serve(data.path());
    let relay = Relay { url };
    let laptop = tempfile::tempdir().expect("tempdir");
    let server = tempfile::tempdir().expect("tempdir");
    let phone = tempfile::tempdir().expect("tempdir");
    let laptop_id = agent(&relay, laptop.path(), "Laptop");
    let server_id = agent(&relay, server.path(), "Server");

    // The first pairing keeps the one-agent layout (device.json); the second gets a file of its own.
    join(&relay, laptop.path(), phone.path());
    assert!(phone.path().join("device.json").exists());
    let said = stdout(&join(&relay, server.path(), phone.path()));
    assert!(said.contains("paired with 2 agents"), "{said}");
    let second = phone.path().join("devices").join(format!("{server_id}.json"));
    assert!(second.exists(), "{said}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).expect("metadata").permissions().mode() & 0o777;
        assert_eq!(mode(&second), 0o600);
        assert_eq!(mode(&phone.path().join("devices")), 0o700);
    }

    // Both agents, with the device there and the agent's presence.
    let listed = relay.json(phone.path(), &["device", "list", "--json"]);
    let listed = listed.as_array().expect("list");
    let ids: Vec<&str> = listed
        .iter()
        .map(|p| p["agentId"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, [laptop_id.as_str(), server_id.as_str()], "{listed:?}");
    assert_eq!(listed[0]["agentName"], "Laptop");
    assert_eq!(listed[1]["agentName"], "Server");
    for p in listed {
        assert!(p["deviceId"].is_string(), "{p}");
        assert_eq!(p["role"], "owner", "{p}");
        assert!(p["user"].is_null(), "{p}");
        assert_eq!(p["presence"], "offline", "{p}");
        assert_eq!(p["activity"], "offline", "{p}");
    }
    let text = stdout(&relay.ok(phone.path(), &["device", "list"]));
    assert!(text.contains(&format!("Laptop ({laptop_id})")), "{text}");
    assert!(text.contains(&format!("Server ({server_id})")), "{text}");

    // A question from each agent: both in the phone's inbox, each labelled with its agent.
    let from_laptop = relay.ask(laptop.path(), "Deploy the laptop build?");
    let from_server = relay.ask(server.path(), "Restart the server?");
    let q_laptop = relay.question(phone.path(), "Deploy the laptop build?").await;
    let q_server = relay.question(phone.path(), "Restart the server?").await;
    assert_eq!(q_laptop["agentId"], laptop_id.as_str(), "{q_laptop}");
    assert_eq!(q_laptop["agentName"], "Laptop", "{q_laptop}");
    assert_eq!(q_server["agentId"], server_id.as_str(), "{q_server}");
    assert_eq!(q_server["agentName"], "Server", "{q_server}");
    let text = stdout(&relay.ok(phone.path(), &["inbox"]));
    let line = |words: &str| {
        text.lines()
            .find(|l| l.contains(words))
            .unwrap_or_default()
            .to_string()
    };
    assert!(line("Deploy the laptop build?").contains("[Laptop]"), "{text}");
    assert!(line("Restart the server?").contains("[Server]"), "{text}");
    // One agent's inbox only, with --agent, by name or id.
    let only = stdout(&relay.ok(phone.path(), &["inbox", "--agent", "server"]));
    assert!(
        only.contains("Restart the server?") && !only.contains("laptop build"),
        "{only}"
    );
    let only = stdout(&relay.ok(phone.path(), &["inbox", "--agent", &laptop_id]));
    assert!(
        only.contains("laptop build") && !only.contains("Restart"),
        "{only}"
    );

    // Answered without --agent (the phone finds whose question it is), and with it.
    let laptop_q = q_laptop["id"].as_str().expect("id");
    let server_q = q_server["id"].as_str().expect("id");
    // The wrong agent named: not its question.
    let out = run({
        let mut c = relay.at(phone.path());
        c.args(["answer", laptop_q, "yes", "--agent", "Server"]);
        c
    });
    assert!(!out.status.success(), "answered through the wrong agent");
    relay.ok(phone.path(), &["answer", laptop_q, "yes"]);
    relay.ok(phone.path(), &["answer", server_q, "yes", "--agent", "Server"]);
    for asking in [from_laptop, from_server] {
        let out = outcome(asking).await;
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let v: Value = serde_json::from_slice(&out.stdout).expect("outcome");
        assert_eq!(v["answerText"], "yes", "{v}");
    }

    // An unknown question id names the paired agents.
    let out = run({
        let mut c = relay.at(phone.path());
        c.args(["answer", "q_nope", "yes"]);
        c
    });
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("Laptop") && stderr(&out).contains("Server"),
        "{}",
        stderr(&out)
    );

    // A task needs one agent: with two pairings and no --agent, a clear refusal naming --agent and both.
    let out = run({
        let mut c = relay.at(phone.path());
        c.args(["send", "build it"]);
        c
    });
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("--agent"), "{err}");
    assert!(err.contains(&format!("Laptop ({laptop_id})")), "{err}");
    assert!(err.contains(&format!("Server ({server_id})")), "{err}");
    let out = run({
        let mut c = relay.at(phone.path());
        c.args(["--json", "send", "build it"]);
        c
    });
    let err: Value = serde_json::from_str(stderr(&out).trim()).expect("json error");
    assert_eq!(err["code"], "invalid_input", "{err}");
    relay.ok(phone.path(), &["send", "build it", "--agent", "Laptop"]);
    // So does leaving.
    let out = run({
        let mut c = relay.at(phone.path());
        c.args(["device", "leave"]);
        c
    });
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("--agent"), "{}", stderr(&out));

    // Leaving the first agent leaves it only: the other still answers a new question.
    relay.ok(phone.path(), &["device", "leave", "--agent", &laptop_id]);
    assert!(!phone.path().join("device.json").exists());
    let listed = relay.json(phone.path(), &["device", "list", "--json"]);
    assert_eq!(listed.as_array().expect("list").len(), 1, "{listed}");
    assert_eq!(listed[0]["agentId"], server_id.as_str());
    let asking = relay.ask(server.path(), "Rotate the logs?");
    let q = relay.question(phone.path(), "Rotate the logs?").await;
    // One pairing again: the inbox is not labelled, as before.
    assert!(q.get("agentId").is_none(), "{q}");
    relay.ok(phone.path(), &["answer", q["id"].as_str().expect("id"), "yes"]);
    let out = outcome(asking).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // With one pairing, send needs no --agent.
    relay.ok(phone.path(), &["send", "rotate them weekly"]);
}

#[tokio::test]
async fn a_link_of_an_agent_already_paired_replaces_that_pairing_only() {
    let data = tempfile::tempdir().expect("tempdir");
    let (_relay, url) = serve(data.path());
    let relay = Relay { url };
    let laptop = tempfile::tempdir().expect("tempdir");
    let server = tempfile::tempdir().expect("tempdir");
    let phone = tempfile::tempdir().expect("tempdir");
    agent(&relay, laptop.path(), "Laptop");
    let server_id = agent(&relay, server.path(), "Server");
    join(&relay, laptop.path(), phone.path());
    join(&relay, server.path(), phone.path());
    let before = relay.json(phone.path(), &["device", "list", "--json"]);

    let said = stdout(&join(&relay, server.path(), phone.path()));
    assert!(said.contains("replaced") && said.contains("which left"), "{said}");
    let after = relay.json(phone.path(), &["device", "list", "--json"]);
    assert_eq!(after.as_array().expect("list").len(), 2, "{after}");
    assert_eq!(
        after[0]["deviceId"], before[0]["deviceId"],
        "the other agent's pairing changed"
    );
    assert_eq!(after[1]["agentId"], server_id.as_str());
    assert_ne!(after[1]["deviceId"], before[1]["deviceId"], "not replaced");
    // The replaced pairing works; the device it replaced left, and the agent lists it revoked.
    let info = relay.json(phone.path(), &["device", "info", "--agent", "Server", "--json"]);
    assert_eq!(info["deviceId"], after[1]["deviceId"]);
    let devices = relay.json(server.path(), &["agent", "devices", "--json"]);
    let old = devices["devices"]
        .as_array()
        .expect("devices")
        .iter()
        .find(|d| d["deviceId"] == before[1]["deviceId"])
        .expect("the replaced device is listed");
    assert!(
        !old["revokedAt"].is_null(),
        "the replaced device is still active: {devices}"
    );
    // device info needs one agent with two pairings.
    let out = run({
        let mut c = relay.at(phone.path());
        c.args(["device", "info"]);
        c
    });
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("--agent"), "{}", stderr(&out));
}
