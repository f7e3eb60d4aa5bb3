//! `pacerelle serve --domain`: HTTPS with a certificate from an ACME CA (pebble, Let's Encrypt's test CA,
//! when it is on PATH), served again from the data folder at the next start without the CA; the flags'
//! errors; and the absolute path of `pacerelle-mcp` in what `up` prints.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

#[path = "../../../pacerelle-relay/tests/support/pebble.rs"]
mod pebble;

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pebble::{DOMAIN, Pebble};

/// `pacerelle serve --domain DOMAIN` on 127.0.0.1:`port`, its standard error in `log`.
fn serve_domain(data: &Path, port: u16, directory: &str, ca_file: &Path, log: &Path) -> common::Proc {
    let child = Command::new(env!("CARGO_BIN_EXE_pacerelle"))
        .args([
            "serve",
            "--domain",
            DOMAIN,
            "--listen",
            &format!("127.0.0.1:{port}"),
        ])
        .args([
            "--acme-directory",
            directory,
            "--acme-contact",
            "admin@pacerelle.test",
        ])
        .arg("--acme-ca-file")
        .arg(ca_file)
        .arg("--data")
        .arg(data)
        .env("PACERELLE_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).expect("log"))
        .spawn()
        .expect("spawn");
    common::Proc(child)
}

/// Waits until `log` holds `text`.
fn wait_for_line(log: &Path, text: &str, within: Duration) -> String {
    let deadline = Instant::now() + within;
    loop {
        let now = std::fs::read_to_string(log).unwrap_or_default();
        if now.contains(text) {
            return now;
        }
        assert!(Instant::now() < deadline, "no {text:?} in:\n{now}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// GET https://DOMAIN/v1/health on `addr`, trusting only `root_pem`.
async fn health(addr: SocketAddr, root_pem: &[u8]) -> Result<serde_json::Value, reqwest::Error> {
    reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(root_pem).expect("root")])
        .resolve(DOMAIN, addr)
        .build()
        .expect("client")
        .get(format!("https://{DOMAIN}:{}/v1/health", addr.port()))
        .send()
        .await?
        .json()
        .await
}

#[tokio::test]
async fn serve_domain_obtains_a_certificate_and_serves_it_again_without_the_ca() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().expect("temp dir");
    let port = pebble::free_port();
    let Some(ca) = Pebble::start(dir.path(), port, 3600).await else {
        return;
    };
    let data = dir.path().join("data");
    let log = dir.path().join("serve.log");
    let addr = SocketAddr::from(([127, 0, 0, 1], port));

    let relay = serve_domain(&data, port, &ca.directory_url, &ca.https_ca, &log);
    let said = wait_for_line(&log, "in service", Duration::from_secs(60));
    assert!(
        said.contains(&format!("certificate for {DOMAIN} in service, valid until")),
        "{said}"
    );
    let root = ca.issuing_root().await;
    let ok = health(addr, root.as_bytes())
        .await
        .expect("HTTPS verified against pebble's root");
    assert_eq!(ok["ok"], true);
    drop(relay);

    // The CA gone: the next start serves the stored certificate, without the network.
    let (directory, ca_file) = (ca.directory_url.clone(), ca.https_ca.clone());
    drop(ca);
    let log = dir.path().join("serve-again.log");
    let _relay = serve_domain(&data, port, &directory, &ca_file, &log);
    wait_for_line(&log, "in service", Duration::from_secs(10));
    let mut ok = None;
    for _ in 0..50 {
        if let Ok(v) = health(addr, root.as_bytes()).await {
            ok = Some(v);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(ok.expect("the stored certificate served")["ok"], true);
    let said = std::fs::read_to_string(&log).expect("log");
    assert!(!said.contains("could not obtain"), "{said}");
}

#[test]
fn domain_flags_are_checked() {
    let data = tempfile::tempdir().expect("temp dir");
    let home = tempfile::tempdir().expect("temp dir");
    let run = |args: &[&str]| {
        let mut c = common::pacerelle(home.path(), "http://127.0.0.1:9");
        c.arg("serve").args(args).arg("--data").arg(data.path());
        common::run(c)
    };
    // ACME options without --domain: a usage error.
    for args in [
        &["--acme-staging"][..],
        &["--acme-contact", "mailto:a@example.com"],
        &["--acme-directory", "https://ca.example/dir"],
    ] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", common::stderr(&out));
    }
    // --domain with certificate files: one or the other.
    let out = run(&[
        "--domain",
        "relay.example.com",
        "--tls-cert",
        "c.pem",
        "--tls-key",
        "k.pem",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", common::stderr(&out));
    // A URL or an address instead of a name, a directory that is not https: told before anything starts.
    for (args, expected) in [
        (&["--domain", "https://relay.example.com"][..], "without https://"),
        (&["--domain", "192.0.2.1"], "an IP address"),
        (
            &[
                "--domain",
                "relay.example.com",
                "--acme-directory",
                "http://ca.example/dir",
            ],
            "not an https:// URL",
        ),
    ] {
        let out = run(&[args, &["--listen", "127.0.0.1:0"]].concat());
        let err = common::stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(expected), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// `up --json` on loopback, run from `exe`, until it prints; its JSON.
fn up_json(exe: &Path, path_var: &str) -> serde_json::Value {
    let home = tempfile::tempdir().expect("temp dir");
    let data = tempfile::tempdir().expect("temp dir");
    let mut child = Command::new(exe)
        .args(["--json", "up", "--listen", "127.0.0.1:0", "--data"])
        .arg(data.path())
        .env("PACERELLE_HOME", home.path())
        .env("PACERELLE_LOG", "error")
        .env("PATH", path_var)
        .env_remove("PACERELLE_RELAY_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let stdout = child.stdout.take().expect("stdout");
    let _up = common::Proc(child);
    let value: serde_json::Value = serde_json::Deserializer::from_reader(stdout)
        .into_iter()
        .next()
        .expect("a JSON object")
        .expect("JSON");
    value
}

#[test]
fn up_names_the_absolute_path_of_pacerelle_mcp_beside_it() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("temp dir");
    let bin = dir.path().join("bin with space");
    std::fs::create_dir_all(&bin).expect("folder");
    let exe = bin.join("pacerelle");
    std::fs::copy(env!("CARGO_BIN_EXE_pacerelle"), &exe).expect("copied");
    let mcp = bin.join("pacerelle-mcp");
    std::fs::write(&mcp, "#!/bin/sh\n").expect("written");
    std::fs::set_permissions(&mcp, std::fs::Permissions::from_mode(0o755)).expect("chmod");

    let v = up_json(&exe, "/nonexistent");
    let path = mcp.display().to_string();
    assert_eq!(v["mcpCommand"], path.as_str());
    assert_eq!(
        v["mcpConfig"]["mcpServers"]["pacerelle"]["command"],
        path.as_str()
    );
    let claude = v["claudeCode"].as_str().expect("claude");
    assert!(claude.ends_with(&format!("-- '{path}'")), "{claude}");
    let codex = v["codexToml"].as_str().expect("codex");
    assert!(codex.contains(&format!("command = \"{path}\"")), "{codex}");

    // Neither beside it nor on PATH: the bare name, and no path claimed.
    std::fs::remove_file(&mcp).expect("removed");
    let v = up_json(&exe, "/nonexistent");
    assert_eq!(v["mcpCommand"], serde_json::Value::Null);
    assert_eq!(
        v["mcpConfig"]["mcpServers"]["pacerelle"]["command"],
        "pacerelle-mcp"
    );
}

#[test]
fn up_domain_waits_for_the_certificate_and_says_why_there_is_none() {
    let dir = tempfile::tempdir().expect("temp dir");
    let home = dir.path().join("home");
    let log = dir.path().join("up.log");
    let out = dir.path().join("up.out");
    // A CA that is not there.
    let nowhere = format!("https://127.0.0.1:{}/dir", pebble::free_port());
    let child = Command::new(env!("CARGO_BIN_EXE_pacerelle"))
        .args([
            "up",
            "--domain",
            DOMAIN,
            "--listen",
            "127.0.0.1:0",
            "--acme-directory",
            &nowhere,
        ])
        .arg("--data")
        .arg(dir.path().join("data"))
        .env("PACERELLE_HOME", &home)
        .env("PACERELLE_LOG", "error")
        .env_remove("PACERELLE_RELAY_URL")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).expect("out"))
        .stderr(std::fs::File::create(&log).expect("log"))
        .spawn()
        .expect("spawn");
    let _up = common::Proc(child);
    let said = wait_for_line(&log, "could not obtain a certificate", Duration::from_secs(20));
    assert!(said.contains("cannot reach the ACME CA"), "{said}");
    assert!(said.contains("Trying again in"), "{said}");
    // Still waiting: no agent, no pairing link before there is a certificate.
    std::thread::sleep(Duration::from_millis(500));
    let printed = std::fs::read_to_string(&out).unwrap_or_default();
    assert!(!printed.contains("Pairing link"), "{printed}");
    assert!(!home.join("agent.json").exists());
}
