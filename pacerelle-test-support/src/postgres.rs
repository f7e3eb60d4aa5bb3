//! A throw-away PostgreSQL cluster for tests, or an existing server named by `PACERELLE_TEST_POSTGRES`.
//!
//! [`Cluster::start`] runs `initdb` into a new temporary folder (trust authentication, UTF8, C locale,
//! `--no-sync`) and starts `postgres` on a free TCP port of `127.0.0.1`, its unix socket in that folder. The
//! server runs with `fsync=off`: a commit is still written to the kernel before it is acknowledged, so killing
//! the server or the relay loses nothing, but a crash of the machine could, which no test does. Benchmarks that
//! measure durable commits use [`Cluster::start_durable`] (or a server of their own).
//!
//! PostgreSQL refuses to run as root: when the test runs as root, `initdb` and `postgres` run as `nobody`
//! (through `setpriv`), the folder given to that user.
//!
//! **Nothing outlives the test process.** `postgres` is the child of a small `sh` watchdog whose standard
//! input is a pipe that only the test process holds. When the pipe closes — the [`Cluster`] dropped, or the test
//! process gone, however it ended (a `static` is never dropped; SIGKILL runs no code) — the watchdog reads end
//! of file, stops `postgres` (fast shutdown), waits for it, and removes the folder.
//!
//! The variable `PACERELLE_TEST_POSTGRES` (see `docs/testing.md`):
//! - a `postgres://…` URL: an existing server, used as is (never started or stopped); each test database is
//!   created there and left behind;
//! - `start`: a cluster started by the test binary, once, shared by its tests;
//! - unset or empty: the same for the tests that run on PostgreSQL besides SQLite ([`Cluster::shared`]), so
//!   that a plain `cargo test` runs them; suites that run on one backend or the other ([`Cluster::requested`],
//!   the relay's HTTP suite) take SQLite;
//! - `off`: no cluster, and every caller runs SQLite only.

use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sqlx::{Connection, PgConnection};

/// The variable that names a server, or asks for one to be started, or for none.
pub const ENV: &str = "PACERELLE_TEST_POSTGRES";

/// How long a started server may take to accept connections.
const READY_WITHIN: Duration = Duration::from_secs(60);
/// How many times a start is tried (a free port may be taken between choosing it and binding it).
const START_TRIES: u32 = 3;

/// The watchdog: `$0` is `postgres`, `$1` the cluster's folder, `$2` the port, `$3` `on` or `off` for fsync.
/// Its standard input is the test process's pipe: a line `stop` stops the server (fast shutdown) and keeps its
/// folder, a line `start` starts it again ([`Cluster::stop`], [`Cluster::restart`]), a line `kill` crashes it
/// ([`Cluster::kill`]); end of file stops the server and removes the folder.
///
/// `kill` is a real crash: SIGKILL of the postmaster and of every child it has (backends, checkpointer, WAL
/// writer…), then `$dir/killed` once none of them runs. Killing the postmaster alone is not one: its backends
/// live on, holding the shared memory, and a restart refuses to start beside them. Every child of the
/// postmaster calls `setsid()`, so no process group holds them all: they are found by their parent in
/// `/proc`, with the postmaster stopped (SIGSTOP) first so that it forks no new one meanwhile. The watchdog
/// runs as the same user as `postgres` (`nobody` under root), so it may signal them.
const WATCHDOG: &str = r#"
bin=$0 dir=$1 port=$2 fsync=$3
start() {
    "$bin" -D "$dir/data" -p "$port" -k "$dir" -c listen_addresses=127.0.0.1 -c fsync="$fsync" \
        -c max_connections=500 </dev/null >>"$dir/log" 2>&1 &
    pid=$!
}
children() {
    for stat in /proc/[0-9]*/stat; do
        read -r line 2>/dev/null <"$stat" || continue
        set -- ${line##*) }
        if [ "$2" = "$pid" ]; then child=${stat#/proc/}; echo "${child%/stat}"; fi
    done
}
running() {
    read -r line 2>/dev/null <"/proc/$1/stat" || return 1
    set -- ${line##*) }
    [ "$1" != Z ] && [ "$1" != X ]
}
crash() {
    kill -STOP "$pid" 2>/dev/null
    them=$(children)
    kill -KILL "$pid" $them 2>/dev/null
    wait "$pid"
    tries=0
    for child in $them; do
        while running "$child" && [ "$tries" -lt 400 ]; do sleep 0.05; tries=$((tries + 1)); done
    done
    : >"$dir/killed"
}
start
while read -r command; do
    case "$command" in
        stop) kill -INT "$pid" 2>/dev/null; wait "$pid" ;;
        start) start ;;
        kill) crash ;;
    esac
done
kill -INT "$pid" 2>/dev/null
wait "$pid"
rm -rf "$dir"
"#;

/// A PostgreSQL server for tests: one this process started (stopped when dropped, or when the process ends),
/// or an existing one named by a URL.
#[derive(Debug)]
pub struct Cluster {
    /// The URL of the server's maintenance database, from which [`Cluster::fresh_database`] creates others.
    admin_url: String,
    /// The server this process started, if it did.
    server: Option<Server>,
}

/// A server started by [`Cluster::start`].
#[derive(Debug)]
struct Server {
    /// The folder of the PostgreSQL programs.
    bin: PathBuf,
    /// The cluster's folder: `data/`, `log`, the unix socket.
    dir: PathBuf,
    port: u16,
    /// The watchdog `sh`, parent of `postgres`.
    watchdog: Mutex<Option<Child>>,
    /// The write end of the watchdog's standard input: closing it stops the server.
    pipe: Mutex<Option<ChildStdin>>,
}

impl Cluster {
    /// Starts a throw-away cluster with `fsync=off` (see the module's documentation), waiting until it accepts
    /// connections. Blocks for a second or two. Panics, saying why, when it cannot (no PostgreSQL installed,
    /// `initdb` failed, the server did not start).
    pub fn start() -> Cluster {
        Self::start_with_fsync(false)
    }

    /// Starts a throw-away cluster with `fsync=on`: each commit reaches the disk before it is acknowledged, as
    /// in production. For measurements; tests need not pay for it.
    pub fn start_durable() -> Cluster {
        Self::start_with_fsync(true)
    }

    /// The process-wide cluster, shared by every test of this binary: the server `PACERELLE_TEST_POSTGRES`
    /// names (a `postgres://` URL), or else a throw-away cluster started on first use — for `start`, and also
    /// when the variable is unset, so that a plain `cargo test` runs the PostgreSQL suites too (starting one
    /// panics, saying what to install, where PostgreSQL is not). `None` only for `off`: the caller then runs
    /// against SQLite only.
    pub fn shared() -> Option<&'static Cluster> {
        match std::env::var(ENV).unwrap_or_default().as_str() {
            "off" => None,
            _ => Some(shared_cluster()),
        }
    }

    /// The process-wide cluster of [`Cluster::shared`], but only when `PACERELLE_TEST_POSTGRES` asks for it (a
    /// `postgres://` URL, or `start`): for suites that run on one backend or the other (the relay's HTTP
    /// suite), which take SQLite unless asked.
    pub fn requested() -> Option<&'static Cluster> {
        match std::env::var(ENV).unwrap_or_default().as_str() {
            "" | "off" => None,
            _ => Some(shared_cluster()),
        }
    }

    /// The URL of the server's maintenance database (`postgres://…/postgres` for a started cluster).
    pub fn admin_url(&self) -> &str {
        &self.admin_url
    }

    /// The folder of a cluster this process started (`None` for an existing server).
    pub fn dir(&self) -> Option<&Path> {
        self.server.as_ref().map(|s| s.dir.as_path())
    }

    /// The TCP port of a cluster this process started (`None` for an existing server).
    pub fn port(&self) -> Option<u16> {
        self.server.as_ref().map(|s| s.port)
    }

    /// Stops the server this process started, keeping its data, and returns once it no longer runs: for tests
    /// of what a relay does while its database is down. [`Cluster::restart`] starts it again on the same port.
    /// Panics for an existing server (never stopped by a test) or when the server does not stop within a minute.
    pub fn stop(&self) {
        let server = self.started("stop");
        server.command("stop");
        let pid = server.dir.join("data").join("postmaster.pid");
        let deadline = Instant::now() + READY_WITHIN;
        while pid.exists() {
            assert!(
                Instant::now() < deadline,
                "the test server did not stop within {READY_WITHIN:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Crashes the server this process started: SIGKILL of the postmaster and of all its children at once (no
    /// shutdown checkpoint, nothing flushed), and returns once none of them runs. The data stays;
    /// [`Cluster::restart`] starts the server again, which first runs crash recovery from the WAL — what a
    /// power cut or the OOM killer leaves. Panics for an existing server or when the kill does not finish
    /// within a minute.
    pub fn kill(&self) {
        let server = self.started("kill");
        let killed = server.dir.join("killed");
        match std::fs::remove_file(&killed) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => panic!("remove {}: {e}", killed.display()),
        }
        server.command("kill");
        let deadline = Instant::now() + READY_WITHIN;
        while !killed.exists() {
            assert!(
                Instant::now() < deadline,
                "the test server was not killed within {READY_WITHIN:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts again the server [`Cluster::stop`] stopped or [`Cluster::kill`] crashed, with its data, on the
    /// same port, and returns once it accepts connections (after crash recovery, when it crashed). Panics for an
    /// existing server or when it does not start.
    pub fn restart(&self) {
        let server = self.started("restart");
        let log_from = std::fs::metadata(server.dir.join("log"))
            .map(|m| usize::try_from(m.len()).unwrap_or(0))
            .unwrap_or(0);
        server.command("start");
        if let Err(why) = wait_ready(&server.bin, &server.dir, server.port, log_from) {
            let log = std::fs::read_to_string(server.dir.join("log")).unwrap_or_default();
            panic!("{why}; the server's log:\n{}", tail(&log, 4000));
        }
    }

    fn started(&self, what: &str) -> &Server {
        self.server
            .as_ref()
            .unwrap_or_else(|| panic!("cannot {what} a server this process did not start ({ENV} names one)"))
    }

    /// Creates a new, empty database with a name no other test uses (`pacerelle_test_…`, UTF8, C collation)
    /// and returns its URL. On an existing server the database stays after the test.
    pub async fn fresh_database(&self) -> String {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let millis = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or_default();
        let name = format!(
            "pacerelle_test_{millis}_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let mut conn = PgConnection::connect(&self.admin_url)
            .await
            .unwrap_or_else(|e| panic!("connect to the test server {}: {e}", redacted(&self.admin_url)));
        // template0: nobody is ever connected to it, and it lets the encoding and collation be chosen.
        let create = format!(
            "CREATE DATABASE \"{name}\" TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'"
        );
        sqlx::raw_sql(sqlx::AssertSqlSafe(create))
            .execute(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("create the test database {name}: {e}"));
        let _ = conn.close().await;
        with_database(&self.admin_url, &name)
    }

    fn start_with_fsync(fsync: bool) -> Cluster {
        let bin = bin_dir().unwrap_or_else(|| {
            panic!(
                "PostgreSQL is not installed: no `initdb` on PATH nor in /usr/lib/postgresql/*/bin \
                 (Debian: apt-get install postgresql; or set {ENV}=postgres://… to use a server, or {ENV}=off)"
            )
        });
        let mut failures = Vec::new();
        for _ in 0..START_TRIES {
            match try_start(&bin, fsync) {
                Ok(cluster) => return cluster,
                Err(why) => failures.push(why),
            }
        }
        panic!(
            "could not start a PostgreSQL cluster:\n{}",
            failures.join("\n---\n")
        );
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some(server) = &self.server {
            server.stop();
        }
    }
}

impl Server {
    /// Writes a line to the watchdog.
    fn command(&self, line: &str) {
        use std::io::Write;
        let mut pipe = self.pipe.lock().unwrap_or_else(|e| e.into_inner());
        let pipe = pipe.as_mut().expect("the server is running");
        writeln!(pipe, "{line}")
            .and_then(|()| pipe.flush())
            .expect("the watchdog reads its pipe");
    }

    /// Closes the watchdog's pipe and waits for it to stop the server and remove the folder.
    fn stop(&self) {
        if let Ok(mut pipe) = self.pipe.lock() {
            pipe.take();
        }
        if let Ok(mut watchdog) = self.watchdog.lock()
            && let Some(mut child) = watchdog.take()
        {
            let _ = child.wait();
        }
    }
}

/// The shared cluster, created on first use from `PACERELLE_TEST_POSTGRES`: its URL, or a started cluster.
fn shared_cluster() -> &'static Cluster {
    static SHARED: OnceLock<Cluster> = OnceLock::new();
    SHARED.get_or_init(|| {
        let value = std::env::var(ENV).unwrap_or_default();
        if value.starts_with("postgres://") || value.starts_with("postgresql://") {
            Cluster {
                admin_url: value,
                server: None,
            }
        } else if value.is_empty() || value == "start" {
            Cluster::start()
        } else {
            panic!("{ENV} must be a postgres:// URL, `start` or `off`, not {value:?}")
        }
    })
}

/// One attempt: a new folder, `initdb`, the server on a free port, ready. On failure the folder is removed
/// (by the watchdog once it ran) and the reason returned, with the server's log.
fn try_start(bin: &Path, fsync: bool) -> Result<Cluster, String> {
    let dir = tempfile::Builder::new()
        .prefix("pacerelle-pg-")
        .tempdir()
        .map_err(|e| format!("create a temporary folder: {e}"))?;
    let user = run_as()?;
    if let Some((uid, gid)) = user {
        std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid))
            .map_err(|e| format!("give {} to uid {uid}: {e}", dir.path().display()))?;
    }

    let out = command(user, &bin.join("initdb"), dir.path())
        .arg("-D")
        .arg(dir.path().join("data"))
        .args([
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-locale",
            "--no-sync",
        ])
        .args(["--no-instructions"])
        .output()
        .map_err(|e| format!("run initdb: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "initdb failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }

    let port = free_port()?;
    // From here on the watchdog owns the folder: it removes it when the server stops.
    let dir = dir.keep();
    let mut watchdog = command(user, Path::new("sh"), &dir)
        .arg("-c")
        .arg(WATCHDOG)
        .arg(bin.join("postgres"))
        .arg(&dir)
        .arg(port.to_string())
        .arg(if fsync { "on" } else { "off" })
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("start the server's watchdog: {e}"))?;
    let pipe = watchdog.stdin.take();
    let server = Server {
        bin: bin.to_path_buf(),
        dir: dir.clone(),
        port,
        watchdog: Mutex::new(Some(watchdog)),
        pipe: Mutex::new(pipe),
    };
    match wait_ready(bin, &dir, port, 0) {
        Ok(()) => Ok(Cluster {
            admin_url: format!("postgres://postgres@127.0.0.1:{port}/postgres"),
            server: Some(server),
        }),
        Err(why) => {
            let log = std::fs::read_to_string(dir.join("log")).unwrap_or_default();
            server.stop();
            Err(format!("{why}; the server's log:\n{}", tail(&log, 4000)))
        }
    }
}

/// Waits until the server on `port` accepts connections (`pg_isready`), or its log shows it failed.
fn wait_ready(bin: &Path, dir: &Path, port: u16, log_from: usize) -> Result<(), String> {
    let deadline = Instant::now() + READY_WITHIN;
    loop {
        let ready = Command::new(bin.join("pg_isready"))
            .args([
                "-q",
                "-h",
                "127.0.0.1",
                "-U",
                "postgres",
                "-d",
                "postgres",
                "-t",
                "2",
                "-p",
            ])
            .arg(port.to_string())
            .status()
            .map_err(|e| format!("run pg_isready: {e}"))?;
        if ready.success() {
            return Ok(());
        }
        let log = std::fs::read_to_string(dir.join("log")).unwrap_or_default();
        let log = log.get(log_from..).unwrap_or_default();
        if log.lines().any(server_failed) {
            return Err(format!("the server on port {port} failed to start"));
        }
        if Instant::now() > deadline {
            return Err(format!(
                "the server on port {port} was not ready within {READY_WITHIN:?}"
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether a line of the server's log says the server itself failed. Clients that connect while it starts
/// (a relay reconnecting during [`Cluster::restart`]) log `FATAL: the database system is starting up` too, or
/// `… is not yet accepting connections` while it recovers from a crash: that is theirs, not the server's.
fn server_failed(line: &str) -> bool {
    const CLIENTS: [&str; 6] = [
        "the database system is starting up",
        "the database system is shutting down",
        "terminating connection",
        // During crash recovery after [`Cluster::kill`] (PostgreSQL 14 and later, then earlier versions).
        "the database system is not yet accepting connections",
        "the database system is in recovery mode",
        "the database system is not accepting connections",
    ];
    line.contains("PANIC:") || (line.contains("FATAL:") && !CLIENTS.iter().any(|c| line.contains(c)))
}

/// A command run as `user` (through `setpriv`) when set, in `dir`.
fn command(user: Option<(u32, u32)>, program: &Path, dir: &Path) -> Command {
    let mut command = match user {
        Some((uid, gid)) => {
            let mut c = Command::new("setpriv");
            c.arg(format!("--reuid={uid}"))
                .arg(format!("--regid={gid}"))
                .arg("--clear-groups")
                .arg(program);
            c
        }
        None => Command::new(program),
    };
    command.current_dir(dir);
    command
}

/// The user to run PostgreSQL as: `None` when this process is not root, else `nobody`'s uid and gid.
fn run_as() -> Result<Option<(u32, u32)>, String> {
    if effective_uid()? != 0 {
        return Ok(None);
    }
    let id = |flag: &str| -> Result<u32, String> {
        let out = Command::new("id")
            .args([flag, "nobody"])
            .output()
            .map_err(|e| format!("run id: {e}"))?;
        String::from_utf8_lossy(&out.stdout).trim().parse().map_err(|_| {
            format!(
                "`id {flag} nobody` printed no number: the user nobody is needed to run PostgreSQL as root"
            )
        })
    };
    Ok(Some((id("-u")?, id("-g")?)))
}

/// This process's effective user id, from `/proc/self/status` (`Uid: real effective saved fs`).
fn effective_uid() -> Result<u32, String> {
    let status =
        std::fs::read_to_string("/proc/self/status").map_err(|e| format!("read /proc/self/status: {e}"))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1))
        .and_then(|euid| euid.parse().ok())
        .ok_or_else(|| "no effective uid in /proc/self/status".to_string())
}

/// A TCP port of 127.0.0.1 free a moment ago (the kernel's choice for port 0).
fn free_port() -> Result<u16, String> {
    let listener =
        std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| format!("find a free port: {e}"))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("find a free port: {e}"))
}

/// The folder of the PostgreSQL programs: that of `initdb` on PATH (symbolic links followed, as Debian links
/// only some programs into /usr/bin), else the newest `/usr/lib/postgresql/N/bin`.
fn bin_dir() -> Option<PathBuf> {
    let has_all = |dir: &Path| {
        ["initdb", "postgres", "pg_isready"]
            .iter()
            .all(|p| dir.join(p).is_file())
    };
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("initdb"))
            .filter(|initdb| initdb.is_file())
            .filter_map(|initdb| initdb.canonicalize().ok())
            .filter_map(|initdb| initdb.parent().map(Path::to_path_buf))
            .find(|dir| has_all(dir))
    });
    if on_path.is_some() {
        return on_path;
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|entry| entry.ok())
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse().ok()?;
            Some((version, entry.path().join("bin")))
        })
        .filter(|(_, dir)| has_all(dir))
        .collect();
    versions.sort();
    versions.pop().map(|(_, dir)| dir)
}

/// `url` with its database (the path) replaced by `name`; the query string, if any, kept.
fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let authority_start = base.find("://").map(|i| i + 3).unwrap_or(0);
    let authority_end = base[authority_start..]
        .find('/')
        .map(|i| authority_start + i)
        .unwrap_or(base.len());
    let mut out = format!("{}/{name}", &base[..authority_end]);
    if let Some(query) = query {
        out.push('?');
        out.push_str(query);
    }
    out
}

/// A URL without its password, for messages.
fn redacted(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            let user = userinfo.split(':').next().unwrap_or_default();
            format!("{}{user}:…{}", &url[..scheme + 3], &url[at..])
        }
        _ => url.to_string(),
    }
}

/// The last `max` bytes of `text` (at a character boundary).
fn tail(text: &str, max: usize) -> &str {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_database_of_a_url_is_replaced_and_the_query_kept() {
        assert_eq!(
            with_database("postgres://postgres@127.0.0.1:5432/postgres", "t1"),
            "postgres://postgres@127.0.0.1:5432/t1"
        );
        assert_eq!(
            with_database("postgres://u:p@host/db?sslmode=disable", "t2"),
            "postgres://u:p@host/t2?sslmode=disable"
        );
        assert_eq!(
            with_database("postgresql://host:5433", "t3"),
            "postgresql://host:5433/t3"
        );
    }

    #[test]
    fn a_redacted_url_has_no_password() {
        assert_eq!(redacted("postgres://u:secret@host/db"), "postgres://u:…@host/db");
        assert_eq!(redacted("postgres://host/db"), "postgres://host/db");
    }

    /// A crash is one: the server (postmaster and backends) is gone at once, with a connection open, and it
    /// starts again, after crash recovery, with every committed row.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_killed_server_restarts_with_its_committed_rows() {
        if std::env::var(ENV).unwrap_or_default() == "off" {
            eprintln!("skipped: {ENV}=off");
            return;
        }
        let cluster = std::sync::Arc::new(
            tokio::task::spawn_blocking(Cluster::start)
                .await
                .expect("started"),
        );
        let url = cluster.fresh_database().await;
        let mut conn = PgConnection::connect(&url).await.expect("connect");
        sqlx::raw_sql("CREATE TABLE t (v int); INSERT INTO t VALUES (1), (2)")
            .execute(&mut conn)
            .await
            .expect("written");
        let pid_file = cluster
            .dir()
            .expect("started here")
            .join("data")
            .join("postmaster.pid");
        let pid = std::fs::read_to_string(&pid_file).expect("postmaster.pid");
        let pid = pid.lines().next().expect("its first line").trim().to_string();
        let killed = cluster.clone();
        tokio::task::spawn_blocking(move || killed.kill())
            .await
            .expect("killed");
        assert!(
            !Path::new("/proc").join(&pid).join("stat").exists(),
            "the postmaster {pid} still runs"
        );
        assert!(
            sqlx::raw_sql("SELECT 1").execute(&mut conn).await.is_err(),
            "a backend answered after the kill"
        );
        let restarted = cluster.clone();
        tokio::task::spawn_blocking(move || restarted.restart())
            .await
            .expect("restarted");
        let mut conn = PgConnection::connect(&url)
            .await
            .expect("connect after the restart");
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM t")
            .fetch_one(&mut conn)
            .await
            .expect("read");
        assert_eq!(n, 2);
        let log = std::fs::read_to_string(cluster.dir().expect("here").join("log")).expect("the log");
        assert!(
            log.contains("not properly shut down") || log.contains("interrupted"),
            "no crash recovery in the log:\n{}",
            tail(&log, 2000)
        );
    }

    #[test]
    fn the_effective_uid_is_read() {
        let out = Command::new("id").arg("-u").output().expect("id -u");
        let expected: u32 = String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .expect("a number");
        assert_eq!(effective_uid().expect("uid"), expected);
    }
}
