//! The device: pair by link, restore, send, read and wait, answer, presence, leave.

use std::sync::Arc;
use std::time::Duration;

use pacerelle_client::{Cursor, device::DeviceCredentials};
pub use pacerelle_core::pairing::{Branding, OfferUser};

use crate::conversation::{ConversationPage, SentMessage};
use crate::error::{PacerelleError, Result};
use crate::grants::GrantInfo;
use crate::listener::{ConversationListener, ListenerHandle};
use crate::question::{Answer, Question, QuestionState};
use crate::status::AgentStatus;

/// Who this device is, from its credentials (nothing secret).
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct DeviceIdentity {
    /// The relay's base URL.
    pub relay_url: String,
    /// The agent paired with.
    pub agent_id: String,
    /// Its display name.
    pub agent_name: String,
    /// This device's id.
    pub device_id: String,
    /// This device's role: `owner` (sends tasks, answers questions) or `user` (answers the questions
    /// addressed to it).
    pub role: String,
    /// Partner mode: the user this device answers for; null for the owner's devices.
    pub user: Option<OfferUser>,
    /// Partner mode: how to show the agent to that user (accent colour, icon: an inline data URL, to show as
    /// it is, it fetches nothing); null for the default look, and for a branding that failed the check at
    /// pairing (it is dropped).
    pub branding: Option<Branding>,
}

/// A paired device: one per set of credentials. Thread-safe; share one instance across the app.
///
/// Every network call is a suspending function in Kotlin, `async` in Swift and Python. Errors are
/// `PacerelleError` (`PacerelleException` in Kotlin).
#[derive(Debug, uniffi::Object)]
pub struct DeviceClient {
    pub(crate) inner: pacerelle_client::DeviceClient,
}

#[uniffi::export(async_runtime = "tokio")]
impl DeviceClient {
    /// Pairs with an agent by opening its pairing link (single use). The link's secret never leaves this
    /// process. Store `credentials()` right after, in the Keychain or the Keystore.
    ///
    /// A link that is not a pairing link fails with `InvalidInput`; an expired or already used one with
    /// `Relay` (`pairing_expired`, `pairing_claimed`).
    #[uniffi::constructor]
    pub async fn join(link: String, device_name: String) -> Result<Arc<Self>> {
        let inner = pacerelle_client::DeviceClient::join(&link, &device_name).await?;
        Ok(Arc::new(DeviceClient { inner }))
    }

    /// A device from the credentials `credentials()` returned, in this process or another.
    /// Makes no request: a revoked device learns it at its first call (`NotPaired`).
    #[uniffi::constructor]
    pub fn restore(credentials: String) -> Result<Arc<Self>> {
        let credentials = DeviceCredentials::from_secret_string(&credentials)?;
        let inner = pacerelle_client::DeviceClient::from_credentials(credentials)?;
        Ok(Arc::new(DeviceClient { inner }))
    }

    /// The credentials to store, one opaque string (`pcrdev1_…`). A secret: it holds this device's token,
    /// the key that opens the conversation, the push subscriptions' keys and the seed of this device's
    /// signing key, which signs every answer and exists nowhere else. Keep it in the Keychain or the
    /// Keystore, never in logs; store it again after `registerPush`, `unregisterPush` and
    /// `registerSigningKey`, and after the first answer of a device paired before signing keys (its
    /// `signingFingerprint()` was null before that answer).
    pub fn credentials(&self) -> String {
        self.inner.credentials_to_store().to_secret_string()
    }

    /// The fingerprint of this device's signing key: six groups of four hex digits (`3f2a 91c0 …`), to show
    /// in the app's settings so that a person can compare it with the one an answer-log export shows. Null
    /// for a device paired before signing keys that has not registered one yet.
    pub fn signing_fingerprint(&self) -> Option<String> {
        self.inner.signing_fingerprint()
    }

    /// Registers a signing key for a device paired before signing keys existed: draws one, sends its public
    /// half to the relay in clear and sealed for the agent, keeps it, and returns its fingerprint. `answer`
    /// does this by itself at such a device's first answer. Store `credentials()` right after: the key is
    /// in them only. A device registers one key, ever: credentials that lost theirs fail with `Relay`
    /// (`signing_key_exists`) and the device must pair again.
    pub async fn register_signing_key(&self) -> Result<String> {
        Ok(self.inner.register_signing_key().await?)
    }

    /// Who this device is (nothing secret).
    pub fn identity(&self) -> DeviceIdentity {
        let c = self.inner.credentials();
        DeviceIdentity {
            relay_url: c.relay_url.clone(),
            agent_id: c.agent_id.clone(),
            agent_name: c.agent_name.clone(),
            device_id: c.device_id.clone(),
            role: c.role.as_str().to_string(),
            user: c.user.clone(),
            branding: c.branding.clone(),
        }
    }

    /// Sends a task to the agent, sealed on this device. Idempotent by `message_id`: after an uncertain
    /// failure, send again with the same id (one is drawn when none is given; it is in the result).
    pub async fn send(&self, text: String, message_id: Option<String>) -> Result<SentMessage> {
        Ok(self.inner.send(&text, message_id.as_deref()).await?.into())
    }

    /// Sends a task to one session of the agent (`session`: its name, as `status().sessions` lists them), or
    /// to any when none. As `send` otherwise.
    pub async fn send_to(
        &self,
        text: String,
        message_id: Option<String>,
        session: Option<String>,
    ) -> Result<SentMessage> {
        Ok(self
            .inner
            .send_to(&text, message_id.as_deref(), session.as_deref())
            .await?
            .into())
    }

    /// The conversation after `cursor` (from the start when none), without waiting.
    pub async fn conversation(&self, cursor: Option<String>) -> Result<ConversationPage> {
        Ok(self
            .inner
            .conversation(parse_cursor(cursor)?, Duration::ZERO)
            .await?
            .into())
    }

    /// Waits for what follows `cursor` (from the start when none): returns as soon as something is
    /// there, or with an empty page and the same position when `timeout` passes (capped at 55 seconds).
    pub async fn wait_for_events(
        &self,
        cursor: Option<String>,
        timeout: Duration,
    ) -> Result<ConversationPage> {
        Ok(self
            .inner
            .conversation(parse_cursor(cursor)?, timeout)
            .await?
            .into())
    }

    /// The questions addressed to this device that can still be answered, oldest first.
    pub async fn pending_questions(&self) -> Result<Vec<Question>> {
        self.questions(Some(QuestionState::Pending)).await
    }

    /// The questions addressed to this device, oldest first; only those in `state` when given.
    pub async fn questions(&self, state: Option<QuestionState>) -> Result<Vec<Question>> {
        let list = self.inner.questions(state).await?;
        Ok(list.questions.into_iter().map(Question::from).collect())
    }

    /// Answers a question: signed with this device's signing key and sealed on this device for the agent.
    /// The first valid answer wins; answering again from this device returns the stored answer. A device
    /// paired before signing keys registers one first (see `registerSigningKey`): store `credentials()`
    /// again after its first answer.
    ///
    /// Fails with `QuestionClosed` when it was answered by another device, expired or was cancelled, and
    /// with `InvalidInput` when the answer does not fit the question.
    pub async fn answer(&self, question_id: String, answer: Answer) -> Result<Question> {
        Ok(self.inner.answer(&question_id, answer).await?.into())
    }

    /// Answers `yes` to a gate question and allows the same calls for `seconds` (at most the longest the
    /// question's `grants` offers), within the offered scope at position `scope` (0: the exact call), signed
    /// with this device's signing key. Fails with `InvalidInput` when the question offers no such grant.
    pub async fn answer_granting(&self, question_id: String, scope: u32, seconds: u64) -> Result<Question> {
        let choice = pacerelle_client::device::GrantChoice {
            scope: scope as usize,
            seconds,
        };
        Ok(self.inner.answer_granting(&question_id, choice).await?.into())
    }

    /// The agent's grants, live or ended less than a day ago, newest first, with what each covers and how
    /// many calls it let run. Owner devices only.
    pub async fn grants(&self) -> Result<Vec<GrantInfo>> {
        Ok(self
            .inner
            .grants()
            .await?
            .into_iter()
            .map(GrantInfo::from)
            .collect())
    }

    /// Revokes a grant: the agent's gate asks again for the calls it covered, from its next check.
    /// Idempotent. Owner devices only.
    pub async fn revoke_grant(&self, grant_id: String) -> Result<GrantInfo> {
        Ok(self.inner.revoke_grant(&grant_id).await?.into())
    }

    /// The agent's presence.
    pub async fn status(&self) -> Result<AgentStatus> {
        Ok(self.inner.status().await?.into())
    }

    /// Leaves: revokes this device at the relay. Its credentials stop working (`NotPaired`); delete them.
    pub async fn leave(&self) -> Result<()> {
        self.inner.leave().await?;
        Ok(())
    }

    /// Delivers the conversation after `cursor` (from the start when none) to `listener` as it arrives,
    /// until `stop()` is called or the handle is dropped: keep the handle.
    ///
    /// Long-polls the relay in the background. Errors worth retrying (network, relay busy) are reported to
    /// `on_error` and retried; any other error (such as `NotPaired`) is reported and ends the listening.
    pub fn listen(
        &self,
        cursor: Option<String>,
        listener: Arc<dyn ConversationListener>,
    ) -> Result<Arc<ListenerHandle>> {
        ListenerHandle::start(self.inner.clone(), parse_cursor(cursor)?, listener)
    }
}

/// Parses an opaque cursor given back by the app.
fn parse_cursor(text: Option<String>) -> Result<Option<Cursor>> {
    text.map(|t| Cursor::parse(&t))
        .transpose()
        .map_err(|e| PacerelleError::from(pacerelle_client::Error::from(e)))
}
