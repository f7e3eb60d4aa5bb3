//! The supervised loop against a real relay: a relay restart in the middle of a task, a failing handler,
//! poison tasks (a handler that always fails, a reply too large to send), takeover, and shutdown.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use pacerelle_client::core::wire::OpenSession;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pacerelle_client::core::message::MAX_TEXT_BYTES;
use pacerelle_client::{
    AgentClient, DeviceClient, agent::Message, agent::PairingOptions, backoff::Backoff, core::wire::ItemKind,
    runner::Context, runner::Event, runner::Runner,
};
use pacerelle_test_support::TestRelay;
use tokio::sync::{Notify, oneshot};

/// An agent (its roster mark in memory only) with one paired device.
async fn agent_and_device(relay: &TestRelay) -> (AgentClient, DeviceClient) {
    let agent = AgentClient::register(&relay.url, "runner agent", None)
        .await
        .expect("register")
        .with_home(None);
    let link = agent
        .create_pairing(PairingOptions::default())
        .await
        .expect("pairing");
    let device = DeviceClient::join(&link.link, "test phone").await.expect("join");
    (agent, device)
}

/// Stops the relay, runs `while_down`, and starts it again on the same port with the same database.
async fn restart(relay: TestRelay, while_down: impl Future<Output = ()>) -> TestRelay {
    let port = relay.port;
    let dir = relay.stop().await;
    while_down.await;
    TestRelay::start_on(port, dir).await
}

/// Short pauses, so that the tests do not wait on the default backoff.
fn quick(agent: &AgentClient) -> Runner {
    Runner::new(agent.clone())
        .host("runner test")
        .wait(Duration::from_secs(5))
        .backoff(Backoff {
            first: Duration::from_millis(50),
            max: Duration::from_millis(300),
        })
}

/// The replies the device received so far, by the task they answer.
async fn replies(device: &DeviceClient) -> HashMap<String, String> {
    let page = device
        .conversation(None, Duration::ZERO)
        .await
        .expect("conversation");
    page.items
        .into_iter()
        .filter(|i| i.kind == ItemKind::Reply)
        .map(|i| (i.source_message_id.expect("source"), i.text))
        .collect()
}

/// Waits until the device has a reply to each of `ids`.
async fn wait_for_replies(device: &DeviceClient, ids: &[String]) -> HashMap<String, String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let got = replies(device).await;
        if ids.iter().all(|id| got.contains_key(id)) {
            return got;
        }
        assert!(Instant::now() < deadline, "missing replies: {got:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A shutdown signal the test triggers.
fn shutdown() -> (oneshot::Sender<()>, impl Future<Output = ()>) {
    let (tx, rx) = oneshot::channel::<()>();
    (tx, async move {
        let _ = rx.await;
    })
}

type Seen = Arc<Mutex<Vec<(String, bool)>>>;

#[tokio::test]
async fn every_task_is_handled_across_a_relay_restart_in_the_middle_of_one() {
    let mut relay = TestRelay::start().await;
    let (agent, device) = agent_and_device(&relay).await;
    let seen: Seen = Arc::default();
    let started = Arc::new(Notify::new());
    let release = Arc::new(Notify::new());

    let handler = {
        let (seen, started, release) = (seen.clone(), started.clone(), release.clone());
        move |task: Message, ctx: Context| {
            let (seen, started, release) = (seen.clone(), started.clone(), release.clone());
            async move {
                seen.lock()
                    .unwrap()
                    .push((task.message_id.clone(), task.redelivered));
                if task.text == "slow" && !task.redelivered {
                    started.notify_one();
                    release.notified().await;
                }
                ctx.save_checkpoint(&format!("answered {}", task.message_id), "wait")
                    .await
                    .ok();
                Ok::<_, String>(Some(format!("echo: {}", task.text)))
            }
        }
    };
    let events: Arc<Mutex<Vec<Event>>> = Arc::default();
    let log = events.clone();
    let (stop, signal) = shutdown();
    let running = tokio::spawn(
        quick(&agent)
            .on_event(move |e| log.lock().unwrap().push(e.clone()))
            .run(handler, signal),
    );

    let mut sent = Vec::new();
    sent.push(device.send("one", None).await.expect("send").id);
    wait_for_replies(&device, &sent).await;

    // The relay goes away while the handler works on a task, and comes back on the same port.
    sent.push(device.send("slow", None).await.expect("send").id);
    tokio::time::timeout(Duration::from_secs(20), started.notified())
        .await
        .expect("the slow task reached the handler");
    relay = restart(relay, async {
        release.notify_one();
        tokio::time::sleep(Duration::from_millis(500)).await;
    })
    .await;
    wait_for_replies(&device, &sent).await;

    // Down again while the runner waits, longer than the client's own retries: the runner backs off and
    // listens again once the relay is back.
    let _relay = restart(relay, tokio::time::sleep(Duration::from_secs(4))).await; // kept up to the end

    for text in ["two", "three"] {
        sent.push(device.send(text, None).await.expect("send").id);
    }
    let got = wait_for_replies(&device, &sent).await;
    for (id, text) in sent.iter().zip(["one", "slow", "two", "three"]) {
        assert_eq!(got[id], format!("echo: {text}"));
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while agent.status().await.expect("status").messages.processed < 4 {
        assert!(Instant::now() < deadline, "not all tasks were processed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Each task was handed over once per delivery: once, plus once for each redelivery.
    let seen = seen.lock().unwrap().clone();
    for id in &sent {
        let first = seen.iter().filter(|(s, again)| s == id && !again).count();
        assert_eq!(first, 1, "{id} in {seen:?}");
    }
    assert_eq!(
        agent.checkpoints(10).await.expect("checkpoints").len(),
        seen.len()
    );

    stop.send(()).expect("stop");
    running.await.expect("join").expect("run");
    assert!(agent.status().await.expect("status").session.is_none());
    let events = events.lock().unwrap().clone();
    assert!(
        events.iter().any(|e| matches!(e, Event::RelayUnavailable { .. })),
        "{events:?}"
    );
    assert_eq!(events.last(), Some(&Event::Stopped));
}

#[tokio::test]
async fn a_failing_handler_leaves_its_task_unprocessed_for_the_next_run() {
    let relay = TestRelay::start().await;
    let (agent, device) = agent_and_device(&relay).await;
    let sent = device.send("boom", None).await.expect("send").id;

    let failing = |_task: Message, ctx: Context| async move {
        ctx.stop();
        Err::<Option<String>, _>("the handler broke")
    };
    let events: Arc<Mutex<Vec<Event>>> = Arc::default();
    let log = events.clone();
    quick(&agent)
        .on_event(move |e| log.lock().unwrap().push(e.clone()))
        .run(failing, std::future::pending())
        .await
        .expect("run");
    let status = agent.status().await.expect("status");
    assert_eq!(status.messages.processed, 0);
    assert_eq!(status.messages.in_progress, 1);
    assert!(status.session.is_none());
    let events = events.lock().unwrap().clone();
    assert!(events.iter().any(|e| matches!(
        e,
        Event::TaskFailed { message_id, attempt: 1, error, .. } if *message_id == sent && error == "the handler broke"
    )));
    assert!(replies(&device).await.is_empty());

    let working = |task: Message, ctx: Context| async move {
        assert!(task.redelivered);
        ctx.stop();
        Ok::<_, String>(Some(format!("done: {}", task.text)))
    };
    quick(&agent)
        .run(working, std::future::pending())
        .await
        .expect("run");
    assert_eq!(
        wait_for_replies(&device, std::slice::from_ref(&sent)).await[&sent],
        "done: boom"
    );
    assert_eq!(agent.status().await.expect("status").messages.processed, 1);
}

#[tokio::test]
async fn poison_tasks_are_set_aside_with_an_error_reply_and_later_tasks_are_handled() {
    let relay = TestRelay::start().await;
    let (agent, device) = agent_and_device(&relay).await;
    let calls: Arc<Mutex<HashMap<String, u32>>> = Arc::default();

    let handler = {
        let calls = calls.clone();
        move |task: Message, _ctx: Context| {
            let calls = calls.clone();
            async move {
                *calls.lock().unwrap().entry(task.message_id.clone()).or_default() += 1;
                if task.text == "poison" {
                    return Err("this task always fails".to_string());
                }
                // A 64 KiB task makes a reply over the limit.
                Ok(Some(format!("echo: {}", task.text)))
            }
        }
    };
    let (stop, signal) = shutdown();
    let running = tokio::spawn(quick(&agent).max_attempts(3).run(handler, signal));

    let poison = device.send("poison", None).await.expect("send").id;
    let big = device
        .send(&"x".repeat(MAX_TEXT_BYTES), None)
        .await
        .expect("send")
        .id;
    let after = device.send("after", None).await.expect("send").id;
    let got = wait_for_replies(&device, &[poison.clone(), big.clone(), after.clone()]).await;

    assert!(got[&poison].contains("set aside"), "{}", got[&poison]);
    assert!(got[&poison].contains("failed 3 times"), "{}", got[&poison]);
    assert!(got[&big].contains("set aside"), "{}", got[&big]);
    assert!(got[&big].contains("64 KiB"), "{}", got[&big]);
    assert!(got[&big].len() < 200);
    assert_eq!(got[&after], "echo: after");
    let deadline = Instant::now() + Duration::from_secs(10);
    while agent.status().await.expect("status").messages.processed < 3 {
        assert!(Instant::now() < deadline, "not all tasks were processed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    {
        let calls = calls.lock().unwrap();
        assert_eq!(calls[&poison], 3);
        assert_eq!(calls[&big], 1, "a reply too large is not retried");
        assert_eq!(calls[&after], 1);
    }

    // A task sent later is handled as usual: the loop did not stop.
    let later = device.send("later", None).await.expect("send").id;
    assert_eq!(
        wait_for_replies(&device, std::slice::from_ref(&later)).await[&later],
        "echo: later"
    );
    stop.send(()).expect("stop");
    running.await.expect("join").expect("run");
}

#[tokio::test]
async fn shutdown_releases_the_lease_and_a_held_lease_needs_takeover() {
    let relay = TestRelay::start().await;
    let (agent, _device) = agent_and_device(&relay).await;
    let echo = |task: Message, _ctx: Context| async move { Ok::<_, String>(Some(task.text)) };

    let (stop, signal) = shutdown();
    let running = tokio::spawn(quick(&agent).run(echo, signal));
    let deadline = Instant::now() + Duration::from_secs(10);
    while agent.status().await.expect("status").session.is_none() {
        assert!(Instant::now() < deadline, "the runner never took the lease");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Another process of the same agent is refused without takeover, and the runner keeps the lease.
    let other = AgentClient::new(&relay.url, agent.agent_id(), agent.token().clone())
        .expect("client")
        .with_home(None);
    let refused = quick(&other)
        .run(echo, std::future::pending())
        .await
        .expect_err("the lease is held");
    assert_eq!(refused.code(), Some("agent_in_use"));

    stop.send(()).expect("stop");
    tokio::time::timeout(Duration::from_secs(10), running)
        .await
        .expect("stops at once")
        .expect("join")
        .expect("run");
    assert!(agent.status().await.expect("status").session.is_none());
    other
        .open_session(&OpenSession::new("second"))
        .await
        .expect("the lease was released: no takeover needed");
    other.close_session().await.expect("close");
}

/// Two supervised copies of one agent, both started with takeover (the echo agent's `--takeover` run twice):
/// the later one takes the lease, the displaced one does not take it back — its run ends with `agent_in_use`
/// instead of a tug of war — and the lease then stays with one session.
#[tokio::test]
async fn two_runners_with_takeover_settle_on_one_holder() {
    let relay = TestRelay::start().await;
    let (agent, _device) = agent_and_device(&relay).await;
    let echo = |task: Message, _ctx: Context| async move { Ok::<_, String>(Some(task.text)) };
    let copy = || {
        AgentClient::new(&relay.url, agent.agent_id(), agent.token().clone())
            .expect("client")
            .with_home(None)
    };
    let (first, second) = (copy(), copy());
    let (stop_first, signal_first) = shutdown();
    let (stop_second, signal_second) = shutdown();
    let one = tokio::spawn(quick(&first).host("first").takeover(true).run(echo, signal_first));
    let two = tokio::spawn(
        quick(&second)
            .host("second")
            .takeover(true)
            .run(echo, signal_second),
    );

    // Within 5 s one of them holds the lease…
    let deadline = Instant::now() + Duration::from_secs(5);
    let holder = loop {
        if let Some(h) = agent.status().await.expect("status").session {
            break h;
        }
        assert!(Instant::now() < deadline, "no copy took the lease within 5 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let holder = agent.status().await.expect("status").session.unwrap_or(holder);
    let same =
        |h: &pacerelle_client::core::wire::LeaseHolder| h.host == holder.host && h.since == holder.since;
    // …keeps it, and the other gives up (at the latest when its parked wait ends) instead of taking it back.
    let deadline = Instant::now() + Duration::from_secs(15);
    while !(one.is_finished() || two.is_finished()) {
        let now = agent.status().await.expect("status").session.expect("still held");
        assert!(same(&now), "the lease changed hands: {holder:?} then {now:?}");
        assert!(Instant::now() < deadline, "the displaced copy never gave up");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (ended, running, stop_running, _stop_ended) = if one.is_finished() {
        (one, two, stop_second, stop_first)
    } else {
        (two, one, stop_first, stop_second)
    };
    let ended = ended.await.expect("join").expect_err("the displaced copy ends");
    assert_eq!(ended.code(), Some("agent_in_use"), "{ended}");
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = agent.status().await.expect("status").session.expect("still held");
        assert!(same(&now), "the lease changed hands: {holder:?} then {now:?}");
    }
    assert!(!running.is_finished(), "the holder keeps running");
    stop_running.send(()).expect("stop");
    running.await.expect("join").expect("run");
}
