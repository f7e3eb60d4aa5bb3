//! Long text from standard input or a file (`send -`, `send --file`, `ask --details-file`), checked against
//! the size limit before anything is sent.

use std::io::Read;
use std::path::Path;

use anyhow::{Context, Result};
use pacerelle_core::message::MAX_TEXT_BYTES;

/// Checks `text` against [`MAX_TEXT_BYTES`]; `what` names where it came from.
pub fn check(what: &str, text: String) -> Result<String> {
    if text.len() > MAX_TEXT_BYTES {
        return Err(crate::output::invalid_input(format!(
            "{what} is {} bytes: the limit is {MAX_TEXT_BYTES} bytes (UTF-8); nothing was sent",
            text.len()
        )));
    }
    Ok(text)
}

fn utf8(what: &str, bytes: Vec<u8>) -> Result<String> {
    String::from_utf8(bytes).map_err(|_| crate::output::invalid_input(format!("{what} is not UTF-8 text")))
}

/// Standard input to its end, without one trailing line break (what `echo` or a heredoc adds).
pub fn from_stdin(what: &str) -> Result<String> {
    let mut bytes = Vec::new();
    // Read one byte past the limit at most, so a huge input is refused without holding it all.
    std::io::stdin()
        .take(MAX_TEXT_BYTES as u64 + 3)
        .read_to_end(&mut bytes)
        .context("cannot read standard input")?;
    if bytes.len() > MAX_TEXT_BYTES + 2 {
        return Err(crate::output::invalid_input(format!(
            "{what} is over {MAX_TEXT_BYTES} bytes, the limit; nothing was sent"
        )));
    }
    let mut text = utf8(what, bytes)?;
    if text.ends_with('\n') {
        text.pop();
        if text.ends_with('\r') {
            text.pop();
        }
    }
    check(what, text)
}

/// A file's whole content, as it is.
pub fn from_file(path: &Path) -> Result<String> {
    let what = path.display().to_string();
    let len = std::fs::metadata(path)
        .with_context(|| format!("cannot read {what}"))?
        .len();
    if len > MAX_TEXT_BYTES as u64 {
        return Err(crate::output::invalid_input(format!(
            "{what} is {len} bytes: the limit is {MAX_TEXT_BYTES} bytes (UTF-8); nothing was sent"
        )));
    }
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {what}"))?;
    check(&what, utf8(&what, bytes)?)
}

/// The text given as an argument (`-` for standard input) or in `--file`.
pub fn argument_or_file(what: &str, text: Option<String>, file: Option<&Path>) -> Result<String> {
    match (text.as_deref(), file) {
        (Some("-"), None) => from_stdin("standard input"),
        (Some(_), None) => check(what, text.unwrap_or_default()),
        (None, Some(path)) => from_file(path),
        (None, None) => Err(crate::output::invalid_input(format!(
            "give {what} as an argument, `-` for standard input, or --file PATH"
        ))),
        (Some(_), Some(_)) => Err(crate::output::invalid_input(format!(
            "give {what} as an argument or --file, not both"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_at_the_limit_passes_and_one_byte_more_does_not() {
        assert!(check("t", "a".repeat(MAX_TEXT_BYTES)).is_ok());
        let err = check("t", "a".repeat(MAX_TEXT_BYTES + 1)).expect_err("over");
        assert!(err.to_string().contains(&MAX_TEXT_BYTES.to_string()), "{err}");
    }

    #[test]
    fn the_limit_in_the_help_is_the_real_one() {
        assert_eq!(MAX_TEXT_BYTES, 65_536, "update the --help texts of send and ask");
    }
}
