//! `pacerelle grants`: the grants given to an agent's gate, listed and revoked from this terminal acting as an
//! owner device (docs/hooks.md, "Grants").

use anyhow::Result;
use pacerelle_client::core::Timestamp;
use pacerelle_client::core::wire::GrantRecord;
use pacerelle_client::device::ListedGrant;

use crate::Global;
use crate::device::{AgentArg, scope_words};
use crate::{home, output};

#[derive(Debug, clap::Subcommand)]
pub enum GrantsCommand {
    /// List the grants given to the agent's gate (live, or ended less than a day ago), newest first: what
    /// each covers, who gave it, until when, and how many calls it let run.
    List(AgentArg),
    /// Revoke a grant: the gate asks again for the calls it covered, from its next check on.
    Revoke {
        /// The grant's id, as `pacerelle grants list` shows it (the id of the question it answered).
        grant_id: String,
        #[command(flatten)]
        target: AgentArg,
    },
}

pub async fn run(global: &Global, command: GrantsCommand) -> Result<()> {
    match command {
        GrantsCommand::List(target) => {
            let (_, device) = home::device_client(global, target.agent.as_deref(), "list its grants")?;
            let grants = device.grants().await?;
            if global.json {
                return output::json(&grants);
            }
            if grants.is_empty() {
                println!("no grants: answer a gate question `yes --for 1h` to give one");
            }
            let now = Timestamp::now();
            for g in &grants {
                print_grant(g, now);
            }
            Ok(())
        }
        GrantsCommand::Revoke { grant_id, target } => {
            let (_, device) = home::device_client(global, target.agent.as_deref(), "revoke a grant")?;
            let record = device.revoke_grant(&grant_id).await?;
            if global.json {
                return output::json(&record);
            }
            println!(
                "revoked {} at {}: the gate asks again for the calls it covered",
                record.grant_id,
                output::clock(record.revoked_at.unwrap_or_else(Timestamp::now))
            );
            Ok(())
        }
    }
}

/// Where a grant stands at `now`, in words.
fn standing(r: &GrantRecord, now: Timestamp) -> String {
    match (r.revoked_at, r.revoked_by.as_deref()) {
        (Some(at), by) => format!("revoked at {} by {}", output::clock(at), by.unwrap_or("?")),
        (None, _) if r.expires_at <= now => format!("ended at {}", output::clock(r.expires_at)),
        (None, _) => format!(
            "live until {} ({} left)",
            output::clock(r.expires_at),
            output::until(r.expires_at)
        ),
    }
}

fn print_grant(g: &ListedGrant, now: Timestamp) {
    let r = &g.record;
    let by = g
        .question
        .as_ref()
        .and_then(|q| q.answered_by_name.clone())
        .unwrap_or_else(|| r.device_id.clone());
    let uses = match r.uses {
        1 => "1 use".to_string(),
        n => format!("{n} uses"),
    };
    println!(
        "{}  given on {by} at {} · {} · {uses}",
        r.grant_id,
        output::clock(r.granted_at),
        standing(r, now)
    );
    match (&g.grant, &g.question) {
        (Some(grant), _) => println!("  {}", scope_words(&grant.scope)),
        (None, Some(q)) => println!("  for: {}", q.question),
        (None, None) => println!("  (its question was not sealed for this device)"),
    }
}
