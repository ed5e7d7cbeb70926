//! The process's latest stall, as the core sees it: a span of the shard's
//! clock in which none of goad's threads ran (the shell's watcher sees
//! it: see `runtime::stall`). An attempt running across it most often
//! fails by its own timeouts — its time ran out while the answer waited
//! unread in the socket — which says nothing of its sink. So a transient
//! failure of such an attempt is not counted against its key's breaker
//! (a probe cut so lets the next attempt probe), and its row is due again
//! at once; the attempt still counts, and its error says why it is not
//! held against the sink.

use super::types::{AttemptFailure, AttemptResult};
use super::{Core, FailureClass, Running};

/// A span of the shard's clock in which the process did not run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Stall {
    from_ms: u64,
    to_ms: u64,
}

impl Stall {
    /// Whether an attempt that started at `started_at_ms` and ended at
    /// `ended_at_ms` was running across this stall.
    fn spans(&self, started_at_ms: u64, ended_at_ms: u64) -> bool {
        self.from_ms < self.to_ms && started_at_ms < self.to_ms && ended_at_ms >= self.from_ms
    }
}

impl Core {
    /// The process did not run from `from_ms` to `to_ms` (of the shard's
    /// clock); the latest stall noted is the one kept.
    pub fn note_stall(&mut self, from_ms: u64, to_ms: u64) {
        if to_ms > self.stall.to_ms {
            self.stall = Stall { from_ms, to_ms };
        }
    }

    /// `result`, a transient failure of `run` ending at `now_ms` across
    /// the latest stall, said so: `Some` with the failure to keep, whose
    /// row is due again at once and whose breaker does not count it.
    /// `None` for any other result.
    pub(super) fn cut_by_stall(
        &self,
        run: &Running,
        now_ms: u64,
        result: &AttemptResult,
    ) -> Option<AttemptFailure> {
        let failure = result.as_ref().err()?;
        let started_at_ms = run.deadline_at_ms.saturating_sub(run.timeout_ms);
        let cut =
            failure.class == FailureClass::Transient && self.stall.spans(started_at_ms, now_ms);
        cut.then(|| AttemptFailure {
            class: FailureClass::Transient,
            message: format!(
                "{} (cut short by a stall of this process: it did not run for {} ms — stopped, \
                 frozen or starved of CPU — so not held against the sink; retried at once)",
                failure.message,
                self.stall.to_ms - self.stall.from_ms
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_attempt_spans_a_stall_it_started_before_the_end_of_and_ended_after_the_start_of() {
        let stall = Stall {
            from_ms: 1_000,
            to_ms: 3_000,
        };
        assert!(stall.spans(900, 3_100), "across it");
        assert!(stall.spans(900, 1_000), "ended as it began");
        assert!(stall.spans(2_000, 3_100), "started in it");
        assert!(!stall.spans(3_000, 3_100), "started as it ended");
        assert!(!stall.spans(100, 900), "ended before it");
        assert!(!Stall::default().spans(0, 5_000), "none noted");
    }
}
