//! What an operator reads from a running relay: JSON logs on request, and `GET /metrics` only when turned on.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use common::{Proc, pacerelle, run, serve_with, stdout};

#[tokio::test]
async fn metrics_answer_only_when_turned_on() {
    let data = tempfile::tempdir().expect("tempdir");
    let (_relay, url) = serve_with(data.path(), &["--metrics"]);
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::new();
    let answer = http.get(format!("{url}/metrics")).send().await.expect("answers");
    assert_eq!(answer.status(), 200);
    let kind = answer
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    assert!(kind.starts_with("application/openmetrics-text"), "{kind}");
    let text = answer.text().await.expect("text");
    for family in [
        "pacerelle_store_commits_total",
        "pacerelle_store_writes_total",
        "pacerelle_store_batch_writes_bucket",
    ] {
        assert!(text.contains(family), "{family} missing from:\n{text}");
    }
    assert!(text.trim_end().ends_with("# EOF"), "{text}");

    let off = tempfile::tempdir().expect("tempdir");
    let (_quiet, url) = serve_with(off.path(), &[]);
    let answer = http.get(format!("{url}/metrics")).send().await.expect("answers");
    assert_eq!(answer.status(), 404, "off by default");
    let body: serde_json::Value = answer.json().await.expect("an error body");
    assert_eq!(body["code"], "no_route");
}

#[test]
fn logs_are_json_lines_on_request() {
    let data = tempfile::tempdir().expect("tempdir");
    let mut child = Command::new(env!("CARGO_BIN_EXE_pacerelle"))
        .args([
            "serve",
            "--json",
            "--listen",
            "127.0.0.1:0",
            "--log-format",
            "json",
            "--data",
        ])
        .arg(data.path())
        .env("PACERELLE_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let stderr = child.stderr.take().expect("stderr");
    let _relay = Proc(child);
    let mut line = String::new();
    let read = BufReader::new(stderr).read_line(&mut line).expect("a log line");
    assert!(read > 0, "serve wrote no log line");
    let entry: serde_json::Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
    assert!(entry["level"].is_string(), "{line}");
    assert!(entry["timestamp"].is_string(), "{line}");
    assert!(entry["fields"]["message"].is_string(), "{line}");
}

#[tokio::test]
async fn serve_keeps_its_data_in_postgresql_with_database() {
    let Some(cluster) = pacerelle_test_support::postgres::Cluster::shared() else {
        eprintln!("skipped: PACERELLE_TEST_POSTGRES=off");
        return;
    };
    let url = cluster.fresh_database().await;
    let data = tempfile::tempdir().expect("tempdir");
    let (_relay, relay_url) = serve_with(data.path(), &["--database", &url]);
    let home = tempfile::tempdir().expect("tempdir");
    let created = run({
        let mut c = pacerelle(home.path(), &relay_url);
        c.args(["agent", "create", "--name", "on postgres", "--json"]);
        c
    });
    assert!(
        created.status.success(),
        "{}",
        String::from_utf8_lossy(&created.stderr)
    );
    let agent: serde_json::Value = serde_json::from_str(&stdout(&created)).expect("json");
    let agent_id = agent["agentId"].as_str().expect("an agent id").to_string();

    // The agent is a row of the PostgreSQL database, and no SQLite file was made.
    let mut db = <sqlx::PgConnection as sqlx::Connection>::connect(&url)
        .await
        .expect("the database opens");
    let name: String = sqlx::query_scalar("SELECT name FROM agents WHERE agent_id = $1")
        .bind(&agent_id)
        .fetch_one(&mut db)
        .await
        .expect("the agent's row");
    assert_eq!(name, "on postgres");
    assert!(!data.path().join("pacerelle.db").exists());
}
