//! The retry policy: exponential backoff with jitter, a total attempt count,
//! `Retry-After`, permanent errors and the retry horizon.

use super::rng::Rng;
use crate::config::RetryConfig;
use crate::limits::MAX_RETRY_AFTER_MS;

/// How a failed attempt failed, as the sink classified it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureClass {
    /// Retrying cannot help: dead-letter now.
    Permanent,
    /// The sink asked to wait at least this long.
    RetryAfter { after_ms: u64 },
    /// Anything else: retry per the policy.
    Transient,
}

/// What to do with a row after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryDecision {
    /// Pending again, due at this time.
    RetryAt { due_at_ms: u64 },
    /// Dead-letter: the policy gave up (or the error was permanent).
    GiveUp,
    /// Dead-letter: the row's horizon has passed.
    Horizon,
}

impl RetryConfig {
    /// The delay after `attempts_made` attempts (≥ 1), or `None` to give up.
    /// `max_attempts` counts every attempt, so attempt `max_attempts` gives up.
    pub fn backoff_ms(&self, attempts_made: u32, rng: &mut Rng) -> Option<u64> {
        assert!(attempts_made >= 1, "backoff is asked after an attempt");
        if attempts_made >= self.max_attempts {
            return None;
        }
        let exponent = (attempts_made - 1).min(63);
        let full = self
            .base_ms
            .saturating_mul(1u64 << exponent)
            .min(self.max_ms);
        if !self.jitter {
            return Some(full);
        }
        Some((full as f64 * (0.5 + rng.unit() * 0.5)).round() as u64)
    }

    /// The decision after a failed attempt at `now_ms`. `attempts_made`
    /// includes this attempt; `first_attempt_at_ms` is when the row was first tried.
    pub fn decide(
        &self,
        now_ms: u64,
        attempts_made: u32,
        first_attempt_at_ms: u64,
        class: FailureClass,
        rng: &mut Rng,
    ) -> RetryDecision {
        let delay_ms = match class {
            FailureClass::Permanent => return RetryDecision::GiveUp,
            FailureClass::Transient => self.backoff_ms(attempts_made, rng),
            FailureClass::RetryAfter { after_ms } => self
                .backoff_ms(attempts_made, rng)
                .map(|d| d.max(after_ms.min(MAX_RETRY_AFTER_MS))),
        };
        match delay_ms {
            Some(delay_ms) => self.retry_within_horizon(now_ms, first_attempt_at_ms, delay_ms),
            None => RetryDecision::GiveUp,
        }
    }

    /// The decision after a failed attempt at `now_ms` that says nothing
    /// of its sink (cut short by a stall of the process: see
    /// `core::stall`): due again at once, whatever the attempts made,
    /// unless the row's horizon has passed.
    pub fn retry_at_once(&self, now_ms: u64, first_attempt_at_ms: u64) -> RetryDecision {
        self.retry_within_horizon(now_ms, first_attempt_at_ms, 0)
    }

    /// Due `delay_ms` after `now_ms`, no later than the horizon of a row
    /// first tried at `first_attempt_at_ms`; dead once it has passed.
    fn retry_within_horizon(
        &self,
        now_ms: u64,
        first_attempt_at_ms: u64,
        delay_ms: u64,
    ) -> RetryDecision {
        let horizon_ms = self.horizon_ms(first_attempt_at_ms);
        if now_ms >= horizon_ms {
            return RetryDecision::Horizon;
        }
        RetryDecision::RetryAt {
            due_at_ms: now_ms.saturating_add(delay_ms).min(horizon_ms),
        }
    }

    /// The time past which a row first tried at `first_attempt_at_ms` is not retried.
    pub fn horizon_ms(&self, first_attempt_at_ms: u64) -> u64 {
        first_attempt_at_ms.saturating_add(self.max_elapsed_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(base_ms: u64, max_ms: u64, max_attempts: u32, jitter: bool) -> RetryConfig {
        RetryConfig {
            base_ms,
            max_ms,
            max_attempts,
            jitter,
            ..RetryConfig::default()
        }
    }

    #[test]
    fn max_attempts_counts_every_attempt() {
        // Reference scenario 67: with 2 attempts, attempt 1 retries, 2 and 3 give up.
        let p = policy(100, 300_000, 2, false);
        let mut rng = Rng::new(1);
        assert_eq!(p.backoff_ms(1, &mut rng), Some(100));
        assert_eq!(p.backoff_ms(2, &mut rng), None);
        assert_eq!(p.backoff_ms(3, &mut rng), None);
    }

    #[test]
    fn doubles_from_base_to_cap_without_jitter() {
        // Reference scenario 68.
        let p = policy(100, 30_000, 84, false);
        let mut rng = Rng::new(1);
        let got: Vec<u64> = (1..=8)
            .map(|a| p.backoff_ms(a, &mut rng).unwrap())
            .collect();
        assert_eq!(got, vec![100, 200, 400, 800, 1_600, 3_200, 6_400, 12_800]);
        assert_eq!(p.backoff_ms(20, &mut rng), Some(30_000));
    }

    #[test]
    fn jitter_stays_within_half_to_full() {
        // Reference scenario 69.
        let p = policy(100, 300_000, 84, true);
        let mut rng = Rng::new(42);
        for attempt in 1..=6u32 {
            let full = 100u64 << (attempt - 1);
            for _ in 0..200 {
                let d = p.backoff_ms(attempt, &mut rng).unwrap();
                assert!(
                    d >= (full as f64 * 0.5).round() as u64 && d <= full,
                    "attempt {attempt}: {d}"
                );
            }
        }
    }

    #[test]
    fn defaults_sum_to_the_reference_schedule() {
        // Reference scenario 70: 83 backoffs sum to 21,709,500 ms; attempt 84 gives up.
        let p = RetryConfig {
            jitter: false,
            ..RetryConfig::default()
        };
        let mut rng = Rng::new(1);
        let sum: u64 = (1..=83).map(|a| p.backoff_ms(a, &mut rng).unwrap()).sum();
        assert_eq!(sum, 21_709_500);
        assert_eq!(p.backoff_ms(83, &mut rng), Some(300_000));
        assert_eq!(p.backoff_ms(84, &mut rng), None);
    }

    #[test]
    fn retry_after_is_a_floor_capped_at_an_hour() {
        let p = policy(100, 300_000, 10, false);
        let mut rng = Rng::new(1);
        let d = p.decide(
            1_000,
            1,
            1_000,
            FailureClass::RetryAfter { after_ms: 60_000 },
            &mut rng,
        );
        assert_eq!(d, RetryDecision::RetryAt { due_at_ms: 61_000 });
        let d = p.decide(
            1_000,
            1,
            1_000,
            FailureClass::RetryAfter { after_ms: 10 },
            &mut rng,
        );
        assert_eq!(d, RetryDecision::RetryAt { due_at_ms: 1_100 });
        let d = p.decide(
            0,
            1,
            0,
            FailureClass::RetryAfter {
                after_ms: 86_400_000,
            },
            &mut rng,
        );
        assert_eq!(
            d,
            RetryDecision::RetryAt {
                due_at_ms: 3_600_000
            }
        );
        let d = p.decide(0, 10, 0, FailureClass::RetryAfter { after_ms: 5 }, &mut rng);
        assert_eq!(d, RetryDecision::GiveUp);
    }

    #[test]
    fn permanent_gives_up_at_once() {
        let p = policy(100, 300_000, 10, false);
        assert_eq!(
            p.decide(0, 1, 0, FailureClass::Permanent, &mut Rng::new(1)),
            RetryDecision::GiveUp
        );
    }

    #[test]
    fn horizon_caps_the_next_due_and_then_ends_the_row() {
        let p = RetryConfig {
            max_elapsed_ms: 10_000,
            ..policy(100, 300_000, 84, false)
        };
        let mut rng = Rng::new(1);
        // 1 s into the horizon, a 51.2 s backoff is cut to the horizon at 10 s.
        assert_eq!(
            p.decide(1_000, 10, 0, FailureClass::Transient, &mut rng),
            RetryDecision::RetryAt { due_at_ms: 10_000 }
        );
        assert_eq!(
            p.decide(10_000, 11, 0, FailureClass::Transient, &mut rng),
            RetryDecision::Horizon
        );
    }
}
