//! Group commit of tasks on PostgreSQL: the tasks that devices send at once share one statement and one commit.
//!
//! A send is queued for the instance's sender task. It takes the first waiting send and then every other
//! **already** waiting one, up to [`MAX_BATCH`] (it never waits to fill a batch, so a lone send pays nothing
//! extra), and stores them all with one call of `pacerelle_put_messages` (migrations 0005 and 0006): one round trip and
//! one synced commit for the batch, where one task alone used to cost six round trips and a commit. Under load
//! a batch is what arrived while the previous one was committing, as with SQLite's writer.
//!
//! Only once that statement has committed is each send answered, so an acknowledgement still means "on disk".
//! When it fails, nothing of the batch is stored. If the statement ran and failed (any one task's error, a
//! deadlock with another instance), each send is tried again alone ([`PgStore::put_message_alone`]), so that
//! each caller gets its own outcome or error and one task never fails another. If the database could not be
//! reached, every send is answered `unavailable` at once, as it would have been alone.

use tokio::sync::{mpsc, oneshot};

use super::prelude::*;
use crate::error::StoreError;

/// At most this many tasks share one statement.
pub(super) const MAX_BATCH: usize = 256;
/// Sends queued at most; more callers wait for room.
const QUEUE: usize = 4096;

/// One queued send: what [`PgStore::put_message`] was given, and where its outcome goes.
#[derive(Debug)]
pub(super) struct Send {
    pub(super) agent_id: String,
    pub(super) device_id: String,
    pub(super) message_id: String,
    pub(super) envelope: String,
    pub(super) max_pending: u32,
    pub(super) now: Timestamp,
    pub(super) reply: oneshot::Sender<Result<Put>>,
}

impl Send {
    /// The task as [`PgStore::put_message_alone`] takes it.
    fn task(&self) -> NewTask<'_> {
        NewTask {
            agent_id: &self.agent_id,
            device_id: &self.device_id,
            message_id: &self.message_id,
            envelope: &self.envelope,
            session: None,
            max_pending: self.max_pending,
            now: self.now,
        }
    }
}

/// The queue of the instance's sender task.
pub(super) type Queue = mpsc::Sender<Send>;

/// Starts the sender task of `store` (a store without a queue of its own: the task must not hold its own queue
/// open) and returns its queue. The task ends when every holder of the queue (every clone of the store that
/// [`PgStore::open`] returns) is gone.
pub(super) fn start(store: PgStore) -> Queue {
    let (queue, queued) = mpsc::channel(QUEUE);
    tokio::spawn(run(store, queued));
    queue
}

/// Runs the sender task: batches of waiting sends until the queue closes.
async fn run(store: PgStore, mut queue: mpsc::Receiver<Send>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while queue.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let sends = std::mem::take(&mut batch);
        match store.put_batch(&sends).await {
            Ok(outcomes) => {
                store.committed_batch(sends.len());
                for (send, outcome) in sends.into_iter().zip(outcomes) {
                    let _ = send.reply.send(Ok(outcome));
                }
            }
            Err(Failed::Unavailable(e)) => {
                // The database is out of reach: trying each alone would only wait as long again per task.
                tracing::debug!(error = %e, tasks = sends.len(), "a batch of tasks found the database unavailable");
                for send in sends {
                    let _ = send.reply.send(Err(StoreError::unavailable(e.to_string())));
                }
            }
            Err(Failed::Statement(e)) => {
                tracing::debug!(error = %e, tasks = sends.len(), "a batch of tasks failed; each is tried alone");
                // Alone, one after the other: each caller gets its own outcome or error.
                for send in sends {
                    let outcome = store.put_message_alone(&send.task()).await;
                    let _ = send.reply.send(outcome);
                }
            }
        }
    }
}

/// Why a batch stored nothing.
#[derive(Debug)]
enum Failed {
    /// The database could not be reached (no connection within the acquire timeout, the connection lost, the
    /// server shutting down or full): every send of the batch gets this.
    Unavailable(StoreError),
    /// The statement ran and failed: one task's error (a device gone, say), a deadlock with another instance,
    /// or a bug. Each send is tried again alone.
    Statement(StoreError),
}

impl From<sqlx::Error> for Failed {
    fn from(e: sqlx::Error) -> Self {
        let reached = match &e {
            sqlx::Error::Database(db) => !db
                .code()
                .is_some_and(|c| ["08", "53", "57"].iter().any(|class| c.starts_with(class))),
            _ => false,
        };
        if reached {
            Failed::Statement(e.into())
        } else {
            Failed::Unavailable(e.into())
        }
    }
}

impl PgStore {
    /// Stores `sends` with one call of `pacerelle_put_messages`, one statement, committed on its own: one
    /// outcome per send, in their order.
    async fn put_batch(&self, sends: &[Send]) -> Result<Vec<Put>, Failed> {
        let mut agents = Vec::with_capacity(sends.len());
        let mut devices = Vec::with_capacity(sends.len());
        let mut ids = Vec::with_capacity(sends.len());
        let mut envelopes = Vec::with_capacity(sends.len());
        let mut caps = Vec::with_capacity(sends.len());
        let mut nows = Vec::with_capacity(sends.len());
        for s in sends {
            agents.push(s.agent_id.as_str());
            devices.push(s.device_id.as_str());
            ids.push(s.message_id.as_str());
            envelopes.push(s.envelope.as_str());
            caps.push(i64::from(s.max_pending));
            nows.push(s.now.millis());
        }
        let rows: Vec<(String, Option<i64>, Option<i64>)> = sqlx::query_as(
            "SELECT o_outcome, o_seq, o_created_at
             FROM pacerelle_put_messages($1::text[], $2::text[], $3::text[], $4::text[], $5::int8[], $6::int8[])",
        )
        .bind(&agents)
        .bind(&devices)
        .bind(&ids)
        .bind(&envelopes)
        .bind(&caps)
        .bind(&nows)
        .fetch_all(&self.pool)
        .await?;
        if rows.len() != sends.len() {
            let e = StoreError::internal("the batch of tasks returned one row per task");
            return Err(Failed::Statement(e));
        }
        sends
            .iter()
            .zip(rows)
            .map(|(send, (outcome, seq, created_at))| outcome_of(send, &outcome, seq, created_at))
            .collect::<Result<_>>()
            .map_err(Failed::Statement)
    }
}

/// The outcome of one send from its row of `pacerelle_put_messages`.
fn outcome_of(send: &Send, outcome: &str, seq: Option<i64>, created_at: Option<i64>) -> Result<Put> {
    let stored = |created| match (seq, created_at) {
        (Some(seq), Some(at)) => Ok(Put::Stored(Stored {
            id: send.message_id.clone(),
            cursor: cursor(seq),
            created_at: Timestamp(at),
            created,
        })),
        _ => Err(StoreError::internal(
            "a stored task without its sequence number or time",
        )),
    };
    match outcome {
        "stored" => stored(true),
        "found" => stored(false),
        "conflict" => Ok(Put::Conflict(crate::store::types::ID_OF_ANOTHER_DEVICE)),
        "quota" => Ok(Put::QuotaExceeded),
        _ => Err(StoreError::internal("an unknown outcome of the batch of tasks")),
    }
}

#[cfg(test)]
mod tests {
    //! Batches on a real PostgreSQL (skipped, saying so, when `PACERELLE_TEST_POSTGRES` asks for none). The
    //! outcomes of one task alone are the messages tests'; these check what only a batch can get wrong.

    use std::collections::HashMap;
    use std::sync::Arc;

    use tokio::sync::Barrier;

    use super::*;
    use crate::store::postgres::messages::tests::{T0, store};

    /// Sends every `(agent, device, id, cap)` at once (released together by a barrier) and returns the
    /// outcomes in the same order.
    async fn send_at_once(store: &PgStore, sends: &[(&str, &str, String, u32)]) -> Vec<Result<Put>> {
        let barrier = Arc::new(Barrier::new(sends.len()));
        let mut tasks = Vec::new();
        for (i, (agent, device, id, cap)) in sends.iter().enumerate() {
            let (store, barrier) = (store.clone(), barrier.clone());
            let (agent, device, id, cap) = (agent.to_string(), device.to_string(), id.clone(), *cap);
            tasks.push(tokio::spawn(async move {
                barrier.wait().await;
                let now = Timestamp(T0 + i64::try_from(i).expect("small"));
                store
                    .as_store()
                    .put_message(&agent, &device, &id, "AQ", None, cap, now)
                    .await
            }));
        }
        let mut outcomes = Vec::new();
        for task in tasks {
            outcomes.push(task.await.expect("joined"));
        }
        outcomes
    }

    #[tokio::test]
    async fn tasks_sent_at_once_share_commits_and_each_keeps_the_outcome_it_would_have_alone() {
        let Some((store, _dir)) = store().await else {
            return;
        };
        // m0 of ag_1 is stored first, from dv_1. Then at once: ag_1's m0..m9 from dv_1 twice each (cap 6, so
        // five more are stored), m0 from dv_2 (a conflict), and ag_2's n0..n19 from dv_3 (no cap).
        let first = store
            .as_store()
            .put_message("ag_1", "dv_1", "m0", "AQ", None, 6, Timestamp(T0))
            .await
            .expect("stored");
        let Put::Stored(first) = first else {
            panic!("m0 stored, got {first:?}");
        };
        let mut sends = Vec::new();
        for i in 0..20 {
            sends.push(("ag_1", "dv_1", format!("m{}", i % 10), 6));
            sends.push(("ag_2", "dv_3", format!("n{i}"), u32::MAX));
        }
        sends.push(("ag_1", "dv_2", "m0".to_string(), 6));
        let outcomes = send_at_once(&store, &sends).await;

        let mut stored: HashMap<(String, String), i64> = HashMap::new();
        stored.insert(("ag_1".into(), "m0".into()), crate::store::seq_of(first.cursor));
        let mut found = Vec::new();
        let (mut refused, mut conflicts) = (0, 0);
        for ((agent, _, id, _), outcome) in sends.iter().zip(outcomes) {
            let key = (agent.to_string(), id.clone());
            match outcome.expect("no storage error") {
                Put::Stored(s) if s.created => {
                    let earlier = stored.insert(key, crate::store::seq_of(s.cursor));
                    assert!(earlier.is_none(), "{agent}/{id} created twice");
                }
                Put::Stored(s) => found.push((key, crate::store::seq_of(s.cursor))),
                Put::QuotaExceeded => refused += 1,
                Put::Conflict(_) => conflicts += 1,
            }
        }
        // A task found again is the one stored, with its cursor.
        for (key, seq) in &found {
            assert_eq!(stored.get(key), Some(seq), "{key:?} found with another cursor");
        }
        let found = found.len();
        let ag_1 = stored.keys().filter(|(a, _)| a == "ag_1").count();
        let ag_2 = stored.keys().filter(|(a, _)| a == "ag_2").count();
        assert_eq!(ag_1, 6, "exactly the cap of ag_1 is stored");
        assert_eq!(ag_2, 20, "every task of ag_2 is stored");
        assert_eq!(conflicts, 1, "m0 of the other device is refused once");
        assert!(found >= 2, "m0 of dv_1 found twice at least: {found}");
        assert_eq!(ag_1 - 1 + ag_2 + found + refused + conflicts, sends.len());
        // What is stored is exactly what was acknowledged as stored, and the counters agree.
        let rows: Vec<(String, String, i64)> =
            sqlx::query_as("SELECT agent_id, item_id, seq FROM items WHERE kind = 'message'")
                .fetch_all(&store.pool)
                .await
                .expect("read");
        let in_db: HashMap<(String, String), i64> = rows.into_iter().map(|(a, i, s)| ((a, i), s)).collect();
        assert_eq!(in_db, stored);
        let pending: Vec<(String, i64)> =
            sqlx::query_as("SELECT agent_id, messages - processed FROM agent_counts ORDER BY agent_id")
                .fetch_all(&store.pool)
                .await
                .expect("counted");
        assert_eq!(pending, [("ag_1".to_string(), 6), ("ag_2".to_string(), 20)]);
        // They shared commits: fewer statements than tasks.
        let counts = store.writer_counts();
        let (commits, writes) = (counts.commits.get(), counts.writes.get());
        assert!(writes >= 42, "every send counted: {writes}");
        assert!(commits < 42, "41 sends at once shared commits: {commits} commits");
    }

    #[tokio::test]
    async fn an_agent_far_from_its_quota_has_its_tasks_inserted_together_with_the_outcomes_they_would_have_alone()
     {
        let Some((store, _dir)) = store().await else {
            return;
        };
        // m0 of ag_1 is stored first, from dv_1. Then at once, with no cap (every task fits, so the batch takes
        // the path that inserts them together): m0..m9 from dv_1 twice each, and m0, m5 from dv_2.
        let first = store
            .as_store()
            .put_message("ag_1", "dv_1", "m0", "AQ", None, u32::MAX, Timestamp(T0))
            .await
            .expect("stored");
        let Put::Stored(first) = first else {
            panic!("m0 stored, got {first:?}");
        };
        let mut sends: Vec<(&str, &str, String, u32)> = (0..20)
            .map(|i| ("ag_1", "dv_1", format!("m{}", i % 10), u32::MAX))
            .collect();
        sends.push(("ag_1", "dv_2", "m0".to_string(), u32::MAX));
        sends.push(("ag_1", "dv_2", "m5".to_string(), u32::MAX));
        let outcomes = send_at_once(&store, &sends).await;

        // Who stored each id (device, seq): m0 is dv_1's; m5 is the device whose send came first.
        let mut stored: HashMap<String, (String, i64)> = HashMap::new();
        stored.insert("m0".into(), ("dv_1".into(), crate::store::seq_of(first.cursor)));
        let mut found = Vec::new();
        let mut conflicts = Vec::new();
        for ((_, device, id, _), outcome) in sends.iter().zip(outcomes) {
            match outcome.expect("no storage error") {
                Put::Stored(s) if s.created => {
                    let earlier =
                        stored.insert(id.clone(), (device.to_string(), crate::store::seq_of(s.cursor)));
                    assert!(earlier.is_none(), "{id} created twice");
                }
                Put::Stored(s) => {
                    found.push((id.clone(), device.to_string(), crate::store::seq_of(s.cursor)))
                }
                Put::QuotaExceeded => panic!("{id} refused with no cap"),
                Put::Conflict(_) => conflicts.push((id.clone(), device.to_string())),
            }
        }
        assert_eq!(stored.len(), 10, "each id stored once: {stored:?}");
        for (id, device, seq) in &found {
            assert_eq!(
                stored.get(id),
                Some(&(device.clone(), *seq)),
                "{id} found again from {device}"
            );
        }
        for (id, device) in &conflicts {
            let (owner, _) = &stored[id];
            assert_ne!(owner, device, "{id} refused to the device that stored it");
        }
        // dv_2's m0, and the m5 of the device that came second (dv_1 sent it twice).
        let m5_refused = if stored["m5"].0 == "dv_2" { 2 } else { 1 };
        assert_eq!(conflicts.len(), 1 + m5_refused, "{conflicts:?}");
        assert_eq!(stored.len() - 1 + found.len() + conflicts.len(), sends.len());
        let rows: Vec<(String, String, i64)> =
            sqlx::query_as("SELECT item_id, device_id, seq FROM items WHERE kind = 'message'")
                .fetch_all(&store.pool)
                .await
                .expect("read");
        let in_db: HashMap<String, (String, i64)> = rows.into_iter().map(|(i, d, s)| (i, (d, s))).collect();
        assert_eq!(in_db, stored, "stored is exactly what was acknowledged as new");
        let pending: i64 =
            sqlx::query_scalar("SELECT messages - processed FROM agent_counts WHERE agent_id = 'ag_1'")
                .fetch_one(&store.pool)
                .await
                .expect("counted");
        assert_eq!(pending, 10, "the counter agrees with the rows");
        let counts = store.writer_counts();
        assert!(counts.commits.get() < 23, "22 sends at once shared commits");
    }

    #[tokio::test]
    async fn a_task_that_fails_in_a_batch_fails_alone_and_the_others_are_stored() {
        let Some((store, _dir)) = store().await else {
            return;
        };
        // dv_9 is no device: its insert breaks the foreign key, and with it the batch's statement.
        let mut sends: Vec<(&str, &str, String, u32)> = (0..10)
            .map(|i| ("ag_1", "dv_1", format!("m{i}"), u32::MAX))
            .collect();
        sends.insert(5, ("ag_1", "dv_9", "bad".to_string(), u32::MAX));
        let outcomes = send_at_once(&store, &sends).await;
        let mut seqs = Vec::new();
        for ((_, device, id, _), outcome) in sends.iter().zip(outcomes) {
            match (device, outcome) {
                (&"dv_9", Err(_)) => {}
                (&"dv_9", other) => panic!("the unknown device's task must fail, got {other:?}"),
                (_, Ok(Put::Stored(s))) if s.created => seqs.push(crate::store::seq_of(s.cursor)),
                (_, other) => panic!("{id} must be stored, got {other:?}"),
            }
        }
        assert_eq!(seqs.len(), 10);
        let stored: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM items WHERE kind = 'message'")
            .fetch_one(&store.pool)
            .await
            .expect("counted");
        assert_eq!(stored, 10, "each good task stored once, the bad one not at all");
        // The batch that failed counted nothing (rolled back); the tasks stored alone were counted by the trigger.
        let pending: i64 =
            sqlx::query_scalar("SELECT messages - processed FROM agent_counts WHERE agent_id = 'ag_1'")
                .fetch_one(&store.pool)
                .await
                .expect("counted");
        assert_eq!(pending, 10, "the counter agrees with the rows");
    }
}
