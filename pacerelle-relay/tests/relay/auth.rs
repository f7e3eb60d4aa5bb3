use pacerelle_core::wire::{
    CheckpointList, DeviceEnvelope, DeviceList, MessageBatch, SaveCheckpoint, SendReply, Stored, code,
};
use pacerelle_core::{AgentToken, b64};
use reqwest::{Method, StatusCode};

use crate::common::{pair, register, send_task, start, wait_messages};

#[tokio::test]
async fn missing_malformed_or_wrong_credentials_are_unauthorized() {
    let relay = start().await;
    let agent = register(&relay).await;
    relay
        .call(Method::GET, "/v1/agent", None, None)
        .await
        .error(StatusCode::UNAUTHORIZED, code::UNAUTHORIZED);
    for bad in ["nonsense", "ag_x.", &format!("{}.AAAA", agent.id)] {
        relay
            .get("/v1/agent", bad)
            .await
            .error(StatusCode::UNAUTHORIZED, code::UNAUTHORIZED);
    }
    // The right id with another secret.
    let other = AgentToken::generate().bearer(&agent.id);
    relay
        .get("/v1/agent", other.expose())
        .await
        .error(StatusCode::UNAUTHORIZED, code::UNAUTHORIZED);
    // An id nobody has.
    let stranger = AgentToken::generate().bearer("ag_nobody");
    relay
        .get("/v1/device", stranger.expose())
        .await
        .error(StatusCode::UNAUTHORIZED, code::UNAUTHORIZED);
}

#[tokio::test]
async fn credentials_of_the_wrong_kind_are_forbidden() {
    let relay = start().await;
    let agent = register(&relay).await;
    let device = pair(&relay, &agent).await;
    for path in [
        "/v1/agent",
        "/v1/agent/messages?wait=0",
        "/v1/agent/devices",
        "/v1/agent/status",
    ] {
        relay
            .get(path, &device.bearer)
            .await
            .error(StatusCode::FORBIDDEN, code::FORBIDDEN);
    }
    for path in [
        "/v1/device",
        "/v1/device/conversation?wait=0",
        "/v1/device/status",
    ] {
        relay
            .get(path, &agent.bearer)
            .await
            .error(StatusCode::FORBIDDEN, code::FORBIDDEN);
    }
}

#[tokio::test]
async fn a_revoked_device_is_refused_and_stays_listed() {
    let relay = start().await;
    let agent = register(&relay).await;
    let device = pair(&relay, &agent).await;
    let kept = pair(&relay, &agent).await;
    send_task(&relay, &device, "m1", "before revocation").await;

    let revoked: pacerelle_core::wire::DeviceInfo = relay
        .delete(&format!("/v1/agent/devices/{}", device.id), &agent.bearer)
        .await
        .ok();
    let first = revoked.revoked_at.expect("revoked");
    // Idempotent: the first time is kept.
    let again: pacerelle_core::wire::DeviceInfo = relay
        .delete(&format!("/v1/agent/devices/{}", device.id), &agent.bearer)
        .await
        .ok();
    assert_eq!(again.revoked_at, Some(first));

    relay
        .get("/v1/device", &device.bearer)
        .await
        .error(StatusCode::FORBIDDEN, code::DEVICE_REVOKED);
    crate::common::send_task_reply(&relay, &device, "m2", "after revocation")
        .await
        .error(StatusCode::FORBIDDEN, code::DEVICE_REVOKED);
    // The other device still works; the list keeps both, oldest first.
    relay
        .get("/v1/device", &kept.bearer)
        .await
        .ok::<serde_json::Value>();
    let list: DeviceList = relay.get("/v1/agent/devices", &agent.bearer).await.ok();
    let ids: Vec<&str> = list.devices.iter().map(|d| d.device_id.as_str()).collect();
    assert_eq!(ids, [device.id.as_str(), kept.id.as_str()]);
    assert!(list.devices[0].revoked_at.is_some());
    assert!(list.devices[1].revoked_at.is_none());
}

#[tokio::test]
async fn a_device_can_leave() {
    let relay = start().await;
    let agent = register(&relay).await;
    let device = pair(&relay, &agent).await;
    let info: pacerelle_core::wire::DeviceInfo = relay.delete("/v1/device", &device.bearer).await.ok();
    assert!(info.revoked_at.is_some());
    relay
        .get("/v1/device", &device.bearer)
        .await
        .error(StatusCode::FORBIDDEN, code::DEVICE_REVOKED);
}

#[tokio::test]
async fn one_agent_never_sees_or_touches_another_agents_items() {
    let relay = start().await;
    let a = register(&relay).await;
    let b = register(&relay).await;
    let a_phone = pair(&relay, &a).await;
    let b_phone = pair(&relay, &b).await;
    send_task(&relay, &b_phone, "b-task", "for b only").await;
    send_task(&relay, &a_phone, "a-task", "for a").await;
    relay
        .post(
            "/v1/agent/checkpoints",
            &b.bearer,
            &SaveCheckpoint {
                checkpoint_id: "b-ckp".into(),
                envelope: b64::encode(b"sealed elsewhere"),
            },
        )
        .await
        .ok::<Stored>();

    // Waiting: A gets only its own task.
    let batch: MessageBatch = wait_messages(&relay, &a, None, 0, None).await.ok();
    assert_eq!(crate::common::ids_of(&batch), ["a-task"]);
    // Marking B's task processed: as if it did not exist.
    relay
        .call(
            Method::POST,
            "/v1/agent/messages/b-task/processed",
            Some(&a.bearer),
            None,
        )
        .await
        .error(StatusCode::NOT_FOUND, code::NOT_FOUND);
    // Replying to B's task, or sealing for B's device.
    let reply = |source: &str, device: &str| SendReply {
        reply_id: format!("r-{source}-{device}"),
        source_message_id: source.into(),
        envelopes: vec![DeviceEnvelope {
            device_id: device.into(),
            envelope: b64::encode(b"sealed"),
        }],
    };
    relay
        .post("/v1/agent/replies", &a.bearer, &reply("b-task", &a_phone.id))
        .await
        .error(StatusCode::NOT_FOUND, code::NOT_FOUND);
    relay
        .post("/v1/agent/replies", &a.bearer, &reply("a-task", &b_phone.id))
        .await
        .error(StatusCode::BAD_REQUEST, code::INVALID_INPUT);
    // Checkpoints and devices: only A's.
    let list: CheckpointList = relay.get("/v1/agent/checkpoints", &a.bearer).await.ok();
    assert!(list.checkpoints.is_empty());
    let devices: DeviceList = relay.get("/v1/agent/devices", &a.bearer).await.ok();
    assert_eq!(devices.devices.len(), 1);
    assert_eq!(devices.devices[0].device_id, a_phone.id);
    relay
        .delete(&format!("/v1/agent/devices/{}", b_phone.id), &a.bearer)
        .await
        .error(StatusCode::NOT_FOUND, code::NOT_FOUND);
    // B's device still works and B still has its task, undelivered.
    relay
        .get("/v1/device", &b_phone.bearer)
        .await
        .ok::<serde_json::Value>();
    let batch: MessageBatch = wait_messages(&relay, &b, None, 0, None).await.ok();
    assert_eq!(crate::common::ids_of(&batch), ["b-task"]);
    assert!(!batch.messages[0].redelivered);
}

/// A wrong credential from `client`, through a proxy on loopback that names it in `X-Forwarded-For`.
async fn wrong_from(relay: &crate::common::TestRelay, agent_id: &str, client: &str) -> StatusCode {
    relay
        .request(
            Method::GET,
            "/v1/agent",
            Some(&format!("{agent_id}.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")),
            &[("x-forwarded-for", client)],
            None,
        )
        .await
        .status
}

#[tokio::test]
async fn wrong_credentials_are_throttled_per_client_behind_a_trusted_proxy() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let config = pacerelle_relay::Config {
        open_registration: true,
        trusted_proxies: vec!["127.0.0.1".parse().expect("a network")],
        ..pacerelle_relay::Config::new(crate::common::db_path(&dir))
    };
    let relay = crate::common::start_with(config, dir).await;
    let agent = register(&relay).await;

    // 1 000 wrong credentials from one client: after its burst, refused without a look at the credential.
    let mut refused = 0;
    for _ in 0..1000 {
        match wrong_from(&relay, &agent.id, "203.0.113.7").await {
            StatusCode::UNAUTHORIZED => {}
            StatusCode::TOO_MANY_REQUESTS => refused += 1,
            other => panic!("{other}"),
        }
    }
    assert!(refused >= 970, "{refused} of 1000 throttled");
    // That client is refused even with the right credential until its bucket refills…
    relay
        .request(
            Method::GET,
            "/v1/agent",
            Some(&agent.bearer),
            &[("x-forwarded-for", "203.0.113.7")],
            None,
        )
        .await
        .error(StatusCode::TOO_MANY_REQUESTS, code::RATE_LIMITED);
    // …while another client behind the same proxy is not: each real client has its own bucket.
    let other = relay
        .request(
            Method::GET,
            "/v1/agent",
            Some(&agent.bearer),
            &[("x-forwarded-for", "203.0.113.8")],
            None,
        )
        .await;
    assert_eq!(other.status, StatusCode::OK, "{}", other.body);
    assert_eq!(
        wrong_from(&relay, &agent.id, "203.0.113.8").await,
        StatusCode::UNAUTHORIZED
    );
    // A client cannot escape by writing the header itself: the proxy appends the address it saw, and the
    // right-most untrusted hop counts.
    assert_eq!(
        wrong_from(&relay, &agent.id, "198.51.100.1, 203.0.113.7").await,
        StatusCode::TOO_MANY_REQUESTS
    );
}

#[tokio::test]
async fn forwarding_headers_from_an_untrusted_peer_are_ignored() {
    // No trusted proxy: every request counts for its peer, loopback here, whose bucket is large; a header
    // naming other clients changes nothing.
    let relay = start().await;
    let agent = register(&relay).await;
    for i in 0..60 {
        let client = format!("203.0.113.{}", i % 2);
        let status = relay
            .request(
                Method::GET,
                "/v1/agent",
                Some(&format!(
                    "{}.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
                    agent.id
                )),
                &[("x-forwarded-for", &client)],
                None,
            )
            .await
            .status;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
    }
    relay
        .get("/v1/agent", &agent.bearer)
        .await
        .ok::<serde_json::Value>();
}
