//! Connection hygiene against a real `pacerelle serve` child process: header, body and idle timeouts, the cap
//! on connections, long-polls left alone, over HTTP and HTTPS.
//!
//! The `pacerelle` binary belongs to another crate of the workspace, so these tests build it with cargo
//! (`cargo build -p pacerelle-cli --bin pacerelle`, into the same target directory) before starting it.
#![allow(clippy::expect_used, clippy::unwrap_used, dead_code)]

#[path = "relay/common.rs"]
mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::TestRelay;
use reqwest::Method;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The timeout the tests give `--header-timeout`, `--idle-timeout` and `--body-timeout`.
const SHORT: Duration = Duration::from_secs(2);
/// What a close is allowed beyond its timeout (a loaded machine, two cores).
const MARGIN: Duration = Duration::from_millis(1_500);
/// The file limit of the relay under test.
const RELAY_FILE_LIMIT: u64 = 1_024;

/// The `pacerelle` binary, built once per test run with the workspace's other programs.
fn pacerelle_bin() -> PathBuf {
    pacerelle_test_support::binary("pacerelle")
}

/// A `pacerelle serve` child process limited to [`RELAY_FILE_LIMIT`] open files; killed when dropped.
struct Served {
    child: Child,
    /// Kept open so the relay never writes to a closed pipe.
    _stdout: BufReader<ChildStdout>,
    port: u16,
    data: Option<tempfile::TempDir>,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Served {
    /// `pacerelle serve --listen 127.0.0.1:0` with these extra arguments, under `ulimit -n 1024` (soft and
    /// hard: the relay cannot raise it). `None` when this machine's hard limit is already below 1 024.
    fn start(args: &[&str]) -> Option<Served> {
        if let Ok((_, hard)) = rlimit::getrlimit(rlimit::Resource::NOFILE)
            && hard < RELAY_FILE_LIMIT
        {
            eprintln!("skipped: the hard file limit is {hard}, below {RELAY_FILE_LIMIT}");
            return None;
        }
        let data = tempfile::tempdir().expect("temp dir");
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(format!("ulimit -n {RELAY_FILE_LIMIT} && exec \"$0\" \"$@\""))
            .arg(pacerelle_bin())
            .args(["serve", "--json", "--listen", "127.0.0.1:0", "--data"])
            .arg(data.path())
            .args(args)
            .env("PACERELLE_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn pacerelle serve");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut text = String::new();
        while !text.trim_end().ends_with('}') {
            assert!(
                stdout.read_line(&mut text).expect("read") > 0,
                "serve exited: {text}"
            );
        }
        let started: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        let url = started["relayUrl"].as_str().expect("relayUrl");
        let port = url
            .rsplit(':')
            .next()
            .and_then(|p| p.trim_end_matches('/').parse().ok())
            .expect("a port in the relay's URL");
        let served = Served {
            child,
            _stdout: stdout,
            port,
            data: Some(data),
        };
        #[cfg(target_os = "linux")]
        {
            let limits = std::fs::read_to_string(format!("/proc/{}/limits", served.child.id()))
                .expect("/proc/PID/limits");
            let line = limits
                .lines()
                .find(|l| l.starts_with("Max open files"))
                .expect("a file limit");
            assert!(
                line.split_whitespace().nth(3) == Some("1024"),
                "the relay runs with {line}"
            );
        }
        Some(served)
    }

    fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// A client for the API (a new connection pool each time).
    fn client(&mut self) -> TestRelay {
        let dir = self
            .data
            .take()
            .unwrap_or_else(|| tempfile::tempdir().expect("temp dir"));
        TestRelay::external(self.base(), dir)
    }

    async fn connect(&self) -> TcpStream {
        TcpStream::connect(("127.0.0.1", self.port))
            .await
            .expect("connect")
    }
}

/// Raises this process's soft file limit to its hard limit; `false` (with a message) if that leaves fewer than
/// `needed`.
fn enough_files(needed: u64) -> bool {
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) if limit >= needed => true,
        Ok(limit) => {
            eprintln!("skipped: this process may open {limit} files, the test needs {needed}");
            false
        }
        Err(e) => {
            eprintln!("skipped: cannot raise the file limit: {e}");
            false
        }
    }
}

/// Reads until the peer closes; `Some(bytes)` if it does before `deadline`, `None` if it is still open then.
async fn closed_by<S: AsyncRead + Unpin>(stream: &mut S, deadline: Instant) -> Option<Vec<u8>> {
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return Some(seen),
            Ok(Ok(n)) => seen.extend_from_slice(&buf[..n]),
            Err(_) => return None,
        }
    }
}

/// Whether the peer has closed `stream` already (without waiting).
fn is_closed(stream: &TcpStream) -> bool {
    let mut buf = [0u8; 1];
    match stream.try_read(&mut buf) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => false,
        Err(_) => true,
    }
}

const HALF_HEAD: &[u8] = b"GET /v1/health HTTP/1.1\r\nhost: 127.0.0.1\r\nuser-agent: slow";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_and_slow_connections_lock_no_one_out() {
    if !enough_files(1_400 + 200) {
        return;
    }
    let Some(mut relay) = Served::start(&["--header-timeout", "2"]) else {
        return;
    };
    let api = relay.client();
    let agent = common::register(&api).await;
    let device = common::pair(&api, &agent).await;

    let flood = Instant::now();
    let mut idle = Vec::with_capacity(1_100);
    for _ in 0..1_100 {
        idle.push(relay.connect().await);
    }
    let idle_connected = flood.elapsed();
    let mut half = Vec::with_capacity(300);
    for _ in 0..300 {
        let mut stream = relay.connect().await;
        stream.write_all(HALF_HEAD).await.expect("half a head");
        half.push((stream, Instant::now()));
    }
    let half_open = half.iter().filter(|(s, _)| !is_closed(s)).count();
    let idle_open = idle.iter().filter(|s| !is_closed(s)).count();
    eprintln!(
        "1100 idle connected in {idle_connected:?}, 300 half-head in {:?} more; still open: {idle_open} idle, \
         {half_open} half-head",
        flood.elapsed() - idle_connected
    );

    // A new client gets through at once: health and a device's send.
    let fresh = relay.client();
    let started = Instant::now();
    let health = tokio::time::timeout(
        Duration::from_secs(1),
        fresh.call(Method::GET, "/v1/health", None, None),
    )
    .await
    .expect("health answered within a second");
    assert!(health.status.is_success(), "{health:?}");
    let stored = tokio::time::timeout(
        Duration::from_secs(1),
        common::send_task_reply(&fresh, &device, "m-flood-1", "still there?"),
    )
    .await
    .expect("a send answered within a second");
    assert!(stored.status.is_success(), "{stored:?}");
    eprintln!("health and send answered in {:?}", started.elapsed());
    // The relay was under pressure then: it held many of the half heads (the kernel's accept queue delays
    // some connections, so the earliest half heads may have timed out already).
    assert!(half_open >= 100, "only {half_open} half heads still open");

    // Each half head is closed within the header timeout of when it was sent.
    for (i, (stream, sent)) in half.iter_mut().enumerate() {
        assert!(
            closed_by(stream, *sent + SHORT + MARGIN).await.is_some(),
            "half-head connection {i} still open {:?} after its head began",
            sent.elapsed()
        );
    }
    let deadline = Instant::now() + SHORT + MARGIN;
    for stream in &mut idle {
        assert!(
            closed_by(stream, deadline).await.is_some(),
            "a silent connection outlived the header timeout"
        );
    }
    // The task is stored: the agent sees it.
    let batch: pacerelle_core::wire::MessageBatch =
        common::wait_messages(&fresh, &agent, None, 0, None).await.ok();
    assert_eq!(common::ids_of(&batch), ["m-flood-1"]);
}

#[tokio::test]
async fn long_polls_outlive_the_idle_and_body_timeouts() {
    let Some(mut relay) = Served::start(&["--idle-timeout", "2", "--body-timeout", "2"]) else {
        return;
    };
    let api = relay.client();
    let agent = common::register(&api).await;
    let started = Instant::now();
    let reply = common::wait_messages(&api, &agent, None, 20, None).await;
    assert!(reply.status.is_success(), "{reply:?}");
    assert!(
        started.elapsed() >= Duration::from_secs(15),
        "the wait ended after {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_body_that_does_not_arrive_is_answered_408_and_closed() {
    let Some(relay) = Served::start(&["--body-timeout", "2"]) else {
        return;
    };
    let mut stream = relay.connect().await;
    stream
        .write_all(
            b"POST /v1/agents HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n\
              content-length: 100\r\n\r\n{\"agentId\":",
        )
        .await
        .expect("write");
    let sent = Instant::now();
    let answer = closed_by(&mut stream, sent + SHORT + MARGIN)
        .await
        .expect("closed after the body timeout");
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("\"code\":\"request_timeout\""), "{text}");
    assert!(!text.contains("agentId"), "the answer echoes the body: {text}");
    assert!(sent.elapsed() >= Duration::from_secs(1), "answered too early");
}

#[tokio::test]
async fn kept_alive_connections_close_after_the_idle_timeout() {
    let Some(relay) = Served::start(&["--idle-timeout", "2", "--header-timeout", "10"]) else {
        return;
    };
    let mut stream = relay.connect().await;
    stream
        .write_all(b"GET /v1/health HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
        .await
        .expect("write");
    let mut buf = [0u8; 4096];
    let n = stream.read(&mut buf).await.expect("an answer");
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
    let answered = Instant::now();
    assert!(
        closed_by(&mut stream, answered + SHORT + MARGIN).await.is_some(),
        "an idle kept-alive connection outlived the idle timeout"
    );
    assert!(answered.elapsed() >= Duration::from_secs(1), "closed too early");
}

#[tokio::test]
async fn at_the_cap_with_every_connection_busy_a_new_one_is_refused() {
    let Some(mut relay) = Served::start(&["--max-connections", "2"]) else {
        return;
    };
    let api = relay.client();
    let agent = common::register(&api).await;
    let poll = format!(
        "GET /v1/agent/messages?wait=30 HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {}\r\n\r\n",
        agent.bearer
    );
    let mut parked = Vec::new();
    for _ in 0..2 {
        let mut stream = relay.connect().await;
        stream.write_all(poll.as_bytes()).await.expect("write");
        // Parked before the next one connects (the API client's idle connection is displaced meanwhile).
        tokio::time::sleep(Duration::from_millis(500)).await;
        parked.push(stream);
    }
    let mut refused = relay.connect().await;
    let answer = closed_by(&mut refused, Instant::now() + Duration::from_secs(2))
        .await
        .expect("refused at once");
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 503"), "{text}");
    assert!(text.contains("\"code\":\"unavailable\""), "{text}");
    for stream in &parked {
        assert!(!is_closed(stream), "a parked long-poll was closed");
    }
    drop(parked);
    // Once they are gone, there is room again.
    common::eventually(5, "health after the long-polls ended", || async {
        let mut stream = relay.connect().await;
        stream
            .write_all(b"GET /v1/health HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n")
            .await
            .ok()?;
        let answer = closed_by(&mut stream, Instant::now() + Duration::from_secs(2)).await?;
        answer.starts_with(b"HTTP/1.1 200").then_some(())
    })
    .await;
}

/// A TLS client trusting the test CA.
fn tls_connector() -> tokio_rustls::TlsConnector {
    let ca = std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tls/ca.pem")).expect("CA");
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::pem::PemObject::pem_slice_iter(&ca) {
        roots.add(cert.expect("a certificate")).expect("a root");
    }
    let config =
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

#[tokio::test]
async fn over_https_the_header_timeout_and_the_cap_apply() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let tls = |name: &str| {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/tls")
            .join(name)
            .to_str()
            .expect("UTF-8 path")
            .to_string()
    };
    let (cert, key) = (tls("cert.pem"), tls("key.pem"));
    let Some(relay) = Served::start(&[
        "--header-timeout",
        "2",
        "--max-connections",
        "8",
        "--tls-cert",
        &cert,
        "--tls-key",
        &key,
    ]) else {
        return;
    };
    let connector = tls_connector();
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");

    // Half a head after the handshake: closed within the header timeout.
    let mut slow = connector
        .connect(name.clone(), relay.connect().await)
        .await
        .expect("handshake");
    slow.write_all(HALF_HEAD).await.expect("half a head");
    slow.flush().await.expect("flush");
    let sent = Instant::now();
    assert!(
        closed_by(&mut slow, sent + SHORT + MARGIN).await.is_some(),
        "a half head over TLS outlived the header timeout"
    );
    assert!(sent.elapsed() >= Duration::from_secs(1), "closed too early");

    // 20 silent connections against a cap of 8: the oldest are displaced at once.
    let mut silent = Vec::new();
    for _ in 0..20 {
        silent.push(relay.connect().await);
    }
    let deadline = Instant::now() + Duration::from_secs(1);
    let mut closed = 0;
    for stream in &mut silent[..12] {
        if closed_by(stream, deadline).await.is_some() {
            closed += 1;
        }
    }
    assert_eq!(closed, 12, "connections beyond the cap stayed open");
    // And a real client still gets through within a second.
    let ca = reqwest::Certificate::from_pem(
        &std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tls/ca.pem")).expect("CA"),
    )
    .expect("CA");
    let client = reqwest::Client::builder()
        .add_root_certificate(ca)
        .build()
        .expect("client");
    let health = tokio::time::timeout(
        Duration::from_secs(1),
        client
            .get(format!("https://localhost:{}/v1/health", relay.port))
            .send(),
    )
    .await
    .expect("health within a second")
    .expect("health over HTTPS");
    assert!(health.status().is_success());
}
