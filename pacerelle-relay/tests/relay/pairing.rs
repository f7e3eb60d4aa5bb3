use std::time::Duration;

use pacerelle_core::pairing::open_offer;
use pacerelle_core::wire::{DeviceSelf, PairingClaimed, PairingCreated, PairingOffer, code};
use pacerelle_core::{Timestamp, ids};
use reqwest::{Method, StatusCode};

use crate::common::{TestRelay, claim_body, offer_for, register, start};

async fn claim(
    relay: &TestRelay,
    pairing_id: &str,
    body: &pacerelle_core::wire::ClaimPairing,
) -> crate::common::Reply {
    relay
        .call(
            Method::POST,
            &format!("/v1/pairings/{pairing_id}/claim"),
            None,
            Some(serde_json::to_value(body).expect("json")),
        )
        .await
}

async fn fetch(relay: &TestRelay, pairing_id: &str) -> crate::common::Reply {
    relay
        .call(Method::GET, &format!("/v1/pairings/{pairing_id}"), None, None)
        .await
}

#[tokio::test]
async fn an_offer_is_fetched_opened_and_claimed_once() {
    let relay = start().await;
    let agent = register(&relay).await;
    let device_id = ids::generate(ids::DEVICE);
    let (secret, offer) = offer_for(&agent, &device_id, Timestamp::now().plus_millis(600_000));
    let created: PairingCreated = relay.post("/v1/agent/pairings", &agent.bearer, &offer).await.ok();
    assert_eq!(created.device_id, device_id);

    let fetched: PairingOffer = fetch(&relay, &offer.pairing_id).await.ok();
    let opened = open_offer(&secret, &fetched.agent_id, &fetched.device_id, &fetched.offer).expect("opens");
    assert_eq!(opened.agent_id, agent.id);
    // The label the agent gave, for the device to offer as its name.
    assert_eq!(fetched.label.as_deref(), Some("phone"));

    let claimed: PairingClaimed = claim(&relay, &offer.pairing_id, &claim_body(&secret)).await.ok();
    assert_eq!(claimed.agent_id, agent.id);
    let me: DeviceSelf = relay.get("/v1/device", &claimed.device_token).await.ok();
    assert_eq!(me.device.device_id, device_id);
    assert_eq!(me.device.name, "Ana's phone");
    assert_eq!(me.device.label.as_deref(), Some("phone"));
    assert_eq!(me.agent.agent_id, agent.id);

    // Single use: the offer is gone, a second claim is refused.
    fetch(&relay, &offer.pairing_id)
        .await
        .error(StatusCode::CONFLICT, code::PAIRING_CLAIMED);
    claim(&relay, &offer.pairing_id, &claim_body(&secret))
        .await
        .error(StatusCode::CONFLICT, code::PAIRING_CLAIMED);
}

#[tokio::test]
async fn a_wrong_claim_secret_is_refused_and_the_offer_stays_claimable() {
    let relay = start().await;
    let agent = register(&relay).await;
    let (secret, offer) = offer_for(&agent, "dv_phone-1", Timestamp::now().plus_millis(600_000));
    relay
        .post("/v1/agent/pairings", &agent.bearer, &offer)
        .await
        .ok::<PairingCreated>();
    let wrong = claim_body(&pacerelle_core::pairing::PairingSecret::generate());
    claim(&relay, &offer.pairing_id, &wrong)
        .await
        .error(StatusCode::FORBIDDEN, code::PAIRING_PROOF);
    claim(&relay, &offer.pairing_id, &claim_body(&secret))
        .await
        .ok::<PairingClaimed>();
}

#[tokio::test]
async fn an_expired_offer_cannot_be_fetched_or_claimed() {
    let relay = start().await;
    let agent = register(&relay).await;
    let (secret, offer) = offer_for(&agent, "dv_late", Timestamp::now().plus_millis(300));
    relay
        .post("/v1/agent/pairings", &agent.bearer, &offer)
        .await
        .ok::<PairingCreated>();
    tokio::time::sleep(Duration::from_millis(400)).await;
    fetch(&relay, &offer.pairing_id)
        .await
        .error(StatusCode::GONE, code::PAIRING_EXPIRED);
    claim(&relay, &offer.pairing_id, &claim_body(&secret))
        .await
        .error(StatusCode::GONE, code::PAIRING_EXPIRED);
}

#[tokio::test]
async fn offers_are_validated_and_capped_at_one_hour() {
    let relay = start().await;
    let agent = register(&relay).await;
    let now = Timestamp::now();

    let (_, past) = offer_for(&agent, "dv_past", now.plus_millis(-1000));
    relay
        .post("/v1/agent/pairings", &agent.bearer, &past)
        .await
        .error(StatusCode::BAD_REQUEST, code::INVALID_INPUT);
    let (_, mut bad_id) = offer_for(&agent, "dv_x", now.plus_millis(60_000));
    bad_id.pairing_id = "short".into();
    relay
        .post("/v1/agent/pairings", &agent.bearer, &bad_id)
        .await
        .error(StatusCode::BAD_REQUEST, code::INVALID_INPUT);

    let (_, far) = offer_for(&agent, "dv_far", now.plus_millis(10 * 3600 * 1000));
    let created: PairingCreated = relay.post("/v1/agent/pairings", &agent.bearer, &far).await.ok();
    assert!(created.expires_at <= Timestamp::now().plus_millis(3600 * 1000));

    // The device id is taken now, even by an unclaimed offer.
    let (_, same_device) = offer_for(&agent, "dv_far", now.plus_millis(60_000));
    relay
        .post("/v1/agent/pairings", &agent.bearer, &same_device)
        .await
        .error(StatusCode::CONFLICT, code::ID_CONFLICT);
}

#[tokio::test]
async fn unknown_offers_are_not_found() {
    let relay = start().await;
    let unknown = pacerelle_core::pairing::PairingSecret::generate();
    fetch(&relay, &unknown.pairing_id())
        .await
        .error(StatusCode::NOT_FOUND, code::NOT_FOUND);
    claim(&relay, &unknown.pairing_id(), &claim_body(&unknown))
        .await
        .error(StatusCode::NOT_FOUND, code::NOT_FOUND);
    fetch(&relay, "not-a-pairing-id")
        .await
        .error(StatusCode::NOT_FOUND, code::NOT_FOUND);
}
