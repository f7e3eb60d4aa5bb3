//! Agent-side commands: `agent create`, `agent devices`, `agent revoke`, `pair`.

use anyhow::Result;
use pacerelle_client::core::roster::{DeviceSigning, Roster};
use pacerelle_client::{AgentClient, agent::PairingOptions};

use crate::Global;
use crate::home;
use crate::output;
use pacerelle_client::agent::AgentFile;

#[derive(Debug, clap::Subcommand)]
pub enum AgentCommand {
    /// Create an agent: its id and token are drawn here; the relay learns only a hash of the token.
    Create {
        /// Its display name.
        #[arg(long)]
        name: String,
        /// The relay's registration secret, when registration is not open.
        #[arg(long, env = "PACERELLE_REGISTRATION_SECRET", hide_env_values = true)]
        registration_secret: Option<String>,
        /// Replace the agent saved in PACERELLE_HOME.
        #[arg(long)]
        force: bool,
    },
    /// List the devices paired with the agent, and what the agent's own roster says of each.
    Devices,
    /// Adopt into the agent's device roster the devices the relay lists as active: only for devices paired
    /// before the agent kept a roster. It trusts the relay's list once: check it first with `agent devices`.
    Adopt,
    /// Require signed answers (`on`: a device with no signing key approves nothing), or accept again the
    /// unsigned answers of devices paired before signing keys (`off`). New agents require them already.
    RequireSigned {
        /// `on` or `off`.
        #[arg(value_parser = ["on", "off"])]
        setting: String,
    },
    /// Revoke a device: its credential stops working at once.
    Revoke {
        /// The device's id.
        device_id: String,
    },
}

#[derive(Debug, clap::Args)]
pub struct PairArgs {
    /// A label for the new device ("phone").
    #[arg(long)]
    name: Option<String>,
    /// Minutes the link stays valid (1 to 60).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=60))]
    minutes: u64,
    /// The URL phones use to reach the relay, if not the one this command uses.
    #[arg(long, env = "PACERELLE_PUBLIC_URL")]
    public_url: Option<String>,
}

pub async fn run(global: &Global, cmd: AgentCommand) -> Result<()> {
    match cmd {
        AgentCommand::Create {
            name,
            registration_secret,
            force,
        } => {
            let relay = home::relay_url(global, None);
            let agent = AgentClient::register(&relay, &name, registration_secret.as_deref())
                .await?
                .with_home(Some(&global.home.0));
            let token = agent.token().expose();
            let saved = if force || global.home.read_agent()?.is_none() {
                global.home.write_agent(&AgentFile {
                    relay_url: relay.clone(),
                    agent_id: agent.agent_id().to_string(),
                    name: name.clone(),
                    token: token.clone(),
                })?;
                true
            } else {
                false
            };
            if global.json {
                output::json(&serde_json::json!({
                    "agentId": agent.agent_id(), "token": token, "relayUrl": relay, "saved": saved,
                }))
            } else {
                println!("agentId: {}", agent.agent_id());
                println!("token:   {token}");
                if saved {
                    println!(
                        "saved in {} (readable by you only)",
                        global.home.agent_path().display()
                    );
                } else {
                    println!(
                        "not saved: {} already holds an agent (use --force to replace it)",
                        global.home.agent_path().display()
                    );
                }
                println!("Keep the token secret: it opens every message of this agent.");
                Ok(())
            }
        }
        AgentCommand::Devices => {
            let agent = home::agent_client(global)?;
            let devices = agent.devices().await?;
            // The keys the devices sealed are pinned (or refused) first, so that the list says who signs.
            let roster = agent.pin_signing_keys().await?;
            if global.json {
                let listed: Vec<serde_json::Value> = devices
                    .iter()
                    .map(|d| {
                        let mut v = serde_json::to_value(d).unwrap_or_default();
                        v["trusted"] = roster.may_approve(&d.device_id).into();
                        v["roster"] = roster_word(&roster, &d.device_id).into();
                        let (signs, why) = signing_word(&roster, &d.device_id);
                        v["signs"] = signs.into();
                        v["signing"] = why.into();
                        v["fingerprint"] = fingerprint(&roster, &d.device_id).into();
                        v
                    })
                    .collect();
                return output::json(&serde_json::json!({
                    "rosterVersion": roster.version,
                    "requireSignedSince": roster.require_signed_since.map(|t| t.to_string()),
                    "devices": listed,
                }));
            }
            if devices.is_empty() {
                println!("no device paired yet: run `pacerelle pair`");
            }
            for d in &devices {
                let state = match d.revoked_at {
                    Some(t) => format!("revoked {}", t),
                    None => "active".to_string(),
                };
                let (_, signing) = signing_word(&roster, &d.device_id);
                println!(
                    "{}  {:<24} {:<6} paired {}  {state}  roster: {}  {signing}",
                    d.device_id,
                    d.name,
                    d.role.as_str(),
                    d.created_at,
                    roster_word(&roster, &d.device_id)
                );
            }
            match roster.require_signed_since {
                Some(t) => println!(
                    "\nSigned answers required since {t}: a device that cannot sign approves nothing."
                ),
                None => println!(
                    "\nUnsigned answers of devices paired before signing keys still count: \
                     `pacerelle agent require-signed on` refuses them."
                ),
            }
            if roster.version == 0 && devices.iter().any(|d| d.revoked_at.is_none()) {
                println!(
                    "\nThese devices were paired before this agent kept a device roster: none of them can approve.\n\
                     If the list is yours, run `pacerelle agent adopt`; otherwise revoke them and pair again."
                );
            }
            Ok(())
        }
        AgentCommand::Adopt => {
            let agent = home::agent_client(global)?;
            let roster = agent.adopt_devices().await?;
            if global.json {
                return output::json(&serde_json::json!({
                    "rosterVersion": roster.version,
                    "trusted": roster.devices.iter().filter(|d| roster.may_approve(&d.device_id)).map(|d| &d.device_id).collect::<Vec<_>>(),
                }));
            }
            // The names come from the device list; the roster itself holds ids only.
            let devices = agent.devices().await.unwrap_or_default();
            println!("device roster version {}:", roster.version);
            for d in &roster.devices {
                let word = roster_word(&roster, &d.device_id);
                match devices.iter().find(|x| x.device_id == d.device_id) {
                    Some(x) => println!("  {}  {}  {word}", x.name, d.device_id),
                    None => println!("  {}  {word}", d.device_id),
                }
            }
            Ok(())
        }
        AgentCommand::RequireSigned { setting } => {
            let roster = home::agent_client(global)?
                .require_signed(setting == "on")
                .await?;
            if global.json {
                return output::json(&serde_json::json!({
                    "rosterVersion": roster.version,
                    "requireSignedSince": roster.require_signed_since.map(|t| t.to_string()),
                }));
            }
            match roster.require_signed_since {
                Some(t) => println!("signed answers required since {t}"),
                None => println!("unsigned answers of devices without a signing key count again"),
            }
            Ok(())
        }
        AgentCommand::Revoke { device_id } => {
            let d = home::agent_client(global)?.revoke_device(&device_id).await?;
            if global.json {
                output::json(&d)
            } else {
                println!("revoked {} ({})", d.device_id, d.name);
                Ok(())
            }
        }
    }
}

pub async fn pair(global: &Global, args: PairArgs) -> Result<()> {
    let agent = home::agent_client(global)?;
    let link = agent
        .create_pairing(PairingOptions {
            label: args.name,
            ttl: std::time::Duration::from_secs(args.minutes * 60),
            public_url: args.public_url,
            ..Default::default()
        })
        .await?;
    if global.json {
        return output::json(&serde_json::json!({
            "link": link.link, "pairingId": link.pairing_id, "deviceId": link.device_id, "expiresAt": link.expires_at,
        }));
    }
    print_link(&link);
    Ok(())
}

/// Prints a pairing link for a terminal: the link, its QR code, and how to open it from another terminal.
pub fn print_link(link: &pacerelle_client::agent::PairingLink) {
    println!(
        "Pairing link (single use, valid {}):\n\n  {}\n",
        output::until(link.expires_at),
        link.link
    );
    if let Some(qr) = output::qr(&link.link) {
        println!("{qr}");
    }
    println!(
        "On another terminal: pacerelle device join -   (then paste the link: a link in a command line is visible to other users)"
    );
}

/// Whether a device's answers are signed, as the roster says: a word for `--json` (`signs`, `unsigned`,
/// `cannot_sign`) and a phrase for people.
fn signing_word(roster: &Roster, device_id: &str) -> (&'static str, String) {
    match roster.signing(device_id) {
        DeviceSigning::Pinned(key) => ("signs", format!("signs (key {})", key.fingerprint())),
        DeviceSigning::Unsigned => (
            "unsigned",
            "unsigned (no signing key: its answers count, unsigned)".to_string(),
        ),
        DeviceSigning::MustSign(why) => ("cannot_sign", format!("cannot sign: {why}")),
    }
}

/// The fingerprint of the key the roster pins for a device, if any.
fn fingerprint(roster: &Roster, device_id: &str) -> Option<String> {
    match roster.signing(device_id) {
        DeviceSigning::Pinned(key) => Some(key.fingerprint()),
        _ => None,
    }
}

/// What the agent's roster says of a device, in one word.
fn roster_word(roster: &Roster, device_id: &str) -> &'static str {
    match roster.device(device_id) {
        None => "absent (cannot approve)",
        Some(d) if d.revoked_at.is_some() => "revoked",
        Some(d) if roster.may_approve(&d.device_id) => "owner (approves)",
        Some(d) if d.user.is_some() => "user's device (answers for its user only)",
        Some(_) => "user (cannot approve)",
    }
}
