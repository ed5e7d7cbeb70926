//! The calls an operator (or a host) makes into a shard between its
//! iterations: dead-lettering a source's backlog, waking a sink's rows, a
//! replay's and a purge's steps. Each writes in the shard's open write
//! transaction with the core's decisions and commits it, so what it
//! reports is durable; a failed write rebuilds the shard (see `rebuild`).

use super::*;
use crate::core::{wake_start, DueCursor, DueEntry, SinkKey, SourceSweep, SweepStep, WakeStep};
use crate::limits::REPLAY_SCAN_BUDGET;
use crate::store::{PurgeStep, Purged, ReviveStep, Revived};

impl ShardState<'_> {
    /// One step of dead-lettering the pending rows of `source_id` (see
    /// [`crate::core::SourceSweep`]): at most `max_entries` lane members or
    /// due entries from `from` on, committed, so the count it returns is
    /// durable. A step that set unreadable due entries aside may have read
    /// short, so the next goes on from where it began (setting aside leaves
    /// nothing to set aside again).
    pub fn dead_letter_source(
        &mut self,
        now_ms: u64,
        source_id: &str,
        from: &SourceSweep,
        max_entries: usize,
    ) -> Result<SweepStep, Arc<StoreError>> {
        let (dead, next, set_aside) =
            self.write_now(now_ms, |store, txn, tenants, core| match from {
                SourceSweep::Lanes(place) => {
                    let sweep = store::lanes::MemberSweep {
                        source_id,
                        from: *place,
                        max_entries,
                        now_ms,
                    };
                    let source: Arc<str> = source_id.into();
                    let mut report = |row, hook_id: &str, fields: &_, reason: &str| {
                        core.report_dead(now_ms, &source, (row, hook_id), fields, reason)
                    };
                    let (dead, next) = store::lanes::dead_letter_members(
                        store,
                        txn,
                        tenants,
                        &sweep,
                        &mut report,
                    )?;
                    // After the last lane, the due index from its start.
                    let next = next.map_or(SourceSweep::Due(DueCursor::default()), |place| {
                        SourceSweep::Lanes(Some(place))
                    });
                    Ok((dead, Some(next), 0))
                }
                SourceSweep::Due(at) => {
                    let ((dead, next), set_aside) =
                        read_due(store, txn, tenants, core, |core, index| {
                            core.handle_dead_letter_source(
                                now_ms,
                                source_id,
                                at.clone(),
                                max_entries,
                                index,
                            )
                        })?;
                    Ok((dead, next.map(SourceSweep::Due), set_aside))
                }
            })?;
        self.unreadable_due += set_aside as u64;
        let next = if set_aside > 0 {
            Some(from.clone())
        } else {
            next
        };
        Ok(SweepStep { dead, next })
    }

    /// One step of waking `key`'s rows (see [`crate::core::WakeStep`]):
    /// at most `max_entries` due entries after `after`, committed, so the
    /// rows it reports woken are due. A step that set unreadable due
    /// entries aside may have read short, so the next goes on from where
    /// it began.
    pub fn wake_sink(
        &mut self,
        now_ms: u64,
        key: &SinkKey,
        after: Option<DueEntry>,
        max_entries: usize,
    ) -> Result<WakeStep, Arc<StoreError>> {
        let (mut step, set_aside) = self.write_now(now_ms, |store, txn, tenants, core| {
            read_due(store, txn, tenants, core, |core, index| {
                core.handle_wake_sink(now_ms, key, after.clone(), max_entries, index)
            })
        })?;
        self.unreadable_due += set_aside as u64;
        if set_aside > 0 {
            step.next = Some(after.unwrap_or_else(|| wake_start(&key.tenant, now_ms)));
        }
        Ok(step)
    }

    /// One replay step (see [`store::dead::revive`]): the revived rows are
    /// due now and the core scans for them. Committed, so the counts are durable.
    pub fn revive(&mut self, now_ms: u64, step: &ReviveStep) -> Result<Revived, Arc<StoreError>> {
        self.write_now(now_ms, |store, txn, tenants, core| {
            let revived =
                store::dead::revive(store, txn, tenants, step, REPLAY_SCAN_BUDGET, now_ms)?;
            for tenant in &revived.due_tenants {
                core.handle_committed_for(tenant, now_ms);
            }
            Ok(revived)
        })
    }

    /// Deletes a forgotten replay's counters. Committed.
    pub fn forget_replay(&mut self, now_ms: u64, replay: &str) -> Result<(), Arc<StoreError>> {
        self.write_now(now_ms, |store, txn, _tenants, _core| {
            store::dead::forget_replay(store, txn, replay)
        })
    }

    /// One purge step (see [`store::purge::purge`]). Committed, so what it
    /// reports purged is gone.
    pub fn purge(&mut self, now_ms: u64, step: &PurgeStep) -> Result<Purged, Arc<StoreError>> {
        self.write_now(now_ms, |store, txn, tenants, _core| {
            store::purge::purge(store, txn, tenants, step, REPLAY_SCAN_BUDGET)
        })
    }

    /// Runs `write` in the open write transaction, writes the core's ops and
    /// commits. A failure rebuilds the shard from the store.
    fn write_now<T>(
        &mut self,
        now_ms: u64,
        write: impl FnOnce(&ShardStore, &mut RwTxn, &TenantTable, &mut Core) -> Result<T, StoreError>,
    ) -> Result<T, Arc<StoreError>> {
        self.clock_ms = self.clock_ms.max(now_ms);
        let result = self.write_now_txn(write);
        if let Err(e) = &result {
            self.rebuild(now_ms, e);
        }
        result.map_err(Arc::new)
    }

    fn write_now_txn<T>(
        &mut self,
        write: impl FnOnce(&ShardStore, &mut RwTxn, &TenantTable, &mut Core) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let store = self.store;
        let txn = match &mut self.txn {
            Some(txn) => txn,
            None => self.txn.insert(store.env.write_txn()?),
        };
        let value = write(store, txn, &self.tenants, &mut self.core)?;
        // Committed at once: a lane it passes on needs no wait.
        apply_ops(store, txn, &self.tenants, &mut self.core, &mut false)?;
        self.unflushed_ops += 1;
        self.commit()?;
        Ok(value)
    }
}
