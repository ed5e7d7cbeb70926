//! The shard thread: pinned to a core, it owns its store, timer wheel and
//! scheduler core, and is the only writer of its LMDB environment.
//!
//! Its loop: block until the first input or the core's deadline (a commit
//! wakes it at once); drain up to `MAX_INPUTS_PER_ITERATION` more inputs;
//! run one iteration ([`ShardState::step`]: one synced store batch); answer
//! the commits; hand the jobs to the IO pool; publish gauges; report demand
//! to the coordinator; sleep again.

use super::clock::Clock;
use super::coordinator::{CoordinatorInput, Demand};
use super::engine::CommitError;
use super::pool::IoPool;
use super::reply::CommitReply;
use super::step::{NewRows, ReviveStep, ShardState, StepOutput};
use crate::config::DispatchConfig;
use crate::core::{AttemptResult, Catalog, Core, Grant, Job, JobId, TenantStats};
use crate::limits::{
    GROUP_COMMIT_LINGER_US, MAX_INPUTS_PER_ITERATION, MAX_SLEEP_MS, REPORT_INTERVAL_MS,
    SHUTDOWN_GRACE_MS,
};
use crate::store::{Revived, ShardStore, StoreError};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Everything a shard thread is told.
pub enum ShardInput {
    /// A hook to commit; the reply comes once its batch is durable.
    Commit { rows: NewRows, reply: CommitReply },
    /// An attempt's result from the IO pool.
    Completion(JobId, AttemptResult),
    /// A new share of the global windows.
    Grant(Grant),
    /// New limits and sources.
    Reconfigure {
        dispatch: DispatchConfig,
        catalog: Arc<Catalog>,
    },
    /// Dead-letter the source's pending rows; answer with how many.
    DeadLetterSource {
        source_id: String,
        reply: Sender<Result<u64, Arc<StoreError>>>,
    },
    /// One replay step; answer with what it revived.
    Revive {
        step: ReviveStep,
        reply: Sender<Result<Revived, Arc<StoreError>>>,
    },
    /// Answer with the core's per-tenant gauges.
    TenantStats(Sender<Vec<TenantStats>>),
    /// Answer with the rows settled once nothing is claimed, running or due.
    Tick(Sender<u64>),
    /// Stop claiming, let running attempts finish (within a grace period), exit.
    Shutdown,
}

/// A snapshot of one shard's counters, published after every iteration.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShardStats {
    /// Hooks committed durably since the shard opened.
    pub commits: u64,
    /// Synced store batches that carried them: `commits / group_commits` is
    /// the mean group-commit size.
    pub group_commits: u64,
    pub claimed_rows: u64,
    pub claimed_bytes: u64,
    pub running: u64,
    pub queued: u64,
    pub delivered: u64,
    pub dead: u64,
    pub retried: u64,
    pub timed_out: u64,
    pub active_tenants: u64,
    /// Rows written back due because their key's breaker was open.
    pub parked: u64,
    /// Breakers open or half-open now.
    pub breakers_open: u64,
    pub window_full: bool,
    /// IO workers stuck in an attempt that timed out.
    pub abandoned_workers: u64,
    /// Rows made due again by recovery since the shard opened.
    pub recovered: u64,
    /// Store writes that failed since the shard opened (each rebuilt it).
    pub store_failures: u64,
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
}

impl ShardThread {
    /// The loop; returns after `Shutdown` once running attempts finished or
    /// the grace period passed (rows still running stay in flight in the
    /// store and are due again at the next open).
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
        } = self;
        let mut clock = Clock::default();
        let mut state = match ShardState::open(&store, core, clock.now_ms()) {
            Ok(state) => state,
            Err(e) => {
                let _ = opened.send(Err(e));
                return;
            }
        };
        let _ = opened.send(Ok(()));
        let mut tick_waiters: Vec<(Sender<u64>, u64)> = Vec::new();
        let mut resubmit: Vec<(JobId, AttemptResult)> = Vec::new();
        let mut draining_since_ms: Option<u64> = None;
        let mut reported: Option<u64> = None;
        let mut reported_at_ms = 0u64;
        let mut last_commit_batch = 0usize;
        let mut commits_done = 0u64;
        let mut group_commits = 0u64;
        loop {
            let now_ms = clock.now_ms();
            let deadline_ms = state
                .poll_deadline(now_ms)
                .unwrap_or(u64::MAX)
                .min(now_ms + MAX_SLEEP_MS);
            let mut inbox = Vec::new();
            if resubmit.is_empty() {
                match inputs.recv_timeout(Duration::from_millis(deadline_ms.saturating_sub(now_ms)))
                {
                    Ok(input) => inbox.push(input),
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => inbox.push(ShardInput::Shutdown),
                }
            }
            while inbox.len() < MAX_INPUTS_PER_ITERATION {
                match inputs.try_recv() {
                    Ok(input) => inbox.push(input),
                    Err(_) => break,
                }
            }
            linger_for_commits(&inputs, &mut inbox, last_commit_batch);
            let mut commits = Vec::new();
            let mut replies = Vec::new();
            let mut outcomes = std::mem::take(&mut resubmit);
            for input in inbox {
                match input {
                    ShardInput::Commit { reply, .. } if draining_since_ms.is_some() => {
                        reply.send(Err(CommitError::Stopped));
                    }
                    ShardInput::Commit { rows, reply } => {
                        commits.push(rows);
                        replies.push(reply);
                    }
                    ShardInput::Completion(job, result) => outcomes.push((job, result)),
                    ShardInput::Grant(grant) => state.handle_grant(grant),
                    ShardInput::Reconfigure { dispatch, catalog } => {
                        state.handle_reconfigure(dispatch, catalog)
                    }
                    ShardInput::DeadLetterSource { source_id, reply } => {
                        let _ = reply.send(state.dead_letter_source(clock.now_ms(), &source_id));
                    }
                    ShardInput::Revive { step, reply } => {
                        let _ = reply.send(state.revive(clock.now_ms(), &step));
                    }
                    ShardInput::TenantStats(reply) => {
                        let _ = reply.send(state.core().tenant_stats());
                    }
                    ShardInput::Tick(reply) => {
                        tick_waiters.push((reply, state.core().stats().settled()))
                    }
                    ShardInput::Shutdown => {
                        if draining_since_ms.is_none() {
                            draining_since_ms = Some(clock.now_ms());
                            state.handle_drain();
                        }
                    }
                }
            }
            let now_ms = clock.now_ms();
            last_commit_batch = commits.len();
            let mut start = |job: Job| {
                if let Err((job, failure)) = pool.submit(job) {
                    resubmit.push((job, Err(failure)));
                }
            };
            let out = state.step(now_ms, commits, outcomes, &mut start);
            if matches!(out.committed, Some(Ok(()))) {
                commits_done += replies.len() as u64;
                group_commits += 1;
            }
            answer(&pool, out, replies);
            let stats = state.core().stats();
            if reported != Some(stats.active_tenants)
                || (stats.claimed.rows > 0 && now_ms >= reported_at_ms + REPORT_INTERVAL_MS)
            {
                let demand = Demand {
                    shard_index: index,
                    active_tenants: stats.active_tenants,
                };
                if coordinator
                    .try_send(CoordinatorInput::Demand(demand))
                    .is_ok()
                {
                    reported = Some(stats.active_tenants);
                    reported_at_ms = now_ms;
                }
            }
            if state.is_idle(now_ms) {
                for (reply, baseline) in tick_waiters.drain(..) {
                    let _ = reply.send(stats.settled() - baseline);
                }
            }
            *gauges.lock() = ShardStats {
                commits: commits_done,
                group_commits,
                claimed_rows: stats.claimed.rows,
                claimed_bytes: stats.claimed.bytes,
                running: stats.running,
                queued: stats.queued,
                delivered: stats.delivered,
                dead: stats.dead,
                retried: stats.retried,
                timed_out: stats.timed_out,
                active_tenants: stats.active_tenants,
                parked: stats.parked,
                breakers_open: stats.breakers_open,
                window_full: state.core().window_full(),
                abandoned_workers: pool.abandoned() as u64,
                recovered: state.recovered,
                store_failures: state.store_failures,
                tick_waiters: tick_waiters.len() as u64,
            };
            if let Some(since_ms) = draining_since_ms {
                if state.core().running() == 0 || now_ms >= since_ms + SHUTDOWN_GRACE_MS {
                    if let Err(e) = state.flush() {
                        crate::log::error(
                            "final store write failed; its rows are due again at the next open",
                            &[("shard", &index), ("error", &e)],
                        );
                    }
                    for (reply, baseline) in tick_waiters.drain(..) {
                        let _ = reply.send(stats.settled() - baseline);
                    }
                    return;
                }
            }
        }
    }
}

/// Group commit: the committers answered by the last sync need a moment to
/// be scheduled and commit again. When that batch was large and only a few
/// commits are here yet, wait up to `GROUP_COMMIT_LINGER_US` for half as many,
/// so one sync serves many commits instead of many syncs serving a few.
fn linger_for_commits(
    inputs: &Receiver<ShardInput>,
    inbox: &mut Vec<ShardInput>,
    last_commit_batch: usize,
) {
    let count = |inbox: &[ShardInput]| {
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
                inbox.push(input);
            }
            Err(_) => return,
        }
    }
}

/// Answers the commits and replaces the workers of abandoned attempts.
fn answer(pool: &IoPool, out: StepOutput, replies: Vec<CommitReply>) {
    if let Some(committed) = out.committed {
        for reply in replies {
            reply.send(committed.clone().map_err(CommitError::Store));
        }
    }
    for _ in &out.abandoned {
        pool.replace_abandoned();
    }
}
