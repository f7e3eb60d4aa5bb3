//! Several approvals with real processes (docs/crypto.md §4.7b): `pacerelle ask --approvals 2` and a gate rule
//! `approvals = 2`, answered by two owner devices — the CLI as one terminal device, a second device through the
//! client. One yes leaves it waiting, two approve, a yes and a no deny, and the same device twice counts once.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::process::{Child, Output};
use std::time::Duration;

use common::{
    Setup, bash_call, decision, finish, next_question, project, run, run_with_stdin, spawn, stderr, stdout,
};
use pacerelle_client::Answer;

/// `pacerelle answer …` from the terminal device.
fn answer(setup: &Setup, id: &str, word: &str) -> Output {
    run({
        let mut c = setup.as_device();
        c.args(["answer", id, word]);
        c
    })
}

/// Whether `child` is still running a moment later.
async fn still_waiting(child: &mut Child) -> bool {
    tokio::time::sleep(Duration::from_millis(700)).await;
    child.try_wait().expect("try_wait").is_none()
}

#[tokio::test]
async fn two_approvals_need_two_devices_and_one_no_denies() {
    let setup = Setup::start().await;
    let tablet = setup.second_device("Bob's tablet").await;

    // With one more approval than devices: refused before anything is asked.
    let three = run({
        let mut c = setup.agent();
        c.args(["ask", "Deploy?", "--approvals", "3", "--expires", "1m"]);
        c
    });
    assert_eq!(three.status.code(), Some(3), "{}", stderr(&three));
    assert!(
        stderr(&three).contains("needs 3 approvals, but only 2 device(s)"),
        "{}",
        stderr(&three)
    );

    let mut child = spawn({
        let mut c = setup.agent();
        c.args([
            "ask",
            "Deploy v2 to production?",
            "--approvals",
            "2",
            "--id",
            "deploy-2",
            "--expires",
            "2m",
        ]);
        c
    });
    let q = next_question(&setup.device, &[]).await;
    assert_eq!((q.question_id.as_str(), q.approvals), ("deploy-2", 2));
    let first = answer(&setup, "deploy-2", "yes");
    assert!(first.status.success(), "{}", stderr(&first));
    assert!(
        stdout(&first).contains("approved deploy-2: 1 of 2 approvals, waiting for 1 more"),
        "{}",
        stdout(&first)
    );
    assert!(still_waiting(&mut child).await, "one yes leaves it waiting");
    // The same device again counts once.
    let again = answer(&setup, "deploy-2", "yes");
    assert!(again.status.success(), "{}", stderr(&again));
    assert!(
        still_waiting(&mut child).await,
        "the same device twice counts once"
    );
    // Everyone asked sees where it stands.
    let seen = next_question(&tablet, &[]).await;
    assert_eq!((seen.approvals, seen.answers.len()), (2, 1));
    let inbox = run({
        let mut c = setup.as_device();
        c.arg("inbox");
        c
    });
    assert!(stdout(&inbox).contains("1 of 2 approvals"), "{}", stdout(&inbox));

    tablet
        .answer("deploy-2", Answer::Yes)
        .await
        .expect("the second yes");
    let out = finish(child).await;
    assert_eq!(out.status.code(), Some(0), "two approvals: {}", stderr(&out));

    // A yes and a no: denied at once, without waiting for the expiry.
    let mut child = spawn({
        let mut c = setup.agent();
        c.args([
            "ask",
            "Drop the old tables?",
            "--approvals",
            "2",
            "--id",
            "drop-2",
            "--expires",
            "2m",
        ]);
        c
    });
    let q = next_question(&setup.device, &["deploy-2".to_string()]).await;
    assert_eq!(q.question_id, "drop-2");
    assert!(answer(&setup, "drop-2", "yes").status.success());
    assert!(still_waiting(&mut child).await);
    let started = std::time::Instant::now();
    tablet.answer("drop-2", Answer::No).await.expect("the no");
    let out = finish(child).await;
    assert_eq!(out.status.code(), Some(1), "a no denies: {}", stderr(&out));
    assert!(started.elapsed() < Duration::from_secs(30), "denied at once");
    // The question is closed: the other device's late answer is refused.
    let late = answer(&setup, "drop-2", "yes");
    assert!(!late.status.success());

    // The signed export carries both approvals of deploy-2, and verifies; an approval dropped or listed twice
    // is refused, naming the record (docs/crypto.md §4.9, steps q1 and q2).
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("log.json");
    let out = run({
        let mut c = setup.agent();
        c.args(["audit", "export", "--format", "signed", "-o"]).arg(&file);
        c
    });
    assert!(out.status.success(), "export: {}", stderr(&out));
    let verify = |path: &std::path::Path| {
        run({
            let mut c = setup.agent();
            c.args(["audit", "verify"]).arg(path);
            c
        })
    };
    let ok = verify(&file);
    assert!(ok.status.success(), "{}{}", stdout(&ok), stderr(&ok));
    let export: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&file).expect("read")).expect("json");
    let records = export["records"].as_array().expect("records");
    let n = records
        .iter()
        .position(|r| r["questionId"] == "deploy-2")
        .expect("deploy-2 exported");
    assert_eq!(records[n]["approvals"].as_array().map(Vec::len), Some(2));
    let denied = records
        .iter()
        .find(|r| r["questionId"] == "drop-2")
        .expect("drop-2 exported");
    assert_eq!(
        (denied["answer"]["type"].as_str(), denied["approved"].as_bool()),
        (Some("no"), Some(false))
    );
    for (what, reason) in [("dropped", "fewer approvals"), ("twice", "listed twice")] {
        let mut edited = export.clone();
        let approvals = edited["records"][n]["approvals"]
            .as_array_mut()
            .expect("approvals");
        match what {
            "dropped" => {
                approvals.remove(0);
            }
            _ => approvals[0] = approvals[1].clone(),
        }
        let path = dir.path().join(format!("{what}.json"));
        std::fs::write(&path, serde_json::to_vec(&edited).expect("json")).expect("write");
        let refused = verify(&path);
        assert_eq!(refused.status.code(), Some(1), "{what}");
        let text = stderr(&refused);
        assert!(
            text.contains(&format!("record {} (question deploy-2)", n + 1)) && text.contains(reason),
            "{what}: {text}"
        );
    }
}

#[tokio::test]
async fn a_gate_rule_with_two_approvals_runs_the_call_only_after_both() {
    let setup = Setup::start().await;
    let tablet = setup.second_device("Bob's tablet").await;
    let dir = project(
        "default = \"allow\"\n\n[[rule]]\ntool = \"Bash\"\ncommand = \"kubectl apply*\"\ndecision = \"ask\"\napprovals = 2\n",
    );
    // One approval within the budget: the call stays blocked (denied when the budget ends).
    let gate = |budget: &str, command: &str| {
        let mut c = setup.agent();
        c.args(["hook", "claude-code", "--budget", budget]);
        let input = bash_call(dir.path(), command);
        tokio::task::spawn_blocking(move || run_with_stdin(c, &input))
    };
    let running = gate("6", "kubectl apply -f prod.yaml");
    let q = next_question(&setup.device, &[]).await;
    assert!(q.grants.is_none(), "a rule with several approvals grants nothing");
    assert_eq!(q.approvals, 2);
    assert!(answer(&setup, &q.question_id, "yes").status.success());
    let out = running.await.expect("join");
    assert!(!decision(&out).0, "one approval of two runs nothing");

    // Both: the call runs.
    let running = gate("60", "kubectl apply -f prod.yaml");
    let q2 = next_question(&setup.device, std::slice::from_ref(&q.question_id)).await;
    assert!(answer(&setup, &q2.question_id, "yes").status.success());
    next_question(&tablet, std::slice::from_ref(&q.question_id)).await;
    tablet.answer(&q2.question_id, Answer::Yes).await.expect("yes");
    let out = running.await.expect("join");
    let (allowed, reason) = decision(&out);
    assert!(allowed, "{reason}");
}
