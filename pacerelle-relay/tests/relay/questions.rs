use std::time::{Duration, Instant};

use pacerelle_core::question::{
    Answer, AnswerPayload, Channel, Level, NotificationPayload, OwnQuestion, QuestionPayload, QuestionState,
    RelayReport, host_answer_aad, host_verdict, notification_aad, question_aad, verdict,
};
use pacerelle_core::wire::{
    AnswerLog, AnswerQuestion, Conversation, DeviceEnvelope, DeviceQuestion, DeviceQuestions, ItemKind,
    ItemState, QuestionView, SendNotification, Stored, code,
};
use pacerelle_core::{Timestamp, envelope};
use reqwest::{Method, StatusCode};

use crate::common::{
    Agent, Device, TestRelay, answer, answer_at_host, ask, eventually, pair, register, seal_answer_to,
    seal_host_answer, seal_host_answer_to, seal_question, start, yes_no,
};

async fn view(relay: &TestRelay, agent: &Agent, question_id: &str) -> QuestionView {
    relay
        .get(&format!("/v1/agent/questions/{question_id}"), &agent.bearer)
        .await
        .ok()
}

async fn cancel(relay: &TestRelay, agent: &Agent, question_id: &str) -> crate::common::Reply {
    relay
        .call(
            Method::POST,
            &format!("/v1/agent/questions/{question_id}/cancel"),
            Some(&agent.bearer),
            None,
        )
        .await
}

async fn device_list(relay: &TestRelay, device: &Device, state: &str) -> Vec<DeviceQuestion> {
    let list: DeviceQuestions = relay
        .get(&format!("/v1/device/questions?state={state}"), &device.bearer)
        .await
        .ok();
    list.questions
}

fn ids(list: &[DeviceQuestion]) -> Vec<&str> {
    list.iter().map(|q| q.question_id.as_str()).collect()
}

/// Waits until the relay's clock has passed the question's expiry, by asking the relay.
async fn until_expired(relay: &TestRelay, agent: &Agent, question_id: &str) -> QuestionView {
    eventually(30, "the expiry", || async {
        let v = view(relay, agent, question_id).await;
        (v.state == QuestionState::Expired).then_some(v)
    })
    .await
}

#[tokio::test]
async fn a_question_is_created_once_answered_once_and_the_answer_opens_as_sent() {
    let relay = start().await;
    let agent = register(&relay).await;
    let phone = pair(&relay, &agent).await;
    let tablet = pair(&relay, &agent).await;

    let (payload, created) = ask(&relay, &agent, "q1", &[&phone, &tablet], 600_000).await;
    assert_eq!(created.recipients.len(), 2);
    assert!(created.answered_by.is_none() && created.closed_at.is_none() && created.channel.is_none());
    // The same id again: the stored question, nothing new.
    let again = relay
        .post(
            "/v1/agent/questions",
            &agent.bearer,
            &seal_question(&agent, "q1", &payload, &[&phone, &tablet]),
        )
        .await;
    assert_eq!(again.status, StatusCode::OK);
    let again: QuestionView = again.ok();
    assert_eq!(again.cursor, created.cursor);
    assert_eq!(again.self_envelope, created.self_envelope);
    let log: AnswerLog = relay.get("/v1/agent/questions", &agent.bearer).await.ok();
    assert_eq!(log.questions.len(), 1);

    // Each device lists it and opens its own copy; the agent opens its self-sealed copy.
    for device in [&phone, &tablet] {
        let pending = device_list(&relay, device, "pending").await;
        assert_eq!(ids(&pending), ["q1"]);
        let opened: QuestionPayload = envelope::open_json(
            &device.key,
            &question_aad(&agent.id, &device.id, "q1"),
            &pending[0].envelope,
        )
        .expect("the device opens its copy");
        assert_eq!(opened, payload);
        assert_eq!(pending[0].meta.state, QuestionState::Pending);
        assert_eq!(pending[0].meta.expires_at, payload.expires_at);
    }
    let mine: QuestionPayload = envelope::open_json(
        &agent.token.self_key(&agent.id),
        &question_aad(&agent.id, "", "q1"),
        &created.self_envelope,
    )
    .expect("the agent opens its copy");
    assert_eq!(mine, payload);

    // The phone answers yes, naming the digest of the question it opened.
    let own = OwnQuestion::open(
        &agent.token.self_key(&agent.id),
        &agent.id,
        "q1",
        &created.self_envelope,
    )
    .expect("the agent opens its copy");
    let (sent, body) = seal_answer_to(&phone, "q1", Answer::Yes, Some(own.digest.clone()));
    let before = Timestamp::now();
    let answered: DeviceQuestion = relay
        .post("/v1/device/questions/q1/answer", &phone.bearer, &body)
        .await
        .ok();
    assert_eq!(answered.meta.state, QuestionState::Answered);
    assert_eq!(answered.meta.answered_by.as_deref(), Some(phone.id.as_str()));
    assert_eq!(answered.meta.channel, Some(Channel::Phone));

    let v = view(&relay, &agent, "q1").await;
    assert_eq!(v.state, QuestionState::Answered);
    assert_eq!(v.answered_by.as_deref(), Some(phone.id.as_str()));
    assert_eq!(v.answered_by_name.as_deref(), Some("Ana's phone"));
    assert_eq!(v.channel, Some(Channel::Phone));
    let at = v.answered_at.expect("answered at");
    assert!(at >= before && at <= Timestamp::now());
    assert_eq!(v.closed_at, Some(at));
    // The relay changed nothing: the answer opens, with the phone's key, to what the phone sealed.
    assert_eq!(v.answer_envelope.as_deref(), Some(body.envelope.as_str()));
    let opened: AnswerPayload = envelope::open_json(
        &agent.token.device_key(&agent.id, &phone.id),
        &pacerelle_core::question::answer_aad(&agent.id, &phone.id, "q1"),
        v.answer_envelope.as_deref().expect("sealed answer"),
    )
    .expect("opens");
    assert_eq!(opened, sent);
    // And the agent's verdict is an approval.
    let report = RelayReport {
        state: v.state,
        answered_by: v.answered_by.as_deref(),
        answered_at: v.answered_at,
        answer_envelope: v.answer_envelope.as_deref(),
        channel: None,
    };
    let decided = verdict(
        &agent.id,
        &own,
        &report,
        |d| agent.token.device_key(&agent.id, d),
        |_| true,
        Timestamp::now(),
    );
    assert!(decided.approved);

    // The tablet comes second: refused. The phone retries: its answer, unchanged.
    answer(&relay, &tablet, "q1", Answer::No)
        .await
        .error(StatusCode::CONFLICT, code::QUESTION_ANSWERED);
    let retry = answer(&relay, &phone, "q1", Answer::No).await;
    assert_eq!(retry.status, StatusCode::OK);
    let retry: DeviceQuestion = retry.ok();
    assert_eq!(retry.meta.answered_at, Some(at));
    let v = view(&relay, &agent, "q1").await;
    assert_eq!(v.answer_envelope.as_deref(), Some(body.envelope.as_str()));
    // Cancelling an answered question is refused; it stays answered.
    cancel(&relay, &agent, "q1")
        .await
        .error(StatusCode::CONFLICT, code::QUESTION_ANSWERED);

    assert!(device_list(&relay, &phone, "pending").await.is_empty());
    assert_eq!(ids(&device_list(&relay, &tablet, "answered").await), ["q1"]);
    assert_eq!(ids(&device_list(&relay, &tablet, "all").await), ["q1"]);
}

#[tokio::test]
async fn expired_and_cancelled_questions_refuse_answers_with_their_own_codes() {
    let relay = start().await;
    let agent = register(&relay).await;
    let phone = pair(&relay, &agent).await;

    // Expiry by the relay's clock.
    ask(&relay, &agent, "short", &[&phone], 1_000).await;
    let expired = until_expired(&relay, &agent, "short").await;
    assert_eq!(expired.closed_at, Some(expired.expires_at));
    assert!(expired.answered_by.is_none());
    answer(&relay, &phone, "short", Answer::Yes)
        .await
        .error(StatusCode::GONE, code::QUESTION_EXPIRED);
    cancel(&relay, &agent, "short")
        .await
        .error(StatusCode::GONE, code::QUESTION_EXPIRED);
    let still = view(&relay, &agent, "short").await;
    assert_eq!(still.state, QuestionState::Expired);
    assert!(still.answer_envelope.is_none());
    assert_eq!(ids(&device_list(&relay, &phone, "expired").await), ["short"]);
    // A retried create of an expired question returns it as it is.
    let payload = yes_no("retry", &[&phone], 600_000);
    let retried: QuestionView = relay
        .post(
            "/v1/agent/questions",
            &agent.bearer,
            &seal_question(&agent, "short", &payload, &[&phone]),
        )
        .await
        .ok();
    assert_eq!(retried.state, QuestionState::Expired);

    // Cancel, cancel again (the same), then an answer is refused.
    ask(&relay, &agent, "withdrawn", &[&phone], 600_000).await;
    let cancelled: QuestionView = cancel(&relay, &agent, "withdrawn").await.ok();
    assert_eq!(cancelled.state, QuestionState::Cancelled);
    let closed = cancelled.closed_at.expect("closed");
    let again: QuestionView = cancel(&relay, &agent, "withdrawn").await.ok();
    assert_eq!(again.closed_at, Some(closed));
    answer(&relay, &phone, "withdrawn", Answer::Yes)
        .await
        .error(StatusCode::CONFLICT, code::QUESTION_CANCELLED);
    assert_eq!(
        view(&relay, &agent, "withdrawn").await.state,
        QuestionState::Cancelled
    );
    assert_eq!(
        ids(&device_list(&relay, &phone, "cancelled").await),
        ["withdrawn"]
    );
    assert!(device_list(&relay, &phone, "pending").await.is_empty());
}

#[tokio::test]
async fn only_recipients_answer_and_agents_never_see_each_others_questions() {
    let relay = start().await;
    let alice = register(&relay).await;
    let phone = pair(&relay, &alice).await;
    let tablet = pair(&relay, &alice).await;
    let bob = register(&relay).await;
    let bobs_phone = pair(&relay, &bob).await;

    ask(&relay, &alice, "secret-q", &[&phone], 600_000).await;

    // A device of the same agent that the question was not sealed for.
    answer(&relay, &tablet, "secret-q", Answer::Yes)
        .await
        .error(StatusCode::NOT_FOUND, code::NOT_FOUND);
    assert!(device_list(&relay, &tablet, "all").await.is_empty());
    // Another agent and its device: exactly as if the question did not exist.
    let not_found = relay
        .get("/v1/agent/questions/secret-q", &bob.bearer)
        .await
        .error(StatusCode::NOT_FOUND, code::NOT_FOUND);
    let unknown = relay
        .get("/v1/agent/questions/never-asked", &bob.bearer)
        .await
        .error(StatusCode::NOT_FOUND, code::NOT_FOUND);
    assert_eq!(not_found.error, unknown.error);
    cancel(&relay, &bob, "secret-q")
        .await
        .error(StatusCode::NOT_FOUND, code::NOT_FOUND);
    answer(&relay, &bobs_phone, "secret-q", Answer::Yes)
        .await
        .error(StatusCode::NOT_FOUND, code::NOT_FOUND);
    assert!(device_list(&relay, &bobs_phone, "all").await.is_empty());
    let log: AnswerLog = relay.get("/v1/agent/questions", &bob.bearer).await.ok();
    assert!(log.questions.is_empty());
    // Bob can use the same question id for his own question.
    ask(&relay, &bob, "secret-q", &[&bobs_phone], 600_000).await;
    // Questions may only go to the agent's own active devices.
    let payload = yes_no("x", &[&bobs_phone], 600_000);
    relay
        .post(
            "/v1/agent/questions",
            &alice.bearer,
            &seal_question(&alice, "stray", &payload, &[&bobs_phone]),
        )
        .await
        .error(StatusCode::BAD_REQUEST, code::INVALID_INPUT);
    relay
        .delete(&format!("/v1/agent/devices/{}", tablet.id), &alice.bearer)
        .await
        .ok::<serde_json::Value>();
    let payload = yes_no("x", &[&tablet], 600_000);
    relay
        .post(
            "/v1/agent/questions",
            &alice.bearer,
            &seal_question(&alice, "to-revoked", &payload, &[&tablet]),
        )
        .await
        .error(StatusCode::BAD_REQUEST, code::INVALID_INPUT);

    // Everything of Alice's is intact.
    assert_eq!(
        view(&relay, &alice, "secret-q").await.state,
        QuestionState::Pending
    );
    answer(&relay, &phone, "secret-q", Answer::Yes)
        .await
        .ok::<DeviceQuestion>();
}

#[tokio::test]
async fn a_long_poll_returns_when_the_question_is_answered_or_expires() {
    let relay = start().await;
    let agent = register(&relay).await;
    let phone = pair(&relay, &agent).await;

    // Nothing happens: `wait=0` answers at once, pending.
    ask(&relay, &agent, "wq", &[&phone], 600_000).await;
    let now: QuestionView = relay
        .get("/v1/agent/questions/wq?wait=0", &agent.bearer)
        .await
        .ok();
    assert_eq!(now.state, QuestionState::Pending);

    // A parked wait is woken by the answer.
    let started = Instant::now();
    let waiting = {
        let base = relay.base.clone();
        let bearer = agent.bearer.clone();
        tokio::spawn(async move {
            reqwest::Client::new()
                .get(format!("{base}/v1/agent/questions/wq?wait=50"))
                .bearer_auth(bearer)
                .send()
                .await
                .expect("answers")
                .json::<QuestionView>()
                .await
                .expect("a question")
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    answer(&relay, &phone, "wq", Answer::No)
        .await
        .ok::<DeviceQuestion>();
    let woken = waiting.await.expect("the wait");
    assert_eq!(woken.state, QuestionState::Answered);
    assert!(
        started.elapsed() < Duration::from_secs(40),
        "woken, not timed out"
    );

    // A parked wait returns expired at the expiry, not at the end of its wait.
    let (_, asked) = ask(&relay, &agent, "wx", &[&phone], 1_500).await;
    let started = Instant::now();
    let expired: QuestionView = relay
        .get("/v1/agent/questions/wx?wait=50", &agent.bearer)
        .await
        .ok();
    assert_eq!(expired.state, QuestionState::Expired);
    assert_eq!(expired.closed_at, Some(asked.expires_at));
    assert!(Timestamp::now() >= asked.expires_at);
    assert!(
        started.elapsed() < Duration::from_secs(40),
        "returned at the expiry"
    );

    // A wait on a question already closed returns at once.
    let closed: QuestionView = relay
        .get("/v1/agent/questions/wq?wait=50", &agent.bearer)
        .await
        .ok();
    assert_eq!(closed.state, QuestionState::Answered);
}

#[tokio::test]
async fn the_answer_log_filters_by_state_and_time_and_pages_newest_first() {
    let relay = start().await;
    let agent = register(&relay).await;
    let phone = pair(&relay, &agent).await;

    let mut asked = Vec::new();
    for (id, ttl) in [
        ("l1", 600_000),
        ("l2", 600_000),
        ("l3", 1_000),
        ("l4", 600_000),
        ("l5", 600_000),
    ] {
        asked.push(ask(&relay, &agent, id, &[&phone], ttl).await.1);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    answer(&relay, &phone, "l1", Answer::No)
        .await
        .ok::<DeviceQuestion>();
    cancel(&relay, &agent, "l2").await.ok::<QuestionView>();
    until_expired(&relay, &agent, "l3").await;

    let page = |query: String| {
        let relay = &relay;
        let agent = &agent;
        async move {
            let log: AnswerLog = relay
                .get(&format!("/v1/agent/questions?{query}"), &agent.bearer)
                .await
                .ok();
            log
        }
    };
    let names =
        |log: &AnswerLog| -> Vec<String> { log.questions.iter().map(|q| q.question_id.clone()).collect() };

    let all = page(String::new()).await;
    assert_eq!(names(&all), ["l5", "l4", "l3", "l2", "l1"]);
    assert!(all.next.is_none());
    // Expired, cancelled and answered-with-no stay distinct.
    let states: Vec<QuestionState> = all.questions.iter().map(|q| q.state).collect();
    use QuestionState::*;
    assert_eq!(states, [Pending, Pending, Expired, Cancelled, Answered]);
    assert_eq!(names(&page("state=answered".into()).await), ["l1"]);
    assert_eq!(names(&page("state=cancelled".into()).await), ["l2"]);
    assert_eq!(names(&page("state=expired".into()).await), ["l3"]);
    assert_eq!(names(&page("state=pending".into()).await), ["l5", "l4"]);
    assert_eq!(names(&page("state=all".into()).await).len(), 5);
    let l1 = &all.questions[4];
    assert_eq!(l1.answered_by_name.as_deref(), Some("Ana's phone"));
    assert!(l1.answer_envelope.is_some());
    let l3 = &all.questions[2];
    assert!(l3.answered_by.is_none() && l3.answer_envelope.is_none());

    // Time: `since` is inclusive, `until` exclusive, on createdAt.
    let since = asked[2].created_at;
    let expected: Vec<String> = asked
        .iter()
        .rev()
        .filter(|q| q.created_at >= since)
        .map(|q| q.question_id.clone())
        .collect();
    assert_eq!(names(&page(format!("since={since}")).await), expected);
    let until = asked[2].created_at;
    let expected: Vec<String> = asked
        .iter()
        .rev()
        .filter(|q| q.created_at < until)
        .map(|q| q.question_id.clone())
        .collect();
    assert_eq!(names(&page(format!("until={until}")).await), expected);
    let future = Timestamp::now().plus_millis(3_600_000);
    assert!(page(format!("since={future}")).await.questions.is_empty());
    assert_eq!(
        names(&page(format!("state=pending&since={}", asked[0].created_at)).await),
        ["l5", "l4"]
    );

    // Pages of two, following `next`.
    let mut seen = Vec::new();
    let mut query = "limit=2".to_string();
    let mut pages = 0;
    loop {
        let p = page(query.clone()).await;
        assert!(p.questions.len() <= 2);
        seen.extend(names(&p));
        pages += 1;
        match p.next {
            Some(next) => query = format!("limit=2&cursor={next}"),
            None => break,
        }
    }
    assert_eq!(seen, ["l5", "l4", "l3", "l2", "l1"]);
    assert_eq!(pages, 3);
    // Filters and pages together.
    let first = page("limit=1&state=pending".into()).await;
    assert_eq!(names(&first), ["l5"]);
    let next = first.next.expect("more");
    let second = page(format!("limit=1&state=pending&cursor={next}")).await;
    assert_eq!(names(&second), ["l4"]);
}

#[tokio::test]
async fn questions_and_notifications_appear_in_each_recipients_conversation() {
    let relay = start().await;
    let agent = register(&relay).await;
    let phone = pair(&relay, &agent).await;
    let tablet = pair(&relay, &agent).await;

    let note = NotificationPayload {
        text: "build finished".into(),
        title: Some("CI".into()),
        level: Level::Success,
    };
    let body = SendNotification {
        notification_id: "n1".into(),
        envelopes: [&phone, &tablet]
            .iter()
            .map(|d| DeviceEnvelope {
                device_id: d.id.clone(),
                envelope: envelope::seal_json(&d.key, &notification_aad(&agent.id, &d.id, "n1"), &note),
            })
            .collect(),
    };
    let first = relay.post("/v1/agent/notifications", &agent.bearer, &body).await;
    assert_eq!(first.status, StatusCode::CREATED);
    let first: Stored = first.ok();
    let again = relay.post("/v1/agent/notifications", &agent.bearer, &body).await;
    assert_eq!(again.status, StatusCode::OK);
    let again: Stored = again.ok();
    assert!(!again.created);
    assert_eq!(again.cursor, first.cursor);

    let (_, asked) = ask(&relay, &agent, "cq", &[&phone], 600_000).await;

    for device in [&phone, &tablet] {
        let conv: Conversation = relay
            .get("/v1/device/conversation?wait=0", &device.bearer)
            .await
            .ok();
        let n = conv
            .items
            .iter()
            .find(|i| i.kind == ItemKind::Notification)
            .expect("the notification");
        assert_eq!(n.id, "n1");
        assert!(n.question.is_none() && n.state.is_none());
        let opened: NotificationPayload = envelope::open_json(
            &device.key,
            &notification_aad(&agent.id, &device.id, "n1"),
            &n.envelope,
        )
        .expect("each device opens its own copy");
        assert_eq!(opened, note);
    }
    // The question only in the phone's conversation, with its state as of the read.
    let conv: Conversation = relay
        .get("/v1/device/conversation?wait=0", &phone.bearer)
        .await
        .ok();
    let kinds: Vec<ItemKind> = conv.items.iter().map(|i| i.kind).collect();
    assert_eq!(kinds, [ItemKind::Notification, ItemKind::Question]);
    let q = &conv.items[1];
    assert_eq!(q.cursor, asked.cursor);
    let meta = q.question.as_ref().expect("question metadata");
    assert_eq!(meta.state, QuestionState::Pending);
    assert_eq!(meta.expires_at, asked.expires_at);
    envelope::open_json::<QuestionPayload>(
        &phone.key,
        &question_aad(&agent.id, &phone.id, "cq"),
        &q.envelope,
    )
    .expect("opens");
    let conv: Conversation = relay
        .get("/v1/device/conversation?wait=0", &tablet.bearer)
        .await
        .ok();
    assert!(conv.items.iter().all(|i| i.kind != ItemKind::Question));

    // After the answer, the conversation shows it answered.
    answer(&relay, &phone, "cq", Answer::Yes)
        .await
        .ok::<DeviceQuestion>();
    let conv: Conversation = relay
        .get("/v1/device/conversation?wait=0", &phone.bearer)
        .await
        .ok();
    let meta = conv.items[1].question.clone().expect("metadata");
    assert_eq!(meta.state, QuestionState::Answered);
    assert_eq!(meta.answered_by.as_deref(), Some(phone.id.as_str()));

    // A parked conversation wait is woken by a notification.
    let cursor = conv.cursor;
    let waiting = {
        let base = relay.base.clone();
        let bearer = tablet.bearer.clone();
        tokio::spawn(async move {
            reqwest::Client::new()
                .get(format!("{base}/v1/device/conversation?wait=50&cursor={cursor}"))
                .bearer_auth(bearer)
                .send()
                .await
                .expect("answers")
                .json::<Conversation>()
                .await
                .expect("a conversation")
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let body = SendNotification {
        notification_id: "n2".into(),
        envelopes: vec![DeviceEnvelope {
            device_id: tablet.id.clone(),
            envelope: envelope::seal_json(&tablet.key, &notification_aad(&agent.id, &tablet.id, "n2"), &note),
        }],
    };
    relay
        .post("/v1/agent/notifications", &agent.bearer, &body)
        .await
        .ok::<Stored>();
    let woken = waiting.await.expect("the wait");
    assert_eq!(woken.items.len(), 1);
    assert_eq!(woken.items[0].id, "n2");
}

#[tokio::test]
async fn an_answer_at_the_computer_is_recorded_once_with_channel_host_and_no_device() {
    let relay = start().await;
    let agent = register(&relay).await;
    let phone = pair(&relay, &agent).await;
    let tablet = pair(&relay, &agent).await;

    // A question that accepts an answer at the computer (the relay never sees that: it is sealed).
    let mut payload = yes_no("may I deploy?", &[&phone, &tablet], 600_000);
    payload.channels = vec![Channel::Host, Channel::Phone];
    let created: QuestionView = relay
        .post(
            "/v1/agent/questions",
            &agent.bearer,
            &seal_question(&agent, "h1", &payload, &[&phone, &tablet]),
        )
        .await
        .ok();
    assert_eq!(created.channel, None);
    let own = OwnQuestion::open(
        &agent.token.self_key(&agent.id),
        &agent.id,
        "h1",
        &created.self_envelope,
    )
    .expect("the agent opens its copy");

    // A long-poll on the question is woken by the answer.
    let waiting = {
        let (base, bearer) = (relay.base.clone(), agent.bearer.clone());
        tokio::spawn(async move {
            reqwest::Client::new()
                .get(format!("{base}/v1/agent/questions/h1?wait=30"))
                .bearer_auth(bearer)
                .send()
                .await
                .expect("answers")
                .json::<QuestionView>()
                .await
                .expect("a question")
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;

    let (sent, body) = seal_host_answer_to(&agent, "h1", Answer::Yes, Some(own.digest.clone()));
    let before = Timestamp::now();
    let reply = answer_at_host(&relay, &agent, "h1", &body).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(reply.body["channel"], "host");
    assert!(reply.body["answeredBy"].is_null(), "{}", reply.body);
    assert!(reply.body["answeredByName"].is_null(), "{}", reply.body);
    let answered: QuestionView = reply.ok();
    assert_eq!(answered.state, QuestionState::Answered);
    assert_eq!(answered.channel, Some(Channel::Host));
    assert_eq!(answered.answer_envelope.as_deref(), Some(body.envelope.as_str()));
    let at = answered.answered_at.expect("answered at");
    assert!(at >= before && at <= Timestamp::now());
    assert_eq!(answered.closed_at, Some(at));
    let woken = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the wait ends with the answer")
        .expect("joins");
    assert_eq!(woken.state, QuestionState::Answered);
    assert_eq!(woken.channel, Some(Channel::Host));

    // The agent's view and its answer log say the same; the answer opens with the agent's key and counts.
    let v = view(&relay, &agent, "h1").await;
    assert_eq!(v, answered);
    let log: AnswerLog = relay.get("/v1/agent/questions", &agent.bearer).await.ok();
    assert_eq!(log.questions, std::slice::from_ref(&answered));
    let opened: AnswerPayload = envelope::open_json(
        &agent.token.self_key(&agent.id),
        &host_answer_aad(&agent.id, "h1"),
        v.answer_envelope.as_deref().expect("sealed"),
    )
    .expect("opens");
    assert_eq!(opened, sent);
    let report = RelayReport {
        state: v.state,
        answered_by: v.answered_by.as_deref(),
        answered_at: v.answered_at,
        answer_envelope: v.answer_envelope.as_deref(),
        channel: v.channel,
    };
    let decided = host_verdict(
        &agent.id,
        &own,
        &report,
        &agent.token.self_key(&agent.id),
        Timestamp::now(),
    );
    assert!(decided.approved, "{decided:?}");
    assert_eq!(decided.channel, Some(Channel::Host));

    // Each recipient sees it answered at the host, with the copy, in its list and as an update item.
    for device in [&phone, &tablet] {
        let raw = relay
            .get("/v1/device/questions?state=answered", &device.bearer)
            .await;
        assert_eq!(raw.body["questions"][0]["channel"], "host", "{}", raw.body);
        let list: DeviceQuestions = raw.ok();
        assert_eq!(ids(&list.questions), ["h1"]);
        let meta = &list.questions[0].meta;
        assert_eq!(meta.channel, Some(Channel::Host));
        assert_eq!(meta.answered_by, None);
        assert_eq!(meta.answered_by_name, None);
        assert_eq!(meta.answer_copy, body.copy);
        let conv: Conversation = relay
            .get("/v1/device/conversation?updates=true&wait=0", &device.bearer)
            .await
            .ok();
        let update = conv
            .items
            .iter()
            .find(|i| i.kind == ItemKind::Update && i.subject_id.as_deref() == Some("h1"))
            .expect("the update item");
        assert_eq!(update.state, Some(ItemState::Answered));
        let meta = update.question.as_ref().expect("its question");
        assert_eq!(meta.channel, Some(Channel::Host));
        assert_eq!(meta.answer_copy, body.copy);
        let question = conv
            .items
            .iter()
            .find(|i| i.kind == ItemKind::Question)
            .expect("the question item");
        assert_eq!(
            question.question.as_ref().and_then(|m| m.channel),
            Some(Channel::Host)
        );
    }

    // A device after it is refused; the agent's retry gets the stored answer, unchanged.
    answer(&relay, &phone, "h1", Answer::No)
        .await
        .error(StatusCode::CONFLICT, code::QUESTION_ANSWERED);
    let (_, again) = seal_host_answer(&agent, "h1", Answer::No);
    let retry = answer_at_host(&relay, &agent, "h1", &again).await;
    assert_eq!(retry.status, StatusCode::OK);
    let retry: QuestionView = retry.ok();
    assert_eq!(retry, answered);
    cancel(&relay, &agent, "h1")
        .await
        .error(StatusCode::CONFLICT, code::QUESTION_ANSWERED);

    // A device answered first: the computer is refused, and the question stays the phone's.
    ask(&relay, &agent, "h2", &[&phone], 600_000).await;
    answer(&relay, &phone, "h2", Answer::Yes)
        .await
        .ok::<DeviceQuestion>();
    let (_, late) = seal_host_answer(&agent, "h2", Answer::No);
    answer_at_host(&relay, &agent, "h2", &late)
        .await
        .error(StatusCode::CONFLICT, code::QUESTION_ANSWERED);
    let v = view(&relay, &agent, "h2").await;
    assert_eq!(v.channel, Some(Channel::Phone));
    assert_eq!(v.answered_by.as_deref(), Some(phone.id.as_str()));
}

#[tokio::test]
async fn an_answer_at_the_computer_is_refused_as_a_devices_would_be() {
    let relay = start().await;
    let agent = register(&relay).await;
    let phone = pair(&relay, &agent).await;
    let other = register(&relay).await;

    // Expired, cancelled: the device route's codes.
    ask(&relay, &agent, "short", &[&phone], 1_000).await;
    until_expired(&relay, &agent, "short").await;
    let (_, body) = seal_host_answer(&agent, "short", Answer::Yes);
    answer_at_host(&relay, &agent, "short", &body)
        .await
        .error(StatusCode::GONE, code::QUESTION_EXPIRED);
    let v = view(&relay, &agent, "short").await;
    assert_eq!((v.state, v.channel), (QuestionState::Expired, None));
    assert!(v.answer_envelope.is_none());

    ask(&relay, &agent, "withdrawn", &[&phone], 600_000).await;
    cancel(&relay, &agent, "withdrawn").await.ok::<QuestionView>();
    let (_, body) = seal_host_answer(&agent, "withdrawn", Answer::Yes);
    answer_at_host(&relay, &agent, "withdrawn", &body)
        .await
        .error(StatusCode::CONFLICT, code::QUESTION_CANCELLED);

    // Unknown, or another agent's: not found. A device's credential on the agent's route: forbidden.
    ask(&relay, &agent, "mine", &[&phone], 600_000).await;
    let (_, body) = seal_host_answer(&agent, "nope", Answer::Yes);
    answer_at_host(&relay, &agent, "nope", &body)
        .await
        .error(StatusCode::NOT_FOUND, code::NOT_FOUND);
    let (_, body) = seal_host_answer(&other, "mine", Answer::Yes);
    answer_at_host(&relay, &other, "mine", &body)
        .await
        .error(StatusCode::NOT_FOUND, code::NOT_FOUND);
    let (_, body) = seal_host_answer(&agent, "mine", Answer::Yes);
    relay
        .post("/v1/agent/questions/mine/answer", &phone.bearer, &body)
        .await
        .error(StatusCode::FORBIDDEN, code::FORBIDDEN);
    relay
        .call(
            Method::POST,
            "/v1/agent/questions/mine/answer",
            None,
            Some(serde_json::to_value(&body).expect("json")),
        )
        .await
        .error(StatusCode::UNAUTHORIZED, code::UNAUTHORIZED);

    // Envelopes are checked as on the device's route.
    for bad in [
        AnswerQuestion {
            envelope: String::new(),
            copy: None,
            closes: false,
        },
        AnswerQuestion {
            envelope: body.envelope.clone(),
            copy: Some("not base64url!".into()),
            closes: false,
        },
    ] {
        answer_at_host(&relay, &agent, "mine", &bad)
            .await
            .error(StatusCode::BAD_REQUEST, code::INVALID_INPUT);
    }
    // Nothing of that was stored: the question is still open, and a copy is optional.
    assert_eq!(view(&relay, &agent, "mine").await.state, QuestionState::Pending);
    let body = AnswerQuestion {
        envelope: body.envelope,
        copy: None,
        closes: false,
    };
    let done: QuestionView = answer_at_host(&relay, &agent, "mine", &body).await.ok();
    assert_eq!(done.channel, Some(Channel::Host));
    let meta = &device_list(&relay, &phone, "answered").await[0].meta;
    assert_eq!(
        (meta.channel, meta.answer_copy.as_deref()),
        (Some(Channel::Host), None)
    );
}
