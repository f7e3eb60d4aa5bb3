//! The `pacerelle` command's own behaviour: errors, credential files, JSON output.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::process::Command;

fn pacerelle(home: &std::path::Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pacerelle"));
    c.env("PACERELLE_HOME", home)
        .env("PACERELLE_RELAY_URL", "http://127.0.0.1:9") // discard port: nothing listens
        .env_remove("PACERELLE_AGENT_ID")
        .env_remove("PACERELLE_AGENT_TOKEN");
    c
}

#[test]
fn commands_without_credentials_fail_with_a_clear_message() {
    let home = tempfile::tempdir().expect("tempdir");
    let out = pacerelle(home.path()).args(["send", "hi"]).output().expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not paired") && err.contains("pacerelle device join"),
        "{err}"
    );

    let out = pacerelle(home.path()).args(["pair"]).output().expect("run");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no agent credentials"));

    // With --json, each with a stable code: the relay's for a device without a credential, and the one
    // Python's InvalidInput carries for the same missing agent credentials.
    let coded = |args: &[&str]| -> serde_json::Value {
        let out = pacerelle(home.path()).args(args).output().expect("run");
        assert!(!out.status.success());
        serde_json::from_slice(&out.stderr).expect("a JSON error")
    };
    let err = coded(&["--json", "inbox"]);
    assert_eq!(err["code"], "unauthorized", "{err}");
    assert!(
        err["error"]
            .as_str()
            .expect("error")
            .starts_with("this terminal is not paired")
    );
    let err = coded(&["--json", "pair"]);
    assert_eq!(err["code"], "invalid_input", "{err}");
    assert!(
        err["error"]
            .as_str()
            .expect("error")
            .starts_with("no agent credentials"),
        "{err}"
    );
}

#[test]
fn a_malformed_token_or_link_is_refused_before_any_request() {
    let home = tempfile::tempdir().expect("tempdir");
    let out = pacerelle(home.path())
        .args(["pair"])
        .env("PACERELLE_AGENT_ID", "ag_x")
        .env("PACERELLE_AGENT_TOKEN", "pcr1_nope")
        .output()
        .expect("run");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("malformed agent token"));

    let out = pacerelle(home.path())
        .args(["device", "join", "https://x/pair#v9.zz"])
        .output()
        .expect("run");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("malformed pairing link"));
}

#[test]
fn an_unreachable_relay_is_reported_as_such_in_json() {
    let home = tempfile::tempdir().expect("tempdir");
    let out = pacerelle(home.path())
        .args(["agent", "create", "--name", "x", "--json"])
        .output()
        .expect("run");
    assert!(!out.status.success());
    let err: serde_json::Value = serde_json::from_slice(&out.stderr).expect("JSON error on stderr");
    assert!(
        err["error"].as_str().expect("error").contains("unreachable"),
        "{err}"
    );
}
