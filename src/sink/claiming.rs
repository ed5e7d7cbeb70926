//! The claim check in front of a sink: every sink the registry builds is
//! wrapped in a [`ClaimingSink`], which asks the sink for its
//! [`Sink::inline_max_bytes`] at each attempt and, for a larger body,
//! checks the body in (see `claim_check`) and hands the sink the delivery
//! with its [`Delivery::claim`]. A sink without a limit is called as it is.

use super::{Delivery, Sink, SinkError, SinkPanicked};
use crate::claim_check::{ClaimRef, ClaimStore};
use std::fmt;
use std::num::NonZeroU16;
use std::sync::Arc;

/// A sink behind the claim check.
pub struct ClaimingSink {
    inner: Arc<dyn Sink>,
    claims: Arc<ClaimStore>,
}

impl ClaimingSink {
    pub fn new(inner: Arc<dyn Sink>, claims: Arc<ClaimStore>) -> ClaimingSink {
        ClaimingSink { inner, claims }
    }
}

/// A body could not be checked in.
#[derive(Debug)]
pub struct ClaimCheckFailed(pub std::io::Error);

impl fmt::Display for ClaimCheckFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot check the body in to the claim check: {}", self.0)
    }
}

impl std::error::Error for ClaimCheckFailed {}

/// A sink's `inline_max_bytes` that panicked.
#[derive(Debug)]
struct ThresholdPanicked(SinkPanicked);

impl fmt::Display for ThresholdPanicked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the sink's inline_max_bytes (its claim check threshold) failed: {}",
            self.0
        )
    }
}

impl std::error::Error for ThresholdPanicked {}

fn threshold_failed(panic_message: String) -> SinkError {
    SinkError::transient(ThresholdPanicked(SinkPanicked(panic_message)))
}

impl ClaimingSink {
    /// The sink's claim check threshold, or the text of its panic: the
    /// host's code, whose panic is a failed attempt, not a dead worker.
    fn threshold(&self) -> Result<Option<u64>, String> {
        crate::panics::catch(|| self.inner.inline_max_bytes())
    }

    /// The claim of a delivery's body when it is over `limit`.
    fn claim(
        &self,
        limit: Option<u64>,
        delivery: &Delivery<'_>,
    ) -> Result<Option<ClaimRef>, SinkError> {
        let hook = delivery.hook;
        match limit {
            Some(max_bytes) if hook.body.len() as u64 > max_bytes => self
                .claims
                .check_in(&hook.tenant, &hook.body, Some(delivery.deadline))
                .map(Some)
                .map_err(|e| SinkError::transient(ClaimCheckFailed(e))),
            _ => Ok(None),
        }
    }
}

impl Sink for ClaimingSink {
    fn deliver(&self, delivery: &Delivery<'_>) -> Result<(), SinkError> {
        let limit = self.threshold().map_err(threshold_failed)?;
        let claim = self.claim(limit, delivery)?;
        self.inner.deliver(&Delivery {
            claim: claim.as_ref(),
            ..*delivery
        })
    }

    /// The entries whose body could not be checked in fail on their own;
    /// the others go to the sink in one batch.
    fn deliver_batch(&self, deliveries: &[Delivery<'_>]) -> Vec<Result<(), SinkError>> {
        let limit = match self.threshold() {
            Ok(limit) => limit,
            Err(message) => {
                return deliveries
                    .iter()
                    .map(|_| Err(threshold_failed(message.clone())))
                    .collect()
            }
        };
        let claims: Vec<Result<Option<ClaimRef>, SinkError>> =
            deliveries.iter().map(|d| self.claim(limit, d)).collect();
        let ready: Vec<Delivery<'_>> = deliveries
            .iter()
            .zip(&claims)
            .filter_map(|(d, claim)| {
                let claim = claim.as_ref().ok()?;
                Some(Delivery {
                    claim: claim.as_ref(),
                    ..*d
                })
            })
            .collect();
        let mut answers = if ready.is_empty() {
            Vec::new()
        } else {
            super::deliver_batch_safely(self.inner.as_ref(), &ready)
        }
        .into_iter();
        claims
            .into_iter()
            .map(|claim| match claim {
                Ok(_) => answers.next().expect("one answer per entry sent"),
                Err(e) => Err(e),
            })
            .collect()
    }

    fn inline_max_bytes(&self) -> Option<u64> {
        self.inner.inline_max_bytes()
    }

    fn batch_max_entries(&self) -> Option<NonZeroU16> {
        self.inner.batch_max_entries()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::{first_attempts, hooks_with_bodies};
    use parking_lot::Mutex;

    /// Batches; takes bodies over 4 bytes by claim; records each call's
    /// bodies with whether they came with a claim.
    #[derive(Default)]
    struct Recorder {
        calls: Mutex<Vec<Vec<(String, bool)>>>,
    }

    impl Sink for Recorder {
        fn deliver(&self, _: &Delivery<'_>) -> Result<(), SinkError> {
            unreachable!("called by batch")
        }

        fn inline_max_bytes(&self) -> Option<u64> {
            Some(4)
        }

        fn deliver_batch(&self, deliveries: &[Delivery<'_>]) -> Vec<Result<(), SinkError>> {
            let call = deliveries
                .iter()
                .map(|d| {
                    (
                        String::from_utf8_lossy(&d.hook.body).into(),
                        d.claim.is_some(),
                    )
                })
                .collect();
            self.calls.lock().push(call);
            deliveries.iter().map(|_| Ok(())).collect()
        }
    }

    #[test]
    fn a_batch_checks_in_each_large_body_and_one_that_fails_fails_alone() {
        let dir = tempfile::tempdir().unwrap();
        // A directory where the claim of "broken" would go: it cannot be stored.
        let sha = crate::claim_check::body_sha256(b"broken");
        std::fs::create_dir_all(dir.path().join("t").join(sha)).unwrap();
        let recorder = Arc::new(Recorder::default());
        let claims = Arc::new(ClaimStore::new(dir.path(), 60_000));
        let sink = ClaimingSink::new(recorder.clone(), claims);
        let hooks = hooks_with_bodies(&["tiny", "broken", "large"]);
        let deliveries = first_attempts(&hooks);
        let results: Vec<Option<String>> = sink
            .deliver_batch(&deliveries)
            .into_iter()
            .map(|r| r.err().map(|e| e.to_string()))
            .collect();
        assert_eq!(results[0], None);
        assert!(
            results[1]
                .as_deref()
                .is_some_and(|e| e.starts_with("cannot check the body in to the claim check")),
            "{results:?}"
        );
        assert_eq!(results[2], None);
        assert_eq!(
            *recorder.calls.lock(),
            [vec![
                ("tiny".to_string(), false),
                ("large".to_string(), true)
            ]]
        );
    }
}
