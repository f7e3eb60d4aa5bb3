//! An acknowledged task survives a relay killed with SIGKILL.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use pacerelle_client::{AgentClient, DeviceClient, agent::PairingOptions, device::DeviceCredentials};

struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve(data: &Path) -> (Proc, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pacerelle"))
        .args(["serve", "--json", "--listen", "127.0.0.1:0", "--data"])
        .arg(data)
        .env("PACERELLE_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut reader = BufReader::new(child.stdout.take().expect("stdout"));
    let mut text = String::new();
    while !text.trim_end().ends_with('}') {
        assert!(
            reader.read_line(&mut text).expect("read") > 0,
            "serve exited: {text}"
        );
    }
    let v: serde_json::Value = serde_json::from_str(&text).expect("json");
    (Proc(child), v["relayUrl"].as_str().expect("url").to_string())
}

#[tokio::test]
async fn tasks_acknowledged_before_a_sigkill_are_delivered_after_restart() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (mut relay, url) = serve(tmp.path());
    let agent = AgentClient::register(&url, "durable", None)
        .await
        .expect("register")
        .with_home(Some(&pacerelle_test_support::home()));
    let link = agent
        .create_pairing(PairingOptions::default())
        .await
        .expect("pair");
    let device = DeviceClient::join(&link.link, "phone").await.expect("join");

    // Acknowledged tasks, sent concurrently, then the relay is killed at once.
    let sends = (0..20).map(|i| {
        let device = device.clone();
        async move {
            device
                .send(&format!("task {i}"), Some(&format!("task-{i}")))
                .await
        }
    });
    let acknowledged: Vec<String> = futures_join_all(sends)
        .await
        .into_iter()
        .map(|r| r.expect("stored").id)
        .collect();
    relay.0.kill().expect("SIGKILL");
    relay.0.wait().expect("reaped");

    let (_relay, url2) = serve(tmp.path());
    let agent = AgentClient::new(&url2, agent.agent_id(), agent.token().clone())
        .expect("client")
        .with_home(Some(&pacerelle_test_support::home()));
    let inbox = agent.wait_for_messages(None, Duration::ZERO).await.expect("wait");
    let mut got: Vec<String> = inbox.messages.iter().map(|m| m.message_id.clone()).collect();
    got.sort();
    let mut want = acknowledged;
    want.sort();
    assert_eq!(got, want);
    assert!(inbox.messages.iter().all(|m| m.text.starts_with("task ")));

    // The device's credentials keep working against the restarted relay.
    let moved = DeviceCredentials {
        relay_url: url2.clone(),
        ..device.credentials().clone()
    };
    let device = DeviceClient::from_credentials(moved).expect("device");
    assert_eq!(
        device
            .conversation(None, Duration::ZERO)
            .await
            .expect("conversation")
            .items
            .len(),
        20
    );
}

/// Awaits every future concurrently (a small join_all on tokio tasks).
async fn futures_join_all<F, T>(futures: impl Iterator<Item = F>) -> Vec<T>
where
    F: std::future::Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let handles: Vec<_> = futures.map(tokio::spawn).collect();
    let mut out = Vec::with_capacity(handles.len());
    for h in handles {
        out.push(h.await.expect("join"));
    }
    out
}
