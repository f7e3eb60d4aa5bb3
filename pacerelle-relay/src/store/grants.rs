//! Grants (docs/relay-api.md, "Grants"): what both backends share — the row, its wire value, the device's
//! list (one read for both databases) — and the rules of the three writes each backend runs in its SQL
//! (`sqlite/grants.rs`, `postgres/grants.rs`). The relay keeps metadata only: what a grant covers and its
//! signature travel sealed in the answer, and the agent checks them at every use.

use pacerelle_core::Timestamp;
use pacerelle_core::wire::{DeviceGrant, GrantRecord};

use crate::store::rows::QuestionRow;
use crate::store::{Store, ts};

type Result<T, E = crate::error::StoreError> = std::result::Result<T, E>;

/// How long a grant stays in the devices' list once it ended (expired; a revoked one until its expiry too).
pub(crate) const LISTED_AFTER_END_MS: i64 = 24 * 3600 * 1000;
/// Most grants a device's list returns (the newest).
pub(crate) const LIST_LIMIT: u32 = 200;

/// The columns of a grant row, `g` being `grants` (`device_id` … `revoked_by`, in [`GrantRow`]'s order).
macro_rules! grant_columns {
    () => {
        "g.device_id AS grant_device_id, g.granted_at, g.expires_at AS grant_expires_at, g.uses,
         g.last_used_at, g.revoked_at, g.revoked_by"
    };
}

/// A grant as stored (its id is its question's).
#[derive(Debug, Clone, sqlx::FromRow)]
pub(in crate::store) struct GrantRow {
    pub(in crate::store) grant_device_id: String,
    pub(in crate::store) granted_at: i64,
    pub(in crate::store) grant_expires_at: i64,
    pub(in crate::store) uses: i64,
    pub(in crate::store) last_used_at: Option<i64>,
    pub(in crate::store) revoked_at: Option<i64>,
    pub(in crate::store) revoked_by: Option<String>,
}

impl GrantRow {
    /// Its wire value, under the id `grant_id`.
    pub(in crate::store) fn record(self, grant_id: &str) -> GrantRecord {
        GrantRecord {
            grant_id: grant_id.to_string(),
            device_id: self.grant_device_id,
            granted_at: ts(self.granted_at),
            expires_at: ts(self.grant_expires_at),
            uses: u64::try_from(self.uses).unwrap_or(0),
            last_used_at: self.last_used_at.map(ts),
            revoked_at: self.revoked_at.map(ts),
            revoked_by: self.revoked_by,
        }
    }
}

/// A grant of a device's list: the grant, its question, and the question's envelope for that device.
#[derive(Debug, sqlx::FromRow)]
struct DeviceGrantRow {
    #[sqlx(flatten)]
    grant: GrantRow,
    #[sqlx(flatten)]
    question: QuestionRow,
    device_envelope: Option<String>,
}

/// Outcome of registering a grant.
#[derive(Debug)]
pub(crate) enum GrantPut {
    /// Stored now, or found as first stored (a registration again).
    Stored(GrantRecord),
    /// The agent has no question of this id.
    NoQuestion,
    /// The question was not answered on a phone by the device named: the grant cannot be that device's.
    NotItsAnswer,
}

impl Store {
    /// The grants of agent `agent_id` not ended before `now` − [`LISTED_AFTER_END_MS`], newest first, each with
    /// its question and the question's envelope for device `device_id` (when it was a recipient).
    pub(crate) async fn device_grants(
        &self,
        agent_id: &str,
        device_id: &str,
        now: Timestamp,
    ) -> Result<Vec<DeviceGrant>> {
        let rows: Vec<DeviceGrantRow> = on_db!(
            self.db(),
            fetch_all,
            sqlx::query_as(concat!(
                "SELECT ",
                grant_columns!(),
                ", ",
                question_columns!(),
                ", e.envelope AS device_envelope
                 FROM grants g JOIN questions q ON q.item_seq = g.item_seq JOIN items i ON i.seq = g.item_seq
                      LEFT JOIN item_envelopes e ON e.item_seq = g.item_seq AND e.device_id = $2
                 WHERE g.agent_id = $1 AND g.expires_at > $3
                 ORDER BY g.item_seq DESC LIMIT $4"
            ))
            .bind(agent_id)
            .bind(device_id)
            .bind(now.millis().saturating_sub(LISTED_AFTER_END_MS))
            .bind(i64::from(LIST_LIMIT))
        )?;
        rows.into_iter()
            .map(|row| {
                let question = match row.device_envelope {
                    Some(envelope) => Some(row.question.device_question(envelope, now)?),
                    None => None,
                };
                Ok(DeviceGrant {
                    record: row.grant.record(&row.question.item_id),
                    question,
                })
            })
            .collect()
    }
}

/// The SQL, in SQLite's placeholders, that finds a question of agent `?1` by its id `?2`: its item, state,
/// answering device and channel ([`registrable`] judges them).
pub(in crate::store) const QUESTION_OF_GRANT: &str = "SELECT q.item_seq, q.state, q.answered_by, q.channel
     FROM questions q JOIN items i ON i.seq = q.item_seq
     WHERE i.agent_id = ?1 AND i.kind = 'question' AND i.item_id = ?2";

/// The item of an agent's question by its id, as a sub-query on SQLite's `?1` (agent) and `?2` (id).
pub(in crate::store) const GRANT_ITEM: &str =
    "(SELECT seq FROM items WHERE agent_id = ?1 AND kind = 'question' AND item_id = ?2)";

/// A question found for a grant: its item, state, answering device and channel.
pub(in crate::store) type GrantQuestion = (i64, String, Option<String>, Option<String>);

/// Why a grant cannot be registered under a question.
#[derive(Debug, Clone, Copy)]
pub(in crate::store) enum Unregistrable {
    /// [`GrantPut::NoQuestion`].
    NoQuestion,
    /// [`GrantPut::NotItsAnswer`].
    NotItsAnswer,
}

impl From<Unregistrable> for GrantPut {
    fn from(refused: Unregistrable) -> GrantPut {
        match refused {
            Unregistrable::NoQuestion => GrantPut::NoQuestion,
            Unregistrable::NotItsAnswer => GrantPut::NotItsAnswer,
        }
    }
}

/// The item a grant of device `device_id` is registered under, if `found` may carry one: a question answered
/// on a phone by that very device.
pub(in crate::store) fn registrable(
    found: Option<GrantQuestion>,
    device_id: &str,
) -> Result<i64, Unregistrable> {
    let Some((seq, state, answered_by, channel)) = found else {
        return Err(Unregistrable::NoQuestion);
    };
    let its_answer = state == "answered"
        && channel.as_deref() == Some("phone")
        && answered_by.as_deref() == Some(device_id);
    if its_answer {
        Ok(seq)
    } else {
        Err(Unregistrable::NotItsAnswer)
    }
}
