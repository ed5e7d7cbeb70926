//! How a shard logs a store that keeps failing (a full disk, an I/O
//! error): at most one line per `STORE_FAILURE_LOG_INTERVAL_MS`, saying
//! how many failed since the last, and one line once writes have
//! succeeded with no failure for that long. A store that fails every batch
//! under load, or every other one as a nearly full disk does, would
//! otherwise log a line per batch, thousands a second, onto what is often
//! the same full disk. `goad_store_failures_total` counts every failure.

use crate::limits::{STORE_FAILURE_LOG_INTERVAL_MS, STORE_RETRY_MS};
use crate::store::{ShardStore, StoreError};

#[derive(Debug, Default)]
pub(super) struct FailureLog {
    /// When the run of failures under way began, and how many it holds.
    failing_since_ms: Option<u64>,
    failed: u64,
    last_failed_at_ms: u64,
    /// A write succeeded since the last failure.
    wrote_since: bool,
    /// Failures since the last line, and when that was.
    unlogged: u64,
    logged_at_ms: Option<u64>,
}

impl FailureLog {
    /// A failed write (or recovery, each tried again `STORE_RETRY_MS`
    /// later) to `store`: logged as `msg` with its cause and what the disk
    /// has free, unless a line was logged within the interval.
    pub(super) fn failed(
        &mut self,
        now_ms: u64,
        msg: &str,
        cause: &StoreError,
        store: &ShardStore,
    ) {
        self.failing_since_ms.get_or_insert(now_ms);
        self.failed += 1;
        self.last_failed_at_ms = now_ms;
        self.wrote_since = false;
        if self
            .logged_at_ms
            .is_some_and(|at_ms| now_ms < at_ms + STORE_FAILURE_LOG_INTERVAL_MS)
        {
            self.unlogged += 1;
            return;
        }
        // LMDB reports a write the disk cut short as an I/O error, so the
        // line says what the disk has free.
        let available = store.disk_available_bytes();
        let available: &dyn std::fmt::Display = match &available {
            Some(bytes) => bytes,
            None => &"unknown",
        };
        crate::log::error(
            msg,
            &[
                ("error", cause),
                ("disk_available_bytes", available),
                ("again_in_ms", &STORE_RETRY_MS),
                ("failures_since_last_line", &self.unlogged),
            ],
        );
        self.logged_at_ms = Some(now_ms);
        self.unlogged = 0;
    }

    /// A write committed.
    pub(super) fn wrote(&mut self) {
        self.wrote_since = true;
    }

    /// Ends a run of failures once writes have succeeded with no failure
    /// for the interval, saying so.
    pub(super) fn tick(&mut self, now_ms: u64) {
        let Some(since_ms) = self.failing_since_ms else {
            return;
        };
        if !self.wrote_since || now_ms < self.last_failed_at_ms + STORE_FAILURE_LOG_INTERVAL_MS {
            return;
        }
        crate::log::info(
            "shard store writes succeed again",
            &[
                ("failed_writes", &self.failed),
                ("failing_since_ms", &since_ms),
            ],
        );
        *self = FailureLog::default();
    }
}
