//! Device signing keys at the relay (issue 17): a device gives its Ed25519 public key in clear and sealed for the
//! agent, in its claim or later once (`PUT /v1/device/signing-key`); the relay checks their form, stores both as
//! given and lists both to the agent and the device. It never holds anything private.

use pacerelle_core::pairing::PairingSecret;
use pacerelle_core::signing::{self, SigningKey};
use pacerelle_core::wire::{
    ClaimPairing, DeviceInfo, DeviceList, DeviceSelf, PairingClaimed, PairingCreated, PairingOffer,
    RegisterSigningKey, code,
};
use pacerelle_core::{Timestamp, b64, ids};
use reqwest::{Method, StatusCode};

use crate::common::{
    Agent, Device, Reply, TestRelay, claim_body, offer_for, pair, register, sqlite_only, start,
};

/// A device's key pair and the seal of its public key, as a new device draws them when it pairs.
struct DrawnKey {
    private: SigningKey,
    key: String,
    seal: String,
}

fn draw_key(agent: &Agent, device_id: &str) -> DrawnKey {
    let private = SigningKey::generate().expect("a key pair");
    let public = private.public_key();
    let device_key = agent.token.device_key(&agent.id, device_id);
    DrawnKey {
        seal: signing::seal_signing_key(&device_key, &agent.id, device_id, &public),
        key: public.to_b64(),
        private,
    }
}

fn with_key(secret: &PairingSecret, key: Option<&str>, seal: Option<&str>) -> ClaimPairing {
    ClaimPairing {
        signing_key: key.map(str::to_string),
        signing_key_seal: seal.map(str::to_string),
        ..claim_body(secret)
    }
}

async fn claim(relay: &TestRelay, pairing_id: &str, body: &ClaimPairing) -> Reply {
    relay
        .call(
            Method::POST,
            &format!("/v1/pairings/{pairing_id}/claim"),
            None,
            Some(serde_json::to_value(body).expect("json")),
        )
        .await
}

/// An offer uploaded for a new device id: the secret, the pairing id and the device id.
async fn upload_offer(relay: &TestRelay, agent: &Agent) -> (PairingSecret, String, String) {
    let device_id = ids::generate(ids::DEVICE);
    let (secret, offer) = offer_for(agent, &device_id, Timestamp::now().plus_millis(600_000));
    relay
        .post("/v1/agent/pairings", &agent.bearer, &offer)
        .await
        .ok::<PairingCreated>();
    (secret, offer.pairing_id, device_id)
}

async fn listed(relay: &TestRelay, agent: &Agent, device_id: &str) -> DeviceInfo {
    let list: DeviceList = relay.get("/v1/agent/devices", &agent.bearer).await.ok();
    list.devices
        .into_iter()
        .find(|d| d.device_id == device_id)
        .expect("the device is listed")
}

async fn put_key(relay: &TestRelay, bearer: &str, key: &str, seal: &str) -> Reply {
    let body = RegisterSigningKey {
        signing_key: key.to_string(),
        signing_key_seal: seal.to_string(),
    };
    relay.put("/v1/device/signing-key", bearer, &body).await
}

/// Checks an `invalid_input` answer whose message names `field`.
#[track_caller]
fn refused_naming(reply: Reply, field: &str) {
    let body = reply.error(StatusCode::BAD_REQUEST, code::INVALID_INPUT);
    assert!(
        body.error.starts_with(field),
        "{field} is named first: {}",
        body.error
    );
}

/// Malformed keys and seals, with the field each one is about.
fn malformed(good_key: &str, good_seal: &str) -> Vec<(&'static str, String, String)> {
    let key_bytes = b64::decode(good_key).expect("the key decodes");
    vec![
        ("signingKey", b64::encode(&key_bytes[..31]), good_seal.to_string()),
        (
            "signingKey",
            b64::encode(&[key_bytes.as_slice(), &[0u8][..]].concat()),
            good_seal.to_string(),
        ),
        ("signingKey", format!("{good_key}="), good_seal.to_string()),
        // Standard base64, not base64url: 32 bytes of 0xfb encode with `+` and `/`.
        (
            "signingKey",
            data_b64_standard(&[0xfb; 32]),
            good_seal.to_string(),
        ),
        // The last character carries bits beyond the 32 bytes (not canonical).
        (
            "signingKey",
            format!("{}B", &b64::encode(&[0; 32])[..42]),
            good_seal.to_string(),
        ),
        ("signingKey", String::new(), good_seal.to_string()),
        ("signingKeySeal", good_key.to_string(), String::new()),
        ("signingKeySeal", good_key.to_string(), format!("{good_seal}=")),
        ("signingKeySeal", good_key.to_string(), format!(" {good_seal}")),
        ("signingKeySeal", good_key.to_string(), b64::encode(&[7; 1025])),
    ]
}

/// Standard base64 with padding (RFC 4648 §4), which the wire never uses.
fn data_b64_standard(bytes: &[u8]) -> String {
    b64::encode(bytes).replace('-', "+").replace('_', "/") + "="
}

#[tokio::test]
async fn a_key_given_in_the_claim_is_listed_to_the_agent_and_the_device() {
    let relay = start().await;
    let agent = register(&relay).await;
    let (secret, pairing_id, device_id) = upload_offer(&relay, &agent).await;
    let drawn = draw_key(&agent, &device_id);
    let claimed: PairingClaimed = claim(
        &relay,
        &pairing_id,
        &with_key(&secret, Some(&drawn.key), Some(&drawn.seal)),
    )
    .await
    .ok();

    let to_agent = listed(&relay, &agent, &device_id).await;
    assert_eq!(to_agent.signing_key.as_deref(), Some(drawn.key.as_str()));
    assert_eq!(to_agent.signing_key_seal.as_deref(), Some(drawn.seal.as_str()));
    let me: DeviceSelf = relay.get("/v1/device", &claimed.device_token).await.ok();
    assert_eq!(me.device, to_agent);

    // The agent opens what the relay lists and finds the device's key.
    let device_key = agent.token.device_key(&agent.id, &device_id);
    let opened = signing::open_signing_key(
        &device_key,
        &agent.id,
        &device_id,
        &drawn.seal,
        to_agent.signing_key.as_deref(),
    )
    .expect("the seal opens and matches the clear copy");
    assert_eq!(opened, drawn.private.public_key());

    // A device paired without a key is listed without one: the fields are absent, not null.
    let plain = pair(&relay, &agent).await;
    let list = relay.get("/v1/agent/devices", &agent.bearer).await;
    assert_eq!(list.status, StatusCode::OK);
    let raw = list.body["devices"]
        .as_array()
        .expect("a list")
        .iter()
        .find(|d| d["deviceId"] == plain.id.as_str())
        .expect("listed")
        .clone();
    assert!(
        raw.get("signingKey").is_none() && raw.get("signingKeySeal").is_none(),
        "{raw}"
    );

    // The revocation answers the device with its key, and the listing keeps it.
    let revoked: DeviceInfo = relay
        .delete(&format!("/v1/agent/devices/{device_id}"), &agent.bearer)
        .await
        .ok();
    assert!(revoked.revoked_at.is_some());
    assert_eq!(revoked.signing_key.as_deref(), Some(drawn.key.as_str()));
    assert_eq!(revoked.signing_key_seal.as_deref(), Some(drawn.seal.as_str()));
    assert_eq!(listed(&relay, &agent, &device_id).await, revoked);
}

#[tokio::test]
async fn a_claim_with_half_a_key_or_a_malformed_one_is_refused_and_the_offer_stays_claimable() {
    let relay = start().await;
    let agent = register(&relay).await;
    let (secret, pairing_id, device_id) = upload_offer(&relay, &agent).await;
    let drawn = draw_key(&agent, &device_id);

    // One without the other: the missing one is named.
    refused_naming(
        claim(&relay, &pairing_id, &with_key(&secret, Some(&drawn.key), None)).await,
        "signingKeySeal",
    );
    refused_naming(
        claim(&relay, &pairing_id, &with_key(&secret, None, Some(&drawn.seal))).await,
        "signingKey",
    );
    for (field, key, seal) in malformed(&drawn.key, &drawn.seal) {
        let reply = claim(&relay, &pairing_id, &with_key(&secret, Some(&key), Some(&seal))).await;
        let body = reply.error(StatusCode::BAD_REQUEST, code::INVALID_INPUT);
        assert!(body.error.starts_with(field), "{field} is named: {}", body.error);
        for given in [&key, &seal] {
            assert!(
                given.is_empty() || !body.error.contains(given.as_str()),
                "echoed: {}",
                body.error
            );
        }
    }

    // Nothing was stored: the offer is still there, no device was created, and the claim with a good key works.
    relay
        .call(Method::GET, &format!("/v1/pairings/{pairing_id}"), None, None)
        .await
        .ok::<PairingOffer>();
    let list: DeviceList = relay.get("/v1/agent/devices", &agent.bearer).await.ok();
    assert!(list.devices.is_empty(), "{list:?}");
    claim(
        &relay,
        &pairing_id,
        &with_key(&secret, Some(&drawn.key), Some(&drawn.seal)),
    )
    .await
    .ok::<PairingClaimed>();
    assert_eq!(
        listed(&relay, &agent, &device_id).await.signing_key.as_deref(),
        Some(drawn.key.as_str())
    );
}

#[tokio::test]
async fn a_device_paired_without_a_key_registers_it_once() {
    let relay = start().await;
    let agent = register(&relay).await;
    let device: Device = pair(&relay, &agent).await;
    let drawn = draw_key(&agent, &device.id);

    // Malformed input stores nothing; a seal of exactly 1 KiB is the largest accepted (checked with another
    // device below, since this one's key is set once).
    for (field, key, seal) in malformed(&drawn.key, &drawn.seal) {
        refused_naming(put_key(&relay, &device.bearer, &key, &seal).await, field);
    }
    assert_eq!(listed(&relay, &agent, &device.id).await.signing_key, None);
    // An agent credential is the wrong kind.
    put_key(&relay, &agent.bearer, &drawn.key, &drawn.seal)
        .await
        .error(StatusCode::FORBIDDEN, code::FORBIDDEN);

    let first: DeviceInfo = put_key(&relay, &device.bearer, &drawn.key, &drawn.seal)
        .await
        .ok();
    assert_eq!(first.device_id, device.id);
    assert_eq!(first.signing_key.as_deref(), Some(drawn.key.as_str()));
    assert_eq!(first.signing_key_seal.as_deref(), Some(drawn.seal.as_str()));
    assert_eq!(listed(&relay, &agent, &device.id).await, first);
    let me: DeviceSelf = relay.get("/v1/device", &device.bearer).await.ok();
    assert_eq!(me.device, first);

    // The same key and seal again: a retry, answered the same.
    let again = put_key(&relay, &device.bearer, &drawn.key, &drawn.seal).await;
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(again.ok::<DeviceInfo>(), first);

    // Another key, or the same key sealed again (another nonce): refused, and the first stays.
    let other = draw_key(&agent, &device.id);
    put_key(&relay, &device.bearer, &other.key, &other.seal)
        .await
        .error(StatusCode::CONFLICT, code::SIGNING_KEY_EXISTS);
    let resealed = signing::seal_signing_key(
        &agent.token.device_key(&agent.id, &device.id),
        &agent.id,
        &device.id,
        &drawn.private.public_key(),
    );
    assert_ne!(resealed, drawn.seal);
    put_key(&relay, &device.bearer, &drawn.key, &resealed)
        .await
        .error(StatusCode::CONFLICT, code::SIGNING_KEY_EXISTS);
    assert_eq!(listed(&relay, &agent, &device.id).await, first);

    // A device that gave its key in the claim has one already.
    let (secret, pairing_id, keyed_id) = upload_offer(&relay, &agent).await;
    let keyed_drawn = draw_key(&agent, &keyed_id);
    let keyed: PairingClaimed = claim(
        &relay,
        &pairing_id,
        &with_key(&secret, Some(&keyed_drawn.key), Some(&keyed_drawn.seal)),
    )
    .await
    .ok();
    let same: DeviceInfo = put_key(&relay, &keyed.device_token, &keyed_drawn.key, &keyed_drawn.seal)
        .await
        .ok();
    assert_eq!(same.signing_key.as_deref(), Some(keyed_drawn.key.as_str()));
    put_key(&relay, &keyed.device_token, &other.key, &other.seal)
        .await
        .error(StatusCode::CONFLICT, code::SIGNING_KEY_EXISTS);

    // The largest seal: 1 024 bytes once decoded (the relay cannot open it; only its form is checked).
    let big = pair(&relay, &agent).await;
    let big_key = draw_key(&agent, &big.id).key;
    let big_seal = b64::encode(&[9; 1024]);
    let stored: DeviceInfo = put_key(&relay, &big.bearer, &big_key, &big_seal).await.ok();
    assert_eq!(stored.signing_key_seal.as_deref(), Some(big_seal.as_str()));
}

#[tokio::test]
async fn a_revoked_device_cannot_register_a_key() {
    let relay = start().await;
    let agent = register(&relay).await;
    let left = pair(&relay, &agent).await;
    let removed = pair(&relay, &agent).await;
    relay.delete("/v1/device", &left.bearer).await.ok::<DeviceInfo>();
    relay
        .delete(&format!("/v1/agent/devices/{}", removed.id), &agent.bearer)
        .await
        .ok::<DeviceInfo>();
    for device in [&left, &removed] {
        let drawn = draw_key(&agent, &device.id);
        put_key(&relay, &device.bearer, &drawn.key, &drawn.seal)
            .await
            .error(StatusCode::FORBIDDEN, code::DEVICE_REVOKED);
        assert_eq!(listed(&relay, &agent, &device.id).await.signing_key, None);
    }
}

#[tokio::test]
async fn the_relays_file_holds_the_public_key_and_the_seal_and_nothing_private() {
    if sqlite_only("reads the relay's SQLite file") {
        return;
    }
    let relay = start().await;
    let agent = register(&relay).await;
    let (secret, pairing_id, claimed_id) = upload_offer(&relay, &agent).await;
    let at_claim = draw_key(&agent, &claimed_id);
    claim(
        &relay,
        &pairing_id,
        &with_key(&secret, Some(&at_claim.key), Some(&at_claim.seal)),
    )
    .await
    .ok::<PairingClaimed>();
    let later = pair(&relay, &agent).await;
    let registered = draw_key(&agent, &later.id);
    put_key(&relay, &later.bearer, &registered.key, &registered.seal)
        .await
        .ok::<DeviceInfo>();
    let dir = relay.stop().await;

    // The two columns hold exactly what the devices gave.
    let conn = rusqlite::Connection::open(crate::common::db_path(&dir)).expect("opens the relay's database");
    let mut rows: Vec<(String, Option<String>, Option<String>)> = conn
        .prepare("SELECT device_id, signing_key, signing_key_seal FROM devices")
        .expect("prepared")
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .expect("read")
        .collect::<Result<_, _>>()
        .expect("rows");
    rows.sort();
    let mut expected = vec![
        (
            claimed_id.clone(),
            Some(at_claim.key.clone()),
            Some(at_claim.seal.clone()),
        ),
        (
            later.id.clone(),
            Some(registered.key.clone()),
            Some(registered.seal.clone()),
        ),
    ];
    expected.sort();
    assert_eq!(rows, expected);
    drop(conn);

    // No file of the relay's folder (database, WAL) holds a private key, raw or as base64url; the public keys
    // are there, so the search does find what is stored.
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir.path()).expect("the relay's folder") {
        let path = entry.expect("an entry").path();
        if path.is_file() {
            files.push(std::fs::read(&path).expect("readable"));
        }
    }
    let holds = |needle: &[u8]| files.iter().any(|f| f.windows(needle.len()).any(|w| w == needle));
    for drawn in [&at_claim, &registered] {
        assert!(holds(drawn.key.as_bytes()), "the public key is stored");
        let seed = drawn.private.seed();
        assert!(!holds(&seed), "a private key is stored raw");
        assert!(
            !holds(b64::encode(&seed).as_bytes()),
            "a private key is stored as base64url"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn of_two_concurrent_registrations_with_different_keys_one_wins() {
    let relay = start().await;
    let agent = register(&relay).await;
    for _ in 0..5 {
        let device = pair(&relay, &agent).await;
        let (one, two) = (draw_key(&agent, &device.id), draw_key(&agent, &device.id));
        let (a, b) = tokio::join!(
            put_key(&relay, &device.bearer, &one.key, &one.seal),
            put_key(&relay, &device.bearer, &two.key, &two.seal),
        );
        let (winner, loser) = match (a.status, b.status) {
            (StatusCode::OK, StatusCode::CONFLICT) => (&one, b),
            (StatusCode::CONFLICT, StatusCode::OK) => (&two, a),
            other => panic!("one registration wins, the other is refused: {other:?}"),
        };
        loser.error(StatusCode::CONFLICT, code::SIGNING_KEY_EXISTS);
        let stored = listed(&relay, &agent, &device.id).await;
        assert_eq!(stored.signing_key.as_deref(), Some(winner.key.as_str()));
        assert_eq!(stored.signing_key_seal.as_deref(), Some(winner.seal.as_str()));
    }
}
