//! What the commands show people: durations as given, device names rather than ids.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::process::Stdio;

use common::{Setup, stderr};

#[tokio::test]
async fn ask_expires_3s_reads_3_s() {
    let s = Setup::start().await;
    let child = s
        .agent()
        .args(["ask", "Quick one?", "--expires", "3s"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let out = tokio::task::spawn_blocking(move || child.wait_with_output().expect("wait"))
        .await
        .expect("join");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("expires in 3 s"), "{}", stderr(&out));
}

#[tokio::test]
async fn inbox_names_the_device_that_answered() {
    let s = Setup::start().await;
    let child = s
        .agent()
        .args(["ask", "Deploy?", "--expires", "1m"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let q = common::next_question(&s.device, &[]).await;
    s.device
        .answer(&q.question_id, pacerelle_client::Answer::Yes)
        .await
        .expect("yes");
    let out = tokio::task::spawn_blocking(move || child.wait_with_output().expect("wait"))
        .await
        .expect("join");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    let out = common::run({
        let mut c = s.as_device();
        c.arg("inbox");
        c
    });
    assert!(out.status.success(), "{}", stderr(&out));
    let text = common::stdout(&out);
    assert!(text.contains("answered by Ana's phone"), "{text}");
    assert!(!text.contains("answered by dv_"), "{text}");
}

#[test]
fn up_names_the_agent_after_this_computer() {
    let home = tempfile::tempdir().expect("tempdir");
    let data = tempfile::tempdir().expect("tempdir");
    let mut c = common::pacerelle(home.path(), "http://127.0.0.1:9");
    c.env_remove("PACERELLE_RELAY_URL")
        .args(["up", "--listen", "127.0.0.1:0", "--data"])
        .arg(data.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let _up = common::Proc(c.spawn().expect("spawn"));
    let path = home.path().join("agent.json");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let file: serde_json::Value = loop {
        if let Ok(bytes) = std::fs::read(&path)
            && let Ok(v) = serde_json::from_slice(&bytes)
        {
            break v;
        }
        assert!(std::time::Instant::now() < deadline, "up wrote no agent.json");
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let name = file["name"].as_str().expect("name");
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("host name");
    match host.trim().split('.').next().unwrap() {
        // A computer without a name of its own keeps the old default.
        "" | "localhost" => assert_eq!(name, "local agent"),
        host => assert_eq!(name, host),
    }
}
