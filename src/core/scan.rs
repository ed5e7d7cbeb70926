//! The scan: claiming due rows by deficit round robin over tenants.
//!
//! A page of `dispatch.batch` rows (less when the shard's window has less
//! room) is split in equal shares among the tenants that have rows due and
//! window room. A tenant with less due than its share leaves the rest to the
//! others in further passes; a tenant the page did not reach goes first in
//! the next scan. So a tenant with a million due rows is one share of a
//! page, never the head of the line. Each tenant's reads start at its own
//! prefix of the due index, so its cost does not depend on its neighbours'
//! backlogs.

use super::*;
use std::collections::HashSet;

/// A tenant taking part in one scan, with its read position.
struct Active {
    tenant: TenantId,
    after: Option<DueEntry>,
}

impl Core {
    /// Claims due rows. Claimed rows become `StoreOp::Claim` (and, for rows
    /// that cannot run, their dead or forget op) and queue on their sink key.
    /// Then a step of each pass under way: over held rows, of the keys'
    /// wakes, and unparking rows.
    pub fn handle_scan(&mut self, now_ms: u64, index: &mut dyn DueIndex) {
        self.scan_requested = false;
        // From here on it holds only the due times this scan writes (parks);
        // the index, read before those writes land, supplies the rest below.
        self.next_due_at_ms = None;
        // Hints read from the index just now are exact.
        let exact = self.hints_stale;
        if exact {
            self.read_all_hints(index);
        }
        self.scan_notes = Some(HashMap::new());
        let active = self.due_tenants(now_ms, index, exact);
        let (reached, read_to) = self.claim_page(now_ms, active, index);
        let notes = self.scan_notes.take().unwrap_or_default();
        // The tenants read past: their earliest row after what was claimed,
        // or written due during the scan.
        for (tenant, after) in &read_to {
            let at = index.earliest_due_ms(tenant, Some(after));
            self.set_hint(tenant, earliest(at, notes.get(tenant).copied()));
        }
        self.reorder(reached);
        self.note_next_due(now_ms);
        // Last: the rows they make due are noted as due now, for the next scan.
        self.check_probes(now_ms);
        self.wake_step(now_ms, index);
        self.key_wake_step(now_ms, index);
        self.unpark_step(now_ms, index);
    }

    /// Claims a page of `dispatch.batch` rows (less when the shard's window
    /// has less room) in equal shares of the `active` tenants, again over
    /// those with more due while the page has room. Returns the tenants
    /// reached, in order, and where each tenant's reads stopped.
    fn claim_page(
        &mut self,
        now_ms: u64,
        mut active: Vec<Active>,
        index: &mut dyn DueIndex,
    ) -> (Vec<TenantId>, HashMap<TenantId, DueEntry>) {
        let mut page =
            u64::from(self.dispatch.batch).min(self.shard_window().rows_room(self.claimed));
        let mut reached: Vec<TenantId> = Vec::new();
        let mut read_to: HashMap<TenantId, DueEntry> = HashMap::new();
        while page > 0 && !active.is_empty() {
            let share = (page / active.len() as u64).max(1);
            let mut i = 0;
            while i < active.len() && page > 0 {
                if !reached.contains(&active[i].tenant) {
                    reached.push(active[i].tenant.clone());
                }
                let want = share.min(page);
                let (got, more) = self.claim_from(now_ms, &mut active[i], want, index);
                page -= got;
                if let Some(after) = &active[i].after {
                    read_to.insert(active[i].tenant.clone(), after.clone());
                }
                if more {
                    i += 1;
                } else {
                    active.remove(i);
                }
            }
        }
        (reached, read_to)
    }

    /// After a scan: when the shard next wakes for due rows (the earliest
    /// hint of a tenant with window room, while the shard has room), and
    /// how many tenants are active (claiming, or with rows due now).
    fn note_next_due(&mut self, now_ms: u64) {
        let mut next_due: Option<u64> = None;
        let mut due_now = 0;
        for tenant in &self.scan_order {
            let hint = self.due_hints[tenant];
            let state = self.tenants.get(tenant);
            if hint <= now_ms && state.is_none_or(|s| s.claimed.rows == 0) {
                due_now += 1;
            }
            // A tenant at its window is not woken for until an outcome frees room.
            if state.is_none_or(|s| s.window().has_room(s.claimed)) {
                next_due = earliest(next_due, Some(hint));
            }
        }
        if self.shard_window().has_room(self.claimed) {
            self.next_due_at_ms = earliest(self.next_due_at_ms, next_due);
        }
        debug_assert_eq!(
            self.claiming_tenants,
            self.tenants.values().filter(|s| s.claimed.rows > 0).count() as u64,
            "the count of tenants with claims"
        );
        self.stats.active_tenants = self.claiming_tenants + due_now;
    }

    /// The tenants with rows due now and window room, in round-robin order;
    /// unless the hints are `exact`, the index is read for those due by
    /// their hint, which it corrects.
    fn due_tenants(&mut self, now_ms: u64, index: &mut dyn DueIndex, exact: bool) -> Vec<Active> {
        let candidates: Vec<TenantId> = self
            .scan_order
            .iter()
            // A tenant whose hint a read of every tenant just dropped is
            // still in the order until `reorder`.
            .filter(|t| self.due_hints.get(*t).is_some_and(|&at| at <= now_ms))
            .filter(|t| {
                self.tenants
                    .get(*t)
                    .is_none_or(|s| s.window().has_room(s.claimed))
            })
            .cloned()
            .collect();
        let mut active = Vec::new();
        for tenant in candidates {
            let at = if exact {
                self.due_hints.get(&tenant).copied()
            } else {
                let at = index.earliest_due_ms(&tenant, None);
                self.set_hint(&tenant, at);
                at
            };
            if at.is_some_and(|at| at <= now_ms) {
                active.push(Active {
                    tenant,
                    after: None,
                });
            }
        }
        active
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
            self.note_due(&entry.tenant, until_ms);
            self.ops.push_back(StoreOp::Reschedule {
                row: entry.row,
                fields,
                due_at_ms: until_ms,
                error: None,
            });
            return;
        }
        let admit = self.admit(now_ms, &key);
        if !matches!(admit, Admit::Pass { .. }) {
            return self.set_aside(now_ms, &key, &hook, entry.row, fields, admit);
        }
        let claim = Claim {
            key: key.clone(),
            due_at_ms: entry.due_at_ms,
            fields,
            hook,
            running: None,
        };
        self.add_claim(entry.row, claim);
        self.enqueue(entry.row, key);
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

    /// Tenants the page did not reach lead the next scan; the others follow
    /// in the order they were reached (rotated by one when all were reached,
    /// so a page's remainder does not always go to the same tenant).
    /// Tenants left without due rows leave the order.
    fn reorder(&mut self, mut reached: Vec<TenantId>) {
        let was_reached: HashSet<&TenantId> = reached.iter().collect();
        let unreached: VecDeque<TenantId> = self
            .scan_order
            .iter()
            .filter(|t| !was_reached.contains(t) && self.due_hints.contains_key(*t))
            .cloned()
            .collect();
        if unreached.is_empty() && !reached.is_empty() {
            reached.rotate_left(1);
        }
        reached.retain(|t| self.due_hints.contains_key(t));
        self.unreached = unreached.len();
        self.scan_order = unreached;
        self.scan_order.extend(reached);
        debug_assert_eq!(
            self.scan_order.len(),
            self.due_hints.len(),
            "the round robin holds each tenant with a hint once"
        );
    }
}
