//! `pacerelle inbox --follow` with real processes: items print as they come, once each and in order, and a
//! relay that goes away is reported on stderr while following goes on.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::io::{BufRead, BufReader, Read};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use common::{Proc, Setup, run, stderr};
use serde_json::Value;

/// Far longer than an item takes to arrive; the follow parks 30 s, so an item seen within it was woken.
const WITHIN: Duration = Duration::from_secs(20);

/// Sends each line `read` gives, from a thread.
fn lines(read: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(read).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

fn notify(setup: &Setup, text: &str) {
    let out = run({
        let mut c = setup.agent();
        c.args(["notify", text]);
        c
    });
    assert!(out.status.success(), "notify: {}", stderr(&out));
}

/// The next JSON item `pacerelle inbox --follow --json` prints.
fn next_item(out: &mpsc::Receiver<String>) -> Value {
    let line = out.recv_timeout(WITHIN).expect("an item printed");
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line:?} is not JSON: {e}"))
}

#[tokio::test]
async fn inbox_follow_prints_new_items_once_and_reports_a_relay_that_goes_away() {
    let mut setup = Setup::start().await;
    notify(&setup, "before following");
    let mut child = setup
        .as_device()
        .args(["inbox", "--follow", "--json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("inbox --follow");
    let out = lines(child.stdout.take().expect("stdout"));
    let err = lines(child.stderr.take().expect("stderr"));
    let _follow = Proc(child);

    // What was there first, then each new item as it comes, once and in order.
    assert_eq!(next_item(&out)["text"], "before following");
    notify(&setup, "first while following");
    assert_eq!(next_item(&out)["text"], "first while following");
    notify(&setup, "second while following");
    let second = next_item(&out);
    assert_eq!(second["text"], "second while following");
    assert_eq!(second["kind"], "notification");
    assert!(
        out.recv_timeout(Duration::from_millis(500)).is_err(),
        "nothing is printed twice"
    );

    // The relay goes away: said on stderr, and the command keeps following.
    setup.relay.0.kill().expect("kill the relay");
    setup.relay.0.wait().expect("the relay ended");
    let said = err.recv_timeout(WITHIN).expect("a line on stderr");
    assert!(said.starts_with("relay unreachable, retrying in "), "{said}");
    let again = err.recv_timeout(WITHIN).expect("a second line on stderr");
    assert!(again.starts_with("relay unreachable, retrying in "), "{again}");
}
