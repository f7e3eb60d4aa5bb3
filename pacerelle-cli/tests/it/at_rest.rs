//! `pacerelle serve` keeps its data folder `0700` and every file in it `0600`, whatever the umask: a real relay
//! process started under `umask 022`, used, then restarted over a folder loosened by hand.
#![cfg(unix)]
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

use common::{Proc, pacerelle, run, run_with_stdin, stderr};

/// `pacerelle serve` on 127.0.0.1:0 under `umask 022`, its log (warnings and up) in `log`.
fn serve_under_umask_022(data: &Path, log: &Path) -> (Proc, String) {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(r#"umask 022 && exec "$0" serve --json --listen 127.0.0.1:0 --data "$1" 2>"$2""#)
        .arg(env!("CARGO_BIN_EXE_pacerelle"))
        .arg(data)
        .arg(log)
        .env("PACERELLE_LOG", "warn")
        .env_remove("PACERELLE_DATA")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut reader = BufReader::new(child.stdout.take().expect("stdout"));
    let mut text = String::new();
    while !text.trim_end().ends_with('}') {
        let read = reader.read_line(&mut text).expect("read");
        assert!(
            read > 0,
            "serve exited: {text}\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
    }
    let v: serde_json::Value = serde_json::from_str(&text).expect("json");
    (Proc(child), v["relayUrl"].as_str().expect("url").to_string())
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).expect("exists").permissions().mode() & 0o7777
}

/// The names and modes of the files in `folder`, sorted.
fn files(folder: &Path) -> Vec<(String, u32)> {
    let mut found: Vec<(String, u32)> = std::fs::read_dir(folder)
        .expect("listed")
        .map(|e| {
            let e = e.expect("an entry");
            (e.file_name().to_string_lossy().to_string(), mode(&e.path()))
        })
        .collect();
    found.sort();
    found
}

#[test]
fn the_data_folder_is_0700_and_its_files_0600_under_umask_022() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("relay-data");
    let log = tmp.path().join("serve.log");
    let (relay, url) = serve_under_umask_022(&data, &log);

    // Store something of every kind the relay keeps: an agent, a pairing offer, a webhook secret (the push key
    // is made at the first start).
    let agent_home = tempfile::tempdir().expect("tempdir");
    let agent = |args: &[&str]| {
        let mut c = pacerelle(agent_home.path(), &url);
        c.args(args);
        c
    };
    let out = run(agent(&["agent", "create", "--name", "umask test", "--json"]));
    assert!(out.status.success(), "agent create: {}", stderr(&out));
    let out = run(agent(&["pair", "--json"]));
    assert!(out.status.success(), "pair: {}", stderr(&out));
    let out = run_with_stdin(
        agent(&["webhook", "set", "http://127.0.0.1:9/hook", "--secret-file", "-"]),
        b"0123456789abcdef0123456789abcdef\n",
    );
    assert!(out.status.success(), "webhook set: {}", stderr(&out));

    assert_eq!(mode(&data), 0o700, "the data folder");
    let expected = |m: u32| {
        [
            "pacerelle.db",
            "pacerelle.db-shm",
            "pacerelle.db-wal",
            "push.key",
            "webhook.key",
        ]
        .map(|name| (name.to_string(), m))
        .to_vec()
    };
    assert_eq!(files(&data), expected(0o600));
    drop(relay);

    // Loosened by hand (or left so by an earlier version): tightened at the next start, and said so.
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    for (name, _) in files(&data) {
        std::fs::set_permissions(data.join(name), std::fs::Permissions::from_mode(0o644)).expect("chmod");
    }
    assert_eq!(files(&data), expected(0o644));
    let (relay, url) = serve_under_umask_022(&data, &log);
    let out = run({
        let mut c = pacerelle(agent_home.path(), &url);
        c.args(["webhook", "show", "--json"]);
        c
    });
    assert!(out.status.success(), "the relay works: {}", stderr(&out));
    assert_eq!(mode(&data), 0o700);
    assert_eq!(files(&data), expected(0o600));
    let said = std::fs::read_to_string(&log).expect("the log");
    assert!(
        said.contains("permissions restricted") && said.contains("webhook.key") && said.contains("push.key"),
        "{said}"
    );
    drop(relay);
}
