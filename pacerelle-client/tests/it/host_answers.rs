//! Answers given at the computer (channel `host`) through the real client against a real relay: they count
//! only for a question sealed to accept them, the first answer wins on either channel, every device shows
//! where the question was answered, and neither the relay nor whatever holds the agent's key can turn one into
//! an approval of a question asked for the phone only — the gate's rule.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::time::Duration;

use common::TestRelay;
use pacerelle_client::core::envelope;
use pacerelle_client::core::policy::Policy;
use pacerelle_client::core::question::{AnswerPayload, HOST_NOT_ACCEPTED, host_answer_aad};
use pacerelle_client::core::wire::AnswerQuestion;
use pacerelle_client::gate::{self, Asking, Gate};
use pacerelle_client::{
    AgentClient, Answer, Channel, DeviceClient, ErrorKind, QuestionState, Timestamp, agent::AuditFilter,
    agent::QuestionRequest, agent::verify_answer_log, gate::Conclusion,
};

const NO_WAIT: Duration = Duration::ZERO;

/// The device's view of `question_id`, once the relay reports it in `state`.
async fn device_sees(
    device: &DeviceClient,
    question_id: &str,
    state: QuestionState,
) -> pacerelle_client::device::OpenedQuestion {
    for _ in 0..200 {
        let list = device.questions(None).await.expect("questions");
        assert!(list.rejected.is_empty(), "{:?}", list.rejected);
        if let Some(q) = list
            .questions
            .into_iter()
            .find(|q| q.question_id == question_id && q.state == state)
        {
            return q;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the device never saw {question_id} {}", state.as_str());
}

/// Posts an answer at the host sealed with the agent's own key, as anything holding the agent's token can,
/// bypassing the client's own refusal for a question that does not accept one.
async fn forge_host_answer(relay: &TestRelay, agent: &AgentClient, question_id: &str, digest: &str) -> u16 {
    let payload = AnswerPayload {
        grant: None,
        question_id: question_id.into(),
        answer: Answer::Yes,
        answered_at: Timestamp::now(),
        question_digest: Some(digest.into()),
        signature: None,
    };
    let self_key = agent.token().self_key(agent.agent_id());
    let body = AnswerQuestion {
        envelope: envelope::seal_json(
            &self_key,
            &host_answer_aad(agent.agent_id(), question_id),
            &payload,
        ),
        copy: None,
        closes: false,
    };
    reqwest::Client::new()
        .post(format!("{}/v1/agent/questions/{question_id}/answer", relay.url))
        .bearer_auth(&agent.token().bearer(agent.agent_id()).0)
        .json(&body)
        .send()
        .await
        .expect("request")
        .status()
        .as_u16()
}

#[tokio::test]
async fn a_yes_at_the_computer_approves_a_question_that_accepts_it_and_every_device_shows_where() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let asked = agent
        .ask_user(QuestionRequest::yes_no("Deploy?").answered_at_host(true))
        .await
        .expect("ask");
    let pending = device_sees(&device, &asked.question_id, QuestionState::Pending).await;
    assert_eq!(pending.channel, None);

    let before = Timestamp::now();
    let outcome = agent
        .answer_at_host(&asked.question_id, asked.digest.as_deref(), Answer::Yes)
        .await
        .expect("answer here");
    assert!(outcome.approved, "{outcome:?}");
    assert_eq!(outcome.channel, Some(Channel::Host));
    assert_eq!(outcome.answered_by, None);
    assert!(!outcome.signed);
    assert!(outcome.answered_at.is_some_and(|t| t >= before));
    assert_eq!(Conclusion::of(&outcome), Conclusion::Approved);

    // The wait reads the same, and a retry of the same answer changes nothing.
    let read = agent
        .wait_for_answer(&asked.question_id, NO_WAIT)
        .await
        .expect("read");
    assert_eq!((read.approved, read.channel), (true, Some(Channel::Host)));
    let again = agent
        .answer_at_host(&asked.question_id, asked.digest.as_deref(), Answer::Yes)
        .await
        .expect("retry");
    assert_eq!(again.answered_at, outcome.answered_at);

    // The device shows it answered at the computer, with the answer, and can no longer answer.
    let shown = device_sees(&device, &asked.question_id, QuestionState::Answered).await;
    assert_eq!(shown.channel, Some(Channel::Host));
    assert_eq!(shown.answered_by, None);
    assert_eq!(shown.answer, Some(Answer::Yes));
    let late = device
        .answer(&asked.question_id, Answer::No)
        .await
        .expect_err("answered already");
    assert_eq!(late.kind(), ErrorKind::QuestionClosed);
    let closed = pacerelle_client::device::ClosedQuestion::from_error(&late).expect("details");
    assert_eq!(closed.channel, Some(Channel::Host));
    assert_eq!(closed.answer, Some(Answer::Yes));
    assert!(late.to_string().contains("at the computer"), "{late}");

    // The answer log records the channel; the export anyone can verify holds device-signed answers only.
    let log = agent.answer_log(&AuditFilter::default()).await.expect("log");
    assert_eq!(log[0].channel, Some(Channel::Host));
    assert!(log[0].approved && !log[0].signed);
    let export = agent
        .export_answer_log(&AuditFilter::default())
        .await
        .expect("export");
    assert!(export.records.is_empty(), "{:?}", export.records);
    let bytes = serde_json::to_vec(&export).expect("json");
    assert_eq!(verify_answer_log(&bytes).expect("verifies"), 0);
}

#[tokio::test]
async fn the_first_answer_wins_on_either_channel() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;

    // The phone first: the answer at the computer is refused, and the phone's counts.
    let asked = agent
        .ask_user(QuestionRequest::yes_no("Merge?").answered_at_host(true))
        .await
        .expect("ask");
    device_sees(&device, &asked.question_id, QuestionState::Pending).await;
    device
        .answer(&asked.question_id, Answer::No)
        .await
        .expect("phone");
    let refused = agent
        .answer_at_host(&asked.question_id, asked.digest.as_deref(), Answer::Yes)
        .await
        .expect_err("too late");
    assert_eq!(refused.kind(), ErrorKind::QuestionClosed);
    let read = agent
        .wait_for_answer(&asked.question_id, NO_WAIT)
        .await
        .expect("read");
    assert_eq!(read.channel, Some(Channel::Phone));
    assert_eq!(read.answer, Some(Answer::No));
    assert!(!read.approved);

    // A choice and a text answered at the computer.
    let asked = agent
        .ask_user(QuestionRequest::choice("Which?", ["blue", "green"]).answered_at_host(true))
        .await
        .expect("ask");
    let wrong = agent
        .answer_at_host(&asked.question_id, None, Answer::Options(vec!["red".into()]))
        .await
        .expect_err("not an option");
    assert_eq!(wrong.kind(), ErrorKind::InvalidInput);
    let chose = agent
        .answer_at_host(&asked.question_id, None, Answer::Options(vec!["green".into()]))
        .await
        .expect("choice");
    assert!(chose.approved);
    assert_eq!(chose.answer, Some(Answer::Options(vec!["green".into()])));

    // Expired: too late at the computer too.
    let asked = agent
        .ask_user(
            QuestionRequest::text("Name?")
                .answered_at_host(true)
                .expires_in(Duration::from_secs(1)),
        )
        .await
        .expect("ask");
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let late = agent
        .answer_at_host(&asked.question_id, None, Answer::Text("x".into()))
        .await
        .expect_err("expired");
    assert_eq!(late.kind(), ErrorKind::QuestionClosed);
}

#[tokio::test]
async fn a_question_for_the_phone_only_never_counts_an_answer_at_the_computer() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;

    // The gate's question under the default policy: the phone only.
    let gate = Gate::new(Policy::parse("default = \"ask\"").expect("policy"), None);
    let asked = agent
        .ask_user(gate.question("Run `rm -rf build`?".into()))
        .await
        .expect("ask");
    let refused = agent
        .answer_at_host(&asked.question_id, asked.digest.as_deref(), Answer::Yes)
        .await
        .expect_err("phone only");
    assert_eq!(refused.kind(), ErrorKind::InvalidInput);
    device_sees(&device, &asked.question_id, QuestionState::Pending).await;

    // Whatever holds the agent's key can still post one: the relay records it (it cannot read the
    // question), but the verdict refuses it, and nothing can follow.
    assert_eq!(
        forge_host_answer(
            &relay,
            &agent,
            &asked.question_id,
            asked.digest.as_deref().unwrap()
        )
        .await,
        200
    );
    let read = agent
        .wait_for_answer(&asked.question_id, NO_WAIT)
        .await
        .expect("read");
    assert!(!read.approved, "{read:?}");
    assert_eq!(read.rejected.as_deref(), Some(HOST_NOT_ACCEPTED));
    assert!(read.is_final());
    assert_eq!(Conclusion::of(&read), Conclusion::Rejected);

    // Through the gate itself: the same refusal is a ruling that does not let the call run.
    let asking = tokio::spawn({
        let agent = agent.clone();
        let request = gate.question("Push to main?".into()).with_id("q_gate_host");
        async move { gate::ask(&agent, Asking::within(request, Duration::from_secs(20))).await }
    });
    let q = device_sees(&device, "q_gate_host", QuestionState::Pending).await;
    assert_eq!(
        forge_host_answer(&relay, &agent, "q_gate_host", &q.digest).await,
        200
    );
    let ruling = asking.await.expect("join");
    assert!(!ruling.lets_run(), "{ruling:?}");
    assert_eq!(ruling.conclusion, Conclusion::Rejected);

    // A policy that lists the host lets the same answer approve.
    let wide = Gate::new(
        Policy::parse("default = \"ask\"\nchannels = [\"phone\", \"host\"]").expect("policy"),
        None,
    );
    let asked = agent
        .ask_user(wide.question("Tag a release?".into()))
        .await
        .expect("ask");
    let outcome = agent
        .answer_at_host(&asked.question_id, asked.digest.as_deref(), Answer::Yes)
        .await
        .expect("answer here");
    assert!(outcome.approved);
}

#[tokio::test]
async fn answers_relabelled_in_the_relays_database_are_never_approved() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let pool = sqlx::SqlitePool::connect(&format!(
        "sqlite://{}",
        relay.dir.path().join("pacerelle.db").display()
    ))
    .await
    .expect("open the relay's database");

    // A phone's yes relabelled as given at the computer: it does not open with the agent's key.
    let asked = agent
        .ask_user(QuestionRequest::yes_no("Ship?").answered_at_host(true))
        .await
        .expect("ask");
    device_sees(&device, &asked.question_id, QuestionState::Pending).await;
    device
        .answer(&asked.question_id, Answer::Yes)
        .await
        .expect("phone");
    sqlx::query(
        "UPDATE questions SET channel = 'host', answered_by = NULL
         WHERE item_seq = (SELECT seq FROM items WHERE kind = 'question' AND item_id = ?)",
    )
    .bind(&asked.question_id)
    .execute(&pool)
    .await
    .expect("relabel");
    let read = agent
        .wait_for_answer(&asked.question_id, NO_WAIT)
        .await
        .expect("read");
    assert!(!read.approved && read.rejected.is_some(), "{read:?}");

    // A yes at the computer attributed to the device: it does not open with the device's key.
    let asked = agent
        .ask_user(QuestionRequest::yes_no("Ship again?").answered_at_host(true))
        .await
        .expect("ask");
    agent
        .answer_at_host(&asked.question_id, None, Answer::Yes)
        .await
        .expect("answer here");
    sqlx::query(
        "UPDATE questions SET channel = 'phone', answered_by = ?
         WHERE item_seq = (SELECT seq FROM items WHERE kind = 'question' AND item_id = ?)",
    )
    .bind(&device.credentials().device_id)
    .bind(&asked.question_id)
    .execute(&pool)
    .await
    .expect("relabel");
    let read = agent
        .wait_for_answer(&asked.question_id, NO_WAIT)
        .await
        .expect("read");
    assert!(!read.approved && read.rejected.is_some(), "{read:?}");
}
