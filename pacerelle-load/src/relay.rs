//! The relay under load: `pacerelle serve` started as a child process with its data in the work folder, its
//! readiness, its CPU time and memory read from `/proc`, and its store counters from `GET /metrics`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use tokio::process::{Child, Command};
use tokio::time::Instant;

use crate::http;

/// How long the relay may take to answer `GET /readyz` after it was started.
const START: Duration = Duration::from_secs(20);

/// Clock ticks per second of `/proc/PID/stat` (`getconf CLK_TCK`; 100 on every Linux this runs on).
const CLK_TCK: f64 = 100.0;

/// A running relay. Dropping it kills the process (SIGKILL); [`Relay::stop`] does the same and waits for it.
#[derive(Debug)]
pub struct Relay {
    child: Child,
    /// Its process id, for `/proc`.
    pub pid: u32,
    /// Where it listens.
    pub addr: SocketAddr,
    /// The flags it was started with after `serve`, for the report.
    pub flags: Vec<String>,
    log: PathBuf,
}

/// The store counters of `GET /metrics`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StoreCounters {
    /// `pacerelle_store_commits_total`: synced commits.
    pub commits: f64,
    /// `pacerelle_store_writes_total`: writes (stores, marks) inside them.
    pub writes: f64,
}

impl Relay {
    /// Starts `bin serve` on a free loopback port with its data under `dir`, and waits until `/readyz`
    /// answers 200. `extra`: more flags for `serve`.
    pub async fn start(bin: &Path, dir: &Path, extra: &[String]) -> Result<Relay> {
        let port = free_port()?;
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let (data, home) = (dir.join("data"), dir.join("home"));
        std::fs::create_dir_all(&home)?;
        let mut flags = vec![
            "--listen".to_string(),
            addr.to_string(),
            "--data".into(),
            data.display().to_string(),
        ];
        flags.extend_from_slice(extra);
        let log = dir.join("relay.log");
        let out = std::fs::File::create(&log).with_context(|| format!("cannot create {}", log.display()))?;
        let child = Command::new(bin)
            .arg("serve")
            .args(&flags)
            .env("PACERELLE_HOME", &home)
            .env_remove("PACERELLE_REGISTRATION_SECRET")
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot start the relay ({})", bin.display()))?;
        let pid = child.id().context("the relay ended at once")?;
        let mut relay = Relay {
            child,
            pid,
            addr,
            flags,
            log,
        };
        relay.wait_ready().await?;
        Ok(relay)
    }

    async fn wait_ready(&mut self) -> Result<()> {
        let deadline = Instant::now() + START;
        let probe = http::request("GET", "/readyz", None, None);
        loop {
            if let Ok(answer) = http::once(self.addr, &probe).await
                && answer.status == 200
            {
                return Ok(());
            }
            if let Some(status) = self.child.try_wait()? {
                bail!("the relay ended ({status}):\n{}", self.log_tail());
            }
            if Instant::now() >= deadline {
                bail!(
                    "the relay did not answer /readyz within {START:?}:\n{}",
                    self.log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The last lines of its output, for an error message.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// Fails when the relay has ended.
    pub fn check_alive(&mut self) -> Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!("the relay ended ({status}):\n{}", self.log_tail());
        }
        Ok(())
    }

    /// Kills it and waits until it is gone.
    pub async fn stop(mut self) -> Result<()> {
        self.child.kill().await.context("cannot kill the relay")
    }

    /// Its CPU time so far (user + system).
    pub fn cpu(&self) -> Result<Duration> {
        cpu_of(&format!("/proc/{}/stat", self.pid))
    }

    /// Its resident memory (`VmRSS`), in KiB.
    pub fn rss_kib(&self) -> Result<u64> {
        rss_of(&format!("/proc/{}/status", self.pid))
    }

    /// Its store counters, or `None` when it has no `/metrics` (404) or they are not among them.
    pub async fn store_counters(&self) -> Option<StoreCounters> {
        let answer = http::once(self.addr, &http::request("GET", "/metrics", None, None))
            .await
            .ok()?;
        if answer.status != 200 {
            return None;
        }
        parse_counters(&answer.text())
    }
}

/// The store counters summed over `relays`, or `None` when one of them has none.
pub async fn store_counters(relays: &[Relay]) -> Option<StoreCounters> {
    let mut sum = StoreCounters {
        commits: 0.0,
        writes: 0.0,
    };
    for relay in relays {
        let c = relay.store_counters().await?;
        sum.commits += c.commits;
        sum.writes += c.writes;
    }
    Some(sum)
}

/// `flags` with the value of `--database` shown without its password, for printing.
pub fn redacted(flags: &[String]) -> Vec<String> {
    let mut after_flag = false;
    flags
        .iter()
        .map(|flag| {
            let value = std::mem::replace(&mut after_flag, flag == "--database");
            match flag.split_once("://") {
                Some((scheme, rest)) if value => match rest.split_once('@') {
                    Some((user, host)) => {
                        let user = user.split(':').next().unwrap_or_default();
                        format!("{scheme}://{user}:…@{host}")
                    }
                    None => flag.clone(),
                },
                _ => flag.clone(),
            }
        })
        .collect()
}

/// True when `bin serve --help` lists `flag` (a relay older than a flag refuses it).
pub async fn serve_has_flag(bin: &Path, flag: &str) -> bool {
    let Ok(out) = Command::new(bin).args(["serve", "--help"]).output().await else {
        return false;
    };
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .any(|word| word.trim_end_matches(',') == flag)
}

/// Pins every thread of process `pid` to `cpus` (a `taskset` list); threads and children it starts later
/// inherit it.
pub async fn pin(pid: u32, cpus: &str) -> Result<()> {
    let out = Command::new("taskset")
        .args(["--all-tasks", "--pid", "--cpu-list", cpus, &pid.to_string()])
        .output()
        .await
        .context("cannot run taskset (util-linux)")?;
    if !out.status.success() {
        bail!(
            "taskset could not pin process {pid} to CPUs {cpus}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// A CPU quota on one process, through a cgroup made for it; removed (the process moved back to the root
/// group) when dropped.
pub struct CpuLimit {
    group: PathBuf,
    root: PathBuf,
}

impl CpuLimit {
    /// Moves process `pid` (every thread, and what it starts later) into a new cgroup named `name` (below
    /// `pacerelle-load-<this process>`) limited to `cores` of CPU time per 100 ms period. Uses cgroup v2
    /// (`cpu.max`) where `/sys/fs/cgroup` is the unified hierarchy, else v1's `cpu` controller.
    pub fn apply(pid: u32, cores: f64, name: &str) -> Result<CpuLimit> {
        const PERIOD_US: u64 = 100_000;
        // At least 1 ms per period: the kernel's minimum quota.
        let quota = ((cores * PERIOD_US as f64) as u64).max(1_000);
        let v2 = Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
        let root = if v2 {
            PathBuf::from("/sys/fs/cgroup")
        } else {
            PathBuf::from("/sys/fs/cgroup/cpu")
        };
        let group = root
            .join(format!("pacerelle-load-{}", std::process::id()))
            .join(name);
        std::fs::create_dir_all(&group).with_context(|| {
            format!(
                "cannot make the cgroup {} (--relay-cpu-limit needs write access to it)",
                group.display()
            )
        })?;
        let limit = CpuLimit {
            group: group.clone(),
            root: root.clone(),
        };
        if v2 {
            // Each parent, the root first, must hand the cpu controller down to its children.
            for parent in [root.as_path(), group.parent().unwrap_or(&root)] {
                std::fs::write(parent.join("cgroup.subtree_control"), "+cpu")
                    .with_context(|| format!("cannot enable the cpu controller in {}", parent.display()))?;
            }
            std::fs::write(group.join("cpu.max"), format!("{quota} {PERIOD_US}"))
        } else {
            std::fs::write(group.join("cpu.cfs_period_us"), PERIOD_US.to_string())
                .and_then(|()| std::fs::write(group.join("cpu.cfs_quota_us"), quota.to_string()))
        }
        .with_context(|| format!("cannot set the CPU quota of {}", group.display()))?;
        // Every thread: v2 moves a whole process by its id; v1's `cgroup.procs` does the same.
        std::fs::write(group.join("cgroup.procs"), pid.to_string())
            .with_context(|| format!("cannot move process {pid} into {}", group.display()))?;
        Ok(limit)
    }
}

impl Drop for CpuLimit {
    fn drop(&mut self) {
        // A group can only be removed once empty: move what is left of its processes back to the root.
        if let Ok(procs) = std::fs::read_to_string(self.group.join("cgroup.procs")) {
            for pid in procs.lines() {
                let _ = std::fs::write(self.root.join("cgroup.procs"), pid);
            }
        }
        let _ = std::fs::remove_dir(&self.group);
        if let Some(parent) = self.group.parent() {
            // Empty once the last relay's group is gone.
            let _ = std::fs::remove_dir(parent);
        }
    }
}

/// Pins the PostgreSQL server of the cluster in `dir` (its `data/postmaster.pid`) and the processes it has
/// started (checkpointer, WAL writer, backends) to `cpus`; the backends it starts later inherit it.
pub async fn pin_postgres(dir: &Path, cpus: &str) -> Result<()> {
    let file = dir.join("data").join("postmaster.pid");
    let text = std::fs::read_to_string(&file).with_context(|| format!("cannot read {}", file.display()))?;
    let postmaster: u32 = text
        .lines()
        .next()
        .and_then(|line| line.trim().parse().ok())
        .with_context(|| format!("no process id in {}", file.display()))?;
    pin(postmaster, cpus).await?;
    for entry in std::fs::read_dir("/proc")?.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        // The fourth field of /proc/PID/stat (after the name in parentheses) is the parent's id.
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let parent = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if parent == Some(postmaster) {
            pin(pid, cpus).await?;
        }
    }
    Ok(())
}

/// This process's CPU time so far.
pub fn own_cpu() -> Result<Duration> {
    cpu_of("/proc/self/stat")
}

/// This process's resident memory, in KiB.
pub fn own_rss_kib() -> Result<u64> {
    rss_of("/proc/self/status")
}

/// CPU time every process of the machine has used since boot (all cores: user, nice, system, irq, softirq,
/// steal), from the first line of `/proc/stat`.
pub fn machine_cpu() -> Result<Duration> {
    let text = std::fs::read_to_string("/proc/stat").context("cannot read /proc/stat")?;
    let line = text.lines().next().context("empty /proc/stat")?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    // user nice system idle iowait irq softirq steal: all but idle and iowait.
    let busy: u64 = [0, 1, 2, 5, 6, 7].iter().filter_map(|&i| fields.get(i)).sum();
    Ok(Duration::from_secs_f64(busy as f64 / CLK_TCK))
}

fn cpu_of(path: &str) -> Result<Duration> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {path}"))?;
    // The command name (field 2) may hold spaces: count fields after its closing parenthesis.
    let after = text
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .context("malformed stat")?;
    let fields: Vec<&str> = after.split_whitespace().collect();
    // Fields 14 and 15 (utime, stime) are the 12th and 13th after the name.
    let ticks = |i: usize| -> Result<f64> {
        Ok(fields
            .get(i)
            .context("short stat")?
            .parse::<u64>()
            .context("malformed stat")? as f64)
    };
    Ok(Duration::from_secs_f64((ticks(11)? + ticks(12)?) / CLK_TCK))
}

fn rss_of(path: &str) -> Result<u64> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {path}"))?;
    text.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no VmRSS")
}

/// Reads the two store counters from Prometheus text (summing over labels, if any).
pub fn parse_counters(text: &str) -> Option<StoreCounters> {
    let sum = |name: &str| -> Option<f64> {
        let mut found = None;
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let Some((key, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let metric = key.split('{').next().unwrap_or(key).trim();
            if metric == name
                && let Ok(v) = value.trim().parse::<f64>()
            {
                found = Some(found.unwrap_or(0.0) + v);
            }
        }
        found
    };
    Some(StoreCounters {
        commits: sum("pacerelle_store_commits_total")?,
        writes: sum("pacerelle_store_writes_total")?,
    })
}

/// A port free now on 127.0.0.1 (the relay is started with it; nothing else here binds ports).
fn free_port() -> Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_read_from_prometheus_text_and_missing_ones_give_none() {
        let text = "# HELP pacerelle_store_commits_total Synced commits.\n\
                    # TYPE pacerelle_store_commits_total counter\n\
                    pacerelle_store_commits_total 12\n\
                    pacerelle_store_writes_total{kind=\"task\"} 30\n\
                    pacerelle_store_writes_total{kind=\"mark\"} 6\n";
        assert_eq!(
            parse_counters(text),
            Some(StoreCounters {
                commits: 12.0,
                writes: 36.0
            })
        );
        assert_eq!(parse_counters("pacerelle_store_commits_total 1\n"), None);
    }

    #[test]
    fn a_database_password_is_not_printed() {
        let flags: Vec<String> = ["--metrics", "--database", "postgres://u:secret@h:5432/db"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            redacted(&flags),
            ["--metrics", "--database", "postgres://u:…@h:5432/db"].map(String::from)
        );
        let plain: Vec<String> = ["--database", "postgres://nobody@127.0.0.1:5/db"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            redacted(&plain),
            ["--database", "postgres://nobody:…@127.0.0.1:5/db"].map(String::from)
        );
    }

    #[test]
    fn own_cpu_and_memory_are_read() -> Result<()> {
        assert!(own_rss_kib()? > 0);
        own_cpu()?;
        assert!(machine_cpu()? >= own_cpu()?);
        Ok(())
    }
}
