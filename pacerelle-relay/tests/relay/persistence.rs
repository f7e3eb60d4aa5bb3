use pacerelle_core::b64;
use pacerelle_core::wire::{
    CheckpointList, Conversation, DeviceSelf, ItemKind, MessageBatch, SaveCheckpoint, SendReply, Stored,
};
use pacerelle_relay::Config;

use crate::common::{db_path, ids_of, pair, register, send_task, start, start_with, wait_messages};

#[tokio::test]
async fn everything_stored_survives_closing_and_reopening_the_database() {
    let relay = start().await;
    let agent = register(&relay).await;
    let phone = pair(&relay, &agent).await;
    for id in ["p1", "p2", "p3"] {
        send_task(&relay, &phone, id, id).await;
    }
    let delivered: MessageBatch = wait_messages(&relay, &agent, None, 0, None).await.ok();
    assert_eq!(ids_of(&delivered), ["p1", "p2", "p3"]);
    relay
        .call(
            reqwest::Method::POST,
            "/v1/agent/messages/p1/processed",
            Some(&agent.bearer),
            None,
        )
        .await
        .ok::<serde_json::Value>();
    let reply = SendReply {
        reply_id: "r1".into(),
        source_message_id: "p1".into(),
        envelopes: vec![pacerelle_core::wire::DeviceEnvelope {
            device_id: phone.id.clone(),
            envelope: b64::encode(b"sealed reply"),
        }],
    };
    relay
        .post("/v1/agent/replies", &agent.bearer, &reply)
        .await
        .ok::<Stored>();
    let checkpoint = SaveCheckpoint {
        checkpoint_id: "ck".into(),
        envelope: b64::encode(b"sealed checkpoint"),
    };
    relay
        .post("/v1/agent/checkpoints", &agent.bearer, &checkpoint)
        .await
        .ok::<Stored>();

    let dir = relay.stop().await;
    let relay = start_with(
        Config {
            open_registration: true,
            ..Config::new(db_path(&dir))
        },
        dir,
    )
    .await;

    // Credentials, devices, tasks (with their delivery state), replies and checkpoints are all there.
    relay.get("/v1/device", &phone.bearer).await.ok::<DeviceSelf>();
    let again: MessageBatch = wait_messages(&relay, &agent, None, 0, None).await.ok();
    assert_eq!(ids_of(&again), ["p2", "p3"]);
    assert!(again.messages.iter().all(|m| m.redelivered));
    let conv: Conversation = relay
        .get("/v1/device/conversation?updates=true&wait=0", &phone.bearer)
        .await
        .ok();
    // An update item (named here by its subject) says that p1 was processed.
    let ids: Vec<(ItemKind, &str)> = conv
        .items
        .iter()
        .map(|i| (i.kind, i.subject_id.as_deref().unwrap_or(&i.id)))
        .collect();
    assert_eq!(
        ids,
        [
            (ItemKind::Message, "p1"),
            (ItemKind::Message, "p2"),
            (ItemKind::Message, "p3"),
            (ItemKind::Update, "p1"),
            (ItemKind::Reply, "r1")
        ]
    );
    let list: CheckpointList = relay.get("/v1/agent/checkpoints", &agent.bearer).await.ok();
    assert_eq!(list.checkpoints.len(), 1);
    // New items keep counting up from where the stream was.
    let next = send_task(&relay, &phone, "p4", "after restart").await;
    assert!(next.cursor > conv.cursor);
}
