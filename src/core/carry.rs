//! What a key knows of its sink follows the sink when a reload moves it
//! to another index (found by its spot: place and rank, see `catalog`).
//!
//! Its next call (a rate's turn, see `slots`), shifted where the reload
//! changed the rate: the next call comes one new interval after the last.
//! Its calls running: they count against the sink's `sink_concurrency` at
//! its new index, not against the sink that took the old one, and their
//! rows are re-keyed, so an attempt's outcome is its own sink's — its
//! breaker (a probe running across the move closes or reopens the
//! breaker that moved with it, see `breaker_keys`), its retry keys, its
//! counts. And its counts and call time, which `goad sinks` shows.
//!
//! A sink the reload removed, or gave another destination where it stood,
//! has nowhere to go. Its calls running are no sink's: they keep its key
//! until they end, but count against no sink's `sink_concurrency` there
//! (the sink that takes its index, or its new destination, has all its
//! slots) and their outcomes tell no breaker and no slow-sink call time
//! (they speak of a receiver the config no longer has). Their rows settle
//! as any other's — a failure is retried by the retry keys of the sink at
//! the key now (the same entry, for a sink given another destination) and
//! bound again at its next claim, where a removed sink's row is
//! dead-lettered as `sink_gone` — and the key's counts take them: a key
//! counts the attempts started at it.

use super::*;
use std::mem::take;

/// A moved sink's state, taken from the key of its old index.
struct Carried {
    next_call_us: u64,
    calls: u64,
    outcomes: SinkOutcomes,
    call_time_us: u64,
}

impl Core {
    /// Carries the key states of the sinks a reload from `previous`
    /// moved, holds each sink with a rate to its new one, and sets the
    /// calls running of the sinks gone apart (see the module docs). The
    /// keys looked at are those whose pace changed and `others` (the keys
    /// that may bind elsewhere: of sources whose sinks moved, and the
    /// stray keys of sources moved to another tenant). A key whose sink
    /// moved away keeps its turn for the sink that takes its index, if
    /// none is carried to it: at most one interval late.
    pub(super) fn carry_key_states(&mut self, previous: &Arc<Catalog>, others: &[SinkKey]) {
        let catalog = self.catalog.clone();
        let changed = catalog.paces_changed_since(previous);
        let keys: HashSet<&SinkKey> = changed.iter().chain(others).collect();
        let (mut carried, mut gone) = (Vec::new(), HashSet::new());
        for key in keys {
            let Some(state) = self.keys.get_mut(key) else {
                continue;
            };
            let Some(to) = catalog.key_moved_from(previous, key) else {
                if state.calls > 0 {
                    state.gone_calls += take(&mut state.calls);
                    gone.insert(key.clone());
                }
                continue;
            };
            let then_us = previous.call_interval_us(&key.source_id, key.sink_index);
            let now_us = catalog.call_interval_us(&to.source_id, to.sink_index);
            let next_call_us = match (then_us, now_us) {
                (Some(then_us), Some(now_us)) => {
                    (state.next_call_us + now_us).saturating_sub(then_us)
                }
                _ => state.next_call_us,
            };
            if to == *key {
                state.next_call_us = next_call_us;
                continue;
            }
            let moved = Carried {
                next_call_us,
                calls: take(&mut state.calls),
                outcomes: take(&mut state.outcomes),
                call_time_us: take(&mut state.call_time_us),
            };
            carried.push((key.clone(), to, moved));
        }
        // Taken from every old key before any is given: a swap's two keys
        // each take the other's.
        let mut running_to = HashMap::new();
        for (from, to, moved) in carried {
            let state = self.key_mut(&to);
            state.next_call_us = moved.next_call_us;
            state.calls += moved.calls;
            state.outcomes = moved.outcomes;
            state.call_time_us = moved.call_time_us;
            if moved.calls > 0 {
                running_to.insert(from, to);
            }
        }
        if running_to.is_empty() && gone.is_empty() {
            return;
        }
        let running = self.claims.values_mut();
        for claim in running.filter(|claim| claim.running.is_some() && !claim.sink_gone) {
            if gone.contains(&claim.key) {
                claim.sink_gone = true;
            } else if let Some(to) = running_to.get(&claim.key) {
                claim.key = to.clone();
            }
        }
    }
}
