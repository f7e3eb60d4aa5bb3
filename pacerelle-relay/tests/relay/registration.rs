use pacerelle_core::wire::{AgentInfo, Health, REGISTRATION_HEADER, code};
use pacerelle_relay::Config;
use reqwest::{Method, StatusCode};

use crate::common::{db_path, new_agent, start, start_with};

fn closed(secret: Option<&str>) -> (Config, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let config = Config {
        open_registration: false,
        registration_secret: secret.map(str::to_string),
        ..Config::new(db_path(&dir))
    };
    (config, dir)
}

#[tokio::test]
async fn health_reports_version_and_registration_mode() {
    let relay = start().await;
    let reply = relay.call(Method::GET, "/v1/health", None, None).await;
    let health: Health = reply.ok();
    assert!(health.ok);
    assert!(health.open_registration);
    assert!(!health.version.is_empty());
}

#[tokio::test]
async fn open_registration_needs_no_secret_and_a_retry_finds_the_same_agent() {
    let relay = start().await;
    let (agent, body) = new_agent();
    let json = serde_json::to_value(&body).expect("json");
    let first = relay
        .call(Method::POST, "/v1/agents", None, Some(json.clone()))
        .await;
    assert_eq!(first.status, StatusCode::CREATED);
    let info: AgentInfo = first.ok();
    assert_eq!(info.agent_id, agent.id);
    assert_eq!(info.name, "laptop");
    // A retry (same id, same auth hash) is answered with the stored agent.
    let again = relay.call(Method::POST, "/v1/agents", None, Some(json)).await;
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(again.ok::<AgentInfo>(), info);
    // The same id with another token is taken.
    let (_, mut other) = new_agent();
    other.agent_id = agent.id.clone();
    relay
        .call(
            Method::POST,
            "/v1/agents",
            None,
            Some(serde_json::to_value(&other).expect("json")),
        )
        .await
        .error(StatusCode::CONFLICT, code::AGENT_EXISTS);
    // The registered credential works.
    let me: AgentInfo = relay.get("/v1/agent", &agent.bearer).await.ok();
    assert_eq!(me.agent_id, agent.id);
}

#[tokio::test]
async fn closed_registration_needs_the_secret() {
    let (config, dir) = closed(Some("s3cret-for-tests"));
    let relay = start_with(config, dir).await;
    let health: Health = relay.call(Method::GET, "/v1/health", None, None).await.ok();
    assert!(!health.open_registration);

    let (_, body) = new_agent();
    let body = serde_json::to_vec(&body).expect("json");
    relay
        .request(Method::POST, "/v1/agents", None, &[], Some(body.clone()))
        .await
        .error(StatusCode::FORBIDDEN, code::REGISTRATION_CLOSED);
    relay
        .request(
            Method::POST,
            "/v1/agents",
            None,
            &[(REGISTRATION_HEADER, "s3cret-for-test")],
            Some(body.clone()),
        )
        .await
        .error(StatusCode::FORBIDDEN, code::REGISTRATION_CLOSED);
    let reply = relay
        .request(
            Method::POST,
            "/v1/agents",
            None,
            &[(REGISTRATION_HEADER, "s3cret-for-tests")],
            Some(body),
        )
        .await;
    assert_eq!(reply.status, StatusCode::CREATED);
}

#[tokio::test]
async fn without_a_secret_and_without_open_registration_nobody_registers() {
    let (config, dir) = closed(None);
    let relay = start_with(config, dir).await;
    let (_, body) = new_agent();
    relay
        .request(
            Method::POST,
            "/v1/agents",
            None,
            &[(REGISTRATION_HEADER, "")],
            Some(serde_json::to_vec(&body).expect("json")),
        )
        .await
        .error(StatusCode::FORBIDDEN, code::REGISTRATION_CLOSED);
}

#[tokio::test]
async fn registration_checks_id_name_and_hash() {
    let relay = start().await;
    let cases = [
        ("bad id", "laptop", true),
        ("ag_ok", "", true),
        ("ag_ok", &"n".repeat(101), true),
        ("ag_ok", "laptop", false),
    ];
    for (id, name, good_hash) in cases {
        let (_, mut body) = new_agent();
        body.agent_id = id.into();
        body.name = name.into();
        if !good_hash {
            body.auth_hash = "AAAA".into();
        }
        relay
            .call(
                Method::POST,
                "/v1/agents",
                None,
                Some(serde_json::to_value(&body).expect("json")),
            )
            .await
            .error(StatusCode::BAD_REQUEST, code::INVALID_INPUT);
    }
}

#[tokio::test]
async fn many_registrations_from_loopback_are_not_rate_limited() {
    let relay = start().await;
    for _ in 0..50 {
        crate::common::register(&relay).await;
    }
}
