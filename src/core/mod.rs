//! The sans-IO scheduler: one per shard.
//!
//! [`Core`] decides everything about the shard's rows — which due rows to
//! claim (deficit round robin over tenants), which claimed rows start
//! (round robin across tenants, then across each tenant's sink keys, within
//! the windows and caps), what an outcome does to a row (the retry policy),
//! and when attempts time out (a timer wheel). It never reads a clock, sleeps,
//! spawns, locks or touches LMDB: time comes in as `now_ms`, randomness from
//! a seeded [`Rng`], due rows through the [`DueIndex`] trait. Clippy holds
//! it to that: `clippy.toml` lists the clocks, sleeps, spawns, locks and
//! LMDB types, and `src/lib.rs` denies them in this module.
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
mod carry;
mod catalog;
mod dead_letter;
mod dead_reason;
mod due_tenants;
mod finish;
mod held;
mod hints;
mod key_wake;
mod outcome_event;
mod pacing;
mod repace;
mod report;
pub mod retry;
mod ring;
pub mod rng;
mod scan;
mod set_aside;
mod sink_wake;
mod slots;
mod slow_keys;
mod source_sweep;
mod stall;
mod stragglers;
mod tenant_walk;
mod types;
mod unpark;
pub mod wheel;
mod window;

pub use breaker::{Admit, Breaker, BreakerConfig, BreakerEvent, BreakerState, OpenBreaker};
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
use ring::Ring;
use std::collections::hash_map::Entry;
use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
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
    /// A reload removed its sink, or gave it another destination, while
    /// its attempt ran: the attempt counts against no sink's
    /// `sink_concurrency` and tells no breaker (see `carry`).
    sink_gone: bool,
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
    /// How many of the core's keys (`Core::keys`) are this tenant's (a
    /// reload forgets a tenant with none that is idle: see
    /// `Core::forget_idle_tenants`).
    keys: u32,
    /// Keys of this tenant with queued jobs, in round-robin order.
    key_ring: Ring<SinkKey>,
}

impl TenantState {
    /// Rows of it are claimed, queued or running.
    fn is_busy(&self) -> bool {
        self.claimed.rows > 0 || self.calls > 0 || !self.key_ring.is_empty()
    }

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
    /// Calls still running of a sink a reload took from this key (removed,
    /// or given another destination): they keep the key, but count
    /// against no sink's `sink_concurrency` (see `carry`).
    gone_calls: u64,
    /// For a sink with `max_calls_per_s`: when the key's next call may
    /// start (µs, on the core's clock; see `slots`).
    next_call_us: u64,
    /// While the key waits for that turn out of its tenant's ring (in
    /// `Core::rate_waits`): the ms the turn comes.
    rate_wait_ms: Option<u64>,
    /// The turn given to the last row written back to wait for its turn
    /// in the store (µs; see `pacing`).
    paced_until_us: u64,
    /// How long its calls take, on average over the last ones (µs; 0
    /// before the first; see `slow_keys`).
    call_time_us: u64,
    /// Its rows are held for its wake, beyond its queue's cap, until the
    /// wake has woken them all (see `slow_keys`).
    holding: bool,
    /// What the key's attempts came to since the shard opened.
    outcomes: SinkOutcomes,
    /// Its rows dead-lettered since the shell last logged them.
    unlogged_dead: u64,
}

impl KeyState {
    /// Its calls running of its sink, or (`sink_gone`) of one a reload
    /// took away from it.
    fn calls_of(&mut self, sink_gone: bool) -> &mut u64 {
        match sink_gone {
            true => &mut self.gone_calls,
            false => &mut self.calls,
        }
    }
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
    /// Tenants with rows claimed, or due and waiting their turn in the
    /// scans' round robin.
    pub active_tenants: u64,
    /// Rows written back due because their key's breaker was open.
    pub parked: u64,
    /// Rows held because their sink was paused, or beyond a slow sink's
    /// queue for its wake (each time one came up).
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
    /// The keys that are not the catalog's own (`Catalog::owns_key`):
    /// those of sinks a reload removed, kept until they are idle (see
    /// `Core::forget_gone_keys`), and those of rows whose source moved to
    /// another tenant.
    stray_keys: HashSet<SinkKey>,
    /// Tenants with queued jobs, in round-robin order.
    tenant_ring: Ring<TenantId>,
    /// Keys with rows queued and a free slot that wait for their
    /// `max_calls_per_s` turn, by the ms it comes: out of their tenant's
    /// key ring meanwhile, so that a pass over the rings walks only the
    /// tenants that may start a call or that run calls (see `slots`).
    rate_waits: BTreeSet<(u64, SinkKey)>,
    /// The tenants with due rows by their hints (no later than their
    /// earliest due row: read from the index, lowered by every row written
    /// due since), in the deficit round robin's order for the next scan
    /// (see `scan`), and the tenants with rows claimed. A scan reads the
    /// index only for tenants due by their hint.
    due: due_tenants::DueTenants,
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
    /// A pass over the held rows under way (see `held`): a new core and a
    /// reconfiguration that resumed a paused sink start one.
    waking: Option<held::WakePass>,
    /// Keys whose held rows are being made due at the pace they take them
    /// (see `key_wake`): a breaker that closes with rows held starts one,
    /// and so does a pass over the held rows for each key it frees.
    key_wakes: key_wake::KeyWakes,
    /// Tenants whose rows a dropped breaker parked, being made due (see
    /// `unpark`).
    unparking: unpark::UnparkPass,
    /// Tenants whose rows a reload's new rates pace again, being made due
    /// (see `repace`).
    repacing: repace::RepacePass,
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
    /// How many of them are open or half-open: the shard's stats read it
    /// every iteration, and an outage may open tens of thousands.
    breakers_open: u64,
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
    /// The process's latest stall (see `stall`).
    stall: stall::Stall,
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
            stray_keys: HashSet::new(),
            rate_waits: BTreeSet::new(),
            tenant_ring: Ring::default(),
            due: due_tenants::DueTenants::default(),
            hints_stale: true,
            scan_notes: None,
            wheel: Wheel::new(now_ms),
            ops: VecDeque::new(),
            abandoned: VecDeque::new(),
            scan_requested: true,
            waking: Some(held::WakePass::default()),
            key_wakes: key_wake::KeyWakes::default(),
            unparking: unpark::UnparkPass::default(),
            repacing: repace::RepacePass::default(),
            probe_checks: BTreeSet::new(),
            draining: false,
            next_due_at_ms: None,
            breakers: HashMap::new(),
            breakers_open: 0,
            breaker_events: VecDeque::new(),
            observed: false,
            outcome_events: VecDeque::new(),
            unlogged_dead_keys: Vec::new(),
            running_lanes: HashMap::new(),
            stall: stall::Stall::default(),
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
        core.stall = self.stall;
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
        for (key, state) in &self.keys {
            *core.key_mut(key) = KeyState {
                next_call_us: state.next_call_us,
                paced_until_us: state.paced_until_us,
                call_time_us: state.call_time_us,
                outcomes: state.outcomes.clone(),
                unlogged_dead: state.unlogged_dead,
                ..KeyState::default()
            };
        }
        core
    }

    // ---- inputs -------------------------------------------------------

    /// Rows were written due by the shell for tenants it does not name
    /// (due entries set aside as unreadable and rewritten): scan at once,
    /// reading every tenant's due rows.
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

    /// New dispatch limits and sources (a reload) at `now_ms`. Claimed and
    /// running rows are kept; lowered limits only stop the next claim or
    /// start.
    pub fn handle_reconfigure(
        &mut self,
        now_ms: u64,
        dispatch: DispatchConfig,
        retry: RetryConfig,
        catalog: Arc<Catalog>,
    ) {
        let maybe_stray = self.keys_maybe_stray(&catalog);
        for (tenant, state) in &mut self.tenants {
            state.limits = dispatch.tenant_limits(tenant);
        }
        self.due.unfull_all();
        // A pass also settles held rows whose sink the new config removed
        // (a key's wake drops itself then).
        let holding = self.breakers.values().any(Breaker::holds_rows) || self.key_wakes.any();
        if self.catalog.resumes_in(&catalog) || holding {
            self.start_wake_pass();
        }
        if self.dispatch.breaker_failures > 0 && dispatch.breaker_failures == 0 {
            self.unpark_every_tenant();
        }
        self.repace_changed_rates(&catalog);
        self.dispatch = dispatch;
        self.retry = retry;
        let previous = std::mem::replace(&mut self.catalog, catalog);
        self.carry_key_states(&previous, &maybe_stray);
        // Keys waiting for their turn go back in the rings: the next pass
        // holds them to their sink's new rate, or none.
        self.end_rate_waits(u64::MAX);
        // Rows queued on a key the new sources do not have, or of a source
        // whose sinks' places changed, are bound again by the next scan:
        // the sink at their index may not be theirs now.
        let unbound = (maybe_stray.iter()).filter(|key| {
            !self.keys[*key].queue.is_empty()
                && (!self.catalog.has_key(key)
                    || self.catalog.places_changed_from(&previous, &key.source_id))
        });
        self.unqueue(unbound.cloned().collect());
        // A wake under way of a key of such a source starts again from the
        // first held row: rows it passed may bind to its key now. Looked
        // for among the wakes, not the keys with a state: a key whose rows
        // are all held has none, and a row a swap of two sinks moved
        // behind its wake would stay held until the next close or restart.
        let rewound: Vec<SinkKey> = (self.key_wakes.keys())
            .filter(|key| self.catalog.places_changed_from(&previous, &key.source_id))
            .cloned()
            .collect();
        for key in rewound {
            self.start_key_wake(&key);
        }
        self.forget_gone_keys(now_ms, maybe_stray);
        self.forget_idle_tenants();
        self.carry_breakers(now_ms, &previous);
        self.scan_requested = true;
    }

    /// The keys that may not be `catalog`'s own after a reload to it, or
    /// whose rows may bind to other keys: those the core has of the keys
    /// its catalog owned and `catalog` does not, or of sources whose
    /// sinks' places changed, as the reloading thread noted them (see
    /// `Catalog::note_changes_from`; none if it is the same catalog), and
    /// the strays before it (`stray_keys`, taken out); without a note (a
    /// catalog noted from another, or not at all), every such key, each
    /// looked up in it (as every reload did before the notes: 68–108 ms
    /// of a shard's loop at 100,000 keys, docs/performance.md).
    fn keys_maybe_stray(&mut self, catalog: &Arc<Catalog>) -> Vec<SinkKey> {
        let noted = match Arc::ptr_eq(catalog, &self.catalog) {
            true => Some(Vec::new()),
            false => (catalog.keys_to_rebind_since(&self.catalog)).map(|to_rebind| {
                let kept = to_rebind.iter().filter(|key| self.keys.contains_key(*key));
                kept.cloned().collect()
            }),
        };
        match noted {
            Some(mut keys) => {
                keys.extend(self.stray_keys.drain());
                keys
            }
            None => {
                self.stray_keys.clear();
                let strays = (self.keys.keys()).filter(|key| {
                    !catalog.owns_key(key)
                        || catalog.places_changed_from(&self.catalog, &key.source_id)
                });
                strays.cloned().collect()
            }
        }
    }

    /// Drops the state of the keys the sources no longer have once nothing
    /// of theirs is queued, runs, waits for a wake or is still to log, and
    /// the turn of their sink's rate has come: a node whose sources come
    /// and go keeps only the keys it serves (a key still running goes at a
    /// later reload; a source added again starts its sinks' counts from 0,
    /// but a sink a reload moved and the next moved back still waits out
    /// its rate's interval). It looks at the keys
    /// `Core::keys_maybe_stray` gave, and keeps in `stray_keys` those that
    /// are kept and not the catalog's own.
    fn forget_gone_keys(&mut self, now_ms: u64, maybe_stray: Vec<SinkKey>) {
        for key in maybe_stray {
            let state = self.keys.get(&key).expect("a key looked at is the core's");
            if self.catalog.owns_key(&key) {
                continue;
            }
            let calls = state.calls + state.gone_calls;
            let busy = calls > 0 || !state.queue.is_empty() || state.holding;
            let turn_to_come = state.next_call_us > now_ms * 1_000;
            let kept = self.catalog.has_key(&key)
                || busy
                || turn_to_come
                || state.unlogged_dead > 0
                || self.key_wakes.under_way(&key);
            if kept {
                self.stray_keys.insert(key);
            } else {
                self.keys.remove(&key);
                if let Some(tenant) = self.tenants.get_mut(&key.tenant) {
                    tenant.keys -= 1;
                }
            }
        }
        debug_assert!(self.stray_keys_are_those_not_owned());
    }

    /// Whether `stray_keys` holds exactly the keys the catalog does not
    /// own (a debug check).
    fn stray_keys_are_those_not_owned(&self) -> bool {
        let not_owned = self.keys.keys().filter(|key| !self.catalog.owns_key(key));
        not_owned.collect::<HashSet<_>>() == self.stray_keys.iter().collect()
    }

    /// Drops the state of the tenants left with no key (after
    /// [`Core::forget_gone_keys`]) and nothing claimed or running: nothing
    /// of a tenant can be claimed or run without a key, so a tenant whose
    /// sources a reload removed goes with its last key, and a node whose
    /// tenants come and go keeps only those it serves. One given a source
    /// again starts afresh (its count of parked rows from 0).
    fn forget_idle_tenants(&mut self) {
        self.tenants
            .retain(|_, state| state.keys > 0 || state.is_busy());
        debug_assert!(self.tenants_count_their_keys());
    }

    /// Whether each tenant's count of keys is right (a debug check).
    fn tenants_count_their_keys(&self) -> bool {
        let mut counts: HashMap<&TenantId, u32> = HashMap::new();
        for key in self.keys.keys() {
            *counts.entry(&key.tenant).or_default() += 1;
        }
        let counted = (self.tenants.iter())
            .filter(|(_, state)| state.keys > 0)
            .map(|(tenant, state)| (tenant, state.keys));
        counts == counted.collect()
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
    #[must_use]
    pub fn poll_store_op(&mut self) -> Option<StoreOp> {
        self.ops.pop_front()
    }

    /// The next change of a breaker's state (opened, closed), in order.
    #[must_use]
    pub fn poll_breaker_event(&mut self) -> Option<BreakerEvent> {
        self.breaker_events.pop_front()
    }

    /// A call that timed out (named by its last attempt): its worker may be stuck.
    #[must_use]
    pub fn poll_abandoned(&mut self) -> Option<JobId> {
        self.abandoned.pop_front()
    }

    /// When the shell must call in again with nothing else happening: an
    /// attempt deadline, the earliest due row, the time a key that waits
    /// out its rate may start a call, or now when a scan is wanted.
    #[must_use]
    pub fn poll_deadline(&self, now_ms: u64) -> Option<u64> {
        let due = if self.wants_scan(now_ms) {
            Some(now_ms)
        } else {
            self.next_due_at_ms
        };
        let due = earliest(due, self.rate_waits.first().map(|(turn_ms, _)| *turn_ms));
        let check = (self.probe_checks.first()).filter(|_| !self.draining);
        let due = earliest(due, check.map(|(at_ms, _)| *at_ms));
        earliest(due, self.wheel.next_deadline_ms())
    }

    /// Whether a scan has work: a pass over held rows, unparking or pacing
    /// again under way, a step of a key's wake wanted, or a breaker's probe
    /// check due, or, with window room, a scan asked for or a row due.
    pub fn wants_scan(&self, now_ms: u64) -> bool {
        let claims = self.shard_window().has_room(self.claimed)
            && (self.scan_requested || self.next_due_at_ms.is_some_and(|at| at <= now_ms));
        let check_due = (self.probe_checks.first()).is_some_and(|(at_ms, _)| *at_ms <= now_ms);
        let passes = self.waking.is_some()
            || self.key_wakes.step_wanted()
            || self.is_unparking()
            || self.is_repacing();
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
        debug_assert_eq!(
            self.breakers_open,
            self.breakers.values().filter(|b| b.is_open()).count() as u64,
            "the count of open breakers"
        );
        CoreStats {
            claimed: self.claimed,
            running: self.running(),
            calls: self.calls_count,
            queued: self.claims.len() as u64 - self.running_count,
            breakers_open: self.breakers_open,
            active_tenants: self.due.active() as u64,
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

    /// Takes back the breakers the store kept open, as a new core opens:
    /// each key's rows park until the end of its open period, and then one
    /// probe runs, as before the restart. Each goes to its sink wherever
    /// the config put it (by its spot: a sink inserted before it, or one
    /// before it removed, moves it to another index, where the store keeps
    /// it from now on, and it is reported moved); one stored without a
    /// spot stays at its index.
    ///
    /// One of a sink the config no longer has, or any while breakers are
    /// off, is reported closed instead (but where another breaker's sink
    /// now has its key): a new core's pass over the held rows makes the
    /// rows it held due, and unparking those it parked.
    pub fn restore_breakers(&mut self, kept: Vec<OpenBreaker>) {
        let placed: Vec<(OpenBreaker, Option<SinkKey>)> = (kept.into_iter())
            .map(|open| {
                let at = self.breaker_key_now(&open);
                (open, at)
            })
            .collect();
        let taken: HashSet<SinkKey> = placed.iter().filter_map(|(_, at)| at.clone()).collect();
        for (open, at) in placed {
            let OpenBreaker {
                key,
                until_ms,
                opens,
                spot: _,
            } = open;
            let Some(at) = at else {
                self.unpark_tenant(&key.tenant);
                if !taken.contains(&key) {
                    self.report_closed(key);
                }
                continue;
            };
            if at != key {
                // Where another breaker moved to, the store keeps that one.
                let from_taken = taken.contains(&key);
                self.breaker_moved(key, &at, until_ms, opens, from_taken);
            }
            self.check_probe_after(until_ms, &at);
            let replaced = (self.breakers).insert(at, Breaker::reopened(until_ms, opens));
            if !replaced.is_some_and(|breaker| breaker.is_open()) {
                self.breakers_open += 1;
            }
        }
    }

    /// The key of the sink a kept breaker is of now, if it keeps one: the
    /// sink at its spot (at its index without one).
    fn breaker_key_now(&self, open: &OpenBreaker) -> Option<SinkKey> {
        let at = match open.spot {
            Some(spot) => self.catalog.key_at(&open.key, spot)?,
            None => open.key.clone(),
        };
        self.keeps_breaker(&at).then_some(at)
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
        tenant_entry(&mut self.tenants, &self.dispatch, tenant)
    }

    /// The state of `key`, made (and counted in its tenant's) if it has
    /// none.
    fn key_mut(&mut self, key: &SinkKey) -> &mut KeyState {
        match self.keys.entry(key.clone()) {
            Entry::Occupied(state) => state.into_mut(),
            Entry::Vacant(vacant) => {
                tenant_entry(&mut self.tenants, &self.dispatch, &key.tenant).keys += 1;
                if !self.catalog.owns_key(key) {
                    self.stray_keys.insert(key.clone());
                }
                vacant.insert(KeyState::default())
            }
        }
    }

    /// Counts a new claim in the windows.
    fn add_claim(&mut self, row: RowId, claim: Claim) {
        let size_bytes = claim.fields.size_bytes;
        self.claimed.add(size_bytes);
        let tenant = self.tenant_mut(&claim.key.tenant);
        let first_claim = tenant.claimed.rows == 0;
        tenant.claimed.add(size_bytes);
        if first_claim {
            self.due.claims_started(&claim.key.tenant);
        }
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
        if tenant.claimed.rows == 0 {
            self.due.claims_ended(&claim.key.tenant);
        }
        if tenant_was_full {
            self.due.unfull(&claim.key.tenant);
        }
        if shard_was_full || tenant_was_full {
            self.scan_requested = true;
        }
    }
}

/// A tenant's state, made with the limits `dispatch` gives it if it has
/// none.
fn tenant_entry<'t>(
    tenants: &'t mut HashMap<TenantId, TenantState>,
    dispatch: &DispatchConfig,
    tenant: &TenantId,
) -> &'t mut TenantState {
    tenants
        .entry(tenant.clone())
        .or_insert_with(|| TenantState {
            limits: dispatch.tenant_limits(tenant),
            claimed: Usage::default(),
            calls: 0,
            parked: 0,
            keys: 0,
            key_ring: Ring::default(),
        })
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
