//! Web Push (RFC 8291) against the known answer of RFC 8291 Appendix A (`tests/vectors/webpush.json`), in
//! both directions, with the intermediate values recomputed independently (HKDF and AES-GCM called on `ring`
//! directly, ECDH on `p256`), so a mistake shared by the library and the vector file would still show.

use pacerelle_core::b64;
use pacerelle_core::webpush::{self, SubscriptionKeys, WebPushError};
use ring::aead::{AES_128_GCM, Aad, LessSafeKey, Nonce, UnboundKey};
use ring::hkdf;
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Case {
    name: String,
    plaintext: String,
    as_private: String,
    as_public: String,
    ua_private: String,
    ua_public: String,
    auth: String,
    salt: String,
    ecdh_secret: String,
    prk_key: String,
    ikm: String,
    prk: String,
    cek: String,
    nonce: String,
    body: String,
}

#[derive(Deserialize)]
struct File {
    description: String,
    cases: Vec<Case>,
}

fn cases() -> Vec<Case> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/webpush.json");
    let text = std::fs::read_to_string(&path).expect("webpush.json");
    let file: File = serde_json::from_str(&text).expect("valid JSON");
    assert!(!file.description.is_empty() && !file.cases.is_empty());
    file.cases
}

fn b(text: &str) -> Vec<u8> {
    b64::decode(text).unwrap_or_else(|| panic!("not base64url: {text}"))
}

struct Len(usize);
impl hkdf::KeyType for Len {
    fn len(&self) -> usize {
        self.0
    }
}

fn extract_expand(salt: &[u8], ikm: &[u8], info: &[&[u8]], len: usize) -> Vec<u8> {
    let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, salt).extract(ikm);
    let mut out = vec![0; len];
    prk.expand(info, Len(len))
        .expect("expand")
        .fill(&mut out)
        .expect("fill");
    out
}

fn public_of(private: &[u8]) -> Vec<u8> {
    use p256::elliptic_curve::sec1::ToEncodedPoint;
    let secret = p256::SecretKey::from_slice(private).expect("scalar");
    secret.public_key().to_encoded_point(false).as_bytes().to_vec()
}

#[test]
fn rfc_8291_appendix_a_encrypts_and_decrypts_to_the_recorded_bytes() {
    for case in cases() {
        let name = &case.name;
        let body = b(&case.body);
        let salt: [u8; 16] = b(&case.salt).try_into().expect("16 bytes");
        // Encrypt with the example's fixed sender key and salt: exactly the recorded body.
        let sealed = webpush::encrypt_with(
            case.plaintext.as_bytes(),
            &b(&case.ua_public),
            &b(&case.auth),
            &b(&case.as_private),
            &salt,
        )
        .expect("encrypts");
        assert_eq!(b64::encode(&sealed), case.body, "{name}: body");
        // The user agent's keys open it.
        let keys = SubscriptionKeys::from_parts(&b(&case.ua_private), &b(&case.auth)).expect("keys");
        assert_eq!(
            keys.public_key().as_slice(),
            b(&case.ua_public),
            "{name}: uaPublic"
        );
        assert_eq!(
            keys.decrypt(&body).expect("decrypts"),
            case.plaintext.as_bytes(),
            "{name}"
        );
    }
}

#[test]
fn rfc_8291_appendix_a_intermediate_values_recomputed_independently() {
    for case in cases() {
        let name = &case.name;
        let (ua_public, as_public) = (b(&case.ua_public), b(&case.as_public));
        assert_eq!(public_of(&b(&case.as_private)), as_public, "{name}: asPublic");
        assert_eq!(public_of(&b(&case.ua_private)), ua_public, "{name}: uaPublic");
        let ua_secret = p256::SecretKey::from_slice(&b(&case.ua_private)).expect("scalar");
        let as_point = p256::PublicKey::from_sec1_bytes(&as_public).expect("point");
        let shared = p256::ecdh::diffie_hellman(ua_secret.to_nonzero_scalar(), as_point.as_affine());
        let ecdh: &[u8] = shared.raw_secret_bytes();
        assert_eq!(ecdh, b(&case.ecdh_secret), "{name}: ecdhSecret");
        // HKDF-Extract is HMAC(salt, ikm).
        let prk_key = ring::hmac::sign(
            &ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &b(&case.auth)),
            ecdh,
        );
        assert_eq!(prk_key.as_ref(), b(&case.prk_key), "{name}: prkKey");
        let ikm = extract_expand(
            &b(&case.auth),
            ecdh,
            &[b"WebPush: info\0", &ua_public, &as_public],
            32,
        );
        assert_eq!(ikm, b(&case.ikm), "{name}: ikm");
        let prk = ring::hmac::sign(
            &ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &b(&case.salt)),
            &ikm,
        );
        assert_eq!(prk.as_ref(), b(&case.prk), "{name}: prk");
        let cek = extract_expand(&b(&case.salt), &ikm, &[b"Content-Encoding: aes128gcm\0"], 16);
        assert_eq!(cek, b(&case.cek), "{name}: cek");
        let nonce = extract_expand(&b(&case.salt), &ikm, &[b"Content-Encoding: nonce\0"], 12);
        assert_eq!(nonce, b(&case.nonce), "{name}: nonce");
        // The record, opened with AES-128-GCM directly: plaintext ‖ 0x02.
        let body = b(&case.body);
        assert_eq!(&body[..16], b(&case.salt).as_slice());
        assert_eq!(u32::from_be_bytes(body[16..20].try_into().expect("4")), 4096);
        assert_eq!(body[20], 65);
        assert_eq!(&body[21..86], as_public.as_slice());
        let key = LessSafeKey::new(UnboundKey::new(&AES_128_GCM, &cek).expect("key"));
        let mut record = body[86..].to_vec();
        let plain = key
            .open_in_place(
                Nonce::try_assume_unique_for_key(&nonce).expect("12"),
                Aad::empty(),
                &mut record,
            )
            .expect("opens");
        let mut expected = case.plaintext.as_bytes().to_vec();
        expected.push(2);
        assert_eq!(plain, expected.as_slice(), "{name}: record");
    }
}

#[test]
fn random_encryptions_differ_and_all_open() {
    let keys = SubscriptionKeys::generate().expect("keys");
    let a = webpush::encrypt(b"same", keys.public_key(), keys.auth()).expect("a");
    let b = webpush::encrypt(b"same", keys.public_key(), keys.auth()).expect("b");
    assert_ne!(a[..16], b[..16], "a fresh salt");
    assert_ne!(a[21..86], b[21..86], "a fresh sender key");
    assert_eq!(keys.decrypt(&a).expect("a"), b"same");
    assert_eq!(keys.decrypt(&b).expect("b"), b"same");
}

#[test]
fn arbitrary_bytes_never_panic() {
    let keys = SubscriptionKeys::generate().expect("keys");
    let valid = webpush::encrypt(b"payload", keys.public_key(), keys.auth()).expect("sealed");
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for round in 0..2000 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let mut bytes = if round % 2 == 0 {
            valid.clone()
        } else {
            vec![0; (seed % 300) as usize]
        };
        for _ in 0..1 + (seed % 4) {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            if !bytes.is_empty() {
                let i = (seed as usize) % bytes.len();
                bytes[i] = (seed >> 32) as u8;
            }
        }
        if bytes == valid {
            continue;
        }
        let result = keys.decrypt(&bytes);
        // The record size is not authenticated: a larger one still holds the one record.
        if result.as_deref() == Ok(b"payload".as_slice()) {
            assert_eq!(bytes[..16], valid[..16]);
            assert_eq!(bytes[20..], valid[20..]);
            continue;
        }
        assert!(
            matches!(
                result,
                Err(WebPushError::Malformed(_)
                    | WebPushError::Decrypt
                    | WebPushError::InvalidPublicKey
                    | WebPushError::Padding)
            ),
            "{result:?}"
        );
    }
}
