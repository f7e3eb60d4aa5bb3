//! The execution policy (DESIGN §8): per tool call, `allow`, `ask` or `deny`, from a TOML file.
//!
//! ```toml
//! default = "ask"                 # when no rule matches
//!
//! [[rule]]
//! tool = ["Read", "Grep", "Glob"] # globs on the tool's name
//! decision = "allow"
//!
//! [[rule]]
//! tool = "Bash"
//! command = ["git push*", "rm -rf *"]   # globs on the shell command
//! decision = "ask"
//!
//! [[rule]]
//! tool = ["Edit", "Write", "apply_patch"]
//! path = ["/etc/**", "**/.env"]   # globs on the paths the call touches
//! decision = "deny"
//! reason = "system files and secrets are off limits"
//! ```
//!
//! Rules are tried in order; the first that matches decides. A rule matches when its `tool` matches and,
//! if it has `command` or `path`, the call has a command or a path that matches one of them.
//!
//! `channels = ["phone", "host"]` (top level) lets an answer given at the computer approve a call too; the
//! default, `["phone"]`, accepts only a paired device's answer. The host is the party the gate watches —
//! whatever runs as the agent holds the agent's key and could record a "yes" at the host — so widening it
//! is the operator's choice, written in the policy, never the agent's.

use globset::{Glob, GlobMatcher};

use crate::question::Channel;
use serde::{Deserialize, Serialize};

/// What to do with a tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Let it run.
    Allow,
    /// Ask the owner and run it only on an authenticated yes.
    Ask,
    /// Refuse it.
    Deny,
}

/// A policy file that could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid policy: {0}")]
pub struct PolicyError(pub String);

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    fn into_vec(self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => vec![s],
            OneOrMany::Many(v) => v,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    tool: OneOrMany,
    #[serde(default)]
    command: Option<OneOrMany>,
    #[serde(default)]
    path: Option<OneOrMany>,
    decision: Decision,
    #[serde(default)]
    reason: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    default: Decision,
    #[serde(default)]
    channels: Option<Vec<Channel>>,
    #[serde(default, rename = "rule")]
    rules: Vec<RuleFile>,
}

#[derive(Debug, Clone)]
struct Rule {
    index: usize,
    tool: Vec<GlobMatcher>,
    command: Vec<GlobMatcher>,
    path: Vec<GlobMatcher>,
    decision: Decision,
    reason: Option<String>,
}

/// A parsed policy.
#[derive(Debug, Clone)]
pub struct Policy {
    default: Decision,
    rules: Vec<Rule>,
    accepts_host: bool,
}

/// The outcome of evaluating a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evaluation {
    /// What to do.
    pub decision: Decision,
    /// Why, in words a model or a person can read.
    pub reason: String,
}

/// A tool call, as the host describes it.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    /// The tool's name (`Bash`, `Edit`, `mcp__server__tool`, `apply_patch`…).
    pub tool: &'a str,
    /// The tool's input.
    pub input: &'a serde_json::Value,
}

fn globs(patterns: Vec<String>, what: &str) -> Result<Vec<GlobMatcher>, PolicyError> {
    patterns
        .into_iter()
        .map(|p| {
            Glob::new(&p)
                .map(|g| g.compile_matcher())
                .map_err(|e| PolicyError(format!("bad {what} pattern {p:?}: {e}")))
        })
        .collect()
}

impl Policy {
    /// Parses a TOML policy.
    pub fn parse(text: &str) -> Result<Policy, PolicyError> {
        let file: PolicyFile = toml::from_str(text).map_err(|e| PolicyError(e.to_string()))?;
        let rules = file
            .rules
            .into_iter()
            .enumerate()
            .map(|(i, r)| {
                Ok(Rule {
                    index: i + 1,
                    tool: globs(r.tool.into_vec(), "tool")?,
                    command: globs(r.command.map(OneOrMany::into_vec).unwrap_or_default(), "command")?,
                    path: globs(r.path.map(OneOrMany::into_vec).unwrap_or_default(), "path")?,
                    decision: r.decision,
                    reason: r.reason,
                })
            })
            .collect::<Result<_, PolicyError>>()?;
        let channels = file.channels.unwrap_or_else(|| vec![Channel::Phone]);
        if !channels.contains(&Channel::Phone) {
            return Err(PolicyError(
                "channels must include \"phone\": the phone is where a gate is answered".into(),
            ));
        }
        Ok(Policy {
            default: file.default,
            rules,
            accepts_host: channels.contains(&Channel::Host),
        })
    }

    /// True when the policy's `channels` lets an answer given at the computer approve a call.
    pub fn accepts_host(&self) -> bool {
        self.accepts_host
    }

    /// The policy used when no file is given: ask for everything.
    pub fn ask_everything() -> Policy {
        Policy {
            default: Decision::Ask,
            rules: Vec::new(),
            accepts_host: false,
        }
    }

    /// Decides a call: the first matching rule, else the default.
    pub fn evaluate(&self, call: Call<'_>) -> Evaluation {
        let command = command_of(call.input);
        let paths = paths_of(call.tool, call.input);
        for rule in &self.rules {
            if !rule.tool.iter().any(|g| g.is_match(call.tool)) {
                continue;
            }
            if !rule.command.is_empty()
                && !command
                    .as_deref()
                    .is_some_and(|c| rule.command.iter().any(|g| g.is_match(c)))
            {
                continue;
            }
            if !rule.path.is_empty() && !paths.iter().any(|p| rule.path.iter().any(|g| g.is_match(p))) {
                continue;
            }
            let reason = rule
                .reason
                .clone()
                .unwrap_or_else(|| format!("policy rule {} for {}", rule.index, call.tool));
            return Evaluation {
                decision: rule.decision,
                reason,
            };
        }
        Evaluation {
            decision: self.default,
            reason: format!("the policy's default for {}", call.tool),
        }
    }
}

/// The shell command of a call: `command` as a string, or as an argument list (Codex) joined by spaces.
pub fn command_of(input: &serde_json::Value) -> Option<String> {
    match input.get("command")? {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Array(parts) => {
            let parts: Vec<&str> = parts.iter().filter_map(|p| p.as_str()).collect();
            // `bash -lc "…"`: the script is what matters.
            match parts.as_slice() {
                [shell, flag, script]
                    if shell.ends_with("sh") && flag.starts_with('-') && flag.contains('c') =>
                {
                    Some((*script).to_string())
                }
                _ => Some(parts.join(" ")),
            }
        }
        _ => None,
    }
}

/// The paths a call touches: `file_path`, `path`, `notebook_path`, and the files named in an `apply_patch`.
pub fn paths_of(tool: &str, input: &serde_json::Value) -> Vec<String> {
    let mut out: Vec<String> = ["file_path", "path", "notebook_path"]
        .iter()
        .filter_map(|k| input.get(*k).and_then(|v| v.as_str()).map(str::to_string))
        .collect();
    let patch = if tool == "apply_patch" {
        input
            .get("input")
            .or_else(|| input.get("patch"))
            .and_then(|v| v.as_str())
            .or_else(|| input.as_str())
    } else {
        None
    };
    if let Some(patch) = patch {
        for line in patch.lines() {
            for prefix in [
                "*** Add File: ",
                "*** Update File: ",
                "*** Delete File: ",
                "*** Move to: ",
            ] {
                if let Some(p) = line.strip_prefix(prefix) {
                    out.push(p.trim().to_string());
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const POLICY: &str = r#"
default = "ask"

[[rule]]
tool = ["Read", "Grep", "Glob"]
decision = "allow"

[[rule]]
tool = ["Bash", "shell"]
command = ["git status*", "ls*"]
decision = "allow"

[[rule]]
tool = "Bash"
command = "rm -rf *"
decision = "deny"
reason = "never delete recursively"

[[rule]]
tool = ["Edit", "Write", "apply_patch"]
path = ["/etc/**", "**/.env"]
decision = "deny"
"#;

    fn eval(tool: &str, input: serde_json::Value) -> Evaluation {
        Policy::parse(POLICY)
            .expect("parses")
            .evaluate(Call { tool, input: &input })
    }

    #[test]
    fn rules_decide_in_order_and_the_default_applies_otherwise() {
        assert_eq!(eval("Read", json!({"file_path": "/x"})).decision, Decision::Allow);
        assert_eq!(
            eval("Bash", json!({"command": "git status --short"})).decision,
            Decision::Allow
        );
        let e = eval("Bash", json!({"command": "rm -rf /"}));
        assert_eq!(e.decision, Decision::Deny);
        assert_eq!(e.reason, "never delete recursively");
        assert_eq!(
            eval("Bash", json!({"command": "git push"})).decision,
            Decision::Ask
        );
        assert_eq!(
            eval("Write", json!({"file_path": "/etc/passwd"})).decision,
            Decision::Deny
        );
        assert_eq!(
            eval("Write", json!({"file_path": "/repo/app/.env"})).decision,
            Decision::Deny
        );
        assert_eq!(
            eval("Write", json!({"file_path": "/repo/app/main.rs"})).decision,
            Decision::Ask
        );
        assert_eq!(eval("mcp__github__create_pr", json!({})).decision, Decision::Ask);
    }

    #[test]
    fn codex_shapes_are_understood() {
        assert_eq!(
            eval("shell", json!({"command": ["bash", "-lc", "ls -la"]})).decision,
            Decision::Allow
        );
        let patch = "*** Begin Patch\n*** Update File: /etc/hosts\n@@\n-a\n+b\n*** End Patch";
        assert_eq!(
            eval("apply_patch", json!({"input": patch})).decision,
            Decision::Deny
        );
    }

    #[test]
    fn bad_files_are_refused_with_a_reason() {
        assert!(Policy::parse("default = \"maybe\"").is_err());
        assert!(Policy::parse("").is_err(), "a default is required");
        assert!(Policy::parse("default = \"ask\"\n[[rule]]\ntool = \"[\"\ndecision = \"allow\"").is_err());
        assert!(
            Policy::parse("default = \"ask\"\n[[rule]]\ntool = \"x\"\ndecision = \"allow\"\ncolour = 1")
                .is_err()
        );
    }

    #[test]
    fn channels_default_to_the_phone_and_widen_only_in_the_file() {
        assert!(!Policy::parse("default = \"ask\"").expect("policy").accepts_host());
        assert!(!Policy::ask_everything().accepts_host());
        let wide = Policy::parse("default = \"ask\"\nchannels = [\"phone\", \"host\"]").expect("policy");
        assert!(wide.accepts_host());
        let err = Policy::parse("default = \"ask\"\nchannels = [\"host\"]").expect_err("no phone");
        assert!(err.0.contains("phone"), "{err}");
        assert!(Policy::parse("default = \"ask\"\nchannels = [\"fax\"]").is_err());
    }
}
