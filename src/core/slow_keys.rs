//! A slow sink's backlog waits held, not claimed in the windows. A key
//! queues at most the rows its slots start in `QUEUE_DRAIN_MS` at the time
//! its calls take (on average, over its last calls), and at least its
//! wake window (`WAKE_CALLS_PER_SLOT` calls' worth per slot). A row claimed
//! beyond that is held (see `held`), as is every row claimed after it
//! until the key's wake has woken them all, and the wake (see `key_wake`)
//! makes them due in row order as its calls start, a wake window at a
//! time. So four tenants whose receivers take 200 ms a call hold a
//! window's worth of rows each, not the shard's whole window: with the
//! defaults (a tenant holds 1,024 rows, a shard 4,096) they would, and
//! every other tenant's rows would wait for the room their calls free.
//! A queue claimed before the key's calls were timed (a backlog there
//! when the shard opened) is trimmed to the wake window when its first
//! call ends.
//!
//! Only while another tenant has rows claimed on the shard:
//! a lone tenant's backlog drains fastest claimed, as before (holding and
//! waking cost two writes a row: a backlog of 20,000 rows whose receiver
//! was blocked, then quick, drained at 36-39k rows/s held against 78-82k
//! claimed). A key of a sink with a rate is paced instead (see `pacing`); a key
//! whose calls are not timed yet queues what the windows let it; a quick
//! one's queue is long (8 slots of 1 ms calls: 8,000 rows), so it is held
//! back only where the windows would let one key hold seconds of work. A
//! row the wake made due queues whatever the key's queue holds (the wake's
//! window bounds them), and a breaker's probe is never held. A row held
//! behind the wake's place in its walk (a retry of an older row) has the
//! wake go over the held rows again once it reaches their end, so none is
//! left.

use super::*;
use crate::limits::{QUEUE_DRAIN_MS, WAKE_CALLS_PER_SLOT};

/// How much a call's time moves a key's average: 1/8 (the last dozen
/// calls or so weigh most).
const CALL_TIME_WEIGHT: u64 = 8;

impl Core {
    /// Counts a call of `key` that took `took_us` in its average.
    pub(super) fn note_call_time(&mut self, key: &SinkKey, took_us: u64) {
        let state = self.keys.get_mut(key).expect("a running key");
        let took_us = took_us.max(1);
        state.call_time_us = match state.call_time_us {
            0 => took_us,
            average if took_us >= average => average + (took_us - average) / CALL_TIME_WEIGHT,
            average => average - (average - took_us) / CALL_TIME_WEIGHT,
        };
    }

    /// The most rows `key` queues: what its slots start in
    /// `QUEUE_DRAIN_MS` at its calls' time, and at least its wake window;
    /// `None` for a key of a sink with a rate or whose calls are not
    /// timed, and while no other tenant has rows claimed on the shard
    /// (nobody to keep room for: a lone tenant's backlog drains fastest
    /// claimed, and its window is a quarter of the shard's by default).
    fn queue_cap(&self, key: &SinkKey) -> Option<usize> {
        let call_time_us = self.keys.get(key).map_or(0, |k| k.call_time_us);
        if call_time_us == 0 || self.due.claiming() < 2 {
            return None;
        }
        let rated = (self.catalog).call_interval_us(&key.source_id, key.sink_index);
        if rated.is_some() {
            return None;
        }
        let window = self.wake_window(key);
        let per_call = (window / WAKE_CALLS_PER_SLOT) as u64;
        let drained = per_call.saturating_mul(QUEUE_DRAIN_MS * 1_000) / call_time_us;
        Some(window.max(usize::try_from(drained).unwrap_or(usize::MAX)))
    }

    /// Whether a row of `key` just claimed (`woken`: made due by the key's
    /// wake) waits held for the key's wake rather than queued.
    pub(super) fn holds_for_slow_key(&self, key: &SinkKey, woken: bool) -> bool {
        let Some(cap) = self.queue_cap(key).filter(|_| !woken) else {
            return false;
        };
        let state = self.keys.get(key).expect("a capped key has state");
        let holding = state.holding && self.key_wakes.under_way(key);
        holding || state.queue.len() >= cap
    }

    /// Holds the rows queued on `key` beyond its wake window, newest
    /// first, once its queue is over its cap: rows claimed before its
    /// calls were timed, or while they were quicker.
    pub(super) fn trim_slow_queue(&mut self, key: &SinkKey) {
        let Some(cap) = self.queue_cap(key) else {
            return;
        };
        let window = self.wake_window(key);
        let state = self.keys.get_mut(key).expect("a timed key has state");
        if state.queue.len() <= cap {
            return;
        }
        let newest: Vec<RowId> = state.queue.drain(window..).collect();
        for row in newest {
            let claim = self.claims.remove(&row).expect("a queued row has a claim");
            self.release(&claim);
            self.hold_for_slow_key(key, row, claim.fields);
        }
    }

    /// Holds a row of slow `key` for its wake (see the module docs).
    pub(super) fn hold_for_slow_key(&mut self, key: &SinkKey, row: RowId, fields: RowFields) {
        self.keys
            .get_mut(key)
            .expect("a capped key has state")
            .holding = true;
        self.hold(row, fields, SLOW_SINK_ERROR);
        if !self.key_wakes.held_behind(key, row) {
            self.ensure_key_wake(key);
        }
    }

    /// A key's wake window: `WAKE_CALLS_PER_SLOT` calls' worth of rows per
    /// slot of `dispatch.sink_concurrency`.
    pub(super) fn wake_window(&self, key: &SinkKey) -> usize {
        let rows_per_call = (self.catalog)
            .batch_max_entries(&key.source_id, key.sink_index)
            .map_or(1, |n| usize::from(n.get()));
        let slots = self.dispatch.sink_concurrency as usize;
        WAKE_CALLS_PER_SLOT * slots * rows_per_call
    }
}
