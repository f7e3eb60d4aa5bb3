//! Embeds the commit the program is built from in `--version` (`PACERELLE_COMMIT`, read by `env!`):
//! `PACERELLE_COMMIT` when set (a release pipeline that knows it), else `git rev-parse --short=12 HEAD` in
//! this workspace's checkout, else the commit that `cargo package` recorded in `.cargo_vcs_info.json` (a
//! crate from crates.io has no `.git`), else `unknown`.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=PACERELLE_COMMIT");
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let commit = std::env::var("PACERELLE_COMMIT")
        .ok()
        .map(|c| c.trim().to_string())
        .filter(|c| !c.is_empty())
        .or_else(|| from_git(&manifest))
        .or_else(|| from_vcs_info(&manifest))
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=PACERELLE_COMMIT={commit}");
}

/// The short commit of the checkout, only when this crate sits in the workspace's own checkout (a `.git`
/// beside the workspace's folders): a crate unpacked inside some other repository must not take its commit.
/// Asks to be run again when HEAD or the branch it names moves.
fn from_git(manifest: &Path) -> Option<String> {
    let root = manifest.parent()?;
    if !root.join(".git").exists() {
        return None;
    }
    let git = |args: &[&str]| {
        let out = Command::new("git").current_dir(root).args(args).output().ok()?;
        let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
        (out.status.success() && !text.is_empty()).then_some(text)
    };
    let commit = git(&["rev-parse", "--short=12", "HEAD"])?;
    let absolute = |p: String| {
        let p = PathBuf::from(p);
        if p.is_absolute() { p } else { root.join(p) }
    };
    if let Some(dir) = git(&["rev-parse", "--git-dir"]).map(absolute) {
        rerun_if_exists(&dir.join("HEAD"));
    }
    if let Some(common) = git(&["rev-parse", "--git-common-dir"]).map(absolute) {
        rerun_if_exists(&common.join("packed-refs"));
        if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
            rerun_if_exists(&common.join(branch));
        }
    }
    Some(commit)
}

/// A path cargo should watch; a missing one is left out, since cargo would run this script at every build.
fn rerun_if_exists(path: &Path) {
    if path.exists() {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}

/// `"sha1": "…"` of the `.cargo_vcs_info.json` that `cargo package` writes, shortened like git's.
fn from_vcs_info(manifest: &Path) -> Option<String> {
    let text = std::fs::read_to_string(manifest.join(".cargo_vcs_info.json")).ok()?;
    let after = text.split("\"sha1\"").nth(1)?;
    let sha: String = after
        .split('"')
        .nth(1)?
        .chars()
        .take_while(char::is_ascii_hexdigit)
        .collect();
    (sha.len() >= 12).then(|| sha[..12].to_string())
}
