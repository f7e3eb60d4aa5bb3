//! Web Push message encryption (RFC 8291, `aes128gcm` of RFC 8188) and VAPID (RFC 8292), once for both sides.
//!
//! This is transport encryption between the relay and one push subscription (a browser or an app install),
//! not content encryption: what the relay pushes is metadata it already holds and the device's end-to-end
//! envelope, so nothing here needs the core's `content` feature.
//!
//! - The relay encrypts each push with [`encrypt`] to the subscription's public key (`p256dh`) and auth
//!   secret: a fresh ephemeral P-256 key and a random salt per message, one record, record size 4096, the
//!   last-record delimiter `0x02` and no further padding.
//! - A device (the phone SDK) keeps a [`SubscriptionKeys`] — a P-256 key pair and a 16-byte auth secret —
//!   and opens a push body with [`SubscriptionKeys::decrypt`].
//! - The relay signs each request with its [`VapidKey`] (ES256 JWT, `Authorization: vapid t=…, k=…`).
//!
//! `ring` does the HKDF, AES-128-GCM, the relay's ephemeral ECDH and ES256. `ring` cannot import a stored
//! ECDH private key nor export a generated one, and a subscription's key must outlive the process (it sits in
//! the device's credentials), so the device side — key generation and decryption — computes ECDH with the
//! `p256` crate (RustCrypto). The layout is in `docs/crypto.md`, "Web Push".

use ring::aead::{AES_128_GCM, Aad, LessSafeKey, Nonce, UnboundKey};
use ring::agreement;
use ring::hkdf;
use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};

use crate::b64;

/// The record size written in the header of every push the relay sends (RFC 8291 §4 recommends 4096).
pub const RECORD_SIZE: u32 = 4096;
/// Length of an uncompressed P-256 public key (`0x04 ‖ x ‖ y`), as `p256dh` and the VAPID key are sent.
pub const PUBLIC_KEY_LEN: usize = 65;
/// Length of the auth secret.
pub const AUTH_LEN: usize = 16;
/// Length of a P-256 private key (the scalar, big-endian).
pub const PRIVATE_KEY_LEN: usize = 32;
/// Header of an `aes128gcm` body as the relay writes it: salt (16) ‖ rs (4) ‖ idlen (1) ‖ keyid (65).
pub const HEADER_LEN: usize = 16 + 4 + 1 + PUBLIC_KEY_LEN;
/// The largest encrypted body push services must accept (RFC 8030 §7.2).
pub const MAX_BODY: usize = 4096;
/// The largest plaintext that fits [`MAX_BODY`] in one record: 4096 − 86 (header) − 16 (tag) − 1 (delimiter).
pub const MAX_PLAINTEXT: usize = MAX_BODY - HEADER_LEN - TAG_LEN - 1;

const TAG_LEN: usize = 16;
const SALT_LEN: usize = 16;

/// Why a push could not be encrypted or decrypted, or a key could not be used. Carries no key material.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WebPushError {
    /// A public key that is not 65 bytes `0x04 ‖ x ‖ y` of a point on P-256.
    #[error("not an uncompressed P-256 public key")]
    InvalidPublicKey,
    /// A private key that is not 32 bytes of a valid P-256 scalar, or a VAPID key that is not PKCS#8.
    #[error("not a usable P-256 private key")]
    InvalidPrivateKey,
    /// An auth secret that is not 16 bytes.
    #[error("the auth secret is not 16 bytes")]
    InvalidAuth,
    /// The plaintext does not fit one record of the body size limit.
    #[error("the plaintext is {len} bytes; at most {MAX_PLAINTEXT} fit one push")]
    TooLarge {
        /// The plaintext's length.
        len: usize,
    },
    /// A body that is not one `aes128gcm` record: too short, a bad header, several records.
    #[error("malformed aes128gcm body: {0}")]
    Malformed(&'static str),
    /// Authentication failed: another subscription's keys, or altered bytes.
    #[error("the push does not decrypt with this subscription's keys")]
    Decrypt,
    /// It decrypted, but the record does not end with the last-record delimiter `0x02` and zero padding.
    #[error("the decrypted record has no last-record delimiter")]
    Padding,
    /// The system random generator or a key operation failed.
    #[error("random generator or key operation failed")]
    Random,
}

type Result<T> = std::result::Result<T, WebPushError>;

/// `n` bytes of HKDF output.
struct Len(usize);

impl hkdf::KeyType for Len {
    fn len(&self) -> usize {
        self.0
    }
}

fn hkdf_expand(prk: &hkdf::Prk, info: &[&[u8]], out: &mut [u8]) -> Result<()> {
    prk.expand(info, Len(out.len()))
        .and_then(|okm| okm.fill(out))
        .map_err(|_| WebPushError::Random)
}

/// The content-encryption key and nonce of RFC 8291 §3.3–3.4.
fn derive(
    ecdh_secret: &[u8],
    auth: &[u8; AUTH_LEN],
    ua_public: &[u8; PUBLIC_KEY_LEN],
    as_public: &[u8; PUBLIC_KEY_LEN],
    salt: &[u8; SALT_LEN],
) -> Result<([u8; 16], [u8; 12])> {
    // PRK_key = HKDF-Extract(auth_secret, ecdh_secret); IKM = HKDF-Expand(PRK_key, key_info, 32).
    let prk_key = hkdf::Salt::new(hkdf::HKDF_SHA256, auth).extract(ecdh_secret);
    let mut ikm = [0u8; 32];
    hkdf_expand(&prk_key, &[b"WebPush: info\0", ua_public, as_public], &mut ikm)?;
    // PRK = HKDF-Extract(salt, IKM); CEK and NONCE as in RFC 8188 §2.2–2.3.
    let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, salt).extract(&ikm);
    let mut cek = [0u8; 16];
    hkdf_expand(&prk, &[b"Content-Encoding: aes128gcm\0"], &mut cek)?;
    let mut nonce = [0u8; 12];
    hkdf_expand(&prk, &[b"Content-Encoding: nonce\0"], &mut nonce)?;
    Ok((cek, nonce))
}

fn aead_key(cek: &[u8; 16]) -> Result<LessSafeKey> {
    UnboundKey::new(&AES_128_GCM, cek)
        .map(LessSafeKey::new)
        .map_err(|_| WebPushError::Random)
}

/// Checks that `bytes` is an uncompressed point on P-256 and returns it as an array.
pub fn parse_public_key(bytes: &[u8]) -> Result<[u8; PUBLIC_KEY_LEN]> {
    let array: [u8; PUBLIC_KEY_LEN] = bytes.try_into().map_err(|_| WebPushError::InvalidPublicKey)?;
    if array[0] != 0x04 {
        return Err(WebPushError::InvalidPublicKey);
    }
    p256::PublicKey::from_sec1_bytes(&array).map_err(|_| WebPushError::InvalidPublicKey)?;
    Ok(array)
}

fn parse_auth(bytes: &[u8]) -> Result<[u8; AUTH_LEN]> {
    bytes.try_into().map_err(|_| WebPushError::InvalidAuth)
}

/// Encrypts `plaintext` for the subscription whose keys are `p256dh` (65 bytes) and `auth` (16 bytes): the
/// body of a Web Push request with `Content-Encoding: aes128gcm`. A fresh ephemeral key and salt each time.
pub fn encrypt(plaintext: &[u8], p256dh: &[u8], auth: &[u8]) -> Result<Vec<u8>> {
    let ua_public = parse_public_key(p256dh)?;
    let auth = parse_auth(auth)?;
    if plaintext.len() > MAX_PLAINTEXT {
        return Err(WebPushError::TooLarge { len: plaintext.len() });
    }
    let rng = SystemRandom::new();
    let mut salt = [0u8; SALT_LEN];
    rng.fill(&mut salt).map_err(|_| WebPushError::Random)?;
    let ephemeral = agreement::EphemeralPrivateKey::generate(&agreement::ECDH_P256, &rng)
        .map_err(|_| WebPushError::Random)?;
    let as_public: [u8; PUBLIC_KEY_LEN] = ephemeral
        .compute_public_key()
        .map_err(|_| WebPushError::Random)?
        .as_ref()
        .try_into()
        .map_err(|_| WebPushError::Random)?;
    let peer = agreement::UnparsedPublicKey::new(&agreement::ECDH_P256, ua_public);
    let secret = agreement::agree_ephemeral(ephemeral, &peer, |shared| {
        <[u8; 32]>::try_from(shared).map_err(|_| WebPushError::Random)
    })
    .map_err(|_| WebPushError::InvalidPublicKey)??;
    seal(plaintext, &ua_public, &auth, &as_public, &secret, &salt)
}

/// [`encrypt`] with a given sender key and salt, for known-answer tests (RFC 8291 Appendix A). Never use a
/// fixed key or salt for a real push.
#[doc(hidden)]
pub fn encrypt_with(
    plaintext: &[u8],
    p256dh: &[u8],
    auth: &[u8],
    sender_private: &[u8],
    salt: &[u8; SALT_LEN],
) -> Result<Vec<u8>> {
    let ua_public = parse_public_key(p256dh)?;
    let auth = parse_auth(auth)?;
    if plaintext.len() > MAX_PLAINTEXT {
        return Err(WebPushError::TooLarge { len: plaintext.len() });
    }
    let sender = secret_key(sender_private)?;
    let as_public = uncompressed(&sender.public_key());
    let secret = ecdh(&sender, &ua_public)?;
    seal(plaintext, &ua_public, &auth, &as_public, &secret, salt)
}

fn seal(
    plaintext: &[u8],
    ua_public: &[u8; PUBLIC_KEY_LEN],
    auth: &[u8; AUTH_LEN],
    as_public: &[u8; PUBLIC_KEY_LEN],
    ecdh_secret: &[u8; 32],
    salt: &[u8; SALT_LEN],
) -> Result<Vec<u8>> {
    let (cek, nonce) = derive(ecdh_secret, auth, ua_public, as_public, salt)?;
    let mut body = Vec::with_capacity(HEADER_LEN + plaintext.len() + 1 + TAG_LEN);
    body.extend_from_slice(salt);
    body.extend_from_slice(&RECORD_SIZE.to_be_bytes());
    body.push(PUBLIC_KEY_LEN as u8);
    body.extend_from_slice(as_public);
    let mut record = Vec::with_capacity(plaintext.len() + 1 + TAG_LEN);
    record.extend_from_slice(plaintext);
    // The last (and only) record: delimiter 0x02, no further padding.
    record.push(0x02);
    aead_key(&cek)?
        .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::empty(), &mut record)
        .map_err(|_| WebPushError::Random)?;
    body.extend_from_slice(&record);
    Ok(body)
}

fn secret_key(bytes: &[u8]) -> Result<p256::SecretKey> {
    p256::SecretKey::from_slice(bytes).map_err(|_| WebPushError::InvalidPrivateKey)
}

fn uncompressed(public: &p256::PublicKey) -> [u8; PUBLIC_KEY_LEN] {
    use p256::elliptic_curve::sec1::ToEncodedPoint;
    let point = public.to_encoded_point(false);
    let mut out = [0u8; PUBLIC_KEY_LEN];
    out.copy_from_slice(point.as_bytes());
    out
}

fn ecdh(secret: &p256::SecretKey, public: &[u8; PUBLIC_KEY_LEN]) -> Result<[u8; 32]> {
    let public = p256::PublicKey::from_sec1_bytes(public).map_err(|_| WebPushError::InvalidPublicKey)?;
    let shared = p256::ecdh::diffie_hellman(secret.to_nonzero_scalar(), public.as_affine());
    let mut out = [0u8; 32];
    out.copy_from_slice(shared.raw_secret_bytes());
    Ok(out)
}

/// A push subscription's keys, as the device keeps them: the P-256 key pair whose public half is `p256dh`,
/// and the auth secret. `Debug` shows only the public key.
#[derive(Clone)]
pub struct SubscriptionKeys {
    private: [u8; PRIVATE_KEY_LEN],
    public: [u8; PUBLIC_KEY_LEN],
    auth: [u8; AUTH_LEN],
}

impl std::fmt::Debug for SubscriptionKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubscriptionKeys")
            .field("p256dh", &b64::encode(&self.public))
            .finish_non_exhaustive()
    }
}

impl SubscriptionKeys {
    /// A new key pair and auth secret from the system random generator.
    pub fn generate() -> Result<SubscriptionKeys> {
        let rng = SystemRandom::new();
        let mut auth = [0u8; AUTH_LEN];
        rng.fill(&mut auth).map_err(|_| WebPushError::Random)?;
        // A random 32-byte string is a valid scalar unless it is zero or ≥ the group order (probability
        // about 2^-32); draw again then.
        for _ in 0..16 {
            let mut private = [0u8; PRIVATE_KEY_LEN];
            rng.fill(&mut private).map_err(|_| WebPushError::Random)?;
            if let Ok(keys) = SubscriptionKeys::from_parts(&private, &auth) {
                return Ok(keys);
            }
        }
        Err(WebPushError::Random)
    }

    /// The keys stored earlier: the 32-byte private key ([`SubscriptionKeys::private_key`]) and the auth
    /// secret.
    pub fn from_parts(private: &[u8], auth: &[u8]) -> Result<SubscriptionKeys> {
        let secret = secret_key(private)?;
        Ok(SubscriptionKeys {
            private: private.try_into().map_err(|_| WebPushError::InvalidPrivateKey)?,
            public: uncompressed(&secret.public_key()),
            auth: parse_auth(auth)?,
        })
    }

    /// The private key, 32 bytes, to store with the device's credentials. Secret.
    pub fn private_key(&self) -> &[u8; PRIVATE_KEY_LEN] {
        &self.private
    }

    /// The public key: `p256dh`, 65 bytes uncompressed.
    pub fn public_key(&self) -> &[u8; PUBLIC_KEY_LEN] {
        &self.public
    }

    /// The auth secret, 16 bytes.
    pub fn auth(&self) -> &[u8; AUTH_LEN] {
        &self.auth
    }

    /// Decrypts the body of a push sent to this subscription (one `aes128gcm` record).
    pub fn decrypt(&self, body: &[u8]) -> Result<Vec<u8>> {
        if body.len() < 21 {
            return Err(WebPushError::Malformed("shorter than the header"));
        }
        let salt: [u8; SALT_LEN] = body[..16]
            .try_into()
            .map_err(|_| WebPushError::Malformed("salt"))?;
        let rs = u32::from_be_bytes(
            body[16..20]
                .try_into()
                .map_err(|_| WebPushError::Malformed("record size"))?,
        );
        let idlen = usize::from(body[20]);
        if idlen != PUBLIC_KEY_LEN {
            return Err(WebPushError::Malformed("the key id is not a 65-byte public key"));
        }
        if body.len() < HEADER_LEN + TAG_LEN + 1 {
            return Err(WebPushError::Malformed("no record"));
        }
        if rs < (TAG_LEN + 2) as u32 {
            return Err(WebPushError::Malformed("record size below 18"));
        }
        let record = &body[HEADER_LEN..];
        if record.len() > rs as usize {
            return Err(WebPushError::Malformed("more than one record"));
        }
        let as_public = parse_public_key(&body[21..HEADER_LEN])?;
        let secret = ecdh(&secret_key(&self.private)?, &as_public)?;
        let (cek, nonce) = derive(&secret, &self.auth, &self.public, &as_public, &salt)?;
        let mut buffer = record.to_vec();
        let plain = aead_key(&cek)?
            .open_in_place(Nonce::assume_unique_for_key(nonce), Aad::empty(), &mut buffer)
            .map_err(|_| WebPushError::Decrypt)?;
        // Padding: zeros after the delimiter; the last record's delimiter is 0x02.
        let end = plain.iter().rposition(|&b| b != 0).ok_or(WebPushError::Padding)?;
        if plain[end] != 0x02 {
            return Err(WebPushError::Padding);
        }
        let len = end;
        buffer.truncate(len);
        Ok(buffer)
    }
}

/// The Topic of a question's pushes (RFC 8030 §5.4): the first 32 characters of base64url(SHA-256(id)), so a
/// newer push about the same question replaces the older one on the push service.
pub fn topic(question_id: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, question_id.as_bytes());
    let mut text = b64::encode(digest.as_ref());
    text.truncate(32);
    text
}

/// The relay's VAPID key (RFC 8292): an ES256 key pair kept as PKCS#8.
pub struct VapidKey {
    pair: EcdsaKeyPair,
}

impl std::fmt::Debug for VapidKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VapidKey")
            .field("public", &self.public_key_b64())
            .finish_non_exhaustive()
    }
}

impl VapidKey {
    /// A new key pair, as PKCS#8 bytes to store (secret).
    pub fn generate_pkcs8() -> Result<Vec<u8>> {
        EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new())
            .map(|doc| doc.as_ref().to_vec())
            .map_err(|_| WebPushError::Random)
    }

    /// The key pair stored as PKCS#8 (what [`VapidKey::generate_pkcs8`] returned).
    pub fn from_pkcs8(pkcs8: &[u8]) -> Result<VapidKey> {
        EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8, &SystemRandom::new())
            .map(|pair| VapidKey { pair })
            .map_err(|_| WebPushError::InvalidPrivateKey)
    }

    /// The public key, 65 bytes uncompressed: the `applicationServerKey` of `PushManager.subscribe`.
    pub fn public_key(&self) -> &[u8] {
        self.pair.public_key().as_ref()
    }

    /// The public key in base64url without padding, as `k=` and `GET /v1/push/key` carry it.
    pub fn public_key_b64(&self) -> String {
        b64::encode(self.public_key())
    }

    /// A signed JWT `{"aud": audience, "exp": expires (unix seconds), "sub": subject}` (ES256).
    pub fn jwt(&self, audience: &str, expires: i64, subject: &str) -> Result<String> {
        let header = b64::encode(br#"{"typ":"JWT","alg":"ES256"}"#);
        let claims = serde_json::json!({"aud": audience, "exp": expires, "sub": subject});
        let claims = b64::encode(claims.to_string().as_bytes());
        let signing_input = format!("{header}.{claims}");
        let signature = self
            .pair
            .sign(&SystemRandom::new(), signing_input.as_bytes())
            .map_err(|_| WebPushError::Random)?;
        Ok(format!("{signing_input}.{}", b64::encode(signature.as_ref())))
    }

    /// The value of the `Authorization` header: `vapid t=<JWT>, k=<public key>`.
    pub fn authorization(&self, audience: &str, expires: i64, subject: &str) -> Result<String> {
        Ok(format!(
            "vapid t={}, k={}",
            self.jwt(audience, expires, subject)?,
            self.public_key_b64()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_trip_at_every_size_up_to_the_limit() {
        let keys = SubscriptionKeys::generate().expect("keys");
        for len in [0, 1, 100, MAX_PLAINTEXT - 1, MAX_PLAINTEXT] {
            let plaintext = vec![0x5a; len];
            let body = encrypt(&plaintext, keys.public_key(), keys.auth()).expect("encrypted");
            assert_eq!(body.len(), HEADER_LEN + len + 1 + TAG_LEN);
            assert!(body.len() <= MAX_BODY);
            assert_eq!(keys.decrypt(&body).expect("decrypted"), plaintext);
        }
        assert_eq!(
            encrypt(&vec![0; MAX_PLAINTEXT + 1], keys.public_key(), keys.auth()),
            Err(WebPushError::TooLarge {
                len: MAX_PLAINTEXT + 1
            })
        );
    }

    #[test]
    fn stored_keys_come_back_the_same() {
        let keys = SubscriptionKeys::generate().expect("keys");
        let again = SubscriptionKeys::from_parts(keys.private_key(), keys.auth()).expect("parts");
        assert_eq!(again.public_key(), keys.public_key());
        let body = encrypt(b"hello", keys.public_key(), keys.auth()).expect("encrypted");
        assert_eq!(again.decrypt(&body).expect("decrypted"), b"hello");
        assert!(!format!("{keys:?}").contains(&b64::encode(keys.private_key())));
    }

    #[test]
    fn another_subscription_or_an_altered_byte_does_not_decrypt() {
        let keys = SubscriptionKeys::generate().expect("keys");
        let other = SubscriptionKeys::generate().expect("keys");
        let body = encrypt(b"for one device", keys.public_key(), keys.auth()).expect("encrypted");
        assert_eq!(other.decrypt(&body), Err(WebPushError::Decrypt));
        let wrong_auth = SubscriptionKeys::from_parts(keys.private_key(), other.auth()).expect("parts");
        assert_eq!(wrong_auth.decrypt(&body), Err(WebPushError::Decrypt));
        // The salt, the sender key, the ciphertext, the tag (the record size is not authenticated: any size
        // that holds the one record is the same message).
        for i in [0, 30, HEADER_LEN, body.len() - 1] {
            let mut altered = body.clone();
            altered[i] ^= 1;
            assert!(keys.decrypt(&altered).is_err(), "byte {i}");
        }
    }

    #[test]
    fn malformed_bodies_and_keys_are_typed_errors() {
        let keys = SubscriptionKeys::generate().expect("keys");
        let body = encrypt(b"x", keys.public_key(), keys.auth()).expect("encrypted");
        for len in 0..body.len() {
            assert!(keys.decrypt(&body[..len]).is_err(), "cut at {len}");
        }
        let mut idlen = body.clone();
        idlen[20] = 64;
        assert!(matches!(keys.decrypt(&idlen), Err(WebPushError::Malformed(_))));
        let mut rs = body.clone();
        rs[16..20].copy_from_slice(&4u32.to_be_bytes());
        assert!(matches!(keys.decrypt(&rs), Err(WebPushError::Malformed(_))));
        let mut not_a_point = body.clone();
        not_a_point[22] ^= 0xff;
        assert!(keys.decrypt(&not_a_point).is_err());

        assert_eq!(parse_public_key(&[4; 65]), Err(WebPushError::InvalidPublicKey));
        assert_eq!(
            parse_public_key(&keys.public_key()[..64]),
            Err(WebPushError::InvalidPublicKey)
        );
        assert_eq!(
            encrypt(b"x", &[4; 65], keys.auth()),
            Err(WebPushError::InvalidPublicKey)
        );
        assert_eq!(
            encrypt(b"x", keys.public_key(), &[0; 15]),
            Err(WebPushError::InvalidAuth)
        );
        assert_eq!(
            SubscriptionKeys::from_parts(&[0; 32], &[0; 16]).map(|_| ()),
            Err(WebPushError::InvalidPrivateKey)
        );
        assert_eq!(
            SubscriptionKeys::from_parts(&[0xff; 32], &[0; 16]).map(|_| ()),
            Err(WebPushError::InvalidPrivateKey)
        );
        assert!(VapidKey::from_pkcs8(b"not pkcs8").is_err());
    }

    #[test]
    fn a_record_without_its_delimiter_is_refused() {
        // Sealed by hand with the derived key but without the 0x02 delimiter.
        let keys = SubscriptionKeys::generate().expect("keys");
        let sender = SubscriptionKeys::generate().expect("sender");
        let salt = [7u8; SALT_LEN];
        let secret = ecdh(&secret_key(sender.private_key()).expect("key"), keys.public_key()).expect("ecdh");
        let (cek, nonce) = derive(
            &secret,
            keys.auth(),
            keys.public_key(),
            sender.public_key(),
            &salt,
        )
        .expect("derived");
        for record_plain in [&b"no delimiter\x01"[..], &b"\0\0\0"[..]] {
            let mut record = record_plain.to_vec();
            aead_key(&cek)
                .expect("key")
                .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::empty(), &mut record)
                .expect("sealed");
            let mut body = salt.to_vec();
            body.extend_from_slice(&RECORD_SIZE.to_be_bytes());
            body.push(65);
            body.extend_from_slice(sender.public_key());
            body.extend_from_slice(&record);
            assert_eq!(keys.decrypt(&body), Err(WebPushError::Padding));
        }
    }

    #[test]
    fn the_topic_is_32_url_safe_characters() {
        let t = topic("qst_4x");
        assert_eq!(t.len(), 32);
        assert!(
            t.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        );
        assert_eq!(t, topic("qst_4x"));
        assert_ne!(t, topic("qst_4y"));
    }

    #[test]
    fn a_vapid_jwt_verifies_with_the_public_key() {
        let pkcs8 = VapidKey::generate_pkcs8().expect("generated");
        let key = VapidKey::from_pkcs8(&pkcs8).expect("loaded");
        assert_eq!(key.public_key().len(), 65);
        let header = key
            .authorization(
                "https://push.example.net",
                1_800_000_000,
                "mailto:ops@example.org",
            )
            .expect("signed");
        let (t, k) = header
            .strip_prefix("vapid t=")
            .and_then(|rest| rest.split_once(", k="))
            .expect("vapid t=…, k=…");
        assert_eq!(k, key.public_key_b64());
        let (input, signature) = t.rsplit_once('.').expect("three parts");
        let public = ring::signature::UnparsedPublicKey::new(
            &ring::signature::ECDSA_P256_SHA256_FIXED,
            b64::decode(k).expect("b64"),
        );
        public
            .verify(input.as_bytes(), &b64::decode(signature).expect("b64"))
            .expect("verifies");
        let claims = input.split_once('.').expect("header.claims").1;
        let claims: serde_json::Value =
            serde_json::from_slice(&b64::decode(claims).expect("b64")).expect("json");
        assert_eq!(claims["aud"], "https://push.example.net");
        assert_eq!(claims["exp"], 1_800_000_000);
        assert_eq!(claims["sub"], "mailto:ops@example.org");
    }
}
