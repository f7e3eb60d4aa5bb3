//! Key derivation (DESIGN §4). Every content key is an HKDF-SHA256 output of 32 bytes.
//!
//! - `deviceKey = HKDF(ikm = master, salt = agentId, info = "pacerelle/v1/device/" ‖ deviceId)`
//! - `selfKey   = HKDF(ikm = master, salt = agentId, info = "pacerelle/v1/self")`
//!
//! Any process that holds the agent token derives every device key; nothing is stored beside it.

use ring::{digest, hkdf, rand::SecureRandom};

/// Info prefix of device keys.
pub const DEVICE_INFO: &str = "pacerelle/v1/device/";
/// Info of the agent's self key (checkpoints).
pub const SELF_INFO: &str = "pacerelle/v1/self";

/// A 256-bit AES-GCM key. Its `Debug` output never shows the bytes.
#[derive(Clone, PartialEq, Eq)]
#[cfg(feature = "content")]
pub struct ContentKey(pub(crate) [u8; 32]);

#[cfg(feature = "content")]
impl ContentKey {
    /// Wraps raw key bytes (from a pairing offer or a test vector).
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        ContentKey(bytes)
    }

    /// The raw key bytes, to be carried inside a sealed pairing offer only.
    pub fn to_bytes(&self) -> [u8; 32] {
        self.0
    }
}

#[cfg(feature = "content")]
impl std::fmt::Debug for ContentKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ContentKey(…)")
    }
}

struct Len32;
impl hkdf::KeyType for Len32 {
    fn len(&self) -> usize {
        32
    }
}

/// HKDF-SHA256 (RFC 5869) with a 32-byte output.
pub fn hkdf32(ikm: &[u8], salt: &[u8], info: &[u8]) -> [u8; 32] {
    let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, salt).extract(ikm);
    let mut out = [0u8; 32];
    let info = [info];
    #[allow(clippy::unwrap_used)] // 32 bytes is far below HKDF-SHA256's 8160-byte limit
    prk.expand(&info, Len32).unwrap().fill(&mut out).unwrap();
    out
}

/// The key shared by the agent and one of its devices.
#[cfg(feature = "content")]
pub fn device_key(master: &[u8; 32], agent_id: &str, device_id: &str) -> ContentKey {
    let info = format!("{DEVICE_INFO}{device_id}");
    ContentKey(hkdf32(master, agent_id.as_bytes(), info.as_bytes()))
}

/// The key only the agent holds (checkpoints).
#[cfg(feature = "content")]
pub fn self_key(master: &[u8; 32], agent_id: &str) -> ContentKey {
    ContentKey(hkdf32(master, agent_id.as_bytes(), SELF_INFO.as_bytes()))
}

/// SHA-256 of a secret: what the relay stores in place of a bearer secret.
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    let d = digest::digest(&digest::SHA256, bytes);
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

/// Bytes from the operating system's secure random generator.
///
/// # Panics
/// Only if the operating system cannot provide randomness, in which case nothing safe can be done.
pub fn random_array<const N: usize>() -> [u8; N] {
    let mut out = [0u8; N];
    #[allow(clippy::expect_used)]
    ring::rand::SystemRandom::new()
        .fill(&mut out)
        .expect("the operating system's random generator failed");
    out
}

/// Compares two byte strings in time that depends only on their lengths.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut diff = 0u8;
    for (x, y) in a.iter().zip(b) {
        diff |= x ^ y;
    }
    // black_box keeps the optimiser from short-circuiting the fold.
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc5869_test_case_1_prefix() {
        // RFC 5869 A.1: IKM = 0x0b * 22, salt = 0x00..0x0c, info = 0xf0..0xf9; OKM starts 3cb25f25…
        let ikm = [0x0bu8; 22];
        let salt: Vec<u8> = (0x00..=0x0c).collect();
        let info: Vec<u8> = (0xf0..=0xf9).collect();
        let okm = hkdf32(&ikm, &salt, &info);
        assert_eq!(
            crate::b64::encode(&okm),
            crate::b64::encode(&[
                0x3c, 0xb2, 0x5f, 0x25, 0xfa, 0xac, 0xd5, 0x7a, 0x90, 0x43, 0x4f, 0x64, 0xd0, 0x36, 0x2f,
                0x2a, 0x2d, 0x2d, 0x0a, 0x90, 0xcf, 0x1a, 0x5a, 0x4c, 0x5d, 0xb0, 0x2d, 0x56, 0xec, 0xc4,
                0xc5, 0xbf
            ])
        );
    }

    #[test]
    fn keys_differ_per_device_and_agent() {
        let m = [7u8; 32];
        assert_ne!(device_key(&m, "ag_a", "dv_1"), device_key(&m, "ag_a", "dv_2"));
        assert_ne!(device_key(&m, "ag_a", "dv_1"), device_key(&m, "ag_b", "dv_1"));
        assert_ne!(device_key(&m, "ag_a", "dv_1").0, self_key(&m, "ag_a").0);
        assert_eq!(format!("{:?}", self_key(&m, "ag_a")), "ContentKey(…)");
    }

    #[test]
    fn constant_time_eq_works() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }
}
