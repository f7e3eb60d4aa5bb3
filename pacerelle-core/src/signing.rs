//! Device-signed answers and the answer log anyone can verify (docs/crypto.md §4.8 and §4.9).
//!
//! An answer sealed with a device key proves to the agent that it comes from a holder of that key, but every
//! holder of the agent token derives every device key, so it proves nothing to a third party. Each device
//! therefore draws an Ed25519 key pair when it pairs; the private key never leaves the device. The public key
//! reaches the agent sealed with the device key (the relay cannot substitute it) and the agent pins it in its
//! roster. Every answer then carries a signature over [`SignedAnswer::bytes`], which binds the agent, the device,
//! the question (by the digest of its exact sealed bytes), the answer and the device's time of answering. An
//! [`AnswerLogExport`] gathers, per answer, what a verifier needs ([`verify_export`]): no credential and no key
//! that lets anyone forge an answer (each question's bytes do hold its answer key, which opens that question's
//! display-only answer copies); and, per grant the agent keeps (§4.8b), the signed grant and the calls it let
//! run ([`verify_grant`]).

use ring::signature::{ED25519, UnparsedPublicKey};
use serde::{Deserialize, Serialize};

use crate::envelope::{Aad, Direction};
use crate::grant::{GivenGrant, GrantRefusal, SignedGrantOf};
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

/// `field(x)` of the signed bytes (§4.8): the u32 big-endian length of UTF-8(x), then those bytes.
pub(crate) fn field(out: &mut Vec<u8>, text: &str) {
    out.extend_from_slice(&(text.len() as u32).to_be_bytes());
    out.extend_from_slice(text.as_bytes());
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
    /// For an approved question that needs several approvals (§4.7b): every signed `yes` that counted, one per
    /// device, the record's own among them. Written only then (absent or `null`: none).
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_empty"
    )]
    pub approvals: Vec<ExportApproval>,
}

/// One device's signed `yes` that counted toward a record's approvals.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExportApproval {
    /// The device.
    pub device_id: String,
    /// Its time of answering, as signed.
    pub answered_at: Timestamp,
    /// base64url of its Ed25519 signature of [`SignedAnswer::bytes`] for a `yes`.
    pub signature: String,
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
    /// The grants given with the records' `yes` answers (§4.8b), each with the calls it let run; written only
    /// when there is one (absent or `null`: none), so that an export without grants is what it was before.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_empty"
    )]
    pub grants: Vec<ExportGrant>,
}

/// An optional list: absent or `null` is the empty list.
fn null_as_empty<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    Option::<Vec<T>>::deserialize(d).map(Option::unwrap_or_default)
}

/// A grant of an [`AnswerLogExport`] (docs/crypto.md §4.9, "Grants"): the grant as the agent kept it — its id
/// (the gate question's), the granting device, when it started, the agent's own copy of the question and the
/// signed grant — and every call it let run, by the agent's record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportGrant {
    /// The grant, who gave it to which question, and that question's bytes.
    #[serde(flatten)]
    pub given: GivenGrant,
    /// The calls it let run, oldest first (the agent's record: not signed).
    pub uses: Vec<ExportGrantUse>,
}

/// One call a grant let run, as the agent recorded it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportGrantUse {
    /// When, by the agent's clock.
    pub at: Timestamp,
    /// The tool.
    pub tool: String,
    /// Its shell command, for a shell tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The paths it touched (a tool without a command: each inside the scope's folder).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    /// The project folder the call was made in.
    pub folder: String,
}

/// Why an export does not verify: the first check of docs/crypto.md §4.9 that fails.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyFailure {
    /// The record's position, from 1; 0 for the document as a whole (its shape, its header, its devices) and
    /// for a grant (then `grant` names it).
    pub index: usize,
    /// Its question id, or the grant's (empty for the document as a whole).
    pub question_id: String,
    /// The check of §4.9 that failed: `shape`, `0`, `0a`, `1` to `14` (a record), `g1` to `g11` (a grant) or
    /// `u1` to `u4` (a grant's use).
    pub step: &'static str,
    /// What failed.
    pub reason: &'static str,
    /// The device the failure names, when it names one (step `0a`: the device listed twice).
    pub device_id: Option<String>,
    /// The grant that fails, its position in `grants` from 1 (steps `g1` to `g11`, `u1` to `u4`); `index` is
    /// then 0 and `question_id` the grant's id.
    pub grant: Option<usize>,
    /// The use of that grant that fails, from 1 (steps `u1` to `u4`).
    pub grant_use: Option<usize>,
}

impl VerifyFailure {
    /// A failure of the document as a whole (record 0).
    fn document(step: &'static str, reason: &'static str) -> Self {
        VerifyFailure {
            index: 0,
            question_id: String::new(),
            step,
            reason,
            device_id: None,
            grant: None,
            grant_use: None,
        }
    }

    /// True when nothing was checked: the document is not a version 1 export of the shape of §4.9 (step
    /// `shape` or `0`; `pacerelle audit verify` exits 2). Any other failure was found by checking (exit 1).
    pub fn unchecked(&self) -> bool {
        matches!(self.step, STEP_SHAPE | "0")
    }
}

impl std::fmt::Display for VerifyFailure {
    /// `record 3 (question q_1): the signature does not verify`; `grant 1 (question q_7), use 2: the use is
    /// not covered by the grant's scope (its tool, command or folder)`; for the document as a whole, the
    /// reason alone, followed by the device it names (`the export lists a device twice in devices: dv_a`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(grant) = self.grant {
            write!(f, "grant {grant} (question {})", self.question_id)?;
            if let Some(n) = self.grant_use {
                write!(f, ", use {n}")?;
            }
            f.write_str(": ")?;
        } else if self.index > 0 {
            write!(f, "record {} (question {}): ", self.index, self.question_id)?;
        }
        f.write_str(self.reason)?;
        match &self.device_id {
            Some(device_id) => write!(f, ": {device_id}"),
            None => Ok(()),
        }
    }
}

impl std::error::Error for VerifyFailure {}

/// The step of a document that is not JSON of the export's shape (docs/crypto.md §4.9).
pub const STEP_SHAPE: &str = "shape";
/// The reason given for a document that is not JSON of the export's shape.
pub const NOT_AN_EXPORT: &str = "not an answer-log export: not JSON of the shape of a version 1 export";
/// The reason given for a device listed twice (step `0a`); the failure names the device.
pub const DEVICE_LISTED_TWICE: &str = "the export lists a device twice in devices";

/// JSON text as a value, refusing what docs/crypto.md §5 refuses and serde alone would read: a member name
/// given twice in one object, at any depth, whether a struct knows the member or not (serde refuses only a
/// known member given twice, and keeps no trace of unknown ones). The rest is serde_json's strict reading:
/// RFC 8259 text, UTF-8 without a byte order mark, no lone surrogate escaped in a string, no number
/// beyond an IEEE 754 double.
pub fn strict_json(bytes: &[u8]) -> Option<serde_json::Value> {
    use serde::de::{self, MapAccess, SeqAccess, Visitor};
    use serde_json::Value;

    struct Strict(Value);
    struct StrictVisitor;

    impl<'de> Deserialize<'de> for Strict {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            d.deserialize_any(StrictVisitor).map(Strict)
        }
    }

    impl<'de> Visitor<'de> for StrictVisitor {
        type Value = Value;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("JSON without a member name given twice")
        }
        fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
            Ok(Value::Bool(v))
        }
        fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
            Ok(Value::from(v))
        }
        fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
            Ok(Value::from(v))
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
            serde_json::Number::from_f64(v)
                .map(Value::Number)
                .ok_or_else(|| E::custom("not a finite number"))
        }
        fn visit_str<E>(self, v: &str) -> Result<Value, E> {
            Ok(Value::String(v.to_owned()))
        }
        fn visit_string<E>(self, v: String) -> Result<Value, E> {
            Ok(Value::String(v))
        }
        fn visit_unit<E>(self) -> Result<Value, E> {
            Ok(Value::Null)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
            let mut out = Vec::new();
            while let Some(Strict(v)) = seq.next_element()? {
                out.push(v);
            }
            Ok(Value::Array(out))
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
            let mut out = serde_json::Map::new();
            while let Some(name) = map.next_key::<String>()? {
                if out.contains_key(&name) {
                    return Err(de::Error::custom("a member name given twice"));
                }
                let Strict(v) = map.next_value()?;
                out.insert(name, v);
            }
            Ok(Value::Object(out))
        }
    }

    serde_json::from_slice::<Strict>(bytes).ok().map(|s| s.0)
}

/// Whether `value`'s member `name`, when present and not `null`, is an object: serde alone would also read an
/// array as a struct.
fn object_member(value: &serde_json::Value, name: &str) -> bool {
    value.get(name).is_none_or(|v| v.is_null() || v.is_object())
}

/// Whether `value`'s member `name`, when it is an array, holds only objects.
fn object_items(value: &serde_json::Value, name: &str) -> bool {
    value
        .get(name)
        .and_then(serde_json::Value::as_array)
        .is_none_or(|items| items.iter().all(serde_json::Value::is_object))
}

/// A question payload from its sealed bytes as docs/crypto.md §4.9 step 3 reads them: [`strict_json`], a
/// JSON object whose grant offer, when it has one, is an object of objects (serde alone would also read an
/// array as the struct), then the members of §5 with their types. §5's limits on values (2 to 20 options,
/// non-empty text, 1 to 8 durations…) are the writer's and are not checked.
pub fn read_question(bytes: &[u8]) -> Option<QuestionPayload> {
    strict_json(bytes)
        .filter(serde_json::Value::is_object)
        .filter(|v| {
            object_member(v, "grants") && v.get("grants").is_none_or(|offer| object_items(offer, "scopes"))
        })
        .and_then(|v| serde_json::from_value(v).ok())
}

/// An answer-log export from the bytes of its file, as §4.9 ("Shape") reads them: [`strict_json`]; an
/// object whose `devices`, `records` and `grants` are objects, each record's `answer`, each grant's `grant`
/// and its `scope`, and each use an object (serde alone would also read arrays as those structs); then every
/// member with its type. `None` when the document is not of this shape.
pub fn read_export(bytes: &[u8]) -> Option<AnswerLogExport> {
    use serde_json::Value;
    let value = strict_json(bytes)?;
    let answers = value
        .get("records")
        .and_then(Value::as_array)
        .is_none_or(|records| {
            records
                .iter()
                .all(|r| r.get("answer").is_none_or(Value::is_object))
        });
    let grants = value
        .get("grants")
        .and_then(Value::as_array)
        .is_none_or(|grants| {
            grants.iter().all(|g| {
                object_member(g, "grant")
                    && g.get("grant").is_none_or(|grant| object_member(grant, "scope"))
                    && object_items(g, "uses")
            })
        });
    let objects = ["devices", "records", "grants"]
        .iter()
        .all(|member| object_items(&value, member));
    if !(value.is_object() && objects && answers && grants) {
        return None;
    }
    serde_json::from_value(value).ok()
}

/// Reads an export's bytes ([`read_export`]) and verifies it ([`verify_export`]): what `pacerelle audit
/// verify` and Python's `verify_answer_log` run. A document not of the export's shape fails at step `shape`.
pub fn verify_export_json(bytes: &[u8]) -> Result<usize, VerifyFailure> {
    let export = read_export(bytes).ok_or_else(|| VerifyFailure::document(STEP_SHAPE, NOT_AN_EXPORT))?;
    verify_export(&export)
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

/// Verifies one record against the export's agent and devices (steps 1 to 14 of docs/crypto.md §4.9). The
/// device is the first of `devices` with the record's id: [`verify_export`] first refuses an export that
/// lists one twice (step `0a`).
pub fn verify_record(
    export: &AnswerLogExport,
    index: usize,
    record: &ExportRecord,
) -> Result<(), VerifyFailure> {
    let fail = |step: &'static str, reason: &'static str| VerifyFailure {
        index: index + 1,
        question_id: record.question_id.clone(),
        step,
        reason,
        device_id: None,
        grant: None,
        grant_use: None,
    };
    let bytes =
        crate::b64::decode(&record.question).ok_or_else(|| fail("1", "the question is not base64url"))?;
    if question_digest(&bytes) != record.question_digest {
        return Err(fail("2", "the question's digest does not match its bytes"));
    }
    let question =
        read_question(&bytes).ok_or_else(|| fail("3", "the question's bytes are not a question"))?;
    if !question.recipients.iter().any(|r| r == &record.device_id) {
        return Err(fail(
            "4",
            "the answering device is not one the question was sent to",
        ));
    }
    if record.answered_at >= question.expires_at {
        return Err(fail("5", "the answer is dated after the question's expiry"));
    }
    if !answer_fits(&question, &record.answer) {
        return Err(fail("6", "the answer does not fit the question"));
    }
    if record.approved != matches!(record.answer, Answer::Yes | Answer::Options(_)) {
        return Err(fail("7", "`approved` does not follow from the answer"));
    }
    let device = export
        .devices
        .iter()
        .find(|d| d.device_id == record.device_id)
        .ok_or_else(|| fail("8", "the answering device is not among the export's devices"))?;
    let pinned = device
        .signing_key
        .as_deref()
        .ok_or_else(|| fail("9", "the answering device has no signing key"))?;
    if record.signing_key.as_deref() != Some(pinned) {
        return Err(fail("10", "the record's signing key is not the device's"));
    }
    let key = PublicKey::parse(pinned)
        .ok_or_else(|| fail("11", "the device's signing key is not 32 bytes of base64url"))?;
    if device
        .fingerprint
        .as_deref()
        .is_some_and(|f| f != key.fingerprint())
    {
        return Err(fail("12", "the device's fingerprint is not its key's"));
    }
    let signature = record
        .signature
        .as_deref()
        .ok_or_else(|| fail("13", "the answer is not signed"))?;
    let signed = SignedAnswer {
        agent_id: &export.agent_id,
        device_id: &record.device_id,
        question_id: &record.question_id,
        question_digest: &record.question_digest,
        answered_at: record.answered_at,
        answer: &record.answer,
    };
    if !signed.verifies(&key, signature) {
        return Err(fail("14", "the signature does not verify"));
    }
    verify_approvals(export, record, &question).map_err(|(step, reason)| fail(step, reason))
}

/// Steps `q1` to `q5` of §4.9: a record of a question that needs several approvals (§4.7b) is approved only
/// with that many signed `yes` answers of distinct owner devices, each a recipient of the question, in time,
/// signed with the device's key, the record's own among them; a record of a question that needs one carries
/// none. A `no` (a denial) needs none: its own signature, checked above, is the record.
fn verify_approvals(
    export: &AnswerLogExport,
    record: &ExportRecord,
    question: &QuestionPayload,
) -> Result<(), (&'static str, &'static str)> {
    let needed = question.approvals.max(1) as usize;
    if needed == 1 || !record.approved {
        return match record.approvals.is_empty() {
            true => Ok(()),
            false => Err(("q5", "approvals are listed for a record that needs none")),
        };
    }
    let mut seen = std::collections::HashSet::new();
    if record
        .approvals
        .iter()
        .any(|a| !seen.insert(a.device_id.as_str()))
    {
        return Err(("q2", "a device's approval is listed twice"));
    }
    if record.approvals.len() < needed {
        return Err((
            "q1",
            "the record carries fewer approvals from distinct devices than its question needs",
        ));
    }
    if !record
        .approvals
        .iter()
        .any(|a| a.device_id == record.device_id && a.answered_at == record.answered_at)
    {
        return Err(("q5", "the record's own answer is not among its approvals"));
    }
    for approval in &record.approvals {
        if !question.recipients.iter().any(|r| r == &approval.device_id) {
            return Err(("q3", "an approving device is not one the question was sent to"));
        }
        let device = export
            .devices
            .iter()
            .find(|d| d.device_id == approval.device_id)
            .ok_or(("q3", "an approving device is not among the export's devices"))?;
        let live = device.revoked_at.is_none_or(|at| approval.answered_at < at);
        if device.role != Role::Owner || !live {
            return Err((
                "q3",
                "an approving device is not an owner, or was revoked by then",
            ));
        }
        if approval.answered_at >= question.expires_at {
            return Err(("q3", "an approval is dated after the question's expiry"));
        }
        let key = device
            .signing_key
            .as_deref()
            .and_then(PublicKey::parse)
            .ok_or(("q4", "an approving device has no signing key"))?;
        let signed = SignedAnswer {
            agent_id: &export.agent_id,
            device_id: &approval.device_id,
            question_id: &record.question_id,
            question_digest: &record.question_digest,
            answered_at: approval.answered_at,
            answer: &Answer::Yes,
        };
        if !signed.verifies(&key, &approval.signature) {
            return Err(("q4", "an approval's signature does not verify"));
        }
    }
    Ok(())
}

/// Verifies an export (docs/crypto.md §4.9): its header (step 0), its devices (step `0a`: no `deviceId`
/// twice, so that no entry can stand in front of the one whose fingerprint the person checks), then every
/// record, in order, then every grant and its uses ([`verify_grant`]); the first failure is returned. `Ok(n)`:
/// all `n` records and every grant verify.
pub fn verify_export(export: &AnswerLogExport) -> Result<usize, VerifyFailure> {
    if export.v != 1 || export.format != EXPORT_FORMAT {
        return Err(VerifyFailure::document("0", "not a version 1 answer-log export"));
    }
    let mut seen = std::collections::HashSet::new();
    if let Some(twice) = export.devices.iter().find(|d| !seen.insert(d.device_id.as_str())) {
        return Err(VerifyFailure {
            device_id: Some(twice.device_id.clone()),
            ..VerifyFailure::document("0a", DEVICE_LISTED_TWICE)
        });
    }
    for (index, record) in export.records.iter().enumerate() {
        verify_record(export, index, record)?;
    }
    for (index, grant) in export.grants.iter().enumerate() {
        verify_grant(export, index, grant)?;
    }
    Ok(export.records.len())
}

/// The step of docs/crypto.md §4.9 ("Grants") and the reason of each refusal of [`crate::grant::Grant::check`].
fn grant_step(refusal: GrantRefusal) -> (&'static str, &'static str) {
    match refusal {
        GrantRefusal::NotOffered => ("g7", "the grant's question offered no grant"),
        GrantRefusal::ScopeNotOffered => ("g8", "the grant's scope is not one its question offered"),
        GrantRefusal::OtherPolicy => ("g9", "the grant names another policy than its question's offer"),
        GrantRefusal::TooLong => (
            "g10",
            "the grant lasts longer than its question offered, or ends before it starts",
        ),
        GrantRefusal::NoKey => ("g11", "the granting device has no signing key"),
        GrantRefusal::BadSignature => ("g11", "the grant's signature does not verify"),
    }
}

/// Verifies one grant and its uses against the export's records and devices (steps `g1` to `g11` and `u1` to
/// `u4` of docs/crypto.md §4.9), after every record verified: its question is a record, a `yes` of the same
/// device at the same time, with the same question bytes; that device could approve then; the grant passes
/// the agent's check ([`crate::grant::Grant::check`], what [`GivenGrant::verifies`] runs) with the device's
/// key; each use lies within `[grantedAt, expiresAt)`, inside the scope ([`crate::grant::GrantScope::covers`]),
/// before the device was revoked. `index` is the grant's position, from 0.
pub fn verify_grant(
    export: &AnswerLogExport,
    index: usize,
    grant: &ExportGrant,
) -> Result<(), VerifyFailure> {
    let given = &grant.given;
    let fail = |step: &'static str, reason: &'static str| VerifyFailure {
        index: 0,
        question_id: given.id.clone(),
        step,
        reason,
        device_id: None,
        grant: Some(index + 1),
        grant_use: None,
    };
    let record = export
        .records
        .iter()
        .find(|r| r.question_id == given.id)
        .ok_or_else(|| fail("g1", "the grant's question is not a record of the export"))?;
    if record.device_id != given.device_id {
        return Err(fail(
            "g2",
            "the grant's device is not the device that answered its question",
        ));
    }
    if record.answer != Answer::Yes {
        return Err(fail("g3", "the grant's question was not answered yes"));
    }
    if given.granted_at != record.answered_at {
        return Err(fail(
            "g4",
            "the grant does not start when its question was answered (grantedAt is not the record's answeredAt)",
        ));
    }
    let question = crate::b64::decode(&given.question)
        .filter(|bytes| question_digest(bytes) == record.question_digest)
        .and_then(|bytes| read_question(&bytes))
        .ok_or_else(|| fail("g5", "the grant's question is not its record's question bytes"))?;
    // The record verified: its device is listed, with a key.
    let device = export
        .devices
        .iter()
        .find(|d| d.device_id == given.device_id)
        .ok_or_else(|| fail("g6", "the granting device is not among the export's devices"))?;
    let live = |at: Timestamp| device.revoked_at.is_none_or(|revoked| at < revoked);
    if device.role != Role::Owner || !live(given.granted_at) {
        return Err(fail(
            "g6",
            "the granting device could not approve then: it is not an owner, or was revoked by then",
        ));
    }
    let key = device.signing_key.as_deref().and_then(PublicKey::parse);
    let of = SignedGrantOf {
        agent_id: &export.agent_id,
        device_id: &given.device_id,
        question_id: &given.id,
        question_digest: &record.question_digest,
        granted_at: given.granted_at,
    };
    given
        .grant
        .check(question.grants.as_ref(), of, key.as_ref())
        .map_err(|refusal| {
            let (step, reason) = grant_step(refusal);
            fail(step, reason)
        })?;
    for (n, used) in grant.uses.iter().enumerate() {
        let fail = |step: &'static str, reason: &'static str| VerifyFailure {
            grant_use: Some(n + 1),
            ..fail(step, reason)
        };
        if used.at < given.granted_at {
            return Err(fail("u1", "the use is dated before the grant was given"));
        }
        if !given.grant.live_at(used.at) {
            return Err(fail("u2", "the use is dated at or after the grant's expiry"));
        }
        let command = used.command.as_deref();
        if !given
            .grant
            .scope
            .covers(&used.tool, command, &used.paths, &used.folder)
        {
            return Err(fail(
                "u3",
                "the use is not covered by the grant's scope (its tool, command or folder)",
            ));
        }
        if !live(used.at) {
            return Err(fail(
                "u4",
                "the use is dated after the granting device was revoked",
            ));
        }
    }
    Ok(())
}

#[cfg(all(test, feature = "content"))]
mod tests {
    use super::*;

    fn question(recipients: &[&str]) -> QuestionPayload {
        QuestionPayload {
            grants: None,
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
            approvals: 1,
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
                approvals: Vec::new(),
            }],
            grants: Vec::new(),
        }
    }

    /// `export(key)` with a second record: a gate question offering grants (`cargo test`, exactly or as a
    /// prefix, in `/work/app`, for 15 min or 1 h), answered yes by `dv_a`, and the prefix grant `dv_a` gave
    /// with it for 15 min, used twice.
    fn export_with_grant(key: &SigningKey) -> AnswerLogExport {
        use crate::grant::{CommandMatch, Grant, GrantOffer};
        let mut e = export(key);
        let mut q = question(&["dv_a"]);
        q.question = "Bash: cargo test".into();
        q.grants = Some(GrantOffer {
            durations: vec![900, 3600],
            scopes: vec![scope(CommandMatch::Exact), scope(CommandMatch::Prefix)],
            policy: "POLICY".into(),
        });
        let bytes = serde_json::to_vec(&q).expect("json");
        let digest = question_digest(&bytes);
        let answered_at = Timestamp(1_500_000);
        let mut record = ExportRecord {
            question_id: "q_gate".into(),
            question: crate::b64::encode(&bytes),
            question_digest: digest.clone(),
            device_id: "dv_a".into(),
            answer: Answer::Yes,
            answered_at,
            approved: true,
            signature: None,
            signing_key: None,
            approvals: Vec::new(),
        };
        sign(&mut record, key);
        e.records.push(record);
        let mut grant = Grant {
            scope: scope(CommandMatch::Prefix),
            expires_at: answered_at.plus_millis(900_000),
            policy: "POLICY".into(),
            signature: String::new(),
        };
        let of = SignedGrantOf {
            agent_id: "ag_1",
            device_id: "dv_a",
            question_id: "q_gate",
            question_digest: &digest,
            granted_at: answered_at,
        };
        grant.signature = grant.signed(of).sign(key);
        let used = |after: i64, command: &str| ExportGrantUse {
            at: answered_at.plus_millis(after),
            tool: "Bash".into(),
            command: Some(command.into()),
            folder: "/work/app".into(),
            paths: Vec::new(),
        };
        e.grants.push(ExportGrant {
            given: GivenGrant {
                id: "q_gate".into(),
                device_id: "dv_a".into(),
                granted_at: answered_at,
                question: crate::b64::encode(&bytes),
                grant,
            },
            uses: vec![used(60_000, "cargo test"), used(600_000, "cargo test -p core")],
        });
        e
    }

    fn scope(matching: crate::grant::CommandMatch) -> crate::grant::GrantScope {
        crate::grant::GrantScope {
            tool: "Bash".into(),
            command: Some("cargo test".into()),
            matching: Some(matching),
            folder: "/work/app".into(),
        }
    }

    /// Signs `record` again with `key`, as it now is.
    fn sign(record: &mut ExportRecord, key: &SigningKey) {
        let signed = SignedAnswer {
            agent_id: "ag_1",
            device_id: &record.device_id,
            question_id: &record.question_id,
            question_digest: &record.question_digest,
            answered_at: record.answered_at,
            answer: &record.answer,
        };
        record.signature = Some(signed.sign(key));
        record.signing_key = Some(key.public_key().to_b64());
    }

    /// Signs the grant of `e` again with `key`, as it now is.
    fn sign_grant(e: &mut AnswerLogExport, key: &SigningKey) {
        let given = &mut e.grants[0].given;
        let digest = question_digest(&crate::b64::decode(&given.question).expect("bytes"));
        let of = SignedGrantOf {
            agent_id: "ag_1",
            device_id: &given.device_id,
            question_id: &given.id,
            question_digest: &digest,
            granted_at: given.granted_at,
        };
        given.grant.signature = given.grant.signed(of).sign(key);
    }

    #[test]
    fn an_export_without_grants_is_written_as_before_and_null_grants_are_none() {
        let key = SigningKey::generate().expect("key");
        let plain = export(&key);
        let text = serde_json::to_string(&plain).expect("json");
        assert!(!text.contains("grants"), "{text}");
        let mut value = serde_json::to_value(&plain).expect("json");
        value["grants"] = serde_json::Value::Null;
        assert_eq!(
            verify_export_json(&serde_json::to_vec(&value).expect("json")),
            Ok(1)
        );
        value["grants"] = serde_json::json!([]);
        assert_eq!(
            verify_export_json(&serde_json::to_vec(&value).expect("json")),
            Ok(1)
        );
        let with = export_with_grant(&key);
        let text = serde_json::to_string(&with).expect("json");
        assert!(
            text.contains(r#""grants":[{"id":"q_gate","deviceId":"dv_a","grantedAt""#),
            "{text}"
        );
        assert_eq!(read_export(text.as_bytes()), Some(with));
    }

    #[test]
    fn a_grant_verifies_with_its_uses_and_each_changed_field_fails_naming_it() {
        use crate::grant::CommandMatch;
        let key = SigningKey::generate().expect("key");
        let good = export_with_grant(&key);
        assert_eq!(verify_export(&good), Ok(2));
        let bytes = serde_json::to_vec(&good).expect("json");
        assert_eq!(verify_export_json(&bytes), Ok(2));

        type Change = Box<dyn Fn(&mut AnswerLogExport)>;
        let key2 = key.clone();
        let changes: Vec<(&str, Option<usize>, &str, Change)> = vec![
            (
                "scope: another tool",
                None,
                "g8",
                Box::new(|e| e.grants[0].given.grant.scope.tool = "shell".into()),
            ),
            (
                "scope: a shorter command",
                None,
                "g8",
                Box::new(|e| {
                    e.grants[0].given.grant.scope.command = Some("cargo".into());
                }),
            ),
            (
                "scope: another folder",
                None,
                "g8",
                Box::new(|e| e.grants[0].given.grant.scope.folder = "/work".into()),
            ),
            // Offered, but not what the device signed.
            (
                "scope: prefix made exact",
                None,
                "g11",
                Box::new(|e| {
                    e.grants[0].given.grant.scope.matching = Some(CommandMatch::Exact);
                }),
            ),
            (
                "expiry: extended within the offer",
                None,
                "g11",
                Box::new(|e| {
                    let g = &mut e.grants[0].given;
                    g.grant.expires_at = g.granted_at.plus_millis(3_600_000);
                }),
            ),
            (
                "expiry: beyond the offer",
                None,
                "g10",
                Box::new(|e| {
                    let g = &mut e.grants[0].given;
                    g.grant.expires_at = g.granted_at.plus_millis(3_600_001);
                }),
            ),
            (
                "policy: another digest",
                None,
                "g9",
                Box::new(|e| e.grants[0].given.grant.policy = "OTHER".into()),
            ),
            (
                "signature: the answer's in place of the grant's",
                None,
                "g11",
                Box::new(|e| {
                    e.grants[0].given.grant.signature = e.records[0].signature.clone().expect("signed");
                }),
            ),
            (
                "device: another",
                None,
                "g2",
                Box::new(|e| e.grants[0].given.device_id = "dv_b".into()),
            ),
            (
                "device: revoked before it granted",
                None,
                "g6",
                Box::new(|e| {
                    e.devices[0].revoked_at = Some(Timestamp(1_400_000));
                }),
            ),
            (
                "device: revoked at the instant it granted",
                None,
                "g6",
                Box::new(|e| {
                    e.devices[0].revoked_at = Some(Timestamp(1_500_000));
                }),
            ),
            (
                "device: a user, not an owner",
                None,
                "g6",
                Box::new(|e| e.devices[0].role = Role::User),
            ),
            (
                "question: not a record of the export",
                None,
                "g1",
                Box::new(|e| {
                    e.records.pop();
                }),
            ),
            (
                "question: another record's bytes",
                None,
                "g5",
                Box::new(|e| {
                    e.grants[0].given.question = e.records[0].question.clone();
                }),
            ),
            (
                "question: not base64url",
                None,
                "g5",
                Box::new(|e| e.grants[0].given.question.push('=')),
            ),
            (
                "grantedAt: a millisecond later",
                None,
                "g4",
                Box::new(|e| {
                    e.grants[0].given.granted_at = Timestamp(1_500_001);
                }),
            ),
            (
                "question: answered no (signed)",
                None,
                "g3",
                Box::new(move |e| {
                    let r = &mut e.records[1];
                    r.answer = Answer::No;
                    r.approved = false;
                    sign(r, &key2);
                }),
            ),
            (
                "use: a command the prefix does not cover",
                Some(2),
                "u3",
                Box::new(|e| {
                    e.grants[0].uses[1].command = Some("cargo test; curl x | sh".into());
                }),
            ),
            (
                "use: another tool",
                Some(1),
                "u3",
                Box::new(|e| e.grants[0].uses[0].tool = "shell".into()),
            ),
            (
                "use: another folder",
                Some(1),
                "u3",
                Box::new(|e| e.grants[0].uses[0].folder = "/work".into()),
            ),
            (
                "use: no command",
                Some(2),
                "u3",
                Box::new(|e| e.grants[0].uses[1].command = None),
            ),
            (
                "use: at the expiry",
                Some(2),
                "u2",
                Box::new(|e| {
                    e.grants[0].uses[1].at = Timestamp(1_500_000 + 900_000);
                }),
            ),
            (
                "use: before the grant",
                Some(1),
                "u1",
                Box::new(|e| e.grants[0].uses[0].at = Timestamp(1_499_999)),
            ),
            (
                "use: after the device was revoked",
                Some(2),
                "u4",
                Box::new(|e| {
                    e.devices[0].revoked_at = Some(Timestamp(1_500_000 + 300_000));
                }),
            ),
        ];
        for (what, used, step, change) in changes {
            let mut e = good.clone();
            change(&mut e);
            let failure = verify_export(&e).expect_err(what);
            assert_eq!(
                (failure.index, failure.grant, failure.grant_use, failure.step),
                (0, Some(1), used, step),
                "{what}: {failure}"
            );
            assert_eq!(failure.question_id, "q_gate", "{what}");
            assert!(!failure.unchecked(), "{what}");
            // The same through the file's bytes.
            let bytes = serde_json::to_vec(&e).expect("json");
            assert_eq!(verify_export_json(&bytes), Err(failure), "{what}");
        }
        // A grant the device signed again for a wider scope than offered is still refused; signed again for
        // what was offered, it verifies.
        let mut e = good.clone();
        e.grants[0].given.grant.scope.command = Some("cargo".into());
        sign_grant(&mut e, &key);
        assert_eq!(verify_export(&e).map_err(|f| f.step), Err("g8"));
        let mut e = good.clone();
        e.grants[0].given.grant.scope.matching = Some(CommandMatch::Exact);
        e.grants[0].uses[1].command = Some("cargo test".into());
        sign_grant(&mut e, &key);
        assert_eq!(verify_export(&e), Ok(2));

        let mut e = good.clone();
        e.grants[0].uses[1].tool = "Edit".into();
        let failure = verify_export(&e).expect_err("another tool");
        assert_eq!(
            failure.to_string(),
            "grant 1 (question q_gate), use 2: the use is not covered by the grant's scope (its tool, command or \
             folder)"
        );
        let mut e = good.clone();
        e.grants[0].given.grant.policy = "OTHER".into();
        assert_eq!(
            verify_export(&e).expect_err("policy").to_string(),
            "grant 1 (question q_gate): the grant names another policy than its question's offer"
        );
    }

    #[test]
    fn a_grant_whose_offer_was_not_offered_or_is_not_of_the_shape_is_refused() {
        let key = SigningKey::generate().expect("key");
        // The record's question offers nothing: its bytes without `grants`, signed by the device.
        let mut e = export_with_grant(&key);
        let mut q: QuestionPayload =
            read_question(&crate::b64::decode(&e.records[1].question).expect("bytes")).expect("question");
        q.grants = None;
        let bytes = serde_json::to_vec(&q).expect("json");
        e.records[1].question = crate::b64::encode(&bytes);
        e.records[1].question_digest = question_digest(&bytes);
        sign(&mut e.records[1], &key);
        e.grants[0].given.question = e.records[1].question.clone();
        sign_grant(&mut e, &key);
        assert_eq!(verify_export(&e).map_err(|f| f.step), Err("g7"));

        // Arrays in place of objects, which serde alone would read as the structs: not of the shape.
        let good = serde_json::to_value(export_with_grant(&key)).expect("json");
        let text = |v: &serde_json::Value| serde_json::to_vec(v).expect("json");
        assert_eq!(verify_export_json(&text(&good)), Ok(2));
        let mut changes: Vec<(&str, serde_json::Value)> = Vec::new();
        let mut e = good.clone();
        e["grants"][0]["grant"]["scope"] = serde_json::json!(["Bash", "cargo test", "prefix", "/work/app"]);
        changes.push(("a scope as an array", e));
        let mut e = good.clone();
        let use_ = e["grants"][0]["uses"][0].clone();
        e["grants"][0]["uses"][0] = serde_json::json!([use_["at"], "Bash", "cargo test", "/work/app"]);
        changes.push(("a use as an array", e));
        let mut e = good.clone();
        e["grants"][0]["uses"] = serde_json::Value::Null;
        changes.push(("uses null", e));
        let mut e = good.clone();
        e["grants"][0]["grant"]["scope"]["match"] = serde_json::json!("glob");
        changes.push(("an unknown match", e));
        let mut e = good.clone();
        e["grants"] = serde_json::json!({"q_gate": {}});
        changes.push(("grants an object", e));
        for (what, changed) in changes {
            let failure = verify_export_json(&text(&changed)).expect_err(what);
            assert_eq!((failure.index, failure.step), (0, STEP_SHAPE), "{what}");
        }
        // A question whose offer is an array: not a question.
        let q = br#"{"question":"q","kind":"yes_no","expiresAt":"1970-01-01T00:33:20.000Z","grants":[[900],[],"P"]}"#;
        assert_eq!(read_question(q), None);
        let q = br#"{"question":"q","kind":"yes_no","expiresAt":"1970-01-01T00:33:20.000Z","grants":{"durations":[900],"scopes":[["Bash",null,null,"/w"]],"policy":"P"}}"#;
        assert_eq!(read_question(q), None);
        let q = br#"{"question":"q","kind":"yes_no","expiresAt":"1970-01-01T00:33:20.000Z","grants":null}"#;
        assert!(read_question(q).is_some_and(|q| q.grants.is_none()));
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
            assert!(!failure.unchecked(), "{what}");
        }
    }

    /// The forgery of an export that once verified: every record signed again with a key of one's own (a no
    /// turned into a yes), and that key listed for the device *before* its genuine entry, which keeps the
    /// fingerprint the phone shows. A verifier that takes the first entry with the device's id accepts it.
    #[test]
    fn a_device_listed_twice_is_refused_naming_it_whatever_the_records_say() {
        let key = SigningKey::generate().expect("key");
        let mut forged = export(&key);
        forged.records[0].answer = Answer::No;
        forged.records[0].approved = false;
        assert!(verify_export(&forged).is_err(), "the no is not signed yet");
        let own = SigningKey::generate().expect("key");
        let record = &mut forged.records[0];
        record.answer = Answer::Yes;
        record.approved = true;
        record.signature = Some(
            SignedAnswer {
                agent_id: &forged.agent_id,
                device_id: &record.device_id,
                question_id: &record.question_id,
                question_digest: &record.question_digest,
                answered_at: record.answered_at,
                answer: &record.answer,
            }
            .sign(&own),
        );
        record.signing_key = Some(own.public_key().to_b64());
        let genuine = forged.devices[0].clone();
        forged.devices.insert(
            0,
            ExportDevice {
                signing_key: Some(own.public_key().to_b64()),
                fingerprint: Some(own.public_key().fingerprint()),
                ..genuine.clone()
            },
        );
        assert_eq!(forged.devices[1], genuine, "the genuine entry is kept, second");
        let failure = verify_export(&forged).expect_err("a device listed twice");
        assert_eq!(
            (failure.index, failure.step, failure.reason),
            (0, "0a", DEVICE_LISTED_TWICE)
        );
        assert_eq!(failure.device_id.as_deref(), Some("dv_a"));
        assert!(!failure.unchecked(), "found by checking: exit status 1");
        assert_eq!(
            failure.to_string(),
            "the export lists a device twice in devices: dv_a"
        );
        let bytes = serde_json::to_vec(&forged).expect("json");
        assert_eq!(verify_export_json(&bytes), Err(failure));
        // Without the duplicate, the forged key is the only one listed, and its fingerprint is not the phone's:
        // that is what the person compares (§4.9).
        forged.devices.remove(1);
        assert_eq!(verify_export(&forged), Ok(1));
    }

    #[test]
    fn a_member_name_given_twice_is_refused_at_any_depth_known_or_not() {
        assert!(strict_json(br#"{"a":{"b":[{"c":1}]},"d":null}"#).is_some());
        for text in [
            r#"{"a":1,"a":1}"#,
            r#"{"a":{"b":1,"b":2}}"#,
            r#"{"a":[{"b":1,"b":2}]}"#,
            r#"{"a":"\ud800"}"#,
            r#"{"a":1e400}"#,
            "\u{feff}{}",
            r#"{"a":NaN}"#,
        ] {
            assert_eq!(strict_json(text.as_bytes()), None, "{text}");
        }
        // serde_json's depth limit: 127 nested arrays and objects are read, 128 are not.
        let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(strict_json(nested(127).as_bytes()).is_some());
        assert_eq!(strict_json(nested(128).as_bytes()), None);
        let q = question(&["dv_a"]);
        let bytes = serde_json::to_vec(&q).expect("json");
        assert_eq!(read_question(&bytes), Some(q.clone()));
        let text = String::from_utf8(bytes).expect("utf-8");
        let twice = text.replacen('{', r#"{"question":"Drop the database?","#, 1);
        assert!(
            serde_json::from_str::<QuestionPayload>(&twice).is_err(),
            "serde refuses a known member twice"
        );
        let unknown = text.replacen('{', r#"{"note":{"k":1,"k":2},"#, 1);
        assert!(
            serde_json::from_str::<QuestionPayload>(&unknown).is_ok(),
            "serde alone keeps no trace of an unknown member twice"
        );
        assert_eq!(read_question(unknown.as_bytes()), None);
        let array = r#"["Deploy?","yes_no",[],false,null,"1970-01-01T00:33:20.000Z",["dv_a"]]"#;
        assert!(
            serde_json::from_str::<QuestionPayload>(array).is_ok(),
            "serde alone reads an array as the struct"
        );
        assert_eq!(read_question(array.as_bytes()), None);
    }

    #[test]
    fn an_export_not_of_the_shape_is_refused_as_a_whole() {
        let key = SigningKey::generate().expect("key");
        let good = serde_json::to_value(export(&key)).expect("json");
        let text = |v: &serde_json::Value| serde_json::to_vec(v).expect("json");
        assert_eq!(verify_export_json(&text(&good)), Ok(1));
        let mut changes: Vec<(&str, serde_json::Value)> = Vec::new();
        let mut e = good.clone();
        e["v"] = serde_json::json!(1.0);
        changes.push(("v 1.0", e));
        let mut e = good.clone();
        e["records"][0]["answer"] = serde_json::json!({"type": "yes", "value": true});
        changes.push(("a yes with a value", e));
        let mut e = good.clone();
        e["records"][0]["answer"] = serde_json::json!(["yes"]);
        changes.push(("an answer as an array", e));
        let mut e = good.clone();
        e["records"][0]["answeredAt"] = serde_json::json!("1970-01-01T00:16:40 000Z");
        changes.push(("a time that is not RFC 3339", e));
        let mut e = good.clone();
        e["devices"][0]["role"] = serde_json::json!("admin");
        changes.push(("an unknown role", e));
        let mut e = good.clone();
        e["records"][0]["approved"] = serde_json::json!(null);
        changes.push(("a required member null", e));
        for (what, changed) in changes {
            let failure = verify_export_json(&text(&changed)).expect_err(what);
            assert_eq!((failure.index, failure.step), (0, STEP_SHAPE), "{what}");
            assert!(failure.unchecked(), "{what}");
        }
        // Optional members: null is absent. A yes's value: null is absent too.
        let mut e = good.clone();
        e["devices"][0]["name"] = serde_json::Value::Null;
        e["records"][0]["answer"] = serde_json::json!({"type": "yes", "value": null});
        assert_eq!(verify_export_json(&text(&e)), Ok(1));
        let mut e = good.clone();
        e["v"] = serde_json::json!(2);
        let failure = verify_export_json(&text(&e)).expect_err("v 2");
        assert_eq!(failure.step, "0");
        assert!(failure.unchecked());
        let twice = String::from_utf8(text(&good)).expect("utf-8").replacen(
            r#""approved":true"#,
            r#""approved":false,"approved":true"#,
            1,
        );
        let failure = verify_export_json(twice.as_bytes()).expect_err("a member twice");
        assert_eq!(failure.step, STEP_SHAPE);
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
