//! Dead letters past `dead_letters.retention_ms`, purged by their own
//! shard: every `DEAD_EXPIRY_INTERVAL_MS` (or half the retention, if that
//! is shorter) the shard deletes the rows dead longer than the retention,
//! each hook with its last row, in bounded purge steps (one synced write
//! each) run between its iterations, so a large backlog never stalls
//! deliveries. Off (0) by default: dead letters stay until replayed or
//! purged.

use super::step::ShardState;
use crate::limits::DEAD_EXPIRY_INTERVAL_MS;
use crate::store::{DeadFilter, PurgeStep};

/// Rows one expiry step deletes at most.
const EXPIRY_STEP_ROWS: u64 = 4_096;

/// A shard's expiry of old dead letters.
#[derive(Debug)]
pub(super) struct DeadExpiry {
    retention_ms: u64,
    interval_ms: u64,
    next_at_ms: u64,
    /// Where the sweep under way goes on (`None`: a new sweep starts).
    cursor: Option<Vec<u8>>,
    /// Rows the sweep under way deleted so far.
    swept: u64,
    /// Rows deleted since the shard opened.
    pub expired: u64,
}

impl DeadExpiry {
    /// Expiry after `retention_ms` (0: never), the first sweep at `now_ms`.
    pub fn new(retention_ms: u64, now_ms: u64) -> DeadExpiry {
        DeadExpiry {
            retention_ms,
            interval_ms: DEAD_EXPIRY_INTERVAL_MS.min(retention_ms / 2).max(1),
            next_at_ms: now_ms,
            cursor: None,
            swept: 0,
            expired: 0,
        }
    }

    /// When the shard must wake for the next step; `None` when off.
    pub fn wake_at_ms(&self) -> Option<u64> {
        (self.retention_ms > 0).then_some(self.next_at_ms)
    }

    /// Runs the next purge step if it is due.
    pub fn run(&mut self, shard: usize, state: &mut ShardState, now_ms: u64) {
        if self.wake_at_ms().is_none_or(|at| now_ms < at) {
            return;
        }
        let step = PurgeStep {
            filter: DeadFilter {
                until_ms: now_ms.saturating_sub(self.retention_ms),
                ..DeadFilter::default()
            },
            cursor: self.cursor.take(),
            max_rows: EXPIRY_STEP_ROWS,
        };
        match state.purge(now_ms, &step) {
            Ok(purged) if purged.exhausted => {
                self.expired += purged.purged;
                let swept = std::mem::take(&mut self.swept) + purged.purged;
                if swept > 0 {
                    crate::log::info(
                        "dead letters past their retention deleted",
                        &[
                            ("shard", &shard),
                            ("rows", &swept),
                            ("retention_ms", &self.retention_ms),
                        ],
                    );
                }
                self.next_at_ms = now_ms + self.interval_ms;
            }
            Ok(purged) => {
                self.expired += purged.purged;
                self.swept += purged.purged;
                self.cursor = purged.cursor;
            }
            Err(e) => {
                crate::log::error(
                    "deleting dead letters past their retention failed; trying again later",
                    &[("shard", &shard), ("error", &e)],
                );
                self.swept = 0;
                self.next_at_ms = now_ms + self.interval_ms;
            }
        }
    }
}
