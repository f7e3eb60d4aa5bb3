//! The HTTP endpoint beyond loopback: HTTPS with a certificate made here, the operator's bearer, Origin and
//! Host checks, and the refusals at start — the real binary, a real relay, rmcp's streamable HTTP client and
//! plain HTTP requests.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use common::{Era, Server, TestClient, TestRelay, command};
use pacerelle_client::AgentClient;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientServiceExt, ServiceExt};
use rustls::pki_types::pem::PemObject;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;

/// A bearer as `openssl rand -hex 32` makes one.
fn new_bearer() -> String {
    pacerelle_client::core::keys::random_array::<32>()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A certificate authority and a certificate for `localhost` and 127.0.0.1 signed by it, in files.
struct Pki {
    ca_pem: String,
    cert: PathBuf,
    key: PathBuf,
    _dir: tempfile::TempDir,
}

fn pki() -> Pki {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "pacerelle-mcp test CA");
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
    let ca_pem = ca.self_signed(&ca_key).expect("CA certificate").pem();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().expect("key");
    let cert = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
        .expect("params")
        .signed_by(&key, &issuer)
        .expect("certificate");
    let dir = tempfile::tempdir().expect("dir");
    let (cert_path, key_path) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert_path, cert.pem()).expect("write certificate");
    std::fs::write(&key_path, key.serialize_pem()).expect("write key");
    Pki {
        ca_pem,
        cert: cert_path,
        key: key_path,
        _dir: dir,
    }
}

/// A reqwest client that trusts only the test's authority.
fn https_client(pki: &Pki) -> reqwest::Client {
    // reqwest is built without a provider: ring, as everywhere in the workspace.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(pki.ca_pem.as_bytes()).expect("CA")])
        .build()
        .expect("client")
}

/// A running `pacerelle-mcp --http` and the port it listens on.
struct Endpoint {
    child: Child,
    port: u16,
}

impl Endpoint {
    /// Starts the binary with `args` and `bearer` in its environment, and waits for the line that names its
    /// endpoint (the port it was given for `:0`).
    async fn start(agent: &AgentClient, relay_url: &str, args: &[&str], bearer: Option<&str>) -> Endpoint {
        let mut cmd = command(agent, relay_url, args);
        match bearer {
            Some(bearer) => cmd.env("PACERELLE_MCP_BEARER", bearer),
            None => cmd.env_remove("PACERELLE_MCP_BEARER"),
        };
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn pacerelle-mcp");
        let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
        let port = tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(line) = lines.next_line().await.expect("read stderr") {
                eprintln!("{line}");
                if let Some((_, url)) = line.split_once("MCP endpoint at ") {
                    let url = url.split_whitespace().next().expect("url");
                    let port = url.rsplit_once(':').expect("port").1.trim_end_matches("/mcp");
                    return port.parse::<u16>().expect("port number");
                }
            }
            panic!("pacerelle-mcp ended without naming its endpoint");
        })
        .await
        .expect("the endpoint starts");
        // The rest of the log goes on to the test's output.
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                eprintln!("{line}");
            }
        });
        Endpoint { child, port }
    }

    /// Stops the server with SIGTERM and checks that it exits cleanly.
    async fn stop(mut self) {
        let pid = self.child.id().expect("pid");
        let killed = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .expect("kill");
        assert!(killed.success());
        let status = tokio::time::timeout(Duration::from_secs(20), self.child.wait())
            .await
            .expect("exits")
            .expect("status");
        assert!(status.success(), "{status:?}");
    }
}

/// An MCP `initialize` POST, as a client speaking JSON-RPC over HTTP sends it.
fn initialize(client: &reqwest::Client, url: &str) -> reqwest::RequestBuilder {
    client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(
            json!({
                "jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                           "clientInfo": {"name": "raw", "version": "0"}}
            })
            .to_string(),
        )
}

/// The body of an accepted `initialize`, read until the server's answer is in (the stream may stay open).
async fn server_info(response: reqwest::Response) -> String {
    assert_eq!(response.status(), 200, "initialize accepted");
    let mut response = response;
    let mut body = String::new();
    tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(chunk) = response.chunk().await.expect("body") {
            body.push_str(&String::from_utf8_lossy(&chunk));
            if body.contains("serverInfo") {
                return;
            }
        }
    })
    .await
    .expect("the answer to initialize");
    assert!(body.contains("pacerelle-mcp"), "{body}");
    body
}

#[tokio::test]
async fn an_https_client_with_the_bearer_lists_the_tools_and_reads_the_status() {
    let relay = TestRelay::start().await;
    let (agent, _device) = relay.agent_and_device().await;
    let pki = pki();
    let bearer = new_bearer();
    let tls = [
        "--tls-cert",
        pki.cert.to_str().unwrap(),
        "--tls-key",
        pki.key.to_str().unwrap(),
    ];
    let endpoint = Endpoint::start(
        &agent,
        &relay.url,
        &[&["--http", "0.0.0.0:0"], &tls[..]].concat(),
        Some(&bearer),
    )
    .await;
    let url = format!("https://localhost:{}/mcp", endpoint.port);

    for era in [Era::Legacy, Era::Modern] {
        let transport = StreamableHttpClientTransport::with_client(
            https_client(&pki),
            StreamableHttpClientTransportConfig::with_uri(url.as_str()).auth_header(bearer.as_str()),
        );
        let handler = TestClient::default();
        let progress = handler.progress.clone();
        let client = handler
            .serve_with_lifecycle(transport, era.lifecycle())
            .await
            .expect("start the MCP session over HTTPS");
        let server = Server {
            client,
            pid: endpoint.child.id().expect("pid"),
            progress,
        };
        let tools = server.client.list_all_tools().await.expect("tools/list");
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        for tool in ["get_status", "wait_for_messages", "ask_user", "wait_for_answer"] {
            assert!(names.contains(&tool), "{era:?}: {tool} in {names:?}");
        }
        let status = server.ok("get_status", json!({})).await;
        assert_eq!(status["relayReachable"], true, "{era:?}: {status}");
        assert_eq!(status["agentId"], agent.agent_id(), "{era:?}: {status}");
        assert_eq!(
            status["devices"].as_array().map(Vec::len),
            Some(1),
            "{era:?}: {status}"
        );
        server.stop().await;
    }

    // Plain HTTP to the TLS port is not served.
    let plain = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{}/mcp", endpoint.port))
        .send()
        .await;
    assert!(plain.is_err() || plain.unwrap().status() != 200);
    endpoint.stop().await;
}

#[tokio::test]
async fn a_missing_or_wrong_bearer_gets_401_and_a_foreign_origin_403() {
    let relay = TestRelay::start().await;
    let (agent, _device) = relay.agent_and_device().await;
    let pki = pki();
    let bearer = new_bearer();
    let args = [
        "--http",
        "0.0.0.0:0",
        "--tls-cert",
        pki.cert.to_str().unwrap(),
        "--tls-key",
        pki.key.to_str().unwrap(),
        "--allowed-origin",
        "https://app.example.com",
    ];
    let endpoint = Endpoint::start(&agent, &relay.url, &args, Some(&bearer)).await;
    let url = format!("https://localhost:{}/mcp", endpoint.port);
    let client = https_client(&pki);

    let missing = initialize(&client, &url).send().await.expect("response");
    assert_eq!(missing.status(), 401);
    let challenge = missing.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(challenge.starts_with("Bearer "), "{challenge}");
    assert!(missing.headers().get("mcp-session-id").is_none());

    let wrong_bearers = [
        new_bearer(),
        bearer[..bearer.len() - 1].to_string(),
        format!("{bearer}0"),
        agent.token().expose(),
    ];
    for wrong in wrong_bearers {
        let refused = initialize(&client, &url)
            .bearer_auth(&wrong)
            .send()
            .await
            .expect("response");
        assert_eq!(refused.status(), 401);
        let challenge = refused.headers()["www-authenticate"].to_str().unwrap();
        assert!(
            challenge.starts_with("Bearer ") && challenge.contains("invalid_token"),
            "{challenge}"
        );
        assert!(refused.headers().get("mcp-session-id").is_none());
    }
    let basic = initialize(&client, &url)
        .header("authorization", format!("Basic {bearer}"))
        .send()
        .await
        .expect("response");
    assert_eq!(basic.status(), 401, "only the Bearer scheme carries the bearer");

    let foreign = initialize(&client, &url)
        .bearer_auth(&bearer)
        .header("origin", "https://evil.example")
        .send()
        .await
        .expect("response");
    assert_eq!(foreign.status(), 403);
    assert!(foreign.text().await.unwrap().contains("Origin"));
    let other_port = initialize(&client, &url)
        .bearer_auth(&bearer)
        .header("origin", "https://app.example.com:8443")
        .send()
        .await
        .expect("response");
    assert_eq!(other_port.status(), 403, "an origin is scheme, host and port");

    // The listed origin, and a client that sends none, are served.
    let listed = initialize(&client, &url)
        .bearer_auth(&bearer)
        .header("origin", "https://app.example.com")
        .send()
        .await
        .expect("response");
    assert!(listed.headers().get("mcp-session-id").is_some());
    server_info(listed).await;
    server_info(
        initialize(&client, &url)
            .bearer_auth(&bearer)
            .send()
            .await
            .expect("response"),
    )
    .await;

    // Behind the bearer, rmcp's session rules hold: a session id it never gave is not found.
    let unknown = client
        .post(&url)
        .bearer_auth(&bearer)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", "not-a-session")
        .header("mcp-protocol-version", "2025-11-25")
        .body(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string())
        .send()
        .await
        .expect("response");
    assert_eq!(unknown.status(), 404);
    endpoint.stop().await;
}

#[tokio::test]
async fn on_loopback_no_bearer_is_needed_but_one_that_is_set_is_enforced() {
    let relay = TestRelay::start().await;
    let (agent, _device) = relay.agent_and_device().await;
    let client = reqwest::Client::new();

    let open = Endpoint::start(&agent, &relay.url, &["--http", "127.0.0.1:0"], None).await;
    let url = format!("http://127.0.0.1:{}/mcp", open.port);
    server_info(initialize(&client, &url).send().await.expect("response")).await;
    let browser = initialize(&client, &url)
        .header("origin", "http://localhost:5173")
        .send()
        .await
        .expect("response");
    assert_eq!(
        browser.status(),
        403,
        "no origin is listed: every browser origin is foreign"
    );
    open.stop().await;

    let bearer = new_bearer();
    let guarded = Endpoint::start(&agent, &relay.url, &["--http", "127.0.0.1:0"], Some(&bearer)).await;
    let url = format!("http://127.0.0.1:{}/mcp", guarded.port);
    let missing = initialize(&client, &url).send().await.expect("response");
    assert_eq!(missing.status(), 401);
    server_info(
        initialize(&client, &url)
            .bearer_auth(&bearer)
            .send()
            .await
            .expect("response"),
    )
    .await;
    guarded.stop().await;
}

#[tokio::test]
async fn behind_a_tls_proxy_plain_http_checks_the_host_names_given() {
    let relay = TestRelay::start().await;
    let (agent, _device) = relay.agent_and_device().await;
    let bearer = new_bearer();
    let args = [
        "--http",
        "0.0.0.0:0",
        "--insecure-http",
        "--allowed-host",
        "mcp.example.com",
    ];
    let endpoint = Endpoint::start(&agent, &relay.url, &args, Some(&bearer)).await;
    let url = format!("http://127.0.0.1:{}/mcp", endpoint.port);
    let client = reqwest::Client::new();
    server_info(
        initialize(&client, &url)
            .bearer_auth(&bearer)
            .header("host", "mcp.example.com")
            .send()
            .await
            .expect("response"),
    )
    .await;
    let rebound = initialize(&client, &url)
        .bearer_auth(&bearer)
        .header("host", "rebound.example.net")
        .send()
        .await
        .expect("response");
    assert_eq!(rebound.status(), 403);
    assert!(rebound.text().await.unwrap().contains("Host"));
    endpoint.stop().await;
}

/// Runs the binary to its refusal and returns its standard error.
async fn refused_at_start(
    agent: &AgentClient,
    relay_url: &str,
    args: &[&str],
    bearer: Option<&str>,
) -> String {
    let mut cmd = command(agent, relay_url, args);
    match bearer {
        Some(bearer) => cmd.env("PACERELLE_MCP_BEARER", bearer),
        None => cmd.env_remove("PACERELLE_MCP_BEARER"),
    };
    let out = tokio::time::timeout(Duration::from_secs(30), cmd.stdin(Stdio::null()).output())
        .await
        .expect("ends")
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(!stderr.contains("MCP endpoint at"), "{stderr}");
    stderr
}

#[tokio::test]
async fn unsafe_endpoints_are_refused_at_start_with_a_clear_message() {
    let relay = TestRelay::start().await;
    let (agent, _device) = relay.agent_and_device().await;
    let pki = pki();
    let tls = [
        "--tls-cert",
        pki.cert.to_str().unwrap(),
        "--tls-key",
        pki.key.to_str().unwrap(),
    ];
    let beyond = [&["--http", "0.0.0.0:0"], &tls[..]].concat();

    let no_bearer = refused_at_start(&agent, &relay.url, &beyond, None).await;
    assert!(
        no_bearer.contains("needs a bearer") && no_bearer.contains("PACERELLE_MCP_BEARER"),
        "{no_bearer}"
    );

    let token = agent.token().expose();
    for args in [&beyond[..], &["--http", "127.0.0.1:0"]] {
        let agent_token = refused_at_start(&agent, &relay.url, args, Some(&token)).await;
        assert!(
            agent_token.contains("must not be a Pacerelle agent token"),
            "{agent_token}"
        );
        assert!(!agent_token.contains(&token), "the token is never printed");
    }

    let weak = refused_at_start(&agent, &relay.url, &beyond, Some("correct-horse-battery")).await;
    assert!(weak.contains("too weak"), "{weak}");
    assert!(!weak.contains("correct-horse"), "{weak}");

    let no_tls = refused_at_start(&agent, &relay.url, &["--http", "0.0.0.0:0"], Some(&new_bearer())).await;
    assert!(
        no_tls.contains("--tls-cert") && no_tls.contains("--insecure-http"),
        "{no_tls}"
    );

    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("bearer");
    std::fs::write(&file, new_bearer()).expect("write");
    let twice = refused_at_start(
        &agent,
        &relay.url,
        &[&beyond[..], &["--bearer-file", file.to_str().unwrap()]].concat(),
        Some(&new_bearer()),
    )
    .await;
    assert!(twice.contains("given twice"), "{twice}");

    let origin = refused_at_start(
        &agent,
        &relay.url,
        &[&beyond[..], &["--allowed-origin", "app.example.com"]].concat(),
        Some(&new_bearer()),
    )
    .await;
    assert!(origin.contains("--allowed-origin"), "{origin}");
}

#[tokio::test]
async fn the_bearer_can_come_from_a_file() {
    let relay = TestRelay::start().await;
    let (agent, _device) = relay.agent_and_device().await;
    let pki = pki();
    let bearer = new_bearer();
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("bearer");
    std::fs::write(&file, format!("{bearer}\n")).expect("write");
    let args = [
        "--http",
        "0.0.0.0:0",
        "--tls-cert",
        pki.cert.to_str().unwrap(),
        "--tls-key",
        pki.key.to_str().unwrap(),
        "--bearer-file",
        file.to_str().unwrap(),
    ];
    let endpoint = Endpoint::start(&agent, &relay.url, &args, None).await;
    let url = format!("https://localhost:{}/mcp", endpoint.port);
    let client = https_client(&pki);
    assert_eq!(
        initialize(&client, &url).send().await.expect("response").status(),
        401
    );
    server_info(
        initialize(&client, &url)
            .bearer_auth(&bearer)
            .send()
            .await
            .expect("response"),
    )
    .await;
    endpoint.stop().await;
}

// ----- connection limits -----

/// Reads `stream` until the server closes it (end of file, or a reset), within a generous bound; returns what
/// it was sent.
async fn read_until_closed(stream: &mut tokio::net::TcpStream) -> Vec<u8> {
    use tokio::io::AsyncReadExt;
    let mut received = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), async {
        let mut buf = [0u8; 1024];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => received.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await
    .expect("the server closes the connection");
    received
}

/// A 2025-11-25 session opened with raw requests (`initialize`, then `notifications/initialized`): its id.
async fn open_session(client: &reqwest::Client, url: &str) -> String {
    let response = initialize(client, url).send().await.expect("initialize");
    let session = response
        .headers()
        .get("mcp-session-id")
        .expect("a session id")
        .to_str()
        .expect("text")
        .to_string();
    server_info(response).await;
    let initialized = in_session(client.post(url), &session)
        .header("content-type", "application/json")
        .body(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string())
        .send()
        .await
        .expect("initialized");
    assert_eq!(initialized.status(), 202);
    session
}

/// A request in the session `session`.
fn in_session(request: reqwest::RequestBuilder, session: &str) -> reqwest::RequestBuilder {
    request
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-11-25")
}

/// The session's SSE stream (`GET /mcp`), open: the server answered 200 and streams.
async fn sse_stream(client: &reqwest::Client, url: &str, session: &str) -> reqwest::Response {
    let stream = in_session(client.get(url), session)
        .header("accept", "text/event-stream")
        .send()
        .await
        .expect("GET /mcp");
    assert_eq!(stream.status(), 200, "the SSE stream opens");
    stream
}

/// `tools/list` in the session: the status of the answer.
async fn list_tools(client: &reqwest::Client, url: &str, session: &str) -> u16 {
    match in_session(client.post(url), session)
        .header("content-type", "application/json")
        .body(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string())
        .send()
        .await
    {
        Ok(response) => response.status().as_u16(),
        Err(_) => 0,
    }
}

#[tokio::test]
async fn a_client_that_sends_half_a_request_line_and_then_nothing_is_closed_after_the_header_timeout() {
    let relay = TestRelay::start().await;
    let (agent, _device) = relay.agent_and_device().await;
    let args = ["--http", "127.0.0.1:0", "--header-timeout", "1"];
    let endpoint = Endpoint::start(&agent, &relay.url, &args, None).await;
    let addr = format!("127.0.0.1:{}", endpoint.port);

    let mut half = tokio::net::TcpStream::connect(&addr).await.expect("connect");
    tokio::io::AsyncWriteExt::write_all(&mut half, b"POST /mcp HTT")
        .await
        .expect("write");
    assert_eq!(
        read_until_closed(&mut half).await,
        b"",
        "closed without an answer"
    );

    let mut silent = tokio::net::TcpStream::connect(&addr).await.expect("connect");
    assert_eq!(
        read_until_closed(&mut silent).await,
        b"",
        "closed without an answer"
    );

    // A client that sends its request at once is served as before.
    server_info(
        initialize(&reqwest::Client::new(), &format!("http://{addr}/mcp"))
            .send()
            .await
            .expect("response"),
    )
    .await;
    endpoint.stop().await;
}

#[tokio::test]
async fn over_tls_half_a_request_line_after_the_handshake_is_closed_after_the_header_timeout() {
    use tokio::io::AsyncWriteExt;
    let relay = TestRelay::start().await;
    let (agent, _device) = relay.agent_and_device().await;
    let pki = pki();
    let args = [
        "--http",
        "0.0.0.0:0",
        "--tls-cert",
        pki.cert.to_str().unwrap(),
        "--tls-key",
        pki.key.to_str().unwrap(),
        "--header-timeout",
        "1",
    ];
    let endpoint = Endpoint::start(&agent, &relay.url, &args, Some(&new_bearer())).await;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from_pem_slice(pki.ca_pem.as_bytes()).expect("CA"))
        .expect("trusted");
    let config =
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", endpoint.port))
        .await
        .expect("connect");
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(
            rustls::pki_types::ServerName::try_from("localhost").expect("name"),
            tcp,
        )
        .await
        .expect("handshake");
    tls.write_all(b"POST /mcp HTT").await.expect("write");
    tls.flush().await.expect("flush");
    let closed = tokio::time::timeout(Duration::from_secs(20), async {
        let mut received = Vec::new();
        let _ = tokio::io::AsyncReadExt::read_to_end(&mut tls, &mut received).await;
        received
    })
    .await
    .expect("the server closes the connection");
    assert_eq!(closed, b"", "closed without an answer");
    endpoint.stop().await;
}

#[tokio::test]
async fn an_sse_stream_and_a_streaming_answer_held_longer_than_the_idle_timeout_are_not_cut() {
    let relay = TestRelay::start().await;
    let (agent, _device) = relay.agent_and_device().await;
    let args = [
        "--http",
        "127.0.0.1:0",
        "--idle-timeout",
        "1",
        "--header-timeout",
        "1",
    ];
    let endpoint = Endpoint::start(&agent, &relay.url, &args, None).await;
    let url = format!("http://127.0.0.1:{}/mcp", endpoint.port);
    let client = reqwest::Client::new();
    let session = open_session(&client, &url).await;
    let mut stream = sse_stream(&reqwest::Client::new(), &url, &session).await;

    // An rmcp client: its wait_for_messages answer streams on a POST for 3 s, three idle timeouts.
    let transport = StreamableHttpClientTransport::with_client(
        reqwest::Client::new(),
        StreamableHttpClientTransportConfig::with_uri(url.as_str()),
    );
    let rmcp_client = TestClient::default().serve(transport).await.expect("initialize");
    let waited = rmcp_client
        .call_tool(
            rmcp::model::CallToolRequestParams::new("wait_for_messages")
                .with_arguments(json!({"timeoutSeconds": 3}).as_object().unwrap().clone()),
        )
        .await
        .expect("the answer arrives on its stream, 3 s after the call");
    assert_ne!(waited.is_error, Some(true), "{waited:?}");
    rmcp_client.cancel().await.expect("close");

    // Meanwhile the GET stream (idle in bytes, as keep-alives come every 15 s) has stayed open.
    let ended = tokio::time::timeout(Duration::from_millis(200), async {
        loop {
            match stream.chunk().await {
                Ok(Some(_)) => continue,
                _ => return,
            }
        }
    })
    .await;
    assert!(ended.is_err(), "the SSE stream was cut");
    assert_eq!(
        list_tools(&client, &url, &session).await,
        200,
        "the session lives"
    );
    endpoint.stop().await;
}

#[tokio::test]
async fn beyond_the_cap_a_silent_connection_gives_way_and_then_new_ones_are_refused_while_the_streams_go_on()
{
    let relay = TestRelay::start().await;
    let (agent, _device) = relay.agent_and_device().await;
    let args = [
        "--http",
        "127.0.0.1:0",
        "--max-connections",
        "2",
        "--header-timeout",
        "60",
    ];
    let endpoint = Endpoint::start(&agent, &relay.url, &args, None).await;
    let addr = format!("127.0.0.1:{}", endpoint.port);
    let url = format!("http://{addr}/mcp");
    let setup = reqwest::Client::new();
    let (first, second) = (open_session(&setup, &url).await, open_session(&setup, &url).await);
    drop(setup);

    // One connection streams (a request in progress), one is silent: at the cap, a new connection takes
    // the silent one's place, long before its header timeout.
    let mut a = sse_stream(&reqwest::Client::new(), &url, &first).await;
    let mut silent = tokio::net::TcpStream::connect(&addr).await.expect("connect");
    assert_eq!(list_tools(&reqwest::Client::new(), &url, &first).await, 200);
    assert_eq!(
        read_until_closed(&mut silent).await,
        b"",
        "the silent connection gave way"
    );

    // Two streams in progress: a third connection is refused at once.
    let b_client = reqwest::Client::new();
    let b = sse_stream(&b_client, &url, &second).await;
    let mut refused = tokio::net::TcpStream::connect(&addr).await.expect("connect");
    let answer = read_until_closed(&mut refused).await;
    assert!(
        String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 503 "),
        "{}",
        String::from_utf8_lossy(&answer)
    );

    // The earlier connections go on: once the second stream ends, its session and the first are served
    // again, and the first stream is still open.
    drop(b);
    drop(b_client);
    let client = reqwest::Client::new();
    assert!(
        common::eventually(Duration::from_secs(30), || async {
            list_tools(&client, &url, &second).await == 200
        })
        .await,
        "a connection is served once a slot is free"
    );
    let ended = tokio::time::timeout(Duration::from_millis(200), async {
        loop {
            match a.chunk().await {
                Ok(Some(_)) => continue,
                _ => return,
            }
        }
    })
    .await;
    assert!(ended.is_err(), "the first SSE stream was cut");
    endpoint.stop().await;
}

#[tokio::test]
async fn a_zero_connection_limit_is_refused_at_start() {
    let relay = TestRelay::start().await;
    let (agent, _device) = relay.agent_and_device().await;
    for flag in ["--max-connections", "--header-timeout", "--idle-timeout"] {
        let mut cmd = command(&agent, &relay.url, &["--http", "127.0.0.1:0", flag, "0"]);
        let out = tokio::time::timeout(Duration::from_secs(30), cmd.stdin(Stdio::null()).output())
            .await
            .expect("ends")
            .expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag}: {stderr}");
        assert!(stderr.contains(flag), "{stderr}");
    }
}
