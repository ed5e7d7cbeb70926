//! The scan: claiming due rows by deficit round robin over tenants.
//!
//! A page of `dispatch.batch` rows (less when the shard's window has less
//! room) is split in equal shares among the tenants due by their hints.
//! A tenant with less due than its share leaves the rest to the others in
//! further passes; a tenant the page did not reach goes first in the next
//! scan. So a tenant with a million due rows is one share of a page, never
//! the head of the line. Each tenant's reads start at its own prefix of the
//! due index, so its cost does not depend on its neighbours' backlogs; and
//! the round robin is read from its front only as far as the page goes
//! (see `due_tenants`), so a scan's cost does not depend on how many other
//! tenants have rows due.

use super::*;

/// A tenant taking part in one scan, with its read position.
struct Active {
    tenant: TenantId,
    after: Option<DueEntry>,
}

/// What a page of claims reached.
struct Reached {
    /// The tenants claimed for, in order.
    tenants: Vec<TenantId>,
    /// Where each tenant's reads stopped.
    read_to: HashMap<TenantId, DueEntry>,
    /// Whether the page reached every tenant of the round robin.
    every: bool,
}

impl Core {
    /// Claims due rows. Claimed rows become `StoreOp::Claim` (and, for rows
    /// that cannot run, their dead or forget op) and queue on their sink key.
    /// Then a step of each pass under way: over held rows, of the keys'
    /// wakes, unparking rows and pacing them again.
    pub fn handle_scan(&mut self, now_ms: u64, index: &mut dyn DueIndex) {
        self.scan_requested = false;
        // From here on it holds only the due times this scan writes (parks);
        // the index, read before those writes land, supplies the rest below.
        self.next_due_at_ms = None;
        if self.hints_stale {
            self.read_all_hints(index);
        }
        self.due.promote(now_ms);
        self.scan_notes = Some(HashMap::new());
        let reached = self.claim_page(now_ms, index);
        for (tenant, after) in &reached.read_to {
            self.read_hint(tenant, Some(after), index);
        }
        self.scan_notes = None;
        let tenants = &self.tenants;
        let full = |tenant: &TenantId| at_window(tenants, tenant);
        (self.due).requeue(reached.tenants, reached.every, now_ms, full);
        self.note_next_due();
        // Last: the rows they make due are noted as due now, for the next scan.
        self.check_probes(now_ms);
        self.wake_step(now_ms, index);
        self.key_wake_step(now_ms, index);
        self.unpark_step(now_ms, index);
        self.repace_step(now_ms, index);
    }

    /// Claims a page of `dispatch.batch` rows (less when the shard's window
    /// has less room): first a share of it to each tenant of the round
    /// robin in turn, until the page is full, then again over those with
    /// more due while it has room. A tenant at its window leaves for full;
    /// one with no row due after all (its hint was early) is read again.
    fn claim_page(&mut self, now_ms: u64, index: &mut dyn DueIndex) -> Reached {
        let mut page =
            u64::from(self.dispatch.batch).min(self.shard_window().rows_room(self.claimed));
        let mut reached = Reached {
            tenants: Vec::new(),
            read_to: HashMap::new(),
            every: false,
        };
        let share = (page / self.due.ring_len().max(1) as u64).max(1);
        let mut more: Vec<Active> = Vec::new();
        let mut turn = None;
        while page > 0 && self.shard_window().has_room(self.claimed) {
            let Some((at, tenant)) = self.due.ring_after(turn) else {
                break;
            };
            turn = Some(at);
            if at_window(&self.tenants, &tenant) {
                self.due.set_full(&tenant);
                continue;
            }
            let mut active = Active {
                tenant,
                after: None,
            };
            let (got, has_more) = self.claim_from(now_ms, &mut active, share.min(page), index);
            let tenant = active.tenant.clone();
            let Some(after) = active.after.clone() else {
                self.read_hint(&tenant, None, index);
                continue;
            };
            page -= got;
            reached.tenants.push(tenant.clone());
            reached.read_to.insert(tenant, after);
            if has_more {
                more.push(active);
            }
        }
        reached.every = self.due.ring_after(turn).is_none();
        while page > 0 && !more.is_empty() {
            let share = (page / more.len() as u64).max(1);
            let mut i = 0;
            while i < more.len() && page > 0 {
                let (got, has_more) = self.claim_from(now_ms, &mut more[i], share.min(page), index);
                page -= got;
                if let Some(after) = &more[i].after {
                    reached
                        .read_to
                        .insert(more[i].tenant.clone(), after.clone());
                }
                if has_more {
                    i += 1;
                } else {
                    more.remove(i);
                }
            }
        }
        reached
    }

    /// Sets a tenant's hint from its earliest due row in the index after
    /// `after` (what a scan claimed), or the earliest row written due
    /// during the scan under way, which the index does not show yet.
    pub(super) fn read_hint(
        &mut self,
        tenant: &TenantId,
        after: Option<&DueEntry>,
        index: &mut dyn DueIndex,
    ) {
        let at = index.earliest_due_ms(tenant, after);
        let noted = (self.scan_notes.as_ref()).and_then(|notes| notes.get(tenant));
        self.set_hint(tenant, earliest(at, noted.copied()));
    }

    /// After a scan: when the shard next wakes for due rows (now while the
    /// round robin holds a tenant, else the earliest hint of later), while
    /// the shard has room.
    fn note_next_due(&mut self) {
        if self.shard_window().has_room(self.claimed) {
            self.next_due_at_ms = earliest(self.next_due_at_ms, self.due.next_due_ms());
        }
        debug_assert_eq!(
            self.due.claiming(),
            self.tenants.values().filter(|s| s.claimed.rows > 0).count(),
            "the count of tenants with claims"
        );
    }

    /// Claims up to `want` of the tenant's due rows within its and the
    /// shard's byte room (always at least one row while there is room).
    /// Returns how many it claimed and whether the tenant may have more.
    fn claim_from(
        &mut self,
        now_ms: u64,
        active: &mut Active,
        want: u64,
        index: &mut dyn DueIndex,
    ) -> (u64, bool) {
        let tenant = active.tenant.clone();
        let (rows_room, bytes_room) = {
            let shard = self.shard_window();
            let t = self.tenant_mut(&tenant);
            let w = t.window();
            let rows = w.rows_room(t.claimed);
            let bytes = w.bytes_room(t.claimed);
            (
                rows.min(shard.rows_room(self.claimed)),
                bytes.min(shard.bytes_room(self.claimed)),
            )
        };
        let want = want.min(rows_room);
        if want == 0 || bytes_room == 0 {
            return (0, false);
        }
        let mut page = Vec::new();
        index.due_page(
            &tenant,
            now_ms,
            active.after.as_ref(),
            want.min(crate::limits::MAX_DUE_PAGE_ROWS as u64) as usize,
            &mut page,
        );
        let read = page.len() as u64;
        let (mut taken, mut bytes) = (0u64, 0u64);
        for entry in page {
            if taken > 0 && bytes + entry.size_bytes > bytes_room {
                return (taken, false);
            }
            taken += 1;
            bytes += entry.size_bytes;
            active.after = Some(entry.clone());
            let loaded = index.load(entry.row);
            self.claim(now_ms, entry, loaded);
        }
        let t = &self.tenants[&tenant];
        let more = read == want && t.window().has_room(t.claimed);
        (taken, more)
    }

    /// One due row claimed: queued on its key, or settled at once when it
    /// cannot run.
    pub(super) fn claim(&mut self, now_ms: u64, entry: DueEntry, loaded: Loaded) {
        let woken = self.key_wakes.is_woken(entry.row);
        self.take_due(&entry);
        if self.claims.contains_key(&entry.row) {
            // A second due key of a row already claimed (a broken index):
            // the claim op above drops it, and the row runs once.
            return;
        }
        let Some((state, hook)) = self.loaded_row(now_ms, &entry, loaded) else {
            return;
        };
        let fields = RowFields::of(&entry, &state);
        let key = match self.bind_row(&entry, &hook.source_id, &state) {
            Ok(key) => key,
            Err(reason) => {
                let (id, source_id) = (&hook.id, &hook.source_id);
                return self.config_dead(now_ms, entry.row, id, source_id, fields, reason);
            }
        };
        // Another row of its lane still runs (an attempt taken on from
        // before a shard restart): it waits until that attempt ends.
        if let Some(until_ms) = self.lane_busy_until_ms(fields.lane) {
            return self.claimed_due_again(&entry, fields, until_ms, None);
        }
        let probe = match self.admit(now_ms, &key) {
            Admit::Pass { probe } => probe,
            admit => return self.set_aside(now_ms, &key, &hook, entry.row, fields, admit),
        };
        // A row that waits for its sink's rate waits in the store, one of
        // a slow sink's backlog held for its key's wake.
        if let Some(due_at_ms) = self.pace_row(now_ms, &key, &fields) {
            return self.claimed_due_again(&entry, fields, due_at_ms, Some(PACED_ERROR));
        }
        if !probe && self.holds_for_slow_key(&key, woken) {
            return self.hold_for_slow_key(&key, entry.row, fields);
        }
        let claim = Claim {
            key: key.clone(),
            due_at_ms: entry.due_at_ms,
            fields,
            hook,
            running: None,
            sink_gone: false,
        };
        self.add_claim(entry.row, claim);
        self.enqueue(entry.row, key);
    }

    /// Writes a row just claimed back due at `due_at_ms`, its attempts
    /// unchanged, with `error` as its last.
    fn claimed_due_again(
        &mut self,
        entry: &DueEntry,
        fields: RowFields,
        due_at_ms: u64,
        error: Option<&str>,
    ) {
        self.note_due(&entry.tenant, due_at_ms);
        self.ops.push_back(StoreOp::Reschedule {
            row: entry.row,
            fields,
            due_at_ms,
            error: error.map(String::from),
        });
    }

    /// A claimed row's state and hook; `None` when it cannot run without
    /// them, once it is settled: a missing row or hook forgotten, a
    /// corrupt row quarantined, a row of a corrupt hook dead-lettered.
    fn loaded_row(
        &mut self,
        now_ms: u64,
        entry: &DueEntry,
        loaded: Loaded,
    ) -> Option<(RowState, Arc<crate::store::Hook>)> {
        match loaded {
            Loaded::Row { state, hook } => return Some((state, hook)),
            Loaded::RowMissing | Loaded::HookMissing => {
                self.ops.push_back(StoreOp::Forget { row: entry.row });
            }
            Loaded::RowCorrupt => {
                self.stats.dead += 1;
                self.stats.dead_by_reason.add(DeadReasonKind::Undecodable);
                self.ops.push_back(StoreOp::Quarantine {
                    row: entry.row,
                    tenant: entry.tenant.clone(),
                    dead_at_ms: now_ms,
                });
            }
            Loaded::HookCorrupt { state } => {
                let fields = RowFields::of(entry, &state);
                self.dead(now_ms, entry.row, fields, DeadReason::HookCorrupt, None);
            }
        }
        None
    }
}

/// Whether a tenant has no room left in its window.
fn at_window(tenants: &HashMap<TenantId, TenantState>, tenant: &TenantId) -> bool {
    (tenants.get(tenant)).is_some_and(|s| !s.window().has_room(s.claimed))
}
