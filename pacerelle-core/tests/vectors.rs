//! Known-answer vectors (`tests/vectors/*.json`, specified in `docs/crypto.md`).
//!
//! Every file is checked in both directions: the library derives and seals exactly the recorded outputs,
//! and opens or parses the recorded outputs back into the inputs. A few checks use an independent
//! construction (HKDF written on HMAC, the additional data written by hand, AES-GCM called directly) so
//! that a mistake shared by the library and the generator would still show. The primitives themselves are
//! checked against RFC 5869 test case 1 and the GCM specification's test cases 14 and 16.

use pacerelle_core::checkpoint::CheckpointPayload;
use pacerelle_core::envelope::{self, Aad, Direction};
use pacerelle_core::keys::{self, ContentKey};
use pacerelle_core::message::{ReplyPayload, TaskPayload};
use pacerelle_core::pairing::{self, OfferPayload, PairingSecret};
use pacerelle_core::question::{AnswerPayload, QuestionPayload};
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
        "answer" => round_trip::<AnswerPayload>(plaintext),
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
