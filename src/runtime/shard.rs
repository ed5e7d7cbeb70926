//! The shard thread: pinned to a core, it owns its store, timer wheel and
//! scheduler core, and is the only writer of its LMDB environment.
//!
//! Its loop: block until the first input or the core's deadline (a commit
//! wakes it at once); drain up to `MAX_INPUTS_PER_ITERATION` more inputs;
//! run one iteration ([`ShardState::step`]: one synced store batch); answer
//! the commits; hand the jobs to the IO pool; publish gauges; report demand
//! to the coordinator; sleep again. A panic in the loop (a bug in goad)
//! restarts the shard from its store on the same thread (see
//! `runtime::restart`).

use super::breaker_log::BreakerLog;
use super::clock::{Clock, Reading};
use super::coordinator::{CoordinatorInput, Demand};
use super::dead_log::DeadLog;
use super::errors::CommitError;
use super::expiry::DeadExpiry;
use super::observers::Observers;
use super::pool::IoPool;
use super::reply::CommitReply;
use super::restart::Restarts;
use super::room::{StoreRoom, TenantRoom};
use super::step::{Completion, NewRows, ShardState, StepOutput};
use crate::config::{DispatchConfig, RetryConfig};
use crate::core::{
    Call, Catalog, Core, CoreStats, DueEntry, Grant, SinkKey, SinkStats, SourceSweep, SweepStep,
    TenantStats, WakeStep,
};
use crate::limits::{
    CLOCK_BEHIND_LOGGED_MS, GROUP_COMMIT_LINGER_US, MAX_INPUTS_PER_ITERATION, MAX_SLEEP_MS,
    REPORT_INTERVAL_MS, SHUTDOWN_GRACE_MS, SWEEP_STEP_ENTRIES,
};
use crate::store::{DiskReserve, Revived, ShardStore, StoreError};
use crate::store::{PurgeStep, Purged, ReviveStep};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Everything a shard thread is told.
pub enum ShardInput {
    /// A hook to commit; the reply comes once its batch is durable.
    Commit { rows: NewRows, reply: CommitReply },
    /// An attempt's result from the IO pool.
    Completion(Completion),
    /// A new share of the global windows.
    Grant(Grant),
    /// New limits and sources; `applied` is answered once the shard runs
    /// on them (its old catalog dropped).
    Reconfigure {
        dispatch: DispatchConfig,
        retry: RetryConfig,
        catalog: Arc<Catalog>,
        applied: Option<Sender<()>>,
    },
    /// One step of dead-lettering the source's pending rows; answer with
    /// how many and where the next step goes on.
    DeadLetterSource {
        source_id: String,
        from: SourceSweep,
        reply: Sender<Result<SweepStep, Arc<StoreError>>>,
    },
    /// One step of waking a sink's rows; answer with how many and where
    /// the next step goes on.
    WakeSink {
        key: SinkKey,
        after: Option<DueEntry>,
        reply: Sender<Result<WakeStep, Arc<StoreError>>>,
    },
    /// One replay step; answer with what it revived.
    Revive {
        step: ReviveStep,
        reply: Sender<Result<Revived, Arc<StoreError>>>,
    },
    /// Delete a forgotten replay's counters.
    ForgetReplay {
        replay: Arc<str>,
        reply: Sender<Result<(), Arc<StoreError>>>,
    },
    /// One purge step; answer with what it purged.
    Purge {
        step: PurgeStep,
        reply: Sender<Result<Purged, Arc<StoreError>>>,
    },
    /// Answer with the core's per-tenant gauges.
    TenantStats(Sender<Vec<TenantStats>>),
    /// Answer with the core's per-sink outcomes and breakers.
    SinkStats(Sender<Vec<SinkStats>>),
    /// Answer with the rows settled once nothing is claimed, running or due.
    Tick(Sender<u64>),
    /// Stop claiming, let running attempts finish (within a grace period), exit.
    Shutdown,
    /// Panic in the loop, as a bug in goad would (tests of the restart).
    #[cfg(test)]
    Panic,
}

/// A snapshot of one shard's counters, published after every iteration.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShardStats {
    /// Hooks committed durably since the shard opened.
    pub commits: u64,
    /// Synced store batches that carried them: `commits / group_commits` is
    /// the mean group-commit size.
    pub group_commits: u64,
    /// Commits not stored because their source took their dedupe key within
    /// its `dedupe_window_ms` (answered with the first hook's id).
    pub duplicates: u64,
    /// The scheduler's counters: rows claimed, attempts and calls running
    /// and queued, outcomes, parked and held rows, breakers open.
    pub core: CoreStats,
    /// Times a breaker opened (again after a failed probe too), and closed.
    pub breaker_opens: u64,
    pub breaker_closes: u64,
    pub window_full: bool,
    /// IO workers stuck in an attempt that timed out.
    pub abandoned_workers: u64,
    /// Rows made due again by recovery since the shard opened.
    pub recovered: u64,
    /// Store writes that failed since the shard opened (each rebuilt it).
    pub store_failures: u64,
    /// Due entries that did not decode, set aside since the shard opened.
    pub unreadable_due: u64,
    /// Dead rows deleted past `dead_letters.retention_ms` since it opened.
    pub dead_expired: u64,
    /// Times the shard's loop panicked and was restarted from its store.
    pub restarts: u64,
    /// Refusing commits now, after panics in a row (see `runtime::restart`).
    pub restarting: bool,
    /// A store write failed and the shard could not read its store back
    /// since (see `ShardState::is_store_failing`): commits fail meanwhile.
    pub store_failing: bool,
    /// `tick` calls waiting on this shard.
    pub tick_waiters: u64,
}

/// Where a shard publishes its stats for any thread to read (one short lock
/// per iteration).
pub type ShardGauges = parking_lot::Mutex<ShardStats>;

/// What a shard thread runs with.
pub struct ShardThread {
    pub index: usize,
    pub store: ShardStore,
    pub core: Core,
    /// Told once whether the shard opened (its recovery ran).
    pub opened: Sender<Result<(), StoreError>>,
    pub inputs: Receiver<ShardInput>,
    pub pool: IoPool,
    pub coordinator: Sender<CoordinatorInput>,
    pub gauges: Arc<ShardGauges>,
    /// `dead_letters.retention_ms` (0: dead letters are kept).
    pub dead_retention_ms: u64,
    /// The host's watchers, if any.
    pub observers: Observers,
    /// What new hooks leave free on the disk (`min_free_disk_bytes`).
    pub disk_reserve: DiskReserve,
}

impl ShardThread {
    /// The loop; returns after `Shutdown` once running attempts finished or
    /// the grace period passed (rows still running stay in flight in the
    /// store and are due again at the next open). A panic in the loop
    /// restarts the shard from its store (see `runtime::restart`).
    pub fn run(self) {
        let ShardThread {
            index,
            store,
            core,
            opened,
            inputs,
            pool,
            coordinator,
            gauges,
            dead_retention_ms,
            observers,
            disk_reserve,
        } = self;
        let mut clock = match resumed_clock(index, &store) {
            Ok(clock) => clock,
            Err(e) => {
                let _ = opened.send(Err(e));
                return;
            }
        };
        let expiry = DeadExpiry::new(dead_retention_ms, clock.now_ms());
        let mut state = match ShardState::open(&store, core, clock.now_ms()) {
            Ok(state) => state,
            Err(e) => {
                let _ = opened.send(Err(e));
                return;
            }
        };
        let _ = opened.send(Ok(()));
        let mut shard = ShardLoop {
            index,
            inputs,
            pool,
            coordinator,
            gauges,
            clock,
            inbox: VecDeque::new(),
            replies: Vec::new(),
            tick_waiters: Vec::new(),
            resubmit: Vec::new(),
            outcomes_taken: Vec::new(),
            draining_since_ms: None,
            reported: None,
            reported_at_ms: 0,
            last_commit_batch: 0,
            commits_done: 0,
            duplicates: 0,
            group_commits: 0,
            restarts: Restarts::default(),
            breakers: BreakerLog::default(),
            dead_log: DeadLog::default(),
            observers,
            room: StoreRoom::new(disk_reserve),
            tenant_room: TenantRoom::default(),
            refuse_until_ms: 0,
            expiry,
            stall_noted: None,
        };
        loop {
            // What a panic leaves half-changed, `restart` rebuilds from the store.
            match crate::panics::catch(|| shard.serve(&mut state)) {
                Ok(()) => return,
                Err(panic) => shard.restart(&mut state, &panic),
            }
        }
    }
}

/// The shard's clock, from where its store last committed writes if the
/// wall clock is behind that (see [`Clock::resumed_from`]), which is
/// logged: the wall clock was stepped back while the process was down.
fn resumed_clock(index: usize, store: &ShardStore) -> Result<Clock, StoreError> {
    let stored_ms = store.clock_ms()?;
    let behind_ms = stored_ms.saturating_sub(super::clock::wall_ms());
    if behind_ms >= CLOCK_BEHIND_LOGGED_MS {
        crate::log::warn(
            "the wall clock is behind where this shard's clock was when it last wrote: \
             stepped back while the node was down; the shard's clock runs on from there, \
             so rows come due as they were set to (its times are ahead of the wall clock \
             until it catches up)",
            &[("shard", &index), ("behind_ms", &behind_ms)],
        );
    }
    Ok(Clock::resumed_from(stored_ms))
}

/// A shard thread's loop and what it keeps across iterations (and across
/// a restart after a panic).
struct ShardLoop {
    index: usize,
    inputs: Receiver<ShardInput>,
    pool: IoPool,
    coordinator: Sender<CoordinatorInput>,
    gauges: Arc<ShardGauges>,
    clock: Clock,
    /// Inputs received and not yet taken (kept across a panic, bar the one
    /// being taken).
    inbox: VecDeque<ShardInput>,
    /// The commits of the iteration under way, answered once it is durable.
    replies: Vec<CommitReply>,
    tick_waiters: Vec<(Sender<u64>, u64)>,
    /// Attempts the IO pool refused, to report failed next iteration.
    resubmit: Vec<Completion>,
    /// The results the iteration under way took: if it panics, the rebuilt
    /// core, which takes on the attempts still running, gets them again (see
    /// `restart`).
    outcomes_taken: Vec<Completion>,
    draining_since_ms: Option<u64>,
    /// The demand last reported to the coordinator, and when.
    reported: Option<Demand>,
    reported_at_ms: u64,
    last_commit_batch: usize,
    commits_done: u64,
    /// Commits answered with the id of the hook that took their dedupe key.
    duplicates: u64,
    group_commits: u64,
    restarts: Restarts,
    breakers: BreakerLog,
    /// Logs rows dead-lettered by their sinks' answers.
    dead_log: DeadLog,
    observers: Observers,
    /// Whether the store has room for new hooks, and each tenant under its bound.
    room: StoreRoom,
    tenant_room: TenantRoom,
    /// Commits are refused until then, after panics in a row.
    refuse_until_ms: u64,
    /// Deletes dead letters past their retention.
    expiry: DeadExpiry,
    /// The end of the latest stall of the process the core was told of
    /// (on the stall watcher's clock, see `runtime::stall`).
    stall_noted: Option<u64>,
}

impl ShardLoop {
    /// Iterations until the shard has drained after `Shutdown`.
    fn serve(&mut self, state: &mut ShardState) {
        loop {
            let now_ms = self.clock.now_ms();
            let refusing = now_ms < self.refuse_until_ms;
            self.receive(state, now_ms, refusing);
            self.room.next_iteration(now_ms);
            self.tenant_room.next_iteration();
            let mut commits = Vec::new();
            let mut outcomes = std::mem::take(&mut self.resubmit);
            self.outcomes_taken.clone_from(&outcomes);
            while let Some(input) = self.inbox.pop_front() {
                self.take(state, input, refusing, &mut commits, &mut outcomes);
            }
            let now = self.clock.read();
            let now_ms = now.ms;
            self.note_stall(state, now);
            self.last_commit_batch = commits.len();
            // While refusing nothing starts; the outcomes are of attempts the
            // old core started, which the new core took on.
            if refusing {
                state.handle_outcomes(now_ms, outcomes);
            } else {
                self.step(state, now, commits, outcomes);
                self.dead_log.run(self.index, state, now_ms);
                if self.draining_since_ms.is_none() {
                    self.expiry.run(self.index, state, now_ms);
                }
            }
            self.outcomes_taken.clear();
            if state.is_idle(now_ms) {
                self.answer_tick_waiters(state);
            }
            self.publish(state, now_ms < self.refuse_until_ms);
            if self.drained(state, now_ms) {
                return;
            }
        }
    }

    /// Tells the core of a stall of the process it has not been told of
    /// (see `runtime::stall`), in its clock's time as `now` reads it.
    fn note_stall(&mut self, state: &mut ShardState, now: Reading) {
        let now_ns = super::stall::stall_clock_ns();
        let Some((from_ns, to_ns)) = super::stall::watch().latest(now_ns) else {
            return;
        };
        if self.stall_noted.is_none_or(|noted_ns| to_ns > noted_ns) {
            self.stall_noted = Some(to_ns);
            let ms_at = |ns: u64| now.ms_before(Duration::from_nanos(now_ns.saturating_sub(ns)));
            state.note_stall(ms_at(from_ns), ms_at(to_ns));
        }
    }

    /// Fills the inbox for an iteration: waits for the first input until
    /// the core's (or the refusal's, or the dead-letter expiry's) deadline,
    /// then takes what else is queued and lingers for a group commit.
    fn receive(&mut self, state: &ShardState, now_ms: u64, refusing: bool) {
        let deadline_ms = if refusing {
            self.refuse_until_ms
        } else {
            let expiry_at_ms = self.expiry.wake_at_ms().unwrap_or(u64::MAX);
            state
                .poll_deadline(now_ms)
                .unwrap_or(u64::MAX)
                .min(expiry_at_ms)
        }
        .min(now_ms + MAX_SLEEP_MS);
        // Inputs left from an iteration that panicked are taken first.
        if self.inbox.is_empty() && self.resubmit.is_empty() {
            let wait = Duration::from_millis(deadline_ms.saturating_sub(now_ms));
            match self.inputs.recv_timeout(wait) {
                Ok(input) => self.inbox.push_back(input),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => self.inbox.push_back(ShardInput::Shutdown),
            }
        }
        while self.inbox.len() < MAX_INPUTS_PER_ITERATION {
            match self.inputs.try_recv() {
                Ok(input) => self.inbox.push_back(input),
                Err(_) => break,
            }
        }
        linger_for_commits(&self.inputs, &mut self.inbox, self.last_commit_batch);
    }

    /// Answers every `Tick` waiting, with the rows settled since it came.
    fn answer_tick_waiters(&mut self, state: &ShardState) {
        let settled = state.core().stats().settled();
        for (reply, baseline) in self.tick_waiters.drain(..) {
            let _ = reply.send(settled - baseline);
        }
    }

    /// Whether a draining shard is done: its attempts have ended or the
    /// grace has passed. It then writes what is left and answers the ticks.
    fn drained(&mut self, state: &mut ShardState, now_ms: u64) -> bool {
        let Some(since_ms) = self.draining_since_ms else {
            return false;
        };
        if state.core().running() > 0 && now_ms < since_ms + SHUTDOWN_GRACE_MS {
            return false;
        }
        if let Err(e) = state.flush() {
            crate::log::error(
                "final store write failed; its rows are due again at the next open",
                &[("shard", &self.index), ("error", &e)],
            );
        }
        self.answer_tick_waiters(state);
        true
    }

    /// One input: commits and completions are batched for the iteration's
    /// step; the rest is handled at once.
    fn take(
        &mut self,
        state: &mut ShardState,
        input: ShardInput,
        refusing: bool,
        commits: &mut Vec<NewRows>,
        outcomes: &mut Vec<Completion>,
    ) {
        match input {
            ShardInput::Commit { reply, .. } if self.draining_since_ms.is_some() => {
                reply.send(Err(CommitError::Stopped));
            }
            ShardInput::Commit { reply, .. } if refusing => {
                reply.send(Err(CommitError::ShardRestarting));
            }
            ShardInput::Commit { rows, reply } => self.admit(state, rows, reply, commits),
            ShardInput::Completion(completion) => {
                self.pool.returned(completion.job);
                self.outcomes_taken.push(completion.clone());
                outcomes.push(completion);
            }
            ShardInput::Grant(grant) => state.handle_grant(grant),
            ShardInput::Reconfigure {
                dispatch,
                retry,
                catalog,
                applied,
            } => {
                self.pool.resize(dispatch.concurrency as usize);
                state.handle_reconfigure(self.clock.now_ms(), dispatch, retry, catalog);
                if let Some(applied) = applied {
                    let _ = applied.send(());
                }
            }
            ShardInput::DeadLetterSource {
                source_id,
                from,
                reply,
            } => {
                let now_ms = self.clock.now_ms();
                let dead = state.dead_letter_source(now_ms, &source_id, &from, SWEEP_STEP_ENTRIES);
                let events = state.take_outcome_events();
                self.observers.outcomes(self.index, &events);
                let _ = reply.send(dead);
            }
            ShardInput::WakeSink { key, after, reply } => {
                let now_ms = self.clock.now_ms();
                let _ = reply.send(state.wake_sink(now_ms, &key, after, SWEEP_STEP_ENTRIES));
            }
            ShardInput::Revive { step, reply } => {
                let _ = reply.send(state.revive(self.clock.now_ms(), &step));
            }
            ShardInput::Purge { step, reply } => {
                let _ = reply.send(state.purge(self.clock.now_ms(), &step));
            }
            ShardInput::ForgetReplay { replay, reply } => {
                let _ = reply.send(state.forget_replay(self.clock.now_ms(), &replay));
            }
            ShardInput::TenantStats(reply) => {
                let _ = reply.send(state.core().tenant_stats());
            }
            ShardInput::SinkStats(reply) => {
                let _ = reply.send(state.core().sink_stats());
            }
            ShardInput::Tick(reply) => self
                .tick_waiters
                .push((reply, state.core().stats().settled())),
            ShardInput::Shutdown => {
                if self.draining_since_ms.is_none() {
                    self.draining_since_ms = Some(self.clock.now_ms());
                    state.handle_drain();
                }
            }
            #[cfg(test)]
            ShardInput::Panic => panic!("a test made shard {} panic", self.index),
        }
    }

    /// A commit joins the iteration's batch if its tenant and the store have
    /// room for it. A redelivery of a hook already taken stores nothing: it
    /// gets the first id even when its tenant or store is full.
    fn admit(
        &mut self,
        state: &mut ShardState,
        rows: NewRows,
        reply: CommitReply,
        commits: &mut Vec<NewRows>,
    ) {
        let admitted = self
            .tenant_room
            .admit(state, self.index, &rows)
            .and_then(|()| self.room.admit(state, self.index, &rows));
        let clock = &mut self.clock;
        let duplicate = |full| {
            if state.is_duplicate(&rows, clock.now_ms()) {
                Ok(())
            } else {
                Err(full)
            }
        };
        match admitted.or_else(duplicate) {
            Ok(()) => {
                commits.push(rows);
                self.replies.push(reply);
            }
            Err(full) => reply.send(Err(full)),
        }
    }

    /// One store batch: the commits written and synced, the outcomes
    /// recorded, the claims made; then the commits answered, the jobs
    /// started and the demand reported.
    fn step(
        &mut self,
        state: &mut ShardState,
        now: Reading,
        commits: Vec<NewRows>,
        outcomes: Vec<Completion>,
    ) {
        let now_ms = now.ms;
        let pool = &self.pool;
        let resubmit = &mut self.resubmit;
        let mut start = |call: Call| {
            let deadline = now.instant_of(call.jobs()[0].deadline_at_ms);
            if let Err(failed) = pool.submit(call, deadline) {
                resubmit.extend(failed);
            }
        };
        let out = state.step(now_ms, commits, outcomes, &mut start);
        for event in &out.breaker_events {
            self.breakers.record(self.index, now_ms, event);
            self.observers.breaker(self.index, event, now_ms);
        }
        self.observers.outcomes(self.index, &out.outcome_events);
        let replies = std::mem::take(&mut self.replies);
        if let Some(Ok(first_ids)) = &out.committed {
            let duplicates = first_ids.iter().filter(|id| id.is_some()).count() as u64;
            self.commits_done += first_ids.len() as u64 - duplicates;
            self.duplicates += duplicates;
            self.group_commits += 1;
        }
        // A committer that reads the stats once answered sees its commit
        // (or duplicate) counted.
        self.publish(state, false);
        answer(&mut self.pool, out, replies);
        self.report_demand(state, now_ms);
    }

    /// Reports the shard's demand to the coordinator: when its count of
    /// active tenants changed, every `REPORT_INTERVAL_MS` while it has rows
    /// claimed, and when its share of the concurrency keeps calls from
    /// starting though it last said its tenants wanted fewer (then it says
    /// they want at least that share, so it does not say it again until
    /// its share grows).
    fn report_demand(&mut self, state: &ShardState, now_ms: u64) {
        let core = state.core();
        let stats = core.stats();
        let due = match self.reported {
            Some(last) if last.active_tenants == stats.active_tenants => {
                let interval = now_ms >= self.reported_at_ms + REPORT_INTERVAL_MS;
                (stats.claimed.rows > 0 && interval) || core.short_of_calls(last.wanted_calls)
            }
            _ => true,
        };
        if !due {
            return;
        }
        let demand = Demand {
            shard_index: self.index,
            active_tenants: stats.active_tenants,
            wanted_calls: core.wanted_calls(),
        };
        if (self.coordinator)
            .try_send(CoordinatorInput::Demand(demand))
            .is_ok()
        {
            self.reported = Some(demand);
            self.reported_at_ms = now_ms;
        }
    }

    /// The loop panicked: answer the commits it held, rebuild the shard from
    /// its store, and refuse commits for a while if it panicked just before.
    fn restart(&mut self, state: &mut ShardState, message: &str) {
        let now_ms = self.clock.now_ms();
        let delay_ms = self.restarts.record(now_ms);
        self.refuse_until_ms = now_ms + delay_ms;
        crate::log::error(
            "shard panicked; restarting it from its store",
            &[
                ("shard", &self.index),
                ("panic", &message),
                ("restarts", &self.restarts.count),
                ("refusing_commits_ms", &delay_ms),
            ],
        );
        for reply in self.replies.drain(..) {
            reply.send(Err(CommitError::ShardRestarting));
        }
        state.restart(now_ms);
        // The rebuilt core took on the attempts still running, some of whose
        // results the failed iteration had taken.
        let taken = std::mem::take(&mut self.outcomes_taken);
        state.handle_outcomes(now_ms, taken);
        self.reported = None;
        self.publish(state, delay_ms > 0);
    }

    /// The shard's counters, for any thread to read.
    fn publish(&self, state: &ShardState, restarting: bool) {
        *self.gauges.lock() = ShardStats {
            commits: self.commits_done,
            group_commits: self.group_commits,
            duplicates: self.duplicates,
            core: state.core().stats(),
            breaker_opens: self.breakers.opens,
            breaker_closes: self.breakers.closes,
            window_full: state.core().window_full(),
            abandoned_workers: self.pool.abandoned() as u64,
            recovered: state.recovered,
            store_failures: state.store_failures,
            unreadable_due: state.unreadable_due,
            dead_expired: self.expiry.expired,
            restarts: self.restarts.count,
            restarting,
            store_failing: state.is_store_failing(),
            tick_waiters: self.tick_waiters.len() as u64,
        };
    }
}

/// Group commit: the committers answered by the last sync need a moment to
/// be scheduled and commit again. When that batch was large and only a few
/// commits are here yet, wait up to `GROUP_COMMIT_LINGER_US` for half as many,
/// so one sync serves many commits instead of many syncs serving a few.
fn linger_for_commits(
    inputs: &Receiver<ShardInput>,
    inbox: &mut VecDeque<ShardInput>,
    last_commit_batch: usize,
) {
    let count = |inbox: &VecDeque<ShardInput>| {
        inbox
            .iter()
            .filter(|i| matches!(i, ShardInput::Commit { .. }))
            .count()
    };
    let mut commits = count(inbox);
    if commits == 0 || commits >= last_commit_batch {
        return;
    }
    let deadline = Instant::now() + Duration::from_micros(GROUP_COMMIT_LINGER_US);
    while commits < last_commit_batch && inbox.len() < MAX_INPUTS_PER_ITERATION {
        match inputs.recv_deadline(deadline) {
            Ok(input) => {
                commits += usize::from(matches!(input, ShardInput::Commit { .. }));
                inbox.push_back(input);
            }
            Err(_) => return,
        }
    }
}

/// Answers the commits and gives the pool the calls that timed out.
fn answer(pool: &mut IoPool, out: StepOutput, replies: Vec<CommitReply>) {
    match out.committed {
        Some(Ok(first_ids)) => {
            for (reply, first_id) in replies.into_iter().zip(first_ids) {
                reply.send(Ok(first_id));
            }
        }
        Some(Err(e)) => {
            for reply in replies {
                reply.send(Err(CommitError::Store(e.clone())));
            }
        }
        None => {}
    }
    for job in out.abandoned {
        pool.abandon(job);
    }
}
