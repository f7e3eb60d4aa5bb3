//! This computer's name, as every adapter names it: the label a listening session shows to a second one
//! (the MCP server), the default name of the agent `pacerelle up` creates (the CLI).

/// This machine's name: `HOSTNAME` or `COMPUTERNAME` when set, else the kernel's host name
/// (`/proc/sys/kernel/hostname`, `/etc/hostname`), else what the `hostname` program prints (on Unix).
/// Trimmed, without control characters; `None` when nothing gives one.
pub fn machine_name() -> Option<String> {
    for var in ["HOSTNAME", "COMPUTERNAME"] {
        if let Some(name) = std::env::var(var).ok().as_deref().and_then(clean) {
            return Some(name);
        }
    }
    for path in ["/proc/sys/kernel/hostname", "/etc/hostname"] {
        if let Some(name) = std::fs::read_to_string(path).ok().as_deref().and_then(clean) {
            return Some(name);
        }
    }
    #[cfg(unix)]
    {
        let out = std::process::Command::new("hostname")
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
            .ok()?;
        if !out.status.success() {
            return None;
        }
        clean(&String::from_utf8_lossy(&out.stdout))
    }
    #[cfg(not(unix))]
    None
}

/// `text` trimmed and without control characters; `None` when nothing is left.
fn clean(text: &str) -> Option<String> {
    let text: String = text.trim().chars().filter(|c| !c.is_control()).collect();
    (!text.is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cleaning() {
        assert_eq!(clean(" laptop\n"), Some("laptop".to_string()));
        assert_eq!(clean("lap\u{7}top"), Some("laptop".to_string()));
        assert_eq!(clean("\n"), None);
    }

    #[test]
    fn a_name_is_clean() {
        if let Some(name) = machine_name() {
            assert!(
                !name.is_empty() && !name.chars().any(char::is_control),
                "{name:?}"
            );
        }
    }
}
