//! Rows parked behind a breaker that no longer applies: made due now,
//! rather than left waiting to the end of an open period nothing keeps.
//!
//! A reload that drops an open breaker (its sink removed, or its
//! destination changed where it stands; a moved sink takes its breaker
//! along, see `Core::carry_breakers`) unparks its tenant's parked rows, one that turns
//! breakers off (`breaker_failures` 0) every tenant's, and a new core that
//! closes a breaker its store kept unparks that breaker's tenant. The rows
//! the breaker held (never attempted, past every due time) are the pass over
//! held rows' (see `held`); this pass takes those it parked due at the
//! end of its open period (attempted, or the one to be its probe).
//!
//! It walks each tenant's rows due after now (see `tenant_walk`), one step
//! at the end of each scan as the pass over held rows does. It makes due
//! each row still parked ([`RowState::parked`]) whose key has no open breaker now, attempts kept
//! (a row whose sink is gone is then dead-lettered by the scan as
//! `sink_gone`); it leaves rows waiting out a backoff and rows behind an
//! open breaker.
//!
//! The store keeps whether unparking is under way ([`StoreOp::Unparking`],
//! written with the ops that start it and with the last step's): a new
//! core whose store says so — the process died mid-pass, or a write
//! failed and the shard was rebuilt — unparks every tenant. A write lost
//! with the start of a pass lost the breakers' closing too: the new core
//! takes those breakers back, closes them, and so unparks their tenants.
//! A breaker that closed before the reload (its probe answered) is not
//! in the store, yet the rows parked while its probe ran wait out their
//! parks; so the store also keeps that rows may be parked (written with
//! every park, deleted by [`StoreOp::NoneParked`] once a pass walked every
//! tenant with breakers off), and a new core with breakers off whose store
//! says so unparks every tenant.

use super::tenant_walk::TenantWalk;
use super::*;

/// Where unparking stands.
#[derive(Debug, Default)]
pub(super) struct UnparkPass {
    walk: TenantWalk,
    /// The tenants left are every tenant's: the pass ending with breakers
    /// off leaves no row parked.
    walks_every_tenant: bool,
}

impl Core {
    /// Unparks `tenant`'s rows (see the module docs).
    pub(super) fn unpark_tenant(&mut self, tenant: &TenantId) {
        self.start_unparking();
        self.unparking.walk.add(tenant);
    }

    /// Unparks every tenant's rows: after a reload that turned breakers
    /// off, and in a new core whose store says so (see `resume_unparking`).
    pub fn unpark_every_tenant(&mut self) {
        self.start_unparking();
        self.unparking.walk.restart_with_every_tenant();
        self.unparking.walks_every_tenant = true;
    }

    /// What a new core's store says: unparking was `under_way`, or rows
    /// may be `parked` while breakers are off now — a reload turned them
    /// off and the start of its pass was lost with a rebuild or a crash.
    /// Either way, every tenant is unparked.
    pub fn resume_unparking(&mut self, under_way: bool, parked: bool) {
        if under_way || (parked && self.dispatch.breaker_failures == 0) {
            self.unpark_every_tenant();
        }
    }

    /// Keeps in the store that unparking is under way, if it was not.
    fn start_unparking(&mut self) {
        if !self.is_unparking() {
            (self.ops).push_back(StoreOp::Unparking { under_way: true });
        }
        self.scan_requested = true;
    }

    /// Whether unparking is under way.
    pub fn is_unparking(&self) -> bool {
        !self.unparking.walk.is_done()
    }

    /// One step of unparking, if under way: reads at most
    /// `WAKE_STEP_ROWS` due entries after `now_ms`, tenant by tenant, and
    /// makes the unparked rows due at `now_ms`; returns how many.
    pub(super) fn unpark_step(&mut self, now_ms: u64, index: &mut dyn DueIndex) -> u64 {
        let step = self.step_walk(
            now_ms,
            index,
            |core| &mut core.unparking.walk,
            Core::unpark_if_parked,
        );
        if step.ended {
            // After the rows it made due.
            (self.ops).push_back(StoreOp::Unparking { under_way: false });
            // Nothing parks while breakers are off.
            if std::mem::take(&mut self.unparking.walks_every_tenant)
                && self.dispatch.breaker_failures == 0
            {
                (self.ops).push_back(StoreOp::NoneParked);
            }
        }
        step.made_due
    }

    /// One due entry: made due now (1) if its row is parked and its key
    /// has no open breaker.
    fn unpark_if_parked(&mut self, now_ms: u64, entry: DueEntry, index: &mut dyn DueIndex) -> u64 {
        self.make_due_if(now_ms, entry, index, |core, state, key| {
            let behind_open =
                key.is_some_and(|key| (core.breakers.get(&key)).is_some_and(Breaker::is_open));
            state.parked && !behind_open
        })
    }
}
