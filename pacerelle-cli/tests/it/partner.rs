//! Partner mode with real processes: the agent connects two users, each pairs a terminal by their link, and a
//! question for one user reaches that user's device only, is answered there, and is logged under that user;
//! a disconnected user's device is refused; an unknown user is refused before anything is asked.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::{pacerelle, run, run_with_stdin, serve, stderr, stdout};
use serde_json::Value;

struct Homes {
    url: String,
    agent: tempfile::TempDir,
}

impl Homes {
    fn agent(&self) -> Command {
        pacerelle(self.agent.path(), &self.url)
    }

    fn at(&self, home: &std::path::Path) -> Command {
        pacerelle(home, &self.url)
    }
}

fn json(out: &Output) -> Value {
    assert!(out.status.success(), "{}", stderr(out));
    serde_json::from_slice(&out.stdout).expect("json")
}

/// `pacerelle user connect ID --name NAME … --json`, its link.
fn connect(homes: &Homes, args: &[&str]) -> Value {
    let out = run({
        let mut c = homes.agent();
        c.args(["user", "connect"]).args(args).arg("--json");
        c
    });
    json(&out)
}

/// A device home that joined `link` with `pacerelle device join -`, and what `join` printed.
fn join(homes: &Homes, link: &str, name: &str) -> (tempfile::TempDir, String) {
    let home = tempfile::tempdir().expect("tempdir");
    let out = run_with_stdin(
        {
            let mut c = homes.at(home.path());
            c.args(["device", "join", "-", "--name", name]);
            c
        },
        format!("{link}\n").as_bytes(),
    );
    assert!(out.status.success(), "device join: {}", stderr(&out));
    (home, stdout(&out))
}

fn inbox(homes: &Homes, home: &std::path::Path) -> Output {
    run({
        let mut c = homes.at(home);
        c.args(["inbox", "--json"]);
        c
    })
}

/// The questions in a device's inbox.
fn questions(homes: &Homes, home: &std::path::Path) -> Vec<Value> {
    json(&inbox(homes, home))
        .as_array()
        .expect("items")
        .iter()
        .filter(|i| i["kind"] == "question")
        .cloned()
        .collect()
}

#[tokio::test]
async fn a_question_for_one_user_reaches_and_is_answered_by_that_users_device_only() {
    let data = tempfile::tempdir().expect("tempdir");
    let (_relay, url) = serve(data.path());
    let homes = Homes {
        url,
        agent: tempfile::tempdir().expect("tempdir"),
    };
    let out = run({
        let mut c = homes.agent();
        c.args(["agent", "create", "--name", "Acme Shop", "--json"]);
        c
    });
    assert!(out.status.success(), "agent create: {}", stderr(&out));

    // Branding: an accent colour and an icon file, checked here; an icon too large is refused before
    // anything is sent.
    let icon = homes.agent.path().join("icon.svg");
    std::fs::write(
        &icon,
        "<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 1 1'><rect width='1' height='1'/></svg>",
    )
    .expect("icon");
    let big = homes.agent.path().join("big.png");
    std::fs::write(&big, vec![0x89u8; 20 * 1024]).expect("big icon");
    let out = run({
        let mut c = homes.agent();
        c.args(["user", "connect", "alice", "--name", "Alice", "--icon"])
            .arg(&big);
        c
    });
    assert!(!out.status.success());
    assert!(stderr(&out).contains("at most 16 KiB"), "{}", stderr(&out));

    let alice_link = connect(
        &homes,
        &[
            "alice",
            "--name",
            "Alice",
            "--accent",
            "#0a7d5a",
            "--icon",
            icon.to_str().expect("utf-8"),
        ],
    );
    assert_eq!(alice_link["externalId"], "alice");
    assert_eq!(alice_link["name"], "Alice");
    for key in ["link", "pairingId", "deviceId", "expiresAt"] {
        assert!(alice_link[key].is_string(), "{key}: {alice_link}");
    }
    let bob_link = connect(&homes, &["bob", "--name", "Bob"]);

    let (alice, said) = join(
        &homes,
        alice_link["link"].as_str().expect("link"),
        "Alice's phone",
    );
    assert!(said.contains("answers for Alice (alice) on Acme Shop"), "{said}");
    let (bob, said) = join(&homes, bob_link["link"].as_str().expect("link"), "Bob's phone");
    assert!(said.contains("answers for Bob (bob) on Acme Shop"), "{said}");

    // The person at the computer does not answer for a user: --here is refused with --user (a usage error,
    // exit 3 as for every `ask` error).
    let out = run({
        let mut c = homes.agent();
        c.args(["ask", "--user", "alice", "--here", "Refund order 41?"]);
        c
    });
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("--here"), "{}", stderr(&out));

    // The question for alice, asked in the background.
    let asking = homes
        .agent()
        .args([
            "ask",
            "--user",
            "alice",
            "Refund order 42?",
            "--expires",
            "2m",
            "--json",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ask");
    let mut asked = None;
    for _ in 0..200 {
        if let Some(q) = questions(&homes, alice.path()).into_iter().next() {
            asked = Some(q);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let asked = asked.expect("the question reached alice's device");
    assert_eq!(asked["text"], "Refund order 42?", "{asked}");
    let question_id = asked["id"].as_str().expect("id").to_string();

    // Sealed for alice's devices only: bob's inbox, read after alice's has it, does not hold it.
    let bobs = inbox(&homes, bob.path());
    assert!(bobs.status.success(), "{}", stderr(&bobs));
    assert!(!stdout(&bobs).contains("Refund"), "{}", stdout(&bobs));
    assert!(questions(&homes, bob.path()).is_empty());
    // Nor can bob answer it.
    let out = run({
        let mut c = homes.at(bob.path());
        c.args(["answer", &question_id, "yes"]);
        c
    });
    assert!(!out.status.success(), "bob answered alice's question");

    let out = run({
        let mut c = homes.at(alice.path());
        c.args(["answer", &question_id, "yes"]);
        c
    });
    assert!(out.status.success(), "alice's answer: {}", stderr(&out));
    let out = tokio::task::spawn_blocking(move || asking.wait_with_output().expect("wait"))
        .await
        .expect("join");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let outcome: Value = serde_json::from_slice(&out.stdout).expect("outcome");
    assert_eq!(outcome["approved"], true, "{outcome}");
    assert_eq!(outcome["answerText"], "yes", "{outcome}");
    assert_eq!(outcome["answeredByName"], "Alice's phone", "{outcome}");
    assert_eq!(outcome["answeredBy"], alice_link["deviceId"], "{outcome}");
    assert_eq!(outcome["user"], "alice", "{outcome}");

    // A notification for bob reaches bob only.
    let out = run({
        let mut c = homes.agent();
        c.args(["notify", "--user", "bob", "Your parcel left the warehouse"]);
        c
    });
    assert!(out.status.success(), "notify: {}", stderr(&out));
    assert!(stdout(&inbox(&homes, bob.path())).contains("parcel"));
    assert!(!stdout(&inbox(&homes, alice.path())).contains("parcel"));

    // Both users, with their devices and alice's last answer.
    let users = json(&run({
        let mut c = homes.agent();
        c.args(["user", "list", "--json"]);
        c
    }));
    let users = users.as_array().expect("users");
    let ids: Vec<&str> = users
        .iter()
        .map(|u| u["externalId"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, ["alice", "bob"]);
    let alice_info = &users[0];
    assert_eq!(alice_info["name"], "Alice");
    assert!(alice_info["disconnectedAt"].is_null());
    assert_eq!(alice_info["devices"][0]["paired"], true);
    assert_eq!(alice_info["devices"][0]["name"], "Alice's phone");
    assert_eq!(alice_info["lastAnswer"]["questionId"], question_id.as_str());
    assert_eq!(alice_info["lastAnswer"]["user"], "alice");
    assert!(users[1]["lastAnswer"].is_null());
    let out = run({
        let mut c = homes.agent();
        c.args(["user", "list"]);
        c
    });
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.lines().any(|l| l
            .starts_with("alice  Alice  connected  devices: 1 paired, 0 waiting, 0 revoked  last answer")),
        "{text}"
    );

    let out = run({
        let mut c = homes.agent();
        c.args(["user", "show", "alice"]);
        c
    });
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("Alice's phone  paired"), "{}", stdout(&out));

    // The answer log filters by user and names the user.
    let log = run({
        let mut c = homes.agent();
        c.args(["audit", "export", "--user", "bob"]);
        c
    });
    assert!(log.status.success(), "{}", stderr(&log));
    assert!(stdout(&log).trim().is_empty(), "{}", stdout(&log));
    let out = run({
        let mut c = homes.agent();
        c.args(["audit", "search", "refund", "--user", "alice"]);
        c
    });
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("user:alice"), "{}", stdout(&out));

    // Disconnecting bob revokes his device: his inbox is refused as any revoked device's.
    let gone = json(&run({
        let mut c = homes.agent();
        c.args(["user", "disconnect", "bob", "--json"]);
        c
    }));
    assert!(gone["disconnectedAt"].is_string(), "{gone}");
    assert!(gone["devices"][0]["revokedAt"].is_string(), "{gone}");
    let out = inbox(&homes, bob.path());
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stderr(&out).contains("device_revoked"), "{}", stderr(&out));
    // And a question for him is refused: he is no longer connected.
    let out = run({
        let mut c = homes.agent();
        c.args(["ask", "--user", "bob", "Cancel order 7?", "--expires", "10s"]);
        c
    });
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("user_not_found"), "{}", stderr(&out));
    // Alice is untouched.
    assert!(inbox(&homes, alice.path()).status.success());

    // A user never connected: refused with user_not_found, nothing asked.
    let out = run({
        let mut c = homes.agent();
        c.args(["ask", "--user", "carol", "Refund order 43?", "--expires", "10s"]);
        c
    });
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("user_not_found"), "{}", stderr(&out));
    assert!(stdout(&out).is_empty());
    let out = run({
        let mut c = homes.agent();
        c.args(["user", "show", "carol", "--json"]);
        c
    });
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("\"code\":\"user_not_found\""),
        "{}",
        stderr(&out)
    );
}
