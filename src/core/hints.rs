//! Due hints: which tenants a scan must read. A shard may know many
//! tenants (every tenant it ever stored a row for) while few have rows due;
//! reading every tenant's due index at every scan made a scan cost
//! O(tenants) index reads, and keeping the round-robin order of every
//! tenant O(tenants²) comparisons.
//!
//! So each tenant with due rows has a hint no later than its earliest due
//! row: read from the index, and lowered by every row written due since
//! (commits, retries, parks). Rows leaving the index (claims, dead letters)
//! leave the hint early, never late: a scan then reads the index and
//! corrects it. Rows written due by the shell for tenants it does not name
//! (unreadable due entries set aside), and a new core, make the next scan
//! read every tenant.
//! Only tenants with a hint take part in the round robin (see
//! `due_tenants`).

use super::*;

impl Core {
    /// A row of `tenant` is written due at `due_at_ms`.
    pub(super) fn note_due(&mut self, tenant: &TenantId, due_at_ms: u64) {
        self.next_due_at_ms = earliest(self.next_due_at_ms, Some(due_at_ms));
        if let Some(notes) = &mut self.scan_notes {
            let note = notes.entry(tenant.clone()).or_insert(due_at_ms);
            *note = (*note).min(due_at_ms);
        }
        self.lower_hint(tenant, due_at_ms);
    }

    /// Lowers a tenant's hint to `due_at_ms` (gives it one if it has none).
    pub(super) fn lower_hint(&mut self, tenant: &TenantId, due_at_ms: u64) {
        let hint = (self.due.hint(tenant)).map_or(due_at_ms, |h| h.min(due_at_ms));
        self.set_hint(tenant, Some(hint));
    }

    /// Sets a tenant's hint (`None`: no due rows).
    pub(super) fn set_hint(&mut self, tenant: &TenantId, hint: Option<u64>) {
        self.due.set(tenant, hint);
    }

    /// Reads every known tenant's hint from the index.
    pub(super) fn read_all_hints(&mut self, index: &mut dyn DueIndex) {
        self.hints_stale = false;
        let mut known = Vec::new();
        index.tenants(&mut known);
        for tenant in known {
            self.read_hint(&tenant, None, index);
        }
    }
}
