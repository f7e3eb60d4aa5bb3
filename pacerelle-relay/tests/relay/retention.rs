//! Retention through HTTP: a relay started on a database whose rows were made old deletes what its settings
//! let go, and the answer log keeps the rest.

use pacerelle_core::question::{Answer, QuestionState};
use pacerelle_core::wire::{AnswerLog, Conversation, Status};
use pacerelle_relay::{Config, Retention};
use reqwest::StatusCode;

use crate::common::{
    answer, ask, db_path, eventually, pair, processed, register, send_task, start, start_with,
};

const DAY: i64 = 86_400_000;

/// Moves the times of these rows `days` into the past, as if they had been written then.
fn age(db: &std::path::Path, sql: &str, days: i64) {
    let conn = rusqlite::Connection::open(db).expect("opens the database");
    let changed = conn.execute(sql, [days * DAY]).expect("updated");
    assert!(changed > 0, "{sql}");
}

fn ids(log: &AnswerLog) -> Vec<&str> {
    log.questions.iter().map(|q| q.question_id.as_str()).collect()
}

#[tokio::test]
async fn the_answer_log_keeps_answers_younger_than_its_setting_and_drops_older_ones() {
    if crate::common::sqlite_only("writes old rows into the SQLite file") {
        return;
    }
    let relay = start().await;
    let agent = register(&relay).await;
    let phone = pair(&relay, &agent).await;
    for id in ["q_old", "q_mid", "q_new", "q_open"] {
        ask(&relay, &agent, id, &[&phone], 600_000).await;
    }
    for id in ["q_old", "q_mid", "q_new"] {
        let reply = answer(&relay, &phone, id, Answer::Yes).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    }
    send_task(&relay, &phone, "t_done", "done long ago").await;
    send_task(&relay, &phone, "t_open", "still waiting").await;
    processed(&relay, &agent, "t_done").await;
    let status: Status = relay.get("/v1/agent/status", &agent.bearer).await.ok();
    let dir = relay.stop().await;

    // Answered 400 and 300 days ago (the answer log keeps 365 by default); asked 400 days ago and still open;
    // a task processed 40 days ago (tasks are kept 30), another stored 400 days ago and never processed.
    let db = db_path(&dir);
    for (id, days) in [("q_old", 400), ("q_mid", 300)] {
        age(
            &db,
            &format!(
                "UPDATE questions SET closed_at = closed_at - ?1, answered_at = answered_at - ?1
                 WHERE item_seq = (SELECT seq FROM items WHERE item_id = '{id}')"
            ),
            days,
        );
        age(
            &db,
            &format!("UPDATE items SET created_at = created_at - ?1 WHERE item_id = '{id}'"),
            days,
        );
    }
    age(
        &db,
        "UPDATE items SET created_at = created_at - ?1 WHERE item_id IN ('q_open', 't_open')",
        400,
    );
    age(
        &db,
        "UPDATE items SET created_at = created_at - ?1, processed_at = processed_at - ?1
         WHERE item_id = 't_done'",
        40,
    );

    // The relay purges at start, then every 30 s.
    let relay = start_with(
        Config {
            open_registration: true,
            retention: Retention::default(),
            ..Config::new(db_path(&dir))
        },
        dir,
    )
    .await;
    let log = eventually(10, "the purge of the old answer", || async {
        let log: AnswerLog = relay.get("/v1/agent/questions", &agent.bearer).await.ok();
        (!ids(&log).contains(&"q_old")).then_some(log)
    })
    .await;
    // Newest first: the open question (whatever its age), the recent answer, the one 300 days old.
    assert_eq!(ids(&log), ["q_open", "q_new", "q_mid"]);
    let states: Vec<QuestionState> = log.questions.iter().map(|q| q.state).collect();
    assert_eq!(
        states,
        [
            QuestionState::Pending,
            QuestionState::Answered,
            QuestionState::Answered
        ]
    );
    assert!(
        log.questions[2].answer_envelope.is_some(),
        "the kept answer still opens"
    );
    relay
        .get("/v1/agent/questions/q_old", &agent.bearer)
        .await
        .error(StatusCode::NOT_FOUND, "not_found");

    // The processed task went with the update about it; the task never processed stays. The counts are those
    // before: one waiting, one processed ever.
    let conversation: Conversation = relay.get("/v1/device/conversation", &phone.bearer).await.ok();
    let seen: Vec<&str> = conversation.items.iter().map(|i| i.id.as_str()).collect();
    assert!(seen.contains(&"t_open") && !seen.contains(&"t_done"), "{seen:?}");
    assert!(!seen.contains(&"q_old") && seen.contains(&"q_mid"), "{seen:?}");
    let after: Status = relay.get("/v1/agent/status", &agent.bearer).await.ok();
    assert_eq!(after.messages, status.messages);
    assert_eq!(after.messages.processed, 1);
}
