use pacerelle_core::wire::{LeaseHolder, MessageBatch, OpenSession, SessionInfo, Status, code};
use reqwest::{Method, StatusCode};

use crate::common::{Agent, TestRelay, pair, register, send_task, start, wait_messages};

async fn open_session(relay: &TestRelay, agent: &Agent, host: &str, takeover: bool) -> crate::common::Reply {
    relay
        .post(
            "/v1/agent/sessions",
            &agent.bearer,
            &OpenSession {
                takeover,
                ..OpenSession::new(host)
            },
        )
        .await
}

#[tokio::test]
async fn a_second_session_is_told_who_holds_the_lease_and_since_when() {
    let relay = start().await;
    let agent = register(&relay).await;
    let first: SessionInfo = open_session(&relay, &agent, "laptop / claude-code", false)
        .await
        .ok();
    assert!(first.session_id.starts_with("ses_"));
    assert!(first.lease_expires_at > first.since);

    let refused = open_session(&relay, &agent, "desktop / codex", false)
        .await
        .error(StatusCode::CONFLICT, code::AGENT_IN_USE);
    assert!(
        refused.error.contains("laptop / claude-code"),
        "{}",
        refused.error
    );
    assert!(
        refused.error.contains(&first.since.to_string()),
        "{}",
        refused.error
    );
    let holder: LeaseHolder = serde_json::from_value(refused.details.expect("details")).expect("a holder");
    assert_eq!(holder.host, "laptop / claude-code");
    assert_eq!(holder.since, first.since);

    let status: Status = relay.get("/v1/agent/status", &agent.bearer).await.ok();
    assert_eq!(
        status.session.map(|s| s.host).as_deref(),
        Some("laptop / claude-code")
    );
}

#[tokio::test]
async fn takeover_replaces_the_holder_whose_heartbeat_then_fails() {
    let relay = start().await;
    let agent = register(&relay).await;
    let old: SessionInfo = open_session(&relay, &agent, "laptop", false).await.ok();
    let renewed: SessionInfo = relay
        .call(
            Method::POST,
            &format!("/v1/agent/sessions/{}/heartbeat", old.session_id),
            Some(&agent.bearer),
            None,
        )
        .await
        .ok();
    assert_eq!(renewed.session_id, old.session_id);

    let new: SessionInfo = open_session(&relay, &agent, "desktop", true).await.ok();
    assert_ne!(new.session_id, old.session_id);
    // The old holder learns it lost the lease, on a wait as on a heartbeat.
    wait_messages(&relay, &agent, None, 0, Some(&old.session_id))
        .await
        .error(StatusCode::CONFLICT, code::LEASE_LOST);
    relay
        .call(
            Method::POST,
            &format!("/v1/agent/sessions/{}/heartbeat", old.session_id),
            Some(&agent.bearer),
            None,
        )
        .await
        .error(StatusCode::CONFLICT, code::LEASE_LOST);
    relay
        .call(
            Method::POST,
            &format!("/v1/agent/sessions/{}/heartbeat", new.session_id),
            Some(&agent.bearer),
            None,
        )
        .await
        .ok::<SessionInfo>();
    relay
        .call(
            Method::POST,
            "/v1/agent/sessions/ses_unknown/heartbeat",
            Some(&agent.bearer),
            None,
        )
        .await
        .error(StatusCode::NOT_FOUND, code::NOT_FOUND);
}

#[tokio::test]
async fn only_the_holder_consumes_the_inbox() {
    let relay = start().await;
    let agent = register(&relay).await;
    let phone = pair(&relay, &agent).await;
    send_task(&relay, &phone, "t", "task").await;
    // No session yet: anyone may wait.
    wait_messages(&relay, &agent, None, 0, None)
        .await
        .ok::<MessageBatch>();

    let holder: SessionInfo = open_session(&relay, &agent, "laptop", false).await.ok();
    let refused = wait_messages(&relay, &agent, None, 0, Some("ses_other"))
        .await
        .error(StatusCode::CONFLICT, code::AGENT_IN_USE);
    assert!(refused.error.contains("laptop"));
    wait_messages(&relay, &agent, None, 0, None)
        .await
        .error(StatusCode::CONFLICT, code::AGENT_IN_USE);
    relay
        .request(
            Method::POST,
            "/v1/agent/messages/t/processed",
            Some(&agent.bearer),
            &[(pacerelle_core::wire::SESSION_HEADER, "ses_other")],
            None,
        )
        .await
        .error(StatusCode::CONFLICT, code::AGENT_IN_USE);

    let batch: MessageBatch = wait_messages(&relay, &agent, None, 0, Some(&holder.session_id))
        .await
        .ok();
    assert_eq!(batch.messages.len(), 1);

    // Released: the lease is free again, for anyone.
    let released: SessionInfo = relay
        .delete(
            &format!("/v1/agent/sessions/{}", holder.session_id),
            &agent.bearer,
        )
        .await
        .ok();
    assert_eq!(released.session_id, holder.session_id);
    relay
        .delete(
            &format!("/v1/agent/sessions/{}", holder.session_id),
            &agent.bearer,
        )
        .await
        .ok::<SessionInfo>();
    wait_messages(&relay, &agent, None, 0, None)
        .await
        .ok::<MessageBatch>();
    open_session(&relay, &agent, "desktop", false)
        .await
        .ok::<SessionInfo>();
}

#[tokio::test]
async fn sessions_of_another_agent_are_not_found() {
    let relay = start().await;
    let a = register(&relay).await;
    let b = register(&relay).await;
    let session: SessionInfo = open_session(&relay, &a, "laptop", false).await.ok();
    relay
        .delete(&format!("/v1/agent/sessions/{}", session.session_id), &b.bearer)
        .await
        .error(StatusCode::NOT_FOUND, code::NOT_FOUND);
    // B's inbox is not A's: B needs no session.
    wait_messages(&relay, &b, None, 0, None)
        .await
        .ok::<MessageBatch>();
}
