//! The simulated hooks and sinks: what a commit carries, how long a call
//! takes and what each of its attempts answers.

use super::*;

impl Sim {
    /// A hook for a seeded source; `None` when a reload removed it.
    pub(super) fn new_hook(&mut self) -> Option<NewRows> {
        let i = self.rng.below(TENANTS.len() as u64) as usize;
        let source = self.catalog.source(&format!("s{i}"))?.clone();
        self.next_hook += 1;
        let hook = Hook {
            id: format!("hook-{}", self.next_hook),
            seq: 0,
            tenant: source.tenant.clone(),
            source_id: Arc::from(format!("s{i}")),
            received_at_ms: self.now_ms,
            content_type: None,
            // Half the hooks of a source with a window carry one of 8 keys.
            dedupe_key: (source.dedupe_window_ms > 0 && self.dedupe_rng.below(2) == 0)
                .then(|| format!("e{}", self.dedupe_rng.below(8))),
            headers: vec![("k".into(), self.rng.below(3).to_string())],
            body: vec![0; 1 + self.rng.below(2_000) as usize],
        };
        let rows = NewRows::of(&source, hook);
        let places = rows.places.clone().expect("a commit's places");
        self.hook_places.insert(rows.hook.id.clone(), places);
        Some(rows)
    }

    /// How long a call to the sink takes; `None` when it hangs.
    pub(super) fn call_latency_ms(&mut self, sink_type: &str) -> Option<u64> {
        let m = self.sinks[sink_type];
        let latency_ms = 1 + self.rng.below(m.latency_ms + 1);
        let hangs = self.faults && self.rng.below(100) < m.hang_pct;
        (!hangs).then_some(latency_ms)
    }

    /// What the sink answers for one attempt of a call.
    pub(super) fn entry_result(&mut self, sink_type: &str) -> AttemptResult {
        let m = self.sinks[sink_type];
        let fail = |class, message: &str| {
            Err(AttemptFailure {
                class,
                message: message.into(),
            })
        };
        if !self.faults {
            return Ok(());
        }
        let roll = self.rng.below(100);
        let mut edge = m.permanent_pct;
        if roll < edge {
            // Worded as `SinkError` words a permanent error, which its
            // dead letters' kind of reason is read from.
            return fail(FailureClass::Permanent, "permanent: refused");
        }
        edge += m.retry_after_pct;
        if roll < edge {
            let after_ms = self.rng.below(3_000);
            return fail(FailureClass::RetryAfter { after_ms }, "later");
        }
        edge += m.transient_pct;
        if roll < edge {
            return fail(FailureClass::Transient, "transient");
        }
        Ok(())
    }
}
