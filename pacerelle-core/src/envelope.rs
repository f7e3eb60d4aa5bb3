//! Envelopes: AES-256-GCM with a fresh random 96-bit nonce per seal (DESIGN §4).
//!
//! Bytes: `0x01 ‖ nonce (12) ‖ ciphertext ‖ tag (16)`, written on the wire as base64url without padding.
//! The additional data binds the envelope to its place, so that a relay cannot move a ciphertext to
//! another object, device, direction, kind or agent:
//!
//! ```text
//! "pacerelle/v1/aad" ‖ 0x01 ‖ field(agentId) ‖ field(deviceId) ‖ field(direction) ‖ field(kind) ‖ field(objectId)
//! field(x) = u16 big-endian byte length of x ‖ UTF-8 bytes of x
//! ```
//! `docs/crypto.md` is the full specification; `tests/vectors/envelope.json` holds known answers.

#[cfg(feature = "content")]
use ring::aead::{AES_256_GCM, Aad as RingAad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};

#[cfg(feature = "content")]
use crate::error::CryptoError;
#[cfg(feature = "content")]
use crate::keys::ContentKey;

/// The envelope format version, first byte of every envelope.
pub const VERSION: u8 = 1;
/// The label that starts every additional data.
pub const AAD_LABEL: &[u8] = b"pacerelle/v1/aad";
#[cfg(feature = "content")]
const TAG_LEN: usize = 16;

/// Which way a sealed value travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Direction {
    /// From a device to the agent (tasks, answers).
    DeviceToAgent,
    /// From the agent to a device (replies, questions, notifications).
    AgentToDevice,
    /// From the agent to itself (checkpoints).
    AgentToSelf,
    /// A pairing offer, from the agent to the device that will claim it.
    Offer,
}

impl Direction {
    /// The direction's name in the additional data.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::DeviceToAgent => "d2a",
            Direction::AgentToDevice => "a2d",
            Direction::AgentToSelf => "self",
            Direction::Offer => "offer",
        }
    }
}

/// Object kinds named in the additional data.
pub mod kind {
    /// A task sent by a device.
    pub const MESSAGE: &str = "message";
    /// The agent's reply to a task.
    pub const REPLY: &str = "reply";
    /// An agent checkpoint.
    pub const CHECKPOINT: &str = "checkpoint";
    /// A pairing offer.
    pub const OFFER: &str = "offer";
}

/// The context an envelope is bound to. Every field must match for it to open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Aad<'a> {
    /// The agent the object belongs to.
    pub agent_id: &'a str,
    /// The device at the other end; empty for [`Direction::AgentToSelf`].
    pub device_id: &'a str,
    /// Which way it travels.
    pub direction: Direction,
    /// The object's kind, one of [`kind`].
    pub kind: &'a str,
    /// The object's id (message id, reply id, checkpoint id, pairing id).
    pub object_id: &'a str,
}

/// Longest field of the additional data, in bytes (its length is written on two bytes).
pub const MAX_AAD_FIELD: usize = u16::MAX as usize;

impl Aad<'_> {
    /// The additional data bytes; `None` when a field is longer than [`MAX_AAD_FIELD`] (ids are at most
    /// 128 bytes, so only a caller that skipped id validation gets there).
    pub fn to_bytes(&self) -> Option<Vec<u8>> {
        let fields = [
            self.agent_id,
            self.device_id,
            self.direction.as_str(),
            self.kind,
            self.object_id,
        ];
        let mut out =
            Vec::with_capacity(AAD_LABEL.len() + 1 + fields.iter().map(|f| 2 + f.len()).sum::<usize>());
        out.extend_from_slice(AAD_LABEL);
        out.push(VERSION);
        for field in fields {
            let len = u16::try_from(field.len()).ok()?;
            out.extend_from_slice(&len.to_be_bytes());
            out.extend_from_slice(field.as_bytes());
        }
        Some(out)
    }
}

#[cfg(feature = "content")]
fn key(k: &ContentKey) -> LessSafeKey {
    #[allow(clippy::unwrap_used)] // 32 bytes is AES-256's key length
    LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &k.0).unwrap())
}

/// Seals `plaintext` with a fresh random nonce; returns the envelope as base64url text.
#[cfg(feature = "content")]
pub fn seal(k: &ContentKey, aad: &Aad<'_>, plaintext: &[u8]) -> String {
    seal_with_nonce(k, aad, crate::keys::random_array(), plaintext)
}

/// Seals with a given nonce. Only for known-answer tests: a nonce must never be used twice with one key.
#[doc(hidden)]
#[cfg(feature = "content")]
pub fn seal_with_nonce(k: &ContentKey, aad: &Aad<'_>, nonce: [u8; NONCE_LEN], plaintext: &[u8]) -> String {
    let mut buf = Vec::with_capacity(1 + NONCE_LEN + plaintext.len() + TAG_LEN);
    buf.push(VERSION);
    buf.extend_from_slice(&nonce);
    let mut body = plaintext.to_vec();
    // Sealing is only ever given validated ids; an oversize field is a programming error, not input.
    #[allow(clippy::expect_used)]
    let aad = aad
        .to_bytes()
        .expect("additional data fields are validated ids of at most 128 bytes");
    #[allow(clippy::unwrap_used)] // fails only past 2^36 bytes, far above any body the relay accepts
    key(k)
        .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), RingAad::from(aad), &mut body)
        .unwrap();
    buf.extend_from_slice(&body);
    crate::b64::encode(&buf)
}

/// Opens an envelope. Any change to its bytes, its key or its context fails with [`CryptoError::Open`].
#[cfg(feature = "content")]
pub fn open(k: &ContentKey, aad: &Aad<'_>, envelope: &str) -> Result<Vec<u8>, CryptoError> {
    let bytes = crate::b64::decode(envelope).ok_or(CryptoError::Malformed)?;
    if bytes.len() < 1 + NONCE_LEN + TAG_LEN || bytes[0] != VERSION {
        return Err(CryptoError::Malformed);
    }
    let mut nonce = [0u8; NONCE_LEN];
    nonce.copy_from_slice(&bytes[1..1 + NONCE_LEN]);
    let aad = aad.to_bytes().ok_or(CryptoError::Malformed)?;
    let mut body = bytes[1 + NONCE_LEN..].to_vec();
    let plain = key(k)
        .open_in_place(Nonce::assume_unique_for_key(nonce), RingAad::from(aad), &mut body)
        .map_err(|_| CryptoError::Open)?;
    Ok(plain.to_vec())
}

/// Seals a value as JSON.
#[cfg(feature = "content")]
pub fn seal_json<T: serde::Serialize>(k: &ContentKey, aad: &Aad<'_>, value: &T) -> String {
    #[allow(clippy::unwrap_used)] // payload types serialise infallibly
    let json = serde_json::to_vec(value).unwrap();
    seal(k, aad, &json)
}

/// Opens an envelope and parses its JSON payload.
#[cfg(feature = "content")]
pub fn open_json<T: serde::de::DeserializeOwned>(
    k: &ContentKey,
    aad: &Aad<'_>,
    envelope: &str,
) -> crate::Result<T> {
    let plain = open(k, aad, envelope)?;
    read_payload(&plain).ok_or(crate::Error::Payload {
        kind: leak_kind(aad.kind),
    })
}

/// Reads a sealed payload's JSON as docs/crypto.md §5 says ("How JSON is read"): a JSON object, no member
/// name given twice at any depth (known to the type or not), then the type's own reading. Two readers of the
/// same bytes cannot then see two different payloads.
pub fn read_payload<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Option<T> {
    let value = crate::signing::strict_json(bytes)?;
    if !value.is_object() {
        return None;
    }
    serde_json::from_value(value).ok()
}

#[cfg(feature = "content")]
fn leak_kind(kind: &str) -> &'static str {
    match kind {
        kind::MESSAGE => kind::MESSAGE,
        kind::REPLY => kind::REPLY,
        kind::CHECKPOINT => kind::CHECKPOINT,
        kind::OFFER => kind::OFFER,
        crate::question::KIND_QUESTION => crate::question::KIND_QUESTION,
        crate::question::KIND_ANSWER => crate::question::KIND_ANSWER,
        crate::question::KIND_NOTIFICATION => crate::question::KIND_NOTIFICATION,
        crate::question::KIND_ANSWER_COPY => crate::question::KIND_ANSWER_COPY,
        crate::roster::KIND_ROSTER => crate::roster::KIND_ROSTER,
        crate::signing::KIND_SIGNING_KEY => crate::signing::KIND_SIGNING_KEY,
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn aad<'a>(device: &'a str, dir: Direction, kind: &'a str, id: &'a str) -> Aad<'a> {
        Aad {
            agent_id: "ag_1",
            device_id: device,
            direction: dir,
            kind,
            object_id: id,
        }
    }

    #[test]
    fn round_trip() {
        let k = ContentKey([9; 32]);
        let a = aad("dv_1", Direction::DeviceToAgent, kind::MESSAGE, "msg_1");
        let env = seal(&k, &a, b"hello");
        assert_eq!(open(&k, &a, &env).expect("opens"), b"hello");
        // Fresh nonces: sealing twice gives different envelopes.
        assert_ne!(env, seal(&k, &a, b"hello"));
    }

    #[test]
    fn moved_or_rekeyed_envelopes_do_not_open() {
        let k = ContentKey([9; 32]);
        let a = aad("dv_1", Direction::DeviceToAgent, kind::MESSAGE, "msg_1");
        let env = seal(&k, &a, b"secret task");
        let moved = [
            Aad {
                agent_id: "ag_2",
                ..a
            },
            aad("dv_2", Direction::DeviceToAgent, kind::MESSAGE, "msg_1"),
            aad("dv_1", Direction::AgentToDevice, kind::MESSAGE, "msg_1"),
            aad("dv_1", Direction::DeviceToAgent, kind::REPLY, "msg_1"),
            aad("dv_1", Direction::DeviceToAgent, kind::MESSAGE, "msg_2"),
        ];
        for other in moved {
            assert_eq!(open(&k, &other, &env), Err(CryptoError::Open), "{other:?}");
        }
        assert_eq!(open(&ContentKey([8; 32]), &a, &env), Err(CryptoError::Open));
        assert_eq!(open(&k, &a, "not base64!"), Err(CryptoError::Malformed));
        assert_eq!(open(&k, &a, "AQ"), Err(CryptoError::Malformed));
    }

    #[test]
    fn field_boundaries_are_unambiguous() {
        let a = Aad {
            agent_id: "ab",
            device_id: "c",
            direction: Direction::AgentToSelf,
            kind: "k",
            object_id: "o",
        };
        let b = Aad {
            agent_id: "a",
            device_id: "bc",
            ..a
        };
        assert_ne!(a.to_bytes(), b.to_bytes());
        let long = "x".repeat(MAX_AAD_FIELD + 1);
        let c = Aad {
            object_id: &long,
            ..a
        };
        assert!(c.to_bytes().is_none());
        assert_eq!(
            open(&ContentKey([1; 32]), &c, &seal(&ContentKey([1; 32]), &a, b"x")),
            Err(CryptoError::Malformed)
        );
    }

    proptest! {
        #[test]
        fn any_single_bit_flip_fails(plain in proptest::collection::vec(any::<u8>(), 0..200), bit in 0usize..4096) {
            let k = ContentKey([3; 32]);
            let a = aad("dv_1", Direction::AgentToDevice, kind::REPLY, "rep_1");
            let env = seal(&k, &a, &plain);
            let mut bytes = crate::b64::decode(&env).expect("b64");
            let bit = bit % (bytes.len() * 8);
            bytes[bit / 8] ^= 1 << (bit % 8);
            let altered = crate::b64::encode(&bytes);
            let result = open(&k, &a, &altered);
            prop_assert!(result.is_err());
        }
    }
}
