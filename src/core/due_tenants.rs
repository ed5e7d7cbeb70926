//! The tenants with due rows, by their hints, kept so that a scan costs
//! the tenants it claims for, not every tenant with due rows.
//!
//! Each tenant with a hint is in one of three places:
//! - **the round robin**: due by its hint (no later than when the scan
//!   moved it here) and, as far as known, with window room. A scan claims
//!   from its front and moves the tenants it reached to its back;
//! - **later**: due after now by its hint, ordered by it. A scan first
//!   moves those whose hint has come into the round robin;
//! - **full**: at its window. Neither the scan nor the wake-up looks at it
//!   until an outcome frees room (or a reload changes the windows), which
//!   moves it to later.
//!
//! A tenant that becomes due joins the round robin at the end of its
//! unreached part: after the tenants already waiting, before those the last
//! page reached. So the round robin is ordered by a turn of (epoch,
//! sequence): the tenants a scan reaches take turns of the epoch after the
//! next, and the tenants moved in before the next scan take turns of the
//! next epoch.
//!
//! It also counts the tenants with rows claimed, so the shard's active
//! tenants (claiming, or due and idle in the round robin) are known without
//! a pass over either.

use super::TenantId;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::ops::Bound;

/// A place in the round robin: its epoch, then its order within it.
pub(super) type Turn = (u64, u64);

#[derive(Debug, Default)]
pub(super) struct DueTenants {
    hinted: HashMap<TenantId, Hinted>,
    ring: BTreeMap<Turn, TenantId>,
    later: BTreeSet<(u64, TenantId)>,
    /// The epoch of the turns of tenants moved into the round robin now.
    /// The tenants a scan reaches take this + 3, and then this grows by 2,
    /// so tenants moved in before the next scan go before them and after
    /// those the scan did not reach (this or less).
    epoch: u64,
    next_seq: u64,
    claiming: HashSet<TenantId>,
    /// Tenants in the round robin with no rows claimed.
    ring_idle: usize,
}

#[derive(Debug, Clone, Copy)]
struct Hinted {
    at_ms: u64,
    place: Place,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    Ring(Turn),
    Later,
    Full,
}

impl DueTenants {
    /// The tenant's hint: no later than its earliest due row.
    pub fn hint(&self, tenant: &TenantId) -> Option<u64> {
        self.hinted.get(tenant).map(|h| h.at_ms)
    }

    /// Sets a tenant's hint (`None`: no due rows). A new hint, and one that
    /// rises while the tenant is in the round robin, put it in later (a
    /// scan moves it back when it is due); a lowered one keeps its place.
    pub fn set(&mut self, tenant: &TenantId, hint: Option<u64>) {
        let Some(at_ms) = hint else {
            if let Some(old) = self.hinted.remove(tenant) {
                self.leave(tenant, old);
            }
            return;
        };
        match self.hinted.get(tenant).copied() {
            None => self.place_later(tenant, at_ms),
            Some(old) => match old.place {
                Place::Ring(_) if at_ms <= old.at_ms => self.set_at(tenant, at_ms),
                Place::Full => self.set_at(tenant, at_ms),
                Place::Ring(_) | Place::Later => {
                    self.leave(tenant, old);
                    self.place_later(tenant, at_ms);
                }
            },
        }
    }

    /// Moves the tenants due by now from later into the round robin, in
    /// the order of their hints.
    pub fn promote(&mut self, now_ms: u64) {
        while let Some((at_ms, tenant)) = self.later.first().cloned() {
            if at_ms > now_ms {
                break;
            }
            self.later.pop_first();
            let turn = (self.epoch, self.next_seq);
            self.next_seq += 1;
            self.place_ring(&tenant, at_ms, turn);
        }
    }

    /// How many tenants the round robin holds.
    pub fn ring_len(&self) -> usize {
        self.ring.len()
    }

    /// The round robin's next tenant after `turn` (from its front when
    /// `None`).
    pub fn ring_after(&self, turn: Option<Turn>) -> Option<(Turn, TenantId)> {
        let from = turn.map_or(Bound::Unbounded, Bound::Excluded);
        (self.ring.range((from, Bound::Unbounded)).next()).map(|(turn, t)| (*turn, t.clone()))
    }

    /// A tenant at its window leaves the scans and the wake-up.
    pub fn set_full(&mut self, tenant: &TenantId) {
        if let Some(old) = self.hinted.get(tenant).copied() {
            self.leave(tenant, old);
            self.hinted.insert(
                tenant.clone(),
                Hinted {
                    at_ms: old.at_ms,
                    place: Place::Full,
                },
            );
        }
    }

    /// Room freed for a full tenant: it is due again by its hint.
    pub fn unfull(&mut self, tenant: &TenantId) {
        if let Some(old) = self.hinted.get(tenant).copied() {
            if old.place == Place::Full {
                self.place_later(tenant, old.at_ms);
            }
        }
    }

    /// The windows changed: every full tenant is due again by its hint.
    pub fn unfull_all(&mut self) {
        let full: Vec<(TenantId, u64)> = (self.hinted.iter())
            .filter(|(_, h)| h.place == Place::Full)
            .map(|(t, h)| (t.clone(), h.at_ms))
            .collect();
        for (tenant, at_ms) in full {
            self.place_later(&tenant, at_ms);
        }
    }

    /// After a scan: the tenants it `reached`, in order, leave for the back
    /// of the round robin when still due by `now_ms` and not `full`, for
    /// later when due after, for full when at their window. Rotated by one
    /// when the scan reached `every` tenant of the round robin, so a page's
    /// remainder does not always go to the same tenant.
    pub fn requeue(
        &mut self,
        mut reached: Vec<TenantId>,
        every: bool,
        now_ms: u64,
        full: impl Fn(&TenantId) -> bool,
    ) {
        if every && !reached.is_empty() {
            reached.rotate_left(1);
        }
        for (i, tenant) in reached.into_iter().enumerate() {
            let Some(old) = self.hinted.get(&tenant).copied() else {
                continue;
            };
            if full(&tenant) {
                self.set_full(&tenant);
                continue;
            }
            self.leave(&tenant, old);
            if old.at_ms <= now_ms {
                self.place_ring(&tenant, old.at_ms, (self.epoch + 3, i as u64));
            } else {
                self.place_later(&tenant, old.at_ms);
            }
        }
        self.epoch += 2;
        self.next_seq = 0;
    }

    /// When the shard is next due for a scan: now when the round robin
    /// holds a tenant (its hint is not after now), else the earliest hint
    /// of later; full tenants wait for room.
    pub fn next_due_ms(&self) -> Option<u64> {
        match self.ring.first_key_value() {
            Some((_, tenant)) => self.hint(tenant),
            None => self.later.first().map(|(at_ms, _)| *at_ms),
        }
    }

    /// A tenant's first row claimed.
    pub fn claims_started(&mut self, tenant: &TenantId) {
        self.claiming.insert(tenant.clone());
        if self.in_ring(tenant) {
            self.ring_idle -= 1;
        }
    }

    /// A tenant's last claimed row finished.
    pub fn claims_ended(&mut self, tenant: &TenantId) {
        self.claiming.remove(tenant);
        if self.in_ring(tenant) {
            self.ring_idle += 1;
        }
    }

    /// Tenants with rows claimed.
    pub fn claiming(&self) -> usize {
        self.claiming.len()
    }

    /// Tenants with rows claimed, or due and idle in the round robin.
    pub fn active(&self) -> usize {
        debug_assert_eq!(
            self.ring_idle,
            (self.ring.values())
                .filter(|t| !self.claiming.contains(*t))
                .count(),
            "the count of idle tenants in the round robin"
        );
        self.claiming.len() + self.ring_idle
    }

    fn in_ring(&self, tenant: &TenantId) -> bool {
        (self.hinted.get(tenant)).is_some_and(|h| matches!(h.place, Place::Ring(_)))
    }

    fn set_at(&mut self, tenant: &TenantId, at_ms: u64) {
        if let Some(h) = self.hinted.get_mut(tenant) {
            h.at_ms = at_ms;
        }
    }

    /// Puts a tenant out of any order (or just taken out of one) in later.
    fn place_later(&mut self, tenant: &TenantId, at_ms: u64) {
        self.later.insert((at_ms, tenant.clone()));
        let place = Place::Later;
        self.hinted.insert(tenant.clone(), Hinted { at_ms, place });
    }

    /// Puts a tenant out of any order in the round robin at `turn`.
    fn place_ring(&mut self, tenant: &TenantId, at_ms: u64, turn: Turn) {
        self.ring.insert(turn, tenant.clone());
        if !self.claiming.contains(tenant) {
            self.ring_idle += 1;
        }
        let place = Place::Ring(turn);
        self.hinted.insert(tenant.clone(), Hinted { at_ms, place });
    }

    /// Takes a tenant out of its place's order (its entry in `hinted` is
    /// the caller's to replace or drop).
    fn leave(&mut self, tenant: &TenantId, old: Hinted) {
        match old.place {
            Place::Ring(turn) => {
                self.ring.remove(&turn);
                if !self.claiming.contains(tenant) {
                    self.ring_idle -= 1;
                }
            }
            Place::Later => {
                self.later.remove(&(old.at_ms, tenant.clone()));
            }
            Place::Full => {}
        }
    }
}
