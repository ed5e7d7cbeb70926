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
use super::step::{NewRows, ShardState, StepOutput};
use crate::config::DispatchConfig;
use crate::core::{AttemptResult, Catalog, CoreStats, Grant, JobId};
use crate::limits::{
    MAX_INPUTS_PER_ITERATION, MAX_SLEEP_MS, REPORT_INTERVAL_MS, SHUTDOWN_GRACE_MS,
};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Everything a shard thread is told.
pub enum ShardInput {
    /// A hook to commit; the reply comes once its batch is durable.
    Commit {
        rows: NewRows,
        reply: Sender<Result<(), CommitError>>,
    },
    /// An attempt's result from the IO pool.
    Completion(JobId, AttemptResult),
    /// A new share of the global windows.
    Grant(Grant),
    /// New limits and sources.
    Reconfigure {
        dispatch: DispatchConfig,
        catalog: Arc<Catalog>,
    },
    /// Answer with the rows settled once nothing is claimed, running or due.
    Tick(Sender<u64>),
    /// Stop claiming, let running attempts finish (within a grace period), exit.
    Shutdown,
}

/// A shard's counters, published after every iteration for any thread to read.
#[derive(Debug, Default)]
pub struct ShardGauges {
    pub claimed_rows: AtomicU64,
    pub claimed_bytes: AtomicU64,
    pub running: AtomicU64,
    pub queued: AtomicU64,
    pub delivered: AtomicU64,
    pub dead: AtomicU64,
    pub retried: AtomicU64,
    pub timed_out: AtomicU64,
    pub active_tenants: AtomicU64,
    pub window_full: AtomicU64,
    pub abandoned_workers: AtomicU64,
    pub recovered: AtomicU64,
    /// `tick` calls waiting on this shard.
    pub tick_waiters: AtomicU64,
}

impl ShardGauges {
    fn publish(
        &self,
        stats: &CoreStats,
        window_full: bool,
        abandoned_workers: usize,
        recovered: u64,
    ) {
        let set = |a: &AtomicU64, v: u64| a.store(v, Ordering::Relaxed);
        set(&self.claimed_rows, stats.claimed.rows);
        set(&self.claimed_bytes, stats.claimed.bytes);
        set(&self.running, stats.running);
        set(&self.queued, stats.queued);
        set(&self.delivered, stats.delivered);
        set(&self.dead, stats.dead);
        set(&self.retried, stats.retried);
        set(&self.timed_out, stats.timed_out);
        set(&self.active_tenants, stats.active_tenants);
        set(&self.window_full, window_full.into());
        set(&self.abandoned_workers, abandoned_workers as u64);
        set(&self.recovered, recovered);
    }
}

/// What a shard thread runs with.
pub struct ShardThread {
    pub index: usize,
    pub state: ShardState,
    pub inputs: Receiver<ShardInput>,
    pub pool: IoPool,
    pub coordinator: Sender<CoordinatorInput>,
    pub gauges: Arc<ShardGauges>,
}

impl ShardThread {
    /// The loop; returns after `Shutdown` once running attempts finished or
    /// the grace period passed (rows still running stay in flight in the
    /// store and are due again at the next open).
    pub fn run(mut self) {
        let mut clock = Clock::default();
        let mut tick_waiters: Vec<(Sender<u64>, u64)> = Vec::new();
        let mut resubmit: Vec<(JobId, AttemptResult)> = Vec::new();
        let mut draining_since_ms: Option<u64> = None;
        let mut reported: Option<u64> = None;
        let mut reported_at_ms = 0u64;
        loop {
            let now_ms = clock.now_ms();
            let deadline_ms = self
                .state
                .core()
                .poll_deadline(now_ms)
                .unwrap_or(u64::MAX)
                .min(now_ms + MAX_SLEEP_MS);
            let mut inbox = Vec::new();
            if resubmit.is_empty() {
                match self
                    .inputs
                    .recv_timeout(Duration::from_millis(deadline_ms.saturating_sub(now_ms)))
                {
                    Ok(input) => inbox.push(input),
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => inbox.push(ShardInput::Shutdown),
                }
            }
            while inbox.len() < MAX_INPUTS_PER_ITERATION {
                match self.inputs.try_recv() {
                    Ok(input) => inbox.push(input),
                    Err(_) => break,
                }
            }
            let mut commits = Vec::new();
            let mut replies = Vec::new();
            let mut outcomes = std::mem::take(&mut resubmit);
            for input in inbox {
                match input {
                    ShardInput::Commit { reply, .. } if draining_since_ms.is_some() => {
                        let _ = reply.send(Err(CommitError::Stopped));
                    }
                    ShardInput::Commit { rows, reply } => {
                        commits.push(rows);
                        replies.push(reply);
                    }
                    ShardInput::Completion(job, result) => outcomes.push((job, result)),
                    ShardInput::Grant(grant) => self.state.handle_grant(grant),
                    ShardInput::Reconfigure { dispatch, catalog } => {
                        self.state.handle_reconfigure(dispatch, catalog)
                    }
                    ShardInput::Tick(reply) => {
                        tick_waiters.push((reply, self.state.core().stats().settled()))
                    }
                    ShardInput::Shutdown => {
                        draining_since_ms.get_or_insert(clock.now_ms());
                    }
                }
            }
            let now_ms = clock.now_ms();
            let mut out = self.state.step(now_ms, commits, outcomes);
            if draining_since_ms.is_some() {
                let drained = self.state.drain(now_ms);
                out.jobs.extend(drained.jobs);
                out.abandoned.extend(drained.abandoned);
            }
            self.dispatch(out, replies, &mut resubmit);
            let stats = self.state.core().stats();
            self.gauges.publish(
                &stats,
                self.state.core().window_full(),
                self.pool.abandoned(),
                self.state.recovered,
            );
            if reported != Some(stats.active_tenants)
                || (stats.claimed.rows > 0 && now_ms >= reported_at_ms + REPORT_INTERVAL_MS)
            {
                let demand = Demand {
                    shard_index: self.index,
                    active_tenants: stats.active_tenants,
                };
                if self
                    .coordinator
                    .try_send(CoordinatorInput::Demand(demand))
                    .is_ok()
                {
                    reported = Some(stats.active_tenants);
                    reported_at_ms = now_ms;
                }
            }
            if self.state.core().is_idle(now_ms) {
                for (reply, baseline) in tick_waiters.drain(..) {
                    let _ = reply.send(stats.settled() - baseline);
                }
            }
            self.gauges
                .tick_waiters
                .store(tick_waiters.len() as u64, Ordering::Relaxed);
            if let Some(since_ms) = draining_since_ms {
                if self.state.core().running() == 0 || now_ms >= since_ms + SHUTDOWN_GRACE_MS {
                    for (reply, baseline) in tick_waiters.drain(..) {
                        let _ = reply.send(stats.settled() - baseline);
                    }
                    return;
                }
            }
        }
    }

    fn dispatch(
        &self,
        out: StepOutput,
        replies: Vec<Sender<Result<(), CommitError>>>,
        resubmit: &mut Vec<(JobId, AttemptResult)>,
    ) {
        if let Some(committed) = out.committed {
            for reply in replies {
                let _ = reply.send(committed.clone().map_err(CommitError::Store));
            }
        }
        for _ in &out.abandoned {
            self.pool.replace_abandoned();
        }
        for job in out.jobs {
            if let Err((job, failure)) = self.pool.submit(job) {
                resubmit.push((job, Err(failure)));
            }
        }
    }
}
