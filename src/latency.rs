//! Durations in Prometheus-style buckets: the node-wide histogram of
//! attempt durations every IO worker records into (lock-free), and the
//! plain counts each sink key keeps in its shard's core (its attempts'
//! durations, and how long after receipt its hooks were delivered, which
//! retries stretch to hours: hence bounds up to a day). Cumulative buckets
//! are computed when read.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Bucket upper bounds in milliseconds; one more bucket holds the rest.
pub const BUCKET_BOUNDS_MS: [f64; 21] = [
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    25.0,
    50.0,
    100.0,
    250.0,
    500.0,
    1_000.0,
    2_500.0,
    5_000.0,
    10_000.0,
    30_000.0,
    60_000.0,
    300_000.0,
    900_000.0,
    3_600_000.0,
    21_600_000.0,
    86_400_000.0,
];

const BUCKETS: usize = BUCKET_BOUNDS_MS.len() + 1;

/// The first bucket that holds `took`.
fn bucket_of(took: Duration) -> usize {
    let ms = took.as_secs_f64() * 1_000.0;
    BUCKET_BOUNDS_MS
        .iter()
        .position(|bound| ms <= *bound)
        .unwrap_or(BUCKET_BOUNDS_MS.len())
}

/// Durations counted per bucket (not cumulative; the last is over every
/// bound), and their sum.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LatencyCounts {
    pub counts: [u64; BUCKETS],
    pub sum_us: u64,
}

impl LatencyCounts {
    pub fn record(&mut self, took: Duration) {
        self.counts[bucket_of(took)] += 1;
        self.sum_us += took.as_micros() as u64;
    }

    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    pub fn sum_ms(&self) -> f64 {
        self.sum_us as f64 / 1_000.0
    }

    /// The bound of the first bucket that holds the `q` quantile (0 < q ≤ 1)
    /// of the durations: at least that share took at most this long.
    /// `None` with nothing counted, or when the quantile is past the last
    /// bound.
    pub fn quantile_at_most_ms(&self, q: f64) -> Option<f64> {
        let wanted = (q * self.count() as f64).ceil().max(1.0) as u64;
        let mut cumulative = 0;
        for (k, bound_ms) in BUCKET_BOUNDS_MS.iter().enumerate() {
            cumulative += self.counts[k];
            if cumulative >= wanted {
                return Some(*bound_ms);
            }
        }
        None
    }
}

/// The node-wide histogram, shared by every IO worker.
#[derive(Debug, Default)]
pub struct AttemptLatency {
    buckets: [AtomicU64; BUCKETS],
    sum_us: AtomicU64,
}

impl AttemptLatency {
    pub fn record(&self, took: Duration) {
        self.buckets[bucket_of(took)].fetch_add(1, Ordering::Relaxed);
        self.sum_us
            .fetch_add(took.as_micros() as u64, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> LatencyCounts {
        LatencyCounts {
            counts: std::array::from_fn(|k| self.buckets[k].load(Ordering::Relaxed)),
            sum_us: self.sum_us.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_into_the_first_bucket_that_holds_it() {
        let h = AttemptLatency::default();
        let mut plain = LatencyCounts::default();
        for took in [
            Duration::from_micros(400),
            Duration::from_millis(3),
            Duration::from_secs(2 * 86_400),
        ] {
            h.record(took);
            plain.record(took);
        }
        let s = h.snapshot();
        assert_eq!(s, plain);
        assert_eq!(s.counts[0], 1);
        assert_eq!(s.counts[3], 1);
        assert_eq!(s.counts[BUCKET_BOUNDS_MS.len()], 1);
        assert_eq!(s.count(), 3);
        assert_eq!(s.sum_us, 172_800_003_400);
        assert!((s.sum_ms() - 172_800_003.4).abs() < 0.001);
    }

    #[test]
    fn a_quantile_is_the_bound_of_the_bucket_that_holds_it() {
        let mut counts = LatencyCounts::default();
        assert_eq!(counts.quantile_at_most_ms(0.5), None, "nothing counted");
        for _ in 0..98 {
            counts.record(Duration::from_millis(2));
        }
        counts.record(Duration::from_millis(40));
        counts.record(Duration::from_secs(86_401));
        assert_eq!(counts.quantile_at_most_ms(0.5), Some(2.5));
        assert_eq!(counts.quantile_at_most_ms(0.98), Some(2.5));
        assert_eq!(counts.quantile_at_most_ms(0.99), Some(50.0));
        assert_eq!(
            counts.quantile_at_most_ms(1.0),
            None,
            "past the last bound, a day"
        );
        // A retried hook's hours are in a bucket of their own.
        counts.record(Duration::from_secs(12 * 3_600));
        assert_eq!(
            counts.counts[BUCKET_BOUNDS_MS.len() - 1],
            1,
            "over 6 h, up to 24 h"
        );
    }
}
