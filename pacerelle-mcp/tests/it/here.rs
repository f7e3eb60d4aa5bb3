//! Asking at the computer too (`ask_user` with `alsoAskHere`): the real binary over stdio, a real rmcp client
//! that declares elicitation and plays the host's dialog, a real relay, and the phone played by
//! `DeviceClient`. The first answer wins on either channel and the other is withdrawn; on 2026-07-28 the host is
//! asked with an input request in the call's result, and the call comes back with its answer; hosts without
//! elicitation are asked on the phone only, as before.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Era, Server, TestRelay, command, eventually, spawn};
use pacerelle_client::{AgentClient, Answer, Channel, DeviceClient, ErrorKind, QuestionState};
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult,
    ElicitationAction, ElicitationCapability, FormElicitationCapability, Implementation, ProtocolVersion,
};
use rmcp::service::{RequestContext, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, ClientServiceExt, ErrorData as McpError, RoleClient};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

/// An elicitation as the host's dialog receives it, with the way to answer it.
struct Dialog {
    message: String,
    schema: Value,
    reply: oneshot::Sender<ElicitResult>,
}

/// A host that declares form elicitation and hands every request to the test.
#[derive(Clone)]
struct Host {
    dialogs: mpsc::UnboundedSender<Dialog>,
    withdrawn: Arc<Mutex<Vec<String>>>,
}

impl ClientHandler for Host {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation =
            Some(ElicitationCapability::new().with_form(FormElicitationCapability::default()));
        ClientConfig::new(capabilities, Implementation::new("pacerelle-here-tests", "0"))
            .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, McpError> {
        let ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } = request
        else {
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        let (reply, answered) = oneshot::channel();
        let schema = serde_json::to_value(&requested_schema).expect("schema");
        let _ = self.dialogs.send(Dialog {
            message: message.clone(),
            schema,
            reply,
        });
        tokio::select! {
            result = answered => result.map_err(|_| McpError::internal_error("the test dropped the dialog", None)),
            _ = context.ct.cancelled() => {
                self.withdrawn.lock().unwrap().push(message);
                Err(McpError::internal_error("withdrawn by the server", None))
            }
        }
    }
}

struct HostSession {
    client: RunningService<RoleClient, Host>,
    dialogs: mpsc::UnboundedReceiver<Dialog>,
    withdrawn: Arc<Mutex<Vec<String>>>,
}

impl HostSession {
    async fn start(agent: &AgentClient, relay: &TestRelay, env: &[(&str, &str)]) -> HostSession {
        HostSession::start_in(agent, relay, env, Era::Legacy).await
    }

    /// [`HostSession::start`] on the protocol of `era`.
    async fn start_in(agent: &AgentClient, relay: &TestRelay, env: &[(&str, &str)], era: Era) -> HostSession {
        let mut cmd = command(agent, &relay.url, &[]);
        cmd.envs(env.iter().copied());
        let (transport, _) = TokioChildProcess::builder(cmd)
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn pacerelle-mcp");
        let (tx, dialogs) = mpsc::unbounded_channel();
        let withdrawn = Arc::new(Mutex::new(Vec::new()));
        let host = Host {
            dialogs: tx,
            withdrawn: withdrawn.clone(),
        };
        let client = host
            .serve_with_lifecycle(transport, era.lifecycle())
            .await
            .expect("start the session");
        HostSession {
            client,
            dialogs,
            withdrawn,
        }
    }

    async fn ok(&self, name: &'static str, args: Value) -> Value {
        let result = self
            .client
            .call_tool(CallToolRequestParams::new(name).with_arguments(args.as_object().unwrap().clone()))
            .await
            .expect("call");
        assert_ne!(result.is_error, Some(true), "{name}: {result:?}");
        result.structured_content.expect("structured content")
    }

    async fn next_dialog(&mut self) -> Dialog {
        tokio::time::timeout(Duration::from_secs(20), self.dialogs.recv())
            .await
            .expect("the host's dialog should open")
            .expect("dialog")
    }

    /// Calls `wait_for_answer` until the question is no longer pending.
    async fn settled(&self, question_id: &str) -> Value {
        for _ in 0..10 {
            let result = self
                .ok(
                    "wait_for_answer",
                    json!({"questionId": question_id, "timeoutSeconds": 20}),
                )
                .await;
            if result["state"] != "pending" {
                return result;
            }
        }
        panic!("question {question_id} stayed pending");
    }
}

/// The device's view of `question_id`, once it is in `state`.
async fn on_phone(
    device: &DeviceClient,
    question_id: &str,
    state: QuestionState,
) -> pacerelle_client::device::OpenedQuestion {
    for _ in 0..400 {
        let list = device.questions(None).await.expect("questions");
        if let Some(q) = list
            .questions
            .into_iter()
            .find(|q| q.question_id == question_id && q.state == state)
        {
            return q;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the phone never saw {question_id} {}", state.as_str());
}

#[tokio::test]
async fn a_yes_in_the_hosts_dialog_counts_and_the_phone_shows_it_answered_at_the_computer() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let mut host = HostSession::start(&agent, &relay, &[]).await;

    let asked = host
        .ok(
            "ask_user",
            json!({"question": "Deploy to production?", "kind": "yes_no", "details": "3 commits", "alsoAskHere": true}),
        )
        .await;
    assert_eq!(asked["askedHere"], true, "{asked}");
    let id = asked["questionId"].as_str().unwrap().to_string();

    let dialog = host.next_dialog().await;
    assert!(dialog.message.contains("Deploy to production?") && dialog.message.contains("3 commits"));
    assert_eq!(dialog.schema["required"], json!(["answer"]), "{}", dialog.schema);
    // The phone has the same question meanwhile.
    on_phone(&device, &id, QuestionState::Pending).await;
    dialog
        .reply
        .send(ElicitResult::new(ElicitationAction::Accept).with_content(json!({"answer": "yes"})))
        .unwrap();

    let result = host.settled(&id).await;
    assert_eq!(result["approved"], true, "{result}");
    assert_eq!(result["channel"], "host");
    assert_eq!(result["answeredBy"], Value::Null);
    assert_eq!(result["conclusion"], "approved");

    let shown = on_phone(&device, &id, QuestionState::Answered).await;
    assert_eq!(shown.channel, Some(Channel::Host));
    assert_eq!(shown.answer, Some(Answer::Yes));
    let late = device.answer(&id, Answer::No).await.expect_err("answered");
    assert_eq!(late.kind(), ErrorKind::QuestionClosed);
    assert!(host.withdrawn.lock().unwrap().is_empty());
    host.client.cancel().await.expect("close");
}

#[tokio::test]
async fn an_answer_on_the_phone_first_withdraws_the_hosts_dialog() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let mut host = HostSession::start(&agent, &relay, &[]).await;

    let asked = host
        .ok(
            "ask_user",
            json!({"question": "Delete the branch?", "kind": "yes_no", "alsoAskHere": true}),
        )
        .await;
    let id = asked["questionId"].as_str().unwrap().to_string();
    let dialog = host.next_dialog().await;
    on_phone(&device, &id, QuestionState::Pending).await;
    device.answer(&id, Answer::No).await.expect("phone");

    let withdrawn = host.withdrawn.clone();
    assert!(
        eventually(Duration::from_secs(20), || {
            let withdrawn = withdrawn.clone();
            async move { !withdrawn.lock().unwrap().is_empty() }
        })
        .await,
        "the dialog should be withdrawn once the phone answered"
    );
    // Answering the withdrawn dialog now changes nothing.
    let _ = dialog
        .reply
        .send(ElicitResult::new(ElicitationAction::Accept).with_content(json!({"answer": "yes"})));
    let result = host.settled(&id).await;
    assert_eq!(result["channel"], "phone", "{result}");
    assert_eq!(result["answer"], "no");
    assert_eq!(result["approved"], false);
    host.client.cancel().await.expect("close");
}

#[tokio::test]
async fn declining_the_hosts_dialog_records_nothing_and_the_phone_still_answers() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    // The server's setting asks here when the call does not say.
    let mut host = HostSession::start(&agent, &relay, &[("PACERELLE_MCP_ALSO_ASK_HERE", "1")]).await;

    let asked = host
        .ok(
            "ask_user",
            json!({"question": "Which colours?", "kind": "choice", "options": ["red", "green", "blue"], "multiple": true}),
        )
        .await;
    assert_eq!(asked["askedHere"], true, "{asked}");
    let id = asked["questionId"].as_str().unwrap().to_string();
    let dialog = host.next_dialog().await;
    assert_eq!(
        dialog.schema["properties"]["answer"]["type"], "array",
        "{}",
        dialog.schema
    );
    dialog
        .reply
        .send(ElicitResult::new(ElicitationAction::Decline))
        .unwrap();
    // Still pending on the phone, which answers.
    on_phone(&device, &id, QuestionState::Pending).await;
    device
        .answer(&id, Answer::Options(vec!["red".into(), "blue".into()]))
        .await
        .expect("phone");
    let result = host.settled(&id).await;
    assert_eq!(result["channel"], "phone", "{result}");
    assert_eq!(result["answer"], json!(["red", "blue"]));

    // `alsoAskHere: false` overrides the setting: no dialog, and an answer at the computer would not count.
    let asked = host
        .ok(
            "ask_user",
            json!({"question": "Anything else?", "kind": "text", "alsoAskHere": false}),
        )
        .await;
    assert_eq!(asked["askedHere"], false, "{asked}");
    let id = asked["questionId"].as_str().unwrap();
    let refused = agent
        .answer_at_host(id, None, Answer::Text("no".into()))
        .await
        .expect_err("phone only");
    assert_eq!(refused.kind(), ErrorKind::InvalidInput);
    assert!(
        tokio::time::timeout(Duration::from_millis(500), host.dialogs.recv())
            .await
            .is_err(),
        "no dialog for a question asked on the phone only"
    );
    host.client.cancel().await.expect("close");
}

#[tokio::test]
async fn a_host_without_elicitation_or_on_2026_07_28_is_asked_on_the_phone_only() {
    let relay = TestRelay::start().await;
    let (agent, _device) = relay.agent_and_device().await;
    for era in [Era::Legacy, Era::Modern] {
        let why = "elicitation";
        let server: Server = spawn(&agent, &relay.url, &[], era).await;
        let asked = server
            .ok(
                "ask_user",
                json!({"question": "Proceed?", "kind": "yes_no", "alsoAskHere": true}),
            )
            .await;
        assert_eq!(asked["askedHere"], false, "{asked}");
        let reason = asked["notAskedHere"].as_str().unwrap_or_default();
        assert!(reason.contains(why), "{era:?}: {reason}");
        let id = asked["questionId"].as_str().unwrap();
        // Sealed for the phone only: an answer at the computer cannot count.
        let refused = agent
            .answer_at_host(id, None, Answer::Yes)
            .await
            .expect_err("phone only");
        assert_eq!(refused.kind(), ErrorKind::InvalidInput);
        server.stop().await;
    }
}

/// On 2026-07-28 (no server request during a session), `ask_user` returns an input request for the host's
/// dialog; the host asks, then calls again with the answer, which rmcp's client does by itself. Runs the call
/// and plays the dialog with `answer`, `before` running once the dialog is open; returns the final result.
async fn ask_here_on_2026_07_28(
    host: &mut HostSession,
    args: Value,
    before: impl std::future::Future<Output = ()>,
    answer: ElicitResult,
) -> rmcp::model::CallToolResult {
    let HostSession { client, dialogs, .. } = host;
    let call = client
        .call_tool(CallToolRequestParams::new("ask_user").with_arguments(args.as_object().unwrap().clone()));
    let dialog = async {
        let dialog = tokio::time::timeout(Duration::from_secs(20), dialogs.recv())
            .await
            .expect("the host's dialog should open")
            .expect("dialog");
        assert_eq!(dialog.schema["required"], json!(["answer"]), "{}", dialog.schema);
        before.await;
        dialog.reply.send(answer).unwrap();
        dialog.message
    };
    let (result, message) = tokio::join!(call, dialog);
    let result = result.expect("ask_user");
    assert!(message.contains("Also asked on your phone"), "{message}");
    result
}

#[tokio::test]
async fn on_2026_07_28_a_yes_in_the_hosts_dialog_comes_back_with_the_call_and_counts() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let mut host = HostSession::start_in(&agent, &relay, &[], Era::Modern).await;
    let phone = device.clone();
    let result = ask_here_on_2026_07_28(
        &mut host,
        json!({"question": "Merge the pull request?", "kind": "yes_no", "alsoAskHere": true}),
        async move {
            // The phone has the question while the dialog is open.
            let list = phone
                .questions(Some(QuestionState::Pending))
                .await
                .expect("questions");
            assert!(
                list.questions
                    .iter()
                    .any(|q| q.question == "Merge the pull request?")
            );
        },
        ElicitResult::new(ElicitationAction::Accept).with_content(json!({"answer": "yes"})),
    )
    .await;
    assert_ne!(result.is_error, Some(true), "{result:?}");
    let asked = result.structured_content.clone().expect("structured");
    assert_eq!(asked["askedHere"], true, "{asked}");
    let text = common::text(&result);
    assert!(text.contains("answered here at the computer"), "{text}");
    let id = asked["questionId"].as_str().unwrap().to_string();

    let settled = host.settled(&id).await;
    assert_eq!(settled["approved"], true, "{settled}");
    assert_eq!(settled["channel"], "host");
    let shown = on_phone(&device, &id, QuestionState::Answered).await;
    assert_eq!(shown.channel, Some(Channel::Host));
    assert_eq!(shown.answer, Some(Answer::Yes));
    host.client.cancel().await.expect("close");
}

#[tokio::test]
async fn on_2026_07_28_the_phone_answering_first_wins_over_a_later_yes_in_the_dialog() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let mut host = HostSession::start_in(&agent, &relay, &[], Era::Modern).await;
    let phone = device.clone();
    let result = ask_here_on_2026_07_28(
        &mut host,
        json!({"question": "Drop the cache?", "kind": "yes_no", "alsoAskHere": true}),
        async move {
            // The person says no on the phone while the dialog is open.
            let list = phone
                .questions(Some(QuestionState::Pending))
                .await
                .expect("questions");
            let q = list
                .questions
                .iter()
                .find(|q| q.question == "Drop the cache?")
                .expect("on the phone");
            phone
                .answer(&q.question_id, Answer::No)
                .await
                .expect("phone says no");
        },
        ElicitResult::new(ElicitationAction::Accept).with_content(json!({"answer": "yes"})),
    )
    .await;
    let text = common::text(&result);
    assert!(text.contains("does not count"), "{text}");
    let id = result.structured_content.clone().expect("structured")["questionId"]
        .as_str()
        .unwrap()
        .to_string();
    let settled = host.settled(&id).await;
    assert_eq!(settled["channel"], "phone", "{settled}");
    assert_eq!(settled["answer"], "no");
    assert_eq!(settled["approved"], false);
    host.client.cancel().await.expect("close");
}

/// A request state is taken once, only from this server, and only for the question it was given for.
#[tokio::test]
async fn on_2026_07_28_a_request_state_this_server_did_not_give_answers_nothing() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let host = HostSession::start_in(&agent, &relay, &[], Era::Modern).await;
    let asked = agent
        .ask_user(
            pacerelle_client::agent::QuestionRequest::yes_no("Rotate the keys?")
                .with_id("x-forged")
                .answered_at_host(true),
        )
        .await
        .expect("asked elsewhere");
    let mut params = CallToolRequestParams::new("ask_user").with_arguments(
        json!({"question": "Rotate the keys?", "kind": "yes_no"})
            .as_object()
            .unwrap()
            .clone(),
    );
    params.request_state = Some(format!("pacerelle-ask-here:{}", asked.question_id));
    params.input_responses = Some(
        [(
            "answer".to_string(),
            serde_json::to_value(
                ElicitResult::new(ElicitationAction::Accept).with_content(json!({"answer": "yes"})),
            )
            .unwrap(),
        )]
        .into_iter()
        .collect(),
    );
    let refused = host
        .client
        .peer()
        .call_tool_once(params)
        .await
        .expect_err("refused");
    assert!(refused.to_string().contains("requestState"), "{refused}");
    on_phone(&device, &asked.question_id, QuestionState::Pending).await;
    host.client.cancel().await.expect("close");
}
