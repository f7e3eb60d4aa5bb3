//! An acknowledged write survives SIGKILL: the relay runs in a child process (this test binary, running the
//! ignored `child_relay_process` test), is killed with SIGKILL right after answering, and the database is
//! opened again here.

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

#[tokio::test]
async fn acknowledged_writes_survive_sigkill() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let addr_file = dir.path().join("addr");
    let mut child = Command::new(std::env::current_exe().expect("this test binary"))
        .args([
            "durability::child_relay_process",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env(DB_VAR, db_path(&dir))
        .env(ADDR_VAR, &addr_file)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the child relay starts");
    let mut addr = None;
    for _ in 0..600 {
        if let Ok(text) = std::fs::read_to_string(&addr_file) {
            addr = Some(text);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let Some(addr) = addr else {
        let _ = child.kill();
        panic!("the child relay never started");
    };
    let remote = TestRelay::external(format!("http://{addr}"), dir);

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

    let dir = remote.dir;
    let relay = start_with(
        Config {
            open_registration: true,
            ..Config::new(db_path(&dir))
        },
        dir,
    )
    .await;
    let again: MessageBatch = wait_messages(&relay, &agent, None, 0, None).await.ok();
    let expected: Vec<String> = (0..20).map(|i| format!("k{i}")).collect();
    assert_eq!(ids_of(&again), expected);
    assert!(
        again.messages.iter().all(|m| m.redelivered),
        "the delivery mark survived too"
    );
    let conv: Conversation = relay
        .get("/v1/device/conversation?wait=0", &phone.bearer)
        .await
        .ok();
    assert_eq!(conv.items.len(), 20);
    assert_eq!(conv.items[19].cursor, sent[19].cursor);
}
