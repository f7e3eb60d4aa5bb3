//! Device-signed answers and the answer log anyone can verify (docs/crypto.md §4.8 and §4.9).
//!
//! An answer sealed with a device key proves to the agent that it comes from a holder of that key, but every
//! holder of the agent token derives every device key, so it proves nothing to a third party. Each device
//! therefore draws an Ed25519 key pair when it pairs; the private key never leaves the device. The public key
//! reaches the agent sealed with the device key (the relay cannot substitute it) and the agent pins it in its
//! roster. Every answer then carries a signature over [`SignedAnswer::bytes`], which binds the agent, the device,
//! the question (by the digest of its exact sealed bytes), the answer and the device's time of answering. An
//! [`AnswerLogExport`] gathers, per answer, what a verifier needs ([`verify_export`]), with nothing secret.

use ring::signature::{ED25519, UnparsedPublicKey};
use serde::{Deserialize, Serialize};

use crate::envelope::{Aad, Direction};
use crate::pairing::Role;
use crate::question::{Answer, QuestionKind, QuestionPayload, question_digest};
use crate::time::Timestamp;

/// Object kind of a sealed signing key in the additional data.
pub const KIND_SIGNING_KEY: &str = "signing_key";
/// The first bytes of every signed answer: who signs what, and for which version.
pub const ANSWER_CONTEXT: &[u8] = b"pacerelle/v1/answer-signature";
/// Length of an Ed25519 public key, a seed and a signature.
pub const PUBLIC_KEY_LEN: usize = 32;
/// Length of an Ed25519 signature.
pub const SIGNATURE_LEN: usize = 64;
/// The `format` member of an [`AnswerLogExport`].
pub const EXPORT_FORMAT: &str = "pacerelle-answer-log";

/// A device's Ed25519 public key, base64url on the wire (32 bytes, 43 characters).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PublicKey([u8; PUBLIC_KEY_LEN]);

impl PublicKey {
    /// Wraps raw key bytes.
    pub fn from_bytes(bytes: [u8; PUBLIC_KEY_LEN]) -> Self {
        PublicKey(bytes)
    }

    /// Parses base64url text of exactly 32 bytes.
    pub fn parse(text: &str) -> Option<Self> {
        crate::b64::decode_array::<PUBLIC_KEY_LEN>(text).map(PublicKey)
    }

    /// The raw bytes.
    pub fn as_bytes(&self) -> &[u8; PUBLIC_KEY_LEN] {
        &self.0
    }

    /// base64url of the key.
    pub fn to_b64(&self) -> String {
        crate::b64::encode(&self.0)
    }

    /// What a person compares between the phone and an export: the first 12 bytes of SHA-256 of the key, in
    /// lower-case hex, in six groups of four (`3f2a 91c0 …`).
    pub fn fingerprint(&self) -> String {
        fingerprint(&self.0)
    }

    /// Whether `signature` (base64url, 64 bytes) is this key's Ed25519 signature of `message`.
    pub fn verifies(&self, message: &[u8], signature: &str) -> bool {
        let Some(sig) = crate::b64::decode_array::<SIGNATURE_LEN>(signature) else {
            return false;
        };
        UnparsedPublicKey::new(&ED25519, &self.0)
            .verify(message, &sig)
            .is_ok()
    }
}

impl std::fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PublicKey({})", self.to_b64())
    }
}

/// The fingerprint of a public key's bytes ([`PublicKey::fingerprint`]).
fn fingerprint(key: &[u8]) -> String {
    let digest = crate::keys::sha256(key);
    digest[..12]
        .chunks(2)
        .map(|pair| format!("{:02x}{:02x}", pair[0], pair[1]))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A device's Ed25519 signing key: the 32-byte seed (RFC 8032 private key). Its `Debug` never shows it.
#[cfg(feature = "content")]
pub struct SigningKey {
    seed: [u8; 32],
    pair: ring::signature::Ed25519KeyPair,
}

#[cfg(feature = "content")]
impl SigningKey {
    /// Draws a new key from the system's secure random generator.
    pub fn generate() -> crate::Result<Self> {
        use ring::rand::SecureRandom;
        let mut seed = [0u8; 32];
        ring::rand::SystemRandom::new()
            .fill(&mut seed)
            .map_err(|_| crate::CryptoError::Random)?;
        Self::from_seed(seed)
    }

    /// The key of a seed kept by the device (or a test vector).
    pub fn from_seed(seed: [u8; 32]) -> crate::Result<Self> {
        let pair = ring::signature::Ed25519KeyPair::from_seed_unchecked(&seed)
            .map_err(|_| crate::CryptoError::Malformed)?;
        Ok(SigningKey { seed, pair })
    }

    /// The seed, to be kept by the device only (its credentials, 0600 file, Keystore/Keychain).
    pub fn seed(&self) -> [u8; 32] {
        self.seed
    }

    /// The public half.
    pub fn public_key(&self) -> PublicKey {
        use ring::signature::KeyPair;
        let mut out = [0u8; PUBLIC_KEY_LEN];
        out.copy_from_slice(self.pair.public_key().as_ref());
        PublicKey(out)
    }

    /// Signs `message`; base64url of the 64-byte signature. Ed25519 is deterministic: the same key and
    /// message always give the same signature.
    pub fn sign(&self, message: &[u8]) -> String {
        crate::b64::encode(self.pair.sign(message).as_ref())
    }
}

#[cfg(feature = "content")]
impl Clone for SigningKey {
    fn clone(&self) -> Self {
        #[allow(clippy::expect_used)] // the seed was accepted once, it is accepted again
        Self::from_seed(self.seed).expect("a seed accepted once")
    }
}

#[cfg(feature = "content")]
impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SigningKey(public {})", self.public_key().to_b64())
    }
}

/// What a device signs when it answers (docs/crypto.md §4.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignedAnswer<'a> {
    /// The agent asking.
    pub agent_id: &'a str,
    /// The answering device.
    pub device_id: &'a str,
    /// The question answered.
    pub question_id: &'a str,
    /// [`question_digest`] of the question's sealed bytes as the device opened and displayed them.
    pub question_digest: &'a str,
    /// The device's time of answering, as sealed in the answer.
    pub answered_at: Timestamp,
    /// The answer.
    pub answer: &'a Answer,
}

impl SignedAnswer<'_> {
    /// The signed bytes:
    /// `"pacerelle/v1/answer-signature" ‖ 0x01 ‖ field(agentId) ‖ field(deviceId) ‖ field(questionId) ‖
    /// field(questionDigest) ‖ field(answeredAt) ‖ field(answerType) ‖ u32(n) ‖ field(value₁) … field(valueₙ)`,
    /// where `field(x)` is the u32 big-endian length of UTF-8(x) then those bytes, `answeredAt` is written as
    /// on the wire (`YYYY-MM-DDTHH:MM:SS.mmmZ`), `answerType` is `yes`, `no`, `options` or `text`, and the
    /// values are none (yes, no), the chosen options in order, or the text.
    pub fn bytes(&self) -> Vec<u8> {
        fn field(out: &mut Vec<u8>, text: &str) {
            out.extend_from_slice(&(text.len() as u32).to_be_bytes());
            out.extend_from_slice(text.as_bytes());
        }
        let mut out = Vec::with_capacity(256);
        out.extend_from_slice(ANSWER_CONTEXT);
        out.push(1);
        field(&mut out, self.agent_id);
        field(&mut out, self.device_id);
        field(&mut out, self.question_id);
        field(&mut out, self.question_digest);
        field(&mut out, &self.answered_at.to_rfc3339());
        let (kind, values): (&str, Vec<&str>) = match self.answer {
            Answer::Yes => ("yes", vec![]),
            Answer::No => ("no", vec![]),
            Answer::Options(chosen) => ("options", chosen.iter().map(String::as_str).collect()),
            Answer::Text(text) => ("text", vec![text.as_str()]),
        };
        field(&mut out, kind);
        out.extend_from_slice(&(values.len() as u32).to_be_bytes());
        for value in values {
            field(&mut out, value);
        }
        out
    }

    /// Signs these bytes with the device's key.
    #[cfg(feature = "content")]
    pub fn sign(&self, key: &SigningKey) -> String {
        key.sign(&self.bytes())
    }

    /// Whether `signature` is `key`'s signature of these bytes.
    pub fn verifies(&self, key: &PublicKey, signature: &str) -> bool {
        key.verifies(&self.bytes(), signature)
    }
}

/// A device's signing key as it seals it for its agent at pairing (or later, once, for a device paired
/// before keys existed): `{"v":1,"agentId","deviceId","signingKey"}` sealed with the device key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SigningKeyPayload {
    /// Always 1.
    pub v: u8,
    /// The agent.
    pub agent_id: String,
    /// The device whose key this is.
    pub device_id: String,
    /// base64url of the Ed25519 public key.
    pub signing_key: String,
}

/// The context of a device's sealed signing key: `(agentId, deviceId, "d2a", "signing_key", deviceId)`.
pub fn signing_key_aad<'a>(agent_id: &'a str, device_id: &'a str) -> Aad<'a> {
    Aad {
        agent_id,
        device_id,
        direction: Direction::DeviceToAgent,
        kind: KIND_SIGNING_KEY,
        object_id: device_id,
    }
}

/// Seals a device's public key for its agent with the device key.
#[cfg(feature = "content")]
pub fn seal_signing_key(
    device_key: &crate::ContentKey,
    agent_id: &str,
    device_id: &str,
    public: &PublicKey,
) -> String {
    let payload = SigningKeyPayload {
        v: 1,
        agent_id: agent_id.to_string(),
        device_id: device_id.to_string(),
        signing_key: public.to_b64(),
    };
    crate::envelope::seal_json(device_key, &signing_key_aad(agent_id, device_id), &payload)
}

/// Why the agent refuses a device's signing key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SigningKeyError {
    /// The sealed key did not open with the device key, or its payload is not a signing key of this agent
    /// and device.
    #[error(
        "the device's sealed signing key did not open with its device key, or names another agent or device"
    )]
    Invalid,
    /// The key the relay lists in clear differs from the sealed one: the relay substituted it.
    #[error("the signing key the relay lists for the device differs from the one the device sealed")]
    Substituted,
}

/// Opens a device's sealed signing key on the agent side and checks it against the copy the relay lists in
/// clear (`clear`, when the relay lists one): a relay that substitutes either is detected.
#[cfg(feature = "content")]
pub fn open_signing_key(
    device_key: &crate::ContentKey,
    agent_id: &str,
    device_id: &str,
    sealed: &str,
    clear: Option<&str>,
) -> Result<PublicKey, SigningKeyError> {
    let payload: SigningKeyPayload =
        crate::envelope::open_json(device_key, &signing_key_aad(agent_id, device_id), sealed)
            .map_err(|_| SigningKeyError::Invalid)?;
    if payload.v != 1 || payload.agent_id != agent_id || payload.device_id != device_id {
        return Err(SigningKeyError::Invalid);
    }
    let key = PublicKey::parse(&payload.signing_key).ok_or(SigningKeyError::Invalid)?;
    match clear {
        Some(clear) if clear != payload.signing_key => Err(SigningKeyError::Substituted),
        _ => Ok(key),
    }
}

/// One device of an [`AnswerLogExport`]: the agent's roster entry and the relay's pairing record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportDevice {
    /// Its id.
    pub device_id: String,
    /// The name it gave when it paired (the relay's record; not signed).
    #[serde(default)]
    pub name: Option<String>,
    /// Its role in the roster.
    pub role: Role,
    /// When the agent added it to its roster (the pairing offer was made).
    pub added_at: Timestamp,
    /// When it claimed the offer (the relay's record).
    #[serde(default)]
    pub paired_at: Option<Timestamp>,
    /// When the agent revoked it, if it did.
    #[serde(default)]
    pub revoked_at: Option<Timestamp>,
    /// base64url of its Ed25519 public key as pinned in the roster; absent for a device that never sent one.
    #[serde(default)]
    pub signing_key: Option<String>,
    /// [`PublicKey::fingerprint`] of that key, to compare with the one the device shows.
    #[serde(default)]
    pub fingerprint: Option<String>,
}

/// One answer of an [`AnswerLogExport`], with everything its signature covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportRecord {
    /// The question answered.
    pub question_id: String,
    /// base64url of the question's sealed bytes exactly as the agent sealed them (the digest's input; a JSON
    /// [`QuestionPayload`]: text, kind, options, details, expiry, recipients).
    pub question: String,
    /// [`question_digest`] of those bytes.
    pub question_digest: String,
    /// The answering device.
    pub device_id: String,
    /// The answer.
    pub answer: Answer,
    /// The device's time of answering, as signed.
    pub answered_at: Timestamp,
    /// True for a yes or chosen options; checked against `answer`.
    pub approved: bool,
    /// base64url of the device's Ed25519 signature of [`SignedAnswer::bytes`]; absent for an unsigned
    /// answer (a device paired before signing keys), which never verifies.
    #[serde(default)]
    pub signature: Option<String>,
    /// The key the agent verified it with (the device's pinned key).
    #[serde(default)]
    pub signing_key: Option<String>,
}

/// `pacerelle audit export`: the answer log in a form anyone can verify without the relay or the agent's
/// keys (docs/crypto.md §4.9).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AnswerLogExport {
    /// Always 1.
    pub v: u8,
    /// Always [`EXPORT_FORMAT`].
    pub format: String,
    /// The agent whose log this is.
    pub agent_id: String,
    /// When the export was made (not signed).
    pub exported_at: Timestamp,
    /// Every device of the roster.
    pub devices: Vec<ExportDevice>,
    /// Every answer, oldest first.
    pub records: Vec<ExportRecord>,
}

/// Why a record of an export does not verify.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("record {index} (question {question_id}): {reason}")]
pub struct VerifyFailure {
    /// The record's position, from 1.
    pub index: usize,
    /// Its question id.
    pub question_id: String,
    /// What failed.
    pub reason: &'static str,
}

/// Whether an answer fits its question: `yes` or `no` for `yes_no`; for `choice`, a non-empty list of
/// distinct options of the question, exactly one unless `multiple`; a text for `text`.
pub fn answer_fits(question: &QuestionPayload, answer: &Answer) -> bool {
    match (answer, question.kind) {
        (Answer::Yes | Answer::No, QuestionKind::YesNo) => true,
        (Answer::Options(chosen), QuestionKind::Choice) => {
            let distinct: std::collections::HashSet<&String> = chosen.iter().collect();
            !chosen.is_empty()
                && distinct.len() == chosen.len()
                && (question.multiple || chosen.len() == 1)
                && chosen.iter().all(|c| question.options.contains(c))
        }
        (Answer::Text(_), QuestionKind::Text) => true,
        _ => false,
    }
}

/// Verifies one record against the export's agent and devices.
pub fn verify_record(
    export: &AnswerLogExport,
    index: usize,
    record: &ExportRecord,
) -> Result<(), VerifyFailure> {
    let fail = |reason: &'static str| VerifyFailure {
        index: index + 1,
        question_id: record.question_id.clone(),
        reason,
    };
    let bytes = crate::b64::decode(&record.question).ok_or_else(|| fail("the question is not base64url"))?;
    if question_digest(&bytes) != record.question_digest {
        return Err(fail("the question's digest does not match its bytes"));
    }
    let question: QuestionPayload =
        serde_json::from_slice(&bytes).map_err(|_| fail("the question's bytes are not a question"))?;
    if !question.recipients.iter().any(|r| r == &record.device_id) {
        return Err(fail("the answering device is not one the question was sent to"));
    }
    if record.answered_at >= question.expires_at {
        return Err(fail("the answer is dated after the question's expiry"));
    }
    if !answer_fits(&question, &record.answer) {
        return Err(fail("the answer does not fit the question"));
    }
    if record.approved != matches!(record.answer, Answer::Yes | Answer::Options(_)) {
        return Err(fail("`approved` does not follow from the answer"));
    }
    let device = export
        .devices
        .iter()
        .find(|d| d.device_id == record.device_id)
        .ok_or_else(|| fail("the answering device is not among the export's devices"))?;
    let pinned = device
        .signing_key
        .as_deref()
        .ok_or_else(|| fail("the answering device has no signing key"))?;
    if record.signing_key.as_deref() != Some(pinned) {
        return Err(fail("the record's signing key is not the device's"));
    }
    let key = PublicKey::parse(pinned)
        .ok_or_else(|| fail("the device's signing key is not 32 bytes of base64url"))?;
    if device
        .fingerprint
        .as_deref()
        .is_some_and(|f| f != key.fingerprint())
    {
        return Err(fail("the device's fingerprint is not its key's"));
    }
    let signature = record
        .signature
        .as_deref()
        .ok_or_else(|| fail("the answer is not signed"))?;
    let signed = SignedAnswer {
        agent_id: &export.agent_id,
        device_id: &record.device_id,
        question_id: &record.question_id,
        question_digest: &record.question_digest,
        answered_at: record.answered_at,
        answer: &record.answer,
    };
    if !signed.verifies(&key, signature) {
        return Err(fail("the signature does not verify"));
    }
    Ok(())
}

/// Verifies every record of an export, in order; the first failure is returned. `Ok(n)`: all `n` verify.
pub fn verify_export(export: &AnswerLogExport) -> Result<usize, VerifyFailure> {
    let header = |reason| VerifyFailure {
        index: 0,
        question_id: String::new(),
        reason,
    };
    if export.v != 1 || export.format != EXPORT_FORMAT {
        return Err(header("not a version 1 answer-log export"));
    }
    for (index, record) in export.records.iter().enumerate() {
        verify_record(export, index, record)?;
    }
    Ok(export.records.len())
}

#[cfg(all(test, feature = "content"))]
mod tests {
    use super::*;

    fn question(recipients: &[&str]) -> QuestionPayload {
        QuestionPayload {
            question: "Deploy v2 to production?".into(),
            kind: QuestionKind::YesNo,
            options: vec![],
            multiple: false,
            details: None,
            expires_at: Timestamp(2_000_000),
            recipients: recipients.iter().map(|r| r.to_string()).collect(),
            answer_key: None,
            channels: Vec::new(),
            user: None,
        }
    }

    fn export(key: &SigningKey) -> AnswerLogExport {
        let bytes = serde_json::to_vec(&question(&["dv_a"])).expect("json");
        let digest = question_digest(&bytes);
        let answer = Answer::Yes;
        let signed = SignedAnswer {
            agent_id: "ag_1",
            device_id: "dv_a",
            question_id: "q_1",
            question_digest: &digest,
            answered_at: Timestamp(1_000_000),
            answer: &answer,
        };
        AnswerLogExport {
            v: 1,
            format: EXPORT_FORMAT.into(),
            agent_id: "ag_1".into(),
            exported_at: Timestamp(3_000_000),
            devices: vec![ExportDevice {
                device_id: "dv_a".into(),
                name: Some("Ana's phone".into()),
                role: Role::Owner,
                added_at: Timestamp(1),
                paired_at: Some(Timestamp(2)),
                revoked_at: None,
                signing_key: Some(key.public_key().to_b64()),
                fingerprint: Some(key.public_key().fingerprint()),
            }],
            records: vec![ExportRecord {
                question_id: "q_1".into(),
                question: crate::b64::encode(&bytes),
                question_digest: digest.clone(),
                device_id: "dv_a".into(),
                answer: Answer::Yes,
                answered_at: Timestamp(1_000_000),
                approved: true,
                signature: Some(signed.sign(key)),
                signing_key: Some(key.public_key().to_b64()),
            }],
        }
    }

    #[test]
    fn a_signed_export_verifies_and_any_changed_field_does_not() {
        let key = SigningKey::generate().expect("key");
        let good = export(&key);
        assert_eq!(verify_export(&good), Ok(1));

        let mut changes: Vec<(&str, AnswerLogExport)> = Vec::new();
        let mut e = good.clone();
        e.records[0].answer = Answer::No;
        e.records[0].approved = false;
        changes.push(("answer", e));
        let mut e = good.clone();
        e.records[0].answered_at = Timestamp(1_000_001);
        changes.push(("time", e));
        let mut e = good.clone();
        let mut q = question(&["dv_a"]);
        q.question = "Drop the database?".into();
        let bytes = serde_json::to_vec(&q).expect("json");
        e.records[0].question = crate::b64::encode(&bytes);
        e.records[0].question_digest = question_digest(&bytes);
        changes.push(("question text", e));
        let mut e = good.clone();
        e.records[0].question_id = "q_2".into();
        changes.push(("question id", e));
        let mut e = good.clone();
        e.agent_id = "ag_2".into();
        changes.push(("agent", e));
        let mut e = good.clone();
        let other = SigningKey::generate().expect("key");
        e.devices[0].signing_key = Some(other.public_key().to_b64());
        e.devices[0].fingerprint = Some(other.public_key().fingerprint());
        e.records[0].signing_key = Some(other.public_key().to_b64());
        changes.push(("device key", e));
        let mut e = good.clone();
        e.records[0].approved = false;
        changes.push(("approved", e));
        let mut e = good.clone();
        e.records[0].signature = None;
        changes.push(("signature removed", e));
        for (what, changed) in changes {
            let failure = verify_export(&changed).expect_err(what);
            assert_eq!(failure.index, 1, "{what}");
        }
    }

    #[test]
    fn a_sealed_signing_key_opens_for_its_device_only_and_a_substituted_clear_copy_is_refused() {
        let device_key = crate::keys::device_key(&[9; 32], "ag_1", "dv_a");
        let signing = SigningKey::generate().expect("key");
        let public = signing.public_key();
        let sealed = seal_signing_key(&device_key, "ag_1", "dv_a", &public);
        assert_eq!(
            open_signing_key(&device_key, "ag_1", "dv_a", &sealed, Some(&public.to_b64())),
            Ok(public)
        );
        assert_eq!(
            open_signing_key(&device_key, "ag_1", "dv_a", &sealed, None),
            Ok(public)
        );
        let other = SigningKey::generate().expect("key").public_key().to_b64();
        assert_eq!(
            open_signing_key(&device_key, "ag_1", "dv_a", &sealed, Some(&other)),
            Err(SigningKeyError::Substituted)
        );
        let other_device = crate::keys::device_key(&[9; 32], "ag_1", "dv_b");
        assert_eq!(
            open_signing_key(&other_device, "ag_1", "dv_b", &sealed, None),
            Err(SigningKeyError::Invalid)
        );
    }

    #[test]
    fn a_seed_gives_the_same_key_and_deterministic_signatures() {
        let a = SigningKey::from_seed([3; 32]).expect("key");
        let b = SigningKey::from_seed([3; 32]).expect("key");
        assert_eq!(a.public_key(), b.public_key());
        assert_eq!(a.sign(b"x"), b.sign(b"x"));
        assert!(a.public_key().verifies(b"x", &a.sign(b"x")));
        assert!(!a.public_key().verifies(b"y", &a.sign(b"x")));
        assert!(!a.public_key().verifies(b"x", "not base64url!"));
        assert_eq!(a.public_key().fingerprint().len(), 29);
        assert!(!format!("{a:?}").contains(&crate::b64::encode(&[3; 32])));
    }
}
