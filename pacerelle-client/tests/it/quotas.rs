//! The relay's per-agent quotas as the client reports them: `ErrorKind::QuotaExceeded`, neither transient nor
//! worth retrying at once, with the quota and its limit in the details.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use pacerelle_client::{Error, ErrorKind, agent::QuestionRequest};
use pacerelle_relay::Quotas;
use pacerelle_test_support::TestRelay;

/// A relay on 127.0.0.1:0 allowing 2 tasks not yet processed and 1 open question per agent.
async fn small_relay() -> TestRelay {
    TestRelay::start_with(|config| {
        config.quotas = Quotas {
            max_pending_tasks: 2,
            max_open_questions: 1,
            ..Quotas::default()
        };
    })
    .await
}

#[track_caller]
fn assert_quota(e: &Error, quota: &str, limit: u64) {
    assert_eq!(e.kind(), ErrorKind::QuotaExceeded, "{e}");
    assert_eq!(e.code(), Some("quota_exceeded"));
    assert!(!e.is_transient(), "a quota is not an outage: {e}");
    assert!(!e.kind().worth_retrying());
    let Error::Api { status, details, .. } = e else {
        panic!("an API error: {e}");
    };
    assert_eq!(*status, 429);
    let details = details.as_deref().expect("details");
    assert_eq!(details["quota"], quota);
    assert_eq!(details["limit"], limit);
}

#[tokio::test]
async fn a_send_beyond_the_pending_quota_is_quota_exceeded_until_the_agent_processes_one() {
    let relay = small_relay().await;
    let (agent, device) = relay.agent_and_device().await;

    let first = device.send("one", None).await.expect("first");
    device.send("two", None).await.expect("second");
    let e = device.send("three", None).await.expect_err("over the quota");
    assert_quota(&e, "max_pending_tasks", 2);
    // The message names the limit, never the task.
    assert!(!e.to_string().contains("three"), "{e}");

    agent.mark_processed(&first.id).await.expect("processed");
    device.send("three", None).await.expect("room again");
}

#[tokio::test]
async fn a_question_beyond_the_open_quota_is_quota_exceeded_until_one_is_cancelled() {
    let relay = small_relay().await;
    let (agent, _device) = relay.agent_and_device().await;

    let asked = agent
        .ask_user(QuestionRequest::yes_no("deploy?"))
        .await
        .expect("first question");
    let e = agent
        .ask_user(QuestionRequest::yes_no("and roll back?"))
        .await
        .expect_err("over the quota");
    assert_quota(&e, "max_open_questions", 1);

    agent
        .cancel_question(&asked.question_id)
        .await
        .expect("cancelled");
    agent
        .ask_user(QuestionRequest::yes_no("and roll back?"))
        .await
        .expect("room again");
}

/// A long text is sealed once per recipient device: for five devices a 40 000-character notification no longer
/// fits one request. The client says so before sending (`body_too_large`, naming the limit) instead of sending
/// it for the relay to refuse; with three devices the same text goes through.
#[tokio::test]
async fn a_text_too_large_for_all_the_devices_is_refused_before_it_is_sent_and_says_which_limit() {
    use pacerelle_client::{Level, core::wire::MAX_BODY_BYTES};
    use pacerelle_test_support::pair;
    let relay = TestRelay::start().await;
    let (agent, _first) = relay.agent_and_device().await;
    let mut devices = Vec::new();
    for name in ["tablet", "laptop"] {
        devices.push(pair(&agent, name).await);
    }
    let text = "a".repeat(40_000);
    agent
        .notify(&text, None, Level::Info)
        .await
        .expect("three devices: it fits");

    for name in ["browser", "terminal"] {
        devices.push(pair(&agent, name).await);
    }
    let e = agent
        .notify(&text, None, Level::Info)
        .await
        .expect_err("five devices: too large");
    assert_eq!(e.kind(), ErrorKind::BodyTooLarge, "{e}");
    assert!(!e.is_transient());
    let message = e.to_string();
    assert!(
        message.contains(&MAX_BODY_BYTES.to_string())
            && message.contains("nothing was sent")
            && message.contains("each recipient device"),
        "{message}"
    );
    // The first notification only: the refused one never reached the relay.
    let first = devices[0]
        .conversation(None, std::time::Duration::ZERO)
        .await
        .expect("conversation");
    let notifications = first
        .items
        .iter()
        .filter(|i| i.kind == pacerelle_client::core::wire::ItemKind::Notification)
        .count();
    assert_eq!(notifications, 1);
}
