//! The sans-IO scheduler: one per shard.
//!
//! [`Core`] decides everything about the shard's rows — which due rows to
//! claim (deficit round robin over tenants), which claimed rows start
//! (round robin across tenants, then across each tenant's sink keys, within
//! the windows and caps), what an outcome does to a row (the retry policy),
//! and when attempts time out (a timer wheel). It never reads a clock, sleeps,
//! spawns, locks or touches LMDB: time comes in as `now_ms`, randomness from
//! a seeded [`Rng`], due rows through the [`DueIndex`] trait.
//!
//! The shell drives it in this order, once per loop iteration:
//! 1. inputs: [`Core::handle_committed_for`] (or [`Core::handle_committed`]
//!    for rows whose tenants it does not name), [`Core::handle_outcome`],
//!    [`Core::handle_grant`], [`Core::handle_reconfigure`]; every row the
//!    shell writes due outside the core's own ops must be announced so (the
//!    scan reads only tenants it knows may have rows due, see `hints`);
//! 2. [`Core::handle_timers`] (attempt deadlines);
//! 3. drain [`Core::poll_store_op`] into the iteration's store batch, then
//!    [`Core::handle_scan`] when [`Core::wants_scan`] (the scan reads the due
//!    index through that batch, so it must see the decisions so far), then
//!    drain the scan's ops too;
//! 4. commit the batch when it must be durable;
//! 5. drain [`Core::poll_abandoned`] (calls whose worker is stuck),
//!    [`Core::poll_breaker_event`] (to log and count),
//!    [`Core::poll_outcome_event`] (when [`Core::observe_outcomes`] is on)
//!    and
//!    [`Core::poll_call`] (attempts to start now, one by one or batched);
//! 6. sleep until [`Core::poll_deadline`] or the next input.
//!
//! An operator action runs in writes of its own, reading the due index
//! through them: [`Core::handle_dead_letter_source`], a step at a time.
//!
//! Reports are read when the shell wants them: [`Core::stats`],
//! [`Core::tenant_stats`], [`Core::sink_stats`], and
//! [`Core::take_unlogged_dead`] (each key's rows dead-lettered since the
//! last call, which the shell logs at its own pace).

mod breaker;
mod breaker_keys;
mod catalog;
mod dead_letter;
mod dead_reason;
mod held;
mod hints;
mod outcome_event;
mod report;
pub mod retry;
pub mod rng;
mod scan;
mod sink_wake;
mod slots;
mod source_sweep;
mod stragglers;
mod types;
mod unpark;
pub mod wheel;
mod window;

pub use breaker::{Admit, Breaker, BreakerConfig, BreakerEvent, BreakerState};
pub use catalog::{Binding, Catalog, LaneBy, SinkEntry, SourceEntry};
pub use dead_reason::{DeadCounts, DeadReason, DeadReasonKind, ReasonKinds};
pub use outcome_event::{Outcome, OutcomeEvent};
pub use report::{LastFailure, SinkOutcomes, SinkStats, TenantStats, UnloggedDead};
pub use retry::{FailureClass, RetryDecision};
pub use rng::Rng;
pub use sink_wake::{wake_start, WakeStep};
pub use source_sweep::{DueCursor, LanePlace, SourceSweep, SweepStep};
pub use stragglers::RunningAttempt;
pub use types::*;
pub use window::{Usage, Window};

use crate::config::{DispatchConfig, RetryConfig, TenantLimits};
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;
use wheel::{TimerId, Wheel};

/// A claimed row, queued or running.
#[derive(Debug, Clone)]
struct Claim {
    key: SinkKey,
    /// The due time the row was claimed at (written back if it never starts).
    due_at_ms: u64,
    /// As stored when claimed; `first_attempt_at_ms` is set when it first starts.
    fields: RowFields,
    hook: Arc<crate::store::Hook>,
    running: Option<JobId>,
}

#[derive(Debug)]
struct Running {
    row: RowId,
    timer: TimerId,
    deadline_at_ms: u64,
    /// `dispatch.attempt_timeout_ms` when it started (a reconfigure may
    /// change it since).
    timeout_ms: u64,
    /// The batch the attempt is an entry of (named by its first attempt's
    /// id); `None` for a call of one attempt.
    batch: Option<JobId>,
}

/// Per-tenant state: its window, its running calls and its keys with work.
#[derive(Debug)]
struct TenantState {
    limits: TenantLimits,
    claimed: Usage,
    /// Sink calls running (a batch counts once), against `concurrency`.
    calls: u64,
    /// Rows of this tenant parked behind an open breaker so far.
    parked: u64,
    /// Keys of this tenant with queued jobs, in round-robin order.
    key_ring: VecDeque<SinkKey>,
}

impl TenantState {
    fn window(&self) -> Window {
        Window {
            max_rows: self.limits.max_inflight.into(),
            max_bytes: self.limits.max_inflight_bytes,
        }
    }
}

#[derive(Debug, Default)]
struct KeyState {
    queue: VecDeque<RowId>,
    /// Sink calls running (a batch counts once), against `sink_concurrency`.
    calls: u64,
    /// For a sink with `max_calls_per_s`: when the key's next call may
    /// start (µs, on the core's clock; see `slots`).
    next_call_us: u64,
    /// What the key's attempts came to since the shard opened.
    outcomes: SinkOutcomes,
    /// Its rows dead-lettered since the shell last logged them.
    unlogged_dead: u64,
}

/// Counters the shell reports (stats, demo, tick).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CoreStats {
    pub claimed: Usage,
    /// Attempts running.
    pub running: u64,
    /// Sink calls running: one per attempt, one per batch of attempts.
    pub calls: u64,
    pub queued: u64,
    pub delivered: u64,
    pub dead: u64,
    /// `dead`, by kind of reason.
    pub dead_by_reason: DeadCounts,
    pub retried: u64,
    pub timed_out: u64,
    /// Tenants with rows claimed or due at the last scan.
    pub active_tenants: u64,
    /// Rows written back due because their key's breaker was open.
    pub parked: u64,
    /// Rows held because their sink was paused (each time one came up).
    pub held: u64,
    /// Breakers open or half-open now.
    pub breakers_open: u64,
}

impl CoreStats {
    /// Rows that reached an end (delivered or dead-lettered).
    pub fn settled(&self) -> u64 {
        self.delivered + self.dead
    }
}

/// The scheduler of one shard. See the module docs for the calling order.
#[derive(Debug)]
pub struct Core {
    dispatch: DispatchConfig,
    retry: RetryConfig,
    catalog: Arc<Catalog>,
    grant: Grant,
    rng: Rng,
    next_job_id: u64,
    claims: HashMap<RowId, Claim>,
    running: HashMap<JobId, Running>,
    claimed: Usage,
    running_count: u64,
    /// Sink calls running, against the shard's concurrency.
    calls_count: u64,
    /// Per batch running, its attempts not settled yet (see `Running::batch`).
    batches: HashMap<JobId, u16>,
    tenants: HashMap<TenantId, TenantState>,
    keys: HashMap<SinkKey, KeyState>,
    /// Tenants with queued jobs, in round-robin order.
    tenant_ring: VecDeque<TenantId>,
    /// The earliest time a key that waits out its `max_calls_per_s` may
    /// start a call, as of the last `poll_call` pass.
    rate_wake_ms: Option<u64>,
    /// Tenants with rows claimed.
    claiming_tenants: u64,
    /// The deficit round robin's order for the next scan, of the tenants
    /// with due rows (see `scan`): those the last page did not reach first,
    /// then those it reached.
    scan_order: VecDeque<TenantId>,
    /// How many of `scan_order` lead it unreached.
    unreached: usize,
    /// Per tenant with due rows, no later than its earliest due row: read
    /// from the index, lowered by every row written due since. A scan reads
    /// the index only for tenants due by their hint.
    due_hints: HashMap<TenantId, u64>,
    /// Rows of unknown tenants were written due: the next scan reads every
    /// tenant's hint from the index.
    hints_stale: bool,
    /// Due times written during the scan under way, which its index reads
    /// do not see yet.
    scan_notes: Option<HashMap<TenantId, u64>>,
    wheel: Wheel<JobId>,
    ops: VecDeque<StoreOp>,
    abandoned: VecDeque<JobId>,
    /// A commit or freed window room asks for a scan now.
    scan_requested: bool,
    /// A pass over the held rows under way (see `held`): a new core, a
    /// reconfiguration that resumed a paused sink, and a breaker that
    /// closes with rows held start one.
    waking: Option<held::WakePass>,
    /// Tenants whose rows a dropped breaker parked, being made due (see
    /// `unpark`).
    unparking: unpark::UnparkPass,
    /// Breakers that hold rows, by when their probe is checked (a while
    /// after their open period ends): a key with no row claimed by then to
    /// be its probe has its held rows made due (see `held`), so a probe
    /// row that went (dead-lettered, its sink removed, held by a pause)
    /// cannot leave them held for good.
    probe_checks: BTreeSet<(u64, SinkKey)>,
    /// Shutting down: nothing more is claimed or started.
    draining: bool,
    /// The earliest due row of a tenant with room, as of the last scan and
    /// the writes since.
    next_due_at_ms: Option<u64>,
    /// Breakers of keys that failed lately (a closed, clean one is dropped).
    breakers: HashMap<SinkKey, Breaker>,
    /// Breaker changes not yet polled (at most two per outcome handled).
    breaker_events: VecDeque<BreakerEvent>,
    /// Whether each settled attempt is queued as an [`OutcomeEvent`].
    observed: bool,
    /// Attempts' outcomes not yet polled (one per outcome handled).
    outcome_events: VecDeque<OutcomeEvent>,
    /// The keys whose `unlogged_dead` is not 0, so taking them costs the
    /// keys with news, not every key.
    unlogged_dead_keys: Vec<SinkKey>,
    /// The running attempt of each ordering lane that has one. Only a
    /// lane's head is ever due, so a lane runs one row at a time; the one
    /// exception, an attempt taken on from before a shard restart whose
    /// lane moved on in the dropped batch, is kept apart by this (see
    /// `scan::claim`).
    running_lanes: HashMap<LaneId, JobId>,
    stats: CoreStats,
}

impl Core {
    /// A core with nothing claimed. `grant` is the shard's initial share of
    /// the global windows (the coordinator adjusts it).
    /// Job ids start at `first_job_id` (a rebuilt core continues its
    /// predecessor's ids).
    pub fn new(
        dispatch: DispatchConfig,
        retry: RetryConfig,
        catalog: Arc<Catalog>,
        grant: Grant,
        now_ms: u64,
        seed: u64,
        first_job_id: u64,
    ) -> Core {
        Core {
            dispatch,
            retry,
            catalog,
            grant,
            rng: Rng::new(seed),
            next_job_id: first_job_id,
            claims: HashMap::new(),
            running: HashMap::new(),
            claimed: Usage::default(),
            running_count: 0,
            calls_count: 0,
            batches: HashMap::new(),
            tenants: HashMap::new(),
            keys: HashMap::new(),
            rate_wake_ms: None,
            tenant_ring: VecDeque::new(),
            claiming_tenants: 0,
            scan_order: VecDeque::new(),
            unreached: 0,
            due_hints: HashMap::new(),
            hints_stale: true,
            scan_notes: None,
            wheel: Wheel::new(now_ms),
            ops: VecDeque::new(),
            abandoned: VecDeque::new(),
            scan_requested: true,
            waking: Some(held::WakePass::default()),
            unparking: unpark::UnparkPass::default(),
            probe_checks: BTreeSet::new(),
            draining: false,
            next_due_at_ms: None,
            breakers: HashMap::new(),
            breaker_events: VecDeque::new(),
            observed: false,
            outcome_events: VecDeque::new(),
            unlogged_dead_keys: Vec::new(),
            running_lanes: HashMap::new(),
            stats: CoreStats::default(),
        }
    }

    /// A core with nothing claimed and this one's settings, its PRNG stream
    /// and its job ids continued, so late results of this core's attempts are
    /// discarded rather than mistaken for new ones (after a store failure,
    /// when the store is the truth again).
    pub fn rebuilt(&self, now_ms: u64) -> Core {
        let mut core = Core::new(
            self.dispatch.clone(),
            self.retry,
            self.catalog.clone(),
            self.grant,
            now_ms,
            0,
            self.next_job_id,
        );
        core.rng = self.rng.clone();
        core.draining = self.draining;
        core.observed = self.observed;
        core.unlogged_dead_keys = self.unlogged_dead_keys.clone();
        // Outcome counters count since the shard opened: the node's counters
        // and a `tick` waiting for rows to settle never go back.
        core.stats = CoreStats {
            delivered: self.stats.delivered,
            dead: self.stats.dead,
            dead_by_reason: self.stats.dead_by_reason,
            retried: self.stats.retried,
            timed_out: self.stats.timed_out,
            parked: self.stats.parked,
            held: self.stats.held,
            ..CoreStats::default()
        };
        // Rates and outcomes hold across the rebuild: each key keeps its
        // next call's time and what its attempts came to.
        core.keys = self
            .keys
            .iter()
            .map(|(key, state)| {
                let state = KeyState {
                    next_call_us: state.next_call_us,
                    outcomes: state.outcomes.clone(),
                    unlogged_dead: state.unlogged_dead,
                    ..KeyState::default()
                };
                (key.clone(), state)
            })
            .collect();
        core
    }

    // ---- inputs -------------------------------------------------------

    /// Rows were written due by the shell for tenants it does not name (a
    /// replay step): scan at once, reading every tenant's due rows.
    pub fn handle_committed(&mut self) {
        self.scan_requested = true;
        self.hints_stale = true;
    }

    /// Rows of `tenant` were committed due at `due_at_ms`: scan at once.
    pub fn handle_committed_for(&mut self, tenant: &TenantId, due_at_ms: u64) {
        self.scan_requested = true;
        self.note_due(tenant, due_at_ms);
    }

    /// A new share of the global windows. A lowered share only stops new
    /// claims and starts; nothing claimed or running is dropped.
    pub fn handle_grant(&mut self, grant: Grant) {
        if grant != self.grant {
            self.grant = grant;
            self.scan_requested = true;
        }
    }

    /// New dispatch limits and sources (a reload). Claimed and running rows
    /// are kept; lowered limits only stop the next claim or start.
    pub fn handle_reconfigure(
        &mut self,
        dispatch: DispatchConfig,
        retry: RetryConfig,
        catalog: Arc<Catalog>,
    ) {
        for (tenant, state) in &mut self.tenants {
            state.limits = dispatch.tenant_limits(tenant);
        }
        // A pass also settles held rows whose sink the new config removed.
        if self.catalog.resumes_in(&catalog) || self.breakers.values().any(Breaker::holds_rows) {
            self.start_wake_pass();
        }
        if self.dispatch.breaker_failures > 0 && dispatch.breaker_failures == 0 {
            self.unpark_every_tenant();
        }
        self.dispatch = dispatch;
        self.retry = retry;
        self.catalog = catalog;
        // Rows queued on a key the new sources do not have are bound again
        // by the next scan: the sink at their index is not theirs now.
        self.unqueue(self.queued_keys(|key| !self.catalog.has_key(key)));
        let dropped: Vec<SinkKey> = (self.breakers.keys())
            .filter(|key| !self.keeps_breaker(key))
            .cloned()
            .collect();
        for key in dropped {
            let breaker = self.breakers.remove(&key).expect("a listed breaker");
            if breaker.is_open() {
                self.unpark_tenant(&key.tenant);
                self.report_closed(key);
            }
        }
        self.scan_requested = true;
    }

    /// An attempt's result. A result for an attempt that already timed out
    /// (or is unknown) is discarded: the row was already settled for it.
    /// `took` is how long the attempt's call ran, as its worker measured it.
    pub fn handle_outcome(
        &mut self,
        now_ms: u64,
        job: JobId,
        result: AttemptResult,
        took: Duration,
    ) {
        let Some(run) = self.running.remove(&job) else {
            return;
        };
        self.wheel.cancel(run.timer);
        self.finish(now_ms, job, run, result, took);
    }

    /// Fails every attempt whose deadline passed as `attempt_timeout`; the
    /// shell learns of their workers through [`Core::poll_abandoned`] (once
    /// per call: a batch's entries share their deadline).
    pub fn handle_timers(&mut self, now_ms: u64) {
        while let Some(job) = self.wheel.poll(now_ms) {
            let run = self
                .running
                .remove(&job)
                .expect("a timer belongs to a running attempt");
            self.stats.timed_out += 1;
            let key = &self.claims[&run.row].key;
            self.keys
                .get_mut(key)
                .expect("a running key")
                .outcomes
                .timed_out += 1;
            let message = format!("attempt_timeout: no result after {} ms", run.timeout_ms);
            let failure = AttemptFailure {
                class: FailureClass::Transient,
                message,
            };
            let took = Duration::from_millis(run.timeout_ms);
            if self.finish(now_ms, job, run, Err(failure), took) {
                self.abandoned.push_back(job);
            }
        }
    }

    // ---- outputs ------------------------------------------------------

    /// The next store change, in decision order.
    pub fn poll_store_op(&mut self) -> Option<StoreOp> {
        self.ops.pop_front()
    }

    /// The next change of a breaker's state (opened, closed), in order.
    pub fn poll_breaker_event(&mut self) -> Option<BreakerEvent> {
        self.breaker_events.pop_front()
    }

    /// A call that timed out (named by its last attempt): its worker may be stuck.
    pub fn poll_abandoned(&mut self) -> Option<JobId> {
        self.abandoned.pop_front()
    }

    /// When the shell must call in again with nothing else happening: an
    /// attempt deadline, the earliest due row, the time a key that waits
    /// out its rate may start a call, or now when a scan is wanted.
    pub fn poll_deadline(&self, now_ms: u64) -> Option<u64> {
        let due = if self.wants_scan(now_ms) {
            Some(now_ms)
        } else {
            self.next_due_at_ms
        };
        let due = earliest(due, self.rate_wake_ms);
        let check = (self.probe_checks.first()).filter(|_| !self.draining);
        let due = earliest(due, check.map(|(at_ms, _)| *at_ms));
        earliest(due, self.wheel.next_deadline_ms())
    }

    /// Whether a scan has work: a pass over held rows or unparking under
    /// way or a breaker's probe check due, or, with window room, a scan
    /// asked for or a row due.
    pub fn wants_scan(&self, now_ms: u64) -> bool {
        let claims = self.shard_window().has_room(self.claimed)
            && (self.scan_requested || self.next_due_at_ms.is_some_and(|at| at <= now_ms));
        let check_due = (self.probe_checks.first()).is_some_and(|(at_ms, _)| *at_ms <= now_ms);
        let passes = self.waking.is_some() || self.is_unparking();
        !self.draining && (passes || check_due || claims)
    }

    /// Whether the shard's share of the in-flight window is full.
    pub fn window_full(&self) -> bool {
        !self.shard_window().has_room(self.claimed)
    }

    /// Nothing claimed, nothing running, and nothing due now.
    pub fn is_idle(&self, now_ms: u64) -> bool {
        self.claims.is_empty() && !self.wants_scan(now_ms) && self.ops.is_empty()
    }

    pub fn stats(&self) -> CoreStats {
        CoreStats {
            claimed: self.claimed,
            running: self.running(),
            calls: self.calls_count,
            queued: self.claims.len() as u64 - self.running_count,
            breakers_open: self.breakers.values().filter(|b| b.is_open()).count() as u64,
            ..self.stats
        }
    }

    /// Store ops are waiting to be written.
    pub fn has_store_ops(&self) -> bool {
        !self.ops.is_empty()
    }

    /// The id the next attempt will get.
    pub fn next_job_id(&self) -> u64 {
        self.next_job_id
    }

    /// Shutting down: claims nothing more, starts nothing more, and writes
    /// every claimed row that has not started back due as it was. Running
    /// attempts still report their outcomes.
    pub fn handle_drain(&mut self) {
        self.draining = true;
        self.unqueue(self.queued_keys(|_| true));
        self.tenant_ring.clear();
        for state in self.tenants.values_mut() {
            state.key_ring.clear();
        }
    }

    /// Takes back a breaker the store kept open until `until_ms` (its
    /// `opens`th open in a row), as a new core opens: its key's rows park
    /// until then, and then one probe runs, as before the restart.
    ///
    /// One of a sink the config no longer has, or any while breakers are
    /// off, is reported closed instead: a new core's pass over the held
    /// rows makes the rows it held due, and unparking those it parked.
    pub fn restore_breaker(&mut self, key: SinkKey, until_ms: u64, opens: u32) {
        if !self.keeps_breaker(&key) {
            self.unpark_tenant(&key.tenant);
            return self.report_closed(key);
        }
        self.check_probe_after(until_ms, &key);
        self.breakers
            .insert(key, Breaker::reopened(until_ms, opens));
    }

    /// The keys whose breaker is open or half-open.
    pub fn open_breaker_keys(&self) -> Vec<SinkKey> {
        let open = self.breakers.iter().filter(|(_, b)| b.is_open());
        open.map(|(key, _)| key.clone()).collect()
    }

    /// The limits `dispatch.tenants` gives the tenant now.
    pub fn tenant_limits(&self, tenant: &str) -> TenantLimits {
        self.dispatch.tenant_limits(tenant)
    }

    /// Attempts running (stragglers taken on included).
    pub fn running(&self) -> u64 {
        self.running_count
    }

    // ---- internals ----------------------------------------------------

    fn shard_window(&self) -> Window {
        Window {
            max_rows: self.grant.max_inflight,
            max_bytes: self.grant.max_inflight_bytes,
        }
    }

    fn tenant_mut(&mut self, tenant: &TenantId) -> &mut TenantState {
        let dispatch = &self.dispatch;
        self.tenants
            .entry(tenant.clone())
            .or_insert_with(|| TenantState {
                limits: dispatch.tenant_limits(tenant),
                claimed: Usage::default(),
                calls: 0,
                parked: 0,
                key_ring: VecDeque::new(),
            })
    }

    /// Settles a claimed row that ran: the outcome becomes a store op, and
    /// counts in its key's outcomes with `took` (an attempt that timed out
    /// counts as taking its timeout). Returns whether the attempt's call
    /// ended with it (a batch ends with its last entry).
    fn finish(
        &mut self,
        now_ms: u64,
        job: JobId,
        run: Running,
        result: AttemptResult,
        took: Duration,
    ) -> bool {
        let row = run.row;
        let claim = self
            .claims
            .remove(&row)
            .expect("a running attempt has a claim");
        let outcomes = &mut self
            .keys
            .get_mut(&claim.key)
            .expect("a running key")
            .outcomes;
        outcomes.durations.record(took);
        if result.is_ok() {
            outcomes.delivered += 1;
            outcomes.last_delivered_at_ms = Some(now_ms);
            if claim.fields.replay.is_none() {
                let waited_ms = now_ms.saturating_sub(claim.hook.received_at_ms);
                outcomes
                    .delivery_latency
                    .record(Duration::from_millis(waited_ms));
            }
        }
        self.running_count -= 1;
        if let Some(lane) = claim.fields.lane {
            self.running_lanes.remove(&lane);
        }
        let call_ended = self.call_ends(run.batch);
        if call_ended {
            self.free_slot(&claim.key);
        }
        self.release(&claim);
        if let Some(until_ms) = self.record_breaker(
            now_ms,
            &claim.key,
            job,
            result.as_ref().err().map(|f| f.class),
        ) {
            self.park_queue(now_ms, &claim.key, Admit::Park { until_ms });
        }
        let attempt = claim.fields.attempts + 1;
        let failure = match result {
            Ok(()) => {
                self.observe(&claim.key, &claim.hook.id, attempt, now_ms, || {
                    Outcome::Delivered
                });
                self.stats.delivered += 1;
                self.ops.push_back(StoreOp::Delivered {
                    row,
                    replay: claim.fields.replay.clone(),
                    lane: claim.fields.lane,
                });
                return call_ended;
            }
            Err(failure) => failure,
        };
        let fields = RowFields {
            attempts: attempt,
            ..claim.fields
        };
        let decision = self.retry_for(&claim.key).decide(
            now_ms,
            fields.attempts,
            fields.first_attempt_at_ms,
            failure.class,
            &mut self.rng,
        );
        let error = truncate(failure.message);
        let outcomes = &mut self
            .keys
            .get_mut(&claim.key)
            .expect("a running key")
            .outcomes;
        outcomes.last_failure = Some(LastFailure {
            at_ms: now_ms,
            error: error.clone(),
        });
        let reason = match decision {
            RetryDecision::RetryAt { due_at_ms } => {
                self.stats.retried += 1;
                outcomes.retried += 1;
                self.observe(&claim.key, &claim.hook.id, attempt, now_ms, || {
                    Outcome::Retrying {
                        due_at_ms,
                        error: error.clone(),
                    }
                });
                self.note_due(&fields.tenant, due_at_ms);
                self.ops.push_back(StoreOp::Reschedule {
                    row,
                    fields,
                    due_at_ms,
                    error: Some(error),
                });
                return call_ended;
            }
            RetryDecision::GiveUp => DeadReason::Sink {
                sink_type: fields.sink_type.clone(),
                error,
            },
            RetryDecision::Horizon => DeadReason::RetryHorizon {
                sink_type: fields.sink_type.clone(),
            },
        };
        self.sink_dead(now_ms, &claim.key, &claim.hook, row, fields, reason);
        call_ended
    }

    /// Starts a pass over the held rows, afresh if one is under way (it
    /// may have passed rows that are to wake now).
    fn start_wake_pass(&mut self) {
        self.waking = Some(held::WakePass::default());
        self.scan_requested = true;
    }

    /// Sets every queued row of `key` aside as `admit` says (parked until
    /// the breaker's period ends, or held while its sink is paused) and
    /// takes the key out of the round robin.
    fn park_queue(&mut self, now_ms: u64, key: &SinkKey, admit: Admit) {
        for (row, claim) in self.take_queue(key) {
            self.set_aside(now_ms, key, &claim.hook, row, claim.fields, admit);
        }
    }

    /// Takes every row queued on `key` off it, releasing their claims,
    /// and the key out of the round robin.
    fn take_queue(&mut self, key: &SinkKey) -> Vec<(RowId, Claim)> {
        let queued: Vec<RowId> = self
            .keys
            .get_mut(key)
            .map(|k| k.queue.drain(..).collect())
            .unwrap_or_default();
        if queued.is_empty() {
            return Vec::new();
        }
        let tenant = self
            .tenants
            .get_mut(&key.tenant)
            .expect("a queued key has a tenant");
        tenant.key_ring.retain(|k| k != key);
        if tenant.key_ring.is_empty() {
            self.tenant_ring.retain(|t| *t != key.tenant);
        }
        let mut taken = Vec::with_capacity(queued.len());
        for row in queued {
            let claim = self.claims.remove(&row).expect("a queued row has a claim");
            self.release(&claim);
            taken.push((row, claim));
        }
        taken
    }

    /// The keys with rows queued that `which` picks.
    fn queued_keys(&self, which: impl Fn(&SinkKey) -> bool) -> Vec<SinkKey> {
        let queued = self.keys.iter().filter(|(_, k)| !k.queue.is_empty());
        queued
            .map(|(key, _)| key)
            .filter(|key| which(key))
            .cloned()
            .collect()
    }

    /// Writes the rows queued on `keys` back due as they were claimed, for
    /// a later scan to claim again.
    fn unqueue(&mut self, keys: Vec<SinkKey>) {
        for key in keys {
            for (row, claim) in self.take_queue(&key) {
                self.note_due(&key.tenant, claim.due_at_ms);
                self.ops.push_back(StoreOp::Reschedule {
                    row,
                    due_at_ms: claim.due_at_ms,
                    fields: claim.fields,
                    error: None,
                });
            }
        }
    }

    /// A row `admit` does not let start: parked, or held.
    fn set_aside(
        &mut self,
        now_ms: u64,
        key: &SinkKey,
        hook: &crate::store::Hook,
        row: RowId,
        fields: RowFields,
        admit: Admit,
    ) {
        match admit {
            Admit::Park { until_ms } => self.park(now_ms, key, hook, row, fields, until_ms),
            Admit::Hold => self.hold(row, fields),
            Admit::Pass { .. } => unreachable!("a row that may start is not set aside"),
        }
    }

    /// Writes a row back due at `until_ms` with its attempts unchanged, but
    /// no later than its retry horizon; one parked at or past its horizon is
    /// dead-lettered as `retry_horizon`. A row never attempted waits with
    /// the held rows until the breaker closes, unless it is the first of
    /// the open period, which is due at its end to be the probe (see
    /// [`Breaker::parked_due_ms`]).
    fn park(
        &mut self,
        now_ms: u64,
        key: &SinkKey,
        hook: &crate::store::Hook,
        row: RowId,
        fields: RowFields,
        until_ms: u64,
    ) {
        let mut due_at_ms = until_ms;
        if fields.first_attempt_at_ms != 0 {
            let horizon_ms = self.retry_for(key).horizon_ms(fields.first_attempt_at_ms);
            if now_ms >= horizon_ms {
                let reason = DeadReason::RetryHorizon {
                    sink_type: fields.sink_type.clone(),
                };
                return self.sink_dead(now_ms, key, hook, row, fields, reason);
            }
            due_at_ms = due_at_ms.min(horizon_ms);
        } else if let Some(breaker) = self.breakers.get_mut(key) {
            // No horizon to keep: parked once, however long the sink is down.
            due_at_ms = breaker.parked_due_ms(until_ms);
            if let Some(open_until_ms) = breaker.open_until_ms().filter(|_| breaker.holds_rows()) {
                self.check_probe_after(open_until_ms, key);
            }
        }
        self.stats.parked += 1;
        self.tenant_mut(&fields.tenant).parked += 1;
        if due_at_ms != HELD_DUE_MS {
            self.note_due(&fields.tenant, due_at_ms);
        }
        self.ops.push_back(StoreOp::Park {
            row,
            fields,
            due_at_ms,
        });
    }

    /// The retry policy of `key`'s rows: `[retry]`, with the keys their
    /// sink sets in their place. Their sink is the one they bind to now: a
    /// reload may have moved it from the key's index, or removed it.
    fn retry_for(&self, key: &SinkKey) -> RetryConfig {
        let own = match (self.catalog).bind(&key.source_id, key.sink_index, &key.sink_type) {
            Binding::Bound { sink_index } => self.catalog.retry(&key.source_id, sink_index),
            Binding::SinkGone | Binding::SourceGone => None,
        };
        own.map_or(self.retry, |own| own.over(self.retry))
    }

    /// A lane's running attempt starts: another row of the lane may not.
    fn lane_starts(&mut self, lane: Option<LaneId>, job: JobId) {
        if let Some(lane) = lane {
            let previous = self.running_lanes.insert(lane, job);
            assert!(previous.is_none(), "lane {lane:?} runs two rows at once");
        }
    }

    /// When the attempt running in `lane` times out, if one runs.
    fn lane_busy_until_ms(&self, lane: Option<LaneId>) -> Option<u64> {
        let job = self.running_lanes.get(&lane?)?;
        Some(self.running[job].deadline_at_ms)
    }

    /// An attempt of `batch` (or of a call of its own) ended: whether its
    /// call did too.
    fn call_ends(&mut self, batch: Option<JobId>) -> bool {
        let Some(batch) = batch else {
            return true;
        };
        let left = self.batches.get_mut(&batch).expect("a running batch");
        *left -= 1;
        if *left > 0 {
            return false;
        }
        self.batches.remove(&batch);
        true
    }

    /// A call of `key` starts: it takes a slot of the key, its tenant and
    /// the shard.
    fn take_slot(&mut self, key: &SinkKey) {
        self.keys.entry(key.clone()).or_default().calls += 1;
        self.tenant_mut(&key.tenant).calls += 1;
        self.calls_count += 1;
    }

    /// A call of `key` ended: its key's, tenant's and shard's slot is free.
    fn free_slot(&mut self, key: &SinkKey) {
        self.keys.get_mut(key).expect("a running key").calls -= 1;
        self.tenant_mut(&key.tenant).calls -= 1;
        self.calls_count -= 1;
    }

    /// Counts a new claim in the windows.
    fn add_claim(&mut self, row: RowId, claim: Claim) {
        let size_bytes = claim.fields.size_bytes;
        self.claimed.add(size_bytes);
        let tenant = self.tenant_mut(&claim.key.tenant);
        let first_claim = tenant.claimed.rows == 0;
        tenant.claimed.add(size_bytes);
        self.claiming_tenants += u64::from(first_claim);
        self.claims.insert(row, claim);
    }

    /// Takes a finished or released claim out of the windows; a holder that
    /// was full gets a scan so its freed room is used.
    fn release(&mut self, claim: &Claim) {
        let shard_was_full = !self.shard_window().has_room(self.claimed);
        self.claimed.remove(claim.fields.size_bytes);
        let tenant = self.tenant_mut(&claim.key.tenant);
        let tenant_was_full = !tenant.window().has_room(tenant.claimed);
        tenant.claimed.remove(claim.fields.size_bytes);
        let last_claim = tenant.claimed.rows == 0;
        self.claiming_tenants -= u64::from(last_claim);
        if shard_was_full || tenant_was_full {
            self.scan_requested = true;
        }
    }
}

/// The earlier of two optional times.
fn earliest(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn truncate(mut text: String) -> String {
    let max = crate::limits::MAX_ERROR_TEXT_BYTES;
    if text.len() > max {
        let mut cut = max;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    text
}

#[cfg(test)]
mod tests;
