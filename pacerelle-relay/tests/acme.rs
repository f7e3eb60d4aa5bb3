//! `serve --domain`: certificates from an ACME CA, served by the relay's TLS listener.
//!
//! Without the network: a stored certificate still valid is served at once and no CA is asked; an expired one,
//! or one due for renewal, makes the relay order at once. With Let's Encrypt's test CA, pebble (when `pebble`
//! and `pebble-challtestsrv` are on PATH; `.ci/run` installs them): the relay obtains a certificate by
//! answering TLS-ALPN-01 itself, serves HTTPS that verifies against pebble's root, renews a short-lived
//! certificate and swaps it in without a restart.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use pacerelle_relay::{Acme, AcmeSettings, AcmeStatus, CertificateInfo, Config, Relay};
use tokio::sync::{oneshot, watch};

#[path = "support/pebble.rs"]
mod pebble;

use pebble::{DOMAIN, Pebble, TestPki, now, pki};

/// A stand-in for an ACME directory that counts the connections made to it and answers none.
struct CountingServer {
    url: String,
    connections: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl CountingServer {
    async fn start() -> CountingServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("address").port();
        let connections = Arc::new(AtomicUsize::new(0));
        let counted = connections.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                drop(stream);
            }
        });
        CountingServer {
            url: format!("https://127.0.0.1:{port}/directory"),
            connections,
            task,
        }
    }

    fn count(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

impl Drop for CountingServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A relay served over HTTPS with the certificates of `acme`, on 127.0.0.1.
struct HttpsRelay {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl HttpsRelay {
    async fn start(data: &Path, acme: &Acme, listener: tokio::net::TcpListener) -> HttpsRelay {
        let relay = Relay::open(Config {
            database_path: data.join("pacerelle.db"),
            open_registration: true,
            ..Config::default()
        })
        .await
        .expect("relay");
        let addr = listener.local_addr().expect("address");
        let (stop, stopped) = oneshot::channel::<()>();
        let tls = acme.tls_config().expect("TLS settings");
        let task = tokio::spawn(relay.serve_tls(listener, tls, async {
            let _ = stopped.await;
        }));
        HttpsRelay {
            addr,
            stop: Some(stop),
            task,
        }
    }

    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        tokio::time::timeout(Duration::from_secs(10), &mut self.task)
            .await
            .expect("graceful shutdown")
            .expect("task")
            .expect("serve_tls");
    }
}

/// GET /v1/health at https://DOMAIN on `addr`, trusting only `root_pem`; the serial of the certificate served.
async fn health_over_https(addr: SocketAddr, root_pem: &[u8]) -> String {
    let client = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(root_pem).expect("root")])
        .resolve(DOMAIN, addr)
        .tls_info(true)
        .build()
        .expect("client");
    let response = client
        .get(format!("https://{DOMAIN}:{}/v1/health", addr.port()))
        .send()
        .await
        .expect("health over HTTPS, verified");
    let served = response
        .extensions()
        .get::<reqwest::tls::TlsInfo>()
        .and_then(|info| info.peer_certificate())
        .expect("the served certificate")
        .to_vec();
    let health: serde_json::Value = response.json().await.expect("JSON");
    assert_eq!(health["ok"], true);
    let (_, cert) = x509_parser::parse_x509_certificate(&served).expect("a certificate");
    cert.raw_serial_as_string().replace(':', "")
}

fn store(settings: &AcmeSettings, pki: &TestPki) {
    std::fs::create_dir_all(settings.folder()).expect("folder");
    std::fs::write(settings.cert_path(), &pki.leaf_pem).expect("certificate");
    std::fs::write(settings.key_path(), &pki.key_pem).expect("key");
}

fn settings(data: &Path, directory_url: &str) -> AcmeSettings {
    let mut settings = AcmeSettings::new(DOMAIN, data);
    settings.directory_url = directory_url.to_string();
    settings.retry_min = Duration::from_secs(1);
    settings.retry_max = Duration::from_secs(2);
    settings.order_timeout = Duration::from_secs(60);
    settings
}

/// Waits until `status` satisfies `done`, at most `within`.
async fn wait_for(
    status: &mut watch::Receiver<AcmeStatus>,
    within: Duration,
    mut done: impl FnMut(&AcmeStatus) -> bool,
) -> AcmeStatus {
    let last = tokio::time::timeout(within, async {
        loop {
            let now = status.borrow_and_update().clone();
            if done(&now) {
                return now;
            }
            if status.changed().await.is_err() {
                return status.borrow().clone();
            }
        }
    })
    .await;
    match last {
        Ok(status) => status,
        Err(_) => panic!("timed out; status {:?}", status.borrow()),
    }
}

fn install_ring() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

#[tokio::test]
async fn a_stored_valid_certificate_is_served_without_asking_the_ca() {
    install_ring();
    let dir = tempfile::tempdir().expect("temp dir");
    let directory = CountingServer::start().await;
    let settings = settings(dir.path(), &directory.url);
    let pki = pki(
        &[DOMAIN],
        now() - time::Duration::days(1),
        now() + time::Duration::days(89),
    );
    store(&settings, &pki);

    let acme = Acme::start(settings.clone()).expect("started");
    let info = acme.certificate().expect("the stored certificate is served");
    assert!(matches!(&*acme.status().borrow(), AcmeStatus::Ready(i) if *i == info));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let relay = HttpsRelay::start(dir.path(), &acme, listener).await;
    let serial = health_over_https(relay.addr, pki.ca_pem.as_bytes()).await;
    assert_eq!(serial, info.serial);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        directory.count(),
        0,
        "the CA was asked though the certificate is valid"
    );

    // A client offering only acme-tls/1 (the CA's validation) gets no certificate when no challenge is
    // under way, and the relay goes on serving.
    let offered_acme = acme_tls_handshake(relay.addr).await;
    assert!(offered_acme.is_err());
    assert_eq!(
        health_over_https(relay.addr, pki.ca_pem.as_bytes()).await,
        info.serial
    );

    // Loose permissions on the stored key are tightened.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).expect("exists").permissions().mode() & 0o777;
        assert_eq!(mode(&settings.key_path()), 0o600);
        assert_eq!(mode(&settings.folder()), 0o700);
    }
    relay.stop().await;
}

/// A TLS handshake to `addr` as DOMAIN offering only the `acme-tls/1` protocol, accepting any certificate.
async fn acme_tls_handshake(addr: SocketAddr) -> Result<(), std::io::Error> {
    #[derive(Debug)]
    struct AnyCert;
    impl rustls::client::danger::ServerCertVerifier for AnyCert {
        fn verify_server_cert(
            &self,
            _: &rustls::pki_types::CertificateDer<'_>,
            _: &[rustls::pki_types::CertificateDer<'_>],
            _: &rustls::pki_types::ServerName<'_>,
            _: &[u8],
            _: rustls::pki_types::UnixTime,
        ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
            Ok(rustls::client::danger::ServerCertVerified::assertion())
        }
        fn verify_tls12_signature(
            &self,
            _: &[u8],
            _: &rustls::pki_types::CertificateDer<'_>,
            _: &rustls::DigitallySignedStruct,
        ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
        }
        fn verify_tls13_signature(
            &self,
            _: &[u8],
            _: &rustls::pki_types::CertificateDer<'_>,
            _: &rustls::DigitallySignedStruct,
        ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
        }
        fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
            rustls::crypto::ring::default_provider()
                .signature_verification_algorithms
                .supported_schemes()
        }
    }
    let mut config =
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("versions")
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCert))
            .with_no_client_auth();
    config.alpn_protocols = vec![b"acme-tls/1".to_vec()];
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let name = rustls::pki_types::ServerName::try_from(DOMAIN).expect("a name");
    connector.connect(name, tcp).await.map(|_| ())
}

#[tokio::test]
async fn an_expired_certificate_is_not_served_and_a_new_one_is_ordered() {
    install_ring();
    let dir = tempfile::tempdir().expect("temp dir");
    let directory = CountingServer::start().await;
    let settings = settings(dir.path(), &directory.url);
    let pki = pki(
        &[DOMAIN],
        now() - time::Duration::days(91),
        now() - time::Duration::days(1),
    );
    store(&settings, &pki);

    let acme = Acme::start(settings).expect("started");
    assert_eq!(acme.certificate(), None);
    let mut status = acme.status();
    // The CA cannot be reached: the failure is told in plain words, and retried.
    let failed = wait_for(&mut status, Duration::from_secs(20), |s| {
        matches!(s, AcmeStatus::Failed { .. })
    })
    .await;
    let AcmeStatus::Failed { message, serving, .. } = failed else {
        unreachable!()
    };
    assert!(message.contains("cannot reach the ACME CA"), "{message}");
    assert_eq!(serving, None);
    assert!(directory.count() >= 1, "no order was tried: {message}");
    let first = directory.count();
    tokio::time::timeout(Duration::from_secs(20), async {
        while directory.count() <= first {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("a retry after the backoff");
}

#[tokio::test]
async fn a_certificate_due_for_renewal_is_served_while_a_new_one_is_ordered() {
    install_ring();
    let dir = tempfile::tempdir().expect("temp dir");
    let directory = CountingServer::start().await;
    let settings = settings(dir.path(), &directory.url);
    // 80 of 90 days gone: due (less than 30 days left), still valid.
    let pki = pki(
        &[DOMAIN],
        now() - time::Duration::days(80),
        now() + time::Duration::days(10),
    );
    store(&settings, &pki);

    let acme = Acme::start(settings).expect("started");
    let info = acme.certificate().expect("served while due");
    let mut status = acme.status();
    let failed = wait_for(&mut status, Duration::from_secs(20), |s| {
        matches!(s, AcmeStatus::Failed { .. })
    })
    .await;
    assert!(matches!(failed, AcmeStatus::Failed { serving: Some(ref s), .. } if *s == info));
    assert!(directory.count() >= 1);
    // The old certificate is still served after the failed renewal.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let relay = HttpsRelay::start(dir.path(), &acme, listener).await;
    assert_eq!(
        health_over_https(relay.addr, pki.ca_pem.as_bytes()).await,
        info.serial
    );
    relay.stop().await;
}

#[tokio::test]
async fn a_stored_certificate_for_another_name_is_not_served() {
    install_ring();
    let dir = tempfile::tempdir().expect("temp dir");
    let directory = CountingServer::start().await;
    let settings = settings(dir.path(), &directory.url);
    let pki = pki(&["other.pacerelle.test"], now(), now() + time::Duration::days(90));
    store(&settings, &pki);
    let acme = Acme::start(settings).expect("started");
    assert_eq!(acme.certificate(), None);
}

#[tokio::test]
async fn obtains_serves_renews_and_swaps_a_certificate_from_pebble() {
    install_ring();
    let dir = tempfile::tempdir().expect("temp dir");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("address").port();
    // Certificates valid 30 s: renewed when a third of that is left, 20 s after they were issued.
    let Some(pebble) = Pebble::start(dir.path(), port, 30).await else {
        return;
    };
    let data = dir.path().join("data");
    let mut settings = settings(&data, &pebble.directory_url);
    settings.ca_file = Some(pebble.https_ca.clone());
    settings.contact = vec!["mailto:admin@pacerelle.test".into()];

    let acme = Acme::start(settings.clone()).expect("started");
    assert_eq!(*acme.status().borrow(), AcmeStatus::Obtaining);
    // Serving before there is a certificate: the CA's validation reaches this listener.
    let relay = HttpsRelay::start(&data, &acme, listener).await;
    let mut status = acme.status();
    let first = match wait_for(&mut status, Duration::from_secs(60), |s| {
        matches!(s, AcmeStatus::Ready(_) | AcmeStatus::Failed { .. })
    })
    .await
    {
        AcmeStatus::Ready(info) => info,
        other => panic!(
            "no certificate: {other:?}\npebble: {}",
            std::fs::read_to_string(dir.path().join("pebble.log")).unwrap_or_default()
        ),
    };
    assert!(first.not_after - first.not_before <= 30, "{first:?}");
    let root = pebble.issuing_root().await;
    assert_eq!(health_over_https(relay.addr, root.as_bytes()).await, first.serial);

    // Stored for the next start: the key 0600 in a 0700 folder.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).expect("exists").permissions().mode() & 0o777;
        assert_eq!(mode(&settings.key_path()), 0o600);
        assert_eq!(mode(&settings.folder().join("account.json")), 0o600);
        assert_eq!(mode(&settings.folder()), 0o700);
        assert_eq!(mode(&data.join("acme")), 0o700);
    }
    let stored = std::fs::read_to_string(settings.cert_path()).expect("stored chain");
    assert!(stored.contains("BEGIN CERTIFICATE"));

    // Renewed in the background when due, and swapped in on the same listener.
    let renewed: CertificateInfo = match wait_for(
        &mut status,
        Duration::from_secs(60),
        |s| matches!(s, AcmeStatus::Ready(i) if i.serial != first.serial),
    )
    .await
    {
        AcmeStatus::Ready(info) => info,
        other => panic!("not renewed: {other:?}"),
    };
    assert!(renewed.not_before >= first.not_before);
    assert_eq!(
        health_over_https(relay.addr, root.as_bytes()).await,
        renewed.serial
    );

    // Renewal on demand, too.
    acme.renew_now();
    let forced = match wait_for(
        &mut status,
        Duration::from_secs(60),
        |s| matches!(s, AcmeStatus::Ready(i) if i.serial != renewed.serial),
    )
    .await
    {
        AcmeStatus::Ready(info) => info,
        other => panic!("not renewed on demand: {other:?}"),
    };
    assert_eq!(
        health_over_https(relay.addr, root.as_bytes()).await,
        forced.serial
    );
    relay.stop().await;
}
