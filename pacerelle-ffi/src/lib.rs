#![doc = include_str!("../README.md")]

uniffi::setup_scaffolding!();

mod conversation;
mod device;
mod error;
mod listener;
mod question;
mod status;
mod time;

pub use conversation::{
    ConversationItem, ConversationPage, ItemKind, Level, MessageState, RejectedItem, SentMessage,
};
pub use device::{DeviceClient, DeviceIdentity};
pub use error::{PacerelleError, Result};
pub use listener::{ConversationListener, ListenerHandle};
pub use question::{Answer, Question, QuestionKind, QuestionState};
pub use status::{AgentStatus, Presence};
