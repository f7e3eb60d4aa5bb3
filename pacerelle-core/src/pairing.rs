//! Pairing (DESIGN §4): a 32-byte secret in a link's fragment, an offer sealed with a key derived from it.
//!
//! From the pairing secret `s`, with `salt = "pacerelle/v1/pairing"`:
//! - `pairingId   = base64url(HKDF(s, salt, "id")[0..16])` — public, names the offer at the relay;
//! - `pairingKey  = HKDF(s, salt, "key")` — seals the offer;
//! - `claimSecret = HKDF(s, salt, "claim")` — proves to the relay that the claimer read the link; the relay
//!   only stores `SHA-256(claimSecret)`.
//!
//! The link is `<relay>/pair#v1.<base64url(s)>`: the fragment never reaches the relay.

use serde::{Deserialize, Serialize};

#[cfg(feature = "content")]
use crate::envelope;
#[cfg(feature = "content")]
use crate::envelope::{Aad, Direction, kind};
use crate::error::{Error, Result};
use crate::keys;
#[cfg(feature = "content")]
use crate::keys::ContentKey;
use crate::time::Timestamp;

/// Salt of every pairing derivation.
pub const SALT: &str = "pacerelle/v1/pairing";
/// Default lifetime of an offer: 10 minutes.
pub const DEFAULT_TTL_SECONDS: u64 = 600;
/// Longest lifetime of an offer: one hour. The relay caps an offer's `expiresAt` there too.
pub const MAX_TTL_SECONDS: u64 = 3600;

/// Checks an offer's lifetime: at least one second, at most [`MAX_TTL_SECONDS`]. Every surface that lets a
/// caller choose it (the client, the CLI's `--ttl`, MCP's `linkTtlSeconds`, Python's `ttl`) goes through this.
pub fn check_ttl(ttl: std::time::Duration) -> std::result::Result<(), &'static str> {
    if ttl.is_zero() || ttl > std::time::Duration::from_secs(MAX_TTL_SECONDS) {
        return Err("a pairing link lasts between 1 second and 1 hour (3600 s)");
    }
    Ok(())
}

/// The secret a pairing link carries. `Debug` hides it.
#[derive(Clone, PartialEq, Eq)]
pub struct PairingSecret(pub [u8; 32]);

impl std::fmt::Debug for PairingSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PairingSecret(…)")
    }
}

impl PairingSecret {
    /// A fresh secret.
    pub fn generate() -> Self {
        PairingSecret(keys::random_array())
    }

    /// The public id of the offer.
    pub fn pairing_id(&self) -> String {
        let okm = keys::hkdf32(&self.0, SALT.as_bytes(), b"id");
        crate::b64::encode(&okm[..16])
    }

    /// The key that seals the offer.
    #[cfg(feature = "content")]
    pub fn pairing_key(&self) -> ContentKey {
        ContentKey(keys::hkdf32(&self.0, SALT.as_bytes(), b"key"))
    }

    /// The secret sent when claiming.
    pub fn claim_secret(&self) -> [u8; 32] {
        keys::hkdf32(&self.0, SALT.as_bytes(), b"claim")
    }

    /// `SHA-256(claimSecret)`, uploaded with the offer.
    pub fn claim_hash(&self) -> [u8; 32] {
        keys::sha256(&self.claim_secret())
    }

    /// The link `<relay_url>/pair#v1.<secret>`.
    pub fn link(&self, relay_url: &str) -> String {
        format!(
            "{}/pair#v1.{}",
            relay_url.trim_end_matches('/'),
            crate::b64::encode(&self.0)
        )
    }

    /// Parses a pairing link into the relay's base URL and the secret.
    pub fn parse_link(link: &str) -> Result<(String, PairingSecret)> {
        let (base, fragment) = link.trim().split_once('#').ok_or(Error::MalformedLink)?;
        let relay = base.strip_suffix("/pair").ok_or(Error::MalformedLink)?;
        if !(relay.starts_with("http://") || relay.starts_with("https://")) {
            return Err(Error::MalformedLink);
        }
        let secret = fragment.strip_prefix("v1.").ok_or(Error::MalformedLink)?;
        let secret: [u8; 32] = crate::b64::decode_array(secret).ok_or(Error::MalformedLink)?;
        Ok((relay.to_string(), PairingSecret(secret)))
    }
}

/// The role a paired device gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The agent's person: sends tasks and answers questions.
    Owner,
    /// A Partner-mode end user: answers the questions addressed to them.
    User,
}

impl Role {
    /// The role's wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Owner => "owner",
            Role::User => "user",
        }
    }
}

/// What a pairing offer carries, sealed with the pairing key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OfferPayload {
    /// Always 1.
    pub v: u8,
    /// The agent to pair with.
    pub agent_id: String,
    /// Its display name.
    pub agent_name: String,
    /// The id the new device will have.
    pub device_id: String,
    /// The device key, base64url of 32 bytes.
    pub device_key: String,
    /// The device's role.
    pub role: Role,
    /// When the offer stops being claimable.
    pub expires_at: Timestamp,
    /// Partner mode: the user the new device will answer for (role `user`); absent for an owner device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<OfferUser>,
    /// Partner mode: how the app shows the agent to that user; absent for the default look.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branding: Option<Branding>,
}

/// The user a Partner-mode offer is for, as the integrator named them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OfferUser {
    /// The integrator's id for the user.
    pub external_id: String,
    /// The user's name.
    pub name: String,
}

/// How an app shows the agent to a Partner-mode user, sealed in the offer (the relay never sees it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Branding {
    /// An accent colour, `#rrggbb`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accent_color: Option<String>,
    /// An icon: a `data:image/png;base64,…`, `data:image/svg+xml;base64,…` or `data:image/jpeg;base64,…` URL
    /// of at most [`MAX_ICON_LEN`] characters (inline, so that showing it reveals nothing to another server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icon: Option<String>,
}

/// Most characters of a branding icon's data URL.
pub const MAX_ICON_LEN: usize = 16 * 1024;

impl Branding {
    /// Checks the accent colour (`#rrggbb`) and the icon (an inline PNG, SVG or JPEG data URL of at most
    /// [`MAX_ICON_LEN`] characters).
    pub fn validate(&self) -> std::result::Result<(), &'static str> {
        if let Some(colour) = &self.accent_color {
            let hex = colour.strip_prefix('#').unwrap_or("");
            if hex.len() != 6 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err("an accent colour is written #rrggbb");
            }
        }
        if let Some(icon) = &self.icon {
            let inline = [
                "data:image/png;base64,",
                "data:image/svg+xml;base64,",
                "data:image/jpeg;base64,",
            ];
            let Some(data) = inline.iter().find_map(|p| icon.strip_prefix(p)) else {
                return Err("an icon is a data:image/png, image/svg+xml or image/jpeg base64 URL");
            };
            if icon.len() > MAX_ICON_LEN {
                return Err("an icon's data URL is at most 16 KiB");
            }
            if data.is_empty()
                || !data
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
            {
                return Err("an icon's data is not base64");
            }
        }
        Ok(())
    }
}

impl OfferPayload {
    /// The device key carried by the offer.
    #[cfg(feature = "content")]
    pub fn key(&self) -> Result<ContentKey> {
        crate::b64::decode_array(&self.device_key)
            .map(ContentKey)
            .ok_or(Error::Payload { kind: kind::OFFER })
    }
}

#[cfg(feature = "content")]
fn offer_aad<'a>(agent_id: &'a str, device_id: &'a str, pairing_id: &'a str) -> Aad<'a> {
    Aad {
        agent_id,
        device_id,
        direction: Direction::Offer,
        kind: kind::OFFER,
        object_id: pairing_id,
    }
}

/// Seals an offer with the pairing key.
#[cfg(feature = "content")]
pub fn seal_offer(secret: &PairingSecret, offer: &OfferPayload) -> String {
    let pairing_id = secret.pairing_id();
    envelope::seal_json(
        &secret.pairing_key(),
        &offer_aad(&offer.agent_id, &offer.device_id, &pairing_id),
        offer,
    )
}

/// Opens an offer fetched from the relay. `agent_id` and `device_id` are the values the relay returned
/// beside it in clear; they are bound into the additional data, so a relay that lies about them fails here.
#[cfg(feature = "content")]
pub fn open_offer(
    secret: &PairingSecret,
    agent_id: &str,
    device_id: &str,
    sealed: &str,
) -> Result<OfferPayload> {
    let pairing_id = secret.pairing_id();
    let offer: OfferPayload = envelope::open_json(
        &secret.pairing_key(),
        &offer_aad(agent_id, device_id, &pairing_id),
        sealed,
    )?;
    if offer.v != 1 || offer.agent_id != agent_id || offer.device_id != device_id {
        return Err(Error::Payload { kind: kind::OFFER });
    }
    Ok(offer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_lasts_between_one_second_and_one_hour() {
        use std::time::Duration;
        for ok in [1, DEFAULT_TTL_SECONDS, MAX_TTL_SECONDS] {
            assert_eq!(check_ttl(Duration::from_secs(ok)), Ok(()), "{ok} s");
        }
        for refused in [
            Duration::ZERO,
            Duration::from_secs(MAX_TTL_SECONDS) + Duration::from_millis(1),
        ] {
            assert!(check_ttl(refused).is_err(), "{refused:?}");
        }
    }

    #[test]
    fn link_round_trip() {
        let s = PairingSecret([5; 32]);
        let link = s.link("https://relay.example/");
        assert!(link.starts_with("https://relay.example/pair#v1."));
        let (relay, parsed) = PairingSecret::parse_link(&link).expect("parses");
        assert_eq!(relay, "https://relay.example");
        assert_eq!(parsed, s);
        for bad in [
            "https://relay.example/pair",
            "https://x/pair#v2.AAAA",
            "ftp://x/pair#v1.AAAA",
            "https://x/#v1.AAAA",
        ] {
            assert!(PairingSecret::parse_link(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn offer_round_trip_and_binding() {
        let s = PairingSecret::generate();
        let offer = OfferPayload {
            v: 1,
            agent_id: "ag_1".into(),
            agent_name: "laptop".into(),
            device_id: "dv_1".into(),
            device_key: crate::b64::encode(&[4; 32]),
            role: Role::Owner,
            expires_at: Timestamp(1),
            user: None,
            branding: None,
        };
        let sealed = seal_offer(&s, &offer);
        assert_eq!(open_offer(&s, "ag_1", "dv_1", &sealed).expect("opens"), offer);
        assert!(open_offer(&s, "ag_1", "dv_2", &sealed).is_err());
        assert!(open_offer(&PairingSecret::generate(), "ag_1", "dv_1", &sealed).is_err());
        assert_ne!(s.pairing_id(), crate::b64::encode(&s.claim_secret()[..16]));
    }

    #[test]
    fn branding_is_checked() {
        let ok = Branding {
            accent_color: Some("#1a2B3c".into()),
            icon: Some("data:image/png;base64,iVBORw0KGgo=".into()),
        };
        assert!(ok.validate().is_ok());
        for colour in ["1a2b3c", "#1a2b3", "#zzzzzz", "red"] {
            let b = Branding {
                accent_color: Some(colour.into()),
                ..Branding::default()
            };
            assert!(b.validate().is_err(), "{colour}");
        }
        for icon in [
            "https://example.com/icon.png".to_string(),
            "data:image/png;base64,".to_string(),
            "data:image/png;base64,<svg>".to_string(),
            format!("data:image/png;base64,{}", "A".repeat(MAX_ICON_LEN)),
        ] {
            let b = Branding {
                icon: Some(icon.clone()),
                ..Branding::default()
            };
            assert!(b.validate().is_err(), "{icon:.40}");
        }
    }
}
