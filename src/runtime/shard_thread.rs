//! Which thread is a shard's. A host's callbacks (`on_outcome`,
//! `on_breaker`, `commit_then`'s) run on a shard's thread; an engine call
//! made there that waits for the shards' answers would wait for the very
//! thread it blocks, stalling the shard for the call's whole deadline.
//! Those calls ask `is_current` first and answer `OnShardThread` at once.

use std::cell::Cell;

thread_local! {
    static ON_SHARD: Cell<bool> = const { Cell::new(false) };
}

/// Marks the calling thread as a shard's, for its lifetime.
pub(super) fn mark() {
    ON_SHARD.set(true);
}

/// Whether the calling thread is a shard's.
pub(super) fn is_current() -> bool {
    ON_SHARD.get()
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_a_marked_thread_is_a_shards() {
        assert!(!super::is_current());
        std::thread::spawn(|| {
            super::mark();
            assert!(super::is_current());
        })
        .join()
        .unwrap();
        assert!(!super::is_current());
    }
}
