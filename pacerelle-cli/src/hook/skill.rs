//! The agent skill: the text every agent is told about Pacerelle ([`pacerelle_client::INSTRUCTIONS`], the MCP
//! server's instructions too), written where each host reads instructions.
//!
//! - Claude Code reads a skill from `.claude/skills/pacerelle/SKILL.md` (the project's, or `~/.claude/...` for
//!   the user): front matter naming the skill and saying when to use it, then the text. A file at that path
//!   that does not carry our marker in its front matter is someone else's and is left alone.
//! - Codex (and other hosts that read `AGENTS.md`) reads `AGENTS.md` in the project, or `AGENTS.md` in the
//!   Codex home (`$CODEX_HOME`, else `~/.codex`) for the user: the text is a section between
//!   [`BEGIN`] and [`END`] lines, replaced in place when installed again, appended when absent; every byte
//!   outside it is the user's and is kept.
//!
//! Uninstalling takes out what we wrote only: our `SKILL.md`, our section (and the file, if nothing else is
//! left in it).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use pacerelle_client::INSTRUCTIONS;

use super::Host;

/// The line that opens our section of an `AGENTS.md`.
pub const BEGIN: &str = "<!-- pacerelle:begin -->";
/// The line that closes it.
pub const END: &str = "<!-- pacerelle:end -->";
/// The line in a `SKILL.md`'s front matter that says the file is ours (a YAML comment: hosts ignore it).
pub const MARKER: &str = "# Written by `pacerelle hook install`: running it again replaces this file.";

/// The skill's `description`: what Claude Code reads to decide when the skill applies.
const DESCRIPTION: &str = "How to work for a person through Pacerelle, the encrypted inbox from their phone. \
     Use when listening for tasks sent from the phone, before a risky or irreversible action (deleting, pushing, \
     deploying, paying, sending outside), and when waiting for an answer; no answer is a no.";

/// What installing the skill did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The file was written (created or brought up to date).
    Written,
    /// The file already held exactly this text.
    Unchanged,
    /// A file at our path is not ours: left alone, for this reason.
    LeftAlone(String),
}

/// The file `SKILL.md` holds: front matter, then exactly the instructions.
pub fn skill_file() -> String {
    format!("---\nname: pacerelle\ndescription: \"{DESCRIPTION}\"\n{MARKER}\n---\n\n{INSTRUCTIONS}\n")
}

/// Our section of an `AGENTS.md`, from [`BEGIN`] to [`END`] (no newline after it).
pub fn agents_section() -> String {
    format!(
        "{BEGIN}\n<!-- Written by `pacerelle hook install`: running it again replaces this section. -->\n\
         ## Pacerelle\n\n{INSTRUCTIONS}\n{END}"
    )
}

/// What uninstalling the skill did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Removal {
    /// Our file or section was taken out.
    Removed,
    /// There was nothing of ours.
    Absent,
    /// A file at our path is not ours: left alone, for this reason.
    LeftAlone(String),
}

/// Where the skill goes for `host`: in the project folder `project`, or the user's (`None`).
pub fn path(host: Host, project: Option<&Path>) -> Result<PathBuf> {
    Ok(match (host, project) {
        (Host::ClaudeCode, Some(dir)) => dir
            .join(".claude")
            .join("skills")
            .join("pacerelle")
            .join("SKILL.md"),
        (Host::ClaudeCode, None) => super::install::home()?
            .join(".claude")
            .join("skills")
            .join("pacerelle")
            .join("SKILL.md"),
        (Host::Codex, Some(dir)) => dir.join("AGENTS.md"),
        (Host::Codex, None) => super::install::codex_home()?.join("AGENTS.md"),
    })
}

/// Writes the skill for `host` at `path`.
pub fn install(host: Host, path: &Path) -> Result<Outcome> {
    let existing = read(path)?;
    let wanted = match host {
        Host::ClaudeCode => match existing.as_deref() {
            Some(text) if !is_ours(text) => {
                return Ok(Outcome::LeftAlone(format!(
                    "{} exists and was not written by pacerelle; left alone (remove or rename it, then run \
                     this again)",
                    path.display()
                )));
            }
            _ => skill_file(),
        },
        Host::Codex => with_section(existing.as_deref().unwrap_or(""), &agents_section())
            .with_context(|| format!("{} was left alone", path.display()))?,
    };
    if existing.as_deref() == Some(wanted.as_str()) {
        return Ok(Outcome::Unchanged);
    }
    write(path, &wanted)?;
    Ok(Outcome::Written)
}

/// Takes the skill for `host` out of `path`.
pub fn uninstall(host: Host, path: &Path) -> Result<Removal> {
    let Some(text) = read(path)? else {
        return Ok(Removal::Absent);
    };
    let rest = match host {
        Host::ClaudeCode if is_ours(&text) => String::new(),
        Host::ClaudeCode => {
            return Ok(Removal::LeftAlone(format!(
                "{} was not written by pacerelle; left alone",
                path.display()
            )));
        }
        Host::Codex => {
            match without_section(&text).with_context(|| format!("{} was left alone", path.display()))? {
                Some(rest) => rest,
                None => return Ok(Removal::Absent),
            }
        }
    };
    if rest.trim().is_empty() {
        std::fs::remove_file(path).with_context(|| format!("cannot remove {}", path.display()))?;
        if host == Host::ClaudeCode
            && let Some(dir) = path.parent()
        {
            // Our skill's folder, if nothing else is in it.
            let _ = std::fs::remove_dir(dir);
        }
    } else {
        write(path, &rest)?;
    }
    Ok(Removal::Removed)
}

/// A file next to `path` that the host reads instead of it, if any: Codex reads a non-empty
/// `AGENTS.override.md` in place of `AGENTS.md` in the same folder.
pub fn shadowed_by(host: Host, path: &Path) -> Option<PathBuf> {
    if host != Host::Codex {
        return None;
    }
    let over = path.with_file_name("AGENTS.override.md");
    std::fs::read_to_string(&over)
        .ok()
        .filter(|t| !t.trim().is_empty())
        .map(|_| over)
}

/// True when `text` is a `SKILL.md` we wrote: front matter holding [`MARKER`].
fn is_ours(text: &str) -> bool {
    let mut lines = text.lines().map(|l| l.trim_end_matches('\r'));
    if lines.next() != Some("---") {
        return false;
    }
    lines.take_while(|l| *l != "---").any(|l| l == MARKER)
}

/// Byte ranges of the lines of `text` equal to `marker` (a trailing `\r` aside), without their newline.
fn marker_lines(text: &str, marker: &str) -> Vec<(usize, usize)> {
    let mut found = Vec::new();
    let mut start = 0;
    for line in text.split_inclusive('\n') {
        let bare = line.trim_end_matches('\n').trim_end_matches('\r');
        if bare == marker {
            found.push((start, start + bare.len()));
        }
        start += line.len();
    }
    found
}

/// `text` with our section: the one already there replaced in place, or `section` appended after a blank
/// line. Anything else about the markers (one without the other, two sections) is for the user to fix.
fn with_section(text: &str, section: &str) -> Result<String> {
    let begins = marker_lines(text, BEGIN);
    let ends = marker_lines(text, END);
    match (begins.as_slice(), ends.as_slice()) {
        ([], []) => {
            let mut out = text.to_string();
            if !out.is_empty() {
                if !out.ends_with('\n') {
                    out.push('\n');
                }
                out.push('\n');
            }
            out.push_str(section);
            out.push('\n');
            Ok(out)
        }
        ([(begin, _)], [(_, end)]) if begin < end => {
            Ok(format!("{}{section}{}", &text[..*begin], &text[*end..]))
        }
        _ => bail!(
            "its {BEGIN} / {END} lines do not enclose one section: fix them by hand, or remove them and run \
             this again"
        ),
    }
}

/// `text` without our section (and the blank line put before it when it was appended last); `None` when it
/// has none. Markers that do not enclose one section are for the user to fix.
fn without_section(text: &str) -> Result<Option<String>> {
    let begins = marker_lines(text, BEGIN);
    let ends = marker_lines(text, END);
    match (begins.as_slice(), ends.as_slice()) {
        ([], []) => Ok(None),
        ([(begin, _)], [(_, end)]) if begin < end => {
            let mut before = &text[..*begin];
            let rest = &text[*end..];
            let after = rest
                .strip_prefix("\r\n")
                .or_else(|| rest.strip_prefix('\n'))
                .unwrap_or(rest);
            if after.is_empty() {
                for blank in ["\r\n", "\n"] {
                    if let Some(shorter) = before.strip_suffix(blank)
                        && shorter.ends_with('\n')
                    {
                        before = shorter;
                        break;
                    }
                }
            }
            Ok(Some(format!("{before}{after}")))
        }
        _ => bail!(
            "its {BEGIN} / {END} lines do not enclose one section: fix them by hand, or remove them and run \
             this again"
        ),
    }
}

/// The file's text, `None` when there is none.
fn read(path: &Path) -> Result<Option<String>> {
    match std::fs::read(path) {
        Ok(bytes) => String::from_utf8(bytes)
            .map(Some)
            .with_context(|| format!("{} is not UTF-8 text; left alone", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// Replaces the file's content all at once (a temporary file renamed over it), through a symbolic link to
/// its target, keeping the permissions of a file that was there.
fn write(path: &Path, text: &str) -> Result<()> {
    let path = match std::fs::canonicalize(path) {
        Ok(target) => target,
        Err(_) => path.to_path_buf(),
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.pacerelle-tmp"));
    std::fs::write(&tmp, text).with_context(|| format!("cannot write {}", tmp.display()))?;
    if let Ok(meta) = std::fs::metadata(&path) {
        std::fs::set_permissions(&tmp, meta.permissions())
            .with_context(|| format!("cannot write {}", tmp.display()))?;
    }
    std::fs::rename(&tmp, &path).with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_skill_file_is_front_matter_then_exactly_the_instructions() {
        let file = skill_file();
        let (front, body) = file
            .strip_prefix("---\n")
            .and_then(|rest| rest.split_once("\n---\n\n"))
            .expect("front matter");
        assert_eq!(body, format!("{INSTRUCTIONS}\n"));
        assert!(front.starts_with("name: pacerelle\ndescription: \""), "{front}");
        assert!(is_ours(&file));
        assert!(!is_ours("---\nname: pacerelle\n---\n\nmine\n"));
        assert!(!is_ours(&format!("mine\n{MARKER}\n")));
        // The description is one double-quoted YAML scalar: nothing in it ends the quotes or escapes.
        assert!(!DESCRIPTION.contains('"') && !DESCRIPTION.contains('\\'));
        assert!(DESCRIPTION.len() <= 1024);
    }

    #[test]
    fn the_section_is_appended_once_and_replaced_in_place() {
        let section = agents_section();
        assert_eq!(with_section("", &section).expect("empty"), format!("{section}\n"));
        assert_eq!(
            with_section("# Mine", &section).expect("no newline"),
            format!("# Mine\n\n{section}\n")
        );
        let user = "# Project\n\nBuild with make.\n";
        let once = with_section(user, &section).expect("append");
        assert_eq!(once, format!("{user}\n{section}\n"));
        assert_eq!(with_section(&once, &section).expect("again"), once);

        let old = format!("{BEGIN}\nan older text\n{END}");
        let around = format!("# Before\r\n\n{old}\r\n\n## After\nkept\n");
        assert_eq!(
            with_section(&around, &section).expect("replace"),
            format!("# Before\r\n\n{section}\r\n\n## After\nkept\n")
        );
    }

    #[test]
    fn taking_the_section_out_gives_back_the_users_text() {
        let section = agents_section();
        for user in [
            "",
            "# Project\n\nBuild with make.\n",
            "# Windows\r\n\r\nline\r\n",
            "ends with a blank line\n\n",
        ] {
            let installed = with_section(user, &section).expect("install");
            assert_eq!(
                without_section(&installed).expect("uninstall").as_deref(),
                Some(user),
                "{user:?}"
            );
        }
        // Written around by the user: what was before and after stays.
        let around = format!("# Before\n\n{section}\n\n## After\nkept\n");
        assert_eq!(
            without_section(&around).expect("uninstall").as_deref(),
            Some("# Before\n\n\n## After\nkept\n")
        );
        assert_eq!(without_section("# Mine\n").expect("none"), None);
        assert!(without_section(&format!("{BEGIN}\nno end\n")).is_err());
    }

    #[test]
    fn markers_that_do_not_enclose_one_section_are_left_for_the_user() {
        let section = agents_section();
        for text in [
            format!("{BEGIN}\nno end\n"),
            format!("no begin\n{END}\n"),
            format!("{END}\nreversed\n{BEGIN}\n"),
            format!("{BEGIN}\na\n{END}\n{BEGIN}\nb\n{END}\n"),
        ] {
            assert!(with_section(&text, &section).is_err(), "{text}");
        }
        // A marker quoted inside a line is not a marker.
        let quoted = format!("Pacerelle writes `{BEGIN}` lines.\n");
        assert_eq!(
            with_section(&quoted, &section).expect("append"),
            format!("{quoted}\n{section}\n")
        );
    }
}
