//! Device signing keys through the real client against a real relay: a joining device sends its key in clear
//! and sealed and the relay lists both; every answer carries a signature of `SignedAnswer` that verifies with
//! that key over the digest the device computed; credentials from before signing keys register a key at
//! their first answer (once: credentials that lost it get `signing_key_exists`) and then sign.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::time::Duration;

use common::TestRelay;
use pacerelle_client::core::pairing::{self, PairingSecret};
use pacerelle_client::core::question::{AnswerPayload, answer_aad};
use pacerelle_client::core::signing::{PublicKey, SignedAnswer, open_signing_key};
use pacerelle_client::core::wire::{ClaimPairing, PairingClaimed, PairingOffer, QuestionView, code};
use pacerelle_client::core::{b64, envelope};
use pacerelle_client::{
    AgentClient, Answer, DeviceClient, QuestionState, agent::PairingOptions, agent::QuestionRequest,
    device::DeviceCredentials,
};

/// The one pending question with this text, once the device sees it.
async fn pending(device: &DeviceClient, text: &str) -> pacerelle_client::device::OpenedQuestion {
    for _ in 0..400 {
        let list = device
            .questions(Some(QuestionState::Pending))
            .await
            .expect("questions");
        assert!(list.rejected.is_empty(), "{:?}", list.rejected);
        if let Some(q) = list.questions.into_iter().find(|q| q.question == text) {
            return q;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the question {text:?} never reached the device");
}

/// The question as the relay reports it to the agent (`GET /v1/agent/questions/{id}`), with the answer's
/// envelope as the device sealed it.
async fn relay_view(relay: &TestRelay, agent: &AgentClient, question_id: &str) -> QuestionView {
    let bearer = agent.token().bearer(agent.agent_id());
    let response = reqwest::Client::new()
        .get(format!("{}/v1/agent/questions/{question_id}", relay.url))
        .bearer_auth(&bearer.0)
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 200);
    response.json().await.expect("question view")
}

/// Opens the answer the device sealed for the agent, as the agent would.
fn opened_answer(agent: &AgentClient, device_id: &str, view: &QuestionView) -> AnswerPayload {
    let key = agent.token().device_key(agent.agent_id(), device_id);
    let sealed = view.answer_envelope.as_deref().expect("an answer envelope");
    envelope::open_json(
        &key,
        &answer_aad(agent.agent_id(), device_id, &view.question_id),
        sealed,
    )
    .expect("the answer opens with the device key")
}

/// Checks that `payload` carries `key`'s signature of exactly what it answers, and that the signature covers
/// the answer (another answer does not verify).
fn assert_signed(
    agent: &AgentClient,
    device_id: &str,
    digest: &str,
    payload: &AnswerPayload,
    key: &PublicKey,
) {
    let signature = payload.signature.as_deref().expect("the answer is signed");
    assert_eq!(payload.question_digest.as_deref(), Some(digest));
    let signed = SignedAnswer {
        agent_id: agent.agent_id(),
        device_id,
        question_id: &payload.question_id,
        question_digest: digest,
        answered_at: payload.answered_at,
        answer: &payload.answer,
    };
    assert!(signed.verifies(key, signature), "the signature verifies");
    let other = Answer::Text("something else".into());
    assert!(
        !SignedAnswer {
            answer: &other,
            ..signed
        }
        .verifies(key, signature)
    );
    assert!(
        !SignedAnswer {
            question_digest: "AAAA",
            ..signed
        }
        .verifies(key, signature)
    );
}

/// Pairs as a device from before signing keys: the claim carries no key, the credentials no seed.
async fn join_without_key(link: &str) -> DeviceCredentials {
    let (relay_url, secret) = PairingSecret::parse_link(link).expect("link");
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
        name: "old phone".into(),
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
    DeviceCredentials {
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
    }
}

#[tokio::test]
async fn a_joining_device_sends_its_key_in_clear_and_sealed_and_the_relay_lists_both() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let device_id = device.credentials().device_id.clone();
    let public = device.signing_public_key().expect("a key drawn at pairing");
    let fingerprint = device.signing_fingerprint().expect("a fingerprint");
    assert_eq!(fingerprint, public.fingerprint());
    assert_eq!(fingerprint.len(), 29, "{fingerprint}");

    let listed = agent
        .devices()
        .await
        .expect("devices")
        .into_iter()
        .find(|d| d.device_id == device_id)
        .expect("listed");
    assert_eq!(listed.signing_key.as_deref(), Some(public.to_b64().as_str()));
    let seal = listed.signing_key_seal.as_deref().expect("a seal");
    let device_key = agent.token().device_key(agent.agent_id(), &device_id);
    assert_eq!(
        open_signing_key(
            &device_key,
            agent.agent_id(),
            &device_id,
            seal,
            listed.signing_key.as_deref()
        ),
        Ok(public)
    );
    // The device sees the same record.
    let own = device.info().await.expect("info").device;
    assert_eq!(own.signing_key.as_deref(), Some(public.to_b64().as_str()));

    // The seed is in the credentials to store, and comes back with them.
    let stored = device.credentials_to_store();
    assert!(stored.signing_seed.is_some());
    assert_eq!(device.credentials().signing_seed, stored.signing_seed);
    let restored = DeviceClient::from_credentials(
        DeviceCredentials::from_secret_string(&stored.to_secret_string()).expect("parses"),
    )
    .expect("restored");
    assert_eq!(restored.signing_public_key(), Some(public));
    // Its Debug shows no seed.
    let seed = stored.signing_seed.clone().expect("seed");
    assert!(!format!("{stored:?}").contains(&seed));
    // Registering again sends the same key, which the relay already lists: the same fingerprint, no change.
    assert_eq!(
        device.register_signing_key().await.expect("same key"),
        fingerprint
    );
}

#[tokio::test]
async fn every_answer_carries_a_signature_that_verifies_over_the_digest_the_device_computed() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let device_id = device.credentials().device_id.clone();
    let public = device.signing_public_key().expect("key");

    let cases = [
        (
            QuestionRequest::yes_no("Deploy v2?").with_details("to production"),
            Answer::Yes,
            true,
        ),
        (QuestionRequest::yes_no("Drop the cache?"), Answer::No, false),
        (
            QuestionRequest::choice("Which region?", ["eu-west", "us-east"]).multiple(true),
            Answer::Options(vec!["us-east".into(), "eu-west".into()]),
            true,
        ),
        (
            QuestionRequest::text("Release name?"),
            Answer::Text("Blue heron".into()),
            false,
        ),
    ];
    for (request, answer, approves) in cases {
        let text = request.question.clone();
        let asked = agent.ask_user(request).await.expect("ask");
        let q = pending(&device, &text).await;
        assert_eq!(q.question_id, asked.question_id);
        device
            .answer(&q.question_id, answer.clone())
            .await
            .expect("answer");

        let view = relay_view(&relay, &agent, &q.question_id).await;
        let payload = opened_answer(&agent, &device_id, &view);
        assert_eq!(payload.answer, answer);
        assert_signed(&agent, &device_id, &q.digest, &payload, &public);

        // The agent's verdict: the answer counts, as given.
        let outcome = agent
            .wait_for_answer(&q.question_id, Duration::from_secs(5))
            .await
            .expect("outcome");
        assert_eq!(outcome.state, QuestionState::Answered, "{text}: {outcome:?}");
        assert_eq!(outcome.answer.as_ref(), Some(&answer), "{text}");
        assert_eq!(outcome.approved, approves, "{text}");
        assert!(outcome.signed, "{text}: the agent verified the signature");
    }
}

#[tokio::test]
async fn credentials_from_before_signing_keys_register_a_key_at_the_first_answer_and_then_sign() {
    let relay = TestRelay::start().await;
    let agent = AgentClient::register(&relay.url, "test agent", None)
        .await
        .expect("register")
        .with_home(Some(&pacerelle_test_support::home()));
    let link = agent
        .create_pairing(PairingOptions::default())
        .await
        .expect("pairing");
    let old = join_without_key(&link.link).await;
    let device_id = old.device_id.clone();
    // Stored before signing keys: no seed member at all, and it loads with none.
    let blob = old.to_secret_string();
    let json = b64::decode(blob.trim_start_matches("pcrdev1_")).expect("b64");
    let value: serde_json::Value = serde_json::from_slice(&json).expect("json");
    assert!(value.get("signingSeed").is_none(), "{value}");
    let device = DeviceClient::from_credentials(DeviceCredentials::from_secret_string(&blob).expect("loads"))
        .expect("device");
    assert_eq!(device.signing_fingerprint(), None);
    let listed = |devices: Vec<pacerelle_client::core::wire::DeviceInfo>| {
        devices
            .into_iter()
            .find(|d| d.device_id == device_id)
            .expect("listed")
    };
    assert_eq!(listed(agent.devices().await.expect("devices")).signing_key, None);

    // The first answer registers a key, then is signed with it.
    let asked = agent
        .ask_user(QuestionRequest::yes_no("Rotate the keys?"))
        .await
        .expect("ask");
    let q = pending(&device, "Rotate the keys?").await;
    assert_eq!(q.question_id, asked.question_id);
    device.answer(&q.question_id, Answer::Yes).await.expect("answer");
    let public = device.signing_public_key().expect("registered");
    let record = listed(agent.devices().await.expect("devices"));
    assert_eq!(record.signing_key.as_deref(), Some(public.to_b64().as_str()));
    let device_key = agent.token().device_key(agent.agent_id(), &device_id);
    assert_eq!(
        open_signing_key(
            &device_key,
            agent.agent_id(),
            &device_id,
            record.signing_key_seal.as_deref().expect("seal"),
            record.signing_key.as_deref()
        ),
        Ok(public)
    );
    let payload = opened_answer(
        &agent,
        &device_id,
        &relay_view(&relay, &agent, &q.question_id).await,
    );
    assert_signed(&agent, &device_id, &q.digest, &payload, &public);
    let outcome = agent
        .wait_for_answer(&q.question_id, Duration::from_secs(5))
        .await
        .expect("outcome");
    assert!(outcome.approved && outcome.signed, "{outcome:?}");

    // The key is in the credentials to store (not in the ones the client was made with), and signs after a
    // restore from them; registering again changes nothing.
    assert_eq!(device.credentials().signing_seed, None);
    let saved = device.credentials_to_store();
    assert!(saved.signing_seed.is_some());
    let fingerprint = device.signing_fingerprint().expect("fingerprint");
    assert_eq!(
        device.register_signing_key().await.expect("same key"),
        fingerprint
    );
    let restored = DeviceClient::from_credentials(saved).expect("restored");
    assert_eq!(
        restored.signing_fingerprint().as_deref(),
        Some(fingerprint.as_str())
    );
    let q2 = agent
        .ask_user(QuestionRequest::yes_no("And the backups?"))
        .await
        .expect("ask");
    let opened = pending(&restored, "And the backups?").await;
    restored
        .answer(&q2.question_id, Answer::Yes)
        .await
        .expect("answer");
    let payload = opened_answer(
        &agent,
        &device_id,
        &relay_view(&relay, &agent, &q2.question_id).await,
    );
    assert_signed(&agent, &device_id, &opened.digest, &payload, &public);

    // Credentials that lost the key (stored before it was registered) cannot register another, and do not
    // answer unsigned: a clear error, nothing sent.
    let lost = DeviceClient::from_credentials(DeviceCredentials::from_secret_string(&blob).expect("loads"))
        .expect("device");
    let e = lost.register_signing_key().await.expect_err("refused");
    assert_eq!(e.code(), Some(code::SIGNING_KEY_EXISTS), "{e}");
    assert!(e.to_string().contains("pair this device again"), "{e}");
    let q3 = agent
        .ask_user(QuestionRequest::yes_no("Unsigned?"))
        .await
        .expect("ask");
    pending(&lost, "Unsigned?").await;
    let e = lost
        .answer(&q3.question_id, Answer::Yes)
        .await
        .expect_err("refused");
    assert_eq!(e.code(), Some(code::SIGNING_KEY_EXISTS), "{e}");
    assert_eq!(lost.signing_fingerprint(), None);
    let view = relay_view(&relay, &agent, &q3.question_id).await;
    assert_eq!(view.state, QuestionState::Pending);
    assert_eq!(view.answer_envelope, None);
    // The relay still lists the first key.
    assert_eq!(
        listed(agent.devices().await.expect("devices"))
            .signing_key
            .as_deref(),
        Some(public.to_b64().as_str())
    );
}

#[tokio::test]
async fn two_first_answers_at_once_register_one_key() {
    let relay = TestRelay::start().await;
    let agent = AgentClient::register(&relay.url, "test agent", None)
        .await
        .expect("register")
        .with_home(Some(&pacerelle_test_support::home()));
    let link = agent
        .create_pairing(PairingOptions::default())
        .await
        .expect("pairing");
    let device = DeviceClient::from_credentials(join_without_key(&link.link).await).expect("device");
    let a = agent
        .ask_user(QuestionRequest::yes_no("First?"))
        .await
        .expect("ask");
    let b = agent
        .ask_user(QuestionRequest::yes_no("Second?"))
        .await
        .expect("ask");
    pending(&device, "First?").await;
    pending(&device, "Second?").await;
    let (ra, rb) = tokio::join!(
        device.answer(&a.question_id, Answer::Yes),
        device.answer(&b.question_id, Answer::No)
    );
    ra.expect("first answer");
    rb.expect("second answer");
    let public = device.signing_public_key().expect("key");
    let device_id = device.credentials().device_id.clone();
    for id in [&a.question_id, &b.question_id] {
        let payload = opened_answer(&agent, &device_id, &relay_view(&relay, &agent, id).await);
        let digest = payload.question_digest.clone().expect("digest");
        assert_signed(&agent, &device_id, &digest, &payload, &public);
    }
}

#[test]
fn a_malformed_seed_in_credentials_is_refused() {
    let base = DeviceCredentials {
        relay_url: "http://127.0.0.1:9".into(),
        agent_id: pacerelle_client::core::ids::generate(pacerelle_client::core::ids::AGENT),
        agent_name: "agent".into(),
        device_id: pacerelle_client::core::ids::generate(pacerelle_client::core::ids::DEVICE),
        role: pacerelle_client::core::pairing::Role::Owner,
        device_token: format!(
            "{}.{}",
            pacerelle_client::core::ids::generate(pacerelle_client::core::ids::DEVICE),
            b64::encode(&[7u8; 32])
        ),
        device_key: b64::encode(&[1u8; 32]),
        push: Vec::new(),
        signing_seed: Some("not a seed".into()),
        branding: None,
        user: None,
    };
    let e = DeviceClient::from_credentials(base.clone()).expect_err("refused");
    assert!(e.to_string().contains("signing key"), "{e}");
    let good = DeviceCredentials {
        signing_seed: Some(b64::encode(&[3u8; 32])),
        ..base
    };
    let device = DeviceClient::from_credentials(good).expect("accepted");
    let expected = pacerelle_client::core::signing::SigningKey::from_seed([3u8; 32])
        .expect("key")
        .public_key();
    assert_eq!(device.signing_public_key(), Some(expected));
}
