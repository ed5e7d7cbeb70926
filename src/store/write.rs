//! The shard thread's writes: committing hooks and applying the core's
//! store operations, all inside the loop iteration's one transaction.

use super::breakers;
use super::dead::{self, ReplayCounter};
use super::hook_index::{self, Indexed};
use super::keys::{
    hook_key, inflight_value, lane_id, member_key, parse_inflight_value, row_key, timed_key,
};
use super::lanes::{self, NewHead};
use super::record::{
    decode_hook_head, decode_row, encode_placed_hook, encode_row, Hook, RowRecord, RowStatus,
};
use super::tenant_bytes::{self, TenantDeltas};
use super::{ShardStore, StoreError, TenantTable};
use crate::core::{BreakerEvent, OpenBreaker, RowFields, RowId, StoreOp, TenantId, HELD_DUE_MS};
use heed::RwTxn;
use std::ops::Bound;
use std::sync::Arc;
use RowStatus::{Dead, Pending};

/// A row a commit writes: its sink's index and type and, for an ordered
/// sink, the key of its lane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRow {
    pub sink_index: u16,
    pub sink_type: Arc<str>,
    /// `Some` for an ordered sink: the hook's ordering key ("" when the sink
    /// orders all its rows in one lane).
    pub lane_key: Option<String>,
}

impl NewRow {
    /// A row of the unordered sink of `sink_type` at `sink_index`.
    pub fn unordered(sink_index: u16, sink_type: &str) -> NewRow {
        NewRow {
            sink_index,
            sink_type: Arc::from(sink_type),
            lane_key: None,
        }
    }
}

/// A committed hook, its rows, and its source's sinks' places then (see
/// `SinkConfig::place`; `None` writes it as before store format 6).
#[derive(Debug, Clone, Copy)]
pub struct Commit<'a> {
    pub hook: &'a Hook,
    pub places: Option<&'a [u64]>,
    pub rows: &'a [NewRow],
}

/// Writes a committed hook (without places) and one pending row per
/// sink, each due now, or for an ordered sink behind the rows already in
/// its lane (see [`lanes`]).
pub fn write_commit(
    store: &ShardStore,
    wtxn: &mut RwTxn,
    tenants: &mut TenantTable,
    hook: &Hook,
    rows: &[NewRow],
    now_ms: u64,
) -> Result<(), StoreError> {
    let mut deltas = TenantDeltas::default();
    let commit = Commit {
        hook,
        places: None,
        rows,
    };
    write_commit_counted(store, wtxn, tenants, commit, now_ms, &mut deltas)?;
    deltas.write(store, wtxn)
}

/// [`write_commit`] of a [`Commit`], one of a batch: its hook's bytes go
/// into `deltas`, which the batch writes at its end.
pub fn write_commit_counted(
    store: &ShardStore,
    wtxn: &mut RwTxn,
    tenants: &mut TenantTable,
    commit: Commit<'_>,
    now_ms: u64,
    deltas: &mut TenantDeltas,
) -> Result<(), StoreError> {
    let Commit { hook, places, rows } = commit;
    if rows.is_empty() {
        return Ok(());
    }
    let tenant_no = tenants.number_or_assign(store, wtxn, &hook.tenant)?;
    let encoded = encode_placed_hook(hook, places);
    store.records.put(wtxn, &hook_key(hook.seq), &encoded)?;
    deltas.add(tenant_no, encoded.len() as u64);
    let sinks = rows.iter().map(|row| row.sink_index);
    hook_index::put(store, wtxn, &hook.id, &Indexed::committed(hook.seq, sinks))?;
    for new in rows {
        let row = RowId {
            seq: hook.seq,
            sink_index: new.sink_index,
        };
        let lane = new
            .lane_key
            .as_deref()
            .map(|key| lane_id(tenant_no, row.sink_index, &hook.source_id, key));
        let record = RowRecord {
            status: RowStatus::Pending,
            sink_type: new.sink_type.clone(),
            attempts: 0,
            first_attempt_at_ms: 0,
            at_ms: now_ms,
            size_bytes: hook.size_bytes(),
            error: None,
            replay: None,
            lane,
        };
        store
            .records
            .put(wtxn, &row_key(row), &encode_row(&record))?;
        if lanes::join(store, wtxn, lane, row)? {
            store.due.put(
                wtxn,
                &timed_key(tenant_no, now_ms, row),
                &hook.size_bytes().to_be_bytes(),
            )?;
        }
    }
    Ok(())
}

/// The `meta` entry kept while unparking is under way (see `core::unpark`).
pub(crate) const UNPARKING: &str = "unparking";

/// The `meta` entry written with every park: rows may be parked (see
/// `core::unpark`).
pub(crate) const PARKED: &str = "parked";

/// The `meta` entry of the paces the paced rows were paced at, absent
/// while the core paces them again (see `core::repace`).
pub(crate) const PACED_AT: &str = "paced_at";

/// The `meta` entry of the shard's clock when it last committed writes:
/// the next open's clock starts no earlier (see `runtime::clock`), so the
/// due times those writes set are not held for the length of a step back
/// of the wall clock while the process was down.
pub(crate) const CLOCK_MS: &str = "clock_ms";

/// The last error a parked row's record carries.
pub(crate) const PARKED_ERROR: &str = "breaker open";

/// Applies one store operation the core decided. Returns the lane member
/// that became due when the op settled its lane's head for good.
pub fn apply(
    store: &ShardStore,
    wtxn: &mut RwTxn,
    tenants: &TenantTable,
    op: &StoreOp,
    deltas: &mut TenantDeltas,
) -> Result<Option<NewHead>, StoreError> {
    match op {
        StoreOp::Claim {
            row,
            tenant,
            due_at_ms,
            size_bytes,
        } => claim(
            store,
            wtxn,
            number(tenants, tenant),
            *row,
            *due_at_ms,
            *size_bytes,
        )?,
        StoreOp::Delivered { row, replay, lane } => {
            forget(store, wtxn, *row, deltas)?;
            if let Some(replay) = replay {
                dead::count_replay(store, wtxn, replay, ReplayCounter::Delivered)?;
            }
            if let Some(lane) = lane {
                return lanes::leave(store, wtxn, tenants, *lane, *row);
            }
        }
        StoreOp::Forget { row } => return forget_any(store, wtxn, tenants, *row, deltas),
        StoreOp::Quarantine {
            row,
            tenant,
            dead_at_ms,
        } => {
            quarantine(store, wtxn, *row, number(tenants, tenant), *dead_at_ms)?;
            return lanes::leave_headed_by(store, wtxn, tenants, *row);
        }
        StoreOp::Breaker {
            event:
                BreakerEvent::Opened {
                    key,
                    until_ms,
                    opens,
                },
            spot,
        } => {
            let open = OpenBreaker {
                key: key.clone(),
                until_ms: *until_ms,
                opens: *opens,
                spot: *spot,
            };
            breakers::put(store, wtxn, tenants, &open)?
        }
        StoreOp::Breaker {
            event: BreakerEvent::Closed { key },
            ..
        } => breakers::delete(store, wtxn, tenants, key)?,
        // The core writes a move as the close of the old key and the open
        // of the new (`Core::breaker_moved`).
        StoreOp::Breaker {
            event: BreakerEvent::Moved { .. },
            ..
        } => {}
        StoreOp::Unparking { under_way: true } => store.put_meta(wtxn, UNPARKING, 1)?,
        StoreOp::Unparking { under_way: false } => {
            store.meta.delete(wtxn, UNPARKING.as_bytes())?;
        }
        StoreOp::NoneParked => {
            store.meta.delete(wtxn, PARKED.as_bytes())?;
        }
        StoreOp::PacedAt { paces: Some(paces) } => store.put_meta(wtxn, PACED_AT, *paces)?,
        StoreOp::PacedAt { paces: None } => {
            store.meta.delete(wtxn, PACED_AT.as_bytes())?;
        }
        StoreOp::Reschedule { row, fields, .. }
        | StoreOp::Park { row, fields, .. }
        | StoreOp::Hold { row, fields, .. }
        | StoreOp::Dead { row, fields, .. } => {
            return settle(store, wtxn, tenants, op, *row, fields);
        }
    }
    Ok(None)
}

/// A due row is claimed: its due key gives way to an in-flight entry.
fn claim(
    store: &ShardStore,
    wtxn: &mut RwTxn,
    tenant_no: u32,
    row: RowId,
    due_at_ms: u64,
    size_bytes: u64,
) -> Result<(), StoreError> {
    let removed = store
        .due
        .delete(wtxn, &timed_key(tenant_no, due_at_ms, row))?;
    assert!(removed, "claimed row {row:?} had no due key at {due_at_ms}");
    store
        .inflight
        .put(wtxn, &row_key(row), &inflight_value(tenant_no, size_bytes))?;
    Ok(())
}

/// A row whose record or hook is missing: what is left of it forgotten,
/// and its lane moved on (a row whose record is gone may still head one).
fn forget_any(
    store: &ShardStore,
    wtxn: &mut RwTxn,
    tenants: &TenantTable,
    row: RowId,
    deltas: &mut TenantDeltas,
) -> Result<Option<NewHead>, StoreError> {
    let lane = store
        .records
        .get(wtxn, &row_key(row))?
        .and_then(|bytes| decode_row(bytes).ok())
        .map(|record| record.lane);
    forget(store, wtxn, row, deltas)?;
    match lane {
        Some(None) => Ok(None),
        Some(Some(lane)) => lanes::leave(store, wtxn, tenants, lane, row),
        None => lanes::leave_headed_by(store, wtxn, tenants, row),
    }
}

/// A row rescheduled, parked, held or dead-lettered by `op`: its record
/// rewritten and, for a replayed row, counted; a dead row leaves its lane.
fn settle(
    store: &ShardStore,
    wtxn: &mut RwTxn,
    tenants: &TenantTable,
    op: &StoreOp,
    row: RowId,
    fields: &RowFields,
) -> Result<Option<NewHead>, StoreError> {
    let (record, counter) = settled_record(op, fields);
    put_row(store, wtxn, number(tenants, &fields.tenant), row, &record)?;
    if let (Some(counter), Some(replay)) = (counter, &fields.replay) {
        dead::count_replay(store, wtxn, replay, counter)?;
    }
    if let (Dead, Some(lane)) = (record.status, fields.lane) {
        return lanes::leave(store, wtxn, tenants, lane, row);
    }
    if let StoreOp::Park { .. } = op {
        store.put_meta(wtxn, PARKED, 1)?;
    }
    Ok(None)
}

/// The record a row settles to by `op` (a reschedule, park or death, of a
/// row with `fields`), and the replay counter it counts in, if any.
fn settled_record(op: &StoreOp, fields: &RowFields) -> (RowRecord, Option<ReplayCounter>) {
    match op {
        StoreOp::Reschedule {
            due_at_ms, error, ..
        } => (settled(fields, Pending, *due_at_ms, error.clone()), None),
        StoreOp::Park { due_at_ms, .. } => (
            settled(fields, Pending, *due_at_ms, Some(PARKED_ERROR.into())),
            Some(ReplayCounter::Parked),
        ),
        StoreOp::Hold { error, .. } => (
            settled(fields, Pending, HELD_DUE_MS, Some(error.to_string())),
            None,
        ),
        StoreOp::Dead {
            dead_at_ms, reason, ..
        } => (
            settled(fields, Dead, *dead_at_ms, Some(reason.clone())),
            Some(ReplayCounter::DeadAgain),
        ),
        other => unreachable!("{other:?} settles no row"),
    }
}

/// Holds a pending row in flight again, because an attempt that a rebuilt
/// shard's previous core started still runs it: its due key (or its place
/// in its lane) becomes an in-flight marker. Returns `false` (and leaves
/// the row as it is) when it is not a pending row that is due or waiting.
pub fn hold_in_flight(
    store: &ShardStore,
    wtxn: &mut RwTxn,
    tenants: &TenantTable,
    row: RowId,
    tenant: &TenantId,
) -> Result<bool, StoreError> {
    let Some(tenant_no) = tenants.number(tenant) else {
        return Ok(false);
    };
    let record = store.records.get(wtxn, &row_key(row))?;
    let Some(record) = record.and_then(|bytes| decode_row(bytes).ok()) else {
        return Ok(false);
    };
    if record.status != Pending {
        return Ok(false);
    }
    // Due, or (when the batch that made it its lane's head was dropped)
    // waiting in its lane.
    let mut held = store
        .due
        .delete(wtxn, &timed_key(tenant_no, record.at_ms, row))?;
    if let (false, Some(lane)) = (held, record.lane) {
        held = store.members.delete(wtxn, &member_key(lane, row.seq))?;
    }
    if !held {
        return Ok(false);
    }
    let marker = inflight_value(tenant_no, record.size_bytes);
    store.inflight.put(wtxn, &row_key(row), &marker)?;
    Ok(true)
}

/// Lists a row whose record is corrupt as a dead letter, keeping its bytes.
fn quarantine(
    store: &ShardStore,
    wtxn: &mut RwTxn,
    row: RowId,
    tenant_no: u32,
    dead_at_ms: u64,
) -> Result<(), StoreError> {
    crate::log::error(
        "a row's record is corrupt; it is listed as a dead letter and its bytes are kept",
        &[("seq", &row.seq), ("sink_index", &row.sink_index)],
    );
    store.inflight.delete(wtxn, &row_key(row))?;
    store
        .dead
        .put(wtxn, &timed_key(tenant_no, dead_at_ms, row), &[])?;
    Ok(())
}

/// Drops a claimed row (delivered, or its hook is gone), and its hook with
/// its last row (counted off the tenant its in-flight marker names).
fn forget(
    store: &ShardStore,
    wtxn: &mut RwTxn,
    row: RowId,
    deltas: &mut TenantDeltas,
) -> Result<(), StoreError> {
    let tenant_no = store
        .inflight
        .get(wtxn, &row_key(row))?
        .and_then(parse_inflight_value)
        .map(|(tenant_no, _)| tenant_no);
    store.inflight.delete(wtxn, &row_key(row))?;
    store.records.delete(wtxn, &row_key(row))?;
    delete_hook_if_rowless(store, wtxn, row.seq, tenant_no, deltas)?;
    Ok(())
}

/// The record of a row that leaves flight: due again at `at_ms`, or dead
/// since then.
fn settled(fields: &RowFields, status: RowStatus, at_ms: u64, error: Option<String>) -> RowRecord {
    RowRecord {
        status,
        sink_type: fields.sink_type.clone(),
        attempts: fields.attempts,
        first_attempt_at_ms: fields.first_attempt_at_ms,
        at_ms,
        size_bytes: fields.size_bytes,
        error,
        replay: fields.replay.clone(),
        lane: fields.lane,
    }
}

/// Writes back a row that leaves flight, with its index key: due at its
/// `at_ms` when pending, dead since then when dead.
fn put_row(
    store: &ShardStore,
    wtxn: &mut RwTxn,
    tenant_no: u32,
    row: RowId,
    record: &RowRecord,
) -> Result<(), StoreError> {
    store.inflight.delete(wtxn, &row_key(row))?;
    store
        .records
        .put(wtxn, &row_key(row), &encode_row(record))?;
    let key = timed_key(tenant_no, record.at_ms, row);
    match record.status {
        // A row of an ordered sink that does not head its lane waits in it.
        Pending if !lanes::join(store, wtxn, record.lane, row)? => {}
        Pending => store
            .due
            .put(wtxn, &key, &record.size_bytes.to_be_bytes())?,
        Dead => store.dead.put(wtxn, &key, &[])?,
    }
    Ok(())
}

/// Puts a due key for a pending row and records the due time on the row,
/// or puts it back in its lane behind the head when another row heads it
/// (a row record that does not decode is left as it is: the scan
/// quarantines it).
pub(super) fn put_pending_due(
    store: &ShardStore,
    wtxn: &mut RwTxn,
    tenants: &TenantTable,
    row: &RowId,
    tenant: &TenantId,
    due_at_ms: u64,
    size_bytes: u64,
) -> Result<(), StoreError> {
    let stored = store.records.get(wtxn, &row_key(*row))?;
    if let Some(Ok(mut record)) = stored.map(super::record::decode_row) {
        record.at_ms = due_at_ms;
        store
            .records
            .put(wtxn, &row_key(*row), &encode_row(&record))?;
        // A row its lane moved past (an attempt from before a shard
        // restart, held in flight) waits behind the head again.
        if !lanes::join(store, wtxn, record.lane, *row)? {
            return Ok(());
        }
    }
    store.due.put(
        wtxn,
        &timed_key(number(tenants, tenant), due_at_ms, *row),
        &size_bytes.to_be_bytes(),
    )?;
    Ok(())
}

fn number(tenants: &TenantTable, tenant: &str) -> u32 {
    tenants
        .number(tenant)
        .unwrap_or_else(|| panic!("tenant {tenant:?} has rows but no number"))
}

/// Deletes the hook at `seq` with its id-index entry if it has no rows
/// left, taking its bytes off its tenant's count (the tenant number its
/// rows' keys carry; `None` only for a corrupt in-flight marker, which
/// leaves them counted; a hook record that no longer decodes has its
/// tenant counted again, a walk only corruption costs); returns whether
/// it did.
pub(super) fn delete_hook_if_rowless(
    store: &ShardStore,
    wtxn: &mut RwTxn,
    seq: u64,
    tenant_no: Option<u32>,
    deltas: &mut TenantDeltas,
) -> Result<bool, StoreError> {
    let first = row_key(RowId { seq, sink_index: 0 });
    let last = row_key(RowId {
        seq,
        sink_index: u16::MAX,
    });
    let bounds = (Bound::Included(&first[..]), Bound::Included(&last[..]));
    let has_rows = store.records.range(wtxn, &bounds)?.next().is_some();
    if !has_rows {
        // The record's length, and whether it is still what was counted.
        let counted = store
            .records
            .get(wtxn, &hook_key(seq))?
            .map(|hook| (hook.len() as u64, decode_hook_head(hook).is_ok()));
        hook_index::forget(store, wtxn, seq)?;
        store.records.delete(wtxn, &hook_key(seq))?;
        match (tenant_no, counted) {
            (Some(tenant_no), Some((bytes, true))) => deltas.remove(tenant_no, bytes),
            // A record that no longer decodes was counted at another
            // length: the tenant is counted again from its hooks.
            (Some(tenant_no), Some((_, false))) => {
                tenant_bytes::recount_tenant(store, wtxn, tenant_no, deltas)?
            }
            _ => {}
        }
    }
    Ok(!has_rows)
}
