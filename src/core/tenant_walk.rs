//! A walk of tenants' rows due after now (waiting out a backoff, a park or
//! a turn), a step at a time: each step reads at most `WAKE_STEP_ROWS`
//! due entries, a tenant with none counting one, so a tenant with a large
//! backlog goes on being claimed meanwhile. Rows due by now are the
//! scan's; the walk of a tenant ends at its held rows.

use super::ring::Ring;
use super::*;
use crate::limits::WAKE_STEP_ROWS;

/// Where a walk stands.
#[derive(Debug, Default)]
pub(super) struct TenantWalk {
    /// The tenants left to walk, each once (a reload may add a hundred
    /// thousand); the first is being walked.
    tenants: Ring<TenantId>,
    /// The last entry of the first tenant read, when a step stopped in it.
    after: Option<DueEntry>,
    /// Every tenant is to be walked: the next step reads them from the index.
    every_tenant: bool,
}

impl TenantWalk {
    /// Walks `tenant` too, after those it walks already.
    pub(super) fn add(&mut self, tenant: &TenantId) {
        if !self.every_tenant && !self.tenants.contains(tenant) {
            self.tenants.push_back(tenant.clone());
        }
    }

    /// Walks every tenant the index has at the next step, from the first,
    /// in place of what it walked.
    pub(super) fn restart_with_every_tenant(&mut self) {
        self.every_tenant = true;
    }

    pub(super) fn is_done(&self) -> bool {
        !self.every_tenant && self.tenants.is_empty()
    }

    /// One step: each due entry read after `now_ms` goes to `each`, a
    /// tenant's page as it is read.
    pub(super) fn step(
        &mut self,
        now_ms: u64,
        index: &mut dyn DueIndex,
        mut each: impl FnMut(DueEntry, &mut dyn DueIndex),
    ) {
        if std::mem::take(&mut self.every_tenant) {
            let mut tenants = Vec::new();
            index.tenants(&mut tenants);
            self.tenants.clear();
            for tenant in tenants {
                self.tenants.push_back(tenant);
            }
            self.after = None;
        }
        let mut budget = WAKE_STEP_ROWS;
        while budget > 0 {
            let Some(tenant) = self.tenants.front() else {
                break;
            };
            let after = match self.after.take() {
                Some(entry) if entry.due_at_ms > now_ms => entry,
                _ => wake_start(tenant, now_ms),
            };
            let mut page = Vec::new();
            index.due_page(tenant, HELD_DUE_MS - 1, Some(&after), budget, &mut page);
            budget -= page.len().max(1);
            match page.last() {
                // The step's budget ran out in this tenant: it may have more.
                Some(last) if budget == 0 => self.after = Some(last.clone()),
                _ => {
                    self.tenants.pop_front();
                }
            }
            for entry in page {
                each(entry, index);
            }
        }
    }
}

/// What one step of a walk did: the rows it made due, and whether the
/// walk ended with it.
pub(super) struct WalkStep {
    pub(super) made_due: u64,
    pub(super) ended: bool,
}

impl Core {
    /// One step of the walk `walk_of` picks, if it is under way: each due
    /// entry it reads goes to `make_due_if` (1 when it made the row due
    /// at `now_ms`), and rows made due ask for a scan.
    pub(super) fn step_walk(
        &mut self,
        now_ms: u64,
        index: &mut dyn DueIndex,
        walk_of: fn(&mut Core) -> &mut TenantWalk,
        make_due_if: fn(&mut Core, u64, DueEntry, &mut dyn DueIndex) -> u64,
    ) -> WalkStep {
        if walk_of(self).is_done() {
            return WalkStep {
                made_due: 0,
                ended: false,
            };
        }
        let mut walk = std::mem::take(walk_of(self));
        let mut made_due = 0;
        walk.step(now_ms, index, |entry, index| {
            made_due += make_due_if(self, now_ms, entry, index);
        });
        let ended = walk.is_done();
        *walk_of(self) = walk;
        self.scan_requested |= made_due > 0;
        WalkStep { made_due, ended }
    }
}
