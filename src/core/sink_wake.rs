//! Waking a sink (`Engine::wake_sink`): its receiver is back, so the rows
//! it would have waited out backoffs and an open breaker for are due now.
//!
//! The first step closes the key's breaker (reported closed, as a reload
//! closes one) and, when the breaker held never-attempted rows, starts the
//! key's wake, which makes them due at the pace the key takes them (see
//! `key_wake`). Each step then reads at most a step's worth of the
//! tenant's due index after now (rows waiting out a backoff, or parked to
//! the end of an open period) and makes those of the sink due now, with
//! their attempts and first attempt kept: the sink's `max_attempts` and
//! retry horizon count them as before. The scan claims them as any due
//! rows, within the windows and the sink's concurrency, by the tenants'
//! round robin.
//!
//! Rows held for a paused sink are left held (the engine refuses to wake a
//! paused sink), rows claimed or in flight are left to their attempts, and
//! rows waiting in an ordering lane behind its head are left in it: the
//! head is woken, and a row that comes to head the lane is due when its
//! record says — at once, unless an attempt from before a shard restart
//! left it a backoff to wait out (a rare case the wake does not cut).
//! The walk goes in due order from now: a row it made due sits before it,
//! and a row a failure meanwhile rescheduled after it is woken again. Rows
//! waiting for their turns behind the sink's rate (see `pacing`) are made
//! due too, and paced again from now, at the sink's rate as it stands.

use super::*;
use crate::limits::MAX_DUE_PAGE_ROWS;

/// What one step of waking a sink did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WakeStep {
    /// Rows made due now (durably, once the step's write is committed).
    pub woken: u64,
    /// Whether the step closed the key's open breaker (the first step only).
    pub breaker_closed: bool,
    /// The last due entry read, where the next step goes on; `None` once
    /// the walk reached the held rows.
    pub next: Option<DueEntry>,
}

/// Where a walk of `tenant`'s due index for a wake starts at `now_ms`:
/// after the rows due by now, which are the scan's already.
pub fn wake_start(tenant: &TenantId, now_ms: u64) -> DueEntry {
    DueEntry {
        tenant: tenant.clone(),
        due_at_ms: now_ms,
        row: RowId::MAX,
        size_bytes: 0,
    }
}

impl Core {
    /// One step of waking `key`'s rows (see the module docs): `after` is
    /// `None` for the first step, which also closes the key's breaker,
    /// then the previous step's `next`. Reads at most `max_entries` due
    /// entries.
    pub fn handle_wake_sink(
        &mut self,
        now_ms: u64,
        key: &SinkKey,
        after: Option<DueEntry>,
        max_entries: usize,
        index: &mut dyn DueIndex,
    ) -> WakeStep {
        let breaker_closed = after.is_none() && self.forget_breaker(key);
        if after.is_none() {
            self.forget_paced_turns(key);
        }
        let start = match after {
            Some(entry) if entry.due_at_ms > now_ms => entry,
            _ => wake_start(&key.tenant, now_ms),
        };
        let mut page = Vec::new();
        let rows = max_entries.clamp(1, MAX_DUE_PAGE_ROWS);
        index.due_page(&key.tenant, HELD_DUE_MS - 1, Some(&start), rows, &mut page);
        let next = page.last().cloned().filter(|_| page.len() == rows);
        let mut woken = 0;
        for entry in page {
            woken += self.wake_if_of(now_ms, key, entry, index);
        }
        self.scan_requested |= woken > 0;
        WakeStep {
            woken,
            breaker_closed,
            next,
        }
    }

    /// One due entry: made due now (1) if its row binds to `key`.
    pub(super) fn wake_if_of(
        &mut self,
        now_ms: u64,
        key: &SinkKey,
        entry: DueEntry,
        index: &mut dyn DueIndex,
    ) -> u64 {
        self.make_due_if(now_ms, entry, index, |_, _, bound| {
            bound.as_ref() == Some(key)
        })
    }
}
