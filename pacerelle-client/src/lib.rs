#![doc = include_str!("../README.md")]

mod agent;
mod device;
mod error;
mod http;

pub use agent::{AgentClient, Checkpoint, Inbox, Message, PairingLink, PairingOptions, Rejected};
pub use device::{ConversationItem, ConversationPage, DeviceClient, DeviceCredentials};
pub use error::{Error, Result};
pub use pacerelle_core as core;
pub use pacerelle_core::wire::{
    AgentInfo, DeviceInfo, DeviceSelf, ItemKind, MessageState, Presence, Processed, SessionInfo, Status,
    Stored,
};
pub use pacerelle_core::{AgentToken, Cursor, Timestamp};

/// The relay address used when none is given: a relay started by `pacerelle serve` on this machine.
pub const DEFAULT_RELAY_URL: &str = "http://127.0.0.1:8787";
