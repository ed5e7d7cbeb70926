//! Rows held while their sink is paused (a sink's `paused = true`), rows
//! never attempted that wait for their key's breaker to close (see
//! `breaker`), and rows beyond a slow key's queue (see `slow_keys`).
//!
//! A row of a paused sink that comes up — claimed by a scan, or queued on
//! its key when the pause took effect — is written back due at
//! [`HELD_DUE_MS`], after any real time: it stays pending (counted, listed,
//! dead-lettered with its source) but no scan reaches it, so a paused
//! backlog costs one write per row however long the pause lasts. Its
//! attempts and first attempt are kept; its retry horizon is looked at
//! again at its next failure.
//!
//! A pass over the held rows finds those whose sink is not paused and
//! whose breaker does not hold them, and starts a wake of each such key
//! (see `key_wake`), which makes its rows due at the pace the key takes
//! them; a row whose sink is gone from the config is made due at once,
//! for the scan to settle it. A new core starts one (a shard's open,
//! after a crash too, and its rebuild), and so does a reconfiguration
//! that resumes or removes a paused sink (or any reconfiguration while a
//! breaker holds rows or a key's wake is under way). It runs in steps,
//! one at the end of each scan, each reading at most `WAKE_STEP_ROWS`
//! held rows (a tenant with none counting one), so a shard with a million
//! held rows, or as many tenants, goes on claiming and committing while
//! it reads them. Held rows sit at the end of their tenant's due index: a
//! pass reads held rows only.

use super::*;
use crate::limits::WAKE_STEP_ROWS;

/// Before the first held row of `tenant`: where a walk of its held rows
/// starts.
pub(super) fn before_held(tenant: &TenantId) -> DueEntry {
    DueEntry {
        tenant: tenant.clone(),
        due_at_ms: HELD_DUE_MS - 1,
        row: RowId::MAX,
        size_bytes: 0,
    }
}

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
    /// Holds a row of a paused sink, or one behind a slow sink's queue,
    /// with `error` saying which (see the module docs).
    pub(super) fn hold(&mut self, row: RowId, fields: RowFields, error: &'static str) {
        self.stats.held += 1;
        self.ops.push_back(StoreOp::Hold { row, fields, error });
    }

    /// Whether a pass over the held rows or a key's wake is under way.
    pub fn is_waking(&self) -> bool {
        self.waking.is_some() || self.key_wakes.any()
    }

    /// One step of the pass under way, if any: reads at most
    /// `WAKE_STEP_ROWS` held rows, tenant by tenant, starting the wakes of
    /// the keys they free and making those of sinks gone due at `now_ms`;
    /// returns how many it made due. The pass ends once every tenant's
    /// held rows were read.
    pub(super) fn wake_step(&mut self, now_ms: u64, index: &mut dyn DueIndex) -> u64 {
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
            let after = (pass.after.take()).unwrap_or_else(|| before_held(tenant));
            let mut page = Vec::new();
            index.due_page(tenant, u64::MAX, Some(&after), budget, &mut page);
            budget -= page.len().max(1);
            match page.last() {
                // The step's budget ran out in this tenant: it may have more.
                Some(last) if budget == 0 => pass.after = Some(last.clone()),
                _ => pass.next += 1,
            }
            for entry in page {
                woken += self.wake_or_start_key_wake(now_ms, entry, index);
            }
        }
        if pass.next < tenants.len() {
            pass.tenants = Some(tenants);
            self.waking = Some(pass);
        }
        self.scan_requested |= woken > 0;
        woken
    }

    /// One held row: left held while its sink is paused or its breaker
    /// holds it (see [`Breaker::keeps_rows_held`]); otherwise its key's
    /// wake is started, or, when its sink is gone, it is due now (1). One
    /// that cannot be read is settled as a scan settles it.
    fn wake_or_start_key_wake(
        &mut self,
        now_ms: u64,
        entry: DueEntry,
        index: &mut dyn DueIndex,
    ) -> u64 {
        let Some(RowHead { state, hook }) = self.read_or_settle(now_ms, &entry, index) else {
            return 0;
        };
        let Some(key) = self.bound_key(&entry, &hook.source_id, &state) else {
            self.make_due(now_ms, &entry, &state);
            return 1;
        };
        let paused = self.catalog.is_paused(&key.source_id, key.sink_index);
        let held = (self.breakers.get(&key)).is_some_and(|b| b.keeps_rows_held(now_ms));
        if !paused && !held {
            self.ensure_key_wake(&key);
        }
        0
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
        self.bind_row(entry, source_id, state).ok()
    }

    /// The key `entry`'s row, a row of source `source_id`, binds to now
    /// (see [`Catalog::bind`]), or why it cannot run: its source or its
    /// sink is gone.
    pub(super) fn bind_row(
        &self,
        entry: &DueEntry,
        source_id: &Arc<str>,
        state: &RowState,
    ) -> Result<SinkKey, DeadReason> {
        let places = state.sink_places.as_deref();
        let binding =
            (self.catalog).bind(source_id, entry.row.sink_index, &state.sink_type, places);
        let sink_index = match binding {
            Binding::Bound { sink_index } => sink_index,
            Binding::SourceGone => {
                let source_id = source_id.clone();
                return Err(DeadReason::SourceGone { source_id });
            }
            Binding::SinkGone => {
                return Err(DeadReason::SinkGone {
                    sink_index: entry.row.sink_index,
                    sink_type: state.sink_type.clone(),
                })
            }
        };
        Ok(SinkKey {
            tenant: entry.tenant.clone(),
            source_id: source_id.clone(),
            sink_index,
            sink_type: state.sink_type.clone(),
        })
    }

    /// One due entry a walk read: made due now (1) if `wanted` says so of
    /// its row's state and the key it binds to now (`None`: its source or
    /// its sink is gone). One that cannot be read is settled as a scan
    /// settles it.
    pub(super) fn make_due_if(
        &mut self,
        now_ms: u64,
        entry: DueEntry,
        index: &mut dyn DueIndex,
        wanted: impl FnOnce(&Core, &RowState, Option<SinkKey>) -> bool,
    ) -> u64 {
        let Some(RowHead { state, hook }) = self.read_or_settle(now_ms, &entry, index) else {
            return 0;
        };
        let key = self.bound_key(&entry, &hook.source_id, &state);
        if !wanted(self, &state, key) {
            return 0;
        }
        self.make_due(now_ms, &entry, &state);
        1
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
    /// may have passed rows that are to wake now); the keys' wakes under
    /// way step too, as a reload may have given them room.
    pub(super) fn start_wake_pass(&mut self) {
        self.waking = Some(held::WakePass::default());
        self.key_wakes.ask_step();
        self.scan_requested = true;
    }
}
