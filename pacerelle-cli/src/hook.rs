//! `pacerelle hook claude-code|codex`: the PreToolUse gate, and `pacerelle hook install`.
//!
//! The gate reads the host's PreToolUse JSON on standard input ([`host`]), hands the call to
//! [`pacerelle_client::gate`] — the policy, the gate's own files, asking the owner within a budget below the
//! host's time limit — and prints the host's decision JSON on standard output, exit 0:
//!
//! ```json
//! {"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"…"}}
//! ```
//!
//! It fails closed: anything but an allow rule or an authenticated yes — a relay that cannot be reached, a
//! bad policy file, malformed input, a timeout, a no, an answer that does not open, even a crash of this
//! process — denies, with the reason. Each decision is logged at `info` with its conclusion
//! (`PACERELLE_LOG=pacerelle::gate=info`).
//!
//! `hook install --write` also writes the agent skill ([`skill`]): the MCP server's instructions where each
//! host reads instructions.

mod diff;
mod host;
mod install;
pub mod skill;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use pacerelle_client::gate::{self, Asking, Gate, Ruling};
use pacerelle_client::{agent::GrantBook, gate::Conclusion};

pub use host::{Decision, guard_against_panics, print_decision};
use install::{InstallArgs, UninstallArgs};

use crate::Global;
use crate::home;

/// Default time the gate may take, in seconds: below the 600 s command-hook limit of both hosts.
pub const DEFAULT_BUDGET_SECONDS: u64 = 540;

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
    /// Print (or, with --write, merge into the host's settings) the hook entry; with --write, write the agent
    /// skill too.
    Install(InstallArgs),
    /// Take the hook entry and the agent skill written by `install --write` out again.
    Uninstall(UninstallArgs),
}

impl HookCommand {
    /// True for the gates, which must answer with a decision whatever happens.
    pub fn is_gate(&self) -> bool {
        matches!(self, HookCommand::ClaudeCode(_) | HookCommand::Codex(_))
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

pub async fn run(global: &Global, cmd: HookCommand) -> Result<ExitCode> {
    match cmd {
        HookCommand::ClaudeCode(args) => {
            print_decision(&decide(global, Host::ClaudeCode, &args).await);
            Ok(ExitCode::SUCCESS)
        }
        HookCommand::Codex(args) => {
            print_decision(&decide(global, Host::Codex, &args).await);
            Ok(ExitCode::SUCCESS)
        }
        HookCommand::Install(args) => install::install(args).map(|()| ExitCode::SUCCESS),
        HookCommand::Uninstall(args) => install::uninstall(args).map(|()| ExitCode::SUCCESS),
    }
}

/// Decides a tool call; never fails, never allows but by rule or an authenticated yes.
async fn decide(global: &Global, host: Host, args: &GateArgs) -> Decision {
    let budget = Duration::from_secs(args.budget);
    let started = tokio::time::Instant::now();
    let (conclusion, decision) =
        match tokio::time::timeout(budget, rule(global, host, args, started + budget)).await {
            Ok((conclusion, decision)) => (conclusion, decision),
            Err(_) => (
                Conclusion::Pending,
                Decision::deny(format!(
                    "Pacerelle: no decision within the {} s budget; denied (no answer is a no)",
                    args.budget
                )),
            ),
        };
    tracing::info!(target: "pacerelle::gate", %conclusion, allow = decision.allow, "decided");
    decision
}

/// Reads the call, and lets the client's gate conclude.
async fn rule(
    global: &Global,
    host: Host,
    args: &GateArgs,
    deadline: tokio::time::Instant,
) -> (Conclusion, Decision) {
    let input = match host::read_stdin()
        .await
        .and_then(|bytes| host::parse_input(&bytes))
    {
        Ok(input) => input,
        Err(reason) => {
            return (
                Conclusion::Error,
                Decision::deny(format!("Pacerelle: {reason}; denied")),
            );
        }
    };
    let gate = match Gate::load(args.policy.as_deref(), input.cwd.as_deref()) {
        Ok(gate) => gate,
        Err(e) => {
            return (
                Conclusion::Error,
                Decision::deny(format!("Pacerelle: {e}; denied until it is fixed")),
            );
        }
    };
    let tool_input = host::normalise(&input.tool_name, &input.tool_input);
    let evaluation = gate.evaluate(&input.tool_name, &tool_input);
    let ruling = match Ruling::by_policy(&evaluation) {
        Some(ruling) => ruling,
        None => {
            let agent = match home::agent_client(global) {
                Ok(agent) => agent,
                Err(e) => {
                    return (
                        Conclusion::Error,
                        Decision::deny(format!("Pacerelle could not ask the owner ({e:#}); denied")),
                    );
                }
            };
            let book = GrantBook::at(home::grants_path(global, agent.agent_id()));
            let cwd = input.cwd.as_deref();
            if let Some(ruling) =
                gate::by_grant(&agent, &book, &gate, &input.tool_name, &tool_input, cwd).await
            {
                return (ruling.conclusion, Decision::of(ruling));
            }
            let (question, details) =
                host::describe(host, &input.tool_name, &tool_input, cwd, &evaluation.reason);
            let offer = gate.offer(&evaluation, &input.tool_name, &tool_input, cwd);
            let request = gate
                .question_for(question, &evaluation)
                .with_details(details)
                .offering(offer);
            let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
            let ruling = gate::ask(&agent, Asking::within(request, remaining)).await;
            if let Err(e) = gate::keep_grant(&agent, &book, &ruling).await {
                tracing::warn!(error = %e, "the grant given with the yes could not be kept");
            }
            ruling
        }
    };
    (ruling.conclusion, Decision::of(ruling))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pacerelle_core::policy::{self, Call, Policy};
    use serde_json::{Value, json};

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
    fn gate_words_name_the_gates() {
        assert!(is_gate("claude-code") && is_gate("codex") && !is_gate("install") && !is_gate("uninstall"));
    }
}
