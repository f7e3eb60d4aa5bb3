//! The answer log, opened on the agent side: list, search, export as JSON Lines or CSV, and export in a
//! signed form anyone can verify ([`AgentClient::export_answer_log`], [`verify_answer_log`]), with the grants
//! this host keeps and their uses ([`AgentClient::export_answer_log_with_grants`]).
//!
//! The relay keeps the metadata in clear (ids, kind, state, author, times) and the content sealed; each
//! entry is opened here with the agent's keys and judged by [`pacerelle_core::question::verdict_signed`]
//! with the signing keys the roster pins, so an entry says `approved` only for an authenticated, timely yes.
//! Expired, cancelled and denied stay distinct: a timeout is never recorded as a human rejection.

use std::io::Write;

use pacerelle_core::question::{Channel, OwnQuestion, QuestionKind, QuestionState, Verdict};
use pacerelle_core::roster::Roster;
use pacerelle_core::signing::{
    AnswerLogExport, EXPORT_FORMAT, ExportApproval, ExportDevice, ExportGrant, ExportGrantUse, ExportRecord,
    PublicKey, VerifyFailure, verify_export_json,
};
use pacerelle_core::wire::{AnswerLog, QuestionView};
use pacerelle_core::{Cursor, Timestamp};
use reqwest::Method;
use serde::{Deserialize, Serialize};

use crate::agent::AgentClient;
use crate::agent::grants::{GrantBook, KeptGrant};
use crate::agent::questions::answer_text;
use crate::error::{Error, Result};
use crate::http::Req;

/// Questions asked per page of the relay's answer log.
const PAGE: u32 = 100;

/// Which questions to list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditFilter {
    /// Only questions in this state (by the relay's record).
    pub state: Option<QuestionState>,
    /// Only questions asked at or after this time.
    pub since: Option<Timestamp>,
    /// Only questions asked before this time.
    pub until: Option<Timestamp>,
    /// At most this many entries (all when `None`).
    pub limit: Option<usize>,
    /// Partner mode: only questions addressed to this user (`externalId`, as sealed in the question).
    pub user: Option<String>,
}

/// One question of the answer log, opened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditEntry {
    /// The question's id.
    pub question_id: String,
    /// Its kind.
    pub kind: QuestionKind,
    /// The question (empty when the agent's own copy did not open: see `rejected`).
    pub question: String,
    /// The options of a choice question.
    pub options: Vec<String>,
    /// Its details.
    pub details: Option<String>,
    /// `pending`, `answered`, `expired` or `cancelled`, as the agent concludes.
    pub state: QuestionState,
    /// True only for an authenticated, timely yes or chosen options.
    pub approved: bool,
    /// The answer as text: `yes`, `no`, the options joined by `, `, or the written text.
    pub answer: Option<String>,
    /// The device that answered.
    pub answered_by: Option<String>,
    /// That device's name.
    pub answered_by_name: Option<String>,
    /// When the relay accepted the answer (the relay's clock), beside a device whose answer opened.
    pub answered_at: Option<Timestamp>,
    /// When the person answered, by the answering device's clock, as sealed in its answer.
    #[serde(default)]
    pub device_answered_at: Option<Timestamp>,
    /// When the question expires or expired.
    pub expires_at: Timestamp,
    /// When it was asked.
    pub created_at: Timestamp,
    /// When it was answered, expired or cancelled (relay's record).
    pub closed_at: Option<Timestamp>,
    /// Why what the relay reported was not accepted, if it was not.
    pub rejected: Option<String>,
    /// True when the answer carried the device's signature and it verified with the signing key pinned in
    /// the roster: the answer is in the log anyone can verify ([`AgentClient::export_answer_log`]).
    #[serde(default)]
    pub signed: bool,
    /// Where the answer that opened was given: `phone` or `host` (at the computer, through the agent; never
    /// signed, so not in the log anyone can verify). None without one.
    #[serde(default)]
    pub channel: Option<Channel>,
    /// Partner mode: the `externalId` of the user the question was addressed to, as sealed in it; `None`
    /// for a question asked of the owner.
    #[serde(default)]
    pub user: Option<String>,
}

impl AuditEntry {
    /// True when `needle` occurs, ignoring case, in the question, its details or the answer.
    pub fn matches(&self, needle: &str) -> bool {
        let needle = needle.to_lowercase();
        [
            Some(self.question.as_str()),
            self.details.as_deref(),
            self.answer.as_deref(),
        ]
        .into_iter()
        .flatten()
        .any(|field| field.to_lowercase().contains(&needle))
    }
}

/// Writes entries as JSON Lines (one JSON object per line, camelCase fields). Returns how many.
pub fn write_jsonl<W: Write>(entries: &[AuditEntry], mut writer: W) -> Result<usize> {
    for entry in entries {
        serde_json::to_writer(&mut writer, entry)
            .map_err(|e| Error::InvalidInput(format!("cannot write JSON Lines: {e}")))?;
        writer.write_all(b"\n").map_err(io_error)?;
    }
    writer.flush().map_err(io_error)?;
    Ok(entries.len())
}

/// The columns of [`write_csv`], in order.
pub const CSV_COLUMNS: [&str; 19] = [
    "questionId",
    "kind",
    "state",
    "approved",
    "question",
    "options",
    "details",
    "answer",
    "answeredBy",
    "answeredByName",
    "answeredAt",
    "expiresAt",
    "createdAt",
    "closedAt",
    "rejected",
    "deviceAnsweredAt",
    "signed",
    "channel",
    "user",
];

/// Writes entries as CSV with a header row ([`CSV_COLUMNS`]); options are joined by ` | `, times are
/// RFC 3339. Returns how many.
pub fn write_csv<W: Write>(entries: &[AuditEntry], writer: W) -> Result<usize> {
    let mut out = csv::Writer::from_writer(writer);
    let csv_error = |e: csv::Error| Error::InvalidInput(format!("cannot write CSV: {e}"));
    out.write_record(CSV_COLUMNS).map_err(csv_error)?;
    let time = |t: Option<Timestamp>| t.map(|t| t.to_rfc3339()).unwrap_or_default();
    for e in entries {
        out.write_record([
            e.question_id.clone(),
            e.kind.as_str().to_string(),
            e.state.as_str().to_string(),
            e.approved.to_string(),
            e.question.clone(),
            e.options.join(" | "),
            e.details.clone().unwrap_or_default(),
            e.answer.clone().unwrap_or_default(),
            e.answered_by.clone().unwrap_or_default(),
            e.answered_by_name.clone().unwrap_or_default(),
            time(e.answered_at),
            e.expires_at.to_rfc3339(),
            e.created_at.to_rfc3339(),
            time(e.closed_at),
            e.rejected.clone().unwrap_or_default(),
            time(e.device_answered_at),
            e.signed.to_string(),
            e.channel.map(Channel::as_str).unwrap_or_default().to_string(),
            e.user.clone().unwrap_or_default(),
        ])
        .map_err(csv_error)?;
    }
    out.flush().map_err(io_error)?;
    Ok(entries.len())
}

fn io_error(e: std::io::Error) -> Error {
    Error::InvalidInput(format!("cannot write the export: {e}"))
}

/// An entry of the answer log with what it was judged from: the agent's own copy of the question and the
/// verdict, when that copy opened.
struct Judged {
    entry: AuditEntry,
    judged: Option<(OwnQuestion, Verdict)>,
}

/// Reads an answer-log export from its bytes and verifies every record, then every grant and its uses
/// ([`verify_export_json`]): `Ok(n)` when all `n` records and every grant verify, else the first failure,
/// which names the record (from 1) and its question, or the grant (from 1, `VerifyFailure::grant`), its
/// question and the use. A document that is not an export, or whose devices list one twice, fails as record
/// 0. Needs no key and no relay: what an auditor runs.
pub fn verify_answer_log(bytes: &[u8]) -> std::result::Result<usize, VerifyFailure> {
    verify_export_json(bytes)
}

/// Puts in `export` the grants of `kept` whose question is one of its records, oldest first, each with its
/// uses (docs/crypto.md §4.9, "Grants"): each with its tool, command, paths and folder as the gate recorded
/// them (a use recorded before the book kept its folder has its grant's: the gate records a use only for a
/// call in the scope's folder). A grant whose question the export leaves out (filtered, or not accepted) is
/// left out with it.
fn add_grants(export: &mut AnswerLogExport, kept: Vec<KeptGrant>) {
    let mut grants: Vec<ExportGrant> = kept
        .into_iter()
        .filter(|k| export.records.iter().any(|r| r.question_id == k.given.id))
        .map(|k| {
            let folder = &k.given.grant.scope.folder;
            let uses = k
                .uses
                .into_iter()
                .map(|u| ExportGrantUse {
                    at: u.at,
                    tool: u.tool,
                    command: u.command,
                    paths: u.paths,
                    folder: if u.folder.is_empty() {
                        folder.clone()
                    } else {
                        u.folder
                    },
                })
                .collect();
            ExportGrant { given: k.given, uses }
        })
        .collect();
    grants.sort_by(|a, b| (a.given.granted_at, &a.given.id).cmp(&(b.given.granted_at, &b.given.id)));
    export.grants = grants;
}

impl AgentClient {
    fn audit_entry(&self, view: &QuestionView, roster: &Roster) -> Judged {
        let mut entry = AuditEntry {
            question_id: view.question_id.clone(),
            kind: view.kind,
            question: String::new(),
            options: Vec::new(),
            details: None,
            state: view.state,
            approved: false,
            answer: None,
            answered_by: None,
            answered_by_name: None,
            answered_at: None,
            device_answered_at: None,
            expires_at: view.expires_at,
            created_at: view.created_at,
            closed_at: view.closed_at,
            rejected: None,
            signed: false,
            channel: None,
            user: None,
        };
        let own = match self.open_own_question(&view.question_id, &view.self_envelope) {
            Ok(own) => own,
            Err(_) => {
                entry.rejected = Some("the agent's own copy of the question did not open".into());
                return Judged { entry, judged: None };
            }
        };
        // A record of the past: an owner revoked later still approved what it answered before (by the
        // relay's time of the answer), unlike a live verdict, where a revoked device never approves.
        let answered_at = view.answered_at;
        let user = own.payload.user.clone();
        // Without the relay's time of the answer, nothing revoked counts, as in a live verdict.
        let may_approve = |device: &str| roster.may_answer_for(device, user.as_deref(), answered_at);
        // And what its signatures had to be: a key refused, or signatures required, only after the answer do
        // not take back what counted then.
        let signing = |device: &str| roster.signing_at(device, answered_at);
        let mut verdict = self.judge_with(view, &own, may_approve, signing);
        // Likewise, an unsigned answer the relay accepted before the device's key was pinned (a device paired
        // before keys, which registered one later) counts as it did then: unsigned, never as signed.
        let pinned_later = view
            .answered_by
            .as_deref()
            .and_then(|d| roster.device(d))
            .is_some_and(|d| {
                d.signing_key_pinned_at
                    .is_some_and(|p| answered_at.is_some_and(|a| a < p))
            });
        if pinned_later && verdict.rejected == Some(pacerelle_core::question::UNSIGNED_BUT_KEYED) {
            let unsigned = |device: &str| roster.unsigned_at(device, answered_at);
            verdict = self.judge_with(view, &own, may_approve, unsigned);
        }
        let payload = &own.payload;
        entry.kind = payload.kind;
        entry.question = payload.question.clone();
        entry.options = payload.options.clone();
        entry.details = payload.details.clone();
        entry.expires_at = payload.expires_at;
        entry.state = verdict.state;
        entry.approved = verdict.approved;
        entry.answer = verdict.answer.as_ref().map(answer_text);
        let opened = crate::agent::questions::opened_as_reported(&verdict, view);
        entry.answered_by_name = view.answered_by_name.clone().filter(|_| opened);
        entry.answered_at = view.answered_at.filter(|_| opened);
        entry.answered_by = verdict.answered_by.clone();
        entry.device_answered_at = verdict.answered_at;
        entry.rejected = verdict.rejected.map(str::to_string);
        entry.signed = verdict.signature.is_some();
        entry.channel = verdict.channel;
        entry.user = payload.user.clone();
        Judged {
            entry,
            judged: Some((own, verdict)),
        }
    }

    /// The answer log, newest first, opened and judged here. Pages through the relay's log as needed. Before
    /// judging an answer of a roster device with no pinned signing key, the keys are pinned once
    /// ([`AgentClient::pin_signing_keys`]).
    async fn judged_log(&self, filter: &AuditFilter) -> Result<(Vec<Judged>, Roster)> {
        let mut roster = self.roster().await?;
        let mut pinned_once = false;
        let mut out = Vec::new();
        let mut cursor: Option<Cursor> = None;
        loop {
            let want = filter
                .limit
                .map_or(PAGE as usize, |l| l.saturating_sub(out.len()));
            if want == 0 {
                break;
            }
            let mut query = vec![("limit", want.min(PAGE as usize).to_string())];
            if let Some(state) = filter.state {
                query.push(("state", state.as_str().to_string()));
            }
            if let Some(since) = filter.since {
                query.push(("since", since.to_rfc3339()));
            }
            if let Some(until) = filter.until {
                query.push(("until", until.to_rfc3339()));
            }
            if let Some(c) = cursor {
                query.push(("cursor", c.to_string()));
            }
            let page: AnswerLog = self
                .inner
                .http
                .send(Req {
                    query: &query,
                    ..self.req::<()>(Method::GET, "/v1/agent/questions")
                })
                .await?;
            let unpinned = page.questions.iter().any(|v| {
                v.state == QuestionState::Answered
                    && v.answered_by
                        .as_deref()
                        .and_then(|d| roster.device(d))
                        .is_some_and(|d| d.signing_key.is_none())
            });
            if unpinned && !pinned_once {
                pinned_once = true;
                let listed = self.devices().await?;
                roster = self.pin_signing_keys_from(&listed, roster).await?;
            }
            out.extend(
                page.questions
                    .iter()
                    .map(|v| self.audit_entry(v, &roster))
                    .filter(|j| filter.user.is_none() || j.entry.user == filter.user),
            );
            match page.next {
                // A relay that hands back the same cursor would loop forever.
                Some(next) if Some(next) != cursor && !page.questions.is_empty() => cursor = Some(next),
                _ => break,
            }
        }
        if let Some(limit) = filter.limit {
            out.truncate(limit);
        }
        Ok((out, roster))
    }

    /// The answer log, newest first, opened here. Pages through the relay's log as needed.
    pub async fn answer_log(&self, filter: &AuditFilter) -> Result<Vec<AuditEntry>> {
        let (judged, _) = self.judged_log(filter).await?;
        Ok(judged.into_iter().map(|j| j.entry).collect())
    }

    /// The answer log in the form anyone can verify (`pacerelle audit export --format signed`, docs/crypto.md
    /// §4.9): one record per answered question whose answer opened and was accepted here, oldest first, with
    /// the question's exact sealed bytes and their digest, the device, the answer, the device's time of
    /// answering, `approved`, the signature and the key it was verified with; and every roster device with
    /// its pinned key and the relay's pairing record (name, time of pairing). An accepted answer of a device
    /// paired before signing keys is listed unsigned, and does not verify. Check it with
    /// [`verify_answer_log`]. `filter` selects questions as for [`AgentClient::answer_log`] (its `limit`
    /// keeps the newest).
    pub async fn export_answer_log(&self, filter: &AuditFilter) -> Result<AnswerLogExport> {
        let (judged, roster) = self.judged_log(filter).await?;
        let listed = self.devices().await?;
        let devices = roster
            .devices
            .iter()
            .map(|d| {
                let record = listed.iter().find(|l| l.device_id == d.device_id);
                ExportDevice {
                    device_id: d.device_id.clone(),
                    name: record.map(|r| r.name.clone()),
                    role: d.role,
                    added_at: d.added_at,
                    paired_at: record.map(|r| r.created_at),
                    revoked_at: d.revoked_at,
                    signing_key: d.signing_key.clone(),
                    fingerprint: d
                        .signing_key
                        .as_deref()
                        .and_then(PublicKey::parse)
                        .map(|k| k.fingerprint()),
                }
            })
            .collect();
        let records = judged
            .into_iter()
            .rev()
            .filter_map(|j| j.judged)
            .filter_map(|(own, verdict)| {
                let (Some(answer), Some(device_id), Some(answered_at)) =
                    (verdict.answer, verdict.answered_by, verdict.answered_at)
                else {
                    return None;
                };
                if verdict.state != QuestionState::Answered || verdict.rejected.is_some() {
                    return None;
                }
                let signing_key = roster.device(&device_id).and_then(|d| d.signing_key.clone());
                Some(ExportRecord {
                    question_id: own.question_id,
                    question: pacerelle_core::b64::encode(&own.plaintext),
                    question_digest: own.digest,
                    device_id,
                    answer,
                    answered_at,
                    approved: verdict.approved,
                    signature: verdict.signature,
                    signing_key,
                    approvals: verdict
                        .approvals
                        .into_iter()
                        .map(|a| ExportApproval {
                            device_id: a.device_id,
                            answered_at: a.answered_at,
                            signature: a.signature,
                        })
                        .collect(),
                })
            })
            .collect();
        Ok(AnswerLogExport {
            v: 1,
            format: EXPORT_FORMAT.to_string(),
            agent_id: self.inner.agent_id.clone(),
            exported_at: Timestamp::now(),
            devices,
            records,
            grants: Vec::new(),
        })
    }

    /// [`AgentClient::export_answer_log`] with the grants `book` keeps (this host's gate, docs/crypto.md
    /// §4.8b) whose question is a record of the export, each with the calls it let run: `pacerelle audit export
    /// --format signed`. [`verify_answer_log`] checks each against its record and its device. The book drops
    /// a grant that has ended the next time the gate uses one: the export holds the grants still in it.
    pub async fn export_answer_log_with_grants(
        &self,
        filter: &AuditFilter,
        book: &GrantBook,
    ) -> Result<AnswerLogExport> {
        let mut export = self.export_answer_log(filter).await?;
        let kept = book.list().map_err(|e| Error::InvalidInput(e.to_string()))?;
        add_grants(&mut export, kept);
        Ok(export)
    }

    /// The entries of the answer log whose question, details or answer contain `text` (ignoring case).
    pub async fn search_answer_log(&self, text: &str, filter: &AuditFilter) -> Result<Vec<AuditEntry>> {
        let all = self
            .answer_log(&AuditFilter {
                limit: None,
                ..filter.clone()
            })
            .await?;
        let mut found: Vec<AuditEntry> = all.into_iter().filter(|e| e.matches(text)).collect();
        if let Some(limit) = filter.limit {
            found.truncate(limit);
        }
        Ok(found)
    }

    /// Writes the answer log as JSON Lines. Returns how many entries.
    pub async fn export_jsonl<W: Write>(&self, filter: &AuditFilter, writer: W) -> Result<usize> {
        write_jsonl(&self.answer_log(filter).await?, writer)
    }

    /// Writes the answer log as CSV ([`CSV_COLUMNS`]). Returns how many entries.
    pub async fn export_csv<W: Write>(&self, filter: &AuditFilter, writer: W) -> Result<usize> {
        write_csv(&self.answer_log(filter).await?, writer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> AuditEntry {
        AuditEntry {
            question_id: "qst_1".into(),
            kind: QuestionKind::Choice,
            question: "Deploy to Production?".into(),
            options: vec!["eu, west".into(), "us".into()],
            details: Some("line one\nline \"two\"".into()),
            state: QuestionState::Answered,
            approved: true,
            answer: Some("us".into()),
            answered_by: Some("dv_1".into()),
            answered_by_name: Some("Ana's phone".into()),
            answered_at: Some(Timestamp(1_000)),
            device_answered_at: Some(Timestamp(999)),
            expires_at: Timestamp(2_000),
            created_at: Timestamp(500),
            closed_at: Some(Timestamp(1_001)),
            rejected: None,
            signed: true,
            channel: None,
            user: None,
        }
    }

    /// A signed export of one gate question, offering `cargo test` exactly or as a prefix in `/work/app`,
    /// answered yes by `dv_a`, and the prefix grant `dv_a` gave with it for 15 min (not yet in the export).
    fn gate_export(key: &pacerelle_core::signing::SigningKey) -> (AnswerLogExport, KeptGrant) {
        use pacerelle_core::grant::{CommandMatch, GivenGrant, Grant, GrantOffer, GrantScope, SignedGrantOf};
        use pacerelle_core::pairing::Role;
        use pacerelle_core::question::{Answer, QuestionPayload, question_digest};
        use pacerelle_core::signing::SignedAnswer;
        let scope = |matching| GrantScope {
            tool: "Bash".into(),
            command: Some("cargo test".into()),
            matching: Some(matching),
            folder: "/work/app".into(),
        };
        let question = QuestionPayload {
            grants: Some(GrantOffer {
                durations: vec![900, 3600],
                scopes: vec![scope(CommandMatch::Exact), scope(CommandMatch::Prefix)],
                policy: "POLICY".into(),
            }),
            question: "Bash: cargo test".into(),
            kind: QuestionKind::YesNo,
            options: Vec::new(),
            multiple: false,
            details: None,
            expires_at: Timestamp(9_000_000),
            recipients: vec!["dv_a".into()],
            answer_key: None,
            channels: Vec::new(),
            user: None,
            approvals: 1,
        };
        let bytes = serde_json::to_vec(&question).expect("json");
        let digest = question_digest(&bytes);
        let granted_at = Timestamp(1_000_000);
        let signature = SignedAnswer {
            agent_id: "ag_1",
            device_id: "dv_a",
            question_id: "q_gate",
            question_digest: &digest,
            answered_at: granted_at,
            answer: &Answer::Yes,
        }
        .sign(key);
        let public = key.public_key();
        let export = AnswerLogExport {
            v: 1,
            format: EXPORT_FORMAT.into(),
            agent_id: "ag_1".into(),
            exported_at: Timestamp(5_000_000),
            devices: vec![ExportDevice {
                device_id: "dv_a".into(),
                name: Some("Ana's phone".into()),
                role: Role::Owner,
                added_at: Timestamp(1),
                paired_at: None,
                revoked_at: None,
                signing_key: Some(public.to_b64()),
                fingerprint: Some(public.fingerprint()),
            }],
            records: vec![ExportRecord {
                question_id: "q_gate".into(),
                question: pacerelle_core::b64::encode(&bytes),
                question_digest: digest.clone(),
                device_id: "dv_a".into(),
                answer: Answer::Yes,
                answered_at: granted_at,
                approved: true,
                signature: Some(signature),
                signing_key: Some(public.to_b64()),
                approvals: Vec::new(),
            }],
            grants: Vec::new(),
        };
        let mut grant = Grant {
            scope: scope(CommandMatch::Prefix),
            expires_at: granted_at.plus_millis(900_000),
            policy: "POLICY".into(),
            signature: String::new(),
        };
        grant.signature = grant
            .signed(SignedGrantOf {
                agent_id: "ag_1",
                device_id: "dv_a",
                question_id: "q_gate",
                question_digest: &digest,
                granted_at,
            })
            .sign(key);
        let kept = KeptGrant {
            given: GivenGrant {
                id: "q_gate".into(),
                device_id: "dv_a".into(),
                granted_at,
                question: pacerelle_core::b64::encode(&bytes),
                grant,
            },
            device_name: Some("Ana's phone".into()),
            uses: Vec::new(),
            revoked_at: None,
        };
        (export, kept)
    }

    #[test]
    fn the_grants_the_book_keeps_go_into_the_export_with_their_uses_and_verify() {
        use crate::agent::grants::GrantedCall;
        use pacerelle_core::signing::{SigningKey, verify_export};
        let key = SigningKey::from_seed([7; 32]).expect("a key");
        let (mut export, kept) = gate_export(&key);
        let dir = tempfile::tempdir().expect("a folder");
        let book = GrantBook::at(dir.path().join("ag_1.json"));
        // A grant whose question the export leaves out (say, filtered by time) is left out with it.
        let mut elsewhere = kept.clone();
        elsewhere.given.id = "q_earlier".into();
        book.keep(elsewhere).expect("kept");
        book.keep(kept).expect("kept");
        for (after, command) in [(60_000, "cargo test"), (120_000, "cargo test -p core")] {
            let call = GrantedCall {
                tool: "Bash",
                command: Some(command),
                paths: &[],
                folder: "/work/app",
            };
            let used = book
                .record_use("q_gate", call, Timestamp(1_000_000 + after))
                .expect("the book");
            assert!(used.is_some(), "{command}");
        }
        add_grants(&mut export, book.list().expect("the book"));
        assert_eq!(export.grants.len(), 1);
        let grant = &export.grants[0];
        assert_eq!(grant.given.id, "q_gate");
        let uses: Vec<(i64, Option<&str>, &str)> = grant
            .uses
            .iter()
            .map(|u| (u.at.0, u.command.as_deref(), u.folder.as_str()))
            .collect();
        assert_eq!(
            uses,
            [
                (1_060_000, Some("cargo test"), "/work/app"),
                (1_120_000, Some("cargo test -p core"), "/work/app")
            ]
        );
        assert_eq!(verify_export(&export), Ok(1));
        let bytes = serde_json::to_vec(&export).expect("json");
        assert_eq!(verify_answer_log(&bytes), Ok(1));
        // The file edited: a use's command, the grant's expiry.
        let mut edited = export.clone();
        edited.grants[0].uses[1].command = Some("cargo publish".into());
        let failure = verify_answer_log(&serde_json::to_vec(&edited).expect("json")).expect_err("edited");
        assert_eq!(
            failure.to_string(),
            "grant 1 (question q_gate), use 2: the use is not covered by the grant's scope (its tool, command or \
             folder)"
        );
        let mut edited = export.clone();
        edited.grants[0].given.grant.expires_at = Timestamp(1_000_000 + 3_600_000);
        let failure = verify_answer_log(&serde_json::to_vec(&edited).expect("json")).expect_err("edited");
        assert_eq!(
            failure.to_string(),
            "grant 1 (question q_gate): the grant's signature does not verify"
        );
        // Without a record of its question, the book's grant stays out, and the export is what it was.
        let (mut plain, _) = gate_export(&key);
        plain.records.clear();
        let before = serde_json::to_vec(&plain).expect("json");
        add_grants(&mut plain, book.list().expect("the book"));
        assert_eq!(serde_json::to_vec(&plain).expect("json"), before);
    }

    #[test]
    fn search_ignores_case_and_looks_at_question_details_and_answer() {
        let e = entry();
        assert!(e.matches("production"));
        assert!(e.matches("LINE \"TWO"));
        assert!(e.matches("US"));
        assert!(!e.matches("staging"));
        assert!(!e.matches("dv_1"), "ids are not content");
    }

    #[test]
    fn jsonl_has_one_object_per_line() {
        let mut out = Vec::new();
        assert_eq!(write_jsonl(&[entry(), entry()], &mut out).expect("write"), 2);
        let text = String::from_utf8(out).expect("utf-8");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        let back: AuditEntry = serde_json::from_str(lines[0]).expect("parses");
        assert_eq!(back, entry());
        assert!(lines[0].contains("\"questionId\":\"qst_1\""));
    }

    #[test]
    fn csv_quotes_commas_quotes_and_newlines() {
        let mut out = Vec::new();
        write_csv(&[entry()], &mut out).expect("write");
        let mut reader = csv::Reader::from_reader(out.as_slice());
        let headers = reader.headers().expect("headers").clone();
        assert_eq!(headers.iter().collect::<Vec<_>>(), CSV_COLUMNS.to_vec());
        let row = reader.records().next().expect("a row").expect("valid");
        assert_eq!(&row[4], "Deploy to Production?");
        assert_eq!(&row[5], "eu, west | us");
        assert_eq!(&row[6], "line one\nline \"two\"");
        assert_eq!(&row[2], "answered");
        assert_eq!(&row[3], "true");
        assert_eq!(&row[11], "1970-01-01T00:00:02.000Z");
        assert_eq!(
            &row[10], "1970-01-01T00:00:01.000Z",
            "answeredAt: the relay's clock"
        );
        assert_eq!(
            &row[15], "1970-01-01T00:00:00.999Z",
            "deviceAnsweredAt: the phone's clock"
        );
        assert_eq!(&row[16], "true", "signed");
    }
}
