//! Pushes per second sustained by one relay: a real relay on loopback (durable SQLite) delivering Web Push
//! (RFC 8291 encryption and a VAPID signature per push) to a local push service on 127.0.0.1 that accepts
//! every push at once.
//!
//! `cargo bench -p pacerelle-client --bench push [-- --quick]`
//!
//! One agent with 5 paired devices, each with 10 subscriptions (50 endpoints on the one local receiver). The
//! agent sends notifications, each sealed for the 5 devices: 50 pushes each. The figure is pushes accepted by
//! the receiver per second, from the first notification sent until the last push arrived (the relay also
//! stores the notifications meanwhile, as it would in use).
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use pacerelle_client::core::webpush::SubscriptionKeys;
use pacerelle_client::{AgentClient, DeviceClient, Level, agent::PairingOptions};
use pacerelle_relay::{Config, Relay};

const DEVICES: usize = 5;
const SUBSCRIPTIONS: usize = 10;

async fn receiver(count: Arc<AtomicUsize>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = axum::Router::new().route(
        "/push/{id}",
        axum::routing::post(move |_body: axum::body::Bytes| {
            let count = count.clone();
            async move {
                count.fetch_add(1, Ordering::Relaxed);
                axum::http::StatusCode::CREATED
            }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let notifications = if quick { 20 } else { 200 };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = tempfile::tempdir().unwrap();
        let relay = Relay::open(Config {
            open_registration: true,
            allow_private_push_endpoints: true,
            ..Config::new(dir.path().join("bench.db"))
        })
        .await
        .unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(relay.serve(listener, std::future::pending()));
        let count = Arc::new(AtomicUsize::new(0));
        let push_service = receiver(count.clone()).await;

        let agent = AgentClient::register(&url, "bench", None).await.unwrap();
        let http = reqwest::Client::new();
        for d in 0..DEVICES {
            let link = agent.create_pairing(PairingOptions::default()).await.unwrap();
            let device = DeviceClient::join(&link.link, &format!("device {d}"))
                .await
                .unwrap();
            for s in 0..SUBSCRIPTIONS {
                let keys = SubscriptionKeys::generate().unwrap();
                let resp = http
                    .post(format!("{url}/v1/device/push"))
                    .bearer_auth(&device.credentials().device_token)
                    .json(&serde_json::json!({
                        "endpoint": format!("{push_service}/push/{d}-{s}"),
                        "keys": {
                            "p256dh": pacerelle_client::core::b64::encode(keys.public_key()),
                            "auth": pacerelle_client::core::b64::encode(keys.auth()),
                        },
                    }))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(resp.status(), 201);
            }
        }
        let expected = notifications * DEVICES * SUBSCRIPTIONS;
        let start = Instant::now();
        for i in 0..notifications {
            agent
                .notify(&format!("build {i} finished"), None, Level::Info)
                .await
                .unwrap();
        }
        let sent = start.elapsed();
        while count.load(Ordering::Relaxed) < expected {
            assert!(
                start.elapsed() < Duration::from_secs(600),
                "pushes stalled at {}",
                count.load(Ordering::Relaxed)
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let elapsed = start.elapsed();
        println!(
            "push: {expected} pushes ({notifications} notifications x {DEVICES} devices x {SUBSCRIPTIONS} \
             subscriptions) in {:.2} s: {:.0} pushes/s sustained (notifications stored in {:.2} s)",
            elapsed.as_secs_f64(),
            expected as f64 / elapsed.as_secs_f64(),
            sent.as_secs_f64(),
        );
    });
}
