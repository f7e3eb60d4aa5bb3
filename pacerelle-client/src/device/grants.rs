//! Grants on the device: given with a yes, listed, revoked.

use pacerelle_core::grant::Grant;
use pacerelle_core::keys::ContentKey;
use pacerelle_core::question::Answer;
use pacerelle_core::wire::{DeviceGrants, GrantRecord};
use pacerelle_core::{Timestamp, b64, ids};
use reqwest::Method;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

use super::{DeviceClient, OpenedQuestion};

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
pub(super) fn grant_for(q: &OpenedQuestion, choice: GrantChoice, answered_at: Timestamp) -> Result<Grant> {
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

impl DeviceClient {
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

    /// Answers `yes` to a gate question and grants the same for the calls of one offered scope, for a while
    /// (docs/crypto.md §4.8b): the grant is signed with this device's key and sealed in the answer; the agent
    /// checks it against the question it asked. Fails with `invalid_input` when the question offers no grant,
    /// the choice is not among its offer, or this device has no signing key (an unsigned grant never counts).
    pub async fn answer_granting(&self, question_id: &str, choice: GrantChoice) -> Result<OpenedQuestion> {
        self.answer_with(question_id, Answer::Yes, Some(choice)).await
    }
}
