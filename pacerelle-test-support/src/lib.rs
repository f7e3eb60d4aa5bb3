#![doc = include_str!("../README.md")]

mod package_env;
pub mod postgres;
mod rng;

pub use rng::Rng;

use std::path::{Path, PathBuf};

use pacerelle_client::{AgentClient, DeviceClient, agent::PairingOptions};
use pacerelle_relay::{Config, Relay};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The home every test agent and spawned binary uses (its roster marks): `PACERELLE_HOME` when set (as
/// `cargo xtask test` does), else `target/test-home` of this workspace — never the user's config folder,
/// which a client falls back to when neither is given.
pub fn home() -> PathBuf {
    std::env::var_os("PACERELLE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/test-home"))
}

/// The path of `name`, a program of the workspace that a test of another package runs (`pacerelle` from the
/// relay's tests, `pacerelle-mcp` from the CLI's), built first, once per test process, as `cargo test
/// --workspace` builds it (`--no-run`): inside that run a no-op, and the same build as the steps of `cargo
/// xtask test` (cargo resolves features for the packages a command names, so `cargo build -p pacerelle-cli`
/// would build the relay, the client and their dependencies once more with other features).
pub fn binary(name: &str) -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    let profile_dir = BUILT.get_or_init(|| {
        // target/<profile>/deps/<test>-… → target/<profile>
        let exe = std::env::current_exe().expect("test executable");
        let profile_dir = exe.parent().and_then(Path::parent).expect("target/<profile>");
        let target_dir = profile_dir.parent().expect("target");
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut build = cargo_command(cargo);
        build.args(["test", "--workspace", "--no-run", "--quiet"]);
        if profile_dir.file_name().is_some_and(|p| p == "release") {
            build.arg("--release");
        }
        let status = build
            .arg("--manifest-path")
            .arg(&manifest)
            .arg("--target-dir")
            .arg(target_dir)
            .status()
            .expect("run cargo test --no-run");
        assert!(status.success(), "cargo test --workspace --no-run failed");
        profile_dir.to_path_buf()
    });
    let bin = profile_dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(bin.exists(), "{} was not built", bin.display());
    bin
}

/// A command for cargo, started from a test, without the variables cargo set for the test itself
/// (`package_env::set_by_cargo`: inherited, they make it rebuild ring and everything above it, and the next
/// `cargo test` rebuild them back).
pub fn cargo_command(cargo: impl AsRef<std::ffi::OsStr>) -> std::process::Command {
    let mut command = std::process::Command::new(cargo);
    for (name, _) in std::env::vars_os() {
        let Some(name) = name.to_str() else { continue };
        if package_env::set_by_cargo(name) {
            command.env_remove(name);
        }
    }
    command
}

/// A listener on `127.0.0.1:port` (`0`: any free port). A port just released may not be free again at once:
/// binding is tried for up to 5 s.
pub async fn bind_on(port: u16) -> TcpListener {
    let mut tries = 0;
    loop {
        match TcpListener::bind(("127.0.0.1", port)).await {
            Ok(listener) => return listener,
            Err(e) if tries < 50 => {
                tries += 1;
                eprintln!("port {port} is not free yet: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            Err(e) => panic!("bind the same port {port}: {e}"),
        }
    }
}

/// A real relay serving on `127.0.0.1`, its database `pacerelle.db` in `dir`.
#[derive(Debug)]
pub struct TestRelay {
    pub url: String,
    pub port: u16,
    pub dir: tempfile::TempDir,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

impl TestRelay {
    /// A relay on a free port with a new temporary folder.
    pub async fn start() -> TestRelay {
        let dir = tempfile::tempdir().expect("tempdir");
        Self::start_in(dir).await
    }

    /// A relay on a free port with its database in `dir` (to restart one on the folder [`TestRelay::stop`]
    /// gave back).
    pub async fn start_in(dir: tempfile::TempDir) -> TestRelay {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        Self::serve(dir, listener, |_| {}).await
    }

    /// A relay on a free port with a new temporary folder, its configuration changed by `configure` first
    /// (quotas, limits…).
    pub async fn start_with(configure: impl FnOnce(&mut Config)) -> TestRelay {
        let dir = tempfile::tempdir().expect("tempdir");
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        Self::serve(dir, listener, configure).await
    }

    /// A relay on a given port (to restart one where clients expect it). A port just released may not be
    /// free again at once: binding is tried for up to 5 s.
    pub async fn start_on(port: u16, dir: tempfile::TempDir) -> TestRelay {
        Self::serve(dir, bind_on(port).await, |_| {}).await
    }

    async fn serve(
        dir: tempfile::TempDir,
        listener: TcpListener,
        configure: impl FnOnce(&mut Config),
    ) -> TestRelay {
        let mut config = Config {
            database_path: dir.path().join("pacerelle.db"),
            open_registration: true,
            registration_secret: None,
            public_url: None,
            // Push endpoints of tests are local push services on 127.0.0.1.
            allow_private_push_endpoints: true,
            ..Default::default()
        };
        configure(&mut config);
        let relay = Relay::open(config).await.expect("relay opens");
        let addr = listener.local_addr().expect("addr");
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(relay.serve(listener, async move {
            let _ = stopped.await;
        }));
        TestRelay {
            url: format!("http://{addr}"),
            port: addr.port(),
            dir,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// The database file and its `-wal` and `-shm` companions, as they are now.
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
            .expect("register")
            .with_home(Some(&home()));
        let device = pair(&agent, "test phone").await;
        (agent, device)
    }
}

/// One more owner device of `agent`, named `name`, paired through a link as a phone would.
pub async fn pair(agent: &AgentClient, name: &str) -> DeviceClient {
    let link = agent
        .create_pairing(PairingOptions::default())
        .await
        .expect("pairing");
    DeviceClient::join(&link.link, name).await.expect("join")
}

/// True when `needle` occurs in the bytes of `path` (false when the file vanished meanwhile, as a transient
/// journal or SQLite's `-wal` and `-shm` files do when the database closes).
pub fn file_contains(path: &Path, needle: &[u8]) -> bool {
    match std::fs::read(path) {
        Ok(bytes) => bytes.windows(needle.len()).any(|w| w == needle),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => panic!("read {}: {e}", path.display()),
    }
}

/// Every file in `dir`.
pub fn files_in(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").path())
        .collect()
}

/// Panics if any file in `dir` holds one of `canaries` in clear.
pub fn assert_no_plaintext(dir: &Path, canaries: &[&str]) {
    let files = files_in(dir);
    assert!(!files.is_empty(), "no file in {}", dir.display());
    for file in &files {
        for canary in canaries {
            assert!(
                !file_contains(file, canary.as_bytes()),
                "{} holds {canary} in clear",
                file.display()
            );
        }
    }
}
