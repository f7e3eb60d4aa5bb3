//! `pacerelle ask` never exits 0 for an approval that was not given to the question asked, nor on a device
//! roster the relay rolled back; `agent devices` and `agent adopt` show and build the roster.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::time::Duration;

use common::{Setup, next_question, run, stderr, stdout};
use pacerelle_client::Answer;

fn ask(setup: &Setup, args: &[&str]) -> std::process::Child {
    let mut c = setup.agent();
    c.arg("ask")
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    c.spawn().expect("spawn")
}

async fn finish(child: std::process::Child) -> std::process::Output {
    tokio::task::spawn_blocking(move || child.wait_with_output().expect("wait"))
        .await
        .expect("join")
}

async fn sqlite(setup: &Setup, sql: &'static str) {
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(setup.data.path().join("pacerelle.db"))
        .busy_timeout(Duration::from_secs(10));
    let pool = sqlx::SqlitePool::connect_with(options).await.expect("open");
    sqlx::query(sql).execute(&pool).await.expect(sql);
    pool.close().await;
}

#[tokio::test]
async fn an_id_used_again_for_another_question_exits_3_and_the_phone_never_sees_it() {
    let setup = Setup::start().await;
    let child = ask(
        &setup,
        &[
            "Run the test suite?",
            "--id",
            "deploy-approval",
            "--expires",
            "3s",
        ],
    );
    let q = next_question(&setup.device, &[]).await;
    setup
        .device
        .answer(&q.question_id, Answer::Yes)
        .await
        .expect("yes");
    let out = finish(child).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    for when in ["before the expiry", "after the expiry"] {
        let out = run({
            let mut c = setup.agent();
            c.args([
                "ask",
                "Delete the production database?",
                "--id",
                "deploy-approval",
            ]);
            c
        });
        assert_eq!(out.status.code(), Some(3), "{when}: {}", stderr(&out));
        assert!(stdout(&out).is_empty(), "{when}");
        assert!(
            stderr(&out).contains("question_id_conflict"),
            "{when}: {}",
            stderr(&out)
        );
        assert!(
            stderr(&out).contains("different question"),
            "{when}: {}",
            stderr(&out)
        );
        tokio::time::sleep(Duration::from_millis(3100)).await;
    }
    let listed = setup.device.questions(None).await.expect("questions");
    assert!(
        listed
            .questions
            .iter()
            .all(|q| q.question != "Delete the production database?")
    );
}

#[tokio::test]
async fn a_rolled_back_roster_or_a_device_row_the_agent_never_trusted_never_exits_0() {
    let setup = Setup::start().await;
    let out = run({
        let mut c = setup.agent();
        c.args(["agent", "devices"]);
        c
    });
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("owner (approves)"), "{}", stdout(&out));

    // A user device promoted to owner in the relay's rows is still not asked, and cannot approve.
    sqlite(&setup, "UPDATE devices SET role = 'user'").await;
    let out = run({
        let mut c = setup.agent();
        c.args(["agent", "devices"]);
        c
    });
    assert!(
        stdout(&out).contains("owner (approves)"),
        "the roster, not the row: {}",
        stdout(&out)
    );

    // A roster rolled back to nothing: the agent refuses it; `ask` exits 3 before asking.
    sqlite(&setup, "DELETE FROM rosters").await;
    let out = run({
        let mut c = setup.agent();
        c.args(["ask", "Deploy?", "--expires", "5s"]);
        c
    });
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("roster_rollback"), "{}", stderr(&out));
}

#[tokio::test]
async fn devices_paired_before_the_roster_are_adopted_explicitly() {
    let setup = Setup::start().await;
    // As on a relay upgraded from before rosters, seen by a host with a fresh home.
    sqlite(&setup, "DELETE FROM rosters").await;
    std::fs::remove_dir_all(setup.agent_home.path().join("rosters")).expect("the mark");
    let out = run({
        let mut c = setup.agent();
        c.args(["ask", "Deploy?", "--expires", "5s"]);
        c
    });
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("pacerelle agent adopt"), "{}", stderr(&out));
    let out = run({
        let mut c = setup.agent();
        c.args(["agent", "devices"]);
        c
    });
    assert!(
        stdout(&out).contains("absent (cannot approve)"),
        "{}",
        stdout(&out)
    );
    let out = run({
        let mut c = setup.agent();
        c.args(["agent", "adopt"]);
        c
    });
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("owner (approves)"), "{}", stdout(&out));

    let child = ask(&setup, &["Deploy now?"]);
    let q = next_question(&setup.device, &[]).await;
    setup
        .device
        .answer(&q.question_id, Answer::Yes)
        .await
        .expect("yes");
    let out = finish(child).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}
