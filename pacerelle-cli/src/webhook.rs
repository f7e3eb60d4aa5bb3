//! `pacerelle webhook set|show|clear|deliveries`.

use anyhow::Result;

use crate::Global;
use crate::home;
use crate::output;

#[derive(Debug, clap::Subcommand)]
pub enum WebhookCommand {
    /// Send question events (answered, expired, cancelled) to URL, signed with a secret.
    Set {
        /// An http:// or https:// URL.
        url: String,
        /// The signing secret, 16 to 256 characters (the receiver verifies signatures with it).
        #[arg(long, env = "PACERELLE_WEBHOOK_SECRET", hide_env_values = true)]
        secret: String,
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

fn print_info(info: &pacerelle_client::WebhookInfo) {
    match (&info.url, info.updated_at) {
        (Some(url), Some(at)) => println!("{url} (set {at})"),
        (Some(url), None) => println!("{url}"),
        (None, _) => println!("no webhook"),
    }
}

pub async fn run(global: &Global, cmd: WebhookCommand) -> Result<()> {
    let agent = home::agent_client(global)?;
    match cmd {
        WebhookCommand::Set { url, secret } => {
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
