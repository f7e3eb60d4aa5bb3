//! The call-by-call listener (the MCP server's consuming path) against a real relay: a lease held elsewhere,
//! a takeover that ends this listener's lease (one retake, without takeover, then `agent_in_use`), the holder
//! it shows, and a lease taken back once the other session released it.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::Duration;

use pacerelle_client::{AgentClient, ErrorKind, listener::Listener};
use pacerelle_test_support::TestRelay;

/// A second client of the same agent, with its own session (as a second process has).
fn other_process(agent: &AgentClient) -> AgentClient {
    AgentClient::new(agent.relay_url(), agent.agent_id(), agent.token().clone())
        .expect("client")
        .with_home(Some(&pacerelle_test_support::home()))
}

#[tokio::test]
async fn one_listener_holds_the_lease_and_a_takeover_is_never_taken_back() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let first_client = other_process(&agent);
    let first = Listener::new(first_client.clone(), "first", false);
    let second = Listener::new(other_process(&agent), "second", false);

    // The first takes the lease with its first consuming call and gets the task.
    device.send("hello", None).await.expect("send");
    let inbox = first
        .wait_for_messages(None, Duration::from_secs(5))
        .await
        .expect("wait");
    assert_eq!(inbox.messages.len(), 1);
    let message_id = inbox.messages[0].message_id.clone();
    let state = first.state().await;
    assert!(state.session.is_some() && !state.refused, "{state:?}");

    // The second is refused, and names the holder.
    let refused = second.ensure().await.expect_err("held elsewhere");
    assert_eq!(refused.kind(), ErrorKind::AgentInUse);
    assert_eq!(refused.lease_holder().expect("named").host, "first");
    let state = second.state().await;
    assert!(state.session.is_none() && state.refused, "{state:?}");
    assert_eq!(state.holder.expect("holder").host, "first");
    // A wait refused for the lease ends at once: no retry fixes it.
    let started = std::time::Instant::now();
    let e = second
        .wait_for_messages(None, Duration::from_secs(10))
        .await
        .expect_err("refused");
    assert_eq!(e.kind(), ErrorKind::AgentInUse);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );

    // A third session takes the lease over: the first one's next consuming call finds it lost, takes it
    // again once without takeover, and is refused with the new holder named.
    let third = Listener::new(other_process(&agent), "third", true);
    third.ensure().await.expect("takeover");
    let e = first
        .consume(|| first_client.mark_processed(&message_id))
        .await
        .expect_err("lost to the takeover");
    assert_eq!(e.kind(), ErrorKind::AgentInUse, "{e}");
    let state = first.state().await;
    assert!(state.session.is_none() && state.refused, "{state:?}");
    assert_eq!(state.holder.expect("holder").host, "third");

    // Once the third releases it, the first takes it back (without takeover) at its next call.
    third.release().await;
    assert!(third.state().await.session.is_none());
    first
        .consume(|| first_client.mark_processed(&message_id))
        .await
        .expect("taken back");
    let state = first.state().await;
    assert!(state.session.is_some() && !state.refused, "{state:?}");
    let inbox = first.wait_for_messages(None, Duration::ZERO).await.expect("wait");
    assert!(inbox.messages.is_empty(), "the task was processed: {inbox:?}");
    first.release().await;
    assert!(first.state().await.session.is_none());
}
