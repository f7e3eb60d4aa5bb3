//! The outboxes across two real `pacerelle serve --database URL` processes on one PostgreSQL database, both
//! running them:
//! - webhooks: A and then B are restarted in an orderly way (SIGTERM) while questions are answered through both,
//!   and a receiver in the test counts each event id exactly once. The docs promise "at least once", with a
//!   second delivery only after a crash between the receiver's 2xx and the relay's record of it; an orderly
//!   shutdown waits for an attempt in flight to be recorded (ADR 0002, decision 4), so no event may arrive twice
//!   here;
//! - Web Push: a device registered through A, questions asked through both and then through B alone once A is
//!   stopped; a push service in the test receives each question's push once, signed with the one VAPID key both
//!   instances share, and the device opens each body to its question.
//!
//! Skipped with `PACERELLE_TEST_POSTGRES=off`.

use crate::common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Homes, Proc, agent_and_device, agent_on, device_on, next_question, serve_with};
use pacerelle_client::{Answer, agent::QuestionRequest, core::wire::ItemKind, device::PushEvent};
use pacerelle_test_support::postgres::Cluster;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

/// Questions answered in each of the three phases (before A's restart, between, after B's).
const PER_PHASE: usize = 6;
/// How long the receiver takes before its 200.
const RECEIVER_TAKES: Duration = Duration::from_millis(300);
/// Time for every event to arrive once all are answered: generous, deliveries take milliseconds.
const ALL_WITHIN: Duration = Duration::from_secs(60);

/// One HTTP/1.1 request as read by the test's servers: its headers (names in lower case) and its body.
struct Request {
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Request {
    /// The value of header `name` (lower case), if sent.
    fn header(&self, name: &str) -> Option<String> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    }
}

/// Reads the next request on a connection (its `Content-Length` body); `None` once the connection ends.
async fn read_request<R: AsyncBufRead + Unpin>(reader: &mut R) -> Option<Request> {
    let mut headers = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).await.unwrap_or(0) == 0 {
            return None;
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((name, value)) = l.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
        }
    }
    let length = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).await.ok()?;
    Some(Request { headers, body })
}

/// A plain HTTP receiver on 127.0.0.1: counts every request by `pacerelle-event-id` as it arrives, and answers
/// 200 after [`RECEIVER_TAKES`].
async fn receiver() -> (String, Arc<Mutex<BTreeMap<String, usize>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
    let seen = Arc::new(Mutex::new(BTreeMap::new()));
    let counts = seen.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let counts = counts.clone();
            tokio::spawn(async move {
                let mut reader = BufReader::new(stream);
                let Some(request) = read_request(&mut reader).await else {
                    return;
                };
                let id = request.header("pacerelle-event-id");
                if let Some(id) = id {
                    *counts.lock().expect("the lock").entry(id).or_insert(0) += 1;
                }
                // A receiver that takes a moment: a restart then likely finds an attempt in flight.
                tokio::time::sleep(RECEIVER_TAKES).await;
                let _ = reader
                    .into_inner()
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                    .await;
            });
        }
    });
    (url, seen)
}

/// Stops a serve in an orderly way (SIGTERM) and waits for it to end.
fn terminate(mut p: Proc) {
    let status = std::process::Command::new("kill")
        .args(["-TERM", &p.0.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -TERM failed");
    let ended = p.0.wait().expect("the serve ends");
    assert!(ended.success(), "the serve ended with {ended}");
}

#[tokio::test(flavor = "multi_thread")]
async fn each_webhook_event_arrives_once_from_two_serves_each_restarted() {
    let Some(cluster) = Cluster::shared() else {
        eprintln!("skipped: PACERELLE_TEST_POSTGRES=off (two instances need PostgreSQL)");
        return;
    };
    let database = cluster.fresh_database().await;
    let data = tempfile::tempdir().expect("tempdir");
    let serve = || serve_with(data.path(), &["--database", &database]);
    let (mut a, mut b) = (Some(serve()), Some(serve()));
    let mut urls = [a.as_ref().expect("A").1.clone(), b.as_ref().expect("B").1.clone()];

    let Homes {
        agent_home,
        device_home,
    } = agent_and_device(&urls[0]);

    let (hook_url, seen) = receiver().await;
    agent_on(agent_home.path(), &urls[1])
        .set_webhook(&hook_url, "a secret of the test, long enough")
        .await
        .expect("webhook set through B");

    // Questions asked and answered alternately through A and B; A restarted after the first phase, B after the
    // second.
    let mut asked = Vec::new();
    for phase in 0..3 {
        if phase > 0 {
            let which = phase - 1;
            let slot = if which == 0 { &mut a } else { &mut b };
            let stopping = Instant::now();
            terminate(slot.take().expect("running").0);
            eprintln!(
                "{} stopped in {:?} with {} events received",
                ["A", "B"][which],
                stopping.elapsed(),
                seen.lock().expect("the lock").len()
            );
            let (proc, url) = serve();
            urls[which] = url;
            *slot = Some((proc, String::new()));
        }
        for i in 0..PER_PHASE {
            let n = phase * PER_PHASE + i;
            let agent = agent_on(agent_home.path(), &urls[n % 2]);
            let device = device_on(device_home.path(), &urls[(n + 1) % 2]);
            let q = agent
                .ask_user(QuestionRequest::yes_no(format!("Question {n}?")))
                .await
                .expect("asked");
            let opened = next_question(&device, &asked).await;
            assert_eq!(opened.question_id, q.question_id);
            let answer = if n.is_multiple_of(3) {
                Answer::No
            } else {
                Answer::Yes
            };
            device.answer(&q.question_id, answer).await.expect("answered");
            asked.push(q.question_id);
        }
    }

    let deadline = Instant::now() + ALL_WITHIN;
    while seen.lock().expect("the lock").len() < asked.len() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A moment more for a second delivery of any event, if there were one.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let counts = seen.lock().expect("the lock").clone();
    assert_eq!(counts.len(), asked.len(), "events received: {counts:?}");
    let twice: Vec<_> = counts.iter().filter(|(_, n)| **n != 1).collect();
    assert!(twice.is_empty(), "events delivered more than once: {twice:?}");

    // The events received are those of the shared outbox, each recorded delivered.
    let mut db = <sqlx::PgConnection as sqlx::Connection>::connect(&database)
        .await
        .expect("the database opens");
    let stored: BTreeMap<String, String> =
        sqlx::query_as::<_, (String, String)>("SELECT event_id, state FROM webhook_events")
            .fetch_all(&mut db)
            .await
            .expect("the outbox")
            .into_iter()
            .collect();
    assert_eq!(
        stored.keys().collect::<Vec<_>>(),
        counts.keys().collect::<Vec<_>>()
    );
    assert!(stored.values().all(|s| s == "delivered"), "{stored:?}");
    drop((a, b));
}

/// One request the push service received: its `Authorization` header and its body.
struct Pushed {
    authorization: String,
    body: Vec<u8>,
}

/// A push service on 127.0.0.1 (RFC 8030's push resource, `POST /push/1`): keeps every request and answers
/// 201 Created.
async fn push_service() -> (String, Arc<Mutex<Vec<Pushed>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/push/1", listener.local_addr().expect("addr"));
    let received = Arc::new(Mutex::new(Vec::new()));
    let kept = received.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let kept = kept.clone();
            tokio::spawn(async move {
                let mut reader = BufReader::new(stream);
                while let Some(request) = read_request(&mut reader).await {
                    let authorization = request.header("authorization").unwrap_or_default();
                    let body = request.body;
                    kept.lock()
                        .expect("the lock")
                        .push(Pushed { authorization, body });
                    if reader
                        .get_mut()
                        .write_all(b"HTTP/1.1 201 Created\r\ncontent-length: 0\r\n\r\n")
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    (url, received)
}

#[tokio::test(flavor = "multi_thread")]
async fn each_push_arrives_once_from_two_serves_and_opens_on_the_device() {
    let Some(cluster) = Cluster::shared() else {
        eprintln!("skipped: PACERELLE_TEST_POSTGRES=off (two instances need PostgreSQL)");
        return;
    };
    let database = cluster.fresh_database().await;
    let data = tempfile::tempdir().expect("tempdir");
    let serve = || {
        serve_with(
            data.path(),
            &["--database", &database, "--allow-private-push-endpoints"],
        )
    };
    let (a, url_a) = serve();
    let (b, url_b) = serve();
    let Homes {
        agent_home,
        device_home,
    } = agent_and_device(&url_a);

    // The device registers its subscription through A; both instances give the same VAPID key.
    let (endpoint, received) = push_service().await;
    let device = device_on(device_home.path(), &url_a);
    device
        .register_push(&endpoint)
        .await
        .expect("registered through A");
    let key = device.relay_push_key().await.expect("A's key");
    let key_b = device_on(device_home.path(), &url_b)
        .relay_push_key()
        .await
        .expect("B's key");
    assert_eq!(key, key_b, "one relay, one VAPID key across its instances");

    // Questions asked through A and B in turn, then through B alone once A is stopped.
    let mut asked = Vec::new();
    for n in 0..PER_PHASE {
        let url = if n % 2 == 0 { &url_a } else { &url_b };
        let q = agent_on(agent_home.path(), url)
            .ask_user(QuestionRequest::yes_no(format!("Pushed question {n}?")))
            .await
            .expect("asked");
        asked.push(q.question_id);
    }
    terminate(a);
    for n in PER_PHASE..PER_PHASE * 2 {
        let q = agent_on(agent_home.path(), &url_b)
            .ask_user(QuestionRequest::yes_no(format!("Pushed question {n}?")))
            .await
            .expect("asked through B");
        asked.push(q.question_id);
    }

    let deadline = Instant::now() + ALL_WITHIN;
    while received.lock().expect("the lock").len() < asked.len() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A moment more for a second push of any question, if there were one.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let pushes = std::mem::take(&mut *received.lock().expect("the lock"));
    let mut opened: BTreeMap<String, usize> = BTreeMap::new();
    for push in &pushes {
        assert!(
            push.authorization.starts_with("vapid ") && push.authorization.contains(&format!("k={key}")),
            "a push signed with the relay's key: {}",
            push.authorization
        );
        let id = match device.open_push(&push.body).expect("the device opens the push") {
            PushEvent::Item(item) => {
                assert_eq!(item.kind, ItemKind::Question, "{item:?}");
                let question = item.question.as_ref().expect("the question opened");
                assert_eq!(question.question_id, item.id);
                assert!(
                    question.question.starts_with("Pushed question "),
                    "{}",
                    question.question
                );
                item.id.clone()
            }
            PushEvent::Fetch { kind, id, .. } => {
                assert_eq!(kind, ItemKind::Question);
                id
            }
        };
        *opened.entry(id).or_insert(0) += 1;
    }
    let mut expected: Vec<&String> = asked.iter().collect();
    expected.sort();
    assert_eq!(
        opened.keys().collect::<Vec<_>>(),
        expected,
        "one push per question"
    );
    let twice: Vec<_> = opened.iter().filter(|(_, n)| **n != 1).collect();
    assert!(twice.is_empty(), "questions pushed more than once: {twice:?}");
    drop(b);
}
