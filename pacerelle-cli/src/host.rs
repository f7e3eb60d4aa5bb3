//! This computer's name, for the default name of the agent `up` creates.

/// The name the relay accepts at most, in characters.
const MAX_NAME_CHARS: usize = 100;

/// What an agent is called when the user gives no name: this computer's name, else "local agent".
pub fn default_agent_name() -> String {
    raw_host_name()
        .and_then(|raw| name_from(&raw))
        .unwrap_or_else(|| "local agent".to_string())
}

fn raw_host_name() -> Option<String> {
    let from_file = |path: &str| std::fs::read_to_string(path).ok();
    std::env::var("COMPUTERNAME")
        .ok()
        .or_else(|| from_file("/proc/sys/kernel/hostname"))
        .or_else(|| from_file("/etc/hostname"))
        .or_else(|| {
            let out = std::process::Command::new("hostname")
                .stdin(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .output()
                .ok()?;
            out.status
                .success()
                .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
        })
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
