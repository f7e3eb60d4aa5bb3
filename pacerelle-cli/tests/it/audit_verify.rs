//! `pacerelle audit export --format signed` and `pacerelle audit verify` with real processes: the phone's
//! signed answers verify (exit 0) with no credentials and no relay; any changed field of a record makes verify
//! exit 1 naming that record; a file that cannot be read or is not an export exits 2.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use common::{Setup, audit_verify, finish, next_question, run, spawn, stderr, stdout};
use pacerelle_client::Answer;
use pacerelle_client::core::b64;
use pacerelle_client::core::question::question_digest;
use pacerelle_client::core::signing::SigningKey;

/// A change made to an export, as a person with a text editor would.
type Edit = Box<dyn Fn(&mut serde_json::Value)>;

#[tokio::test]
async fn a_signed_export_verifies_and_any_changed_field_fails_naming_the_record() {
    let setup = Setup::start().await;

    // A yes answered with `pacerelle answer` (the device's home holds its signing key), a no and a chosen
    // option answered through the device client.
    let child = spawn({
        let mut c = setup.agent();
        c.args(["ask", "Deploy v2 to production?", "--id", "q_deploy", "--json"]);
        c
    });
    let q = next_question(&setup.device, &[]).await;
    let out = run({
        let mut c = setup.as_device();
        c.args(["answer", &q.question_id, "yes"]);
        c
    });
    assert!(out.status.success(), "answer: {}", stderr(&out));
    let out = finish(child).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let outcome: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json outcome");
    assert_eq!(outcome["approved"], true);
    assert_eq!(outcome["signed"], true, "{outcome}");

    let mut seen = vec![q.question_id.clone()];
    for (args, answer) in [
        (vec!["Drop the staging table?", "--id", "q_drop"], Answer::No),
        (
            vec![
                "Which region?",
                "--id",
                "q_region",
                "--choice",
                "eu",
                "--choice",
                "us",
            ],
            Answer::Options(vec!["us".into()]),
        ),
    ] {
        let child = spawn({
            let mut c = setup.agent();
            c.arg("ask").args(&args);
            c
        });
        let q = next_question(&setup.device, &seen).await;
        seen.push(q.question_id.clone());
        setup.device.answer(&q.question_id, answer).await.expect("answer");
        let out = finish(child).await;
        assert!(out.status.code().is_some_and(|c| c <= 1), "{}", stderr(&out));
    }

    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("answers.json");
    let out = run({
        let mut c = setup.agent();
        c.args(["audit", "export", "--format", "signed", "-o"]).arg(&file);
        c
    });
    assert!(out.status.success(), "export: {}", stderr(&out));
    assert!(stderr(&out).contains("3 answers written"), "{}", stderr(&out));
    let text = std::fs::read_to_string(&file).expect("export");
    assert!(text.contains("\n  \"records\""), "pretty JSON");
    let good: serde_json::Value = serde_json::from_str(&text).expect("json");
    let ids: Vec<&str> = good["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["questionId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["q_deploy", "q_drop", "q_region"]);
    assert_eq!(good["devices"][0]["name"], "Ana's phone");

    let out = audit_verify(&file, false);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "✓ 3 answers verify");
    let out = audit_verify(&file, true);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["verified"], true);
    assert_eq!(v["answers"], 3);

    // The export on standard output is the same document (but for the time it was made).
    let out = run({
        let mut c = setup.agent();
        c.args(["audit", "export", "--format", "signed"]);
        c
    });
    assert!(out.status.success(), "{}", stderr(&out));
    let again: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(again["records"], good["records"]);

    let other = SigningKey::generate().expect("key").public_key();
    let edits: Vec<(&str, Edit)> = vec![
        (
            "answer",
            Box::new(|e| e["records"][1]["answer"] = serde_json::json!({"type": "yes"})),
        ),
        (
            "question text",
            Box::new(|e| {
                let r = &mut e["records"][1];
                let bytes = b64::decode(r["question"].as_str().unwrap()).unwrap();
                let mut q: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
                q["question"] = "Drop the production table?".into();
                let bytes = serde_json::to_vec(&q).unwrap();
                r["question"] = b64::encode(&bytes).into();
                r["questionDigest"] = question_digest(&bytes).into();
            }),
        ),
        (
            "time",
            Box::new(|e| {
                let t = e["records"][1]["answeredAt"].as_str().unwrap().to_string();
                let t = pacerelle_client::Timestamp::parse(&t).unwrap().plus_millis(1000);
                e["records"][1]["answeredAt"] = t.to_rfc3339().into();
            }),
        ),
        (
            "device key",
            Box::new(move |e| e["records"][1]["signingKey"] = other.to_b64().into()),
        ),
    ];
    for (what, edit) in edits {
        let mut changed = good.clone();
        edit(&mut changed);
        let path = dir.path().join("changed.json");
        std::fs::write(&path, serde_json::to_vec_pretty(&changed).unwrap()).unwrap();
        let out = audit_verify(&path, false);
        assert_eq!(out.status.code(), Some(1), "{what}: {}", stdout(&out));
        assert!(
            stderr(&out).contains("record 2 (question q_drop): "),
            "{what}: {}",
            stderr(&out)
        );
        assert!(!stdout(&out).contains('✓'), "{what}");
        let out = audit_verify(&path, true);
        assert_eq!(out.status.code(), Some(1), "{what}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        assert_eq!(v["verified"], false);
        assert_eq!(v["code"], "verification_failed");
        assert_eq!(v["record"], 2);
        assert_eq!(v["questionId"], "q_drop");
    }
    // The device's key in the export's device list is every record's of that device: the first is named.
    let mut changed = good.clone();
    changed["devices"][0]["signingKey"] = other.to_b64().into();
    changed["devices"][0]["fingerprint"] = other.fingerprint().into();
    for r in changed["records"].as_array_mut().unwrap() {
        r["signingKey"] = other.to_b64().into();
    }
    let path = dir.path().join("device.json");
    std::fs::write(&path, serde_json::to_vec(&changed).unwrap()).unwrap();
    let out = audit_verify(&path, false);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("record 1 (question q_deploy): the signature does not verify"),
        "{}",
        stderr(&out)
    );
    // The first failing record is the one named.
    let mut changed = good.clone();
    changed["records"][2]["approved"] = false.into();
    changed["records"][0]["signature"] = serde_json::Value::Null;
    let path = dir.path().join("two.json");
    std::fs::write(&path, serde_json::to_vec(&changed).unwrap()).unwrap();
    let out = audit_verify(&path, false);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("record 1 (question q_deploy): the answer is not signed"),
        "{}",
        stderr(&out)
    );

    // Not an export, or not readable: 2 (nothing was checked).
    let path = dir.path().join("not.json");
    std::fs::write(&path, "hello").unwrap();
    let out = audit_verify(&path, false);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("not an answer-log export"),
        "{}",
        stderr(&out)
    );
    let mut changed = good.clone();
    changed["v"] = 2.into();
    std::fs::write(&path, serde_json::to_vec(&changed).unwrap()).unwrap();
    let out = audit_verify(&path, false);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("not a version 1"), "{}", stderr(&out));
    let out = audit_verify(&dir.path().join("missing.json"), false);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("cannot read"), "{}", stderr(&out));
}
