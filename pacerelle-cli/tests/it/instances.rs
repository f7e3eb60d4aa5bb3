//! Two real `pacerelle serve --database URL` processes on one PostgreSQL database: a wait parked on one is woken
//! by what is stored through the other (a task, an agent's reply, a device's answer), and an agent whose relay
//! is killed (SIGKILL) while its wait is parked goes on through the other with no task lost or delivered twice,
//! in the order they are stored, even when it is killed and restarted again and again under concurrent sends
//! through both (a crash loop). Skipped with `PACERELLE_TEST_POSTGRES=off`.

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{Homes, Proc, agent_and_device, agent_on, device_on, next_question, serve_with};
use pacerelle_client::{AgentClient, Answer, agent::QuestionRequest, core::wire::ItemKind};
use pacerelle_test_support::postgres::Cluster;

/// A wait parked on one instance ends well before its own end (20 s) when the other stores a task: a generous
/// bound, not a latency figure.
const WOKEN_WITHIN: Duration = Duration::from_secs(10);
/// Tasks the cursor checker sends.
const TASKS: usize = 200;

/// Two instances (A, B) on a fresh database with one data folder (the keys they share), and an agent and a
/// device made through A.
struct Pair {
    data: tempfile::TempDir,
    database: String,
    setup: Homes,
    a: (Proc, String),
    b: (Proc, String),
}

async fn two_instances(cluster: &Cluster) -> Pair {
    let database = cluster.fresh_database().await;
    let data = tempfile::tempdir().expect("tempdir");
    let a = serve_with(data.path(), &["--database", &database]);
    let b = serve_with(data.path(), &["--database", &database]);
    // The agent is created and the device paired through A.
    let setup = agent_and_device(&a.1);
    Pair {
        data,
        database,
        setup,
        a,
        b,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wait_parked_on_one_serve_is_woken_by_a_task_sent_through_the_other() {
    let Some(cluster) = Cluster::shared() else {
        eprintln!("skipped: PACERELLE_TEST_POSTGRES=off (two instances need PostgreSQL)");
        return;
    };
    let p = two_instances(cluster).await;
    let agent = agent_on(p.setup.agent_home.path(), &p.a.1);
    let device_b = device_on(p.setup.device_home.path(), &p.b.1);
    let head = agent
        .wait_for_messages(None, Duration::ZERO)
        .await
        .expect("inbox")
        .cursor;

    let parked = tokio::spawn(async move {
        let started = Instant::now();
        let inbox = agent
            .wait_for_messages(Some(head), Duration::from_secs(20))
            .await
            .expect("the wait ends");
        (started.elapsed(), inbox)
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let sent = device_b.send("through B", None).await.expect("sent");
    let (took, inbox) = parked.await.expect("the wait");
    assert!(took < WOKEN_WITHIN, "woken after {took:?}");
    let ids: Vec<&str> = inbox.messages.iter().map(|m| m.message_id.as_str()).collect();
    assert_eq!(ids, vec![sent.id.as_str()]);
    drop(p.data);
    drop(p.database);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reply_stored_through_one_serve_wakes_a_conversation_parked_on_the_other() {
    let Some(cluster) = Cluster::shared() else {
        eprintln!("skipped: PACERELLE_TEST_POSTGRES=off (two instances need PostgreSQL)");
        return;
    };
    let p = two_instances(cluster).await;
    let agent_a = agent_on(p.setup.agent_home.path(), &p.a.1);
    let device_b = device_on(p.setup.device_home.path(), &p.b.1);
    let task = device_b.send("a task to answer", None).await.expect("sent");
    let head = device_b
        .conversation(None, Duration::ZERO)
        .await
        .expect("the conversation")
        .cursor;

    // The device parks on B (its wait would end after 20 s); the agent replies through A.
    let parked = tokio::spawn(async move {
        let started = Instant::now();
        let (mut cursor, mut replies) = (head, Vec::new());
        // A state change of the task may come first: the reply must follow within the bound.
        while replies.is_empty() && started.elapsed() < WOKEN_WITHIN {
            let page = device_b
                .conversation(Some(cursor), Duration::from_secs(20))
                .await
                .expect("the wait ends");
            replies.extend(
                page.items
                    .into_iter()
                    .filter(|i| i.kind == ItemKind::Reply)
                    .map(|i| (i.id, i.text, i.source_message_id)),
            );
            cursor = page.cursor;
        }
        (started.elapsed(), replies)
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let reply = agent_a
        .reply(&task.id, "done, through A", None)
        .await
        .expect("the reply is stored");
    let (took, replies) = parked.await.expect("the wait");
    assert!(took < WOKEN_WITHIN, "woken after {took:?}");
    assert_eq!(
        replies,
        vec![(reply.id, "done, through A".to_string(), Some(task.id))]
    );
    drop(p.data);
    drop(p.database);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_question_asked_through_one_serve_and_answered_through_the_other_is_approved() {
    let Some(cluster) = Cluster::shared() else {
        eprintln!("skipped: PACERELLE_TEST_POSTGRES=off (two instances need PostgreSQL)");
        return;
    };
    let p = two_instances(cluster).await;
    let agent_a = agent_on(p.setup.agent_home.path(), &p.a.1);
    let device_b = device_on(p.setup.device_home.path(), &p.b.1);
    let asked = agent_a
        .ask_user(QuestionRequest::yes_no("Deploy through A?"))
        .await
        .expect("asked through A");

    // The agent parks on A (its wait would end after 20 s); the device answers through B.
    let question_id = asked.question_id.clone();
    let parked = tokio::spawn(async move {
        let outcome = agent_a
            .wait_for_answer(&question_id, Duration::from_secs(20))
            .await
            .expect("the wait ends");
        (Instant::now(), outcome)
    });
    let q = next_question(&device_b, &[]).await;
    assert_eq!(q.question_id, asked.question_id);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let answered = Instant::now();
    device_b
        .answer(&q.question_id, Answer::Yes)
        .await
        .expect("answered through B");
    let (ended, outcome) = parked.await.expect("the wait");
    let took = ended.saturating_duration_since(answered);
    assert!(took < WOKEN_WITHIN, "woken after {took:?}");
    assert!(outcome.approved, "not approved: {outcome:?}");
    assert_eq!(outcome.answer, Some(Answer::Yes));
    assert_eq!(outcome.rejected, None);
    drop(p.data);
    drop(p.database);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_goes_on_through_the_other_serve_when_its_own_is_killed_with_no_loss_or_duplicate() {
    let Some(cluster) = Cluster::shared() else {
        eprintln!("skipped: PACERELLE_TEST_POSTGRES=off (two instances need PostgreSQL)");
        return;
    };
    let Pair {
        data,
        database,
        setup,
        a,
        b,
    } = two_instances(cluster).await;
    let (mut a_proc, a_url) = a;
    let (_b_proc, b_url) = b;

    // The agent: long-polls on A; on a network error, retries from the same cursor on the other instance.
    let agent_home = setup.agent_home.path().to_path_buf();
    let urls = [a_url.clone(), b_url.clone()];
    let agent = tokio::spawn(async move {
        let clients: Vec<AgentClient> = urls.iter().map(|u| agent_on(&agent_home, u)).collect();
        let (mut on, mut cursor, mut delivered, mut switches) = (0usize, None, Vec::new(), 0u32);
        let deadline = Instant::now() + Duration::from_secs(120);
        while delivered.len() < TASKS && Instant::now() < deadline {
            match clients[on]
                .wait_for_messages(cursor, Duration::from_secs(5))
                .await
            {
                Ok(inbox) => {
                    for m in &inbox.messages {
                        delivered.push(m.message_id.clone());
                        // Through the other instance if this one is gone meanwhile.
                        if clients[on].mark_processed(&m.message_id).await.is_err() {
                            on = 1 - on;
                            switches += 1;
                            clients[on]
                                .mark_processed(&m.message_id)
                                .await
                                .expect("marked processed");
                        }
                    }
                    if let Some(before) = cursor {
                        assert!(inbox.cursor >= before, "the cursor went back");
                    }
                    cursor = Some(inbox.cursor);
                }
                Err(_) => {
                    on = 1 - on;
                    switches += 1;
                    // A is down for a moment: B is there.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
        (delivered, switches)
    });

    // The device: tasks alternately through A and B (and A' once A is restarted); a send that fails goes
    // again, with the same id, through the other instance.
    let mut urls = [a_url.clone(), b_url.clone()];
    let mut restarted = None;
    let mut a_down = false;
    for i in 0..TASKS {
        if i == TASKS / 2 {
            // Let the agent park on A, then kill A.
            tokio::time::sleep(Duration::from_millis(300)).await;
            a_proc.0.kill().expect("SIGKILL");
            a_proc.0.wait().expect("A ends");
            // The first send through A finds it gone; the next ones go through B, as behind a load balancer
            // whose health check took A out (the client retries a refused connection for seconds).
        }
        if i == TASKS / 2 + 20 {
            let (proc, url) = serve_with(data.path(), &["--database", &database]);
            urls[0] = url;
            restarted = Some(proc);
            a_down = false;
        }
        let id = format!("task-{i:03}");
        let mut via = if a_down { 1 } else { i % 2 };
        let mut tries = 0;
        loop {
            let device = device_on(setup.device_home.path(), &urls[via]);
            match device.send(&format!("task {i}"), Some(&id)).await {
                Ok(_) => break,
                Err(e) => {
                    tries += 1;
                    assert!(tries < 10, "task {i} could not be sent: {e}");
                    if via == 0 {
                        a_down = true;
                    }
                    via = 1 - via;
                }
            }
        }
    }

    let (delivered, switches) = agent.await.expect("the agent");
    assert!(switches >= 1, "the agent never had to leave A");
    let mut unique = delivered.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), delivered.len(), "a task was delivered twice");
    assert_eq!(delivered.len(), TASKS, "tasks lost");

    // The delivered order is the stored order.
    let mut db = <sqlx::PgConnection as sqlx::Connection>::connect(&database)
        .await
        .expect("the database opens");
    let stored: Vec<String> =
        sqlx::query_scalar("SELECT item_id FROM items WHERE kind = 'message' ORDER BY seq")
            .fetch_all(&mut db)
            .await
            .expect("the stored tasks");
    assert_eq!(delivered, stored);
    drop(restarted);
}

/// Times A is killed (SIGKILL) and restarted in the crash loop.
const KILLS: usize = 3;
/// Tasks each of the crash loop's two senders sends at least (both go on until the last restart).
const TASKS_PER_SENDER: usize = 60;

/// Sends `text` as task `id` through A (when `prefer_a` and A is up) or B; a send that fails goes again, with the
/// same id, through the other instance, as behind a load balancer. Returns how many tries failed; panics when
/// it is never acknowledged.
async fn send_somewhere(
    home: &Path,
    a_url: &std::sync::Mutex<Option<String>>,
    b_url: &str,
    prefer_a: bool,
    id: &str,
) -> usize {
    let mut via_a = prefer_a;
    for failed in 0..10 {
        let url = if via_a {
            a_url.lock().expect("the lock").clone()
        } else {
            Some(b_url.to_string())
        };
        if let Some(url) = url
            && device_on(home, &url).send(id, Some(id)).await.is_ok()
        {
            return failed;
        }
        via_a = !via_a;
    }
    panic!("task {id} was never acknowledged");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crash_loop_of_one_serve_under_concurrent_sends_loses_and_repeats_nothing() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};

    let Some(cluster) = Cluster::shared() else {
        eprintln!("skipped: PACERELLE_TEST_POSTGRES=off (two instances need PostgreSQL)");
        return;
    };
    let Pair {
        data,
        database,
        setup,
        a,
        b,
    } = two_instances(cluster).await;
    let (a_proc, a_url) = a;
    let (_b_proc, b_url) = b;
    // A's address while it is up (a load balancer's health check), None while it is down.
    let a_now = Arc::new(Mutex::new(Some(a_url)));
    let killed_enough = Arc::new(AtomicBool::new(false));
    let all_sent = Arc::new(AtomicBool::new(false));

    // The agent: long-polls on A while it is up, else on B; on an error, retries from the same cursor on B.
    let agent = {
        let (home, a_now, b_url) = (
            setup.agent_home.path().to_path_buf(),
            a_now.clone(),
            b_url.clone(),
        );
        let all_sent = all_sent.clone();
        tokio::spawn(async move {
            let b = agent_on(&home, &b_url);
            let (mut cursor, mut delivered, mut failures) = (None, Vec::<String>::new(), 0u32);
            let mut rejected = Vec::<String>::new();
            let mut ended = "the deadline passed";
            // Until every send is acknowledged the agent keeps up with the senders, however slow the machine;
            // from then on a minute is more than enough to read what is left (and a hang is reported, not waited).
            let started = Instant::now();
            let mut deadline = started + Duration::from_secs(900);
            let mut after_all_sent = false;
            while Instant::now() < deadline {
                if !after_all_sent && all_sent.load(Ordering::SeqCst) {
                    after_all_sent = true;
                    deadline = deadline.min(Instant::now() + Duration::from_secs(60));
                }
                let on_a = a_now.lock().expect("the lock").clone();
                let client = on_a.map_or_else(|| b.clone(), |u| agent_on(&home, &u));
                let sent_before = all_sent.load(Ordering::SeqCst);
                match client.wait_for_messages(cursor, Duration::from_secs(2)).await {
                    Ok(inbox) => {
                        rejected.extend(inbox.rejected.iter().map(|r| r.message_id.clone()));
                        // Every send was acknowledged before this wait began, and it found nothing more.
                        if inbox.messages.is_empty() && inbox.rejected.is_empty() && sent_before {
                            ended = "a wait found nothing more";
                            break;
                        }
                        for m in &inbox.messages {
                            delivered.push(m.message_id.clone());
                            if client.mark_processed(&m.message_id).await.is_err() {
                                b.mark_processed(&m.message_id).await.expect("marked processed");
                            }
                        }
                        if let Some(before) = cursor {
                            assert!(inbox.cursor >= before, "the cursor went back");
                        }
                        cursor = Some(inbox.cursor);
                    }
                    Err(_) => {
                        failures += 1;
                        let again = b
                            .wait_for_messages(cursor, Duration::ZERO)
                            .await
                            .expect("B answers");
                        rejected.extend(again.rejected.iter().map(|r| r.message_id.clone()));
                        for m in &inbox_ids(&again) {
                            delivered.push(m.clone());
                            b.mark_processed(m).await.expect("marked processed");
                        }
                        cursor = Some(again.cursor);
                    }
                }
            }
            let elapsed = started.elapsed();
            (
                delivered,
                failures,
                rejected,
                format!("{ended} after {elapsed:?}"),
                cursor,
            )
        })
    };

    // Two senders, one preferring A and one B, until A has been killed and restarted KILLS times.
    let senders: Vec<_> = [true, false]
        .into_iter()
        .map(|prefer_a| {
            let (home, a_now, b_url) = (
                setup.device_home.path().to_path_buf(),
                a_now.clone(),
                b_url.clone(),
            );
            let killed_enough = killed_enough.clone();
            tokio::spawn(async move {
                let (mut acked, mut failed) = (Vec::new(), 0);
                let mut i = 0;
                while i < TASKS_PER_SENDER || !killed_enough.load(Ordering::SeqCst) {
                    let id = format!("task-{}-{i:04}", if prefer_a { "a" } else { "b" });
                    failed += send_somewhere(&home, &a_now, &b_url, prefer_a, &id).await;
                    acked.push(id);
                    i += 1;
                }
                (acked, failed)
            })
        })
        .collect();

    // The crash loop: A is killed while sends and the agent's wait go on, then started again on a new port.
    let mut a_proc = Some(a_proc);
    for _ in 0..KILLS {
        // Longer than a client's retries of one request (5 attempts, 3 s of pauses): each kill finds the sender
        // that prefers A sending to it, not still retrying the last kill's send.
        tokio::time::sleep(Duration::from_millis(4000)).await;
        let mut gone = a_proc.take().expect("A runs");
        gone.0.kill().expect("SIGKILL");
        gone.0.wait().expect("A ends");
        // The load balancer's health check takes a moment to take A out: sends and waits meanwhile find it gone.
        tokio::time::sleep(Duration::from_millis(300)).await;
        *a_now.lock().expect("the lock") = None;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (dir, db) = (data.path().to_path_buf(), database.clone());
        let (proc, url) = tokio::task::spawn_blocking(move || serve_with(&dir, &["--database", &db]))
            .await
            .expect("A starts again");
        a_proc = Some(proc);
        *a_now.lock().expect("the lock") = Some(url);
    }
    killed_enough.store(true, Ordering::SeqCst);

    let (mut acked, mut sends_failed) = (Vec::new(), 0);
    for s in senders {
        let (ids, failed) = s.await.expect("a sender");
        acked.extend(ids);
        sends_failed += failed;
    }
    all_sent.store(true, Ordering::SeqCst);
    let (delivered, failures, rejected, ended, last_cursor) = agent.await.expect("the agent");
    eprintln!(
        "crash loop: {} tasks acknowledged, {} delivered, {} rejected, {sends_failed} sends and {failures} waits \
         failed over; the agent stopped because {ended}, at cursor {last_cursor:?}",
        acked.len(),
        delivered.len(),
        rejected.len(),
    );
    assert!(rejected.is_empty(), "tasks rejected: {rejected:?}");
    // Each kill found the sender that prefers A sending to it.
    assert!(sends_failed >= KILLS, "{sends_failed} sends failed over");
    let mut unique = delivered.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), delivered.len(), "a task was delivered twice");
    acked.sort();
    let mut db = <sqlx::PgConnection as sqlx::Connection>::connect(&database)
        .await
        .expect("the database opens");
    if unique != acked {
        // Name the difference, and what the database holds of the tasks never delivered.
        let missing: Vec<&String> = acked
            .iter()
            .filter(|id| unique.binary_search(id).is_err())
            .collect();
        let extra: Vec<&String> = unique
            .iter()
            .filter(|id| acked.binary_search(id).is_err())
            .collect();
        let rows: Vec<(String, i64, Option<i64>, Option<i64>)> = sqlx::query_as(
            "SELECT item_id, seq, delivered_at, processed_at FROM items
             WHERE kind = 'message' AND item_id = ANY($1) ORDER BY seq",
        )
        .bind(missing.iter().map(|s| s.as_str()).collect::<Vec<_>>())
        .fetch_all(&mut db)
        .await
        .expect("the missing tasks' rows");
        let last_delivered = delivered.last();
        panic!(
            "acknowledged and delivered tasks differ: {} missing, {} never acknowledged ({extra:?}); the last \
             delivered is {last_delivered:?}; the database holds of the missing ones (id, seq, delivered_at, \
             processed_at): {rows:?}",
            missing.len(),
            extra.len()
        );
    }

    // The delivered order is the stored order.
    let stored: Vec<String> =
        sqlx::query_scalar("SELECT item_id FROM items WHERE kind = 'message' ORDER BY seq")
            .fetch_all(&mut db)
            .await
            .expect("the stored tasks");
    assert_eq!(delivered, stored);
    drop(a_proc);
}

fn inbox_ids(inbox: &pacerelle_client::agent::Inbox) -> Vec<String> {
    inbox.messages.iter().map(|m| m.message_id.clone()).collect()
}
