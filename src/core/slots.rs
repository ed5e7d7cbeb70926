//! Attempt slots: claimed rows wait in one FIFO per sink key, and slots go
//! round robin across tenants first, then across each tenant's keys, so one
//! source's backlog cannot queue ahead of every other source's. A start needs
//! room under the shard's concurrency, the tenant's concurrency and the
//! key's `dispatch.sink_concurrency`.

use super::*;

impl Core {
    /// Queues a claimed row on its key.
    pub(super) fn enqueue(&mut self, row: RowId, key: SinkKey) {
        let queue = &mut self.keys.entry(key.clone()).or_default().queue;
        queue.push_back(row);
        if queue.len() > 1 {
            return;
        }
        let tenant = self.tenant_mut(&key.tenant);
        tenant.key_ring.push_back(key.clone());
        if tenant.key_ring.len() == 1 {
            self.tenant_ring.push_back(key.tenant);
        }
    }

    /// The next attempt to start now, if a queued row has a free slot.
    pub fn poll_job(&mut self, now_ms: u64) -> Option<Job> {
        if self.running() >= self.grant.concurrency {
            return None;
        }
        for _ in 0..self.tenant_ring.len() {
            let tenant_id = self.tenant_ring.pop_front().expect("counted");
            let Some(key) = self.key_with_room(&tenant_id) else {
                self.tenant_ring.push_back(tenant_id);
                continue;
            };
            let probe = match self.admit(now_ms, &key) {
                Admit::Pass { probe } => probe,
                Admit::Park { until_ms } => {
                    // The key is out of the ring already; its rows wait out the breaker.
                    self.park_queue(now_ms, &key, until_ms);
                    if !self.tenants[&tenant_id].key_ring.is_empty() {
                        self.tenant_ring.push_back(tenant_id);
                    }
                    continue;
                }
            };
            let Some(row) = self.take_queued(now_ms, tenant_id, key) else {
                continue;
            };
            let job = self.start(now_ms, row);
            if probe {
                self.breakers
                    .get_mut(&job.key)
                    .expect("a probe's breaker is half-open")
                    .probe_started(job.id);
            }
            return Some(job);
        }
        None
    }

    /// The tenant's next key in ring order with a free slot, taken out of
    /// the ring; `None` when the tenant is at its concurrency or none of
    /// its keys has room.
    fn key_with_room(&mut self, tenant_id: &TenantId) -> Option<SinkKey> {
        let sink_concurrency = u64::from(self.dispatch.sink_concurrency);
        let tenant = self
            .tenants
            .get_mut(tenant_id)
            .expect("a ring tenant has state");
        if tenant.running >= u64::from(tenant.limits.concurrency) {
            return None;
        }
        for _ in 0..tenant.key_ring.len() {
            let key = tenant.key_ring.pop_front().expect("counted");
            if self.keys[&key].running < sink_concurrency {
                return Some(key);
            }
            tenant.key_ring.push_back(key);
        }
        None
    }

    /// Takes the next row queued on `key` to start it, and puts the key
    /// and the tenant back in their rings while they have rows queued. A
    /// row past its retry horizon is dead-lettered instead (`None`):
    /// nothing is retried past its horizon, however long it queued.
    fn take_queued(&mut self, now_ms: u64, tenant_id: TenantId, key: SinkKey) -> Option<RowId> {
        let tenant = self
            .tenants
            .get_mut(&tenant_id)
            .expect("a ring tenant has state");
        let key_state = self.keys.get_mut(&key).expect("a ring key has state");
        let row = key_state
            .queue
            .pop_front()
            .expect("a ring key has queued rows");
        let first_attempt_at_ms = self.claims[&row].fields.first_attempt_at_ms;
        let past_horizon =
            first_attempt_at_ms != 0 && now_ms >= self.retry.horizon_ms(first_attempt_at_ms);
        if !past_horizon {
            key_state.running += 1;
            tenant.running += 1;
        }
        if !key_state.queue.is_empty() {
            tenant.key_ring.push_back(key);
        }
        if !tenant.key_ring.is_empty() {
            self.tenant_ring.push_back(tenant_id);
        }
        if !past_horizon {
            return Some(row);
        }
        let claim = self.claims.remove(&row).expect("a queued row has a claim");
        self.release(&claim);
        let reason = DeadReason::RetryHorizon {
            sink_type: claim.fields.sink_type.clone(),
        };
        self.dead(now_ms, row, claim.fields, reason);
        None
    }

    fn start(&mut self, now_ms: u64, row: RowId) -> Job {
        let id = JobId(self.next_job_id);
        self.next_job_id += 1;
        let deadline_at_ms = now_ms + self.dispatch.attempt_timeout_ms;
        let timer = self.wheel.insert(deadline_at_ms, id);
        self.running.insert(
            id,
            Running {
                row,
                timer,
                deadline_at_ms,
            },
        );
        self.running_count += 1;
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
}
