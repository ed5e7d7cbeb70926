//! Ordering lanes: the rows of an ordered sink that share a lane are
//! delivered one at a time, in commit order (seq).
//!
//! A lane is (tenant, source, sink index, key), named by its id
//! ([`keys::lane_id`]). Only its head is a due row or a claim; the rows
//! behind it are members, keyed (lane, seq) in `members` and in no other
//! index, so a waiting lane holds no slot, no window room and no memory.
//! `lanes` maps each lane that has rows to its head's row key.
//!
//! Each change is written in the transaction of the change that causes it:
//! - a commit or a replay puts the row in its lane ([`join`]): the head of
//!   an empty lane (with a due key), else a member;
//! - a head's retry or park rewrites its due key only: its lane waits (a
//!   row written back pending that does not head its lane, which only an
//!   attempt from before a shard restart leaves, waits as a member);
//! - a head that settles for good — delivered, dead-lettered for any
//!   reason, its hook gone, its record corrupt — leaves its lane
//!   ([`leave`]): the first member becomes the head, due at once, so a
//!   poison row never holds its lane past its own dead-lettering;
//! - a member dead-lettered with its source leaves its place
//!   ([`dead_letter_members`]).
//!
//! The shard thread writes every one of these, commits included, so a lane
//! with members always has a head: nothing needs sweeping. `goad verify`
//! checks it.

use super::keys::{lane_parts, member_key, parse_member_key, parse_row_key, row_key, timed_key};
use super::record::{decode_hook_head, decode_row};
use super::tenant_bytes::TenantDeltas;
use super::write::apply;
use super::{keys, ShardStore, StoreError, TenantTable};
use crate::core::{
    DeadReason, LaneId, LanePlace, RowFields, RowId, StoreOp, TenantId, LANE_ID_BYTES,
};
use heed::RwTxn;
use std::ops::Bound;

/// A member that became its lane's head, and so a due row of its tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewHead {
    pub tenant: TenantId,
    pub due_at_ms: u64,
}

/// Whether `row`, pending, may be due: a row of no lane always; a row of
/// `lane` when it heads the lane (already, or now, the lane being empty).
/// Otherwise it waits behind the head as a member (`false`). The caller
/// writes the due key.
pub fn join(
    store: &ShardStore,
    wtxn: &mut RwTxn,
    lane: Option<LaneId>,
    row: RowId,
) -> Result<bool, StoreError> {
    let Some(lane) = lane else {
        return Ok(true);
    };
    match store.lanes.get(wtxn, &lane.0)?.and_then(parse_row_key) {
        Some(head) if head == row => Ok(true),
        Some(_) => {
            store.members.put(wtxn, &member_key(lane, row.seq), &[])?;
            Ok(false)
        }
        None => {
            store.lanes.put(wtxn, &lane.0, &row_key(row))?;
            Ok(true)
        }
    }
}

/// Takes `row`, which settled for good, out of `lane`. A head hands the lane
/// to the first member, whose due key is written at its record's due time
/// (its commit time, so it is due at once); the lane goes when it has no
/// member. A member only leaves its place.
pub fn leave(
    store: &ShardStore,
    wtxn: &mut RwTxn,
    tenants: &TenantTable,
    lane: LaneId,
    row: RowId,
) -> Result<Option<NewHead>, StoreError> {
    let head = store.lanes.get(wtxn, &lane.0)?.and_then(parse_row_key);
    if head != Some(row) {
        store.members.delete(wtxn, &member_key(lane, row.seq))?;
        return Ok(None);
    }
    let first = store
        .members
        .prefix_iter(wtxn, &lane.0)?
        .next()
        .transpose()?
        .and_then(|(k, _)| parse_member_key(k));
    let Some((_, next)) = first else {
        store.lanes.delete(wtxn, &lane.0)?;
        return Ok(None);
    };
    store.members.delete(wtxn, &member_key(lane, next.seq))?;
    store.lanes.put(wtxn, &lane.0, &row_key(next))?;
    // A member whose record is missing or corrupt is made due all the same,
    // at once: the scan drops or quarantines it, and its lane moves on.
    let (due_at_ms, size_bytes) = store
        .records
        .get(wtxn, &row_key(next))?
        .and_then(|bytes| decode_row(bytes).ok())
        .map_or((0, 0), |record| (record.at_ms, record.size_bytes));
    let (tenant_no, _) = lane_parts(lane);
    store.due.put(
        wtxn,
        &timed_key(tenant_no, due_at_ms, next),
        &size_bytes.to_be_bytes(),
    )?;
    Ok(Some(NewHead {
        tenant: tenants.name(tenant_no).clone(),
        due_at_ms,
    }))
}

/// Takes `row` out of the lane it heads, if any, when its record cannot
/// say which (it is gone or corrupt): reads every lane, so only for those
/// rare rows.
pub fn leave_headed_by(
    store: &ShardStore,
    wtxn: &mut RwTxn,
    tenants: &TenantTable,
    row: RowId,
) -> Result<Option<NewHead>, StoreError> {
    let wanted = row_key(row);
    let mut headed = None;
    for item in store.lanes.iter(wtxn)? {
        let (k, v) = item?;
        if v == wanted {
            headed = <[u8; LANE_ID_BYTES]>::try_from(k).ok().map(LaneId);
            break;
        }
    }
    match headed {
        Some(lane) => leave(store, wtxn, tenants, lane, row),
        None => Ok(None),
    }
}

/// One step of dead-lettering the members of a source's lanes.
pub struct MemberSweep<'a> {
    pub source_id: &'a str,
    /// Where to go on from; `None` for the first lane.
    pub from: Option<LanePlace>,
    /// Members walked plus lanes walked (at least 1).
    pub max_entries: usize,
    pub now_ms: u64,
}

/// Dead-letters, as `source_gone`, the members of the lanes of the
/// sweep's source, walking at most `max_entries` lanes and members;
/// returns how many, and where the next step goes on (`None` when every
/// lane was walked). Their heads are due or claimed rows, which the caller
/// settles the usual way. Reads every lane's head hook, so only for this
/// admin call. A member whose record does not decode is left for the scan
/// (it is quarantined when it heads its lane). `report` is given each row
/// written dead whose hook record decodes: its id, its hook's id, its
/// fields and the reason.
pub fn dead_letter_members(
    store: &ShardStore,
    wtxn: &mut RwTxn,
    tenants: &TenantTable,
    sweep: &MemberSweep,
    report: &mut dyn FnMut(RowId, &str, &RowFields, &str),
) -> Result<(u64, Option<LanePlace>), StoreError> {
    let (source_id, now_ms) = (sweep.source_id, sweep.now_ms);
    let mut members = Vec::new();
    let next = members_to_take(store, wtxn, sweep, &mut members)?;
    let reason = DeadReason::SourceGone {
        source_id: source_id.into(),
    }
    .to_string();
    let mut dead = 0;
    for (lane, row) in members {
        let Some(record) = store
            .records
            .get(wtxn, &row_key(row))?
            .and_then(|bytes| decode_row(bytes).ok())
        else {
            continue;
        };
        let fields = RowFields {
            tenant: tenants.name(lane_parts(lane).0).clone(),
            sink_type: record.sink_type,
            attempts: record.attempts,
            first_attempt_at_ms: record.first_attempt_at_ms,
            size_bytes: record.size_bytes,
            replay: record.replay,
            lane: Some(lane),
        };
        let hook = store
            .records
            .get(wtxn, &keys::hook_key(row.seq))?
            .and_then(|bytes| decode_hook_head(bytes).ok());
        if let Some(hook) = hook {
            report(row, &hook.id, &fields, &reason);
        }
        let op = StoreOp::Dead {
            row,
            fields,
            dead_at_ms: now_ms,
            reason: reason.clone(),
        };
        // A death deletes no hook: nothing is counted off.
        apply(store, wtxn, tenants, &op, &mut TenantDeltas::default())?;
        dead += 1;
    }
    Ok((dead, next))
}

/// Puts the members a step of `sweep` takes into `members`, in lane and
/// seq order; returns where the next step goes on.
fn members_to_take(
    store: &ShardStore,
    txn: &RwTxn,
    sweep: &MemberSweep,
    members: &mut Vec<(LaneId, RowId)>,
) -> Result<Option<LanePlace>, StoreError> {
    let first = sweep.from.map(|place| place.lane.0);
    let start = first
        .as_ref()
        .map_or(Bound::Unbounded, |id| Bound::Included(&id[..]));
    let mut budget = sweep.max_entries.max(1);
    for item in store.lanes.range(txn, &(start, Bound::Unbounded))? {
        let (k, v) = item?;
        let (Ok(id), Some(head)) = (<[u8; LANE_ID_BYTES]>::try_from(k), parse_row_key(v)) else {
            continue;
        };
        let lane = LaneId(id);
        if budget == 0 {
            let next = LanePlace {
                lane,
                after_seq: None,
            };
            return Ok(Some(next));
        }
        let source = store
            .records
            .get(txn, &keys::hook_key(head.seq))?
            .and_then(|bytes| decode_hook_head(bytes).ok())
            .map(|head| head.source_id);
        if source.as_deref() != Some(sweep.source_id) {
            budget -= 1;
            continue;
        }
        // The lane a step stopped in goes on after its last member taken.
        let resumed = sweep.from.filter(|place| place.lane == lane);
        let place = LanePlace {
            lane,
            after_seq: resumed.and_then(|place| place.after_seq),
        };
        if let Some(next) = take_members(store, txn, place, &mut budget, members)? {
            return Ok(Some(next));
        }
    }
    Ok(None)
}

/// Takes the members of a lane after `from.after_seq` into `members`
/// while `budget` lasts (at least one, or one for a lane with none left,
/// so every step moves on); returns where to go on if it ran out first.
fn take_members(
    store: &ShardStore,
    txn: &RwTxn,
    from: LanePlace,
    budget: &mut usize,
    members: &mut Vec<(LaneId, RowId)>,
) -> Result<Option<LanePlace>, StoreError> {
    let lane = from.lane;
    let low = member_key(lane, from.after_seq.unwrap_or(0));
    let low = match from.after_seq {
        Some(_) => Bound::Excluded(&low[..]),
        None => Bound::Included(&low[..]),
    };
    let high = member_key(lane, u64::MAX);
    let mut last_taken = None;
    for member in store
        .members
        .range(txn, &(low, Bound::Included(&high[..])))?
    {
        let Some((_, row)) = parse_member_key(member?.0) else {
            continue;
        };
        if *budget == 0 {
            let after_seq = last_taken.or(from.after_seq);
            return Ok(Some(LanePlace { lane, after_seq }));
        }
        *budget -= 1;
        last_taken = Some(row.seq);
        members.push((lane, row));
    }
    if last_taken.is_none() {
        *budget = budget.saturating_sub(1);
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::keys::{parse_timed_key, row_key};
    use crate::store::record::sample_hook;
    use crate::store::{hold_in_flight, write_commit, NewRow};
    use heed::RoTxn;

    /// One op, its byte counts written.
    fn apply_now(
        store: &ShardStore,
        wtxn: &mut RwTxn,
        tenants: &TenantTable,
        op: &StoreOp,
    ) -> Option<NewHead> {
        let mut deltas = TenantDeltas::default();
        let head = apply(store, wtxn, tenants, op, &mut deltas).unwrap();
        deltas.write(store, wtxn).unwrap();
        head
    }

    fn ordered(key: &str) -> NewRow {
        NewRow {
            sink_index: 0,
            sink_type: "http".into(),
            lane_key: Some(key.into()),
        }
    }

    fn row(seq: u64) -> RowId {
        RowId { seq, sink_index: 0 }
    }

    /// The seqs of the due rows (with their due times) and of the members.
    fn due_and_waiting(store: &ShardStore, txn: &RoTxn) -> (Vec<(u64, u64)>, Vec<u64>) {
        let due = store
            .due
            .iter(txn)
            .unwrap()
            .map(|item| {
                let (_, at_ms, row) = parse_timed_key(item.unwrap().0).unwrap();
                (row.seq, at_ms)
            })
            .collect();
        let waiting = store
            .members
            .iter(txn)
            .unwrap()
            .map(|item| parse_member_key(item.unwrap().0).unwrap().1.seq)
            .collect();
        (due, waiting)
    }

    /// Hooks 1–3 in lane "a", hook 4 in lane "b", committed at 10 + seq.
    fn four_hooks(store: &ShardStore, tenants: &mut TenantTable) -> (LaneId, LaneId) {
        let mut wtxn = store.env.write_txn().unwrap();
        for (seq, key) in [(1, "a"), (2, "a"), (3, "a"), (4, "b")] {
            let rows = [ordered(key)];
            write_commit(
                store,
                &mut wtxn,
                tenants,
                &sample_hook(seq),
                &rows,
                10 + seq,
            )
            .unwrap();
        }
        wtxn.commit().unwrap();
        (keys::lane_id(0, 0, "s", "a"), keys::lane_id(0, 0, "s", "b"))
    }

    /// Claims row `seq`, due at `due_at_ms`, as a scan would.
    fn claim(
        store: &ShardStore,
        wtxn: &mut RwTxn,
        tenants: &TenantTable,
        seq: u64,
        due_at_ms: u64,
    ) {
        let op = StoreOp::Claim {
            row: row(seq),
            tenant: "t".into(),
            due_at_ms,
            size_bytes: 7,
        };
        assert_eq!(apply_now(store, wtxn, tenants, &op), None);
    }

    fn fields(lane: LaneId, attempts: u32) -> RowFields {
        RowFields {
            tenant: "t".into(),
            sink_type: "http".into(),
            attempts,
            first_attempt_at_ms: 0,
            size_bytes: 7,
            replay: None,
            lane: Some(lane),
        }
    }

    /// Only a lane's head is due; a retry keeps the lane; a delivery or a
    /// dead-lettering hands it to the next row in commit order, due at its
    /// commit time, in the same transaction; the last row takes the lane.
    #[test]
    fn a_lane_is_due_one_row_at_a_time_and_moves_on_when_its_head_settles() {
        let dir = tempfile::tempdir().unwrap();
        let (store, mut tenants) = super::super::fresh_store(dir.path());
        let (a, b) = four_hooks(&store, &mut tenants);
        assert_ne!(a, b);
        let rtxn = store.env.read_txn().unwrap();
        assert_eq!(
            due_and_waiting(&store, &rtxn),
            (vec![(1, 11), (4, 14)], vec![2, 3])
        );
        drop(rtxn);

        let mut wtxn = store.env.write_txn().unwrap();
        claim(&store, &mut wtxn, &tenants, 1, 11);
        let delivered = StoreOp::Delivered {
            row: row(1),
            replay: None,
            lane: Some(a),
        };
        let head = apply_now(&store, &mut wtxn, &tenants, &delivered);
        let at = |due_at_ms| {
            Some(NewHead {
                tenant: "t".into(),
                due_at_ms,
            })
        };
        assert_eq!(head, at(12));
        assert_eq!(
            due_and_waiting(&store, &wtxn),
            (vec![(2, 12), (4, 14)], vec![3])
        );
        claim(&store, &mut wtxn, &tenants, 2, 12);
        let retry = StoreOp::Reschedule {
            row: row(2),
            fields: fields(a, 1),
            due_at_ms: 500,
            error: Some("503".into()),
        };
        assert_eq!(apply_now(&store, &mut wtxn, &tenants, &retry), None);
        assert_eq!(
            due_and_waiting(&store, &wtxn),
            (vec![(4, 14), (2, 500)], vec![3])
        );
        let dead = StoreOp::Dead {
            row: row(2),
            fields: fields(a, 2),
            dead_at_ms: 600,
            reason: "sink http: 410".into(),
        };
        claim(&store, &mut wtxn, &tenants, 2, 500);
        assert_eq!(apply_now(&store, &mut wtxn, &tenants, &dead), at(13));
        assert_eq!(
            due_and_waiting(&store, &wtxn),
            (vec![(3, 13), (4, 14)], vec![])
        );
        let last = StoreOp::Delivered {
            row: row(3),
            replay: None,
            lane: Some(a),
        };
        claim(&store, &mut wtxn, &tenants, 3, 13);
        assert_eq!(apply_now(&store, &mut wtxn, &tenants, &last), None);
        assert!(
            store.lanes.get(&wtxn, &a.0).unwrap().is_none(),
            "an empty lane goes"
        );
        wtxn.commit().unwrap();
        let verified = store.verify().unwrap();
        assert_eq!(verified.problems, Vec::<String>::new());
        assert_eq!(
            (verified.lanes, verified.lane_members, verified.dead),
            (1, 0, 1)
        );
    }

    /// A head whose record is gone or corrupt, found by the scan, still
    /// hands its lane on (the lane is found from its head).
    #[test]
    fn a_head_whose_record_is_gone_or_corrupt_still_moves_its_lane_on() {
        let dir = tempfile::tempdir().unwrap();
        let (store, mut tenants) = super::super::fresh_store(dir.path());
        four_hooks(&store, &mut tenants);
        let mut wtxn = store.env.write_txn().unwrap();
        store
            .records
            .put(&mut wtxn, &row_key(row(1)), b"junk")
            .unwrap();
        claim(&store, &mut wtxn, &tenants, 1, 11);
        let quarantine = StoreOp::Quarantine {
            row: row(1),
            tenant: "t".into(),
            dead_at_ms: 50,
        };
        let head = apply_now(&store, &mut wtxn, &tenants, &quarantine);
        assert_eq!(head.map(|h| h.due_at_ms), Some(12));
        claim(&store, &mut wtxn, &tenants, 2, 12);
        store.records.delete(&mut wtxn, &row_key(row(2))).unwrap();
        let forget = StoreOp::Forget { row: row(2) };
        let head = apply_now(&store, &mut wtxn, &tenants, &forget);
        assert_eq!(head.map(|h| h.due_at_ms), Some(13));
        assert_eq!(
            due_and_waiting(&store, &wtxn),
            (vec![(3, 13), (4, 14)], vec![])
        );
    }

    /// After a shard restart dropped the batch in which a row became its
    /// lane's head, the attempt still running it is held in flight from
    /// the row's place in the lane; written back pending, the row waits in
    /// its lane again, behind the head.
    #[test]
    fn a_row_that_does_not_head_its_lane_waits_in_it_when_written_back() {
        let dir = tempfile::tempdir().unwrap();
        let (store, mut tenants) = super::super::fresh_store(dir.path());
        let (a, _) = four_hooks(&store, &mut tenants);
        let mut wtxn = store.env.write_txn().unwrap();
        let tenant: TenantId = "t".into();
        assert!(hold_in_flight(&store, &mut wtxn, &tenants, row(2), &tenant).unwrap());
        assert_eq!(
            due_and_waiting(&store, &wtxn),
            (vec![(1, 11), (4, 14)], vec![3])
        );
        let retry = StoreOp::Reschedule {
            row: row(2),
            fields: fields(a, 1),
            due_at_ms: 500,
            error: None,
        };
        assert_eq!(apply_now(&store, &mut wtxn, &tenants, &retry), None);
        assert_eq!(
            due_and_waiting(&store, &wtxn),
            (vec![(1, 11), (4, 14)], vec![2, 3])
        );
        wtxn.commit().unwrap();
        assert!(store.verify().unwrap().problems.is_empty());
    }

    /// The process stops while such a row is held: recovery puts it back
    /// in its lane behind the head, not due beside it (the simulator found
    /// two rows of a lane due at once, seed 3758, when this put it due).
    #[test]
    fn a_held_row_that_does_not_head_its_lane_rejoins_it_on_recovery() {
        let dir = tempfile::tempdir().unwrap();
        let (store, mut tenants) = super::super::fresh_store(dir.path());
        four_hooks(&store, &mut tenants);
        let mut wtxn = store.env.write_txn().unwrap();
        let tenant: TenantId = "t".into();
        assert!(hold_in_flight(&store, &mut wtxn, &tenants, row(2), &tenant).unwrap());
        claim(&store, &mut wtxn, &tenants, 4, 14);
        wtxn.commit().unwrap();
        assert_eq!(store.recover(&tenants, 900).unwrap(), 2);
        let rtxn = store.env.read_txn().unwrap();
        assert_eq!(
            due_and_waiting(&store, &rtxn),
            (vec![(1, 11), (4, 900)], vec![2, 3])
        );
        drop(rtxn);
        assert!(store.verify().unwrap().problems.is_empty());
    }

    /// Dead-lettering a source's backlog takes the rows waiting in its
    /// lanes too; the heads are left to the due index's pass.
    #[test]
    fn the_members_of_a_sources_lanes_are_dead_lettered_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let (store, mut tenants) = super::super::fresh_store(dir.path());
        four_hooks(&store, &mut tenants);
        let mut wtxn = store.env.write_txn().unwrap();
        let other = dead_letter_members(
            &store,
            &mut wtxn,
            &tenants,
            &sweep("other", None, 100),
            &mut |_, _, _, _| {},
        )
        .unwrap();
        assert_eq!(other, (0, None));
        let mut reported = Vec::new();
        let dead = dead_letter_members(
            &store,
            &mut wtxn,
            &tenants,
            &sweep("s", None, 100),
            &mut |row, hook, f, why| {
                reported.push((row.seq, hook.to_string(), f.attempts, why.to_string()))
            },
        )
        .unwrap();
        assert_eq!(dead, (2, None));
        let gone = |seq: u64| (seq, format!("h{seq}"), 0, "source_gone: s".to_string());
        assert_eq!(reported, vec![gone(2), gone(3)]);
        assert_eq!(
            due_and_waiting(&store, &wtxn),
            (vec![(1, 11), (4, 14)], vec![])
        );
        let reason = decode_row(store.records.get(&wtxn, &row_key(row(3))).unwrap().unwrap())
            .unwrap()
            .error;
        assert_eq!(reason.as_deref(), Some("source_gone: s"));
        wtxn.commit().unwrap();
        assert!(store.verify().unwrap().problems.is_empty());
    }

    fn sweep(source_id: &str, from: Option<LanePlace>, max_entries: usize) -> MemberSweep<'_> {
        MemberSweep {
            source_id,
            from,
            max_entries,
            now_ms: 70,
        }
    }

    /// In steps of one entry each, lane "a"'s members go one a step and
    /// lane "b" (no members) costs one; a member whose record does not
    /// decode is passed over and stays, so no step walks it again.
    #[test]
    fn a_sources_lane_members_go_in_steps_and_an_unreadable_one_is_passed_over() {
        let dir = tempfile::tempdir().unwrap();
        let (store, mut tenants) = super::super::fresh_store(dir.path());
        let (a, b) = four_hooks(&store, &mut tenants);
        let mut wtxn = store.env.write_txn().unwrap();
        store
            .records
            .put(&mut wtxn, &row_key(row(2)), b"?")
            .unwrap();
        let (mut reported, mut steps) = (Vec::new(), Vec::new());
        let mut from = None;
        loop {
            let (dead, next) = dead_letter_members(
                &store,
                &mut wtxn,
                &tenants,
                &sweep("s", from, 1),
                &mut |row, _, _, _| reported.push(row.seq),
            )
            .unwrap();
            steps.push((dead, next));
            match next {
                Some(place) => from = Some(place),
                None => break,
            }
        }
        let a_first = a < b;
        let in_a = |after_seq| Some(LanePlace { lane: a, after_seq });
        let expected = if a_first {
            let at_b = Some(LanePlace {
                lane: b,
                after_seq: None,
            });
            vec![(0, in_a(Some(2))), (1, at_b), (0, None)]
        } else {
            vec![(0, in_a(None)), (0, in_a(Some(2))), (1, None)]
        };
        assert_eq!(steps, expected);
        assert_eq!(reported, vec![3]);
        assert_eq!(
            due_and_waiting(&store, &wtxn),
            (vec![(1, 11), (4, 14)], vec![2])
        );
    }
}
