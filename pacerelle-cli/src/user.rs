//! Partner mode, agent side: `user connect`, `user list`, `user show`, `user disconnect`. A user is a named
//! group of devices, connected by a pairing link, that answers only the questions addressed to it.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use pacerelle_client::core::pairing::MAX_ICON_LEN;
use pacerelle_client::{agent::ConnectOptions, agent::UserInfo, core::pairing::Branding};

use crate::Global;
use crate::agent;
use crate::home;
use crate::output;

#[derive(Debug, clap::Subcommand)]
pub enum UserCommand {
    /// Connect a user of the agent (or give a known one another device): prints a pairing link for them.
    /// Whoever opens it answers the questions addressed to this user, and only those.
    Connect {
        /// Your own id for the user (1 to 128 characters).
        external_id: String,
        /// The user's name, shown with their devices (1 to 200 characters).
        #[arg(long)]
        name: String,
        /// The accent colour the app shows the agent in, `#rrggbb`.
        #[arg(long, value_name = "#RRGGBB")]
        accent: Option<String>,
        /// The icon the app shows for the agent: a .png, .svg or .jpg file, sent inline (its data URL at
        /// most 16 KiB).
        #[arg(long, value_name = "FILE")]
        icon: Option<std::path::PathBuf>,
        /// How long the link can be used (30s, 10m, 1h; at most 1 hour).
        #[arg(long, default_value = "10m", value_parser = crate::time::parse_duration)]
        ttl: Duration,
        /// The URL phones use to reach the relay, if not the one this command uses.
        #[arg(long, env = "PACERELLE_PUBLIC_URL")]
        public_url: Option<String>,
    },
    /// List the users, disconnected ones included: their devices and last answer.
    List,
    /// Show one user: their devices and last answer.
    Show {
        /// The user's id.
        external_id: String,
    },
    /// Disconnect a user: every device of theirs is revoked at once and their answers no longer count.
    Disconnect {
        /// The user's id.
        external_id: String,
    },
}

pub async fn run(global: &Global, cmd: UserCommand) -> Result<()> {
    match cmd {
        UserCommand::Connect {
            external_id,
            name,
            accent,
            icon,
            ttl,
            public_url,
        } => {
            let branding = branding(accent, icon.as_deref())?;
            let agent = home::agent_client(global)?;
            let link = agent
                .connect_user(
                    &external_id,
                    &name,
                    ConnectOptions {
                        branding,
                        ttl: Some(ttl),
                        public_url,
                    },
                )
                .await?;
            if global.json {
                return output::json(&serde_json::json!({
                    "externalId": external_id,
                    "name": name,
                    "link": link.link,
                    "pairingId": link.pairing_id,
                    "deviceId": link.device_id,
                    "expiresAt": link.expires_at,
                }));
            }
            println!(
                "For {name} ({external_id}): their device answers only the questions addressed to them."
            );
            agent::print_link(&link);
            Ok(())
        }
        UserCommand::List => {
            let users = home::agent_client(global)?.list_users().await?;
            if global.json {
                return output::json(&users);
            }
            if users.is_empty() {
                println!("no user yet: connect one with `pacerelle user connect ID --name NAME`");
            }
            users.iter().for_each(|u| println!("{}", user_line(u)));
            Ok(())
        }
        UserCommand::Show { external_id } => {
            let user = home::agent_client(global)?.get_user(&external_id).await?;
            if global.json {
                return output::json(&user);
            }
            println!("{}", user_line(&user));
            for d in &user.devices {
                let state = match (d.revoked_at, d.paired_at) {
                    (Some(t), _) => format!("revoked {t}"),
                    (None, Some(t)) => format!("paired {t}"),
                    (None, None) => "waiting: the link was not used yet".to_string(),
                };
                let name = d.name.as_deref().unwrap_or("-");
                println!("  {}  {name}  {state}", d.device_id);
            }
            Ok(())
        }
        UserCommand::Disconnect { external_id } => {
            let user = home::agent_client(global)?.disconnect_user(&external_id).await?;
            if global.json {
                return output::json(&user);
            }
            let revoked = user.devices.iter().filter(|d| d.revoked_at.is_some()).count();
            println!(
                "disconnected {} ({}): {revoked} device{} revoked",
                user.name,
                user.external_id,
                if revoked == 1 { "" } else { "s" }
            );
            Ok(())
        }
    }
}

/// One user in a line: id, name, connected or not, devices paired/waiting/revoked, last answer.
fn user_line(u: &UserInfo) -> String {
    let state = match u.disconnected_at {
        Some(t) => format!("disconnected {t}"),
        None => "connected".to_string(),
    };
    let revoked = u.devices.iter().filter(|d| d.revoked_at.is_some()).count();
    let paired = u
        .devices
        .iter()
        .filter(|d| d.revoked_at.is_none() && d.paired)
        .count();
    let waiting = u
        .devices
        .iter()
        .filter(|d| d.revoked_at.is_none() && !d.paired)
        .count();
    let last = match &u.last_answer {
        Some(e) => {
            let answer = e.answer.as_ref().map(|a| format!(": {a}")).unwrap_or_default();
            let at = e.answered_at.unwrap_or(e.created_at);
            format!("last answer {at}{answer}")
        }
        None => "no answer yet".to_string(),
    };
    format!(
        "{}  {}  {state}  devices: {paired} paired, {waiting} waiting, {revoked} revoked  {last}",
        u.external_id, u.name
    )
}

/// The branding `--accent` and `--icon` give, checked before anything is sent.
fn branding(accent: Option<String>, icon: Option<&Path>) -> Result<Option<Branding>> {
    if accent.is_none() && icon.is_none() {
        return Ok(None);
    }
    let icon = icon.map(icon_data_url).transpose()?;
    let branding = Branding {
        accent_color: accent,
        icon,
    };
    branding
        .validate()
        .map_err(|why| output::invalid_input(format!("--accent/--icon: {why}")))?;
    Ok(Some(branding))
}

/// Reads an icon file into a `data:` URL: its type from its extension (.png, .svg, .jpg or .jpeg), at most
/// 16 KiB in all.
fn icon_data_url(path: &Path) -> Result<String> {
    let extension = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    let mime = match extension.as_deref() {
        Some("png") => "image/png",
        Some("svg") => "image/svg+xml",
        Some("jpg" | "jpeg") => "image/jpeg",
        _ => {
            return Err(output::invalid_input(format!(
                "--icon {}: an icon is a .png, .svg or .jpg file",
                path.display()
            )));
        }
    };
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    if bytes.is_empty() {
        return Err(output::invalid_input(format!(
            "--icon {}: the file is empty",
            path.display()
        )));
    }
    let url = format!("data:{mime};base64,{}", base64(&bytes));
    if url.len() > MAX_ICON_LEN {
        return Err(output::invalid_input(format!(
            "--icon {}: too large ({} bytes, {} as a data URL); an icon's data URL is at most 16 KiB, a file \
             of about 12 KiB",
            path.display(),
            bytes.len(),
            url.len()
        )));
    }
    Ok(url)
}

/// Standard base64 with padding (RFC 4648 §4), as a `data:` URL holds it.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_is_the_standard_alphabet_with_padding() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foob"), "Zm9vYg==");
        assert_eq!(base64(b"fooba"), "Zm9vYmE=");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64(&[0xfb, 0xff, 0xbf]), "+/+/");
    }

    #[test]
    fn an_icon_is_a_small_png_svg_or_jpeg() {
        let dir = tempfile::tempdir().expect("tempdir");
        let svg = dir.path().join("icon.svg");
        std::fs::write(&svg, "<svg xmlns='http://www.w3.org/2000/svg'/>").expect("write");
        let url = icon_data_url(&svg).expect("svg");
        assert!(url.starts_with("data:image/svg+xml;base64,"), "{url}");
        let jpg = dir.path().join("icon.JPG");
        std::fs::write(&jpg, [0xff, 0xd8, 0xff]).expect("write");
        assert!(
            icon_data_url(&jpg)
                .expect("jpg")
                .starts_with("data:image/jpeg;base64,")
        );

        let gif = dir.path().join("icon.gif");
        std::fs::write(&gif, "GIF89a").expect("write");
        assert!(format!("{:#}", icon_data_url(&gif).expect_err("gif")).contains(".png, .svg or .jpg"));
        let big = dir.path().join("big.png");
        std::fs::write(&big, vec![7u8; 13 * 1024]).expect("write");
        assert!(format!("{:#}", icon_data_url(&big).expect_err("too big")).contains("at most 16 KiB"));
        assert!(icon_data_url(&dir.path().join("missing.png")).is_err());

        assert!(
            branding(Some("#0a7d5a".into()), Some(&svg))
                .expect("ok")
                .is_some()
        );
        assert!(branding(None, None).expect("none").is_none());
        assert!(branding(Some("green".into()), None).is_err());
    }
}
