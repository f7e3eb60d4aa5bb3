//! The hosts' PreToolUse protocol: the input read on standard input, the decision JSON printed on standard
//! output (the same for Claude Code and Codex), and the question shown on the phone for a tool call.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use pacerelle_client::gate::Ruling;
use pacerelle_core::policy;
use serde_json::{Value, json};

use super::Host;

/// Largest PreToolUse input read from standard input.
const MAX_INPUT_BYTES: u64 = 16 * 1024 * 1024;
/// Longest question text shown on the phone, in characters.
const MAX_QUESTION_CHARS: usize = 300;
/// Longest details (the tool's full input) sent with the question, in bytes.
const MAX_DETAILS_BYTES: usize = 32 * 1024;

/// What the gate tells the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Let the tool call run.
    pub allow: bool,
    /// Why; shown to the model (deny) or to the person.
    pub reason: String,
}

impl Decision {
    /// What the client's gate concluded: allow only when it lets the call run, with its reason.
    pub fn of(ruling: Ruling) -> Self {
        Decision {
            allow: ruling.lets_run(),
            reason: ruling.reason,
        }
    }

    pub fn deny(reason: impl Into<String>) -> Self {
        Decision {
            allow: false,
            reason: reason.into(),
        }
    }

    /// The host's JSON: the same for Claude Code and Codex (no other field, which Codex refuses).
    pub fn to_json(&self) -> Value {
        json!({
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": if self.allow { "allow" } else { "deny" },
                "permissionDecisionReason": self.reason,
            }
        })
    }
}

static DECIDED: AtomicBool = AtomicBool::new(false);

/// Prints the decision JSON on stdout, once.
pub fn print_decision(decision: &Decision) {
    if DECIDED.swap(true, Ordering::SeqCst) {
        return;
    }
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", decision.to_json());
    let _ = out.flush();
}

/// From now on a panic anywhere prints a deny decision and exits 0: a crashed hook must not let the tool run
/// (hosts treat most non-zero exits as a non-blocking error).
pub fn guard_against_panics() {
    std::panic::set_hook(Box::new(|info| {
        let reason = format!("pacerelle hook failed unexpectedly ({info}); denied");
        print_decision(&Decision::deny(reason));
        std::process::exit(0);
    }));
}

/// The PreToolUse input fields the gate uses; the rest is ignored.
#[derive(Debug)]
pub struct HookInput {
    pub tool_name: String,
    pub tool_input: Value,
    pub cwd: Option<PathBuf>,
}

pub fn parse_input(bytes: &[u8]) -> Result<HookInput, String> {
    let value: Value =
        serde_json::from_slice(bytes).map_err(|e| format!("the hook input is not JSON ({e})"))?;
    let Value::Object(map) = value else {
        return Err("the hook input is not a JSON object".into());
    };
    if let Some(event) = map.get("hook_event_name")
        && event.as_str() != Some("PreToolUse")
    {
        return Err(format!(
            "this gate handles PreToolUse, not {event}: check the hook's event in the settings"
        ));
    }
    let tool_name = match map.get("tool_name").and_then(Value::as_str) {
        Some(name) if !name.trim().is_empty() => name.to_string(),
        _ => return Err("the hook input has no tool_name".into()),
    };
    let tool_input = map.get("tool_input").cloned().unwrap_or(Value::Null);
    let cwd = map
        .get("cwd")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(PathBuf::from);
    Ok(HookInput {
        tool_name,
        tool_input,
        cwd,
    })
}

pub async fn read_stdin() -> Result<Vec<u8>, String> {
    tokio::task::spawn_blocking(|| {
        let mut bytes = Vec::new();
        std::io::stdin()
            .lock()
            .take(MAX_INPUT_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("cannot read the hook input: {e}"))?;
        if bytes.len() as u64 > MAX_INPUT_BYTES {
            return Err("the hook input is larger than 16 MiB".into());
        }
        Ok(bytes)
    })
    .await
    .map_err(|e| format!("cannot read the hook input: {e}"))?
}

/// Codex sends an `apply_patch` call's patch as `command`; the policy looks for it in `input`.
pub fn normalise(tool: &str, input: &Value) -> Value {
    let mut input = input.clone();
    if tool == "apply_patch"
        && let Value::Object(map) = &mut input
        && !map.contains_key("input")
        && let Some(Value::String(patch)) = map.get("command")
        && patch.contains("*** Begin Patch")
    {
        let patch = patch.clone();
        map.remove("command");
        map.insert("input".into(), Value::String(patch));
    }
    input
}

/// Cuts text to `max` characters, marking the cut.
fn truncate_chars(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Cuts text to at most `max` bytes on a character boundary, saying how much was left out.
fn truncate_bytes(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n… ({} more bytes not shown)", &text[..end], text.len() - end)
}

fn one_line(text: &str) -> String {
    text.trim()
        .lines()
        .map(str::trim_end)
        .collect::<Vec<_>>()
        .join(" ⏎ ")
}

/// The question shown on the phone, and its details (the tool's full input, within a limit).
pub fn describe(host: Host, tool: &str, input: &Value, cwd: Option<&Path>, why: &str) -> (String, String) {
    let paths = policy::paths_of(tool, input);
    let subject = if tool == "apply_patch" {
        if paths.is_empty() {
            "apply a patch".to_string()
        } else {
            format!("apply a patch to {}", paths.join(", "))
        }
    } else if let Some(command) = policy::command_of(input) {
        format!("run `{}`", one_line(&command))
    } else if !paths.is_empty() {
        format!("use {tool} on {}", paths.join(", "))
    } else {
        let compact = match input {
            Value::Null => String::new(),
            other => format!(" with {}", other),
        };
        format!("use {tool}{compact}")
    };
    let question = truncate_chars(
        &format!("Allow {} to {subject}?", host.name()),
        MAX_QUESTION_CHARS,
    );
    let pretty = serde_json::to_string_pretty(input).unwrap_or_else(|_| input.to_string());
    let mut details = format!("Tool: {tool}\nWhy asked: {why}\n");
    if let Some(cwd) = cwd {
        details.push_str(&format!("Directory: {}\n", cwd.display()));
    }
    // The whole command, on its own lines (the question shows it on one, cut), then what an edit changes:
    // before the input, so that a cut at the size limit takes the input first.
    if let Some(command) = policy::command_of(input) {
        details.push_str(&format!("Command:\n{command}\n"));
    }
    if let Some(diff) = super::diff::of(tool, input) {
        details.push('\n');
        details.push_str(&diff);
        details.push('\n');
    }
    details.push_str("\nInput:\n");
    details.push_str(&pretty);
    (question, truncate_bytes(&details, MAX_DETAILS_BYTES))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions_have_the_hosts_shape() {
        let v = Decision::deny("no").to_json();
        assert_eq!(
            v,
            json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "no"}})
        );
        assert_eq!(
            Decision {
                allow: true,
                reason: "ok".into()
            }
            .to_json()["hookSpecificOutput"]["permissionDecision"],
            "allow"
        );
    }

    #[test]
    fn malformed_input_is_refused_with_a_reason() {
        assert!(parse_input(b"").is_err());
        assert!(parse_input(b"not json").is_err());
        assert!(parse_input(b"[1,2]").is_err());
        assert!(parse_input(br#"{"tool_input":{}}"#).is_err());
        assert!(parse_input(br#"{"tool_name":"","tool_input":{}}"#).is_err());
        assert!(parse_input(br#"{"hook_event_name":"PostToolUse","tool_name":"Bash"}"#).is_err());
        let ok = parse_input(
            br#"{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls"},"cwd":"/r"}"#,
        )
        .expect("valid");
        assert_eq!(ok.tool_name, "Bash");
        assert_eq!(ok.cwd.as_deref(), Some(Path::new("/r")));
    }

    #[test]
    fn questions_show_the_call_and_details_carry_the_full_input() {
        let (q, d) = describe(
            Host::ClaudeCode,
            "Bash",
            &json!({"command": "git push origin main", "description": "push"}),
            Some(Path::new("/repo")),
            "policy rule 2 for Bash",
        );
        assert_eq!(q, "Allow Claude Code to run `git push origin main`?");
        assert!(
            d.contains("Directory: /repo") && d.contains("\"description\": \"push\""),
            "{d}"
        );
        assert!(
            d.contains(
                "Why asked: policy rule 2 for Bash\nDirectory: /repo\nCommand:\ngit push origin main\n"
            ),
            "{d}"
        );
        let (_, d) = describe(
            Host::ClaudeCode,
            "Edit",
            &json!({"file_path": "/repo/a.rs", "old_string": "let x = 1;", "new_string": "let x = 2;"}),
            Some(Path::new("/repo")),
            "default",
        );
        assert!(
            d.contains("\nDiff: /repo/a.rs (+1 -1)\n-let x = 1;\n+let x = 2;\n\nInput:\n"),
            "{d}"
        );

        let (q, _) = describe(
            Host::ClaudeCode,
            "Write",
            &json!({"file_path": "/repo/a.rs", "content": "x"}),
            None,
            "",
        );
        assert_eq!(q, "Allow Claude Code to use Write on /repo/a.rs?");

        let patch = "*** Begin Patch\n*** Update File: src/main.rs\n@@\n-a\n+b\n*** End Patch";
        let input = normalise("apply_patch", &json!({ "command": patch }));
        let (q, _) = describe(Host::Codex, "apply_patch", &input, None, "");
        assert_eq!(q, "Allow Codex to apply a patch to src/main.rs?");

        let long = "x".repeat(100_000);
        let (q, d) = describe(Host::Codex, "Bash", &json!({ "command": long }), None, "");
        assert_eq!(q.chars().count(), MAX_QUESTION_CHARS);
        assert!(q.ends_with('…'));
        assert!(d.len() < MAX_DETAILS_BYTES + 100 && d.contains("more bytes not shown"));
    }
}
