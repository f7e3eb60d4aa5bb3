//! A real relay on 127.0.0.1:0 with a SQLite file in a temporary folder.
#![allow(dead_code, clippy::expect_used, clippy::unwrap_used)]

use std::path::PathBuf;

use pacerelle_client::{AgentClient, DeviceClient, PairingOptions};
use pacerelle_relay::{Config, Relay};

pub struct TestRelay {
    pub url: String,
    pub dir: tempfile::TempDir,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl TestRelay {
    pub async fn start() -> TestRelay {
        let dir = tempfile::tempdir().expect("tempdir");
        Self::start_in(dir).await
    }

    pub async fn start_in(dir: tempfile::TempDir) -> TestRelay {
        let relay = Relay::open(Config {
            database_path: dir.path().join("pacerelle.db"),
            open_registration: true,
            registration_secret: None,
            public_url: None,
        })
        .await
        .expect("relay opens");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(relay.serve(listener, async move {
            let _ = stopped.await;
        }));
        TestRelay {
            url,
            dir,
            stop: Some(stop),
            task: Some(task),
        }
    }

    pub fn database_files(&self) -> Vec<PathBuf> {
        std::fs::read_dir(self.dir.path())
            .expect("read dir")
            .map(|e| e.expect("entry").path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("pacerelle.db"))
            })
            .collect()
    }

    /// Stops the relay gracefully and gives back its folder.
    pub async fn stop(mut self) -> tempfile::TempDir {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.expect("join").expect("serve");
        }
        let dir = tempfile::tempdir().expect("tempdir");
        std::mem::replace(&mut self.dir, dir)
    }

    /// An agent with one paired device.
    pub async fn agent_and_device(&self) -> (AgentClient, DeviceClient) {
        let agent = AgentClient::register(&self.url, "test agent", None)
            .await
            .expect("register");
        let link = agent
            .create_pairing(PairingOptions::default())
            .await
            .expect("pairing");
        let device = DeviceClient::join(&link.link, "test phone").await.expect("join");
        (agent, device)
    }
}

/// True when `needle` occurs in the bytes of `path` (false for a file that went away meanwhile, such as a
/// transient journal).
pub fn file_contains(path: &std::path::Path, needle: &[u8]) -> bool {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return false,
        Err(e) => panic!("read {}: {e}", path.display()),
    };
    bytes.windows(needle.len()).any(|w| w == needle)
}
