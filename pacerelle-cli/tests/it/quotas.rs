//! The relay's quota on tasks not yet processed, through real processes: `pacerelle serve
//! --max-pending-tasks 1`, and `pacerelle send` from a paired device home, which fails with one clear line
//! naming `quota_exceeded` (and the stable code under `--json`), quoting nothing of the task.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::path::Path;

use common::{pacerelle, run, serve_with, stderr};

#[test]
fn a_send_beyond_the_quota_fails_with_a_line_naming_quota_exceeded() {
    let data = tempfile::tempdir().unwrap();
    let (_relay, url) = serve_with(data.path(), &["--max-pending-tasks", "1"]);
    let agent_home = tempfile::tempdir().unwrap();
    let device_home = tempfile::tempdir().unwrap();
    let cli = |home: &Path, args: &[&str]| {
        let mut c = pacerelle(home, &url);
        c.args(args);
        run(c)
    };
    let out = cli(agent_home.path(), &["agent", "create", "--name", "busy agent"]);
    assert!(out.status.success(), "agent create: {}", stderr(&out));
    let out = cli(agent_home.path(), &["pair", "--json"]);
    assert!(out.status.success(), "pair: {}", stderr(&out));
    let link: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let link = link["link"].as_str().unwrap();
    let out = cli(device_home.path(), &["device", "join", link, "--name", "phone"]);
    assert!(out.status.success(), "device join: {}", stderr(&out));

    let out = cli(device_home.path(), &["send", "first task"]);
    assert!(out.status.success(), "send: {}", stderr(&out));

    let out = cli(device_home.path(), &["send", "second task"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].starts_with("error: "), "{err}");
    assert!(lines[0].contains("quota_exceeded"), "{err}");
    assert!(lines[0].contains("max_pending_tasks: 1"), "{err}");
    assert!(lines[0].contains("nothing was stored"), "{err}");
    assert!(!err.contains("second task"), "{err}");

    let out = cli(device_home.path(), &["--json", "send", "second task"]);
    assert!(!out.status.success());
    let body: serde_json::Value = serde_json::from_str(stderr(&out).trim()).expect("a JSON error");
    assert_eq!(body["code"], "quota_exceeded");
}
