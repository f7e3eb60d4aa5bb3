//! Secrets off the command line, with real processes: `device join -` pairs with the link on standard input
//! only (never in a command line another user could read), `device join` takes it from
//! `PACERELLE_PAIRING_LINK`, and `webhook set` takes its secret from a file, standard input or
//! `PACERELLE_WEBHOOK_SECRET` — and the relay's deliveries verify with that secret.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::{Setup, next_question, pacerelle, run, run_with_stdin, serve, stderr, stdout};
use pacerelle_client::{Answer, Timestamp, agent::DEFAULT_TOLERANCE, agent::verify_webhook};

/// A new agent on the relay at `url`, in a new home, and a fresh pairing link for it.
fn agent_and_link(url: &str) -> (tempfile::TempDir, String) {
    let home = tempfile::tempdir().expect("tempdir");
    let out = run({
        let mut c = pacerelle(home.path(), url);
        c.args(["agent", "create", "--name", "secrets test", "--json"]);
        c
    });
    assert!(out.status.success(), "agent create: {}", stderr(&out));
    let link = new_link(home.path(), url);
    (home, link)
}

fn new_link(agent_home: &std::path::Path, url: &str) -> String {
    let out = run({
        let mut c = pacerelle(agent_home, url);
        c.args(["pair", "--json"]);
        c
    });
    assert!(out.status.success(), "pair: {}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    v["link"].as_str().expect("link").to_string()
}

/// The devices the agent sees, by name.
fn device_names(agent_home: &std::path::Path, url: &str) -> Vec<String> {
    let out = run({
        let mut c = pacerelle(agent_home, url);
        c.args(["agent", "devices", "--json"]);
        c
    });
    assert!(out.status.success(), "agent devices: {}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let list = v.as_array().or_else(|| v["devices"].as_array()).expect("a list");
    list.iter()
        .map(|d| d["name"].as_str().expect("a name").to_string())
        .collect()
}

#[test]
fn device_join_dash_pairs_with_the_link_on_standard_input_only() {
    let data = tempfile::tempdir().expect("tempdir");
    let (_relay, url) = serve(data.path());
    let (agent_home, link) = agent_and_link(&url);
    let (_, fragment) = link.split_once('#').expect("the secret is in the fragment");

    let device_home = tempfile::tempdir().expect("tempdir");
    let mut child = {
        let mut c = pacerelle(device_home.path(), &url);
        c.args(["device", "join", "-", "--name", "piped phone"])
            .env_remove("PACERELLE_PAIRING_LINK")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c.spawn().expect("spawn")
    };
    // The join is running and waits for its standard input: its command line, as `ps` and every user of
    // this computer see it, holds no part of the link.
    #[cfg(target_os = "linux")]
    {
        // Empty for a moment, while the kernel is still setting up the new program.
        let mut cmdline = String::new();
        for _ in 0..200 {
            let bytes = std::fs::read(format!("/proc/{}/cmdline", child.id())).expect("its command line");
            cmdline = String::from_utf8_lossy(&bytes).replace('\0', " ");
            if !cmdline.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(cmdline.contains("device join -"), "{cmdline:?}");
        assert!(
            !cmdline.contains(fragment) && !cmdline.contains("/pair#"),
            "{cmdline}"
        );
    }
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(format!("{link}\n").as_bytes())
        .expect("the link on standard input");
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success(), "device join -: {}", stderr(&out));
    assert!(stdout(&out).contains("paired with agent"), "{}", stdout(&out));
    assert!(device_home.path().join("device.json").exists());
    assert_eq!(device_names(agent_home.path(), &url), ["piped phone"]);

    // Paired for real: the device's credential works.
    let out = run({
        let mut c = pacerelle(device_home.path(), &url);
        c.args(["send", "hello from the piped phone"]);
        c
    });
    assert!(out.status.success(), "send: {}", stderr(&out));

    // From PACERELLE_PAIRING_LINK, with no argument at all.
    let link = new_link(agent_home.path(), &url);
    let env_home = tempfile::tempdir().expect("tempdir");
    let out = run({
        let mut c = pacerelle(env_home.path(), &url);
        c.args(["device", "join", "--name", "env phone"])
            .env("PACERELLE_PAIRING_LINK", &link);
        c
    });
    assert!(
        out.status.success(),
        "device join from the environment: {}",
        stderr(&out)
    );
    let mut names = device_names(agent_home.path(), &url);
    names.sort();
    assert_eq!(names, ["env phone", "piped phone"]);
}

#[test]
fn device_join_without_a_link_or_with_an_empty_one_says_how_to_give_it() {
    let home = tempfile::tempdir().expect("tempdir");
    let join = |args: &[&str]| {
        let mut c = pacerelle(home.path(), "http://127.0.0.1:9");
        c.args(["device", "join"])
            .args(args)
            .env_remove("PACERELLE_PAIRING_LINK");
        c
    };
    let out = run(join(&[]));
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("no pairing link")
            && err.contains("device join -")
            && err.contains("PACERELLE_PAIRING_LINK"),
        "{err}"
    );
    let out = run(join(&["--json"]));
    let err: serde_json::Value = serde_json::from_slice(&out.stderr).expect("a JSON error");
    assert_eq!(err["code"], "invalid_input");

    let out = run_with_stdin(join(&["-", "--json"]), b"");
    assert_eq!(out.status.code(), Some(1));
    let err: serde_json::Value = serde_json::from_slice(&out.stderr).expect("a JSON error");
    assert_eq!(err["code"], "invalid_input", "{err}");
    assert!(err["error"].as_str().expect("text").contains("empty"), "{err}");

    let out = run_with_stdin(join(&["-"]), b"https://x/pair#v9.zz\n");
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("malformed pairing link"),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("v9.zz"), "the link is not echoed");
}

/// One POST as a receiver got it.
struct Got {
    signature: String,
    body: Vec<u8>,
}

/// A webhook receiver on a loopback port: answers 204 to each POST and hands it over.
fn receiver() -> (String, mpsc::Receiver<Got>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a port");
    let url = format!("http://{}/hook", listener.local_addr().expect("bound"));
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            let head_end = loop {
                if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    break at + 4;
                }
                match stream.read(&mut chunk) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            };
            let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
            let header = |name: &str| {
                head.lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.trim().eq_ignore_ascii_case(name).then(|| v.trim().to_string())
                    })
                    .unwrap_or_default()
            };
            let length: usize = header("content-length").parse().unwrap_or(0);
            while buf.len() < head_end + length {
                match stream.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            let _ = stream
                .write_all(b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
            let got = Got {
                signature: header("pacerelle-signature"),
                body: buf[head_end..].to_vec(),
            };
            if tx.send(got).is_err() {
                return;
            }
        }
    });
    (url, rx)
}

/// Asks a yes/no question as the agent and answers it from the device, so that an event is sent.
async fn close_a_question(setup: &Setup, seen: &mut Vec<String>) {
    let child = {
        let mut c = setup.agent();
        c.args(["ask", "Ship it?"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c.spawn().expect("spawn")
    };
    let q = next_question(&setup.device, seen).await;
    seen.push(q.question_id.clone());
    setup
        .device
        .answer(&q.question_id, Answer::Yes)
        .await
        .expect("yes");
    let out = tokio::task::spawn_blocking(move || child.wait_with_output().expect("wait"))
        .await
        .expect("join");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

async fn next_post(rx: &mpsc::Receiver<Got>) -> Got {
    let rx_wait = || rx.recv_timeout(Duration::from_secs(30));
    tokio::task::block_in_place(rx_wait).expect("a POST within 30 s")
}

fn set(setup: &Setup, url: &str, extra: &[&str]) -> Command {
    let mut c = setup.agent();
    c.args(["webhook", "set", url]).args(extra);
    c
}

#[tokio::test(flavor = "multi_thread")]
async fn webhook_set_takes_its_secret_from_a_file_stdin_or_the_environment_and_deliveries_verify() {
    let setup = Setup::start().await;
    let (url, posts) = receiver();
    let mut seen = Vec::new();

    // From a file (its final newline is not part of the secret).
    let from_file = "file-secret-0123456789abcdef";
    let file = setup.agent_home.path().join("hook.secret");
    std::fs::write(&file, format!("{from_file}\n")).expect("written");
    let out = run(set(
        &setup,
        &url,
        &["--secret-file", file.to_str().expect("utf-8")],
    ));
    assert!(out.status.success(), "--secret-file: {}", stderr(&out));
    close_a_question(&setup, &mut seen).await;
    let got = next_post(&posts).await;
    let now = Timestamp::now();
    verify_webhook(from_file, &got.signature, &got.body, now, DEFAULT_TOLERANCE)
        .expect("signed with the secret from the file");
    assert!(
        verify_webhook(
            format!("{from_file}\n"),
            &got.signature,
            &got.body,
            now,
            DEFAULT_TOLERANCE
        )
        .is_err()
    );

    // From standard input.
    let from_stdin = "stdin-secret-0123456789abcdef";
    let out = run_with_stdin(
        set(&setup, &url, &["--secret-file", "-"]),
        format!("{from_stdin}\n").as_bytes(),
    );
    assert!(out.status.success(), "--secret-file -: {}", stderr(&out));
    close_a_question(&setup, &mut seen).await;
    let got = next_post(&posts).await;
    let now = Timestamp::now();
    verify_webhook(from_stdin, &got.signature, &got.body, now, DEFAULT_TOLERANCE)
        .expect("signed with the secret from standard input");
    assert!(verify_webhook(from_file, &got.signature, &got.body, now, DEFAULT_TOLERANCE).is_err());

    // From the environment.
    let from_env = "env-secret-0123456789abcdef";
    let out = run({
        let mut c = set(&setup, &url, &[]);
        c.env("PACERELLE_WEBHOOK_SECRET", from_env);
        c
    });
    assert!(out.status.success(), "PACERELLE_WEBHOOK_SECRET: {}", stderr(&out));
    close_a_question(&setup, &mut seen).await;
    let got = next_post(&posts).await;
    verify_webhook(
        from_env,
        &got.signature,
        &got.body,
        Timestamp::now(),
        DEFAULT_TOLERANCE,
    )
    .expect("signed with the secret from the environment");

    // None given, an empty file, a file of two lines, both flags: refused before any request.
    let out = run(set(&setup, &url, &["--json"]));
    assert_eq!(out.status.code(), Some(1));
    let err: serde_json::Value = serde_json::from_slice(&out.stderr).expect("a JSON error");
    assert_eq!(err["code"], "invalid_input");
    let text = err["error"].as_str().expect("text");
    assert!(
        text.contains("--secret-file") && text.contains("PACERELLE_WEBHOOK_SECRET"),
        "{text}"
    );
    let out = run_with_stdin(set(&setup, &url, &["--secret-file", "-", "--json"]), b"\n");
    let err: serde_json::Value = serde_json::from_slice(&out.stderr).expect("a JSON error");
    assert_eq!(err["code"], "invalid_input");
    std::fs::write(&file, "one-0123456789abcdef\ntwo-0123456789abcdef\n").expect("written");
    let out = run(set(
        &setup,
        &url,
        &["--secret-file", file.to_str().expect("utf-8")],
    ));
    assert!(!out.status.success());
    assert!(stderr(&out).contains("several lines"), "{}", stderr(&out));
    assert!(
        !stderr(&out).contains("0123456789abcdef"),
        "the secret is not echoed"
    );
    let out = run(set(
        &setup,
        &url,
        &["--secret-file", "-", "--secret", "0123456789abcdef"],
    ));
    assert!(!out.status.success());
    assert!(stderr(&out).contains("cannot be used with"), "{}", stderr(&out));
}
