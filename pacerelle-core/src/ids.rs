//! Identifiers. Senders choose the ids of what they send, so that a retry is recognised as the same item.

use crate::error::{Error, Result};

/// Longest id accepted anywhere.
pub const MAX_ID_LEN: usize = 128;

/// Prefix of generated agent ids.
pub const AGENT: &str = "ag";
/// Prefix of generated device ids.
pub const DEVICE: &str = "dv";
/// Prefix of generated message ids.
pub const MESSAGE: &str = "msg";
/// Prefix of generated reply ids.
pub const REPLY: &str = "rep";
/// Prefix of generated checkpoint ids.
pub const CHECKPOINT: &str = "ckp";
/// Prefix of generated question ids.
pub const QUESTION: &str = "qst";
/// Prefix of generated notification ids.
pub const NOTIFICATION: &str = "ntf";
/// Prefix of generated agent session ids.
pub const SESSION: &str = "ses";

/// A fresh id: `prefix_` followed by 26 lowercase base32 characters (128 random bits).
pub fn generate(prefix: &str) -> String {
    let bytes: [u8; 16] = crate::keys::random_array();
    let mut spec = data_encoding::Specification::new();
    spec.symbols.push_str("abcdefghijklmnopqrstuvwxyz234567");
    #[allow(clippy::unwrap_used)] // a constant, valid specification
    let enc = spec.encoding().unwrap();
    format!("{prefix}_{}", enc.encode(&bytes))
}

/// Checks an id: 1 to 128 characters from `A-Z a-z 0-9 _ - . :`.
pub fn validate(what: &'static str, id: &str) -> Result<()> {
    if id.is_empty() {
        return Err(Error::InvalidId {
            what,
            reason: "empty",
        });
    }
    if id.len() > MAX_ID_LEN {
        return Err(Error::InvalidId {
            what,
            reason: "longer than 128 characters",
        });
    }
    if !id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'))
    {
        return Err(Error::InvalidId {
            what,
            reason: "only A-Z a-z 0-9 _ - . : are allowed",
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_are_valid_and_distinct() {
        let a = generate(MESSAGE);
        let b = generate(MESSAGE);
        assert_ne!(a, b);
        assert!(a.starts_with("msg_"));
        assert_eq!(a.len(), 4 + 26);
        validate("message id", &a).expect("valid");
    }

    #[test]
    fn bad_ids_are_refused() {
        assert!(validate("id", "").is_err());
        assert!(validate("id", &"a".repeat(129)).is_err());
        assert!(validate("id", "a b").is_err());
        assert!(validate("id", "a/b").is_err());
        assert!(validate("id", "é").is_err());
        validate("id", &"a".repeat(128)).expect("128 is fine");
        validate("id", "task-1:retry.2_x").expect("punctuation allowed");
    }
}
