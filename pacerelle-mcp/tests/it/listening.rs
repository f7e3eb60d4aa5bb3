//! The listening flow through the real binary, driven by a real MCP client over stdio, against a real
//! relay, on both protocol eras; and what the relay's files hold afterwards.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::time::Duration;

use common::{
    Era, Server, TestRelay, assert_no_plaintext, eventually, file_contains, files_in, occurrences, spawn,
    spawn_with, text,
};
use pacerelle_client::{
    Answer, DeviceClient, agent::QuestionRequest, core::wire::ItemKind, core::wire::MessageState,
    core::wire::Presence,
};
use rmcp::model::{CallToolResult, GetPromptRequestParams, ProtocolVersion};
use serde_json::json;

const TOOLS: [&str; 15] = [
    "get_status",
    "list_sessions",
    "get_checkpoints",
    "wait_for_messages",
    "reply",
    "mark_processed",
    "save_checkpoint",
    "ask_user",
    "wait_for_answer",
    "send_notification",
    "cancel_question",
    "connect_user",
    "list_users",
    "get_user",
    "disconnect_user",
];

#[tokio::test]
async fn listening_flow_on_2025_11_25() {
    listening_flow(Era::Legacy).await;
}

#[tokio::test]
async fn listening_flow_on_2026_07_28() {
    listening_flow(Era::Modern).await;
}

async fn listening_flow(era: Era) {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let server = spawn(&agent, &relay.url, &[], era).await;
    let suffix = match era {
        Era::Legacy => "legacy",
        Era::Modern => "modern",
    };
    let task_canary = format!("TASK-CANARY-{suffix}-7f3a");
    let reply_canary = format!("REPLY-CANARY-{suffix}-91bd");
    let summary_canary = format!("SUMMARY-CANARY-{suffix}-c04e");
    let next_canary = format!("NEXT-CANARY-{suffix}-55d2");

    // The protocol era, the server's identity and instructions.
    let info = server.client.peer_info().expect("server info");
    let expected = match era {
        Era::Legacy => ProtocolVersion::V_2025_11_25,
        Era::Modern => ProtocolVersion::V_2026_07_28,
    };
    assert_eq!(info.protocol_version, expected);
    assert_eq!(
        info.server_info.as_ref().expect("server info").name,
        "pacerelle-mcp"
    );
    let instructions = info.instructions.clone().expect("instructions");
    assert!(instructions.contains("wait_for_messages") && instructions.contains("paired device"));

    // Exactly the fifteen tools, each with its four annotations and an output schema.
    let tools = server.client.list_all_tools().await.expect("list tools");
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    names.sort_unstable();
    let mut expected_names = TOOLS.to_vec();
    expected_names.sort_unstable();
    assert_eq!(names, expected_names);
    for tool in &tools {
        let a = tool
            .annotations
            .as_ref()
            .unwrap_or_else(|| panic!("{} has no annotations", tool.name));
        assert!(
            a.read_only_hint.is_some()
                && a.destructive_hint.is_some()
                && a.idempotent_hint.is_some()
                && a.open_world_hint.is_some(),
            "{} lacks an annotation: {a:?}",
            tool.name
        );
        assert!(tool.output_schema.is_some(), "{} has no output schema", tool.name);
        let schema = serde_json::to_string(&tool.input_schema).unwrap();
        assert!(
            !schema.contains("source_message_id") && !schema.contains("next_action"),
            "{schema}"
        );
    }

    // The prompt.
    let prompts = server.client.list_all_prompts().await.expect("list prompts");
    assert!(prompts.iter().any(|p| p.name == "start_pacerelle"));
    let prompt = server
        .client
        .get_prompt(GetPromptRequestParams::new("start_pacerelle"))
        .await
        .expect("get prompt");
    let prompt_text = serde_json::to_string(&prompt.messages).unwrap();
    assert!(prompt_text.contains("get_status") && prompt_text.contains("wait_for_messages"));

    // Status and checkpoints at the start.
    let status = server.ok("get_status", json!({})).await;
    assert_eq!(status["relayReachable"], true);
    assert_eq!(status["agentName"], "test agent");
    assert_eq!(status["lease"]["held"], true, "{status}");
    assert_eq!(status["devices"].as_array().unwrap().len(), 1);
    assert_eq!(status["devices"][0]["name"], "test phone");
    let checkpoints = server.ok("get_checkpoints", json!({})).await;
    assert_eq!(checkpoints["checkpoints"], json!([]));

    // A wait without cursor is parked; the phone sees the assistant listening; a task sent meanwhile arrives.
    let waiting = server.spawn_call("wait_for_messages", json!({"timeoutSeconds": 30}));
    let listening = eventually(Duration::from_secs(10), || async {
        device
            .status()
            .await
            .is_ok_and(|s| s.listening && s.presence == Presence::Listening)
    })
    .await;
    assert!(
        listening,
        "the phone should see the assistant listening while the wait is parked"
    );
    let sent = device.send(&task_canary, None).await.expect("send");
    let result = waiting.await.expect("join").expect("wait");
    assert_ne!(result.is_error, Some(true), "{}", text(&result));
    let inbox = result.structured_content.clone().expect("structured");
    assert_eq!(inbox["status"], "messages", "{inbox}");
    let messages = inbox["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0]["messageId"], sent.id.as_str());
    assert_eq!(messages[0]["text"], task_canary.as_str());
    assert_eq!(messages[0]["from"], device.credentials().device_id.as_str());
    assert_eq!(messages[0]["fromName"], "test phone");
    assert_eq!(messages[0]["redelivered"], false);
    assert!(messages[0]["sentAt"].is_string());
    assert!(text(&result).contains("reply"), "the text says what to do next");
    let cursor = inbox["cursor"].as_str().expect("cursor").to_string();

    // Reply with its sourceMessageId: the device sees it. The same reply again is stored once.
    let reply = server
        .ok("reply", json!({"sourceMessageId": sent.id, "text": reply_canary}))
        .await;
    assert_eq!(reply["created"], true);
    let again = server
        .ok("reply", json!({"sourceMessageId": sent.id, "text": reply_canary}))
        .await;
    assert_eq!(again["created"], false);
    assert_eq!(again["replyId"], reply["replyId"]);
    let page = device
        .conversation(None, Duration::ZERO)
        .await
        .expect("conversation");
    let replies: Vec<_> = page.items.iter().filter(|i| i.kind == ItemKind::Reply).collect();
    assert_eq!(replies.len(), 1);
    assert_eq!(replies[0].text, reply_canary);
    assert_eq!(replies[0].source_message_id.as_deref(), Some(sent.id.as_str()));

    // Mark it processed (idempotent).
    let processed = server.ok("mark_processed", json!({"messageId": sent.id})).await;
    let again = server.ok("mark_processed", json!({"messageId": sent.id})).await;
    assert_eq!(processed["processedAt"], again["processedAt"]);
    let page = device
        .conversation(None, Duration::ZERO)
        .await
        .expect("conversation");
    let task = page
        .items
        .iter()
        .find(|i| i.id == sent.id)
        .expect("task in conversation");
    assert_eq!(task.state, Some(MessageState::Processed));

    // A wait with the cursor times out cleanly and says to call again with the cursor.
    let result = server
        .call(
            "wait_for_messages",
            json!({"cursor": cursor, "timeoutSeconds": 1}),
        )
        .await;
    let timeout = result.structured_content.clone().expect("structured");
    assert_eq!(timeout["status"], "timeout");
    assert_eq!(timeout["messages"], json!([]));
    assert_eq!(timeout["cursor"], cursor.as_str());
    assert!(text(&result).contains(&cursor), "{}", text(&result));

    // The processed task is not returned by a wait without cursor.
    let fresh = server.ok("wait_for_messages", json!({"timeoutSeconds": 0})).await;
    assert_eq!(fresh["status"], "timeout");
    assert_eq!(fresh["messages"], json!([]));

    // A checkpoint saved is read back.
    let saved = server
        .ok(
            "save_checkpoint",
            json!({"summary": summary_canary, "nextAction": next_canary, "messageIds": [sent.id]}),
        )
        .await;
    let read = server.ok("get_checkpoints", json!({"limit": 3})).await;
    let list = read["checkpoints"].as_array().unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["id"], saved["id"]);
    assert_eq!(list[0]["summary"], summary_canary.as_str());
    assert_eq!(list[0]["nextAction"], next_canary.as_str());
    assert_eq!(list[0]["messageIds"], json!([sent.id]));
    assert!(list[0]["createdAt"].is_string());

    let status = server.ok("get_status", json!({})).await;
    assert_eq!(status["tasks"]["processed"], 1);
    assert_eq!(status["tasks"]["inProgress"], 0);
    assert!(status["lastCheckpointAt"].is_string());
    assert_eq!(status["openQuestions"], 0);

    // A question asked by this agent (for example by its hook) counts as open.
    agent
        .ask_user(QuestionRequest::yes_no("deploy now?"))
        .await
        .expect("ask");
    let status = server.ok("get_status", json!({})).await;
    assert_eq!(status["openQuestions"], 1);

    // On exit the lease is released: the phone sees no session.
    server.stop().await;
    let status = device.status().await.expect("status");
    assert!(
        status.session.is_none(),
        "the lease is released on exit: {status:?}"
    );

    // No plaintext of tasks, replies or checkpoints in the relay's files, while it runs (the WAL) and after.
    let canaries = [
        task_canary.as_str(),
        reply_canary.as_str(),
        summary_canary.as_str(),
        next_canary.as_str(),
    ];
    assert_no_plaintext(relay.dir.path(), &canaries);
    // The scan sees what is stored in clear: the agent's name is metadata the relay keeps readable.
    assert!(
        files_in(relay.dir.path())
            .iter()
            .any(|f| file_contains(f, b"test agent")),
        "the scan should find metadata stored in clear"
    );
    let dir = relay.stop().await;
    assert_no_plaintext(dir.path(), &canaries);
}

// ----- lean results: what the text of a result carries (PACERELLE_MCP_RESULT_TEXT) -----

const GUIDE: (&str, &str) = ("PACERELLE_MCP_RESULT_TEXT", "guide");

/// A task of exactly `bytes` bytes that starts with `marker`, in plain words (nothing JSON escapes).
fn task_of(marker: &str, bytes: usize) -> String {
    let mut text = format!("{marker} ");
    while text.len() < bytes {
        text.push_str("Check the build on the staging branch and tell me what fails. ");
    }
    text.truncate(bytes);
    text
}

/// Sends `text` from the phone and returns the wait that received it (the whole result).
async fn receive(server: &Server, device: &DeviceClient, text: &str) -> (String, CallToolResult) {
    let sent = device.send(text, None).await.expect("send");
    let result = server
        .call("wait_for_messages", json!({"timeoutSeconds": 10}))
        .await;
    assert_ne!(result.is_error, Some(true), "{}", common::text(&result));
    let inbox = result.structured_content.clone().expect("structured");
    assert_eq!(inbox["messages"][0]["messageId"], sent.id.as_str(), "{inbox}");
    assert_eq!(inbox["messages"][0]["text"], text);
    (sent.id, result)
}

#[tokio::test]
async fn in_guide_mode_a_64_kib_task_travels_once_and_the_text_says_where_to_read_it() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let server = spawn_with(&agent, &relay.url, &[], &[GUIDE], Era::Modern).await;
    let marker = "LEAN-GUIDE-MARKER-5e1c";
    let task = task_of(marker, 64 * 1024);

    let (id, result) = receive(&server, &device, &task).await;
    assert_eq!(
        occurrences(&result, marker),
        1,
        "the task is in structuredContent only"
    );
    assert_eq!(result.content.len(), 1, "one text block: the guide");
    let guide = text(&result);
    assert!(
        guide.contains("structuredContent.messages[].text") && guide.contains(&format!("{id}, 65536 bytes")),
        "the model learns where the task is and how long it is: {guide}"
    );
    assert!(
        guide.contains("reply") && guide.contains("mark_processed"),
        "{guide}"
    );
    assert!(
        guide.contains("PACERELLE_MCP_RESULT_TEXT=json"),
        "and what to do if its host does not show structured content: {guide}"
    );
    assert!(guide.len() < 1024, "the guide stays short: {} bytes", guide.len());

    // A timeout carries no content: the guide names the cursor and points at the structured content.
    server.ok("mark_processed", json!({"messageId": id})).await;
    let cursor = result.structured_content.as_ref().unwrap()["cursor"]
        .as_str()
        .unwrap()
        .to_string();
    let timeout = server
        .call(
            "wait_for_messages",
            json!({"cursor": cursor, "timeoutSeconds": 0}),
        )
        .await;
    let guide = text(&timeout);
    assert!(
        guide.contains(&cursor) && guide.contains("structuredContent") && !guide.contains("\"messages\""),
        "{guide}"
    );
    server.stop().await;
}

#[tokio::test]
async fn in_json_mode_the_default_a_64_kib_task_is_also_in_a_json_text_block() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let server = spawn(&agent, &relay.url, &[], Era::Legacy).await;
    let marker = "LEAN-JSON-MARKER-a90b";
    let task = task_of(marker, 64 * 1024);

    let (_, result) = receive(&server, &device, &task).await;
    assert_eq!(result.content.len(), 2, "the guide, then the JSON");
    let json_block = result.content[1].as_text().expect("a text block").text.clone();
    let parsed: serde_json::Value = serde_json::from_str(&json_block).expect("the second block is JSON");
    assert_eq!(Some(parsed), result.structured_content);
    assert_eq!(
        occurrences(&result, marker),
        2,
        "structuredContent and its JSON copy, for hosts that read only text"
    );
    let guide = result.content[0].as_text().expect("a text block").text.clone();
    assert!(!guide.contains(marker) && guide.contains("reply"), "{guide}");
    server.stop().await;
}

/// Bytes of a result's text blocks and of its structured content (compact JSON).
fn sizes(result: &CallToolResult) -> (usize, usize) {
    let text: usize = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.len()))
        .sum();
    let structured = result
        .structured_content
        .as_ref()
        .map_or(0, |v| v.to_string().len());
    (text, structured)
}

/// The calls measured in docs/mcp.md ("Result size"), in one mode: (call, text bytes, structured bytes).
async fn measure(relay: &TestRelay, mode: &str) -> Vec<(&'static str, usize, usize)> {
    let (agent, device) = relay.agent_and_device().await;
    let server = spawn_with(
        &agent,
        &relay.url,
        &[],
        &[("PACERELLE_MCP_RESULT_TEXT", mode)],
        Era::Modern,
    )
    .await;
    let mut rows = Vec::new();
    let mut call = |name: &'static str, result: &CallToolResult| {
        assert_ne!(result.is_error, Some(true), "{name}: {}", text(result));
        let (t, s) = sizes(result);
        rows.push((name, t, s));
    };
    let status = server.call("get_status", json!({})).await;
    call("get_status", &status);
    let timeout = server
        .call("wait_for_messages", json!({"timeoutSeconds": 0}))
        .await;
    call("wait_for_messages, timeout", &timeout);
    for (name, bytes) in [
        ("wait_for_messages, 1 KiB task", 1024),
        ("wait_for_messages, 64 KiB task", 64 * 1024),
    ] {
        let (id, result) = receive(&server, &device, &task_of("MEASURE", bytes)).await;
        call(name, &result);
        server.ok("mark_processed", json!({"messageId": id})).await;
    }
    let asked = server
        .call(
            "ask_user",
            json!({"question": "Push 3 commits to origin/main?", "kind": "yes_no",
                   "details": "git push origin main"}),
        )
        .await;
    call("ask_user", &asked);
    let id = asked.structured_content.as_ref().unwrap()["questionId"]
        .as_str()
        .unwrap()
        .to_string();
    device.answer(&id, Answer::Yes).await.expect("the phone answers");
    let answered = server
        .call("wait_for_answer", json!({"questionId": id, "timeoutSeconds": 10}))
        .await;
    assert_eq!(answered.structured_content.as_ref().unwrap()["approved"], true);
    call("wait_for_answer, yes", &answered);
    server.stop().await;
    rows
}

/// Prints the table of docs/mcp.md's "Result size" section:
/// `cargo test -p pacerelle-mcp --test it -- --ignored --nocapture listening::result_size`.
/// Tokens are approximated as bytes / 4, rounded up.
#[tokio::test]
#[ignore = "a measurement: prints the table of docs/mcp.md"]
async fn result_size_per_call_and_mode() {
    let relay = TestRelay::start().await;
    let json_rows = measure(&relay, "json").await;
    let guide_rows = measure(&relay, "guide").await;
    let tokens = |bytes: usize| bytes.div_ceil(4);
    println!(
        "| call | structuredContent | text, json (before) | text, guide | model reads both: json (before) | \
         model reads both: guide |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for ((name, json_text, structured), (guide_name, guide_text, guide_structured)) in
        json_rows.iter().zip(&guide_rows)
    {
        assert_eq!(name, guide_name);
        // The structured content is the same in both modes, up to ids and times of the same length.
        assert!(structured.abs_diff(*guide_structured) <= 8, "{name}");
        assert!(
            guide_text < json_text,
            "{name}: the guide is shorter than guide + JSON"
        );
        println!(
            "| {name} | {} | {} | {} | {} | {} |",
            tokens(*structured),
            tokens(*json_text),
            tokens(*guide_text),
            tokens(*json_text) + tokens(*structured),
            tokens(*guide_text) + tokens(*structured),
        );
    }
}
