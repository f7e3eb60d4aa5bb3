//! The human-in-the-loop tools through the real binary, driven by a real MCP client over stdio, against a
//! real relay, with the phone played by `DeviceClient`: ask, wait (pending, then answered), a yes, a no, a
//! choice, a text, expiry, cancel, notifications, bad arguments. No answer is a no.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::time::Duration;

use common::{
    Era, Server, TestRelay, assert_no_plaintext, eventually, occurrences, spawn, spawn_with, swap_self_copy,
    text,
};
use pacerelle_client::{
    AgentClient, Answer, DeviceClient, Level, QuestionKind, QuestionState, agent::QuestionRequest,
    core::wire::ItemKind, device::OpenedQuestion,
};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use serde_json::{Value, json};

const QUESTION_TOOLS: [&str; 4] = [
    "ask_user",
    "wait_for_answer",
    "send_notification",
    "cancel_question",
];

fn args(value: Value) -> rmcp::model::JsonObject {
    value.as_object().expect("object").clone()
}

/// Starts `wait_for_answer` in the background (the client sends a progress token with every request).
fn wait_in_background(
    server: &Server,
    arguments: Value,
) -> tokio::task::JoinHandle<Result<CallToolResult, rmcp::service::ServiceError>> {
    let client = server.client.clone();
    tokio::spawn(async move {
        client
            .call_tool(CallToolRequestParams::new("wait_for_answer").with_arguments(args(arguments)))
            .await
    })
}

/// The question as the phone sees it among its pending questions.
async fn seen_on_phone(device: &DeviceClient, question_id: &str) -> OpenedQuestion {
    let list = device
        .questions(Some(QuestionState::Pending))
        .await
        .expect("the phone lists its questions");
    list.questions
        .into_iter()
        .find(|q| q.question_id == question_id)
        .unwrap_or_else(|| panic!("the phone should see question {question_id}"))
}

/// Calls `wait_for_answer` until the state is not `pending` (each call bounded by `timeoutSeconds`).
async fn wait_until_settled(server: &Server, question_id: &str) -> (Value, String) {
    for _ in 0..10 {
        let result = server
            .call(
                "wait_for_answer",
                json!({"questionId": question_id, "timeoutSeconds": 20}),
            )
            .await;
        assert_ne!(result.is_error, Some(true), "{}", text(&result));
        let value = result.structured_content.clone().expect("structured");
        if value["state"] != "pending" {
            return (value, text(&result));
        }
    }
    panic!("question {question_id} stayed pending");
}

async fn ask(server: &Server, arguments: Value) -> String {
    let asked = server.ok("ask_user", arguments).await;
    assert!(asked["expiresAt"].is_string(), "{asked}");
    asked["questionId"].as_str().expect("questionId").to_string()
}

#[tokio::test]
async fn ask_and_wait_on_2025_11_25() {
    ask_and_wait(Era::Legacy).await;
}

#[tokio::test]
async fn ask_and_wait_on_2026_07_28() {
    ask_and_wait(Era::Modern).await;
}

/// ask → pending → the phone answers yes → answered and approved; a no; a choice; a text.
async fn ask_and_wait(era: Era) {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let device_id = device.credentials().device_id.clone();
    let server = spawn(&agent, &relay.url, &[], era).await;

    // The four tools are listed, each with its four annotations and an output schema.
    let tools = server.client.list_all_tools().await.expect("list tools");
    for name in QUESTION_TOOLS {
        let tool = tools
            .iter()
            .find(|t| t.name == name)
            .unwrap_or_else(|| panic!("{name} is listed"));
        let a = tool.annotations.as_ref().expect("annotations");
        assert!(
            a.read_only_hint.is_some()
                && a.destructive_hint.is_some()
                && a.idempotent_hint.is_some()
                && a.open_world_hint.is_some(),
            "{name}: {a:?}"
        );
        assert_eq!(a.destructive_hint, Some(false), "{name}");
        assert!(tool.output_schema.is_some(), "{name} has an output schema");
        let schema = serde_json::to_string(&tool.input_schema).unwrap();
        assert!(
            !schema.contains("question_id") && !schema.contains("timeout_seconds"),
            "{schema}"
        );
    }
    // A question's result names its state `state` (a question state, as everywhere else), the answering
    // device's id `answeredBy` and its name `answeredByName`; `status` is only wait_for_messages' wait status.
    for name in ["wait_for_answer", "cancel_question"] {
        let tool = tools.iter().find(|t| t.name == name).expect("listed");
        let out = serde_json::to_value(tool.output_schema.as_ref().expect("schema")).unwrap();
        let properties = &out["properties"];
        for field in [
            "state",
            "conclusion",
            "answeredBy",
            "answeredByName",
            "answeredAt",
            "deviceAnsweredAt",
        ] {
            assert!(properties.get(field).is_some(), "{name} lacks {field}: {out}");
        }
        for gone in ["status", "answeredByDeviceId"] {
            assert!(properties.get(gone).is_none(), "{name} still has {gone}: {out}");
        }
    }
    let messages = tools
        .iter()
        .find(|t| t.name == "wait_for_messages")
        .expect("wait_for_messages is listed");
    let out = serde_json::to_value(messages.output_schema.as_ref().expect("schema")).unwrap();
    assert!(out["properties"].get("status").is_some(), "{out}");
    let info = server.client.peer_info().expect("server info");
    let instructions = info.instructions.clone().expect("instructions");
    assert!(instructions.contains("ask_user") && instructions.contains("No answer is a no"));

    // Ask: it returns at once with an id and an expiry; the phone sees the question pending.
    let asked = server
        .ok(
            "ask_user",
            json!({
                "question": "Push 3 commits to origin/main?",
                "kind": "yes_no",
                "details": "git push origin main",
                "expiresInSeconds": 600
            }),
        )
        .await;
    let id = asked["questionId"].as_str().expect("questionId").to_string();
    let expires_at = asked["expiresAt"].as_str().expect("expiresAt").to_string();
    let on_phone = seen_on_phone(&device, &id).await;
    assert_eq!(on_phone.question, "Push 3 commits to origin/main?");
    assert_eq!(on_phone.kind, QuestionKind::YesNo);
    assert_eq!(on_phone.details.as_deref(), Some("git push origin main"));
    assert_eq!(on_phone.state, QuestionState::Pending);

    // A short wait: pending, not approved, and the text says to call again with the same id.
    let result = server
        .call("wait_for_answer", json!({"questionId": id, "timeoutSeconds": 1}))
        .await;
    let pending = result.structured_content.clone().expect("structured");
    assert_eq!(pending["state"], "pending", "{pending}");
    assert_eq!(pending["approved"], false);
    assert_eq!(pending["answer"], Value::Null);
    assert_eq!(pending["expiresAt"], expires_at.as_str());
    let next = text(&result);
    assert!(next.contains("again") && next.contains(&id), "{next}");
    // An open question is counted by get_status.
    let status = server.ok("get_status", json!({})).await;
    assert_eq!(status["openQuestions"], 1, "{status}");

    // A longer wait is parked (it reports progress); the phone answers yes meanwhile.
    server.progress.lock().unwrap().clear();
    let waiting = wait_in_background(&server, json!({"questionId": id, "timeoutSeconds": 30}));
    let progressed = eventually(Duration::from_secs(10), || async {
        server
            .progress
            .lock()
            .unwrap()
            .iter()
            .any(|p| p.message.as_deref().is_some_and(|m| m.contains("answer")))
    })
    .await;
    assert!(progressed, "a parked wait for an answer reports progress");
    device.answer(&id, Answer::Yes).await.expect("the phone answers");
    let result = waiting.await.expect("join").expect("wait_for_answer");
    assert_ne!(result.is_error, Some(true), "{}", text(&result));
    let yes = result.structured_content.clone().expect("structured");
    assert_eq!(yes["state"], "answered", "{yes}");
    assert_eq!(yes["approved"], true);
    assert_eq!(yes["answer"], "yes");
    // answeredBy is the device's id, as everywhere else; its name is answeredByName.
    assert_eq!(yes["answeredBy"], device_id.as_str());
    assert_eq!(yes["answeredByName"], "test phone");
    assert!(
        yes.get("status").is_none(),
        "a question has a state, not a status: {yes}"
    );
    assert!(yes["answeredAt"].is_string());
    assert_eq!(yes["rejected"], Value::Null);
    assert!(text(&result).contains("YES"), "{}", text(&result));
    // Reading it again gives the same answer; it is too late to cancel it.
    let again = server
        .ok("wait_for_answer", json!({"questionId": id, "timeoutSeconds": 0}))
        .await;
    assert_eq!(again, yes);
    let late = server
        .tool_error("cancel_question", json!({"questionId": id}))
        .await;
    assert!(late.contains("already answered"), "{late}");
    let status = server.ok("get_status", json!({})).await;
    assert_eq!(status["openQuestions"], 0, "{status}");

    // A no: answered, not approved, and the text says not to act.
    let id = ask(
        &server,
        json!({"question": "Delete the build cache?", "kind": "yes_no"}),
    )
    .await;
    seen_on_phone(&device, &id).await;
    device.answer(&id, Answer::No).await.expect("no");
    let (no, next) = wait_until_settled(&server, &id).await;
    assert_eq!(no["state"], "answered", "{no}");
    assert_eq!(no["approved"], false);
    assert_eq!(no["answer"], "no");
    assert_eq!(no["answeredBy"], device_id.as_str());
    assert_eq!(no["answeredByName"], "test phone");
    assert!(next.contains("Do not act"), "{next}");

    // A choice round-trips the chosen option, with its author and time.
    let id = ask(
        &server,
        json!({
            "question": "Deploy where?",
            "kind": "choice",
            "options": ["staging", "production"],
            "questionId": format!("deploy-target-{}", era_name(era))
        }),
    )
    .await;
    assert_eq!(id, format!("deploy-target-{}", era_name(era)));
    let on_phone = seen_on_phone(&device, &id).await;
    assert_eq!(on_phone.kind, QuestionKind::Choice);
    assert_eq!(on_phone.options, ["staging", "production"]);
    assert!(!on_phone.multiple);
    device
        .answer(&id, Answer::Options(vec!["staging".into()]))
        .await
        .expect("choose");
    let (chosen, next) = wait_until_settled(&server, &id).await;
    assert_eq!(chosen["state"], "answered", "{chosen}");
    assert_eq!(chosen["approved"], true);
    assert_eq!(chosen["answer"], json!(["staging"]));
    assert_eq!(chosen["answeredBy"], device_id.as_str());
    assert_eq!(chosen["answeredByName"], "test phone");
    assert!(chosen["answeredAt"].is_string());
    assert!(next.contains("\"staging\""), "{next}");

    // A text question: the written answer comes back; it approves nothing by itself.
    let id = ask(&server, json!({"question": "Which branch name?", "kind": "text"})).await;
    seen_on_phone(&device, &id).await;
    device
        .answer(&id, Answer::Text("feature/phone-approvals".into()))
        .await
        .expect("write");
    let (written, next) = wait_until_settled(&server, &id).await;
    assert_eq!(written["state"], "answered", "{written}");
    assert_eq!(written["answer"], "feature/phone-approvals");
    assert_eq!(written["approved"], false);
    assert_eq!(written["answeredBy"], device_id.as_str());
    assert_eq!(written["answeredByName"], "test phone");
    assert!(next.contains("not an approval"), "{next}");

    // Asking again with an id already used returns the first question: nothing is asked twice.
    let again = server
        .ok(
            "ask_user",
            json!({
                "question": "Deploy where?",
                "kind": "choice",
                "options": ["staging", "production"],
                "questionId": format!("deploy-target-{}", era_name(era))
            }),
        )
        .await;
    assert_eq!(
        again["questionId"],
        format!("deploy-target-{}", era_name(era)).as_str()
    );
    let all = device.questions(None).await.expect("questions");
    assert_eq!(all.questions.len(), 4, "{:?}", all.questions);

    server.stop().await;
}

fn era_name(era: Era) -> &'static str {
    match era {
        Era::Legacy => "legacy",
        Era::Modern => "modern",
    }
}

#[tokio::test]
async fn an_unanswered_question_expires_and_is_not_approved() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let server = spawn(&agent, &relay.url, &[], Era::Legacy).await;
    let id = ask(
        &server,
        json!({"question": "Force-push over main?", "kind": "yes_no", "expiresInSeconds": 2}),
    )
    .await;
    seen_on_phone(&device, &id).await;

    // Nobody answers: the wait ends with expired, not approved, and the text says it is a no.
    let (expired, next) = wait_until_settled(&server, &id).await;
    assert_eq!(expired["state"], "expired", "{expired}");
    assert_eq!(expired["approved"], false);
    assert_eq!(expired["answer"], Value::Null);
    assert_eq!(expired["answeredBy"], Value::Null);
    assert_eq!(expired["answeredByName"], Value::Null);
    assert!(next.contains("NO") && next.contains("do not act"), "{next}");

    // A late answer from the phone is refused, and changes nothing.
    let late = device
        .answer(&id, Answer::Yes)
        .await
        .expect_err("a late answer is refused");
    assert_eq!(late.code(), Some("question_expired"), "{late:?}");
    let still = server
        .ok("wait_for_answer", json!({"questionId": id, "timeoutSeconds": 0}))
        .await;
    assert_eq!(still["state"], "expired");
    assert_eq!(still["approved"], false);
    // Too late to cancel it.
    let text = server
        .tool_error("cancel_question", json!({"questionId": id}))
        .await;
    assert!(text.contains("expired"), "{text}");
    server.stop().await;
}

#[tokio::test]
async fn a_cancelled_question_is_a_no_and_refuses_answers() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let server = spawn(&agent, &relay.url, &[], Era::Modern).await;
    let id = ask(
        &server,
        json!({"question": "Rotate the API keys?", "kind": "yes_no"}),
    )
    .await;
    seen_on_phone(&device, &id).await;

    // A wait parked on the question ends when it is cancelled.
    let waiting = wait_in_background(&server, json!({"questionId": id, "timeoutSeconds": 30}));
    let cancel = server.call("cancel_question", json!({"questionId": id})).await;
    let cancelled = cancel.structured_content.clone().expect("structured");
    assert_eq!(cancelled["state"], "cancelled", "{cancelled}");
    assert_eq!(cancelled["approved"], false);
    assert!(text(&cancel).contains("do not act"), "{}", text(&cancel));
    let result = waiting.await.expect("join").expect("wait_for_answer");
    let waited = result.structured_content.clone().expect("structured");
    assert_eq!(waited["state"], "cancelled", "{waited}");
    assert_eq!(waited["approved"], false);
    let next = text(&result);
    assert!(next.contains("NO") && next.contains("do not act"), "{next}");

    // Cancelling again changes nothing; the phone's answer is refused; the state stays cancelled.
    let again = server.ok("cancel_question", json!({"questionId": id})).await;
    assert_eq!(again["state"], "cancelled");
    let refused = device
        .answer(&id, Answer::Yes)
        .await
        .expect_err("an answer to a cancelled question is refused");
    assert_eq!(refused.code(), Some("question_cancelled"), "{refused:?}");
    let after = server
        .ok("wait_for_answer", json!({"questionId": id, "timeoutSeconds": 0}))
        .await;
    assert_eq!(after["state"], "cancelled");
    assert_eq!(after["approved"], false);
    assert_eq!(after["answer"], Value::Null);
    server.stop().await;
}

#[tokio::test]
async fn a_notification_reaches_the_phone_and_nothing_is_stored_in_clear() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let server = spawn(&agent, &relay.url, &[], Era::Legacy).await;
    let note = "NOTE-CANARY-3b7e: the release build is done";
    let title = "TITLE-CANARY-a41c";
    let question = "QUESTION-CANARY-0d9f: publish it?";
    let details = "DETAILS-CANARY-77e2";

    let sent = server
        .ok(
            "send_notification",
            json!({"text": note, "title": title, "level": "success"}),
        )
        .await;
    let notification_id = sent["notificationId"].as_str().expect("id").to_string();
    assert!(sent["createdAt"].is_string());
    server
        .ok("send_notification", json!({"text": "plain info"}))
        .await;
    ask(
        &server,
        json!({"question": question, "kind": "yes_no", "details": details}),
    )
    .await;

    let page = device
        .conversation(None, Duration::ZERO)
        .await
        .expect("conversation");
    let notes: Vec<_> = page
        .items
        .iter()
        .filter(|i| i.kind == ItemKind::Notification)
        .collect();
    assert_eq!(notes.len(), 2, "{:?}", page.items);
    assert_eq!(notes[0].id, notification_id);
    assert_eq!(notes[0].text, note);
    assert_eq!(notes[0].title.as_deref(), Some(title));
    assert_eq!(notes[0].level, Some(Level::Success));
    assert_eq!(notes[1].text, "plain info");
    assert_eq!(notes[1].level, Some(Level::Info));
    let asked = page
        .items
        .iter()
        .find(|i| i.kind == ItemKind::Question)
        .expect("the question is in the conversation");
    assert_eq!(asked.text, question);

    server.stop().await;
    let canaries = [note, title, question, details];
    assert_no_plaintext(relay.dir.path(), &canaries);
    let dir = relay.stop().await;
    assert_no_plaintext(dir.path(), &canaries);
}

#[tokio::test]
async fn bad_arguments_are_invalid_params_and_failures_are_never_a_yes() {
    let relay = TestRelay::start().await;
    let (agent, _device) = relay.agent_and_device().await;
    let server = spawn(&agent, &relay.url, &[], Era::Legacy).await;
    let cases = [
        ("ask_user", json!({"question": "ok?", "kind": "maybe"})),
        ("ask_user", json!({"question": "ok?"})),
        ("ask_user", json!({"question": "  ", "kind": "yes_no"})),
        ("ask_user", json!({"kind": "yes_no"})),
        (
            "ask_user",
            json!({"question": "ok?", "kind": "yes_no", "options": ["a", "b"]}),
        ),
        (
            "ask_user",
            json!({"question": "ok?", "kind": "text", "multiple": true}),
        ),
        ("ask_user", json!({"question": "which?", "kind": "choice"})),
        (
            "ask_user",
            json!({"question": "which?", "kind": "choice", "options": ["only"]}),
        ),
        (
            "ask_user",
            json!({"question": "which?", "kind": "choice", "options": ["a", "a"]}),
        ),
        (
            "ask_user",
            json!({"question": "which?", "kind": "choice", "options": ["a", " "]}),
        ),
        (
            "ask_user",
            json!({"question": "ok?", "kind": "yes_no", "expiresInSeconds": 0}),
        ),
        (
            "ask_user",
            json!({"question": "ok?", "kind": "yes_no", "expiresInSeconds": 604_801}),
        ),
        (
            "ask_user",
            json!({"question": "ok?", "kind": "yes_no", "questionId": "a b"}),
        ),
        (
            "ask_user",
            json!({"question": "ok?", "kind": "yes_no", "expires_in_seconds": 60}),
        ),
        ("wait_for_answer", json!({})),
        ("wait_for_answer", json!({"questionId": "a/b"})),
        (
            "wait_for_answer",
            json!({"questionId": "qst_1", "timeoutSeconds": 56}),
        ),
        (
            "wait_for_answer",
            json!({"questionId": "qst_1", "timeoutSeconds": -1}),
        ),
        ("send_notification", json!({"text": ""})),
        ("send_notification", json!({"text": "hi", "level": "loud"})),
        ("send_notification", json!({"title": "no text"})),
        ("cancel_question", json!({})),
        ("cancel_question", json!({"questionId": ""})),
    ];
    for (tool, arguments) in cases {
        server.invalid_params(tool, arguments).await;
    }
    let message = server
        .invalid_params(
            "ask_user",
            json!({"question": "ok?", "kind": "yes_no", "expiresInSeconds": 604_801}),
        )
        .await;
    assert!(message.contains("expiresInSeconds"), "{message}");
    let message = server
        .invalid_params(
            "ask_user",
            json!({"question": "which?", "kind": "choice", "options": ["only"]}),
        )
        .await;
    assert!(message.contains("2 to 20"), "{message}");
    // Nothing was asked.
    let status = server.ok("get_status", json!({})).await;
    assert_eq!(status["openQuestions"], 0, "{status}");

    // A question that does not exist: a tool error that says nothing is approved.
    let unknown = server
        .tool_error("wait_for_answer", json!({"questionId": "qst_unknown"}))
        .await;
    assert!(
        unknown.contains("qst_unknown") && unknown.contains("approved"),
        "{unknown}"
    );
    let unknown = server
        .tool_error("cancel_question", json!({"questionId": "qst_unknown"}))
        .await;
    assert!(unknown.contains("qst_unknown"), "{unknown}");
    server.stop().await;

    // An agent without a paired phone: nothing can be asked or notified, and the text says not to act.
    let lonely = AgentClient::register(&relay.url, "lonely agent", None)
        .await
        .expect("register")
        .with_home(Some(&pacerelle_test_support::home()));
    let server = spawn(&lonely, &relay.url, &[], Era::Legacy).await;
    let text = server
        .tool_error("ask_user", json!({"question": "ok?", "kind": "yes_no"}))
        .await;
    assert!(
        text.contains("No phone is paired") && text.contains("Do not act"),
        "{text}"
    );
    let text = server
        .tool_error("send_notification", json!({"text": "hello"}))
        .await;
    assert!(text.contains("No phone is paired"), "{text}");
    server.stop().await;
}

#[tokio::test]
async fn relay_down_while_waiting_for_an_answer_is_never_a_yes() {
    let relay = TestRelay::start().await;
    let port = relay.port;
    let url = relay.url.clone();
    let (agent, device) = relay.agent_and_device().await;
    let server = spawn(&agent, &url, &[], Era::Legacy).await;
    let id = ask(&server, json!({"question": "Ship it?", "kind": "yes_no"})).await;
    seen_on_phone(&device, &id).await;

    let dir = relay.stop().await;
    let down = server
        .tool_error("wait_for_answer", json!({"questionId": id, "timeoutSeconds": 20}))
        .await;
    assert!(
        down.contains("unreachable") && down.contains("not approved") && down.contains(&id),
        "{down}"
    );

    // Back: the same question is answered and read.
    let _relay = TestRelay::start_on(port, dir).await;
    device.answer(&id, Answer::Yes).await.expect("answer");
    let (yes, _) = wait_until_settled(&server, &id).await;
    assert_eq!(yes["state"], "answered");
    assert_eq!(yes["approved"], true);
    server.stop().await;
}

/// One questionId carries one question: a different question under an id already used is a tool error that
/// says nothing was asked or approved; the same question under it resumes it with its answer.
#[tokio::test]
async fn a_question_id_used_again_for_another_question_is_refused() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let server = spawn(&agent, &relay.url, &[], Era::Modern).await;
    let tests = json!({"question": "Run the test suite?", "kind": "yes_no", "questionId": "deploy-approval"});
    let id = ask(&server, tests.clone()).await;
    assert_eq!(id, "deploy-approval");
    seen_on_phone(&device, &id).await;
    device.answer(&id, Answer::Yes).await.expect("yes");
    let (answered, _) = wait_until_settled(&server, &id).await;
    assert_eq!(answered["approved"], true, "{answered}");

    let error = server
        .tool_error(
            "ask_user",
            json!({"question": "Delete the production database?", "kind": "yes_no", "questionId": "deploy-approval"}),
        )
        .await;
    assert!(error.contains("already names a different question"), "{error}");
    assert!(error.contains("NOT asked"), "{error}");
    let listed = device.questions(None).await.expect("questions");
    assert!(
        listed
            .questions
            .iter()
            .all(|q| q.question != "Delete the production database?")
    );

    // The same question again resumes it: its answer stands.
    assert_eq!(ask(&server, tests).await, "deploy-approval");
    let (again, _) = wait_until_settled(&server, &id).await;
    assert_eq!(again["approved"], true, "{again}");
}

#[tokio::test]
async fn in_guide_mode_a_written_answer_travels_once_and_a_yes_is_said_in_the_text() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let server = spawn_with(
        &agent,
        &relay.url,
        &[],
        &[("PACERELLE_MCP_RESULT_TEXT", "guide")],
        Era::Legacy,
    )
    .await;

    let marker = "LEAN-ANSWER-MARKER-3d7e";
    let written = format!(
        "{marker} {}",
        "use the branch named after the ticket; ".repeat(100)
    );
    let id = ask(&server, json!({"question": "Which branch name?", "kind": "text"})).await;
    seen_on_phone(&device, &id).await;
    device
        .answer(&id, Answer::Text(written.clone()))
        .await
        .expect("write");
    let result = server
        .call("wait_for_answer", json!({"questionId": id, "timeoutSeconds": 10}))
        .await;
    assert_eq!(
        result.structured_content.as_ref().unwrap()["answer"],
        written.as_str()
    );
    assert_eq!(
        occurrences(&result, marker),
        1,
        "the answer is in structuredContent only"
    );
    let guide = text(&result);
    assert!(
        guide.contains(&format!("structuredContent.answer ({} bytes)", written.len()))
            && guide.contains("not an approval"),
        "{guide}"
    );

    // A yes needs no pointer: the guide says it, and that the result is in structuredContent.
    let id = ask(&server, json!({"question": "Run the tests?", "kind": "yes_no"})).await;
    seen_on_phone(&device, &id).await;
    device.answer(&id, Answer::Yes).await.expect("yes");
    let result = server
        .call("wait_for_answer", json!({"questionId": id, "timeoutSeconds": 10}))
        .await;
    assert_eq!(result.structured_content.as_ref().unwrap()["approved"], true);
    assert_eq!(result.content.len(), 1);
    let guide = text(&result);
    assert!(
        guide.contains("YES") && guide.contains("structuredContent") && !guide.contains("\"approved\""),
        "{guide}"
    );
    server.stop().await;
}

/// Every wait judges exactly the question this server asked under the id: after another question was
/// refused under it, after a restart of the server (the questions asked are kept in a file), and against a
/// relay that serves another question's copy under it. An id this server never asked is never approved.
#[tokio::test]
async fn a_wait_is_bound_to_the_question_asked_under_its_id() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let server = spawn(&agent, &relay.url, &[], Era::Legacy).await;
    let tests = json!({"question": "Run the test suite?", "kind": "yes_no", "questionId": "x-bound"});
    let asked = server.ok("ask_user", tests.clone()).await;
    assert_eq!(asked["resumed"], false, "{asked}");
    seen_on_phone(&device, "x-bound").await;
    device.answer("x-bound", Answer::Yes).await.expect("yes");
    let (yes, next) = wait_until_settled(&server, "x-bound").await;
    assert_eq!(yes["approved"], true, "{yes}");
    assert_eq!(yes["question"], "Run the test suite?", "{yes}");
    assert!(next.contains("\"Run the test suite?\""), "{next}");

    // Another question under the same id is refused, and the wait still names the first, never the other.
    let drop = "Delete the production database?";
    let error = server
        .tool_error(
            "ask_user",
            json!({"question": drop, "kind": "yes_no", "questionId": "x-bound"}),
        )
        .await;
    assert!(error.contains("already names a different question"), "{error}");
    let (after, next) = wait_until_settled(&server, "x-bound").await;
    assert_eq!(after["question"], "Run the test suite?", "{after}");
    assert!(
        !next.contains(drop) && !after.to_string().contains(drop),
        "{next} {after}"
    );

    // A question of this agent that this server did not ask (here, by the client directly), answered yes:
    // the wait says it cannot bind the id, and approves nothing.
    let other = agent
        .ask_user(QuestionRequest::yes_no("Rotate the keys?").with_id("x-elsewhere"))
        .await
        .expect("ask elsewhere");
    device.answer(&other.question_id, Answer::Yes).await.expect("yes");
    let result = server
        .call(
            "wait_for_answer",
            json!({"questionId": "x-elsewhere", "timeoutSeconds": 0}),
        )
        .await;
    assert_eq!(result.is_error, Some(true), "{}", text(&result));
    assert!(result.structured_content.is_none());
    let why = text(&result);
    assert!(
        why.contains("question_not_asked_here") && why.contains("Nothing is approved"),
        "{why}"
    );
    // Asking the same question under that id binds it here: then its yes is read.
    let resumed = server
        .ok(
            "ask_user",
            json!({"question": "Rotate the keys?", "kind": "yes_no", "questionId": "x-elsewhere"}),
        )
        .await;
    assert_eq!(resumed["resumed"], true, "{resumed}");
    let (bound, _) = wait_until_settled(&server, "x-elsewhere").await;
    assert_eq!(bound["approved"], true, "{bound}");

    // A restart: the server still knows which question it asked under the id.
    server.stop().await;
    let server = spawn(&agent, &relay.url, &[], Era::Modern).await;
    let (again, _) = wait_until_settled(&server, "x-bound").await;
    assert_eq!(again["approved"], true, "{again}");
    assert_eq!(again["question"], "Run the test suite?", "{again}");

    // A relay that serves the other question's copy under the id: a conflict, never an approval.
    swap_self_copy(&relay, &agent, "x-bound", drop).await;
    let result = server
        .call(
            "wait_for_answer",
            json!({"questionId": "x-bound", "timeoutSeconds": 0}),
        )
        .await;
    assert_eq!(result.is_error, Some(true), "{}", text(&result));
    let why = text(&result);
    assert!(
        why.contains("question_id_conflict")
            && why.contains("Run the test suite?")
            && why.contains("nothing is approved"),
        "{why}"
    );
    assert!(!why.contains("approved: true") && !why.contains("YES"), "{why}");
    server.stop().await;
}

/// The same question under an id already used, with another expiry: resumed, with the first expiry, and said.
#[tokio::test]
async fn asking_again_under_an_id_says_it_resumed_and_keeps_the_first_expiry() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let server = spawn(&agent, &relay.url, &[], Era::Legacy).await;
    let first = server
        .ok(
            "ask_user",
            json!({"question": "Tag v1.3.0?", "kind": "yes_no", "questionId": "x-tag", "expiresInSeconds": 600}),
        )
        .await;
    assert_eq!(first["resumed"], false, "{first}");
    seen_on_phone(&device, "x-tag").await;
    let result = server
        .call(
            "ask_user",
            json!({"question": "Tag v1.3.0?", "kind": "yes_no", "questionId": "x-tag", "expiresInSeconds": 3600}),
        )
        .await;
    assert_ne!(result.is_error, Some(true), "{}", text(&result));
    let again = result.structured_content.clone().expect("structured");
    assert_eq!(again["resumed"], true, "{again}");
    assert_eq!(again["expiresAt"], first["expiresAt"], "the first expiry holds");
    let next = text(&result);
    assert!(
        next.contains("resumed")
            && next.contains(first["expiresAt"].as_str().unwrap())
            && next.contains("expiresInSeconds does not change it"),
        "{next}"
    );
    // One question on the phone, not two.
    let listed = device.questions(None).await.expect("questions");
    assert_eq!(
        listed
            .questions
            .iter()
            .filter(|q| q.question_id == "x-tag")
            .count(),
        1
    );
    server.stop().await;
}
