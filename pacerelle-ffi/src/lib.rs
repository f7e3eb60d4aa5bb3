#![doc = include_str!("../README.md")]

uniffi::setup_scaffolding!();

mod conversation;
mod device;
mod error;
mod grants;
mod listener;
mod pairings;
mod push;
mod question;
mod status;
mod time;

pub use conversation::{
    ConversationItem, ConversationPage, ItemKind, ItemState, ItemUpdate, Level, MessageState, RejectedItem,
    SentMessage, SubjectKind,
};
pub use device::{Branding, DeviceClient, DeviceIdentity, OfferUser};
pub use error::{PacerelleError, Result};
pub use grants::{CommandMatch, GrantInfo, GrantOffer, GrantScope};
pub use listener::{ConversationListener, ListenerHandle};
pub use pairings::{AgentPresence, AgentQuestion, PairingFailure, Pairings, PendingQuestions};
pub use push::{PushEvent, PushKeys};
pub use question::{Answer, Channel, Question, QuestionKind, QuestionState};
pub use status::{AgentSession, AgentStatus, Presence};
