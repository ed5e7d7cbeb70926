//! Rows held while their sink is paused (a sink's `paused = true`), and
//! rows never attempted that wait for their key's breaker to close (see
//! `breaker`).
//!
//! A row of a paused sink that comes up — claimed by a scan, or queued on
//! its key when the pause took effect — is written back due at
//! [`HELD_DUE_MS`], after any real time: it stays pending (counted, listed,
//! dead-lettered with its source) but no scan reaches it, so a paused
//! backlog costs one write per row however long the pause lasts. Its
//! attempts and first attempt are kept; its retry horizon is looked at
//! again at its next failure.
//!
//! A pass over the held rows makes those whose sink is not paused
//! (resumed, or gone from the config, which the scan then settles) and
//! whose breaker does not hold them due now. A new core starts one (a
//! shard's open, after a crash too, and its rebuild), and so do a
//! reconfiguration that resumes or removes a paused sink (or any
//! reconfiguration while a breaker holds rows) and a breaker that closes
//! with rows held. It runs in steps, one at the end of each scan, each
//! reading at most `WAKE_STEP_ROWS` held rows (a tenant with none counting
//! one), so a shard with a million held rows, or as many tenants, goes on
//! claiming and committing while it wakes them. Held
//! rows sit at the end of their tenant's due index: a pass reads held rows
//! only.

use super::*;
use crate::limits::WAKE_STEP_ROWS;

/// Where a pass over the held rows stands.
#[derive(Debug, Default)]
pub(super) struct WakePass {
    /// The shard's tenants, read at the pass's first step.
    tenants: Option<Vec<TenantId>>,
    /// The position in `tenants` of the tenant being read.
    next: usize,
    /// The last held row read of that tenant, when a step stopped in it.
    after: Option<DueEntry>,
}

impl Core {
    /// Holds a row of a paused sink (see the module docs).
    pub(super) fn hold(&mut self, row: RowId, fields: RowFields) {
        self.stats.held += 1;
        self.ops.push_back(StoreOp::Hold { row, fields });
    }

    /// Whether a pass over the held rows is under way.
    pub fn is_waking(&self) -> bool {
        self.waking.is_some()
    }

    /// One step of the pass under way, if any: reads at most
    /// `WAKE_STEP_ROWS` held rows, tenant by tenant, making those whose
    /// sink is not paused due at `now_ms`; returns how many. The pass ends
    /// once every tenant's held rows were read.
    pub(super) fn wake_step(&mut self, now_ms: u64, index: &mut dyn DueIndex) -> u64 {
        self.check_probes(now_ms);
        let Some(mut pass) = self.waking.take() else {
            return 0;
        };
        let tenants = pass.tenants.take().unwrap_or_else(|| {
            let mut tenants = Vec::new();
            index.tenants(&mut tenants);
            tenants
        });
        let (mut budget, mut woken) = (WAKE_STEP_ROWS, 0);
        while pass.next < tenants.len() && budget > 0 {
            let tenant = &tenants[pass.next];
            let after = pass.after.take().unwrap_or_else(|| DueEntry {
                tenant: tenant.clone(),
                due_at_ms: HELD_DUE_MS - 1,
                row: RowId::MAX,
                size_bytes: 0,
            });
            let mut page = Vec::new();
            index.due_page(tenant, u64::MAX, Some(&after), budget, &mut page);
            budget -= page.len().max(1);
            match page.last() {
                // The step's budget ran out in this tenant: it may have more.
                Some(last) if budget == 0 => pass.after = Some(last.clone()),
                _ => pass.next += 1,
            }
            for entry in page {
                woken += self.wake_if_resumed(now_ms, entry, index);
            }
        }
        if pass.next < tenants.len() {
            pass.tenants = Some(tenants);
            self.waking = Some(pass);
        }
        self.scan_requested |= woken > 0;
        woken
    }

    /// Starts a pass over the held rows for each breaker holding rows
    /// whose open period ended a while ago (see `Core::check_probe_after`)
    /// with no probe started and no row of its key claimed to be one.
    fn check_probes(&mut self, now_ms: u64) {
        while let Some((at_ms, key)) = self.probe_checks.first().cloned() {
            if at_ms > now_ms {
                break;
            }
            self.probe_checks.pop_first();
            let unprobed = (self.breakers.get(&key)).is_some_and(|b| b.awaits_probe(now_ms));
            let claimed = (self.keys.get(&key)).is_some_and(|k| !k.queue.is_empty() || k.calls > 0);
            if unprobed && !claimed {
                self.start_wake_pass();
            }
        }
    }

    /// One held row: due now (1) unless its sink is still paused or its
    /// breaker still holds it (see [`Breaker::keeps_rows_held`]). One that
    /// cannot be read is settled as a scan settles it.
    fn wake_if_resumed(&mut self, now_ms: u64, entry: DueEntry, index: &mut dyn DueIndex) -> u64 {
        let Some(RowHead { state, hook }) = self.read_or_settle(now_ms, &entry, index) else {
            return 0;
        };
        if let Some(key) = self.bound_key(&entry, &hook.source_id, &state) {
            if self.catalog.is_paused(&key.source_id, key.sink_index) {
                return 0;
            }
            if (self.breakers.get(&key)).is_some_and(|b| b.keeps_rows_held(now_ms)) {
                return 0;
            }
        }
        self.make_due(now_ms, &entry, &state);
        1
    }

    /// The state and hook ids of `entry`'s row, for a pass that decides on
    /// it without claiming it; `None` when it cannot be read, once it is
    /// settled as a scan settles it.
    pub(super) fn read_or_settle(
        &mut self,
        now_ms: u64,
        entry: &DueEntry,
        index: &mut dyn DueIndex,
    ) -> Option<RowHead> {
        match index.load_head(entry.row) {
            Ok(head) => Some(head),
            Err(unreadable) => {
                self.claim(now_ms, entry.clone(), unreadable);
                None
            }
        }
    }

    /// The key `entry`'s row, a row of source `source_id`, binds to now;
    /// `None` when its source or sink is gone (the scan dead-letters it).
    pub(super) fn bound_key(
        &self,
        entry: &DueEntry,
        source_id: &Arc<str>,
        state: &RowState,
    ) -> Option<SinkKey> {
        let binding = (self.catalog).bind(source_id, entry.row.sink_index, &state.sink_type);
        let Binding::Bound { sink_index } = binding else {
            return None;
        };
        Some(SinkKey {
            tenant: entry.tenant.clone(),
            source_id: source_id.clone(),
            sink_index,
            sink_type: state.sink_type.clone(),
        })
    }

    /// Makes a pending row due at `now_ms`, its attempts kept.
    pub(super) fn make_due(&mut self, now_ms: u64, entry: &DueEntry, state: &RowState) {
        self.ops.push_back(StoreOp::claim_of(entry));
        // Its tenant is due now for the next scan, which a woken row asks
        // for (not a wake-up of its own: the windows may be full).
        self.lower_hint(&entry.tenant, now_ms);
        self.ops.push_back(StoreOp::Reschedule {
            row: entry.row,
            fields: RowFields::of(entry, state),
            due_at_ms: now_ms,
            error: None,
        });
    }

    /// Starts a pass over the held rows, afresh if one is under way (it
    /// may have passed rows that are to wake now).
    pub(super) fn start_wake_pass(&mut self) {
        self.waking = Some(held::WakePass::default());
        self.scan_requested = true;
    }
}
