//! No input makes `pacerelle` panic: non-UTF-8 arguments and bad credential files give a clear error and a
//! documented exit code (2 for a usage error, 3 for `ask`, a deny decision for the gate), never exit 101.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::process::Output;

/// Every command and subcommand, as words before the argument under test.
const COMMANDS: &[&[&str]] = &[
    &["serve"],
    &["up"],
    &["agent", "create"],
    &["agent", "devices"],
    &["agent", "adopt"],
    &["agent", "revoke"],
    &["pair"],
    &["device", "join"],
    &["device", "leave"],
    &["send"],
    &["inbox"],
    &["answer"],
    &["status"],
    &["ask"],
    &["notify"],
    &["cancel"],
    &["audit", "export"],
    &["audit", "search"],
    &["webhook", "set"],
    &["webhook", "show"],
    &["webhook", "clear"],
    &["webhook", "deliveries"],
    &["hook", "claude-code"],
    &["hook", "codex"],
    &["hook", "install"],
];

fn bad() -> &'static OsStr {
    OsStr::from_bytes(b"\xff\xfe")
}

fn is_gate(words: &[&str]) -> bool {
    matches!(words, ["hook", "claude-code" | "codex"])
}

fn assert_no_panic(what: &str, out: &Output) {
    let err = common::stderr(out);
    assert_ne!(out.status.code(), Some(101), "{what}: exit 101\n{err}");
    assert!(out.status.code().is_some(), "{what}: killed by a signal\n{err}");
    assert!(!err.contains("panicked"), "{what}: {err}");
}

/// The exit code a command must give on an error it reports: 3 for `ask`, the gate's deny (0 with a
/// decision on stdout), else a usage error (2) or a failure (1).
fn assert_documented(what: &str, words: &[&str], out: &Output, usage: bool) {
    assert_no_panic(what, out);
    let code = out.status.code().unwrap();
    let err = common::stderr(out);
    if is_gate(words) {
        assert_eq!(code, 0, "{what}: {err}");
        assert!(
            common::stdout(out).contains("deny"),
            "{what}: {}",
            common::stdout(out)
        );
        return;
    } else if words[0] == "ask" {
        assert_eq!(code, 3, "{what}: {err}");
    } else if usage {
        assert_eq!(code, 2, "{what}: {err}");
    } else {
        assert!(code == 1 || code == 2, "{what}: exit {code}\n{err}");
    }
    assert!(!err.trim().is_empty(), "{what}: no message");
}

#[test]
fn a_non_utf8_argument_is_a_usage_error_for_every_command() {
    let home = tempfile::tempdir().expect("tempdir");
    for words in COMMANDS {
        // As a positional word, as the value of a text option, and as the value of the global --relay.
        let lines: Vec<Vec<OsString>> = vec![
            words.iter().map(OsString::from).chain([bad().into()]).collect(),
            words
                .iter()
                .map(OsString::from)
                .chain([OsString::from("--relay"), bad().into()])
                .collect(),
            [OsString::from("--relay"), bad().into()]
                .into_iter()
                .chain(words.iter().map(OsString::from))
                .collect(),
        ];
        for line in lines {
            let what = format!("pacerelle {line:?}");
            let mut c = common::pacerelle(home.path(), "http://127.0.0.1:9");
            c.args(&line);
            let out = common::run(c);
            assert_documented(&what, words, &out, true);
        }
    }
}

#[test]
fn a_non_utf8_command_word_or_relay_variable_does_not_panic() {
    let home = tempfile::tempdir().expect("tempdir");
    let mut c = common::pacerelle(home.path(), "http://127.0.0.1:9");
    c.arg(bad());
    let out = common::run(c);
    assert_no_panic("pacerelle \\xff", &out);
    assert_eq!(out.status.code(), Some(2));

    let mut c = common::pacerelle(home.path(), "http://127.0.0.1:9");
    c.env("PACERELLE_RELAY_URL", bad()).arg("status");
    let out = common::run(c);
    assert_no_panic("PACERELLE_RELAY_URL=\\xff pacerelle status", &out);
}

/// The commands that read `agent.json` or `device.json`, with arguments that are otherwise valid.
const READERS: &[&[&str]] = &[
    &["pair"],
    &["agent", "devices"],
    &["status"],
    &["notify", "hello"],
    &["cancel", "qs_x"],
    &["ask", "ok?", "--expires", "1s"],
    &["audit", "export"],
    &["webhook", "show"],
    &["send", "hi"],
    &["inbox"],
    &["answer", "qs_x", "yes"],
    &["device", "leave"],
];

#[test]
fn bad_credential_files_are_reported_by_name() {
    let contents: &[(&str, &[u8])] = &[
        ("non-UTF-8", b"\xff\xfe{\"relayUrl\": \"\xff\"}"),
        ("malformed", b"{\"relayUrl\": "),
        ("wrong shape", b"[1, 2, 3]"),
        ("empty", b""),
    ];
    for (label, bytes) in contents {
        let home = tempfile::tempdir().expect("tempdir");
        std::fs::write(home.path().join("agent.json"), bytes).unwrap();
        std::fs::write(home.path().join("device.json"), bytes).unwrap();
        for words in READERS {
            let what = format!("{label} files: pacerelle {}", words.join(" "));
            let mut c = common::pacerelle(home.path(), "http://127.0.0.1:9");
            c.args(*words);
            let out = common::run(c);
            assert_documented(&what, words, &out, false);
            assert_ne!(out.status.code(), Some(0), "{what}");
            let err = common::stderr(&out);
            assert!(
                err.contains("agent.json") || err.contains("device.json"),
                "{what}: {err}"
            );
        }
        let mut c = common::pacerelle(home.path(), "http://127.0.0.1:9");
        c.args(["hook", "claude-code"]);
        let out = common::run_with_stdin(
            c,
            br#"{"tool_name":"Bash","tool_input":{"command":"rm -rf /"},"hook_event_name":"PreToolUse"}"#,
        );
        assert_documented(
            &format!("{label} files: hook claude-code"),
            &["hook", "claude-code"],
            &out,
            false,
        );
    }
}

#[test]
fn a_malformed_token_in_agent_json_names_the_file() {
    let home = tempfile::tempdir().expect("tempdir");
    let path = home.path().join("agent.json");
    std::fs::write(
        &path,
        br#"{"relayUrl": "http://127.0.0.1:9", "agentId": "ag_x", "name": "x", "token": "pcr1_nope"}"#,
    )
    .unwrap();
    let mut c = common::pacerelle(home.path(), "http://127.0.0.1:9");
    c.arg("pair");
    let out = common::run(c);
    assert_eq!(out.status.code(), Some(1));
    let err = common::stderr(&out);
    assert!(err.contains(&path.display().to_string()), "{err}");
    assert!(!err.contains("PACERELLE_AGENT_TOKEN"), "{err}");

    // From the variables, the variable is named.
    let mut c = common::pacerelle(home.path(), "http://127.0.0.1:9");
    c.arg("pair")
        .env("PACERELLE_AGENT_ID", "ag_x")
        .env("PACERELLE_AGENT_TOKEN", "pcr1_nope");
    let err = common::stderr(&common::run(c));
    assert!(err.contains("PACERELLE_AGENT_TOKEN"), "{err}");
}

#[test]
fn malformed_credentials_in_device_json_name_the_file() {
    let home = tempfile::tempdir().expect("tempdir");
    let path = home.path().join("device.json");
    let creds = serde_json::json!({
        "relayUrl": "http://127.0.0.1:9", "agentId": "ag_x", "agentName": "x", "deviceId": "dv_x",
        "role": "owner", "deviceToken": "pcr1_nope", "deviceKey": "nope"
    });
    std::fs::write(&path, creds.to_string()).unwrap();
    let mut c = common::pacerelle(home.path(), "http://127.0.0.1:9");
    c.arg("inbox");
    let out = common::run(c);
    assert_no_panic("inbox", &out);
    assert_ne!(out.status.code(), Some(0));
    let err = common::stderr(&out);
    assert!(err.contains(&path.display().to_string()), "{err}");
}

#[test]
fn a_database_url_that_is_not_postgresql_is_refused_with_a_stable_code_before_anything_starts() {
    let home = tempfile::tempdir().expect("tempdir");
    let data = home.path().join("data");
    let mut c = common::pacerelle(home.path(), "http://127.0.0.1:9");
    c.args([
        "serve",
        "--json",
        "--listen",
        "127.0.0.1:0",
        "--database",
        "mysql://x/y",
        "--data",
    ])
    .arg(&data);
    let out = common::run(c);
    assert_eq!(out.status.code(), Some(1));
    let body: serde_json::Value = serde_json::from_str(common::stderr(&out).trim()).expect("one JSON error");
    assert_eq!(body["code"], "invalid_input", "{body}");
    assert!(
        body["error"]
            .as_str()
            .is_some_and(|e| e.contains("--database takes a PostgreSQL URL"))
    );
    assert!(!data.join("pacerelle.db").exists(), "no database was created");
}
