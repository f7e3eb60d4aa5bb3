//! A relay on PostgreSQL while its database is down: alive (`/healthz`), not ready (`/readyz` 503 `unavailable`),
//! reads and writes refused with 503 `unavailable` — never 500, never a hang — and everything back once the
//! database is, without restarting the relay. PostgreSQL only, on a cluster of the test's own (it is stopped).

use std::time::{Duration, Instant};

use pacerelle_core::wire::{MessageBatch, code};
use pacerelle_relay::Config;
use pacerelle_test_support::postgres::Cluster;
use reqwest::StatusCode;

use crate::common::{
    TestRelay, db_path, eventually, ids_of, on_postgres, pair, register, send_task, send_task_reply,
    start_with, wait_messages,
};

/// The longest a request may take while the database is down: a generous bound well under the body timeout
/// (30 s) and any client's patience, not a latency figure.
const ANSWERED_WITHIN: Duration = Duration::from_secs(15);

async fn status_of(relay: &TestRelay, path: &str) -> (StatusCode, String) {
    let resp = reqwest::get(format!("{}{path}", relay.base))
        .await
        .expect("the relay answers");
    let status = resp.status();
    (status, resp.text().await.expect("a body"))
}

#[tokio::test(flavor = "multi_thread")]
async fn readyz_fails_while_postgresql_is_down_and_the_relay_recovers_without_a_restart() {
    if !on_postgres() {
        eprintln!("skipped: the database going down is a PostgreSQL test (PACERELLE_TEST_POSTGRES)");
        return;
    }
    // A cluster of this test's own: the shared one must stay up for the others.
    let cluster = tokio::task::spawn_blocking(Cluster::start)
        .await
        .expect("a cluster");
    let url = cluster.fresh_database().await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let config = Config {
        open_registration: true,
        database_url: Some(url),
        ..Config::new(db_path(&dir))
    };
    let relay = start_with(config, dir).await;
    let agent = register(&relay).await;
    let device = pair(&relay, &agent).await;
    send_task(&relay, &device, "before", "before the outage").await;
    assert_eq!(status_of(&relay, "/readyz").await.0, StatusCode::OK);

    let cluster = tokio::task::spawn_blocking(move || {
        cluster.stop();
        cluster
    })
    .await
    .expect("stopped");

    assert_eq!(
        status_of(&relay, "/healthz").await,
        (StatusCode::OK, "ok\n".to_string()),
        "alive while the database is down"
    );
    let started = Instant::now();
    let not_ready = relay.get("/readyz", "").await;
    assert!(started.elapsed() < ANSWERED_WITHIN, "{:?}", started.elapsed());
    not_ready.error(StatusCode::SERVICE_UNAVAILABLE, code::UNAVAILABLE);

    // A write and a read: 503 unavailable, in bounded time, several times over (no connection left stuck).
    for i in 0..2 {
        let started = Instant::now();
        let refused = send_task_reply(&relay, &device, &format!("during-{i}"), "during").await;
        assert!(
            started.elapsed() < ANSWERED_WITHIN,
            "a write took {:?}",
            started.elapsed()
        );
        refused.error(StatusCode::SERVICE_UNAVAILABLE, code::UNAVAILABLE);
        let started = Instant::now();
        let refused = wait_messages(&relay, &agent, None, 0, None).await;
        assert!(
            started.elapsed() < ANSWERED_WITHIN,
            "a read took {:?}",
            started.elapsed()
        );
        refused.error(StatusCode::SERVICE_UNAVAILABLE, code::UNAVAILABLE);
    }

    let cluster = tokio::task::spawn_blocking(move || {
        cluster.restart();
        cluster
    })
    .await
    .expect("restarted");

    eventually(30, "/readyz to answer 200 again", || async {
        (status_of(&relay, "/readyz").await.0 == StatusCode::OK).then_some(())
    })
    .await;
    send_task(&relay, &device, "after", "after the outage").await;
    let batch: MessageBatch = wait_messages(&relay, &agent, None, 0, None).await.ok();
    assert_eq!(ids_of(&batch), vec!["before", "after"]);
    drop(relay);
    drop(cluster);
}
