//! An attempt's end: its outcome counted on its key, its slot and claim
//! freed, its breaker told, and its row delivered, rescheduled by its
//! sink's retry policy, or dead-lettered.

use super::*;

impl Core {
    /// Settles a claimed row that ran: the outcome becomes a store op, and
    /// counts in its key's outcomes with `took` (an attempt that timed out
    /// counts as taking its timeout). Returns whether the attempt's call
    /// ended with it (a batch ends with its last entry).
    pub(super) fn finish(
        &mut self,
        now_ms: u64,
        job: JobId,
        run: Running,
        result: AttemptResult,
        took: Duration,
    ) -> bool {
        let cut = self.cut_by_stall(&run, now_ms, &result);
        let claim = self
            .claims
            .remove(&run.row)
            .expect("a running attempt has a claim");
        self.count_outcome(now_ms, &claim, result.is_ok(), took);
        self.running_count -= 1;
        if let Some(lane) = claim.fields.lane {
            self.running_lanes.remove(&lane);
        }
        let call_ended = self.call_ends(run.batch);
        if call_ended {
            self.free_slot(&claim.key, claim.sink_gone);
        }
        self.release(&claim);
        let failure = result.as_ref().err().map(|f| f.class);
        // An attempt cut by a stall says nothing of its sink, and one of a
        // sink gone from its key nothing of the sink there now.
        if cut.is_some() || claim.sink_gone {
            self.excuse_breaker(&claim.key, job);
        } else if let Some(until_ms) = self.record_breaker(now_ms, &claim.key, job, failure) {
            self.park_queue(now_ms, &claim.key, Admit::Park { until_ms });
        }
        let attempt = claim.fields.attempts + 1;
        match result {
            Ok(()) => {
                self.observe(&claim.key, &claim.hook.id, attempt, now_ms, || {
                    Outcome::Delivered
                });
                self.stats.delivered += 1;
                self.ops.push_back(StoreOp::Delivered {
                    row: run.row,
                    replay: claim.fields.replay.clone(),
                    lane: claim.fields.lane,
                });
            }
            Err(failure) => match cut {
                Some(cut) => self.settle_failure(now_ms, run.row, claim, cut, true),
                None => self.settle_failure(now_ms, run.row, claim, failure, false),
            },
        }
        call_ended
    }

    /// Counts an attempt of `claim`'s key that took `took`: its duration
    /// and, when it delivered, when and how long after its hook's ingest
    /// (a replayed row's wait is not a delivery latency). The key's counts
    /// are of the attempts started at it; the call time that tells a slow
    /// sink (see `slow_keys`) is only of its sink's own.
    fn count_outcome(&mut self, now_ms: u64, claim: &Claim, delivered: bool, took: Duration) {
        if !claim.sink_gone {
            self.note_call_time(&claim.key, took.as_micros() as u64);
            self.trim_slow_queue(&claim.key);
        }
        let outcomes = &mut self
            .keys
            .get_mut(&claim.key)
            .expect("a running key")
            .outcomes;
        outcomes.durations.record(took);
        if delivered {
            outcomes.delivered += 1;
            outcomes.last_delivered_at_ms = Some(now_ms);
            if claim.fields.replay.is_none() {
                let waited_ms = now_ms.saturating_sub(claim.hook.received_at_ms);
                outcomes
                    .delivery_latency
                    .record(Duration::from_millis(waited_ms));
            }
        }
    }

    /// A failed attempt of `row`: recorded as its key's last failure, then
    /// the row is rescheduled by its sink's retry policy or dead-lettered.
    fn settle_failure(
        &mut self,
        now_ms: u64,
        row: RowId,
        claim: Claim,
        failure: AttemptFailure,
        at_once: bool,
    ) {
        let fields = RowFields {
            attempts: claim.fields.attempts + 1,
            ..claim.fields
        };
        let policy = self.retry_for(&claim.key);
        let decision = match at_once {
            true => policy.retry_at_once(now_ms, fields.first_attempt_at_ms),
            false => policy.decide(
                now_ms,
                fields.attempts,
                fields.first_attempt_at_ms,
                failure.class,
                &mut self.rng,
            ),
        };
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
                self.observe(&claim.key, &claim.hook.id, fields.attempts, now_ms, || {
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
                return;
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
    }

    /// The retry policy of `key`'s rows: `[retry]`, with the keys their
    /// sink sets in their place. Their sink is the one they bind to now: a
    /// reload may have moved it from the key's index, or removed it.
    pub(super) fn retry_for(&self, key: &SinkKey) -> RetryConfig {
        // The key's index is its sink's when its rows were bound.
        let bound = (self.catalog).bind(&key.source_id, key.sink_index, &key.sink_type, None);
        let own = bound
            .sink_index()
            .and_then(|sink_index| self.catalog.retry(&key.source_id, sink_index));
        own.map_or(self.retry, |own| own.over(self.retry))
    }
}
