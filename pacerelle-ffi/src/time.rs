//! Times cross the binding as `SystemTime`: `java.time.Instant` in Kotlin, `Date` in Swift, `datetime` in
//! Python.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use pacerelle_client::Timestamp;

/// A relay timestamp (milliseconds since the epoch) as a `SystemTime`.
pub(crate) fn system_time(t: Timestamp) -> SystemTime {
    let ms = t.millis();
    let offset = Duration::from_millis(ms.unsigned_abs());
    if ms >= 0 {
        UNIX_EPOCH + offset
    } else {
        UNIX_EPOCH - offset
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn millis_either_side_of_the_epoch() {
        assert_eq!(
            system_time(Timestamp(1_500)),
            UNIX_EPOCH + Duration::from_millis(1_500)
        );
        assert_eq!(
            system_time(Timestamp(-1_500)),
            UNIX_EPOCH - Duration::from_millis(1_500)
        );
    }
}
