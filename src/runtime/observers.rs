//! The host's watchers of what the shards decide: each attempt's outcome
//! (`EngineBuilder::on_outcome`) and each breaker that opens, closes or
//! moves with its sink (`EngineBuilder::on_breaker`). They run on the
//! shard thread, so they must return quickly; one that panics is logged
//! and the shard goes on.

use crate::core::{BreakerEvent, OutcomeEvent};
use std::sync::Arc;

/// A host's watcher of attempts' outcomes (see
/// [`EngineBuilder::on_outcome`](super::EngineBuilder::on_outcome)).
pub type OutcomeObserver = Arc<dyn Fn(&OutcomeEvent) + Send + Sync>;

/// A host's watcher of breakers (see
/// [`EngineBuilder::on_breaker`](super::EngineBuilder::on_breaker)): the
/// change and when the shard saw it (wall-clock ms).
pub type BreakerObserver = Arc<dyn Fn(&BreakerEvent, u64) + Send + Sync>;

/// The watchers a host set, if any.
#[derive(Clone, Default)]
pub struct Observers {
    pub outcome: Option<OutcomeObserver>,
    pub breaker: Option<BreakerObserver>,
}

impl Observers {
    /// Hands shard `shard`'s outcomes to the outcome observer.
    pub(super) fn outcomes(&self, shard: usize, events: &[OutcomeEvent]) {
        if let Some(observer) = &self.outcome {
            for event in events {
                contained(shard, "on_outcome", || observer(event));
            }
        }
    }

    /// Hands a breaker change shard `shard` saw at `at_ms` to the breaker
    /// observer.
    pub(super) fn breaker(&self, shard: usize, event: &BreakerEvent, at_ms: u64) {
        if let Some(observer) = &self.breaker {
            contained(shard, "on_breaker", || observer(event, at_ms));
        }
    }
}

/// Runs the host's `call`, logging its panic: the shard's state is not in
/// its reach, so the shard goes on.
fn contained(shard: usize, which: &str, call: impl FnOnce()) {
    if let Err(panic) = crate::panics::catch(call) {
        crate::log::error(
            &format!("an {which} observer panicked; the shard goes on"),
            &[("shard", &shard), ("panic", &panic)],
        );
    }
}
