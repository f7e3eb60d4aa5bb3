//! This computer: its name, for the default name of the agent `up` creates, and where the programs that
//! `up`'s host configurations run are.

use std::path::{Path, PathBuf};

/// The name the relay accepts at most, in characters.
const MAX_NAME_CHARS: usize = 100;

/// What an agent is called when the user gives no name: this computer's name, else "local agent".
pub fn default_agent_name() -> String {
    pacerelle_client::machine::machine_name()
        .and_then(|raw| name_from(&raw))
        .unwrap_or_else(|| "local agent".to_string())
}

/// A host name made a display name: trimmed, its domain (`.local`, `.lan`, …) dropped, control characters
/// left out, at most [`MAX_NAME_CHARS`]; `None` when nothing is left.
fn name_from(raw: &str) -> Option<String> {
    let first = raw.trim().split('.').next().unwrap_or_default();
    let name: String = first
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_NAME_CHARS)
        .collect();
    let name = name.trim();
    (!name.is_empty() && name != "localhost").then(|| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_name_becomes_a_display_name() {
        assert_eq!(name_from("anas-laptop\n").as_deref(), Some("anas-laptop"));
        assert_eq!(name_from("Anas-MacBook.local").as_deref(), Some("Anas-MacBook"));
        assert_eq!(name_from("build01.ci.example.com").as_deref(), Some("build01"));
        assert_eq!(name_from("  \n"), None);
        assert_eq!(name_from("localhost"), None);
        assert_eq!(name_from(&"x".repeat(300)).map(|n| n.len()), Some(MAX_NAME_CHARS));
    }

    #[test]
    fn there_is_always_a_default_name() {
        assert!(!default_agent_name().is_empty());
    }
}

/// The absolute path of the companion program `name` (`pacerelle-mcp`): beside the running `pacerelle`
/// (one `cargo build --release` puts both in `target/release/`, `cargo install` in `~/.cargo/bin/`), else
/// on PATH. `None` when it is in neither place.
pub fn find_program(name: &str) -> Option<PathBuf> {
    let file = format!("{name}{}", std::env::consts::EXE_SUFFIX);
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join(&file)));
    beside
        .filter(|p| is_program(p))
        .or_else(|| on_path(&file, std::env::var_os("PATH")?))
}

/// The first `file` in the folders of `path` (a PATH value), made absolute.
fn on_path(file: &str, path: std::ffi::OsString) -> Option<PathBuf> {
    std::env::split_paths(&path)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join(file))
        .find(|p| is_program(p))
        .and_then(|p| std::path::absolute(p).ok())
}

fn is_program(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        path.is_file()
    }
}

#[cfg(all(test, unix))]
mod find_tests {
    use super::*;

    #[test]
    fn a_program_is_found_on_path_as_an_absolute_path() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("a temporary directory");
        let (empty, bin) = (dir.path().join("empty"), dir.path().join("bin"));
        std::fs::create_dir_all(&empty).expect("folder");
        std::fs::create_dir_all(&bin).expect("folder");
        let program = bin.join("pacerelle-mcp");
        std::fs::write(&program, "#!/bin/sh\n").expect("written");
        let path = std::env::join_paths([&empty, &bin]).expect("a PATH");
        // Not executable: not a program.
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        assert_eq!(on_path("pacerelle-mcp", path.clone()), None);
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let found = on_path("pacerelle-mcp", path).expect("found");
        assert!(found.is_absolute());
        assert_eq!(found, program);
        assert_eq!(
            on_path("pacerelle-nothing", std::env::join_paths([&bin]).expect("a PATH")),
            None
        );
    }
}
