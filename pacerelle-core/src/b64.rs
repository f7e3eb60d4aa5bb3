//! The one text encoding of binary values on the wire: base64url without padding (RFC 4648 §5).

use data_encoding::BASE64URL_NOPAD;

/// Encodes bytes as base64url without padding.
pub fn encode(bytes: &[u8]) -> String {
    BASE64URL_NOPAD.encode(bytes)
}

/// Decodes base64url without padding; `None` on any other input (padding, `+`, `/`, whitespace).
pub fn decode(text: &str) -> Option<Vec<u8>> {
    BASE64URL_NOPAD.decode(text.as_bytes()).ok()
}

/// Decodes exactly `N` bytes of base64url.
pub fn decode_array<const N: usize>(text: &str) -> Option<[u8; N]> {
    decode(text)?.try_into().ok()
}
