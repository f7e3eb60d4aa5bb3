//! `wait_for_answer` as an MCP task, through the real binary over stdio, against a real relay, with the phone
//! played by `DeviceClient` and an rmcp client that declares the tasks extension and gives each request
//! 10 s: the call returns a task at once, the wait outlives the client's timeout, and `tasks/get` yields
//! exactly the plain call's result. A client without tasks gets the plain result.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::time::{Duration, Instant};

use common::{Era, TestRelay, command, spawn, swap_self_copy, text};
use pacerelle_client::{AgentClient, Answer, DeviceClient, QuestionState, agent::QuestionRequest};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams,
    ClientCapabilities, ClientConfig, ClientRequest, CreateTaskResult, GetTaskParams, GetTaskRequest,
    Implementation, ProtocolVersion, ServerResult, TaskPayload, TaskStatus,
};
use rmcp::service::{PeerRequestOptions, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, ClientServiceExt, RoleClient};
use serde_json::{Value, json};

/// The client's own timeout for every request, shorter than the person takes to answer.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);

/// A client that declares the tasks extension.
#[derive(Clone, Default)]
struct TasksClient;

impl ClientHandler for TasksClient {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::builder().enable_tasks().build(),
            Implementation::new("pacerelle-mcp-task-tests", "0"),
        )
        .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }
}

type Client = RunningService<RoleClient, TasksClient>;

async fn spawn_tasks_client(agent: &AgentClient, relay_url: &str, era: Era) -> Client {
    let (transport, _) = TokioChildProcess::builder(command(agent, relay_url, &[]))
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .expect("spawn pacerelle-mcp");
    TasksClient
        .serve_with_lifecycle(transport, era.lifecycle())
        .await
        .expect("start the MCP session")
}

/// Sends `request` with the client's 10 s timeout.
async fn send(client: &Client, request: ClientRequest) -> ServerResult {
    client
        .peer()
        .send_request_with_option(request, PeerRequestOptions::with_timeout(CLIENT_TIMEOUT))
        .await
        .expect("sent")
        .await_response()
        .await
        .expect("answered within the client's timeout")
}

async fn call(client: &Client, name: &'static str, arguments: Value) -> ServerResult {
    let params =
        CallToolRequestParams::new(name).with_arguments(arguments.as_object().expect("object").clone());
    send(
        client,
        ClientRequest::CallToolRequest(CallToolRequest::new(params)),
    )
    .await
}

async fn ask(client: &Client, arguments: Value) -> String {
    match call(client, "ask_user", arguments).await {
        ServerResult::CallToolResult(result) => {
            assert_ne!(result.is_error, Some(true), "{}", text(&result));
            let asked = result.structured_content.expect("structured");
            asked["questionId"].as_str().expect("questionId").to_string()
        }
        other => panic!("ask_user returns its result at once, not {other:?}"),
    }
}

/// Calls `wait_for_answer` and expects a task.
async fn wait_as_task(client: &Client, question_id: &str) -> CreateTaskResult {
    match call(
        client,
        "wait_for_answer",
        json!({"questionId": question_id, "timeoutSeconds": 30}),
    )
    .await
    {
        ServerResult::CreateTaskResult(task) => task,
        other => panic!("a client with tasks gets a task, not {other:?}"),
    }
}

/// Polls `tasks/get` at the interval the task suggests until it ends; returns how it ended.
async fn poll_until_done(client: &Client, task: &CreateTaskResult, limit: Duration) -> TaskPayload {
    poll_until_settled(client, task, limit).await.0
}

/// [`poll_until_done`], with the task's last status message.
async fn poll_until_settled(
    client: &Client,
    task: &CreateTaskResult,
    limit: Duration,
) -> (TaskPayload, String) {
    let every = Duration::from_millis(task.task.poll_interval_ms.expect("a poll interval"));
    let deadline = Instant::now() + limit;
    loop {
        let request = GetTaskRequest::new(GetTaskParams::new(task.task.task_id.clone()));
        let got = match send(client, ClientRequest::GetTaskRequest(request)).await {
            ServerResult::GetTaskResult(got) => got,
            other => panic!("tasks/get answers with the task, not {other:?}"),
        };
        if got.task.status().is_terminal() {
            let status = got.task.task.status_message.clone().unwrap_or_default();
            return (got.task.payload, status);
        }
        assert!(
            Instant::now() < deadline,
            "the task is still {:?}",
            got.task.status()
        );
        tokio::time::sleep(every).await;
    }
}

fn completed(payload: TaskPayload) -> CallToolResult {
    match payload {
        TaskPayload::Completed { result } => {
            serde_json::from_value(Value::Object(result)).expect("a tool result")
        }
        other => panic!("the task should have completed, not {other:?}"),
    }
}

/// What a plain `wait_for_answer` returns now for `question_id` (the question has settled).
async fn plain(client: &Client, question_id: &str) -> CallToolResult {
    let params = CallToolRequestParams::new("wait_for_answer").with_arguments(
        json!({"questionId": question_id, "timeoutSeconds": 0})
            .as_object()
            .unwrap()
            .clone(),
    );
    // A settled question is answered at once, as a plain result, even to a client with tasks.
    match client.call_tool_once(params).await.expect("wait_for_answer") {
        CallToolResponse::Complete(result) => result,
        other => panic!("a settled question is answered at once, not {other:?}"),
    }
}

/// The task's result is the plain call's: the same text blocks, structured content and error flag. (Only
/// the `resultType: "complete"` discriminator may differ: 2025-11-25 results travel without it.)
fn assert_same_result(from_task: &CallToolResult, from_plain_call: &CallToolResult) {
    assert_eq!(from_task.content, from_plain_call.content);
    assert_eq!(from_task.structured_content, from_plain_call.structured_content);
    assert_eq!(from_task.is_error, from_plain_call.is_error);
    assert_eq!(from_task.meta, from_plain_call.meta);
}

async fn seen_on_phone(device: &DeviceClient, question_id: &str) {
    let list = device
        .questions(Some(QuestionState::Pending))
        .await
        .expect("the phone lists its questions");
    assert!(
        list.questions.iter().any(|q| q.question_id == question_id),
        "the phone should see question {question_id}"
    );
}

#[tokio::test]
async fn an_approval_given_after_the_clients_timeout_is_read_from_the_task_on_2025_11_25() {
    an_approval_given_after_the_clients_timeout_is_read_from_the_task(Era::Legacy).await;
}

#[tokio::test]
async fn an_approval_given_after_the_clients_timeout_is_read_from_the_task_on_2026_07_28() {
    an_approval_given_after_the_clients_timeout_is_read_from_the_task(Era::Modern).await;
}

async fn an_approval_given_after_the_clients_timeout_is_read_from_the_task(era: Era) {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let client = spawn_tasks_client(&agent, &relay.url, era).await;
    let declared = client
        .peer_info()
        .expect("server info")
        .capabilities
        .supports_tasks();
    assert!(declared, "the server declares the tasks extension");

    let id = ask(
        &client,
        json!({"question": "Deploy to production?", "kind": "yes_no", "expiresInSeconds": 600}),
    )
    .await;
    seen_on_phone(&device, &id).await;

    let called = Instant::now();
    let task = wait_as_task(&client, &id).await;
    assert!(
        called.elapsed() < Duration::from_secs(5),
        "the task comes at once"
    );
    assert_eq!(task.task.status, TaskStatus::Working);
    let ttl = Duration::from_millis(task.task.ttl_ms.expect("a TTL"));
    assert!(
        ttl > Duration::from_secs(600),
        "the TTL covers the question's 10 minutes: {ttl:?}"
    );

    // The person answers after the client's own timeout: a plain call would have been given up by then.
    let answering = tokio::spawn(async move {
        tokio::time::sleep(CLIENT_TIMEOUT + Duration::from_secs(1)).await;
        device.answer(&id, Answer::Yes).await.expect("the phone answers");
        id
    });
    let result = completed(poll_until_done(&client, &task, Duration::from_secs(60)).await);
    assert!(
        called.elapsed() > CLIENT_TIMEOUT,
        "answered after the client's timeout"
    );
    let id = answering.await.expect("join");
    assert_ne!(result.is_error, Some(true), "{}", text(&result));
    let approved = result.structured_content.clone().expect("structured");
    assert_eq!(approved["state"], "answered", "{approved}");
    assert_eq!(approved["approved"], true);
    assert_eq!(approved["answer"], "yes");
    // Exactly what the plain call gives.
    assert_same_result(&result, &plain(&client, &id).await);
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn a_no_read_from_the_task_is_not_approved() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let client = spawn_tasks_client(&agent, &relay.url, Era::Legacy).await;
    let id = ask(
        &client,
        json!({"question": "Drop the staging database?", "kind": "yes_no"}),
    )
    .await;
    seen_on_phone(&device, &id).await;
    let task = wait_as_task(&client, &id).await;
    device.answer(&id, Answer::No).await.expect("the phone says no");

    let (payload, status) = poll_until_settled(&client, &task, Duration::from_secs(30)).await;
    assert!(status.starts_with("Denied by test phone"), "{status}");
    let result = completed(payload);
    let no = result.structured_content.clone().expect("structured");
    assert_eq!(no["state"], "answered", "{no}");
    assert_eq!(no["approved"], false);
    assert_eq!(no["answer"], "no");
    assert!(text(&result).contains("Do not act"), "{}", text(&result));
    assert_same_result(&result, &plain(&client, &id).await);
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn a_question_that_expires_while_its_task_waits_ends_expired_and_not_approved() {
    let relay = TestRelay::start().await;
    let (agent, _device) = relay.agent_and_device().await;
    let client = spawn_tasks_client(&agent, &relay.url, Era::Legacy).await;
    let id = ask(
        &client,
        json!({"question": "Force-push over main?", "kind": "yes_no", "expiresInSeconds": 3}),
    )
    .await;
    let task = wait_as_task(&client, &id).await;
    let ttl = Duration::from_millis(task.task.ttl_ms.expect("a TTL"));
    assert!(
        ttl < Duration::from_secs(600),
        "the TTL follows the question's expiry: {ttl:?}"
    );

    // Nobody answers: the task ends with the expired result, a no, and its status message says so.
    let waiting = task.task.status_message.clone().expect("a status message");
    assert!(waiting.starts_with("Waiting"), "{waiting}");
    let (payload, status) = poll_until_settled(&client, &task, Duration::from_secs(30)).await;
    assert!(
        status.starts_with("Expired at") && status.contains("that is a no"),
        "{status}"
    );
    let result = completed(payload);
    let expired = result.structured_content.clone().expect("structured");
    assert_eq!(expired["state"], "expired", "{expired}");
    assert_eq!(expired["approved"], false);
    assert_eq!(expired["answer"], Value::Null);
    assert!(text(&result).contains("NO"), "{}", text(&result));
    assert_same_result(&result, &plain(&client, &id).await);
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn cancelling_the_task_stops_the_wait_and_leaves_the_question_open_on_the_phone() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let client = spawn_tasks_client(&agent, &relay.url, Era::Legacy).await;
    let id = ask(
        &client,
        json!({"question": "Rotate the API keys?", "kind": "yes_no"}),
    )
    .await;
    let task = wait_as_task(&client, &id).await;

    client
        .peer()
        .cancel_task(CancelTaskParams::new(task.task.task_id.clone()))
        .await
        .expect("tasks/cancel");
    let (ended, status) = poll_until_settled(&client, &task, Duration::from_secs(10)).await;
    assert!(matches!(ended, TaskPayload::Cancelled), "{ended:?}");
    assert!(
        status.starts_with("Cancelled") && status.contains("stays open on the phone"),
        "{status}"
    );
    // The question itself is still pending: the phone can still answer it.
    seen_on_phone(&device, &id).await;
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn a_client_without_tasks_gets_the_plain_result() {
    let relay = TestRelay::start().await;
    let (agent, _device) = relay.agent_and_device().await;
    let server = spawn(&agent, &relay.url, &[], Era::Legacy).await;
    let asked = server
        .ok("ask_user", json!({"question": "Tag v1.2.0?", "kind": "yes_no"}))
        .await;
    let id = asked["questionId"].as_str().expect("questionId");
    let params = CallToolRequestParams::new("wait_for_answer").with_arguments(
        json!({"questionId": id, "timeoutSeconds": 1})
            .as_object()
            .unwrap()
            .clone(),
    );
    match server
        .client
        .call_tool_once(params)
        .await
        .expect("wait_for_answer")
    {
        CallToolResponse::Complete(result) => {
            let pending = result.structured_content.expect("structured");
            assert_eq!(pending["state"], "pending", "{pending}");
            assert_eq!(pending["approved"], false);
        }
        other => panic!("a client without tasks never gets a task: {other:?}"),
    }
    server.stop().await;
}

/// The task path judges exactly the question this server asked under the id, as the plain call does, and a
/// task that settles says how in its status message.
#[tokio::test]
async fn a_task_is_bound_to_the_question_asked_under_its_id() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let client = spawn_tasks_client(&agent, &relay.url, Era::Legacy).await;
    let id = ask(
        &client,
        json!({"question": "Run the test suite?", "kind": "yes_no", "questionId": "x-task"}),
    )
    .await;
    seen_on_phone(&device, &id).await;
    let task = wait_as_task(&client, &id).await;
    let waiting = task.task.status_message.clone().expect("a status message");
    device.answer(&id, Answer::Yes).await.expect("yes");
    let (payload, status) = poll_until_settled(&client, &task, Duration::from_secs(30)).await;
    assert_ne!(status, waiting);
    assert!(
        status.starts_with("Approved by test phone at") && status.contains("x-task"),
        "{status}"
    );
    let result = completed(payload);
    let yes = result.structured_content.clone().expect("structured");
    assert_eq!(yes["approved"], true, "{yes}");
    assert_eq!(yes["question"], "Run the test suite?", "{yes}");

    // Another question under the id is refused; a wait on the id still names the first one.
    match call(
        &client,
        "ask_user",
        json!({"question": "Delete the production database?", "kind": "yes_no", "questionId": "x-task"}),
    )
    .await
    {
        ServerResult::CallToolResult(refused) => {
            assert_eq!(refused.is_error, Some(true), "{}", text(&refused))
        }
        other => panic!("ask_user answers at once, not {other:?}"),
    }
    let settled = plain(&client, &id).await;
    let value = settled.structured_content.clone().expect("structured");
    assert_eq!(value["question"], "Run the test suite?", "{value}");
    assert!(!text(&settled).contains("Delete the production database?"));

    // An id this server did not ask: answered at once, not approved, and why.
    let elsewhere = agent
        .ask_user(QuestionRequest::yes_no("Rotate the keys?").with_id("x-task-elsewhere"))
        .await
        .expect("ask elsewhere");
    device
        .answer(&elsewhere.question_id, Answer::Yes)
        .await
        .expect("yes");
    let refused = plain(&client, "x-task-elsewhere").await;
    assert_eq!(refused.is_error, Some(true), "{}", text(&refused));
    assert!(
        text(&refused).contains("question_not_asked_here"),
        "{}",
        text(&refused)
    );

    // A pending question whose self copy the relay swaps while the task waits: the task ends refused.
    let id = ask(
        &client,
        json!({"question": "Push to main?", "kind": "yes_no", "questionId": "x-task-2"}),
    )
    .await;
    seen_on_phone(&device, &id).await;
    let task = wait_as_task(&client, &id).await;
    swap_self_copy(&relay, &agent, &id, "Force-push over main?").await;
    device.answer(&id, Answer::Yes).await.expect("yes");
    let (payload, status) = poll_until_settled(&client, &task, Duration::from_secs(30)).await;
    assert!(status.contains("question_id_conflict"), "{status}");
    let result = completed(payload);
    assert_eq!(result.is_error, Some(true), "{}", text(&result));
    assert!(
        text(&result).contains("question_id_conflict"),
        "{}",
        text(&result)
    );
    client.cancel().await.expect("close");
}

/// Calls `ask_user` with `wait` and expects a task.
async fn ask_as_task(client: &Client, arguments: Value) -> CreateTaskResult {
    match call(client, "ask_user", arguments).await {
        ServerResult::CreateTaskResult(task) => task,
        other => panic!("ask_user with wait, to a client with tasks, gives a task, not {other:?}"),
    }
}

/// The question `text` as the phone lists it, pending (waited for: the ask is in the task's first moments).
async fn pending_on_phone(device: &DeviceClient, text: &str) -> String {
    for _ in 0..200 {
        let list = device
            .questions(Some(QuestionState::Pending))
            .await
            .expect("the phone lists its questions");
        if let Some(q) = list.questions.iter().find(|q| q.question == text) {
            return q.question_id.clone();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the phone never saw {text:?} pending");
}

/// One call asks and returns the final answer: `ask_user` with `wait` is a task whose result is the ask's
/// result with the answer's fields beside it, the same as wait_for_answer's, past the client's own timeout.
#[tokio::test]
async fn ask_user_with_wait_asks_and_returns_the_final_answer_in_one_task() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let client = spawn_tasks_client(&agent, &relay.url, Era::Modern).await;
    let called = Instant::now();
    let task = ask_as_task(
        &client,
        json!({"question": "Publish the release notes?", "kind": "yes_no", "wait": true}),
    )
    .await;
    assert!(
        called.elapsed() < Duration::from_secs(5),
        "the task comes at once"
    );
    assert_eq!(task.task.status, TaskStatus::Working);
    let id = pending_on_phone(&device, "Publish the release notes?").await;
    let answering = tokio::spawn(async move {
        tokio::time::sleep(CLIENT_TIMEOUT + Duration::from_secs(1)).await;
        device.answer(&id, Answer::Yes).await.expect("the phone answers");
        id
    });
    let (payload, status) = poll_until_settled(&client, &task, Duration::from_secs(60)).await;
    let id = answering.await.expect("join");
    assert!(status.starts_with("Approved by test phone"), "{status}");
    let result = completed(payload);
    assert_ne!(result.is_error, Some(true), "{}", text(&result));
    let value = result.structured_content.clone().expect("structured");
    // The ask's fields…
    assert_eq!(value["questionId"], id.as_str(), "{value}");
    assert_eq!(value["resumed"], false, "{value}");
    assert_eq!(value["askedHere"], false, "{value}");
    // …and the answer's, exactly as wait_for_answer gives them.
    let plain = plain(&client, &id).await;
    let waited = plain.structured_content.clone().expect("structured");
    for (key, v) in waited.as_object().expect("object") {
        assert_eq!(&value[key], v, "{key} differs: {value} vs {waited}");
    }
    assert_eq!(value["approved"], true);
    assert_eq!(value["state"], "answered");
    // The text says what to do next, as the plain wait's, and its JSON block carries the whole result.
    assert_eq!(result.content.first(), plain.content.first());
    let json_block: Value = serde_json::from_str(
        result
            .content
            .last()
            .and_then(|c| c.as_text())
            .map(|t| t.text.as_str())
            .expect("a JSON block"),
    )
    .expect("JSON");
    assert_eq!(json_block, value);
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn ask_user_with_wait_that_nobody_answers_ends_expired_not_approved() {
    let relay = TestRelay::start().await;
    let (agent, _device) = relay.agent_and_device().await;
    let client = spawn_tasks_client(&agent, &relay.url, Era::Legacy).await;
    let task = ask_as_task(
        &client,
        json!({"question": "Force-push over main?", "kind": "yes_no", "expiresInSeconds": 5, "wait": true}),
    )
    .await;
    let (payload, status) = poll_until_settled(&client, &task, Duration::from_secs(40)).await;
    assert!(
        status.starts_with("Expired at") && status.contains("that is a no"),
        "{status}"
    );
    let result = completed(payload);
    let value = result.structured_content.clone().expect("structured");
    assert_eq!(value["state"], "expired", "{value}");
    assert_eq!(value["approved"], false, "{value}");
    assert_eq!(value["conclusion"], "expired", "{value}");
    assert!(text(&result).contains("NO"), "{}", text(&result));
    client.cancel().await.expect("close");
}

/// A host without tasks keeps today's behaviour: `wait` changes nothing, the ask returns at once and the model
/// waits with wait_for_answer.
#[tokio::test]
async fn ask_user_with_wait_to_a_client_without_tasks_returns_at_once() {
    let relay = TestRelay::start().await;
    let (agent, _device) = relay.agent_and_device().await;
    let server = spawn(&agent, &relay.url, &[], Era::Legacy).await;
    let asked = server
        .ok(
            "ask_user",
            json!({"question": "Tag v1.3.0?", "kind": "yes_no", "wait": true}),
        )
        .await;
    assert!(asked["questionId"].is_string(), "{asked}");
    assert!(asked.get("approved").is_none(), "no answer yet: {asked}");
    server.stop().await;
}
