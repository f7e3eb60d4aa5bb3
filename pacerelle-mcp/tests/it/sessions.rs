//! The lease between two servers, cancellation and progress, bad arguments, the relay going away and
//! coming back, credentials, and the HTTP mode — with the real binary, a real MCP client and a real relay.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{Era, TestRelay, command, eventually, spawn};
use pacerelle_client::AgentClient;
use rmcp::model::{CallToolRequestParams, ClientRequest, Request};
use rmcp::service::PeerRequestOptions;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn args(value: serde_json::Value) -> rmcp::model::JsonObject {
    value.as_object().expect("object").clone()
}

#[tokio::test]
async fn a_second_server_gets_the_lease_error_then_takes_over_after_the_first_exits() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let first = spawn(&agent, &relay.url, &[], Era::Legacy).await;
    first.ok("wait_for_messages", json!({"timeoutSeconds": 0})).await;
    // The first server receives a task and stops before marking it processed.
    let sent = device.send("left half done", None).await.expect("send");
    let inbox = first.ok("wait_for_messages", json!({"timeoutSeconds": 5})).await;
    assert_eq!(inbox["messages"][0]["messageId"], sent.id.as_str());

    let second = spawn(&agent, &relay.url, &[], Era::Modern).await;
    let holder = format!("pacerelle-mcp pid {}", first.pid);
    for (tool, arguments) in [
        ("wait_for_messages", json!({"timeoutSeconds": 0})),
        ("mark_processed", json!({"messageId": sent.id})),
    ] {
        let text = second.tool_error(tool, arguments).await;
        assert!(text.contains(&holder), "{tool} should name the holder: {text}");
        assert!(text.contains("since"), "{tool} should say since when: {text}");
        assert!(text.contains("--takeover") && text.contains("Stop"), "{text}");
    }
    // What needs no lease works beside the holder.
    second.ok("get_checkpoints", json!({})).await;
    second
        .ok("save_checkpoint", json!({"summary": "s", "nextAction": "n"}))
        .await;
    second
        .ok(
            "reply",
            json!({"sourceMessageId": sent.id, "text": "from the second"}),
        )
        .await;
    let status = second.ok("get_status", json!({})).await;
    assert_eq!(status["lease"]["held"], false);
    assert!(
        status["lease"]["holder"]["host"]
            .as_str()
            .unwrap()
            .contains(&holder),
        "{status}"
    );

    // The first exits (releasing the lease): the second takes it and gets the task again, flagged.
    first.stop().await;
    let inbox = second.ok("wait_for_messages", json!({"timeoutSeconds": 5})).await;
    assert_eq!(inbox["messages"][0]["messageId"], sent.id.as_str());
    assert_eq!(inbox["messages"][0]["redelivered"], true);
    second.ok("mark_processed", json!({"messageId": sent.id})).await;
    let status = second.ok("get_status", json!({})).await;
    assert_eq!(status["lease"]["held"], true);
    second.stop().await;
}

#[tokio::test]
async fn takeover_takes_the_lease_from_the_holder() {
    let relay = TestRelay::start().await;
    let (agent, _device) = relay.agent_and_device().await;
    let first = spawn(&agent, &relay.url, &[], Era::Legacy).await;
    first.ok("wait_for_messages", json!({"timeoutSeconds": 0})).await;
    let second = spawn(&agent, &relay.url, &["--takeover"], Era::Legacy).await;
    second.ok("wait_for_messages", json!({"timeoutSeconds": 0})).await;
    // The former holder is told who has it now, and does not take it back.
    let text = first
        .tool_error("wait_for_messages", json!({"timeoutSeconds": 0}))
        .await;
    assert!(
        text.contains(&format!("pacerelle-mcp pid {}", second.pid)),
        "{text}"
    );
    second.ok("wait_for_messages", json!({"timeoutSeconds": 0})).await;
    first.stop().await;
    second.stop().await;
}

#[tokio::test]
async fn a_cancelled_wait_returns_promptly_on_both_eras() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    for era in [Era::Legacy, Era::Modern] {
        let server = spawn(&agent, &relay.url, &[], era).await;
        let params = CallToolRequestParams::new("wait_for_messages")
            .with_arguments(args(json!({"timeoutSeconds": 50})));
        let handle = server
            .client
            .send_cancellable_request(
                ClientRequest::CallToolRequest(Request::new(params)),
                PeerRequestOptions::no_options(),
            )
            .await
            .expect("send");
        // Progress comes within a second or two, and the wait is parked at the relay.
        assert!(
            eventually(Duration::from_secs(10), || async {
                !server.progress.lock().unwrap().is_empty()
            })
            .await,
            "{era:?}: a wait with a progress token sends progress"
        );
        assert_eq!(server.progress.lock().unwrap()[0].total, Some(50.0));
        assert!(
            eventually(Duration::from_secs(10), || async {
                device.status().await.is_ok_and(|s| s.listening)
            })
            .await,
            "{era:?}: the wait should be parked at the relay"
        );
        let cancelled_at = Instant::now();
        handle
            .cancel(Some("the person pressed stop".into()))
            .await
            .expect("cancel");
        // The wait ends at the relay too, well before its 50 s.
        assert!(
            eventually(Duration::from_secs(15), || async {
                device.status().await.is_ok_and(|s| !s.listening)
            })
            .await,
            "{era:?}: the cancelled wait should be released at the relay"
        );
        assert!(cancelled_at.elapsed() < Duration::from_secs(30));
        // The server goes on serving.
        let next = server.ok("wait_for_messages", json!({"timeoutSeconds": 0})).await;
        assert_eq!(next["status"], "timeout");
        server.stop().await;
    }
}

#[tokio::test]
async fn a_long_wait_notifies_progress_at_least_every_fifteen_seconds() {
    let relay = TestRelay::start().await;
    let (agent, _device) = relay.agent_and_device().await;
    let server = spawn(&agent, &relay.url, &[], Era::Modern).await;
    let params =
        CallToolRequestParams::new("wait_for_messages").with_arguments(args(json!({"timeoutSeconds": 16})));
    let handle = server
        .client
        .send_cancellable_request(
            ClientRequest::CallToolRequest(Request::new(params)),
            PeerRequestOptions::no_options(),
        )
        .await
        .expect("send");
    let token = handle.progress_token.clone();
    let response = handle.await_response().await.expect("response");
    let rmcp::model::ServerResult::CallToolResult(result) = response else {
        panic!("unexpected response {response:?}");
    };
    assert_eq!(
        result.structured_content.expect("structured")["status"],
        "timeout"
    );
    let progress = server.progress.lock().unwrap().clone();
    assert!(progress.len() >= 2, "{progress:?}");
    assert!(
        progress
            .iter()
            .all(|p| p.progress_token == token && p.total == Some(16.0))
    );
    // Notified within the first seconds and then at most 15 s apart.
    assert!(
        progress.windows(2).all(|w| w[1].progress > w[0].progress),
        "{progress:?}"
    );
    assert!(
        progress[0].progress <= 2.0 && progress[1].progress <= 15.0,
        "{progress:?}"
    );
    server.stop().await;
}

#[tokio::test]
async fn bad_arguments_are_invalid_params() {
    let relay = TestRelay::start().await;
    let (agent, _device) = relay.agent_and_device().await;
    let server = spawn(&agent, &relay.url, &[], Era::Legacy).await;
    let cases = [
        ("wait_for_messages", json!({"timeoutSeconds": 56})),
        ("wait_for_messages", json!({"timeoutSeconds": -1})),
        ("wait_for_messages", json!({"timeoutSeconds": "soon"})),
        ("wait_for_messages", json!({"cursor": "not-a-cursor"})),
        (
            "wait_for_messages",
            json!({"cursor": "c1.AAAAAAAAAAE", "extra": 1}),
        ),
        ("reply", json!({"sourceMessageId": "msg_1", "text": "  "})),
        ("reply", json!({"sourceMessageId": "a b", "text": "hi"})),
        (
            "reply",
            json!({"sourceMessageId": "msg_1", "text": "hi", "replyId": "x/y"}),
        ),
        ("reply", json!({"source_message_id": "msg_1", "text": "hi"})),
        ("reply", json!({"text": "hi"})),
        ("mark_processed", json!({"messageId": ""})),
        ("mark_processed", json!({})),
        ("get_checkpoints", json!({"limit": 0})),
        ("get_checkpoints", json!({"limit": 101})),
        ("save_checkpoint", json!({"summary": "", "nextAction": "n"})),
        (
            "save_checkpoint",
            json!({"summary": "s", "nextAction": "n", "messageIds": ["a b"]}),
        ),
    ];
    for (tool, arguments) in cases {
        server.invalid_params(tool, arguments).await;
    }
    let text = server
        .invalid_params("wait_for_messages", json!({"timeoutSeconds": 56}))
        .await;
    assert!(text.contains("timeoutSeconds") && text.contains("55"), "{text}");
    // A well-formed call about a task that does not exist is a tool error, not a protocol error.
    let text = server
        .tool_error("reply", json!({"sourceMessageId": "msg_unknown", "text": "hi"}))
        .await;
    assert!(text.contains("msg_unknown"), "{text}");
    let text = server
        .tool_error("mark_processed", json!({"messageId": "msg_unknown"}))
        .await;
    assert!(text.contains("msg_unknown"), "{text}");
    server.stop().await;
}

#[tokio::test]
async fn relay_down_gives_a_tool_error_and_the_next_call_after_it_is_back_succeeds() {
    // A relay on a port picked free, with an agent and a device; then it stops.
    let relay = TestRelay::start().await;
    let port = relay.port;
    let url = relay.url.clone();
    let (agent, device) = relay.agent_and_device().await;
    let dir = relay.stop().await;

    // The server starts anyway while the relay is down, and every tool says so.
    let server = spawn(&agent, &url, &[], Era::Legacy).await;
    let status = server.call("get_status", json!({})).await;
    let structured = status.structured_content.clone().expect("structured");
    assert_eq!(structured["relayReachable"], false);
    assert!(
        common::text(&status).contains("unreachable"),
        "{}",
        common::text(&status)
    );
    for (tool, arguments) in [
        // The wait goes on with backoff for its 2 s, then says the relay is unreachable.
        ("wait_for_messages", json!({"timeoutSeconds": 2})),
        ("get_checkpoints", json!({})),
        ("reply", json!({"sourceMessageId": "msg_1", "text": "hi"})),
    ] {
        let text = server.tool_error(tool, arguments).await;
        assert!(
            text.contains("unreachable") && text.contains(&url),
            "{tool}: {text}"
        );
    }

    // The relay comes back on the same port: the next calls succeed, the lease is taken.
    let relay = TestRelay::start_on(port, dir).await;
    let inbox = server.ok("wait_for_messages", json!({"timeoutSeconds": 0})).await;
    assert_eq!(inbox["status"], "timeout");
    let status = server.ok("get_status", json!({})).await;
    assert_eq!(status["relayReachable"], true);
    assert_eq!(status["lease"]["held"], true);

    // It goes away in the middle of the session, and comes back again.
    let dir = relay.stop().await;
    let text = server
        .tool_error("wait_for_messages", json!({"timeoutSeconds": 2}))
        .await;
    assert!(text.contains("unreachable"), "{text}");
    let _relay = TestRelay::start_on(port, dir).await;
    let sent = device.send("after the outage", None).await.expect("send");
    let inbox = server.ok("wait_for_messages", json!({"timeoutSeconds": 5})).await;
    assert_eq!(inbox["messages"][0]["messageId"], sent.id.as_str());
    server.ok("mark_processed", json!({"messageId": sent.id})).await;
    server.stop().await;
}

#[tokio::test]
async fn a_wait_outlives_a_relay_restart_on_the_clients_backoff_and_returns_the_task() {
    let relay = TestRelay::start().await;
    let port = relay.port;
    let (agent, device) = relay.agent_and_device().await;
    let server = spawn(&agent, &relay.url, &[], Era::Modern).await;
    server.ok("wait_for_messages", json!({"timeoutSeconds": 0})).await;

    // A wait is parked when the relay goes down; it comes back on the same port a moment later.
    let waiting = server.spawn_call("wait_for_messages", json!({"timeoutSeconds": 30}));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let dir = relay.stop().await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    if waiting.is_finished() {
        let ended = waiting.await.expect("joined");
        panic!("the wait ended while the relay was down: {ended:?}");
    }
    let _relay = TestRelay::start_on(port, dir).await;
    let sent = device.send("after the restart", None).await.expect("send");

    // The same call returns the task sent after the restart: no tool error for the person's outage.
    let result = waiting.await.expect("joined").expect("the call");
    assert_ne!(result.is_error, Some(true), "{}", common::text(&result));
    let inbox = result.structured_content.expect("structured");
    assert_eq!(inbox["status"], "messages", "{inbox}");
    assert_eq!(inbox["messages"][0]["messageId"], sent.id.as_str());
    server.ok("mark_processed", json!({"messageId": sent.id})).await;
    server.stop().await;
}

#[tokio::test]
async fn missing_or_malformed_credentials_exit_with_a_clear_message() {
    let exe = env!("CARGO_BIN_EXE_pacerelle-mcp");
    let token = pacerelle_client::AgentToken::generate().expose();
    let cases: [(&[(&str, &str)], &str); 5] = [
        (
            &[],
            "no agent credentials: set PACERELLE_AGENT_ID and PACERELLE_AGENT_TOKEN",
        ),
        (
            &[("PACERELLE_AGENT_ID", "ag_x")],
            "set both PACERELLE_AGENT_ID and PACERELLE_AGENT_TOKEN, or neither",
        ),
        (
            &[
                ("PACERELLE_AGENT_ID", "ag_x"),
                ("PACERELLE_AGENT_TOKEN", "pcr1_truncated"),
            ],
            "PACERELLE_AGENT_TOKEN: malformed agent token",
        ),
        (
            &[
                ("PACERELLE_AGENT_ID", "ag_x"),
                ("PACERELLE_AGENT_TOKEN", &token),
                ("PACERELLE_RELAY_URL", "relay.example"),
            ],
            "PACERELLE_RELAY_URL",
        ),
        (
            &[
                ("PACERELLE_AGENT_ID", "ag_x"),
                ("PACERELLE_AGENT_TOKEN", &token),
                ("PACERELLE_MCP_RESULT_TEXT", "none"),
            ],
            "PACERELLE_MCP_RESULT_TEXT must be json",
        ),
    ];
    // A home without agent.json: without the variables there is nothing to find.
    let home = tempfile::tempdir().expect("tempdir");
    for (vars, expected) in cases {
        let mut cmd = std::process::Command::new(exe);
        cmd.env("PACERELLE_HOME", home.path())
            .env_remove("PACERELLE_AGENT_ID")
            .env_remove("PACERELLE_AGENT_TOKEN")
            .env_remove("PACERELLE_RELAY_URL")
            .env_remove("PACERELLE_MCP_RESULT_TEXT")
            .stdin(Stdio::null());
        for (k, v) in vars {
            cmd.env(k, v);
        }
        let out = cmd.output().expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{vars:?} should fail");
        assert!(stderr.contains(expected), "{vars:?}: {stderr}");
        assert!(out.stdout.is_empty(), "nothing on stdout: {:?}", out.stdout);
        assert!(
            !stderr.contains("truncated"),
            "the token is never echoed: {stderr}"
        );
    }
}

async fn free_port() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    listener.local_addr().expect("addr").port()
}

/// One MCP `initialize` over HTTP, the raw way, returning the response body.
async fn http_initialize(port: u16) -> Option<String> {
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "raw", "version": "0"}}
    })
    .to_string();
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.ok()?;
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = Vec::new();
    let mut chunk = [0u8; 4096];
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        match tokio::time::timeout(Duration::from_millis(500), stream.read(&mut chunk)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => response.extend_from_slice(&chunk[..n]),
            Err(_) => {}
        }
        if String::from_utf8_lossy(&response).contains("serverInfo") {
            break;
        }
    }
    Some(String::from_utf8_lossy(&response).into_owned())
}

#[tokio::test]
async fn http_mode_serves_mcp_on_loopback_and_releases_the_lease_on_sigterm() {
    let relay = TestRelay::start().await;
    let (agent, device): (AgentClient, _) = relay.agent_and_device().await;
    let port = free_port().await;
    let addr = format!("127.0.0.1:{port}");
    let mut child = command(&agent, &relay.url, &["--http", &addr])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn");
    let mut response = None;
    for _ in 0..100 {
        if let Some(r) = http_initialize(port).await.filter(|r| r.contains("serverInfo")) {
            response = Some(r);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let response = response.expect("the HTTP endpoint answers initialize");
    assert!(response.contains("pacerelle-mcp"), "{response}");
    // The server took the lease: the phone sees a session.
    assert!(
        eventually(Duration::from_secs(10), || async {
            device.status().await.is_ok_and(|s| s.session.is_some())
        })
        .await
    );
    // SIGTERM: the server releases the lease and exits cleanly.
    let pid = child.id().expect("pid");
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .expect("exits")
        .expect("status");
    assert!(status.success(), "{status:?}");
    let after = device.status().await.expect("status");
    assert!(after.session.is_none(), "the lease is released: {after:?}");

    // A non-loopback address is refused.
    let out = command(&agent, &relay.url, &["--http", "0.0.0.0:0"])
        .stdin(Stdio::null())
        .output()
        .await
        .expect("run");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("loopback"));
}
