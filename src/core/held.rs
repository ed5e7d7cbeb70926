//! Rows held while their sink is paused (a sink's `paused = true`).
//!
//! A row of a paused sink that comes up — claimed by a scan, or queued on
//! its key when the pause took effect — is written back due at
//! [`HELD_DUE_MS`], after any real time: it stays pending (counted, listed,
//! dead-lettered with its source) but no scan reaches it, so a paused
//! backlog costs one write per row however long the pause lasts. Its
//! attempts and first attempt are kept; its retry horizon is looked at
//! again at its next failure.
//!
//! [`Core::handle_wake_held`] makes every held row whose sink is not
//! paused (resumed, or gone from the config, which the scan then settles)
//! due now. The shell runs it when a shard opens, after a crash too, and
//! after a reconfiguration that resumes or removes a paused sink; held rows
//! sit at the end of their tenant's due index, so it reads held rows only.

use super::*;

impl Core {
    /// Holds a row of a paused sink (see the module docs).
    pub(super) fn hold(&mut self, row: RowId, fields: RowFields) {
        self.stats.held += 1;
        self.ops.push_back(StoreOp::Hold { row, fields });
    }

    /// Makes every held row whose sink is not paused due at `now_ms`;
    /// returns how many. Rows that cannot be read are made due too, for
    /// the scan to settle as it settles any such row.
    pub fn handle_wake_held(&mut self, now_ms: u64, index: &mut dyn DueIndex) -> u64 {
        let mut tenants = Vec::new();
        index.tenants(&mut tenants);
        let mut woken = 0;
        for tenant in tenants {
            let mut after = DueEntry {
                tenant: tenant.clone(),
                due_at_ms: HELD_DUE_MS - 1,
                row: RowId::MAX,
                size_bytes: 0,
            };
            loop {
                let mut page = Vec::new();
                let max_rows = crate::limits::MAX_DUE_PAGE_ROWS;
                index.due_page(&tenant, u64::MAX, Some(&after), max_rows, &mut page);
                let Some(last) = page.last().cloned() else {
                    break;
                };
                for entry in page {
                    woken += self.wake_if_resumed(now_ms, entry, index);
                }
                after = last;
            }
        }
        woken
    }

    /// One held row: due now (1) unless its sink is still paused. One
    /// that cannot be read is settled as a scan settles it.
    fn wake_if_resumed(&mut self, now_ms: u64, entry: DueEntry, index: &mut dyn DueIndex) -> u64 {
        let (state, hook) = match index.load(entry.row) {
            Loaded::Row { state, hook } => (state, hook),
            unreadable => {
                self.claim(now_ms, entry, unreadable);
                return 0;
            }
        };
        let catalog = &self.catalog;
        let binding = catalog.bind(&hook.source_id, entry.row.sink_index, &state.sink_type);
        if let Binding::Bound { sink_index } = binding {
            if catalog.is_paused(&hook.source_id, sink_index) {
                return 0;
            }
        }
        self.ops.push_back(StoreOp::claim_of(&entry));
        self.note_due(&entry.tenant, now_ms);
        let fields = RowFields::of(&entry, &state);
        self.ops.push_back(StoreOp::Reschedule {
            row: entry.row,
            fields,
            due_at_ms: now_ms,
            error: None,
        });
        1
    }
}
