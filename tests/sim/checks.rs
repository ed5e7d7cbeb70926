//! The simulator's checkers (the invariants the module docs of `main.rs`
//! list), each called where the run can observe what it checks.

use super::*;

impl Sim {
    /// Once the core's pass over held rows and the keys' wakes end after a
    /// pause changed (or a process opened), held rows are those of paused
    /// sinks or of keys whose breaker is open: a resumed sink's were made
    /// due, and so were a closed breaker's. A held record in flight is no
    /// held row: a restart dropped the write that made it due, and the
    /// rebuilt core took on its attempt, still running, whose result
    /// settles it (seed 28,200,425).
    pub(super) fn check_held_when_woken(&mut self, shard: &mut ShardState) {
        if !self.held_check_due || shard.core().is_waking() {
            return;
        }
        self.held_check_due = false;
        shard.flush().unwrap();
        let open_breakers: HashSet<SinkKey> =
            shard.core().open_breaker_keys().into_iter().collect();
        for view in shard.store().rows().unwrap() {
            let record = &view.record;
            if view.in_flight || record.status != RowStatus::Pending || record.at_ms != HELD_DUE_MS
            {
                continue;
            }
            let places = view.sink_places.as_deref();
            let binding = (self.catalog).bind(
                &view.source_id,
                view.row.sink_index,
                &record.sink_type,
                places,
            );
            let held_by = match binding {
                Binding::Bound { sink_index } => {
                    let key = SinkKey {
                        tenant: view.tenant.clone(),
                        source_id: Arc::from(view.source_id.as_str()),
                        sink_index,
                        sink_type: record.sink_type.clone(),
                    };
                    (self.catalog.is_paused(&view.source_id, sink_index))
                        .then_some("its paused sink")
                        .or(open_breakers.contains(&key).then_some("its open breaker"))
                }
                _ => None,
            };
            assert!(
                held_by.is_some(),
                "seed {}: row {:?} of {} is held, its sink not paused nor its breaker open \
                 (last error {:?}, attempts {})",
                self.seed,
                view.row,
                view.source_id,
                record.error,
                record.attempts
            );
        }
    }

    /// Once the core's unparking ends after a reload turned breakers off,
    /// no row is parked past now: unparking made the parked rows due, and
    /// nothing parks while breakers are off.
    pub(super) fn check_none_parked_when_unparked(&mut self, shard: &mut ShardState) {
        if !self.parked_check_due || shard.core().is_unparking() {
            return;
        }
        self.parked_check_due = false;
        shard.flush().unwrap();
        for view in shard.store().rows().unwrap() {
            let record = &view.record;
            // The error a parked row's record carries (`store::write`).
            let parked = record.status == RowStatus::Pending
                && record.error.as_deref() == Some("breaker open")
                && record.at_ms != HELD_DUE_MS;
            assert!(
                !parked || record.at_ms <= self.now_ms,
                "seed {}: row {:?} of {} is parked until {} at {}, breakers off",
                self.seed,
                view.row,
                view.source_id,
                record.at_ms,
                self.now_ms
            );
        }
    }

    /// A commit was answered: stored (`first_id` `None`, its hook takes the
    /// next seq), or with the id of the last hook stored with its source
    /// and dedupe key, within that hook's window.
    pub(super) fn check_dedupe(&mut self, hook: Committing, first_id: Option<String>) {
        let key = hook.dedupe_key.map(|k| (hook.source_id, k));
        let taken = key.as_ref().and_then(|key| self.dedupe_taken.get(key));
        let open = taken.filter(|(_, ends_at_ms)| self.now_ms < *ends_at_ms);
        match (first_id, open) {
            (None, None) => {
                self.acked.insert(self.next_seq, hook.sinks);
                self.next_seq += 1;
                if let Some(key) = key {
                    let ends_at_ms = self.now_ms + hook.window_ms;
                    self.dedupe_taken.insert(key, (hook.id, ends_at_ms));
                }
            }
            (Some(first), Some((id, _))) if first == *id => {}
            (first, open) => panic!(
                "seed {}: hook {} with key {key:?} was answered {first:?}, but the open window is {open:?}",
                self.seed, hook.id
            ),
        }
    }

    /// The observed core reported each outcome its sinks settled in the
    /// step, and the rows dead because their source or sink left the
    /// config (`dead_by_config` counts those and the corrupt ones, which
    /// are not reported); each event says what it is consistently.
    pub(super) fn check_outcome_events(
        &self,
        events: &[OutcomeEvent],
        settled: u64,
        dead_by_config: u64,
    ) {
        let seed = self.seed;
        let gone = |e: &OutcomeEvent| {
            matches!(&e.outcome, Outcome::Dead { reason }
                if reason.starts_with("source_gone: ") || reason.starts_with("sink_gone: "))
        };
        let config = events.iter().filter(|e| gone(e)).count() as u64;
        assert!(
            events.len() as u64 - config == settled && config <= dead_by_config,
            "seed {seed}: {settled} attempts settled, {dead_by_config} rows dead otherwise, \
             events {events:?}"
        );
        for e in events {
            let sound = (e.attempt >= 1 || gone(e))
                && e.at_ms == self.now_ms
                && match &e.outcome {
                    Outcome::Delivered => true,
                    Outcome::Retrying { due_at_ms, .. } => *due_at_ms >= e.at_ms,
                    Outcome::Dead { reason } if reason.starts_with("source_gone: ") => {
                        *reason == format!("source_gone: {}", e.source_id)
                    }
                    // "sink <type>: <error>", "retry_horizon: <type>" or
                    // "sink_gone: index <i>, type <type>".
                    Outcome::Dead { reason } => reason.contains(&*e.sink_type),
                    _ => false,
                };
            assert!(sound, "seed {seed}: at {}: {e:?}", self.now_ms);
        }
    }

    /// Each row `dead_letter_source` moved is reported once, dead now as
    /// `source_gone`.
    pub(super) fn check_source_gone_events(&self, events: &[OutcomeEvent], dead: u64) {
        let seed = self.seed;
        assert_eq!(events.len() as u64, dead, "seed {seed}: {events:?}");
        for e in events {
            let gone =
                matches!(&e.outcome, Outcome::Dead { reason } if reason == "source_gone: s1");
            assert!(
                gone && &*e.source_id == "s1" && e.at_ms == self.now_ms,
                "seed {seed}: at {}: {e:?}",
                self.now_ms
            );
        }
    }

    /// Notes `key`'s breaker open, and its sink's spot now.
    pub(super) fn note_opened(&mut self, key: &SinkKey) {
        self.ever_opened.insert(key.clone());
        if let Some(spot) = self.catalog.spot_of(key) {
            let sink = (key.tenant.clone(), key.source_id.clone(), spot);
            self.ever_opened_spots.insert(sink);
        }
    }

    pub(super) fn check_breakers(&mut self, events: &[BreakerEvent], shard: &ShardState) {
        let seed = self.seed;
        for event in events {
            match event {
                BreakerEvent::Opened { key, .. } => {
                    self.note_opened(key);
                    self.open_breakers.insert(key.clone());
                }
                BreakerEvent::Closed { key } => assert!(
                    take_one(&mut self.closing, key)
                        || self.open_breakers.remove(key)
                        || self.closed_by_rebuild.remove(key),
                    "seed {seed}: breaker of {key:?} closed without having opened"
                ),
                BreakerEvent::Moved { from, to } => assert!(
                    take_one(&mut self.moving, &(from.clone(), to.clone()))
                        || self.moved_by_rebuild.remove(to),
                    "seed {seed}: a breaker reported moved from {from:?} to {to:?} by no reload"
                ),
            }
        }
        assert!(
            self.closing.is_empty() && self.moving.is_empty(),
            "seed {seed}: breakers a reload dropped not reported closed: {:?}, \
             or moved not reported moved: {:?}",
            self.closing,
            self.moving
        );
        self.closed_by_rebuild.clear();
        self.moved_by_rebuild.clear();
        assert_eq!(
            self.open_breakers.len() as u64,
            shard.core().stats().breakers_open,
            "seed {seed}: breakers reported open vs counted open"
        );
    }

    /// After a reload from `previous`: each breaker open before it is open
    /// at its sink's index now (found by its spot), if breakers are on and
    /// the sink is still configured, and no other is; at the next step,
    /// each one moved to another index is reported moved, and the keys
    /// reported open and not open at their sink's index now are reported
    /// closed.
    pub(super) fn check_breakers_carried(
        &mut self,
        previous: &Catalog,
        open_before: Vec<SinkKey>,
        shard: &ShardState,
    ) {
        let on = self.dispatch.breaker_failures > 0;
        let mut carried = HashMap::new();
        for key in open_before {
            let to = self.catalog.key_moved_from(previous, &key);
            if let Some(to) = to.filter(|to| on && self.catalog.has_key(to)) {
                carried.insert(key, to);
            }
        }
        let open_now: HashSet<SinkKey> = shard.core().open_breaker_keys().into_iter().collect();
        let expected: HashSet<SinkKey> = carried.values().cloned().collect();
        assert_eq!(
            open_now, expected,
            "seed {}: open breakers after a reload vs those open before, at their sinks' index now",
            self.seed
        );
        for key in std::mem::take(&mut self.open_breakers) {
            match carried.remove(&key) {
                Some(to) if to != key => {
                    self.moving.push((key, to));
                }
                Some(_) => {}
                None => {
                    self.closing.push(key);
                }
            }
        }
        for key in &expected {
            self.note_opened(key);
        }
        self.open_breakers = expected;
    }

    /// Each outcome of an attempt is its sink key's: the keys' counts add
    /// up to the shard's (across rebuilds too), but for rows dead without
    /// an attempt (source or sink gone, unreadable); and each key timed
    /// every attempt that settled a row of it, and no other; a delivery
    /// latency is counted only for a row delivered (not for a replayed one).
    pub(super) fn check_sink_outcomes(&self, shard: &ShardState) {
        let seed = self.seed;
        let core = shard.core();
        let stats = core.stats();
        let sinks = core.sink_stats();
        let mut sums = SinkSums::of(shard);
        sums.add(self.forgotten);
        assert_eq!(
            (sums.delivered, sums.retried, sums.timed_out),
            (stats.delivered, stats.retried, stats.timed_out),
            "seed {seed}: the sinks' delivered, retried and timed out (with those of keys forgotten) vs the shard's"
        );
        for s in &sinks {
            let o = &s.outcomes;
            let attempts = o.durations.count();
            assert!(
                (o.delivered + o.retried..=o.delivered + o.retried + o.dead).contains(&attempts),
                "seed {seed}: {:?} timed {attempts} attempts for {o:?}",
                s.key
            );
            assert!(
                o.delivery_latency.count() <= o.delivered,
                "seed {seed}: {:?} has more delivery latencies than deliveries: {o:?}",
                s.key
            );
        }
        assert!(
            sums.dead <= stats.dead,
            "seed {seed}: the sinks' dead {} over the shard's {}",
            sums.dead,
            stats.dead
        );
    }

    pub(super) fn check_limits(&mut self, shard: &ShardState) {
        let stats = shard.core().stats();
        let seed = self.seed;
        let over = self.over_grant;
        assert!(
            self.over_grant.allows(
                (stats.claimed.rows, stats.calls),
                (self.grant.max_inflight, self.grant.concurrency)
            ),
            "seed {seed}: {} claimed and {} calls running, over the shard's share {:?} \
             (over it when lowered: {over:?})",
            stats.claimed.rows,
            stats.calls,
            self.grant
        );
        let tenants = shard.core().tenant_stats();
        // A tenant with nothing claimed or running keeps no excess.
        (self.over_tenant_windows).retain(|id, _| tenants.iter().any(|t| t.tenant == *id));
        for tenant in tenants {
            let limits = self.dispatch.tenant_limits(&tenant.tenant);
            let over = self.over_tenant_windows.entry(tenant.tenant.clone());
            let over = over.or_default();
            let before = *over;
            assert!(
                over.allows(
                    (tenant.claimed_rows, tenant.running),
                    (limits.max_inflight.into(), limits.concurrency.into())
                ),
                "seed {seed}: tenant {} has {} claimed and {} calls running, over its window \
                 {limits:?} (over it when lowered: {before:?})",
                tenant.tenant,
                tenant.claimed_rows,
                tenant.running
            );
        }
    }

    /// What must hold whenever a call starts: one key; a batch only of a
    /// batching sink, within its size; a key never runs more than
    /// `sink_concurrency` calls at once (the limit now: a lowered one only
    /// stops new starts).
    pub(super) fn check_call(&mut self, call: &Call) {
        let seed = self.seed;
        let key = &call.jobs()[0].key;
        assert!(
            call.jobs().iter().all(|job| job.key == *key),
            "seed {seed}: a call mixes keys: {call:?}"
        );
        assert!(
            !self.catalog.is_paused(&key.source_id, key.sink_index),
            "seed {seed}: a call of paused {key:?} starts"
        );
        assert!(
            self.catalog.has_key(key),
            "seed {seed}: a call of {key:?} starts on another type's sink, or none"
        );
        if let Call::Batch(jobs) = call {
            let max = self.batch_max_entries.map_or(0, |m| usize::from(m.get()));
            assert!(
                &*key.sink_type == "b" && jobs.len() <= max,
                "seed {seed}: a batch of {} for {key:?} (batches of {max})",
                jobs.len()
            );
        }
        self.check_rate(key);
        let calls_on_key: HashSet<JobId> = self
            .running
            .values()
            .filter(|run| run.key.as_ref() == Some(key))
            .map(|run| run.call)
            .collect();
        assert!(
            calls_on_key.len() < self.dispatch.sink_concurrency as usize,
            "seed {seed}: key {key:?} runs {} calls, and one more starts, over {}",
            calls_on_key.len(),
            self.dispatch.sink_concurrency
        );
    }

    /// A call of `key` starts now: for a sink with a rate, each of the
    /// key's recent starts, n calls back, lies more than n intervals less
    /// 1 ms before it.
    fn check_rate(&mut self, key: &SinkKey) {
        let Some(interval_us) = self
            .catalog
            .call_interval_us(&key.source_id, key.sink_index)
        else {
            return;
        };
        let seed = self.seed;
        let starts = self.call_starts.entry(key.clone()).or_default();
        for (back, start_ms) in starts.iter().rev().enumerate() {
            let n = back as u64 + 1;
            assert!(
                (self.now_ms - start_ms) * 1_000 + 1_000 > n * interval_us,
                "seed {seed}: key {key:?} starts a call at {} only {} ms after the call {n} back \
                 (one every {interval_us} µs)",
                self.now_ms,
                self.now_ms - start_ms
            );
        }
        starts.push_back(self.now_ms);
        if starts.len() > 32 {
            starts.pop_front();
        }
    }

    /// What must hold whenever an attempt starts.
    pub(super) fn check_start(&mut self, job: &goad::core::Job, record: &goad::RowRecord) {
        let seed = self.seed;
        assert_eq!(
            job.key.sink_type, record.sink_type,
            "seed {seed}: row {:?} starts on a key of another type",
            job.row
        );
        // The sink it starts on is at the place its index had at commit
        // (the first such for the first of equal places, and so on), or,
        // that place gone, at its index and at a place its hook did not
        // know (as if that sink's destination had been changed there).
        let then = &self.hook_places[&job.hook.id];
        let now = &self
            .catalog
            .source(&job.key.source_id)
            .expect("a bound source")
            .places;
        let (index, started_at) = (
            usize::from(job.row.sink_index),
            usize::from(job.key.sink_index),
        );
        let place = then[index];
        let rank = then[..index].iter().filter(|p| **p == place).count();
        let own = (now.iter().enumerate())
            .filter(|(_, p)| **p == place)
            .nth(rank);
        let edited_in_place = own.is_none() && started_at == index && !then.contains(&now[index]);
        assert!(
            own.is_some_and(|(i, _)| i == started_at) || edited_in_place,
            "seed {seed}: row {:?} starts at index {started_at}, not on its sink (places then \
             {then:?}, now {now:?})",
            job.row
        );
        // Parked rows spend no attempts: the stored count never exceeds the
        // attempts started (some of which a crash or timeout lost).
        let started = self.started.entry(job.row).or_default();
        assert!(
            record.attempts <= *started,
            "seed {seed}: row {:?} has {} attempts but only {started} started",
            job.row,
            record.attempts
        );
        if let Some(lane) = record.lane {
            let other: Vec<RowId> = self
                .running
                .values()
                .filter(|run| run.lane == Some(lane))
                .map(|r| r.row)
                .collect();
            assert!(
                other.is_empty(),
                "seed {seed}: row {:?} ({record:?}) starts at {} while another row of its lane runs: {other:?}",
                job.row, self.now_ms
            );
            // A replayed row rejoins its lane behind rows committed after it.
            if *started == 0 && record.replay.is_none() {
                let last = self.lane_first_starts.insert(lane, job.row.seq);
                assert!(
                    last.is_none_or(|seq| seq < job.row.seq),
                    "seed {seed}: row {:?} starts a first time after row seq {last:?} of its lane",
                    job.row
                );
            }
        }
        assert_eq!(
            job.attempt,
            record.attempts + 1,
            "seed {seed}: attempt numbering of {:?}",
            job.row
        );
        *started += 1;
        // Nothing is retried at or past its horizon (so no row outlives it
        // by more than one open period: a parked row comes due by then).
        if record.first_attempt_at_ms != 0 {
            let key = &job.key;
            let own = self.catalog.retry(&key.source_id, key.sink_index);
            let policy = own.map_or(self.retry, |own| own.over(self.retry));
            let horizon_ms = record.first_attempt_at_ms + policy.max_elapsed_ms;
            assert!(
                self.now_ms < horizon_ms,
                "seed {seed}: row {:?} started at {} at or past its horizon {horizon_ms}",
                job.row,
                self.now_ms
            );
        }
    }

    /// Every commit is acknowledged in order (the simulated store does not
    /// fail), so the seqs of `acked` are the store's: each of their rows was
    /// delivered or is dead.
    pub(super) fn check_settled(&self, store: &ShardStore) {
        let verified = store.verify().unwrap();
        assert!(
            verified.problems.is_empty(),
            "seed {}: the store is not sound: {:?}",
            self.seed,
            verified.problems
        );
        let rows = store.rows().unwrap();
        let dead: HashSet<RowId> = rows
            .iter()
            .filter(|r| r.record.status == RowStatus::Dead)
            .map(|r| r.row)
            .collect();
        assert_eq!(
            rows.len(),
            dead.len(),
            "seed {}: only dead rows remain",
            self.seed
        );
        for (&seq, sinks) in &self.acked {
            for &sink_index in sinks {
                let row = RowId { seq, sink_index };
                assert!(
                    self.delivered.contains(&row)
                        || dead.contains(&row)
                        || self.expired.contains(&row),
                    "seed {}: acknowledged row {row:?} was neither delivered nor dead-lettered",
                    self.seed
                );
            }
        }
    }
}

/// What a lowered limit found claimed and running: it drops nothing, so
/// the rows claimed and calls running may stay over it, but never rise,
/// until they fit under it.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Excess {
    rows: u64,
    calls: u64,
}

impl Excess {
    /// What is claimed and running as a limit is lowered.
    pub(super) fn of(rows: u64, calls: u64) -> Excess {
        Excess { rows, calls }
    }

    /// Whether `(rows, calls)` claimed and running keep to the limits
    /// `(max_rows, max_calls)` or to what the lowering found; what may
    /// stay over them then shrinks to `(rows, calls)`.
    fn allows(&mut self, (rows, calls): (u64, u64), (max_rows, max_calls): (u64, u64)) -> bool {
        let kept = rows <= max_rows.max(self.rows) && calls <= max_calls.max(self.calls);
        self.rows = self.rows.min(rows);
        self.calls = self.calls.min(calls);
        kept
    }
}

/// Takes one `item` out of `items`; whether there was one.
fn take_one<T: PartialEq>(items: &mut Vec<T>, item: &T) -> bool {
    let found = items.iter().position(|each| each == item);
    found.map(|at| items.swap_remove(at)).is_some()
}

/// The outcomes of a shard's sink keys, summed.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct SinkSums {
    delivered: u64,
    retried: u64,
    timed_out: u64,
    dead: u64,
}

impl SinkSums {
    pub(super) fn of(shard: &ShardState) -> SinkSums {
        let mut sums = SinkSums::default();
        for s in shard.core().sink_stats() {
            let o = &s.outcomes;
            sums.add(SinkSums {
                delivered: o.delivered,
                retried: o.retried,
                timed_out: o.timed_out,
                dead: o.dead,
            });
        }
        sums
    }

    pub(super) fn add(&mut self, other: SinkSums) {
        self.delivered += other.delivered;
        self.retried += other.retried;
        self.timed_out += other.timed_out;
        self.dead += other.dead;
    }

    /// What `self` counts beyond `fewer`, a count of some of its keys.
    pub(super) fn less(self, fewer: SinkSums) -> SinkSums {
        SinkSums {
            delivered: self.delivered - fewer.delivered,
            retried: self.retried - fewer.retried,
            timed_out: self.timed_out - fewer.timed_out,
            dead: self.dead - fewer.dead,
        }
    }
}
