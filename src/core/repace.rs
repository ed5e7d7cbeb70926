//! A reload that changes a sink's rate (`max_calls_per_s`, or the batch
//! size that spaces a batching sink's turns) paces its backlog again: the
//! rows written back to wait for their turns at the old rate
//! ([`RowState::paced`]) are made due now, attempts kept, and the scan
//! paces them at the new one as it claims them. Raising a Slack sink's
//! rate from 1 to 10 a second drains the 1,500 rows it had paced in two
//! and a half minutes, not the 25 its old turns would take. A row of a
//! sink the reload removed is made due too, for the scan to dead-letter
//! as `sink_gone` now rather than at its turn.
//!
//! The keys are compared once a reload, by the engine as it builds the
//! new catalog (`Catalog::note_changes_from`), not by every shard.
//!
//! It walks the tenants of those sinks' rows due after now (see
//! `tenant_walk`), one step at the end of each scan, and leaves rows
//! waiting out a backoff, parked or of other sinks.
//!
//! The store keeps the fingerprint of the paces the paced rows were paced
//! at ([`Catalog::paces_fingerprint`], [`StoreOp::PacedAt`]), written when
//! a pass ends and deleted when one starts. A new core whose catalog's
//! fingerprint is not the store's — the node restarted with other rates,
//! or died mid-pass — paces again every paced row of every tenant, as it
//! cannot tell which sinks' rates changed. A restart with the rates
//! unchanged walks nothing; a store with no fingerprint (new, or written
//! by a goad before this) is walked once.

use super::tenant_walk::TenantWalk;
use super::*;
use std::collections::HashSet;

/// Where pacing again stands.
#[derive(Debug, Default)]
pub(super) struct RepacePass {
    /// The keys whose pace the reloads changed (the rows binding to them,
    /// or to no key now, are made due).
    keys: HashSet<SinkKey>,
    /// Every paced row is made due, whatever its key.
    every_key: bool,
    walk: TenantWalk,
}

impl Core {
    /// Paces again the rows of the keys whose pace `catalog` (a reload's)
    /// changes: forgets their turns and starts walking their tenants.
    pub(super) fn repace_changed_rates(&mut self, catalog: &Catalog) {
        if self.catalog.paces_fingerprint() == catalog.paces_fingerprint() {
            return; // No pace changed: the common reload, at no cost here.
        }
        for key in catalog.paces_changed_since(&self.catalog).iter() {
            self.start_repacing();
            if let Some(state) = self.keys.get_mut(key) {
                state.paced_until_us = 0;
            }
            self.repacing.walk.add(&key.tenant);
            self.repacing.keys.insert(key.clone());
        }
    }

    /// What a new core's store says: the fingerprint of the paces its
    /// paced rows were paced at (`None` while a pass was under way). If it
    /// is not this catalog's, every paced row is paced again.
    pub fn resume_repacing(&mut self, paced_at: Option<u64>) {
        if paced_at != Some(self.catalog.paces_fingerprint()) {
            self.start_repacing();
            self.repacing.every_key = true;
            self.repacing.walk.restart_with_every_tenant();
        }
    }

    /// Keeps in the store that a pass is under way, if none was.
    fn start_repacing(&mut self) {
        if !self.is_repacing() {
            (self.ops).push_back(StoreOp::PacedAt { paces: None });
        }
        self.scan_requested = true;
    }

    /// Whether pacing again is under way.
    pub(super) fn is_repacing(&self) -> bool {
        !self.repacing.walk.is_done()
    }

    /// One step of pacing again, if under way: makes the paced rows it
    /// reads due at `now_ms`; returns how many.
    pub(super) fn repace_step(&mut self, now_ms: u64, index: &mut dyn DueIndex) -> u64 {
        let step = self.step_walk(
            now_ms,
            index,
            |core| &mut core.repacing.walk,
            Core::repace_if_paced,
        );
        if step.ended {
            self.repacing.keys.clear();
            self.repacing.every_key = false;
            // After the rows it made due.
            let paces = Some(self.catalog.paces_fingerprint());
            (self.ops).push_back(StoreOp::PacedAt { paces });
        }
        step.made_due
    }

    /// One due entry: made due now (1) if its row waits for a turn given
    /// at a pace a reload changed (any pace, in a pass of every key).
    fn repace_if_paced(&mut self, now_ms: u64, entry: DueEntry, index: &mut dyn DueIndex) -> u64 {
        self.make_due_if(now_ms, entry, index, |core, state, key| {
            let pass = &core.repacing;
            state.paced && (pass.every_key || key.is_none_or(|key| pass.keys.contains(&key)))
        })
    }
}
