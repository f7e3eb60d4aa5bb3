//! The questions a host asked, remembered on this machine, so that its waits judge exactly them.
//!
//! A question id names one question for good (docs/protocol.md §13), but a wait by id alone judges whatever
//! question the relay serves under that id. A host that waits later — after a `question_id_conflict`, after a
//! restart, from another process of the same agent on this machine — must know which question it asked: the
//! [`Asked`] digest of that question. This store keeps it: the digest, the text, the kind and the expiry of
//! each question asked, per agent, in memory and in a file only its owner can read
//! (`<home>/questions/<agentId>.json`, mode 0600 in a folder of mode 0700; home is `PACERELLE_HOME` or the
//! user's config folder + `pacerelle`, as for the roster marks).
//!
//! Only a successful ask is recorded: a `question_id_conflict` never replaces the entry of the question first
//! asked under an id. A wait on an id with no entry cannot be bound to a question, so a host reports no
//! approval for it ([`NOT_ASKED_HERE`]).
//!
//! The file is bounded: an entry goes once its question expired more than a day ago, and at most
//! [`MAX_ENTRIES`] are kept (the ones recorded last). Two processes that record at the same instant may
//! each write the file without the other's new entry; each keeps its own in memory, and a wait that finds no
//! entry refuses to approve, so a lost entry never turns into an approval.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use pacerelle_core::Timestamp;
use pacerelle_core::question::QuestionKind;
use serde::{Deserialize, Serialize};

use crate::agent::questions::Asked;

/// Most questions kept per agent.
pub const MAX_ENTRIES: usize = 1000;
/// How long an entry is kept after its question expired: a wait after the expiry still names the question.
pub const KEPT_AFTER_EXPIRY_MS: i64 = 24 * 3600 * 1000;
/// The code of a wait on a question id this host did not ask (no entry): it cannot be bound to the question
/// asked, so no approval is reported for it.
pub const NOT_ASKED_HERE: &str = "question_not_asked_here";

/// What a host remembers of a question it asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AskedQuestion {
    /// The question's id.
    pub question_id: String,
    /// The digest of the question as sealed ([`Asked::digest`]).
    pub digest: String,
    /// The question's text.
    pub question: String,
    /// What kind of answer it expects.
    pub kind: QuestionKind,
    /// When it expires (the expiry sealed when it was first asked).
    pub expires_at: Timestamp,
    /// When this host recorded it (by this machine's clock).
    pub recorded_at: Timestamp,
}

impl AskedQuestion {
    /// The [`Asked`] to wait with: it accepts only this question under its id.
    pub fn asked(&self) -> Asked {
        Asked {
            question_id: self.question_id.clone(),
            expires_at: self.expires_at,
            digest: Some(self.digest.clone()),
            resumed: false,
        }
    }
}

/// The file's content.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StoreFile {
    #[serde(default)]
    questions: Vec<AskedQuestion>,
}

/// The questions one agent asked from this machine.
#[derive(Debug)]
pub struct AskedStore {
    file: Option<PathBuf>,
    /// What this process recorded, by id: found even when the file cannot be written.
    recorded: Mutex<BTreeMap<String, AskedQuestion>>,
    /// Most entries kept ([`MAX_ENTRIES`]).
    max_entries: usize,
}

impl AskedStore {
    /// A store kept in `<home>/questions/<agent_id>.json`, or in memory only when `home` is `None`.
    pub fn new(home: Option<&Path>, agent_id: &str) -> Self {
        AskedStore {
            file: home.map(|h| h.join("questions").join(format!("{agent_id}.json"))),
            recorded: Mutex::new(BTreeMap::new()),
            max_entries: MAX_ENTRIES,
        }
    }

    /// The store of `agent_id` under the default home: `PACERELLE_HOME`, else the user's config folder +
    /// `pacerelle` (in memory only when there is neither).
    pub fn for_agent(agent_id: &str) -> Self {
        Self::new(crate::home::default_home().as_deref(), agent_id)
    }

    /// The file it is kept in (`None`: memory only).
    pub fn path(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// Records a question this host asked: `asked` as [`crate::AgentClient::ask_user`] returned it (with its
    /// digest), with the text and kind asked. An `asked` without a digest is not recorded. The entry of an
    /// id asked again replaces the older one (a resume carries the same digest). Fails only when the file
    /// cannot be written; the entry is kept in memory all the same.
    pub fn record(&self, asked: &Asked, question: &str, kind: QuestionKind) -> std::io::Result<()> {
        let Some(digest) = &asked.digest else {
            return Ok(());
        };
        let entry = AskedQuestion {
            question_id: asked.question_id.clone(),
            digest: digest.clone(),
            question: question.to_string(),
            kind,
            expires_at: asked.expires_at,
            recorded_at: Timestamp::now(),
        };
        let mut recorded = self.recorded.lock().unwrap_or_else(|e| e.into_inner());
        recorded.insert(entry.question_id.clone(), entry.clone());
        let now = Timestamp::now();
        recorded.retain(|_, q| kept(q, now));
        let Some(path) = &self.file else {
            return Ok(());
        };
        // What other processes recorded, then this process's entries over them, the newest last.
        let mut all: BTreeMap<String, AskedQuestion> = read(path)
            .questions
            .into_iter()
            .map(|q| (q.question_id.clone(), q))
            .collect();
        for (id, q) in recorded.iter() {
            all.insert(id.clone(), q.clone());
        }
        let mut questions: Vec<AskedQuestion> = all.into_values().filter(|q| kept(q, now)).collect();
        questions.sort_by_key(|q| q.recorded_at);
        if questions.len() > self.max_entries {
            questions.drain(..questions.len() - self.max_entries);
        }
        let kept: std::collections::HashSet<&str> =
            questions.iter().map(|q| q.question_id.as_str()).collect();
        recorded.retain(|id, _| kept.contains(id.as_str()));
        #[allow(clippy::unwrap_used)] // strings, numbers and an enum serialise infallibly
        let bytes = serde_json::to_vec(&StoreFile { questions }).unwrap();
        crate::files::write_private(path, &bytes)
    }

    /// The question this host asked under `question_id`, if it remembers one (this process's, else the
    /// file's).
    pub fn get(&self, question_id: &str) -> Option<AskedQuestion> {
        let recorded = self.recorded.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(q) = recorded.get(question_id) {
            return Some(q.clone());
        }
        drop(recorded);
        let path = self.file.as_deref()?;
        read(path)
            .questions
            .into_iter()
            .rev()
            .find(|q| q.question_id == question_id)
    }
}

/// Whether an entry is still kept at `now`: its question expired at most a day ago.
fn kept(q: &AskedQuestion, now: Timestamp) -> bool {
    q.expires_at.millis().saturating_add(KEPT_AFTER_EXPIRY_MS) >= now.millis()
}

/// The file's content; empty when it is missing or unreadable (nothing can be bound then, so nothing is
/// approved).
fn read(path: &Path) -> StoreFile {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
            tracing::warn!(path = %path.display(), error = %e, "the questions asked here do not read");
            StoreFile::default()
        }),
        Err(_) => StoreFile::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked(id: &str, digest: &str, expires_at: Timestamp) -> Asked {
        Asked {
            question_id: id.into(),
            expires_at,
            digest: Some(digest.into()),
            resumed: false,
        }
    }

    fn later(ms: i64) -> Timestamp {
        Timestamp::now().plus_millis(ms)
    }

    #[test]
    fn a_question_recorded_is_found_again_after_a_restart() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = AskedStore::new(Some(dir.path()), "ag_1");
        store
            .record(
                &asked("q1", "dA", later(60_000)),
                "Run the tests?",
                QuestionKind::YesNo,
            )
            .expect("record");
        let again = AskedStore::new(Some(dir.path()), "ag_1");
        let found = again.get("q1").expect("kept in the file");
        assert_eq!(found.digest, "dA");
        assert_eq!(found.question, "Run the tests?");
        assert_eq!(found.asked().digest.as_deref(), Some("dA"));
        assert!(again.get("q2").is_none());
        // Another agent's questions are its own.
        assert!(AskedStore::new(Some(dir.path()), "ag_2").get("q1").is_none());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let path = again.path().expect("a file");
            let mode = std::fs::metadata(path).expect("file").permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
            let folder = std::fs::metadata(path.parent().expect("folder")).expect("folder");
            assert_eq!(folder.permissions().mode() & 0o777, 0o700);
        }
    }

    #[test]
    fn entries_long_expired_go_and_the_count_is_capped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = AskedStore {
            max_entries: 20,
            ..AskedStore::new(Some(dir.path()), "ag_1")
        };
        store
            .record(
                &asked("old", "d0", later(-KEPT_AFTER_EXPIRY_MS - 1000)),
                "old?",
                QuestionKind::YesNo,
            )
            .expect("record");
        store
            .record(
                &asked("recent", "d1", later(-1000)),
                "recent?",
                QuestionKind::YesNo,
            )
            .expect("record");
        assert!(store.get("old").is_none());
        assert!(AskedStore::new(Some(dir.path()), "ag_1").get("recent").is_some());
        for i in 0..25 {
            store
                .record(
                    &asked(&format!("q{i}"), "d", later(60_000)),
                    "q?",
                    QuestionKind::YesNo,
                )
                .expect("record");
        }
        let file: StoreFile =
            serde_json::from_slice(&std::fs::read(store.path().expect("file")).expect("read")).expect("json");
        assert_eq!(file.questions.len(), 20);
        assert!(store.get("q0").is_none(), "the first recorded went first");
        assert!(store.get("q24").is_some());
    }

    #[test]
    fn without_a_digest_nothing_is_recorded_and_memory_only_works() {
        let store = AskedStore::new(None, "ag_1");
        let mut a = asked("q1", "dA", later(60_000));
        a.digest = None;
        store.record(&a, "q?", QuestionKind::YesNo).expect("record");
        assert!(store.get("q1").is_none());
        store
            .record(&asked("q1", "dA", later(60_000)), "q?", QuestionKind::YesNo)
            .expect("record");
        assert_eq!(store.get("q1").expect("in memory").digest, "dA");
    }
}
