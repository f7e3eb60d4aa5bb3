//! Web Push from the relay (RFC 8030 delivery, RFC 8291 encryption, RFC 8292 VAPID; `docs/push.md`).
//!
//! Pushes are queued in the database in the same transaction as their item ([`crate::store::types`]).
//! This task reads the due ones and sends each to its subscription's push service: it builds the payload then
//! (the item as the device's conversation returns it, when the encrypted body fits 4096 bytes), encrypts it
//! to the subscription's keys, signs the request with the relay's VAPID key, and records the outcome in a
//! committed write. A push the push service accepted (2xx) is deleted: it is never sent again, across
//! restarts too. `404`/`410` delete the subscription; `429` and `5xx` are tried again after `Retry-After` (or
//! the backoff, whichever is longer); anything else after the backoff; a push past its TTL is dropped.
//!
//! Attempts run beside each other (at most [`PushSettings::concurrency`], one per subscription at a time, each
//! bounded by [`PushSettings::timeout`]), so one slow push service delays no other: the loop is the webhook
//! deliverer's ([`crate::webhook::deliver`]). Endpoints must be `https`
//! and resolve only to public addresses, checked at registration and again at each connection (the HTTP
//! client resolves names through [`PublicOnly`]), unless the relay runs with `--allow-private-push-endpoints`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::{Arc, Weak};
use std::time::Duration;

use pacerelle_core::webpush::{self, VapidKey};
use pacerelle_core::{Cursor, Timestamp, b64};
use serde::Serialize;

use crate::app::Inner;
use crate::at_rest::{FILE_MODE, files_error, tighten};
use crate::error::{Error, StoreError};
use crate::store::DuePush;
use crate::store::Store;
use crate::webhook::{Outbox, Pace, deliver};

/// The VAPID key file's name, in the database's folder.
pub const KEY_FILE: &str = "push.key";
/// Lifetime of a VAPID JWT (RFC 8292 allows at most 24 hours).
const JWT_LIFETIME_SECS: i64 = 12 * 3600;
/// A cached VAPID JWT is replaced when it has less than this left (a push service may check `exp` against
/// a clock somewhat ahead of ours).
const JWT_RENEW_BEFORE_SECS: i64 = 3600;
/// Version of the push payload.
const PAYLOAD_VERSION: u32 = 1;

/// How the relay delivers pushes. [`PushSettings::default`] is what `pacerelle serve` uses; tests shorten
/// the delays.
#[derive(Debug, Clone)]
pub struct PushSettings {
    /// How long one attempt may take (resolve, connect, send, answer headers).
    pub timeout: Duration,
    /// The wait after the first failed attempt; it doubles after each further one.
    pub backoff_base: Duration,
    /// The longest wait between two attempts.
    pub backoff_max: Duration,
    /// Attempts in flight at most (each to a different subscription).
    pub concurrency: usize,
    /// How often the deliverer looks for due pushes when nothing wakes it.
    pub poll_every: Duration,
}

impl Default for PushSettings {
    /// 10 s per attempt; retries after 1 s, 2 s, 4 s … at most every 10 minutes, until the push's TTL; 32
    /// attempts in flight; a poll every 5 s.
    fn default() -> Self {
        PushSettings {
            timeout: Duration::from_secs(10),
            backoff_base: Duration::from_secs(1),
            backoff_max: Duration::from_secs(600),
            concurrency: 32,
            poll_every: Duration::from_secs(5),
        }
    }
}

impl PushSettings {
    /// The wait before the next attempt, after `attempts` failed ones (1 or more).
    pub(crate) fn backoff(&self, attempts: u32) -> Duration {
        crate::webhook::doubling(self.backoff_base, self.backoff_max, attempts)
    }
}

// ------------------------------------------------------------------------------------------- VAPID key

/// Reads the VAPID key from `folder/push.key`, or creates it (`0600`) at the first start. The file holds the
/// PKCS#8 document of the ES256 key pair in base64url and a newline; it is never replaced (a new key would
/// invalidate every subscription: browsers bind a subscription to the `applicationServerKey`).
pub(crate) fn load_or_create_vapid(folder: &Path) -> Result<VapidKey, Error> {
    let path = folder.join(KEY_FILE);
    let unusable =
        |reason: &str| Error::Config(format!("the push key {} is unusable: {reason}", path.display()));
    match std::fs::symlink_metadata(&path) {
        Ok(meta) if !meta.is_file() => return Err(unusable("it is not a regular file")),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let pkcs8 =
                VapidKey::generate_pkcs8().map_err(|_| unusable("the system random generator failed"))?;
            write_new(&path, format!("{}\n", b64::encode(&pkcs8)).as_bytes())?;
            tracing::info!(path = %path.display(), "created the push (VAPID) key");
        }
        Err(e) => return Err(files_error("read", &path, e)),
    }
    tighten(&path, FILE_MODE)?;
    let text = std::fs::read_to_string(&path).map_err(|e| files_error("read", &path, e))?;
    let pkcs8 = b64::decode(text.trim()).ok_or_else(|| {
        unusable("it must hold a base64url PKCS#8 key; restore it from a backup, or move it away to start with a new key (every device must then turn notifications on again)")
    })?;
    VapidKey::from_pkcs8(&pkcs8).map_err(|_| unusable("it is not a P-256 PKCS#8 key"))
}

/// Writes a new file `0600` whole or not at all: a temporary file linked into place (never over an existing
/// file).
fn write_new(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    use std::io::Write;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp-{}", std::process::id()));
    let tmp = std::path::PathBuf::from(tmp);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(FILE_MODE);
    }
    let write = || -> std::io::Result<()> {
        let mut file = options.open(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::hard_link(&tmp, path)
    };
    let result = write();
    let _ = std::fs::remove_file(&tmp);
    result.map_err(|e| files_error("write", path, e))
}

// ------------------------------------------------------------------------------------------- endpoints

/// Whether an address is one a push service may have: not loopback, private, link-local, shared (CGNAT),
/// unspecified, multicast, documentation or reserved.
pub(crate) fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public_v4(v4);
            }
            let s = v6.segments();
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00 // unique local
                || (s[0] & 0xffc0) == 0xfe80 // link-local
                || (s[0] & 0xffc0) == 0xfec0 // site-local (deprecated)
                || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
                || (s[0] == 0x0064 && s[1] == 0xff9b) // NAT64: an IPv4 address in disguise
                || (s[0] == 0 && s[1] == 0 && s[2] == 0 && s[3] == 0 && s[4] == 0 && s[5] == 0)) // IPv4-compatible
        }
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    !(ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
        || (a == 192 && b == 0 && ip.octets()[2] == 0) // IETF protocol assignments
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || a >= 240)
}

/// Why an endpoint is refused (`push_endpoint_forbidden`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Forbidden(pub String);

/// Checks an endpoint's form, scheme and addresses (resolving its name): `https` and public addresses only,
/// unless private endpoints are allowed (then `http` too). `Err(None)`: not a URL at all (`invalid_input`).
pub(crate) async fn check_endpoint(
    endpoint: &str,
    allow_private: bool,
) -> Result<reqwest::Url, Option<Forbidden>> {
    let url = reqwest::Url::parse(endpoint).map_err(|_| None)?;
    let host = url.host_str().filter(|h| !h.is_empty()).ok_or(None)?.to_string();
    if !url.username().is_empty() || url.password().is_some() {
        return Err(None);
    }
    match url.scheme() {
        "https" => {}
        "http" if allow_private => {}
        "http" => {
            return Err(Some(Forbidden(
                "push endpoints must be https (the relay allows http only with --allow-private-push-endpoints)"
                    .into(),
            )));
        }
        _ => return Err(None),
    }
    if allow_private {
        return Ok(url);
    }
    let port = url.port_or_known_default().unwrap_or(443);
    let addrs: Vec<SocketAddr> = match literal_ip(&url) {
        Some(ip) => vec![SocketAddr::new(ip, port)],
        None => match tokio::net::lookup_host((host.as_str(), port)).await {
            Ok(addrs) => addrs.collect(),
            Err(_) => {
                return Err(Some(Forbidden(format!(
                    "the endpoint's host {host} does not resolve"
                ))));
            }
        },
    };
    if addrs.is_empty() || addrs.iter().any(|a| !is_public(a.ip())) {
        return Err(Some(Forbidden(format!(
            "the endpoint's host {host} is a private, loopback or link-local address (the relay allows those only \
             with --allow-private-push-endpoints)"
        ))));
    }
    Ok(url)
}

/// The HTTP client's resolver: names resolve only to public addresses (checked at every connection, so a
/// name that changes to a private address after registration is refused too).
#[derive(Debug, Clone)]
struct PublicOnly;

impl reqwest::dns::Resolve for PublicOnly {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_string();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if addrs.is_empty() || addrs.iter().any(|a| !is_public(a.ip())) {
                return Err(format!("{host} resolves to a non-public address").into());
            }
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

fn client(settings: &PushSettings, allow_private: bool) -> Result<reqwest::Client, reqwest::Error> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut builder = reqwest::Client::builder()
        .timeout(settings.timeout)
        .connect_timeout(settings.timeout)
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(settings.concurrency)
        .user_agent(concat!("pacerelle-relay/", env!("CARGO_PKG_VERSION")));
    if !allow_private {
        builder = builder.dns_resolver(PublicOnly);
    }
    builder.build()
}

// ------------------------------------------------------------------------------------------- payload

/// The push payload's plaintext (`docs/push.md`, "Payload").
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Payload<'a> {
    v: u32,
    relay: &'a str,
    agent_id: &'a str,
    device_id: &'a str,
    kind: &'a str,
    id: &'a str,
    cursor: Cursor,
    #[serde(skip_serializing_if = "Option::is_none")]
    item: Option<&'a pacerelle_core::wire::ConversationItem>,
}

/// The encrypted body of a push: with the item when it fits, else ids only. `None` when the device no
/// longer sees the item (it was revoked meanwhile): nothing to push.
async fn body(store: &Store, relay: &str, push: &DuePush) -> Result<Option<Vec<u8>>, String> {
    let after = Cursor(u64::try_from(push.item_seq.saturating_sub(1)).unwrap_or(0));
    let (items, _) = store
        .conversation(&push.agent_id, &push.device_id, after, 1, true, Timestamp::now())
        .await
        .map_err(|e| format!("cannot read the item: {e}"))?;
    let Some(item) = items
        .into_iter()
        .next()
        .filter(|i| i.cursor.seq() == after.seq() + 1)
    else {
        return Ok(None);
    };
    let mut payload = Payload {
        v: PAYLOAD_VERSION,
        relay,
        agent_id: &push.agent_id,
        device_id: &push.device_id,
        kind: &push.kind,
        id: &item.id,
        cursor: item.cursor,
        item: Some(&item),
    };
    let mut plain = serde_json::to_vec(&payload).map_err(|e| e.to_string())?;
    if plain.len() > webpush::MAX_PLAINTEXT {
        payload.item = None;
        plain = serde_json::to_vec(&payload).map_err(|e| e.to_string())?;
    }
    webpush::encrypt(&plain, &push.p256dh, &push.auth)
        .map(Some)
        .map_err(|e| format!("cannot encrypt: {e}"))
}

// ------------------------------------------------------------------------------------------- delivery

/// What one attempt came to.
#[derive(Debug)]
enum Outcome {
    /// Accepted (2xx): delete the push.
    Done,
    /// Nothing left to send (the device no longer sees the item): delete the push.
    Nothing,
    /// The subscription is gone (404, 410): delete it.
    Gone(u16),
    /// Try again, not before `retry_after` if the push service said so.
    Retry {
        status: Option<u16>,
        error: String,
        retry_after: Option<Duration>,
    },
}

/// `Retry-After` in seconds (the HTTP-date form is read as absent: the backoff applies).
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?.trim();
    value.parse::<u64>().ok().map(Duration::from_secs)
}

/// What an attempt needs besides the push.
#[derive(Clone)]
struct Sender {
    store: Store,
    client: reqwest::Client,
    vapid: Arc<VapidKey>,
    contact: String,
    /// The relay's public URL (`--public-url`), or else the address it serves on once known.
    relay: Arc<std::sync::OnceLock<String>>,
    allow_private: bool,
    settings: PushSettings,
    /// The signed `Authorization` value per push service origin, with its `exp`: one ES256 signature per
    /// origin every few hours rather than one per push.
    tokens: Arc<std::sync::Mutex<std::collections::HashMap<String, (i64, String)>>>,
    /// The attempts' outcomes, for `GET /metrics`.
    counts: crate::metrics::PushDeliveries,
}

impl Sender {
    /// The `Authorization` header for `audience` (an origin): a cached token while it has more than
    /// [`JWT_RENEW_BEFORE_SECS`] to live, else a new one (`exp` = now + [`JWT_LIFETIME_SECS`]).
    fn authorization(&self, audience: &str, now_secs: i64) -> Option<String> {
        let mut tokens = self.tokens.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((exp, value)) = tokens.get(audience)
            && exp - now_secs > JWT_RENEW_BEFORE_SECS
        {
            return Some(value.clone());
        }
        let exp = now_secs + JWT_LIFETIME_SECS;
        let value = self.vapid.authorization(audience, exp, &self.contact).ok()?;
        if tokens.len() > 1024 {
            tokens.clear();
        }
        tokens.insert(audience.to_string(), (exp, value.clone()));
        Some(value)
    }
}

impl Outbox for Sender {
    type Item = DuePush;
    type Key = i64;
    const NAME: &'static str = "push";

    fn key(push: &DuePush) -> i64 {
        push.subscription_id
    }

    async fn due(&self, now: Timestamp, busy: &[i64], limit: u32) -> Result<Vec<DuePush>, StoreError> {
        self.store.due_pushes(now, busy, limit).await
    }

    async fn next_due(&self, busy: &[i64]) -> Result<Option<Timestamp>, StoreError> {
        self.store.next_push_due(busy).await
    }

    /// Sends one push and records the outcome (in its own write, which group commit batches with those of the
    /// other attempts). A push past its TTL is dropped unsent.
    async fn attempt(self, push: DuePush) -> Result<(), StoreError> {
        if push.expires_at.millis() < Timestamp::now().millis() {
            return self.store.push_done(push.push_id).await.inspect(|()| {
                self.counts.dropped.inc();
            });
        }
        let outcome = send(&self, &push).await;
        record(&self, &push, outcome).await
    }
}

async fn send(sender: &Sender, push: &DuePush) -> Outcome {
    let retry = |status, error: String| Outcome::Retry {
        status,
        error,
        retry_after: None,
    };
    let Ok(url) = reqwest::Url::parse(&push.endpoint) else {
        return Outcome::Gone(0);
    };
    // An IP literal is never resolved, so the resolver cannot check it: check it here.
    if !sender.allow_private && literal_ip(&url).is_some_and(|ip| !is_public(ip)) {
        return retry(None, "the endpoint is a non-public address".into());
    }
    let relay = sender.relay.get().map(String::as_str).unwrap_or_default();
    let body = match body(&sender.store, relay, push).await {
        Ok(Some(body)) => body,
        Ok(None) => return Outcome::Nothing,
        Err(e) => return retry(None, e),
    };
    let now = Timestamp::now();
    // Seconds left, rounded up (at least 1).
    let ttl = push
        .expires_at
        .millis()
        .saturating_sub(now.millis())
        .saturating_add(999)
        .div_euclid(1000)
        .max(1);
    let audience = url.origin().ascii_serialization();
    let Some(authorization) = sender.authorization(&audience, now.millis().div_euclid(1000)) else {
        return retry(None, "cannot sign the VAPID token".into());
    };
    let mut request = sender
        .client
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
        .header(reqwest::header::CONTENT_ENCODING, "aes128gcm")
        .header("TTL", ttl.to_string())
        .header("Urgency", &push.urgency)
        .header(reqwest::header::AUTHORIZATION, authorization)
        .body(body);
    if let Some(topic) = &push.topic {
        request = request.header("Topic", topic);
    }
    match request.send().await {
        Ok(resp) if resp.status().is_success() => Outcome::Done,
        Ok(resp) => {
            let status = resp.status();
            match status.as_u16() {
                404 | 410 => Outcome::Gone(status.as_u16()),
                code => Outcome::Retry {
                    status: Some(code),
                    error: format!("the push service answered HTTP {status}"),
                    retry_after: (code == 429 || status.is_server_error())
                        .then(|| retry_after(resp.headers()))
                        .flatten(),
                },
            }
        }
        Err(e) if e.is_timeout() => retry(None, "no answer within the time limit".into()),
        Err(e) if e.is_connect() => retry(None, format!("cannot connect: {}", e.without_url())),
        Err(e) => retry(None, format!("request failed: {}", e.without_url())),
    }
}

/// The address of an endpoint whose host is an IP literal.
fn literal_ip(url: &reqwest::Url) -> Option<IpAddr> {
    let host = url.host_str()?;
    host.trim_start_matches('[').trim_end_matches(']').parse().ok()
}

/// Records an attempt's outcome.
async fn record(sender: &Sender, push: &DuePush, outcome: Outcome) -> Result<(), StoreError> {
    let (store, counts) = (&sender.store, &sender.counts);
    match outcome {
        Outcome::Done => store.push_done(push.push_id).await.inspect(|()| {
            counts.delivered.inc();
        }),
        Outcome::Nothing => store.push_done(push.push_id).await.inspect(|()| {
            counts.dropped.inc();
        }),
        Outcome::Gone(status) => {
            tracing::info!(status, device = %push.device_id, "the push service says the subscription is gone; removed");
            store
                .push_subscription_gone(push.subscription_id)
                .await
                .inspect(|()| {
                    counts.gone.inc();
                })
        }
        Outcome::Retry {
            status,
            error,
            retry_after,
        } => {
            let now = Timestamp::now();
            let attempts = push.attempts.saturating_add(1);
            let wait = sender
                .settings
                .backoff(attempts)
                .max(retry_after.unwrap_or_default());
            let next = now.plus_millis(i64::try_from(wait.as_millis()).unwrap_or(i64::MAX));
            if next.millis() > push.expires_at.millis() {
                tracing::warn!(device = %push.device_id, attempts, %error, "push dropped: its TTL ends before the next attempt");
                return store.push_done(push.push_id).await.inspect(|()| {
                    counts.dropped.inc();
                });
            }
            tracing::debug!(device = %push.device_id, attempts, %error, "push attempt failed");
            store
                .push_retry(push.push_id, status, &error, next)
                .await
                .inspect(|()| {
                    counts.failed.inc();
                })
        }
    }
}

/// The deliverer task: runs until the relay shuts down or is dropped.
pub(crate) async fn deliverer(relay: Weak<Inner>) {
    let (sender, pace, kick) = {
        let Some(inner) = relay.upgrade() else {
            return;
        };
        let allow_private = inner.config.allow_private_push_endpoints;
        let client = match client(&inner.config.push, allow_private) {
            Ok(client) => client,
            Err(e) => {
                tracing::error!(error = %e, "cannot build the push HTTP client; pushes are not delivered");
                return;
            }
        };
        let sender = Sender {
            store: inner.store.clone(),
            client,
            vapid: inner.vapid.clone(),
            contact: inner
                .config
                .push_contact
                .clone()
                .or_else(|| inner.config.public_url.clone())
                .unwrap_or_else(|| "mailto:push@pacerelle.invalid".to_string()),
            relay: inner.relay_url.clone(),
            allow_private,
            settings: inner.config.push.clone(),
            tokens: Default::default(),
            counts: inner.metrics.push_deliveries.clone(),
        };
        let pace = Pace {
            concurrency: inner.config.push.concurrency,
            poll_every: inner.config.push.poll_every,
        };
        (sender, pace, inner.wakes.any.clone())
    };
    deliver(relay, sender, pace, kick).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vapid_key_is_created_0600_once_and_read_back_the_same() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let first = load_or_create_vapid(dir.path()).expect("created");
        let again = load_or_create_vapid(dir.path()).expect("read");
        assert_eq!(first.public_key(), again.public_key());
        assert_eq!(first.public_key().len(), 65);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let path = dir.path().join(KEY_FILE);
            let mode = std::fs::metadata(&path).expect("exists").permissions().mode() & 0o7777;
            assert_eq!(mode, 0o600);
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
            load_or_create_vapid(dir.path()).expect("tightened");
            let mode = std::fs::metadata(&path).expect("exists").permissions().mode() & 0o7777;
            assert_eq!(mode, 0o600);
        }
        std::fs::write(dir.path().join(KEY_FILE), "not a key\n").expect("written");
        let e = load_or_create_vapid(dir.path()).expect_err("refused, never replaced");
        assert!(e.to_string().contains("push key"), "{e}");
    }

    #[test]
    fn only_public_addresses_are_push_services() {
        for public in ["142.250.185.10", "2a00:1450:4001:82b::200a", "1.1.1.1"] {
            assert!(is_public(public.parse().expect("an address")), "{public}");
        }
        for private in [
            "127.0.0.1",
            "10.0.0.1",
            "172.16.5.4",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "224.0.0.1",
            "192.0.2.1",
            "240.0.0.1",
            "::1",
            "::",
            "fd00::1",
            "fe80::1",
            "ff02::1",
            "::ffff:10.0.0.1",
            "::ffff:127.0.0.1",
            "64:ff9b::a00:1",
            "2001:db8::1",
        ] {
            assert!(!is_public(private.parse().expect("an address")), "{private}");
        }
    }

    #[tokio::test]
    async fn endpoints_are_checked_by_scheme_and_address() {
        assert!(check_endpoint("https://1.1.1.1/push/x", false).await.is_ok());
        for forbidden in [
            "http://1.1.1.1/x",
            "https://10.0.0.1/x",
            "https://[::1]/x",
            "https://localhost/x",
        ] {
            assert!(
                matches!(check_endpoint(forbidden, false).await, Err(Some(_))),
                "{forbidden}"
            );
        }
        for malformed in ["push", "ftp://a.example/x", "https://user:pw@a.example/x"] {
            assert!(
                matches!(check_endpoint(malformed, false).await, Err(None)),
                "{malformed}"
            );
        }
        assert!(check_endpoint("http://127.0.0.1:9/x", true).await.is_ok());
        assert!(matches!(
            check_endpoint("ftp://127.0.0.1/x", true).await,
            Err(None)
        ));
    }
}
