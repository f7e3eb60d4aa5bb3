//! Durations (`90`, `30s`, `10m`, `2h`, `7d`) and points in time (RFC 3339, or a duration ago) on the
//! command line.

use std::time::Duration;

use pacerelle_client::Timestamp;

/// Parses `90` (seconds), `30s`, `10m`, `2h`, `7d`, or a sum such as `1h30m`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let bad = || format!("{text:?} is not a duration (examples: 90, 30s, 10m, 2h, 7d, 1h30m)");
    if text.is_empty() {
        return Err(bad());
    }
    if let Ok(secs) = text.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    let mut total: u64 = 0;
    let mut number = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            _ => return Err(bad()),
        };
        let n: u64 = number.parse().map_err(|_| bad())?;
        total = n
            .checked_mul(unit)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(bad)?;
        number.clear();
    }
    if !number.is_empty() {
        return Err(bad());
    }
    Ok(Duration::from_secs(total))
}

/// Parses an RFC 3339 time (`2026-11-30T08:00:00Z`), a date (`2026-11-30`, midnight UTC), or a duration
/// meaning that long ago (`24h`, `7d`).
pub fn parse_time(text: &str) -> Result<Timestamp, String> {
    let text = text.trim();
    if let Some(t) = Timestamp::parse(text) {
        return Ok(t);
    }
    if let Some(t) = Timestamp::parse(&format!("{text}T00:00:00Z")) {
        return Ok(t);
    }
    match parse_duration(text) {
        Ok(ago) => Ok(Timestamp::now().plus_millis(-(ago.as_millis() as i64))),
        Err(_) => Err(format!(
            "{text:?} is not a time (examples: 2026-11-30T08:00:00Z, 2026-11-30, 24h for a day ago)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(604_800)));
        for bad in ["", "m", "10x", "10m5", "-3s", "1.5h"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn times() {
        assert_eq!(parse_time("1970-01-01T00:00:01Z"), Ok(Timestamp(1000)));
        assert_eq!(parse_time("1970-01-02"), Ok(Timestamp(86_400_000)));
        let ago = parse_time("1h").expect("ago");
        let expected = Timestamp::now().millis() - 3_600_000;
        assert!((ago.millis() - expected).abs() < 5_000);
        assert!(parse_time("yesterday").is_err());
    }
}
