//! The webhook key: 32 random bytes in `webhook.key`, beside the database, with which the relay seals the
//! webhook secrets it stores (`docs/webhooks.md`, "Security notes").
//!
//! A webhook secret is an HMAC key the relay must use, so it cannot be stored as a hash like credentials. It is
//! stored sealed instead — AES-256-GCM, a fresh random 96-bit nonce per seal, the additional data binding it to
//! its agent — and the key that opens it lives in another file. A copy of the database alone (a backup, a
//! stolen disk image of the database) is then not enough to sign webhook requests.
//!
//! Sealed bytes: `0x01 ‖ nonce (12) ‖ ciphertext ‖ tag (16)`, the layout of envelopes (`docs/crypto.md`).
//! Additional data: `"pacerelle/relay/webhook-secret/v1" ‖ 0x00 ‖ agentId`.
//!
//! The file holds the key as 64 lowercase hexadecimal digits and a newline, mode `0600`. It is created at
//! the first start, written whole or not at all (a temporary file linked into place), and never replaced: a
//! relay whose key file was lost creates a new one, and the secrets sealed with the old one no longer open —
//! their agents set their webhook again.

use std::io::Write;
use std::path::{Path, PathBuf};

use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};

use super::{FILE_MODE, files_error, tighten};
use crate::error::Error;

/// The key file's name, in the database's folder.
pub const FILE_NAME: &str = "webhook.key";
/// First byte of every sealed secret.
const VERSION: u8 = 1;
/// Label that starts the additional data.
const AAD_LABEL: &[u8] = b"pacerelle/relay/webhook-secret/v1";
const KEY_LEN: usize = 32;
const TAG_LEN: usize = 16;

/// The relay's webhook key. Its `Debug` never shows the key.
pub(crate) struct WebhookKey {
    key: LessSafeKey,
    path: PathBuf,
}

impl std::fmt::Debug for WebhookKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookKey")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

fn aad(agent_id: &str) -> Vec<u8> {
    let mut aad = Vec::with_capacity(AAD_LABEL.len() + 1 + agent_id.len());
    aad.extend_from_slice(AAD_LABEL);
    aad.push(0);
    aad.extend_from_slice(agent_id.as_bytes());
    aad
}

fn key_error(path: &Path, reason: impl Into<String>) -> Error {
    Error::WebhookKey {
        path: path.display().to_string(),
        reason: reason.into(),
    }
}

impl WebhookKey {
    /// Reads `folder/webhook.key`, or creates it with a new random key (`0600`) when there is none.
    pub(crate) fn load_or_create(folder: &Path) -> Result<WebhookKey, Error> {
        let path = folder.join(FILE_NAME);
        let created = match std::fs::symlink_metadata(&path) {
            Ok(_) => false,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => create(&path)?,
            Err(e) => return Err(files_error("read", &path, e)),
        };
        let meta = std::fs::symlink_metadata(&path).map_err(|e| files_error("read", &path, e))?;
        if !meta.is_file() {
            return Err(key_error(&path, "it is not a regular file"));
        }
        tighten(&path, FILE_MODE)?;
        let text = std::fs::read(&path).map_err(|e| files_error("read", &path, e))?;
        let key = parse(&text).ok_or_else(|| {
            key_error(
                &path,
                "it must hold 64 hexadecimal digits; restore it from a backup, or move it away to start with a \
                 new key (every webhook must then be set again)",
            )
        })?;
        if created {
            tracing::info!(path = %path.display(), "created the webhook key; back it up apart from the database");
        }
        Ok(WebhookKey::new(&key, path))
    }

    fn new(key: &[u8; KEY_LEN], path: PathBuf) -> WebhookKey {
        #[allow(clippy::expect_used)] // 32 bytes is always a valid AES-256 key.
        let unbound = UnboundKey::new(&AES_256_GCM, key).expect("a 32-byte key");
        WebhookKey {
            key: LessSafeKey::new(unbound),
            path,
        }
    }

    /// A key for tests, not backed by a file.
    #[cfg(test)]
    pub(crate) fn for_tests(key: [u8; KEY_LEN]) -> WebhookKey {
        WebhookKey::new(&key, PathBuf::from("(test)"))
    }

    /// Where the key is kept.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Seals `agent_id`'s webhook secret.
    pub(crate) fn seal(&self, agent_id: &str, secret: &str) -> Result<Vec<u8>, ring::error::Unspecified> {
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new().fill(&mut nonce)?;
        let mut in_out = secret.as_bytes().to_vec();
        self.key.seal_in_place_append_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(aad(agent_id)),
            &mut in_out,
        )?;
        let mut sealed = Vec::with_capacity(1 + NONCE_LEN + in_out.len());
        sealed.push(VERSION);
        sealed.extend_from_slice(&nonce);
        sealed.extend_from_slice(&in_out);
        Ok(sealed)
    }

    /// Opens `agent_id`'s sealed webhook secret; none when it was sealed with another key, for another agent,
    /// or altered.
    pub(crate) fn open(&self, agent_id: &str, sealed: &[u8]) -> Option<String> {
        let (&version, rest) = sealed.split_first()?;
        if version != VERSION || rest.len() < NONCE_LEN + TAG_LEN {
            return None;
        }
        let (nonce, ciphertext) = rest.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut in_out = ciphertext.to_vec();
        let plain = self
            .key
            .open_in_place(nonce, Aad::from(aad(agent_id)), &mut in_out)
            .ok()?;
        String::from_utf8(plain.to_vec()).ok()
    }
}

/// 64 hexadecimal digits (surrounding whitespace allowed) as a key.
fn parse(text: &[u8]) -> Option<[u8; KEY_LEN]> {
    let text = text.trim_ascii();
    let bytes = data_encoding::HEXLOWER_PERMISSIVE.decode(text).ok()?;
    bytes.try_into().ok()
}

/// Writes a new random key to `path`, whole or not at all: a temporary file `0600`, synced, then linked into
/// place (a relay starting at the same moment keeps the file that won). Returns whether this call created it.
fn create(path: &Path) -> Result<bool, Error> {
    let rng = SystemRandom::new();
    let mut key = [0u8; KEY_LEN];
    rng.fill(&mut key)
        .map_err(|_| key_error(path, "the system random generator failed"))?;
    let mut suffix = [0u8; 8];
    rng.fill(&mut suffix)
        .map_err(|_| key_error(path, "the system random generator failed"))?;
    let mut tmp_name = path.as_os_str().to_owned();
    tmp_name.push(format!(".tmp-{}", data_encoding::HEXLOWER.encode(&suffix)));
    let tmp = PathBuf::from(tmp_name);

    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(FILE_MODE);
    }
    let write = || -> std::io::Result<()> {
        let mut file = options.open(&tmp)?;
        let mut text = data_encoding::HEXLOWER.encode(&key);
        text.push('\n');
        file.write_all(text.as_bytes())?;
        file.sync_all()
    };
    if let Err(e) = write() {
        let _ = std::fs::remove_file(&tmp);
        return Err(files_error("write", &tmp, e));
    }
    let linked = match std::fs::hard_link(&tmp, path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        // A file system without hard links: a rename, which no other relay races in practice.
        Err(_) if !path.exists() => std::fs::rename(&tmp, path)
            .map(|()| true)
            .map_err(|e| files_error("create", path, e)),
        Err(e) => Err(files_error("create", path, e)),
    };
    let _ = std::fs::remove_file(&tmp);
    let created = linked?;
    // The new name must survive a crash as surely as the secrets about to be sealed with the key.
    if created
        && let Some(folder) = path.parent()
        && let Ok(dir) = std::fs::File::open(if folder.as_os_str().is_empty() {
            Path::new(".")
        } else {
            folder
        })
    {
        let _ = dir.sync_all();
    }
    Ok(created)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_secret_opens_for_its_agent_only() {
        let key = WebhookKey::for_tests([7; 32]);
        let sealed = key.seal("ag_1", "whsec_0123456789abcdef").expect("sealed");
        assert_eq!(sealed[0], VERSION);
        assert_eq!(sealed.len(), 1 + NONCE_LEN + 22 + TAG_LEN);
        assert!(!sealed.windows(6).any(|w| w == b"whsec_"), "nothing in clear");
        assert_eq!(
            key.open("ag_1", &sealed).as_deref(),
            Some("whsec_0123456789abcdef")
        );
        assert_eq!(key.open("ag_2", &sealed), None, "bound to its agent");
        assert_eq!(WebhookKey::for_tests([8; 32]).open("ag_1", &sealed), None);
        // Two seals of the same secret differ (fresh nonce).
        assert_ne!(
            key.seal("ag_1", "whsec_0123456789abcdef").expect("sealed"),
            sealed
        );
        // Altered, truncated, another version: nothing opens, nothing panics.
        for n in 0..sealed.len() {
            let mut bad = sealed.clone();
            bad[n] ^= 1;
            assert_eq!(key.open("ag_1", &bad), None);
            assert_eq!(key.open("ag_1", &sealed[..n]), None);
        }
    }

    #[test]
    fn the_key_file_is_created_once_0600_and_read_back() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let first = WebhookKey::load_or_create(dir.path()).expect("created");
        let path = dir.path().join(FILE_NAME);
        assert_eq!(first.path(), path);
        let text = std::fs::read_to_string(&path).expect("readable");
        assert_eq!(text.len(), 65);
        assert!(text.ends_with('\n'));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).expect("exists").permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
        // No temporary file left behind.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .expect("listed")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, [FILE_NAME]);

        let sealed = first.seal("ag_1", "a secret of some length").expect("sealed");
        let again = WebhookKey::load_or_create(dir.path()).expect("read");
        assert_eq!(
            again.open("ag_1", &sealed).as_deref(),
            Some("a secret of some length")
        );
        assert_eq!(
            std::fs::read_to_string(&path).expect("readable"),
            text,
            "never replaced"
        );
    }

    #[test]
    fn a_malformed_key_file_stops_the_relay_with_a_clear_error() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join(FILE_NAME);
        for bad in ["", "00", &"zz".repeat(32), &"00".repeat(33)] {
            std::fs::write(&path, bad).expect("written");
            let e = WebhookKey::load_or_create(dir.path()).expect_err("refused");
            let text = e.to_string();
            assert!(
                text.contains("webhook.key") && text.contains("64 hexadecimal"),
                "{text}"
            );
        }
        std::fs::remove_file(&path).expect("removed");
        std::fs::create_dir(&path).expect("a folder in its place");
        let e = WebhookKey::load_or_create(dir.path()).expect_err("refused");
        assert!(e.to_string().contains("not a regular file"), "{e}");
    }

    #[test]
    fn key_file_parsing() {
        let hex = "00112233445566778899aabbccddeeff00112233445566778899AABBCCDDEEFF";
        let key = parse(format!("  {hex}\r\n").as_bytes()).expect("parsed");
        assert_eq!(key[0], 0x00);
        assert_eq!(key[31], 0xff);
        assert!(parse(&hex.as_bytes()[..62]).is_none());
    }
}
