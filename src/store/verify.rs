//! An offline check of one shard's store (`goad verify`): every record
//! decodes, every row is in exactly one place that agrees with its record
//! (a pending row due, in flight or waiting in its lane, a dead row dead),
//! every index entry names a row, every lane's head is a pending row due or
//! in flight whose record names that lane, every member's lane has a head,
//! every row has its hook and every hook has a row, the hook-id index
//! agrees with the hooks, each dedupe entry has its end key, and each
//! tenant's byte count is what its hooks hold. A row in no index (or
//! behind a lane with no head) would be neither delivered nor listed: the
//! way a store could lose a hook silently, which this looks for.

use super::hook_index;
use super::keys::{is_hook_key, parse_member_key, parse_row_key, parse_timed_key, u64_at};
use super::record::{decode_placed_hook, decode_row, RowStatus};
use super::{DataDirLock, ShardStore, StoreError, TenantTable};
use crate::core::{LaneId, RowId, LANE_ID_BYTES};
use heed::RoTxn;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Problems listed in full; past this, only counted.
const MAX_LISTED_PROBLEMS: usize = 100;

/// What [`ShardStore::verify`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verified {
    pub hooks: u64,
    /// Index entries of each place.
    pub due: u64,
    pub in_flight: u64,
    pub dead: u64,
    /// Ordering lanes with rows, and the rows waiting behind their heads.
    pub lanes: u64,
    pub lane_members: u64,
    /// Broken invariants, each a sentence naming its row or hook (at most
    /// `MAX_LISTED_PROBLEMS`; `problem_count` counts them all).
    pub problems: Vec<String>,
    pub problem_count: u64,
}

impl Verified {
    fn count(&mut self, place: Place) {
        *match place {
            Place::Due => &mut self.due,
            Place::InFlight => &mut self.in_flight,
            Place::Dead => &mut self.dead,
            Place::Member(_) => &mut self.lane_members,
        } += 1;
    }

    fn problem(&mut self, text: String) {
        self.problem_count += 1;
        if self.problems.len() < MAX_LISTED_PROBLEMS {
            self.problems.push(text);
        }
    }
}

/// An index a row can be in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Place {
    Due,
    InFlight,
    Dead,
    /// Waiting behind the head of this lane.
    Member(LaneId),
}

/// Verifies every shard of a data directory, holding its lock so no engine
/// runs on it meanwhile (a running one makes this fail with
/// [`StoreError::InUse`]). It makes nothing: a directory that is not
/// there, is empty, or lacks a shard's store, is refused.
pub fn verify_data_dir(data_dir: &Path, shard_count: usize) -> Result<Vec<Verified>, StoreError> {
    if !data_dir.is_dir() {
        return Err(StoreError::not_found(data_dir, "no data directory here"));
    }
    let mut entries = std::fs::read_dir(data_dir).map_err(|source| StoreError::Io {
        path: data_dir.to_path_buf(),
        source,
    })?;
    if entries.next().is_none() {
        let why = "an empty directory: no node has run on it (is it the node's data_dir?)";
        return Err(StoreError::not_found(data_dir, why));
    }
    let _lock = DataDirLock::acquire(data_dir)?;
    super::refuse_unfinished_reshard(data_dir)?;
    let stores = ShardStore::open_existing(data_dir, shard_count)?;
    stores.iter().map(ShardStore::verify).collect()
}

/// Where the indexes put each row.
type Places = BTreeMap<RowId, Vec<Place>>;

/// The decoded status and lane of each row record (`None`: it does not
/// decode).
type Rows = BTreeMap<RowId, Option<(RowStatus, Option<LaneId>)>>;

/// Each hook's seq and id (`None`: it does not decode).
type Hooks = BTreeMap<u64, Option<String>>;

/// Each lane's head.
type Heads = BTreeMap<LaneId, RowId>;

impl ShardStore {
    /// Checks the shard's invariants in one read transaction (run it with
    /// no engine on the directory: a running shard's open write batch is
    /// not seen). It keeps every row id in memory while it checks.
    pub fn verify(&self) -> Result<Verified, StoreError> {
        let tenants = TenantTable::load(self)?;
        let rtxn = self.env.read_txn()?;
        let mut out = Verified::default();
        let places = self.index_places(&rtxn, &tenants, &mut out)?;
        let heads = self.lane_heads(&rtxn, &mut out)?;
        let (hooks, rows) = self.records(&rtxn, &mut out)?;
        out.hooks = hooks.len() as u64;
        check_rows(&rows, &places, &hooks, &mut out);
        check_lanes(&heads, &rows, &places, &mut out);
        check_references(&rows, &places, &hooks, &mut out);
        self.check_hook_index(&rtxn, &hooks, &rows, &mut out)?;
        for problem in super::dedupe::check(self, &rtxn)? {
            out.problem(problem);
        }
        for problem in super::tenant_bytes::check(self, &rtxn)? {
            out.problem(problem);
        }
        Ok(out)
    }

    /// Checks the hook-id index against the records: each hook that
    /// decodes has one entry naming its seq and listing each of its rows'
    /// sinks as not purged, and each entry names a stored hook of its id.
    fn check_hook_index(
        &self,
        rtxn: &RoTxn,
        hooks: &Hooks,
        rows: &Rows,
        out: &mut Verified,
    ) -> Result<(), StoreError> {
        for (seq, id) in hooks {
            let Some(id) = id else { continue };
            let entry = match hook_index::get(self, rtxn, id) {
                Ok(Some(entry)) => entry,
                Ok(None) => {
                    out.problem(format!("hook {seq} ({id}) is not in the hook-id index"));
                    continue;
                }
                Err(_) => {
                    out.problem(format!(
                        "the hook-id index entry of hook {seq} ({id}) does not decode"
                    ));
                    continue;
                }
            };
            if entry.seq != *seq {
                out.problem(format!(
                    "the hook-id index names seq {} for hook {seq} ({id})",
                    entry.seq
                ));
                continue;
            }
            let first = RowId {
                seq: *seq,
                sink_index: 0,
            };
            for row in rows
                .range(first..)
                .map(|(row, _)| *row)
                .take_while(|r| r.seq == *seq)
            {
                if !entry.sinks.contains(&(row.sink_index, false)) {
                    out.problem(format!(
                        "row {row} is not listed in its hook's hook-id index entry"
                    ));
                }
            }
        }
        for item in self.hook_ids.iter(rtxn)? {
            let (k, _) = item?;
            let id = String::from_utf8_lossy(k);
            let named = hook_index::get(self, rtxn, &id).ok().flatten();
            match named.and_then(|entry| hooks.get(&entry.seq)) {
                // A hook that does not decode is named above.
                Some(None) => {}
                Some(Some(stored)) if *stored == id => {}
                _ => out.problem(format!(
                    "the hook-id index entry {id:?} names no stored hook of that id"
                )),
            }
        }
        Ok(())
    }

    /// Reads the three indexes, counting their entries and naming the ones
    /// that do not decode.
    fn index_places(
        &self,
        rtxn: &RoTxn,
        tenants: &TenantTable,
        out: &mut Verified,
    ) -> Result<Places, StoreError> {
        let mut places = Places::new();
        // The value each index holds: a due key's size (u64), nothing for a
        // dead key, an in-flight marker's tenant and size (u32, u64).
        for (db, place, name, value_bytes) in [
            (&self.due, Place::Due, "due", 8),
            (&self.dead, Place::Dead, "dead", 0),
        ] {
            for item in db.iter(rtxn)? {
                let (k, v) = item?;
                let Some((tenant_no, _, row)) = parse_timed_key(k) else {
                    out.problem(format!("a {name} key of {} bytes", k.len()));
                    continue;
                };
                if tenants.names().get(tenant_no as usize).is_none() {
                    out.problem(format!("the {name} key of row {row} names no known tenant"));
                }
                if v.len() != value_bytes {
                    out.problem(format!(
                        "the {name} value of row {row} is {} bytes, not {value_bytes}",
                        v.len()
                    ));
                }
                out.count(place);
                places.entry(row).or_default().push(place);
            }
        }
        for item in self.inflight.iter(rtxn)? {
            let (k, v) = item?;
            let Some(row) = parse_row_key(k) else {
                out.problem(format!("an in-flight key of {} bytes", k.len()));
                continue;
            };
            if v.len() != 12 {
                out.problem(format!(
                    "the in-flight value of row {row} is {} bytes, not 12",
                    v.len()
                ));
            }
            out.count(Place::InFlight);
            places.entry(row).or_default().push(Place::InFlight);
        }
        for item in self.members.iter(rtxn)? {
            let (k, _) = item?;
            let Some((lane, row)) = parse_member_key(k) else {
                out.problem(format!("a lane member key of {} bytes", k.len()));
                continue;
            };
            out.count(Place::Member(lane));
            places.entry(row).or_default().push(Place::Member(lane));
        }
        Ok(places)
    }

    /// Reads the lanes and their heads.
    fn lane_heads(&self, rtxn: &RoTxn, out: &mut Verified) -> Result<Heads, StoreError> {
        let mut heads = Heads::new();
        for item in self.lanes.iter(rtxn)? {
            let (k, v) = item?;
            match (<[u8; LANE_ID_BYTES]>::try_from(k), parse_row_key(v)) {
                (Ok(id), Some(head)) => {
                    heads.insert(LaneId(id), head);
                }
                _ => out.problem(format!("a lane entry of {} and {} bytes", k.len(), v.len())),
            }
        }
        out.lanes = heads.len() as u64;
        Ok(heads)
    }

    /// Reads the hook and row records, naming the ones that do not decode
    /// and the rows whose index their hook has no sink's place for (a
    /// hook's key sorts before its rows').
    fn records(&self, rtxn: &RoTxn, out: &mut Verified) -> Result<(Hooks, Rows), StoreError> {
        let mut hooks = Hooks::new();
        let mut rows = Rows::new();
        let mut placed: Option<(u64, usize)> = None;
        for item in self.records.iter(rtxn)? {
            let (k, v) = item?;
            if is_hook_key(k) {
                let seq = u64_at(k, 0);
                let decoded = decode_placed_hook(seq, v).ok();
                if decoded.is_none() {
                    out.problem(format!("hook {seq} does not decode"));
                }
                let places = decoded.as_ref().and_then(|(_, places)| places.as_ref());
                placed = places.map(|places| (seq, places.len()));
                hooks.insert(seq, decoded.map(|(hook, _)| hook.id));
            } else if let Some(row) = parse_row_key(k) {
                if let Some((_, count)) = placed
                    .filter(|(seq, count)| *seq == row.seq && usize::from(row.sink_index) >= *count)
                {
                    out.problem(format!(
                        "row {row} has an index its hook keeps no sink's place for (it keeps {count})"
                    ));
                }
                rows.insert(row, decode_row(v).ok().map(|r| (r.status, r.lane)));
            } else {
                out.problem(format!("a record key of {} bytes", k.len()));
            }
        }
        Ok((hooks, rows))
    }
}

/// Each row is in the one index its status puts it in (a pending row
/// due, in flight or waiting in its own lane; a dead row dead) and has
/// its hook.
fn check_rows(rows: &Rows, places: &Places, hooks: &Hooks, out: &mut Verified) {
    for (row, decoded) in rows {
        let found = places.get(row).map(Vec::as_slice).unwrap_or_default();
        let Some((status, lane)) = decoded else {
            out.problem(format!("row {row} does not decode"));
            continue;
        };
        match (status, found) {
            (RowStatus::Pending, [Place::Due | Place::InFlight])
            | (RowStatus::Dead, [Place::Dead]) => {}
            (RowStatus::Pending, [Place::Member(member_of)]) if Some(*member_of) == *lane => {}
            (status, []) => out.problem(format!(
                "row {row} is {status:?} but in no index: it would never be delivered"
            )),
            (status, found) => out.problem(format!("row {row} is {status:?} but in {found:?}")),
        }
        if !hooks.contains_key(&row.seq) {
            out.problem(format!("row {row} has no hook"));
        }
    }
}

/// Each lane is headed by a pending row of its own that is due or in
/// flight, and each lane a row waits in has a head.
fn check_lanes(heads: &Heads, rows: &Rows, places: &Places, out: &mut Verified) {
    for (lane, head) in heads {
        let headed = rows.get(head).copied().flatten();
        let at = places.get(head).map(Vec::as_slice).unwrap_or_default();
        if !matches!(headed, Some((RowStatus::Pending, Some(l))) if l == *lane)
            || !matches!(at, [Place::Due | Place::InFlight])
        {
            out.problem(format!(
                "lane {} is headed by row {head}, which is not a pending row of that lane due or in flight",
                lane_hex(*lane)
            ));
        }
    }
    for (row, found) in places {
        for place in found {
            if let Place::Member(lane) = place {
                if !heads.contains_key(lane) {
                    out.problem(format!(
                        "row {row} waits in lane {}, which has no head: it would never be delivered",
                        lane_hex(*lane)
                    ));
                }
            }
        }
    }
}

/// No index entry names a row that does not exist, and no hook is left
/// without rows.
fn check_references(rows: &Rows, places: &Places, hooks: &Hooks, out: &mut Verified) {
    for row in places.keys().filter(|row| !rows.contains_key(row)) {
        out.problem(format!(
            "an index entry names row {row}, which does not exist"
        ));
    }
    let with_rows: BTreeSet<u64> = rows.keys().map(|r| r.seq).collect();
    for seq in hooks.keys().filter(|seq| !with_rows.contains(seq)) {
        out.problem(format!("hook {seq} has no rows left"));
    }
}

/// A lane id as hex, for messages.
fn lane_hex(lane: LaneId) -> String {
    hex::encode(lane.0)
}

#[cfg(test)]
mod tests {
    use super::super::hook_index::Indexed;
    use super::super::keys::{hook_key, row_key, timed_key};
    use super::super::record::{encode_hook, sample_hook as hook};
    use super::super::{write_commit, NewRow};
    use super::*;

    #[test]
    fn each_broken_invariant_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let (store, mut tenants) = super::super::fresh_store(dir.path());
        let mut wtxn = store.env.write_txn().unwrap();
        for seq in 1..=3 {
            let sinks = [NewRow::unordered(0, "http")];
            write_commit(&store, &mut wtxn, &mut tenants, &hook(seq), &sinks, 10).unwrap();
        }
        wtxn.commit().unwrap();
        assert_eq!(
            store.verify().unwrap(),
            Verified {
                hooks: 3,
                due: 3,
                ..Verified::default()
            },
            "a fresh commit is sound"
        );
        let row = |seq| RowId { seq, sink_index: 0 };
        let mut wtxn = store.env.write_txn().unwrap();
        // Row 1 loses its due key; row 2 gets a second one; a due key names
        // a row that does not exist; hook 7 has no rows.
        assert!(store
            .due
            .delete(&mut wtxn, &timed_key(0, 10, row(1)))
            .unwrap());
        store
            .due
            .put(&mut wtxn, &timed_key(0, 20, row(2)), &7u64.to_be_bytes())
            .unwrap();
        store
            .due
            .put(&mut wtxn, &timed_key(0, 10, row(9)), &7u64.to_be_bytes())
            .unwrap();
        store
            .records
            .put(&mut wtxn, &hook_key(7), &encode_hook(&hook(7)))
            .unwrap();
        // Row 3's due value is cut short (a scan could not read its size).
        store
            .due
            .put(&mut wtxn, &timed_key(0, 10, row(3)), b"bad")
            .unwrap();
        // Hook 3's index entry loses its sink; an entry names no hook.
        let unlisted = Indexed::committed(3, std::iter::empty());
        hook_index::put(&store, &mut wtxn, "h3", &unlisted).unwrap();
        let ghost = Indexed::committed(8, [0].into_iter());
        hook_index::put(&store, &mut wtxn, "ghost", &ghost).unwrap();
        wtxn.commit().unwrap();
        let found = store.verify().unwrap();
        assert_eq!(
            found.problems,
            vec![
                "the due value of row seq 3 sink 0 is 3 bytes, not 8",
                "row seq 1 sink 0 is Pending but in no index: it would never be delivered",
                "row seq 2 sink 0 is Pending but in [Due, Due]",
                "an index entry names row seq 9 sink 0, which does not exist",
                "hook 7 has no rows left",
                "row seq 3 sink 0 is not listed in its hook's hook-id index entry",
                "hook 7 (h7) is not in the hook-id index",
                "the hook-id index entry \"ghost\" names no stored hook of that id",
                // Hook 7 was written without its bytes counted.
                "tenant \"t\" (number 0) counts 126 stored bytes, but its hooks hold 168",
            ]
        );
        assert_eq!((found.hooks, found.due, found.problem_count), (4, 4, 9));
    }

    /// A hook that keeps its sinks' places names the rows it has no place
    /// for: hook 1 keeps two and has rows 0 and 1, hook 2 keeps one.
    #[test]
    fn a_row_whose_hook_keeps_no_place_for_its_index_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let (store, mut tenants) = super::super::fresh_store(dir.path());
        let mut wtxn = store.env.write_txn().unwrap();
        let rows = [NewRow::unordered(0, "http"), NewRow::unordered(1, "http")];
        let mut deltas = super::super::tenant_bytes::TenantDeltas::default();
        for (seq, places) in [(1, &[7, 8][..]), (2, &[7][..])] {
            let hook = hook(seq);
            let places = Some(places);
            let commit = super::super::write::Commit {
                hook: &hook,
                places,
                rows: &rows,
            };
            super::super::write::write_commit_counted(
                &store,
                &mut wtxn,
                &mut tenants,
                commit,
                10,
                &mut deltas,
            )
            .unwrap();
        }
        deltas.write(&store, &mut wtxn).unwrap();
        wtxn.commit().unwrap();
        assert_eq!(
            store.verify().unwrap().problems,
            ["row seq 2 sink 1 has an index its hook keeps no sink's place for (it keeps 1)"]
        );
    }

    #[test]
    fn broken_lanes_and_keys_of_the_wrong_size_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let (store, mut tenants) = super::super::fresh_store(dir.path());
        let mut wtxn = store.env.write_txn().unwrap();
        for (seq, key) in [(1, "a"), (2, "a"), (3, "b"), (4, "b"), (5, "c")] {
            let ordered = NewRow {
                lane_key: Some(key.into()),
                ..NewRow::unordered(0, "http")
            };
            write_commit(&store, &mut wtxn, &mut tenants, &hook(seq), &[ordered], 10).unwrap();
        }
        wtxn.commit().unwrap();
        let sound = store.verify().unwrap();
        assert_eq!(
            (
                sound.problems.len(),
                sound.due,
                sound.lanes,
                sound.lane_members
            ),
            (0, 3, 3, 2)
        );
        let row = |seq| RowId { seq, sink_index: 0 };
        let lane = |key| super::super::keys::lane_id(0, 0, "s", key);
        let mut wtxn = store.env.write_txn().unwrap();
        // Lane a loses its head entry: row 2 waits behind nothing.
        assert!(store.lanes.delete(&mut wtxn, &lane("a").0).unwrap());
        // Lane b names its member as its head.
        store
            .lanes
            .put(&mut wtxn, &lane("b").0, &row_key(row(4)))
            .unwrap();
        // Hook 5 is gone, its row left.
        assert!(store.records.delete(&mut wtxn, &hook_key(5)).unwrap());
        // Keys and values of sizes no index has.
        store.records.put(&mut wtxn, b"short", b"").unwrap();
        store.inflight.put(&mut wtxn, b"short", b"").unwrap();
        store
            .inflight
            .put(&mut wtxn, &row_key(row(9)), b"")
            .unwrap();
        store.members.put(&mut wtxn, b"short", b"").unwrap();
        store.lanes.put(&mut wtxn, b"short", b"").unwrap();
        wtxn.commit().unwrap();
        let found = store.verify().unwrap();
        let (a, b) = (lane_hex(lane("a")), lane_hex(lane("b")));
        assert_eq!(
            found.problems,
            [
                "the in-flight value of row seq 9 sink 0 is 0 bytes, not 12",
                "an in-flight key of 5 bytes",
                "a lane member key of 5 bytes",
                "a lane entry of 5 and 0 bytes",
                "a record key of 5 bytes",
                "row seq 5 sink 0 has no hook",
                &format!("lane {b} is headed by row seq 4 sink 0, which is not a pending row of that lane due or in flight"),
                &format!("row seq 2 sink 0 waits in lane {a}, which has no head: it would never be delivered"),
                "an index entry names row seq 9 sink 0, which does not exist",
                "the hook-id index entry \"h5\" names no stored hook of that id",
                "tenant \"t\" (number 0) counts 210 stored bytes, but its hooks hold 168",
            ]
        );
    }
}
