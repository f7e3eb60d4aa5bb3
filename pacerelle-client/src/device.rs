//! The device side (a phone, or a terminal acting as one): join by link, send tasks, read the conversation.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pacerelle_core::envelope;
use pacerelle_core::grant::{Grant, SignedGrantOf};
use pacerelle_core::keys::ContentKey;
use pacerelle_core::message::{ReplyPayload, TaskPayload, reply_aad, task_aad};
use pacerelle_core::pairing::{self, PairingSecret, Role};
use pacerelle_core::question::{
    Answer, AnswerPayload, Channel, Level, NotificationPayload, QuestionKind, QuestionPayload, QuestionState,
    answer_aad, answer_copy_aad, notification_aad, question_aad, question_digest,
};
use pacerelle_core::signing::{PublicKey, SignedAnswer, SigningKey, seal_signing_key};
use pacerelle_core::wire::{
    self, AnswerQuestion, ClaimPairing, Conversation, DeviceGrants, DeviceInfo, DeviceQuestion,
    DeviceQuestions, DeviceSelf, GrantRecord, ItemKind, ItemState, MessageState, PairingClaimed,
    PairingOffer, QuestionMeta, RegisterSigningKey, SendMessage, Status, Stored, SubjectKind,
};
use pacerelle_core::{Bearer, CryptoError, Cursor, Timestamp, b64, ids};
use reqwest::Method;
use serde::{Deserialize, Serialize};

use crate::agent::Rejected;
use crate::error::{Error, Result};
use crate::http::{Http, Req, Retry};
use crate::push::PushSubscriptionKeys;

fn open<T: serde::de::DeserializeOwned>(
    key: &ContentKey,
    aad: &envelope::Aad<'_>,
    sealed: &str,
) -> std::result::Result<T, CryptoError> {
    envelope::open_json(key, aad, sealed).map_err(|e| match e {
        pacerelle_core::Error::Crypto(c) => c,
        _ => CryptoError::Open,
    })
}

/// Questions remembered as last read, to refuse locally answers that cannot count.
const MAX_REMEMBERED_QUESTIONS: usize = 1024;

/// Prefix of [`DeviceCredentials::to_secret_string`].
const CREDENTIALS_PREFIX: &str = "pcrdev1_";

/// What a device keeps after pairing. A secret: store it in a file only its owner reads, the Keychain or
/// the Keystore. `Debug` hides the token and the key.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceCredentials {
    /// The relay's base URL.
    pub relay_url: String,
    /// The agent paired with.
    pub agent_id: String,
    /// Its display name.
    pub agent_name: String,
    /// This device's id.
    pub device_id: String,
    /// This device's role.
    pub role: Role,
    /// The bearer credential issued by the relay.
    pub device_token: String,
    /// The key shared with the agent, base64url.
    pub device_key: String,
    /// The push subscriptions registered from this device, with their keys (absent from credentials stored
    /// before push existed, which load with none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub push: Vec<PushSubscriptionKeys>,
    /// base64url of the 32-byte seed of this device's Ed25519 signing key, which signs every answer
    /// (docs/crypto.md §4.8). It never leaves the device. Absent from credentials stored before signing keys
    /// existed, which load with none: such a device registers a key at its first answer (or through
    /// [`DeviceClient::register_signing_key`]), and its credentials must then be stored again
    /// ([`DeviceClient::credentials_to_store`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_seed: Option<String>,
    /// Partner mode: the user this device answers for (role `user`), as the offer sealed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<pacerelle_core::pairing::OfferUser>,
    /// Partner mode: how to show the agent (accent colour, icon), as the offer sealed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branding: Option<pacerelle_core::pairing::Branding>,
}

impl std::fmt::Debug for DeviceCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceCredentials")
            .field("relay_url", &self.relay_url)
            .field("agent_id", &self.agent_id)
            .field("device_id", &self.device_id)
            .finish_non_exhaustive()
    }
}

impl DeviceCredentials {
    /// One opaque string holding everything, `pcrdev1_…`.
    pub fn to_secret_string(&self) -> String {
        #[allow(clippy::unwrap_used)] // plain strings serialise infallibly
        let json = serde_json::to_vec(self).unwrap();
        format!("{CREDENTIALS_PREFIX}{}", b64::encode(&json))
    }

    /// Parses [`DeviceCredentials::to_secret_string`].
    pub fn from_secret_string(text: &str) -> Result<Self> {
        let bad = || Error::InvalidInput("malformed device credentials (expected pcrdev1_…)".into());
        let body = text.trim().strip_prefix(CREDENTIALS_PREFIX).ok_or_else(bad)?;
        let json = b64::decode(body).ok_or_else(bad)?;
        serde_json::from_slice(&json).map_err(|_| bad())
    }
}

/// One item of the conversation, opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConversationItem {
    /// A task this device sent, a reply, a question or a notification from the agent, or an update (a state
    /// change of a task or a question: see `update`).
    pub kind: ItemKind,
    /// The message, reply, question, notification or update id.
    pub id: String,
    /// The text (for a question, the question; empty for an update).
    pub text: String,
    /// For a reply, the task it answers.
    pub source_message_id: Option<String>,
    /// For a task, its state.
    pub state: Option<MessageState>,
    /// For a question: the question opened, with its state as of this read.
    pub question: Option<OpenedQuestion>,
    /// For a notification, its title.
    pub title: Option<String>,
    /// For a notification, how much it matters.
    pub level: Option<Level>,
    /// For an update, the state change it reports (boxed: most items are not updates).
    pub update: Option<Box<ItemUpdate>>,
    /// When the relay stored it.
    pub created_at: Timestamp,
    /// Its position in the stream.
    pub cursor: Cursor,
}

/// A state change the relay reports in the conversation (an item of kind [`ItemKind::Update`]): a task this
/// device sent was processed, or a question sealed for it was answered (here or on another device),
/// cancelled or expired. The relay writes it with the change and wakes the conversation at once, so a device
/// learns it without reading its tasks or questions again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemUpdate {
    /// The task or question whose state changed.
    pub subject_id: String,
    /// Which of the two.
    pub subject_kind: SubjectKind,
    /// The state it reached: [`ItemState::Processed`] for a task; [`ItemState::Answered`],
    /// [`ItemState::Expired`] or [`ItemState::Cancelled`] for a question.
    pub state: ItemState,
    /// For a question: the question as this client last read it, brought up to date (state, who answered,
    /// the answer that counts). `None` when this client has not read the question (see
    /// [`DeviceClient::questions`]).
    pub question: Option<OpenedQuestion>,
    /// For a question: its metadata as the relay reports it (in clear: kind, state, expiry, who answered).
    pub meta: Option<QuestionMeta>,
}

/// A question as a device sees it, opened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OpenedQuestion {
    /// Its id; answer with it.
    pub question_id: String,
    /// The question.
    pub question: String,
    /// What kind of answer it expects.
    pub kind: QuestionKind,
    /// The options of a choice question.
    pub options: Vec<String>,
    /// Whether several options may be chosen.
    pub multiple: bool,
    /// More context.
    pub details: Option<String>,
    /// Where it stands, as of this read (a pending question past its expiry reads as expired).
    pub state: QuestionState,
    /// When it expires (as the agent sealed it).
    pub expires_at: Timestamp,
    /// The device that answered.
    pub answered_by: Option<String>,
    /// When the relay accepted the answer.
    pub answered_at: Option<Timestamp>,
    /// The answering device's name, as the relay reports it.
    pub answered_by_name: Option<String>,
    /// The answer that counts, read from the copy the answering device sealed for every recipient: for
    /// display (the agent decides from the answer sealed for it alone). `None` while unanswered, or for an
    /// answer given without a copy.
    pub answer: Option<Answer>,
    /// How the answer came: `phone` (a device; `answered_by` names it) or `host` (the person answered at the
    /// computer, through the agent). `None` while unanswered.
    #[serde(default)]
    pub channel: Option<Channel>,
    /// When it was asked.
    pub created_at: Timestamp,
    /// [`pacerelle_core::question::question_digest`] of the question as opened: an answer names it.
    #[serde(skip)]
    pub digest: String,
    /// The question's answer key (base64url), with which an answer's copy for the other recipients is sealed.
    #[serde(skip)]
    pub answer_key: Option<String>,
    /// A gate question's grant offer (docs/crypto.md §4.8b): a `yes` may be extended to one of these scopes
    /// for one of these durations ([`DeviceClient::answer_granting`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grants: Option<pacerelle_core::grant::GrantOffer>,
}

/// A grant as an owner device lists it ([`DeviceClient::grants`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListedGrant {
    /// The relay's record: who granted it, when, until when, its uses, its revocation.
    #[serde(flatten)]
    pub record: GrantRecord,
    /// Its question, opened (`None` when it was not sealed for this device, or did not open).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<OpenedQuestion>,
    /// The grant as signed, read from the answer's copy: its scope and expiry (`None` when the copy did not
    /// open here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<Grant>,
}

/// What a device grants with its `yes` (docs/crypto.md §4.8b): one of the question's offered scopes, by its
/// position in the offer (0: the exact call), for `seconds`, at most the longest offered duration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrantChoice {
    /// The scope's position in the offer.
    pub scope: usize,
    /// How long, in seconds.
    pub seconds: u64,
}

/// The grant of `choice` on question `q` answered at `answered_at`, not yet signed.
fn grant_for(q: &OpenedQuestion, choice: GrantChoice, answered_at: Timestamp) -> Result<Grant> {
    let offer = q
        .grants
        .as_ref()
        .ok_or_else(|| Error::InvalidInput("this question offers no grant: answer yes or no".into()))?;
    let scope = offer.scopes.get(choice.scope).ok_or_else(|| {
        Error::InvalidInput(format!(
            "the question offers {} scope(s): choose one from 1 to {}",
            offer.scopes.len(),
            offer.scopes.len()
        ))
    })?;
    if choice.seconds == 0 || choice.seconds > offer.longest() {
        return Err(Error::InvalidInput(format!(
            "the question lets a grant last {} s at most",
            offer.longest()
        )));
    }
    let expires_at = answered_at.plus_millis(i64::try_from(choice.seconds * 1000).unwrap_or(i64::MAX));
    Ok(Grant {
        scope: scope.clone(),
        expires_at,
        policy: offer.policy.clone(),
        signature: String::new(),
    })
}

impl OpenedQuestion {
    /// True when an answer can still be given: pending and not past its expiry by this machine's clock.
    pub fn is_open(&self) -> bool {
        self.state == QuestionState::Pending && Timestamp::now() < self.expires_at
    }

    /// Checks that `answer` fits this question: yes/no for a yes/no question, offered options (one unless
    /// several are allowed, distinct) for a choice, text for a text question.
    pub fn check_answer(&self, answer: &Answer) -> Result<()> {
        let fits = match (answer, self.kind) {
            (Answer::Yes | Answer::No, QuestionKind::YesNo) => true,
            (Answer::Options(chosen), QuestionKind::Choice) => {
                let distinct: std::collections::HashSet<&String> = chosen.iter().collect();
                if let Some(unknown) = chosen.iter().find(|c| !self.options.contains(c)) {
                    return Err(Error::InvalidInput(format!(
                        "{unknown:?} is not one of the options: {}",
                        self.options.join(", ")
                    )));
                }
                !chosen.is_empty() && distinct.len() == chosen.len() && (self.multiple || chosen.len() == 1)
            }
            (Answer::Text(text), QuestionKind::Text) => !text.trim().is_empty(),
            _ => false,
        };
        if fits {
            Ok(())
        } else {
            Err(Error::InvalidInput(format!(
                "this answer does not fit a {} question{}",
                self.kind.as_str().replace('_', "/"),
                match self.kind {
                    QuestionKind::YesNo => " (answer yes or no)",
                    QuestionKind::Choice if self.multiple => " (choose one or more distinct options)",
                    QuestionKind::Choice => " (choose exactly one option)",
                    QuestionKind::Text => " (answer with some text)",
                }
            )))
        }
    }
}

/// Why an answer did not count: the question was already answered (by another device, or by this one with
/// another answer), had expired or was cancelled. Carried in the `details` of the [`Error::Api`] that
/// [`DeviceClient::answer`] returns with the code `question_answered`, `question_cancelled` or
/// `question_expired`; read it with [`ClosedQuestion::from_error`].
///
/// It states the answer that counts, never the refused one. The error's message carries no answer (no error
/// message carries plaintext); `answer` does, for the person's own screen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClosedQuestion {
    /// The question.
    pub question_id: String,
    /// Where it stands: `answered`, `expired` or `cancelled`.
    pub state: QuestionState,
    /// The answer that counts, read from the copy its device sealed for every recipient (see
    /// [`OpenedQuestion::answer`]); `None` when not answered, or when that answer has no readable copy.
    #[serde(default)]
    pub answer: Option<Answer>,
    /// The device whose answer counts.
    #[serde(default)]
    pub answered_by: Option<String>,
    /// Its name, as the relay reports it.
    #[serde(default)]
    pub answered_by_name: Option<String>,
    /// When the relay accepted that answer.
    #[serde(default)]
    pub answered_at: Option<Timestamp>,
    /// True when the answer that counts is this device's own (given earlier).
    #[serde(default)]
    pub by_this_device: bool,
    /// Where the answer that counts was given: `phone`, or `host` (at the computer; no `answered_by`).
    #[serde(default)]
    pub channel: Option<Channel>,
    /// When it expires (or expired), as the agent sealed it; `None` when the question could not be read again.
    #[serde(default)]
    pub expires_at: Option<Timestamp>,
}

impl ClosedQuestion {
    /// The closed question an error of [`DeviceClient::answer`] describes, if it is one.
    pub fn from_error(e: &Error) -> Option<ClosedQuestion> {
        match e {
            Error::Api {
                details: Some(details),
                ..
            } if e.closed_state().is_some() => serde_json::from_value((**details).clone()).ok(),
            _ => None,
        }
    }

    fn of(q: &OpenedQuestion, state: QuestionState, device_id: &str) -> Self {
        let answered = state == QuestionState::Answered;
        ClosedQuestion {
            question_id: q.question_id.clone(),
            state,
            answer: q.answer.clone().filter(|_| answered),
            answered_by: q.answered_by.clone().filter(|_| answered),
            answered_by_name: q.answered_by_name.clone().filter(|_| answered),
            answered_at: q.answered_at.filter(|_| answered),
            by_this_device: answered && q.answered_by.as_deref() == Some(device_id),
            channel: q.channel.filter(|_| answered),
            expires_at: Some(q.expires_at),
        }
    }

    /// The refusal: the relay's status and code for the state, a message without any answer in it, and this
    /// as its details.
    fn into_error(self) -> Error {
        let (status, code) = match self.state {
            QuestionState::Expired => (410, wire::code::QUESTION_EXPIRED),
            QuestionState::Cancelled => (409, wire::code::QUESTION_CANCELLED),
            _ => (409, wire::code::QUESTION_ANSWERED),
        };
        let message = match self.state {
            QuestionState::Expired => match self.expires_at {
                Some(at) => format!("the question expired at {at}: this answer was not recorded"),
                None => "the question has expired: this answer was not recorded".to_string(),
            },
            QuestionState::Cancelled => {
                "the question was cancelled: this answer was not recorded".to_string()
            }
            _ => {
                let by = if self.by_this_device {
                    "this device".to_string()
                } else if self.channel == Some(Channel::Host) {
                    "the person at the computer".to_string()
                } else {
                    self.answered_by_name
                        .clone()
                        .or_else(|| self.answered_by.clone())
                        .unwrap_or_else(|| "another device".to_string())
                };
                let at = self.answered_at.map(|t| format!(" at {t}")).unwrap_or_default();
                format!("the question is already answered, by {by}{at}: this answer was not recorded")
            }
        };
        Error::Api {
            status,
            code: code.to_string(),
            message,
            details: serde_json::to_value(&self).ok().map(Box::new),
        }
    }
}

/// The questions addressed to this device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuestionList {
    /// Oldest first.
    pub questions: Vec<OpenedQuestion>,
    /// Questions whose envelopes did not open.
    pub rejected: Vec<Rejected>,
}

/// A page of the conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConversationPage {
    /// Oldest first.
    pub items: Vec<ConversationItem>,
    /// Items whose envelopes did not open.
    pub rejected: Vec<Rejected>,
    /// Where to continue.
    pub cursor: Cursor,
}

/// A device's client. Cheap to clone.
#[derive(Debug, Clone)]
pub struct DeviceClient {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    http: Http,
    credentials: DeviceCredentials,
    key: ContentKey,
    /// The questions as last read, to refuse answers locally that cannot count.
    questions: Mutex<HashMap<String, OpenedQuestion>>,
    /// The push subscriptions as they are now (see [`DeviceClient::credentials_to_store`]).
    push: Mutex<Vec<PushSubscriptionKeys>>,
    /// This device's signing key: drawn at pairing, loaded from the credentials, or registered later by a
    /// device paired before signing keys (see [`DeviceClient::credentials_to_store`]).
    signing: Mutex<Option<Arc<SigningKey>>>,
    /// Held while a signing key is registered, so that two answers at once register one key.
    registering: tokio::sync::Mutex<()>,
    /// Whether the relay was seen to list this device's signing key: answers are signed only then, since an
    /// agent pins only the keys its relay lists and refuses a signature by a key it never received.
    key_listed: std::sync::atomic::AtomicBool,
}

impl DeviceClient {
    /// Pairs with an agent by opening its link. The link's secret never leaves this process.
    pub async fn join(link: &str, name: &str) -> Result<Self> {
        let name = name.trim();
        if name.is_empty() || name.chars().count() > 100 {
            return Err(Error::InvalidInput(
                "a device name has 1 to 100 characters".into(),
            ));
        }
        let (relay_url, secret) = PairingSecret::parse_link(link)?;
        let http = Http::new(&relay_url)?;
        let path = format!("/v1/pairings/{}", secret.pairing_id());
        let offer: PairingOffer = http.send(Req::<()>::new(Method::GET, &path)).await?;
        let payload = pairing::open_offer(&secret, &offer.agent_id, &offer.device_id, &offer.offer)?;
        let key = payload.key()?;
        // The signing key is drawn here and never leaves this device; the agent receives its public half
        // sealed with the device key, so the relay cannot substitute it.
        let signing = SigningKey::generate()?;
        let public = signing.public_key();
        let claim = ClaimPairing {
            claim_secret: b64::encode(&secret.claim_secret()),
            name: name.to_string(),
            signing_key: Some(public.to_b64()),
            signing_key_seal: Some(seal_signing_key(
                &key,
                &payload.agent_id,
                &payload.device_id,
                &public,
            )),
        };
        let claim_path = format!("{path}/claim");
        // Claiming is single-use: never retried, so a lost answer cannot claim twice.
        let claimed: PairingClaimed = http
            .send(Req {
                body: Some(&claim),
                retry: Retry::No,
                ..Req::new(Method::POST, &claim_path)
            })
            .await?;
        if claimed.agent_id != payload.agent_id || claimed.device_id != payload.device_id {
            return Err(Error::Crypto(CryptoError::Open));
        }
        let credentials = DeviceCredentials {
            relay_url,
            agent_id: payload.agent_id,
            agent_name: payload.agent_name,
            device_id: payload.device_id,
            role: payload.role,
            device_token: claimed.device_token,
            device_key: b64::encode(&key.to_bytes()),
            push: Vec::new(),
            signing_seed: Some(b64::encode(&signing.seed())),
            user: payload.user,
            branding: payload.branding.filter(|b| b.validate().is_ok()),
        };
        Ok(DeviceClient {
            inner: Arc::new(Inner {
                http,
                credentials,
                key,
                questions: Mutex::new(HashMap::new()),
                push: Mutex::new(Vec::new()),
                signing: Mutex::new(Some(Arc::new(signing))),
                registering: tokio::sync::Mutex::new(()),
                key_listed: std::sync::atomic::AtomicBool::new(false),
            }),
        })
    }

    /// A client from stored credentials.
    pub fn from_credentials(credentials: DeviceCredentials) -> Result<Self> {
        let key = b64::decode_array::<32>(&credentials.device_key)
            .map(ContentKey::from_bytes)
            .ok_or_else(|| Error::InvalidInput("malformed device key in credentials".into()))?;
        if Bearer(credentials.device_token.clone()).split().is_none() {
            return Err(Error::InvalidInput(
                "malformed device token in credentials".into(),
            ));
        }
        let signing = match credentials.signing_seed.as_deref() {
            Some(seed) => {
                let seed = b64::decode_array::<32>(seed)
                    .ok_or_else(|| Error::InvalidInput("malformed signing key in credentials".into()))?;
                Some(Arc::new(SigningKey::from_seed(seed)?))
            }
            None => None,
        };
        let http = Http::new(&credentials.relay_url)?;
        let push = Mutex::new(credentials.push.clone());
        Ok(DeviceClient {
            inner: Arc::new(Inner {
                http,
                credentials,
                key,
                questions: Mutex::new(HashMap::new()),
                push,
                signing: Mutex::new(signing),
                registering: tokio::sync::Mutex::new(()),
                key_listed: std::sync::atomic::AtomicBool::new(false),
            }),
        })
    }

    /// The credentials this client was made with (at pairing, or as restored). What to store is
    /// [`DeviceClient::credentials_to_store`]: these plus the push subscriptions and a signing key registered
    /// since.
    pub fn credentials(&self) -> &DeviceCredentials {
        &self.inner.credentials
    }

    /// This device's signing key, when it holds one.
    fn signing_key(&self) -> Option<Arc<SigningKey>> {
        self.inner.signing.lock().ok().and_then(|k| k.clone())
    }

    /// The seed of the signing key as it is now, for [`DeviceClient::credentials_to_store`].
    pub(crate) fn signing_seed(&self) -> Option<String> {
        self.signing_key().map(|k| b64::encode(&k.seed()))
    }

    /// The fingerprint of this device's signing key ([`PublicKey::fingerprint`]: six groups of four hex
    /// digits), for a person to compare with the one an answer-log export shows; `None` for a device paired
    /// before signing keys that has not registered one yet.
    pub fn signing_fingerprint(&self) -> Option<String> {
        self.signing_public_key().map(|k| k.fingerprint())
    }

    /// The public half of this device's signing key, when it holds one.
    pub fn signing_public_key(&self) -> Option<PublicKey> {
        self.signing_key().map(|k| k.public_key())
    }

    /// Registers a signing key for a device paired before signing keys existed (`PUT
    /// /v1/device/signing-key`): draws one, sends its public half to the relay in clear and sealed for the
    /// agent with the device key, and keeps it. Returns its fingerprint. [`DeviceClient::answer`] calls it by
    /// itself at the first answer of such a device.
    ///
    /// Store [`DeviceClient::credentials_to_store`] right after: the key is in them, and nothing else holds
    /// it. A device registers one key only, ever: credentials that lost it cannot register another (the
    /// relay's `409 signing_key_exists`) and the device must pair again. A device that already holds a key
    /// sends that same key (a relay that did not record it at pairing records it now) and gets its
    /// fingerprint when the relay already lists it.
    pub async fn register_signing_key(&self) -> Result<String> {
        let _one_at_a_time = self.inner.registering.lock().await;
        let held = self.signing_key();
        let key = match &held {
            Some(key) => key.clone(),
            None => Arc::new(SigningKey::generate()?),
        };
        let public = key.public_key();
        let body = RegisterSigningKey {
            signing_key: public.to_b64(),
            signing_key_seal: seal_signing_key(&self.inner.key, self.agent_id(), self.device_id(), &public),
        };
        let sent = self
            .inner
            .http
            .send::<_, DeviceInfo>(Req {
                body: Some(&body),
                ..self.req(Method::PUT, "/v1/device/signing-key")
            })
            .await;
        match sent {
            Ok(_) => {}
            Err(e) if e.code() == Some(wire::code::SIGNING_KEY_EXISTS) => {
                // Registered before: fine only when the relay lists this very key (held, or sent by a retry
                // of this request whose first answer was lost).
                let listed = self.info().await?.device.signing_key;
                if listed.as_deref() != Some(public.to_b64().as_str()) {
                    return Err(Error::local(
                        409,
                        wire::code::SIGNING_KEY_EXISTS,
                        "this device registered a signing key earlier that these credentials do not hold \
                         (credentials stored before it was registered?): answers cannot be signed; pair this \
                         device again"
                            .into(),
                    ));
                }
            }
            Err(e) => return Err(e),
        }
        if let Ok(mut slot) = self.inner.signing.lock() {
            *slot = Some(key);
        }
        self.inner
            .key_listed
            .store(true, std::sync::atomic::Ordering::Release);
        Ok(public.fingerprint())
    }

    /// The key to sign an answer with: the one held, or one registered now for a device paired before
    /// signing keys. `None` when the relay does not know signing keys (an older relay answers the
    /// registration with 404 or 405): the agent then pins none, and the answer goes unsigned as before.
    async fn key_for_answer(&self) -> Result<Option<Arc<SigningKey>>> {
        use std::sync::atomic::Ordering;
        if let Some(key) = self.signing_key() {
            if self.inner.key_listed.load(Ordering::Acquire) {
                return Ok(Some(key));
            }
            // Once per client: the relay must list the key the claim carried (an older relay dropped it, and
            // an agent would refuse a signature by a key it never received).
            let listed = self.info().await?.device.signing_key;
            match listed {
                Some(listed) if listed == key.public_key().to_b64() => {
                    self.inner.key_listed.store(true, Ordering::Release);
                    return Ok(Some(key));
                }
                Some(_) => {
                    return Err(Error::local(
                        409,
                        wire::code::SIGNING_KEY_EXISTS,
                        "the relay lists another signing key for this device than the one it holds (its record \
                         was changed, or these are not the credentials that paired): the answer was not sent; \
                         pair this device again"
                            .into(),
                    ));
                }
                None => {}
            }
        }
        match self.register_signing_key().await {
            Ok(_) => Ok(self.signing_key()),
            Err(Error::Api {
                status: 404 | 405, ..
            }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn req<'a, B: serde::Serialize>(&'a self, method: Method, path: &'a str) -> Req<'a, B> {
        Req {
            bearer: Some(&self.inner.credentials.device_token),
            ..Req::new(method, path)
        }
    }

    fn agent_id(&self) -> &str {
        &self.inner.credentials.agent_id
    }

    fn device_id(&self) -> &str {
        &self.inner.credentials.device_id
    }

    /// Sends a task to the agent. Idempotent by `message_id` (one is drawn when `None`).
    pub async fn send(&self, text: &str, message_id: Option<&str>) -> Result<Stored> {
        crate::agent::check_text("a task", text)?;
        let message_id = match message_id {
            Some(id) => {
                ids::validate("message id", id)?;
                id.to_string()
            }
            None => ids::generate(ids::MESSAGE),
        };
        let aad = task_aad(self.agent_id(), self.device_id(), &message_id);
        let envelope = envelope::seal_json(
            &self.inner.key,
            &aad,
            &TaskPayload {
                text: text.to_string(),
            },
        );
        let body = SendMessage { message_id, envelope };
        self.inner
            .http
            .send(Req {
                body: Some(&body),
                ..self.req(Method::POST, "/v1/device/messages")
            })
            .await
    }

    /// The conversation after `cursor` (from the start when `None`), parking up to `wait` when there is
    /// nothing new.
    pub async fn conversation(&self, cursor: Option<Cursor>, wait: Duration) -> Result<ConversationPage> {
        let wait = wait.min(Duration::from_secs(wire::MAX_WAIT_SECONDS));
        let mut query = vec![
            ("wait", wait.as_secs().to_string()),
            ("updates", "true".to_owned()),
        ];
        if let Some(c) = cursor {
            query.push(("cursor", c.to_string()));
        }
        let page: Conversation = self
            .inner
            .http
            .send(Req {
                query: &query,
                wait: Some(wait),
                ..self.req::<()>(Method::GET, "/v1/device/conversation")
            })
            .await?;
        let mut out = ConversationPage {
            items: Vec::new(),
            rejected: Vec::new(),
            cursor: page.cursor,
        };
        for item in page.items {
            if item.kind == ItemKind::Unknown || Self::unknown_update(&item) {
                // Sent by a newer relay: skipped, as the wire contract says.
                continue;
            }
            match self.open_item(item) {
                Ok(opened) => {
                    if let Some(q) = &opened.question {
                        self.remember(q);
                    }
                    out.items.push(opened);
                }
                Err((id, reason)) => out.rejected.push(Rejected {
                    message_id: id,
                    from: self.agent_id().to_string(),
                    reason,
                }),
            }
        }
        Ok(out)
    }

    /// An update about a subject or in a state this version does not know (from a newer relay): skipped like
    /// an unknown kind.
    pub(crate) fn unknown_update(item: &wire::ConversationItem) -> bool {
        item.kind == ItemKind::Update
            && (item.subject_kind == Some(SubjectKind::Unknown) || item.state == Some(ItemState::Unknown))
    }

    fn open_item(
        &self,
        item: wire::ConversationItem,
    ) -> std::result::Result<ConversationItem, (String, CryptoError)> {
        let update = match item.kind {
            ItemKind::Update => Some(Box::new(
                self.read_update(&item).map_err(|e| (item.id.clone(), e))?,
            )),
            _ => None,
        };
        let mut out = ConversationItem {
            kind: item.kind,
            id: item.id,
            text: String::new(),
            source_message_id: item.source_message_id,
            state: item
                .state
                .filter(|_| item.kind == ItemKind::Message)
                .and_then(ItemState::message_state),
            question: None,
            title: None,
            level: None,
            update,
            created_at: item.created_at,
            cursor: item.cursor,
        };
        let opened = match item.kind {
            ItemKind::Message => {
                let aad = task_aad(self.agent_id(), self.device_id(), &out.id);
                open::<TaskPayload>(&self.inner.key, &aad, &item.envelope).map(|task| out.text = task.text)
            }
            ItemKind::Reply => {
                let aad = reply_aad(self.agent_id(), self.device_id(), &out.id);
                open::<ReplyPayload>(&self.inner.key, &aad, &item.envelope).and_then(|reply| {
                    // The relay states the source in clear; the sealed payload must agree.
                    if out.source_message_id.as_deref() != Some(reply.source_message_id.as_str()) {
                        return Err(CryptoError::Open);
                    }
                    out.text = reply.text;
                    Ok(())
                })
            }
            ItemKind::Question => match &item.question {
                Some(meta) => self
                    .open_question(&out.id, &item.envelope, meta, out.created_at)
                    .map(|q| {
                        out.text = q.question.clone();
                        out.question = Some(q);
                    }),
                None => Err(CryptoError::Malformed),
            },
            ItemKind::Notification => {
                let aad = notification_aad(self.agent_id(), self.device_id(), &out.id);
                open::<NotificationPayload>(&self.inner.key, &aad, &item.envelope).map(|n| {
                    out.text = n.text;
                    out.title = n.title;
                    out.level = Some(n.level);
                })
            }
            ItemKind::Update => Ok(()),
            _ => Err(CryptoError::Malformed),
        };
        match opened {
            Ok(()) => Ok(out),
            Err(reason) => Err((out.id, reason)),
        }
    }

    /// Reads an update item (nothing sealed: the relay states it in clear) and, for a question this client
    /// remembers, brings the remembered question up to date so that [`DeviceClient::answer`] refuses locally
    /// an answer that can no longer count.
    fn read_update(&self, item: &wire::ConversationItem) -> std::result::Result<ItemUpdate, CryptoError> {
        let (Some(subject_id), Some(subject_kind), Some(state)) =
            (item.subject_id.clone(), item.subject_kind, item.state)
        else {
            return Err(CryptoError::Malformed);
        };
        match (subject_kind, state.question_state(), &item.question) {
            (SubjectKind::Message, None, None) if state == ItemState::Processed => Ok(ItemUpdate {
                subject_id,
                subject_kind,
                state,
                question: None,
                meta: None,
            }),
            (SubjectKind::Question, Some(closed), Some(meta)) if meta.state == closed => Ok(ItemUpdate {
                question: self.refresh_question(&subject_id, meta),
                subject_id,
                subject_kind,
                state,
                meta: Some(meta.clone()),
            }),
            _ => Err(CryptoError::Malformed),
        }
    }

    /// The remembered question `question_id` with the state `meta` reports, kept; `None` when not remembered.
    fn refresh_question(&self, question_id: &str, meta: &QuestionMeta) -> Option<OpenedQuestion> {
        let mut cache = self.inner.questions.lock().ok()?;
        let q = cache.get_mut(question_id)?;
        q.state = meta.state;
        q.answered_by = meta.answered_by.clone();
        q.answered_at = meta.answered_at;
        q.answered_by_name = meta.answered_by_name.clone();
        q.channel = meta.channel;
        let key = q
            .answer_key
            .as_deref()
            .and_then(b64::decode_array::<32>)
            .map(ContentKey::from_bytes);
        q.answer = Self::answer_copy(self.agent_id(), question_id, key, &q.digest, meta);
        Some(q.clone())
    }

    fn open_question(
        &self,
        question_id: &str,
        sealed: &str,
        meta: &QuestionMeta,
        created_at: Timestamp,
    ) -> std::result::Result<OpenedQuestion, CryptoError> {
        let aad = question_aad(self.agent_id(), self.device_id(), question_id);
        let plain = envelope::open(&self.inner.key, &aad, sealed)?;
        let payload: QuestionPayload = envelope::read_payload(&plain).ok_or(CryptoError::Open)?;
        // The kind is in clear at the relay; the sealed one must agree, and this device must be a recipient.
        if payload.kind != meta.kind || !payload.recipients.iter().any(|r| r == self.device_id()) {
            return Err(CryptoError::Open);
        }
        // The agent enforces the expiry it sealed; a pending question past it cannot be answered.
        let state = if meta.state == QuestionState::Pending && Timestamp::now() >= payload.expires_at {
            QuestionState::Expired
        } else {
            meta.state
        };
        let digest = question_digest(&plain);
        let answer = Self::answer_copy(self.agent_id(), question_id, payload.answer_key(), &digest, meta);
        Ok(OpenedQuestion {
            question_id: question_id.to_string(),
            question: payload.question,
            kind: payload.kind,
            options: payload.options,
            multiple: payload.multiple,
            details: payload.details,
            state,
            expires_at: payload.expires_at,
            answered_by: meta.answered_by.clone(),
            answered_at: meta.answered_at,
            answered_by_name: meta.answered_by_name.clone(),
            answer,
            channel: meta.channel,
            created_at,
            digest,
            answer_key: payload.answer_key,
            grants: payload.grants,
        })
    }

    /// Opens the copy of the answer that counts, sealed by the answering device with the question's answer key.
    fn answer_copy(
        agent_id: &str,
        question_id: &str,
        key: Option<ContentKey>,
        digest: &str,
        meta: &QuestionMeta,
    ) -> Option<Answer> {
        Self::answer_copy_payload(agent_id, question_id, key, digest, meta).map(|copy| copy.answer)
    }

    /// The whole copy of the answer that counts ([`DeviceClient::answer_copy`]): with the grant it carries.
    fn answer_copy_payload(
        agent_id: &str,
        question_id: &str,
        key: Option<ContentKey>,
        digest: &str,
        meta: &QuestionMeta,
    ) -> Option<AnswerPayload> {
        // An answer given at the computer has its copy sealed by the agent itself (device "").
        let by = match (meta.channel, &meta.answered_by) {
            (Some(Channel::Host), None) => "",
            (Some(Channel::Host), Some(_)) => return None,
            (_, by) => by.as_deref()?,
        };
        let (Some(copy), Some(key)) = (&meta.answer_copy, key) else {
            return None;
        };
        let copy: AnswerPayload = open(&key, &answer_copy_aad(agent_id, by, question_id), copy).ok()?;
        // A copy counts for display only if it answers this very question, as the web app checks too.
        (copy.question_id == question_id && copy.question_digest.as_deref() == Some(digest)).then_some(copy)
    }

    fn open_device_question(&self, q: &DeviceQuestion) -> std::result::Result<OpenedQuestion, CryptoError> {
        let opened = self.open_question(&q.question_id, &q.envelope, &q.meta, q.created_at)?;
        self.remember(&opened);
        Ok(opened)
    }

    fn remember(&self, q: &OpenedQuestion) {
        if let Ok(mut cache) = self.inner.questions.lock() {
            // Bounded: a long-running device forgets old questions (the relay still refuses late answers).
            if cache.len() >= MAX_REMEMBERED_QUESTIONS && !cache.contains_key(&q.question_id) {
                cache.retain(|_, known| known.is_open());
                if cache.len() >= MAX_REMEMBERED_QUESTIONS {
                    cache.clear();
                }
            }
            cache.insert(q.question_id.clone(), q.clone());
        }
    }

    /// The questions addressed to this device (the most recent ones), oldest first: only those in `state`
    /// when given (`Some(QuestionState::Pending)`: the ones waiting for an answer), all of them otherwise.
    pub async fn questions(&self, state: Option<QuestionState>) -> Result<QuestionList> {
        let state = state.map_or("all", QuestionState::as_str);
        let query = [("state", state.to_string())];
        let list: DeviceQuestions = self
            .inner
            .http
            .send(Req {
                query: &query,
                ..self.req::<()>(Method::GET, "/v1/device/questions")
            })
            .await?;
        let mut out = QuestionList {
            questions: Vec::new(),
            rejected: Vec::new(),
        };
        for q in &list.questions {
            match self.open_device_question(q) {
                Ok(opened) => out.questions.push(opened),
                Err(reason) => out.rejected.push(Rejected {
                    message_id: q.question_id.clone(),
                    from: self.agent_id().to_string(),
                    reason,
                }),
            }
        }
        Ok(out)
    }

    /// The agent's grants (docs/relay-api.md, "Grants"), live or ended less than a day ago, newest first: each
    /// with its question opened and the grant read from the answer's copy, when this device can open them.
    /// Owner devices only (`forbidden` otherwise).
    pub async fn grants(&self) -> Result<Vec<ListedGrant>> {
        let list: DeviceGrants = self
            .inner
            .http
            .send(self.req::<()>(Method::GET, "/v1/device/grants"))
            .await?;
        Ok(list
            .grants
            .into_iter()
            .map(|g| {
                let question = g
                    .question
                    .as_ref()
                    .and_then(|q| self.open_device_question(q).ok());
                let grant = match (&question, &g.question) {
                    (Some(opened), Some(sealed)) => {
                        let key = opened
                            .answer_key
                            .as_deref()
                            .and_then(b64::decode_array::<32>)
                            .map(ContentKey::from_bytes);
                        Self::answer_copy_payload(
                            self.agent_id(),
                            &opened.question_id,
                            key,
                            &opened.digest,
                            &sealed.meta,
                        )
                        .and_then(|copy| copy.grant)
                    }
                    _ => None,
                };
                ListedGrant {
                    record: g.record,
                    question,
                    grant,
                }
            })
            .collect())
    }

    /// Revokes a grant: from now on, the gate asks again for the calls it covered (at its next check; a gate
    /// that cannot reach the relay asks too). Idempotent. Owner devices only.
    pub async fn revoke_grant(&self, grant_id: &str) -> Result<GrantRecord> {
        ids::validate("grant id", grant_id)?;
        let path = format!("/v1/device/grants/{grant_id}");
        self.inner.http.send(self.req::<()>(Method::DELETE, &path)).await
    }

    /// Answers a question: the answer is sealed for the agent with this device's key, bound to the question,
    /// and stamped with this device's clock. The first valid answer wins; the same answer again from this
    /// device (a retry) returns the question as answered.
    ///
    /// An answer that does not count is never reported as given: when the question is expired, cancelled or
    /// already answered — by another device, or by this one with another answer — the error has the relay's
    /// code (`question_expired`, `question_cancelled`, `question_answered`) and a [`ClosedQuestion`] with the
    /// state and the answer that counts ([`ClosedQuestion::from_error`]). It is decided without a request when
    /// the question as last read by [`DeviceClient::questions`] or [`DeviceClient::conversation`] was already
    /// closed, and otherwise from the relay's refusal and the question read again. An answer that does not fit
    /// the question is [`Error::InvalidInput`].
    ///
    /// The answer is signed with this device's signing key ([`SignedAnswer`]: the agent, this device, the
    /// question's id and the digest of its bytes as opened here, the answer and this device's time), and the
    /// signature travels inside the sealed answer. A device paired before signing keys registers one first,
    /// once ([`DeviceClient::register_signing_key`]), then signs: store [`DeviceClient::credentials_to_store`]
    /// after such an answer, or the key is lost with the process. Against a relay that does not know signing
    /// keys (it answers the registration with 404 or 405) the answer goes unsigned, as before.
    pub async fn answer(&self, question_id: &str, answer: Answer) -> Result<OpenedQuestion> {
        self.answer_with(question_id, answer, None).await
    }

    /// Answers `yes` to a gate question and grants the same for the calls of one offered scope, for a while
    /// (docs/crypto.md §4.8b): the grant is signed with this device's key and sealed in the answer; the agent
    /// checks it against the question it asked. Fails with `invalid_input` when the question offers no grant,
    /// the choice is not among its offer, or this device has no signing key (an unsigned grant never counts).
    pub async fn answer_granting(&self, question_id: &str, choice: GrantChoice) -> Result<OpenedQuestion> {
        self.answer_with(question_id, Answer::Yes, Some(choice)).await
    }

    async fn answer_with(
        &self,
        question_id: &str,
        answer: Answer,
        choice: Option<GrantChoice>,
    ) -> Result<OpenedQuestion> {
        ids::validate("question id", question_id)?;
        if let Answer::Text(text) = &answer {
            crate::agent::check_text("an answer", text)?;
        }
        let cached = self
            .inner
            .questions
            .lock()
            .ok()
            .and_then(|cache| cache.get(question_id).cloned());
        // The answer names the exact question it answers (its digest): read it first if it was not.
        let known = match cached {
            Some(q) => q,
            None => self
                .questions(None)
                .await?
                .questions
                .into_iter()
                .find(|q| q.question_id == question_id)
                .ok_or_else(|| {
                    Error::local(
                        404,
                        wire::code::NOT_FOUND,
                        "no such question for this device".into(),
                    )
                })?,
        };
        known.check_answer(&answer)?;
        if let Some(closed) = self.closed_before(&known, &answer) {
            return Err(closed.into_error());
        }
        let signing = self.key_for_answer().await?;
        let mut payload = AnswerPayload {
            grant: None,
            question_id: question_id.to_string(),
            answer,
            answered_at: Timestamp::now(),
            question_digest: Some(known.digest.clone()),
            signature: None,
        };
        if let Some(choice) = choice {
            let key = signing.as_ref().ok_or_else(|| {
                Error::InvalidInput("this device has no signing key: it cannot grant (pair it again)".into())
            })?;
            let mut grant = grant_for(&known, choice, payload.answered_at)?;
            let of = SignedGrantOf {
                agent_id: self.agent_id(),
                device_id: self.device_id(),
                question_id,
                question_digest: &known.digest,
                granted_at: payload.answered_at,
            };
            grant.signature = grant.signed(of).sign(key);
            payload.grant = Some(grant);
        }
        // Signed over the question's digest as this device computed it from the bytes it opened and shows.
        payload.signature = signing.map(|key| {
            SignedAnswer {
                agent_id: self.agent_id(),
                device_id: self.device_id(),
                question_id,
                question_digest: &known.digest,
                answered_at: payload.answered_at,
                answer: &payload.answer,
            }
            .sign(&key)
        });
        let aad = answer_aad(self.agent_id(), self.device_id(), question_id);
        let copy = known
            .answer_key
            .as_deref()
            .and_then(b64::decode_array::<32>)
            .map(|key| {
                let aad = answer_copy_aad(self.agent_id(), self.device_id(), question_id);
                envelope::seal_json(&ContentKey::from_bytes(key), &aad, &payload)
            });
        let body = AnswerQuestion {
            envelope: envelope::seal_json(&self.inner.key, &aad, &payload),
            copy,
        };
        let path = format!("/v1/device/questions/{question_id}/answer");
        let sent = self
            .inner
            .http
            .send::<_, DeviceQuestion>(Req {
                body: Some(&body),
                ..self.req(Method::POST, &path)
            })
            .await;
        let stored = match sent {
            Ok(stored) => stored,
            Err(e) => return Err(self.refused(question_id, e).await),
        };
        let opened = self.open_device_question(&stored).map_err(Error::Crypto)?;
        // A retry from this device gets the answer stored first: when it is another one, this one did not count.
        let theirs = opened.answered_by.as_deref() != Some(self.device_id());
        let other_answer = opened
            .answer
            .as_ref()
            .is_some_and(|counted| *counted != payload.answer);
        if opened.state != QuestionState::Answered || theirs || other_answer {
            let state = if opened.state.is_terminal() {
                opened.state
            } else {
                QuestionState::Answered
            };
            return Err(ClosedQuestion::of(&opened, state, self.device_id()).into_error());
        }
        Ok(opened)
    }

    /// The refusal of an answer to a question already closed as last read: expired (by the relay, or past the
    /// expiry the agent sealed), cancelled, or answered — by another device, or by this one with another
    /// answer. `None` when the answer may still count: pending, or the same answer again from this device
    /// (the relay then returns it), or an earlier answer from this device that cannot be read (no copy).
    fn closed_before(&self, q: &OpenedQuestion, answer: &Answer) -> Option<ClosedQuestion> {
        let state = match q.state {
            QuestionState::Pending if Timestamp::now() >= q.expires_at => QuestionState::Expired,
            QuestionState::Pending => return None,
            QuestionState::Answered if q.answered_by.as_deref() == Some(self.device_id()) => {
                match &q.answer {
                    Some(counted) if counted != answer => QuestionState::Answered,
                    _ => return None,
                }
            }
            state => state,
        };
        Some(ClosedQuestion::of(q, state, self.device_id()))
    }

    /// The relay refused an answer: when because the question is closed, the refusal states the question as
    /// read again (its state, the answer that counts); any other error is returned as it is.
    async fn refused(&self, question_id: &str, e: Error) -> Error {
        let Some(state) = e.closed_state() else {
            return e;
        };
        let again = self
            .questions(None)
            .await
            .ok()
            .and_then(|list| list.questions.into_iter().find(|q| q.question_id == question_id));
        match again {
            Some(q) => {
                // The state read again, unless it is older than the refusal.
                let state = if q.state.is_terminal() { q.state } else { state };
                ClosedQuestion::of(&q, state, self.device_id()).into_error()
            }
            None => ClosedQuestion {
                question_id: question_id.to_string(),
                state,
                answer: None,
                answered_by: None,
                answered_by_name: None,
                answered_at: None,
                by_this_device: false,
                channel: None,
                expires_at: None,
            }
            .into_error(),
        }
    }

    /// Presence of the agent and counts.
    pub async fn status(&self) -> Result<Status> {
        self.inner
            .http
            .send(self.req::<()>(Method::GET, "/v1/device/status"))
            .await
    }

    /// This device and its agent, as the relay knows them.
    pub async fn info(&self) -> Result<DeviceSelf> {
        self.inner
            .http
            .send(self.req::<()>(Method::GET, "/v1/device"))
            .await
    }

    /// Leaves: revokes this device's credential at the relay.
    pub async fn leave(&self) -> Result<DeviceInfo> {
        self.inner
            .http
            .send(self.req::<()>(Method::DELETE, "/v1/device"))
            .await
    }
}

/// What the push module reads and changes of a device client.
impl DeviceClient {
    pub(crate) fn http(&self) -> &Http {
        &self.inner.http
    }

    pub(crate) fn device_req<'a, B: serde::Serialize>(&'a self, method: Method, path: &'a str) -> Req<'a, B> {
        self.req(method, path)
    }

    /// The push subscriptions as they are now.
    pub(crate) fn push_subscriptions(&self) -> Vec<PushSubscriptionKeys> {
        self.inner.push.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// The subscription for `endpoint`, made by `new` (given how many there are) and kept when there is none,
    /// in one step, so that two registrations at once keep the same keys; true when it was made now.
    pub(crate) fn push_subscription_for(
        &self,
        endpoint: &str,
        new: impl FnOnce(usize) -> Result<PushSubscriptionKeys>,
    ) -> Result<(PushSubscriptionKeys, bool)> {
        let mut subscriptions = self
            .inner
            .push
            .lock()
            .map_err(|_| Error::InvalidInput("push subscriptions unavailable".into()))?;
        if let Some(known) = subscriptions.iter().find(|s| s.endpoint == endpoint) {
            return Ok((known.clone(), false));
        }
        let made = new(subscriptions.len())?;
        subscriptions.push(made.clone());
        Ok((made, true))
    }

    /// Forgets the subscription for `endpoint`.
    pub(crate) fn forget_push_subscription(&self, endpoint: &str) {
        if let Ok(mut subscriptions) = self.inner.push.lock() {
            subscriptions.retain(|s| s.endpoint != endpoint);
        }
    }

    /// Opens an item a push carried, as the conversation opens it, and remembers a question in it.
    pub(crate) fn open_pushed_item(
        &self,
        item: wire::ConversationItem,
    ) -> std::result::Result<ConversationItem, (String, CryptoError)> {
        let opened = self.open_item(item)?;
        if let Some(q) = &opened.question {
            self.remember(q);
        }
        Ok(opened)
    }
}
