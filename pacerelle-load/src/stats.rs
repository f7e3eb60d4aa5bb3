//! Summaries of samples: percentiles, mean and max.

use std::time::Duration;

/// A summary of duration samples.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Summary {
    /// How many samples.
    pub count: usize,
    /// Median.
    pub p50: Duration,
    /// 99th percentile.
    pub p99: Duration,
    /// Largest.
    pub max: Duration,
    /// Mean.
    pub mean: Duration,
}

impl Summary {
    /// Summarises `samples` (all zero when empty).
    pub fn of(mut samples: Vec<Duration>) -> Summary {
        if samples.is_empty() {
            return Summary::default();
        }
        samples.sort_unstable();
        let total: Duration = samples.iter().sum();
        Summary {
            count: samples.len(),
            p50: percentile(&samples, 0.50),
            p99: percentile(&samples, 0.99),
            max: samples[samples.len() - 1],
            mean: total / u32::try_from(samples.len()).unwrap_or(u32::MAX),
        }
    }
}

/// The `p` quantile (0..=1) of sorted, non-empty samples: the nearest rank.
fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_ranks() {
        let samples: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        let s = Summary::of(samples);
        assert_eq!(s.count, 100);
        assert_eq!(s.p50, Duration::from_millis(50));
        assert_eq!(s.p99, Duration::from_millis(99));
        assert_eq!(s.max, Duration::from_millis(100));
        assert_eq!(s.mean, Duration::from_micros(50_500));
        assert_eq!(Summary::of(Vec::new()), Summary::default());
    }
}
