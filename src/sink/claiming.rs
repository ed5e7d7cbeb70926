//! The claim check in front of a sink: every sink the registry builds is
//! wrapped in a [`ClaimingSink`], which asks the sink for its
//! [`Sink::inline_max_bytes`] at each attempt and, for a larger body,
//! checks the body in (see `claim_check`) and hands the sink the delivery
//! with its [`Delivery::claim`]. A sink without a limit is called as it is.

use super::{Delivery, Sink, SinkError, SinkPanicked};
use crate::claim_check::ClaimStore;
use std::fmt;
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

impl Sink for ClaimingSink {
    fn deliver(&self, delivery: &Delivery<'_>) -> Result<(), SinkError> {
        // The host's code: a panic is a failed attempt, not a dead worker.
        let limit = crate::panics::catch(|| self.inner.inline_max_bytes())
            .map_err(|message| SinkError::transient(ThresholdPanicked(SinkPanicked(message))))?;
        let hook = delivery.hook;
        match limit {
            Some(max_bytes) if hook.body.len() as u64 > max_bytes => {
                let claim = self
                    .claims
                    .check_in(&hook.tenant, &hook.body)
                    .map_err(|e| SinkError::transient(ClaimCheckFailed(e)))?;
                let claimed = Delivery {
                    claim: Some(&claim),
                    ..*delivery
                };
                self.inner.deliver(&claimed)
            }
            _ => self.inner.deliver(delivery),
        }
    }

    fn inline_max_bytes(&self) -> Option<u64> {
        self.inner.inline_max_bytes()
    }
}
