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

    /// Parses RFC 3339 text (any offset; sub-millisecond digits are dropped). A time whose UTC year is not
    /// 0000 to 9999 is refused: [`Timestamp::to_rfc3339`] could not write it back (an offset can move
    /// `9999-12-31T23:59:59-01:00` into the year 10000).
    pub fn parse(text: &str) -> Option<Self> {
        let dt = OffsetDateTime::parse(text, &Rfc3339).ok()?;
        let millis = (dt.unix_timestamp_nanos() / 1_000_000) as i64;
        (FIRST_WRITABLE..=LAST_WRITABLE)
            .contains(&millis)
            .then_some(Timestamp(millis))
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
}
