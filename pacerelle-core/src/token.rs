//! Agent tokens and bearer credentials (DESIGN §3).
//!
//! An agent token is `pcr1_` followed by the base64url of 68 bytes: the 32-byte auth secret, the 32-byte
//! master secret, and a 4-byte checksum, the first bytes of
//! `SHA-256("pacerelle/v1/token" ‖ auth ‖ master)`. Only the auth secret is ever sent to a relay, as a
//! bearer credential `agentId.base64url(auth)`; the relay keeps `SHA-256(auth)`.

use crate::error::{Error, Result};
use crate::keys;
#[cfg(feature = "content")]
use crate::keys::ContentKey;

/// Prefix of an agent token.
pub const TOKEN_PREFIX: &str = "pcr1_";
const CHECK_LABEL: &[u8] = b"pacerelle/v1/token";

/// The agent's two secrets. `Debug` never shows them.
#[derive(Clone, PartialEq, Eq)]
pub struct AgentToken {
    auth: [u8; 32],
    master: [u8; 32],
}

impl AgentToken {
    /// A new token from the system's random generator.
    pub fn generate() -> Self {
        AgentToken {
            auth: keys::random_array(),
            master: keys::random_array(),
        }
    }

    /// A token from known secrets (test vectors).
    pub fn from_secrets(auth: [u8; 32], master: [u8; 32]) -> Self {
        AgentToken { auth, master }
    }

    /// Parses `pcr1_…`, checking the checksum.
    pub fn parse(text: &str) -> Result<Self> {
        let body = text
            .trim()
            .strip_prefix(TOKEN_PREFIX)
            .ok_or(Error::MalformedToken)?;
        let bytes: [u8; 68] = crate::b64::decode_array(body).ok_or(Error::MalformedToken)?;
        let mut auth = [0u8; 32];
        let mut master = [0u8; 32];
        auth.copy_from_slice(&bytes[..32]);
        master.copy_from_slice(&bytes[32..64]);
        let token = AgentToken { auth, master };
        if !keys::constant_time_eq(&token.checksum(), &bytes[64..]) {
            return Err(Error::MalformedToken);
        }
        Ok(token)
    }

    fn checksum(&self) -> [u8; 4] {
        let mut input = Vec::with_capacity(CHECK_LABEL.len() + 64);
        input.extend_from_slice(CHECK_LABEL);
        input.extend_from_slice(&self.auth);
        input.extend_from_slice(&self.master);
        let digest = keys::sha256(&input);
        [digest[0], digest[1], digest[2], digest[3]]
    }

    /// The token as text, `pcr1_…`. Treat it as a password.
    pub fn expose(&self) -> String {
        let mut bytes = Vec::with_capacity(68);
        bytes.extend_from_slice(&self.auth);
        bytes.extend_from_slice(&self.master);
        bytes.extend_from_slice(&self.checksum());
        format!("{TOKEN_PREFIX}{}", crate::b64::encode(&bytes))
    }

    /// `SHA-256(auth)`: what the relay stores to check the agent's bearer credential.
    pub fn auth_hash(&self) -> [u8; 32] {
        keys::sha256(&self.auth)
    }

    /// The bearer credential sent to the relay.
    pub fn bearer(&self, agent_id: &str) -> Bearer {
        Bearer(format!("{agent_id}.{}", crate::b64::encode(&self.auth)))
    }

    /// The key shared with one device.
    #[cfg(feature = "content")]
    pub fn device_key(&self, agent_id: &str, device_id: &str) -> ContentKey {
        keys::device_key(&self.master, agent_id, device_id)
    }

    /// The agent's own key (checkpoints).
    #[cfg(feature = "content")]
    pub fn self_key(&self, agent_id: &str) -> ContentKey {
        keys::self_key(&self.master, agent_id)
    }
}

impl std::fmt::Debug for AgentToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AgentToken(…)")
    }
}

/// A bearer credential, `principalId.base64url(secret)`, sent as `Authorization: Bearer …`.
///
/// The principal is an agent id (`ag_…`) or a device id (`dv_…`). `Debug` hides the secret.
#[derive(Clone, PartialEq, Eq)]
pub struct Bearer(pub String);

impl Bearer {
    /// A new device credential for `device_id`, with its secret's SHA-256 for the relay to store.
    pub fn issue(device_id: &str) -> (Bearer, [u8; 32]) {
        let secret: [u8; 32] = keys::random_array();
        (
            Bearer(format!("{device_id}.{}", crate::b64::encode(&secret))),
            keys::sha256(&secret),
        )
    }

    /// Splits into the principal id and the SHA-256 of the secret; `None` when malformed.
    pub fn split(&self) -> Option<(&str, [u8; 32])> {
        let (id, secret) = self.0.rsplit_once('.')?;
        crate::ids::validate("principal", id).ok()?;
        let secret: [u8; 32] = crate::b64::decode_array(secret)?;
        Some((id, keys::sha256(&secret)))
    }

    /// The credential as text.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Bearer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let id = self.0.rsplit_once('.').map_or("?", |(id, _)| id);
        write!(f, "Bearer({id}.…)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_round_trip_and_checksum() {
        let t = AgentToken::generate();
        let text = t.expose();
        assert!(text.starts_with("pcr1_"));
        assert_eq!(AgentToken::parse(&text).expect("parses"), t);
        // One changed character breaks the checksum or the encoding.
        let mut chars: Vec<char> = text.chars().collect();
        let i = 10;
        chars[i] = if chars[i] == 'A' { 'B' } else { 'A' };
        let altered: String = chars.into_iter().collect();
        assert!(AgentToken::parse(&altered).is_err());
        assert!(AgentToken::parse("pcr1_short").is_err());
        assert!(AgentToken::parse("nope").is_err());
        assert_eq!(format!("{t:?}"), "AgentToken(…)");
    }

    #[test]
    fn bearer_splits() {
        let t = AgentToken::from_secrets([1; 32], [2; 32]);
        let b = t.bearer("ag_x");
        let (id, hash) = b.split().expect("well formed");
        assert_eq!(id, "ag_x");
        assert_eq!(hash, t.auth_hash());
        assert!(!format!("{b:?}").contains(&crate::b64::encode(&[1; 32])));
        assert!(Bearer("ag_x".into()).split().is_none());
        assert!(Bearer("ag_x.abc".into()).split().is_none());
        assert!(Bearer("a b.AAAA".into()).split().is_none());
    }
}
