//! Editing a real relay's SQLite rows as a compromised relay (or anyone who can write its database) would.

use std::time::Duration;

use pacerelle_client::core::envelope;
use pacerelle_client::core::question::{AnswerPayload, OwnQuestion, answer_aad};
use pacerelle_client::{AgentClient, Answer, Timestamp};
use pacerelle_test_support::TestRelay;

/// The relay's database, opened beside it.
pub async fn db(relay: &TestRelay) -> sqlx::SqlitePool {
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(relay.dir.path().join("pacerelle.db"))
        .busy_timeout(Duration::from_secs(10));
    sqlx::SqlitePool::connect_with(options)
        .await
        .expect("open the relay's database")
}

/// Writes an answer into the relay's rows as a compromised relay would, sealed with `device`'s key (which
/// the holder of that device has), naming the exact question the agent stored.
pub async fn forge_answer(relay: &TestRelay, agent: &AgentClient, question_id: &str, device_id: &str) {
    let pool = db(relay).await;
    let (seq, self_envelope): (i64, String) = sqlx::query_as(
        "SELECT seq, envelope FROM items WHERE kind = 'question' AND item_id = ? AND agent_id = ?",
    )
    .bind(question_id)
    .bind(agent.agent_id())
    .fetch_one(&pool)
    .await
    .expect("the question's row");
    let own = OwnQuestion::open(
        &agent.token().self_key(agent.agent_id()),
        agent.agent_id(),
        question_id,
        &self_envelope,
    )
    .expect("own copy");
    let payload = AnswerPayload {
        grant: None,
        question_id: question_id.into(),
        answer: Answer::Yes,
        answered_at: Timestamp::now(),
        question_digest: Some(own.digest),
        signature: None,
    };
    let sealed = envelope::seal_json(
        &agent.token().device_key(agent.agent_id(), device_id),
        &answer_aad(agent.agent_id(), device_id, question_id),
        &payload,
    );
    sqlx::query(
        "UPDATE questions SET state = 'answered', answered_by = ?2, answered_at = ?3, closed_at = ?3,
                answer_envelope = ?4, channel = 'phone'
         WHERE item_seq = ?1",
    )
    .bind(seq)
    .bind(device_id)
    .bind(Timestamp::now().millis())
    .bind(&sealed)
    .execute(&pool)
    .await
    .expect("forge the answer");
    pool.close().await;
}
