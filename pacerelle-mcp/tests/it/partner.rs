//! Partner mode through the real binary, driven by a real MCP client over stdio, against a real relay: two
//! users connected with `connect_user`, each link opened by a real `DeviceClient`; a question for one user
//! reaches that user's device only (the other can neither list, read nor answer it), its answer is
//! approved and named; `list_users` and `get_user` show the devices and the last answer; a task from a user's
//! device names its user; `disconnect_user` revokes the user's device at the relay; asking an unknown or
//! disconnected user is `user_not_found`.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::time::Duration;

use common::{Era, Server, TestRelay, occurrences, spawn, text};
use pacerelle_client::core::envelope;
use pacerelle_client::core::question::{AnswerPayload, answer_aad};
use pacerelle_client::core::wire::code;
use pacerelle_client::{AgentClient, Answer, DeviceClient, QuestionState, Timestamp, core::wire::ItemKind};
use serde_json::{Value, json};

/// A 1×1 SVG as the inline icon the app shows for the agent.
const ICON: &str = "data:image/svg+xml;base64,PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciLz4=";

/// `connect_user`, then the link opened in the app by a device named `phone`.
async fn connect(server: &Server, arguments: Value, phone: &str) -> (Value, DeviceClient) {
    let connected = server.ok("connect_user", arguments).await;
    let link = connected["link"].as_str().expect("link");
    let device = DeviceClient::join(link, phone)
        .await
        .expect("the user opens the link");
    assert_eq!(
        device.credentials().device_id,
        connected["deviceId"].as_str().expect("deviceId"),
        "{connected}"
    );
    (connected, device)
}

/// Whether `device` can see question `id` in any way: listed, or in its conversation (opened or not).
async fn sees(device: &DeviceClient, id: &str) -> bool {
    let listed = device
        .questions(None)
        .await
        .expect("the device lists its questions");
    let page = device
        .conversation(None, Duration::ZERO)
        .await
        .expect("the device reads its conversation");
    listed.questions.iter().any(|q| q.question_id == id)
        || listed.rejected.iter().any(|r| r.message_id == id)
        || page.items.iter().any(|i| i.id == id)
        || page.rejected.iter().any(|r| r.message_id == id)
}

/// Answers question `id` as `device` straight at the relay (an answer sealed with that device's key), as a
/// device that does not hold the question would have to: the relay's HTTP status.
async fn answer_at_relay(agent: &AgentClient, device: &DeviceClient, id: &str) -> reqwest::StatusCode {
    let creds = device.credentials();
    let payload = AnswerPayload {
        grant: None,
        question_id: id.to_string(),
        answer: Answer::Yes,
        answered_at: Timestamp::now(),
        question_digest: None,
        signature: None,
    };
    let sealed = envelope::seal_json(
        &agent.token().device_key(&creds.agent_id, &creds.device_id),
        &answer_aad(&creds.agent_id, &creds.device_id, id),
        &payload,
    );
    reqwest::Client::new()
        .post(format!(
            "{}/v1/device/questions/{id}/answer",
            creds.relay_url.trim_end_matches('/')
        ))
        .bearer_auth(&creds.device_token)
        .json(&json!({ "envelope": sealed }))
        .send()
        .await
        .expect("send the answer")
        .status()
}

fn user<'a>(users: &'a Value, external_id: &str) -> &'a Value {
    users["users"]
        .as_array()
        .expect("users")
        .iter()
        .find(|u| u["externalId"] == external_id)
        .unwrap_or_else(|| panic!("{external_id} is listed: {users}"))
}

#[tokio::test]
async fn each_user_answers_only_their_own_questions() {
    let relay = TestRelay::start().await;
    let agent = AgentClient::register(&relay.url, "Acme Travel", None)
        .await
        .expect("register")
        .with_home(Some(&pacerelle_test_support::home()));
    let server = spawn(&agent, &relay.url, &[], Era::Legacy).await;

    // Two users, each connected by a link opened on their own phone, under the agent's branding.
    let (alice_link, alice) = connect(
        &server,
        json!({"externalId": "alice", "name": "Alice Martin", "accentColor": "#0a7cff", "icon": ICON}),
        "Alice's phone",
    )
    .await;
    assert_eq!(alice_link["externalId"], "alice");
    assert!(alice_link["expiresAt"].is_string(), "{alice_link}");
    let qr = alice_link["qrCode"].as_str().expect("qrCode");
    let svg = qr
        .strip_prefix("data:image/svg+xml;base64,")
        .and_then(|data| data_encoding::BASE64.decode(data.as_bytes()).ok())
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .unwrap_or_else(|| panic!("an SVG data URL: {qr}"));
    assert!(svg.starts_with("<svg ") && svg.ends_with("</svg>"), "{svg}");
    let alice_id = alice.credentials().device_id.clone();
    let offered = alice
        .credentials()
        .user
        .clone()
        .expect("the offer names the user");
    assert_eq!(
        (offered.external_id.as_str(), offered.name.as_str()),
        ("alice", "Alice Martin")
    );
    let branding = alice
        .credentials()
        .branding
        .clone()
        .expect("the offer carries the branding");
    assert_eq!(branding.accent_color.as_deref(), Some("#0a7cff"));
    assert_eq!(branding.icon.as_deref(), Some(ICON));
    // The text for the model carries the link and leaves the image to structuredContent.
    let before = Timestamp::now().millis();
    let connected = server
        .call(
            "connect_user",
            json!({"externalId": "bob", "name": "Bob Stone", "linkTtlSeconds": 120}),
        )
        .await;
    let bob_link = connected.structured_content.clone().expect("structured");
    // The link lasts the 120 seconds asked, not the default 10 minutes.
    let expires = Timestamp::parse(bob_link["expiresAt"].as_str().expect("expiresAt"))
        .expect("an RFC 3339 time")
        .millis();
    assert!(
        (before + 110_000..=before + 130_000).contains(&expires),
        "expires {} ms after the call",
        expires - before
    );
    let bob_qr = bob_link["qrCode"].as_str().expect("qrCode");
    assert_eq!(occurrences(&connected, bob_qr), 1, "{}", text(&connected));
    assert!(text(&connected).contains(bob_link["link"].as_str().expect("link")));
    let bob = DeviceClient::join(bob_link["link"].as_str().expect("link"), "Bob's phone")
        .await
        .expect("bob opens his link");
    let bob_id = bob.credentials().device_id.clone();

    // Malformed branding is refused before anything is created.
    let refused = server
        .invalid_params(
            "connect_user",
            json!({"externalId": "carol", "name": "Carol", "accentColor": "blue"}),
        )
        .await;
    assert!(refused.contains("#rrggbb"), "{refused}");
    let refused = server
        .invalid_params(
            "connect_user",
            json!({"externalId": "carol", "name": "Carol", "linkTtlSeconds": 0}),
        )
        .await;
    assert!(refused.contains("linkTtlSeconds"), "{refused}");

    // A question for alice: her device lists it; bob's neither lists nor reads it, and the relay refuses
    // his answer to it.
    let asked = server
        .ok(
            "ask_user",
            json!({"question": "Book the 9:40 flight to Lisbon for 212 EUR?", "kind": "yes_no", "userId": "alice"}),
        )
        .await;
    let id = asked["questionId"].as_str().expect("questionId").to_string();
    let pending = alice
        .questions(Some(QuestionState::Pending))
        .await
        .expect("alice lists her questions");
    let on_phone = pending
        .questions
        .iter()
        .find(|q| q.question_id == id)
        .unwrap_or_else(|| panic!("alice's device should list {id}"));
    assert_eq!(on_phone.question, "Book the 9:40 flight to Lisbon for 212 EUR?");
    assert!(
        !sees(&bob, &id).await,
        "bob's device must not see alice's question"
    );
    assert!(
        bob.answer(&id, Answer::Yes).await.is_err(),
        "bob cannot answer a question he cannot read"
    );
    let status = answer_at_relay(&agent, &bob, &id).await;
    // Not sealed for bob's device, so for the relay there is no such question of his.
    assert_eq!(
        status,
        reqwest::StatusCode::NOT_FOUND,
        "bob's answer to alice's question: {status}"
    );
    let still = server
        .call("wait_for_answer", json!({"questionId": id, "timeoutSeconds": 0}))
        .await;
    let still = still.structured_content.clone().expect("structured");
    assert_eq!(still["state"], "pending", "{still}");
    assert_eq!(still["approved"], false, "{still}");

    // Alice answers yes: approved, answered by her device.
    alice.answer(&id, Answer::Yes).await.expect("alice answers");
    let answered = server
        .ok("wait_for_answer", json!({"questionId": id, "timeoutSeconds": 20}))
        .await;
    assert_eq!(answered["state"], "answered", "{answered}");
    assert_eq!(answered["approved"], true, "{answered}");
    assert_eq!(answered["answeredBy"], alice_id.as_str(), "{answered}");

    // A notification for bob reaches his device only.
    server
        .ok(
            "send_notification",
            json!({"text": "Your refund was sent", "userId": "bob"}),
        )
        .await;
    let notified = |device: DeviceClient| async move {
        device
            .conversation(None, Duration::ZERO)
            .await
            .expect("conversation")
            .items
            .iter()
            .any(|i| i.kind == ItemKind::Notification && i.text == "Your refund was sent")
    };
    assert!(notified(bob.clone()).await, "bob's device shows his notification");
    assert!(
        !notified(alice.clone()).await,
        "alice's device must not show bob's notification"
    );

    // A task from bob's device names its user.
    bob.send("Cancel my hotel in Porto", None)
        .await
        .expect("bob sends a task");
    let waited = server
        .ok("wait_for_messages", json!({"timeoutSeconds": 20}))
        .await;
    let task = &waited["messages"][0];
    assert_eq!(task["text"], "Cancel my hotel in Porto", "{waited}");
    assert_eq!(task["from"], bob_id.as_str(), "{waited}");
    assert_eq!(task["userId"], "bob", "{waited}");

    // Both users, with their paired devices; alice's last answer.
    let users = server.ok("list_users", json!({})).await;
    assert_eq!(users["users"].as_array().map(Vec::len), Some(2), "{users}");
    for (external_id, device_id) in [("alice", &alice_id), ("bob", &bob_id)] {
        let u = user(&users, external_id);
        assert_eq!(u["status"], "connected", "{u}");
        assert_eq!(u["devices"].as_array().map(Vec::len), Some(1), "{u}");
        assert_eq!(u["devices"][0]["deviceId"], device_id.as_str(), "{u}");
        assert_eq!(u["devices"][0]["paired"], true, "{u}");
        assert_eq!(u["devices"][0]["revoked"], false, "{u}");
    }
    assert_eq!(
        user(&users, "alice")["lastAnswer"]["questionId"],
        id.as_str(),
        "{users}"
    );
    assert!(user(&users, "bob").get("lastAnswer").is_none(), "{users}");
    let shown = server.ok("get_user", json!({"externalId": "alice"})).await;
    assert_eq!(shown["name"], "Alice Martin", "{shown}");
    let last = &shown["lastAnswer"];
    assert_eq!(last["questionId"], id.as_str(), "{shown}");
    assert_eq!(
        last["question"], "Book the 9:40 flight to Lisbon for 212 EUR?",
        "{shown}"
    );
    assert_eq!(last["answer"], "yes", "{shown}");
    assert_eq!(last["approved"], true, "{shown}");
    assert_eq!(last["answeredBy"], alice_id.as_str(), "{shown}");
    assert!(last["answeredAt"].is_string(), "{shown}");

    // Bob disconnected: his device is revoked at the relay.
    let gone = server.ok("disconnect_user", json!({"externalId": "bob"})).await;
    assert_eq!(gone["status"], "disconnected", "{gone}");
    assert_eq!(gone["devices"][0]["revoked"], true, "{gone}");
    let refused = bob.status().await.expect_err("a revoked device is refused");
    assert_eq!(refused.code(), Some(code::DEVICE_REVOKED), "{refused:?}");
    let users = server.ok("list_users", json!({})).await;
    assert_eq!(user(&users, "bob")["status"], "disconnected", "{users}");
    assert_eq!(user(&users, "alice")["status"], "connected", "{users}");

    // An unknown user and a disconnected one cannot be asked; nothing is approved.
    for unknown in ["carol", "bob"] {
        let error = server
            .tool_error(
                "ask_user",
                json!({"question": "Refund 40 EUR?", "kind": "yes_no", "userId": unknown}),
            )
            .await;
        assert!(error.contains("user_not_found"), "{unknown}: {error}");
        assert!(
            error.contains(unknown) && error.contains("connect_user"),
            "{error}"
        );
        assert!(error.contains("nothing is approved"), "{error}");
    }
    let error = server
        .tool_error("send_notification", json!({"text": "hi", "userId": "carol"}))
        .await;
    assert!(error.contains("user_not_found"), "{error}");
    let error = server
        .tool_error("get_user", json!({"externalId": "carol"}))
        .await;
    assert!(error.contains("user_not_found"), "{error}");
    // Bad arguments are refused as such.
    server
        .invalid_params(
            "ask_user",
            json!({"question": "x?", "kind": "yes_no", "userId": ""}),
        )
        .await;

    // The owner's behaviour is unchanged: without an owner device, an owner question has nobody to reach.
    let error = server
        .tool_error("ask_user", json!({"question": "Deploy?", "kind": "yes_no"}))
        .await;
    assert!(error.contains("No phone is paired"), "{error}");
    server.stop().await;
}
