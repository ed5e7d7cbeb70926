//! A shard's state rebuilt from its store, as a process restart would
//! rebuild it: after a panic in an iteration or a failed write. The open
//! write transaction is dropped, a new core reads the store, and the
//! attempts the old core left running are handed to it.

use super::*;
use crate::limits::STORE_RETRY_MS;

impl ShardState<'_> {
    /// After a failed write: the shard restarted from the store, and no scan
    /// for `STORE_RETRY_MS`.
    pub(super) fn rebuild(&mut self, now_ms: u64, cause: &StoreError) {
        self.failure_log.failed(
            now_ms,
            "shard store write failed; rebuilding the shard's state from the store",
            cause,
            self.store,
        );
        self.store_failures += 1;
        self.holdoff_until_ms = now_ms + STORE_RETRY_MS;
        self.restart(now_ms);
    }

    /// After a panic in the middle of an iteration (or a failed write): the
    /// open write transaction dropped unwritten, and a new core from the
    /// store, as after a process restart. Job ids continue, so late results
    /// of the old core's attempts are discarded rather than mistaken for
    /// new ones.
    pub fn restart(&mut self, now_ms: u64) {
        self.txn = None;
        self.dirty_since_ms = None;
        self.unflushed_ops = 0;
        self.lane_passed_undelivered = false;
        // A restart before the last one's recovery was written keeps the
        // attempts that one still holds for the new core.
        let mut running = self.unrecovered.take().unwrap_or_default();
        running.extend(self.core.running_attempts());
        self.unrecovered = Some(running);
        self.core = self.core.rebuilt(now_ms);
        self.recover_after_restart(now_ms);
    }

    /// Reloads the store as an open does (the rows claimed in it due
    /// again) and holds the rows of the old core's attempts still running
    /// for the new core. While the store cannot be written, this is tried
    /// again every `STORE_RETRY_MS`, and the shard claims nothing meanwhile.
    pub(super) fn recover_after_restart(&mut self, now_ms: u64) {
        let Some(running) = self.unrecovered.take() else {
            return;
        };
        if let Err(e) = self.reload(now_ms) {
            let msg = "shard store reload failed; trying again later";
            self.failure_log.failed(now_ms, msg, &e, self.store);
            self.holdoff_until_ms = now_ms + STORE_RETRY_MS;
            self.unrecovered = Some(running);
            return;
        }
        if let Err(e) = self.adopt_stragglers(running) {
            crate::log::error(
                "could not hold the rows of attempts still running; they may run twice",
                &[("error", &e)],
            );
        }
    }

    /// Holds the rows of the old core's attempts, which still run in the IO
    /// pool, in flight in the store (one synced write), and hands those
    /// attempts to the new core (see `core::stragglers`), so their rows do
    /// not start again beside them and their results settle them.
    fn adopt_stragglers(&mut self, running: Vec<RunningAttempt>) -> Result<(), StoreError> {
        if running.is_empty() {
            return Ok(());
        }
        let mut wtxn = self.store.env.write_txn()?;
        let mut held = Vec::new();
        for attempt in running {
            let (row, tenant) = (attempt.row, attempt.tenant());
            if store::hold_in_flight(self.store, &mut wtxn, &self.tenants, row, tenant)? {
                held.push(attempt);
            }
        }
        wtxn.commit()?;
        for attempt in held {
            self.core.adopt_straggler(attempt);
        }
        Ok(())
    }
}
