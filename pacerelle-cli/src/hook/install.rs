//! `pacerelle hook install`: prints the hosts' settings entry, or merges it into their settings file, and
//! writes the agent skill ([`super::skill`]) beside it; `pacerelle hook uninstall` takes both out again.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};

use super::{Host, skill};

/// The `timeout` written in the hosts' settings, in seconds.
pub const HOST_TIMEOUT_SECONDS: u64 = 600;

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
    /// With --write, leave the agent skill (SKILL.md for Claude Code, a section of AGENTS.md for Codex) out.
    #[arg(long)]
    no_skill: bool,
    /// Write the agent skill only: no hook entry, the settings file untouched.
    #[arg(long, conflicts_with_all = ["no_skill", "write", "matcher", "command", "budget", "policy"])]
    skill_only: bool,
}

/// The user's home folder.
pub(super) fn home() -> Result<PathBuf> {
    dirs::home_dir().ok_or_else(|| anyhow!("no home directory: use --dir"))
}

/// Codex's home folder: `CODEX_HOME`, else `~/.codex`.
pub(super) fn codex_home() -> Result<PathBuf> {
    match std::env::var_os("CODEX_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => Ok(PathBuf::from(dir)),
        None => Ok(home()?.join(".codex")),
    }
}

#[derive(Debug, clap::Args)]
pub struct UninstallArgs {
    /// The host.
    #[arg(value_enum)]
    host: Host,
    /// The user's settings and skill (as written by install --global) instead of the project's.
    #[arg(long)]
    global: bool,
    /// The project folder (default: the current directory).
    #[arg(long, conflicts_with = "global")]
    dir: Option<PathBuf>,
    /// Take out the agent skill only, and keep the hook entry.
    #[arg(long)]
    skill_only: bool,
}

/// The project folder, `None` for the user's settings (--global).
fn project_dir(global: bool, dir: Option<&Path>) -> Result<Option<PathBuf>> {
    if global {
        return Ok(None);
    }
    match dir {
        Some(dir) => Ok(Some(dir.to_path_buf())),
        None => std::env::current_dir()
            .map(Some)
            .context("no current directory: use --dir"),
    }
}

/// The settings file of a host: the project's (`Some(dir)`) or the user's.
fn settings_path(host: Host, project: Option<&Path>) -> Result<PathBuf> {
    Ok(match (host, project) {
        (Host::ClaudeCode, None) => home()?.join(".claude").join("settings.json"),
        (Host::Codex, None) => codex_home()?.join("hooks.json"),
        (Host::ClaudeCode, Some(dir)) => dir.join(".claude").join("settings.json"),
        (Host::Codex, Some(dir)) => dir.join(".codex").join("hooks.json"),
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
    remove_gate(groups, host);
    groups.push(group);
    Ok(settings)
}

/// Takes the host's gate entries out of a list of PreToolUse groups, and the groups they leave empty.
fn remove_gate(groups: &mut Vec<Value>, host: Host) {
    let ours = format!("pacerelle hook {}", host.word());
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
}

/// A settings document without the host's gate, and without the `PreToolUse` list and `hooks` object that
/// leaves empty; `None` when there was no gate of ours in it.
fn unmerge(mut settings: Value, host: Host) -> Option<Value> {
    let before = settings.clone();
    let root = settings.as_object_mut()?;
    let hooks = root.get_mut("hooks")?.as_object_mut()?;
    let groups = hooks.get_mut("PreToolUse")?.as_array_mut()?;
    remove_gate(groups, host);
    if groups.is_empty() {
        hooks.remove("PreToolUse");
    }
    if hooks.is_empty() {
        root.remove("hooks");
    }
    (settings != before).then_some(settings)
}

/// The settings file's document, `None` when there is no file.
fn read_settings(path: &Path) -> Result<Option<Value>> {
    match std::fs::read_to_string(path) {
        Ok(text) if text.trim().is_empty() => Ok(Some(json!({}))),
        Ok(text) => serde_json::from_str(&text)
            .map(Some)
            .with_context(|| format!("{} is not valid JSON; fix it or merge by hand", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// Replaces the settings file with `settings`, all at once.
fn write_settings(path: &Path, settings: &Value) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let tmp = path.with_extension("json.pacerelle-tmp");
    std::fs::write(&tmp, format!("{}\n", serde_json::to_string_pretty(settings)?))
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))
}

pub fn install(args: InstallArgs) -> Result<()> {
    let project = project_dir(args.global, args.dir.as_deref())?;
    let skill_path = skill::path(args.host, project.as_deref())?;
    if args.skill_only {
        return install_skill(args.host, &skill_path);
    }
    let command = hook_command(&args);
    let group = entry(&args.matcher, &command);
    let path = settings_path(args.host, project.as_deref())?;
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
        eprintln!(
            "With --write, the agent skill (when to ask, how to wait) goes to {} too (--no-skill to leave it \
             out; --skill-only for the skill alone).",
            skill_path.display()
        );
        return Ok(());
    }
    let existing = read_settings(&path)?.unwrap_or_else(|| json!({}));
    let merged =
        merge(existing, args.host, group).with_context(|| format!("cannot merge into {}", path.display()))?;
    write_settings(&path, &merged)?;
    println!("PreToolUse hook `{command}` written to {}", path.display());
    if args.host == Host::Codex {
        println!("Codex runs a new hook only after you trust it: open /hooks in Codex.");
    }
    if args.no_skill {
        return Ok(());
    }
    install_skill(args.host, &skill_path)
}

pub fn uninstall(args: UninstallArgs) -> Result<()> {
    let project = project_dir(args.global, args.dir.as_deref())?;
    if !args.skill_only {
        let path = settings_path(args.host, project.as_deref())?;
        let unmerged = read_settings(&path)?.and_then(|settings| unmerge(settings, args.host));
        match unmerged {
            Some(settings) => {
                write_settings(&path, &settings)?;
                println!("PreToolUse hook taken out of {}", path.display());
            }
            None => println!("No Pacerelle hook in {}", path.display()),
        }
    }
    let path = skill::path(args.host, project.as_deref())?;
    match skill::uninstall(args.host, &path)? {
        skill::Removal::Removed => println!("Agent skill taken out of {}", path.display()),
        skill::Removal::Absent => println!("No Pacerelle agent skill in {}", path.display()),
        skill::Removal::LeftAlone(reason) => eprintln!("warning: {reason}"),
    }
    Ok(())
}

/// Writes the agent skill and says what became of it; a file that is not ours is left alone with a warning.
fn install_skill(host: Host, path: &Path) -> Result<()> {
    match skill::install(host, path)? {
        skill::Outcome::Written => println!("Agent skill written to {}", path.display()),
        skill::Outcome::Unchanged => println!("Agent skill in {} is up to date", path.display()),
        skill::Outcome::LeftAlone(reason) => eprintln!("warning: {reason}"),
    }
    if let Some(over) = skill::shadowed_by(host, path) {
        eprintln!(
            "warning: {} is read instead of {} by Codex: copy the Pacerelle section into it",
            over.display(),
            path.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn uninstall_takes_out_only_the_hosts_gate() {
        let installed = merge(
            json!({"model": "x", "hooks": {"PreToolUse": [
                {"matcher": "Bash", "hooks": [{"type": "command", "command": "other-tool check"}]},
                {"matcher": "*", "hooks": [{"type": "command", "command": "pacerelle hook codex"}]}
            ]}}),
            Host::ClaudeCode,
            entry("*", "pacerelle hook claude-code --budget 100"),
        )
        .expect("merge");
        let out = unmerge(installed, Host::ClaudeCode).expect("ours was there");
        let groups = out["hooks"]["PreToolUse"].as_array().expect("list");
        assert_eq!(groups.len(), 2, "{out}");
        assert_eq!(groups[0]["hooks"][0]["command"], "other-tool check");
        assert_eq!(groups[1]["hooks"][0]["command"], "pacerelle hook codex");
        assert_eq!(
            unmerge(out.clone(), Host::ClaudeCode),
            None,
            "nothing of ours left"
        );

        let only_ours = merge(
            json!({"model": "x"}),
            Host::Codex,
            entry("*", "pacerelle hook codex"),
        )
        .expect("merge");
        assert_eq!(unmerge(only_ours, Host::Codex), Some(json!({"model": "x"})));
        assert_eq!(unmerge(json!([1]), Host::Codex), None);
    }
}
