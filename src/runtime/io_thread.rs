//! Which engine's IO worker a thread is. `Engine::tick` waits until none
//! of the engine's attempts runs: a host sink that called it from its
//! `deliver` would wait for its own attempt, for the call's whole deadline
//! (timing the attempt out meanwhile). `tick` asks `works_for` first and
//! answers `InSinkCall` at once; another engine's `tick` may be called
//! there.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

thread_local! {
    /// The engine whose IO worker this thread is; 0 for none.
    static ENGINE: Cell<u64> = const { Cell::new(0) };
}

static NEXT_ENGINE: AtomicU64 = AtomicU64::new(1);

/// An engine's number, which no other engine of the process has.
pub(super) fn new_engine_id() -> u64 {
    NEXT_ENGINE.fetch_add(1, Ordering::Relaxed)
}

/// Marks the calling thread as an IO worker of engine `engine_id`, for
/// its lifetime.
pub(super) fn mark(engine_id: u64) {
    ENGINE.set(engine_id);
}

/// Whether the calling thread is an IO worker of engine `engine_id`.
pub(super) fn works_for(engine_id: u64) -> bool {
    ENGINE.get() == engine_id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_is_marked_for_its_own_engine_only() {
        let (mine, other) = (new_engine_id(), new_engine_id());
        assert_ne!(mine, other);
        assert!(!works_for(mine));
        std::thread::spawn(move || {
            mark(mine);
            assert!(works_for(mine));
            assert!(!works_for(other));
        })
        .join()
        .unwrap();
        assert!(!works_for(mine));
    }
}
