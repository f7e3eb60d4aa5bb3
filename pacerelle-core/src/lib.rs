#![doc = include_str!("../README.md")]

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
