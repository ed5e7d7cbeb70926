//! What came of the config reloads (`POST /v1/reload`, SIGHUP), for
//! `/metrics`: a config tool that signals the node learns of a file the
//! node refused from an alert, not only from its log.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

#[derive(Debug, Default)]
pub(crate) struct ReloadCounts {
    applied: AtomicU64,
    failed: AtomicU64,
    /// The latest reload refused its file (the node runs on the config it
    /// had before).
    last_failed: AtomicBool,
}

impl ReloadCounts {
    pub fn applied(&self) {
        self.applied.fetch_add(1, Ordering::Relaxed);
        self.last_failed.store(false, Ordering::Relaxed);
    }

    pub fn failed(&self) {
        self.failed.fetch_add(1, Ordering::Relaxed);
        self.last_failed.store(true, Ordering::Relaxed);
    }

    /// Reloads applied, reloads failed, and whether the latest one
    /// succeeded (true before any).
    pub fn snapshot(&self) -> (u64, u64, bool) {
        (
            self.applied.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
            !self.last_failed.load(Ordering::Relaxed),
        )
    }
}
