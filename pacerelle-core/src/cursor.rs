//! Cursors: opaque strings that mark a position in an agent's stream.
//!
//! Every item the relay stores for an agent gets a strictly increasing sequence number; a cursor encodes
//! one. Clients must treat it as opaque; its form is `c1.` followed by the big-endian 8-byte sequence number
//! in base64url.

use crate::error::{Error, Result};

/// A position in an agent's stream: items after it have a greater sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Cursor(pub u64);

impl Cursor {
    /// The start of the stream: every item is after it.
    pub const START: Cursor = Cursor(0);

    /// The sequence number this cursor stands at.
    pub fn seq(self) -> u64 {
        self.0
    }

    /// Parses a cursor issued by a relay.
    pub fn parse(text: &str) -> Result<Self> {
        let body = text.strip_prefix("c1.").ok_or(Error::MalformedCursor)?;
        let bytes: [u8; 8] = crate::b64::decode_array(body).ok_or(Error::MalformedCursor)?;
        let seq = u64::from_be_bytes(bytes);
        if seq > i64::MAX as u64 {
            return Err(Error::MalformedCursor);
        }
        Ok(Cursor(seq))
    }
}

impl std::fmt::Display for Cursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "c1.{}", crate::b64::encode(&self.0.to_be_bytes()))
    }
}

impl std::str::FromStr for Cursor {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Cursor::parse(s)
    }
}

impl serde::Serialize for Cursor {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Cursor {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Cursor::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_form() {
        assert_eq!(Cursor(1).to_string(), "c1.AAAAAAAAAAE");
        assert_eq!(Cursor::parse("c1.AAAAAAAAAAE").expect("parses"), Cursor(1));
    }

    #[test]
    fn garbage_is_refused() {
        for bad in [
            "",
            "c1.",
            "c2.AAAAAAAAAAE",
            "AAAAAAAAAAE",
            "c1.AAAA",
            "c1.!!!!!!!!!!!",
            "c1.gAAAAAAAAAA",
        ] {
            assert!(Cursor::parse(bad).is_err(), "{bad:?} should be refused");
        }
    }

    proptest! {
        #[test]
        fn round_trip_and_order(a in 0u64..=i64::MAX as u64, b in 0u64..=i64::MAX as u64) {
            let (ca, cb) = (Cursor(a), Cursor(b));
            prop_assert_eq!(Cursor::parse(&ca.to_string()).expect("parses"), ca);
            prop_assert_eq!(ca < cb, a < b);
        }
    }
}
