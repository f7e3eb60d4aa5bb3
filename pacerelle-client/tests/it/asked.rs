//! A question asked again under its id: resumed, with the first expiry, and said so; and the store of the
//! questions a host asked, binding a later wait to exactly the question asked.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::time::Duration;

use common::TestRelay;
use pacerelle_client::core::wire::code;
use pacerelle_client::{Answer, QuestionKind, QuestionState, agent::AskedStore, agent::QuestionRequest};

const NO_WAIT: Duration = Duration::ZERO;

#[tokio::test]
async fn asking_again_under_an_id_with_another_expiry_resumes_with_the_first_expiry() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let ask = |expires: u64| {
        QuestionRequest::yes_no("Run the migrations?")
            .with_id("migrate-1")
            .expires_in(Duration::from_secs(expires))
    };
    let first = agent.ask_user(ask(600)).await.expect("ask");
    assert!(!first.resumed, "{first:?}");
    let again = agent.ask_user(ask(3600)).await.expect("ask again");
    assert!(again.resumed, "{again:?}");
    assert_eq!(again.expires_at, first.expires_at, "the first expiry holds");
    assert_eq!(again.digest, first.digest);

    // Resumed after an answer: the answer stands, and it is still said to be resumed.
    device.answer("migrate-1", Answer::Yes).await.expect("yes");
    let once_more = agent.ask_user(ask(60)).await.expect("ask once more");
    assert!(once_more.resumed && once_more.expires_at == first.expires_at);
    let outcome = agent.wait_for_answer_to(&once_more, NO_WAIT).await.expect("read");
    assert!(outcome.approved && outcome.state == QuestionState::Answered);

    // A fresh id is not a resume.
    let other = agent
        .ask_user(QuestionRequest::yes_no("Run the migrations?").with_id("migrate-2"))
        .await
        .expect("ask");
    assert!(!other.resumed);

    // Old JSON of an Asked, without the field, still reads (as not resumed).
    let json = serde_json::json!({"questionId": "q", "expiresAt": first.expires_at});
    let old: pacerelle_client::agent::Asked = serde_json::from_value(json).expect("old JSON");
    assert!(!old.resumed && old.digest.is_none());
}

#[tokio::test]
async fn a_wait_with_the_remembered_digest_refuses_another_question_under_the_id() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let home = tempfile::tempdir().expect("tempdir");
    let store = AskedStore::new(Some(home.path()), agent.agent_id());
    let request = QuestionRequest::yes_no("Run the test suite?").with_id("x-1");
    let asked = agent.ask_user(request.clone()).await.expect("ask");
    store
        .record(&asked, &request.question, request.kind)
        .expect("record");

    // A different question under the same id is refused, and the entry of the first stays.
    let e = agent
        .ask_user(QuestionRequest::yes_no("Delete the production database?").with_id("x-1"))
        .await
        .expect_err("conflict");
    assert_eq!(e.code(), Some(code::QUESTION_ID_CONFLICT));
    let remembered = AskedStore::new(Some(home.path()), agent.agent_id())
        .get("x-1")
        .expect("kept");
    assert_eq!(remembered.question, "Run the test suite?");
    assert_eq!(remembered.kind, QuestionKind::YesNo);
    assert_eq!(remembered.digest, asked.digest.clone().unwrap());

    device.answer("x-1", Answer::Yes).await.expect("yes");
    let outcome = agent
        .wait_for_answer_to(&remembered.asked(), NO_WAIT)
        .await
        .expect("read");
    assert!(outcome.approved);

    // The same wait with the digest of another question: refused, never judged.
    let mut other = remembered.asked();
    other.digest = Some("another-digest".into());
    let e = agent
        .wait_for_answer_to(&other, NO_WAIT)
        .await
        .expect_err("another question");
    assert_eq!(e.code(), Some(code::QUESTION_ID_CONFLICT));
}
