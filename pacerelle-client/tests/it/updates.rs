//! State changes reach a device's conversation as typed updates, through the real client and a real relay: a
//! device parked on its conversation learns at once that its task was processed, or that a question sealed
//! for it was answered elsewhere, cancelled or expired — without reading its tasks or questions again.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::time::Duration;

use common::TestRelay;
use pacerelle_client::core::wire::code;
use pacerelle_client::{
    Answer, Cursor, DeviceClient, QuestionState, agent::PairingOptions, agent::QuestionRequest,
    core::wire::ItemKind, core::wire::ItemState, core::wire::SubjectKind, device::ClosedQuestion,
    device::ConversationItem, device::ConversationPage, device::ItemUpdate,
};

/// Far longer than a wake-up takes, far shorter than the 55 s the conversations below park for: a call that
/// returns within it was woken, not released by the end of its wait.
const WOKEN_WITHIN: Duration = Duration::from_secs(20);
const PARK: Duration = Duration::from_secs(55);

/// Parks `device` on its conversation after `cursor` while `act` runs; it must be woken with items.
async fn parked_until<F: std::future::Future>(
    device: &DeviceClient,
    cursor: Cursor,
    act: F,
) -> (ConversationPage, F::Output) {
    let parked = async {
        tokio::time::timeout(WOKEN_WITHIN, device.conversation(Some(cursor), PARK))
            .await
            .expect("the parked conversation is woken, not released by the end of its wait")
            .expect("conversation")
    };
    let act = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        act.await
    };
    tokio::join!(parked, act)
}

fn the_update(page: &ConversationPage) -> (&ConversationItem, &ItemUpdate) {
    assert!(page.rejected.is_empty(), "{:?}", page.rejected);
    assert_eq!(page.items.len(), 1, "{:?}", page.items);
    let item = &page.items[0];
    assert_eq!(item.kind, ItemKind::Update);
    (item, item.update.as_deref().expect("an update"))
}

async fn head(device: &DeviceClient) -> Cursor {
    device
        .conversation(None, Duration::ZERO)
        .await
        .expect("conversation")
        .cursor
}

#[tokio::test]
async fn a_parked_device_learns_that_its_task_was_processed() {
    let relay = TestRelay::start().await;
    let (agent, phone) = relay.agent_and_device().await;
    let sent = phone.send("water the plants", None).await.expect("send");
    let inbox = agent.wait_for_messages(None, Duration::ZERO).await.expect("wait");
    assert_eq!(inbox.messages.len(), 1);

    let (page, processed) = parked_until(&phone, sent.cursor, agent.mark_processed(&sent.id)).await;
    processed.expect("processed");
    let (item, update) = the_update(&page);
    assert_eq!(update.subject_id, sent.id);
    assert_eq!(update.subject_kind, SubjectKind::Message);
    assert_eq!(update.state, ItemState::Processed);
    assert!(update.question.is_none() && update.meta.is_none());
    assert!(item.text.is_empty() && item.state.is_none());
    assert_eq!(page.cursor, item.cursor);

    // A retried acknowledgement adds nothing after it.
    agent.mark_processed(&sent.id).await.expect("again");
    let after = phone
        .conversation(Some(page.cursor), Duration::ZERO)
        .await
        .expect("conversation");
    assert!(after.items.is_empty(), "{:?}", after.items);
}

#[tokio::test]
async fn a_question_answered_elsewhere_reaches_the_other_device_with_the_answer_and_closes_it_there() {
    let relay = TestRelay::start().await;
    let (agent, phone) = relay.agent_and_device().await;
    let link = agent
        .create_pairing(PairingOptions::default())
        .await
        .expect("pairing");
    let tablet = DeviceClient::join(&link.link, "test tablet").await.expect("join");

    let asked = agent
        .ask_user(QuestionRequest::yes_no("Deploy to production?"))
        .await
        .expect("ask");
    let id = asked.question_id;
    // Paired after the question was asked: not one of its recipients.
    let link = agent
        .create_pairing(PairingOptions::default())
        .await
        .expect("pairing");
    let laptop = DeviceClient::join(&link.link, "test laptop").await.expect("join");
    // The tablet reads its conversation (the question included) and parks after it.
    let seen = tablet
        .conversation(None, Duration::ZERO)
        .await
        .expect("conversation");
    assert!(seen.items.iter().any(|i| i.id == id));
    phone
        .questions(Some(QuestionState::Pending))
        .await
        .expect("questions");

    let (page, answered) = parked_until(&tablet, seen.cursor, phone.answer(&id, Answer::Yes)).await;
    answered.expect("yes");
    let (_, update) = the_update(&page);
    assert_eq!(update.subject_id, id);
    assert_eq!(update.subject_kind, SubjectKind::Question);
    assert_eq!(update.state, ItemState::Answered);
    let phone_id = phone.credentials().device_id.clone();
    let meta = update.meta.as_ref().expect("the relay's metadata");
    assert_eq!(meta.answered_by.as_deref(), Some(phone_id.as_str()));
    // The question the tablet had read, brought up to date: its text, its new state, the answer that counts.
    let question = update
        .question
        .as_ref()
        .expect("the question as read, up to date");
    assert_eq!(question.question, "Deploy to production?");
    assert_eq!(question.state, QuestionState::Answered);
    assert_eq!(question.answer, Some(Answer::Yes));
    assert_eq!(question.answered_by.as_deref(), Some(phone_id.as_str()));
    assert!(!question.is_open());

    // The tablet now refuses an answer of its own, naming the answer that counts.
    let e = tablet
        .answer(&id, Answer::No)
        .await
        .expect_err("already answered");
    assert_eq!(e.code(), Some(code::QUESTION_ANSWERED), "{e}");
    let closed = ClosedQuestion::from_error(&e).expect("a closed question");
    assert_eq!(closed.answer, Some(Answer::Yes));
    assert!(!closed.by_this_device);

    // The phone sees the update too, once, even after a retry of its answer.
    phone
        .answer(&id, Answer::Yes)
        .await
        .expect("the same answer again");
    let phone_page = phone
        .conversation(None, Duration::ZERO)
        .await
        .expect("conversation");
    let updates: Vec<_> = phone_page
        .items
        .iter()
        .filter_map(|i| i.update.as_deref())
        .map(|u| (u.subject_id.as_str(), u.state))
        .collect();
    assert_eq!(updates, [(id.as_str(), ItemState::Answered)]);
    // A device paired after the question was asked was not a recipient: it sees nothing of it.
    let laptop_page = laptop
        .conversation(None, Duration::ZERO)
        .await
        .expect("conversation");
    assert!(laptop_page.items.is_empty(), "{:?}", laptop_page.items);
}

#[tokio::test]
async fn cancelled_and_expired_questions_reach_a_parked_device() {
    let relay = TestRelay::start().await;
    let (agent, phone) = relay.agent_and_device().await;

    let asked = agent
        .ask_user(QuestionRequest::yes_no("Cancel me?"))
        .await
        .expect("ask");
    let cursor = head(&phone).await;
    let (page, cancelled) = parked_until(&phone, cursor, agent.cancel_question(&asked.question_id)).await;
    cancelled.expect("cancel");
    let (_, update) = the_update(&page);
    assert_eq!(
        (update.subject_id.as_str(), update.state),
        (asked.question_id.as_str(), ItemState::Cancelled)
    );
    assert_eq!(
        update.question.as_ref().map(|q| q.state),
        Some(QuestionState::Cancelled)
    );

    let asked = agent
        .ask_user(QuestionRequest::yes_no("Expire me?").expires_in(Duration::from_secs(2)))
        .await
        .expect("ask");
    let cursor = head(&phone).await;
    // Nobody acts: the relay's expirer closes it, and that wakes the conversation.
    let (page, ()) = parked_until(&phone, cursor, async {}).await;
    let (_, update) = the_update(&page);
    assert_eq!(
        (update.subject_id.as_str(), update.state),
        (asked.question_id.as_str(), ItemState::Expired)
    );
    assert_eq!(
        update.meta.as_ref().map(|m| m.state),
        Some(QuestionState::Expired)
    );
    let e = phone
        .answer(&asked.question_id, Answer::Yes)
        .await
        .expect_err("expired");
    assert_eq!(e.code(), Some(code::QUESTION_EXPIRED), "{e}");
}
