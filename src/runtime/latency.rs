//! The attempt latency histogram every IO worker records into (lock-free;
//! Prometheus-style cumulative buckets are computed when read).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Bucket upper bounds in milliseconds; one more bucket holds the rest.
pub const BUCKET_BOUNDS_MS: [f64; 14] = [
    0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1_000.0, 2_500.0, 5_000.0, 10_000.0,
];

#[derive(Debug, Default)]
pub struct AttemptLatency {
    buckets: [AtomicU64; BUCKET_BOUNDS_MS.len() + 1],
    sum_us: AtomicU64,
}

/// A reading: per-bucket counts (not cumulative; the last is over every
/// bound), and the sum.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencySnapshot {
    pub counts: Vec<u64>,
    pub sum_ms: f64,
}

impl LatencySnapshot {
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }
}

impl AttemptLatency {
    pub fn record(&self, took: Duration) {
        let ms = took.as_secs_f64() * 1_000.0;
        let bucket = BUCKET_BOUNDS_MS
            .iter()
            .position(|bound| ms <= *bound)
            .unwrap_or(BUCKET_BOUNDS_MS.len());
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        self.sum_us
            .fetch_add(took.as_micros() as u64, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> LatencySnapshot {
        LatencySnapshot {
            counts: self
                .buckets
                .iter()
                .map(|b| b.load(Ordering::Relaxed))
                .collect(),
            sum_ms: self.sum_us.load(Ordering::Relaxed) as f64 / 1_000.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_into_the_first_bucket_that_holds_it() {
        let h = AttemptLatency::default();
        h.record(Duration::from_micros(400));
        h.record(Duration::from_millis(3));
        h.record(Duration::from_secs(60));
        let s = h.snapshot();
        assert_eq!(s.counts[0], 1);
        assert_eq!(s.counts[3], 1);
        assert_eq!(s.counts[BUCKET_BOUNDS_MS.len()], 1);
        assert_eq!(s.count(), 3);
        assert!((s.sum_ms - 60_003.4).abs() < 0.01);
    }
}
