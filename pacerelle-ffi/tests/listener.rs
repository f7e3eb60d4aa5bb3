//! The listener's loop against a real relay on 127.0.0.1: delivery in order, stop, retry while the relay
//! is down, and the end on a revoked device. (The Kotlin tests check the same through the binding.)
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::large_enum_variant)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use pacerelle_client::{AgentClient, agent::PairingOptions};
use pacerelle_ffi::{ConversationItem, ConversationListener, DeviceClient, ItemKind, PacerelleError};
use pacerelle_relay::{Config, Relay};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

/// A relay serving a SQLite file in `dir` on `addr` until `stop` is sent.
struct Served {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

async fn serve(dir: &std::path::Path, addr: SocketAddr) -> (Served, SocketAddr) {
    let relay = Relay::open(Config {
        database_path: dir.join("pacerelle.db"),
        open_registration: true,
        registration_secret: None,
        public_url: None,
        ..Default::default()
    })
    .await
    .expect("relay opens");
    let listener = tokio::net::TcpListener::bind(addr).await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(relay.serve(listener, async move {
        let _ = stopped.await;
    }));
    (Served { stop, task }, addr)
}

impl Served {
    async fn stop(self) {
        let _ = self.stop.send(());
        self.task.await.expect("join").expect("serve");
    }
}

async fn agent_and_device(url: &str) -> (AgentClient, Arc<DeviceClient>) {
    let agent = AgentClient::register(url, "listener tests", None)
        .await
        .expect("register")
        .with_home(None);
    let link = agent
        .create_pairing(PairingOptions::default())
        .await
        .expect("pairing");
    let device = DeviceClient::join(link.link, "phone".into()).await.expect("join");
    (agent, device)
}

#[derive(Debug)]
enum Event {
    Item(ConversationItem),
    Error(PacerelleError, bool),
}

#[derive(Debug)]
struct Channel(UnboundedSender<Event>);

impl ConversationListener for Channel {
    fn on_item(&self, item: ConversationItem) -> Result<(), PacerelleError> {
        let _ = self.0.send(Event::Item(item));
        Ok(())
    }

    fn on_error(&self, error: PacerelleError, will_retry: bool) -> Result<(), PacerelleError> {
        let _ = self.0.send(Event::Error(error, will_retry));
        Ok(())
    }
}

fn channel() -> (Arc<Channel>, UnboundedReceiver<Event>) {
    let (tx, rx) = unbounded_channel();
    (Arc::new(Channel(tx)), rx)
}

async fn next(rx: &mut UnboundedReceiver<Event>, within: Duration) -> Option<Event> {
    tokio::time::timeout(within, rx.recv()).await.ok().flatten()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delivers_in_order_then_stops() {
    let dir = tempfile::tempdir().unwrap();
    let (served, addr) = serve(dir.path(), "127.0.0.1:0".parse().unwrap()).await;
    let (agent, device) = agent_and_device(&format!("http://{addr}")).await;
    let (listener, mut rx) = channel();
    let handle = device.listen(None, listener).expect("listen");

    let sent = device.send("one".into(), None).await.expect("send");
    agent
        .reply(&sent.message_id, "reply one", None)
        .await
        .expect("reply");
    let mut kinds = Vec::new();
    while kinds.len() < 2 {
        match next(&mut rx, Duration::from_secs(20)).await {
            Some(Event::Item(item)) => kinds.push((item.kind, item.text)),
            other => panic!("expected an item, got {other:?}"),
        }
    }
    assert_eq!(
        kinds,
        [
            (ItemKind::Message, "one".to_string()),
            (ItemKind::Reply, "reply one".to_string())
        ]
    );

    handle.stop();
    assert!(handle.is_stopped());
    let sent = device.send("two".into(), None).await.expect("send");
    agent
        .reply(&sent.message_id, "reply two", None)
        .await
        .expect("reply");
    assert!(
        next(&mut rx, Duration::from_millis(1500)).await.is_none(),
        "nothing after stop"
    );
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_handle_stops_it() {
    let dir = tempfile::tempdir().unwrap();
    let (served, addr) = serve(dir.path(), "127.0.0.1:0".parse().unwrap()).await;
    let (agent, device) = agent_and_device(&format!("http://{addr}")).await;
    let (listener, mut rx) = channel();
    drop(device.listen(None, listener).expect("listen"));
    let sent = device.send("unheard".into(), None).await.expect("send");
    agent
        .reply(&sent.message_id, "unheard reply", None)
        .await
        .expect("reply");
    assert!(next(&mut rx, Duration::from_millis(1500)).await.is_none());
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_while_the_relay_is_down() {
    let dir = tempfile::tempdir().unwrap();
    let (served, addr) = serve(dir.path(), "127.0.0.1:0".parse().unwrap()).await;
    let (agent, device) = agent_and_device(&format!("http://{addr}")).await;
    let end = device.conversation(None).await.expect("conversation").cursor;
    served.stop().await;

    let (listener, mut rx) = channel();
    let handle = device.listen(Some(end), listener).expect("listen");
    match next(&mut rx, Duration::from_secs(30)).await {
        Some(Event::Error(PacerelleError::Network { .. }, true)) => {}
        other => panic!("expected a network error to retry, got {other:?}"),
    }
    assert!(!handle.is_stopped());

    // Back on the same address: the listener goes on by itself.
    let (served, _) = serve(dir.path(), addr).await;
    let sent = device.send("back".into(), None).await.expect("send");
    agent
        .reply(&sent.message_id, "welcome back", None)
        .await
        .expect("reply");
    loop {
        match next(&mut rx, Duration::from_secs(30)).await {
            Some(Event::Item(item)) if item.kind == ItemKind::Reply => {
                assert_eq!(item.text, "welcome back");
                break;
            }
            Some(_) => {}
            None => panic!("the listener did not resume"),
        }
    }
    handle.stop();
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_device_ends_listening() {
    let dir = tempfile::tempdir().unwrap();
    let (served, addr) = serve(dir.path(), "127.0.0.1:0".parse().unwrap()).await;
    let (agent, device) = agent_and_device(&format!("http://{addr}")).await;
    agent
        .revoke_device(&device.identity().device_id)
        .await
        .expect("revoke");
    let (listener, mut rx) = channel();
    let handle = device.listen(None, listener).expect("listen");
    match next(&mut rx, Duration::from_secs(20)).await {
        Some(Event::Error(PacerelleError::NotPaired { .. }, false)) => {}
        other => panic!("expected NotPaired without retry, got {other:?}"),
    }
    for _ in 0..100 {
        if handle.is_stopped() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(handle.is_stopped());
    served.stop().await;
}
