//! Partner mode: an agent asks its own users. A real relay on 127.0.0.1:0 with a real SQLite file; devices
//! joined from real links. What is addressed to one user reaches only that user's devices, only their answer
//! approves, and editing the relay's rows (re-addressing a question, moving a device, forging an answer)
//! never yields an approval.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::time::Duration;

use common::TestRelay;
use common::rows::{db, forge_answer};
use pacerelle_client::core::pairing::Role;
use pacerelle_client::core::wire::code;
use pacerelle_client::{
    AgentClient, Answer, DeviceClient, ErrorKind, Level, QuestionState, agent::AuditFilter,
    agent::ConnectOptions, agent::PairingOptions, agent::QuestionRequest, core::pairing::Branding,
    core::wire::ItemKind,
};

const NO_WAIT: Duration = Duration::ZERO;

struct Partner {
    agent: AgentClient,
    owner: DeviceClient,
    alice: DeviceClient,
    bob: DeviceClient,
    _home: tempfile::TempDir,
}

async fn partner(relay: &TestRelay) -> Partner {
    let home = tempfile::tempdir().unwrap();
    let registered = AgentClient::register(&relay.url, "Acme Support", None)
        .await
        .expect("register")
        .with_home(Some(&pacerelle_test_support::home()));
    let agent = AgentClient::new(&relay.url, registered.agent_id(), registered.token().clone())
        .expect("client")
        .with_home(Some(home.path()));
    let link = agent
        .create_pairing(PairingOptions::default())
        .await
        .expect("owner link");
    let owner = DeviceClient::join(&link.link, "owner phone")
        .await
        .expect("owner joins");
    let branding = Branding {
        accent_color: Some("#0a7d5a".into()),
        icon: Some("data:image/svg+xml;base64,PHN2Zy8+".into()),
    };
    let alice_link = agent
        .connect_user(
            "alice",
            "Alice",
            ConnectOptions {
                branding: Some(branding.clone()),
                ..Default::default()
            },
        )
        .await
        .expect("connect alice");
    let bob_link = agent
        .connect_user("bob", "Bob Marchetti", ConnectOptions::default())
        .await
        .expect("connect bob");
    let alice = DeviceClient::join(&alice_link.link, "alice's phone")
        .await
        .expect("alice joins");
    let bob = DeviceClient::join(&bob_link.link, "bob's phone")
        .await
        .expect("bob joins");
    // The offer told each device whom it answers for, and how the product looks.
    let creds = alice.credentials();
    assert_eq!(creds.role, Role::User);
    assert_eq!(
        creds
            .user
            .as_ref()
            .map(|u| (u.external_id.as_str(), u.name.as_str())),
        Some(("alice", "Alice"))
    );
    assert_eq!(creds.branding.as_ref(), Some(&branding));
    assert_eq!(bob.credentials().branding, None);
    Partner {
        agent,
        owner,
        alice,
        bob,
        _home: home,
    }
}

fn id(device: &DeviceClient) -> &str {
    device.credentials().device_id.as_str()
}

fn lists(device_questions: &pacerelle_client::device::QuestionList, question_id: &str) -> bool {
    device_questions
        .questions
        .iter()
        .any(|q| q.question_id == question_id)
}

#[tokio::test]
async fn a_users_question_reaches_only_that_user_and_only_their_yes_approves() {
    let relay = TestRelay::start().await;
    let p = partner(&relay).await;

    let asked = p
        .agent
        .ask_user(
            QuestionRequest::yes_no("Refund order 42?")
                .for_user("alice")
                .with_id("q-refund"),
        )
        .await
        .expect("ask alice");
    assert_eq!(asked.question_id, "q-refund");
    assert!(lists(&p.alice.questions(None).await.unwrap(), "q-refund"));
    // Neither another user's device nor the owner's is sent it, so neither can list or read it.
    for other in [&p.bob, &p.owner] {
        let list = other.questions(None).await.expect("list");
        assert!(!lists(&list, "q-refund") && list.rejected.is_empty(), "{list:?}");
        let page = other.conversation(None, NO_WAIT).await.expect("conversation");
        assert!(page.items.iter().all(|i| i.id != "q-refund"), "{page:?}");
        // And the relay refuses its answer: the question was not sealed for it.
        let refused = other
            .answer("q-refund", Answer::Yes)
            .await
            .expect_err("not theirs");
        assert_eq!(refused.kind(), ErrorKind::NotFound, "{refused:?}");
    }

    // Alice's yes approves, and the outcome names her device.
    p.alice
        .answer("q-refund", Answer::Yes)
        .await
        .expect("alice answers");
    let outcome = p.agent.wait_for_answer("q-refund", NO_WAIT).await.expect("read");
    assert!(outcome.approved, "{outcome:?}");
    assert_eq!(outcome.answered_by.as_deref(), Some(id(&p.alice)));

    // The log records the user and filters by it.
    let log = p
        .agent
        .answer_log(&AuditFilter {
            user: Some("alice".into()),
            ..Default::default()
        })
        .await
        .expect("log");
    assert_eq!(log.len(), 1, "{log:?}");
    assert_eq!(
        (log[0].question_id.as_str(), log[0].user.as_deref()),
        ("q-refund", Some("alice"))
    );
    let bobs = p
        .agent
        .answer_log(&AuditFilter {
            user: Some("bob".into()),
            ..Default::default()
        })
        .await
        .expect("log");
    assert!(bobs.is_empty(), "{bobs:?}");

    // The owner's questions go to the owner only; a user's device is never asked them.
    p.agent
        .ask_user(QuestionRequest::yes_no("Deploy v2?").with_id("q-owner"))
        .await
        .expect("ask the owner");
    assert!(lists(&p.owner.questions(None).await.unwrap(), "q-owner"));
    assert!(!lists(&p.alice.questions(None).await.unwrap(), "q-owner"));

    // The users' view.
    let users = p.agent.list_users().await.expect("list users");
    let names: Vec<_> = users
        .iter()
        .map(|u| (u.external_id.as_str(), u.devices.len()))
        .collect();
    assert_eq!(names, [("alice", 1), ("bob", 1)]);
    assert!(
        users
            .iter()
            .all(|u| u.devices[0].paired && u.disconnected_at.is_none())
    );
    let alice = p.agent.get_user("alice").await.expect("alice");
    assert_eq!(
        alice.last_answer.as_ref().map(|a| a.question_id.as_str()),
        Some("q-refund")
    );
    assert_eq!(alice.devices[0].name.as_deref(), Some("alice's phone"));
    let unknown = p.agent.get_user("carol").await.expect_err("no carol");
    assert_eq!(unknown.code(), Some(code::USER_NOT_FOUND));

    // The relay's files hold the users' ids (routing metadata), never their names, the question or the
    // branding: those are sealed. Read while the relay runs (WAL not yet checkpointed).
    let files = pacerelle_test_support::files_in(relay.dir.path());
    assert!(!files.is_empty());
    for file in files {
        // Canaries long enough that no base64 text of a ciphertext holds one by chance (a 3-letter name did).
        for canary in ["Alice", "Bob Marchetti", "Refund order 42", "#0a7d5a", "PHN2Zy8+"] {
            assert!(
                !common::file_contains(&file, canary.as_bytes()),
                "{canary} found in {}",
                file.display()
            );
        }
    }
}

#[tokio::test]
async fn tasks_replies_and_notifications_stay_within_one_user() {
    let relay = TestRelay::start().await;
    let p = partner(&relay).await;

    p.alice
        .send("Where is my parcel?", Some("msg-alice"))
        .await
        .expect("alice sends");
    p.owner
        .send("Ship v2", Some("msg-owner"))
        .await
        .expect("the owner sends");
    let inbox = p.agent.wait_for_messages(None, NO_WAIT).await.expect("inbox");
    let users: Vec<_> = inbox
        .messages
        .iter()
        .map(|m| (m.message_id.as_str(), m.user.as_deref()))
        .collect();
    assert_eq!(users, [("msg-alice", Some("alice")), ("msg-owner", None)]);

    p.agent
        .reply("msg-alice", "It ships tomorrow.", Some("rep-alice"))
        .await
        .expect("reply to alice");
    p.agent
        .notify_user(
            Some("alice"),
            "Your refund is on its way.",
            Some("Refund"),
            Level::Info,
        )
        .await
        .expect("notify alice");
    p.agent
        .notify("Nightly build green", None, Level::Info)
        .await
        .expect("notify the owner");

    let texts = |page: pacerelle_client::device::ConversationPage| -> Vec<String> {
        page.items
            .into_iter()
            .filter(|i| matches!(i.kind, ItemKind::Reply | ItemKind::Notification))
            .map(|i| i.text)
            .collect()
    };
    let alice = texts(p.alice.conversation(None, NO_WAIT).await.unwrap());
    assert_eq!(alice, ["It ships tomorrow.", "Your refund is on its way."]);
    let owner = texts(p.owner.conversation(None, NO_WAIT).await.unwrap());
    assert_eq!(owner, ["Nightly build green"]);
    assert!(texts(p.bob.conversation(None, NO_WAIT).await.unwrap()).is_empty());

    // A user never connected gets a clear error; so does one with no device yet.
    let carol = p
        .agent
        .notify_user(Some("carol"), "hi", None, Level::Info)
        .await
        .expect_err("no carol");
    assert_eq!(carol.code(), Some(code::USER_NOT_FOUND));
    p.agent
        .connect_user("dan", "Dan", ConnectOptions::default())
        .await
        .expect("connect dan");
    let dan = p
        .agent
        .ask_user(QuestionRequest::yes_no("Ok?").for_user("dan"))
        .await
        .expect_err("dan has no device yet");
    assert_eq!(dan.code(), Some(code::NO_DEVICE), "{dan}");
    let bad = p
        .agent
        .connect_user("", "Nobody", ConnectOptions::default())
        .await
        .expect_err("an empty externalId");
    assert_eq!(bad.kind(), ErrorKind::InvalidInput);
}

#[tokio::test]
async fn editing_the_relays_rows_never_moves_an_approval_between_users() {
    let relay = TestRelay::start().await;
    let p = partner(&relay).await;
    let pool = db(&relay).await;

    // 1. Alice's question re-addressed to bob: the relay's rows give bob's device alice's envelope.
    p.agent
        .ask_user(
            QuestionRequest::yes_no("Close alice's account?")
                .for_user("alice")
                .with_id("q-moved"),
        )
        .await
        .expect("ask alice");
    sqlx::query(
        "INSERT INTO item_envelopes (item_seq, device_id, envelope)
         SELECT item_seq, ?1, envelope FROM item_envelopes
         WHERE device_id = ?2 AND item_seq = (SELECT seq FROM items WHERE item_id = 'q-moved')",
    )
    .bind(id(&p.bob))
    .bind(id(&p.alice))
    .execute(&pool)
    .await
    .unwrap();
    let list = p.bob.questions(None).await.expect("bob lists");
    assert!(
        !lists(&list, "q-moved"),
        "alice's envelope does not open with bob's key: {list:?}"
    );
    assert!(
        list.rejected.iter().any(|r| r.message_id == "q-moved"),
        "{list:?}"
    );
    // Bob answers anyway, sealed with his own key, naming the exact question: never approved.
    forge_answer(&relay, &p.agent, "q-moved", id(&p.bob)).await;
    let outcome = p.agent.wait_for_answer("q-moved", NO_WAIT).await.expect("read");
    assert!(!outcome.approved, "{outcome:?}");
    assert!(outcome.rejected.is_some(), "{outcome:?}");

    // 2. Bob's device moved into alice's user as far as the relay can: same label, promoted to owner. The
    //    roster, sealed by the agent, still says bob's device answers for bob only.
    sqlx::query("UPDATE devices SET label = 'Alice', role = 'owner' WHERE device_id = ?")
        .bind(id(&p.bob))
        .execute(&pool)
        .await
        .unwrap();
    p.agent
        .ask_user(
            QuestionRequest::yes_no("Refund alice?")
                .for_user("alice")
                .with_id("q-label"),
        )
        .await
        .expect("ask alice");
    assert!(!lists(&p.bob.questions(None).await.unwrap(), "q-label"));
    forge_answer(&relay, &p.agent, "q-label", id(&p.bob)).await;
    assert!(
        !p.agent
            .wait_for_answer("q-label", NO_WAIT)
            .await
            .unwrap()
            .approved
    );
    // Nor does the promoted device answer for the owner.
    p.agent
        .ask_user(QuestionRequest::yes_no("Deploy?").with_id("q-owner"))
        .await
        .expect("ask the owner");
    forge_answer(&relay, &p.agent, "q-owner", id(&p.bob)).await;
    assert!(
        !p.agent
            .wait_for_answer("q-owner", NO_WAIT)
            .await
            .unwrap()
            .approved
    );

    // 3. An owner's device answering a user's question, sealed with its own key: never approved.
    p.agent
        .ask_user(
            QuestionRequest::yes_no("Delete alice's data?")
                .for_user("alice")
                .with_id("q-owner-answers"),
        )
        .await
        .expect("ask alice");
    forge_answer(&relay, &p.agent, "q-owner-answers", id(&p.owner)).await;
    assert!(
        !p.agent
            .wait_for_answer("q-owner-answers", NO_WAIT)
            .await
            .unwrap()
            .approved
    );

    // 4. The genuine answer still works: alice's device, her question.
    p.agent
        .ask_user(
            QuestionRequest::yes_no("Refund order 7?")
                .for_user("alice")
                .with_id("q-genuine"),
        )
        .await
        .expect("ask alice");
    p.alice.questions(None).await.unwrap();
    p.alice
        .answer("q-genuine", Answer::Yes)
        .await
        .expect("alice answers");
    let outcome = p.agent.wait_for_answer("q-genuine", NO_WAIT).await.unwrap();
    assert!(outcome.approved, "{outcome:?}");
    pool.close().await;
}

#[tokio::test]
async fn a_disconnected_user_can_no_longer_read_nor_approve() {
    let relay = TestRelay::start().await;
    let p = partner(&relay).await;

    p.agent
        .ask_user(
            QuestionRequest::yes_no("Upgrade bob's plan?")
                .for_user("bob")
                .with_id("q-bob"),
        )
        .await
        .expect("ask bob");
    assert!(lists(&p.bob.questions(None).await.unwrap(), "q-bob"));
    let info = p.agent.disconnect_user("bob").await.expect("disconnect bob");
    assert!(info.disconnected_at.is_some());
    assert!(info.devices.iter().all(|d| d.revoked_at.is_some()), "{info:?}");

    // Bob's device is told at its next request, and reads nothing more.
    let told = p.bob.questions(None).await.expect_err("revoked");
    assert_eq!(told.code(), Some(code::DEVICE_REVOKED), "{told:?}");
    assert_eq!(told.kind(), ErrorKind::DeviceRevoked);
    // An answer written into the relay's rows for bob's pending question does not count either.
    forge_answer(&relay, &p.agent, "q-bob", id(&p.bob)).await;
    let outcome = p.agent.wait_for_answer("q-bob", NO_WAIT).await.unwrap();
    assert!(!outcome.approved, "{outcome:?}");
    // Nothing more is addressed to bob.
    let refused = p
        .agent
        .ask_user(QuestionRequest::yes_no("Still there?").for_user("bob"))
        .await
        .expect_err("disconnected");
    assert_eq!(refused.code(), Some(code::USER_NOT_FOUND));
    // Alice is untouched, and disconnecting again changes nothing.
    assert!(p.alice.questions(Some(QuestionState::Pending)).await.is_ok());
    let again = p.agent.disconnect_user("bob").await.expect("again");
    assert_eq!(again.disconnected_at, info.disconnected_at);
    let users = p.agent.list_users().await.unwrap();
    assert_eq!(
        users
            .iter()
            .map(|u| (u.external_id.as_str(), u.disconnected_at.is_some()))
            .collect::<Vec<_>>(),
        [("alice", false), ("bob", true)]
    );

    // Connecting bob again gives a new link; the old device stays revoked, a new one answers.
    let link = p
        .agent
        .connect_user("bob", "Bob B.", ConnectOptions::default())
        .await
        .expect("reconnect");
    let bob2 = DeviceClient::join(&link.link, "bob's new phone")
        .await
        .expect("join");
    p.agent
        .ask_user(
            QuestionRequest::yes_no("Welcome back?")
                .for_user("bob")
                .with_id("q-back"),
        )
        .await
        .expect("ask bob again");
    bob2.questions(None).await.unwrap();
    bob2.answer("q-back", Answer::Yes).await.expect("answer");
    assert!(p.agent.wait_for_answer("q-back", NO_WAIT).await.unwrap().approved);
    let bob = p.agent.get_user("bob").await.unwrap();
    assert_eq!((bob.name.as_str(), bob.devices.len()), ("Bob B.", 2));
}
