//! Stragglers: attempts of the core this one was rebuilt from (after a
//! panic in the shard's loop or a failed store write) that still run in the
//! IO pool.
//!
//! A rebuilt core knows nothing of them, so it would claim their rows again
//! and start them beside the attempts still running, and could run a key
//! past its `sink_concurrency`. Instead the shell holds each straggler's row
//! in flight in the store and hands it to the new core
//! ([`Core::adopt_straggler`]), which takes the attempt on as its own: its
//! row claimed, counted against the windows and the shard's, tenant's and
//! key's concurrency (a batch once, as it was), timed out at its deadline,
//! and settled by its result like any other attempt's (a delivery deletes
//! the row, a failure retries or dead-letters it by the retry policy).

use super::*;

/// An attempt running now, as a rebuilt core takes it on.
#[derive(Debug, Clone)]
pub struct RunningAttempt {
    pub job: JobId,
    pub row: RowId,
    pub deadline_at_ms: u64,
    /// The batch the attempt is an entry of, if any (see `Running::batch`):
    /// a batch takes one slot in the new core as it did in the old.
    batch: Option<JobId>,
    /// The row's claim: its key, hook and fields as the old core had them.
    claim: Claim,
}

impl RunningAttempt {
    pub fn tenant(&self) -> &TenantId {
        &self.claim.key.tenant
    }
}

impl Core {
    /// Every attempt running now, for the core rebuilt after this one.
    pub fn running_attempts(&self) -> Vec<RunningAttempt> {
        self.running
            .iter()
            .map(|(job, run)| RunningAttempt {
                job: *job,
                row: run.row,
                deadline_at_ms: run.deadline_at_ms,
                batch: run.batch,
                claim: self.claims[&run.row].clone(),
            })
            .collect()
    }

    /// Takes on `attempt`, which a previous core started, as this core's
    /// own running attempt. The shell holds its row in flight in the store.
    pub fn adopt_straggler(&mut self, attempt: RunningAttempt) {
        let RunningAttempt {
            job,
            row,
            deadline_at_ms,
            batch,
            claim,
        } = attempt;
        assert_eq!(claim.running, Some(job), "a straggler's claim is its own");
        let new_call = match batch {
            Some(batch) => {
                let entries = self.batches.entry(batch).or_default();
                *entries += 1;
                *entries == 1
            }
            None => true,
        };
        if new_call {
            self.take_slot(&claim.key, claim.sink_gone);
        }
        self.lane_starts(claim.fields.lane, job);
        self.add_claim(row, claim);
        self.track_running(job, row, deadline_at_ms, batch);
    }
}
