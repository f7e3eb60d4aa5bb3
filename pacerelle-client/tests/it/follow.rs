//! Following a device's conversation (the loop behind `pacerelle inbox --follow` and the mobile SDK's
//! listener) against a real relay: items arrive once each, a relay restart is an error worth retrying after
//! a pause, and a revoked device ends the following.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::HashSet;
use std::time::Duration;

use pacerelle_client::{ErrorKind, Level, backoff::Backoff, device::Follow, device::Followed};
use pacerelle_test_support::TestRelay;

/// Generous: a page or an error comes at once here (the item is already stored, or the relay is down).
const WITHIN: Duration = Duration::from_secs(40);

async fn next(follow: &mut Follow) -> Option<Followed> {
    tokio::time::timeout(WITHIN, follow.next())
        .await
        .expect("following yields within its park")
}

/// Reads pages until one holds an item `id`; every item id is new to `seen`.
async fn until_item(follow: &mut Follow, seen: &mut HashSet<String>, id: &str) {
    loop {
        match next(follow).await {
            Some(Followed::Page(page)) => {
                for item in &page.items {
                    assert!(seen.insert(item.id.clone()), "item {} came twice", item.id);
                }
                assert_eq!(follow.cursor(), Some(page.cursor), "the cursor is kept");
                if page.items.iter().any(|i| i.id == id) {
                    return;
                }
            }
            Some(Followed::Error { error, retry_in }) => {
                assert!(retry_in.is_some(), "only errors worth retrying here: {error}");
            }
            None => panic!("following ended before item {id}"),
        }
    }
}

#[tokio::test]
async fn following_survives_a_relay_restart_and_ends_when_the_device_is_revoked() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let device_id = device.credentials().device_id.clone();
    let mut follow = device.follow(None).backoff(Backoff {
        first: Duration::from_millis(50),
        max: Duration::from_millis(200),
    });
    let mut seen = HashSet::new();

    let task = device.send("before the restart", None).await.expect("send");
    until_item(&mut follow, &mut seen, &task.id).await;

    // The relay goes away: an error worth retrying, with the pause the next call waits.
    let port = relay.port;
    let dir = relay.stop().await;
    match next(&mut follow).await {
        Some(Followed::Error {
            error,
            retry_in: Some(pause),
        }) => {
            assert_eq!(error.kind(), ErrorKind::Unavailable, "{error}");
            assert!(
                pause <= Duration::from_millis(200),
                "{pause:?} is past the backoff's max"
            );
        }
        other => panic!("expected an error worth retrying, got {other:?}"),
    }

    // Back on the same port and database: following goes on from its cursor.
    let relay = TestRelay::start_on(port, dir).await;
    let note = agent
        .notify("after the restart", None, Level::Info)
        .await
        .expect("notify");
    until_item(&mut follow, &mut seen, &note.id).await;
    assert!(
        seen.contains(&task.id),
        "the task before the restart was seen once, not again"
    );

    // A revoked device: an error no retry fixes, then the end.
    agent.revoke_device(&device_id).await.expect("revoke");
    loop {
        match next(&mut follow).await {
            Some(Followed::Page(page)) => assert!(page.items.iter().all(|i| seen.insert(i.id.clone()))),
            Some(Followed::Error {
                retry_in: Some(_), ..
            }) => {}
            Some(Followed::Error {
                error,
                retry_in: None,
            }) => {
                assert!(!error.is_transient(), "{error}");
                break;
            }
            None => panic!("the lasting error is returned before the end"),
        }
    }
    assert!(next(&mut follow).await.is_none(), "following has ended");
    drop(relay);
}
