//! `pacerelle ask --here` with real processes: an answer typed at the computer counts like the phone's (same
//! exit codes) and every device shows it as answered at the computer; the phone answering first decides
//! even while standard input stays open; without `--here` standard input is never read.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::io::Write;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use common::{Setup, next_question, stderr, stdout};
use pacerelle_client::{Answer, Channel, QuestionState, device::OpenedQuestion};

/// `pacerelle ask ARGS` as the agent, its standard input a pipe left open.
fn ask(setup: &Setup, args: &[&str]) -> Child {
    let mut c: Command = setup.agent();
    c.arg("ask")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn")
}

fn type_line(child: &mut Child, line: &str) {
    let stdin = child.stdin.as_mut().expect("stdin");
    stdin.write_all(line.as_bytes()).expect("write");
    stdin.flush().expect("flush");
}

/// Waits for the child to exit (its standard input left as it is), within a minute.
async fn finish(mut child: Child) -> Output {
    let stdin = child.stdin.take();
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::task::spawn_blocking(move || child.wait_with_output().expect("wait")),
    )
    .await
    .expect("ask exits")
    .expect("join");
    drop(stdin);
    out
}

/// The question as the device now reads it.
async fn as_the_device_sees(setup: &Setup, question_id: &str) -> OpenedQuestion {
    let list = setup.device.questions(None).await.expect("questions");
    list.questions
        .into_iter()
        .find(|q| q.question_id == question_id)
        .expect("the question")
}

#[tokio::test]
async fn an_answer_typed_here_counts_and_the_phone_shows_it_answered_at_the_computer() {
    let setup = Setup::start().await;

    // yes/no: a line that does not fit is refused and another one read.
    let mut child = ask(&setup, &["Deploy to production?", "--here"]);
    let q = next_question(&setup.device, &[]).await;
    type_line(&mut child, "maybe\n");
    type_line(&mut child, "YES\n");
    let out = finish(child).await;
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(stdout(&out).trim(), "yes");
    assert!(
        err.contains("Answer here too (yes/no), or on the phone:"),
        "{err}"
    );
    assert!(err.contains("\"maybe\" is not an answer"), "{err}");
    assert!(err.contains("answered here at the computer"), "{err}");
    assert!(!err.contains("Ana's phone"), "{err}");
    let seen = as_the_device_sees(&setup, &q.question_id).await;
    assert_eq!(seen.state, QuestionState::Answered);
    assert_eq!(seen.channel, Some(Channel::Host));
    assert_eq!(seen.answered_by, None);
    assert_eq!(seen.answer, Some(Answer::Yes));
    // The device can no longer answer it.
    assert!(
        setup.device.answer(&q.question_id, Answer::No).await.is_err(),
        "answered once"
    );

    // no: exit 1, as for the phone; --json says where it was answered. Standard input ends after the line.
    let mut child = ask(&setup, &["Drop the table?", "--here", "--json"]);
    let q2 = next_question(&setup.device, std::slice::from_ref(&q.question_id)).await;
    type_line(&mut child, "n\n");
    drop(child.stdin.take());
    let out = finish(child).await;
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let outcome: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(outcome["state"], "answered");
    assert_eq!(outcome["channel"], "host");
    assert_eq!(outcome["approved"], false);
    assert_eq!(outcome["answerText"], "no");
    assert_eq!(outcome["answeredBy"], serde_json::Value::Null);
    let seen = as_the_device_sees(&setup, &q2.question_id).await;
    assert_eq!(
        (seen.channel, seen.answer),
        (Some(Channel::Host), Some(Answer::No))
    );

    // A choice of several, by name (any case) and by number.
    let mut child = ask(
        &setup,
        &[
            "Where to deploy?",
            "--choice",
            "staging",
            "--choice",
            "production",
            "--multiple",
            "--here",
        ],
    );
    let q3 = next_question(&setup.device, &[q.question_id.clone(), q2.question_id.clone()]).await;
    type_line(&mut child, "moon\n");
    type_line(&mut child, "Staging, 2\n");
    let out = finish(child).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "staging, production");
    assert!(
        stderr(&out).contains("\"moon\" is not an option"),
        "{}",
        stderr(&out)
    );
    let seen = as_the_device_sees(&setup, &q3.question_id).await;
    assert_eq!(
        seen.answer,
        Some(Answer::Options(vec!["staging".into(), "production".into()]))
    );
}

#[tokio::test]
async fn the_phone_answering_first_decides_while_standard_input_stays_open() {
    let setup = Setup::start().await;

    let mut child = ask(&setup, &["Deploy to production?", "--here"]);
    let q = next_question(&setup.device, &[]).await;
    setup.device.answer(&q.question_id, Answer::No).await.expect("no");
    // Typed after the phone answered: ignored, whether it is read before the exit or not.
    if let Some(stdin) = child.stdin.as_mut() {
        let _ = stdin.write_all(b"yes\n");
        let _ = stdin.flush();
    }
    let out = finish(child).await;
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(stdout(&out).trim(), "no");
    assert!(err.contains("answered by Ana's phone"), "{err}");
    let seen = as_the_device_sees(&setup, &q.question_id).await;
    assert_eq!(
        (seen.channel, seen.answer),
        (Some(Channel::Phone), Some(Answer::No))
    );

    // Nothing typed at all, standard input open: the phone's yes exits 0.
    let child = ask(&setup, &["Merge?", "--here"]);
    let q2 = next_question(&setup.device, std::slice::from_ref(&q.question_id)).await;
    setup
        .device
        .answer(&q2.question_id, Answer::Yes)
        .await
        .expect("yes");
    let out = finish(child).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "yes");

    // Standard input ends at once: the wait for the phone goes on.
    let mut child = ask(&setup, &["Tag it?", "--here"]);
    drop(child.stdin.take());
    let q3 = next_question(&setup.device, &[q.question_id.clone(), q2.question_id.clone()]).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        as_the_device_sees(&setup, &q3.question_id).await.state,
        QuestionState::Pending
    );
    setup
        .device
        .answer(&q3.question_id, Answer::Yes)
        .await
        .expect("yes");
    let out = finish(child).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("waiting for the phone"), "{}", stderr(&out));
}

#[tokio::test]
async fn without_here_standard_input_is_ignored() {
    let setup = Setup::start().await;

    let mut child = ask(&setup, &["Deploy to production?"]);
    let q = next_question(&setup.device, &[]).await;
    type_line(&mut child, "yes\n");
    drop(child.stdin.take());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let seen = as_the_device_sees(&setup, &q.question_id).await;
    assert_eq!(seen.state, QuestionState::Pending, "stdin must not answer");
    setup.device.answer(&q.question_id, Answer::No).await.expect("no");
    let out = finish(child).await;
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(!err.contains("Answer here too"), "{err}");
    assert!(err.contains("waiting for the answer on the phone"), "{err}");
    // Answered on the phone, as always.
    assert_eq!(
        as_the_device_sees(&setup, &q.question_id).await.channel,
        Some(Channel::Phone)
    );
}
