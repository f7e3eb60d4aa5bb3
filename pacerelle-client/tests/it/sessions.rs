//! Named sessions against a real relay: two sessions of one agent in two folders, each consuming only its own
//! tasks and those sent to any session; a third listener of a name is refused; the status lists them; a task the
//! relay hands to the wrong session does not pass for that session's.

use std::time::Duration;

use pacerelle_client::core::message::{TaskPayload, task_aad};
use pacerelle_client::core::wire::{OpenSession, Presence, SendMessage};
use pacerelle_client::core::{CryptoError, envelope, ids};
use pacerelle_client::{AgentClient, ErrorKind};

use crate::common::TestRelay;

/// Another process of the same agent (its own client, the same token).
fn same_agent(agent: &AgentClient) -> AgentClient {
    AgentClient::new(agent.relay_url(), agent.agent_id(), agent.token().clone()).expect("client")
}

fn session(host: &str, name: &str, folder: &str) -> OpenSession {
    OpenSession {
        name: Some(name.into()),
        folder: Some(folder.into()),
        ..OpenSession::new(host)
    }
}

const SHORT: Duration = Duration::from_secs(1);

#[tokio::test]
async fn two_sessions_in_two_folders_each_get_their_own_tasks() {
    let relay = TestRelay::start().await;
    let (agent, phone) = relay.agent_and_device().await;
    let (alpha, beta) = (same_agent(&agent), same_agent(&agent));
    alpha
        .open_session(&session("laptop / claude-code", "alpha", "api"))
        .await
        .expect("alpha");
    let opened = beta
        .open_session(&session("laptop / codex", "beta", "web"))
        .await
        .expect("beta");
    assert_eq!(
        (opened.name.as_str(), opened.folder.as_deref()),
        ("beta", Some("web"))
    );

    // A task for beta: never delivered to alpha.
    phone
        .send_to("Deploy the web app", Some("m-beta"), Some("beta"))
        .await
        .expect("sent");
    let inbox = alpha.wait_for_messages(None, SHORT).await.expect("alpha waits");
    assert!(
        inbox.messages.is_empty() && inbox.rejected.is_empty(),
        "{inbox:?}"
    );
    let inbox = beta.wait_for_messages(None, SHORT).await.expect("beta waits");
    let got: Vec<(&str, &str, Option<&str>)> = inbox
        .messages
        .iter()
        .map(|m| (m.message_id.as_str(), m.text.as_str(), m.session.as_deref()))
        .collect();
    assert_eq!(got, [("m-beta", "Deploy the web app", Some("beta"))]);
    // Alpha cannot mark it processed either: it is not in alpha's inbox.
    let refused = alpha.mark_processed("m-beta").await.expect_err("not alpha's");
    assert_eq!(refused.kind(), ErrorKind::NotFound, "{refused}");
    beta.mark_processed("m-beta").await.expect("beta marks its own");

    // A task for any session: handed to the first that waits, then that session's only.
    phone.send("Run the tests", Some("m-any")).await.expect("sent");
    let first = alpha.wait_for_messages(None, SHORT).await.expect("alpha waits");
    assert_eq!(first.messages.len(), 1, "{first:?}");
    assert_eq!(first.messages[0].session, None, "sent to any session");
    // The delivered mark is written beside the answer; the next read waits for it.
    let second = beta.wait_for_messages(None, SHORT).await.expect("beta waits");
    assert!(second.messages.is_empty(), "handed to alpha already: {second:?}");
    let again = alpha.wait_for_messages(None, SHORT).await.expect("alpha again");
    assert!(again.messages[0].redelivered, "{again:?}");

    // A third listener of beta is refused, told which session holds beta's lease.
    let third = same_agent(&agent);
    let refused = third
        .open_session(&session("ci / codex", "beta", "web"))
        .await
        .expect_err("beta is held");
    assert_eq!(refused.kind(), ErrorKind::AgentInUse, "{refused}");
    let holder = refused.lease_holder().expect("the holder is named");
    assert_eq!(
        (holder.host.as_str(), holder.name.as_str()),
        ("laptop / codex", "beta")
    );
    // Under another name it opens beside them.
    third
        .open_session(&session("ci / codex", "ci", "repo"))
        .await
        .expect("a third name");

    // The phone sees every session, the one open longest first.
    let status = phone.status().await.expect("status");
    let listed: Vec<(&str, &str, Option<&str>, u64)> = status
        .sessions
        .iter()
        .map(|s| {
            (
                s.name.as_str(),
                s.host.as_str(),
                s.folder.as_deref(),
                s.in_progress,
            )
        })
        .collect();
    assert_eq!(
        listed,
        [
            ("alpha", "laptop / claude-code", Some("api"), 1),
            ("beta", "laptop / codex", Some("web"), 0),
            ("ci", "ci / codex", Some("repo"), 0),
        ]
    );
    assert_eq!(
        status.sessions[0].presence,
        Presence::Busy,
        "alpha works on its task"
    );
    assert_eq!(status.session.map(|h| h.name).as_deref(), Some("alpha"));

    // A client without a name is the default session: it gets tasks for any session and for "default".
    let plain = same_agent(&agent);
    plain
        .open_session(&OpenSession::new("old client"))
        .await
        .expect("default");
    phone
        .send_to("For the default", Some("m-default"), Some(ids::DEFAULT_SESSION))
        .await
        .expect("sent");
    let inbox = plain.wait_for_messages(None, SHORT).await.expect("default waits");
    let ids: Vec<&str> = inbox.messages.iter().map(|m| m.message_id.as_str()).collect();
    assert_eq!(ids, ["m-default"]);
}

#[tokio::test]
async fn a_task_the_relay_hands_to_the_wrong_session_is_rejected() {
    let relay = TestRelay::start().await;
    let (agent, phone) = relay.agent_and_device().await;
    let alpha = same_agent(&agent);
    alpha
        .open_session(&session("laptop", "alpha", "api"))
        .await
        .expect("alpha");
    // What a relay that moves a task would deliver: sealed for beta, routed to alpha in clear.
    let creds = phone.credentials();
    let key = agent.token().device_key(&creds.agent_id, &creds.device_id);
    let sealed = envelope::seal_json(
        &key,
        &task_aad(&creds.agent_id, &creds.device_id, "m-moved"),
        &TaskPayload {
            text: "rm -rf build/".into(),
            session: Some("beta".into()),
        },
    );
    let body = SendMessage {
        message_id: "m-moved".into(),
        envelope: sealed,
        session: Some("alpha".into()),
    };
    let sent = reqwest::Client::new()
        .post(format!("{}/v1/device/messages", relay.url))
        .bearer_auth(&creds.device_token)
        .json(&body)
        .send()
        .await
        .expect("posted");
    assert!(sent.status().is_success(), "{}", sent.status());
    let inbox = alpha.wait_for_messages(None, SHORT).await.expect("alpha waits");
    assert!(inbox.messages.is_empty(), "{inbox:?}");
    assert_eq!(inbox.rejected.len(), 1, "{inbox:?}");
    assert_eq!(inbox.rejected[0].reason, CryptoError::Misrouted);
}

#[tokio::test]
async fn a_bad_session_name_is_refused_before_anything_is_sent() {
    let relay = TestRelay::start().await;
    let (agent, phone) = relay.agent_and_device().await;
    for bad in ["any", "two words", &"x".repeat(41)] {
        let e = agent
            .open_session(&session("laptop", bad, "api"))
            .await
            .expect_err(bad);
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{bad}: {e}");
        let e = phone.send_to("hello", None, Some(bad)).await.expect_err(bad);
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{bad}: {e}");
    }
    // The relay refuses it too, with a stable code, from a client that does not check.
    let body = serde_json::json!({"host": "laptop", "name": "any"});
    let refused = reqwest::Client::new()
        .post(format!("{}/v1/agent/sessions", relay.url))
        .bearer_auth(agent.token().bearer(agent.agent_id()).expose())
        .json(&body)
        .send()
        .await
        .expect("posted");
    assert_eq!(refused.status(), 400);
    let error: serde_json::Value = refused.json().await.expect("json");
    assert_eq!(error["code"], "invalid_input", "{error}");
}
