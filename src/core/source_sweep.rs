//! Dead-lettering a source's backlog (`Engine::dead_letter_source`) in
//! steps.
//!
//! A source deleted with a million rows pending must not stop its shard for
//! the seconds a walk of its backlog takes: every commit of the shard would
//! wait that long. So the walk goes in steps, each a write of its own that
//! reads at most a step's worth of entries and says where the next step
//! goes on ([`SourceSweep`]); the shard serves its commits and attempts
//! between steps. The lanes' members go first (`store::lanes`): a lane's
//! head dead-lettered before its members would make the next member due
//! behind the walk. Then the due index, every tenant's (a removed source's
//! tenant is not known any more), held rows included.
//!
//! A row the walk has passed is not looked at again: rows committed to the
//! source while the sweep runs, and rows claimed when a step reached them
//! and written back due behind it, are left to their sink (or, if the
//! source is gone from the config, to the scan, which dead-letters them as
//! `source_gone` when they come up).

use super::*;
use crate::limits::MAX_DUE_PAGE_ROWS;

/// Where a sweep of a source's pending rows goes on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceSweep {
    /// The members of the source's ordering lanes, from this place on
    /// (from the first lane when `None`).
    Lanes(Option<LanePlace>),
    /// The due index.
    Due(DueCursor),
}

/// A place among the lanes: `lane`, after its member `after_seq` (from its
/// first member when `None`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LanePlace {
    pub lane: LaneId,
    pub after_seq: Option<u64>,
}

/// A place in the due index: the `tenant`th tenant in the store's
/// numbering (which only grows), after `after` in its due order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DueCursor {
    pub tenant: usize,
    pub after: Option<DueEntry>,
}

impl Default for SourceSweep {
    fn default() -> SourceSweep {
        SourceSweep::Lanes(None)
    }
}

/// What one step of a sweep did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepStep {
    /// Rows dead-lettered (durably, once the step's write is committed).
    pub dead: u64,
    /// Where the next step goes on; `None` once the sweep is done.
    pub next: Option<SourceSweep>,
}

impl Core {
    /// Dead-letters as `source_gone` the pending rows of `source_id` among
    /// at most `max_entries` due entries (a tenant with none counts one)
    /// from `from` on. Returns how many, and where the next step goes on
    /// (`None` after the last tenant). Attempts are kept; a row whose hook
    /// is gone is dropped and not counted; claimed rows are not in the
    /// index and settle as their attempts end.
    pub fn handle_dead_letter_source(
        &mut self,
        now_ms: u64,
        source_id: &str,
        from: DueCursor,
        max_entries: usize,
        index: &mut dyn DueIndex,
    ) -> (u64, Option<DueCursor>) {
        let mut tenants = Vec::new();
        index.tenants(&mut tenants);
        let mut at = from;
        let (mut budget, mut dead) = (max_entries, 0);
        while let Some(tenant) = tenants.get(at.tenant) {
            if budget == 0 {
                return (dead, Some(at));
            }
            let mut page = Vec::new();
            let rows = budget.min(MAX_DUE_PAGE_ROWS);
            index.due_page(tenant, u64::MAX, at.after.as_ref(), rows, &mut page);
            budget -= page.len().max(1);
            let Some(last) = page.last().cloned() else {
                at = DueCursor {
                    tenant: at.tenant + 1,
                    after: None,
                };
                continue;
            };
            for entry in page {
                dead += self.dead_letter_if_of(now_ms, source_id, entry, index);
            }
            at.after = Some(last);
        }
        (dead, None)
    }

    /// One due row: dead-lettered (1) if it belongs to `source_id`.
    fn dead_letter_if_of(
        &mut self,
        now_ms: u64,
        source_id: &str,
        entry: DueEntry,
        index: &mut dyn DueIndex,
    ) -> u64 {
        let RowHead { state, hook } = match index.load_head(entry.row) {
            Ok(head) => head,
            Err(Loaded::RowMissing | Loaded::HookMissing) => {
                self.take_due(&entry);
                self.ops.push_back(StoreOp::Forget { row: entry.row });
                return 0;
            }
            // A corrupt row's source is unknown: the scan quarantines it.
            Err(_) => return 0,
        };
        if &*hook.source_id != source_id {
            return 0;
        }
        self.take_due(&entry);
        let fields = RowFields::of(&entry, &state);
        let reason = DeadReason::SourceGone {
            source_id: hook.source_id.clone(),
        };
        self.config_dead(now_ms, entry.row, &hook.id, &hook.source_id, fields, reason);
        1
    }
}
