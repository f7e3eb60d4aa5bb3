//! Questions through the real client against a real relay: yes, no, expiry, cancel, choice and text, answers
//! tampered with or moved in the relay's database, notifications, the answer log and its exports, webhooks.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::time::Duration;

use common::TestRelay;
use pacerelle_client::core::wire::code;
use pacerelle_client::{
    AgentClient, Answer, DeviceClient, Level, QuestionKind, QuestionState, Timestamp, agent::AuditFilter,
    agent::QuestionRequest, core::wire::ItemKind,
};

const NO_WAIT: Duration = Duration::ZERO;

/// The id of the one pending question the device sees, once it is there.
async fn pending_question(device: &DeviceClient) -> String {
    for _ in 0..200 {
        let list = device
            .questions(Some(QuestionState::Pending))
            .await
            .expect("questions");
        assert!(list.rejected.is_empty(), "{:?}", list.rejected);
        if let Some(q) = list.questions.last() {
            return q.question_id.clone();
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("no question reached the device");
}

/// Asks with `ask()` while the device answers with `answer`.
async fn ask_and_answer(
    agent: &AgentClient,
    device: &DeviceClient,
    request: QuestionRequest,
    answer: Answer,
) -> pacerelle_client::agent::AnswerOutcome {
    let asking = tokio::spawn({
        let agent = agent.clone();
        async move { agent.ask(request, Duration::from_secs(60)).await }
    });
    let id = pending_question(device).await;
    device.answer(&id, answer).await.expect("answer");
    asking.await.expect("join").expect("ask")
}

fn database(relay: &TestRelay) -> std::path::PathBuf {
    relay.dir.path().join("pacerelle.db")
}

async fn db(relay: &TestRelay) -> sqlx::SqlitePool {
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(database(relay))
        .busy_timeout(Duration::from_secs(10));
    sqlx::SqlitePool::connect_with(options)
        .await
        .expect("open the relay's database")
}

#[tokio::test]
async fn a_yes_from_the_device_is_approved_with_its_author_and_time() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let before = Timestamp::now();
    let outcome = ask_and_answer(
        &agent,
        &device,
        QuestionRequest::yes_no("Deploy to production?").with_details("3 commits"),
        Answer::Yes,
    )
    .await;
    assert!(outcome.approved);
    assert_eq!(outcome.state, QuestionState::Answered);
    assert_eq!(outcome.answer, Some(Answer::Yes));
    assert_eq!(
        outcome.answered_by.as_deref(),
        Some(device.credentials().device_id.as_str())
    );
    assert_eq!(outcome.answered_by_name.as_deref(), Some("test phone"));
    // Two clocks, two names: the relay's acceptance and the phone's own time, sealed in the answer.
    let at = outcome.answered_at.expect("answered at (relay)");
    assert!(at >= before && at < outcome.expires_at);
    let device_at = outcome.device_answered_at.expect("answered at (device)");
    assert!(device_at >= before && device_at <= at);
    assert!(outcome.rejected.is_none());

    // Reading it again gives the same verdict; answering again from another state is refused.
    let again = agent
        .wait_for_answer(&outcome.question_id, NO_WAIT)
        .await
        .expect("read");
    assert!(again.approved);
}

#[tokio::test]
async fn a_wait_by_id_returns_pending_at_its_timeout_and_the_answer_once_given() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let asked = agent
        .ask_user(QuestionRequest::yes_no("Merge it?").expires_in(Duration::from_secs(120)))
        .await
        .expect("ask");

    // Within its timeout, nobody answers: the last, pending, outcome, never approved.
    let started = std::time::Instant::now();
    let pending = agent
        .wait_for_answer_by_id(&asked.question_id, Some(Duration::from_millis(1500)))
        .await
        .expect("pending");
    assert_eq!(pending.state, QuestionState::Pending);
    assert!(!pending.approved && !pending.is_final());
    assert_eq!(pending.expires_at, asked.expires_at);
    assert!(
        started.elapsed() >= Duration::from_millis(1500),
        "{:?}",
        started.elapsed()
    );

    // Without a timeout it waits until the question is final: here, the device's yes.
    let waiting = tokio::spawn({
        let agent = agent.clone();
        let id = asked.question_id.clone();
        async move { agent.wait_for_answer_by_id(&id, None).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    device
        .answer(&asked.question_id, Answer::Yes)
        .await
        .expect("answer");
    let outcome = waiting.await.expect("join").expect("answered");
    assert!(outcome.approved && outcome.is_final());
    assert_eq!(
        agent
            .wait_until_final_within(&asked, None)
            .await
            .expect("read again")
            .answer,
        Some(Answer::Yes)
    );
}

#[tokio::test]
async fn a_no_is_answered_but_not_approved() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let outcome = ask_and_answer(
        &agent,
        &device,
        QuestionRequest::yes_no("Delete the branch?"),
        Answer::No,
    )
    .await;
    assert!(!outcome.approved);
    assert_eq!(outcome.state, QuestionState::Answered);
    assert_eq!(outcome.answer, Some(Answer::No));
    assert!(outcome.rejected.is_none());
}

#[tokio::test]
async fn no_answer_expires_is_never_approved_and_the_log_says_expired_not_denied() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let outcome = agent
        .ask(
            QuestionRequest::yes_no("Rotate the keys?").expires_in(Duration::from_secs(1)),
            Duration::from_secs(30),
        )
        .await
        .expect("ask");
    assert_eq!(outcome.state, QuestionState::Expired);
    assert!(!outcome.approved);
    assert!(outcome.answer.is_none());

    // A late answer is refused by the relay, and locally once the device has read the question.
    let err = device
        .answer(&outcome.question_id, Answer::Yes)
        .await
        .expect_err("too late");
    assert_eq!(err.code(), Some(code::QUESTION_EXPIRED), "{err}");
    let listed = device.questions(None).await.expect("questions");
    assert_eq!(listed.questions[0].state, QuestionState::Expired);
    assert!(!listed.questions[0].is_open());

    let log = agent.answer_log(&AuditFilter::default()).await.expect("log");
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].state, QuestionState::Expired);
    assert!(!log[0].approved);
    assert_eq!(log[0].answer, None, "a timeout is not a human no");
    assert_eq!(log[0].question, "Rotate the keys?");
    let mut jsonl = Vec::new();
    agent
        .export_jsonl(&AuditFilter::default(), &mut jsonl)
        .await
        .expect("export");
    let line: serde_json::Value = serde_json::from_slice(jsonl.trim_ascii_end()).expect("one JSON line");
    assert_eq!(line["state"], "expired");
    assert_eq!(line["approved"], false);
    assert!(line["answer"].is_null());
}

#[tokio::test]
async fn a_cancelled_question_refuses_answers_and_stays_cancelled() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let asked = agent
        .ask_user(QuestionRequest::yes_no("Merge the PR?"))
        .await
        .expect("ask");
    let id = pending_question(&device).await;
    assert_eq!(id, asked.question_id);

    let cancelled = agent.cancel_question(&id).await.expect("cancel");
    assert_eq!(cancelled.state, QuestionState::Cancelled);
    assert!(!cancelled.approved);
    // Cancelling again changes nothing.
    assert_eq!(
        agent.cancel_question(&id).await.expect("again").state,
        QuestionState::Cancelled
    );

    // The device read it while pending: the relay refuses the answer.
    let err = device.answer(&id, Answer::Yes).await.expect_err("refused");
    assert_eq!(err.code(), Some(code::QUESTION_CANCELLED), "{err}");
    // Once read as cancelled, the client refuses it without asking the relay.
    device.questions(None).await.expect("questions");
    let err = device.answer(&id, Answer::Yes).await.expect_err("refused");
    assert_eq!(err.code(), Some(code::QUESTION_CANCELLED));

    let outcome = agent.wait_for_answer(&id, NO_WAIT).await.expect("read");
    assert_eq!(outcome.state, QuestionState::Cancelled);
    assert!(!outcome.approved);
    let log = agent
        .answer_log(&AuditFilter {
            state: Some(QuestionState::Cancelled),
            ..Default::default()
        })
        .await
        .expect("log");
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].state, QuestionState::Cancelled);
}

#[tokio::test]
async fn an_answer_altered_in_the_relays_database_is_never_approved() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let outcome = ask_and_answer(
        &agent,
        &device,
        QuestionRequest::yes_no("Pay the invoice?"),
        Answer::No,
    )
    .await;
    assert!(!outcome.approved);

    // Flip one character of the sealed answer in the database.
    let pool = db(&relay).await;
    let (seq, sealed): (i64, String) = sqlx::query_as(
        "SELECT q.item_seq, q.answer_envelope FROM questions q JOIN items i ON i.seq = q.item_seq
         WHERE i.item_id = ?",
    )
    .bind(&outcome.question_id)
    .fetch_one(&pool)
    .await
    .expect("stored answer");
    let mut chars: Vec<char> = sealed.chars().collect();
    let i = chars.len() / 2;
    chars[i] = if chars[i] == 'A' { 'B' } else { 'A' };
    let altered: String = chars.into_iter().collect();
    sqlx::query("UPDATE questions SET answer_envelope = ? WHERE item_seq = ?")
        .bind(&altered)
        .bind(seq)
        .execute(&pool)
        .await
        .expect("tamper");

    let read = agent
        .wait_for_answer(&outcome.question_id, NO_WAIT)
        .await
        .expect("read");
    assert!(!read.approved);
    assert!(read.answer.is_none());
    assert!(read.rejected.is_some(), "{read:?}");
    assert!(read.is_final());
    let log = agent.answer_log(&AuditFilter::default()).await.expect("log");
    assert!(!log[0].approved && log[0].rejected.is_some());
}

#[tokio::test]
async fn a_yes_copied_from_another_question_is_never_approved() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let yes = ask_and_answer(
        &agent,
        &device,
        QuestionRequest::yes_no("Harmless thing?"),
        Answer::Yes,
    )
    .await;
    assert!(yes.approved);
    let no = ask_and_answer(
        &agent,
        &device,
        QuestionRequest::yes_no("Dangerous thing?"),
        Answer::No,
    )
    .await;
    assert!(!no.approved);

    // The relay swaps the two sealed answers: the yes now sits on the dangerous question.
    let pool = db(&relay).await;
    let row = |id: String| {
        let pool = pool.clone();
        async move {
            sqlx::query_as::<_, (i64, String)>(
                "SELECT q.item_seq, q.answer_envelope FROM questions q JOIN items i ON i.seq = q.item_seq
                 WHERE i.item_id = ?",
            )
            .bind(id)
            .fetch_one(&pool)
            .await
            .expect("row")
        }
    };
    let (yes_seq, yes_env) = row(yes.question_id.clone()).await;
    let (no_seq, no_env) = row(no.question_id.clone()).await;
    for (seq, env) in [(no_seq, &yes_env), (yes_seq, &no_env)] {
        sqlx::query("UPDATE questions SET answer_envelope = ? WHERE item_seq = ?")
            .bind(env)
            .bind(seq)
            .execute(&pool)
            .await
            .expect("swap");
    }

    for id in [&no.question_id, &yes.question_id] {
        let read = agent.wait_for_answer(id, NO_WAIT).await.expect("read");
        assert!(!read.approved, "{read:?}");
        assert!(read.rejected.is_some(), "{read:?}");
    }
    // The answer log, judged by the same verdict, approves neither.
    let log = agent.answer_log(&AuditFilter::default()).await.expect("log");
    assert!(log.iter().all(|e| !e.approved));
}

#[tokio::test]
async fn a_choice_and_a_text_question_round_trip_with_author_and_time() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;

    let request =
        QuestionRequest::choice("Where to deploy?", ["staging", "production", "both regions"]).multiple(true);
    let asking = tokio::spawn({
        let agent = agent.clone();
        async move { agent.ask(request, Duration::from_secs(60)).await }
    });
    let id = pending_question(&device).await;
    let list = device.questions(None).await.expect("questions");
    let q = list
        .questions
        .iter()
        .find(|q| q.question_id == id)
        .expect("listed");
    assert_eq!(q.kind, QuestionKind::Choice);
    assert_eq!(q.options, vec!["staging", "production", "both regions"]);
    assert!(q.multiple && q.is_open());
    // Options that were not offered are refused locally.
    let err = device
        .answer(&id, Answer::Options(vec!["moon".into()]))
        .await
        .expect_err("not an option");
    assert!(matches!(err, pacerelle_client::Error::InvalidInput(_)), "{err}");
    let answered = device
        .answer(
            &id,
            Answer::Options(vec!["staging".into(), "both regions".into()]),
        )
        .await
        .expect("answer");
    assert_eq!(answered.state, QuestionState::Answered);
    let outcome = asking.await.expect("join").expect("ask");
    assert!(outcome.approved);
    assert_eq!(
        outcome.answer,
        Some(Answer::Options(vec!["staging".into(), "both regions".into()]))
    );
    assert_eq!(outcome.answer_text().as_deref(), Some("staging, both regions"));
    assert_eq!(outcome.answered_by_name.as_deref(), Some("test phone"));
    assert!(outcome.answered_at.is_some());

    let outcome = ask_and_answer(
        &agent,
        &device,
        QuestionRequest::text("What should the release be called?"),
        Answer::Text("Lighthouse".into()),
    )
    .await;
    assert_eq!(outcome.state, QuestionState::Answered);
    assert!(!outcome.approved, "a written answer is not a yes");
    assert_eq!(outcome.answer, Some(Answer::Text("Lighthouse".into())));
    assert_eq!(
        outcome.answered_by.as_deref(),
        Some(device.credentials().device_id.as_str())
    );
    assert!(outcome.answered_at.is_some());

    // The same answer again by the same device is idempotent; another kind of answer is refused locally.
    let err = device
        .answer(&outcome.question_id, Answer::Yes)
        .await
        .expect_err("wrong kind");
    assert!(matches!(err, pacerelle_client::Error::InvalidInput(_)));
}

#[tokio::test]
async fn the_answer_log_exports_as_jsonl_and_csv_and_is_searchable() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    ask_and_answer(
        &agent,
        &device,
        QuestionRequest::yes_no("Deploy build 42 to Production?").with_details("commit abc123"),
        Answer::Yes,
    )
    .await;
    ask_and_answer(
        &agent,
        &device,
        QuestionRequest::text("Release name?"),
        Answer::Text("Zephyr, \"quoted\"\nand a new line".into()),
    )
    .await;
    let expired = agent
        .ask(
            QuestionRequest::yes_no("Wipe the cache?").expires_in(Duration::from_secs(1)),
            Duration::from_secs(30),
        )
        .await
        .expect("ask");
    assert_eq!(expired.state, QuestionState::Expired);

    let all = agent.answer_log(&AuditFilter::default()).await.expect("log");
    assert_eq!(all.len(), 3);
    assert_eq!(all[0].question, "Wipe the cache?", "newest first");
    assert_eq!(all[2].answer.as_deref(), Some("yes"));
    assert!(all[2].approved);
    assert_eq!(all[2].answered_by_name.as_deref(), Some("test phone"));
    assert_eq!(all[2].details.as_deref(), Some("commit abc123"));

    let limited = agent
        .answer_log(&AuditFilter {
            limit: Some(2),
            ..Default::default()
        })
        .await
        .expect("limited");
    assert_eq!(limited.len(), 2);
    let future = agent
        .answer_log(&AuditFilter {
            since: Some(Timestamp::now().plus_millis(60_000)),
            ..Default::default()
        })
        .await
        .expect("since");
    assert!(future.is_empty());

    let found = agent
        .search_answer_log("production", &AuditFilter::default())
        .await
        .expect("search");
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].question, "Deploy build 42 to Production?");
    let found = agent
        .search_answer_log("ZEPHYR", &AuditFilter::default())
        .await
        .expect("search answers");
    assert_eq!(found.len(), 1);
    let found = agent
        .search_answer_log("ABC123", &AuditFilter::default())
        .await
        .expect("search details");
    assert_eq!(found.len(), 1);

    let mut jsonl = Vec::new();
    assert_eq!(
        agent
            .export_jsonl(&AuditFilter::default(), &mut jsonl)
            .await
            .expect("jsonl"),
        3
    );
    let lines: Vec<serde_json::Value> = String::from_utf8(jsonl)
        .expect("utf-8")
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[1]["answer"], "Zephyr, \"quoted\"\nand a new line");
    assert_eq!(lines[0]["state"], "expired");

    let mut csv_bytes = Vec::new();
    agent
        .export_csv(&AuditFilter::default(), &mut csv_bytes)
        .await
        .expect("csv");
    let mut reader = csv::Reader::from_reader(csv_bytes.as_slice());
    let rows: Vec<csv::StringRecord> = reader.records().map(|r| r.expect("row")).collect();
    assert_eq!(rows.len(), 3);
    assert_eq!(&rows[0][2], "expired");
    assert_eq!(&rows[0][3], "false");
    assert_eq!(&rows[1][7], "Zephyr, \"quoted\"\nand a new line");
    assert_eq!(&rows[2][7], "yes");
    assert_eq!(&rows[2][3], "true");
}

#[tokio::test]
async fn without_an_owner_device_asking_and_notifying_fail_with_no_device() {
    let relay = TestRelay::start().await;
    let agent = AgentClient::register(&relay.url, "lonely", None)
        .await
        .expect("register")
        .with_home(Some(&pacerelle_test_support::home()));
    let err = agent
        .ask_user(QuestionRequest::yes_no("anyone?"))
        .await
        .expect_err("no device");
    assert_eq!(err.code(), Some(code::NO_DEVICE));
    let err = agent
        .notify("hello", None, Level::Info)
        .await
        .expect_err("no device");
    assert_eq!(err.code(), Some(code::NO_DEVICE));
    // Bad questions are refused before any request.
    for bad in [
        QuestionRequest::yes_no("  "),
        QuestionRequest::choice("one option?", ["only"]),
        QuestionRequest::choice("twice?", ["a", "a"]),
        QuestionRequest::yes_no("forever?").expires_in(Duration::from_secs(8 * 24 * 3600)),
        QuestionRequest::yes_no("id?").with_id("bad id"),
    ] {
        let err = agent.ask_user(bad).await.expect_err("invalid");
        assert!(
            matches!(
                err,
                pacerelle_client::Error::InvalidInput(_) | pacerelle_client::Error::Core(_)
            ),
            "{err}"
        );
    }
}

#[tokio::test]
async fn questions_and_notifications_appear_in_the_conversation_and_asking_is_idempotent() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    agent
        .notify("Build finished", Some("CI"), Level::Success)
        .await
        .expect("notify");
    let first = agent
        .ask_user(
            QuestionRequest::choice("Pick one", ["a", "b"])
                .with_id("deploy-7")
                .with_details("details here"),
        )
        .await
        .expect("ask");
    let again = agent
        .ask_user(
            QuestionRequest::choice("Pick one", ["a", "b"])
                .with_id("deploy-7")
                .with_details("details here"),
        )
        .await
        .expect("ask again");
    assert!(
        !first.resumed && again.resumed,
        "the second ask resumed the first"
    );
    assert_eq!(
        again,
        pacerelle_client::agent::Asked {
            resumed: true,
            ..first.clone()
        },
        "the stored question, with its first expiry"
    );

    let page = device.conversation(None, NO_WAIT).await.expect("conversation");
    assert!(page.rejected.is_empty(), "{:?}", page.rejected);
    assert_eq!(page.items.len(), 2, "{:?}", page.items);
    let n = &page.items[0];
    assert_eq!(n.kind, ItemKind::Notification);
    assert_eq!(n.text, "Build finished");
    assert_eq!(n.title.as_deref(), Some("CI"));
    assert_eq!(n.level, Some(Level::Success));
    let q = &page.items[1];
    assert_eq!(q.kind, ItemKind::Question);
    assert_eq!(q.id, "deploy-7");
    assert_eq!(q.text, "Pick one");
    let opened = q.question.as_ref().expect("opened question");
    assert_eq!(opened.options, vec!["a", "b"]);
    assert_eq!(opened.details.as_deref(), Some("details here"));
    assert_eq!(opened.state, QuestionState::Pending);
    assert_eq!(opened.expires_at, first.expires_at);

    // A parked wait returns once the answer arrives.
    let waiting = tokio::spawn({
        let agent = agent.clone();
        async move { agent.wait_for_answer("deploy-7", Duration::from_secs(30)).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    device
        .answer("deploy-7", Answer::Options(vec!["b".into()]))
        .await
        .expect("answer");
    let outcome = waiting.await.expect("join").expect("wait");
    assert!(outcome.approved);
    assert_eq!(outcome.answer, Some(Answer::Options(vec!["b".into()])));
    // A retry by the same device returns its answer; the conversation shows the question answered.
    device
        .answer("deploy-7", Answer::Options(vec!["b".into()]))
        .await
        .expect("retry");
    let page = device.conversation(None, NO_WAIT).await.expect("conversation");
    let q = page.items[1].question.as_ref().expect("question");
    assert_eq!(q.state, QuestionState::Answered);
}

#[tokio::test]
async fn a_relay_that_goes_away_never_yields_an_approval() {
    let relay = TestRelay::start().await;
    let (agent, _device) = relay.agent_and_device().await;
    let asked = agent
        .ask_user(QuestionRequest::yes_no("Proceed?").expires_in(Duration::from_secs(2)))
        .await
        .expect("ask");
    let _dir = relay.stop().await;
    let result = agent
        .wait_until_final(&asked, tokio::time::Instant::now() + Duration::from_secs(30))
        .await;
    match result {
        Ok(outcome) => {
            assert!(!outcome.approved);
            assert_ne!(outcome.state, QuestionState::Answered);
        }
        Err(e) => assert!(e.is_transient(), "{e}"),
    }
}

#[tokio::test]
async fn a_webhook_delivery_verifies_with_the_helper() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
    let secret = "whsec_test_0123456789";
    let info = agent.set_webhook(&url, secret).await.expect("set");
    assert_eq!(info.url.as_deref(), Some(url.as_str()));
    assert_eq!(
        agent.webhook().await.expect("get").url.as_deref(),
        Some(url.as_str())
    );
    assert!(agent.set_webhook("ftp://x", secret).await.is_err());
    assert!(agent.set_webhook(&url, "short").await.is_err());

    let receiver = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.expect("accept");
        let mut raw = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            let n = socket.read(&mut buf).await.expect("read");
            assert!(n > 0, "connection closed early");
            raw.extend_from_slice(&buf[..n]);
            if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&raw[..end]).to_string();
                let length: usize = head
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("content-length")
                            .then(|| v.trim().parse().ok())?
                    })
                    .expect("content-length");
                if raw.len() >= end + 4 + length {
                    let body = raw[end + 4..end + 4 + length].to_vec();
                    socket
                        .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                        .await
                        .expect("respond");
                    return (head, body);
                }
            }
        }
    });

    let outcome = ask_and_answer(&agent, &device, QuestionRequest::yes_no("Ship it?"), Answer::Yes).await;
    let (head, body) = tokio::time::timeout(Duration::from_secs(30), receiver)
        .await
        .expect("delivered in time")
        .expect("join");
    let signature = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(pacerelle_client::agent::SIGNATURE_HEADER)
                .then(|| v.trim().to_string())
        })
        .expect("signature header");
    let event = pacerelle_client::agent::verify_webhook(
        secret,
        &signature,
        &body,
        Timestamp::now(),
        pacerelle_client::agent::DEFAULT_TOLERANCE,
    )
    .expect("a valid signature");
    assert_eq!(event.event_type, "question.answered");
    assert_eq!(event.question.question_id, outcome.question_id);
    assert_eq!(event.agent_id, agent.agent_id());
    // The same body with another secret, or altered, does not verify.
    assert!(
        pacerelle_client::agent::verify_webhook(
            "another-secret-000000",
            &signature,
            &body,
            Timestamp::now(),
            pacerelle_client::agent::DEFAULT_TOLERANCE
        )
        .is_err()
    );
    let deliveries = agent.webhook_deliveries(10).await.expect("deliveries");
    assert!(deliveries.iter().any(|d| d.question_id == outcome.question_id));
    let cleared = agent.clear_webhook().await.expect("clear");
    assert!(cleared.url.is_none());
    assert!(agent.webhook().await.expect("get").url.is_none());
}

#[tokio::test]
async fn an_answer_that_does_not_count_reports_the_state_and_the_answer_that_counts_never_itself() {
    use pacerelle_client::{agent::PairingOptions, device::ClosedQuestion};

    let relay = TestRelay::start().await;
    let (agent, phone) = relay.agent_and_device().await;
    let link = agent
        .create_pairing(PairingOptions::default())
        .await
        .expect("pairing");
    let tablet = DeviceClient::join(&link.link, "test tablet").await.expect("join");
    // The same phone in another process: it read the question while pending, and knows nothing since.
    let phone_elsewhere = DeviceClient::from_credentials(phone.credentials().clone()).expect("phone");
    let phone_id = phone.credentials().device_id.clone();

    let asked = agent
        .ask_user(QuestionRequest::yes_no("Deploy to production?"))
        .await
        .expect("ask");
    let id = asked.question_id;
    for device in [&phone, &tablet, &phone_elsewhere] {
        assert_eq!(pending_question(device).await, id);
    }
    let answered = phone.answer(&id, Answer::Yes).await.expect("yes");
    assert_eq!(answered.state, QuestionState::Answered);
    assert_eq!(
        answered.answer,
        Some(Answer::Yes),
        "the answer that counts, from its copy"
    );

    let closed_by_phone = |e: &pacerelle_client::Error, by_this_device: bool| {
        assert_eq!(e.code(), Some(code::QUESTION_ANSWERED), "{e}");
        let closed = ClosedQuestion::from_error(e).expect("a closed question");
        assert_eq!(closed.question_id, id);
        assert_eq!(closed.state, QuestionState::Answered);
        assert_eq!(
            closed.answer,
            Some(Answer::Yes),
            "the yes that counts, never the refused no"
        );
        assert_eq!(closed.answered_by.as_deref(), Some(phone_id.as_str()));
        assert_eq!(closed.answered_by_name.as_deref(), Some("test phone"));
        assert_eq!(closed.answered_at, answered.answered_at);
        assert_eq!(closed.by_this_device, by_this_device);
        assert!(e.to_string().contains("not recorded"), "{e}");
        assert!(
            !e.to_string().contains("yes"),
            "no answer in an error message: {e}"
        );
    };

    // Another device, which read it while pending: the relay refuses, the question is read again.
    let e = tablet.answer(&id, Answer::No).await.expect_err("too late");
    closed_by_phone(&e, false);
    // Once read as answered: refused without a request, with the same facts.
    let e = tablet.answer(&id, Answer::No).await.expect_err("too late");
    closed_by_phone(&e, false);

    // The same device with another answer: the relay returns the stored yes with 200; still a refusal.
    let e = phone_elsewhere
        .answer(&id, Answer::No)
        .await
        .expect_err("another answer");
    closed_by_phone(&e, true);
    let e = phone.answer(&id, Answer::No).await.expect_err("another answer");
    closed_by_phone(&e, true);
    // The same answer again is a retry, and succeeds.
    let again = phone_elsewhere.answer(&id, Answer::Yes).await.expect("retry");
    assert_eq!(again.answer, Some(Answer::Yes));
    assert_eq!(again.answered_at, answered.answered_at);

    let outcome = agent.wait_for_answer(&id, NO_WAIT).await.expect("outcome");
    assert!(outcome.approved);
    assert_eq!(outcome.answer, Some(Answer::Yes));

    // Cancelled while the tablet still reads it as pending: the state, and no answer.
    let asked = agent
        .ask_user(QuestionRequest::yes_no("Merge?"))
        .await
        .expect("ask");
    assert_eq!(pending_question(&tablet).await, asked.question_id);
    agent.cancel_question(&asked.question_id).await.expect("cancel");
    let e = tablet
        .answer(&asked.question_id, Answer::Yes)
        .await
        .expect_err("cancelled");
    assert_eq!(e.code(), Some(code::QUESTION_CANCELLED), "{e}");
    let closed = ClosedQuestion::from_error(&e).expect("a closed question");
    assert_eq!((closed.state, closed.answer), (QuestionState::Cancelled, None));

    // Expired: the state, and no answer.
    let asked = agent
        .ask_user(QuestionRequest::yes_no("Restart?").expires_in(Duration::from_secs(1)))
        .await
        .expect("ask");
    assert_eq!(pending_question(&tablet).await, asked.question_id);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let e = tablet
        .answer(&asked.question_id, Answer::Yes)
        .await
        .expect_err("expired");
    assert_eq!(e.code(), Some(code::QUESTION_EXPIRED), "{e}");
    let closed = ClosedQuestion::from_error(&e).expect("a closed question");
    assert_eq!((closed.state, closed.answer), (QuestionState::Expired, None));
}

#[tokio::test]
async fn the_status_counts_the_open_questions_each_side_sees_and_says_asking() {
    use pacerelle_client::agent::PairingOptions;
    use pacerelle_client::core::wire::Activity;
    let relay = TestRelay::start().await;
    let (agent, phone) = relay.agent_and_device().await;
    let link = agent
        .create_pairing(PairingOptions::default())
        .await
        .expect("link");
    let tablet = DeviceClient::join(&link.link, "tablet").await.expect("join");
    let before = agent.status().await.expect("status");
    assert_eq!((before.open_questions, before.activity()), (0, Activity::Offline));

    let asked = agent
        .ask_user(QuestionRequest::yes_no("Deploy to production?").approvals(2))
        .await
        .expect("ask");
    let id = pending_question(&phone).await;
    assert_eq!(id, asked.question_id);
    for status in [
        agent.status().await.expect("agent"),
        phone.status().await.expect("phone"),
        tablet.status().await.expect("tablet"),
    ] {
        assert_eq!((status.open_questions, status.activity()), (1, Activity::Asking));
    }

    // One of two approvals: the question stays open, but no longer waits for the phone.
    phone.answer(&id, Answer::Yes).await.expect("first yes");
    assert_eq!(phone.status().await.expect("phone").open_questions, 0);
    assert_eq!(tablet.status().await.expect("tablet").open_questions, 1);
    assert_eq!(agent.status().await.expect("agent").activity(), Activity::Asking);

    pending_question(&tablet).await;
    tablet.answer(&id, Answer::Yes).await.expect("second yes");
    for status in [
        agent.status().await.expect("agent"),
        phone.status().await.expect("phone"),
        tablet.status().await.expect("tablet"),
    ] {
        assert_eq!(status.open_questions, 0);
        assert_ne!(status.activity(), Activity::Asking);
    }
}
