//! A source's `max_ingest_per_s`: a token bucket of a second's worth, so a
//! provider (or anyone holding its token) that floods a source is answered
//! 429 `rate_limited` with when to come back, and the node's store and
//! shards keep serving the other sources. Counted after authentication, so
//! requests that fail it do not spend the source's allowance.

use parking_lot::Mutex;

/// The allowance of one source.
#[derive(Debug)]
pub struct IngestRate {
    per_s: f64,
    bucket: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at_ms: u64,
}

impl IngestRate {
    /// A full bucket of `per_s` at `now_ms`.
    pub fn new(per_s: u32, now_ms: u64) -> IngestRate {
        let per_s = f64::from(per_s);
        IngestRate {
            per_s,
            bucket: Mutex::new(Bucket {
                tokens: per_s,
                at_ms: now_ms,
            }),
        }
    }

    /// Whether both allow as many hooks a second.
    pub fn same_rate_as(&self, other: &IngestRate) -> bool {
        self.per_s == other.per_s
    }

    /// Takes one hook's token at `now_ms`; or, when there is none, the
    /// whole seconds until there is.
    pub fn take(&self, now_ms: u64) -> Result<(), u64> {
        let mut bucket = self.bucket.lock();
        let elapsed_s = now_ms.saturating_sub(bucket.at_ms) as f64 / 1_000.0;
        bucket.tokens = (bucket.tokens + elapsed_s * self.per_s).min(self.per_s);
        bucket.at_ms = now_ms;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            return Ok(());
        }
        let wait_s = (1.0 - bucket.tokens) / self.per_s;
        Err(wait_s.ceil().max(1.0) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_is_taken_at_once_then_the_rate_and_a_refusal_says_when() {
        let rate = IngestRate::new(3, 1_000);
        assert_eq!(
            (0..3).map(|_| rate.take(1_000)).collect::<Vec<_>>(),
            [Ok(()); 3]
        );
        assert_eq!(rate.take(1_000), Err(1));
        // A third of a second later, one more.
        assert_eq!(rate.take(1_334), Ok(()));
        assert_eq!(rate.take(1_334), Err(1));
        // A long idle time fills the bucket to a second's worth, no more.
        assert_eq!(
            (0..4)
                .map(|_| rate.take(60_000))
                .filter(Result::is_ok)
                .count(),
            3
        );
        // Under one a second, the wait is in whole seconds.
        let slow = IngestRate::new(1, 0);
        assert_eq!(slow.take(0), Ok(()));
        assert_eq!(slow.take(100), Err(1));
        assert_eq!(slow.take(1_000), Ok(()));
    }
}
