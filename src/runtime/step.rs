//! One shard's state and one loop iteration, without threads: the shard
//! thread drives it with the wall clock and an IO pool, the simulator with a
//! virtual clock and simulated sinks. Both run exactly this code.
//!
//! An iteration: outcomes and timers into the core; the new hooks, the
//! core's decisions and the scan's claims written into the shard's write
//! transaction; then the jobs to start.
//!
//! The write transaction stays open across iterations and is committed
//! (synced) only when it must be: when it holds new hooks (their committers
//! wait for durability), when it has been dirty for `OUTCOME_FLUSH_MS`, or
//! when it holds `MAX_UNFLUSHED_OPS` operations. So outcome-only iterations
//! cost no sync, and nothing is written to the file unsynced (LMDB's
//! `NOSYNC`, which can corrupt the file on power loss, is not used). A crash
//! loses at most the uncommitted outcomes and claims, which only redelivers.
//! One exception waits for the commit: an ordering lane handed on from a
//! head that was not delivered (dead-lettered, gone) starts no call until
//! that is durable, so a crash cannot bring the head back behind a later
//! row already sent (the iteration commits before its calls start).
//!
//! A store failure drops the transaction and rebuilds the core from the
//! store as a restart would (claims dropped, in-flight rows due again): the
//! failed iteration's commits are reported failed, and nothing acknowledged
//! is lost. The shard then scans again only after `STORE_RETRY_MS`, so a
//! store that keeps failing is retried once a second, not in a busy loop.

mod calls;
mod rebuild;

use super::failure_log::FailureLog;
use super::reply::FirstId;
use crate::config::{DispatchConfig, RetryConfig};
use crate::core::{
    AttemptResult, BreakerEvent, Call, Catalog, Core, Grant, JobId, OutcomeEvent, RowId,
    RunningAttempt, SourceEntry, StoreOp,
};
use crate::limits::{MAX_UNFLUSHED_OPS, OUTCOME_FLUSH_MS};
use crate::store::{
    self, dedupe, record::SinkPlaces, Hook, NewRow, RowRecord, ShardStore, StoreError, TenantTable,
    TxnIndex,
};
use heed::RwTxn;
use std::sync::Arc;
use std::time::Duration;

/// An attempt's result as its IO worker reports it, with how long its
/// call ran (a batch's entries each carry their call's time).
#[derive(Debug, Clone)]
pub struct Completion {
    pub job: JobId,
    pub result: AttemptResult,
    pub took: Duration,
}

/// A hook to commit: its rows' sinks resolved from the source at commit.
#[derive(Debug, Clone)]
pub struct NewRows {
    /// The hook; its `seq` is assigned by the shard.
    pub hook: Hook,
    pub rows: Vec<NewRow>,
    /// Its source's sinks' places, which its record keeps (`None`: none,
    /// as a hook written before store format 6).
    pub places: Option<SinkPlaces>,
    /// Its source's `dedupe_window_ms` (0: no dedupe).
    pub dedupe_window_ms: u64,
}

/// What a commit stores besides its body and headers, about: the hook's
/// ids and key, and per row its record and due key (B-tree overhead
/// included).
const STORED_OVERHEAD_BYTES: u64 = 256;

impl NewRows {
    /// The rows `hook` of `source` gets: one per sink whose `filter` it
    /// passes (a hook that passes none is stored not at all), laned by
    /// the hook's headers for an ordered sink.
    pub fn of(source: &SourceEntry, hook: Hook) -> NewRows {
        let rows = source
            .sinks
            .iter()
            .enumerate()
            .filter(|(_, sink)| sink.filter.as_ref().is_none_or(|f| f.passes(&hook.headers)))
            .map(|(i, sink)| NewRow {
                sink_index: i as u16,
                sink_type: sink.sink_type.clone(),
                lane_key: sink.lane.as_ref().map(|by| by.key(&hook.headers)),
            })
            .collect();
        NewRows {
            hook,
            rows,
            places: Some(source.places.clone()),
            dedupe_window_ms: source.dedupe_window_ms,
        }
    }

    /// About how many bytes of the store the commit will fill.
    pub fn stored_bytes(&self) -> u64 {
        let headers: usize = self
            .hook
            .headers
            .iter()
            .map(|(n, v)| n.len() + v.len())
            .sum();
        self.hook.size_bytes()
            + headers as u64
            + STORED_OVERHEAD_BYTES * (1 + self.rows.len() as u64)
    }
}

/// What one iteration produced besides the attempts it started.
#[derive(Debug, Default)]
pub struct StepOutput {
    /// Ok when the iteration's commits are durable: for each, in order,
    /// `None` when it stored its hook, or the id of the hook that took its
    /// dedupe key first.
    pub committed: Option<Result<Vec<FirstId>, Arc<StoreError>>>,
    /// Attempts that timed out: their workers may be stuck.
    pub abandoned: Vec<JobId>,
    /// Breakers that opened or closed, in order.
    pub breaker_events: Vec<BreakerEvent>,
    /// Attempts' outcomes, in order, when the core is observed.
    pub outcome_events: Vec<OutcomeEvent>,
}

/// A shard's open write transaction, tenant table, commit counter and
/// scheduler core, over a store the caller owns.
pub struct ShardState<'s> {
    store: &'s ShardStore,
    txn: Option<RwTxn<'s>>,
    /// When the open transaction got its first uncommitted write.
    dirty_since_ms: Option<u64>,
    unflushed_ops: usize,
    /// The latest time of the shard's clock a step or call was given:
    /// written with each commit of writes (see [`store::CLOCK_MS`]).
    clock_ms: u64,
    tenants: TenantTable,
    next_seq: u64,
    core: Core,
    /// No scan before this, after a store failure.
    holdoff_until_ms: u64,
    /// After a restart whose recovery could not be written (the store
    /// failing still): the old core's attempts still running, whose rows
    /// are held for the new core once the recovery is written (see
    /// `recover_after_restart`).
    unrecovered: Option<Vec<RunningAttempt>>,
    /// Rows made due again by recovery since open (at open and after store failures).
    pub recovered: u64,
    /// Store writes that failed since open (each rebuilt the shard).
    pub store_failures: u64,
    failure_log: FailureLog,
    /// Due entries that did not decode, set aside since open.
    pub unreadable_due: u64,
    /// The open transaction handed a lane on from a head that was not
    /// delivered (dead-lettered, gone): no call starts until it commits
    /// (see `step`).
    lane_passed_undelivered: bool,
}

impl<'s> ShardState<'s> {
    /// Opens the shard around a fresh `core`: loads its tenants and commit
    /// counter and makes every row that was claimed when the process stopped
    /// due again.
    pub fn open(
        store: &'s ShardStore,
        core: Core,
        now_ms: u64,
    ) -> Result<ShardState<'s>, StoreError> {
        let mut state = ShardState {
            store,
            txn: None,
            dirty_since_ms: None,
            unflushed_ops: 0,
            clock_ms: now_ms,
            tenants: TenantTable::default(),
            next_seq: 0,
            core,
            holdoff_until_ms: 0,
            unrecovered: None,
            recovered: 0,
            store_failures: 0,
            failure_log: FailureLog::default(),
            unreadable_due: 0,
            lane_passed_undelivered: false,
        };
        state.reload(now_ms)?;
        Ok(state)
    }

    fn reload(&mut self, now_ms: u64) -> Result<(), StoreError> {
        assert!(
            self.txn.is_none(),
            "reloading with a write transaction open"
        );
        self.tenants = TenantTable::load(self.store)?;
        let rtxn = self.store.env.read_txn()?;
        self.next_seq = self.store.meta_u64(&rtxn, "next_seq")?.unwrap_or(1);
        let unparking = self.store.meta_u64(&rtxn, store::UNPARKING)?.is_some();
        let parked = self.store.meta_u64(&rtxn, store::PARKED)?.is_some();
        let paced_at = self.store.meta_u64(&rtxn, store::PACED_AT)?;
        drop(rtxn);
        self.core.resume_unparking(unparking, parked);
        self.core.resume_repacing(paced_at);
        self.recovered += self.store.recover(&self.tenants, now_ms)?;
        let kept = store::breakers::take_back(self.store, &self.tenants, now_ms)?;
        self.core.restore_breakers(kept);
        Ok(())
    }

    pub fn core(&self) -> &Core {
        &self.core
    }

    pub fn store(&self) -> &ShardStore {
        self.store
    }

    /// The bytes the store holds, including writes not yet committed.
    pub fn store_used_bytes(&self) -> Result<u64, StoreError> {
        match &self.txn {
            Some(txn) => self.store.used_bytes(txn),
            None => self.store.committed_used_bytes(),
        }
    }

    /// The bytes the tenant's hooks hold in the store, including writes
    /// not yet committed (see `store::tenant_bytes`).
    pub fn tenant_stored_bytes(&self, tenant: &str) -> Result<u64, StoreError> {
        let Some(tenant_no) = self.tenants.number(tenant) else {
            return Ok(0);
        };
        match &self.txn {
            Some(txn) => store::tenant_bytes::get(self.store, txn, tenant_no),
            None => {
                let rtxn = self.store.env().read_txn()?;
                store::tenant_bytes::get(self.store, &rtxn, tenant_no)
            }
        }
    }

    /// Whether `rows` repeats a dedupe key its source took within its
    /// window, as of the writes so far: committing it stores nothing (it is
    /// answered with the first hook's id).
    pub fn is_duplicate(&self, rows: &NewRows, now_ms: u64) -> bool {
        if rows.dedupe_window_ms == 0 || rows.rows.is_empty() {
            return false;
        }
        let found = match &self.txn {
            Some(txn) => dedupe::first_id(self.store, txn, &rows.hook, now_ms),
            None => self
                .store
                .env()
                .read_txn()
                .map_err(StoreError::from)
                .and_then(|rtxn| dedupe::first_id(self.store, &rtxn, &rows.hook, now_ms)),
        };
        matches!(found, Ok(Some(_)))
    }

    /// One row as this shard sees it (including writes not yet committed).
    pub fn row(&self, row: RowId) -> Result<Option<RowRecord>, StoreError> {
        match &self.txn {
            Some(txn) => self.store.row_in(txn, row),
            None => self.store.row(row),
        }
    }

    pub fn handle_grant(&mut self, grant: Grant) {
        self.core.handle_grant(grant);
    }

    pub fn handle_reconfigure(
        &mut self,
        now_ms: u64,
        dispatch: DispatchConfig,
        retry: RetryConfig,
        catalog: Arc<Catalog>,
    ) {
        self.core
            .handle_reconfigure(now_ms, dispatch, retry, catalog);
    }

    /// Stops claiming; the next step writes every claimed row that has not
    /// started back as due (at shutdown). Running attempts may still report.
    pub fn handle_drain(&mut self) {
        self.core.handle_drain();
    }

    /// When to call `step` again with nothing else happening: the core's
    /// deadline, or when uncommitted writes must be flushed.
    pub fn poll_deadline(&self, now_ms: u64) -> Option<u64> {
        let flush_at_ms = self.dirty_since_ms.map(|t| t + OUTCOME_FLUSH_MS);
        let core_at_ms = match self.unrecovered {
            // The recovery is tried again then.
            Some(_) => Some(self.holdoff_until_ms),
            None => self
                .core
                .poll_deadline(now_ms)
                .map(|t| t.max(self.holdoff_until_ms)),
        };
        match (core_at_ms, flush_at_ms) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The process did not run from `from_ms` to `to_ms` (see
    /// `core::stall`).
    pub fn note_stall(&mut self, from_ms: u64, to_ms: u64) {
        self.core.note_stall(from_ms, to_ms);
    }

    /// Whether a store write failed and the shard has not read its store
    /// back since (it tries every `STORE_RETRY_MS`): a store that keeps
    /// failing (a file system gone read-only), whose commits fail
    /// meanwhile.
    pub fn is_store_failing(&self) -> bool {
        self.unrecovered.is_some()
    }

    /// Nothing claimed, running or due, and everything written is committed.
    pub fn is_idle(&self, now_ms: u64) -> bool {
        self.core.is_idle(now_ms) && self.txn.is_none() && self.unrecovered.is_none()
    }

    /// Each sink key's rows dead-lettered since the last call (see
    /// [`Core::take_unlogged_dead`]).
    pub fn take_unlogged_dead(&mut self) -> Vec<crate::core::UnloggedDead> {
        self.core.take_unlogged_dead()
    }

    /// Commits whatever is written (at shutdown).
    pub fn flush(&mut self) -> Result<(), StoreError> {
        self.commit()
    }

    /// Attempt results, handed to the core; their store writes wait for
    /// the next step.
    pub fn handle_outcomes(&mut self, now_ms: u64, outcomes: Vec<Completion>) {
        for c in outcomes {
            if let Some(running) = &mut self.unrecovered {
                // An attempt of the old core that ended before its row was
                // held for the new one: the recovery makes its row due, and
                // it is delivered again (at least once).
                if let Some(i) = running.iter().position(|a| a.job == c.job) {
                    running.swap_remove(i);
                    continue;
                }
            }
            self.core.handle_outcome(now_ms, c.job, c.result, c.took);
        }
    }

    /// One iteration. `commits` are written and synced together; `outcomes`
    /// are attempt results since the last iteration. `start` is given every
    /// call to start: those of rows that were durable before this batch
    /// while the batch syncs (so deliveries overlap the sync), those with
    /// a row of the batch's own hooks once it is durable.
    pub fn step(
        &mut self,
        now_ms: u64,
        commits: Vec<NewRows>,
        outcomes: Vec<Completion>,
        start: &mut dyn FnMut(Call),
    ) -> StepOutput {
        self.clock_ms = self.clock_ms.max(now_ms);
        if self.unrecovered.is_some() && now_ms >= self.holdoff_until_ms {
            self.recover_after_restart(now_ms);
        }
        self.failure_log.tick(now_ms);
        self.handle_outcomes(now_ms, outcomes);
        self.core.handle_timers(now_ms);
        let mut out = StepOutput::default();
        let has_commits = !commits.is_empty();
        let (tenants_before, first_new_seq) = (self.tenants.len(), self.next_seq);
        let mut held = Vec::new();
        let mut first_ids = Vec::new();
        let mut written = self.write_txn(now_ms, commits, &mut first_ids);
        if written.is_ok() {
            // A lane's next row starts only once its head's end is durable:
            // a crash that lost a dead-lettering would bring the head back
            // (due, perhaps deliverable again) behind a later row already
            // sent. A delivered head needs no wait: it comes back first.
            let lane_passed = self.lane_passed_undelivered;
            while let Some(call) = self.core.poll_call(now_ms) {
                if lane_passed || call.jobs().iter().any(|job| job.row.seq >= first_new_seq) {
                    held.push(call);
                } else {
                    start(call);
                }
            }
            if has_commits || lane_passed {
                written = self.commit();
            }
        }
        let written = written.map_err(Arc::new);
        if has_commits {
            out.committed = Some(written.clone().map(|()| first_ids));
        }
        match written {
            Ok(()) => held.into_iter().for_each(&mut *start),
            Err(e) => {
                // Nothing of the batch is stored: its hooks' attempts are dropped.
                self.tenants.forget_after(tenants_before);
                self.next_seq = first_new_seq;
                self.rebuild(now_ms, &e);
            }
        }
        while let Some(job) = self.core.poll_abandoned() {
            out.abandoned.push(job);
        }
        out.breaker_events
            .extend(std::iter::from_fn(|| self.core.poll_breaker_event()));
        out.outcome_events = self.take_outcome_events();
        out
    }

    /// The outcomes decided since the last step (or since the last call),
    /// in order: a step's own are in its output; those of an admin call
    /// (`dead_letter_source`) are taken after it.
    pub fn take_outcome_events(&mut self) -> Vec<OutcomeEvent> {
        std::iter::from_fn(|| self.core.poll_outcome_event()).collect()
    }

    /// Writes the commits, pushing for each what it answers onto
    /// `first_ids`, and the core's ops; scans if the core wants to.
    fn write_txn(
        &mut self,
        now_ms: u64,
        commits: Vec<NewRows>,
        first_ids: &mut Vec<FirstId>,
    ) -> Result<(), StoreError> {
        let has_commits = !commits.is_empty();
        // Until a restart's recovery is written, nothing is claimed: the
        // recovery would make a new claim due again while its attempt runs.
        let held_off = now_ms < self.holdoff_until_ms || self.unrecovered.is_some();
        if has_commits || self.core.has_store_ops() || (self.core.wants_scan(now_ms) && !held_off) {
            let store = self.store;
            // Put back once written; a failed write drops it (an abort),
            // and the caller rebuilds the shard from the store.
            let mut txn = match self.txn.take() {
                Some(txn) => txn,
                None => store.env.write_txn()?,
            };
            let mut writes = self.write_commits(&mut txn, now_ms, commits, first_ids)?;
            let (tenants, core) = (&self.tenants, &mut self.core);
            let lane_passed = &mut self.lane_passed_undelivered;
            writes += apply_ops(store, &mut txn, tenants, core, lane_passed)?;
            // After the commits: new hooks ask for a scan.
            if core.wants_scan(now_ms) && !held_off {
                let ((), set_aside) = read_due(store, &mut txn, tenants, core, |core, index| {
                    core.handle_scan(now_ms, index)
                })?;
                self.unreadable_due += set_aside as u64;
                writes += set_aside + apply_ops(store, &mut txn, tenants, core, lane_passed)?;
            }
            self.txn = Some(txn);
            if writes > 0 {
                self.dirty_since_ms.get_or_insert(now_ms);
                self.unflushed_ops += writes;
            }
        }
        let flush_due = self
            .dirty_since_ms
            .is_some_and(|t| now_ms >= t + OUTCOME_FLUSH_MS)
            || self.unflushed_ops >= MAX_UNFLUSHED_OPS;
        if !has_commits && (flush_due || self.dirty_since_ms.is_none()) {
            // A transaction with nothing to write is closed too (no sync);
            // one with new hooks is committed by `step`.
            self.commit()?;
        }
        Ok(())
    }

    /// Writes each new hook and its rows under the next seq, or, for a
    /// hook whose dedupe key was taken within its window, nothing: its
    /// first id is pushed onto `first_ids` instead. Returns the writes.
    fn write_commits(
        &mut self,
        txn: &mut RwTxn<'s>,
        now_ms: u64,
        commits: Vec<NewRows>,
        first_ids: &mut Vec<FirstId>,
    ) -> Result<usize, StoreError> {
        let (store, writes) = (self.store, commits.len());
        let mut deltas = store::tenant_bytes::TenantDeltas::default();
        for mut new in commits {
            // A rowless hook is not stored, so it takes no dedupe key.
            let deduped = new.dedupe_window_ms > 0 && !new.rows.is_empty();
            if deduped {
                let first = dedupe::first_id(store, txn, &new.hook, now_ms)?;
                if first.is_some() {
                    first_ids.push(first);
                    continue;
                }
            }
            new.hook.seq = self.next_seq;
            self.next_seq += 1;
            let commit = store::write::Commit {
                hook: &new.hook,
                places: new.places.as_deref(),
                rows: &new.rows,
            };
            let tenants = &mut self.tenants;
            store::write::write_commit_counted(store, txn, tenants, commit, now_ms, &mut deltas)?;
            if deduped {
                let ends_at_ms = now_ms.saturating_add(new.dedupe_window_ms);
                dedupe::remember(store, txn, &new.hook, now_ms, ends_at_ms)?;
            }
            self.core.handle_committed_for(&new.hook.tenant, now_ms);
            first_ids.push(None);
        }
        if writes > 0 {
            store.put_meta(txn, "next_seq", self.next_seq)?;
            deltas.write(store, txn)?;
        }
        Ok(writes)
    }

    fn commit(&mut self) -> Result<(), StoreError> {
        self.dirty_since_ms = None;
        self.lane_passed_undelivered = false;
        let wrote = std::mem::take(&mut self.unflushed_ops) > 0;
        if let Some(mut txn) = self.txn.take() {
            if wrote {
                self.store
                    .put_meta(&mut txn, store::CLOCK_MS, self.clock_ms)?;
            }
            txn.commit()?;
            if wrote {
                self.failure_log.wrote();
            }
        }
        Ok(())
    }
}

/// Runs `read` over the due index of `txn`, then sets aside the due entries
/// it stepped over (see [`store::set_aside_unreadable`]); returns what `read`
/// returned and how many entries were set aside. Setting any aside asks for
/// a scan of every tenant, which reads the rewritten ones and the entries
/// past those a read stopped at.
fn read_due<T>(
    store: &ShardStore,
    txn: &mut RwTxn,
    tenants: &TenantTable,
    core: &mut Core,
    read: impl FnOnce(&mut Core, &mut TxnIndex) -> T,
) -> Result<(T, usize), StoreError> {
    let mut index = TxnIndex::new(store, txn, tenants);
    let value = read(core, &mut index);
    let unreadable = index.finish()?;
    let set_aside = store::set_aside_unreadable(store, txn, unreadable)?;
    if set_aside > 0 {
        core.handle_committed();
    }
    Ok((value, set_aside))
}

/// Writes every op the core decided; returns how many. A lane member that
/// an op made due is announced to the core, and `lane_passed` set when the
/// head it follows was not delivered.
fn apply_ops(
    store: &ShardStore,
    txn: &mut RwTxn,
    tenants: &TenantTable,
    core: &mut Core,
    lane_passed: &mut bool,
) -> Result<usize, StoreError> {
    let mut applied = 0;
    let mut deltas = store::tenant_bytes::TenantDeltas::default();
    while let Some(op) = core.poll_store_op() {
        if let Some(head) = store::write::apply(store, txn, tenants, &op, &mut deltas)? {
            core.handle_committed_for(&head.tenant, head.due_at_ms);
            *lane_passed |= !matches!(op, StoreOp::Delivered { .. });
        }
        applied += 1;
    }
    deltas.write(store, txn)?;
    Ok(applied)
}
