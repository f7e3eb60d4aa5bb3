//! `pacerelle answer` with real processes against a real relay: an answer that does not count — the question
//! already answered on another device or on this one, expired, cancelled — fails and says which answer counts,
//! never the refused one as if it stood; the same answer again succeeds.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::process::{Child, Output};

use common::{Setup, finish, next_question, run, spawn, stderr, stdout};
use pacerelle_client::Answer;

fn ask(setup: &Setup, args: &[&str]) -> Child {
    let mut c = setup.agent();
    c.arg("ask").args(args);
    spawn(c)
}

/// `pacerelle [--json] answer …` as the CLI device.
fn answer(setup: &Setup, args: &[&str]) -> Output {
    run({
        let mut c = setup.as_device();
        c.args(args);
        c
    })
}

#[tokio::test]
async fn an_answer_to_a_question_answered_on_another_device_fails_and_names_the_answer_that_counts() {
    let setup = Setup::start().await;
    let tablet = setup.second_device("Bob's tablet").await;

    let child = ask(&setup, &["Deploy to production?", "--id", "deploy-1"]);
    let q = next_question(&setup.device, &[]).await;
    assert_eq!(q.question_id, "deploy-1");
    assert_eq!(next_question(&tablet, &[]).await.question_id, "deploy-1");
    tablet.answer("deploy-1", Answer::Yes).await.expect("yes");
    let out = finish(child).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    let out = answer(&setup, &["answer", "deploy-1", "no"]);
    assert!(!out.status.success(), "a refused no must not succeed");
    assert!(stdout(&out).is_empty(), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(
        err.contains(r#"question deploy-1 is already answered: "yes" by Bob's tablet at "#),
        "{err}"
    );
    assert!(err.contains(r#"your "no" was not recorded"#), "{err}");
    assert!(!err.contains("answered deploy-1: no"), "{err}");

    let out = answer(&setup, &["--json", "answer", "deploy-1", "no"]);
    assert!(!out.status.success());
    let stands: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json on stdout");
    assert_eq!(stands["questionId"], "deploy-1");
    assert_eq!(stands["state"], "answered");
    assert_eq!(stands["recorded"], false);
    assert_eq!(stands["answer"], serde_json::json!({"type": "yes"}));
    assert_eq!(stands["answerText"], "yes");
    assert_eq!(stands["answeredByName"], "Bob's tablet");
    assert_eq!(stands["answeredBy"], tablet.credentials().device_id.as_str());
    assert_eq!(stands["byThisDevice"], false);
    assert!(stands["answeredAt"].is_string());
    let error: serde_json::Value = serde_json::from_str(stderr(&out).trim()).expect("json on stderr");
    assert_eq!(error["code"], "question_answered");

    // The agent still has the tablet's yes.
    let out = run({
        let mut c = setup.agent();
        c.args(["audit", "export", "--format", "jsonl"]);
        c
    });
    assert!(out.status.success(), "{}", stderr(&out));
    let line: serde_json::Value = serde_json::from_str(stdout(&out).trim()).expect("one line");
    assert_eq!(line["answer"], "yes");
    assert_eq!(line["approved"], true);
}

#[tokio::test]
async fn the_same_device_answering_again_gets_its_first_answer_and_the_same_answer_again_succeeds() {
    let setup = Setup::start().await;

    let child = ask(&setup, &["Drop the cache?", "--id", "cache-2"]);
    next_question(&setup.device, &[]).await;
    let out = answer(&setup, &["answer", "cache-2", "yes"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "answered cache-2: yes");
    let asked = finish(child).await;
    assert_eq!(asked.status.code(), Some(0), "{}", stderr(&asked));

    // Another answer from this device: the relay returns the stored yes (200), which the CLI reports.
    let out = answer(&setup, &["answer", "cache-2", "no"]);
    assert!(!out.status.success(), "the no was not recorded");
    let err = stderr(&out);
    assert!(
        err.contains(r#"question cache-2 is already answered: "yes" by this device at "#),
        "{err}"
    );
    assert!(err.contains(r#"your "no" was not recorded"#), "{err}");
    let out = answer(&setup, &["--json", "answer", "cache-2", "no"]);
    assert!(!out.status.success());
    let stands: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(stands["answerText"], "yes");
    assert_eq!(stands["byThisDevice"], true);
    assert_eq!(stands["answeredByName"], "Ana's phone");

    // This device's client read the question while pending, before the CLI's yes: the relay returns the
    // stored yes with 200, and the client still refuses to call its no given.
    let e = setup
        .device
        .answer("cache-2", Answer::No)
        .await
        .expect_err("another answer");
    assert_eq!(e.code(), Some("question_answered"), "{e}");
    let closed = pacerelle_client::device::ClosedQuestion::from_error(&e).expect("closed");
    assert_eq!((closed.answer, closed.by_this_device), (Some(Answer::Yes), true));

    // The same answer again is a retry: it succeeds.
    let out = answer(&setup, &["--json", "answer", "cache-2", "yes"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let answered: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(answered["recorded"], true);
    assert_eq!(answered["answerText"], "yes");
}

#[tokio::test]
async fn an_answer_to_an_expired_or_cancelled_question_fails_and_says_so() {
    let setup = Setup::start().await;

    let out = run({
        let mut c = setup.agent();
        c.args(["ask", "Anyone there?", "--id", "late-3", "--expires", "1s"]);
        c
    });
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let out = answer(&setup, &["answer", "late-3", "yes"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("question late-3 expired at "), "{err}");
    assert!(err.contains(r#"your "yes" was not recorded"#), "{err}");
    let out = answer(&setup, &["--json", "answer", "late-3", "yes"]);
    assert!(!out.status.success());
    let stands: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(stands["state"], "expired");
    assert_eq!(stands["recorded"], false);
    assert!(stands["answer"].is_null());
    let error: serde_json::Value = serde_json::from_str(stderr(&out).trim()).expect("json");
    assert_eq!(error["code"], "question_expired");

    let child = ask(&setup, &["Merge?", "--id", "merge-4"]);
    next_question(&setup.device, &[]).await;
    let out = run({
        let mut c = setup.agent();
        c.args(["cancel", "merge-4"]);
        c
    });
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(finish(child).await.status.code(), Some(2));
    let out = answer(&setup, &["answer", "merge-4", "yes"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains(r#"question merge-4 was cancelled — your "yes" was not recorded"#),
        "{err}"
    );
    let out = answer(&setup, &["--json", "answer", "merge-4", "yes"]);
    let stands: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(stands["state"], "cancelled");
    assert!(stands["answer"].is_null());
}

#[tokio::test]
async fn an_answer_that_does_not_fit_is_refused_with_a_stable_code_and_the_question_stays_open() {
    let setup = Setup::start().await;
    let child = ask(&setup, &["Deploy?", "--id", "fit-5"]);
    next_question(&setup.device, &[]).await;
    let code = |args: &[&str]| {
        let out = answer(&setup, args);
        assert!(!out.status.success(), "{args:?}");
        let error: serde_json::Value = serde_json::from_str(stderr(&out).trim())
            .unwrap_or_else(|_| panic!("{args:?}: {}", stderr(&out)));
        error["code"].as_str().map(str::to_string)
    };
    for args in [
        &["--json", "answer", "fit-5", "maybe"][..],
        &["--json", "answer", "fit-5", "yes", "no"],
        &["--json", "answer", "fit-5"],
    ] {
        assert_eq!(code(args).as_deref(), Some("invalid_input"), "{args:?}");
    }
    assert_eq!(
        code(&["--json", "answer", "no-such-6", "yes"]).as_deref(),
        Some("not_found")
    );

    // Nothing was recorded: the question is still open, and a fitting answer counts.
    let out = answer(&setup, &["answer", "fit-5", "y"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(finish(child).await.status.code(), Some(0));
}
