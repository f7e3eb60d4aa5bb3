//! The PostgreSQL schema (`pacerelle-relay/migrations-postgres`) on a real server, and the harness that starts
//! it: a throw-away cluster (or the server `PACERELLE_TEST_POSTGRES` names), one database per test.
//!
//! These tests run unless `PACERELLE_TEST_POSTGRES=off`; they need PostgreSQL installed (`.ci/run` installs it).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pacerelle_test_support::postgres::Cluster;
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../pacerelle-relay/migrations-postgres");

/// The shared cluster, or `None` (the test says it is skipped) when `PACERELLE_TEST_POSTGRES=off`.
fn cluster() -> Option<&'static Cluster> {
    let cluster = Cluster::shared();
    if cluster.is_none() {
        eprintln!("skipped: PACERELLE_TEST_POSTGRES=off");
    }
    cluster
}

/// A fresh database with the relay's schema applied.
async fn migrated(cluster: &Cluster) -> PgPool {
    let url = cluster.fresh_database().await;
    let pool = PgPoolOptions::new()
        .max_connections(4)
        .connect(&url)
        .await
        .expect("connect");
    MIGRATOR.run(&pool).await.expect("apply migrations-postgres");
    pool
}

async fn exec(pool: &PgPool, sql: &'static str) {
    sqlx::raw_sql(sql)
        .execute(pool)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// The SQLSTATE of a statement that must fail.
async fn refused(pool: &PgPool, sql: &'static str) -> String {
    match sqlx::raw_sql(sql).execute(pool).await {
        Ok(_) => panic!("accepted: {sql}"),
        Err(e) => e
            .as_database_error()
            .and_then(|d| d.code().map(|c| c.into_owned()))
            .unwrap_or_else(|| panic!("not a database error: {e}")),
    }
}

async fn counts(pool: &PgPool, agent: &str) -> Option<(i64, i64)> {
    sqlx::query_as("SELECT messages, processed FROM agent_counts WHERE agent_id = $1")
        .bind(agent)
        .fetch_optional(pool)
        .await
        .expect("read agent_counts")
}

const AGENT_AND_DEVICE: &str = "
    INSERT INTO agents (agent_id, name, auth_hash, created_at) VALUES ('ag_1', 'agent', '\\x00', 1);
    INSERT INTO devices (device_id, agent_id, name, role, token_hash, created_at)
        VALUES ('dv_1', 'ag_1', 'phone', 'owner', '\\x01', 1);";

#[tokio::test]
async fn an_agent_has_its_counts_from_registration_and_they_move_as_in_sqlite() {
    let Some(cluster) = cluster() else { return };
    let pool = migrated(cluster).await;
    assert_eq!(counts(&pool, "ag_1").await, None);
    exec(&pool, AGENT_AND_DEVICE).await;
    assert_eq!(
        counts(&pool, "ag_1").await,
        Some((0, 0)),
        "the row exists from registration on"
    );

    exec(
        &pool,
        "INSERT INTO items (agent_id, kind, item_id, device_id, envelope, created_at)
         VALUES ('ag_1', 'message', 'm1', 'dv_1', 'e1', 2), ('ag_1', 'message', 'm2', 'dv_1', 'e2', 3)",
    )
    .await;
    assert_eq!(counts(&pool, "ag_1").await, Some((2, 0)));

    // Other kinds are not tasks.
    exec(
        &pool,
        "INSERT INTO items (agent_id, kind, item_id, source_message_id, created_at)
         VALUES ('ag_1', 'reply', 'r1', 'm1', 4)",
    )
    .await;
    assert_eq!(counts(&pool, "ag_1").await, Some((2, 0)));

    exec(&pool, "UPDATE items SET processed_at = 5 WHERE item_id = 'm1'").await;
    assert_eq!(counts(&pool, "ag_1").await, Some((2, 1)));
    // A task is counted processed once: setting processed_at again, or delivered_at, changes nothing.
    exec(
        &pool,
        "UPDATE items SET processed_at = 6, delivered_at = 6 WHERE item_id = 'm1'",
    )
    .await;
    exec(&pool, "UPDATE items SET delivered_at = 6 WHERE item_id = 'm2'").await;
    assert_eq!(counts(&pool, "ag_1").await, Some((2, 1)));

    // A task copied already processed (store copy) counts on both sides.
    exec(
        &pool,
        "INSERT INTO items (agent_id, kind, item_id, device_id, envelope, created_at, processed_at)
         VALUES ('ag_1', 'message', 'm3', 'dv_1', 'e3', 7, 8)",
    )
    .await;
    assert_eq!(counts(&pool, "ag_1").await, Some((3, 2)));

    // Retention deletes processed tasks; no trigger runs on delete, so the pending count stays exact.
    exec(&pool, "DELETE FROM items WHERE item_id = 'm1'").await;
    assert_eq!(counts(&pool, "ag_1").await, Some((3, 2)));
    let pending: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM items WHERE agent_id = 'ag_1' AND kind = 'message' AND processed_at IS NULL",
    )
    .fetch_one(&pool)
    .await
    .expect("count");
    assert_eq!(pending, 3 - 2);
}

#[tokio::test]
async fn constraints_refuse_what_sqlite_refuses() {
    let Some(cluster) = cluster() else { return };
    let pool = migrated(cluster).await;
    exec(&pool, AGENT_AND_DEVICE).await;
    exec(
        &pool,
        "INSERT INTO items (agent_id, kind, item_id, device_id, envelope, created_at)
         VALUES ('ag_1', 'message', 'm1', 'dv_1', 'e1', 2)",
    )
    .await;

    const UNIQUE: &str = "23505";
    const CHECK: &str = "23514";
    const FOREIGN_KEY: &str = "23503";
    // The same sender id twice.
    let same_id = "INSERT INTO items (agent_id, kind, item_id, device_id, envelope, created_at)
                   VALUES ('ag_1', 'message', 'm1', 'dv_1', 'again', 3)";
    assert_eq!(refused(&pool, same_id).await, UNIQUE);
    // Two open sessions of one agent (the partial unique index); an ended one beside an open one is fine.
    exec(
        &pool,
        "INSERT INTO sessions (session_id, agent_id, host, since, last_heartbeat_at, ended_at)
         VALUES ('s0', 'ag_1', 'h', 1, 1, 2), ('s1', 'ag_1', 'h', 3, 3, NULL)",
    )
    .await;
    let second_open = "INSERT INTO sessions (session_id, agent_id, host, since, last_heartbeat_at)
                       VALUES ('s2', 'ag_1', 'h', 4, 4)";
    assert_eq!(refused(&pool, second_open).await, UNIQUE);
    // One update per (subject, state).
    let update =
        "INSERT INTO items (agent_id, kind, item_id, device_id, created_at, subject_seq, update_state)
                  SELECT 'ag_1', 'update', 'upd_' || (SELECT COUNT(*) FROM items), 'dv_1', 5, seq, 'processed'
                  FROM items WHERE item_id = 'm1'";
    exec(&pool, update).await;
    assert_eq!(refused(&pool, update).await, UNIQUE);
    // An update names its subject; other kinds do not have one.
    let no_subject = "INSERT INTO items (agent_id, kind, item_id, created_at, update_state)
                      VALUES ('ag_1', 'update', 'upd_x', 6, 'processed')";
    assert_eq!(refused(&pool, no_subject).await, CHECK);
    let unknown_kind =
        "INSERT INTO items (agent_id, kind, item_id, created_at) VALUES ('ag_1', 'memo', 'x', 6)";
    assert_eq!(refused(&pool, unknown_kind).await, CHECK);
    // An item of an agent that does not exist.
    let no_agent = "INSERT INTO items (agent_id, kind, item_id, created_at) VALUES ('ag_2', 'reply', 'r', 6)";
    assert_eq!(refused(&pool, no_agent).await, FOREIGN_KEY);
    // A webhook has exactly one of its two secrets.
    let two_secrets = "INSERT INTO webhooks (agent_id, url, secret, sealed_secret, updated_at)
                       VALUES ('ag_1', 'https://x', 's', '\\x01', 1)";
    assert_eq!(refused(&pool, two_secrets).await, CHECK);
    // A pending question has no closing time.
    let pending_closed = "INSERT INTO questions (item_seq, agent_id, kind, state, expires_at, closed_at)
                          SELECT seq, 'ag_1', 'yes_no', 'pending', 9, 8 FROM items WHERE item_id = 'm1'";
    assert_eq!(refused(&pool, pending_closed).await, CHECK);
    // Deleting a push subscription deletes its outbox rows.
    exec(
        &pool,
        "INSERT INTO push_subscriptions (endpoint, agent_id, device_id, p256dh, auth, created_at, updated_at)
         VALUES ('https://push/1', 'ag_1', 'dv_1', '\\x04', '\\x00', 1, 1);
         INSERT INTO push_outbox (subscription_id, agent_id, device_id, item_seq, kind, urgency, expires_at,
                                  created_at, next_attempt_at)
         SELECT subscription_id, 'ag_1', 'dv_1', 1, 'reply', 'normal', 9, 1, 1 FROM push_subscriptions;
         DELETE FROM push_subscriptions;",
    )
    .await;
    let left: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM push_outbox")
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(left, 0);
}

#[tokio::test]
async fn sequence_numbers_grow_and_copied_values_are_kept() {
    let Some(cluster) = cluster() else { return };
    let pool = migrated(cluster).await;
    exec(&pool, AGENT_AND_DEVICE).await;
    let insert = |id: &'static str| {
        sqlx::query_scalar::<_, i64>(
            "INSERT INTO items (agent_id, kind, item_id, created_at) VALUES ('ag_1', 'notification', $1, 1)
             RETURNING seq",
        )
        .bind(id)
        .fetch_one(&pool)
    };
    let first = insert("n1").await.expect("insert");
    let second = insert("n2").await.expect("insert");
    assert!(second > first, "{second} after {first}");

    // `store copy` inserts the sequence numbers it copies, then moves the sequence past them.
    exec(
        &pool,
        "INSERT INTO items (seq, agent_id, kind, item_id, created_at) VALUES (1000, 'ag_1', 'notification', 'c', 1);
         SELECT setval(pg_get_serial_sequence('items', 'seq'), (SELECT MAX(seq) FROM items));",
    )
    .await;
    assert_eq!(insert("n3").await.expect("insert"), 1001);

    // Devices keep their insertion order in `rowid`, as SQLite's implicit one.
    exec(
        &pool,
        "INSERT INTO devices (device_id, agent_id, name, role, token_hash, created_at)
         VALUES ('dv_b', 'ag_1', 'b', 'user', '\\x02', 1), ('dv_a', 'ag_1', 'a', 'user', '\\x03', 1)",
    )
    .await;
    let order: Vec<String> = sqlx::query_scalar(
        "SELECT device_id FROM devices WHERE agent_id = 'ag_1' ORDER BY created_at, rowid",
    )
    .fetch_all(&pool)
    .await
    .expect("devices");
    assert_eq!(order, ["dv_1", "dv_b", "dv_a"]);
}

#[tokio::test]
async fn each_fresh_database_is_its_own() {
    let Some(cluster) = cluster() else { return };
    let a = cluster.fresh_database().await;
    let b = cluster.fresh_database().await;
    assert_ne!(a, b);
    let pool_a = PgPool::connect(&a).await.expect("connect a");
    let pool_b = PgPool::connect(&b).await.expect("connect b");
    exec(&pool_a, "CREATE TABLE only_here (x BIGINT)").await;
    let seen: Option<String> = sqlx::query_scalar("SELECT to_regclass('only_here')::text")
        .fetch_one(&pool_b)
        .await
        .expect("look up");
    assert_eq!(seen, None);
    let encoding: String = sqlx::query_scalar(
        "SELECT pg_encoding_to_char(encoding) FROM pg_database WHERE datname = current_database()",
    )
    .fetch_one(&pool_b)
    .await
    .expect("encoding");
    assert_eq!(encoding, "UTF8");
}

/// Run as a process of its own by `a_started_cluster_stops_and_vanishes_when_its_test_process_is_killed`:
/// starts a cluster, prints its port and folder, and waits to be killed.
#[test]
#[ignore = "a helper process of another test"]
fn helper_start_a_cluster_and_wait() {
    let cluster = Cluster::start();
    let dir = cluster.dir().expect("a started cluster has a folder");
    // On a line of its own: the harness prints "test helper_… ... " before it, without a line break.
    println!("\ncluster {} {}", cluster.port().expect("port"), dir.display());
    std::thread::sleep(Duration::from_secs(120));
}

#[test]
fn a_started_cluster_stops_and_vanishes_when_its_test_process_is_killed() {
    if std::env::var(pacerelle_test_support::postgres::ENV).as_deref() == Ok("off") {
        eprintln!("skipped: PACERELLE_TEST_POSTGRES=off");
        return;
    }
    let mut child = Command::new(std::env::current_exe().expect("this test binary"))
        .args([
            "--ignored",
            "--exact",
            "helper_start_a_cluster_and_wait",
            "--nocapture",
            "--test-threads=1",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .expect("run the helper");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let (port, dir) = loop {
        let mut line = String::new();
        assert!(
            stdout.read_line(&mut line).expect("read the helper") > 0,
            "the helper ended without a cluster"
        );
        if let Some((port, dir)) = line
            .trim_end()
            .strip_prefix("cluster ")
            .and_then(|l| l.split_once(' '))
        {
            break (
                port.parse::<u16>().expect("a port"),
                std::path::PathBuf::from(dir),
            );
        }
    };
    assert!(
        dir.join("data/postmaster.pid").is_file(),
        "the server runs in {}",
        dir.display()
    );
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok(),
        "the server listens on {port}"
    );

    child.kill().expect("SIGKILL the helper"); // no code of the helper runs after this
    child.wait().expect("reap the helper");

    let deadline = Instant::now() + Duration::from_secs(30);
    while dir.exists() || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
        assert!(
            Instant::now() < deadline,
            "30 s after the test process died, the server on {port} or its folder {} is still there",
            dir.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
