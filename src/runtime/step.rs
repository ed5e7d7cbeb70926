//! One shard's state and one loop iteration, without threads: the shard
//! thread drives it with the wall clock and an IO pool, the simulator with a
//! virtual clock and simulated sinks. Both run exactly this code.
//!
//! An iteration: outcomes and timers into the core; one write transaction
//! holding the new hooks, the core's decisions and the scan's claims; one
//! synced commit; then the jobs to start. A store failure aborts the
//! transaction and rebuilds the core from the store as a restart would
//! (claims dropped, in-flight rows due again): the failed iteration's
//! commits are reported failed, and nothing acknowledged is lost.

use crate::config::DispatchConfig;
use crate::core::{AttemptResult, Catalog, Core, Grant, Job, JobId};
use crate::store::{self, Hook, ShardStore, StoreError, TenantTable, TxnIndex};
use std::sync::Arc;

/// A hook to commit: its sinks' types resolved from the source at commit.
#[derive(Debug, Clone)]
pub struct NewRows {
    /// The hook; its `seq` is assigned by the shard.
    pub hook: Hook,
    pub sink_types: Vec<Arc<str>>,
}

/// What one iteration produced.
#[derive(Debug, Default)]
pub struct StepOutput {
    /// Ok when the iteration's commits are durable.
    pub committed: Option<Result<(), Arc<StoreError>>>,
    /// Attempts to start now.
    pub jobs: Vec<Job>,
    /// Attempts that timed out: their workers may be stuck.
    pub abandoned: Vec<JobId>,
}

/// A shard's store, tenant table, commit counter and scheduler core.
pub struct ShardState {
    store: ShardStore,
    tenants: TenantTable,
    next_seq: u64,
    core: Core,
    /// Rows made due again by recovery since open (at open and after store failures).
    pub recovered: u64,
}

impl ShardState {
    /// Opens the shard around a fresh `core`: loads its tenants and commit
    /// counter and makes every row that was claimed when the process stopped
    /// due again.
    pub fn open(store: ShardStore, core: Core, now_ms: u64) -> Result<ShardState, StoreError> {
        let mut state = ShardState {
            store,
            tenants: TenantTable::default(),
            next_seq: 0,
            core,
            recovered: 0,
        };
        state.reload(now_ms)?;
        Ok(state)
    }

    fn reload(&mut self, now_ms: u64) -> Result<(), StoreError> {
        self.tenants = TenantTable::load(&self.store)?;
        let rtxn = self.store.env.read_txn()?;
        self.next_seq = self.store.meta_u64(&rtxn, "next_seq")?.unwrap_or(1);
        drop(rtxn);
        self.recovered += self.store.recover(&self.tenants, now_ms)?;
        Ok(())
    }

    pub fn core(&self) -> &Core {
        &self.core
    }

    pub fn store(&self) -> &ShardStore {
        &self.store
    }

    pub fn handle_grant(&mut self, grant: Grant) {
        self.core.handle_grant(grant);
    }

    pub fn handle_reconfigure(&mut self, dispatch: DispatchConfig, catalog: Arc<Catalog>) {
        self.core.handle_reconfigure(dispatch, catalog);
    }

    /// Stops claiming; the next step writes every claimed row that has not
    /// started back as due (at shutdown). Running attempts may still report.
    pub fn handle_drain(&mut self) {
        self.core.handle_drain();
    }

    /// One iteration. `commits` are written and synced together; `outcomes`
    /// are attempt results since the last iteration.
    pub fn step(
        &mut self,
        now_ms: u64,
        commits: Vec<NewRows>,
        outcomes: Vec<(JobId, AttemptResult)>,
    ) -> StepOutput {
        for (job, result) in outcomes {
            self.core.handle_outcome(now_ms, job, result);
        }
        self.core.handle_timers(now_ms);
        let mut out = StepOutput::default();
        let has_commits = !commits.is_empty();
        if has_commits || self.core.has_store_ops() || self.core.wants_scan(now_ms) {
            let written = self.write(now_ms, commits);
            if has_commits {
                out.committed = Some(written.clone());
            }
            if let Err(e) = written {
                self.rebuild(now_ms, &e);
            }
        }
        while let Some(job) = self.core.poll_abandoned() {
            out.abandoned.push(job);
        }
        while let Some(job) = self.core.poll_job(now_ms) {
            out.jobs.push(job);
        }
        out
    }

    fn write(&mut self, now_ms: u64, commits: Vec<NewRows>) -> Result<(), Arc<StoreError>> {
        let tenants_before = self.tenants.len();
        let seq_before = self.next_seq;
        let result = self.write_txn(now_ms, commits);
        if result.is_err() {
            self.tenants.forget_after(tenants_before);
            self.next_seq = seq_before;
        }
        result.map_err(Arc::new)
    }

    fn write_txn(&mut self, now_ms: u64, commits: Vec<NewRows>) -> Result<(), StoreError> {
        let store = self.store.clone();
        let mut wtxn = store.env.write_txn()?;
        if !commits.is_empty() {
            for mut new in commits {
                new.hook.seq = self.next_seq;
                self.next_seq += 1;
                store::write_commit(
                    &store,
                    &mut wtxn,
                    &mut self.tenants,
                    &new.hook,
                    &new.sink_types,
                    now_ms,
                )?;
            }
            store.put_meta(&mut wtxn, "next_seq", self.next_seq)?;
            self.core.handle_committed();
        }
        self.apply_ops(&store, &mut wtxn)?;
        if self.core.wants_scan(now_ms) {
            let mut index = TxnIndex::new(&store, &wtxn, &self.tenants);
            self.core.handle_scan(now_ms, &mut index);
            if let Some(e) = index.into_error() {
                return Err(e);
            }
            self.apply_ops(&store, &mut wtxn)?;
        }
        wtxn.commit()?;
        Ok(())
    }

    fn apply_ops(&mut self, store: &ShardStore, wtxn: &mut heed::RwTxn) -> Result<(), StoreError> {
        while let Some(op) = self.core.poll_store_op() {
            store::write::apply(store, wtxn, &self.tenants, &op)?;
        }
        Ok(())
    }

    /// After a failed write: a new core from the store, as after a restart.
    /// Job ids continue, so late results of the old core's attempts are
    /// discarded rather than mistaken for new ones.
    fn rebuild(&mut self, now_ms: u64, cause: &StoreError) {
        eprintln!(
            "goad: shard store write failed ({cause}); rebuilding the shard's state from the store"
        );
        self.core = self.core.rebuilt(now_ms);
        if let Err(e) = self.reload(now_ms) {
            eprintln!("goad: shard store reload failed ({e}); retrying on the next iteration");
        }
    }
}
