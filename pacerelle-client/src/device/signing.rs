//! The device's signing key: held, registered, and used to sign its answers.

use std::sync::Arc;

use pacerelle_core::b64;
use pacerelle_core::signing::{PublicKey, SigningKey, seal_signing_key};
use pacerelle_core::wire::{self, DeviceInfo, RegisterSigningKey};
use reqwest::Method;

use crate::error::{Error, Result};
use crate::http::Req;

use super::DeviceClient;

impl DeviceClient {
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
            // `signing_key_exists`, the one conflict of this request.
            Err(e) if e.kind() == crate::ErrorKind::IdConflict => {
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
    pub(super) async fn key_for_answer(&self) -> Result<Option<Arc<SigningKey>>> {
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
}
