//! Device-signed answers through the real client against a real relay (docs/crypto.md §4.8, §4.9): a signed
//! yes is approved and marked signed, the export of the answer log verifies and any changed field of a record
//! makes it fail at that record, an answer that opens but carries a wrong or missing signature is never
//! approved, and a signing key substituted in the relay's database is refused (not pinned), so the device's
//! signed answers are not approved.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use std::time::Duration;

use common::TestRelay;
use pacerelle_client::core::question::{AnswerPayload, answer_aad, question_digest};
use pacerelle_client::core::roster::{SIGNATURE_REQUIRED, SIGNING_KEY_REFUSED};
use pacerelle_client::core::signing::{PublicKey, SignedAnswer, SigningKey, seal_signing_key};
use pacerelle_client::core::{b64, envelope};
use pacerelle_client::{
    AgentClient, Answer, DeviceClient, QuestionState, Timestamp, agent::AuditFilter, agent::QuestionRequest,
    agent::verify_answer_log,
};

const NO_WAIT: Duration = Duration::ZERO;

/// The id of the newest pending question the device sees other than those in `seen`, once it is there.
async fn pending_question(
    device: &DeviceClient,
    seen: &[String],
) -> pacerelle_client::device::OpenedQuestion {
    for _ in 0..400 {
        let list = device
            .questions(Some(QuestionState::Pending))
            .await
            .expect("questions");
        assert!(list.rejected.is_empty(), "{:?}", list.rejected);
        if let Some(q) = list
            .questions
            .into_iter()
            .rev()
            .find(|q| !seen.contains(&q.question_id))
        {
            return q;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("no question reached the device");
}

/// Asks with `ask()` while the device answers with `answer` through the real device client (which signs).
async fn ask_and_answer(
    agent: &AgentClient,
    device: &DeviceClient,
    request: QuestionRequest,
    answer: Answer,
) -> pacerelle_client::agent::AnswerOutcome {
    let id = request.question_id.clone().expect("tests name their questions");
    let asking = tokio::spawn({
        let agent = agent.clone();
        async move { agent.ask(request, Duration::from_secs(60)).await }
    });
    for _ in 0..400 {
        let list = device.questions(None).await.expect("questions");
        if list.questions.iter().any(|q| q.question_id == id) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    device.answer(&id, answer).await.expect("answer");
    asking.await.expect("join").expect("ask")
}

/// The device's signing key, from the seed in its credentials.
fn signing_key(device: &DeviceClient) -> SigningKey {
    let seed = device
        .credentials()
        .signing_seed
        .as_deref()
        .expect("a device paired now holds a signing key");
    SigningKey::from_seed(b64::decode_array::<32>(seed).expect("seed")).expect("key")
}

/// What to put in a hand-made answer's `signature`.
enum Signature<'a> {
    /// None at all.
    Missing,
    /// This key's signature of the answer as sealed.
    By(&'a SigningKey),
    /// This key's signature of another answer than the one sealed.
    OfAnother(&'a SigningKey, Answer),
}

/// Seals an answer with the device key as a device would, with the signature chosen by the test, and sends
/// it to the relay with the device's credential.
async fn send_answer(
    agent: &AgentClient,
    device: &DeviceClient,
    question: &pacerelle_client::device::OpenedQuestion,
    answer: Answer,
    signature: Signature<'_>,
) {
    let creds = device.credentials();
    let answered_at = Timestamp::now();
    let sign = |key: &SigningKey, answer: &Answer| {
        SignedAnswer {
            agent_id: &creds.agent_id,
            device_id: &creds.device_id,
            question_id: &question.question_id,
            question_digest: &question.digest,
            answered_at,
            answer,
        }
        .sign(key)
    };
    let signature = match signature {
        Signature::Missing => None,
        Signature::By(key) => Some(sign(key, &answer)),
        Signature::OfAnother(key, other) => Some(sign(key, &other)),
    };
    let payload = AnswerPayload {
        grant: None,
        question_id: question.question_id.clone(),
        answer,
        answered_at,
        question_digest: Some(question.digest.clone()),
        signature,
    };
    let sealed = envelope::seal_json(
        &agent.token().device_key(&creds.agent_id, &creds.device_id),
        &answer_aad(&creds.agent_id, &creds.device_id, &question.question_id),
        &payload,
    );
    let url = format!(
        "{}/v1/device/questions/{}/answer",
        creds.relay_url.trim_end_matches('/'),
        question.question_id
    );
    let response = reqwest::Client::new()
        .post(url)
        .bearer_auth(&creds.device_token)
        .json(&serde_json::json!({ "envelope": sealed }))
        .send()
        .await
        .expect("send the answer");
    assert!(response.status().is_success(), "{}", response.status());
}

async fn db(relay: &TestRelay) -> sqlx::SqlitePool {
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(relay.dir.path().join("pacerelle.db"))
        .busy_timeout(Duration::from_secs(10));
    sqlx::SqlitePool::connect_with(options)
        .await
        .expect("open the relay's database")
}

#[tokio::test]
async fn a_signed_yes_is_approved_and_signed_and_the_export_of_the_log_verifies() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let key = signing_key(&device);

    let yes = ask_and_answer(
        &agent,
        &device,
        QuestionRequest::yes_no("Deploy v2 to production?")
            .with_details("3 commits")
            .with_id("q_deploy"),
        Answer::Yes,
    )
    .await;
    assert!(yes.approved, "{yes:?}");
    assert!(yes.signed, "{yes:?}");
    assert_eq!(yes.rejected, None);

    // The key the roster pins is the device's own, as the device's fingerprint shows it.
    let roster = agent.roster().await.expect("roster");
    let pinned = roster
        .device(&device.credentials().device_id)
        .and_then(|d| d.signing_key.clone())
        .expect("pinned");
    assert_eq!(pinned, key.public_key().to_b64());

    let no = ask_and_answer(
        &agent,
        &device,
        QuestionRequest::yes_no("Drop the staging database?").with_id("q_drop"),
        Answer::No,
    )
    .await;
    assert!(
        !no.approved && no.signed && no.answer == Some(Answer::No),
        "{no:?}"
    );
    let choice = ask_and_answer(
        &agent,
        &device,
        QuestionRequest::choice("Which region?", ["eu", "us"]).with_id("q_region"),
        Answer::Options(vec!["eu".into()]),
    )
    .await;
    assert!(choice.approved && choice.signed, "{choice:?}");

    let log = agent.answer_log(&AuditFilter::default()).await.expect("log");
    assert_eq!(log.len(), 3);
    assert!(log.iter().all(|e| e.signed), "{log:?}");

    let export = agent
        .export_answer_log(&AuditFilter::default())
        .await
        .expect("export");
    assert_eq!(export.agent_id, agent.agent_id());
    let ids: Vec<&str> = export.records.iter().map(|r| r.question_id.as_str()).collect();
    assert_eq!(ids, ["q_deploy", "q_drop", "q_region"], "oldest first");
    let record = &export.records[0];
    assert_eq!(record.answer, Answer::Yes);
    assert!(record.approved);
    assert_eq!(record.signing_key.as_deref(), Some(pinned.as_str()));
    assert_eq!(
        record.question_digest,
        question_digest(&b64::decode(&record.question).unwrap())
    );
    let exported_device = &export.devices[0];
    assert_eq!(exported_device.name.as_deref(), Some("test phone"));
    assert!(exported_device.paired_at.is_some());
    assert_eq!(
        exported_device.fingerprint.as_deref(),
        Some(key.public_key().fingerprint().as_str())
    );
    let text = serde_json::to_vec_pretty(&export).expect("json");
    assert_eq!(verify_answer_log(&text), Ok(3));
    // Nothing secret in it: not the device's seed, not the agent's token.
    let seed = device.credentials().signing_seed.clone().unwrap();
    let token = agent.token().expose();
    let exported = String::from_utf8(text).unwrap();
    assert!(!exported.contains(&seed) && !exported.contains(&token));
}

/// Edits a JSON export as a person with a text editor would: `edit` changes record `index` (from 0).
fn edited(
    export: &serde_json::Value,
    edit: impl FnOnce(&mut serde_json::Value, &mut serde_json::Value),
) -> Vec<u8> {
    let mut e = export.clone();
    let mut devices = e["devices"].take();
    edit(&mut e, &mut devices);
    e["devices"] = devices;
    serde_json::to_vec(&e).unwrap()
}

#[tokio::test]
async fn changing_any_field_of_an_exported_record_fails_verification_at_that_record() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    for (id, text) in [
        ("q_1", "Rotate the keys?"),
        ("q_2", "Pay invoice 4411?"),
        ("q_3", "Merge #12?"),
    ] {
        let o = ask_and_answer(
            &agent,
            &device,
            QuestionRequest::yes_no(text).with_id(id),
            Answer::Yes,
        )
        .await;
        assert!(o.approved && o.signed, "{o:?}");
    }
    let export = agent
        .export_answer_log(&AuditFilter::default())
        .await
        .expect("export");
    let good = serde_json::to_value(&export).unwrap();
    assert_eq!(verify_answer_log(&serde_json::to_vec(&good).unwrap()), Ok(3));

    let other = SigningKey::generate().expect("key").public_key();
    let question_text = |r: &mut serde_json::Value, text: &str, digest_too: bool| {
        let bytes = b64::decode(r["question"].as_str().unwrap()).unwrap();
        let mut q: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        q["question"] = text.into();
        let bytes = serde_json::to_vec(&q).unwrap();
        r["question"] = b64::encode(&bytes).into();
        if digest_too {
            r["questionDigest"] = question_digest(&bytes).into();
        }
    };
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "answer",
            edited(&good, |e, _| {
                e["records"][1]["answer"] = serde_json::json!({"type": "no"});
                e["records"][1]["approved"] = false.into();
            }),
        ),
        (
            "answer only",
            edited(&good, |e, _| e["records"][1]["approved"] = false.into()),
        ),
        (
            "question text",
            edited(&good, |e, _| {
                question_text(&mut e["records"][1], "Pay invoice 9999?", false)
            }),
        ),
        (
            "question text and its digest",
            edited(&good, |e, _| {
                question_text(&mut e["records"][1], "Pay invoice 9999?", true)
            }),
        ),
        (
            "time",
            edited(&good, |e, _| {
                let t = Timestamp::parse(e["records"][1]["answeredAt"].as_str().unwrap()).unwrap();
                e["records"][1]["answeredAt"] = t.plus_millis(-1).to_rfc3339().into();
            }),
        ),
        (
            "device key",
            edited(&good, |e, devices| {
                devices[0]["signingKey"] = other.to_b64().into();
                devices[0]["fingerprint"] = other.fingerprint().into();
                e["records"][1]["signingKey"] = other.to_b64().into();
            }),
        ),
        (
            "record's key only",
            edited(&good, |e, _| {
                e["records"][1]["signingKey"] = other.to_b64().into()
            }),
        ),
        (
            "device",
            edited(&good, |e, _| {
                e["records"][1]["deviceId"] = "dv_someone_else".into()
            }),
        ),
        (
            "question id",
            edited(&good, |e, _| e["records"][1]["questionId"] = "q_other".into()),
        ),
        (
            "signature",
            edited(&good, |e, _| {
                let mut sig = b64::decode(e["records"][1]["signature"].as_str().unwrap()).unwrap();
                sig[10] ^= 1;
                e["records"][1]["signature"] = b64::encode(&sig).into();
            }),
        ),
        (
            "signature removed",
            edited(&good, |e, _| {
                e["records"][1].as_object_mut().unwrap().remove("signature");
            }),
        ),
    ];
    for (what, bytes) in cases {
        let failure = verify_answer_log(&bytes).expect_err(what);
        // The device's key is every record's of that device: the first of them is named.
        let expected = if what == "device key" { 1 } else { 2 };
        assert_eq!(failure.index, expected, "{what}: {failure}");
        let expected_id = match what {
            "question id" => "q_other",
            "device key" => "q_1",
            _ => "q_2",
        };
        assert_eq!(failure.question_id, expected_id, "{what}");
        assert!(
            failure
                .to_string()
                .starts_with(&format!("record {expected} (question ")),
            "{failure}"
        );
    }
    // A change that is not in a record breaks no record: `exportedAt` is not signed.
    let bytes = edited(&good, |e, _| e["exportedAt"] = "2020-01-01T00:00:00.000Z".into());
    assert_eq!(verify_answer_log(&bytes), Ok(3));
    assert_eq!(verify_answer_log(b"not json").map_err(|f| f.index), Err(0));
}

#[tokio::test]
async fn an_answer_that_opens_but_carries_a_wrong_or_missing_signature_is_never_approved() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let key = signing_key(&device);
    // The agent pins the device's key when it asks.
    let first = ask_and_answer(
        &agent,
        &device,
        QuestionRequest::yes_no("Warm up?").with_id("q_0"),
        Answer::Yes,
    )
    .await;
    assert!(first.approved && first.signed, "{first:?}");

    let stranger = SigningKey::generate().expect("key");
    let cases = [
        ("missing", Signature::Missing),
        ("another key's", Signature::By(&stranger)),
        ("of a no, sent with a yes", Signature::OfAnother(&key, Answer::No)),
    ];
    let mut seen = vec!["q_0".to_string()];
    for (i, (what, signature)) in cases.into_iter().enumerate() {
        let asked = agent
            .ask_user(QuestionRequest::yes_no(format!("Delete backup {i}?")).with_id(format!("q_{}", i + 1)))
            .await
            .expect("ask");
        let q = pending_question(&device, &seen).await;
        assert_eq!(q.question_id, asked.question_id);
        seen.push(q.question_id.clone());
        send_answer(&agent, &device, &q, Answer::Yes, signature).await;
        let read = agent
            .wait_for_answer(&asked.question_id, NO_WAIT)
            .await
            .expect("read");
        assert!(!read.approved, "{what}: {read:?}");
        assert!(!read.signed, "{what}: {read:?}");
        assert!(read.answer.is_none(), "{what}: {read:?}");
        assert!(read.rejected.is_some(), "{what}: {read:?}");
        assert!(read.is_final(), "{what}");
    }
    // The same hand-made path with the right signature is approved: what failed above is the signature.
    let asked = agent
        .ask_user(QuestionRequest::yes_no("Delete backup 9?").with_id("q_9"))
        .await
        .expect("ask");
    let q = pending_question(&device, &seen).await;
    send_answer(&agent, &device, &q, Answer::Yes, Signature::By(&key)).await;
    let read = agent
        .wait_for_answer(&asked.question_id, NO_WAIT)
        .await
        .expect("read");
    assert!(read.approved && read.signed, "{read:?}");

    // The log approves none of the refused ones, and the export lists only accepted answers: it verifies.
    let log = agent.answer_log(&AuditFilter::default()).await.expect("log");
    let approved: Vec<&str> = log
        .iter()
        .filter(|e| e.approved)
        .map(|e| e.question_id.as_str())
        .collect();
    assert_eq!(approved, ["q_9", "q_0"]);
    let export = agent
        .export_answer_log(&AuditFilter::default())
        .await
        .expect("export");
    assert_eq!(export.records.len(), 2);
    assert_eq!(verify_answer_log(&serde_json::to_vec(&export).unwrap()), Ok(2));
}

/// Replaces the device's signing key (`column` = `signing_key` or `signing_key_seal`) in the relay's database.
async fn replace_in_relay(relay: &TestRelay, device_id: &str, column: &str, value: &str) {
    let pool = db(relay).await;
    let sql = match column {
        "signing_key" => "UPDATE devices SET signing_key = ? WHERE device_id = ?",
        "signing_key_seal" => "UPDATE devices SET signing_key_seal = ? WHERE device_id = ?",
        other => panic!("not a signing key column: {other}"),
    };
    let done = sqlx::query(sql)
        .bind(value)
        .bind(device_id)
        .execute(&pool)
        .await
        .expect("edit the relay's database");
    assert_eq!(done.rows_affected(), 1);
    pool.close().await;
}

#[tokio::test]
async fn a_signing_key_replaced_in_the_relays_database_is_refused_and_the_devices_answers_are_not_approved() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    // As an agent that still accepts unsigned answers: the refused key alone must stop them.
    agent.require_signed(false).await.expect("accept unsigned");
    let creds = device.credentials().clone();
    let attacker = SigningKey::generate().expect("key");
    let listed = agent.devices().await.expect("devices");
    let record = listed
        .iter()
        .find(|d| d.device_id == creds.device_id)
        .expect("listed");
    assert_eq!(
        record.signing_key.as_deref(),
        Some(signing_key(&device).public_key().to_b64().as_str()),
        "the relay lists the key the device sent"
    );
    let true_seal = record.signing_key_seal.clone().expect("sealed");

    // 1. The clear copy replaced: it differs from the sealed one.
    replace_in_relay(
        &relay,
        &creds.device_id,
        "signing_key",
        &attacker.public_key().to_b64(),
    )
    .await;
    let roster = agent.pin_signing_keys().await.expect("pin");
    assert_eq!(
        roster.device(&creds.device_id).unwrap().signing_key,
        None,
        "not pinned"
    );

    // 2. The seal replaced too, by one the relay can make: a key sealed for another device (the relay holds no
    //    device key), or any bytes.
    let other_device_key = agent.token().device_key(&creds.agent_id, "dv_other");
    let moved = seal_signing_key(
        &other_device_key,
        &creds.agent_id,
        "dv_other",
        &attacker.public_key(),
    );
    for seal in [moved.as_str(), "bm90IGEgc2VhbA"] {
        replace_in_relay(&relay, &creds.device_id, "signing_key_seal", seal).await;
        let roster = agent.pin_signing_keys().await.expect("pin");
        assert_eq!(
            roster.device(&creds.device_id).unwrap().signing_key,
            None,
            "not pinned"
        );
    }

    // The real device sees that the relay lists another key than its own and does not answer; an answer signed
    // with its true key is refused by the agent (no key pinned), and so is one the attacker signs.
    agent
        .ask_user(QuestionRequest::yes_no("Transfer the funds?").with_id("q_real"))
        .await
        .expect("ask");
    let q = pending_question(&device, &[]).await;
    let refused = device
        .answer(&q.question_id, Answer::Yes)
        .await
        .expect_err("the device refuses to sign for a key the relay does not list");
    assert_eq!(refused.code(), Some("signing_key_exists"), "{refused:?}");
    send_answer(
        &agent,
        &device,
        &q,
        Answer::Yes,
        Signature::By(&signing_key(&device)),
    )
    .await;
    let o = agent.wait_for_answer("q_real", NO_WAIT).await.expect("read");
    assert!(!o.approved && !o.signed && o.rejected.is_some(), "{o:?}");
    let asked = agent
        .ask_user(QuestionRequest::yes_no("Transfer again?").with_id("q_forged"))
        .await
        .expect("ask");
    let q = pending_question(&device, &["q_real".to_string()]).await;
    assert_eq!(q.question_id, asked.question_id);
    send_answer(&agent, &device, &q, Answer::Yes, Signature::By(&attacker)).await;
    let read = agent.wait_for_answer("q_forged", NO_WAIT).await.expect("read");
    assert!(!read.approved && read.rejected.is_some(), "{read:?}");
    // Nor does an unsigned yes count: the device claimed with a key, and the relay cannot make it one
    // that does not sign by listing a key the agent refuses.
    let refused_at = agent.roster().await.expect("roster");
    assert!(
        refused_at
            .device(&creds.device_id)
            .unwrap()
            .signing_key_refused_at
            .is_some(),
        "the refusal is kept in the roster"
    );
    agent
        .ask_user(QuestionRequest::yes_no("Transfer it unsigned?").with_id("q_unsigned"))
        .await
        .expect("ask");
    let q = pending_question(&device, &["q_real".to_string(), "q_forged".to_string()]).await;
    send_answer(&agent, &device, &q, Answer::Yes, Signature::Missing).await;
    let read = agent.wait_for_answer("q_unsigned", NO_WAIT).await.expect("read");
    let reason = read.rejected.clone().unwrap_or_default();
    assert!(!read.approved, "{read:?}");
    assert!(
        reason.contains(SIGNING_KEY_REFUSED) && reason.contains(&creds.device_id),
        "{reason}"
    );
    let log = agent.answer_log(&AuditFilter::default()).await.expect("log");
    assert!(log.iter().all(|e| !e.approved && !e.signed), "{log:?}");

    // Restored by the relay, the true key is pinned; from then on a key replaced again changes nothing.
    replace_in_relay(&relay, &creds.device_id, "signing_key_seal", &true_seal).await;
    replace_in_relay(
        &relay,
        &creds.device_id,
        "signing_key",
        &signing_key(&device).public_key().to_b64(),
    )
    .await;
    let roster = agent.pin_signing_keys().await.expect("pin");
    let pinned = roster.device(&creds.device_id).unwrap().signing_key.clone();
    assert_eq!(pinned, Some(signing_key(&device).public_key().to_b64()));
    replace_in_relay(
        &relay,
        &creds.device_id,
        "signing_key",
        &attacker.public_key().to_b64(),
    )
    .await;
    replace_in_relay(&relay, &creds.device_id, "signing_key_seal", &moved).await;
    let roster = agent.pin_signing_keys().await.expect("pin");
    assert_eq!(
        roster.device(&creds.device_id).unwrap().signing_key,
        pinned,
        "a pinned key never changes"
    );
    agent
        .ask_user(QuestionRequest::yes_no("Transfer now?").with_id("q_after"))
        .await
        .expect("ask");
    let seen = ["q_real", "q_forged", "q_unsigned"].map(String::from);
    let q = pending_question(&device, &seen).await;
    send_answer(
        &agent,
        &device,
        &q,
        Answer::Yes,
        Signature::By(&signing_key(&device)),
    )
    .await;
    let o = agent.wait_for_answer("q_after", NO_WAIT).await.expect("read");
    assert!(o.approved && o.signed, "{o:?}");
    assert!(PublicKey::parse(pinned.as_deref().unwrap()).is_some());
}

#[tokio::test]
async fn adopting_devices_pins_their_keys_before_any_question() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let id = device.credentials().device_id.clone();
    let roster = agent.roster().await.expect("roster");
    assert_eq!(
        roster.device(&id).unwrap().signing_key,
        None,
        "nothing pinned yet"
    );
    let roster = agent.adopt_devices().await.expect("adopt");
    assert_eq!(
        roster.device(&id).unwrap().signing_key,
        Some(signing_key(&device).public_key().to_b64())
    );
    // Pinning again changes nothing: the roster keeps its version.
    let again = agent.pin_signing_keys().await.expect("pin");
    assert_eq!(again.version, roster.version);
}

#[tokio::test]
async fn a_device_without_a_key_answers_unsigned_and_its_answer_does_not_verify_in_an_export() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    // An agent of devices paired before signing keys, which accepts their unsigned answers.
    agent.require_signed(false).await.expect("accept unsigned");
    let id = device.credentials().device_id.clone();
    // As a device paired before signing keys: the relay lists no key for it.
    let pool = db(&relay).await;
    sqlx::query("UPDATE devices SET signing_key = NULL, signing_key_seal = NULL WHERE device_id = ?")
        .bind(&id)
        .execute(&pool)
        .await
        .expect("edit the relay's database");
    pool.close().await;

    let asked = agent
        .ask_user(QuestionRequest::yes_no("Restart the worker?").with_id("q_old"))
        .await
        .expect("ask");
    let q = pending_question(&device, &[]).await;
    send_answer(&agent, &device, &q, Answer::Yes, Signature::Missing).await;
    let read = agent
        .wait_for_answer(&asked.question_id, NO_WAIT)
        .await
        .expect("read");
    assert!(read.approved && !read.signed, "accepted, unsigned: {read:?}");
    // A signature the agent has no key for is refused: the relay cannot make a device's answers count by
    // withholding its key.
    let asked = agent
        .ask_user(QuestionRequest::yes_no("Restart it again?").with_id("q_signed"))
        .await
        .expect("ask");
    let q = pending_question(&device, &["q_old".to_string()]).await;
    send_answer(
        &agent,
        &device,
        &q,
        Answer::Yes,
        Signature::By(&signing_key(&device)),
    )
    .await;
    let read = agent
        .wait_for_answer(&asked.question_id, NO_WAIT)
        .await
        .expect("read");
    assert!(!read.approved && read.rejected.is_some(), "{read:?}");

    let export = agent
        .export_answer_log(&AuditFilter::default())
        .await
        .expect("export");
    assert_eq!(export.records.len(), 1);
    assert_eq!(export.records[0].signature, None);
    let failure = verify_answer_log(&serde_json::to_vec(&export).unwrap()).expect_err("unsigned");
    assert_eq!((failure.index, failure.question_id.as_str()), (1, "q_old"));

    // The device registers its key later (as `PUT /v1/device/signing-key` stores it) and the agent pins it.
    let key = signing_key(&device);
    let seal = seal_signing_key(
        &agent.token().device_key(agent.agent_id(), &id),
        agent.agent_id(),
        &id,
        &key.public_key(),
    );
    let pool = db(&relay).await;
    sqlx::query("UPDATE devices SET signing_key = ?, signing_key_seal = ? WHERE device_id = ?")
        .bind(key.public_key().to_b64())
        .bind(&seal)
        .bind(&id)
        .execute(&pool)
        .await
        .expect("edit the relay's database");
    pool.close().await;
    let roster = agent.pin_signing_keys().await.expect("pin");
    assert!(roster.device(&id).and_then(|d| d.signing_key_pinned_at).is_some());
    // The log, a record of the past, still counts the unsigned yes given before the key was pinned…
    let log = agent.answer_log(&AuditFilter::default()).await.expect("log");
    let old = log.iter().find(|e| e.question_id == "q_old").expect("q_old");
    assert!(old.approved && !old.signed && old.rejected.is_none(), "{old:?}");
    // …while an unsigned answer given now is refused, live and in the log.
    let asked = agent
        .ask_user(QuestionRequest::yes_no("And once more?").with_id("q_late"))
        .await
        .expect("ask");
    let q = pending_question(&device, &["q_old".to_string(), "q_signed".to_string()]).await;
    send_answer(&agent, &device, &q, Answer::Yes, Signature::Missing).await;
    let read = agent
        .wait_for_answer(&asked.question_id, NO_WAIT)
        .await
        .expect("read");
    assert!(!read.approved && read.rejected.is_some(), "{read:?}");
    let log = agent.answer_log(&AuditFilter::default()).await.expect("log");
    let late = log.iter().find(|e| e.question_id == "q_late").expect("q_late");
    assert!(!late.approved && late.rejected.is_some(), "{late:?}");
}

#[tokio::test]
async fn a_key_the_relay_withholds_leaves_the_device_unable_to_approve_unsigned_for_a_new_agent() {
    let relay = TestRelay::start().await;
    let (agent, device) = relay.agent_and_device().await;
    let id = device.credentials().device_id.clone();
    let roster = agent.roster().await.expect("roster");
    assert!(
        roster.require_signed_since.is_some(),
        "a new agent requires signed answers from its first pairing"
    );
    // The relay withholds the key the claim carried: the device looks like one paired before signing keys.
    let pool = db(&relay).await;
    sqlx::query("UPDATE devices SET signing_key = NULL, signing_key_seal = NULL WHERE device_id = ?")
        .bind(&id)
        .execute(&pool)
        .await
        .expect("edit the relay's database");
    pool.close().await;
    agent
        .ask_user(QuestionRequest::yes_no("Drop the staging database?").with_id("q_withheld"))
        .await
        .expect("ask");
    let q = pending_question(&device, &[]).await;
    send_answer(&agent, &device, &q, Answer::Yes, Signature::Missing).await;
    let read = agent.wait_for_answer("q_withheld", NO_WAIT).await.expect("read");
    let reason = read.rejected.clone().unwrap_or_default();
    assert!(!read.approved && read.is_final(), "{read:?}");
    assert!(
        reason.contains(SIGNATURE_REQUIRED) && reason.contains(&id),
        "{reason}"
    );
    let log = agent.answer_log(&AuditFilter::default()).await.expect("log");
    assert!(log.iter().all(|e| !e.approved), "{log:?}");

    // Accepting unsigned answers again is the agent's explicit choice: the same kind of answer then counts,
    // unsigned (and never verifies in an export).
    let roster = agent.require_signed(false).await.expect("accept unsigned");
    assert_eq!(roster.require_signed_since, None);
    agent
        .ask_user(QuestionRequest::yes_no("Drop it now?").with_id("q_allowed"))
        .await
        .expect("ask");
    let q = pending_question(&device, &["q_withheld".to_string()]).await;
    send_answer(&agent, &device, &q, Answer::Yes, Signature::Missing).await;
    let read = agent.wait_for_answer("q_allowed", NO_WAIT).await.expect("read");
    assert!(read.approved && !read.signed, "{read:?}");
    // And requiring them again changes the roster once.
    let on = agent.require_signed(true).await.expect("require");
    let again = agent.require_signed(true).await.expect("require");
    assert!(on.require_signed_since.is_some());
    assert_eq!(again.version, on.version);
}
