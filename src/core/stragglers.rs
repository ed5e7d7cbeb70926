//! Stragglers: attempts of the core this one was rebuilt from (after a
//! panic in the shard's loop or a failed store write) that still run in the
//! IO pool.
//!
//! A rebuilt core knows nothing of them, so it would claim their rows again
//! and start them beside the attempts still running, and could run a key
//! past its `sink_concurrency`. Instead the shell holds each straggler's row
//! in flight in the store and hands it to the new core
//! ([`Core::adopt_straggler`]), which counts it as running against the
//! shard's, tenant's and key's concurrency until it reports or its deadline
//! passes. Then its row is written back due at once, with its attempts as
//! stored: the straggler's result belongs to the old core and is not used
//! (the row may be delivered again, as after a crash).

use super::*;

/// What a rebuilt core needs to know of an attempt its predecessor started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningAttempt {
    pub job: JobId,
    pub row: RowId,
    pub key: SinkKey,
    pub deadline_at_ms: u64,
}

/// An adopted straggler.
#[derive(Debug)]
pub(super) struct Straggler {
    attempt: RunningAttempt,
    /// The row as the store holds it, written back due when it reports.
    fields: RowFields,
    timer: TimerId,
}

impl Core {
    /// Every attempt running now, this core's own and those it adopted, for
    /// the core rebuilt after it.
    pub fn running_attempts(&self) -> Vec<RunningAttempt> {
        let own = self.running.iter().map(|(job, run)| RunningAttempt {
            job: *job,
            row: run.row,
            key: self.claims[&run.row].key.clone(),
            deadline_at_ms: run.deadline_at_ms,
        });
        let adopted = self.stragglers.values().map(|s| s.attempt.clone());
        own.chain(adopted).collect()
    }

    /// Counts `attempt`, which a previous core started, as running until it
    /// reports or its deadline passes. The shell holds its row (`fields`, as
    /// stored) in flight in the store meanwhile.
    pub fn adopt_straggler(&mut self, attempt: RunningAttempt, fields: RowFields) {
        let timer = self.wheel.insert(attempt.deadline_at_ms, attempt.job);
        self.tenant_mut(&attempt.key.tenant).running += 1;
        self.keys.entry(attempt.key.clone()).or_default().running += 1;
        let straggler = Straggler {
            attempt,
            fields,
            timer,
        };
        let previous = self.stragglers.insert(straggler.attempt.job, straggler);
        assert!(previous.is_none(), "a straggler adopted twice");
    }

    /// A straggler reported (its result is not used) or timed out (`timer`
    /// fired: its worker may be stuck); `false` if `job` is none.
    pub(super) fn handle_straggler(&mut self, now_ms: u64, job: JobId, timed_out: bool) -> bool {
        let Some(straggler) = self.stragglers.remove(&job) else {
            return false;
        };
        if timed_out {
            self.abandoned.push_back(job);
        } else {
            self.wheel.cancel(straggler.timer);
        }
        let Straggler {
            attempt: RunningAttempt { row, key, .. },
            fields,
            ..
        } = straggler;
        self.free_slot(&key);
        self.note_due(&key.tenant, now_ms);
        self.scan_requested = true;
        self.ops.push_back(StoreOp::Reschedule {
            row,
            fields,
            due_at_ms: now_ms,
            error: None,
        });
        true
    }
}
