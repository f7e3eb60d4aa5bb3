//! Known-answer vectors (`tests/vectors/*.json`, specified in `docs/crypto.md`).
//!
//! Every file is checked in both directions: the library derives and seals exactly the recorded outputs,
//! and opens or parses the recorded outputs back into the inputs. A few checks use an independent
//! construction (HKDF written on HMAC, the additional data written by hand, AES-GCM called directly) so
//! that a mistake shared by the library and the generator would still show. The primitives themselves are
//! checked against RFC 5869 test case 1 and the GCM specification's test cases 14 and 16.

use pacerelle_core::Timestamp;
use pacerelle_core::checkpoint::CheckpointPayload;
use pacerelle_core::envelope::{self, Aad, Direction};
use pacerelle_core::keys::{self, ContentKey};
use pacerelle_core::message::{ReplyPayload, TaskPayload};
use pacerelle_core::pairing::{self, OfferPayload, PairingSecret};
use pacerelle_core::question::{
    self, AnswerPayload, NotificationPayload, OwnQuestion, QuestionPayload, QuestionState, RelayReport,
};
use pacerelle_core::roster::{self, DeviceSigning, Roster, RosterError};
use pacerelle_core::{AgentToken, Bearer, CryptoError, Cursor};
use ring::aead::{AES_256_GCM, Aad as RingAad, LessSafeKey, Nonce, UnboundKey};
use ring::hmac;
use serde::Deserialize;

// ------------------------------------------------------------------------------------------- helpers

#[derive(Deserialize)]
struct File<T> {
    description: String,
    cases: Vec<T>,
}

fn load<T: serde::de::DeserializeOwned>(name: &str) -> File<T> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/vectors")
        .join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let file: File<T> = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(!file.description.is_empty(), "{name}.json has a description");
    assert!(!file.cases.is_empty(), "{name}.json has cases");
    file
}

fn b64(text: &str) -> Vec<u8> {
    pacerelle_core::b64::decode(text).unwrap_or_else(|| panic!("not base64url: {text:?}"))
}

fn b64_32(text: &str) -> [u8; 32] {
    b64(text).try_into().expect("32 bytes")
}

fn hex(text: &str) -> Vec<u8> {
    assert_eq!(text.len() % 2, 0);
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
        .collect()
}

fn sha256(bytes: &[u8]) -> Vec<u8> {
    ring::digest::digest(&ring::digest::SHA256, bytes)
        .as_ref()
        .to_vec()
}

/// HKDF-SHA256 written from RFC 5869 on HMAC, independent of `keys::hkdf32`.
fn reference_hkdf(ikm: &[u8], salt: &[u8], info: &[u8], len: usize) -> (Vec<u8>, Vec<u8>) {
    let prk = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, salt), ikm);
    let prk_key = hmac::Key::new(hmac::HMAC_SHA256, prk.as_ref());
    let mut okm = Vec::new();
    let mut block: Vec<u8> = Vec::new();
    let mut counter = 1u8;
    while okm.len() < len {
        let mut input = block.clone();
        input.extend_from_slice(info);
        input.push(counter);
        block = hmac::sign(&prk_key, &input).as_ref().to_vec();
        okm.extend_from_slice(&block);
        counter += 1;
    }
    okm.truncate(len);
    (prk.as_ref().to_vec(), okm)
}

/// The additional data written by hand from `docs/crypto.md`, independent of `Aad::to_bytes`.
fn reference_aad(fields: &AadFields) -> Vec<u8> {
    let mut out = b"pacerelle/v1/aad".to_vec();
    assert_eq!(out.len(), 16);
    out.push(0x01);
    for field in [
        &fields.agent_id,
        &fields.device_id,
        &fields.direction,
        &fields.kind,
        &fields.object_id,
    ] {
        let len = u16::try_from(field.len()).expect("short field");
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(field.as_bytes());
    }
    out
}

/// AES-256-GCM called directly: `ciphertext ‖ tag`.
fn gcm_seal(key: &[u8], nonce: &[u8], aad: &[u8], plaintext: &[u8]) -> Vec<u8> {
    let key = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, key).expect("32-byte key"));
    let nonce = Nonce::try_assume_unique_for_key(nonce).expect("12-byte nonce");
    let mut body = plaintext.to_vec();
    key.seal_in_place_append_tag(nonce, RingAad::from(aad), &mut body)
        .expect("seals");
    body
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AadFields {
    agent_id: String,
    device_id: String,
    direction: String,
    kind: String,
    object_id: String,
}

impl AadFields {
    fn aad(&self) -> Aad<'_> {
        let direction = match self.direction.as_str() {
            "d2a" => Direction::DeviceToAgent,
            "a2d" => Direction::AgentToDevice,
            "self" => Direction::AgentToSelf,
            "offer" => Direction::Offer,
            other => panic!("unknown direction {other:?}"),
        };
        assert_eq!(direction.as_str(), self.direction);
        Aad {
            agent_id: &self.agent_id,
            device_id: &self.device_id,
            direction,
            kind: &self.kind,
            object_id: &self.object_id,
        }
    }
}

// --------------------------------------------------------------------------------- the primitives

#[test]
fn hkdf_matches_rfc5869_test_case_1() {
    let ikm = [0x0bu8; 22];
    let salt = hex("000102030405060708090a0b0c");
    let info = hex("f0f1f2f3f4f5f6f7f8f9");
    let (prk, okm) = reference_hkdf(&ikm, &salt, &info, 42);
    assert_eq!(
        prk,
        hex("077709362c2e32df0ddc3f0dc47bba6390b6c73bb50f9c3122ec844ad7c2b3e5")
    );
    let expected =
        hex("3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865");
    assert_eq!(okm, expected);
    assert_eq!(keys::hkdf32(&ikm, &salt, &info).as_slice(), &expected[..32]);
}

#[test]
fn aes_256_gcm_matches_the_gcm_specification() {
    // McGrew & Viega, "The Galois/Counter Mode of Operation (GCM)", test case 14: zero key, zero IV,
    // one zero block, no additional data.
    assert_eq!(
        gcm_seal(&[0; 32], &[0; 12], &[], &[0; 16]),
        hex("cea7403d4d606b6e074ec5d3baf39d18d0d1c8a799996bf0265b98b5d48ab919")
    );
    // Test case 16: 256-bit key, 96-bit IV, 60-byte plaintext, 20 bytes of additional data.
    let key = hex("feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308");
    let iv = hex("cafebabefacedbaddecaf888");
    let plaintext = hex("d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72\
         1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39");
    let aad = hex("feedfacedeadbeeffeedfacedeadbeefabaddad2");
    let ciphertext = hex("522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa\
         8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662");
    let tag = hex("76fc6ece0f4e1768cddf8853bb2d551b");
    let mut expected = ciphertext;
    expected.extend_from_slice(&tag);
    assert_eq!(gcm_seal(&key, &iv, &aad, &plaintext), expected);
}

// --------------------------------------------------------------------------------------------- token

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "camelCase", deny_unknown_fields)]
enum TokenCase {
    #[serde(rename_all = "camelCase")]
    AgentToken {
        name: String,
        auth: String,
        master: String,
        agent_id: String,
        checksum: String,
        token: String,
        bearer: String,
        auth_hash: String,
    },
    #[serde(rename_all = "camelCase")]
    DeviceBearer {
        name: String,
        device_id: String,
        secret: String,
        bearer: String,
        secret_hash: String,
    },
    #[serde(rename_all = "camelCase")]
    InvalidToken { name: String, token: String },
    #[serde(rename_all = "camelCase")]
    InvalidBearer { name: String, bearer: String },
}

#[test]
fn token_vectors() {
    for case in load::<TokenCase>("token").cases {
        match case {
            TokenCase::AgentToken {
                name,
                auth,
                master,
                agent_id,
                checksum,
                token,
                bearer,
                auth_hash,
            } => {
                let (auth, master) = (b64_32(&auth), b64_32(&master));
                // Independent checksum and layout.
                let mut input = b"pacerelle/v1/token".to_vec();
                input.extend_from_slice(&auth);
                input.extend_from_slice(&master);
                assert_eq!(b64(&checksum), sha256(&input)[..4], "{name}: checksum");
                let body = b64(token.strip_prefix("pcr1_").expect("prefix"));
                assert_eq!(body.len(), 68, "{name}");
                assert_eq!(body[..32], auth, "{name}");
                assert_eq!(body[32..64], master, "{name}");
                assert_eq!(body[64..], b64(&checksum), "{name}");
                // Library, both directions.
                let t = AgentToken::from_secrets(auth, master);
                assert_eq!(t.expose(), token, "{name}: token");
                assert_eq!(AgentToken::parse(&token).expect("parses"), t, "{name}");
                assert_eq!(t.bearer(&agent_id).expose(), bearer, "{name}: bearer");
                assert_eq!(
                    bearer,
                    format!("{agent_id}.{}", pacerelle_core::b64::encode(&auth))
                );
                assert_eq!(t.auth_hash().as_slice(), b64(&auth_hash), "{name}: authHash");
                assert_eq!(sha256(&auth), b64(&auth_hash), "{name}: authHash");
                let credential = Bearer(bearer.clone());
                let split = credential.split().expect("bearer splits");
                assert_eq!(split, (agent_id.as_str(), b64_32(&auth_hash)), "{name}");
            }
            TokenCase::DeviceBearer {
                name,
                device_id,
                secret,
                bearer,
                secret_hash,
            } => {
                assert_eq!(bearer, format!("{device_id}.{secret}"), "{name}");
                assert_eq!(sha256(&b64(&secret)), b64(&secret_hash), "{name}");
                let credential = Bearer(bearer);
                let split = credential.split().expect("bearer splits");
                assert_eq!(split, (device_id.as_str(), b64_32(&secret_hash)), "{name}");
            }
            TokenCase::InvalidToken { name, token } => {
                assert!(
                    AgentToken::parse(&token).is_err(),
                    "{name}: {token:?} must be refused"
                );
                if name.contains("standard base64 alphabet") {
                    // Refused for its alphabet alone: the prefix is right, the body uses `+` or `/`, and the
                    // same body in the base64url alphabet is a valid token.
                    let body = token.strip_prefix("pcr1_").expect("{name}: the prefix is right");
                    assert!(body.contains(['+', '/']), "{name}: standard alphabet");
                    let url = format!("pcr1_{}", body.replace('+', "-").replace('/', "_"));
                    assert!(
                        AgentToken::parse(&url).is_ok(),
                        "{name}: only the alphabet is wrong"
                    );
                }
            }
            TokenCase::InvalidBearer { name, bearer } => {
                assert!(
                    Bearer(bearer.clone()).split().is_none(),
                    "{name}: {bearer:?} must be refused"
                );
            }
        }
    }
}

// ----------------------------------------------------------------------------------------------- kdf

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "camelCase", deny_unknown_fields)]
enum KdfCase {
    #[serde(rename_all = "camelCase")]
    Hkdf {
        name: String,
        ikm: String,
        salt: String,
        info: String,
        okm: String,
    },
    #[serde(rename_all = "camelCase")]
    ContentKeys {
        name: String,
        master: String,
        agent_id: String,
        device_id: String,
        device_info: String,
        device_key: String,
        self_key: String,
    },
}

#[test]
fn kdf_vectors() {
    for case in load::<KdfCase>("kdf").cases {
        match case {
            KdfCase::Hkdf {
                name,
                ikm,
                salt,
                info,
                okm,
            } => {
                let (ikm, salt, info) = (b64(&ikm), b64(&salt), b64(&info));
                assert_eq!(keys::hkdf32(&ikm, &salt, &info).as_slice(), b64(&okm), "{name}");
                assert_eq!(reference_hkdf(&ikm, &salt, &info, 32).1, b64(&okm), "{name}");
            }
            KdfCase::ContentKeys {
                name,
                master,
                agent_id,
                device_id,
                device_info,
                device_key,
                self_key,
            } => {
                let master = b64_32(&master);
                assert_eq!(device_info, format!("pacerelle/v1/device/{device_id}"), "{name}");
                let device = keys::device_key(&master, &agent_id, &device_id);
                let own = keys::self_key(&master, &agent_id);
                assert_eq!(device.to_bytes(), b64_32(&device_key), "{name}: deviceKey");
                assert_eq!(own.to_bytes(), b64_32(&self_key), "{name}: selfKey");
                let reference = reference_hkdf(&master, agent_id.as_bytes(), device_info.as_bytes(), 32).1;
                assert_eq!(reference, b64(&device_key), "{name}: deviceKey (reference HKDF)");
                let reference = reference_hkdf(&master, agent_id.as_bytes(), b"pacerelle/v1/self", 32).1;
                assert_eq!(reference, b64(&self_key), "{name}: selfKey (reference HKDF)");
                // Through a token holding this master secret.
                let token = AgentToken::from_secrets([0; 32], master);
                assert_eq!(token.device_key(&agent_id, &device_id), device, "{name}");
                assert_eq!(token.self_key(&agent_id), own, "{name}");
            }
        }
    }
}

// ------------------------------------------------------------------------------------------- pairing

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SealedOffer {
    offer_json: String,
    aad_fields: AadFields,
    aad: String,
    nonce: String,
    sealed_offer: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct WrongContext {
    agent_id: String,
    device_id: String,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "camelCase", deny_unknown_fields)]
enum PairingCase {
    #[serde(rename_all = "camelCase")]
    Pairing {
        name: String,
        secret: String,
        relay_url: String,
        pairing_id: String,
        pairing_key: String,
        claim_secret: String,
        claim_hash: String,
        link: String,
        offer: Box<SealedOffer>,
        must_not_open_with: Vec<WrongContext>,
    },
    #[serde(rename_all = "camelCase")]
    InvalidLink { name: String, link: String },
}

fn is_rfc3339_millis_utc(text: &str) -> bool {
    let b = text.as_bytes();
    b.len() == 24
        && b.iter().enumerate().all(|(i, &c)| match i {
            4 | 7 => c == b'-',
            10 => c == b'T',
            13 | 16 => c == b':',
            19 => c == b'.',
            23 => c == b'Z',
            _ => c.is_ascii_digit(),
        })
}

#[test]
fn pairing_vectors() {
    for case in load::<PairingCase>("pairing").cases {
        match case {
            PairingCase::Pairing {
                name,
                secret,
                relay_url,
                pairing_id,
                pairing_key,
                claim_secret,
                claim_hash,
                link,
                offer,
                must_not_open_with,
            } => {
                let raw = b64_32(&secret);
                let s = PairingSecret(raw);
                let salt = pairing::SALT.as_bytes();
                assert_eq!(pairing::SALT, "pacerelle/v1/pairing");
                // Derivations, library and reference.
                assert_eq!(s.pairing_id(), pairing_id, "{name}: pairingId");
                assert_eq!(b64(&pairing_id).len(), 16, "{name}");
                assert_eq!(
                    reference_hkdf(&raw, salt, b"id", 32).1[..16],
                    b64(&pairing_id),
                    "{name}"
                );
                assert_eq!(
                    s.pairing_key().to_bytes(),
                    b64_32(&pairing_key),
                    "{name}: pairingKey"
                );
                assert_eq!(
                    reference_hkdf(&raw, salt, b"key", 32).1,
                    b64(&pairing_key),
                    "{name}"
                );
                assert_eq!(s.claim_secret(), b64_32(&claim_secret), "{name}: claimSecret");
                assert_eq!(
                    reference_hkdf(&raw, salt, b"claim", 32).1,
                    b64(&claim_secret),
                    "{name}"
                );
                assert_eq!(s.claim_hash(), b64_32(&claim_hash), "{name}: claimHash");
                assert_eq!(sha256(&b64(&claim_secret)), b64(&claim_hash), "{name}");
                // The link, both directions.
                assert_eq!(s.link(&relay_url), link, "{name}: link");
                let (relay, parsed) = PairingSecret::parse_link(&link).expect("link parses");
                assert_eq!(relay, relay_url.trim_end_matches('/'), "{name}");
                assert_eq!(parsed, s, "{name}");
                assert!(link.ends_with(&format!("/pair#v1.{secret}")), "{name}");

                // The offer payload: parses, and serialises back to the same text.
                let payload: OfferPayload = serde_json::from_str(&offer.offer_json).expect("offer parses");
                assert_eq!(
                    serde_json::to_string(&payload).expect("serialises"),
                    offer.offer_json
                );
                assert_eq!(payload.v, 1, "{name}");
                let value: serde_json::Value = serde_json::from_str(&offer.offer_json).expect("json");
                let expires_at = value["expiresAt"].as_str().expect("expiresAt is a string");
                assert!(is_rfc3339_millis_utc(expires_at), "{name}: {expires_at}");
                assert!(matches!(value["role"].as_str(), Some("owner" | "user")), "{name}");
                payload.key().expect("deviceKey is 32 bytes of base64url");
                // Its additional data.
                let f = &offer.aad_fields;
                assert_eq!(
                    (f.direction.as_str(), f.kind.as_str()),
                    ("offer", "offer"),
                    "{name}"
                );
                assert_eq!(f.agent_id, payload.agent_id, "{name}");
                assert_eq!(f.device_id, payload.device_id, "{name}");
                assert_eq!(f.object_id, pairing_id, "{name}");
                assert_eq!(
                    f.aad().to_bytes().expect("short fields"),
                    b64(&offer.aad),
                    "{name}: aad"
                );
                assert_eq!(reference_aad(f), b64(&offer.aad), "{name}: aad (reference)");
                // Sealing with the recorded nonce gives the recorded offer; opening gives the payload.
                let nonce: [u8; 12] = b64(&offer.nonce).try_into().expect("12-byte nonce");
                let sealed =
                    envelope::seal_with_nonce(&s.pairing_key(), &f.aad(), nonce, offer.offer_json.as_bytes());
                assert_eq!(sealed, offer.sealed_offer, "{name}: sealedOffer");
                let opened = pairing::open_offer(&s, &f.agent_id, &f.device_id, &offer.sealed_offer)
                    .expect("offer opens");
                assert_eq!(opened, payload, "{name}");
                for wrong in must_not_open_with {
                    assert!(
                        pairing::open_offer(&s, &wrong.agent_id, &wrong.device_id, &offer.sealed_offer)
                            .is_err(),
                        "{name}: must not open as ({}, {})",
                        wrong.agent_id,
                        wrong.device_id
                    );
                }
                // Nor with another pairing secret.
                let mut other = raw;
                other[0] ^= 1;
                assert!(
                    pairing::open_offer(
                        &PairingSecret(other),
                        &f.agent_id,
                        &f.device_id,
                        &offer.sealed_offer
                    )
                    .is_err(),
                    "{name}"
                );
            }
            PairingCase::InvalidLink { name, link } => {
                assert!(
                    PairingSecret::parse_link(&link).is_err(),
                    "{name}: {link:?} must be refused"
                );
            }
        }
    }
}

// ------------------------------------------------------------------------------------------ envelope

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "camelCase", deny_unknown_fields)]
enum EnvelopeCase {
    #[serde(rename_all = "camelCase")]
    Seal {
        name: String,
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
        name: String,
        key: String,
        aad_fields: AadFields,
        aad: String,
        envelope: String,
        error: String,
    },
}

/// JSON plaintexts parse as the payload type of their kind and serialise back to the same text.
fn check_payload(kind: &str, plaintext: &str) {
    fn round_trip<T: serde::Serialize + serde::de::DeserializeOwned>(plaintext: &str) {
        let value: T = serde_json::from_str(plaintext).expect("payload parses");
        assert_eq!(serde_json::to_string(&value).expect("serialises"), plaintext);
    }
    // The envelope layer takes any bytes; only JSON plaintexts are payloads.
    if !plaintext.starts_with('{') {
        return;
    }
    match kind {
        "message" => round_trip::<TaskPayload>(plaintext),
        "reply" => round_trip::<ReplyPayload>(plaintext),
        "checkpoint" => round_trip::<CheckpointPayload>(plaintext),
        "question" => round_trip::<QuestionPayload>(plaintext),
        "answer" | "answer_copy" => round_trip::<AnswerPayload>(plaintext),
        "notification" => round_trip::<NotificationPayload>(plaintext),
        other => panic!("no payload type for kind {other:?}"),
    }
}

#[test]
fn envelope_vectors() {
    let mut seen_non_ascii = false;
    for case in load::<EnvelopeCase>("envelope").cases {
        match case {
            EnvelopeCase::Seal {
                name,
                key,
                aad_fields,
                aad,
                nonce,
                plaintext,
                plaintext_bytes,
                envelope: expected,
            } => {
                seen_non_ascii |= !plaintext.is_ascii();
                let k = ContentKey::from_bytes(b64_32(&key));
                let context = aad_fields.aad();
                let nonce: [u8; 12] = b64(&nonce).try_into().expect("12-byte nonce");
                assert_eq!(
                    plaintext.as_bytes(),
                    b64(&plaintext_bytes),
                    "{name}: plaintextBytes"
                );
                assert_eq!(
                    context.to_bytes().expect("short fields"),
                    b64(&aad),
                    "{name}: aad"
                );
                assert_eq!(reference_aad(&aad_fields), b64(&aad), "{name}: aad (reference)");
                // Seal: library, and the layout rebuilt from AES-GCM called directly.
                let sealed = envelope::seal_with_nonce(&k, &context, nonce, plaintext.as_bytes());
                assert_eq!(sealed, expected, "{name}: envelope");
                let bytes = b64(&expected);
                assert_eq!(bytes.len(), 1 + 12 + plaintext.len() + 16, "{name}");
                let mut rebuilt = vec![0x01];
                rebuilt.extend_from_slice(&nonce);
                rebuilt.extend(gcm_seal(&b64(&key), &nonce, &b64(&aad), plaintext.as_bytes()));
                assert_eq!(rebuilt, bytes, "{name}: layout");
                // Open.
                let opened = envelope::open(&k, &context, &expected).expect("envelope opens");
                assert_eq!(opened, plaintext.as_bytes(), "{name}: open");
                check_payload(&aad_fields.kind, &plaintext);
            }
            EnvelopeCase::Reject {
                name,
                key,
                aad_fields,
                aad,
                envelope: sealed,
                error,
            } => {
                let k = ContentKey::from_bytes(b64_32(&key));
                let context = aad_fields.aad();
                assert_eq!(
                    context.to_bytes().expect("short fields"),
                    b64(&aad),
                    "{name}: aad"
                );
                let expected = match error.as_str() {
                    "open" => CryptoError::Open,
                    "malformed" => CryptoError::Malformed,
                    other => panic!("{name}: unknown error {other:?}"),
                };
                assert_eq!(envelope::open(&k, &context, &sealed), Err(expected), "{name}");
            }
        }
    }
    assert!(seen_non_ascii, "at least one plaintext is not ASCII");
}

// -------------------------------------------------------------------------------------------- cursor

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "camelCase", deny_unknown_fields)]
enum CursorCase {
    #[serde(rename_all = "camelCase")]
    Cursor { name: String, seq: String, text: String },
    #[serde(rename_all = "camelCase")]
    InvalidCursor { name: String, text: String },
}

#[test]
fn cursor_vectors() {
    for case in load::<CursorCase>("cursor").cases {
        match case {
            CursorCase::Cursor { name, seq, text } => {
                let seq: u64 = seq.parse().expect("decimal");
                assert_eq!(Cursor(seq).to_string(), text, "{name}");
                assert_eq!(Cursor::parse(&text).expect("parses").seq(), seq, "{name}");
                let body = text.strip_prefix("c1.").expect("prefix");
                assert_eq!(b64(body), seq.to_be_bytes(), "{name}");
            }
            CursorCase::InvalidCursor { name, text } => {
                assert!(Cursor::parse(&text).is_err(), "{name}: {text:?} must be refused");
            }
        }
    }
}

// ------------------------------------------------------------------------------------------ question

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "camelCase", deny_unknown_fields)]
enum QuestionCase {
    #[serde(rename_all = "camelCase")]
    QuestionDigest {
        name: String,
        plaintext: String,
        plaintext_bytes: String,
        digest: String,
    },
    #[serde(rename_all = "camelCase")]
    SameQuestion {
        name: String,
        first: String,
        second: String,
        same: bool,
    },
    #[serde(rename_all = "camelCase")]
    Verdict(Box<VerdictCase>),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Report {
    state: String,
    answered_by: Option<String>,
    answered_at: Option<String>,
    answer_envelope: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DeviceKey {
    device_id: String,
    key: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct VerdictCase {
    name: String,
    agent_id: String,
    question_id: String,
    self_key: String,
    own_envelope: String,
    device_keys: Vec<DeviceKey>,
    may_approve: Vec<String>,
    report: Report,
    answer_plaintext: Option<String>,
    now: String,
    state: String,
    approved: bool,
    /// A string, as in verdict.json (where the signature's step is "6a").
    rejected_at_step: Option<String>,
    rejected: Option<String>,
}

/// The step of `docs/crypto.md` §4.7 each rejection reason of `question::verdict` stands for.
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

fn check_verdict(case: &VerdictCase) {
    let name = &case.name;
    let time = |t: &str| Timestamp::parse(t).unwrap_or_else(|| panic!("{name}: time {t:?}"));
    let own = OwnQuestion::open(
        &ContentKey::from_bytes(b64_32(&case.self_key)),
        &case.agent_id,
        &case.question_id,
        &case.own_envelope,
    )
    .expect("the agent's own copy opens");
    let key = |device: &str| {
        let k = case
            .device_keys
            .iter()
            .find(|d| d.device_id == device)
            .unwrap_or_else(|| panic!("{name}: no key for {device}"));
        ContentKey::from_bytes(b64_32(&k.key))
    };
    let report = RelayReport {
        state: QuestionState::parse(&case.report.state).expect("a state"),
        answered_by: case.report.answered_by.as_deref(),
        answered_at: case.report.answered_at.as_deref().map(time),
        answer_envelope: case.report.answer_envelope.as_deref(),
        channel: None,
    };
    let v = question::verdict(
        &case.agent_id,
        &own,
        &report,
        key,
        |device| case.may_approve.iter().any(|d| d == device),
        time(&case.now),
    );
    assert_eq!(v.state.as_str(), case.state, "{name}: state");
    assert_eq!(v.approved, case.approved, "{name}: approved");
    assert_eq!(v.rejected, case.rejected.as_deref(), "{name}: rejected");
    assert_eq!(
        v.rejected.map(|r| verdict_step(r).to_string()),
        case.rejected_at_step,
        "{name}: step"
    );
    assert!(!case.approved || case.rejected.is_none(), "{name}");
    // The plaintext shown is what the named device sealed, when its answer opens.
    let step = case
        .rejected_at_step
        .as_deref()
        .map(|s| s.parse::<u8>().expect("a step"));
    if let (Some(plain), Some(by), Some(sealed), None | Some(5..)) = (
        &case.answer_plaintext,
        &case.report.answered_by,
        &case.report.answer_envelope,
        step,
    ) {
        let opened = envelope::open(
            &key(by),
            &question::answer_aad(&case.agent_id, by, &case.question_id),
            sealed,
        )
        .expect("the answer opens");
        assert_eq!(opened, plain.as_bytes(), "{name}: answerPlaintext");
    }
}

#[test]
fn question_vectors() {
    let mut digests = std::collections::HashSet::new();
    let mut verdicts = 0;
    for case in load::<QuestionCase>("question").cases {
        match case {
            QuestionCase::QuestionDigest {
                name,
                plaintext,
                plaintext_bytes,
                digest,
            } => {
                assert_eq!(
                    plaintext.as_bytes(),
                    b64(&plaintext_bytes),
                    "{name}: plaintextBytes"
                );
                assert_eq!(
                    question::question_digest(&b64(&plaintext_bytes)),
                    digest,
                    "{name}"
                );
                assert_eq!(b64(&digest), sha256(plaintext.as_bytes()), "{name}: SHA-256");
                assert_eq!(digest.len(), 43, "{name}: 32 bytes, unpadded");
                assert!(digests.insert(digest), "{name}: every case has its own digest");
                if !plaintext.is_empty() {
                    let payload: QuestionPayload = serde_json::from_str(&plaintext).expect("question parses");
                    payload.validate().expect("a valid question");
                }
            }
            QuestionCase::Verdict(case) => {
                verdicts += 1;
                check_verdict(&case);
            }
            QuestionCase::SameQuestion {
                name,
                first,
                second,
                same,
            } => {
                let a: QuestionPayload = serde_json::from_str(&first).expect("question parses");
                let b: QuestionPayload = serde_json::from_str(&second).expect("question parses");
                assert_eq!(a.same_question(&b), same, "{name}");
                assert_eq!(b.same_question(&a), same, "{name}: symmetric");
                assert_eq!(serde_json::to_string(&a).expect("serialises"), first, "{name}");
                assert_eq!(serde_json::to_string(&b).expect("serialises"), second, "{name}");
                // Another question always has another digest; the same question asked again usually too.
                if !same {
                    assert_ne!(
                        question::question_digest(first.as_bytes()),
                        question::question_digest(second.as_bytes()),
                        "{name}"
                    );
                }
            }
        }
    }
    assert!(verdicts > 0, "question.json has verdict cases");
}

// -------------------------------------------------------------------------------------------- roster

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DeviceCheck {
    device_id: String,
    active: bool,
    may_approve: bool,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "camelCase", deny_unknown_fields)]
enum RosterCase {
    #[serde(rename_all = "camelCase")]
    Roster {
        name: String,
        self_key: String,
        agent_id: String,
        version: u64,
        roster_json: String,
        aad_fields: AadFields,
        aad: String,
        nonce: String,
        envelope: String,
        devices: Vec<DeviceCheck>,
    },
    #[serde(rename_all = "camelCase")]
    RejectRoster {
        name: String,
        self_key: String,
        agent_id: String,
        version: u64,
        plaintext: String,
        envelope: String,
        error: String,
    },
    #[serde(rename_all = "camelCase")]
    RosterMark {
        name: String,
        seen: u64,
        version: u64,
        accepted: bool,
    },
}

#[test]
fn roster_vectors() {
    let (mut sealed, mut rejected, mut marks) = (0, 0, 0);
    for case in load::<RosterCase>("roster").cases {
        match case {
            RosterCase::Roster {
                name,
                self_key,
                agent_id,
                version,
                roster_json,
                aad_fields,
                aad,
                nonce,
                envelope: expected,
                devices,
            } => {
                sealed += 1;
                let k = ContentKey::from_bytes(b64_32(&self_key));
                // The additional data: (agentId, "", "self", "roster", version in decimal).
                let label = version.to_string();
                assert_eq!(aad_fields.aad(), roster::roster_aad(&agent_id, &label), "{name}");
                assert_eq!(
                    (
                        aad_fields.device_id.as_str(),
                        aad_fields.direction.as_str(),
                        aad_fields.kind.as_str()
                    ),
                    ("", "self", "roster"),
                    "{name}"
                );
                assert_eq!(reference_aad(&aad_fields), b64(&aad), "{name}: aad (reference)");
                assert_eq!(
                    aad_fields.aad().to_bytes().expect("short fields"),
                    b64(&aad),
                    "{name}: aad"
                );
                // The payload: parses, serialises back to the same text, is bound to its agent and version.
                let roster: Roster = serde_json::from_str(&roster_json).expect("roster parses");
                assert_eq!(
                    serde_json::to_string(&roster).expect("serialises"),
                    roster_json,
                    "{name}"
                );
                assert_eq!(
                    (roster.agent_id.as_str(), roster.version),
                    (agent_id.as_str(), version)
                );
                roster.validate().expect("a valid roster");
                // Seal with the recorded nonce; the layout from AES-GCM called directly; open.
                let nonce: [u8; 12] = b64(&nonce).try_into().expect("12-byte nonce");
                let envelope =
                    envelope::seal_with_nonce(&k, &aad_fields.aad(), nonce, roster_json.as_bytes());
                assert_eq!(envelope, expected, "{name}: envelope");
                let mut rebuilt = vec![0x01];
                rebuilt.extend_from_slice(&nonce);
                rebuilt.extend(gcm_seal(
                    &b64(&self_key),
                    &nonce,
                    &b64(&aad),
                    roster_json.as_bytes(),
                ));
                assert_eq!(rebuilt, b64(&expected), "{name}: layout");
                let opened = Roster::open(&k, &agent_id, version, &expected).expect("roster opens");
                assert_eq!(opened, roster, "{name}");
                // Library's own sealing opens the same way (random nonce).
                assert_eq!(
                    Roster::open(&k, &agent_id, version, &roster.seal(&k)),
                    Ok(roster.clone())
                );
                // Who is active, who may approve.
                for d in devices {
                    assert_eq!(
                        roster.is_active(&d.device_id),
                        d.active,
                        "{name}: {} active",
                        d.device_id
                    );
                    assert_eq!(
                        roster.may_approve(&d.device_id),
                        d.may_approve,
                        "{name}: {} may approve",
                        d.device_id
                    );
                }
            }
            RosterCase::RejectRoster {
                name,
                self_key,
                agent_id,
                version,
                plaintext,
                envelope: sealed_roster,
                error,
            } => {
                rejected += 1;
                let k = ContentKey::from_bytes(b64_32(&self_key));
                let got = Roster::open(&k, &agent_id, version, &sealed_roster);
                match error.as_str() {
                    "open" => assert_eq!(got, Err(RosterError::Open), "{name}"),
                    "malformed" => {
                        assert!(matches!(got, Err(RosterError::Malformed(_))), "{name}: {got:?}");
                        // It opens: only its content is refused.
                        let label = version.to_string();
                        let plain =
                            envelope::open(&k, &roster::roster_aad(&agent_id, &label), &sealed_roster)
                                .expect("opens");
                        assert_eq!(plain, plaintext.as_bytes(), "{name}");
                    }
                    other => panic!("{name}: unknown error {other:?}"),
                }
            }
            RosterCase::RosterMark {
                name,
                seen,
                version,
                accepted,
            } => {
                marks += 1;
                let roster = Roster {
                    version,
                    ..Roster::empty("ag_vector")
                };
                match roster.check_not_older(seen) {
                    Ok(()) => assert!(accepted, "{name}: must be refused"),
                    Err(e) => {
                        assert!(!accepted, "{name}: must be accepted");
                        assert_eq!(e, RosterError::RolledBack { seen, got: version }, "{name}");
                    }
                }
                assert_eq!(accepted, version >= seen, "{name}");
            }
        }
    }
    assert!(sealed > 0 && rejected > 0 && marks > 0);
}

// ------------------------------------------------------------------------------ cross-file agreement

#[test]
fn files_agree_with_each_other() {
    // The vector device's key in kdf.json is the one the envelope and pairing vectors use.
    let kdf = load::<KdfCase>("kdf");
    let device_key = kdf
        .cases
        .iter()
        .find_map(|c| match c {
            KdfCase::ContentKeys {
                agent_id,
                device_id,
                device_key,
                ..
            } if agent_id == "ag_vector" && device_id == "dv_vector" => Some(device_key.clone()),
            _ => None,
        })
        .expect("kdf.json has ag_vector/dv_vector");
    let envelope = load::<EnvelopeCase>("envelope");
    assert!(envelope.cases.iter().any(|c| matches!(
        c,
        EnvelopeCase::Seal { key, aad_fields, .. } if *key == device_key && aad_fields.direction == "d2a"
    )));
    let pairing = load::<PairingCase>("pairing");
    assert!(pairing.cases.iter().any(|c| matches!(
        c,
        PairingCase::Pairing { offer, .. } if offer.offer_json.contains(&format!("\"deviceKey\":\"{device_key}\""))
    )));
}

/// The seal case of `envelope.json` named `name`: (key, plaintext, envelope).
fn seal_case(cases: &[EnvelopeCase], name: &str) -> (String, String, String) {
    cases
        .iter()
        .find_map(|c| match c {
            EnvelopeCase::Seal {
                name: n,
                key,
                plaintext,
                envelope,
                ..
            } if n == name => Some((key.clone(), plaintext.clone(), envelope.clone())),
            _ => None,
        })
        .unwrap_or_else(|| panic!("envelope.json has a seal case {name:?}"))
}

#[test]
fn question_answer_and_roster_vectors_agree_with_the_verdict() {
    let envelopes = load::<EnvelopeCase>("envelope").cases;
    let (device_key, device_copy, _) =
        seal_case(&envelopes, "question with an answer key, the device's copy");
    let (self_key, own_copy, own_env) = seal_case(
        &envelopes,
        "question with an answer key, the agent's own copy (the same plaintext bytes)",
    );
    let (answer_key, answer_plain, answer_env) =
        seal_case(&envelopes, "answer: yes, naming the question's digest");
    let (copy_key, copy_plain, copy_env) = seal_case(
        &envelopes,
        "answer copy, sealed with the question's answer key (kind answer_copy)",
    );
    assert_eq!(device_copy, own_copy, "one plaintext for every copy");
    assert_eq!(answer_key, device_key, "the device answers with its own key");
    assert_eq!(copy_plain, answer_plain, "the copy is the same answer");

    // The digest of question.json is the digest of the question's plaintext, and the one the answer names.
    let digests: Vec<(String, String, String)> = load::<QuestionCase>("question")
        .cases
        .into_iter()
        .filter_map(|c| match c {
            QuestionCase::QuestionDigest {
                name,
                plaintext,
                digest,
                ..
            } => Some((name, plaintext, digest)),
            QuestionCase::SameQuestion { .. } | QuestionCase::Verdict(_) => None,
        })
        .collect();
    let (_, asked_plain, asked_digest) = &digests[0];
    assert_eq!(*asked_plain, own_copy);
    let own = OwnQuestion::open(
        &ContentKey::from_bytes(b64_32(&self_key)),
        "ag_vector",
        "qst_digest",
        &own_env,
    )
    .expect("the agent's copy opens");
    assert_eq!(own.digest, *asked_digest);
    let answer: AnswerPayload = serde_json::from_str(&answer_plain).expect("answer parses");
    assert_eq!(answer.question_digest.as_deref(), Some(asked_digest.as_str()));
    // The copy's key is the question's answer key.
    assert_eq!(own.payload.answer_key.as_deref(), Some(copy_key.as_str()));
    assert_eq!(
        envelope::open(
            &own.payload.answer_key().expect("a valid answer key"),
            &question::answer_copy_aad("ag_vector", "dv_vector", "qst_digest"),
            &copy_env,
        )
        .expect("the copy opens"),
        answer_plain.as_bytes()
    );

    // The rosters of roster.json: dv_vector is an active owner in both.
    let rosters: Vec<Roster> = load::<RosterCase>("roster")
        .cases
        .into_iter()
        .filter_map(|c| match c {
            RosterCase::Roster {
                self_key: k,
                agent_id,
                version,
                envelope,
                ..
            } => {
                assert_eq!(k, self_key, "roster.json uses the vector agent's self key");
                Some(
                    Roster::open(&ContentKey::from_bytes(b64_32(&k)), &agent_id, version, &envelope)
                        .expect("roster opens"),
                )
            }
            _ => None,
        })
        .collect();
    assert!(!rosters.is_empty());

    let key = |_: &str| ContentKey::from_bytes(b64_32(&device_key));
    let now = Timestamp::parse("2026-11-30T00:50:00.000Z").expect("time");
    fn report(envelope: &str) -> RelayReport<'_> {
        RelayReport {
            state: QuestionState::Answered,
            answered_by: Some("dv_vector"),
            answered_at: Timestamp::parse("2026-11-30T00:41:02.500Z"),
            answer_envelope: Some(envelope),
            channel: None,
        }
    }
    for roster in &rosters {
        let v = question::verdict(
            "ag_vector",
            &own,
            &report(&answer_env),
            key,
            |d| roster.may_approve(d),
            now,
        );
        assert!(v.approved, "version {}: {:?}", roster.version, v.rejected);
    }
    // No roster: nobody approves.
    let empty = Roster::empty("ag_vector");
    let v = question::verdict(
        "ag_vector",
        &own,
        &report(&answer_env),
        key,
        |d| empty.may_approve(d),
        now,
    );
    assert!(!v.approved && v.rejected.is_some());
    // The copy is never an answer.
    let v = question::verdict("ag_vector", &own, &report(&copy_env), key, |_| true, now);
    assert!(!v.approved);
    // The same yes does not count for another question asked under the same id.
    let (_, drop_plain, drop_digest) = &digests[1];
    let drop = OwnQuestion {
        question_id: "qst_digest".into(),
        payload: serde_json::from_str(drop_plain).expect("question parses"),
        digest: drop_digest.clone(),
        plaintext: drop_plain.as_bytes().to_vec(),
    };
    let v = question::verdict("ag_vector", &drop, &report(&answer_env), key, |_| true, now);
    assert!(!v.approved);
    assert_eq!(
        v.rejected,
        Some("the answer was given to a different question asked under the same id")
    );
}

// ----------------------------------------------------------------------------------------- signature

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "camelCase", deny_unknown_fields)]
enum SignatureCase {
    #[serde(rename_all = "camelCase")]
    SigningKey {
        name: String,
        seed: String,
        public_key: String,
        fingerprint: String,
    },
    #[serde(rename_all = "camelCase")]
    SignedAnswer {
        name: String,
        seed: String,
        public_key: String,
        agent_id: String,
        device_id: String,
        question_id: String,
        question_digest: String,
        answered_at: String,
        answer: serde_json::Value,
        signed_bytes_hex: String,
        signature: String,
    },
    #[serde(rename_all = "camelCase")]
    SignedGrant {
        name: String,
        seed: String,
        public_key: String,
        agent_id: String,
        device_id: String,
        question_id: String,
        question_digest: String,
        granted_at: String,
        offer: serde_json::Value,
        grant: serde_json::Value,
        signed_bytes_hex: String,
    },
    #[serde(rename_all = "camelCase")]
    RejectGrant {
        name: String,
        public_key: Option<String>,
        agent_id: String,
        device_id: String,
        question_id: String,
        question_digest: String,
        granted_at: String,
        offer: Option<serde_json::Value>,
        grant: serde_json::Value,
        refusal: String,
        reason: String,
    },
    #[serde(rename_all = "camelCase")]
    SealedSigningKey {
        name: String,
        device_key: String,
        agent_id: String,
        device_id: String,
        public_key: String,
        payload_json: String,
        aad_fields: AadFields,
        aad: String,
        nonce: String,
        envelope: String,
    },
    #[serde(rename_all = "camelCase")]
    RejectSigningKey {
        name: String,
        device_key: String,
        agent_id: String,
        device_id: String,
        plaintext: String,
        envelope: String,
        clear: Option<String>,
        error: String,
    },
    #[serde(rename_all = "camelCase")]
    SignedVerdict {
        name: String,
        agent_id: String,
        question_id: String,
        self_key: String,
        own_envelope: String,
        device_id: String,
        device_key: String,
        pinned_key: Option<String>,
        may_approve: Vec<String>,
        #[serde(default)]
        signing_key_refused: bool,
        #[serde(default)]
        require_signed: bool,
        answered_at: String,
        answer_envelope: String,
        answer_plaintext: String,
        now: String,
        state: String,
        approved: bool,
        signed: bool,
        rejected_at_step: Option<String>,
        rejected: Option<String>,
    },
    #[serde(rename_all = "camelCase")]
    Export {
        name: String,
        export: serde_json::Value,
        records: usize,
    },
    #[serde(rename_all = "camelCase")]
    RejectExport {
        name: String,
        /// The document as JSON, or (when a member name is given twice in it) as text.
        #[serde(default)]
        export: Option<serde_json::Value>,
        #[serde(default)]
        export_text: Option<String>,
        index: usize,
        question_id: String,
        step: String,
        reason: String,
        #[serde(default)]
        device_id: Option<String>,
        #[serde(default)]
        grant: Option<usize>,
        #[serde(default, rename = "use")]
        grant_use: Option<usize>,
    },
}

/// The step of `docs/crypto.md` §4.9 each failure of `signing::verify_export_json` stands for.
fn export_step(reason: &str) -> &'static str {
    match reason {
        "not an answer-log export: not JSON of the shape of a version 1 export" => "shape",
        "not a version 1 answer-log export" => "0",
        "the export lists a device twice in devices" => "0a",
        "the question is not base64url" => "1",
        "the question's digest does not match its bytes" => "2",
        "the question's bytes are not a question" => "3",
        "the answering device is not one the question was sent to" => "4",
        "the answer is dated after the question's expiry" => "5",
        "the answer does not fit the question" => "6",
        "`approved` does not follow from the answer" => "7",
        "the answering device is not among the export's devices" => "8",
        "the answering device has no signing key" => "9",
        "the record's signing key is not the device's" => "10",
        "the device's signing key is not 32 bytes of base64url" => "11",
        "the device's fingerprint is not its key's" => "12",
        "the answer is not signed" => "13",
        "the signature does not verify" => "14",
        "the grant's question is not a record of the export" => "g1",
        "the grant's device is not the device that answered its question" => "g2",
        "the grant's question was not answered yes" => "g3",
        "the grant does not start when its question was answered (grantedAt is not the record's answeredAt)" => {
            "g4"
        }
        "the grant's question is not its record's question bytes" => "g5",
        "the granting device could not approve then: it is not an owner, or was revoked by then" => "g6",
        "the grant's question offered no grant" => "g7",
        "the grant's scope is not one its question offered" => "g8",
        "the grant names another policy than its question's offer" => "g9",
        "the grant lasts longer than its question offered, or ends before it starts" => "g10",
        "the grant's signature does not verify" => "g11",
        "the use is dated before the grant was given" => "u1",
        "the use is dated at or after the grant's expiry" => "u2",
        "the use is not covered by the grant's scope (its tool, command or folder)" => "u3",
        "the use is dated after the granting device was revoked" => "u4",
        "the record carries fewer approvals from distinct devices than its question needs" => "q1",
        "a device's approval is listed twice" => "q2",
        "an approving device is not one the question was sent to"
        | "an approving device is not among the export's devices"
        | "an approving device is not an owner, or was revoked by then"
        | "an approval is dated after the question's expiry" => "q3",
        "an approving device has no signing key" | "an approval's signature does not verify" => "q4",
        "approvals are listed for a record that needs none"
        | "the record's own answer is not among its approvals" => "q5",
        other => panic!("unknown export failure {other:?}"),
    }
}

/// The fingerprint written from `docs/crypto.md` §4.8: SHA-256 of the key, its first 12 bytes in lower-case
/// hex, four hex digits per group, groups separated by one space.
fn reference_fingerprint(key: &[u8]) -> String {
    let hex: String = sha256(key)[..12].iter().map(|b| format!("{b:02x}")).collect();
    let groups: Vec<&str> = (0..6).map(|i| &hex[i * 4..i * 4 + 4]).collect();
    groups.join(" ")
}

/// The signed bytes written from `docs/crypto.md` §4.8, independent of `SignedAnswer::bytes`. `answer` is the
/// JSON of an answer (`{"type": …, "value": …}`); `answered_at` is the wire text.
fn reference_signed_bytes(
    agent_id: &str,
    device_id: &str,
    question_id: &str,
    question_digest: &str,
    answered_at: &str,
    answer: &serde_json::Value,
) -> Vec<u8> {
    fn field(out: &mut Vec<u8>, text: &str) {
        out.extend_from_slice(&u32::try_from(text.len()).expect("short").to_be_bytes());
        out.extend_from_slice(text.as_bytes());
    }
    let mut out = b"pacerelle/v1/answer-signature".to_vec();
    assert_eq!(out.len(), 29);
    out.push(0x01);
    for text in [agent_id, device_id, question_id, question_digest, answered_at] {
        field(&mut out, text);
    }
    let kind = answer["type"].as_str().expect("an answer type");
    let values: Vec<&str> = match kind {
        "yes" | "no" => vec![],
        "options" => answer["value"]
            .as_array()
            .expect("options")
            .iter()
            .map(|v| v.as_str().expect("an option"))
            .collect(),
        "text" => vec![answer["value"].as_str().expect("a text")],
        other => panic!("unknown answer type {other:?}"),
    };
    field(&mut out, kind);
    out.extend_from_slice(&u32::try_from(values.len()).expect("few").to_be_bytes());
    for value in values {
        field(&mut out, value);
    }
    out
}

/// A grant's signed bytes written from `docs/crypto.md` §4.8b, independent of `SignedGrant::bytes`: `grant` is
/// its JSON (`scope`, `expiresAt`, `policy`); `granted_at` and `expiresAt` are rewritten in the wire form.
fn reference_grant_bytes(
    agent_id: &str,
    device_id: &str,
    question_id: &str,
    question_digest: &str,
    granted_at: Timestamp,
    grant: &serde_json::Value,
) -> Vec<u8> {
    fn field(out: &mut Vec<u8>, text: &str) {
        out.extend_from_slice(&u32::try_from(text.len()).expect("short").to_be_bytes());
        out.extend_from_slice(text.as_bytes());
    }
    let text = |v: &serde_json::Value| v.as_str().unwrap_or("").to_string();
    let expires_at = Timestamp::parse(grant["expiresAt"].as_str().expect("expiresAt")).expect("a time");
    let scope = &grant["scope"];
    let mut out = b"pacerelle/v1/grant-signature".to_vec();
    assert_eq!(out.len(), 28);
    out.push(0x01);
    for text in [
        agent_id.to_string(),
        device_id.to_string(),
        question_id.to_string(),
        question_digest.to_string(),
        granted_at.to_rfc3339(),
        expires_at.to_rfc3339(),
        text(&grant["policy"]),
        text(&scope["tool"]),
        text(&scope["command"]),
        text(&scope["match"]),
        text(&scope["folder"]),
    ] {
        field(&mut out, &text);
    }
    out
}

/// Whether a grant's scope (its JSON) covers a call of `tool` with `command` in `folder`, touching no path,
/// written from `docs/crypto.md` §4.8b.
fn reference_covers(scope: &serde_json::Value, tool: &str, command: Option<&str>, folder: &str) -> bool {
    const CONTROL: &str = ";&|`$()<>\\\n\r";
    if scope["tool"] != tool || scope["folder"] != folder {
        return false;
    }
    match (scope["command"].as_str(), command) {
        (None, None) => true,
        (Some(granted), Some(call)) => match scope["match"].as_str() {
            Some("exact") => call == granted,
            Some("prefix") => {
                call == granted
                    || (!granted.is_empty()
                        && call.starts_with(granted)
                        && call[granted.len()..].starts_with(' ')
                        && !call[granted.len()..].chars().any(|c| CONTROL.contains(c)))
            }
            _ => false,
        },
        _ => false,
    }
}

/// Ed25519 verification called directly on ring.
fn ed25519_verifies(public_key: &[u8], message: &[u8], signature: &[u8]) -> bool {
    ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, public_key)
        .verify(message, signature)
        .is_ok()
}

/// JSON as `docs/crypto.md` §5 reads it, written from the text: serde_json's strict reading of RFC 8259, and
/// no member name given twice in one object at any depth.
fn reference_json(bytes: &[u8]) -> Option<serde_json::Value> {
    use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
    /// Walks any JSON value, failing on an object that names a member twice.
    struct Once;
    impl<'de> Visitor<'de> for Once {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("JSON")
        }
        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }
        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }
        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }
        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            Ok(())
        }
        fn visit_str<E>(self, _: &str) -> Result<(), E> {
            Ok(())
        }
        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            while seq.next_element::<Walk>()?.is_some() {}
            Ok(())
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            let mut names = std::collections::HashSet::new();
            while let Some(name) = map.next_key::<String>()? {
                if !names.insert(name) {
                    return Err(serde::de::Error::custom("twice"));
                }
                map.next_value::<Walk>()?;
            }
            Ok(())
        }
    }
    struct Walk;
    impl<'de> Deserialize<'de> for Walk {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            d.deserialize_any(Once).map(|()| Walk)
        }
    }
    serde_json::from_slice::<Walk>(bytes).ok()?;
    serde_json::from_slice(bytes).ok()
}

/// A member of a JSON object and the check of its value.
type Member<'a> = (&'a str, &'a dyn Fn(&serde_json::Value) -> bool);

/// Where an export fails: the record (from 1; 0 for the document as a whole or a grant), the step, and for a
/// grant its position and that of its use (from 1).
type Failed = (usize, String, Option<usize>, Option<usize>);

/// An answer-log export verified as `docs/crypto.md` §4.9 says, on its bytes, independent of
/// `signing::verify_export_json`: `Ok(n)` when all `n` records (and every grant) verify, else where it fails
/// first.
fn reference_verify(bytes: &[u8]) -> Result<usize, Failed> {
    use serde_json::Value;
    let text = |v: &Value| v.as_str().map(str::to_string);
    let time = |v: &Value| v.as_str().and_then(Timestamp::parse);
    let is_time = |v: &Value| time(v).is_some();
    let is_str = |v: &Value| v.is_string();
    let strings = |v: &Value| v.as_array().is_some_and(|a| a.iter().all(Value::is_string));
    // Required members present with their type; optional ones absent, null, or of their type.
    let members = |obj: &Value, required: &[Member<'_>], optional: &[Member<'_>]| {
        obj.is_object()
            && required.iter().all(|(m, ok)| obj.get(*m).is_some_and(ok))
            && optional
                .iter()
                .all(|(m, ok)| obj.get(*m).is_none_or(|v| v.is_null() || ok(v)))
    };
    let answer_shaped = |a: &Value| {
        let value = a.get("value").filter(|v| !v.is_null());
        a.is_object()
            && match a.get("type").and_then(Value::as_str) {
                Some("yes" | "no") => value.is_none(),
                Some("options") => value.is_some_and(&strings),
                Some("text") => value.is_some_and(Value::is_string),
                _ => false,
            }
    };
    let device = |d: &Value| {
        members(
            d,
            &[
                ("deviceId", &is_str),
                ("role", &|r: &Value| r == "owner" || r == "user"),
                ("addedAt", &is_time),
            ],
            &[
                ("name", &is_str),
                ("pairedAt", &is_time),
                ("revokedAt", &is_time),
                ("signingKey", &is_str),
                ("fingerprint", &is_str),
            ],
        )
    };
    let record = |r: &Value| {
        members(
            r,
            &[
                ("questionId", &is_str),
                ("question", &is_str),
                ("questionDigest", &is_str),
                ("deviceId", &is_str),
                ("answer", &answer_shaped),
                ("answeredAt", &is_time),
                ("approved", &Value::is_boolean),
            ],
            &[
                ("signature", &is_str),
                ("signingKey", &is_str),
                ("approvals", &|v: &Value| {
                    v.as_array().is_some_and(|a| {
                        a.iter().all(|x| {
                            members(
                                x,
                                &[
                                    ("deviceId", &is_str),
                                    ("answeredAt", &is_time),
                                    ("signature", &is_str),
                                ],
                                &[],
                            )
                        })
                    })
                }),
            ],
        )
    };
    let scope = |s: &Value| {
        members(
            s,
            &[("tool", &is_str), ("folder", &is_str)],
            &[
                ("command", &is_str),
                ("match", &|m: &Value| m == "exact" || m == "prefix"),
            ],
        )
    };
    let signed_grant = |g: &Value| {
        members(
            g,
            &[
                ("scope", &scope),
                ("expiresAt", &is_time),
                ("policy", &is_str),
                ("signature", &is_str),
            ],
            &[],
        )
    };
    let grant_use = |u: &Value| {
        members(
            u,
            &[("at", &is_time), ("tool", &is_str), ("folder", &is_str)],
            &[("command", &is_str)],
        )
    };
    let grant = |g: &Value| {
        members(
            g,
            &[
                ("id", &is_str),
                ("deviceId", &is_str),
                ("grantedAt", &is_time),
                ("question", &is_str),
                ("grant", &signed_grant),
                ("uses", &|v: &Value| {
                    v.as_array().is_some_and(|a| a.iter().all(grant_use))
                }),
            ],
            &[],
        )
    };
    let offer = |o: &Value| {
        members(
            o,
            &[
                ("durations", &|v: &Value| {
                    v.as_array()
                        .is_some_and(|a| a.iter().all(|d| d.as_u64().is_some()))
                }),
                ("scopes", &|v: &Value| {
                    v.as_array().is_some_and(|a| a.iter().all(scope))
                }),
                ("policy", &is_str),
            ],
            &[],
        )
    };
    let export = reference_json(bytes).ok_or((0, "shape".to_string(), None, None))?;
    let shaped = members(
        &export,
        &[
            ("v", &|v: &Value| v.as_u64().is_some_and(|v| v <= 255)),
            ("format", &is_str),
            ("agentId", &is_str),
            ("exportedAt", &is_time),
            ("devices", &|v: &Value| {
                v.as_array().is_some_and(|a| a.iter().all(device))
            }),
            ("records", &|v: &Value| {
                v.as_array().is_some_and(|a| a.iter().all(record))
            }),
        ],
        &[("grants", &|v: &Value| {
            v.as_array().is_some_and(|a| a.iter().all(grant))
        })],
    );
    if !shaped {
        return Err((0, "shape".into(), None, None));
    }
    if export["v"] != 1 || export["format"] != "pacerelle-answer-log" {
        return Err((0, "0".into(), None, None));
    }
    let agent_id = text(&export["agentId"]).expect("agentId");
    let devices = export["devices"].as_array().expect("devices");
    let records = export["records"].as_array().expect("records");
    let mut listed = std::collections::HashSet::new();
    if !devices.iter().all(|d| listed.insert(d["deviceId"].as_str())) {
        return Err((0, "0a".into(), None, None));
    }
    for (i, record) in records.iter().enumerate() {
        let fail = |step: &str| Err((i + 1, step.to_string(), None, None));
        let device_id = text(&record["deviceId"]).expect("deviceId");
        let answered_at = time(&record["answeredAt"]).expect("answeredAt");
        let answer = &record["answer"];
        // 1-3: the question's bytes, their digest, their meaning.
        let Some(bytes) = pacerelle_core::b64::decode(record["question"].as_str().expect("question")) else {
            return fail("1");
        };
        if pacerelle_core::b64::encode(&sha256(&bytes)) != record["questionDigest"] {
            return fail("2");
        }
        let question = reference_json(&bytes).unwrap_or(Value::Null);
        let defaulted = |m: &str, ok: &dyn Fn(&Value) -> bool| question.get(m).is_none_or(ok);
        let is_question = members(
            &question,
            &[
                ("question", &is_str),
                ("kind", &|k: &Value| k == "yes_no" || k == "choice" || k == "text"),
                ("expiresAt", &is_time),
            ],
            &[
                ("details", &is_str),
                ("answerKey", &is_str),
                ("user", &is_str),
                ("grants", &offer),
            ],
        ) && defaulted("options", &strings)
            && defaulted("approvals", &|n: &Value| {
                n.as_u64().is_some_and(|n| (1..=10).contains(&n))
            })
            && defaulted("multiple", &Value::is_boolean)
            && defaulted("recipients", &strings)
            && defaulted("channels", &|c: &Value| {
                c.as_array()
                    .is_some_and(|a| a.iter().all(|c| c == "phone" || c == "host"))
            });
        if !is_question {
            return fail("3");
        }
        let kind = question["kind"].as_str().expect("kind");
        let expires_at = time(&question["expiresAt"]).expect("expiresAt");
        let list = |v: &Value| -> Vec<String> {
            v.as_array()
                .map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect())
                .unwrap_or_default()
        };
        let recipients = list(&question["recipients"]);
        let options = list(&question["options"]);
        let multiple = question["multiple"].as_bool().unwrap_or(false);
        // 4-7: who, when, what, and whether it approves.
        if !recipients.contains(&device_id) {
            return fail("4");
        }
        if answered_at >= expires_at {
            return fail("5");
        }
        let fits = match (answer["type"].as_str(), kind) {
            (Some("yes" | "no"), "yes_no") => true,
            (Some("options"), "choice") => {
                let chosen = list(&answer["value"]);
                let distinct: std::collections::HashSet<&String> = chosen.iter().collect();
                !chosen.is_empty()
                    && distinct.len() == chosen.len()
                    && (multiple || chosen.len() == 1)
                    && chosen.iter().all(|c| options.contains(c))
            }
            (Some("text"), "text") => true,
            _ => false,
        };
        if !fits {
            return fail("6");
        }
        let approves = matches!(answer["type"].as_str(), Some("yes" | "options"));
        if record["approved"].as_bool() != Some(approves) {
            return fail("7");
        }
        // 8-12: the device (listed once) and its pinned key.
        let Some(device) = devices.iter().find(|d| d["deviceId"] == device_id.as_str()) else {
            return fail("8");
        };
        let Some(pinned) = text(&device["signingKey"]) else {
            return fail("9");
        };
        if text(&record["signingKey"]).as_deref() != Some(pinned.as_str()) {
            return fail("10");
        }
        let Some(key) = pacerelle_core::b64::decode(&pinned).filter(|k| k.len() == 32) else {
            return fail("11");
        };
        if let Some(fingerprint) = text(&device["fingerprint"])
            && fingerprint != reference_fingerprint(&key)
        {
            return fail("12");
        }
        // 13-14: the signature over the signed bytes, with answeredAt rewritten in the wire form.
        let Some(signature) = text(&record["signature"]) else {
            return fail("13");
        };
        let message = reference_signed_bytes(
            &agent_id,
            &device_id,
            record["questionId"].as_str().expect("questionId"),
            record["questionDigest"].as_str().expect("questionDigest"),
            &answered_at.to_rfc3339(),
            answer,
        );
        let signature = pacerelle_core::b64::decode(&signature).unwrap_or_default();
        if !ed25519_verifies(&key, &message, &signature) {
            return fail("14");
        }
        // q1-q5: a question that needs several approvals, approved, lists that many signed yeses of distinct
        // owner devices, its own among them; any other record lists none.
        let needed = question["approvals"].as_u64().unwrap_or(1) as usize;
        let no_approvals = Vec::new();
        let approvals = record["approvals"].as_array().unwrap_or(&no_approvals);
        if needed == 1 || !approves {
            if !approvals.is_empty() {
                return fail("q5");
            }
            continue;
        }
        let mut by = std::collections::HashSet::new();
        if !approvals.iter().all(|a| by.insert(a["deviceId"].as_str())) {
            return fail("q2");
        }
        if approvals.len() < needed {
            return fail("q1");
        }
        if !approvals
            .iter()
            .any(|a| a["deviceId"] == device_id.as_str() && time(&a["answeredAt"]) == Some(answered_at))
        {
            return fail("q5");
        }
        for a in approvals {
            let who = text(&a["deviceId"]).expect("deviceId");
            let at = time(&a["answeredAt"]).expect("answeredAt");
            let Some(d) = devices.iter().find(|d| d["deviceId"] == who.as_str()) else {
                return fail("q3");
            };
            let live = time(&d["revokedAt"]).is_none_or(|r| at < r);
            if !recipients.contains(&who) || d["role"] != "owner" || !live || at >= expires_at {
                return fail("q3");
            }
            let Some(key) = text(&d["signingKey"])
                .and_then(|k| pacerelle_core::b64::decode(&k))
                .filter(|k| k.len() == 32)
            else {
                return fail("q4");
            };
            let message = reference_signed_bytes(
                &agent_id,
                &who,
                record["questionId"].as_str().expect("questionId"),
                record["questionDigest"].as_str().expect("questionDigest"),
                &at.to_rfc3339(),
                &serde_json::json!({"type": "yes"}),
            );
            let signature =
                pacerelle_core::b64::decode(a["signature"].as_str().expect("signature")).unwrap_or_default();
            if !ed25519_verifies(&key, &message, &signature) {
                return fail("q4");
            }
        }
    }
    // Grants, after every record verified.
    let no_grants = Vec::new();
    let grants = export["grants"].as_array().unwrap_or(&no_grants);
    for (i, g) in grants.iter().enumerate() {
        let fail = |step: &str, used: Option<usize>| Err((0, step.to_string(), Some(i + 1), used));
        let id = g["id"].as_str().expect("id");
        let device_id = g["deviceId"].as_str().expect("deviceId");
        let granted_at = time(&g["grantedAt"]).expect("grantedAt");
        let signed = &g["grant"];
        let expires_at = time(&signed["expiresAt"]).expect("expiresAt");
        let Some(record) = records.iter().find(|r| r["questionId"] == id) else {
            return fail("g1", None);
        };
        if record["deviceId"] != device_id {
            return fail("g2", None);
        }
        if record["answer"]["type"] != "yes" {
            return fail("g3", None);
        }
        if time(&record["answeredAt"]) != Some(granted_at) {
            return fail("g4", None);
        }
        let digest = record["questionDigest"].as_str().expect("questionDigest");
        let same = pacerelle_core::b64::decode(g["question"].as_str().expect("question"))
            .is_some_and(|bytes| pacerelle_core::b64::encode(&sha256(&bytes)) == digest);
        if !same {
            return fail("g5", None);
        }
        let question: Value =
            reference_json(&b64(record["question"].as_str().expect("question"))).expect("a question");
        let device = devices
            .iter()
            .find(|d| d["deviceId"] == device_id)
            .expect("the record's device");
        let revoked = time(&device["revokedAt"]);
        let live = |at: Timestamp| revoked.is_none_or(|r| at < r);
        if device["role"] != "owner" || !live(granted_at) {
            return fail("g6", None);
        }
        let offered = &question["grants"];
        if !offered.is_object() {
            return fail("g7", None);
        }
        if !offered["scopes"]
            .as_array()
            .expect("scopes")
            .iter()
            .any(|s| same_scope(s, &signed["scope"]))
        {
            return fail("g8", None);
        }
        if offered["policy"] != signed["policy"] {
            return fail("g9", None);
        }
        let longest = offered["durations"]
            .as_array()
            .expect("durations")
            .iter()
            .filter_map(Value::as_u64)
            .max()
            .unwrap_or(0);
        let lasts = expires_at.millis() - granted_at.millis();
        if lasts <= 0 || u64::try_from(lasts).expect("positive") > longest.saturating_mul(1000) {
            return fail("g10", None);
        }
        let key = b64(device["signingKey"].as_str().expect("a key"));
        let message = reference_grant_bytes(&agent_id, device_id, id, digest, granted_at, signed);
        let signature = pacerelle_core::b64::decode(signed["signature"].as_str().expect("signature"));
        if !ed25519_verifies(&key, &message, &signature.unwrap_or_default()) {
            return fail("g11", None);
        }
        for (n, u) in g["uses"].as_array().expect("uses").iter().enumerate() {
            let at = time(&u["at"]).expect("at");
            if at < granted_at {
                return fail("u1", Some(n + 1));
            }
            if at >= expires_at {
                return fail("u2", Some(n + 1));
            }
            let covered = reference_covers(
                &signed["scope"],
                u["tool"].as_str().expect("tool"),
                u["command"].as_str(),
                u["folder"].as_str().expect("folder"),
            );
            if !covered {
                return fail("u3", Some(n + 1));
            }
            if !live(at) {
                return fail("u4", Some(n + 1));
            }
        }
    }
    Ok(records.len())
}

/// Whether two scopes are the same, member for member (an absent or `null` `command` or `match` the same).
fn same_scope(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    let member = |s: &serde_json::Value, m: &str| s.get(m).filter(|v| !v.is_null()).cloned();
    ["tool", "command", "match", "folder"]
        .iter()
        .all(|m| member(a, m) == member(b, m))
}

#[test]
fn ed25519_matches_rfc8032_test_1() {
    // RFC 8032 §7.1, TEST 1: the seed, its public key, and the signature of the empty message.
    let seed: [u8; 32] = hex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
        .try_into()
        .expect("32 bytes");
    let key = pacerelle_core::signing::SigningKey::from_seed(seed).expect("a seed");
    assert_eq!(
        key.public_key().as_bytes().as_slice(),
        hex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
    );
    let signature = hex(
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bac\
         c61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b",
    );
    assert_eq!(b64(&key.sign(b"")), signature);
    assert!(
        key.public_key()
            .verifies(b"", &pacerelle_core::b64::encode(&signature))
    );
    assert!(
        !key.public_key()
            .verifies(b"x", &pacerelle_core::b64::encode(&signature))
    );
}

#[test]
fn signature_vectors() {
    use pacerelle_core::grant::{Grant, GrantOffer, GrantRefusal, SignedGrantOf};
    use pacerelle_core::question::Answer;
    use pacerelle_core::signing::{
        self, AnswerLogExport, PublicKey, SignedAnswer, SigningKey, SigningKeyError, SigningKeyPayload,
    };
    let mut seen = std::collections::HashSet::new();
    let mut answer_types = std::collections::HashSet::new();
    let mut grant_matches = std::collections::HashSet::new();
    let mut refusals = std::collections::HashSet::new();
    let mut grant_steps = std::collections::HashSet::new();
    let mut first_export: Option<serde_json::Value> = None;
    for case in load::<SignatureCase>("signature").cases {
        match case {
            SignatureCase::SigningKey {
                name,
                seed,
                public_key,
                fingerprint,
            } => {
                seen.insert("signingKey");
                let key = SigningKey::from_seed(b64_32(&seed)).expect("a seed");
                assert_eq!(key.public_key().to_b64(), public_key, "{name}");
                assert_eq!(key.seed(), b64_32(&seed), "{name}");
                assert_eq!(key.public_key().fingerprint(), fingerprint, "{name}");
                assert_eq!(
                    reference_fingerprint(&b64(&public_key)),
                    fingerprint,
                    "{name}: reference"
                );
                assert_eq!(PublicKey::parse(&public_key), Some(key.public_key()), "{name}");
            }
            SignatureCase::SignedAnswer {
                name,
                seed,
                public_key,
                agent_id,
                device_id,
                question_id,
                question_digest,
                answered_at,
                answer,
                signed_bytes_hex,
                signature,
            } => {
                seen.insert("signedAnswer");
                let key = SigningKey::from_seed(b64_32(&seed)).expect("a seed");
                assert_eq!(key.public_key().to_b64(), public_key, "{name}");
                let parsed: Answer = serde_json::from_value(answer.clone()).expect("an answer");
                answer_types.insert(answer["type"].as_str().expect("type").to_string());
                let signed = SignedAnswer {
                    agent_id: &agent_id,
                    device_id: &device_id,
                    question_id: &question_id,
                    question_digest: &question_digest,
                    answered_at: Timestamp::parse(&answered_at).expect("a time"),
                    answer: &parsed,
                };
                let bytes = hex(&signed_bytes_hex);
                assert_eq!(signed.bytes(), bytes, "{name}: signed bytes");
                assert_eq!(
                    reference_signed_bytes(
                        &agent_id,
                        &device_id,
                        &question_id,
                        &question_digest,
                        &answered_at,
                        &answer
                    ),
                    bytes,
                    "{name}: signed bytes (reference)"
                );
                // Deterministic: the library signs to the recorded signature, which ring verifies directly.
                assert_eq!(signed.sign(&key), signature, "{name}: signature");
                assert!(signed.verifies(&key.public_key(), &signature), "{name}");
                assert!(
                    ed25519_verifies(&b64(&public_key), &bytes, &b64(&signature)),
                    "{name}"
                );
                let mut altered = bytes.clone();
                let last = altered.len() - 1;
                altered[last] ^= 0x01;
                assert!(
                    !ed25519_verifies(&b64(&public_key), &altered, &b64(&signature)),
                    "{name}"
                );
            }
            SignatureCase::SignedGrant {
                name,
                seed,
                public_key,
                agent_id,
                device_id,
                question_id,
                question_digest,
                granted_at,
                offer,
                grant,
                signed_bytes_hex,
            } => {
                seen.insert("signedGrant");
                let key = SigningKey::from_seed(b64_32(&seed)).expect("a seed");
                assert_eq!(key.public_key().to_b64(), public_key, "{name}");
                let offer: GrantOffer = serde_json::from_value(offer).expect("an offer");
                offer.validate().expect("a valid offer");
                let parsed: Grant = serde_json::from_value(grant.clone()).expect("a grant");
                assert_eq!(
                    serde_json::to_value(&parsed).expect("json"),
                    grant,
                    "{name}: round trip"
                );
                let granted_at = Timestamp::parse(&granted_at).expect("a time");
                let of = SignedGrantOf {
                    agent_id: &agent_id,
                    device_id: &device_id,
                    question_id: &question_id,
                    question_digest: &question_digest,
                    granted_at,
                };
                let bytes = hex(&signed_bytes_hex);
                assert_eq!(parsed.signed(of).bytes(), bytes, "{name}: signed bytes");
                assert_eq!(
                    reference_grant_bytes(
                        &agent_id,
                        &device_id,
                        &question_id,
                        &question_digest,
                        granted_at,
                        &grant
                    ),
                    bytes,
                    "{name}: signed bytes (reference)"
                );
                // Deterministic: the library signs to the recorded signature, which ring verifies directly.
                assert_eq!(
                    parsed.signed(of).sign(&key),
                    parsed.signature,
                    "{name}: signature"
                );
                assert!(
                    ed25519_verifies(&b64(&public_key), &bytes, &b64(&parsed.signature)),
                    "{name}"
                );
                assert_eq!(
                    parsed.check(Some(&offer), of, Some(&key.public_key())),
                    Ok(()),
                    "{name}"
                );
                assert!(offer.scopes.contains(&parsed.scope), "{name}");
                grant_matches.insert(parsed.scope.matching.map(|m| m.as_str()));
            }
            SignatureCase::RejectGrant {
                name,
                public_key,
                agent_id,
                device_id,
                question_id,
                question_digest,
                granted_at,
                offer,
                grant,
                refusal,
                reason,
            } => {
                seen.insert("rejectGrant");
                let offer: Option<GrantOffer> = offer.map(|o| serde_json::from_value(o).expect("an offer"));
                let parsed: Grant = serde_json::from_value(grant.clone()).expect("a grant");
                let key = public_key.as_deref().map(|k| PublicKey::parse(k).expect("a key"));
                let granted_at = Timestamp::parse(&granted_at).expect("a time");
                let of = SignedGrantOf {
                    agent_id: &agent_id,
                    device_id: &device_id,
                    question_id: &question_id,
                    question_digest: &question_digest,
                    granted_at,
                };
                let expected = GrantRefusal::from_code(&refusal)
                    .unwrap_or_else(|| panic!("{name}: unknown refusal {refusal:?}"));
                let refused = parsed.check(offer.as_ref(), of, key.as_ref());
                assert_eq!(refused, Err(expected), "{name}");
                assert_eq!(expected.to_string(), reason, "{name}");
                refusals.insert(refusal.clone());
                // Written from the spec: where the checks before the signature pass, the signature is what
                // fails, and it fails on ring directly too.
                if expected == GrantRefusal::BadSignature {
                    let message = reference_grant_bytes(
                        &agent_id,
                        &device_id,
                        &question_id,
                        &question_digest,
                        granted_at,
                        &grant,
                    );
                    let signature = pacerelle_core::b64::decode(&parsed.signature).unwrap_or_default();
                    assert!(
                        !ed25519_verifies(&b64(&public_key.expect("a key")), &message, &signature),
                        "{name}"
                    );
                }
            }
            SignatureCase::SealedSigningKey {
                name,
                device_key,
                agent_id,
                device_id,
                public_key,
                payload_json,
                aad_fields,
                aad,
                nonce,
                envelope: expected,
            } => {
                seen.insert("sealedSigningKey");
                let k = ContentKey::from_bytes(b64_32(&device_key));
                // (agentId, deviceId, "d2a", "signing_key", deviceId).
                assert_eq!(
                    aad_fields.aad(),
                    signing::signing_key_aad(&agent_id, &device_id),
                    "{name}"
                );
                assert_eq!(
                    (aad_fields.direction.as_str(), aad_fields.kind.as_str()),
                    ("d2a", "signing_key")
                );
                assert_eq!(aad_fields.object_id, device_id, "{name}");
                assert_eq!(reference_aad(&aad_fields), b64(&aad), "{name}: aad (reference)");
                let payload: SigningKeyPayload = serde_json::from_str(&payload_json).expect("a payload");
                assert_eq!(
                    serde_json::to_string(&payload).expect("json"),
                    payload_json,
                    "{name}"
                );
                assert_eq!(
                    (payload.v, payload.agent_id.as_str(), payload.device_id.as_str()),
                    (1, agent_id.as_str(), device_id.as_str())
                );
                assert_eq!(payload.signing_key, public_key, "{name}");
                let nonce: [u8; 12] = b64(&nonce).try_into().expect("12-byte nonce");
                let sealed = envelope::seal_with_nonce(&k, &aad_fields.aad(), nonce, payload_json.as_bytes());
                assert_eq!(sealed, expected, "{name}: envelope");
                let mut rebuilt = vec![0x01];
                rebuilt.extend_from_slice(&nonce);
                rebuilt.extend(gcm_seal(
                    &b64(&device_key),
                    &nonce,
                    &b64(&aad),
                    payload_json.as_bytes(),
                ));
                assert_eq!(rebuilt, b64(&expected), "{name}: layout");
                let public = PublicKey::parse(&public_key).expect("a key");
                for clear in [None, Some(public_key.as_str())] {
                    assert_eq!(
                        signing::open_signing_key(&k, &agent_id, &device_id, &expected, clear),
                        Ok(public),
                        "{name}"
                    );
                }
                // The library's own seal (random nonce) opens the same way.
                let own = signing::seal_signing_key(&k, &agent_id, &device_id, &public);
                assert_eq!(
                    signing::open_signing_key(&k, &agent_id, &device_id, &own, Some(&public_key)),
                    Ok(public)
                );
            }
            SignatureCase::RejectSigningKey {
                name,
                device_key,
                agent_id,
                device_id,
                plaintext,
                envelope: sealed,
                clear,
                error,
            } => {
                seen.insert("rejectSigningKey");
                let k = ContentKey::from_bytes(b64_32(&device_key));
                let expected = match error.as_str() {
                    "invalid" => SigningKeyError::Invalid,
                    "substituted" => SigningKeyError::Substituted,
                    other => panic!("{name}: unknown error {other:?}"),
                };
                assert_eq!(
                    signing::open_signing_key(&k, &agent_id, &device_id, &sealed, clear.as_deref()),
                    Err(expected),
                    "{name}"
                );
                // When it opens under the expected context, it opens to the recorded plaintext: only its
                // content (or the clear copy beside it) is refused.
                if let Ok(opened) =
                    envelope::open(&k, &signing::signing_key_aad(&agent_id, &device_id), &sealed)
                {
                    assert_eq!(opened, plaintext.as_bytes(), "{name}");
                }
                if expected == SigningKeyError::Substituted {
                    assert!(
                        signing::open_signing_key(&k, &agent_id, &device_id, &sealed, None).is_ok(),
                        "{name}: only the clear copy is wrong"
                    );
                }
            }
            SignatureCase::SignedVerdict { name, .. } => {
                panic!("{name}: signed verdicts belong in verdict.json")
            }
            SignatureCase::Export {
                name,
                export,
                records,
            } => {
                seen.insert("export");
                let parsed: AnswerLogExport = serde_json::from_value(export.clone()).expect("an export");
                // The first export is as the library writes it; the others are written otherwise (times in
                // other RFC 3339 forms, a yes's value null) and read as exactly that export.
                let written = serde_json::to_value(&parsed).expect("json");
                match &first_export {
                    None => {
                        assert_eq!(written, export, "{name}: round trip");
                        first_export = Some(written);
                    }
                    Some(first) => {
                        assert_ne!(&export, first, "{name}: written otherwise");
                        assert_eq!(&written, first, "{name}: read as the first export");
                    }
                }
                let bytes = serde_json::to_vec(&export).expect("json");
                assert_eq!(signing::verify_export(&parsed), Ok(records), "{name}");
                assert_eq!(signing::verify_export_json(&bytes), Ok(records), "{name}");
                assert_eq!(reference_verify(&bytes), Ok(records), "{name}: reference");
                assert!(records >= 4, "{name}: one record of each answer type");
            }
            SignatureCase::RejectExport {
                name,
                export,
                export_text,
                index,
                question_id,
                step,
                reason,
                device_id,
                grant,
                grant_use,
            } => {
                seen.insert("rejectExport");
                let bytes = match (&export, &export_text) {
                    (None, Some(text)) => text.clone().into_bytes(),
                    (Some(export), None) => serde_json::to_vec(export).expect("json"),
                    _ => panic!("{name}: export or exportText, not both"),
                };
                let failure = signing::verify_export_json(&bytes).expect_err(&name);
                assert_eq!(
                    (
                        failure.index,
                        failure.question_id.as_str(),
                        failure.step,
                        failure.reason,
                        failure.device_id.as_deref(),
                        failure.grant,
                        failure.grant_use,
                    ),
                    (
                        index,
                        question_id.as_str(),
                        step.as_str(),
                        reason.as_str(),
                        device_id.as_deref(),
                        grant,
                        grant_use,
                    ),
                    "{name}"
                );
                assert_eq!(
                    grant.is_some(),
                    step.starts_with('g') || step.starts_with('u'),
                    "{name}: only grant steps name a grant"
                );
                assert_eq!(
                    grant_use.is_some(),
                    step.starts_with('u'),
                    "{name}: only use steps name a use"
                );
                if grant.is_some() {
                    assert_eq!(index, 0, "{name}");
                    grant_steps.insert(step.clone());
                }
                assert_eq!(export_step(&reason), step, "{name}: step");
                assert_eq!(
                    device_id.is_some(),
                    step == "0a",
                    "{name}: only 0a names a device"
                );
                assert_eq!(failure.unchecked(), step == "shape" || step == "0", "{name}");
                // What serde reads is verified the same way, unless the document is not of the shape at all.
                if let Ok(parsed) = serde_json::from_slice::<AnswerLogExport>(&bytes)
                    && step != "shape"
                {
                    assert_eq!(signing::verify_export(&parsed), Err(failure), "{name}");
                }
                assert_eq!(
                    reference_verify(&bytes),
                    Err((index, step, grant, grant_use)),
                    "{name}: reference"
                );
            }
        }
    }
    assert_eq!(seen.len(), 8, "every case type is present: {seen:?}");
    assert_eq!(answer_types.len(), 4, "yes, no, options and text are all signed");
    assert_eq!(
        grant_matches.len(),
        2,
        "an exact grant and a prefix grant are signed"
    );
    for refusal in GrantRefusal::ALL {
        assert!(refusals.contains(refusal.code()), "a grant refused {refusal:?}");
    }
    // Every grant step but g6's "not among the devices" (a record of the same device verified first).
    for step in [
        "g1", "g2", "g3", "g4", "g5", "g6", "g7", "g8", "g9", "g10", "g11", "u1", "u2", "u3", "u4",
    ] {
        assert!(grant_steps.contains(step), "a grant refused at {step}");
    }
}

/// One case of `verdict.json`: the library's `verdict_signed`, and step 6a from the spec on ring directly.
fn check_signed_verdict(case: SignatureCase) {
    let SignatureCase::SignedVerdict {
        name,
        agent_id,
        question_id,
        self_key,
        own_envelope,
        device_id,
        device_key,
        pinned_key,
        may_approve,
        signing_key_refused,
        require_signed,
        answered_at,
        answer_envelope,
        answer_plaintext,
        now,
        state,
        approved,
        signed,
        rejected_at_step,
        rejected,
    } = case
    else {
        panic!("verdict.json holds signedVerdict cases only");
    };
    let time = |t: &str| Timestamp::parse(t).unwrap_or_else(|| panic!("{name}: time {t:?}"));
    let own = OwnQuestion::open(
        &ContentKey::from_bytes(b64_32(&self_key)),
        &agent_id,
        &question_id,
        &own_envelope,
    )
    .expect("the agent's own copy opens");
    let k = ContentKey::from_bytes(b64_32(&device_key));
    let opened = envelope::open(
        &k,
        &question::answer_aad(&agent_id, &device_id, &question_id),
        &answer_envelope,
    )
    .expect("the answer opens");
    assert_eq!(opened, answer_plaintext.as_bytes(), "{name}: answerPlaintext");
    let report = RelayReport {
        state: QuestionState::Answered,
        answered_by: Some(&device_id),
        answered_at: Some(time(&answered_at)),
        answer_envelope: Some(&answer_envelope),
        channel: None,
    };
    let pinned = pinned_key
        .as_deref()
        .map(|p| pacerelle_core::signing::PublicKey::parse(p).expect("a key"));
    let signing = |d: &str| match pinned.filter(|_| d == device_id) {
        Some(key) => DeviceSigning::Pinned(key),
        None if signing_key_refused => DeviceSigning::MustSign(roster::SIGNING_KEY_REFUSED),
        None if require_signed => DeviceSigning::MustSign(roster::SIGNATURE_REQUIRED),
        None => DeviceSigning::Unsigned,
    };
    let v = question::verdict_with(
        &agent_id,
        &own,
        &report,
        |_| ContentKey::from_bytes(b64_32(&device_key)),
        |d| may_approve.iter().any(|m| m == d),
        signing,
        time(&now),
    );
    assert_eq!(v.state.as_str(), state, "{name}: state");
    assert_eq!(v.approved, approved, "{name}: approved");
    assert_eq!(v.signature.is_some(), signed, "{name}: signed");
    assert_eq!(v.rejected, rejected.as_deref(), "{name}: rejected");
    let step = v.rejected.map(|r| match r {
        "the answer's signature does not verify with the device's signing key"
        | "the answer is not signed, but the device has a signing key"
        | "the answer is signed with a key the agent never received from the device"
        | roster::SIGNING_KEY_REFUSED
        | roster::SIGNATURE_REQUIRED => "6a".into(),
        other => verdict_step(other).to_string(),
    });
    assert_eq!(step, rejected_at_step, "{name}: step");
    // Step 6a from the spec: the signature, checked on ring with the signed bytes written by hand
    // from the agent's own digest, decides exactly when the key is pinned and a signature present.
    let payload: serde_json::Value = serde_json::from_str(&answer_plaintext).expect("json");
    let reference_6a = match (&pinned_key, payload["signature"].as_str()) {
        (Some(key), Some(signature)) => ed25519_verifies(
            &b64(key),
            &reference_signed_bytes(
                &agent_id,
                &device_id,
                &question_id,
                &own.digest,
                payload["answeredAt"].as_str().expect("answeredAt"),
                &payload["answer"],
            ),
            &pacerelle_core::b64::decode(signature).unwrap_or_default(),
        ),
        // No key: an unsigned answer passes only where the roster lets the device answer unsigned.
        (None, None) => !signing_key_refused && !require_signed,
        _ => false,
    };
    assert_eq!(
        reference_6a,
        rejected_at_step.as_deref() != Some("6a"),
        "{name}: 6a (reference)"
    );
    // Accepted with a pinned key means signed; accepted without one, unsigned.
    assert_eq!(signed, state == "answered" && pinned_key.is_some(), "{name}");
}

#[test]
fn verdict_vectors() {
    let cases = load::<SignatureCase>("verdict").cases;
    let mut steps = std::collections::HashSet::new();
    for case in cases {
        if let SignatureCase::SignedVerdict { rejected_at_step, .. } = &case {
            steps.insert(rejected_at_step.clone());
        }
        check_signed_verdict(case);
    }
    // Accepted, rejected at the signature, and a signature that passes before a later check fails.
    assert!(steps.contains(&None) && steps.contains(&Some("6a".into())) && steps.contains(&Some("7".into())));
}

#[test]
fn signature_vectors_agree_with_the_other_files() {
    let cases = load::<SignatureCase>("signature").cases;
    // The sealed signing key uses the vector device's key of kdf.json.
    let device_key = keys::device_key(&[0x22; 32], "ag_vector", "dv_vector");
    assert!(cases.iter().any(|c| matches!(
        c,
        SignatureCase::SealedSigningKey { device_key: k, .. } if b64_32(k) == device_key.to_bytes()
    )));
    // Each signed answer is a record of the export, with the same signature and key.
    let export = cases
        .iter()
        .find_map(|c| match c {
            SignatureCase::Export { export, .. } => Some(export.clone()),
            _ => None,
        })
        .expect("an export case");
    let mut signed = 0;
    for case in &cases {
        if let SignatureCase::SignedAnswer {
            question_id,
            question_digest,
            signature,
            public_key,
            answer,
            ..
        } = case
        {
            signed += 1;
            let record = export["records"]
                .as_array()
                .expect("records")
                .iter()
                .find(|r| r["questionId"] == question_id.as_str())
                .unwrap_or_else(|| panic!("the export has a record for {question_id}"));
            assert_eq!(record["questionDigest"], question_digest.as_str());
            assert_eq!(record["signature"], signature.as_str());
            assert_eq!(record["signingKey"], public_key.as_str());
            assert_eq!(&record["answer"], answer);
        }
    }
    // Every record but the one that needs several approvals (its signatures are checked by the export's own
    // verification, and by its rejectExport cases).
    let single = export["records"]
        .as_array()
        .expect("records")
        .iter()
        .filter(|r| r["approvals"].is_null())
        .count();
    assert_eq!(signed, single);
    // The export's grant is the first signed grant: the same grant, given by its record's device at its
    // record's time, to the question (bytes, digest and offer) of its record.
    let grant = &export["grants"][0];
    let record = export["records"]
        .as_array()
        .expect("records")
        .iter()
        .find(|r| r["questionId"] == grant["id"])
        .expect("the grant's record");
    let question: serde_json::Value =
        serde_json::from_slice(&b64(grant["question"].as_str().expect("question"))).expect("a question");
    assert_eq!(grant["question"], record["question"]);
    let vector = cases
        .iter()
        .find_map(|c| match c {
            SignatureCase::SignedGrant {
                question_id,
                device_id,
                question_digest,
                granted_at,
                offer,
                grant: signed,
                ..
            } if signed == &grant["grant"] => {
                Some((question_id, device_id, question_digest, granted_at, offer))
            }
            _ => None,
        })
        .expect("the export's grant is a signedGrant case");
    assert_eq!(
        (
            vector.0.as_str(),
            vector.1.as_str(),
            vector.2.as_str(),
            vector.3.as_str(),
            vector.4
        ),
        (
            grant["id"].as_str().expect("id"),
            record["deviceId"].as_str().expect("deviceId"),
            record["questionDigest"].as_str().expect("questionDigest"),
            record["answeredAt"].as_str().expect("answeredAt"),
            &question["grants"],
        )
    );

    // envelope.json holds qst_deploy as its device receives and answers it: the question's bytes are the
    // export's, the signed answer carries the export's digest and signature (the plaintext and envelope of
    // verdict.json's first case), and its copy opens with the question's answer key.
    let envelopes = load::<EnvelopeCase>("envelope").cases;
    let (_, question_plain, _) = seal_case(
        &envelopes,
        "signed question qst_deploy, the device's copy (with an answer key)",
    );
    let (_, answer_plain, answer_env) = seal_case(
        &envelopes,
        "signed answer: yes to qst_deploy, naming its digest, with dv_vector's signature",
    );
    let (copy_key, copy_plain, copy_env) = seal_case(
        &envelopes,
        "signed answer's copy, sealed with qst_deploy's answer key (kind answer_copy)",
    );
    let record = &export["records"][0];
    assert_eq!(record["questionId"], "qst_deploy");
    assert_eq!(
        b64(record["question"].as_str().expect("question")),
        question_plain.as_bytes()
    );
    let answer: AnswerPayload = serde_json::from_str(&answer_plain).expect("an answer");
    assert_eq!(
        answer.question_digest.as_deref(),
        record["questionDigest"].as_str()
    );
    assert_eq!(answer.signature.as_deref(), record["signature"].as_str());
    assert_eq!(
        serde_json::to_value(&answer.answer).expect("json"),
        record["answer"]
    );
    assert_eq!(copy_plain, answer_plain, "the copy is the same bytes");
    let question: QuestionPayload = serde_json::from_str(&question_plain).expect("a question");
    assert_eq!(question.answer_key.as_deref(), Some(copy_key.as_str()));
    assert_eq!(
        envelope::open(
            &question.answer_key().expect("an answer key"),
            &question::answer_copy_aad("ag_vector", "dv_vector", "qst_deploy"),
            &copy_env,
        )
        .expect("the copy opens"),
        answer_plain.as_bytes()
    );
    let (answer_plaintext, answer_envelope) = load::<SignatureCase>("verdict")
        .cases
        .into_iter()
        .find_map(|c| match c {
            SignatureCase::SignedVerdict {
                name,
                answer_plaintext,
                answer_envelope,
                ..
            } if name == "a signed yes, the key pinned: approved, signed" => {
                Some((answer_plaintext, answer_envelope))
            }
            _ => None,
        })
        .expect("verdict.json has the signed yes");
    assert_eq!(
        (answer_plaintext, answer_envelope),
        (answer_plain, answer_env),
        "verdict.json's signed yes is envelope.json's"
    );
}

// ------------------------------------------------------------------------------------------- activity

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ActivityCase {
    name: String,
    presence: pacerelle_core::wire::Presence,
    in_progress: u64,
    open_questions: u64,
    activity: pacerelle_core::wire::Activity,
}

#[test]
fn activity_words_follow_the_one_rule() {
    use pacerelle_core::wire::Activity;
    for case in load::<ActivityCase>("activity").cases {
        let word = Activity::of(case.presence, case.in_progress, case.open_questions);
        assert_eq!(word, case.activity, "{}", case.name);
        assert_eq!(
            serde_json::to_value(word).expect("json"),
            serde_json::Value::from(word.as_str()),
            "{}",
            case.name
        );
    }
}
