//! The grants the gate keeps (docs/crypto.md §4.8b): each one a device signed with its `yes`, checked when its
//! answer was judged, kept in a file of the agent's home until it ends, with every use.
//!
//! The file is read and written under an exclusive lock on a file beside it, so that two gate processes (two
//! tool calls at once) never lose a grant or a use. Each is written atomically (a temporary file, synced, then
//! renamed): a crash leaves the old list or the new one, never half of one.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use pacerelle_core::Timestamp;
use pacerelle_core::grant::GivenGrant;
use serde::{Deserialize, Serialize};

use std::io::{Error, Result};

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

    /// The first grant, of those `usable` accepts, that is live at `now`, was given under the policy of
    /// digest `policy` and covers `call`; its use is recorded before it is returned. Grants that ended are
    /// dropped on the way.
    pub fn use_for(
        &self,
        call: GrantedCall<'_>,
        policy: &str,
        now: Timestamp,
        usable: impl Fn(&KeptGrant) -> bool,
    ) -> Result<Option<KeptGrant>> {
        let _lock = self.lock()?;
        let mut file = self.read()?;
        let before = file.grants.len();
        file.grants.retain(|g| g.given.grant.live_at(now));
        let found = file.grants.iter_mut().find(|g| {
            let grant = &g.given.grant;
            grant.policy == policy
                && grant
                    .scope
                    .covers(call.tool, call.command, call.paths, call.folder)
                && usable(g)
        });
        let used = found.map(|g| {
            g.uses.push(GrantUse {
                at: now,
                tool: call.tool.to_string(),
                command: call.command.map(str::to_string),
            });
            g.clone()
        });
        if used.is_some() || file.grants.len() != before {
            self.write(&file)?;
        }
        Ok(used)
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
        let used = book
            .use_for(call("cargo test"), "P", Timestamp(2_000), all)
            .expect("ok");
        assert_eq!(used.map(|g| g.given.id).as_deref(), Some("qst_a"));
        assert!(
            book.use_for(call("cargo test"), "OTHER", Timestamp(2_000), all)
                .expect("ok")
                .is_none()
        );
        assert!(
            book.use_for(call("cargo publish"), "P", Timestamp(2_000), all)
                .expect("ok")
                .is_none()
        );
        assert!(
            book.use_for(call("cargo test"), "P", Timestamp(2_000), |_| false)
                .expect("ok")
                .is_none()
        );
        let used = book
            .use_for(call("cargo build --release"), "P", Timestamp(3_000), all)
            .expect("ok");
        assert_eq!(used.map(|g| g.uses.len()), Some(1));
        // qst_a ends at 10 000: dropped at the next use, whichever grant that use finds.
        assert!(
            book.use_for(call("cargo test"), "P", Timestamp(10_000), all)
                .expect("ok")
                .is_none()
        );
        let left = book.list().expect("read");
        assert_eq!(
            left.iter().map(|g| g.given.id.as_str()).collect::<Vec<_>>(),
            ["qst_b"]
        );
        assert_eq!(left[0].uses[0].command.as_deref(), Some("cargo build --release"));
    }
}
