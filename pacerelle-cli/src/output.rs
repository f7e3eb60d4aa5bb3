//! Printing: text for people, JSON for scripts, and errors on stderr.

use pacerelle_client::{Error as ClientError, Timestamp};

/// Prints a value as pretty JSON on stdout.
pub fn json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// A refusal decided in the command before any request — missing or malformed input — with a stable code
/// (one of the relay's, `invalid_input`) that `--json` prints like the relay's.
#[derive(Debug)]
pub struct Refused {
    pub code: &'static str,
    pub message: String,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Refused {}

/// An `invalid_input` [`Refused`].
pub fn invalid_input(message: impl Into<String>) -> anyhow::Error {
    Refused {
        code: pacerelle_client::core::wire::code::INVALID_INPUT,
        message: message.into(),
    }
    .into()
}

/// The stable code of an error, as `--json` prints it: the client's ([`ClientError::stable_code`]), else a
/// [`Refused`]'s.
fn code_of(e: &anyhow::Error) -> Option<&str> {
    match e.downcast_ref::<ClientError>() {
        Some(client) => client.stable_code(),
        None => e.downcast_ref::<Refused>().map(|r| r.code),
    }
}

/// Prints an error: `error: …` on stderr, or a JSON object `{"error": …, "code": …}` with `--json`.
pub fn error(as_json: bool, e: &anyhow::Error) {
    let code = code_of(e);
    let mut message = format!("{e:#}");
    if let Some(
        c @ ClientError::Api {
            details: Some(details),
            ..
        },
    ) = e.downcast_ref::<ClientError>()
        && c.kind() == pacerelle_client::ErrorKind::AgentInUse
    {
        message.push_str(&format!(" — held by {details}"));
    }
    if as_json {
        let body = serde_json::json!({ "error": message, "code": code });
        eprintln!("{body}");
    } else {
        eprintln!("error: {message}");
    }
}

/// `HH:MM:SS` of a timestamp, for compact listings.
pub fn clock(t: Timestamp) -> String {
    let text = t.to_rfc3339();
    text.get(11..19).unwrap_or(&text).to_string()
}

/// How long until `t`, in words.
pub fn until(t: Timestamp) -> String {
    remaining(t.millis() - Timestamp::now().millis())
}

/// `ms` milliseconds in words, rounded up to the second: the milliseconds a request took do not turn the
/// `--expires 3s` the user gave into "2 s".
fn remaining(ms: i64) -> String {
    let secs = ms.div_euclid(1000) + i64::from(ms.rem_euclid(1000) > 0);
    if secs <= 0 {
        "expired".into()
    } else if secs < 120 {
        format!("{secs} s")
    } else {
        format!("{} min", (secs + 30) / 60)
    }
}

/// Renders text as a QR code with Unicode half blocks, for a terminal.
pub fn qr(text: &str) -> Option<String> {
    let code = qrcode::QrCode::new(text.as_bytes()).ok()?;
    Some(
        code.render::<qrcode::render::unicode::Dense1x2>()
            .dark_color(qrcode::render::unicode::Dense1x2::Light)
            .light_color(qrcode::render::unicode::Dense1x2::Dark)
            .quiet_zone(true)
            .build(),
    )
}

#[cfg(test)]
mod tests {
    use super::remaining;

    #[test]
    fn a_duration_reads_as_given_not_a_second_short() {
        assert_eq!(remaining(3_000), "3 s");
        assert_eq!(remaining(2_950), "3 s");
        assert_eq!(remaining(2_001), "3 s");
        assert_eq!(remaining(1), "1 s");
        assert_eq!(remaining(0), "expired");
        assert_eq!(remaining(-5), "expired");
        assert_eq!(remaining(119_990), "2 min");
        assert_eq!(remaining(599_900), "10 min");
        assert_eq!(remaining(90_000), "90 s");
    }
}
