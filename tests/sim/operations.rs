//! What the simulated operator and node do at seeded times: reloads (of
//! the concurrency, the retry policy, tenants' windows and the breakers,
//! and of the sources and sinks, see `sink_changes`), new shares of the
//! global windows, wakes, replays, a source's dead-letter sweep,
//! dead-letter expiry and shard restarts.

use super::*;

impl Sim {
    /// Wakes one sink that is not paused at seeded times, half of them all
    /// at once (checked by `wake_at_once`), half one step of a seeded size
    /// an iteration, between the shard's steps, as a node runs it.
    fn wake_sink(&mut self, shard: &mut ShardState) {
        if let Some((key, after)) = self.sink_wake.take() {
            self.step_wake(shard, key, Some(after));
            return;
        }
        if self.wake_rng.below(500) != 0 {
            return;
        }
        let sources = &self.config.sources;
        let source = &sources[self.wake_rng.below(sources.len() as u64) as usize];
        let sink_index = self.wake_rng.below(source.sinks.len() as u64) as u16;
        let sink = &source.sinks[usize::from(sink_index)];
        if sink.paused {
            return;
        }
        let key = SinkKey {
            tenant: source.tenant.as_str().into(),
            source_id: source.id.as_str().into(),
            sink_index,
            sink_type: sink.kind.as_str().into(),
        };
        if self.wake_rng.below(2) == 0 {
            self.wake_at_once(shard, key);
        } else {
            self.step_wake(shard, key, None);
        }
    }

    /// One step of a wake of `key`, from `after` (the first when `None`);
    /// the next goes on at the next iteration.
    fn step_wake(&mut self, shard: &mut ShardState, key: SinkKey, after: Option<DueEntry>) -> u64 {
        let max_entries = 1 + self.wake_rng.below(16) as usize;
        let step = shard
            .wake_sink(self.now_ms, &key, after, max_entries)
            .unwrap();
        self.sink_wake = step.next.map(|next| (key, next));
        step.woken
    }

    /// A wake of `key`, all its steps at once: exactly its rows that
    /// waited out a backoff or an open breaker (not claimed) are woken, due
    /// now, and its breaker closes (reported as any close, which
    /// `check_breakers` holds to account). The rows of its sink's hooks
    /// committed before its source moved to another tenant keep their
    /// own tenant's key, which the wake does not reach.
    fn wake_at_once(&mut self, shard: &mut ShardState, key: SinkKey) {
        let (seed, now_ms, sink_index) = (self.seed, self.now_ms, key.sink_index);
        let catalog = self.catalog.clone();
        let waiting = |shard: &mut ShardState| -> HashSet<RowId> {
            shard.flush().unwrap();
            let store = shard.store();
            // A row behind its lane's head waits for the head, not for a
            // due time (see `core::sink_wake`).
            let in_lane = |r: &RowView| {
                let status = store.hook_status(0, &r.hook_id).unwrap().unwrap();
                (status.sinks.iter()).any(|s| {
                    s.sink_index == r.row.sink_index && matches!(s.state, SinkState::InLane(_))
                })
            };
            (store.rows().unwrap().into_iter())
                .filter(|r| {
                    let (index, places) = (r.row.sink_index, r.sink_places.as_deref());
                    let bound = catalog.bind(&r.source_id, index, &r.record.sink_type, places);
                    r.record.status == RowStatus::Pending
                        && !r.in_flight
                        && (now_ms + 1..HELD_DUE_MS).contains(&r.record.at_ms)
                        && r.source_id == *key.source_id
                        && r.tenant == key.tenant
                        && bound == Binding::Bound { sink_index }
                        && !in_lane(r)
                })
                .map(|r| r.row)
                .collect()
        };
        let before = waiting(shard);
        let mut woken = self.step_wake(shard, key.clone(), None);
        while let Some((key, after)) = self.sink_wake.take() {
            woken += self.step_wake(shard, key, Some(after));
        }
        let left = waiting(shard);
        assert!(
            left.is_empty(),
            "seed {seed}: a wake of {key:?} at {now_ms} left rows waiting: {left:?}"
        );
        assert_eq!(
            woken,
            before.len() as u64,
            "seed {seed}: a wake of {key:?} at {now_ms} woke {woken} rows of {before:?}"
        );
    }

    /// Changes `dispatch` and `[retry]` as a reload does, at seeded times
    /// or while the process is down: the sink concurrency; half the time
    /// the retry policy (the checkers hold each row to the policy in force
    /// when it starts); a third of the time a tenant's window; a third of
    /// the time the breakers, off or on again. `running` is what the
    /// tenants have claimed and running.
    fn change_dispatch(&mut self, running: &[TenantStats]) {
        self.dispatch.sink_concurrency =
            1 + self.rng.below(u64::from(self.dispatch.concurrency)) as u32;
        if self.retry_rng.below(2) == 0 {
            self.retry.max_attempts = 1 + self.retry_rng.below(9) as u32;
            self.retry.max_elapsed_ms = 1_000 + self.retry_rng.below(80_000);
        }
        if self.window_rng.below(3) == 0 {
            self.widen_or_narrow_window(running);
        }
        if self.breaker_rng.below(3) == 0 {
            let on = self.dispatch.breaker_failures == 0;
            self.dispatch.breaker_failures = if on { self.breaker_failures } else { 0 };
            self.parked_check_due = !on;
        }
    }

    /// At crashes, changes made while the process is down, as an operator
    /// restarts a node with a new config: the next life opens with them.
    /// Half the time one of the sources and sinks, a third of the time the
    /// dispatch limits (see `change_dispatch`).
    pub(super) fn change_while_down(&mut self) {
        if self.down_rng.below(2) == 0 {
            let all = SinkChange::ALL;
            let change = all[self.down_rng.below(all.len() as u64) as usize];
            if self.change_sinks(change) {
                self.catalog = catalog_of(&self.config, self.batch_max_entries);
            }
        }
        if self.down_rng.below(3) == 0 {
            self.change_dispatch(&[]);
        }
    }

    /// Widens a seeded tenant's window (if it has one of its own), or
    /// half the time narrows its window and concurrency to small ones,
    /// noting what the tenant has claimed and running (in `running`),
    /// which may stay over them.
    fn widen_or_narrow_window(&mut self, running: &[TenantStats]) {
        let tenant = TENANTS[self.window_rng.below(TENANTS.len() as u64) as usize];
        let limits = self.dispatch.tenants.entry(tenant.into()).or_default();
        limits.max_inflight = limits
            .max_inflight
            .map(|rows| rows + 1 + self.window_rng.below(4) as u32);
        if self.window_rng.below(2) == 0 {
            return;
        }
        limits.max_inflight = Some(1 + self.window_rng.below(6) as u32);
        limits.concurrency = Some(1 + self.window_rng.below(4) as u32);
        let now = running.iter().find(|t| &*t.tenant == tenant);
        let excess = now.map_or_else(Excess::default, |t| Excess::of(t.claimed_rows, t.running));
        self.over_tenant_windows.insert(tenant.into(), excess);
    }

    /// Grants the shard a new share of the global windows at seeded
    /// times, as the coordinator does when tenants come and go on other
    /// shards: up or down.
    fn regrant(&mut self, shard: &mut ShardState) {
        if self.grant_rng.below(300) != 0 {
            return;
        }
        self.grant.max_inflight = 1 + self.grant_rng.below(64);
        self.grant.concurrency = 1 + self.grant_rng.below(u64::from(self.dispatch.concurrency));
        let stats = shard.core().stats();
        self.over_grant = Excess::of(stats.claimed.rows, stats.calls);
        shard.handle_grant(self.grant);
    }

    /// The catalog of `config` as it now stands, given to the shard.
    pub(super) fn reconfigure_sinks(&mut self, shard: &mut ShardState) {
        let previous = std::mem::replace(
            &mut self.catalog,
            catalog_of(&self.config, self.batch_max_entries),
        );
        // As the engine does: what changed, noted once; or not, as when
        // two reloads race (the shard then looks at every key).
        if self.note_rng.below(2) == 0 {
            self.catalog.note_changes_from(&previous);
        }
        // A sink's call starts go with it to the index the reload moved it
        // to (by its spot): its key there spaces them; where its rate changed,
        // its next call comes one new interval after its last (the calls
        // before were spaced at the old one).
        let catalog = &self.catalog;
        let starts = std::mem::take(&mut self.call_starts);
        for (key, mut starts) in starts {
            let Some(to) = catalog.key_moved_from(&previous, &key) else {
                continue;
            };
            let then_us = previous.call_interval_us(&key.source_id, key.sink_index);
            if catalog.call_interval_us(&to.source_id, to.sink_index) != then_us {
                starts.drain(..starts.len().saturating_sub(1));
            }
            self.call_starts.insert(to, starts);
        }
        // So do its calls running: they count against its concurrency at
        // its new index; those of a sink gone count against none.
        for run in self.running.values_mut() {
            if let Some(key) = &run.key {
                run.key = catalog.key_moved_from(&previous, key);
            }
        }
        self.reconfigure(shard, &previous);
    }

    /// Reloads the config into the shard (its sinks' catalog, `previous`
    /// before), counting the outcomes of the keys it forgets (those of
    /// sinks gone), and checks where the open breakers went.
    fn reconfigure(&mut self, shard: &mut ShardState, previous: &Catalog) {
        let before = SinkSums::of(shard);
        let open_before = shard.core().open_breaker_keys();
        shard.handle_reconfigure(
            self.now_ms,
            self.dispatch.clone(),
            self.retry,
            self.catalog.clone(),
        );
        self.forgotten.add(before.less(SinkSums::of(shard)));
        self.check_breakers_carried(previous, open_before, shard);
    }

    /// Seeded operator actions: a reconfiguration, deleting a source's
    /// backlog, a replay step (dead rows due again now), or a sweep of
    /// dead rows past their retention.
    pub(super) fn operate(&mut self, shard: &mut ShardState) {
        if self.rng.below(500) == 0 {
            let max_rows = 1 + self.rng.below(20);
            self.replay_step(shard, max_rows);
        }
        if self.rng.below(300) == 0 {
            self.change_dispatch(&shard.core().tenant_stats());
            let same = self.catalog.clone();
            self.reconfigure(shard, &same);
        }
        self.reload_sink_changes(shard);
        self.regrant(shard);
        self.wake_sink(shard);
        if self.rng.below(1_500) == 0 && self.source_sweep.is_none() {
            self.source_sweep = Some(SourceSweep::default());
        }
        self.step_source_sweep(shard);
        self.sweep_when_due(shard);
        // A shard restart inside a live process (after a panic or a store
        // failure): the core is rebuilt from the store while its attempts
        // still run in the IO pool and report later.
        if self.rng.below(700) == 0 {
            shard.restart(self.now_ms);
            self.take_back_breakers(shard);
        }
    }

    /// A replay step (dead rows due again now) of at most `max_rows`, its
    /// filter seeded: every row, a sink index's, some kinds of reason's,
    /// or both. Half the time it runs as a shard runs it, in the iteration's
    /// open transaction; half the time after a flush, and checked: it moves
    /// only rows that match, and, when it says it is done having moved
    /// fewer than it may, every row that did.
    fn replay_step(&mut self, shard: &mut ShardState, max_rows: u64) {
        let seed = self.seed;
        let sink_index = (self.replay_rng.below(3) == 0).then(|| self.replay_rng.below(2) as u16);
        let reason = (self.replay_rng.below(3) == 0).then(|| {
            let some = DeadReasonKind::ALL
                .into_iter()
                .filter(|_| self.replay_rng.below(3) == 0);
            let mut names: Vec<&str> = some.map(DeadReasonKind::name).collect();
            names.extend(names.is_empty().then_some("max_attempts"));
            names.join(",").parse::<ReasonKinds>().unwrap()
        });
        let step = ReviveStep {
            replay: Arc::from(format!("r{}", self.now_ms)),
            filter: DeadFilter {
                sink_index,
                reason,
                ..DeadFilter::default()
            },
            cursor: None,
            max_rows,
        };
        if self.replay_rng.below(2) == 0 {
            shard.revive(self.now_ms, &step).unwrap();
            return;
        }
        shard.flush().unwrap();
        let matches = |r: &goad::store::RowView| {
            let error = r.record.error.as_deref().unwrap_or_default();
            let kind = DeadReasonKind::of(error, &r.record.sink_type);
            sink_index.is_none_or(|i| i == r.row.sink_index)
                && reason.is_none_or(|ks| kind.is_some_and(|k| ks.contains(k)))
        };
        let dead: Vec<goad::store::RowView> = (shard.store().rows().unwrap().into_iter())
            .filter(|r| r.record.status == RowStatus::Dead)
            .collect();
        let revived = shard.revive(self.now_ms, &step).unwrap();
        let still_dead: HashSet<RowId> = (shard.store().rows().unwrap().iter())
            .filter(|r| r.record.status == RowStatus::Dead)
            .map(|r| r.row)
            .collect();
        let moved: Vec<&goad::store::RowView> = dead
            .iter()
            .filter(|r| !still_dead.contains(&r.row))
            .collect();
        assert_eq!(moved.len() as u64, revived.moved, "seed {seed}: rows moved");
        for r in &moved {
            assert!(
                matches(r),
                "seed {seed}: replay of sink {sink_index:?}, reason {reason:?} moved row {:?} ({:?})",
                r.row,
                r.record.error
            );
        }
        if revived.exhausted && revived.moved < max_rows {
            let matching = dead.iter().filter(|r| matches(r)).count() as u64;
            assert_eq!(
                revived.moved, matching,
                "seed {seed}: every matching row moved"
            );
        }
    }

    /// One step of the sweep of s1's backlog under way, if one is.
    fn step_source_sweep(&mut self, shard: &mut ShardState) {
        let Some(from) = self.source_sweep.take() else {
            return;
        };
        let max_entries = 1 + self.sweep_rng.below(16) as usize;
        let step = shard
            .dead_letter_source(self.now_ms, "s1", &from, max_entries)
            .unwrap();
        self.check_source_gone_events(&shard.take_outcome_events(), step.dead);
        self.source_sweep = step.next;
    }

    /// Sweeps at seeded times, each within one retention of the last (a
    /// shard's expiry sweeps every half retention).
    pub(super) fn sweep_when_due(&mut self, shard: &mut ShardState) {
        let Some(retention_ms) = self.retention_ms else {
            return;
        };
        if self.now_ms >= self.next_sweep_at_ms {
            self.expire(shard);
            self.next_sweep_at_ms = self.now_ms + 1 + self.expiry_rng.below(retention_ms);
        }
    }

    /// A sweep of dead rows past the retention, in seeded steps, as a
    /// shard's expiry runs it: the rows dead at or before the cutoff go
    /// (each hook with its last row, which the end-of-run verify checks),
    /// all of them, and nothing else but rows the sweep's write settled as
    /// delivered.
    fn expire(&mut self, shard: &mut ShardState) {
        let seed = self.seed;
        let retention_ms = self.retention_ms.expect("expiry is on");
        let until_ms = self.now_ms.saturating_sub(retention_ms);
        shard.flush().unwrap();
        let before = shard.store().rows().unwrap();
        let mut step = PurgeStep {
            filter: DeadFilter {
                until_ms,
                ..DeadFilter::default()
            },
            cursor: None,
            max_rows: 1 + self.expiry_rng.below(50),
        };
        loop {
            let purged = shard.purge(self.now_ms, &step).unwrap();
            if purged.exhausted {
                break;
            }
            step.cursor = purged.cursor;
        }
        let after: HashSet<RowId> = shard
            .store()
            .rows()
            .unwrap()
            .iter()
            .map(|r| r.row)
            .collect();
        for r in before {
            let past = r.record.status == RowStatus::Dead && r.record.at_ms <= until_ms;
            let gone = !after.contains(&r.row);
            assert!(
                past == gone || (gone && self.delivered.contains(&r.row)),
                "seed {seed}: row {:?} ({:?} at {}) {} by a sweep of rows dead until {until_ms}",
                r.row,
                r.record.status,
                r.record.at_ms,
                if gone { "deleted" } else { "kept" }
            );
            if past {
                self.expired.insert(r.row);
            }
        }
    }
}
