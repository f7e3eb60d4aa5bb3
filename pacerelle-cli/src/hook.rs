//! `pacerelle hook claude-code|codex`: the PreToolUse gate, and `pacerelle hook install`.
//!
//! The gate reads the host's PreToolUse JSON on standard input, evaluates the execution policy, and either
//! decides at once or asks the owner on the phone and waits within a budget below the host's time limit. It
//! always prints the host's decision JSON on standard output and exits 0:
//!
//! ```json
//! {"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"…"}}
//! ```
//!
//! It fails closed: anything but an allow rule or an authenticated yes — a relay that cannot be reached, a
//! bad policy file, malformed input, a timeout, a no, an answer that does not open, even a crash of this
//! process — denies, with the reason.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use pacerelle_client::{Answer, AnswerOutcome, QuestionRequest, QuestionState};
use pacerelle_core::policy::{self, Call, Policy};
use serde_json::{Value, json};

use crate::Global;
use crate::home;

/// Default time the gate may take, in seconds: below the 600 s command-hook limit of both hosts.
pub const DEFAULT_BUDGET_SECONDS: u64 = 540;
/// The `timeout` written in the hosts' settings, in seconds.
pub const HOST_TIMEOUT_SECONDS: u64 = 600;
/// Largest PreToolUse input read from standard input.
const MAX_INPUT_BYTES: u64 = 16 * 1024 * 1024;
/// Longest question text shown on the phone, in characters.
const MAX_QUESTION_CHARS: usize = 300;
/// Longest details (the tool's full input) sent with the question, in bytes.
const MAX_DETAILS_BYTES: usize = 32 * 1024;
/// The policy file looked for in the hook's working directory.
pub const PROJECT_POLICY: &str = ".pacerelle/policy.toml";

/// The host whose hook protocol is spoken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Host {
    /// Claude Code.
    ClaudeCode,
    /// OpenAI Codex CLI.
    Codex,
}

impl Host {
    fn name(self) -> &'static str {
        match self {
            Host::ClaudeCode => "Claude Code",
            Host::Codex => "Codex",
        }
    }

    fn word(self) -> &'static str {
        match self {
            Host::ClaudeCode => "claude-code",
            Host::Codex => "codex",
        }
    }
}

#[derive(Debug, clap::Subcommand)]
pub enum HookCommand {
    /// The PreToolUse gate for Claude Code: reads the hook input on stdin, prints the decision JSON.
    #[command(name = "claude-code")]
    ClaudeCode(GateArgs),
    /// The PreToolUse gate for Codex: reads the hook input on stdin, prints the decision JSON.
    Codex(GateArgs),
    /// Print (or, with --write, merge into the host's settings) the hook entry.
    Install(InstallArgs),
}

impl HookCommand {
    /// True for the gates, which must answer with a decision whatever happens.
    pub fn is_gate(&self) -> bool {
        !matches!(self, HookCommand::Install(_))
    }
}

/// True when `word` names a gate subcommand of `hook`.
pub fn is_gate(word: &str) -> bool {
    word == Host::ClaudeCode.word() || word == Host::Codex.word()
}

#[derive(Debug, clap::Args)]
pub struct GateArgs {
    /// The policy file (default: PACERELLE_POLICY, else .pacerelle/policy.toml in the hook's working
    /// directory, else ask for everything).
    #[arg(long, env = "PACERELLE_POLICY")]
    policy: Option<PathBuf>,
    /// Seconds the gate may take, waiting for the answer included (keep it below the host's limit, 600).
    #[arg(long, default_value_t = DEFAULT_BUDGET_SECONDS, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    budget: u64,
}

#[derive(Debug, clap::Args)]
pub struct InstallArgs {
    /// The host.
    #[arg(value_enum)]
    host: Host,
    /// Merge the entry into the settings file instead of printing it.
    #[arg(long)]
    write: bool,
    /// Use the user's settings (~/.claude/settings.json, ~/.codex/hooks.json) instead of the project's.
    #[arg(long)]
    global: bool,
    /// The project folder (default: the current directory).
    #[arg(long, conflicts_with = "global")]
    dir: Option<PathBuf>,
    /// Which tools the hook runs for (a regular expression on the tool's name; `*` for all).
    #[arg(long, default_value = "*")]
    matcher: String,
    /// The command the host runs (default: `pacerelle hook HOST`, with --budget and --policy if given).
    #[arg(long)]
    command: Option<String>,
    /// Passed to the gate as --budget.
    #[arg(long)]
    budget: Option<u64>,
    /// Passed to the gate as --policy.
    #[arg(long)]
    policy: Option<PathBuf>,
}

/// What the gate tells the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Let the tool call run.
    pub allow: bool,
    /// Why; shown to the model (deny) or to the person.
    pub reason: String,
}

impl Decision {
    pub fn allow(reason: impl Into<String>) -> Self {
        Decision {
            allow: true,
            reason: reason.into(),
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

pub async fn run(global: &Global, cmd: HookCommand) -> Result<ExitCode> {
    match cmd {
        HookCommand::ClaudeCode(args) => {
            print_decision(&gate(global, Host::ClaudeCode, &args).await);
            Ok(ExitCode::SUCCESS)
        }
        HookCommand::Codex(args) => {
            print_decision(&gate(global, Host::Codex, &args).await);
            Ok(ExitCode::SUCCESS)
        }
        HookCommand::Install(args) => install(args).map(|()| ExitCode::SUCCESS),
    }
}

/// Decides a tool call; never fails, never allows but by rule or an authenticated yes.
pub async fn gate(global: &Global, host: Host, args: &GateArgs) -> Decision {
    let budget = Duration::from_secs(args.budget);
    let started = tokio::time::Instant::now();
    match tokio::time::timeout(budget, decide(global, host, args, started + budget)).await {
        Ok(decision) => decision,
        Err(_) => Decision::deny(format!(
            "Pacerelle: no decision within the {} s budget; denied (no answer is a no)",
            args.budget
        )),
    }
}

/// The PreToolUse input fields the gate uses; the rest is ignored.
#[derive(Debug)]
struct HookInput {
    tool_name: String,
    tool_input: Value,
    cwd: Option<PathBuf>,
}

fn parse_input(bytes: &[u8]) -> Result<HookInput, String> {
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

async fn read_stdin() -> Result<Vec<u8>, String> {
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

/// Where the policy comes from, and the policy.
fn load_policy(explicit: Option<&Path>, cwd: Option<&Path>) -> Result<(Policy, String), String> {
    let read = |path: &Path| -> Result<(Policy, String), String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the policy file {}: {e}", path.display()))?;
        let policy =
            Policy::parse(&text).map_err(|e| format!("{} is not a valid policy: {e}", path.display()))?;
        Ok((policy, path.display().to_string()))
    };
    if let Some(path) = explicit.filter(|p| !p.as_os_str().is_empty()) {
        return read(path);
    }
    let dir = match cwd {
        Some(dir) => dir.to_path_buf(),
        None => std::env::current_dir().map_err(|e| format!("no working directory: {e}"))?,
    };
    let path = dir.join(PROJECT_POLICY);
    match std::fs::metadata(&path) {
        Ok(_) => read(&path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok((
            Policy::ask_everything(),
            "no policy file: ask for everything".into(),
        )),
        Err(e) => Err(format!("cannot read the policy file {}: {e}", path.display())),
    }
}

/// Codex sends an `apply_patch` call's patch as `command`; the policy looks for it in `input`.
fn normalise(tool: &str, input: &Value) -> Value {
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

/// Files and commands that decide what the gate does: an allow rule never lets the agent change them
/// without asking.
fn touches_the_gate(tool: &str, input: &Value, policy_source: &str) -> bool {
    let protected = [
        ".pacerelle/",
        ".claude/settings",
        ".codex/",
        "pacerelle/agent.json",
    ];
    let hit = |text: &str| {
        protected.iter().any(|p| text.contains(p))
            || (!policy_source.is_empty()
                && Path::new(policy_source).is_absolute()
                && text.contains(policy_source))
    };
    policy::paths_of(tool, input).iter().any(|p| hit(p)) || policy::command_of(input).is_some_and(|c| hit(&c))
}

async fn decide(global: &Global, host: Host, args: &GateArgs, deadline: tokio::time::Instant) -> Decision {
    let bytes = match read_stdin().await {
        Ok(bytes) => bytes,
        Err(reason) => return Decision::deny(format!("Pacerelle: {reason}; denied")),
    };
    let input = match parse_input(&bytes) {
        Ok(input) => input,
        Err(reason) => return Decision::deny(format!("Pacerelle: {reason}; denied")),
    };
    let (policy, source) = match load_policy(args.policy.as_deref(), input.cwd.as_deref()) {
        Ok(p) => p,
        Err(reason) => return Decision::deny(format!("Pacerelle: {reason}; denied until it is fixed")),
    };
    let tool_input = normalise(&input.tool_name, &input.tool_input);
    let mut evaluation = policy.evaluate(Call {
        tool: &input.tool_name,
        input: &tool_input,
    });
    if evaluation.decision == policy::Decision::Allow
        && touches_the_gate(&input.tool_name, &tool_input, &source)
    {
        evaluation = policy::Evaluation {
            decision: policy::Decision::Ask,
            reason: "the call touches the gate's own settings, which no rule allows without asking".into(),
        };
    }
    match evaluation.decision {
        policy::Decision::Allow => {
            Decision::allow(format!("allowed by the Pacerelle policy: {}", evaluation.reason))
        }
        policy::Decision::Deny => {
            Decision::deny(format!("denied by the Pacerelle policy: {}", evaluation.reason))
        }
        policy::Decision::Ask => {
            ask_owner(global, host, &input, &tool_input, &evaluation.reason, deadline).await
        }
    }
}

async fn ask_owner(
    global: &Global,
    host: Host,
    input: &HookInput,
    tool_input: &Value,
    why: &str,
    deadline: tokio::time::Instant,
) -> Decision {
    let agent = match home::agent_client(global) {
        Ok(agent) => agent,
        Err(e) => return Decision::deny(format!("Pacerelle could not ask the owner ({e:#}); denied")),
    };
    let (question, details) = describe(host, &input.tool_name, tool_input, input.cwd.as_deref(), why);
    // The question expires inside the budget, leaving time to read the last state after its expiry.
    let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
    let margin = (remaining / 5).min(Duration::from_secs(5));
    let expires_in = remaining.saturating_sub(margin).max(Duration::from_secs(1));
    let request = QuestionRequest::yes_no(question)
        .with_details(details)
        .expires_in(expires_in);
    let overall = remaining.saturating_sub(Duration::from_millis(250));
    match agent.ask(request, overall).await {
        Ok(outcome) => verdict_to_decision(&outcome),
        Err(e) => Decision::deny(format!(
            "Pacerelle could not get the owner's answer ({e}); denied"
        )),
    }
}

/// Only an approved outcome — an authenticated, timely yes — allows.
fn verdict_to_decision(outcome: &AnswerOutcome) -> Decision {
    let who = outcome
        .answered_by_name
        .clone()
        .or_else(|| outcome.answered_by.clone())
        .unwrap_or_else(|| "the owner".into());
    if let Some(reason) = &outcome.rejected {
        return Decision::deny(format!(
            "Pacerelle: an answer arrived but could not be trusted ({reason}); denied"
        ));
    }
    match (outcome.state, &outcome.answer) {
        (QuestionState::Answered, Some(Answer::Yes)) if outcome.approved => {
            let when = outcome
                .answered_at
                .map(|t| format!(" at {t}"))
                .unwrap_or_default();
            Decision::allow(format!("approved on the phone by {who}{when}"))
        }
        (QuestionState::Answered, Some(Answer::No)) => Decision::deny(format!(
            "{who} answered no on the phone: do not run this call; ask the person what to do instead"
        )),
        (QuestionState::Expired, _) => Decision::deny(format!(
            "no answer on the phone before the question expired at {}; denied (no answer is a no)",
            outcome.expires_at
        )),
        (QuestionState::Cancelled, _) => Decision::deny("the question was cancelled; denied"),
        (QuestionState::Pending, _) => {
            Decision::deny("no answer on the phone within the hook's time budget; denied (no answer is a no)")
        }
        _ => Decision::deny("Pacerelle: the answer is not an explicit yes; denied"),
    }
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
fn describe(host: Host, tool: &str, input: &Value, cwd: Option<&Path>, why: &str) -> (String, String) {
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
    details.push_str("\nInput:\n");
    details.push_str(&pretty);
    (question, truncate_bytes(&details, MAX_DETAILS_BYTES))
}

/// The settings file of a host: the project's or the user's.
fn settings_path(args: &InstallArgs) -> Result<PathBuf> {
    let home = || dirs::home_dir().ok_or_else(|| anyhow!("no home directory: use --dir"));
    Ok(match (args.host, args.global) {
        (Host::ClaudeCode, true) => home()?.join(".claude").join("settings.json"),
        (Host::Codex, true) => match std::env::var_os("CODEX_HOME").filter(|v| !v.is_empty()) {
            Some(dir) => PathBuf::from(dir).join("hooks.json"),
            None => home()?.join(".codex").join("hooks.json"),
        },
        (host, false) => {
            let dir = match &args.dir {
                Some(dir) => dir.clone(),
                None => std::env::current_dir().context("no current directory: use --dir")?,
            };
            match host {
                Host::ClaudeCode => dir.join(".claude").join("settings.json"),
                Host::Codex => dir.join(".codex").join("hooks.json"),
            }
        }
    })
}

fn hook_command(args: &InstallArgs) -> String {
    if let Some(command) = &args.command {
        return command.clone();
    }
    let mut command = format!("pacerelle hook {}", args.host.word());
    if let Some(budget) = args.budget {
        command.push_str(&format!(" --budget {budget}"));
    }
    if let Some(policy) = &args.policy {
        command.push_str(&format!(
            " --policy '{}'",
            policy.display().to_string().replace('\'', "'\\''")
        ));
    }
    command
}

/// The PreToolUse group that runs the gate.
fn entry(matcher: &str, command: &str) -> Value {
    json!({
        "matcher": matcher,
        "hooks": [{ "type": "command", "command": command, "timeout": HOST_TIMEOUT_SECONDS }]
    })
}

/// Adds the gate's group to a settings document, replacing an earlier gate entry for the same host and
/// keeping everything else.
fn merge(mut settings: Value, host: Host, group: Value) -> Result<Value> {
    let ours = format!("pacerelle hook {}", host.word());
    let Value::Object(root) = &mut settings else {
        bail!("the settings file is not a JSON object");
    };
    let hooks = root.entry("hooks").or_insert_with(|| json!({}));
    let Value::Object(hooks) = hooks else {
        bail!("\"hooks\" in the settings file is not an object");
    };
    let pre = hooks.entry("PreToolUse").or_insert_with(|| json!([]));
    let Value::Array(groups) = pre else {
        bail!("\"hooks.PreToolUse\" in the settings file is not a list");
    };
    for g in groups.iter_mut() {
        if let Some(Value::Array(list)) = g.get_mut("hooks") {
            list.retain(|h| {
                !h.get("command")
                    .and_then(Value::as_str)
                    .is_some_and(|c| c.contains(&ours))
            });
        }
    }
    groups.retain(|g| !matches!(g.get("hooks"), Some(Value::Array(list)) if list.is_empty()));
    groups.push(group);
    Ok(settings)
}

fn install(args: InstallArgs) -> Result<()> {
    let command = hook_command(&args);
    let group = entry(&args.matcher, &command);
    let path = settings_path(&args)?;
    if !args.write {
        let snippet = json!({ "hooks": { "PreToolUse": [group] } });
        println!("{}", serde_json::to_string_pretty(&snippet)?);
        eprintln!(
            "Add this to {} (or run again with --write to merge it there).",
            path.display()
        );
        if args.host == Host::Codex {
            eprintln!("Codex runs a new hook only after you trust it: open /hooks in Codex.");
        }
        return Ok(());
    }
    let existing = match std::fs::read_to_string(&path) {
        Ok(text) if text.trim().is_empty() => json!({}),
        Ok(text) => serde_json::from_str(&text)
            .with_context(|| format!("{} is not valid JSON; fix it or merge by hand", path.display()))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => json!({}),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let merged =
        merge(existing, args.host, group).with_context(|| format!("cannot merge into {}", path.display()))?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let tmp = path.with_extension("json.pacerelle-tmp");
    std::fs::write(&tmp, format!("{}\n", serde_json::to_string_pretty(&merged)?))
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("cannot write {}", path.display()))?;
    println!("PreToolUse hook `{command}` written to {}", path.display());
    if args.host == Host::Codex {
        println!("Codex runs a new hook only after you trust it: open /hooks in Codex.");
    }
    Ok(())
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
            Decision::allow("ok").to_json()["hookSpecificOutput"]["permissionDecision"],
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

    #[test]
    fn only_an_approved_yes_allows() {
        let base = AnswerOutcome {
            question_id: "q".into(),
            state: QuestionState::Answered,
            approved: true,
            answer: Some(Answer::Yes),
            answered_by: Some("dv_1".into()),
            answered_by_name: Some("phone".into()),
            answered_at: None,
            expires_at: pacerelle_client::Timestamp(0),
            rejected: None,
        };
        assert!(verdict_to_decision(&base).allow);
        let unapproved = AnswerOutcome {
            approved: false,
            ..base.clone()
        };
        assert!(!verdict_to_decision(&unapproved).allow);
        let rejected = AnswerOutcome {
            rejected: Some("x".into()),
            ..base.clone()
        };
        assert!(!verdict_to_decision(&rejected).allow);
        for state in [
            QuestionState::Pending,
            QuestionState::Expired,
            QuestionState::Cancelled,
        ] {
            assert!(
                !verdict_to_decision(&AnswerOutcome {
                    state,
                    ..base.clone()
                })
                .allow
            );
        }
        let no = AnswerOutcome {
            answer: Some(Answer::No),
            approved: false,
            ..base.clone()
        };
        assert!(!verdict_to_decision(&no).allow);
    }

    #[test]
    fn allow_rules_do_not_cover_the_gates_own_files() {
        let edit = json!({"file_path": "/repo/.pacerelle/policy.toml", "content": "default = \"allow\""});
        assert!(touches_the_gate("Write", &edit, ""));
        assert!(touches_the_gate(
            "Bash",
            &json!({"command": "echo '{}' > .claude/settings.json"}),
            ""
        ));
        assert!(touches_the_gate(
            "Bash",
            &json!({"command": "cat /etc/policy.toml"}),
            "/etc/policy.toml"
        ));
        assert!(!touches_the_gate(
            "Bash",
            &json!({"command": "ls"}),
            "/etc/policy.toml"
        ));
    }

    #[test]
    fn policy_sources() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (_, source) = load_policy(None, Some(dir.path())).expect("none: ask everything");
        assert!(source.contains("ask for everything"));
        assert!(load_policy(Some(&dir.path().join("missing.toml")), None).is_err());
        std::fs::create_dir_all(dir.path().join(".pacerelle")).expect("mkdir");
        std::fs::write(dir.path().join(PROJECT_POLICY), "default = \"sometimes\"").expect("write");
        assert!(load_policy(None, Some(dir.path())).is_err());
        std::fs::write(dir.path().join(PROJECT_POLICY), "default = \"deny\"").expect("write");
        let (policy, _) = load_policy(None, Some(dir.path())).expect("valid");
        let input = json!({});
        assert_eq!(
            policy
                .evaluate(Call {
                    tool: "Bash",
                    input: &input
                })
                .decision,
            policy::Decision::Deny
        );
    }

    #[test]
    fn the_example_policy_parses_and_decides_sensibly() {
        let policy = Policy::parse(include_str!("../../examples/policy.toml")).expect("examples/policy.toml");
        let decide = |tool: &str, input: Value| policy.evaluate(Call { tool, input: &input }).decision;
        use policy::Decision::{Allow, Ask, Deny};
        assert_eq!(decide("Bash", json!({"command": "git status"})), Allow);
        assert_eq!(decide("Bash", json!({"command": "cat .env"})), Deny);
        assert_eq!(decide("Bash", json!({"command": "rm -rf /"})), Deny);
        assert_eq!(decide("Bash", json!({"command": "git push origin main"})), Ask);
        assert_eq!(decide("Bash", json!({"command": "make"})), Ask);
        assert_eq!(decide("Read", json!({"file_path": "/repo/src/main.rs"})), Allow);
        assert_eq!(decide("Read", json!({"file_path": "/repo/.env"})), Deny);
        assert_eq!(decide("Write", json!({"file_path": "/repo/src/main.rs"})), Ask);
        assert_eq!(decide("mcp__github__create_pull_request", json!({})), Ask);
        assert_eq!(
            decide("shell", json!({"command": ["bash", "-lc", "ls -la"]})),
            Allow
        );
    }

    #[test]
    fn install_merges_and_replaces_its_own_entry() {
        let existing = json!({
            "model": "x",
            "hooks": {
                "PreToolUse": [
                    {"matcher": "Bash", "hooks": [{"type": "command", "command": "other-tool check"}]},
                    {"matcher": "*", "hooks": [{"type": "command", "command": "pacerelle hook claude-code --budget 100"}]}
                ],
                "Stop": [{"hooks": [{"type": "command", "command": "notify"}]}]
            }
        });
        let merged = merge(
            existing,
            Host::ClaudeCode,
            entry("*", "pacerelle hook claude-code"),
        )
        .expect("merge");
        let groups = merged["hooks"]["PreToolUse"].as_array().expect("list");
        assert_eq!(groups.len(), 2, "{merged}");
        assert_eq!(groups[0]["hooks"][0]["command"], "other-tool check");
        assert_eq!(groups[1]["hooks"][0]["command"], "pacerelle hook claude-code");
        assert_eq!(groups[1]["hooks"][0]["timeout"], 600);
        assert_eq!(merged["model"], "x");
        assert_eq!(merged["hooks"]["Stop"][0]["hooks"][0]["command"], "notify");
        assert!(merge(json!([1]), Host::Codex, entry("*", "x")).is_err());
    }
}
