//! Where a host keeps its files and which relay it talks to: one rule for each, used by the CLI, the MCP
//! server, the wheel and the FFI, so that they agree on one machine.

use std::path::{Path, PathBuf};

/// The variable that names the credentials folder.
pub const HOME_VAR: &str = "PACERELLE_HOME";

/// The variable that names the relay (the CLI's `--relay` takes its place when given).
pub const RELAY_URL_VAR: &str = "PACERELLE_RELAY_URL";

/// The relay address used when none is given: a relay started by `pacerelle serve` on this machine.
pub const DEFAULT_RELAY_URL: &str = "http://127.0.0.1:8787";

/// The credentials folder: `given` (`PACERELLE_HOME`, or a `--home` flag) when it is not empty, else the
/// user's config folder + `pacerelle`; `None` on a system with neither. The CLI keeps `agent.json` and its
/// pairings there, and every host of an agent its roster mark, its questions and its grants.
pub fn home_dir(given: Option<&Path>) -> Option<PathBuf> {
    match given {
        Some(dir) if !dir.as_os_str().is_empty() => Some(dir.to_path_buf()),
        _ => dirs::config_dir().map(|d| d.join("pacerelle")),
    }
}

/// [`home_dir`] as this process's environment sets it.
pub fn default_home() -> Option<PathBuf> {
    home_dir(std::env::var_os(HOME_VAR).map(PathBuf::from).as_deref())
}

/// The relay's URL, by the one precedence: `given` (the `--relay` flag, else `PACERELLE_RELAY_URL`), else
/// `stored` (saved with the credentials), else [`DEFAULT_RELAY_URL`]. A blank value counts as none; spaces
/// around one are dropped.
pub fn relay_url(given: Option<&str>, stored: Option<&str>) -> String {
    [given, stored]
        .into_iter()
        .flatten()
        .map(str::trim)
        .find(|url| !url.is_empty())
        .unwrap_or(DEFAULT_RELAY_URL)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_relay_is_the_one_given_else_the_one_stored_else_the_default() {
        assert_eq!(relay_url(Some("http://a:1"), Some("http://b:2")), "http://a:1");
        assert_eq!(relay_url(None, Some(" http://b:2 ")), "http://b:2");
        assert_eq!(relay_url(Some("  "), Some("http://b:2")), "http://b:2");
        assert_eq!(relay_url(None, Some("")), DEFAULT_RELAY_URL);
        assert_eq!(relay_url(None, None), DEFAULT_RELAY_URL);
    }

    #[test]
    fn the_home_is_the_one_given_else_the_config_folder() {
        assert_eq!(home_dir(Some(Path::new("/x/y"))), Some(PathBuf::from("/x/y")));
        let fallback = dirs::config_dir().map(|d| d.join("pacerelle"));
        assert_eq!(home_dir(Some(Path::new(""))), fallback);
        assert_eq!(home_dir(None), fallback);
    }
}
