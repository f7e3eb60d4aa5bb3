//! Issue "trust": an approval counts only for the question asked, and only the agent decides who may approve.
//!
//! A real relay on 127.0.0.1:0 with a real SQLite file; the relay's rows are edited between steps as a
//! compromised relay (or anyone who can write its database) would. Whatever is written there, no answer
//! approves unless it answers exactly the question asked, from a device the agent's own roster trusts.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::time::Duration;

use common::TestRelay;
use common::rows::{db, forge_answer};
use pacerelle_client::core::envelope;
use pacerelle_client::core::pairing::Role;
use pacerelle_client::core::question::{QuestionPayload, question_aad};
use pacerelle_client::core::wire::code;
use pacerelle_client::{
    AgentClient, Answer, DeviceClient, QuestionState, Timestamp, agent::PairingOptions,
    agent::QuestionRequest,
};

const NO_WAIT: Duration = Duration::ZERO;

/// An agent whose roster mark is kept in `home`, with one owner phone.
async fn agent_in(relay: &TestRelay, home: &std::path::Path) -> (AgentClient, DeviceClient) {
    let registered = AgentClient::register(&relay.url, "trust agent", None)
        .await
        .expect("register")
        .with_home(Some(&pacerelle_test_support::home()));
    let agent = AgentClient::new(&relay.url, registered.agent_id(), registered.token().clone())
        .expect("client")
        .with_home(Some(home));
    let phone = pair(&agent, Role::Owner, "phone").await;
    (agent, phone)
}

async fn pair(agent: &AgentClient, role: Role, name: &str) -> DeviceClient {
    let link = agent
        .create_pairing(PairingOptions {
            role,
            ..Default::default()
        })
        .await
        .expect("pairing");
    DeviceClient::join(&link.link, name).await.expect("join")
}

/// Answers `question_id` from `device`, after reading it as a phone does.
async fn answer(device: &DeviceClient, question_id: &str, answer: Answer) {
    device.questions(None).await.expect("questions");
    device.answer(question_id, answer).await.expect("answer");
}

#[tokio::test]
async fn a_question_id_never_carries_two_questions() {
    let relay = TestRelay::start().await;
    let home = tempfile::tempdir().unwrap();
    let (agent, phone) = agent_in(&relay, home.path()).await;

    // "Run the test suite?" approved under deploy-approval.
    let tests = || {
        QuestionRequest::yes_no("Run the test suite?")
            .with_id("deploy-approval")
            .expires_in(Duration::from_secs(2))
    };
    let asked = agent.ask_user(tests()).await.expect("ask");
    answer(&phone, "deploy-approval", Answer::Yes).await;
    let outcome = agent
        .wait_until_final(&asked, tokio::time::Instant::now() + Duration::from_secs(5))
        .await
        .expect("wait");
    assert!(outcome.approved);

    // A different question under the same id, before and after the first expires: refused, never approved.
    let drop = || QuestionRequest::yes_no("Delete the production database?").with_id("deploy-approval");
    for when in ["before the expiry", "after the expiry"] {
        let e = agent.ask_user(drop()).await.expect_err(when);
        assert_eq!(e.code(), Some(code::QUESTION_ID_CONFLICT), "{when}: {e}");
        let e = agent.ask(drop(), Duration::from_secs(3)).await.expect_err(when);
        assert_eq!(e.code(), Some(code::QUESTION_ID_CONFLICT), "{when}: {e}");
        tokio::time::sleep(Duration::from_millis(2100)).await;
    }
    // Details, options or kind make another question too.
    for other in [
        tests().with_details("and deploy"),
        QuestionRequest::text("Run the test suite?").with_id("deploy-approval"),
    ] {
        let e = agent.ask_user(other).await.expect_err("another question");
        assert_eq!(e.code(), Some(code::QUESTION_ID_CONFLICT));
    }
    // The same question under its id resumes it (what the id is for: waiting again after a restart).
    let resumed = agent.ask_user(tests()).await.expect("resume");
    assert!(!asked.resumed && resumed.resumed);
    assert_eq!(
        resumed,
        pacerelle_client::agent::Asked {
            resumed: true,
            ..asked.clone()
        }
    );
    let outcome = agent
        .wait_for_answer("deploy-approval", NO_WAIT)
        .await
        .expect("read");
    assert!(outcome.approved && outcome.state == QuestionState::Answered);

    // A relay that kept the self copy of the second question (it was sent with the refused request) and
    // serves it with the first question's yes: the yes names another question, so nothing is approved.
    let second = QuestionPayload {
        grants: None,
        question: "Delete the production database?".into(),
        kind: pacerelle_client::QuestionKind::YesNo,
        options: vec![],
        multiple: false,
        details: None,
        expires_at: Timestamp::now().plus_millis(600_000),
        recipients: vec![phone.credentials().device_id.as_str().to_string()],
        answer_key: None,
        channels: Vec::new(),
        user: None,
        approvals: 1,
    };
    let swapped = envelope::seal_json(
        &agent.token().self_key(agent.agent_id()),
        &question_aad(agent.agent_id(), "", "deploy-approval"),
        &second,
    );
    let pool = db(&relay).await;
    sqlx::query("UPDATE items SET envelope = ? WHERE kind = 'question' AND item_id = 'deploy-approval'")
        .bind(&swapped)
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    let outcome = agent
        .wait_for_answer("deploy-approval", NO_WAIT)
        .await
        .expect("read");
    assert!(!outcome.approved, "{outcome:?}");
    assert!(
        outcome
            .rejected
            .as_deref()
            .is_some_and(|r| r.contains("different question")),
        "{outcome:?}"
    );
    // And waiting with the Asked of the first question refuses the swapped copy outright.
    let e = agent
        .wait_until_final(&asked, tokio::time::Instant::now() + Duration::from_secs(2))
        .await
        .expect_err("the stored question changed");
    assert_eq!(e.code(), Some(code::QUESTION_ID_CONFLICT));
}

#[tokio::test]
async fn the_relays_rows_never_choose_who_approves() {
    let relay = TestRelay::start().await;
    let home = tempfile::tempdir().unwrap();
    let (agent, phone) = agent_in(&relay, home.path()).await;
    let tablet = pair(&agent, Role::Owner, "tablet").await;
    let user = pair(&agent, Role::User, "a user").await;
    let pool = db(&relay).await;

    // 1. A device revoked after it received a question, un-revoked in the relay's rows, answers yes.
    agent
        .ask_user(QuestionRequest::yes_no("Deploy?").with_id("q-revoked"))
        .await
        .expect("ask");
    tablet.questions(None).await.expect("the tablet reads it");
    agent
        .revoke_device(tablet.credentials().device_id.as_str())
        .await
        .expect("revoke");
    sqlx::query("UPDATE devices SET revoked_at = NULL WHERE device_id = ?")
        .bind(tablet.credentials().device_id.as_str())
        .execute(&pool)
        .await
        .unwrap();
    tablet
        .answer("q-revoked", Answer::Yes)
        .await
        .expect("the relay, un-revoked, takes the answer");
    let outcome = agent.wait_for_answer("q-revoked", NO_WAIT).await.expect("read");
    assert!(!outcome.approved, "{outcome:?}");
    assert!(
        outcome.rejected.as_deref().is_some_and(|r| r.contains("roster")),
        "{outcome:?}"
    );

    // The un-revoked device is not even asked any more.
    let asked = agent
        .ask_user(QuestionRequest::yes_no("Deploy again?").with_id("q-after"))
        .await
        .expect("ask");
    assert!(
        tablet
            .questions(None)
            .await
            .expect("list")
            .questions
            .iter()
            .all(|q| q.question_id != "q-after")
    );
    forge_answer(
        &relay,
        &agent,
        &asked.question_id,
        tablet.credentials().device_id.as_str(),
    )
    .await;
    let outcome = agent.wait_for_answer("q-after", NO_WAIT).await.expect("read");
    assert!(!outcome.approved, "{outcome:?}");

    // 2. A `user` device promoted to `owner` in the relay's rows.
    sqlx::query("UPDATE devices SET role = 'owner' WHERE device_id = ?")
        .bind(user.credentials().device_id.as_str())
        .execute(&pool)
        .await
        .unwrap();
    agent
        .ask_user(QuestionRequest::yes_no("Pay the invoice?").with_id("q-promoted"))
        .await
        .expect("ask");
    assert!(user.questions(None).await.expect("list").questions.is_empty());
    forge_answer(
        &relay,
        &agent,
        "q-promoted",
        user.credentials().device_id.as_str(),
    )
    .await;
    assert!(
        !agent
            .wait_for_answer("q-promoted", NO_WAIT)
            .await
            .expect("read")
            .approved
    );

    // 3. A device row the agent never paired.
    sqlx::query(
        "INSERT INTO devices (device_id, agent_id, name, role, token_hash, created_at)
         VALUES ('dv_intruder', ?, 'intruder', 'owner', x'00', 0)",
    )
    .bind(agent.agent_id())
    .execute(&pool)
    .await
    .unwrap();
    assert!(
        agent
            .devices()
            .await
            .unwrap()
            .iter()
            .any(|d| d.device_id == "dv_intruder")
    );
    agent
        .ask_user(QuestionRequest::yes_no("Push to main?").with_id("q-intruder"))
        .await
        .expect("ask");
    let recipients: Vec<String> =
        sqlx::query_scalar("SELECT e.device_id FROM item_envelopes e JOIN items i ON i.seq = e.item_seq WHERE i.item_id = 'q-intruder'")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(
        recipients,
        vec![phone.credentials().device_id.as_str().to_string()],
        "only the owner phone is asked"
    );
    forge_answer(&relay, &agent, "q-intruder", "dv_intruder").await;
    assert!(
        !agent
            .wait_for_answer("q-intruder", NO_WAIT)
            .await
            .expect("read")
            .approved
    );

    // The phone the agent paired still approves.
    agent
        .ask_user(QuestionRequest::yes_no("Tag the release?").with_id("q-phone"))
        .await
        .expect("ask");
    answer(&phone, "q-phone", Answer::Yes).await;
    assert!(
        agent
            .wait_for_answer("q-phone", NO_WAIT)
            .await
            .expect("read")
            .approved
    );

    // 4. An older roster restored: refused, and nothing approves until the newest is back.
    let (version, sealed): (i64, String) =
        sqlx::query_as("SELECT version, envelope FROM rosters WHERE agent_id = ?")
            .bind(agent.agent_id())
            .fetch_one(&pool)
            .await
            .unwrap();
    let older = pair(&agent, Role::Owner, "laptop").await;
    agent
        .revoke_device(older.credentials().device_id.as_str())
        .await
        .expect("revoke");
    sqlx::query("UPDATE rosters SET version = ?, envelope = ? WHERE agent_id = ?")
        .bind(version)
        .bind(&sealed)
        .bind(agent.agent_id())
        .execute(&pool)
        .await
        .unwrap();
    let e = agent.roster().await.expect_err("rolled back");
    assert_eq!(e.code(), Some(code::ROSTER_ROLLBACK), "{e}");
    let e = agent
        .ask_user(QuestionRequest::yes_no("Anything?"))
        .await
        .expect_err("no question on a rolled-back roster");
    assert_eq!(e.code(), Some(code::ROSTER_ROLLBACK));
    let e = agent
        .wait_for_answer("q-phone", NO_WAIT)
        .await
        .expect_err("not approved on a rolled-back roster");
    assert_eq!(e.code(), Some(code::ROSTER_ROLLBACK));
    // Another host of this agent on this machine (same home) refuses it too; so does a deleted roster.
    let again = AgentClient::new(&relay.url, agent.agent_id(), agent.token().clone())
        .unwrap()
        .with_home(Some(home.path()));
    assert_eq!(
        again.roster().await.unwrap_err().code(),
        Some(code::ROSTER_ROLLBACK)
    );
    sqlx::query("DELETE FROM rosters").execute(&pool).await.unwrap();
    assert_eq!(
        again.roster().await.unwrap_err().code(),
        Some(code::ROSTER_ROLLBACK)
    );
    pool.close().await;
}

#[tokio::test]
async fn hosts_of_one_agent_share_the_roster_and_devices_paired_before_it_are_adopted_explicitly() {
    let relay = TestRelay::start().await;
    let (home_a, home_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (agent, phone) = agent_in(&relay, home_a.path()).await;
    // A second host on another machine (its own home): it sees the phone, and its change is seen by the first.
    let other = AgentClient::new(&relay.url, agent.agent_id(), agent.token().clone())
        .unwrap()
        .with_home(Some(home_b.path()));
    assert!(
        other
            .roster()
            .await
            .unwrap()
            .may_approve(phone.credentials().device_id.as_str())
    );
    let tablet = pair(&other, Role::Owner, "tablet").await;
    let roster = agent.roster().await.unwrap();
    assert!(
        roster.may_approve(tablet.credentials().device_id.as_str())
            && roster.may_approve(phone.credentials().device_id.as_str())
    );
    assert_eq!(roster.version, 2);

    // Devices paired before rosters existed (here: the roster removed, as on an upgraded relay, with no
    // host having seen one): nothing approves, the error says what to do, and adopting trusts them.
    let fresh = tempfile::tempdir().unwrap();
    let pool = db(&relay).await;
    sqlx::query("DELETE FROM rosters").execute(&pool).await.unwrap();
    pool.close().await;
    let upgraded = AgentClient::new(&relay.url, agent.agent_id(), agent.token().clone())
        .unwrap()
        .with_home(Some(fresh.path()));
    let e = upgraded
        .ask_user(QuestionRequest::yes_no("Deploy?"))
        .await
        .expect_err("no trusted device");
    assert_eq!(e.code(), Some(code::NO_DEVICE));
    assert!(e.to_string().contains("pacerelle agent adopt"), "{e}");
    let adopted = upgraded.adopt_devices().await.expect("adopt");
    assert!(
        adopted.may_approve(phone.credentials().device_id.as_str())
            && adopted.may_approve(tablet.credentials().device_id.as_str())
    );
    let asked = upgraded
        .ask_user(QuestionRequest::yes_no("Deploy?"))
        .await
        .expect("ask");
    answer(&phone, &asked.question_id, Answer::Yes).await;
    assert!(
        upgraded
            .wait_for_answer(&asked.question_id, NO_WAIT)
            .await
            .unwrap()
            .approved
    );
}

#[tokio::test]
async fn tasks_from_a_device_the_roster_does_not_trust_are_rejected_and_a_forked_roster_is_refused() {
    let relay = TestRelay::start().await;
    let home = tempfile::tempdir().unwrap();
    let (agent, phone) = agent_in(&relay, home.path()).await;
    let tablet = pair(&agent, Role::Owner, "tablet").await;
    agent
        .revoke_device(tablet.credentials().device_id.as_str())
        .await
        .expect("revoke");
    let pool = db(&relay).await;
    sqlx::query("UPDATE devices SET revoked_at = NULL")
        .execute(&pool)
        .await
        .unwrap();
    tablet
        .send("rm -rf the backups", None)
        .await
        .expect("the un-revoked device sends");
    phone.send("hello", None).await.expect("the phone sends");
    let inbox = agent.wait_for_messages(None, NO_WAIT).await.expect("wait");
    let texts: Vec<&str> = inbox.messages.iter().map(|m| m.text.as_str()).collect();
    assert_eq!(texts, ["hello"], "only the phone's task is an instruction");
    assert_eq!(inbox.rejected.len(), 1);
    assert_eq!(
        inbox.rejected[0].reason,
        pacerelle_client::core::CryptoError::NotTrusted
    );
    // A reply goes to the devices the roster trusts, not to the un-revoked one.
    agent
        .reply(&inbox.messages[0].message_id, "hi", None)
        .await
        .expect("reply");
    let seen = tablet.conversation(None, NO_WAIT).await;
    assert!(
        seen.map(|p| p.items.iter().all(|i| i.text != "hi"))
            .unwrap_or(true),
        "the untrusted device gets no reply"
    );

    // Another roster under the version this host has seen (a fork, as a relay would serve one host's
    // concurrent change to hide a revocation): refused.
    let roster = agent.roster().await.expect("roster");
    let forked = roster.next(Timestamp::now(), |devices| {
        for d in devices.iter_mut() {
            d.revoked_at = None;
        }
    });
    let forked = pacerelle_client::core::roster::Roster {
        version: roster.version,
        ..forked
    };
    sqlx::query("UPDATE rosters SET envelope = ? WHERE agent_id = ?")
        .bind(forked.seal(&agent.token().self_key(agent.agent_id())))
        .bind(agent.agent_id())
        .execute(&pool)
        .await
        .unwrap();
    let e = agent.roster().await.expect_err("forked");
    assert_eq!(e.code(), Some(code::ROSTER_ROLLBACK), "{e}");
    assert!(e.to_string().contains("forked"), "{e}");
    pool.close().await;
}

#[tokio::test]
async fn a_device_that_left_is_revoked_in_the_roster_at_the_next_question() {
    let relay = TestRelay::start().await;
    let home = tempfile::tempdir().expect("home");
    let (agent, phone) = agent_in(&relay, home.path()).await;
    let tablet = pair(&agent, Role::Owner, "tablet").await;
    let tablet_id = tablet.credentials().device_id.clone();
    let roster = agent.roster().await.expect("roster");
    assert!(roster.may_approve(&tablet_id), "the tablet starts trusted");

    let before = Timestamp::now();
    tablet.leave().await.expect("the tablet leaves");
    // Only the relay knows yet: the roster still lists the tablet as trusted.
    assert!(agent.roster().await.expect("roster").may_approve(&tablet_id));

    // The next question is not sealed for the tablet, and the agent revokes it in its roster too, as of the
    // relay's revocation time.
    let asked = agent
        .ask_user(QuestionRequest::yes_no("Ship it?"))
        .await
        .expect("asked of the phone that stays");
    let roster = agent.roster().await.expect("roster");
    assert!(
        !roster.may_approve(&tablet_id),
        "a device that left is still trusted"
    );
    let revoked = roster
        .device(&tablet_id)
        .and_then(|d| d.revoked_at)
        .expect("revoked in the roster");
    assert!(revoked >= before && revoked <= Timestamp::now(), "{revoked:?}");
    assert!(
        roster.may_approve(&phone.credentials().device_id),
        "the phone that stays is untouched"
    );
    // The phone that stays answers and approves.
    answer(&phone, &asked.question_id, Answer::Yes).await;
    let outcome = agent
        .wait_until_final(&asked, tokio::time::Instant::now() + Duration::from_secs(10))
        .await
        .expect("wait");
    assert!(outcome.approved);
    // Asking again changes nothing more.
    let version = roster.version;
    agent
        .ask_user(QuestionRequest::yes_no("And the docs?"))
        .await
        .expect("asked");
    assert_eq!(agent.roster().await.expect("roster").version, version);
}

/// How many times the relay answered `GET /v1/agent/roster` (its `/metrics`).
async fn roster_reads(relay: &TestRelay) -> u64 {
    let text = reqwest::get(format!("{}/metrics", relay.url))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    text.lines()
        .filter(|l| {
            l.starts_with("pacerelle_http_requests_total{")
                && l.contains("route=\"/v1/agent/roster\"")
                && l.contains("method=\"GET\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

#[tokio::test]
async fn a_wait_reads_the_roster_only_when_its_version_changed() {
    let relay = TestRelay::start_with(|c| c.metrics = true).await;
    let (agent, phone) = relay.agent_and_device().await;
    let wait = std::time::Duration::from_secs(2);
    phone.send("first", None).await.expect("sent");
    let first = agent.wait_for_messages(None, wait).await.expect("wait");
    assert_eq!(first.messages.len(), 1, "{first:?}");
    let reads = roster_reads(&relay).await;
    // The relay names the version this client holds: judged with the roster it has, no second read.
    for text in ["second", "third"] {
        phone.send(text, None).await.expect("sent");
        let inbox = agent
            .wait_for_messages(Some(first.cursor), wait)
            .await
            .expect("wait");
        assert!(inbox.messages.iter().any(|m| m.text == text), "{inbox:?}");
    }
    assert_eq!(
        roster_reads(&relay).await,
        reads,
        "no roster read while its version holds"
    );
    // A device paired meanwhile (the roster's next version): the next wait reads it, and trusts the new device.
    let tablet = pacerelle_test_support::pair(&agent, "tablet").await;
    let sent = tablet.send("from the tablet", None).await.expect("sent");
    let inbox = agent
        .wait_for_messages(Some(first.cursor), wait)
        .await
        .expect("wait");
    assert!(
        inbox.messages.iter().any(|m| m.text == "from the tablet"),
        "{inbox:?}"
    );
    assert!(inbox.rejected.is_empty(), "{inbox:?}");
    // A task sent just before another process of this agent revoked its device: the roster held here predates
    // the revocation, the relay names the new version, so the wait reads it and rejects the task.
    let late = tablet
        .send("sent before the revocation", None)
        .await
        .expect("sent");
    let other = AgentClient::new(agent.relay_url(), agent.agent_id(), agent.token().clone())
        .expect("client")
        .with_home(None);
    let before = roster_reads(&relay).await;
    other
        .revoke_device(&tablet.credentials().device_id)
        .await
        .expect("revoked");
    let inbox = agent
        .wait_for_messages(Some(sent.cursor), wait)
        .await
        .expect("wait");
    assert!(inbox.messages.is_empty(), "{inbox:?}");
    let rejected: Vec<&str> = inbox.rejected.iter().map(|r| r.message_id.as_str()).collect();
    assert_eq!(rejected, [late.id.as_str()]);
    assert!(roster_reads(&relay).await > before, "the new version was read");
}
