//! Rows set aside rather than started: a key's queue taken off it (parked
//! behind an open breaker, held for a paused sink, or written back due for
//! a later scan), and a parked row's due time, within its retry horizon.

use super::*;

impl Core {
    /// Sets every queued row of `key` aside as `admit` says (parked until
    /// the breaker's period ends, or held while its sink is paused) and
    /// takes the key out of the round robin.
    pub(super) fn park_queue(&mut self, now_ms: u64, key: &SinkKey, admit: Admit) {
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
        self.end_rate_wait(key);
        let tenant = self
            .tenants
            .get_mut(&key.tenant)
            .expect("a queued key has a tenant");
        tenant.key_ring.remove(key);
        if tenant.key_ring.is_empty() {
            self.tenant_ring.remove(&key.tenant);
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
    pub(super) fn queued_keys(&self, which: impl Fn(&SinkKey) -> bool) -> Vec<SinkKey> {
        let queued = self.keys.iter().filter(|(_, k)| !k.queue.is_empty());
        queued
            .map(|(key, _)| key)
            .filter(|key| which(key))
            .cloned()
            .collect()
    }

    /// Writes the rows queued on `keys` back due as they were claimed, for
    /// a later scan to claim again.
    pub(super) fn unqueue(&mut self, keys: Vec<SinkKey>) {
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
    pub(super) fn set_aside(
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
            Admit::Hold => self.hold(row, fields, PAUSED_ERROR),
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
}
