//! One phone, several agents (`Pairings`), and a Partner-mode pairing's identity, against a real relay on
//! 127.0.0.1 with a real SQLite file.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use pacerelle_client::{
    AgentClient, agent::ConnectOptions, agent::PairingOptions, agent::QuestionRequest,
    core::pairing::Branding,
};
use pacerelle_ffi::{Answer, DeviceClient, PacerelleError, Pairings};
use pacerelle_relay::{Config, Relay};

async fn relay(dir: &std::path::Path) -> (String, tokio::sync::oneshot::Sender<()>) {
    let relay = Relay::open(Config {
        database_path: dir.join("pacerelle.db"),
        open_registration: true,
        ..Default::default()
    })
    .await
    .expect("relay opens");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(relay.serve(listener, async move {
        let _ = stopped.await;
    }));
    (url, stop)
}

async fn agent(url: &str, name: &str) -> AgentClient {
    let registered = AgentClient::register(url, name, None).await.expect("register");
    AgentClient::new(url, registered.agent_id(), registered.token().clone())
        .expect("client")
        .with_home(None)
}

async fn join(agent: &AgentClient) -> Arc<DeviceClient> {
    let link = agent
        .create_pairing(PairingOptions::default())
        .await
        .expect("pairing");
    DeviceClient::join(link.link, "phone".into()).await.expect("join")
}

#[tokio::test]
async fn one_phone_answers_two_agents_and_unpairing_one_leaves_the_other() {
    let dir = tempfile::tempdir().unwrap();
    let (url, _stop) = relay(dir.path()).await;
    let laptop = agent(&url, "laptop").await;
    let server = agent(&url, "build server").await;

    let phone = Pairings::new();
    phone.add(join(&laptop).await);
    phone.add(join(&server).await);
    let names: Vec<_> = phone.identities().into_iter().map(|i| i.agent_name).collect();
    assert_eq!(names, ["laptop", "build server"]);

    laptop
        .ask_user(
            QuestionRequest::yes_no("Push to main?")
                .with_id("q-laptop")
                .expires_in(Duration::from_secs(600)),
        )
        .await
        .expect("ask");
    server
        .ask_user(
            QuestionRequest::yes_no("Restart the database?")
                .with_id("q-server")
                .expires_in(Duration::from_secs(60)),
        )
        .await
        .expect("ask");

    // One view across both agents, the most urgent first, each labelled with its agent.
    let pending = phone.pending_questions().await;
    assert!(pending.failures.is_empty(), "{:?}", pending.failures);
    let seen: Vec<_> = pending
        .questions
        .iter()
        .map(|q| (q.agent_name.as_str(), q.question.question_id.as_str()))
        .collect();
    assert_eq!(seen, [("build server", "q-server"), ("laptop", "q-laptop")]);

    // Answered through the right agent's device.
    let device = phone
        .device(server.agent_id().to_string())
        .expect("the server's pairing");
    device
        .answer("q-server".into(), Answer::Yes)
        .await
        .expect("answer");
    let outcome = server
        .wait_for_answer("q-server", Duration::ZERO)
        .await
        .expect("read");
    assert!(outcome.approved, "{outcome:?}");

    // Presence for both.
    let presence = phone.presence().await;
    assert_eq!(presence.len(), 2);
    assert!(
        presence.iter().all(|p| p.status.is_some() && p.failure.is_none()),
        "{presence:?}"
    );

    // Unpairing the laptop leaves the server's pairing working.
    let stored = phone.credentials();
    assert!(phone.unpair(laptop.agent_id().to_string()).await.expect("unpair"));
    assert!(!phone.unpair(laptop.agent_id().to_string()).await.expect("again"));
    let names: Vec<_> = phone.identities().into_iter().map(|i| i.agent_name).collect();
    assert_eq!(names, ["build server"]);
    server
        .ask_user(QuestionRequest::yes_no("Rotate the keys?").with_id("q-after"))
        .await
        .expect("ask");
    let pending = phone.pending_questions().await;
    let ids: Vec<_> = pending
        .questions
        .iter()
        .map(|q| q.question.question_id.as_str())
        .collect();
    assert_eq!(ids, ["q-after"]);

    // The laptop's old credentials, restored beside the server's, are refused and reported, not hiding the
    // server's questions.
    let restored = Pairings::restore(stored).expect("restore");
    let pending = restored.pending_questions().await;
    assert_eq!(pending.questions.len(), 1, "{pending:?}");
    assert_eq!(pending.failures.len(), 1, "{pending:?}");
    assert!(pending.failures[0].not_paired && pending.failures[0].agent_name == "laptop");
    assert!(matches!(
        Pairings::restore(vec!["not credentials".into()]),
        Err(PacerelleError::InvalidInput { .. })
    ));
}

#[tokio::test]
async fn a_partner_pairing_names_its_user_and_branding() {
    let dir = tempfile::tempdir().unwrap();
    let (url, _stop) = relay(dir.path()).await;
    let acme = agent(&url, "Acme Support").await;
    let link = acme
        .connect_user(
            "cus_42",
            "Alice Martin",
            ConnectOptions {
                branding: Some(Branding {
                    accent_color: Some("#0a7d5a".into()),
                    icon: Some("data:image/svg+xml;base64,PHN2Zy8+".into()),
                }),
                ..Default::default()
            },
        )
        .await
        .expect("connect");
    let device = DeviceClient::join(link.link, "alice's phone".into())
        .await
        .expect("join");
    let identity = device.identity();
    assert_eq!(identity.role, "user");
    let user = identity.user.expect("a user pairing");
    assert_eq!(
        (user.external_id.as_str(), user.name.as_str()),
        ("cus_42", "Alice Martin")
    );
    let branding = identity.branding.expect("branding");
    assert_eq!(branding.accent_color.as_deref(), Some("#0a7d5a"));
    assert!(branding.icon.unwrap().starts_with("data:image/svg+xml;base64,"));

    acme.ask_user(
        QuestionRequest::yes_no("Refund order 42?")
            .for_user("cus_42")
            .with_id("q-refund"),
    )
    .await
    .expect("ask alice");
    let pending = device.pending_questions().await.expect("pending");
    assert_eq!(pending.len(), 1);
    device
        .answer("q-refund".into(), Answer::Yes)
        .await
        .expect("answer");
    assert!(
        acme.wait_for_answer("q-refund", Duration::ZERO)
            .await
            .unwrap()
            .approved
    );
}
