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
//! **Grants** (docs/crypto.md §4.8b): `grant = ["15m", "1h"]` offers the person, with the question, to allow the
//! same call for that long; at the top level it is the default of every asking rule (absent: `["15m", "1h"]`),
//! and on a rule `grant = false` means "ask every time". `grant_prefix = ["cargo test"]` on a rule also offers
//! to allow every command that starts with one of these words (and adds only arguments), for a shell call
//! whose command does. A grant is bound to the policy file's digest: any change to the file ends every grant.
//! A call that touches the gate's own files is never grantable, and a `deny` rule never asks.
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

/// `grant = ["15m", "1h"]` or `grant = false`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum GrantFile {
    Off(bool),
    Durations(Vec<String>),
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
    #[serde(default)]
    grant: Option<GrantFile>,
    #[serde(default)]
    grant_prefix: Option<OneOrMany>,
    #[serde(default)]
    approvals: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    default: Decision,
    #[serde(default)]
    channels: Option<Vec<Channel>>,
    #[serde(default)]
    grant: Option<GrantFile>,
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
    /// The durations it lets a person grant, in seconds: `None` for the policy's default.
    grant: Option<Vec<u64>>,
    grant_prefix: Vec<String>,
    /// How many distinct owner devices must approve a call it asks about.
    approvals: u32,
}

/// A parsed policy.
#[derive(Debug, Clone)]
pub struct Policy {
    default: Decision,
    rules: Vec<Rule>,
    accepts_host: bool,
    grant: Vec<u64>,
    digest: String,
}

/// The grant durations of a policy that does not name them: 15 minutes and an hour.
pub const DEFAULT_GRANT_SECONDS: [u64; 2] = [15 * 60, 3600];

/// The outcome of evaluating a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evaluation {
    /// What to do.
    pub decision: Decision,
    /// Why, in words a model or a person can read.
    pub reason: String,
    /// For `ask`: the durations, in seconds, a person may extend a yes to (empty: ask every time).
    pub grant: Vec<u64>,
    /// For `ask`: the command prefixes a grant may cover besides the exact command.
    pub grant_prefix: Vec<String>,
    /// For `ask`: how many distinct owner devices must approve (the rule's `approvals`; 1 by default). A
    /// rule that needs more than one offers no grant: each call is approved by that many people.
    pub approvals: u32,
}

/// Reads a duration of the policy's `grant`: a number and one unit, `s`, `m` or `h` (`15m`, `1h`), from 1 s to
/// a day ([`crate::grant::MAX_GRANT_SECONDS`]).
pub fn parse_duration(text: &str) -> Option<u64> {
    let text = text.trim();
    let (number, unit) = text.split_at(text.len().checked_sub(1)?);
    let number: u64 = number.parse().ok()?;
    let seconds = number.checked_mul(match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        _ => return None,
    })?;
    (1..=crate::grant::MAX_GRANT_SECONDS)
        .contains(&seconds)
        .then_some(seconds)
}

fn grant_seconds(file: GrantFile) -> Result<Vec<u64>, PolicyError> {
    match file {
        GrantFile::Off(false) => Ok(Vec::new()),
        GrantFile::Off(true) => Ok(DEFAULT_GRANT_SECONDS.to_vec()),
        GrantFile::Durations(list) => {
            if list.len() > 8 {
                return Err(PolicyError("grant lists 8 durations at most".into()));
            }
            let mut seconds = list
                .iter()
                .map(|d| {
                    parse_duration(d).ok_or_else(|| {
                        PolicyError(format!(
                            "bad grant duration {d:?}: a number and s, m or h, up to 24h"
                        ))
                    })
                })
                .collect::<Result<Vec<u64>, _>>()?;
            seconds.sort_unstable();
            seconds.dedup();
            Ok(seconds)
        }
    }
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
                let grant_prefix = r.grant_prefix.map(OneOrMany::into_vec).unwrap_or_default();
                if let Some(p) = grant_prefix.iter().find(|p| {
                    p.trim().is_empty() || p.contains(crate::grant::SHELL_CONTROL) || p.trim() != p.as_str()
                }) {
                    return Err(PolicyError(format!(
                        "bad grant_prefix {p:?}: a plain command, without shell control characters"
                    )));
                }
                let approvals = r.approvals.unwrap_or(1);
                if !(1..=crate::wire::MAX_APPROVALS).contains(&approvals) {
                    return Err(PolicyError(format!(
                        "bad approvals {approvals}: 1 to {}",
                        crate::wire::MAX_APPROVALS
                    )));
                }
                if approvals > 1 && r.decision != Decision::Ask {
                    return Err(PolicyError(
                        "approvals goes with decision = \"ask\": it is how many devices approve".into(),
                    ));
                }
                if approvals > 1 && r.grant.as_ref().is_some_and(|g| !matches!(g, GrantFile::Off(false))) {
                    return Err(PolicyError(
                        "a rule with approvals above 1 grants nothing: each call is approved by that many devices"
                            .into(),
                    ));
                }
                Ok(Rule {
                    index: i + 1,
                    approvals,
                    tool: globs(r.tool.into_vec(), "tool")?,
                    command: globs(r.command.map(OneOrMany::into_vec).unwrap_or_default(), "command")?,
                    path: globs(r.path.map(OneOrMany::into_vec).unwrap_or_default(), "path")?,
                    decision: r.decision,
                    reason: r.reason,
                    grant: r.grant.map(grant_seconds).transpose()?,
                    grant_prefix,
                })
            })
            .collect::<Result<_, PolicyError>>()?;
        let channels = file.channels.unwrap_or_else(|| vec![Channel::Phone]);
        if !channels.contains(&Channel::Phone) {
            return Err(PolicyError(
                "channels must include \"phone\": the phone is where a gate is answered".into(),
            ));
        }
        let grant = match file.grant {
            Some(g) => grant_seconds(g)?,
            None => DEFAULT_GRANT_SECONDS.to_vec(),
        };
        Ok(Policy {
            default: file.default,
            rules,
            accepts_host: channels.contains(&Channel::Host),
            grant,
            digest: crate::grant::policy_digest(text.as_bytes()),
        })
    }

    /// True when the policy's `channels` lets an answer given at the computer approve a call.
    pub fn accepts_host(&self) -> bool {
        self.accepts_host
    }

    /// `base64url(SHA-256(text))` of the policy's text (of nothing for [`Policy::ask_everything`]): what binds
    /// a grant to the policy that offered it (docs/crypto.md §4.8b).
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// The policy used when no file is given: ask for everything.
    pub fn ask_everything() -> Policy {
        Policy {
            default: Decision::Ask,
            rules: Vec::new(),
            accepts_host: false,
            grant: DEFAULT_GRANT_SECONDS.to_vec(),
            digest: crate::grant::policy_digest(b""),
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
            let asks = rule.decision == Decision::Ask;
            let grant = match rule.approvals {
                1 => rule.grant.clone().unwrap_or_else(|| self.grant.clone()),
                _ => Vec::new(),
            };
            return Evaluation {
                decision: rule.decision,
                reason,
                grant: if asks { grant } else { Vec::new() },
                grant_prefix: if asks && rule.approvals == 1 {
                    rule.grant_prefix.clone()
                } else {
                    Vec::new()
                },
                approvals: if asks { rule.approvals } else { 1 },
            };
        }
        Evaluation {
            decision: self.default,
            reason: format!("the policy's default for {}", call.tool),
            grant: if self.default == Decision::Ask {
                self.grant.clone()
            } else {
                Vec::new()
            },
            grant_prefix: Vec::new(),
            approvals: 1,
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
