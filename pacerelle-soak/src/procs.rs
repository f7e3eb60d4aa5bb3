//! The child processes the soak kills and restarts: the relays (`pacerelle serve`, one on SQLite or two on
//! PostgreSQL) and the agent (`pacerelle-soak agent`), each on the same port, data folder and records at every
//! start.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};
use tokio::time::{Instant, timeout};

use crate::agent::TOKEN_VAR;

/// How long a relay may take to answer its health check after it was started.
const RELAY_START: Duration = Duration::from_secs(15);

/// A child process started again and again from the same command.
#[derive(Debug)]
pub struct Proc {
    /// "relay", "relay A", "relay B" or "agent", for messages.
    name: &'static str,
    program: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
    log: PathBuf,
    child: Option<Child>,
    /// SIGKILLs sent by the chaos loop.
    pub kills: u32,
    /// Times it ended by itself.
    pub exits: u32,
    /// Times it was started.
    pub starts: u32,
}

impl Proc {
    /// A relay named `name`: `pacerelle serve --listen 127.0.0.1:PORT --data DATA`, with `--database URL` when
    /// given (PostgreSQL instead of the SQLite file in DATA), its output appended to `log`.
    pub fn relay(
        name: &'static str,
        pacerelle: &Path,
        port: u16,
        data: &Path,
        database: Option<&str>,
        home: &Path,
        log: PathBuf,
    ) -> Proc {
        let mut args = vec![
            "serve".into(),
            "--listen".into(),
            format!("127.0.0.1:{port}"),
            "--data".into(),
            data.display().to_string(),
        ];
        if let Some(url) = database {
            args.extend(["--database".into(), url.to_string()]);
        }
        Proc::new(
            name,
            pacerelle.to_path_buf(),
            args,
            vec![("PACERELLE_HOME".into(), home.display().to_string())],
            log,
        )
    }

    /// The agent: this program re-run as `agent`, its token in the environment.
    pub fn agent(soak: &Path, args: Vec<String>, token: String, home: &Path, log: PathBuf) -> Proc {
        let env = vec![
            (TOKEN_VAR.into(), token),
            ("PACERELLE_HOME".into(), home.display().to_string()),
        ];
        Proc::new("agent", soak.to_path_buf(), args, env, log)
    }

    fn new(
        name: &'static str,
        program: PathBuf,
        args: Vec<String>,
        env: Vec<(String, String)>,
        log: PathBuf,
    ) -> Proc {
        Proc {
            name,
            program,
            args,
            env,
            log,
            child: None,
            kills: 0,
            exits: 0,
            starts: 0,
        }
    }

    /// Starts it (it must not be running). `extra` arguments are added for this start only.
    pub fn start(&mut self, extra: &[String]) -> Result<()> {
        let log = open_log(&self.log)?;
        let child = Command::new(&self.program)
            .args(&self.args)
            .args(extra)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot start the {} ({})", self.name, self.program.display()))?;
        self.child = Some(child);
        self.starts += 1;
        Ok(())
    }

    /// SIGKILLs it and waits until it is gone; counted as a chaos kill when `chaos`.
    pub async fn kill(&mut self, chaos: bool) -> Result<()> {
        if let Some(mut child) = self.child.take() {
            child
                .kill()
                .await
                .with_context(|| format!("cannot kill the {}", self.name))?;
            if chaos {
                self.kills += 1;
            }
        }
        Ok(())
    }

    /// True when it was started and has ended by itself since (then counted, and forgotten).
    pub fn ended(&mut self) -> Result<bool> {
        let Some(child) = self.child.as_mut() else {
            return Ok(false);
        };
        match child.try_wait()? {
            Some(status) => {
                eprintln!(
                    "soak: the {} ended by itself ({status}); see {}",
                    self.name,
                    self.log.display()
                );
                self.child = None;
                self.exits += 1;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Its name in messages ("relay A", "agent", …).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// True while a started child has not been seen to end.
    pub fn running(&self) -> bool {
        self.child.is_some()
    }
}

fn open_log(path: &Path) -> Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))
}

/// Starts the relay and waits until it answers its health check on `port`, starting it again while it ends
/// at once (the port just released is not free yet, say).
pub async fn start_relay(relay: &mut Proc, port: u16) -> Result<()> {
    let deadline = Instant::now() + RELAY_START;
    loop {
        relay.start(&[])?;
        loop {
            if healthy(port).await {
                return Ok(());
            }
            if relay.ended()? || Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if Instant::now() >= deadline {
            relay.kill(false).await?;
            bail!("the relay did not answer its health check within {RELAY_START:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// True when `GET /v1/health` on `127.0.0.1:port` answers 200 within a second.
async fn healthy(port: u16) -> bool {
    let check = async {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).await?;
        stream
            .write_all(b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            .await?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await?;
        Ok::<_, std::io::Error>(answer.starts_with(b"HTTP/1.1 200"))
    };
    matches!(timeout(Duration::from_secs(1), check).await, Ok(Ok(true)))
}
