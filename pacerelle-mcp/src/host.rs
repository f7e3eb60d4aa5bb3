//! The label a session shows to a second session: the machine (the client's `machine_name`) and, when
//! cheaply known, the MCP host.

/// Longest label sent to the relay.
const MAX_LABEL_CHARS: usize = 120;

/// `"laptop / claude (pacerelle-mcp pid 1234)"`: this machine's name, the parent process (the MCP host
/// that started this server) when it can be read cheaply, and this process's id.
pub fn host_label() -> String {
    let machine = pacerelle_client::machine::machine_name().unwrap_or_else(|| "unknown machine".to_string());
    let pid = std::process::id();
    let label = match parent_name() {
        Some(parent) => format!("{machine} / {parent} (pacerelle-mcp pid {pid})"),
        None => format!("{machine} / pacerelle-mcp pid {pid}"),
    };
    label.chars().take(MAX_LABEL_CHARS).collect()
}

/// Longest folder name sent to the relay.
const MAX_FOLDER_CHARS: usize = 80;

/// The name of the folder this server runs in (an MCP host starts it in the project's folder), as the phone
/// shows a session's folder: the last component only, never the path.
pub fn folder() -> Option<String> {
    let dir = std::env::current_dir().ok()?;
    let name = dir.file_name()?.to_string_lossy();
    clean(&name).map(|n| n.chars().take(MAX_FOLDER_CHARS).collect())
}

fn clean(text: &str) -> Option<String> {
    let text: String = text.trim().chars().filter(|c| !c.is_control()).collect();
    (!text.is_empty()).then_some(text)
}

#[cfg(unix)]
fn parent_name() -> Option<String> {
    let ppid = std::os::unix::process::parent_id();
    if ppid <= 1 {
        return None;
    }
    let name = match std::fs::read_to_string(format!("/proc/{ppid}/comm")) {
        Ok(name) => name,
        Err(_) => {
            let out = std::process::Command::new("ps")
                .args(["-o", "comm=", "-p", &ppid.to_string()])
                .output()
                .ok()?;
            String::from_utf8_lossy(&out.stdout).into_owned()
        }
    };
    let name = clean(&name)?;
    // `ps` may print a full path: keep the program's name.
    Some(name.rsplit('/').next().unwrap_or(&name).to_string())
}

#[cfg(not(unix))]
fn parent_name() -> Option<String> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_names_this_process() {
        let label = host_label();
        assert!(
            label.contains(&format!("pacerelle-mcp pid {}", std::process::id())),
            "{label}"
        );
        assert!(label.chars().count() <= MAX_LABEL_CHARS);
        assert!(!label.chars().any(char::is_control));
    }

    #[test]
    fn cleaning() {
        assert_eq!(clean(" laptop\n"), Some("laptop".to_string()));
        assert_eq!(clean("\n"), None);
    }
}
