//! What a shard tells operators about dead-lettering: for each sink key
//! whose answers dead-lettered rows, one log line at most every
//! `DEAD_LOG_INTERVAL_MS` with how many and its latest failure, so a
//! receiver refusing everything logs a line per interval, not one per
//! row. The core counts them; the shard thread, which does IO, writes
//! the lines (the simulator, which drives the same core, does not).

use super::breaker_log::log_change;
use super::step::ShardState;
use crate::limits::DEAD_LOG_INTERVAL_MS;
use crate::log::Level;

/// When a shard next logs its keys' dead-lettered rows.
#[derive(Debug, Default)]
pub(super) struct DeadLog {
    next_at_ms: u64,
}

impl DeadLog {
    /// Logs each key's rows dead-lettered since the last line, once the
    /// interval since it has passed.
    pub fn run(&mut self, shard: usize, state: &mut ShardState, now_ms: u64) {
        if now_ms < self.next_at_ms {
            return;
        }
        let unlogged = state.take_unlogged_dead();
        if unlogged.is_empty() {
            return;
        }
        self.next_at_ms = now_ms + DEAD_LOG_INTERVAL_MS;
        for dead in unlogged {
            let latest = dead.latest_failure.unwrap_or_default();
            log_change(
                Level::Warn,
                "rows dead-lettered by their sink's answers",
                shard,
                &dead.key,
                &[("rows", &dead.rows), ("latest_failure", &latest)],
            );
        }
    }
}
