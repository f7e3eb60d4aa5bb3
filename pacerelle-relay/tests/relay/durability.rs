//! An acknowledged write survives SIGKILL: the relay runs in a child process (this test binary, running the
//! ignored `child_relay_process` test), is killed with SIGKILL right after answering, and the database is
//! opened again here. The `delivered` mark is not on the wait's latency path (ADR 0001, point 6): a kill
//! between the wait's answer and that mark's commit loses at most the `redelivered` flag, never a task.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use pacerelle_core::wire::{Conversation, MessageBatch};
use pacerelle_relay::{Config, Relay};

use crate::common::{TestRelay, db_path, ids_of, pair, register, send_task, start_with, wait_messages};

const DB_VAR: &str = "PACERELLE_TEST_CHILD_DB";
const ADDR_VAR: &str = "PACERELLE_TEST_CHILD_ADDR_FILE";

/// Not a test of its own: the relay process that the test below starts and kills.
#[tokio::test]
#[ignore = "run by acknowledged_writes_survive_sigkill in a child process"]
async fn child_relay_process() {
    let (Some(db), Some(addr_file)) = (std::env::var_os(DB_VAR), std::env::var_os(ADDR_VAR)) else {
        return;
    };
    let relay = Relay::open(Config {
        open_registration: true,
        ..Config::new(PathBuf::from(db))
    })
    .await
    .expect("the relay opens");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let addr = listener.local_addr().expect("bound");
    let tmp = PathBuf::from(&addr_file).with_extension("tmp");
    std::fs::write(&tmp, addr.to_string()).expect("written");
    std::fs::rename(&tmp, &addr_file).expect("renamed");
    relay
        .serve(listener, std::future::pending())
        .await
        .expect("serves until killed");
}

/// Starts this test binary's `child_relay_process` on the database in `dir` and returns it with its URL.
async fn child_relay(dir: &tempfile::TempDir) -> (std::process::Child, String) {
    let addr_file = dir.path().join("addr");
    let _ = std::fs::remove_file(&addr_file);
    let mut child = Command::new(std::env::current_exe().expect("this test binary"))
        .args([
            "durability::child_relay_process",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env(DB_VAR, db_path(dir))
        .env(ADDR_VAR, &addr_file)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the child relay starts");
    for _ in 0..600 {
        if let Ok(text) = std::fs::read_to_string(&addr_file) {
            return (child, format!("http://{text}"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("the child relay never started");
}

/// Opens the database again in this process, after the child was killed.
async fn reopen(dir: tempfile::TempDir) -> TestRelay {
    start_with(
        Config {
            open_registration: true,
            ..Config::new(db_path(&dir))
        },
        dir,
    )
    .await
}

#[tokio::test]
async fn acknowledged_writes_survive_sigkill() {
    if crate::common::sqlite_only("SIGKILL of a relay process over its SQLite file") {
        return;
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (mut child, url) = child_relay(&dir).await;
    let remote = TestRelay::external(url, dir);

    let agent = register(&remote).await;
    let phone = pair(&remote, &agent).await;
    let mut sent = Vec::new();
    for i in 0..20 {
        sent.push(send_task(&remote, &phone, &format!("k{i}"), "keep me").await);
    }
    let delivered: MessageBatch = wait_messages(&remote, &agent, None, 0, None).await.ok();
    assert_eq!(delivered.messages.len(), 20);

    // SIGKILL right after the last acknowledgement: no graceful shutdown, no checkpoint.
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");

    let relay = reopen(remote.dir).await;
    let again: MessageBatch = wait_messages(&relay, &agent, None, 0, None).await.ok();
    let expected: Vec<String> = (0..20).map(|i| format!("k{i}")).collect();
    assert_eq!(ids_of(&again), expected, "every acknowledged task, once each");
    // The delivered mark may or may not have committed before the kill; either way the next delivery after
    // this one knows.
    let third: MessageBatch = wait_messages(&relay, &agent, None, 0, None).await.ok();
    assert_eq!(ids_of(&third), expected);
    assert!(third.messages.iter().all(|m| m.redelivered));
    let conv: Conversation = relay
        .get("/v1/device/conversation?wait=0", &phone.bearer)
        .await
        .ok();
    assert_eq!(conv.items.len(), 20);
    assert_eq!(conv.items[19].cursor, sent[19].cursor);
}

/// Kills the relay after a wait answered and before its `delivered` mark could commit: another process holds
/// the database's write lock meanwhile, so the mark waits in the writer while the wait (a read) answers. The
/// tasks are all still there, once each; only their `redelivered` flag is lost.
#[tokio::test]
async fn a_kill_between_the_answer_and_the_delivered_mark_loses_only_the_flag() {
    if crate::common::sqlite_only("holds the SQLite write lock from another process") {
        return;
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (mut child, url) = child_relay(&dir).await;
    let remote = TestRelay::external(url, dir);
    let agent = register(&remote).await;
    let phone = pair(&remote, &agent).await;
    for i in 0..5 {
        send_task(&remote, &phone, &format!("k{i}"), "keep me").await;
    }

    let lock = rusqlite::Connection::open(db_path(&remote.dir)).expect("opens the relay's database");
    lock.execute_batch("BEGIN IMMEDIATE")
        .expect("takes the write lock");
    let delivered: MessageBatch = wait_messages(&remote, &agent, None, 0, None).await.ok();
    assert_eq!(
        delivered.messages.len(),
        5,
        "the wait answers without a write of its own"
    );
    assert!(delivered.messages.iter().all(|m| !m.redelivered));
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    lock.execute_batch("ROLLBACK").expect("releases the lock");
    drop(lock);

    let relay = reopen(remote.dir).await;
    let again: MessageBatch = wait_messages(&relay, &agent, None, 0, None).await.ok();
    let expected: Vec<String> = (0..5).map(|i| format!("k{i}")).collect();
    assert_eq!(ids_of(&again), expected, "every acknowledged task, once each");
    assert!(
        again.messages.iter().all(|m| !m.redelivered),
        "the mark never committed: the flag is what was lost"
    );
    let third: MessageBatch = wait_messages(&relay, &agent, None, 0, None).await.ok();
    assert_eq!(ids_of(&third), expected);
    assert!(third.messages.iter().all(|m| m.redelivered), "marked from now on");
}
