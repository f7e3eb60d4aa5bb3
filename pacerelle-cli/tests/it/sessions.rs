//! Named sessions from the terminal phone, with the real binary: `pacerelle send --session` reaches only that
//! session of the agent, `pacerelle status` lists the sessions with their folders, and a bad name is refused
//! before anything is sent.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::time::Duration;

use common::{Setup, agent_on, run, stderr, stdout};
use pacerelle_client::core::wire::OpenSession;

#[tokio::test]
async fn a_task_sent_to_one_session_reaches_only_that_session_and_status_lists_them() {
    let setup = Setup::start().await;
    let (api, web) = (
        agent_on(setup.agent_home.path(), &setup.url),
        agent_on(setup.agent_home.path(), &setup.url),
    );
    for (client, name) in [(&api, "api"), (&web, "web")] {
        client
            .open_session(&OpenSession {
                name: Some(name.into()),
                folder: Some(format!("{name}-folder")),
                ..OpenSession::new(format!("laptop / {name}"))
            })
            .await
            .expect("opens");
    }
    let out = run({
        let mut c = setup.as_device();
        c.args(["send", "Ship the web release", "--session", "web", "--json"]);
        c
    });
    assert!(out.status.success(), "send: {}", stderr(&out));
    let sent: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let short = Duration::from_secs(1);
    let inbox = web.wait_for_messages(None, short).await.expect("web waits");
    assert_eq!(inbox.messages.len(), 1, "{inbox:?}");
    assert_eq!(inbox.messages[0].message_id, sent["messageId"].as_str().unwrap());
    assert_eq!(inbox.messages[0].session.as_deref(), Some("web"));
    let inbox = api.wait_for_messages(None, short).await.expect("api waits");
    assert!(inbox.messages.is_empty(), "{inbox:?}");

    let out = run({
        let mut c = setup.as_device();
        c.arg("status");
        c
    });
    let text = stdout(&out);
    assert!(out.status.success(), "status: {}", stderr(&out));
    assert!(text.contains("sessions:"), "{text}");
    let line = |name: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_default()
            .to_string()
    };
    assert!(
        line("api").contains("laptop / api") && line("api").contains("in api-folder"),
        "{text}"
    );
    assert!(
        line("web").contains("busy") && line("web").contains("in web-folder"),
        "{text}"
    );

    let out = run({
        let mut c = setup.as_device();
        c.args(["send", "hello", "--session", "two words"]);
        c
    });
    assert!(!out.status.success());
    assert!(stderr(&out).contains("session name"), "{}", stderr(&out));
}
