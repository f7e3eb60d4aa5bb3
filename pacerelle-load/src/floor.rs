//! The disk's synced-write floor, measured in the relay's own folder: `n` times, append 4 KiB to a file and
//! `fdatasync` it. Every durable store at the relay pays at least one such sync, so the other figures are read
//! against it.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};

use crate::stats::Summary;

/// Appends and syncs 4 KiB `n` times in a new file under `dir` (removed after), one sample per sync.
pub fn measure(dir: &Path, n: usize) -> Result<Summary> {
    let path = dir.join("floor.bin");
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(&path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    let block = [0x5au8; 4096];
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        file.write_all(&block)?;
        file.sync_data()?;
        samples.push(start.elapsed());
    }
    drop(file);
    std::fs::remove_file(&path)?;
    Ok(Summary::of(samples))
}

/// `n` synced writes in a blocking thread, so the runtime stays free.
pub async fn measure_async(dir: &Path, n: usize) -> Result<Summary> {
    let dir = dir.to_path_buf();
    tokio::task::spawn_blocking(move || measure(&dir, n)).await?
}

/// Milliseconds of a duration, for messages.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
