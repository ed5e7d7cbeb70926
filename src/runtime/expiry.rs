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
    /// Rows one step deletes at most.
    step_rows: u64,
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
            step_rows: EXPIRY_STEP_ROWS,
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
            max_rows: self.step_rows,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::core::{Catalog, Core, Grant};
    use crate::store::dead_fixture::dead_rows;
    use crate::store::{DeadPosition, ShardStore};
    use std::sync::Arc;

    /// A shard of the default config over `store`, opened at `now_ms`.
    fn shard_over(store: &ShardStore, now_ms: u64) -> ShardState<'_> {
        let config = Config::default();
        let grant = Grant {
            max_inflight: 100,
            max_inflight_bytes: 1 << 20,
            concurrency: 100,
        };
        let catalog = Arc::new(Catalog::from_config(&config));
        let core = Core::new(config.dispatch, config.retry, catalog, grant, now_ms, 1, 1);
        ShardState::open(store, core, now_ms).unwrap()
    }

    /// A sweep larger than one step goes on from its cursor at the
    /// shard's next iteration, at once, each step taking the rows dead
    /// longer than the retention at its own time; once it has reached the
    /// end, the next sweep comes half a retention later.
    #[test]
    fn a_sweep_larger_than_a_step_goes_on_from_its_cursor_at_once() {
        let dir = tempfile::tempdir().unwrap();
        // Hooks 1 to 10, each with one row, dead at 10 to 19.
        let (store, _) = dead_rows(dir.path(), &["s"; 10]);
        let mut state = shard_over(&store, 1_000);
        let mut expiry = DeadExpiry {
            step_rows: 4,
            ..DeadExpiry::new(1_000, 1_000)
        };
        let seqs_left = || -> Vec<u64> {
            let rows = store.rows().unwrap();
            rows.iter().map(|r| r.row.seq).collect()
        };
        // What the sweep has deleted, when it wakes the shard, the rows
        // left, and the hook its cursor is at.
        let mut sweep = |at_ms: u64| {
            expiry.run(0, &mut state, at_ms);
            let at = (expiry.cursor.as_ref())
                .map(|key| DeadPosition::of_key(0, key).expect("a dead key").row.seq);
            (expiry.expired, expiry.wake_at_ms(), seqs_left(), at)
        };
        // Rows dead until 15 may go: the first step takes 4 of the 6, and
        // the sweep stays due (since 1,000), so the shard does not sleep.
        let left = vec![5, 6, 7, 8, 9, 10];
        assert_eq!(sweep(1_015), (4, Some(1_000), left, Some(4)));
        // The next goes on after hook 4, up to 16 now, and ends the sweep.
        assert_eq!(sweep(1_016), (7, Some(1_516), vec![8, 9, 10], None));
        assert_eq!(sweep(1_515), (7, Some(1_516), vec![8, 9, 10], None));
        // Half a retention later a new sweep takes the rest.
        assert_eq!(sweep(1_516), (10, Some(2_016), vec![], None));
        for n in 1..=10 {
            let id = format!("h{n}");
            assert!(store.hook_status(0, &id).unwrap().is_none(), "{id} is gone");
        }
    }

    /// With no retention, dead letters are kept: the shard never wakes
    /// for them and a run deletes nothing.
    #[test]
    fn without_a_retention_nothing_expires() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = dead_rows(dir.path(), &["s"; 3]);
        let mut state = shard_over(&store, 1_000);
        let mut expiry = DeadExpiry::new(0, 1_000);
        assert_eq!(expiry.wake_at_ms(), None);
        expiry.run(0, &mut state, u64::MAX / 2);
        assert_eq!((expiry.expired, store.dead_count().unwrap()), (0, 3));
    }
}
