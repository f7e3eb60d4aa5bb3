//! Test certificates and Let's Encrypt's test CA, pebble, for the tests of `--domain` (included by the
//! relay's and the CLI's tests with `#[path]`).
#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

/// The domain the tests ask certificates for; pebble's DNS server resolves every name to 127.0.0.1.
pub const DOMAIN: &str = "relay.pacerelle.test";

/// A test CA and a leaf certificate it signed for `names`, valid from `not_before` to `not_after`.
pub struct TestPki {
    pub ca_pem: String,
    pub leaf_pem: String,
    pub key_pem: String,
}

pub fn pki(names: &[&str], not_before: time::OffsetDateTime, not_after: time::OffsetDateTime) -> TestPki {
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "Pacerelle test CA");
    let ca_cert = ca.self_signed(&ca_key).expect("CA certificate");
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().expect("leaf key");
    let mut leaf =
        CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).expect("leaf params");
    leaf.not_before = not_before;
    leaf.not_after = not_after;
    let leaf_cert = leaf.signed_by(&key, &issuer).expect("leaf certificate");
    TestPki {
        ca_pem: ca_cert.pem(),
        leaf_pem: leaf_cert.pem(),
        key_pem: key.serialize_pem(),
    }
}

pub fn now() -> time::OffsetDateTime {
    time::OffsetDateTime::now_utc()
}

/// A port that was free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("address")
        .port()
}

/// A child process killed when dropped.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn on_path(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(program))
            .find(|p| p.is_file())
    })
}

/// Pebble and its DNS server, with a TLS-ALPN-01 port of ours and certificates valid `validity_s`.
pub struct Pebble {
    _pebble: Process,
    _dns: Process,
    pub directory_url: String,
    pub management: String,
    /// The root that pebble's own HTTPS certificate chains to.
    pub https_ca: PathBuf,
}

impl Pebble {
    pub async fn start(dir: &Path, tls_port: u16, validity_s: u64) -> Option<Pebble> {
        let (Some(pebble), Some(challtestsrv)) = (on_path("pebble"), on_path("pebble-challtestsrv")) else {
            assert!(
                std::env::var_os("PACERELLE_REQUIRE_PEBBLE").is_none(),
                "PACERELLE_REQUIRE_PEBBLE is set but pebble and pebble-challtestsrv are not on PATH"
            );
            // Straight to the standard error, not through the test harness's capture: seen in every run.
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED: pebble and pebble-challtestsrv are not on PATH (.ci/run installs them: go install \
                 github.com/letsencrypt/pebble/v2/cmd/pebble@v2.10.3 …/pebble-challtestsrv@v2.10.3)"
            );
            return None;
        };
        let https = pki(
            &["localhost", "127.0.0.1"],
            now() - time::Duration::days(1),
            now() + time::Duration::days(30),
        );
        let ca = dir.join("pebble-https-ca.pem");
        std::fs::write(&ca, &https.ca_pem).expect("CA");
        std::fs::write(dir.join("pebble-cert.pem"), &https.leaf_pem).expect("cert");
        std::fs::write(dir.join("pebble-key.pem"), &https.key_pem).expect("key");
        let (listen, management, dns) = (free_port(), free_port(), free_port());
        let config = serde_json::json!({ "pebble": {
            "listenAddress": format!("127.0.0.1:{listen}"),
            "managementListenAddress": format!("127.0.0.1:{management}"),
            "certificate": dir.join("pebble-cert.pem"),
            "privateKey": dir.join("pebble-key.pem"),
            "httpPort": free_port(),
            "tlsPort": tls_port,
            "ocspResponderURL": "",
            "externalAccountBindingRequired": false,
            "retryAfter": { "authz": 1, "order": 1 },
            "keyAlgorithm": "ecdsa",
            "profiles": { "default": { "description": "short-lived, for renewal tests", "validityPeriod": validity_s } },
        }});
        std::fs::write(dir.join("pebble.json"), config.to_string()).expect("config");
        let log = |name: &str| Stdio::from(std::fs::File::create(dir.join(name)).expect("log"));
        // DNS only: every name resolves to 127.0.0.1, no IPv6.
        let dns_server = Process(
            Command::new(challtestsrv)
                .args(["-http01", "", "-https01", "", "-tlsalpn01", "", "-doh", ""])
                .args(["-dnsserver", &format!("127.0.0.1:{dns}")])
                .args(["-management", &format!("127.0.0.1:{}", free_port())])
                .args(["-defaultIPv4", "127.0.0.1", "-defaultIPv6", ""])
                .stdout(log("challtestsrv.log"))
                .stderr(Stdio::null())
                .spawn()
                .expect("pebble-challtestsrv starts"),
        );
        let pebble = Process(
            Command::new(pebble)
                .arg("-config")
                .arg(dir.join("pebble.json"))
                .args(["-dnsserver", &format!("127.0.0.1:{dns}")])
                .env("PEBBLE_VA_NOSLEEP", "1")
                .env("PEBBLE_WFE_NONCEREJECT", "0")
                .env("PEBBLE_AUTHZREUSE", "0")
                .stdout(log("pebble.log"))
                .stderr(Stdio::null())
                .spawn()
                .expect("pebble starts"),
        );
        let started = Pebble {
            _pebble: pebble,
            _dns: dns_server,
            directory_url: format!("https://127.0.0.1:{listen}/dir"),
            management: format!("https://127.0.0.1:{management}"),
            https_ca: ca,
        };
        // Ready when the directory answers.
        let client = started.client();
        let mut last = None;
        for _ in 0..100 {
            match client.get(&started.directory_url).send().await {
                Ok(r) if r.status().is_success() => return Some(started),
                Ok(r) => last = Some(format!("status {}", r.status())),
                Err(e) => last = Some(format!("{e:?}")),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!(
            "pebble did not start ({last:?}): {}",
            std::fs::read_to_string(dir.join("pebble.log")).unwrap_or_default()
        );
    }

    pub fn client(&self) -> reqwest::Client {
        let ca = std::fs::read(&self.https_ca).expect("CA");
        reqwest::Client::builder()
            .user_agent("pacerelle-tests")
            .tls_certs_only([reqwest::Certificate::from_pem(&ca).expect("CA")])
            .build()
            .expect("client")
    }

    /// The root of the certificates pebble issues (new at each start).
    pub async fn issuing_root(&self) -> String {
        self.client()
            .get(format!("{}/roots/0", self.management))
            .send()
            .await
            .expect("pebble's root")
            .text()
            .await
            .expect("PEM")
    }
}
