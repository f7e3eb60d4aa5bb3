//! The grants the gate keeps (docs/crypto.md §4.8b): each one a device signed with its `yes`, checked when its
//! answer was judged, kept in a file of the agent's home with every use (for the signed export, until
//! `KEEP_ENDED_MS` (30 days) after it ended), and registered at the relay ([`AgentClient::register_grant`]), where owner
//! devices list and revoke it and where each use is reported before the call runs
//! ([`AgentClient::use_grant`]).
//!
//! The file is read and written under an exclusive lock on a file beside it, so that two gate processes (two
//! tool calls at once) never lose a grant or a use. Each is written atomically (a temporary file, synced, then
//! renamed): a crash leaves the old list or the new one, never half of one.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use pacerelle_core::Timestamp;
use pacerelle_core::grant::GivenGrant;
use pacerelle_core::wire::{GrantRecord, PutGrant};
use reqwest::Method;
use serde::{Deserialize, Serialize};

use std::io::{Error, Result};

use crate::agent::AgentClient;
use crate::http::Req;

/// How long a grant stays in the book after it ended (expired or revoked), with its uses, for the export.
pub const KEEP_ENDED_MS: i64 = 30 * 24 * 3600 * 1000;

/// The file of kept grants in an agent's home.
pub const GRANTS_FILE: &str = "grants.json";

/// A grant the gate keeps: the checked grant with its question (checked again at each use), the name of the
/// device that gave it, and each call it let run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeptGrant {
    /// The grant, who gave it to which question, and that question's bytes.
    #[serde(flatten)]
    pub given: GivenGrant,
    /// The granting device's name, as the relay reported it (not signed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_name: Option<String>,
    /// The calls it let run, oldest first.
    #[serde(default)]
    pub uses: Vec<GrantUse>,
    /// When an owner device revoked it, as the relay reported at a use: no call runs by it any more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<Timestamp>,
}

impl KeptGrant {
    /// Whether it may let a call run at `now`: live by its signed expiry and not known to be revoked.
    pub fn live_at(&self, now: Timestamp) -> bool {
        self.revoked_at.is_none() && self.given.grant.live_at(now)
    }

    /// Whether it covers `call` under the policy of digest `policy`.
    pub fn covers(&self, call: GrantedCall<'_>, policy: &str) -> bool {
        let grant = &self.given.grant;
        grant.policy == policy
            && grant
                .scope
                .covers(call.tool, call.command, call.paths, call.folder)
    }
}

/// One call a grant let run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GrantUse {
    /// When, by the agent's clock.
    pub at: Timestamp,
    /// The tool.
    pub tool: String,
    /// Its shell command, for a shell tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The paths it touched.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    /// Its working directory.
    #[serde(default)]
    pub folder: String,
}

/// A call, as a grant's scope reads it.
#[derive(Debug, Clone, Copy)]
pub struct GrantedCall<'a> {
    /// The tool's name.
    pub tool: &'a str,
    /// The shell command, for a shell tool.
    pub command: Option<&'a str>,
    /// The paths it touches.
    pub paths: &'a [String],
    /// The project folder: the call's working directory.
    pub folder: &'a str,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct GrantFile {
    #[serde(default)]
    grants: Vec<KeptGrant>,
}

/// The kept grants of one agent, in one file.
#[derive(Debug, Clone)]
pub struct GrantBook {
    path: PathBuf,
}

impl GrantBook {
    /// The book in `path` (usually [`GRANTS_FILE`] in the agent's home); nothing is read until it is used.
    pub fn at(path: impl Into<PathBuf>) -> GrantBook {
        GrantBook { path: path.into() }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every grant kept, live or not (an ended one is dropped at the next use), oldest first.
    pub fn list(&self) -> Result<Vec<KeptGrant>> {
        let _lock = self.lock()?;
        Ok(self.read()?.grants)
    }

    /// Keeps a grant (again: the same id replaces nothing).
    pub fn keep(&self, grant: KeptGrant) -> Result<()> {
        let _lock = self.lock()?;
        let mut file = self.read()?;
        if file.grants.iter().any(|g| g.given.id == grant.given.id) {
            return Ok(());
        }
        file.grants.push(grant);
        self.write(&file)
    }

    /// The grants, of those `usable` accepts, that may let `call` run at `now` under the policy of digest
    /// `policy`, oldest first. Grants ended more than `KEEP_ENDED_MS` (30 days) ago are dropped on the way.
    pub fn candidates(
        &self,
        call: GrantedCall<'_>,
        policy: &str,
        now: Timestamp,
        usable: impl Fn(&KeptGrant) -> bool,
    ) -> Result<Vec<KeptGrant>> {
        let _lock = self.lock()?;
        let mut file = self.read()?;
        let before = file.grants.len();
        let forgotten = Timestamp(now.millis().saturating_sub(KEEP_ENDED_MS));
        file.grants.retain(|g| {
            let ended = g.revoked_at.unwrap_or(g.given.grant.expires_at);
            ended.min(g.given.grant.expires_at) > forgotten
        });
        if file.grants.len() != before {
            self.write(&file)?;
        }
        Ok(file
            .grants
            .into_iter()
            .filter(|g| g.live_at(now) && g.covers(call, policy) && usable(g))
            .collect())
    }

    /// Records that grant `id` let `call` run at `now`; returns the grant with that use, or `None` when the
    /// book no longer holds it.
    pub fn record_use(&self, id: &str, call: GrantedCall<'_>, now: Timestamp) -> Result<Option<KeptGrant>> {
        let _lock = self.lock()?;
        let mut file = self.read()?;
        let Some(grant) = file.grants.iter_mut().find(|g| g.given.id == id) else {
            return Ok(None);
        };
        grant.uses.push(GrantUse {
            at: now,
            tool: call.tool.to_string(),
            command: call.command.map(str::to_string),
            paths: call.paths.to_vec(),
            folder: call.folder.to_string(),
        });
        let used = grant.clone();
        self.write(&file)?;
        Ok(Some(used))
    }

    /// Records that grant `id` was revoked at `at` (the first time learned is kept).
    pub fn revoked(&self, id: &str, at: Timestamp) -> Result<()> {
        let _lock = self.lock()?;
        let mut file = self.read()?;
        match file.grants.iter_mut().find(|g| g.given.id == id) {
            Some(g) if g.revoked_at.is_none() => g.revoked_at = Some(at),
            _ => return Ok(()),
        }
        self.write(&file)
    }

    fn read(&self) -> Result<GrantFile> {
        match std::fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                Error::other(format!(
                    "the grants file {} is unreadable: {e}",
                    self.path.display()
                ))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(GrantFile::default()),
            Err(e) => Err(Error::other(format!("cannot read {}: {e}", self.path.display()))),
        }
    }

    fn write(&self, file: &GrantFile) -> Result<()> {
        let bytes = serde_json::to_vec_pretty(file).map_err(|e| Error::other(e.to_string()))?;
        crate::files::write_private(&self.path, &bytes)
            .map_err(|e| Error::other(format!("cannot write {}: {e}", self.path.display())))
    }

    /// An exclusive lock on `<file>.lock`, held until the returned file is dropped.
    fn lock(&self) -> Result<File> {
        let lock = self.path.with_extension("lock");
        if let Some(dir) = lock.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| Error::other(format!("cannot create {}: {e}", dir.display())))?;
        }
        let mut options = OpenOptions::new();
        options.create(true).truncate(false).write(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let file = options
            .open(&lock)
            .map_err(|e| Error::other(format!("cannot open {}: {e}", lock.display())))?;
        file.lock()
            .map_err(|e| Error::other(format!("cannot lock {}: {e}", lock.display())))?;
        Ok(file)
    }
}

impl AgentClient {
    /// Registers a grant this agent kept at the relay (`PUT /v1/agent/grants/{id}`), so that owner devices
    /// list it and may revoke it. Idempotent.
    pub async fn register_grant(&self, given: &GivenGrant) -> crate::Result<GrantRecord> {
        let body = PutGrant {
            device_id: given.device_id.clone(),
            granted_at: given.granted_at,
            expires_at: given.grant.expires_at,
        };
        let path = format!("/v1/agent/grants/{}", given.id);
        self.inner
            .http
            .send(Req {
                body: Some(&body),
                ..self.req(Method::PUT, &path)
            })
            .await
    }

    /// Reports a use of a grant to the relay before the call runs (`POST /v1/agent/grants/{id}/uses`) and
    /// returns the grant as the relay keeps it: `revokedAt` set means an owner device revoked it, and the
    /// call must be asked instead. A grant the relay does not know (its registration failed when it was
    /// kept) is registered first.
    pub async fn use_grant(&self, given: &GivenGrant) -> crate::Result<GrantRecord> {
        let path = format!("/v1/agent/grants/{}/uses", given.id);
        match self.inner.http.send(self.req::<()>(Method::POST, &path)).await {
            Err(e) if e.kind() == crate::ErrorKind::NotFound => {
                self.register_grant(given).await?;
                self.inner.http.send(self.req::<()>(Method::POST, &path)).await
            }
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pacerelle_core::grant::{CommandMatch, Grant, GrantScope};

    fn kept(id: &str, command: &str, matching: CommandMatch, expires_at: i64) -> KeptGrant {
        KeptGrant {
            given: GivenGrant {
                id: id.into(),
                device_id: "dv_1".into(),
                granted_at: Timestamp(1_000),
                question: "AA".into(),
                grant: Grant {
                    scope: GrantScope {
                        tool: "Bash".into(),
                        command: Some(command.into()),
                        matching: Some(matching),
                        folder: "/app".into(),
                    },
                    expires_at: Timestamp(expires_at),
                    policy: "P".into(),
                    signature: "S".into(),
                },
            },
            device_name: Some("phone".into()),
            uses: Vec::new(),
            revoked_at: None,
        }
    }

    fn call(command: &str) -> GrantedCall<'_> {
        GrantedCall {
            tool: "Bash",
            command: Some(command),
            paths: &[],
            folder: "/app",
        }
    }

    #[test]
    fn a_live_grant_covers_its_calls_records_each_use_and_ends() {
        let dir = tempfile::tempdir().expect("a folder");
        let book = GrantBook::at(dir.path().join(GRANTS_FILE));
        assert!(book.list().expect("empty").is_empty());
        book.keep(kept("qst_a", "cargo test", CommandMatch::Exact, 10_000))
            .expect("kept");
        book.keep(kept("qst_a", "cargo test", CommandMatch::Exact, 99_000))
            .expect("a retry");
        book.keep(kept("qst_b", "cargo build", CommandMatch::Prefix, 20_000))
            .expect("kept");
        let all = |_: &KeptGrant| true;
        let ids = |found: Vec<KeptGrant>| found.into_iter().map(|g| g.given.id).collect::<Vec<_>>();
        let at = |ms| Timestamp(ms);
        assert_eq!(
            ids(book
                .candidates(call("cargo test"), "P", at(2_000), all)
                .expect("ok")),
            ["qst_a"]
        );
        assert!(
            book.candidates(call("cargo test"), "OTHER", at(2_000), all)
                .expect("ok")
                .is_empty()
        );
        assert!(
            book.candidates(call("cargo publish"), "P", at(2_000), all)
                .expect("ok")
                .is_empty()
        );
        assert!(
            book.candidates(call("cargo test"), "P", at(2_000), |_| false)
                .expect("ok")
                .is_empty()
        );
        let used = book
            .record_use("qst_b", call("cargo build --release"), at(3_000))
            .expect("ok")
            .expect("held");
        assert_eq!((used.uses.len(), used.uses[0].folder.as_str()), (1, "/app"));
        assert!(
            book.record_use("qst_z", call("ls"), at(3_000))
                .expect("ok")
                .is_none()
        );
        // Ended at 10 000: no more a candidate, but kept with its uses for the export…
        assert!(
            book.candidates(call("cargo test"), "P", at(10_000), all)
                .expect("ok")
                .is_empty()
        );
        // … and a revoked one likewise, from the revocation on.
        book.revoked("qst_b", at(4_000)).expect("ok");
        book.revoked("qst_b", at(5_000))
            .expect("the first revocation is kept");
        assert!(
            book.candidates(call("cargo build"), "P", at(4_500), all)
                .expect("ok")
                .is_empty()
        );
        let held = book.list().expect("read");
        assert_eq!(held.len(), 2);
        assert_eq!(held[1].revoked_at, Some(at(4_000)));
        assert_eq!(held[1].uses[0].command.as_deref(), Some("cargo build --release"));
        // Dropped once ended for longer than the book keeps them.
        book.candidates(call("ls"), "P", at(4_000 + KEEP_ENDED_MS), all)
            .expect("ok");
        assert_eq!(ids(book.list().expect("read")), ["qst_a"]);
        book.candidates(call("ls"), "P", at(10_000 + KEEP_ENDED_MS), all)
            .expect("ok");
        assert!(book.list().expect("read").is_empty());
    }
}
