//! Grants in the signed answer log, with real processes (docs/crypto.md §4.8b, §4.9): a device paired through the
//! CLI answers a gate question `pacerelle answer … yes --for 15m --scope 2`, the PreToolUse gate lets the same
//! calls run under the grant, `pacerelle audit export --format signed` writes the grant and its uses beside
//! the answer, and `pacerelle audit verify` checks them with nothing but the file; an edited use, expiry, scope
//! or a grant whose question is left out fails naming the grant.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use common::{Setup, audit_verify, bash_call, decision, next_question, run, run_with_stdin, stderr, stdout};
use serde_json::{Value, json};

const POLICY: &str = r#"
default = "ask"
grant = ["15m", "1h"]

[[rule]]
tool = "Bash"
command = "cargo *"
decision = "ask"
grant_prefix = ["cargo test"]
"#;

#[tokio::test]
async fn audit_export_carries_the_grants_and_their_uses_and_verify_checks_each() {
    let setup = Setup::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join(".pacerelle")).expect("mkdir");
    std::fs::write(dir.path().join(".pacerelle/policy.toml"), POLICY).expect("policy");
    let cwd = dir.path().to_path_buf();

    // The gate asks about `cargo test`; the device answers yes and grants `cargo test …` for 15 minutes.
    let running = {
        let mut c = setup.agent();
        c.args(["hook", "claude-code", "--budget", "60"]);
        let input = bash_call(&cwd, "cargo test");
        tokio::task::spawn_blocking(move || run_with_stdin(c, &input))
    };
    let q = next_question(&setup.device, &[]).await;
    let granted = run({
        let mut c = setup.as_device();
        c.args(["answer", &q.question_id, "yes", "--for", "15m", "--scope", "2"]);
        c
    });
    assert!(granted.status.success(), "{}", stderr(&granted));
    let (allowed, reason) = decision(&running.await.expect("join"));
    assert!(allowed, "{reason}");

    // The grant lets three calls run without a question.
    let commands = [
        "cargo test",
        "cargo test -p pacerelle-core",
        "cargo test --release",
    ];
    for command in commands {
        let mut c = setup.agent();
        c.args(["hook", "claude-code", "--budget", "5"]);
        let (allowed, reason) = decision(&run_with_stdin(c, &bash_call(&cwd, command)));
        assert!(allowed, "{command}: {reason}");
        assert!(reason.contains("allowed by grant"), "{command}: {reason}");
    }

    let file = dir.path().join("answers.json");
    let out = run({
        let mut c = setup.agent();
        c.args(["audit", "export", "--format", "signed", "-o"]).arg(&file);
        c
    });
    assert!(out.status.success(), "export: {}", stderr(&out));
    assert!(
        stderr(&out).contains("1 answer and 1 grant written"),
        "{}",
        stderr(&out)
    );
    let good: Value = serde_json::from_slice(&std::fs::read(&file).expect("export")).expect("json");
    assert_eq!(good["records"][0]["questionId"], q.question_id.as_str());
    let grant = &good["grants"][0];
    assert_eq!(grant["id"], q.question_id.as_str());
    assert_eq!(grant["deviceId"], good["records"][0]["deviceId"]);
    assert_eq!(grant["grantedAt"], good["records"][0]["answeredAt"]);
    assert_eq!(grant["question"], good["records"][0]["question"]);
    assert_eq!(grant["grant"]["scope"]["match"], "prefix");
    let used: Vec<(&str, &str)> = grant["uses"]
        .as_array()
        .expect("uses")
        .iter()
        .map(|u| (u["command"].as_str().unwrap(), u["folder"].as_str().unwrap()))
        .collect();
    let folder = cwd.display().to_string();
    assert_eq!(
        used,
        commands.map(|c| (c, folder.as_str())),
        "each use, in the order it ran"
    );

    let out = audit_verify(&file, false);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "✓ 1 answer and 1 grant (3 uses) verify");
    let out = audit_verify(&file, true);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(
        (&v["verified"], &v["answers"], &v["grants"], &v["uses"]),
        (&json!(true), &json!(1), &json!(1), &json!(3))
    );

    // The file edited: each change fails naming the grant (and the use), exit status 1.
    type Edit = Box<dyn Fn(&mut Value)>;
    let expires_at = |e: &Value, minutes: i64| {
        let at = e["grants"][0]["grantedAt"].as_str().unwrap();
        let at = pacerelle_client::Timestamp::parse(at).unwrap();
        at.plus_millis(minutes * 60_000).to_rfc3339()
    };
    let edits: Vec<(&str, Edit, Option<u64>, &str, &str)> = vec![
        (
            "a use's command",
            Box::new(|e| e["grants"][0]["uses"][1]["command"] = "cargo publish".into()),
            Some(2),
            "u3",
            "the use is not covered by the grant's scope (its tool, command or folder)",
        ),
        (
            "the grant's expiry, within the offer",
            Box::new(move |e| e["grants"][0]["grant"]["expiresAt"] = expires_at(e, 60).into()),
            None,
            "g11",
            "the grant's signature does not verify",
        ),
        (
            "the grant's expiry, beyond the offer",
            Box::new(move |e| e["grants"][0]["grant"]["expiresAt"] = expires_at(e, 61).into()),
            None,
            "g10",
            "the grant lasts longer than its question offered, or ends before it starts",
        ),
        (
            "the grant's scope",
            Box::new(|e| e["grants"][0]["grant"]["scope"]["command"] = "cargo".into()),
            None,
            "g8",
            "the grant's scope is not one its question offered",
        ),
        (
            "a use after the expiry",
            Box::new(move |e| e["grants"][0]["uses"][2]["at"] = expires_at(e, 15).into()),
            Some(3),
            "u2",
            "the use is dated at or after the grant's expiry",
        ),
        (
            "the grant's question left out",
            Box::new(|e| e["records"] = json!([])),
            None,
            "g1",
            "the grant's question is not a record of the export",
        ),
    ];
    for (what, edit, grant_use, step, reason) in edits {
        let mut changed = good.clone();
        edit(&mut changed);
        let path = dir.path().join("changed.json");
        std::fs::write(&path, serde_json::to_vec_pretty(&changed).unwrap()).unwrap();
        let out = audit_verify(&path, false);
        assert_eq!(out.status.code(), Some(1), "{what}: {}", stdout(&out));
        let named = match grant_use {
            Some(n) => format!("grant 1 (question {}), use {n}: {reason}", q.question_id),
            None => format!("grant 1 (question {}): {reason}", q.question_id),
        };
        assert_eq!(stderr(&out).trim(), format!("✗ {named}"), "{what}");
        let out = audit_verify(&path, true);
        assert_eq!(out.status.code(), Some(1), "{what}");
        let v: Value = serde_json::from_slice(&out.stdout).expect("json");
        assert_eq!(
            (&v["verified"], &v["code"], &v["record"], &v["grant"], &v["use"]),
            (
                &json!(false),
                &json!("verification_failed"),
                &Value::Null,
                &json!(1),
                &json!(grant_use)
            ),
            "{what}"
        );
        assert_eq!(v["questionId"], q.question_id.as_str(), "{what}");
        assert_eq!(v["step"], step, "{what}");
        assert_eq!(v["error"], named.as_str(), "{what}");
    }
}
