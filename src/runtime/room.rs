//! Whether a shard's store has room for new hooks: for the shard (see
//! `store::fill`), and for the hook's tenant under its `max_stored_bytes`
//! (see `store::tenant_bytes`).
//!
//! The store is measured at an iteration's first commit, and each commit
//! taken since is counted against what was free. It is measured again
//! once half of that is taken, a second later, or at every iteration while
//! it is full (to see deliveries free room): outcomes, claims and replays keep the
//! store's size or shrink it, so between measures the count only errs on
//! the full side. A commit past the limit is refused with
//! `CommitError::StoreFull`, or `CommitError::DiskFull` where the file
//! system holding the store fills first; outcomes are never refused.

use super::errors::CommitError;
use super::step::{NewRows, ShardState};
use crate::core::TenantId;
use crate::limits::STORE_MEASURE_INTERVAL_MS;
use crate::store::{DiskReserve, RoomBound};
use std::collections::{HashMap, HashSet};

#[derive(Debug)]
pub(super) struct StoreRoom {
    /// What new hooks leave free on the disk.
    reserve: DiskReserve,
    /// What new hooks may still fill; `None` until measured again.
    free_bytes: Option<u64>,
    /// What was free at the last measure.
    measured_free_bytes: u64,
    /// When the last measure was taken, and when this iteration started.
    measured_at_ms: u64,
    iteration_at_ms: u64,
    /// Which limit the last measure found nearer.
    bound: RoomBound,
    /// The last measure found no room (logged when it changes).
    full: bool,
}

impl StoreRoom {
    pub(super) fn new(reserve: DiskReserve) -> StoreRoom {
        StoreRoom {
            reserve,
            free_bytes: None,
            measured_free_bytes: 0,
            measured_at_ms: 0,
            iteration_at_ms: 0,
            bound: RoomBound::Map { limit_bytes: 0 },
            full: false,
        }
    }

    /// A new iteration: measure again at its first commit if the store was
    /// full, half of what was free is taken, or the last measure is
    /// `STORE_MEASURE_INTERVAL_MS` old (others write to the disk too).
    pub(super) fn next_iteration(&mut self, now_ms: u64) {
        self.iteration_at_ms = now_ms;
        if self.full
            || self.free_bytes < Some(self.measured_free_bytes / 2)
            || now_ms >= self.measured_at_ms + STORE_MEASURE_INTERVAL_MS
        {
            self.free_bytes = None;
        }
    }

    /// Counts `rows` against the room, or refuses them.
    pub(super) fn admit(
        &mut self,
        state: &ShardState,
        shard: usize,
        rows: &NewRows,
    ) -> Result<(), CommitError> {
        let free_bytes = match self.free_bytes {
            Some(free_bytes) => free_bytes,
            // A store that cannot be measured is written to (its writes
            // report what is wrong with it) and measured again next time.
            None => match self.measure(state) {
                Some(free_bytes) => free_bytes,
                None => return Ok(()),
            },
        };
        let bytes = rows.stored_bytes();
        let room = bytes <= free_bytes;
        if room == self.full {
            self.full = !room;
            self.log_change(shard, free_bytes);
        }
        if !room {
            self.free_bytes = Some(free_bytes);
            return Err(self.refusal(free_bytes));
        }
        self.free_bytes = Some(free_bytes - bytes);
        Ok(())
    }

    /// What new hooks may fill: the nearer of the map's limit and the
    /// disk's (see `store::fill`).
    fn measure(&mut self, state: &ShardState) -> Option<u64> {
        let used_bytes = state.store_used_bytes().ok()?;
        self.measured_at_ms = self.iteration_at_ms;
        let room = state.store().ingest_room(used_bytes, self.reserve);
        self.bound = room.bound;
        self.measured_free_bytes = room.room_bytes;
        Some(room.room_bytes)
    }

    fn refusal(&self, free_bytes: u64) -> CommitError {
        match self.bound {
            RoomBound::Map { limit_bytes } => CommitError::StoreFull {
                used_bytes: limit_bytes.saturating_sub(free_bytes),
                limit_bytes,
            },
            RoomBound::Disk { available_bytes } => CommitError::DiskFull {
                available_bytes,
                min_free_bytes: self.reserve.min_free_bytes,
            },
        }
    }

    fn log_change(&self, shard: usize, free_bytes: u64) {
        let (full_msg, room_msg, values) = match self.bound {
            RoomBound::Map { limit_bytes } => (
                "shard store is full; refusing new hooks until deliveries free room",
                "shard store has room again; taking new hooks",
                [
                    ("used_bytes", limit_bytes.saturating_sub(free_bytes)),
                    ("limit_bytes", limit_bytes),
                ],
            ),
            RoomBound::Disk { available_bytes } => (
                "the disk holding the shard's store is full; refusing new hooks until deliveries or the operator free room",
                "the disk has room again; taking new hooks",
                [
                    ("available_bytes", available_bytes),
                    ("min_free_disk_bytes", self.reserve.min_free_bytes),
                ],
            ),
        };
        let mut fields: Vec<(&str, &dyn std::fmt::Display)> = vec![("shard", &shard)];
        fields.extend(values.iter().map(|(key, value)| (*key, value as _)));
        if self.full {
            crate::log::warn(full_msg, &fields);
        } else {
            crate::log::info(room_msg, &fields);
        }
    }
}

/// Each tenant's room under its `max_stored_bytes`: what the store counts
/// for it (through the open write transaction, so commits written and not
/// yet synced count), and the commits taken this iteration, which the
/// iteration writes. A tenant with no bound costs nothing.
#[derive(Debug, Default)]
pub(super) struct TenantRoom {
    /// Per tenant, the bytes of commits taken this iteration.
    taken: HashMap<TenantId, u64>,
    /// Tenants refused lately (logged when they are, and when they have room again).
    full: HashSet<TenantId>,
}

impl TenantRoom {
    /// A new iteration: the last one's commits are written.
    pub(super) fn next_iteration(&mut self) {
        self.taken.clear();
    }

    /// Counts `rows` against their tenant's bound, or refuses them.
    pub(super) fn admit(
        &mut self,
        state: &ShardState,
        shard: usize,
        rows: &NewRows,
    ) -> Result<(), CommitError> {
        let tenant = &rows.hook.tenant;
        let limit_bytes = state.core().tenant_limits(tenant).max_stored_bytes;
        if limit_bytes == 0 {
            return Ok(());
        }
        // A store that cannot be read is written to (its writes report
        // what is wrong with it).
        let Ok(stored_bytes) = state.tenant_stored_bytes(tenant) else {
            return Ok(());
        };
        let taken = self.taken.get(tenant).copied().unwrap_or(0);
        let used_bytes = stored_bytes + taken + rows.stored_bytes();
        let room = used_bytes <= limit_bytes;
        if room == self.full.contains(tenant) {
            let fields: &[(&str, &dyn std::fmt::Display)] = &[
                ("shard", &shard),
                ("tenant", tenant),
                ("stored_bytes", &stored_bytes),
                ("limit_bytes", &limit_bytes),
            ];
            if room {
                self.full.remove(tenant);
                crate::log::info("tenant has room again; taking its hooks", fields);
            } else {
                self.full.insert(tenant.clone());
                crate::log::warn(
                    "tenant is at its max_stored_bytes; refusing its hooks until deliveries free room",
                    fields,
                );
            }
        }
        if !room {
            return Err(CommitError::TenantFull {
                tenant: tenant.to_string(),
                used_bytes,
                limit_bytes,
            });
        }
        *self.taken.entry(tenant.clone()).or_default() += rows.stored_bytes();
        Ok(())
    }
}
