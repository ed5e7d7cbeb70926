//! A key's held rows made due at the pace the key takes them.
//!
//! Rows of a key wait held (past every due time, see `held`) while its
//! sink is paused or, never attempted, while its breaker is open, and
//! beyond a slow key's queue (see `slow_keys`: its wake is started as it
//! holds the first, and goes over the held rows again when one is held
//! behind the place it reached). When
//! they may run again — the breaker's probe closed it, `Engine::wake_sink`
//! did, its open period ended with no probe row (the probe check below),
//! or a pass over the held rows found them free (a resume, a reload, a new
//! core) — they are not all made due at once. A receiver that fails often
//! but not always opens the breaker again a few hundred attempts later,
//! and every row made due and not yet started is then held again: two
//! writes a backlog row each time the breaker turned, however few rows
//! the sink took in between.
//!
//! So a wake per key walks its tenant's held rows once, in row order, and
//! makes due only as many of the key's as keep it busy: its window is
//! [`WAKE_CALLS_PER_SLOT`] calls' worth of rows per slot of
//! `dispatch.sink_concurrency`, counting the rows it made due that no
//! scan claimed yet and those queued on the key. A breaker that opens
//! again holds no more than that window again, and stops the wake: the
//! rows it had not reached wait for the breaker as rows it holds, and the
//! close that follows starts a new wake from the first held row, as does
//! dropping the breaker (a reload that turns breakers off, `wake_sink`):
//! rows claimed while its probe ran wait held behind a wake under way. A key
//! whose sink is paused or gone drops its wake too: the resume, or the
//! reload that removed it, starts a pass over the held rows, which wakes
//! (or settles) them. A reload that moves a source's sinks starts each
//! wake of its keys again from the first held row: rows it passed as
//! another key's may bind to its key now (`Core::handle_reconfigure`).
//!
//! Each scan ends with a step of the wakes that may go on, in turn from
//! where the last step stopped, reading at most `WAKE_STEP_ROWS` held rows
//! (a key with no room counting one). A key's woken row claimed, or its
//! queued row started, frees room in its window and asks for the next
//! step. The step reads the index before the scan's own holds are written
//! into it: a step that walks past the place of a row held since the last
//! step, or to the end of the held rows it can read, goes over the held
//! rows again, as for a row held behind its place. Wakes are not stored:
//! a new core's pass over the held rows starts them again.

use super::*;
use crate::limits::{MAX_DUE_PAGE_ROWS, WAKE_STEP_ROWS};
use std::collections::{BTreeMap, HashSet};
use std::ops::Bound;

/// The wakes under way and the rows they made due that no scan claimed yet.
#[derive(Debug, Default)]
pub(super) struct KeyWakes {
    /// Per key, the last held row its wake read (before its tenant's first
    /// held row when it starts).
    after: BTreeMap<SinkKey, DueEntry>,
    /// The key the next step starts at (the first when `None`).
    turn: Option<SinkKey>,
    /// A wake may go on: one started, a step ran out of budget, or a key's
    /// row started.
    step_wanted: bool,
    /// Rows made due by a wake and not claimed since, with their key.
    woken: HashMap<RowId, SinkKey>,
    /// `woken`, counted per key.
    woken_per_key: HashMap<SinkKey, usize>,
    /// Keys with a row held behind their wake's place: the wake goes over
    /// the held rows again once it reaches their end.
    rewind: HashSet<SinkKey>,
    /// Per key with a wake, the first row held since the wakes' last step:
    /// its hold is not in the index the next step reads (a scan's holds are
    /// written after its step), so a step that walks past its place, or to
    /// the end of the held rows it can read, goes over them again.
    held_unwritten: HashMap<SinkKey, RowId>,
}

impl KeyWakes {
    /// Whether a wake is under way.
    pub(super) fn any(&self) -> bool {
        !self.after.is_empty()
    }

    /// Whether a step of the wakes is wanted now.
    pub(super) fn step_wanted(&self) -> bool {
        self.step_wanted
    }

    /// Ends `key`'s wake; whether it had one.
    pub(super) fn stop(&mut self, key: &SinkKey) -> bool {
        self.rewind.remove(key);
        self.after.remove(key).is_some()
    }

    /// Whether `key` has a wake under way.
    pub(super) fn under_way(&self, key: &SinkKey) -> bool {
        self.after.contains_key(key)
    }

    /// The keys with a wake under way.
    pub(super) fn keys(&self) -> impl Iterator<Item = &SinkKey> {
        self.after.keys()
    }

    /// Whether `row` was made due by a wake and not claimed since.
    pub(super) fn is_woken(&self, row: RowId) -> bool {
        !self.woken.is_empty() && self.woken.contains_key(&row)
    }

    /// `row` of `key` was just held: whether `key`'s wake is under way,
    /// marked to go over the held rows again if it has passed the row.
    pub(super) fn held_behind(&mut self, key: &SinkKey, row: RowId) -> bool {
        let Some(after) = self.after.get(key) else {
            return false;
        };
        if (HELD_DUE_MS, row) <= (after.due_at_ms, after.row) {
            self.rewind.insert(key.clone());
        }
        let first = self.held_unwritten.entry(key.clone()).or_insert(row);
        *first = (*first).min(row);
        true
    }

    /// Asks for a step of the wakes under way.
    pub(super) fn ask_step(&mut self) {
        self.step_wanted = true;
    }

    /// A row of `key` started: if it has a wake, its window has room.
    pub(super) fn started(&mut self, key: &SinkKey) {
        self.step_wanted |= self.after.contains_key(key);
    }

    /// A woken row left the due index (claimed, or dead-lettered where it
    /// was): it no longer counts in its key's window, which has room.
    fn forget(&mut self, row: RowId) {
        if self.woken.is_empty() {
            return; // The common case, on the claim path: no hashing.
        }
        let Some(key) = self.woken.remove(&row) else {
            return;
        };
        self.step_wanted |= self.after.contains_key(&key);
        let count = self.woken_per_key.get_mut(&key).expect("counted");
        *count -= 1;
        if *count == 0 {
            self.woken_per_key.remove(&key);
        }
    }

    fn note_woken(&mut self, row: RowId, key: &SinkKey) {
        if self.woken.insert(row, key.clone()).is_none() {
            *self.woken_per_key.entry(key.clone()).or_default() += 1;
        }
    }

    /// The key whose wake steps next, from `turn` on, wrapping around.
    fn next_key(&self) -> Option<SinkKey> {
        let from = match &self.turn {
            Some(turn) => Bound::Included(turn),
            None => Bound::Unbounded,
        };
        let mut keys = self.after.range((from, Bound::Unbounded)).map(|(k, _)| k);
        keys.next().or_else(|| self.after.keys().next()).cloned()
    }

    /// The key after `key`, where the next step starts.
    fn pass_turn(&mut self, key: &SinkKey) {
        let mut after = self.after.range((Bound::Excluded(key), Bound::Unbounded));
        self.turn = after.next().map(|(k, _)| k.clone());
    }
}

impl Core {
    /// Starts a wake of `key`'s held rows from the first (see the module
    /// docs), afresh if one is under way: rows it passed may be held again.
    pub(super) fn start_key_wake(&mut self, key: &SinkKey) {
        let wakes = &mut self.key_wakes;
        wakes.rewind.remove(key);
        wakes
            .after
            .insert(key.clone(), held::before_held(&key.tenant));
        wakes.ask_step();
    }

    /// Starts a wake of `key`'s held rows unless one is under way (which
    /// reaches every row held before it started), and asks for a step: a
    /// reload may have given a waiting one room, or closed its breaker.
    pub(super) fn ensure_key_wake(&mut self, key: &SinkKey) {
        if self.key_wakes.after.contains_key(key) {
            self.key_wakes.ask_step();
        } else {
            self.start_key_wake(key);
        }
    }

    /// Takes a due entry out of the due index (a claim op): a row a wake
    /// made due no longer counts in its key's window.
    pub(super) fn take_due(&mut self, entry: &DueEntry) {
        self.ops.push_back(StoreOp::claim_of(entry));
        self.key_wakes.forget(entry.row);
    }

    /// One step of the wakes under way (see the module docs).
    pub(super) fn key_wake_step(&mut self, now_ms: u64, index: &mut dyn DueIndex) {
        // Written before the next step: it sees them.
        let held_unwritten = std::mem::take(&mut self.key_wakes.held_unwritten);
        if !self.key_wakes.step_wanted {
            return;
        }
        self.key_wakes.step_wanted = false;
        let (mut budget, mut visits) = (WAKE_STEP_ROWS, self.key_wakes.after.len());
        while visits > 0 {
            let Some(key) = self.key_wakes.next_key() else {
                break;
            };
            if budget == 0 {
                self.key_wakes.turn = Some(key);
                self.key_wakes.step_wanted = true;
                break;
            }
            let read = self.step_key(now_ms, &key, budget, held_unwritten.get(&key), index);
            budget -= read.clamp(1, budget);
            self.key_wakes.pass_turn(&key);
            visits -= 1;
        }
    }

    /// Checks, for each breaker holding rows whose open period ended a
    /// while ago (see `Core::check_probe_after`), that a probe started or
    /// a row of its key was claimed to be one; if not, its key's held rows
    /// wake, and one of them is the probe.
    pub(super) fn check_probes(&mut self, now_ms: u64) {
        while let Some((at_ms, key)) = self.probe_checks.first().cloned() {
            if at_ms > now_ms {
                break;
            }
            self.probe_checks.pop_first();
            let unprobed = (self.breakers.get(&key)).is_some_and(|b| b.awaits_probe(now_ms));
            let claimed = (self.keys.get(&key)).is_some_and(|k| !k.queue.is_empty() || k.calls > 0);
            if unprobed && !claimed {
                self.start_key_wake(&key);
            }
        }
    }

    /// One key's step: makes due as many of its held rows as its window
    /// has room for, reading at most `budget` held rows; returns how many
    /// it read. The wake ends once it read its tenant's last held row, or
    /// when its sink is paused or gone. `held_unwritten`: the first row of
    /// the key held since the last step, which the index does not have yet.
    fn step_key(
        &mut self,
        now_ms: u64,
        key: &SinkKey,
        budget: usize,
        held_unwritten: Option<&RowId>,
        index: &mut dyn DueIndex,
    ) -> usize {
        if !self.catalog.has_key(key) || self.catalog.is_paused(&key.source_id, key.sink_index) {
            self.key_wakes.stop(key);
            return 0;
        }
        if (self.breakers.get(key)).is_some_and(|b| b.keeps_rows_held(now_ms)) {
            return 0;
        }
        let mut room = self.wake_room(key);
        let mut after = self.key_wakes.after[key].clone();
        let (mut read, mut page) = (0, Vec::new());
        while room > 0 && read < budget {
            let want = room.min(budget - read).min(MAX_DUE_PAGE_ROWS);
            index.due_page(&key.tenant, u64::MAX, Some(&after), want, &mut page);
            read += page.len();
            let read_to_end = page.len() < want;
            for entry in page.drain(..) {
                after = entry.clone();
                if self.wake_if_of(now_ms, key, entry, index) == 1 {
                    self.key_wakes.note_woken(after.row, key);
                    self.scan_requested = true;
                    room -= 1;
                }
            }
            // A row held since the last step is not in the index yet: a walk
            // that passed its place, or reached the end of what the index
            // has, goes over the held rows again.
            let passed = |&row: &RowId| (HELD_DUE_MS, row) <= (after.due_at_ms, after.row);
            if held_unwritten.is_some_and(|row| read_to_end || passed(row)) {
                self.key_wakes.rewind.insert(key.clone());
            }
            if read_to_end && self.key_wakes.rewind.remove(key) {
                // Over the held rows again from the first, at the next step:
                // the rows this one made due are written by then.
                let first = held::before_held(&key.tenant);
                self.key_wakes.after.insert(key.clone(), first);
                self.key_wakes.step_wanted = true;
                return read;
            }
            if read_to_end {
                self.key_wakes.stop(key);
                if let Some(state) = self.keys.get_mut(key) {
                    state.holding = false;
                }
                return read;
            }
        }
        self.key_wakes.after.insert(key.clone(), after);
        // Stopped for the budget with room left: the next scan goes on.
        self.key_wakes.step_wanted |= room > 0;
        read
    }

    /// How many more of `key`'s rows its wake may make due now: its window
    /// less its rows made due and not claimed yet, and those queued.
    fn wake_room(&self, key: &SinkKey) -> usize {
        let window = self.wake_window(key);
        let woken = self.key_wakes.woken_per_key.get(key).copied().unwrap_or(0);
        let queued = self.keys.get(key).map_or(0, |k| k.queue.len());
        window.saturating_sub(woken + queued)
    }
}
