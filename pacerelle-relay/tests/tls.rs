//! `Relay::serve_tls`: the web app and the API over HTTPS, with a certificate and key read from PEM files.

use std::path::{Path, PathBuf};

use pacerelle_relay::{Config, Relay, TlsConfig};
use tokio::sync::oneshot;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tls").join(name)
}

fn read(name: &str) -> Vec<u8> {
    std::fs::read(fixture(name)).expect("fixture")
}

#[tokio::test]
async fn serves_the_app_and_the_api_over_https() {
    // reqwest is built without a provider: ring, as everywhere in the workspace.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().expect("temp dir");
    let relay = Relay::open(Config {
        database_path: dir.path().join("relay.db"),
        open_registration: true,
        ..Config::default()
    })
    .await
    .expect("relay");
    let tls = TlsConfig::from_pem_files(&fixture("cert.pem"), &fixture("key.pem")).expect("TLS config");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("listener");
    let port = listener.local_addr().expect("address").port();
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(relay.serve_tls(listener, tls, async {
        let _ = stopped.await;
    }));

    // A connection that never finishes its handshake holds up no one.
    let _idle = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    // Plain HTTP to the TLS port fails, and the server keeps serving.
    let plain = reqwest::Client::new()
        .get(format!("http://127.0.0.1:{port}/v1/health"))
        .send()
        .await;
    assert!(plain.is_err() || !plain.expect("response").status().is_success());

    let ca = reqwest::Certificate::from_pem(&read("ca.pem")).expect("CA");
    let client = reqwest::Client::builder()
        .add_root_certificate(ca)
        .build()
        .expect("client");
    for host in ["localhost", "127.0.0.1"] {
        let health: serde_json::Value = client
            .get(format!("https://{host}:{port}/v1/health"))
            .send()
            .await
            .expect("health over HTTPS")
            .json()
            .await
            .expect("JSON");
        assert_eq!(health["ok"], true, "{host}");
    }
    let page = client
        .get(format!("https://localhost:{port}/pair"))
        .send()
        .await
        .expect("pairing page");
    assert_eq!(page.status(), 200);
    assert!(
        page.headers()["content-security-policy"]
            .to_str()
            .expect("ASCII")
            .contains("script-src 'self'")
    );
    assert!(page.text().await.expect("body").contains("/app/app.js"));

    // A client that does not trust this certificate is refused at the handshake.
    let stranger = reqwest::Client::new()
        .get(format!("https://localhost:{port}/v1/health"))
        .send()
        .await;
    assert!(stranger.is_err());

    stop.send(()).expect("server running");
    tokio::time::timeout(std::time::Duration::from_secs(10), server)
        .await
        .expect("graceful shutdown")
        .expect("task")
        .expect("serve_tls");
}

#[test]
fn unusable_certificates_and_keys_are_refused() {
    let cert = read("cert.pem");
    let key = read("key.pem");
    assert!(TlsConfig::from_pem(&cert, &key).is_ok());
    for (chain, key, why) in [
        (&b""[..], &key[..], "no certificate"),
        (&cert[..], &b""[..], "no key"),
        (&key[..], &key[..], "a key as the certificate"),
        (&cert[..], &cert[..], "a certificate as the key"),
        (
            &read("ca.pem")[..],
            &key[..],
            "a key that does not match the certificate",
        ),
    ] {
        let err = TlsConfig::from_pem(chain, key).expect_err(why);
        assert!(err.to_string().contains("TLS"), "{why}: {err}");
    }
    let missing =
        TlsConfig::from_pem_files(&fixture("nothing.pem"), &fixture("key.pem")).expect_err("missing file");
    assert!(missing.to_string().contains("nothing.pem"));
}
