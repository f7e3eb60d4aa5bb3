//! `pacerelle ask`, `answer`, `inbox`, `notify`, `cancel`, `audit` and `webhook` with real processes: the exit
//! codes of `ask` for yes, no, expiry, cancel and a relay that is down.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::process::Child;

use common::{Setup, finish, next_question, run, spawn, stderr, stdout};
use pacerelle_client::{Answer, QuestionKind};

fn ask(setup: &Setup, args: &[&str]) -> Child {
    let mut c = setup.agent();
    c.arg("ask").args(args);
    spawn(c)
}

#[tokio::test]
async fn ask_exits_0_on_yes_1_on_no_and_prints_the_answer() {
    let setup = Setup::start().await;

    let child = ask(&setup, &["Deploy to production?", "--details", "3 commits"]);
    let q = next_question(&setup.device, &[]).await;
    assert_eq!(q.question, "Deploy to production?");
    assert_eq!(q.details.as_deref(), Some("3 commits"));
    setup
        .device
        .answer(&q.question_id, Answer::Yes)
        .await
        .expect("yes");
    let out = finish(child).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "yes");
    assert!(stderr(&out).contains("Ana's phone"), "{}", stderr(&out));

    let child = ask(&setup, &["Drop the table?", "--json"]);
    let q = next_question(&setup.device, &[]).await;
    setup.device.answer(&q.question_id, Answer::No).await.expect("no");
    let out = finish(child).await;
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let outcome: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json outcome");
    assert_eq!(outcome["state"], "answered");
    assert_eq!(outcome["approved"], false);
    assert_eq!(outcome["answerText"], "no");
    assert_eq!(outcome["answeredByName"], "Ana's phone");
}

#[tokio::test]
async fn ask_exits_2_on_expiry_and_on_cancel_and_a_cancelled_question_cannot_be_answered() {
    let setup = Setup::start().await;

    let out = run({
        let mut c = setup.agent();
        c.args(["ask", "Anyone there?", "--expires", "2s"]);
        c
    });
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stdout(&out).is_empty());
    assert!(stderr(&out).contains("expired"), "{}", stderr(&out));

    let child = ask(&setup, &["Merge?", "--id", "merge-12"]);
    let q = next_question(&setup.device, &[]).await;
    assert_eq!(q.question_id, "merge-12");
    let out = run({
        let mut c = setup.agent();
        c.args(["cancel", "merge-12"]);
        c
    });
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "merge-12: cancelled");
    let out = finish(child).await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("cancelled"));

    // The device's answer is refused and says why.
    let out = run({
        let mut c = setup.as_device();
        c.args(["answer", "merge-12", "yes"]);
        c
    });
    assert!(!out.status.success());
    assert!(stderr(&out).contains("cancelled"), "{}", stderr(&out));

    // The log keeps expired and cancelled apart, and neither is a human no.
    let out = run({
        let mut c = setup.agent();
        c.args(["audit", "export", "--format", "jsonl"]);
        c
    });
    assert!(out.status.success(), "{}", stderr(&out));
    let states: Vec<(String, serde_json::Value)> = stdout(&out)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("json line");
            (
                v["state"].as_str().expect("state").to_string(),
                v["answer"].clone(),
            )
        })
        .collect();
    assert_eq!(
        states,
        vec![
            ("cancelled".to_string(), serde_json::Value::Null),
            ("expired".to_string(), serde_json::Value::Null)
        ]
    );
}

/// The same question under an --id already used, with another --expires: resumed, with its first expiry,
/// and said so (a line on stderr; `resumed` in --json).
#[tokio::test]
async fn ask_again_under_an_id_resumes_with_the_first_expiry_and_says_so() {
    let setup = Setup::start().await;
    let child = ask(
        &setup,
        &["Tag v2.0?", "--id", "tag-20", "--expires", "10m", "--json"],
    );
    let q = next_question(&setup.device, &[]).await;
    assert_eq!(q.question_id, "tag-20");
    setup
        .device
        .answer(&q.question_id, Answer::Yes)
        .await
        .expect("yes");
    let out = finish(child).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let first: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json outcome");
    assert_eq!(first["resumed"], false, "{first}");
    let expires_at = first["expiresAt"].as_str().expect("expiresAt").to_string();

    let out = run({
        let mut c = setup.agent();
        c.args(["ask", "Tag v2.0?", "--id", "tag-20", "--expires", "1h"]);
        c
    });
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "yes");
    assert!(
        stderr(&out).contains(&format!(
            "resumed question tag-20 asked earlier; it expires at {expires_at}"
        )),
        "{}",
        stderr(&out)
    );

    let out = run({
        let mut c = setup.agent();
        c.args(["ask", "Tag v2.0?", "--id", "tag-20", "--expires", "2h", "--json"]);
        c
    });
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let again: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json outcome");
    assert_eq!(again["resumed"], true, "{again}");
    assert_eq!(again["expiresAt"], expires_at.as_str(), "the first expiry holds");
    assert_eq!(again["approved"], true, "{again}");
}

#[tokio::test]
async fn ask_exits_3_when_the_relay_is_down_or_the_input_is_bad() {
    let setup = Setup::start().await;
    let out = run({
        let mut c = common::pacerelle(setup.agent_home.path(), "http://127.0.0.1:9");
        c.args(["ask", "Still there?"]);
        c
    });
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("unreachable"), "{}", stderr(&out));
    // With --json, what the client could not send or refused itself has the relay's codes for it.
    let coded = |relay: &str, args: &[&str]| {
        let out = run({
            let mut c = common::pacerelle(setup.agent_home.path(), relay);
            c.arg("--json").args(args);
            c
        });
        assert_ne!(out.status.code(), Some(0), "{args:?}");
        let body: serde_json::Value = serde_json::from_str(stderr(&out).trim())
            .unwrap_or_else(|_| panic!("{args:?}: {}", stderr(&out)));
        body["code"].as_str().map(str::to_string)
    };
    assert_eq!(
        coded("http://127.0.0.1:9", &["ask", "Still there?"]).as_deref(),
        Some("unavailable")
    );
    assert_eq!(
        coded("http://127.0.0.1:9", &["status"]).as_deref(),
        Some("unavailable")
    );
    assert_eq!(coded(&setup.url, &["ask", ""]).as_deref(), Some("invalid_input"));
    assert_eq!(
        coded(&setup.url, &["ask", "Pick", "--choice", "a", "--choice", "a"]).as_deref(),
        Some("invalid_input")
    );
    assert_eq!(
        coded(&setup.url, &["notify", " "]).as_deref(),
        Some("invalid_input")
    );
    assert_eq!(
        coded(&setup.url, &["cancel", "q_none"]).as_deref(),
        Some("not_found")
    );

    for args in [
        vec!["ask", "Pick", "--choice", "only one"],
        vec!["ask", "Too long", "--expires", "8d"],
        vec!["ask", "Bad", "--expires", "soon"],
        vec!["ask", "--no-such-flag", "x"],
        vec!["ask", "Both", "--text", "--choice", "a", "--choice", "b"],
    ] {
        let out = run({
            let mut c = setup.agent();
            c.args(&args);
            c
        });
        assert_eq!(out.status.code(), Some(3), "{args:?}: {}", stderr(&out));
    }
}

#[tokio::test]
async fn choice_and_text_answers_from_the_cli_device_and_the_inbox_shows_questions_and_notifications() {
    let setup = Setup::start().await;

    let out = run({
        let mut c = setup.agent();
        c.args(["notify", "Build finished", "--title", "CI", "--level", "success"]);
        c
    });
    assert!(out.status.success(), "{}", stderr(&out));

    let child = ask(
        &setup,
        &[
            "Where to deploy?",
            "--choice",
            "staging",
            "--choice",
            "production",
            "--multiple",
        ],
    );
    let q = next_question(&setup.device, &[]).await;
    assert_eq!(q.kind, QuestionKind::Choice);

    let out = run({
        let mut c = setup.as_device();
        c.arg("inbox");
        c
    });
    let inbox = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(inbox.contains("Where to deploy?"), "{inbox}");
    assert!(
        inbox.contains("1. staging") && inbox.contains("2. production"),
        "{inbox}"
    );
    assert!(inbox.contains("left"), "time left: {inbox}");
    assert!(inbox.contains("success: CI — Build finished"), "{inbox}");

    let out = run({
        let mut c = setup.as_device();
        c.args(["answer", &q.question_id, "moon"]);
        c
    });
    assert!(!out.status.success(), "not an option");
    let out = run({
        let mut c = setup.as_device();
        c.args(["answer", &q.question_id, "staging", "Production"]);
        c
    });
    assert!(out.status.success(), "{}", stderr(&out));
    let out = finish(child).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "staging, production");

    let child = ask(&setup, &["Release name?", "--text", "--json"]);
    let q = next_question(&setup.device, &[]).await;
    let out = run({
        let mut c = setup.as_device();
        c.args(["answer", &q.question_id, "--text", "Lighthouse 2"]);
        c
    });
    assert!(out.status.success(), "{}", stderr(&out));
    let out = finish(child).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let outcome: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(
        outcome["answer"],
        serde_json::json!({"type": "text", "value": "Lighthouse 2"})
    );
    assert_eq!(outcome["answeredByName"], "Ana's phone");
    assert!(outcome["answeredAt"].is_string());

    // The inbox shows them answered; the JSON inbox carries the opened question.
    let out = run({
        let mut c = setup.as_device();
        c.args(["inbox", "--json"]);
        c
    });
    let items: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).expect("json");
    let kinds: Vec<&str> = items.iter().map(|i| i["kind"].as_str().expect("kind")).collect();
    assert_eq!(kinds, vec!["notification", "question", "question"]);
    assert_eq!(items[1]["question"]["state"], "answered");
    assert_eq!(items[0]["level"], "success");

    // Search and CSV export of the decrypted log.
    let out = run({
        let mut c = setup.agent();
        c.args(["audit", "search", "LIGHTHOUSE", "--json"]);
        c
    });
    assert!(out.status.success(), "{}", stderr(&out));
    let found: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(found.len(), 1);
    assert_eq!(found[0]["question"], "Release name?");
    let out = run({
        let mut c = setup.agent();
        c.args([
            "audit", "export", "--format", "csv", "--since", "1h", "--state", "answered",
        ]);
        c
    });
    assert!(out.status.success(), "{}", stderr(&out));
    let mut reader = csv::Reader::from_reader(out.stdout.as_slice());
    let rows: Vec<csv::StringRecord> = reader.records().map(|r| r.expect("row")).collect();
    assert_eq!(rows.len(), 2);
    assert_eq!(&rows[0][7], "Lighthouse 2");
    assert_eq!(&rows[1][7], "staging, production");
    assert_eq!(&rows[1][3], "true");
    assert_eq!(&rows[1][9], "Ana's phone");
}

#[tokio::test]
async fn webhook_commands_set_show_and_clear() {
    let setup = Setup::start().await;
    let out = run({
        let mut c = setup.agent();
        c.args([
            "webhook",
            "set",
            "http://127.0.0.1:9/hook",
            "--secret",
            "0123456789abcdef",
        ]);
        c
    });
    assert!(out.status.success(), "{}", stderr(&out));
    let out = run({
        let mut c = setup.agent();
        c.args(["webhook", "show", "--json"]);
        c
    });
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(info["url"], "http://127.0.0.1:9/hook");
    assert!(info.get("secret").is_none());
    let out = run({
        let mut c = setup.agent();
        c.args(["webhook", "deliveries"]);
        c
    });
    assert!(out.status.success(), "{}", stderr(&out));
    let out = run({
        let mut c = setup.agent();
        c.args(["webhook", "clear"]);
        c
    });
    assert!(out.status.success(), "{}", stderr(&out));
    let out = run({
        let mut c = setup.agent();
        c.args(["webhook", "show"]);
        c
    });
    assert_eq!(stdout(&out).trim(), "no webhook");
    let out = run({
        let mut c = setup.agent();
        c.args(["webhook", "set", "http://127.0.0.1:9/hook", "--secret", "short"]);
        c
    });
    assert!(!out.status.success());
}
