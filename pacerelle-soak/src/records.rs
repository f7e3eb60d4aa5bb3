//! The handler's append-only files, written by the agent child and read by the checker.
//!
//! One line per entry, `task id <TAB> redelivered (0 or 1) <TAB> attempt <TAB> unix time in ms <TAB> run`, written with
//! one `write` call on a file opened for appending: a SIGKILL lands between two system calls, so a line is
//! either whole or absent. A line cut by something else (a full disk) is closed by the next
//! [`open_append`] and counted as malformed by [`read`].
//!
//! - `records.log`: the tasks the handler handled, each once (the handler is idempotent by task id), synced
//!   to disk before the handler returns.
//! - `invocations.log`: every call of the handler, in the order of the calls (one agent process runs at a time,
//!   so the file's order is the order in time), for the figures (redeliveries, repeated calls) and for the check
//!   that no task is handed out again once the runner went on past it (it was marked processed).
//! - `failures.log`: the tasks the runner reported failed (`TaskFailed`): left unprocessed, so handing them
//!   out again is due, not a fault.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;

/// The file of the tasks handled, once each.
pub const RECORDS: &str = "records.log";
/// The file of every handler call.
pub const INVOCATIONS: &str = "invocations.log";
/// The file of the tasks the runner reported failed.
pub const FAILURES: &str = "failures.log";

/// One handler call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The task's id.
    pub message_id: String,
    /// The relay said the task was delivered before.
    pub redelivered: bool,
    /// The runner's attempt number for the task in this process (1 the first time).
    pub attempt: u32,
    /// When the handler was called, in ms since the Unix epoch.
    pub at_ms: u64,
    /// Which agent process called it (the seed of that process, drawn anew at each start).
    pub run: u64,
}

impl Entry {
    fn line(&self) -> String {
        format!(
            "{}\t{}\t{}\t{}\t{}\n",
            self.message_id,
            u8::from(self.redelivered),
            self.attempt,
            self.at_ms,
            self.run
        )
    }

    fn parse(line: &str) -> Option<Entry> {
        let mut fields = line.split('\t');
        let message_id = fields.next().filter(|id| !id.is_empty())?.to_string();
        let redelivered = match fields.next()? {
            "0" => false,
            "1" => true,
            _ => return None,
        };
        let attempt = fields.next()?.parse().ok()?;
        let at_ms = fields.next()?.parse().ok()?;
        let run = fields.next()?.parse().ok()?;
        if fields.next().is_some() {
            return None;
        }
        Some(Entry {
            message_id,
            redelivered,
            attempt,
            at_ms,
            run,
        })
    }
}

/// Opens `path` for appending (created if missing). A last line without its newline (cut short) is closed
/// first, so that the next entry starts on a line of its own.
pub fn open_append(path: &Path) -> io::Result<File> {
    let mut file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(path)?;
    let len = file.metadata()?.len();
    if len > 0 {
        file.seek(SeekFrom::Start(len - 1))?;
        let mut last = [0u8; 1];
        file.read_exact(&mut last)?;
        if last[0] != b'\n' {
            file.write_all(b"\n")?;
            file.sync_data()?;
        }
    }
    Ok(file)
}

/// Appends `entry` in one write; with `sync`, waits until it is on disk.
pub fn append(file: &mut File, entry: &Entry, sync: bool) -> io::Result<()> {
    file.write_all(entry.line().as_bytes())?;
    if sync {
        file.sync_data()?;
    }
    Ok(())
}

/// Every entry of `path` (none if it does not exist), and how many lines did not parse.
pub fn read(path: &Path) -> io::Result<(Vec<Entry>, usize)> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
        Err(e) => return Err(e),
    };
    let (mut entries, mut malformed) = (Vec::new(), 0);
    for line in text.lines().filter(|l| !l.is_empty()) {
        match Entry::parse(line) {
            Some(entry) => entries.push(entry),
            None => malformed += 1,
        }
    }
    Ok((entries, malformed))
}

/// The task ids recorded in `path`.
pub fn recorded_ids(path: &Path) -> io::Result<HashSet<String>> {
    Ok(read(path)?.0.into_iter().map(|e| e.message_id).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_reads_back_and_a_line_cut_short_is_closed_and_counted() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join(RECORDS);
        let entry = Entry {
            message_id: "msg_a".into(),
            redelivered: true,
            attempt: 2,
            at_ms: 1_700_000_000_000,
            run: 7,
        };
        let mut file = open_append(&path)?;
        append(&mut file, &entry, true)?;
        file.write_all(b"msg_b\t0\t1\t5")?; // a line cut short
        drop(file);
        let mut file = open_append(&path)?;
        append(&mut file, &entry, false)?;
        let (entries, malformed) = read(&path)?;
        assert_eq!(entries, vec![entry.clone(), entry]);
        assert_eq!(malformed, 1);
        assert_eq!(recorded_ids(&path)?.len(), 1);
        Ok(())
    }
}
