//! The terminal as a signing device, with real processes against a real relay: `device join` keeps the
//! signing key's seed in the device home (0600) and `device info` and `status` show its fingerprint; an answer
//! given with `pacerelle answer` is approved and signed by `pacerelle ask`; a device home from before signing
//! keys gets a key at its first answer, saved in the home and listed by the relay.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::path::Path;
use std::process::Command;

use common::{Setup, finish, next_question, pacerelle, run, serve, spawn, stderr, stdout};
use pacerelle_client::core::b64;
use pacerelle_client::core::pairing::{self, PairingSecret};
use pacerelle_client::core::wire::{ClaimPairing, PairingClaimed, PairingOffer};
use pacerelle_client::{DeviceClient, device::DeviceCredentials};

fn with(mut c: Command, args: &[&str]) -> Command {
    c.args(args);
    c
}

/// The device home's credentials as stored, and the file's permission bits.
fn stored(home: &Path) -> (serde_json::Value, u32) {
    let path = home.join("device.json");
    let value = serde_json::from_slice(&std::fs::read(&path).expect("device.json")).expect("json");
    #[cfg(unix)]
    let mode = {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(&path).expect("metadata").permissions().mode() & 0o777
    };
    #[cfg(not(unix))]
    let mode = 0o600;
    (value, mode)
}

/// `pacerelle --json device info` as the device in `home`.
fn info(home: &Path, url: &str) -> serde_json::Value {
    let out = run(with(pacerelle(home, url), &["--json", "device", "info"]));
    assert!(out.status.success(), "device info: {}", stderr(&out));
    serde_json::from_slice(&out.stdout).expect("json")
}

/// Asks `text` as the agent, answers yes with `pacerelle answer` as the device, and returns what
/// `pacerelle ask --json` printed and what `pacerelle answer` wrote on standard error.
async fn ask_and_answer_yes(
    agent_home: &Path,
    device_home: &Path,
    url: &str,
    text: &str,
    seen: &mut Vec<String>,
) -> (serde_json::Value, String) {
    let asking = spawn(with(
        pacerelle(agent_home, url),
        &["--json", "ask", text, "--expires", "2m"],
    ));
    let reader: DeviceCredentials = serde_json::from_value(stored(device_home).0).expect("credentials");
    let reader = DeviceClient::from_credentials(reader).expect("device");
    let q = next_question(&reader, seen).await;
    assert_eq!(q.question, text);
    seen.push(q.question_id.clone());
    let answered = run(with(
        pacerelle(device_home, url),
        &["answer", &q.question_id, "yes"],
    ));
    assert!(answered.status.success(), "answer: {}", stderr(&answered));
    let asked = finish(asking).await;
    assert!(
        asked.status.success(),
        "ask: {} {}",
        stdout(&asked),
        stderr(&asked)
    );
    (
        serde_json::from_slice(&asked.stdout).expect("json"),
        stderr(&answered),
    )
}

#[tokio::test]
async fn a_terminal_device_keeps_its_signing_key_in_its_home_and_its_answers_are_signed() {
    let setup = Setup::start().await;
    let fingerprint = setup.device.signing_fingerprint().expect("a key drawn at join");
    let (creds, mode) = stored(setup.device_home.path());
    assert!(
        creds["signingSeed"].as_str().is_some_and(|s| s.len() == 43),
        "{creds}"
    );
    assert_eq!(mode, 0o600);

    let shown = info(setup.device_home.path(), &setup.url);
    assert_eq!(shown["signingFingerprint"], fingerprint.as_str());
    assert_eq!(shown["signingKey"], shown["relaySigningKey"], "{shown}");
    assert!(
        !shown.to_string().contains(creds["signingSeed"].as_str().unwrap()),
        "no seed shown"
    );
    let human = run(with(setup.as_device(), &["device", "info"]));
    assert!(
        stdout(&human).contains(&format!("signing key: {fingerprint} (listed by the relay)")),
        "{}",
        stdout(&human)
    );
    let status = run(with(setup.as_device(), &["status", "--as", "device"]));
    assert!(status.status.success(), "{}", stderr(&status));
    assert!(
        stdout(&status).contains(&format!("signing key: {fingerprint}")),
        "{}",
        stdout(&status)
    );

    let mut seen = Vec::new();
    let (outcome, notice) = ask_and_answer_yes(
        setup.agent_home.path(),
        setup.device_home.path(),
        &setup.url,
        "Deploy v2?",
        &mut seen,
    )
    .await;
    assert_eq!(outcome["approved"], true, "{outcome}");
    assert_eq!(outcome["signed"], true, "{outcome}");
    assert!(!notice.contains("now signs"), "{notice}");
}

#[tokio::test]
async fn a_device_home_from_before_signing_keys_gets_a_key_at_its_first_answer_and_keeps_it() {
    let data = tempfile::tempdir().expect("tempdir");
    let (_relay, url) = serve(data.path());
    let agent_home = tempfile::tempdir().expect("tempdir");
    let device_home = tempfile::tempdir().expect("tempdir");
    let out = run(with(
        pacerelle(agent_home.path(), &url),
        &["agent", "create", "--name", "cli agent", "--json"],
    ));
    assert!(out.status.success(), "agent create: {}", stderr(&out));
    let out = run(with(pacerelle(agent_home.path(), &url), &["pair", "--json"]));
    assert!(out.status.success(), "pair: {}", stderr(&out));
    let link: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");

    // Joined as a terminal did before signing keys: the claim carries no key, the home no seed.
    let (relay_url, secret) = PairingSecret::parse_link(link["link"].as_str().unwrap()).expect("link");
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::new();
    let path = format!("{relay_url}/v1/pairings/{}", secret.pairing_id());
    let offer: PairingOffer = http
        .get(&path)
        .send()
        .await
        .expect("offer")
        .json()
        .await
        .expect("json");
    let payload =
        pairing::open_offer(&secret, &offer.agent_id, &offer.device_id, &offer.offer).expect("opens");
    let claim = ClaimPairing {
        claim_secret: b64::encode(&secret.claim_secret()),
        name: "old terminal".into(),
        signing_key: None,
        signing_key_seal: None,
    };
    let claimed: PairingClaimed = http
        .post(format!("{path}/claim"))
        .json(&claim)
        .send()
        .await
        .expect("claim")
        .json()
        .await
        .expect("json");
    let old = DeviceCredentials {
        relay_url,
        agent_id: payload.agent_id.clone(),
        agent_name: payload.agent_name.clone(),
        device_id: payload.device_id.clone(),
        role: payload.role,
        device_token: claimed.device_token,
        device_key: b64::encode(&payload.key().expect("key").to_bytes()),
        push: Vec::new(),
        signing_seed: None,
        branding: None,
        user: None,
    };
    pacerelle_client::files::write_private(
        &device_home.path().join("device.json"),
        &serde_json::to_vec_pretty(&old).unwrap(),
    )
    .expect("write");
    let shown = info(device_home.path(), &url);
    assert_eq!(shown["signingFingerprint"], serde_json::Value::Null, "{shown}");
    assert_eq!(shown["relaySigningKey"], serde_json::Value::Null, "{shown}");

    let mut seen = Vec::new();
    let (outcome, notice) = ask_and_answer_yes(
        agent_home.path(),
        device_home.path(),
        &url,
        "Rotate the keys?",
        &mut seen,
    )
    .await;
    assert_eq!(outcome["approved"], true, "{outcome}");
    assert_eq!(outcome["signed"], true, "{outcome}");
    let (creds, mode) = stored(device_home.path());
    let seed = creds["signingSeed"]
        .as_str()
        .expect("the seed is saved")
        .to_string();
    assert_eq!(mode, 0o600);
    // Everything else is written back as it was.
    let mut rest = creds.clone();
    rest.as_object_mut().unwrap().remove("signingSeed");
    assert_eq!(rest, serde_json::to_value(&old).unwrap());
    let shown = info(device_home.path(), &url);
    let fingerprint = shown["signingFingerprint"]
        .as_str()
        .expect("fingerprint")
        .to_string();
    assert!(
        notice.contains(&format!("now signs its answers: signing key {fingerprint}")),
        "{notice}"
    );
    assert_eq!(shown["signingKey"], shown["relaySigningKey"], "{shown}");

    // The next answer signs with the same key and changes nothing in the home.
    let (outcome, notice) = ask_and_answer_yes(
        agent_home.path(),
        device_home.path(),
        &url,
        "And the backups?",
        &mut seen,
    )
    .await;
    assert_eq!(outcome["signed"], true, "{outcome}");
    assert!(!notice.contains("now signs"), "{notice}");
    assert_eq!(stored(device_home.path()).0["signingSeed"], seed.as_str());
}

/// An unsigned yes to `question`, sealed with the device key as a device that does not sign sends it.
async fn send_unsigned_yes(creds: &DeviceCredentials, question: &pacerelle_client::device::OpenedQuestion) {
    use pacerelle_client::core::question::{Answer, AnswerPayload, answer_aad};
    use pacerelle_client::core::{ContentKey, envelope};
    let key = ContentKey::from_bytes(b64::decode_array::<32>(&creds.device_key).expect("device key"));
    let payload = AnswerPayload {
        grant: None,
        question_id: question.question_id.clone(),
        answer: Answer::Yes,
        answered_at: pacerelle_client::Timestamp::now(),
        question_digest: Some(question.digest.clone()),
        signature: None,
    };
    let sealed = envelope::seal_json(
        &key,
        &answer_aad(&creds.agent_id, &creds.device_id, &question.question_id),
        &payload,
    );
    let _ = rustls::crypto::ring::default_provider().install_default();
    let response = reqwest::Client::new()
        .post(format!(
            "{}/v1/device/questions/{}/answer",
            creds.relay_url.trim_end_matches('/'),
            question.question_id
        ))
        .bearer_auth(&creds.device_token)
        .json(&serde_json::json!({ "envelope": sealed }))
        .send()
        .await
        .expect("send the answer");
    assert!(response.status().is_success(), "{}", response.status());
}

#[tokio::test]
async fn an_unsigned_yes_from_a_device_whose_key_the_relay_withheld_does_not_let_ask_exit_0() {
    let setup = Setup::start().await;
    let creds = setup.device.credentials().clone();
    // The relay withholds the key the device claimed with: it now lists the device as one without a key.
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(setup.data.path().join("pacerelle.db"))
        .busy_timeout(std::time::Duration::from_secs(10));
    let pool = sqlx::SqlitePool::connect_with(options)
        .await
        .expect("open the relay's database");
    sqlx::query("UPDATE devices SET signing_key = NULL, signing_key_seal = NULL WHERE device_id = ?")
        .bind(&creds.device_id)
        .execute(&pool)
        .await
        .expect("edit the relay's database");
    pool.close().await;

    let asking = spawn(with(
        setup.agent(),
        &["ask", "Wipe the backup disk?", "--expires", "2m"],
    ));
    let q = next_question(&setup.device, &[]).await;
    send_unsigned_yes(&creds, &q).await;
    let asked = finish(asking).await;
    let err = stderr(&asked);
    assert_eq!(asked.status.code(), Some(3), "a rejected answer: {err}");
    assert!(
        err.contains("requires signed answers") && err.contains(&creds.device_id),
        "names the reason and the device: {err}"
    );

    // `agent devices` says the device cannot sign.
    let listed = run(with(setup.agent(), &["--json", "agent", "devices"]));
    assert!(listed.status.success(), "{}", stderr(&listed));
    let listed: serde_json::Value = serde_json::from_slice(&listed.stdout).expect("json");
    assert!(listed["requireSignedSince"].is_string(), "{listed}");
    assert_eq!(listed["devices"][0]["signs"], "cannot_sign", "{listed}");
}
