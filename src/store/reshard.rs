//! Resharding a stopped node's data directory to another shard count
//! (`goad reshard`), as when a node moves to a machine with more cores.
//!
//! Every tenant's hooks and rows move to the shard its id hashes to under
//! the new count, as they are: pending rows keep their due time, attempts,
//! first attempt, last error and replay; dead rows their reason and time;
//! ordering lanes their head and members in order. Within a tenant, commit
//! order (seq) is kept. Rows claimed when the node stopped are made due
//! first, as opening the node would. Replay counters are summed into the
//! new shard 0, so a replay's progress reads the same. Dedupe entries go
//! to their tenant's shard. Open breakers are
//! not carried over: they close, and the first open unparks the rows they
//! parked (each new shard is written with unparking under way, see
//! `core::unpark`).
//!
//! The steps, each safe to crash in:
//! 1. the old shards are recovered and verified (a store `goad verify`
//!    finds unsound is refused);
//! 2. the new shards are written under `<data_dir>/resharding/` and
//!    verified, and their hooks and rows counted against the old ones (a
//!    crash here leaves the old shards in place: resharding again starts
//!    over);
//! 3. the marker file `<data_dir>/RESHARDING` names both counts, synced;
//!    from then on an engine refuses the directory;
//! 4. the old `shard-<k>` directories move to `<data_dir>/before-reshard/`,
//!    then the new ones into their place (renames); resharding again with
//!    the marker present finishes the moves it names;
//! 5. the marker goes.
//!
//! The old shards stay in `before-reshard/` for the operator to delete.

use super::dedupe;
use super::hook_index::{self, Indexed};
use super::keys::{
    hook_key, is_hook_key, lane_parts, parse_member_key, parse_row_key, row_key, timed_key,
};
use super::record::{decode_hook_head, decode_row, encode_row, RowStatus};
use super::{lanes, tenant_bytes, DataDirLock, ShardStore, StoreError, TenantTable, Verified};
use super::{CLOCK_MS, UNPARKING};
use crate::core::{LaneId, RowId, LANE_ID_BYTES};
use crate::limits::MAX_SHARDS;
use crate::synced_dir;
use heed::{RoTxn, RwTxn};
use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// The marker of a reshard that is moving directories.
pub const MARKER_FILE: &str = "RESHARDING";
/// Where a reshard writes the new shards before they move into place.
pub const STAGING_DIR: &str = "resharding";
/// Where a reshard keeps the shards it replaced.
pub const BEFORE_DIR: &str = "before-reshard";

/// Hooks copied per write transaction of each new shard.
const HOOKS_PER_TXN: u64 = 10_000;

/// What a reshard did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resharded {
    pub from_shards: usize,
    pub to_shards: usize,
    /// Hooks and rows in the new shards (as many as in the old).
    pub hooks: u64,
    pub rows: u64,
    /// Where the old shards are kept.
    pub kept_at: PathBuf,
}

/// Reshards `data_dir` (no engine running on it) to `to_shards`, placing
/// each tenant by `shard_of` (the engine's). Rows claimed when the node
/// stopped are due at `now_ms`.
pub fn reshard(
    data_dir: &Path,
    to_shards: usize,
    max_shard_bytes: u64,
    shard_of: fn(&str, usize) -> usize,
    now_ms: u64,
) -> Result<Resharded, StoreError> {
    if !data_dir.is_dir() {
        return Err(refused(data_dir, "no data directory here".into()));
    }
    let _lock = DataDirLock::acquire(data_dir)?;
    if !(1..=MAX_SHARDS).contains(&to_shards) {
        let reason = format!("{to_shards} shards: the count must be from 1 to {MAX_SHARDS}");
        return Err(refused(data_dir, reason));
    }
    let from_shards = match read_marker(data_dir)? {
        Some((from, to)) if to == to_shards => from,
        Some((_, to)) => {
            let reason = format!("an unfinished reshard to {to} shards: run it again with {to}");
            return Err(refused(data_dir, reason));
        }
        None => stage(data_dir, to_shards, max_shard_bytes, shard_of, now_ms)?,
    };
    finish_moves(data_dir, from_shards, to_shards)?;
    let counted = count(data_dir, to_shards, max_shard_bytes)?;
    Ok(Resharded {
        from_shards,
        to_shards,
        hooks: counted.hooks,
        rows: counted.rows(),
        kept_at: data_dir.join(BEFORE_DIR),
    })
}

/// Steps 1 to 3: the new shards staged, checked against the old, and the
/// marker written. Returns the old shard count.
fn stage(
    data_dir: &Path,
    to_shards: usize,
    max_shard_bytes: u64,
    shard_of: fn(&str, usize) -> usize,
    now_ms: u64,
) -> Result<usize, StoreError> {
    let from = stored_shard_count(data_dir, max_shard_bytes)?
        .ok_or_else(|| refused(data_dir, "no shards to reshard".into()))?;
    if from == to_shards {
        return Err(refused(data_dir, format!("it already has {from} shards")));
    }
    let before = data_dir.join(BEFORE_DIR);
    if before.exists() {
        let reason = format!(
            "{} holds the shards an earlier reshard replaced: delete it (or move it away) first",
            before.display()
        );
        return Err(refused(data_dir, reason));
    }
    let staging = data_dir.join(STAGING_DIR);
    let copy = Copy {
        from,
        to: to_shards,
        max_shard_bytes,
        shard_of,
        now_ms,
    };
    let (old, new) = copy.all(data_dir, &staging)?;
    if (old.hooks, old.rows()) != (new.hooks, new.rows()) {
        let reason = format!(
            "the new shards hold {} hooks and {} rows, not the old {} and {} \
             (they are left in {} for inspection)",
            new.hooks,
            new.rows(),
            old.hooks,
            old.rows(),
            staging.display()
        );
        return Err(refused(data_dir, reason));
    }
    write_marker(data_dir, from, to_shards)?;
    Ok(from)
}

fn refused(data_dir: &Path, reason: String) -> StoreError {
    StoreError::Reshard {
        path: data_dir.to_path_buf(),
        reason: format!("cannot reshard: {reason}"),
    }
}

/// Refuses a data directory whose reshard is moving directories.
pub fn refuse_unfinished_reshard(data_dir: &Path) -> Result<(), StoreError> {
    match read_marker(data_dir)? {
        None => Ok(()),
        Some((from, to)) => Err(StoreError::Reshard {
            path: data_dir.to_path_buf(),
            reason: format!(
                "a reshard from {from} to {to} shards is unfinished: run `goad reshard --shards {to}` again"
            ),
        }),
    }
}

/// The shard count shard 0 was created with; `None` when there is none.
pub fn stored_shard_count(
    data_dir: &Path,
    max_shard_bytes: u64,
) -> Result<Option<usize>, StoreError> {
    if !ShardStore::has_store(data_dir, 0)? {
        return Ok(None);
    }
    // Opening with a count of 1 names the stored count when it differs.
    match ShardStore::open_sized(data_dir, 0, 1, max_shard_bytes) {
        Ok(_) => Ok(Some(1)),
        Err(StoreError::ShardCount { stored, .. }) => Ok(Some(stored as usize)),
        Err(e) => Err(e),
    }
}

/// Hooks and rows in some shards, as `verify` counts them.
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    hooks: u64,
    pending: u64,
    dead: u64,
}

impl Counts {
    fn rows(&self) -> u64 {
        self.pending + self.dead
    }

    fn add(&mut self, verified: &Verified) {
        self.hooks += verified.hooks;
        self.pending += verified.due + verified.in_flight + verified.lane_members;
        self.dead += verified.dead;
    }
}

/// Verifies each shard of `stores`; the counts, or the first unsound shard.
fn verified(stores: &[ShardStore], what: &str, dir: &Path) -> Result<Counts, StoreError> {
    let mut counts = Counts::default();
    for (k, store) in stores.iter().enumerate() {
        let verified = store.verify()?;
        if verified.problem_count > 0 {
            return Err(StoreError::Reshard {
                path: dir.to_path_buf(),
                reason: format!(
                    "cannot reshard: {what} shard {k} is not sound ({}): see `goad verify`",
                    verified.problems.join("; ")
                ),
            });
        }
        counts.add(&verified);
    }
    Ok(counts)
}

fn count(data_dir: &Path, shards: usize, max_shard_bytes: u64) -> Result<Counts, StoreError> {
    verified(
        &ShardStore::open_all(data_dir, shards, max_shard_bytes)?,
        "the new",
        data_dir,
    )
}

/// What a copy takes: the counts, the store bound, the tenant placement and
/// the time claimed rows come due.
struct Copy {
    from: usize,
    to: usize,
    max_shard_bytes: u64,
    shard_of: fn(&str, usize) -> usize,
    now_ms: u64,
}

impl Copy {
    /// Steps 1 and 2: the old shards recovered and verified, the new ones
    /// written under `staging` and verified; both counts. Every store is
    /// closed on return.
    fn all(&self, data_dir: &Path, staging: &Path) -> Result<(Counts, Counts), StoreError> {
        let old = ShardStore::open_all(data_dir, self.from, self.max_shard_bytes)?;
        // As a shard's open: no earlier than the old shards' clocks (see
        // `runtime::clock`), which the new ones start from.
        let mut now_ms = self.now_ms;
        for store in &old {
            now_ms = now_ms.max(store.clock_ms()?);
        }
        for store in &old {
            store.recover(&TenantTable::load(store)?, now_ms)?;
        }
        let old_counts = verified(&old, "old", data_dir)?;
        if staging.exists() {
            fs::remove_dir_all(staging).map_err(|source| io(staging, source))?;
        }
        let new = ShardStore::open_all(staging, self.to, self.max_shard_bytes)?;
        let mut targets = new.iter().map(Target::new).collect::<Result<Vec<_>, _>>()?;
        let mut replay_counters = BTreeMap::new();
        for store in &old {
            copy_shard(store, &mut targets, self.shard_of, &mut replay_counters)?;
        }
        let first = &mut targets[0];
        let store = first.store;
        let txn = first.txn()?;
        for (name, value) in &replay_counters {
            store.meta.put(txn, name, &value.to_be_bytes())?;
        }
        for target in &mut targets {
            target.finish(now_ms)?;
        }
        drop(targets);
        let new_counts = verified(&new, "the new", staging)?;
        Ok((old_counts, new_counts))
    }
}

/// A new shard being written: its open transaction, tenants and next seq.
struct Target<'s> {
    store: &'s ShardStore,
    txn: Option<RwTxn<'s>>,
    tenants: TenantTable,
    next_seq: u64,
}

impl<'s> Target<'s> {
    fn new(store: &'s ShardStore) -> Result<Target<'s>, StoreError> {
        Ok(Target {
            store,
            txn: None,
            tenants: TenantTable::load(store)?,
            next_seq: 1,
        })
    }

    fn txn(&mut self) -> Result<&mut RwTxn<'s>, StoreError> {
        Ok(match self.txn {
            Some(ref mut txn) => txn,
            None => self.txn.insert(self.store.env.write_txn()?),
        })
    }

    /// Commits what is written, with the next seq, unparking under way and
    /// the shards' clock (`clock_ms`).
    fn finish(&mut self, clock_ms: u64) -> Result<(), StoreError> {
        let next_seq = self.next_seq;
        let store = self.store;
        store.put_meta(self.txn()?, "next_seq", next_seq)?;
        store.put_meta(self.txn()?, CLOCK_MS, clock_ms)?;
        store.put_meta(self.txn()?, UNPARKING, 1)?;
        self.txn.take().expect("opened above").commit()?;
        Ok(())
    }
}

/// A pending row of an ordering lane, written, whose place in its lane
/// (head or member) waits until the old shard's lanes are read.
struct Laned {
    target: usize,
    lane: LaneId,
    row: RowId,
    tenant_no: u32,
    due_at_ms: u64,
    size_bytes: u64,
}

/// Copies every hook and row of `old` into the targets, its lanes and its
/// dedupe entries; adds its replay counters to `replay_counters`.
fn copy_shard(
    old: &ShardStore,
    targets: &mut [Target],
    shard_of: fn(&str, usize) -> usize,
    replay_counters: &mut BTreeMap<Vec<u8>, u64>,
) -> Result<(), StoreError> {
    let rtxn = old.env.read_txn()?;
    let laned = copy_records(old, &rtxn, targets, shard_of)?;
    place_in_lanes(old, &rtxn, targets, laned)?;
    for entry in dedupe::entries(old, &rtxn)? {
        let target = &mut targets[shard_of(&entry.tenant, targets.len())];
        let store = target.store;
        dedupe::put(
            store,
            target.txn()?,
            &entry.hash,
            entry.ends_at_ms,
            &entry.value,
        )?;
    }
    for entry in old.meta.prefix_iter(&rtxn, b"replay/")? {
        let (name, value) = entry?;
        let value: [u8; 8] = value.try_into().map_err(|_| corrupt("replay counter"))?;
        *replay_counters.entry(name.to_vec()).or_default() += u64::from_be_bytes(value);
    }
    Ok(())
}

/// The hook `copy_records` copied last: its old seq, and where it went.
#[derive(Clone, Copy)]
struct Copied {
    old_seq: u64,
    target: usize,
    seq: u64,
    tenant_no: u32,
}

/// Copies every hook and row of `old`, each tenant's in commit order, with
/// its index entry; returns the pending rows of lanes, placed next.
fn copy_records(
    old: &ShardStore,
    rtxn: &RoTxn,
    targets: &mut [Target],
    shard_of: fn(&str, usize) -> usize,
) -> Result<HashMap<(LaneId, u64), Laned>, StoreError> {
    let mut hook: Option<Copied> = None;
    let mut laned: HashMap<(LaneId, u64), Laned> = HashMap::new();
    let mut copied = 0u64;
    for entry in old.records.iter(rtxn)? {
        let (key, value) = entry?;
        if is_hook_key(key) {
            hook = Some(copy_hook(old, rtxn, targets, shard_of, key, value)?);
            copied += 1;
            if copied.is_multiple_of(HOOKS_PER_TXN) {
                for target in targets.iter_mut() {
                    if let Some(txn) = target.txn.take() {
                        txn.commit()?;
                    }
                }
            }
            continue;
        }
        let old_row = parse_row_key(key).ok_or_else(|| corrupt("record key"))?;
        // A row without its hook: verify refuses such a store first.
        if let Some(hook) = hook.filter(|h| h.old_seq == old_row.seq) {
            copy_row(targets, hook, old_row, value, &mut laned)?;
        }
    }
    Ok(laned)
}

/// Copies one hook to the target its tenant's shard is, under the
/// target's next seq, with its hook-id entry and its tenant's bytes.
fn copy_hook(
    old: &ShardStore,
    rtxn: &RoTxn,
    targets: &mut [Target],
    shard_of: fn(&str, usize) -> usize,
    key: &[u8],
    value: &[u8],
) -> Result<Copied, StoreError> {
    let head = decode_hook_head(value)?;
    let t = shard_of(&head.tenant, targets.len());
    let target = &mut targets[t];
    let store = target.store;
    let seq = target.next_seq;
    target.next_seq += 1;
    let txn = match target.txn {
        Some(ref mut txn) => txn,
        None => target.txn.insert(store.env.write_txn()?),
    };
    let tenant_no = target.tenants.number_or_assign(store, txn, &head.tenant)?;
    store.records.put(txn, &hook_key(seq), value)?;
    tenant_bytes::add(store, txn, tenant_no, value.len() as u64)?;
    // Verify refuses a hook without its entry first.
    let indexed = hook_index::get(old, rtxn, &head.id)?.ok_or_else(|| corrupt("hook-id index"))?;
    hook_index::put(store, txn, &head.id, &Indexed { seq, ..indexed })?;
    Ok(Copied {
        old_seq: u64::from_be_bytes(key.try_into().expect("a hook key")),
        target: t,
        seq,
        tenant_no,
    })
}

/// Copies one row of the hook copied last: a dead row with its dead
/// entry, a pending one with its due entry, or, when it waits in a lane,
/// into `laned` for `place_in_lanes`.
fn copy_row(
    targets: &mut [Target],
    hook: Copied,
    old_row: RowId,
    value: &[u8],
    laned: &mut HashMap<(LaneId, u64), Laned>,
) -> Result<(), StoreError> {
    let mut record = decode_row(value)?;
    let row = RowId {
        seq: hook.seq,
        sink_index: old_row.sink_index,
    };
    let old_lane = record.lane;
    record.lane = old_lane.map(|lane| with_tenant(lane, hook.tenant_no));
    let target = &mut targets[hook.target];
    let store = target.store;
    let txn = target.txn()?;
    store
        .records
        .put(txn, &row_key(row), &encode_row(&record))?;
    let timed = timed_key(hook.tenant_no, record.at_ms, row);
    match (record.status, old_lane, record.lane) {
        (RowStatus::Dead, _, _) => store.dead.put(txn, &timed, &[])?,
        (RowStatus::Pending, Some(old_lane), Some(lane)) => {
            let waiting = Laned {
                target: hook.target,
                lane,
                row,
                tenant_no: hook.tenant_no,
                due_at_ms: record.at_ms,
                size_bytes: record.size_bytes,
            };
            laned.insert((old_lane, hook.old_seq), waiting);
        }
        (RowStatus::Pending, _, _) => {
            store
                .due
                .put(txn, &timed, &record.size_bytes.to_be_bytes())?
        }
    }
    Ok(())
}

/// Places the pending rows of lanes as they were in `old`: each lane's head
/// first (due), then its members in order.
fn place_in_lanes(
    old: &ShardStore,
    rtxn: &RoTxn,
    targets: &mut [Target],
    mut laned: HashMap<(LaneId, u64), Laned>,
) -> Result<(), StoreError> {
    for entry in old.lanes.iter(rtxn)? {
        let (lane, head) = entry?;
        let lane = LaneId(lane.try_into().map_err(|_| corrupt("lane id"))?);
        let head = parse_row_key(head).ok_or_else(|| corrupt("lane head"))?;
        let waiting = laned
            .remove(&(lane, head.seq))
            .ok_or_else(|| corrupt("lane head row"))?;
        let target = &mut targets[waiting.target];
        let store = target.store;
        let txn = target.txn()?;
        assert!(lanes::join(store, txn, Some(waiting.lane), waiting.row)?);
        let due = timed_key(waiting.tenant_no, waiting.due_at_ms, waiting.row);
        store
            .due
            .put(txn, &due, &waiting.size_bytes.to_be_bytes())?;
    }
    for entry in old.members.iter(rtxn)? {
        let (key, _) = entry?;
        let (lane, row) = parse_member_key(key).ok_or_else(|| corrupt("lane member"))?;
        let waiting = laned
            .remove(&(lane, row.seq))
            .ok_or_else(|| corrupt("lane member row"))?;
        let target = &mut targets[waiting.target];
        let store = target.store;
        let joined_as_head = lanes::join(store, target.txn()?, Some(waiting.lane), waiting.row)?;
        assert!(!joined_as_head, "a member joins behind its lane's head");
    }
    if !laned.is_empty() {
        return Err(corrupt("pending row of a lane, neither head nor member"));
    }
    Ok(())
}

/// `lane` with its tenant number replaced (the rest of its id is the sink
/// index and a hash of the source and key, the same in any shard).
fn with_tenant(lane: LaneId, tenant_no: u32) -> LaneId {
    let (_, sink_index) = lane_parts(lane);
    let mut id = lane.0;
    id[..4].copy_from_slice(&tenant_no.to_be_bytes());
    debug_assert_eq!(lane_parts(LaneId(id)), (tenant_no, sink_index));
    debug_assert_eq!(id.len(), LANE_ID_BYTES);
    LaneId(id)
}

fn corrupt(what: &'static str) -> StoreError {
    StoreError::Corrupt(super::CorruptRecord { what })
}

fn io(path: &Path, source: std::io::Error) -> StoreError {
    StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// (from, to) of an unfinished reshard.
fn read_marker(data_dir: &Path) -> Result<Option<(usize, usize)>, StoreError> {
    let path = data_dir.join(MARKER_FILE);
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(io(&path, source)),
    };
    let mut counts = text.split_whitespace().map(str::parse::<usize>);
    match (counts.next(), counts.next()) {
        (Some(Ok(from)), Some(Ok(to))) => Ok(Some((from, to))),
        _ => Err(StoreError::Reshard {
            path: path.clone(),
            reason: format!("the reshard marker holds {text:?}, not two shard counts"),
        }),
    }
}

/// Writes the marker whole (synced, renamed into place, directory synced).
fn write_marker(data_dir: &Path, from: usize, to: usize) -> Result<(), StoreError> {
    let path = data_dir.join(MARKER_FILE);
    let temp = data_dir.join(format!("{MARKER_FILE}.tmp"));
    let write = || -> std::io::Result<()> {
        let mut file = fs::File::create(&temp)?;
        writeln!(file, "{from} {to}")?;
        file.sync_all()?;
        fs::rename(&temp, &path)?;
        synced_dir::sync(data_dir)
    };
    write().map_err(|source| io(&path, source))
}

/// Steps 4 and 5, from wherever a crash left them.
fn finish_moves(data_dir: &Path, from: usize, to: usize) -> Result<(), StoreError> {
    let before = data_dir.join(BEFORE_DIR);
    let staging = data_dir.join(STAGING_DIR);
    let rename =
        |from: PathBuf, to: PathBuf| fs::rename(&from, &to).map_err(|source| io(&from, source));
    synced_dir::create_all(&before).map_err(|source| io(&before, source))?;
    // Every old shard leaves before any new one arrives, so an old shard
    // not yet in `before-reshard/` is still in place.
    for k in 0..from {
        if !ShardStore::dir(&before, k).exists() {
            rename(ShardStore::dir(data_dir, k), ShardStore::dir(&before, k))?;
        }
    }
    for k in 0..to {
        if ShardStore::dir(&staging, k).exists() {
            rename(ShardStore::dir(&staging, k), ShardStore::dir(data_dir, k))?;
        }
    }
    let sync = |dir: &Path| synced_dir::sync(dir).map_err(|source| io(dir, source));
    sync(&before)?;
    sync(data_dir)?;
    // Gone already when a crash came after its removal, before the marker's.
    match fs::remove_dir_all(&staging) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(&staging, e)),
        _ => {}
    }
    let marker = data_dir.join(MARKER_FILE);
    fs::remove_file(&marker).map_err(|source| io(&marker, source))?;
    sync(data_dir)
}
