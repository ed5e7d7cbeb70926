//! A walk of tenants' rows due after now (waiting out a backoff, a park or
//! a turn), a step at a time: each step reads at most `WAKE_STEP_ROWS`
//! due entries, a tenant with none counting one, so a tenant with a large
//! backlog goes on being claimed meanwhile. Rows due by now are the
//! scan's; the walk of a tenant ends at its held rows.

use super::*;
use crate::limits::WAKE_STEP_ROWS;

/// Where a walk stands.
#[derive(Debug, Default)]
pub(super) struct TenantWalk {
    /// The tenants left to walk; the first is being walked.
    pub(super) tenants: VecDeque<TenantId>,
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
            self.tenants = tenants.into();
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
