#![doc = include_str!("../README.md")]

// With the `uniffi` feature (the phone SDK's, pacerelle-ffi): the enums and records that derive
// `uniffi::Enum` / `uniffi::Record` under it cross the binding as they are, as the types of this crate's own
// UniFFI component (`pacerelle_core`; its bindings' names are in `uniffi.toml`).
#[cfg(feature = "uniffi")]
uniffi::setup_scaffolding!();

pub mod b64;
pub mod checkpoint;
pub mod cursor;
pub mod envelope;
pub mod error;
pub mod grant;
pub mod ids;
pub mod keys;
pub mod message;
pub mod pairing;
pub mod policy;
pub mod question;
pub mod roster;
pub mod signing;
pub mod time;
pub mod token;
pub mod webhook;
pub mod webpush;
pub mod wire;

pub use cursor::Cursor;
pub use envelope::{Aad, Direction};
pub use error::{CryptoError, Error, Result};
#[cfg(feature = "content")]
pub use keys::ContentKey;
pub use time::Timestamp;
pub use token::{AgentToken, Bearer};
