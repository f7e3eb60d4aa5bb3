//! Secrets off the command line: reading a pairing link or a webhook secret from standard input, a file or an
//! environment variable rather than from the arguments, which every user of the computer can read
//! (`/proc/PID/cmdline`, `ps`).

use std::io::{BufRead, IsTerminal, Read};
use std::path::Path;

use anyhow::Result;

use crate::output::invalid_input;

/// Longest input read for one secret, in bytes (a pairing link is about 150, a webhook secret at most 1024).
const MAX_BYTES: u64 = 16 * 1024;

/// Reads one secret — `what`, for messages — from standard input: the first line when it is a terminal
/// (after a prompt on stderr), everything up to the end otherwise.
pub fn from_stdin(what: &str) -> Result<String> {
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        eprint!("Paste the {what}, then press Enter: ");
        let mut line = String::new();
        stdin
            .lock()
            .take(MAX_BYTES + 1)
            .read_line(&mut line)
            .map_err(|e| invalid_input(format!("cannot read the {what} from standard input: {e}")))?;
        return one_line(line.into_bytes(), what, "standard input");
    }
    read_all(stdin.lock(), what, "standard input")
}

/// Reads one secret from a file that holds it alone (`-`: standard input).
pub fn from_file(path: &Path, what: &str) -> Result<String> {
    if path.as_os_str() == "-" {
        return from_stdin(what);
    }
    let file = std::fs::File::open(path)
        .map_err(|e| invalid_input(format!("cannot read the {what} from {}: {e}", path.display())))?;
    read_all(file, what, &path.display().to_string())
}

fn read_all(reader: impl Read, what: &str, source: &str) -> Result<String> {
    let mut bytes = Vec::new();
    reader
        .take(MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| invalid_input(format!("cannot read the {what} from {source}: {e}")))?;
    one_line(bytes, what, source)
}

/// The text without its final line ending; refused when empty, too long, not UTF-8 or on several lines.
fn one_line(bytes: Vec<u8>, what: &str, source: &str) -> Result<String> {
    if bytes.len() as u64 > MAX_BYTES {
        return Err(invalid_input(format!(
            "{source} holds more than {MAX_BYTES} bytes: it should hold the {what} alone"
        )));
    }
    let text = String::from_utf8(bytes)
        .map_err(|_| invalid_input(format!("the {what} in {source} is not UTF-8 text")))?;
    let text = text
        .strip_suffix('\n')
        .map(|t| t.strip_suffix('\r').unwrap_or(t))
        .unwrap_or(&text);
    if text.contains(['\n', '\r']) {
        return Err(invalid_input(format!(
            "{source} holds several lines: it should hold the {what} alone, on one line"
        )));
    }
    if text.is_empty() {
        return Err(invalid_input(format!("no {what} in {source}: it is empty")));
    }
    Ok(text.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(input: &str) -> Result<String> {
        read_all(input.as_bytes(), "secret", "the input")
    }

    #[test]
    fn one_line_with_or_without_its_line_ending() {
        assert_eq!(read("abc\n").expect("read"), "abc");
        assert_eq!(read("abc\r\n").expect("read"), "abc");
        assert_eq!(read("abc").expect("read"), "abc");
        assert_eq!(
            read(" a b \n").expect("read"),
            " a b ",
            "spaces are the secret's own"
        );
    }

    #[test]
    fn empty_several_lines_too_long_or_not_utf8_is_refused_with_a_code() {
        for (input, says) in [
            ("", "empty"),
            ("\n", "empty"),
            ("a\nb\n", "several lines"),
            ("a\n\n", "several lines"),
        ] {
            let e = read(input).expect_err(input);
            assert!(e.to_string().contains(says), "{input:?}: {e}");
            assert_eq!(
                e.downcast_ref::<crate::output::Refused>().map(|r| r.code),
                Some("invalid_input")
            );
        }
        let long = "a".repeat(MAX_BYTES as usize + 1);
        assert!(
            read(&long)
                .expect_err("too long")
                .to_string()
                .contains("more than")
        );
        let e = read_all(&[0xff, 0xfe][..], "secret", "x").expect_err("not UTF-8");
        assert!(e.to_string().contains("UTF-8"));
    }

    #[test]
    fn a_missing_file_is_named() {
        let e = from_file(Path::new("/nonexistent/secret"), "webhook secret").expect_err("missing");
        assert!(e.to_string().contains("/nonexistent/secret"), "{e}");
    }
}
