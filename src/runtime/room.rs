//! Whether a shard's store has room for new hooks: for the shard (see
//! `store::fill`), and for the hook's tenant under its `max_stored_bytes`
//! (see `store::tenant_bytes`).
//!
//! The store is measured at an iteration's first commit, and each commit
//! taken since is counted against what was free. It is measured again
//! once half of that is taken, or at every iteration while it is full (to
//! see deliveries free room): outcomes, claims and replays keep the
//! store's size or shrink it, so between measures the count only errs on
//! the full side. A commit past the limit is refused with
//! `CommitError::StoreFull`; outcomes are never refused.

use super::engine::CommitError;
use super::step::{NewRows, ShardState};
use crate::core::TenantId;
use std::collections::{HashMap, HashSet};

#[derive(Debug, Default)]
pub(super) struct StoreRoom {
    /// What new hooks may still fill; `None` until measured again.
    free_bytes: Option<u64>,
    /// What was free at the last measure.
    measured_free_bytes: u64,
    /// The last measure found no room (logged when it changes).
    full: bool,
}

impl StoreRoom {
    /// A new iteration: measure again at its first commit if the store was
    /// full or half of what was free is taken.
    pub(super) fn next_iteration(&mut self) {
        if self.full || self.free_bytes < Some(self.measured_free_bytes / 2) {
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
        let limit_bytes = state.store().ingest_limit_bytes();
        let free_bytes = match self.free_bytes {
            Some(free_bytes) => free_bytes,
            None => match state.store_used_bytes() {
                Ok(used_bytes) => {
                    self.measured_free_bytes = limit_bytes.saturating_sub(used_bytes);
                    self.measured_free_bytes
                }
                // A store that cannot be measured is written to (its writes
                // report what is wrong with it) and measured again next time.
                Err(_) => return Ok(()),
            },
        };
        let bytes = rows.stored_bytes();
        let room = bytes <= free_bytes;
        let used_bytes = limit_bytes.saturating_sub(free_bytes);
        if room == self.full {
            self.full = !room;
            let fields: &[(&str, &dyn std::fmt::Display)] = &[
                ("shard", &shard),
                ("used_bytes", &used_bytes),
                ("limit_bytes", &limit_bytes),
            ];
            if room {
                crate::log::info("shard store has room again; taking new hooks", fields);
            } else {
                crate::log::warn(
                    "shard store is full; refusing new hooks until deliveries free room",
                    fields,
                );
            }
        }
        if !room {
            self.free_bytes = Some(free_bytes);
            return Err(CommitError::StoreFull {
                used_bytes,
                limit_bytes,
            });
        }
        self.free_bytes = Some(free_bytes - bytes);
        Ok(())
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
