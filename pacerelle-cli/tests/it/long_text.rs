//! Long text: `send -`, `send --file` and `ask --details-file`, up to the size limit and not one byte more.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::time::Duration;

use common::{Setup, run, run_with_stdin, stderr};
use pacerelle_client::core::message::MAX_TEXT_BYTES;
use pacerelle_client::core::wire::ItemKind;

async fn tasks(s: &Setup) -> Vec<String> {
    let page = s
        .device
        .conversation(None, Duration::ZERO)
        .await
        .expect("conversation");
    page.items
        .into_iter()
        .filter(|i| i.kind == ItemKind::Message)
        .map(|i| i.text)
        .collect()
}

/// Multi-byte text of exactly `len` bytes.
fn text_of(len: usize) -> String {
    let mut t = "é".repeat(len / 2);
    if len % 2 == 1 {
        t.push('x');
    }
    assert_eq!(t.len(), len);
    t
}

#[tokio::test]
async fn send_file_at_the_limit_round_trips_and_one_byte_over_is_refused() {
    let s = Setup::start().await;
    let dir = tempfile::tempdir().expect("tempdir");

    let at = dir.path().join("at.txt");
    let at_text = text_of(MAX_TEXT_BYTES);
    std::fs::write(&at, &at_text).unwrap();
    let out = run({
        let mut c = s.as_device();
        c.args(["send", "--file"]).arg(&at);
        c
    });
    assert!(out.status.success(), "send --file: {}", stderr(&out));
    assert_eq!(tasks(&s).await, vec![at_text.clone()]);

    let over = dir.path().join("over.txt");
    std::fs::write(&over, text_of(MAX_TEXT_BYTES + 1)).unwrap();
    let out = run({
        let mut c = s.as_device();
        c.args(["send", "--file"]).arg(&over);
        c
    });
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains(&MAX_TEXT_BYTES.to_string()) && err.contains("over.txt"),
        "{err}"
    );
    assert_eq!(tasks(&s).await, vec![at_text], "nothing more was sent");
}

#[tokio::test]
async fn send_dash_reads_standard_input() {
    let s = Setup::start().await;
    let text = text_of(MAX_TEXT_BYTES);
    let out = run_with_stdin(
        {
            let mut c = s.as_device();
            c.args(["send", "-"]);
            c
        },
        format!("{text}\n").as_bytes(),
    );
    assert!(out.status.success(), "send -: {}", stderr(&out));
    assert_eq!(tasks(&s).await, vec![text]);

    let out = run_with_stdin(
        {
            let mut c = s.as_device();
            c.args(["send", "-"]);
            c
        },
        text_of(MAX_TEXT_BYTES + 1).as_bytes(),
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let out = run_with_stdin(
        {
            let mut c = s.as_device();
            c.args(["send", "-"]);
            c
        },
        b"\xff\xfe not text",
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("not UTF-8"), "{}", stderr(&out));
    assert_eq!(tasks(&s).await.len(), 1, "nothing more was sent");
}

#[tokio::test]
async fn ask_details_file_over_the_limit_is_refused_with_exit_3() {
    let s = Setup::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let over = dir.path().join("details.txt");
    std::fs::write(&over, text_of(MAX_TEXT_BYTES + 1)).unwrap();
    let out = run({
        let mut c = s.agent();
        c.args(["ask", "deploy?", "--expires", "5s", "--details-file"])
            .arg(&over);
        c
    });
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("details.txt"), "{}", stderr(&out));
    let questions = s.device.questions(None).await.expect("questions");
    assert!(questions.questions.is_empty(), "nothing was asked");
}

#[test]
fn the_help_states_the_limit() {
    for words in [&["send", "--help"][..], &["ask", "--help"][..]] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_pacerelle"))
            .args(words)
            .output()
            .expect("run");
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(help.contains(&MAX_TEXT_BYTES.to_string()), "{words:?}: {help}");
    }
}
