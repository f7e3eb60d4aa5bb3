//! HTTP handlers, one module per group of routes, and the input checks they share.

pub(crate) mod agent;
pub(crate) mod device;
pub(crate) mod grants;
pub(crate) mod health;
pub(crate) mod messages;
pub(crate) mod pairing;
pub(crate) mod push;
pub(crate) mod questions;
pub(crate) mod session;
pub(crate) mod webhook;

use axum::http::StatusCode;
use pacerelle_core::{b64, ids};

use crate::error::AppError;
use crate::extract::Json;

/// Longest display name (agent, device), in characters.
pub(crate) const MAX_NAME_CHARS: usize = 100;
/// Longest session host description, in characters.
pub(crate) const MAX_HOST_CHARS: usize = 200;

/// An id as [`ids::validate`] accepts it.
pub(crate) fn check_id(what: &'static str, id: &str) -> Result<(), AppError> {
    ids::validate(what, id).map_err(|e| AppError::invalid_input(e.to_string()))
}

/// A display text: trimmed, 1 to `max` characters, no control characters.
pub(crate) fn check_text(what: &str, text: &str, max: usize) -> Result<String, AppError> {
    let text = text.trim();
    let chars = text.chars().count();
    if chars == 0 || chars > max {
        return Err(AppError::invalid_input(format!(
            "{what} must have 1 to {max} characters"
        )));
    }
    if text.chars().any(char::is_control) {
        return Err(AppError::invalid_input(format!(
            "{what} must not contain control characters"
        )));
    }
    Ok(text.to_string())
}

/// An envelope: non-empty base64url (the body limit bounds its size). Its contents are never looked at.
pub(crate) fn check_envelope(what: &str, envelope: &str) -> Result<(), AppError> {
    if envelope.is_empty() || b64::decode(envelope).is_none() {
        return Err(AppError::invalid_input(format!(
            "{what} must be non-empty base64url without padding"
        )));
    }
    Ok(())
}

/// base64url of exactly `N` bytes.
pub(crate) fn decode_fixed<const N: usize>(what: &str, text: &str) -> Result<[u8; N], AppError> {
    b64::decode_array(text)
        .ok_or_else(|| AppError::invalid_input(format!("{what} must be base64url of {N} bytes")))
}

/// 201 for a new item, 200 for one that was already stored.
pub(crate) fn stored<T>(created: bool, body: T) -> (StatusCode, Json<T>) {
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    (status, Json(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_checks() {
        assert_eq!(
            check_text("name", "  Ana's phone ", 100).expect("fine"),
            "Ana's phone"
        );
        assert!(check_text("name", "   ", 100).is_err());
        assert!(check_text("name", &"é".repeat(101), 100).is_err());
        check_text("name", &"é".repeat(100), 100).expect("100 characters are fine");
        assert!(check_text("name", "a\u{0}b", 100).is_err());
    }

    #[test]
    fn envelope_and_hash_checks() {
        assert!(check_envelope("envelope", "").is_err());
        assert!(check_envelope("envelope", "AQ==").is_err());
        assert!(check_envelope("envelope", "a+b/").is_err());
        check_envelope("envelope", "AQID").expect("base64url");
        assert!(decode_fixed::<32>("hash", "AQID").is_err());
        decode_fixed::<32>("hash", &b64::encode(&[0; 32])).expect("32 bytes");
    }
}
