//! Timestamps: milliseconds since the Unix epoch, written on the wire as RFC 3339 in UTC.

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// `0000-01-01T00:00:00.000Z`, the earliest time RFC 3339 text can hold.
const FIRST_WRITABLE: i64 = -62_167_219_200_000;
/// `9999-12-31T23:59:59.999Z`, the latest.
const LAST_WRITABLE: i64 = 253_402_300_799_999;

/// A point in time with millisecond precision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(pub i64);

impl Timestamp {
    /// The current time of this machine's clock.
    pub fn now() -> Self {
        let nanos = OffsetDateTime::now_utc().unix_timestamp_nanos();
        Timestamp((nanos / 1_000_000) as i64)
    }

    /// Milliseconds since the epoch.
    pub fn millis(self) -> i64 {
        self.0
    }

    /// This time plus a number of milliseconds (saturating).
    pub fn plus_millis(self, ms: i64) -> Self {
        Timestamp(self.0.saturating_add(ms))
    }

    /// RFC 3339 text, e.g. `2026-11-29T23:57:14.123Z`.
    pub fn to_rfc3339(self) -> String {
        let dt = OffsetDateTime::from_unix_timestamp_nanos(i128::from(self.0) * 1_000_000)
            .unwrap_or(OffsetDateTime::UNIX_EPOCH);
        let fmt = time::macros::format_description!(
            "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
        );
        dt.format(&fmt).unwrap_or_default()
    }

    /// Parses RFC 3339 text (docs/crypto.md §0): the `date-time` of RFC 3339 §5.6, `T` or `t` between date
    /// and time, `Z`, `z` or an offset `±HH:MM` (`-00:00` is UTC), an optional fraction of one or more digits.
    /// Digits below the millisecond are dropped: the time is truncated to the millisecond at or before it
    /// (`.0039` is `.003`, before 1970 too). Refused: a leap second (`:60`, which a count of milliseconds
    /// cannot hold), any other separator (a space), a missing offset, and a time whose UTC year is not 0000
    /// to 9999: [`Timestamp::to_rfc3339`] could not write it back (an offset can move
    /// `9999-12-31T23:59:59-01:00` into the year 10000).
    pub fn parse(text: &str) -> Option<Self> {
        if !rfc3339_layout(text) {
            return None;
        }
        let dt = OffsetDateTime::parse(text, &Rfc3339).ok()?;
        let millis = i64::try_from(dt.unix_timestamp_nanos().div_euclid(1_000_000)).ok()?;
        (FIRST_WRITABLE..=LAST_WRITABLE)
            .contains(&millis)
            .then_some(Timestamp(millis))
    }
}

/// Whether `text` has the layout of RFC 3339's `date-time` with a second from 00 to 59:
/// `YYYY-MM-DD(T|t)HH:MM:SS[.d+](Z|z|(+|-)HH:MM)`, ASCII digits. The `time` crate checks the ranges of
/// each field; it also reads a space for the `T` and a leap second, which this refuses.
fn rfc3339_layout(text: &str) -> bool {
    let b = text.as_bytes();
    let digits =
        |range: std::ops::Range<usize>| b.get(range).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    let at = |i: usize, allowed: &[u8]| b.get(i).is_some_and(|c| allowed.contains(c));
    let fixed = digits(0..4)
        && at(4, b"-")
        && digits(5..7)
        && at(7, b"-")
        && digits(8..10)
        && at(10, b"Tt")
        && digits(11..13)
        && at(13, b":")
        && digits(14..16)
        && at(16, b":")
        && digits(17..19)
        && b[17] <= b'5';
    if !fixed {
        return false;
    }
    let mut i = 19;
    if at(i, b".") {
        let start = i + 1;
        i = start;
        while at(i, b"0123456789") {
            i += 1;
        }
        if i == start {
            return false;
        }
    }
    match b.get(i) {
        Some(b'Z' | b'z') => i + 1 == b.len(),
        Some(b'+' | b'-') => {
            i + 6 == b.len() && digits(i + 1..i + 3) && at(i + 3, b":") && digits(i + 4..i + 6)
        }
        _ => false,
    }
}

impl std::fmt::Display for Timestamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

impl serde::Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_rfc3339())
    }
}

impl<'de> serde::Deserialize<'de> for Timestamp {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Timestamp::parse(&text).ok_or_else(|| serde::de::Error::custom("expected an RFC 3339 time"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_round_trip() {
        let t = Timestamp(1_796_083_034_123);
        assert_eq!(t.to_rfc3339(), "2026-11-30T23:57:14.123Z");
        assert_eq!(Timestamp::parse(&t.to_rfc3339()), Some(t));
        assert_eq!(Timestamp::parse("2026-12-01T00:57:14.123+01:00"), Some(t));
        assert_eq!(Timestamp::parse("yesterday"), None);
    }

    /// Found by `pacerelle-fuzz` (regressions/wire): an offset that moves a time out of years 0000–9999
    /// was accepted, and the time was then written as 1970 (or as text no parser accepts).
    #[test]
    fn times_outside_years_0000_to_9999_in_utc_are_refused() {
        assert_eq!(Timestamp::parse("9999-12-31T23:59:59.999-23:59"), None);
        assert_eq!(Timestamp::parse("0000-01-01T00:00:00+23:59"), None);
        for text in ["9999-12-31T23:59:59.999Z", "0000-01-01T00:00:00.000Z"] {
            let t = Timestamp::parse(text).expect("the edges parse");
            assert_eq!(t.to_rfc3339(), text);
        }
    }

    /// docs/crypto.md §0: what a reader accepts, as the instant it names, and what it refuses.
    #[test]
    fn the_forms_a_reader_accepts_and_refuses() {
        let accepted = [
            ("2026-11-30T00:10:00.250Z", "2026-11-30T00:10:00.250Z"),
            ("2026-11-30t00:10:00.250z", "2026-11-30T00:10:00.250Z"),
            ("2026-11-30T00:10:00.25Z", "2026-11-30T00:10:00.250Z"),
            ("2026-11-30T00:10:00Z", "2026-11-30T00:10:00.000Z"),
            ("2026-11-30T00:10:00.2509Z", "2026-11-30T00:10:00.250Z"),
            ("2026-11-30T00:10:00.2509999999999Z", "2026-11-30T00:10:00.250Z"),
            ("2026-11-30T00:10:00.250-00:00", "2026-11-30T00:10:00.250Z"),
            ("2026-11-30T01:10:00.250+01:00", "2026-11-30T00:10:00.250Z"),
            ("2026-11-29T23:10:00.250-01:00", "2026-11-30T00:10:00.250Z"),
            ("2026-11-30T00:10:00.250+23:59", "2026-11-29T00:11:00.250Z"),
            ("2028-02-29T12:00:00.000Z", "2028-02-29T12:00:00.000Z"),
            // Truncated, not rounded toward 1970: before the epoch too.
            ("1969-12-31T23:59:59.9995Z", "1969-12-31T23:59:59.999Z"),
        ];
        for (text, wire) in accepted {
            assert_eq!(
                Timestamp::parse(text).map(Timestamp::to_rfc3339).as_deref(),
                Some(wire),
                "{text}"
            );
        }
        for text in [
            "2026-12-31T23:59:60.000Z",
            "2026-11-30T23:59:60Z",
            "2026-11-30 00:10:00.250Z",
            "2026-11-30T00:10:00.250",
            "2026-11-30T00:10:00.250+0100",
            "2026-11-30T00:10:00.250+24:00",
            "2026-11-30T00:10:00.250+01:60",
            "2026-11-30T00:10:00.Z",
            "2026-11-30T00:10:00,250Z",
            "2026-02-30T00:10:00.250Z",
            "2026-11-30T24:00:00.000Z",
            "2026-11-30T00:60:00.000Z",
            "+2026-11-30T00:10:00.250Z",
            " 2026-11-30T00:10:00.250Z",
            "2026-11-30T00:10:00.250Z ",
            "2026-11-30T00:10:00.250ZZ",
            "2026-11-30T00:10:00.２50Z",
            "2026-11-30",
        ] {
            assert_eq!(Timestamp::parse(text), None, "{text}");
        }
    }
}
