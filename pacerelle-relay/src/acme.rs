//! HTTPS in one step: a certificate for `--domain` from an ACME CA (RFC 8555, Let's Encrypt by default),
//! obtained and renewed by the relay itself.
//!
//! The CA checks that the domain is ours with the TLS-ALPN-01 challenge (RFC 8737): it connects to the
//! domain on port 443 and asks, with the ALPN protocol `acme-tls/1`, for a certificate that carries a digest
//! of the challenge. The relay's own TLS listener answers it: [`CertResolver`] picks the challenge certificate
//! for such a handshake and the served certificate for every other one, and the connection is closed after
//! the handshake. So nothing else needs port 80 or a web server; port 443 must reach the relay.
//!
//! Files, under the data folder, in `acme/<directory host>/` (`0700`, files `0600`): `account.json` (the
//! ACME account's key), `<domain>.crt.pem` (the chain) and `<domain>.key.pem` (its private key). A certificate
//! stored there and still valid is served at start without asking the network.
//!
//! Renewal: when less than 30 days remain, or less than a third of the certificate's lifetime for shorter
//! ones ([`renew_at`]). A background task orders a new certificate then and swaps it in without a restart;
//! on failure the current certificate stays in service, a warning is logged in plain words, and the task
//! retries with an exponential backoff.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use instant_acme::{
    Account, AccountCredentials, AuthorizationStatus, ChallengeType, Identifier, NewAccount, NewOrder,
    OrderStatus, RetryPolicy,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::sync::{Notify, watch};

use crate::Error;
use crate::at_rest::{FILE_MODE, create_folder, files_error, tighten};
use crate::tls::TlsConfig;

/// Let's Encrypt's directory: certificates that every browser trusts.
pub const LETS_ENCRYPT: &str = instant_acme::LetsEncrypt::Production.url();
/// Let's Encrypt's staging directory: higher rate limits, certificates that browsers do not trust.
pub const LETS_ENCRYPT_STAGING: &str = instant_acme::LetsEncrypt::Staging.url();

/// The ALPN protocol of TLS-ALPN-01 validation (RFC 8737).
pub(crate) const ACME_TLS_ALPN: &[u8] = b"acme-tls/1";
/// Renew when less than this remains (or a third of the lifetime, if that is shorter).
const RENEW_BEFORE_SECS: i64 = 30 * 24 * 3600;
/// The renewal task looks again at least this often (a clock changed, a file replaced).
const LOOK_AGAIN: Duration = Duration::from_secs(12 * 3600);
/// How long the CA may take to validate the challenge, then to issue the certificate.
const CA_POLL: Duration = Duration::from_secs(90);

/// What `pacerelle serve --domain` asks of the ACME CA.
#[derive(Debug, Clone)]
pub struct AcmeSettings {
    /// The name the certificate is for, which must resolve to this relay (port 443).
    pub domain: String,
    /// The CA's directory URL ([`LETS_ENCRYPT`] by default).
    pub directory_url: String,
    /// Contact URLs given to the CA (`mailto:…`), for its expiry notices. May be empty.
    pub contact: Vec<String>,
    /// A PEM file of the root that the directory's own HTTPS certificate chains to, when it is not a
    /// public CA (a test CA). `None`: the system's roots.
    pub ca_file: Option<PathBuf>,
    /// The relay's data folder; certificates are kept in its `acme/` folder.
    pub data_folder: PathBuf,
    /// First pause after a failed order; it doubles (with jitter) up to `retry_max`.
    pub retry_min: Duration,
    /// Longest pause between two failed orders.
    pub retry_max: Duration,
    /// An order that has not ended by then is abandoned (and retried).
    pub order_timeout: Duration,
}

impl AcmeSettings {
    /// Let's Encrypt, no contact, retries from one minute up to six hours.
    pub fn new(domain: impl Into<String>, data_folder: impl Into<PathBuf>) -> AcmeSettings {
        AcmeSettings {
            domain: domain.into(),
            directory_url: LETS_ENCRYPT.to_string(),
            contact: Vec::new(),
            ca_file: None,
            data_folder: data_folder.into(),
            retry_min: Duration::from_secs(60),
            retry_max: Duration::from_secs(6 * 3600),
            order_timeout: Duration::from_secs(300),
        }
    }

    /// The folder of this directory's account and certificates: `acme/<host>[_<port>]`.
    pub fn folder(&self) -> PathBuf {
        let authority = self
            .directory_url
            .split("://")
            .nth(1)
            .unwrap_or(&self.directory_url)
            .split('/')
            .next()
            .unwrap_or_default();
        let name: String = authority
            .chars()
            .map(|c| match c {
                'a'..='z' | 'A'..='Z' | '0'..='9' | '.' | '-' => c.to_ascii_lowercase(),
                _ => '_',
            })
            .collect();
        let name = if name.is_empty() || name.starts_with('.') {
            format!("_{name}")
        } else {
            name
        };
        self.data_folder.join("acme").join(name)
    }

    /// Checks the domain, the directory URL and the CA file, without touching anything.
    pub fn check(&self) -> Result<(), Error> {
        check_domain(&self.domain)?;
        if !self.directory_url.starts_with("https://") {
            return Err(Error::Config(format!(
                "--acme-directory {:?} is not an https:// URL (ACME directories are served over HTTPS)",
                self.directory_url
            )));
        }
        if let Some(ca) = &self.ca_file
            && !ca.is_file()
        {
            return Err(Error::Config(format!(
                "--acme-ca-file {}: no such file",
                ca.display()
            )));
        }
        Ok(())
    }

    /// The stored certificate chain.
    pub fn cert_path(&self) -> PathBuf {
        self.folder().join(format!("{}.crt.pem", self.domain))
    }

    /// The stored private key.
    pub fn key_path(&self) -> PathBuf {
        self.folder().join(format!("{}.key.pem", self.domain))
    }

    fn account_path(&self) -> PathBuf {
        self.folder().join("account.json")
    }
}

/// Checks a domain name for a certificate: letters, digits and hyphens in dot-separated labels, at least
/// two labels, no wildcard, no IP address. Returns it in lowercase, without a final dot.
pub fn check_domain(domain: &str) -> Result<String, Error> {
    let name = domain.trim().trim_end_matches('.').to_ascii_lowercase();
    let refuse = |why: &str| Err(Error::Config(format!("--domain {domain:?}: {why}")));
    if name.is_empty() {
        return refuse("the domain is empty");
    }
    if name.contains("://") || name.contains('/') || name.contains(':') {
        return refuse("give the name alone, without https:// or a port (relay.example.com)");
    }
    if name.starts_with("*.") {
        return refuse("a wildcard name cannot be validated on port 443; give the relay's own name");
    }
    if name.parse::<std::net::IpAddr>().is_ok() {
        return refuse("an IP address; the CA issues certificates for a domain name that points here");
    }
    if name.len() > 253 || !name.contains('.') {
        return refuse("not a full domain name (relay.example.com)");
    }
    for label in name.split('.') {
        let ok = !label.is_empty()
            && label.len() <= 63
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if !ok {
            return refuse("not a valid domain name (letters, digits and hyphens between dots)");
        }
    }
    Ok(name)
}

/// The certificate being served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificateInfo {
    /// Start of validity, Unix seconds.
    pub not_before: i64,
    /// End of validity, Unix seconds.
    pub not_after: i64,
    /// When it is due for renewal, Unix seconds ([`renew_at`]).
    pub renew_at: i64,
    /// The serial number, in hexadecimal.
    pub serial: String,
}

/// When a certificate valid from `not_before` to `not_after` (Unix seconds) is due for renewal: 30 days
/// before its end, or a third of its lifetime before its end if that is shorter (short-lived certificates).
pub fn renew_at(not_before: i64, not_after: i64) -> i64 {
    let lifetime = not_after.saturating_sub(not_before).max(0);
    not_after - RENEW_BEFORE_SECS.min(lifetime / 3)
}

/// Where the renewal stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AcmeStatus {
    /// No certificate yet; an order is under way.
    Obtaining,
    /// A certificate is served.
    Ready(CertificateInfo),
    /// The last order failed; another is tried after a pause. `serving` is the certificate still in use.
    Failed {
        /// What went wrong, in plain words, and what to do.
        message: String,
        /// The pause before the next try.
        retry_in: Duration,
        /// The certificate still served, if any.
        serving: Option<CertificateInfo>,
    },
}

/// A certificate chain with its key, checked and ready to serve.
struct Loaded {
    key: Arc<CertifiedKey>,
    info: CertificateInfo,
}

/// What the resolver serves; shared with the renewal task.
#[derive(Default)]
struct Shared {
    current: RwLock<Option<Loaded>>,
    /// The TLS-ALPN-01 certificate of the challenge in progress, for the domain.
    challenge: RwLock<Option<Arc<CertifiedKey>>>,
    domain: String,
    force: AtomicBool,
    kick: Notify,
}

impl Shared {
    fn info(&self) -> Option<CertificateInfo> {
        read(&self.current).as_ref().map(|l| l.info.clone())
    }
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Picks the certificate for each TLS handshake: the challenge certificate for the CA's `acme-tls/1`
/// handshakes, the current certificate for everyone else (none yet: the handshake fails).
struct CertResolver(Arc<Shared>);

impl std::fmt::Debug for CertResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertResolver")
            .field("domain", &self.0.domain)
            .finish_non_exhaustive()
    }
}

impl ResolvesServerCert for CertResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let acme = hello
            .alpn()
            .is_some_and(|mut offered| offered.any(|p| p == ACME_TLS_ALPN));
        if acme {
            // Only for our domain: the CA always sends it as the server name.
            if hello.server_name() != Some(self.0.domain.as_str()) {
                return None;
            }
            return read(&self.0.challenge).clone();
        }
        read(&self.0.current).as_ref().map(|l| l.key.clone())
    }
}

/// Certificates for one domain, obtained and renewed in the background. Dropping it stops the renewals
/// (a [`TlsConfig`] made from it goes on serving the last certificate).
pub struct Acme {
    shared: Arc<Shared>,
    status: watch::Receiver<AcmeStatus>,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for Acme {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Acme")
            .field("domain", &self.shared.domain)
            .field("status", &*self.status.borrow())
            .finish_non_exhaustive()
    }
}

impl Drop for Acme {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Acme {
    /// Checks the settings, creates the folder (`0700`), loads the stored certificate if it is usable and
    /// starts the renewal task, which orders a certificate at once when there is none or it is due.
    ///
    /// Must be called within a Tokio runtime.
    pub fn start(mut settings: AcmeSettings) -> Result<Acme, Error> {
        settings.check()?;
        settings.domain = check_domain(&settings.domain)?;
        let folder = settings.folder();
        create_folder(&folder)?;
        tighten(&folder, crate::FOLDER_MODE)?;
        if let Some(parent) = folder.parent() {
            tighten(parent, crate::FOLDER_MODE)?;
        }
        let stored = load_stored(&settings);
        let shared = Arc::new(Shared {
            domain: settings.domain.clone(),
            ..Shared::default()
        });
        let first = match stored {
            Some(loaded) => {
                let info = loaded.info.clone();
                tracing::info!(
                    domain = %settings.domain,
                    not_after = info.not_after,
                    "serving the stored certificate"
                );
                *write(&shared.current) = Some(loaded);
                AcmeStatus::Ready(info)
            }
            None => AcmeStatus::Obtaining,
        };
        let (tx, status) = watch::channel(first);
        let task = tokio::spawn(renewals(shared.clone(), settings, tx));
        Ok(Acme { shared, status, task })
    }

    /// The TLS settings that serve this domain's certificate (and answer the CA's challenges).
    pub fn tls_config(&self) -> Result<TlsConfig, Error> {
        crate::tls::from_resolver(Arc::new(CertResolver(self.shared.clone())))
    }

    /// The domain, as checked.
    pub fn domain(&self) -> &str {
        &self.shared.domain
    }

    /// The certificate served now, if any.
    pub fn certificate(&self) -> Option<CertificateInfo> {
        self.shared.info()
    }

    /// Where the renewal stands, updated as it goes.
    pub fn status(&self) -> watch::Receiver<AcmeStatus> {
        self.status.clone()
    }

    /// Orders a new certificate now, whatever the current one's validity.
    pub fn renew_now(&self) {
        self.shared.force.store(true, Ordering::SeqCst);
        self.shared.kick.notify_one();
    }
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default()
}

/// The renewal task: sleeps until the certificate is due (or [`Acme::renew_now`]), orders, swaps.
async fn renewals(shared: Arc<Shared>, settings: AcmeSettings, status: watch::Sender<AcmeStatus>) {
    let backoff = || {
        ExponentialBuilder::new()
            .with_min_delay(settings.retry_min)
            .with_max_delay(settings.retry_max.max(settings.retry_min))
            .with_factor(2.0)
            .with_jitter()
            .without_max_times()
            .build()
    };
    let mut delays = backoff();
    let mut account: Option<Account> = None;
    loop {
        let forced = shared.force.swap(false, Ordering::SeqCst);
        if let Some(info) = shared.info()
            && !forced
        {
            let left = info.renew_at - unix_now();
            if left > 0 {
                let pause = Duration::from_secs(left as u64).min(LOOK_AGAIN);
                tokio::select! {
                    _ = tokio::time::sleep(pause) => {}
                    _ = shared.kick.notified() => {}
                }
                continue;
            }
        }
        tracing::info!(domain = %settings.domain, directory = %settings.directory_url, "ordering a certificate");
        let outcome = match tokio::time::timeout(
            settings.order_timeout,
            obtain(&shared, &settings, &mut account),
        )
        .await
        {
            Ok(outcome) => outcome,
            Err(_) => Err(format!(
                "the CA at {} did not finish the order within {} s",
                settings.directory_url,
                settings.order_timeout.as_secs()
            )),
        };
        *write(&shared.challenge) = None;
        match outcome {
            Ok(info) => {
                tracing::info!(
                    domain = %settings.domain,
                    serial = %info.serial,
                    not_after = info.not_after,
                    "new certificate in service"
                );
                delays = backoff();
                let _ = status.send(AcmeStatus::Ready(info));
            }
            Err(message) => {
                // The account is read again next time (a new one is made if the CA no longer knows it).
                account = None;
                let retry_in = delays.next().unwrap_or(settings.retry_max);
                let serving = shared.info();
                tracing::warn!(
                    domain = %settings.domain,
                    retry_in_s = retry_in.as_secs(),
                    still_serving = serving.is_some(),
                    "could not obtain a certificate: {message}"
                );
                let _ = status.send(AcmeStatus::Failed {
                    message,
                    retry_in,
                    serving,
                });
                tokio::select! {
                    _ = tokio::time::sleep(retry_in) => {}
                    _ = shared.kick.notified() => {}
                }
                // A retry after a failure orders even when the certificate is not due: it was due or forced.
                shared.force.store(true, Ordering::SeqCst);
            }
        }
    }
}

/// One order, from the account to the certificate in service. Errors are in plain words.
async fn obtain(
    shared: &Shared,
    settings: &AcmeSettings,
    account: &mut Option<Account>,
) -> Result<CertificateInfo, String> {
    let domain = &settings.domain;
    let acct = match account {
        Some(a) => a.clone(),
        None => {
            let a = load_or_create_account(settings).await?;
            *account = Some(a.clone());
            a
        }
    };
    let plain = |e: instant_acme::Error| plain_words(&e, settings);
    let identifiers = [Identifier::Dns(domain.clone())];
    let mut order = acct
        .new_order(&NewOrder::new(&identifiers))
        .await
        .map_err(plain)?;
    {
        let mut authorizations = order.authorizations();
        while let Some(authz) = authorizations.next().await {
            let mut authz = authz.map_err(plain)?;
            match authz.status {
                AuthorizationStatus::Pending => {}
                AuthorizationStatus::Valid => continue,
                other => return Err(format!("the CA's authorization for {domain} is {other:?}")),
            }
            let mut challenge = authz.challenge(ChallengeType::TlsAlpn01).ok_or_else(|| {
                format!(
                    "the CA at {} offers no TLS-ALPN-01 challenge for {domain}, the only one the relay answers",
                    settings.directory_url
                )
            })?;
            let key = challenge_certificate(domain, challenge.key_authorization().digest().as_ref())?;
            *write(&shared.challenge) = Some(key);
            challenge.set_ready().await.map_err(plain)?;
        }
    }
    let polled = order.poll_ready(&RetryPolicy::new().timeout(CA_POLL)).await;
    match polled {
        Ok(OrderStatus::Ready) => {}
        Ok(_) | Err(instant_acme::Error::Api(_)) => {
            // The reason is in the challenge: look it up for the message.
            let mut reason = match polled {
                Err(e) => Some(plain(e)),
                _ => None,
            };
            let mut authorizations = order.authorizations();
            while let Some(Ok(mut authz)) = authorizations.next().await {
                if let Ok(state) = authz.refresh().await
                    && let Some(problem) = state.challenges.iter().find_map(|c| c.error.clone())
                {
                    reason = Some(plain(instant_acme::Error::Api(problem)));
                }
            }
            return Err(reason.unwrap_or_else(|| format!("the CA did not validate {domain}")));
        }
        Err(instant_acme::Error::Timeout(_)) => {
            return Err(format!(
                "the CA did not validate {domain} within {} s",
                CA_POLL.as_secs()
            ));
        }
        Err(e) => return Err(plain(e)),
    }
    *write(&shared.challenge) = None;
    let key_pem = order.finalize().await.map_err(plain)?;
    let chain_pem = order
        .poll_certificate(&RetryPolicy::new().timeout(CA_POLL))
        .await
        .map_err(plain)?;
    let loaded = load(chain_pem.as_bytes(), key_pem.as_bytes(), domain)
        .map_err(|e| format!("the CA's certificate cannot be served: {e}"))?;
    let info = loaded.info.clone();
    // The key first: a chain on disk always has its key beside it.
    write_private(&settings.key_path(), key_pem.as_bytes()).map_err(|e| e.to_string())?;
    write_private(&settings.cert_path(), chain_pem.as_bytes()).map_err(|e| e.to_string())?;
    *write(&shared.current) = Some(loaded);
    Ok(info)
}

async fn load_or_create_account(settings: &AcmeSettings) -> Result<Account, String> {
    // The CA's HTTPS client takes the process-wide provider: ring, as everywhere in the relay.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let builder = || match &settings.ca_file {
        Some(ca) => {
            Account::builder_with_root(ca).map_err(|e| format!("--acme-ca-file {}: {e}", ca.display()))
        }
        None => Account::builder().map_err(|e| format!("no HTTPS client for the CA: {e}")),
    };
    let path = settings.account_path();
    if let Ok(text) = std::fs::read(&path) {
        match serde_json::from_slice::<AccountCredentials>(&text) {
            Ok(credentials) => match builder()?.from_credentials(credentials).await {
                Ok(account) => return Ok(account),
                Err(e) => {
                    tracing::warn!(path = %path.display(), "the stored ACME account is not usable ({e}); creating a new one");
                }
            },
            Err(e) => {
                tracing::warn!(path = %path.display(), "cannot read the stored ACME account ({e}); creating a new one")
            }
        }
    }
    let contact: Vec<&str> = settings.contact.iter().map(String::as_str).collect();
    let (account, credentials) = builder()?
        .create(
            &NewAccount {
                contact: &contact,
                terms_of_service_agreed: true,
                only_return_existing: false,
            },
            settings.directory_url.clone(),
            None,
        )
        .await
        .map_err(|e| plain_words(&e, settings))?;
    let json = serde_json::to_vec(&credentials).map_err(|e| e.to_string())?;
    write_private(&path, &json).map_err(|e| e.to_string())?;
    Ok(account)
}

/// An ACME error in plain words: what happened and what to do.
fn plain_words(e: &instant_acme::Error, settings: &AcmeSettings) -> String {
    let domain = &settings.domain;
    match e {
        instant_acme::Error::Api(problem) => {
            let kind = problem
                .r#type
                .as_deref()
                .unwrap_or_default()
                .trim_start_matches("urn:ietf:params:acme:error:");
            let detail = problem.detail.as_deref().unwrap_or("no detail");
            let what = match kind {
                "rateLimited" => format!(
                    "the CA refused for now: rate limited (too many certificates or failed tries for {domain} \
                     lately); the relay tries again later — use --acme-staging while testing"
                ),
                "dns" => format!(
                    "DNS for {domain} does not answer: the CA cannot look it up — add an A (or AAAA) record \
                     pointing {domain} at this computer's public address"
                ),
                "connection" => format!(
                    "port 443 is not reachable: the CA could not connect to {domain} on port 443 — check that \
                     DNS points {domain} at this computer, that the relay listens on port 443 (or that the \
                     router forwards 443 to it) and that no firewall blocks it"
                ),
                "unauthorized" | "incorrectResponse" | "tls" => format!(
                    "DNS for {domain} does not point here: the CA reached {domain} on port 443 but not this \
                     relay (another server, a proxy or a CDN answered)"
                ),
                "caa" => format!("a CAA record of {domain} forbids this CA from issuing for it"),
                "rejectedIdentifier" => format!("the CA does not issue certificates for {domain}"),
                "accountDoesNotExist" => "the CA no longer knows the stored account".to_string(),
                _ => "the CA refused the request".to_string(),
            };
            format!("{what} ({detail})")
        }
        instant_acme::Error::Timeout(_) => "the CA did not answer in time".to_string(),
        other => format!(
            "cannot reach the ACME CA at {}: {} — check the network, or --acme-directory",
            settings.directory_url,
            with_causes(other)
        ),
    }
}

/// An error and its causes, `: `-separated ("client error (Connect): invalid peer certificate: …").
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        cause = c.source();
    }
    text
}

/// The TLS-ALPN-01 certificate (RFC 8737): self-signed, for `domain`, with the `acmeIdentifier`
/// extension holding the SHA-256 digest of the key authorization.
fn challenge_certificate(domain: &str, digest: &[u8]) -> Result<Arc<CertifiedKey>, String> {
    let fail = |e: rcgen::Error| format!("cannot make the challenge certificate: {e}");
    let mut params = rcgen::CertificateParams::new(vec![domain.to_string()]).map_err(fail)?;
    params.custom_extensions = vec![rcgen::CustomExtension::new_acme_identifier(digest)];
    let key = rcgen::KeyPair::generate().map_err(fail)?;
    let cert = params.self_signed(&key).map_err(fail)?;
    // Not `CertifiedKey::from_der`: its check parses the certificate and refuses the critical
    // acmeIdentifier extension, which is the point of this certificate.
    let signer = rustls::crypto::ring::default_provider()
        .key_provider
        .load_private_key(PrivateKeyDer::Pkcs8(key.serialize_der().into()))
        .map_err(|e| format!("cannot use the challenge key: {e}"))?;
    let certified = CertifiedKey::new(vec![cert.der().clone()], signer);
    Ok(Arc::new(certified))
}

/// A chain and key from PEM, checked: the key fits, the first certificate names `domain`.
fn load(chain_pem: &[u8], key_pem: &[u8], domain: &str) -> Result<Loaded, String> {
    let chain = CertificateDer::pem_slice_iter(chain_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("unreadable certificate chain: {e}"))?;
    let leaf = chain.first().ok_or("no certificate in the chain")?;
    let info = inspect(leaf, domain)?;
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| format!("unreadable private key: {e}"))?;
    let provider = rustls::crypto::ring::default_provider();
    let certified = CertifiedKey::from_der(chain, key, &provider)
        .map_err(|e| format!("the certificate and key do not fit: {e}"))?;
    Ok(Loaded {
        key: Arc::new(certified),
        info,
    })
}

/// The validity and serial of a certificate, refused if it does not name `domain`.
fn inspect(leaf: &CertificateDer<'_>, domain: &str) -> Result<CertificateInfo, String> {
    let (_, cert) = x509_parser::parse_x509_certificate(leaf.as_ref())
        .map_err(|e| format!("unreadable certificate: {e}"))?;
    let names: Vec<String> = match cert.subject_alternative_name() {
        Ok(Some(san)) => san
            .value
            .general_names
            .iter()
            .filter_map(|n| match n {
                x509_parser::extensions::GeneralName::DNSName(name) => Some(name.to_ascii_lowercase()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    if !names.iter().any(|n| n == domain) {
        return Err(format!(
            "the certificate is not for {domain} (it names {})",
            names.join(", ")
        ));
    }
    let validity = cert.validity();
    let (not_before, not_after) = (validity.not_before.timestamp(), validity.not_after.timestamp());
    Ok(CertificateInfo {
        not_before,
        not_after,
        renew_at: renew_at(not_before, not_after),
        serial: cert.raw_serial_as_string().replace(':', ""),
    })
}

/// The stored certificate, if it is there, readable, for the domain, fits its key and is not expired.
/// A certificate due for renewal is still returned (it is served while the new one is ordered).
fn load_stored(settings: &AcmeSettings) -> Option<Loaded> {
    let (cert_path, key_path) = (settings.cert_path(), settings.key_path());
    let chain = std::fs::read(&cert_path).ok()?;
    if let Err(e) = tighten(&key_path, FILE_MODE) {
        tracing::warn!("{e}");
    }
    let key = match std::fs::read(&key_path) {
        Ok(key) => key,
        Err(e) => {
            tracing::warn!(path = %key_path.display(), error = %e, "the stored certificate has no readable key; ordering a new one");
            return None;
        }
    };
    match load(&chain, &key, &settings.domain) {
        Ok(loaded) if loaded.info.not_after > unix_now() => Some(loaded),
        Ok(_) => {
            tracing::info!(path = %cert_path.display(), "the stored certificate has expired; ordering a new one");
            None
        }
        Err(e) => {
            tracing::warn!(path = %cert_path.display(), "the stored certificate is not usable ({e}); ordering a new one");
            None
        }
    }
}

/// Writes `bytes` to `path` whole or not at all, mode `0600`: a temporary file beside it, renamed over it.
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    use std::io::Write;
    let mut tmp_name = path.as_os_str().to_owned();
    tmp_name.push(format!(".tmp-{}", std::process::id()));
    let tmp = PathBuf::from(tmp_name);
    let _ = std::fs::remove_file(&tmp);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(FILE_MODE);
    }
    let result = options.open(&tmp).and_then(|mut file| {
        file.write_all(bytes)?;
        file.sync_all()
    });
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(files_error("write", &tmp, e));
    }
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        files_error("replace", path, e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = 24 * 3600;

    #[test]
    fn renewal_is_due_30_days_before_the_end_or_a_third_of_the_lifetime() {
        // Let's Encrypt's 90 days: renewed with 30 days left.
        assert_eq!(renew_at(0, 90 * DAY), 60 * DAY);
        // A year: still 30 days before the end.
        assert_eq!(renew_at(0, 365 * DAY), 335 * DAY);
        // Six days (short-lived): with two days left.
        assert_eq!(renew_at(0, 6 * DAY), 4 * DAY);
        // Thirty seconds (a test CA): with ten seconds left.
        assert_eq!(renew_at(1000, 1030), 1020);
        // Nonsense validity: due at once.
        assert_eq!(renew_at(50, 10), 10);
    }

    #[test]
    fn domains_are_checked_and_lowercased() {
        assert_eq!(
            check_domain("Relay.Example.com.").expect("valid"),
            "relay.example.com"
        );
        assert_eq!(check_domain("a-1.b2.example").expect("valid"), "a-1.b2.example");
        for bad in [
            "",
            "localhost",
            "https://relay.example.com",
            "relay.example.com:443",
            "*.example.com",
            "192.0.2.1",
            "-relay.example.com",
            "relay..example.com",
            "relay_1.example.com",
            "rélay.example.com",
        ] {
            assert!(check_domain(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn each_directory_has_its_own_folder() {
        let mut s = AcmeSettings::new("relay.example.com", "/data");
        assert_eq!(
            s.folder(),
            PathBuf::from("/data/acme/acme-v02.api.letsencrypt.org")
        );
        s.directory_url = LETS_ENCRYPT_STAGING.into();
        assert_eq!(
            s.folder(),
            PathBuf::from("/data/acme/acme-staging-v02.api.letsencrypt.org")
        );
        s.directory_url = "https://127.0.0.1:14000/dir".into();
        assert_eq!(s.folder(), PathBuf::from("/data/acme/127.0.0.1_14000"));
        assert_eq!(
            s.cert_path(),
            PathBuf::from("/data/acme/127.0.0.1_14000/relay.example.com.crt.pem")
        );
    }

    #[test]
    fn problems_are_told_in_plain_words() {
        let settings = AcmeSettings::new("relay.example.com", "/data");
        let problem = |kind: &str| {
            let json = serde_json::json!({
                "type": format!("urn:ietf:params:acme:error:{kind}"),
                "detail": "the CA's own words",
                "status": 400,
            });
            instant_acme::Error::Api(serde_json::from_value(json).expect("a problem"))
        };
        let text = plain_words(&problem("connection"), &settings);
        assert!(
            text.starts_with("port 443 is not reachable") && text.contains("the CA's own words"),
            "{text}"
        );
        assert!(
            plain_words(&problem("dns"), &settings).starts_with("DNS for relay.example.com does not answer")
        );
        assert!(plain_words(&problem("unauthorized"), &settings).contains("does not point here"));
        assert!(plain_words(&problem("rateLimited"), &settings).contains("rate limited"));
    }

    #[test]
    fn a_challenge_certificate_carries_the_digest() {
        let digest = [7u8; 32];
        let key = challenge_certificate("relay.example.com", &digest).expect("made");
        let leaf = key.cert.first().expect("a certificate");
        let (_, cert) = x509_parser::parse_x509_certificate(leaf.as_ref()).expect("parsed");
        // id-pe-acmeIdentifier, critical, an OCTET STRING of the digest.
        let ext = cert
            .extensions()
            .iter()
            .find(|e| e.oid.to_id_string() == "1.3.6.1.5.5.7.1.31")
            .expect("the acmeIdentifier extension");
        assert!(ext.critical);
        assert_eq!(&ext.value[2..], &digest);
        assert!(inspect(leaf, "relay.example.com").is_ok());
        assert!(inspect(leaf, "other.example.com").is_err());
    }
}
