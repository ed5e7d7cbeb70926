//! Pacing: the rows of a sink with a `max_calls_per_s` wait for their
//! turns in the store, not in the windows. A key queues the rows its next
//! `RATE_QUEUE_AHEAD_MS` of turns can start; a row claimed beyond them is
//! written back due at the turn it would have had, after the rows paced
//! before it, one turn apart (a batch's worth of rows share a turn). So a
//! backlog behind a rate — a Slack webhook's 1,500 messages at one a
//! second — holds a second's worth of window room, not its tenant's whole
//! window for 25 minutes: four such tenants would hold the default shard
//! window, and every other tenant's rows would wait for room their turns
//! free one a second.
//!
//! A row written back carries [`PACED_ERROR`] as its last error. A key's
//! paced turns go on from the last one given (so the rows claimed later
//! wait behind its backlog) until its rows are made due again by a wake
//! of its sink (`Engine::wake_sink`), or by a reload or restart that
//! changes its rate (see `repace`): then the rows claimed beyond its
//! queue are paced from the queue's end, at its rate.
//!
//! A row is paced once while the key's calls keep to their turns; one
//! whose turn came while the key's slots were all busy is paced again,
//! so rows are written back at most as fast as the rate. A retried row is
//! paced no later than its retry horizon; one claimed at or past it
//! queues, to be dead-lettered when taken. A key's paced turns are kept in
//! memory: after a restart, rows claimed before the last paced turn may
//! queue ahead of it, which only reorders a sink whose order is not kept.

use super::*;
use crate::limits::RATE_QUEUE_AHEAD_MS;

impl Core {
    /// Paces a row of `key` just claimed at `now_ms` when `key` has a rate
    /// and its queue holds the rows its next turns start: the time the row
    /// is due again, its turn, which the next row paced comes after.
    /// `None` when the row may queue.
    pub(super) fn pace_row(
        &mut self,
        now_ms: u64,
        key: &SinkKey,
        fields: &RowFields,
    ) -> Option<u64> {
        let interval_us = (self.catalog).call_interval_us(&key.source_id, key.sink_index)?;
        let horizon_ms = (fields.first_attempt_at_ms != 0)
            .then(|| self.retry_for(key).horizon_ms(fields.first_attempt_at_ms));
        if horizon_ms.is_some_and(|horizon_ms| now_ms >= horizon_ms) {
            return None; // It queues, to be dead-lettered when taken.
        }
        let batch_max = (self.catalog).batch_max_entries(&key.source_id, key.sink_index);
        let rows_per_turn = batch_max.map_or(1, |max| u64::from(max.get()));
        let spacing_us = (interval_us / rows_per_turn).max(1);
        let queue_max = (RATE_QUEUE_AHEAD_MS * 1_000 / spacing_us).max(rows_per_turn);
        let state = self.key_mut(key);
        let queued = state.queue.len() as u64;
        if queued < queue_max {
            return None;
        }
        let after_queue_us = state.next_call_us.max(now_ms * 1_000) + queued * spacing_us;
        let turn_us = after_queue_us.max(state.paced_until_us + spacing_us);
        state.paced_until_us = turn_us;
        // After now: the turn is at least one spacing past it.
        let due_at_ms = turn_us.div_ceil(1_000);
        Some(horizon_ms.map_or(due_at_ms, |horizon_ms| due_at_ms.min(horizon_ms)))
    }

    /// Forgets the turns given to `key`'s rows written back: its rows
    /// were made due again.
    pub(super) fn forget_paced_turns(&mut self, key: &SinkKey) {
        if let Some(state) = self.keys.get_mut(key) {
            state.paced_until_us = 0;
        }
    }
}
