#![doc = include_str!("../README.md")]

pub mod agent;
pub mod backoff;
pub mod device;
mod error;
pub mod files;
pub mod gate;
pub mod home;
mod http;
pub mod lease;
pub mod listener;
pub mod machine;
pub mod runner;

pub use agent::AgentClient;
pub use device::DeviceClient;
pub use error::{Error, ErrorKind, Result};
pub use home::DEFAULT_RELAY_URL;
pub use pacerelle_core as core;
pub use pacerelle_core::question::{Answer, Channel, Level, QuestionKind, QuestionState};
pub use pacerelle_core::{AgentToken, Cursor, Timestamp};

/// What an agent is told about Pacerelle — when to ask, how to wait, that no answer is a no: the MCP server's
/// instructions and the agent skill `pacerelle hook install` writes, one text (`src/instructions.md`).
pub const INSTRUCTIONS: &str = include_str!("instructions.md").trim_ascii_end();
