//! Two sessions of one agent in two project folders, each an MCP server named by `PACERELLE_SESSION`: a task
//! sent to one never reaches the other, `list_sessions` and `get_status` show both, and a third server of one
//! of the names gets the lease error — with the real binary, a real MCP client and a real relay.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use common::{Era, TestRelay, spawn_in};
use serde_json::json;

#[tokio::test]
async fn two_sessions_in_two_folders_each_receive_their_own_tasks() {
    let relay = TestRelay::start().await;
    let (agent, phone) = relay.agent_and_device().await;
    let projects = tempfile::tempdir().expect("tempdir");
    let (api, web) = (projects.path().join("api"), projects.path().join("web"));
    std::fs::create_dir_all(&api).expect("api");
    std::fs::create_dir_all(&web).expect("web");
    let a = spawn_in(
        &agent,
        &relay.url,
        &[("PACERELLE_SESSION", "api")],
        &api,
        Era::Modern,
    )
    .await;
    let b = spawn_in(
        &agent,
        &relay.url,
        &[("PACERELLE_SESSION", "web")],
        &web,
        Era::Legacy,
    )
    .await;
    a.ok("wait_for_messages", json!({"timeoutSeconds": 0})).await;
    b.ok("wait_for_messages", json!({"timeoutSeconds": 0})).await;

    // Sent to web: web receives it, api never does.
    let sent = phone
        .send_to("Fix the login page", None, Some("web"))
        .await
        .expect("sent");
    let got = b.ok("wait_for_messages", json!({"timeoutSeconds": 5})).await;
    assert_eq!(got["messages"][0]["messageId"], sent.id.as_str(), "{got}");
    assert_eq!(got["messages"][0]["text"], "Fix the login page");
    let none = a.ok("wait_for_messages", json!({"timeoutSeconds": 1})).await;
    assert_eq!(none["messages"], json!([]), "{none}");
    let refused = a
        .tool_error("mark_processed", json!({"messageId": sent.id}))
        .await;
    assert!(
        refused.starts_with("No task") && refused.contains("another session"),
        "{refused}"
    );
    b.ok("mark_processed", json!({"messageId": sent.id})).await;

    // Both listed, each with its folder, this one marked.
    let listed = a.ok("list_sessions", json!({})).await;
    assert_eq!(listed["thisSession"], "api", "{listed}");
    let sessions: Vec<(String, String, bool)> = listed["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_string(),
                s["folder"].as_str().unwrap().to_string(),
                s["thisSession"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        sessions,
        [
            ("api".into(), "api".into(), true),
            ("web".into(), "web".into(), false)
        ],
        "{listed}"
    );
    let status = b.ok("get_status", json!({})).await;
    assert_eq!(status["lease"]["session"], "web", "{status}");
    assert_eq!(status["lease"]["held"], true, "{status}");
    assert_eq!(status["sessions"].as_array().map(Vec::len), Some(2), "{status}");

    // A third server of web: the lease error names the session and the way out.
    let c = spawn_in(
        &agent,
        &relay.url,
        &[("PACERELLE_SESSION", "web")],
        &web,
        Era::Modern,
    )
    .await;
    let text = c
        .tool_error("wait_for_messages", json!({"timeoutSeconds": 0}))
        .await;
    assert!(
        text.contains("\"web\"") && text.contains(&format!("pid {}", b.pid)),
        "{text}"
    );
    assert!(text.contains("PACERELLE_SESSION"), "{text}");
    for server in [a, b, c] {
        server.stop().await;
    }
}

#[tokio::test]
async fn a_bad_session_name_stops_the_server_with_a_clear_message() {
    let relay = TestRelay::start().await;
    let (agent, _phone) = relay.agent_and_device().await;
    let out = common::command(&agent, &relay.url, &["--session", "any"])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("PACERELLE_SESSION (or --session)") && stderr.contains("any"),
        "{stderr}"
    );
}
