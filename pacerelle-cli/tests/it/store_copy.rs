//! `pacerelle store copy`: a relay that ran on SQLite, stopped, copied into PostgreSQL (once killed midway, then
//! again, then a third time for nothing), and started with `serve --database`: the agent and the device go on
//! with the same inbox, conversation, cursors and answers. Real processes, a real PostgreSQL (skipped without
//! one, or with `PACERELLE_TEST_POSTGRES=off`).

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::{Proc, Setup, pacerelle, run, serve_with, stderr, stdout};
use pacerelle_client::{AgentClient, Answer, QuestionState, agent::AgentCredentials, agent::QuestionRequest};
use pacerelle_test_support::postgres::Cluster;
use serde_json::Value;

/// The agent's client from the home `pacerelle agent create` wrote, against `url`.
fn agent_client(home: &Path, url: &str) -> AgentClient {
    let found = AgentCredentials::find(|_| None, Some(home)).expect("agent.json");
    AgentClient::new(url, &found.agent_id, found.token)
        .expect("a client")
        .with_home(Some(home))
}

/// `pacerelle store copy --from sqlite:DATA --to URL --json` with more arguments.
fn copy_command(data: &Path, url: &str, extra: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pacerelle"));
    c.args(["store", "copy", "--json", "--to", url, "--from"])
        .arg(format!("sqlite:{}", data.display()))
        .args(extra)
        .env("PACERELLE_LOG", "error")
        .env_remove("PACERELLE_DATABASE_URL");
    c
}

fn report(out: &Output) -> Value {
    assert!(out.status.success(), "store copy failed: {}", stderr(out));
    serde_json::from_str(&stdout(out)).expect("a JSON report")
}

/// Rows of `table` in the report, as (source, target, written).
fn counts(report: &Value, table: &str) -> (u64, u64, u64) {
    (
        field(report, table, "sourceRows"),
        field(report, table, "targetRows"),
        field(report, table, "written"),
    )
}

/// The field `field` of `table` in the report.
fn field(report: &Value, table: &str, field: &str) -> u64 {
    report["tables"]
        .as_array()
        .expect("tables")
        .iter()
        .find(|t| t["table"] == table)
        .unwrap_or_else(|| panic!("{table} missing from {report}"))[field]
        .as_u64()
        .expect("a number")
}

/// A SQLite relay with an agent and a device (the CLI's), and an empty PostgreSQL database to move it to.
struct Moving {
    cluster: &'static Cluster,
    database: String,
    setup: Setup,
    agent: AgentClient,
    device: pacerelle_client::DeviceClient,
}

/// [`Moving`], or `None` (said on stderr) with `PACERELLE_TEST_POSTGRES=off`.
async fn moving() -> Option<Moving> {
    let Some(cluster) = Cluster::shared() else {
        eprintln!("skipped: PACERELLE_TEST_POSTGRES=off (store copy needs PostgreSQL)");
        return None;
    };
    let database = cluster.fresh_database().await;
    let setup = Setup::start().await;
    let agent = agent_client(setup.agent_home.path(), &setup.url);
    let device = setup.device.clone();
    Some(Moving {
        cluster,
        database,
        setup,
        agent,
        device,
    })
}

/// Stops a `pacerelle serve` gracefully (SIGTERM) and waits for it.
fn stop(relay: &mut Proc) {
    let status = Command::new("kill")
        .args(["-TERM", &relay.0.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    relay.0.wait().expect("serve ends");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sqlite_relay_moves_to_postgresql_and_goes_on_with_the_same_cursors() {
    let Some(Moving {
        cluster,
        database,
        mut setup,
        agent,
        device,
    }) = moving().await
    else {
        return;
    };

    // A history: tasks (some replied to, some processed), a checkpoint, a webhook, an answered and an expired
    // question, a notification; enough tasks that the copy takes many batches.
    agent
        .set_webhook("http://127.0.0.1:9/hook", "a-webhook-secret-of-some-length")
        .await
        .expect("webhook set");
    for i in 0..240 {
        device.send(&format!("task {i}"), None).await.expect("sent");
    }
    let first = agent
        .wait_for_messages(None, Duration::from_secs(1))
        .await
        .expect("inbox");
    assert!(!first.messages.is_empty());
    for m in first.messages.iter().take(5) {
        agent.reply(&m.message_id, "done", None).await.expect("reply");
    }
    for m in first.messages.iter().take(10) {
        agent.mark_processed(&m.message_id).await.expect("processed");
    }
    let kept: Vec<String> = first
        .messages
        .iter()
        .take(3)
        .map(|m| m.message_id.clone())
        .collect();
    agent
        .save_checkpoint("half way", "go on", &kept)
        .await
        .expect("checkpoint");
    let asked = agent
        .ask_user(QuestionRequest::yes_no("deploy?"))
        .await
        .expect("asked");
    device
        .answer(&asked.question_id, Answer::Yes)
        .await
        .expect("answered");
    let approved = agent
        .wait_for_answer(&asked.question_id, Duration::from_secs(5))
        .await
        .expect("the answer");
    assert!(approved.approved);
    let short = agent
        .ask_user(QuestionRequest::yes_no("quick?").expires_in(Duration::from_secs(2)))
        .await
        .expect("asked");
    agent
        .notify("heads up", None, Default::default())
        .await
        .expect("notified");
    let expired = agent
        .wait_until_final(&short, tokio::time::Instant::now() + Duration::from_secs(20))
        .await
        .expect("expired");
    assert_eq!(expired.state, QuestionState::Expired);

    // What the agent and the device see before the move.
    let inbox_before = agent
        .wait_for_messages(None, Duration::ZERO)
        .await
        .expect("inbox");
    let conversation_before = device
        .conversation(None, Duration::ZERO)
        .await
        .expect("conversation");

    // While the relay runs, the copy refuses.
    let busy = run(copy_command(setup.data.path(), &database, &[]));
    assert!(!busy.status.success(), "copied a file a relay has open");
    assert!(stderr(&busy).contains("stop it"), "{}", stderr(&busy));

    stop(&mut setup.relay);

    // Killed midway (SIGKILL after nine batches of at most 20 rows: the first tables, then some of the items),
    // then run again: the same counts as the source.
    let mut killed = copy_command(setup.data.path(), &database, &["--batch", "20"])
        .env("PACERELLE_TEST_COPY_PAUSE_AFTER", "9")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut lines = BufReader::new(killed.stderr.take().expect("stderr")).lines();
    let paused = lines
        .by_ref()
        .map_while(Result::ok)
        .any(|l| l.contains("paused after 9 batches"));
    assert!(paused, "the copy did not reach its ninth batch");
    killed.kill().expect("SIGKILL");
    killed.wait().expect("ends");

    let mut pg = <sqlx::PgConnection as sqlx::Connection>::connect(&database)
        .await
        .expect("the database opens");
    let halfway: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM items")
        .fetch_one(&mut pg)
        .await
        .expect("count");

    // Between the two runs the SQLite relay changed a row already copied (the agent moved its webhook, as a
    // relay started again in between would let it): the second run brings the change.
    let mut source = <sqlx::SqliteConnection as sqlx::Connection>::connect(&format!(
        "sqlite://{}",
        setup.data.path().join("pacerelle.db").display()
    ))
    .await
    .expect("the SQLite file opens");
    sqlx::query("UPDATE webhooks SET url = 'http://127.0.0.1:9/moved'")
        .execute(&mut source)
        .await
        .expect("changed in the source");
    drop(source);

    let whole = report(&run(copy_command(
        setup.data.path(),
        &database,
        &["--batch", "20"],
    )));
    assert_eq!(whole["verified"], true, "{whole}");
    let (items, items_target, items_written) = counts(&whole, "items");
    assert!(items > 250, "{whole}");
    assert_eq!(items, items_target);
    assert!(
        0 < halfway && (halfway as u64) < items && items_written == items - halfway as u64,
        "the second run wrote what the first did not: {halfway} then {items_written} of {items}"
    );
    for table in [
        "agents",
        "devices",
        "questions",
        "item_envelopes",
        "webhooks",
        "webhook_events",
    ] {
        let (source, target, _) = counts(&whole, table);
        assert!(source > 0, "{table} is empty in the source");
        assert_eq!(source, target, "{table}");
    }
    assert_eq!(counts(&whole, "webhooks").2, 1, "{whole}");
    let url: String = sqlx::query_scalar("SELECT url FROM webhooks")
        .fetch_one(&mut pg)
        .await
        .expect("the webhook");
    assert_eq!(
        url, "http://127.0.0.1:9/moved",
        "the webhook kept its state of the first run"
    );
    // Every text column of every device arrived as it was, whatever columns this version has (a column a
    // migration adds is copied without a change to store copy).
    let text_columns: Vec<String> = sqlx::query_scalar(
        "SELECT column_name::text FROM information_schema.columns
         WHERE table_name = 'devices' AND data_type = 'text' ORDER BY column_name",
    )
    .fetch_all(&mut pg)
    .await
    .expect("the columns");
    let mut source = <sqlx::SqliteConnection as sqlx::Connection>::connect(&format!(
        "sqlite://{}",
        setup.data.path().join("pacerelle.db").display()
    ))
    .await
    .expect("the SQLite file opens");
    for column in &text_columns {
        let ours: Vec<Option<String>> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT {column} FROM devices ORDER BY device_id"
        )))
        .fetch_all(&mut pg)
        .await
        .expect("the copied column");
        let theirs: Vec<Option<String>> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT {column} FROM devices ORDER BY device_id"
        )))
        .fetch_all(&mut source)
        .await
        .expect("the source column");
        assert_eq!(ours, theirs, "devices.{column}");
    }
    drop(source);
    // The counters are the source's, not what the triggers counted while the rows went in.
    let (messages, processed): (i64, i64) = sqlx::query_as("SELECT messages, processed FROM agent_counts")
        .fetch_one(&mut pg)
        .await
        .expect("counters");
    assert_eq!((messages, processed), (240, 10));

    // A third run changes nothing.
    let again = report(&run(copy_command(setup.data.path(), &database, &[])));
    for t in again["tables"].as_array().expect("tables") {
        assert_eq!(t["written"], 0, "a second copy wrote to {}", t["table"]);
    }

    // In text, and with the data folder as a plain path: the table and the verdict.
    let text = run({
        let mut c = Command::new(env!("CARGO_BIN_EXE_pacerelle"));
        c.args(["store", "copy", "--to", &database, "--from"])
            .arg(setup.data.path())
            .env("PACERELLE_LOG", "error");
        c
    });
    assert!(text.status.success(), "{}", stderr(&text));
    let shown = stdout(&text);
    assert!(shown.contains("Verified"), "{shown}");
    assert!(shown.lines().any(|l| l.starts_with("items ")), "{shown}");

    // The relay on PostgreSQL, with the same data folder (its keys).
    let (relay, url) = serve_with(setup.data.path(), &["--database", &database]);
    let _relay = relay;
    let agent = agent_client(setup.agent_home.path(), &url);
    let mut creds: pacerelle_client::device::DeviceCredentials = serde_json::from_slice(
        &std::fs::read(setup.device_home.path().join("device.json")).expect("device.json"),
    )
    .expect("credentials");
    creds.relay_url = url.clone();
    let device = pacerelle_client::DeviceClient::from_credentials(creds).expect("device");

    let inbox_after = agent
        .wait_for_messages(None, Duration::ZERO)
        .await
        .expect("inbox");
    let ids = |inbox: &pacerelle_client::agent::Inbox| -> Vec<String> {
        inbox.messages.iter().map(|m| m.message_id.clone()).collect()
    };
    assert_eq!(ids(&inbox_after), ids(&inbox_before));
    assert_eq!(inbox_after.cursor, inbox_before.cursor);
    let conversation_after = device
        .conversation(None, Duration::ZERO)
        .await
        .expect("conversation");
    let items_of = |page: &pacerelle_client::device::ConversationPage| -> Vec<(String, String)> {
        page.items
            .iter()
            .map(|i| (format!("{:?}", i.kind), i.id.clone()))
            .collect()
    };
    assert_eq!(items_of(&conversation_after), items_of(&conversation_before));
    assert_eq!(conversation_after.cursor, conversation_before.cursor);

    // The answered question still verifies as approved; the expired one is still expired.
    let outcome = agent
        .wait_for_answer(&asked.question_id, Duration::ZERO)
        .await
        .expect("the answer");
    assert!(outcome.approved, "{outcome:?}");
    let outcome = agent
        .wait_for_answer(&short.question_id, Duration::ZERO)
        .await
        .expect("the question");
    assert_eq!(outcome.state, QuestionState::Expired);

    // A new task gets a cursor after every old one and is delivered once.
    let mut cursor = inbox_before.cursor;
    loop {
        let page = agent
            .wait_for_messages(Some(cursor), Duration::ZERO)
            .await
            .expect("inbox");
        if page.messages.is_empty() {
            break;
        }
        cursor = page.cursor;
    }
    let sent = device.send("after the move", None).await.expect("sent");
    assert!(sent.cursor > conversation_before.cursor);
    let next = agent
        .wait_for_messages(Some(cursor), Duration::from_secs(5))
        .await
        .expect("inbox");
    assert_eq!(ids(&next), vec![sent.id.clone()]);
    assert!(next.cursor > cursor);
    let none = agent
        .wait_for_messages(Some(next.cursor), Duration::from_secs(1))
        .await
        .expect("inbox");
    assert!(none.messages.is_empty(), "delivered twice");

    // Once the PostgreSQL relay has data of its own, a copy refuses to mix the two.
    let refused = run(copy_command(setup.data.path(), &database, &[]));
    assert!(!refused.status.success());
    assert!(stderr(&refused).contains("does not have"), "{}", stderr(&refused));

    // A SQLite file an earlier relay version left (its newest migration not applied) is refused, saying what
    // to do; nothing is read from it.
    let older = tempfile::tempdir().expect("tempdir");
    let file = older.path().join("pacerelle.db");
    std::fs::copy(setup.data.path().join("pacerelle.db"), &file).expect("copied");
    let mut db =
        <sqlx::SqliteConnection as sqlx::Connection>::connect(&format!("sqlite://{}", file.display()))
            .await
            .expect("the copy opens");
    sqlx::query("DELETE FROM _sqlx_migrations WHERE version = (SELECT MAX(version) FROM _sqlx_migrations)")
        .execute(&mut db)
        .await
        .expect("a migration forgotten");
    drop(db);
    let fresh = cluster.fresh_database().await;
    let outdated = run(copy_command(&file, &fresh, &[]));
    assert!(!outdated.status.success());
    assert!(
        stderr(&outdated).contains("run this relay version once"),
        "{}",
        stderr(&outdated)
    );

    // Through the CLI too, the device sees the new task in its inbox.
    let out = run({
        let mut c = pacerelle(setup.device_home.path(), &url);
        c.args(["inbox", "--json"]);
        c
    });
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("after the move"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_relay_moves_while_it_serves_and_the_last_copy_takes_only_the_changes() {
    let Some(Moving {
        database,
        mut setup,
        agent,
        device,
        ..
    }) = moving().await
    else {
        return;
    };
    agent
        .set_webhook("http://127.0.0.1:9/hook", "a-webhook-secret-of-some-length")
        .await
        .expect("webhook set");
    for i in 0..100 {
        device.send(&format!("task {i}"), None).await.expect("sent");
    }
    // The agent has had them (each marked delivered).
    let inbox = agent
        .wait_for_messages(None, Duration::from_secs(1))
        .await
        .expect("inbox");
    assert_eq!(inbox.messages.len(), 100);

    // 1. While the relay serves (and a device keeps sending): the snapshot, verified.
    let sender = {
        let device = device.clone();
        tokio::spawn(async move {
            for i in 0..20 {
                device
                    .send(&format!("during {i}"), None)
                    .await
                    .expect("sent while copying");
            }
        })
    };
    let live = report(&run(copy_command(setup.data.path(), &database, &["--live"])));
    sender.await.expect("the sender");
    assert_eq!(live["verified"], true, "{live}");
    let (snapshot, in_target, written) = counts(&live, "items");
    assert!((100..=120).contains(&snapshot), "{live}");
    assert_eq!((in_target, written), (snapshot, snapshot), "{live}");

    // 2. The relay goes on: more tasks, some processed (rows changed), the webhook removed (a row deleted).
    for i in 0..10 {
        device.send(&format!("after {i}"), None).await.expect("sent");
    }
    for m in inbox.messages.iter().take(5) {
        agent.mark_processed(&m.message_id).await.expect("processed");
    }
    agent.clear_webhook().await.expect("webhook removed");
    let inbox_before = agent
        .wait_for_messages(None, Duration::ZERO)
        .await
        .expect("inbox");
    stop(&mut setup.relay);

    // 3. The last copy, the relay stopped: only what changed, and the deleted row deleted.
    let last = report(&run(copy_command(setup.data.path(), &database, &[])));
    assert_eq!(last["verified"], true, "{last}");
    // 130 tasks, and the five updates that told the device of those processed.
    let (items, items_target, items_written) = counts(&last, "items");
    assert_eq!((items, items_target), (135, 135), "{last}");
    // Written: the tasks the snapshot missed (10 sent after it, and those of the 20 sent during it that it did
    // not hold), the 5 processed since, their 5 updates; at most also the tasks of the 20 the snapshot held,
    // delivered since. Not the 95 others, unchanged.
    assert!(
        (10 + 5 + 5..=30 + 5 + 5).contains(&items_written),
        "the last copy wrote {items_written} items: {last}"
    );
    assert_eq!(counts(&last, "webhooks"), (0, 0, 0), "{last}");
    assert_eq!(field(&last, "webhooks", "deleted"), 1, "{last}");

    // 4. The relay on PostgreSQL: the same inbox, the same cursor.
    let (relay, url) = serve_with(setup.data.path(), &["--database", &database]);
    let _relay = relay;
    let agent = agent_client(setup.agent_home.path(), &url);
    let inbox_after = agent
        .wait_for_messages(None, Duration::ZERO)
        .await
        .expect("inbox");
    let ids = |inbox: &pacerelle_client::agent::Inbox| -> Vec<String> {
        inbox.messages.iter().map(|m| m.message_id.clone()).collect()
    };
    assert_eq!(ids(&inbox_after), ids(&inbox_before));
    assert_eq!(inbox_after.cursor, inbox_before.cursor);

    // 5. Once a relay has opened the database, the mark is gone: a copy no longer deletes, and refuses what
    // the SQLite file lacks (here, a task stored on PostgreSQL).
    let phone = {
        let mut creds: pacerelle_client::device::DeviceCredentials = serde_json::from_slice(
            &std::fs::read(setup.device_home.path().join("device.json")).expect("device.json"),
        )
        .expect("credentials");
        creds.relay_url = url.clone();
        pacerelle_client::DeviceClient::from_credentials(creds).expect("device")
    };
    phone.send("on PostgreSQL", None).await.expect("sent");
    let refused = run(copy_command(setup.data.path(), &database, &[]));
    assert!(!refused.status.success());
    assert!(stderr(&refused).contains("does not have"), "{}", stderr(&refused));
}
