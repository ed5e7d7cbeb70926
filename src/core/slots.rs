//! Call slots: claimed rows wait in one FIFO per sink key, and slots go
//! round robin across tenants first, then across each tenant's keys, so one
//! source's backlog cannot queue ahead of every other source's. A call needs
//! room under the shard's concurrency, the tenant's concurrency and the
//! key's `dispatch.sink_concurrency`.
//!
//! A call is one attempt, or for a batching sink a batch of up to its
//! `batch_max_entries` attempts of one key, sent in one request. A batch
//! takes one slot, as one request holds one IO worker: counting its
//! attempts would cap a batch at `sink_concurrency` entries (8, not the 10
//! of an SQS batch). Its attempts are bounded by the claimed-row windows
//! instead, and each is still its own: its own deadline, its own outcome,
//! its own move of the key's breaker. Batches form by themselves: while
//! a key's calls are all running its rows queue, and the next free slot
//! takes up to a batch of them.
//!
//! A key of a sink with `max_calls_per_s` also waits for its turn: calls
//! start one interval (1 s / the rate, in µs) apart, by the core's clock
//! in ms. A key keeps the time its next call may start (`next_call_us`);
//! it may start one within the current millisecond, which then moves that
//! time to one interval after the later of itself and now. So calls
//! k and k + n of a key start more than n intervals less 1 ms apart; an
//! idle key's next call starts at once (no burst is saved up). A reload
//! carries a sink's next call to the index it moves the sink to, one new
//! interval after its last call where it changes the rate
//! (`carry`). A process restart forgets the times; a shard
//! rebuilt inside the process keeps them.
//!
//! A freed slot goes first to a tenant running fewer calls than its share
//! of the shard's concurrency (divided among the tenants with rows
//! claimed), then, if none of those has a call to start, to any — but,
//! while tenants share them, the last eighth of the slots only to a tenant
//! under its share counting one tenant more, so one that comes finds a
//! slot free. Slots go round robin
//! by starts: without the shares, tenants whose receivers take 200 ms a
//! call would end up holding every slot another tenant's 1 ms calls free
//! (measured: four such tenants held all 32, and another tenant's hooks
//! waited 18 s at the median).
//!
//! A key with a free slot that waits for its turn leaves its tenant's
//! ring until the turn comes (and a tenant whose keys all wait leaves the
//! tenants' ring), so a pass looking for the next call walks only tenants
//! and keys that may start one or that are at a cap — and those run calls,
//! so there are no more of them than calls running. Walked, a thousand
//! tenants whose sinks take a call a second (Slack's incoming webhooks)
//! and have backlogs would slow every pass, and with them the shard's
//! commits and every other tenant's deliveries (measured: to a quarter;
//! docs/performance.md).

use super::*;

/// One slot in this many of the shard's is kept for a tenant that runs
/// fewer calls than its share (see the module docs).
const SLOTS_KEPT_PER: u64 = 8;

impl Core {
    /// Queues a claimed row on its key.
    pub(super) fn enqueue(&mut self, row: RowId, key: SinkKey) {
        let queue = &mut self.key_mut(&key).queue;
        queue.push_back(row);
        if queue.len() == 1 {
            self.ring_key(key);
        }
    }

    /// Puts `key`, which has rows queued, at the back of its tenant's ring,
    /// and the tenant in the tenants' ring if it was not.
    fn ring_key(&mut self, key: SinkKey) {
        let tenant = self.tenant_mut(&key.tenant);
        tenant.key_ring.push_back(key.clone());
        if tenant.key_ring.len() == 1 {
            self.tenant_ring.push_back(key.tenant);
        }
    }

    /// Rings again the keys whose turn came by `now_ms`.
    pub(super) fn end_rate_waits(&mut self, now_ms: u64) {
        while self
            .rate_waits
            .first()
            .is_some_and(|(turn_ms, _)| *turn_ms <= now_ms)
        {
            let (_, key) = self.rate_waits.pop_first().expect("a first wait");
            let state = self.keys.get_mut(&key).expect("a waiting key has state");
            state.rate_wait_ms = None;
            self.ring_key(key);
        }
    }

    /// Takes `key` out of the rate waits, if it waits (its queue was taken).
    pub(super) fn end_rate_wait(&mut self, key: &SinkKey) {
        let state = self.keys.get_mut(key);
        if let Some(turn_ms) = state.and_then(|state| state.rate_wait_ms.take()) {
            let removed = self.rate_waits.remove(&(turn_ms, key.clone()));
            assert!(removed, "{key:?} waits for its turn at {turn_ms} ms");
        }
    }

    /// The next call to start now, if a queued row has a free slot: one
    /// attempt, or for a key of a batching sink up to its batch of them (a
    /// breaker's probe goes alone). A call takes one slot whatever its size.
    #[must_use]
    pub fn poll_call(&mut self, now_ms: u64) -> Option<Call> {
        self.end_rate_waits(now_ms);
        if self.calls_count >= self.grant.concurrency {
            return None;
        }
        // With few slots free and tenants sharing them, a share is kept for
        // a tenant to come: its first call starts at once rather than after
        // a slow one ends.
        let claiming = self.due.claiming() as u64;
        let free = self.grant.concurrency - self.calls_count;
        let scarce = claiming > 1 && free <= self.grant.concurrency / SLOTS_KEPT_PER;
        let tenants = claiming + u64::from(scarce);
        let share = self.grant.concurrency.div_ceil(tenants.max(1));
        let call = self.next_call(now_ms, share);
        match call {
            None if !scarce => self.next_call(now_ms, u64::MAX),
            call => call,
        }
    }

    /// The calls the shard's tenants could run now: those running, and
    /// those their queued rows could start (a key's up to
    /// `dispatch.sink_concurrency`, a tenant's up to its concurrency; a key
    /// waiting for its rate's turn, none more). The coordinator gives a
    /// shard no more of the node's concurrency than this (and one more)
    /// while another shard's tenants could run more.
    ///
    /// Counted up to the node's concurrency, which no shard is granted
    /// more of: the count stops there, and so does the walk. A shard
    /// reports its demand after most iterations while its tenants come and
    /// go, and walking every tenant with rows queued each time halved the
    /// deliveries of a backlog spread over 10,000 tenants (measured:
    /// docs/performance.md). Each tenant or key the walk visits either adds
    /// to the count or is at a cap, so runs a call: it visits no more than
    /// the node's concurrency and the calls running of each.
    pub fn wanted_calls(&self) -> u64 {
        let most = u64::from(self.dispatch.concurrency);
        let sink_concurrency = u64::from(self.dispatch.sink_concurrency);
        let mut wanted = self.calls_count;
        for tenant_id in self.tenant_ring.iter() {
            if wanted >= most {
                break;
            }
            let tenant = &self.tenants[tenant_id];
            let room = u64::from(tenant.limits.concurrency).saturating_sub(tenant.calls);
            let mut startable = 0;
            for key in tenant.key_ring.iter() {
                if startable >= room {
                    break;
                }
                let state = &self.keys[key];
                let free = sink_concurrency.saturating_sub(state.calls);
                startable += free.min(state.queue.len() as u64);
            }
            wanted += startable.min(room);
        }
        wanted.min(most)
    }

    /// Whether the shard's share of the concurrency keeps calls from
    /// starting (all of it runs while a tenant has rows queued) although
    /// the coordinator was told the tenants wanted fewer calls than that
    /// share (`told_wanted`): it is to be told again.
    pub fn short_of_calls(&self, told_wanted: u64) -> bool {
        let share = self.grant.concurrency;
        self.calls_count >= share && told_wanted < share && !self.tenant_ring.is_empty()
    }

    /// The next call of a tenant running fewer than `max_calls` calls, in
    /// round-robin order.
    fn next_call(&mut self, now_ms: u64, max_calls: u64) -> Option<Call> {
        for _ in 0..self.tenant_ring.len() {
            let tenant_id = self.tenant_ring.pop_front().expect("counted");
            let Some(key) = self.key_with_room(now_ms, &tenant_id, max_calls) else {
                if !self.tenants[&tenant_id].key_ring.is_empty() {
                    self.tenant_ring.push_back(tenant_id);
                }
                continue;
            };
            let probe = match self.admit(now_ms, &key) {
                Admit::Pass { probe } => probe,
                admit => {
                    // The key is out of the ring already; its rows wait out
                    // the breaker, or the pause.
                    self.park_queue(now_ms, &key, admit);
                    if !self.tenants[&tenant_id].key_ring.is_empty() {
                        self.tenant_ring.push_back(tenant_id);
                    }
                    continue;
                }
            };
            let batch_max = self
                .catalog
                .batch_max_entries(&key.source_id, key.sink_index);
            let max_rows = match batch_max {
                Some(max) if !probe => usize::from(max.get()),
                _ => 1,
            };
            let rows = self.take_queued(now_ms, tenant_id, &key, max_rows);
            if rows.is_empty() {
                continue;
            }
            self.take_slot(&key, false);
            self.take_turn(now_ms, &key);
            let call = match batch_max {
                None => Call::One(self.start(now_ms, rows[0], None)),
                Some(_) => {
                    let batch = JobId(self.next_job_id);
                    self.batches.insert(batch, rows.len() as u16);
                    let jobs = rows
                        .into_iter()
                        .map(|row| self.start(now_ms, row, Some(batch)))
                        .collect();
                    Call::Batch(jobs)
                }
            };
            if probe {
                let job = &call.jobs()[0];
                self.breakers
                    .get_mut(&job.key)
                    .expect("a probe's breaker is half-open")
                    .probe_started(job.id);
            }
            return Some(call);
        }
        None
    }

    /// The tenant's next key in ring order with a free slot (and its turn,
    /// for a sink with a rate), taken out of the ring; `None` when the
    /// tenant is at its concurrency (or runs `max_calls`) or none of its
    /// keys has room. A key
    /// with a slot that waits for its turn leaves the ring for the rate
    /// waits.
    fn key_with_room(
        &mut self,
        now_ms: u64,
        tenant_id: &TenantId,
        max_calls: u64,
    ) -> Option<SinkKey> {
        let sink_concurrency = u64::from(self.dispatch.sink_concurrency);
        let tenant = self
            .tenants
            .get_mut(tenant_id)
            .expect("a ring tenant has state");
        if tenant.calls >= u64::from(tenant.limits.concurrency).min(max_calls) {
            return None;
        }
        for _ in 0..tenant.key_ring.len() {
            let key = tenant.key_ring.pop_front().expect("counted");
            let state = self.keys.get_mut(&key).expect("a ring key has state");
            // A key whose breaker's probe runs has no room: its queued
            // rows start, or park, once the probe's answer moved it.
            let probing =
                !self.breakers.is_empty() && self.breakers.get(&key).is_some_and(Breaker::probing);
            if state.calls < sink_concurrency && !probing {
                let limited = self
                    .catalog
                    .call_interval_us(&key.source_id, key.sink_index)
                    .is_some();
                if !limited || state.next_call_us < (now_ms + 1) * 1_000 {
                    return Some(key);
                }
                let turn_ms = state.next_call_us / 1_000;
                state.rate_wait_ms = Some(turn_ms);
                self.rate_waits.insert((turn_ms, key));
                continue;
            }
            tenant.key_ring.push_back(key);
        }
        None
    }

    /// A call of `key` starts now: for a sink with a rate, the key's next
    /// call waits one interval after the later of its turn and now.
    fn take_turn(&mut self, now_ms: u64, key: &SinkKey) {
        let interval_us = self
            .catalog
            .call_interval_us(&key.source_id, key.sink_index);
        if let Some(interval_us) = interval_us {
            let state = self.keys.get_mut(key).expect("a starting key has state");
            state.next_call_us = state.next_call_us.max(now_ms * 1_000) + interval_us;
        }
    }

    /// Takes up to `max_rows` rows queued on `key` to start them, and puts
    /// the key and the tenant back in their rings while they have rows
    /// queued. A row past its retry horizon is dead-lettered instead:
    /// nothing is retried past its horizon, however long it queued.
    fn take_queued(
        &mut self,
        now_ms: u64,
        tenant_id: TenantId,
        key: &SinkKey,
        max_rows: usize,
    ) -> Vec<RowId> {
        let mut rows = Vec::new();
        let mut past_horizon = Vec::new();
        let retry = self.retry_for(key);
        let key_state = self.keys.get_mut(key).expect("a ring key has state");
        while rows.len() < max_rows {
            let Some(row) = key_state.queue.pop_front() else {
                break;
            };
            let first_attempt_at_ms = self.claims[&row].fields.first_attempt_at_ms;
            if first_attempt_at_ms != 0 && now_ms >= retry.horizon_ms(first_attempt_at_ms) {
                past_horizon.push(row);
            } else {
                rows.push(row);
            }
        }
        let tenant = self
            .tenants
            .get_mut(&tenant_id)
            .expect("a ring tenant has state");
        if !key_state.queue.is_empty() {
            tenant.key_ring.push_back(key.clone());
        }
        self.key_wakes.started(key);
        if !tenant.key_ring.is_empty() {
            self.tenant_ring.push_back(tenant_id);
        }
        for row in past_horizon {
            let claim = self.claims.remove(&row).expect("a queued row has a claim");
            self.release(&claim);
            let reason = DeadReason::RetryHorizon {
                sink_type: claim.fields.sink_type.clone(),
            };
            self.sink_dead(now_ms, key, &claim.hook, row, claim.fields, reason);
        }
        rows
    }

    /// Counts `job`, an attempt of `row`, as running until
    /// `deadline_at_ms`, when its timer fails it.
    pub(super) fn track_running(
        &mut self,
        job: JobId,
        row: RowId,
        deadline_at_ms: u64,
        batch: Option<JobId>,
    ) {
        let timer = self.wheel.insert(deadline_at_ms, job);
        let running = Running {
            row,
            timer,
            deadline_at_ms,
            timeout_ms: self.dispatch.attempt_timeout_ms,
            batch,
        };
        let previous = self.running.insert(job, running);
        assert!(previous.is_none(), "{job:?} runs twice");
        self.running_count += 1;
    }

    fn start(&mut self, now_ms: u64, row: RowId, batch: Option<JobId>) -> Job {
        let id = JobId(self.next_job_id);
        self.next_job_id += 1;
        let deadline_at_ms = now_ms + self.dispatch.attempt_timeout_ms;
        self.track_running(id, row, deadline_at_ms, batch);
        let claim = self.claims.get_mut(&row).expect("a queued row has a claim");
        assert!(claim.running.is_none(), "row {row:?} started twice");
        claim.running = Some(id);
        if claim.fields.first_attempt_at_ms == 0 {
            claim.fields.first_attempt_at_ms = now_ms;
        }
        let lane = claim.fields.lane;
        let job = Job {
            id,
            row,
            key: claim.key.clone(),
            attempt: claim.fields.attempts + 1,
            hook: claim.hook.clone(),
            deadline_at_ms,
            replay: claim.fields.replay.clone(),
        };
        self.lane_starts(lane, id);
        job
    }

    /// A call of `key` starts: it takes a slot of the key (of a sink a
    /// reload took away from it, when `sink_gone`: see `carry`), its
    /// tenant and the shard.
    pub(super) fn take_slot(&mut self, key: &SinkKey, sink_gone: bool) {
        *self.key_mut(key).calls_of(sink_gone) += 1;
        self.tenant_mut(&key.tenant).calls += 1;
        self.calls_count += 1;
    }

    /// A call of `key` ended: its key's, tenant's and shard's slot is free.
    pub(super) fn free_slot(&mut self, key: &SinkKey, sink_gone: bool) {
        let state = self.keys.get_mut(key).expect("a running key");
        *state.calls_of(sink_gone) -= 1;
        self.tenant_mut(&key.tenant).calls -= 1;
        self.calls_count -= 1;
    }

    /// An attempt of `batch` (or of a call of its own) ended: whether its
    /// call did too.
    pub(super) fn call_ends(&mut self, batch: Option<JobId>) -> bool {
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

    /// A lane's running attempt starts: another row of the lane may not.
    pub(super) fn lane_starts(&mut self, lane: Option<LaneId>, job: JobId) {
        if let Some(lane) = lane {
            let previous = self.running_lanes.insert(lane, job);
            assert!(previous.is_none(), "lane {lane:?} runs two rows at once");
        }
    }

    /// When the attempt running in `lane` times out, if one runs.
    pub(super) fn lane_busy_until_ms(&self, lane: Option<LaneId>) -> Option<u64> {
        let job = self.running_lanes.get(&lane?)?;
        Some(self.running[job].deadline_at_ms)
    }
}
