//! State changes are conversation items (kind `update`): a task processed, a question answered, cancelled or
//! expired reach the devices concerned — and only them — at once, once, in cursor order, and durably.

use std::time::Duration;

use pacerelle_core::question::{Answer, QuestionState};
use pacerelle_core::wire::{Conversation, ConversationItem, ItemKind, ItemState, SubjectKind};
use pacerelle_core::{Cursor, Timestamp};
use pacerelle_relay::Config;
use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::common::{
    Agent, Device, Reply, TestRelay, answer, ask, db_path, pair, processed, register, send_task, start,
    start_with, wait_messages,
};

/// Far longer than a wake-up takes, far shorter than the 55 s the long-polls below park for: a call that
/// returns within it was woken, not released by the end of its wait.
const WOKEN_WITHIN: Duration = Duration::from_secs(20);

async fn conversation(relay: &TestRelay, device: &Device, cursor: Option<Cursor>, wait: u64) -> Conversation {
    raw_conversation(relay, device, cursor, wait).await.ok()
}

async fn raw_conversation(relay: &TestRelay, device: &Device, cursor: Option<Cursor>, wait: u64) -> Reply {
    let mut path = format!("/v1/device/conversation?updates=true&wait={wait}");
    if let Some(c) = cursor {
        path.push_str(&format!("&cursor={c}"));
    }
    relay.get(&path, &device.bearer).await
}

/// Parks `device` on its conversation after `cursor` (55 s) while `act` runs; the conversation must return
/// items well before the wait ends.
async fn parked_until<F: std::future::Future>(
    relay: &TestRelay,
    device: &Device,
    cursor: Cursor,
    act: F,
) -> (Conversation, F::Output) {
    let parked = async {
        tokio::time::timeout(WOKEN_WITHIN, conversation(relay, device, Some(cursor), 55))
            .await
            .expect("the parked conversation is woken, not released by the end of its wait")
    };
    let act = async {
        // Let the long-poll park first.
        tokio::time::sleep(Duration::from_millis(200)).await;
        act.await
    };
    tokio::join!(parked, act)
}

fn updates(items: &[ConversationItem]) -> Vec<(&str, ItemState)> {
    items
        .iter()
        .filter(|i| i.kind == ItemKind::Update)
        .map(|i| {
            (
                i.subject_id.as_deref().unwrap_or(""),
                i.state.unwrap_or(ItemState::Unknown),
            )
        })
        .collect()
}

async fn cancel(relay: &TestRelay, agent: &Agent, question_id: &str) -> Reply {
    relay
        .call(
            Method::POST,
            &format!("/v1/agent/questions/{question_id}/cancel"),
            Some(&agent.bearer),
            None,
        )
        .await
}

/// The head of a device's conversation.
async fn head(relay: &TestRelay, device: &Device) -> Cursor {
    conversation(relay, device, None, 0).await.cursor
}

/// Cursors strictly increase through the whole conversation.
fn assert_strict(items: &[ConversationItem]) {
    for pair in items.windows(2) {
        assert!(
            pair[0].cursor < pair[1].cursor,
            "{:?} then {:?}",
            pair[0].id,
            pair[1].id
        );
    }
}

#[tokio::test]
async fn a_processed_task_wakes_its_sender_once_and_no_one_else_sees_it() {
    let relay = start().await;
    let agent = register(&relay).await;
    let phone = pair(&relay, &agent).await;
    let tablet = pair(&relay, &agent).await;
    let other_agent = register(&relay).await;
    let stranger = pair(&relay, &other_agent).await;
    let sent = send_task(&relay, &phone, "m1", "buy milk").await;
    wait_messages(&relay, &agent, None, 0, None).await.ok::<Value>();
    // Delivery alone produces no update.
    assert!(updates(&conversation(&relay, &phone, None, 0).await.items).is_empty());

    let tablet_head = head(&relay, &tablet).await;
    let (woken, _) = parked_until(&relay, &phone, sent.cursor, processed(&relay, &agent, "m1")).await;
    assert_eq!(updates(&woken.items), [("m1", ItemState::Processed)]);
    let update = &woken.items[0];
    assert_eq!(update.subject_kind, Some(SubjectKind::Message));
    assert!(update.id.starts_with("upd_"), "{}", update.id);
    assert!(update.envelope.is_empty() && update.question.is_none());
    assert!(update.cursor > sent.cursor);
    assert_eq!(woken.cursor, update.cursor);

    // On the wire: the contract's fields, no envelope.
    let raw: Value = raw_conversation(&relay, &phone, Some(sent.cursor), 0).await.ok();
    let item = &raw["items"][0];
    assert_eq!(item["kind"], "update");
    assert_eq!(item["subjectId"], "m1");
    assert_eq!(item["subjectKind"], "message");
    assert_eq!(item["state"], "processed");
    assert!(item.get("envelope").is_none(), "{item}");
    assert!(item["createdAt"].is_string() && item["cursor"].is_string());

    // Acknowledging again (a retry) adds nothing.
    processed(&relay, &agent, "m1").await;
    processed(&relay, &agent, "m1").await;
    let all = conversation(&relay, &phone, None, 0).await;
    assert_eq!(updates(&all.items), [("m1", ItemState::Processed)]);
    assert_strict(&all.items);
    // The task itself reads as processed too.
    assert_eq!(all.items[0].state, Some(ItemState::Processed));

    // The other device of the agent, and a device of another agent, see nothing of it.
    let tablet_after = conversation(&relay, &tablet, Some(tablet_head), 0).await;
    assert!(tablet_after.items.is_empty(), "{:?}", tablet_after.items);
    assert!(conversation(&relay, &tablet, None, 0).await.items.is_empty());
    assert!(conversation(&relay, &stranger, None, 0).await.items.is_empty());
}

#[tokio::test]
async fn a_question_answered_elsewhere_wakes_every_recipient_once_and_only_them() {
    let relay = start().await;
    let agent = register(&relay).await;
    let phone = pair(&relay, &agent).await;
    let tablet = pair(&relay, &agent).await;
    let bystander = pair(&relay, &agent).await;
    let (_, view) = ask(&relay, &agent, "q1", &[&phone, &tablet], 600_000).await;
    let bystander_head = head(&relay, &bystander).await;

    let (woken, reply) = parked_until(
        &relay,
        &tablet,
        view.cursor,
        answer(&relay, &phone, "q1", Answer::Yes),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(updates(&woken.items), [("q1", ItemState::Answered)]);
    let update = &woken.items[0];
    assert_eq!(update.subject_kind, Some(SubjectKind::Question));
    let meta = update.question.as_ref().expect("the question's metadata");
    assert_eq!(meta.state, QuestionState::Answered);
    assert_eq!(meta.answered_by.as_deref(), Some(phone.id.as_str()));
    assert!(meta.answered_at.is_some());

    // The device that answered sees it too; the same answer again (a retry) adds nothing.
    let again = answer(&relay, &phone, "q1", Answer::Yes).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);
    // A late answer from the other recipient is refused and adds nothing either.
    answer(&relay, &tablet, "q1", Answer::No)
        .await
        .error(StatusCode::CONFLICT, "question_answered");
    for device in [&phone, &tablet] {
        let all = conversation(&relay, device, None, 0).await;
        assert_eq!(updates(&all.items), [("q1", ItemState::Answered)]);
        assert_strict(&all.items);
    }
    // A device the question was not sealed for sees neither the question nor its update.
    let after = conversation(&relay, &bystander, Some(bystander_head), 0).await;
    assert!(after.items.is_empty(), "{:?}", after.items);
    assert!(conversation(&relay, &bystander, None, 0).await.items.is_empty());
}

#[tokio::test]
async fn a_cancelled_question_wakes_its_recipients_once() {
    let relay = start().await;
    let agent = register(&relay).await;
    let phone = pair(&relay, &agent).await;
    let bystander = pair(&relay, &agent).await;
    let (_, view) = ask(&relay, &agent, "q2", &[&phone], 600_000).await;

    let (woken, reply) = parked_until(&relay, &phone, view.cursor, cancel(&relay, &agent, "q2")).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(updates(&woken.items), [("q2", ItemState::Cancelled)]);
    assert_eq!(
        woken.items[0].question.as_ref().map(|m| m.state),
        Some(QuestionState::Cancelled)
    );
    // Cancelling again is a no-op, and so is its item.
    cancel(&relay, &agent, "q2").await.ok::<Value>();
    let all = conversation(&relay, &phone, None, 0).await;
    assert_eq!(updates(&all.items), [("q2", ItemState::Cancelled)]);
    assert!(conversation(&relay, &bystander, None, 0).await.items.is_empty());
}

#[tokio::test]
async fn an_expired_question_wakes_its_recipients_when_the_expirer_closes_it() {
    let relay = start().await;
    let agent = register(&relay).await;
    let phone = pair(&relay, &agent).await;
    let tablet = pair(&relay, &agent).await;
    let (_, view) = ask(&relay, &agent, "q3", &[&phone, &tablet], 1500).await;

    // Nobody acts: the relay's expirer closes the question and that alone wakes the conversation.
    let (woken, ()) = parked_until(&relay, &tablet, view.cursor, async {}).await;
    assert_eq!(updates(&woken.items), [("q3", ItemState::Expired)]);
    assert!(Timestamp::now() >= view.expires_at);
    let meta = woken.items[0].question.as_ref().expect("the question's metadata");
    assert_eq!(meta.state, QuestionState::Expired);
    assert!(woken.items[0].created_at >= view.expires_at);

    // An answer meeting the expiry afterwards is refused and adds no second item.
    answer(&relay, &phone, "q3", Answer::Yes)
        .await
        .error(StatusCode::GONE, "question_expired");
    for device in [&phone, &tablet] {
        let all = conversation(&relay, device, None, 0).await;
        assert_eq!(updates(&all.items), [("q3", ItemState::Expired)]);
    }
}

#[tokio::test]
async fn updates_keep_a_strict_cursor_order_among_other_items_and_survive_a_restart() {
    let relay = start().await;
    let agent = register(&relay).await;
    let phone = pair(&relay, &agent).await;
    let tablet = pair(&relay, &agent).await;
    send_task(&relay, &phone, "m1", "one").await;
    ask(&relay, &agent, "q1", &[&phone, &tablet], 600_000).await;
    send_task(&relay, &phone, "m2", "two").await;
    wait_messages(&relay, &agent, None, 0, None).await.ok::<Value>();
    processed(&relay, &agent, "m2").await;
    answer(&relay, &tablet, "q1", Answer::No).await.ok::<Value>();
    processed(&relay, &agent, "m1").await;
    ask(&relay, &agent, "q2", &[&phone], 600_000).await;
    cancel(&relay, &agent, "q2").await.ok::<Value>();

    let before = conversation(&relay, &phone, None, 0).await;
    let kinds: Vec<(ItemKind, &str)> = before
        .items
        .iter()
        .map(|i| (i.kind, i.subject_id.as_deref().unwrap_or(&i.id)))
        .collect();
    assert_eq!(
        kinds,
        [
            (ItemKind::Message, "m1"),
            (ItemKind::Question, "q1"),
            (ItemKind::Message, "m2"),
            (ItemKind::Update, "m2"),
            (ItemKind::Update, "q1"),
            (ItemKind::Update, "m1"),
            (ItemKind::Question, "q2"),
            (ItemKind::Update, "q2"),
        ]
    );
    assert_strict(&before.items);
    // Read one item at a time from each cursor: the same items, in the same order.
    let mut cursor = None;
    for expected in &before.items {
        let page: Conversation = relay
            .get(
                &match cursor {
                    Some(c) => format!("/v1/device/conversation?updates=true&wait=0&cursor={c}"),
                    None => "/v1/device/conversation?updates=true&wait=0".to_string(),
                },
                &phone.bearer,
            )
            .await
            .ok();
        assert_eq!(&page.items[0], expected);
        cursor = Some(page.items[0].cursor);
    }
    // The tablet sent no task: it sees only the question sealed for it and its update.
    let tablet_view = conversation(&relay, &tablet, None, 0).await;
    assert_eq!(updates(&tablet_view.items), [("q1", ItemState::Answered)]);
    assert_eq!(tablet_view.items.len(), 2);

    // Closed and opened again on the same SQLite file: the same items, ids and cursors.
    let dir = relay.stop().await;
    let relay = start_with(
        Config {
            open_registration: true,
            ..Config::new(db_path(&dir))
        },
        dir,
    )
    .await;
    let after = conversation(&relay, &phone, None, 0).await;
    assert_eq!(after.items, before.items);
    // And no retry after the restart adds a second one.
    processed(&relay, &agent, "m1").await;
    answer(&relay, &tablet, "q1", Answer::No).await.ok::<Value>();
    assert_eq!(conversation(&relay, &phone, None, 0).await.items, before.items);
}

/// A client that does not ask for updates — one built before they existed, whose item type requires an
/// envelope and knows only task states — reads the same conversation as before: no `update` item, every item
/// with an envelope, task states only.
#[tokio::test]
async fn a_client_that_does_not_ask_for_updates_never_sees_one() {
    let relay = start().await;
    let agent = register(&relay).await;
    let phone = pair(&relay, &agent).await;
    send_task(&relay, &phone, "m1", "buy milk").await;
    processed(&relay, &agent, "m1").await;
    ask(&relay, &agent, "q1", &[&phone], 60_000).await;
    cancel(&relay, &agent, "q1").await.ok::<Value>();

    // The new view has both updates…
    let new = conversation(&relay, &phone, None, 0).await;
    assert_eq!(updates(&new.items).len(), 2, "{:?}", new.items);
    // …the old one none, and each of its items reads with the item type of before.
    for path in [
        "/v1/device/conversation?wait=0",
        "/v1/device/conversation?updates=false&wait=0",
    ] {
        let raw: Value = relay.get(path, &phone.bearer).await.ok();
        let items = raw["items"].as_array().expect("items");
        assert_eq!(items.len(), 2, "{raw}");
        for item in items {
            assert_ne!(item["kind"], "update", "{item}");
            assert!(item["envelope"].as_str().is_some_and(|e| !e.is_empty()), "{item}");
            assert!(
                item["state"].is_null()
                    || matches!(item["state"].as_str(), Some("sent" | "delivered" | "processed")),
                "{item}"
            );
        }
        // Its cursor still moves to the head, so it does not read the same updates over and over.
        assert_eq!(raw["cursor"].as_str(), Some(new.cursor.to_string().as_str()));
    }
}
