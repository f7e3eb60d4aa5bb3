//! `pacerelle webhook set|show|clear|deliveries`.

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::Global;
use crate::home;
use crate::output;
use crate::secret;

/// The environment variable that may hold the signing secret.
const SECRET_VAR: &str = "PACERELLE_WEBHOOK_SECRET";

#[derive(Debug, clap::Subcommand)]
pub enum WebhookCommand {
    /// Send question events (answered, expired, cancelled) to URL, signed with a secret.
    ///
    /// The signing secret (16 to 256 characters; the receiver verifies signatures with it) comes from
    /// --secret-file, else --secret, else the environment variable PACERELLE_WEBHOOK_SECRET. Prefer the file
    /// or the variable: other users of this computer can read command lines in the process list.
    #[command(
        after_help = "Example: openssl rand -hex 32 > hook.secret && pacerelle webhook set \
                            https://hooks.example/pacerelle --secret-file hook.secret"
    )]
    Set {
        /// An http:// or https:// URL.
        url: String,
        /// Read the signing secret from this file, which holds it alone on one line (`-`: standard input).
        #[arg(long, value_name = "PATH")]
        secret_file: Option<PathBuf>,
        /// The signing secret itself. Discouraged: visible to other users in the process list; use
        /// --secret-file or PACERELLE_WEBHOOK_SECRET.
        #[arg(long, value_name = "SECRET", conflicts_with = "secret_file")]
        secret: Option<String>,
    },
    /// Show the webhook's URL.
    Show,
    /// Stop sending events.
    Clear,
    /// The latest deliveries, newest first.
    Deliveries {
        /// How many (1 to 100).
        #[arg(long, default_value_t = 20)]
        limit: u32,
    },
}

fn print_info(info: &pacerelle_client::core::wire::WebhookInfo) {
    match (&info.url, info.updated_at) {
        (Some(url), Some(at)) => println!("{url} (set {at})"),
        (Some(url), None) => println!("{url}"),
        (None, _) => println!("no webhook"),
    }
}

/// The signing secret: from `--secret-file`, else `--secret`, else `PACERELLE_WEBHOOK_SECRET`.
fn signing_secret(file: Option<&Path>, arg: Option<String>) -> Result<String> {
    if let Some(path) = file {
        return secret::from_file(path, "webhook secret");
    }
    if let Some(secret) = arg {
        return Ok(secret);
    }
    match std::env::var(SECRET_VAR) {
        Ok(secret) if !secret.is_empty() => Ok(secret),
        Err(std::env::VarError::NotUnicode(_)) => {
            Err(output::invalid_input(format!("{SECRET_VAR} is not UTF-8 text")))
        }
        _ => Err(output::invalid_input(format!(
            "no webhook secret: give it with --secret-file PATH (`-` for standard input) or in {SECRET_VAR}"
        ))),
    }
}

pub async fn run(global: &Global, cmd: WebhookCommand) -> Result<()> {
    let agent = home::agent_client(global)?;
    match cmd {
        WebhookCommand::Set {
            url,
            secret_file,
            secret,
        } => {
            let secret = signing_secret(secret_file.as_deref(), secret)?;
            let info = agent.set_webhook(&url, &secret).await?;
            if global.json {
                return output::json(&info);
            }
            print_info(&info);
        }
        WebhookCommand::Show => {
            let info = agent.webhook().await?;
            if global.json {
                return output::json(&info);
            }
            print_info(&info);
        }
        WebhookCommand::Clear => {
            let info = agent.clear_webhook().await?;
            if global.json {
                return output::json(&info);
            }
            println!("webhook removed");
        }
        WebhookCommand::Deliveries { limit } => {
            let deliveries = agent.webhook_deliveries(limit).await?;
            if global.json {
                return output::json(&deliveries);
            }
            if deliveries.is_empty() {
                println!("no deliveries yet");
            }
            for d in deliveries {
                let status = d.last_status.map(|s| format!(" HTTP {s}")).unwrap_or_default();
                let error = d.last_error.map(|e| format!(" — {e}")).unwrap_or_default();
                println!(
                    "{}  {}  {:<18} {}  {:<9} attempts {}{status}{error}",
                    d.created_at, d.event_id, d.event_type, d.question_id, d.state, d.attempts
                );
            }
        }
    }
    Ok(())
}
