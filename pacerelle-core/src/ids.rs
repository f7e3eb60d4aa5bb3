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
    check(
        what,
        id,
        MAX_ID_LEN,
        b":",
        "longer than 128 characters",
        "only A-Z a-z 0-9 _ - . : are allowed",
    )
}

/// Checks `text`: 1 to `max` bytes, each an ASCII letter or digit, `_`, `-`, `.` or one of `more`.
fn check(
    what: &'static str,
    text: &str,
    max: usize,
    more: &[u8],
    too_long: &'static str,
    bad_character: &'static str,
) -> Result<()> {
    let reason = if text.is_empty() {
        "empty"
    } else if text.len() > max {
        too_long
    } else if !text
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.') || more.contains(&b))
    {
        bad_character
    } else {
        return Ok(());
    };
    Err(Error::InvalidId { what, reason })
}

/// The name of the session a client opens without naming one: every session of a client older than named
/// sessions is this one, so such clients keep one session per agent.
pub const DEFAULT_SESSION: &str = "default";
/// The word that addresses a task to whichever session takes it first; no session may bear it.
pub const ANY_SESSION: &str = "any";
/// Longest session name.
pub const MAX_SESSION_NAME_LEN: usize = 40;

/// Checks a session name: 1 to 40 characters from `A-Z a-z 0-9 _ - .`, and not `any`.
pub fn validate_session_name(name: &str) -> Result<()> {
    let what = "session name";
    check(
        what,
        name,
        MAX_SESSION_NAME_LEN,
        b"",
        "longer than 40 characters",
        "only A-Z a-z 0-9 _ - . are allowed",
    )?;
    if name == ANY_SESSION {
        return Err(Error::InvalidId {
            what,
            reason: "`any` addresses a task to whichever session takes it; name the session otherwise",
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_names() {
        validate_session_name(DEFAULT_SESSION).expect("the default name is valid");
        validate_session_name("api-server.2_b").expect("punctuation allowed");
        validate_session_name(&"a".repeat(40)).expect("40 is fine");
        for bad in ["", "any", "a b", "a:b", "a/b", "é"] {
            assert!(validate_session_name(bad).is_err(), "{bad:?} refused");
        }
        assert!(validate_session_name(&"a".repeat(41)).is_err());
    }

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
