//! The shard store: one LMDB environment per shard (`<data_dir>/shard-<k>/`).
//!
//! # Layout
//! Twelve named databases; the keys are in [`keys`], the records in
//! [`record`]:
//! - `records`: seq → hook record (body verbatim), and (seq, sink index) →
//!   row record (pending or dead). A hook and its rows share one tree, the
//!   hook's 8-byte key sorting right before its rows' 10-byte keys: a commit
//!   appends at one right edge instead of two, and a scan reads a page's
//!   hooks and rows with one range scan (format 2; a format-1 store, with
//!   separate `hooks` and `rows` trees, is migrated when opened). Format 3
//!   added `lanes`, `members` and the row's lane; format 4 added
//!   `hook_ids`, `dedupe` and `dedupe_ends`, format 5 `tenant_bytes`. An
//!   older store is upgraded when opened, and older goad refuses a newer
//!   store (see `format`).
//! - `due`: (tenant_no, due_at_ms, seq, sink index) → size u64. A pending
//!   row that is not claimed has exactly one due key.
//! - `inflight`: (seq, sink index) → (tenant_no, size). A claimed row has
//!   exactly one in-flight marker and no due key.
//! - `dead`: (tenant_no, dead_at_ms, seq, sink index) → empty. A dead row
//!   has exactly one dead key and keeps its hook.
//! - `lanes`: lane id → the row key of the lane's head, for each ordering
//!   lane with rows (see [`lanes`]).
//! - `members`: (lane id, seq) → empty: the rows of an ordered sink waiting
//!   behind their lane's head. A pending row is due, in flight, or a
//!   member: exactly one.
//! - `hook_ids`: hook id → its seq and the sinks its commit wrote rows
//!   for, each marked when its row is purged (see [`hook_index`]). Every
//!   stored hook has exactly one entry. It finds a hook by id, and a
//!   hook's dead rows for a listing, replay or purge without walking
//!   `dead`.
//! - `dedupe`, `dedupe_ends`: the dedupe keys of sources with a
//!   `dedupe_window_ms`, and when each window ends (see [`dedupe`]).
//! - `tenants`: tenant id → tenant_no u32 (shard-local, never reused).
//! - `tenant_bytes`: tenant_no → the bytes its hook records hold, written
//!   with each hook and its deletion (see [`tenant_bytes`]).
//! - `meta`: `format` u32, `shard_count` u32, `shard_index` u32 (both
//!   checked at every open: a store opened with another count, or in
//!   another shard's directory, is refused), `next_seq` u64, each
//!   replay's counters `replay/<id>/{moved,delivered,dead,parked}` u64
//!   (see [`dead`]), each open breaker under `breaker/` (see
//!   [`breakers`]), `unparking` u64 (1) while the core unparks rows, and
//!   `parked` u64 (1), written with every park and deleted once unparking
//!   walked every tenant with breakers off (see `core::unpark`), and
//!   `paced_at` u64, the fingerprint of the sinks' rates the paced rows
//!   were paced at, deleted while the core paces them again (see
//!   `core::repace`), and `clock_ms` u64, the shard's clock when it last
//!   committed writes, where the next open's clock starts if the wall
//!   clock is behind it (see `runtime::clock`).
//!
//! # Durability
//! The shard thread is the environment's only writer. It keeps one write
//! transaction open across loop iterations (new hooks, claims, outcomes) and
//! commits it when committers wait on it, after `OUTCOME_FLUSH_MS` dirty, or
//! when it is large (see `runtime::step`). The environment is opened with
//! LMDB's default flags, so every commit is synced (data, then meta page)
//! before it returns: a committed hook survives power loss, and many commits
//! share one sync. Nothing is written to the file unsynced: no `NOSYNC`,
//! whose out-of-order page writes could corrupt the file on power loss; work
//! not yet committed is lost whole by a crash and only redelivers. A row
//! moves from one place to another (due, in flight, waiting in its lane,
//! dead, gone) inside one transaction, so it is always in exactly one.
//! A new store's directory, and its file's name in it, are synced when
//! they are made (see `synced_dir`): a synced commit in a file whose name
//! a power loss could take would be lost with it.
//!
//! # Corrupt records
//! A row whose record does not decode, or is not pending while a due key
//! names it, is quarantined when claimed: its due key becomes a dead key and
//! its bytes stay for inspection (listed as `undecodable delivery row`, never
//! revived). A row whose hook does not decode is dead-lettered. A second
//! due key of a row already claimed is dropped. Recovery leaves an
//! undecodable row's bytes alone. A due entry that does not decode is
//! stepped over by the scan and set aside in the same transaction (see
//! `repair`): a bad value is rewritten from the row's record, a key that
//! names no row is deleted and logged. So one bad record stalls neither the
//! shard's scans nor its opening. Recovery reads an in-flight marker that
//! does not decode from its row's records, and drops one whose key names no
//! row; only a marker whose hook cannot name its tenant fails the open
//! (dropping it would leave its row in no index). A dead key that names no
//! row is stepped over by listings and replays. `goad verify` names each.
//! No stored byte makes a thread panic.
//!
//! # Store size
//! A shard's store is bounded by `max_shard_bytes` (its LMDB map). New
//! hooks may fill 7/8 of it; the rest is kept for the writes that record
//! outcomes, which need pages before they free any, so a full store still
//! records the deliveries that empty it. Commits past the limit are
//! refused as `CommitError::StoreFull`. A store whose file is already
//! larger than a lowered bound allows is mapped at its file's size plus
//! that eighth. Within that, a tenant with a `max_stored_bytes` is
//! refused as `CommitError::TenantFull` once its hooks hold that many
//! bytes (counted in `tenant_bytes`), so one tenant's backlog cannot
//! refuse the others' hooks.
//!
//! # One engine at a time
//! An engine holds an exclusive lock on `<data_dir>/goad.lock` while it runs
//! (see [`DataDirLock`]); a second engine on the same directory is refused.
//!
//! # Recovery
//! Claims are in-flight markers. On open, every marker is turned back into
//! a due key at the open time in one synced transaction: every row claimed
//! when the process died is due again (at-least-once). A marker that does
//! not decode fails the open with an error saying so: dropping it would
//! leave its row in no index.

mod address_space;
mod backup;
pub mod breakers;
pub mod dead;
#[cfg(test)]
pub(crate) mod dead_fixture;
mod dead_keys;
pub mod dedupe;
mod fill;
mod format;
mod held_count;
pub mod hook_index;
mod hook_status;
pub mod index;
pub mod keys;
pub mod lanes;
mod lock;
pub mod purge;
pub mod record;
mod repair;
pub mod reshard;
mod tail;
pub mod tenant_bytes;
mod tenants;
mod usable_dir;
mod verify;
mod whole;
pub(crate) mod write;

pub use address_space::refuse_unmappable;
pub use dead::{DeadFilter, DeadItem, DeadLetter, DeadPosition, ReplayCounts, ReviveStep, Revived};
pub use fill::{DiskReserve, DiskRoom, IngestRoom, RoomBound};
pub use held_count::HeldBySink;
pub use hook_status::{HookStatus, SinkState, SinkStatus};
pub use index::{TxnIndex, Unreadable};
pub use lanes::NewHead;
pub use lock::DataDirLock;
pub use purge::{PurgeStep, Purged};
pub use record::{CorruptRecord, Hook, HookHead, RowRecord, RowStatus};
pub use repair::set_aside_unreadable;
pub use reshard::{refuse_unfinished_reshard, reshard, stored_shard_count, Resharded};
pub use tenants::TenantTable;
pub use usable_dir::refuse_unusable_data_dir;
pub use verify::{verify_data_dir, Verified};
pub use whole::BACKUP_UNFINISHED;
pub use write::{hold_in_flight, write_commit, NewRow};
pub(crate) use write::{CLOCK_MS, PACED_AT, PARKED, UNPARKING};

use crate::core::{RowId, TenantId};
use crate::limits::DEFAULT_MAX_SHARD_BYTES;
use format::FORMAT_VERSION;
use heed::types::Bytes;
use heed::{CommitOrAbort, Database, Env, EnvOpenOptions, WithoutTls};
use std::fmt;
use std::path::{Path, PathBuf};

/// An LMDB environment's data file in its shard's directory.
const DATA_FILE: &str = "data.mdb";

type Db = Database<'static, Bytes, Bytes>;

/// A store failure.
#[derive(Debug)]
#[non_exhaustive]
pub enum StoreError {
    /// LMDB failed (disk full, I/O error, map full, ...).
    Lmdb(heed::Error),
    /// A file or directory of the data directory could not be created,
    /// read, written, moved or removed.
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The data directory was made with another shard count.
    ShardCount {
        path: PathBuf,
        stored: u32,
        configured: u32,
    },
    /// Another engine runs on the data directory (see [`DataDirLock`]).
    InUse {
        path: PathBuf,
        /// The pid the holder wrote into the lock file.
        holder_pid: Option<u32>,
    },
    /// The data directory was written by another version of goad.
    Format { path: PathBuf, stored: u32 },
    /// A stored record does not decode.
    Corrupt(CorruptRecord),
    /// The data directory cannot be resharded, or a reshard is unfinished
    /// (see [`reshard()`]).
    Reshard { path: PathBuf, reason: String },
    /// A store file is shorter than the pages its last commit names (a
    /// copy cut short, a disk that lost its end): reading a missing page
    /// would fault the process, so the store is not opened.
    Truncated {
        path: PathBuf,
        file_bytes: u64,
        needed_bytes: u64,
    },
    /// A shard's directory holds another shard's store (directories
    /// renamed or mixed up): its tenants would be served by two shards.
    ShardIndex {
        path: PathBuf,
        stored: u32,
        opened_as: u32,
    },
    /// The data directory is a backup cut short (see
    /// [`BACKUP_UNFINISHED`]).
    UnfinishedBackup { path: PathBuf },
    /// A shard's store is missing from a data directory that holds others
    /// (see [`ShardStore::open_all`]): made anew, it would be empty.
    MissingShard {
        /// The shard's directory.
        path: PathBuf,
        shard: usize,
        shards: usize,
    },
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Lmdb(e) => write!(f, "store: {e}"),
            StoreError::Io { path, source } => write!(f, "store: {}: {source}", path.display()),
            StoreError::ShardCount { path, stored, configured } => write!(
                f,
                "{} was created with {stored} shards but the config asks for {configured}; set shards = {stored}, or reshard the stopped node to {configured} shards (goad reshard --shards {configured})",
                path.display()
            ),
            StoreError::InUse { path, holder_pid } => write!(
                f,
                "{} is in use by {}: one engine at a time may open a data directory",
                path.display(),
                lock::describe_holder(*holder_pid)
            ),
            StoreError::Format { path, stored } => {
                write!(f, "{} has store format {stored}; this goad reads format {FORMAT_VERSION}", path.display())
            }
            StoreError::Corrupt(e) => write!(f, "store: {e}"),
            StoreError::Reshard { path, reason } => write!(f, "{}: {reason}", path.display()),
            StoreError::Truncated {
                path,
                file_bytes,
                needed_bytes,
            } => write!(
                f,
                "{} holds {file_bytes} bytes but its last commit's pages end at byte {needed_bytes}: the file was cut short (a backup without its backup.json, a disk that lost its end); restore it from a whole backup",
                path.display()
            ),
            StoreError::ShardIndex { path, stored, opened_as } => write!(
                f,
                "{} holds the store of shard {stored}, not of shard {opened_as}: the shard directories were renamed or mixed up; put each store back in its own shard's directory (shard-{stored} for this one)",
                path.display()
            ),
            StoreError::UnfinishedBackup { path } => write!(
                f,
                "{} is a backup cut short (it holds {BACKUP_UNFINISHED}: the node stopped or failed while writing it), so a store or a file may be missing or cut short; take the backup again",
                path.display()
            ),
            StoreError::MissingShard { path, shard, shards } => write!(
                f,
                "{} holds no store: shard {shard} of the data directory's {shards} is missing (a copy or a backup cut short, a shard's directory deleted); restore the whole data directory: an engine started without it would lose the hooks that shard held",
                path.display()
            ),
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StoreError::Lmdb(e) => Some(e),
            StoreError::Io { source, .. } => Some(source),
            StoreError::Corrupt(e) => Some(e),
            _ => None,
        }
    }
}

impl StoreError {
    /// `path` is not what was asked for, for the reason `why`.
    pub(crate) fn not_found(path: &Path, why: &str) -> StoreError {
        StoreError::Io {
            path: path.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, why),
        }
    }
}

impl From<heed::Error> for StoreError {
    fn from(e: heed::Error) -> Self {
        StoreError::Lmdb(e)
    }
}

impl From<CorruptRecord> for StoreError {
    fn from(e: CorruptRecord) -> Self {
        StoreError::Corrupt(e)
    }
}

/// The databases of one shard environment. Cheap to clone; any thread may
/// read through it, only the shard thread writes.
#[derive(Clone)]
pub struct ShardStore {
    pub(crate) env: Env<WithoutTls>,
    /// Hooks and rows (see the layout above).
    pub(crate) records: Db,
    pub(crate) due: Db,
    pub(crate) inflight: Db,
    pub(crate) dead: Db,
    pub(crate) tenants: Db,
    pub(crate) meta: Db,
    /// Ordering lanes: lane id → its head row (see [`lanes`]).
    pub(crate) lanes: Db,
    /// (lane id, seq) → empty: the rows waiting behind their lane's head.
    pub(crate) members: Db,
    /// Hook id → its seq and sinks (see [`hook_index`]).
    pub(crate) hook_ids: Db,
    /// Ingest dedupe entries and their window ends (see [`dedupe`]).
    pub(crate) dedupe: Db,
    pub(crate) dedupe_ends: Db,
    /// Per tenant, the bytes its hooks hold (see [`tenant_bytes`]).
    pub(crate) tenant_bytes: Db,
    /// The most bytes new hooks may fill (see [`fill`]).
    ingest_limit_bytes: u64,
}

/// A row as a diagnostic snapshot lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowView {
    pub row: RowId,
    pub hook_id: String,
    pub tenant: TenantId,
    pub source_id: String,
    pub record: RowRecord,
    /// Its hook's sinks' places when it was committed (`Catalog::bind`
    /// reads its sink by them).
    pub sink_places: Option<record::SinkPlaces>,
    /// Claimed by a running or queued attempt when the snapshot was taken.
    pub in_flight: bool,
}

impl ShardStore {
    /// The LMDB environment (benches and tools open transactions on it).
    pub fn env(&self) -> &Env<WithoutTls> {
        &self.env
    }

    /// The directory of shard `index` under `data_dir`.
    pub fn dir(data_dir: &Path, index: usize) -> PathBuf {
        data_dir.join(format!("shard-{index}"))
    }

    /// Opens (creating if needed) shard `index` of `count`, checking the
    /// stored format and shard count, with the default `max_shard_bytes`.
    pub fn open(data_dir: &Path, index: usize, count: usize) -> Result<ShardStore, StoreError> {
        ShardStore::open_sized(data_dir, index, count, DEFAULT_MAX_SHARD_BYTES)
    }

    /// [`ShardStore::open`] with an LMDB map of `max_bytes`, or larger when
    /// the store's file already fills it (see "Store size" in the module docs).
    pub fn open_sized(
        data_dir: &Path,
        index: usize,
        count: usize,
        max_bytes: u64,
    ) -> Result<ShardStore, StoreError> {
        let path = ShardStore::dir(data_dir, index);
        let env = open_env(&path, max_bytes)?;
        let (dbs, format) = create_databases(&env, &path)?;
        let [records, due, inflight, dead, tenants, meta, lanes, members, hook_ids, dedupe, dedupe_ends, tenant_bytes] =
            dbs;
        let store = ShardStore {
            env,
            records,
            due,
            inflight,
            dead,
            tenants,
            meta,
            lanes,
            members,
            hook_ids,
            dedupe,
            dedupe_ends,
            tenant_bytes,
            ingest_limit_bytes: fill::ingest_limit_bytes(max_bytes),
        };
        // Format 3 added the lane databases (created empty) and the row's
        // lane field (absent on older rows); format 4 the hook-id index and
        // format 5 the tenants' byte counts, both built by the upgrade;
        // format 6 the hook record with its sinks' places (older hooks are
        // read without).
        if let Some(format) = format.filter(|f| *f < u64::from(FORMAT_VERSION)) {
            store.upgrade(&path, format)?;
        }
        store.check_meta(&path, index as u32, count as u32)?;
        Ok(store)
    }

    fn check_meta(&self, path: &Path, index: u32, count: u32) -> Result<(), StoreError> {
        let mut wtxn = self.env.write_txn()?;
        match self.meta_u64(&wtxn, "format")? {
            None => {
                self.put_meta(&mut wtxn, "format", FORMAT_VERSION.into())?;
                self.put_meta(&mut wtxn, "shard_count", count.into())?;
                self.put_meta(&mut wtxn, "shard_index", index.into())?;
            }
            Some(f) if f != u64::from(FORMAT_VERSION) => {
                return Err(StoreError::Format {
                    path: path.to_path_buf(),
                    stored: f as u32,
                })
            }
            Some(_) => {
                let stored = self.meta_u64(&wtxn, "shard_count")?.unwrap_or(0) as u32;
                if stored != count {
                    return Err(StoreError::ShardCount {
                        path: path.to_path_buf(),
                        stored,
                        configured: count,
                    });
                }
                let stored_index = self.meta_u64(&wtxn, "shard_index")?.map(|i| i as u32);
                if let Some(stored) = stored_index.filter(|stored| *stored != index) {
                    return Err(StoreError::ShardIndex {
                        path: path.to_path_buf(),
                        stored,
                        opened_as: index,
                    });
                }
            }
        }
        wtxn.commit()?;
        Ok(())
    }

    pub(crate) fn meta_u64(
        &self,
        txn: &heed::RoTxn,
        name: &str,
    ) -> Result<Option<u64>, StoreError> {
        meta_in(&self.meta, txn, name)
    }

    /// The shard's clock when it last committed writes (`meta`'s
    /// `clock_ms`: see the module docs); 0 for a store that never did.
    pub fn clock_ms(&self) -> Result<u64, StoreError> {
        let rtxn = self.env.read_txn()?;
        Ok(self.meta_u64(&rtxn, CLOCK_MS)?.unwrap_or(0))
    }

    pub(crate) fn put_meta(
        &self,
        txn: &mut heed::RwTxn,
        name: &str,
        value: u64,
    ) -> Result<(), StoreError> {
        Ok(self.meta.put(txn, name.as_bytes(), &value.to_be_bytes())?)
    }

    /// Turns every in-flight marker back into a due key at `now_ms`, in one
    /// synced transaction. Returns how many rows were recovered. A marker
    /// that does not decode is read from its row's records instead, and one
    /// whose key names no row is dropped (both logged; see `repair`). A
    /// marker whose hook cannot name its tenant either is an error: dropping
    /// it would leave its row in no index, never delivered.
    pub fn recover(&self, tenants: &TenantTable, now_ms: u64) -> Result<u64, StoreError> {
        let mut wtxn = self.env.write_txn()?;
        let mut claimed = Vec::new();
        for item in self.inflight.iter(&wtxn)? {
            let (k, v) = item?;
            let Some(row) = keys::parse_row_key(k) else {
                repair::log_unnamed_marker(k, v);
                continue;
            };
            let decoded = keys::parse_inflight_value(v).and_then(|(tenant_no, size_bytes)| {
                Some((tenants.names().get(tenant_no as usize)?.clone(), size_bytes))
            });
            let (tenant, size_bytes) = match decoded {
                Some(decoded) => decoded,
                None => repair::claimed_row_from_records(self, &wtxn, tenants, row, v)?.ok_or(
                    CorruptRecord {
                        what: "in-flight marker",
                    },
                )?,
            };
            claimed.push((row, tenant, size_bytes));
        }
        for (row, tenant, size_bytes) in &claimed {
            write::put_pending_due(self, &mut wtxn, tenants, row, tenant, now_ms, *size_bytes)?;
        }
        self.inflight.clear(&mut wtxn)?;
        wtxn.commit()?;
        Ok(claimed.len() as u64)
    }

    /// Every row with its hook's ids: a diagnostic snapshot for tests and tools.
    pub fn rows(&self) -> Result<Vec<RowView>, StoreError> {
        let rtxn = self.env.read_txn()?;
        let mut out = Vec::new();
        for item in self.records.iter(&rtxn)? {
            let (k, v) = item?;
            if keys::is_hook_key(k) {
                continue;
            }
            let row = keys::parse_row_key(k).ok_or(CorruptRecord { what: "row" })?;
            let record = record::decode_row(v)?;
            let (hook, sink_places) = match self.records.get(&rtxn, &keys::hook_key(row.seq))? {
                Some(h) => record::decode_placed_hook_head(h)?,
                None => continue,
            };
            let in_flight = self.inflight.get(&rtxn, &keys::row_key(row))?.is_some();
            out.push(RowView {
                row,
                hook_id: hook.id,
                tenant: hook.tenant,
                source_id: hook.source_id.to_string(),
                record,
                sink_places,
                in_flight,
            });
        }
        Ok(out)
    }

    /// One row, as committed, if it exists.
    pub fn row(&self, row: RowId) -> Result<Option<RowRecord>, StoreError> {
        let rtxn = self.env.read_txn()?;
        self.row_in(&rtxn, row)
    }

    /// One row as `txn` sees it, if it exists.
    pub fn row_in(&self, txn: &heed::RoTxn, row: RowId) -> Result<Option<RowRecord>, StoreError> {
        let bytes = self.records.get(txn, &keys::row_key(row))?;
        Ok(bytes.map(record::decode_row).transpose()?)
    }

    /// How many hooks are stored (a diagnostic: it reads every record key).
    pub fn hook_count(&self) -> Result<u64, StoreError> {
        let rtxn = self.env.read_txn()?;
        let mut count = 0;
        for item in self.records.lazily_decode_data().iter(&rtxn)? {
            count += u64::from(keys::is_hook_key(item?.0));
        }
        Ok(count)
    }

    /// How many rows are due (pending and unclaimed) in this shard.
    pub fn due_count(&self) -> Result<u64, StoreError> {
        let rtxn = self.env.read_txn()?;
        Ok(self.due.len(&rtxn)?)
    }

    /// How many rows wait behind the heads of their ordering lanes.
    pub fn lane_member_count(&self) -> Result<u64, StoreError> {
        let rtxn = self.env.read_txn()?;
        Ok(self.members.len(&rtxn)?)
    }

    /// How many rows are pending (due or waiting out a backoff, claimed,
    /// or waiting in their ordering lanes) as of the last commit, read in
    /// one transaction: a row moves between those places inside one, so
    /// none is counted twice or missed.
    pub fn pending_count(&self) -> Result<u64, StoreError> {
        let rtxn = self.env.read_txn()?;
        let [due, claimed, in_lanes] =
            [self.due, self.inflight, self.members].map(|db| db.len(&rtxn));
        Ok(due? + claimed? + in_lanes?)
    }

    /// How many rows are dead-lettered in this shard.
    pub fn dead_count(&self) -> Result<u64, StoreError> {
        let rtxn = self.env.read_txn()?;
        Ok(self.dead.len(&rtxn)?)
    }

    /// How many rows are due (pending and unclaimed) per tenant. It reads
    /// every due key: an admin call, not a hot path.
    pub fn due_by_tenant(&self) -> Result<Vec<(TenantId, u64)>, StoreError> {
        let table = TenantTable::load(self)?;
        let rtxn = self.env.read_txn()?;
        let mut out = Vec::new();
        for (no, name) in table.names().iter().enumerate() {
            let low = keys::timed_key(no as u32, 0, RowId::MIN);
            let high = keys::timed_key(no as u32, u64::MAX, RowId::MAX);
            let bounds = (
                std::ops::Bound::Included(&low[..]),
                std::ops::Bound::Included(&high[..]),
            );
            let count = self.due.range(&rtxn, &bounds)?.count() as u64;
            out.push((name.clone(), count));
        }
        Ok(out)
    }

    /// The bytes each tenant's hooks hold (see [`tenant_bytes`]), of the
    /// tenants that hold any.
    pub fn stored_by_tenant(&self) -> Result<Vec<(TenantId, u64)>, StoreError> {
        let table = TenantTable::load(self)?;
        let rtxn = self.env.read_txn()?;
        let stored = tenant_bytes::stored(self, &rtxn)?;
        Ok(stored
            .into_iter()
            .filter_map(|(no, bytes)| Some((table.names().get(no as usize)?.clone(), bytes)))
            .collect())
    }

    /// The earliest due time of any pending, unclaimed row.
    pub fn oldest_due_ms(&self) -> Result<Option<u64>, StoreError> {
        let rtxn = self.env.read_txn()?;
        let mut oldest: Option<u64> = None;
        // The due index is ordered by tenant first: take each tenant's first key.
        let mut cursor_tenant = 0u32;
        loop {
            let start = keys::timed_key(
                cursor_tenant,
                0,
                RowId {
                    seq: 0,
                    sink_index: 0,
                },
            );
            let Some(item) = self
                .due
                .range(
                    &rtxn,
                    &(
                        std::ops::Bound::Included(&start[..]),
                        std::ops::Bound::Unbounded,
                    ),
                )?
                .next()
            else {
                break;
            };
            let (k, _) = item?;
            let (tenant_no, due_at_ms, _) =
                keys::parse_timed_key(k).ok_or(CorruptRecord { what: "due" })?;
            oldest = Some(oldest.map_or(due_at_ms, |o| o.min(due_at_ms)));
            match tenant_no.checked_add(1) {
                Some(next) => cursor_tenant = next,
                None => break,
            }
        }
        Ok(oldest)
    }
}

/// The databases of a shard's store, in the order `open_sized` takes them.
const DATABASES: [&str; 12] = [
    "records",
    "due",
    "inflight",
    "dead",
    "tenants",
    "meta",
    "lanes",
    "members",
    "hook_ids",
    "dedupe",
    "dedupe_ends",
    "tenant_bytes",
];

/// Opens (creating the directory if needed) the LMDB environment at
/// `path` with a map of `max_bytes`, or larger when its file fills that.
fn open_env(path: &Path, max_bytes: u64) -> Result<Env<WithoutTls>, StoreError> {
    let io_error = |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    };
    crate::synced_dir::create_all(path).map_err(io_error)?;
    let new = !has_data_file(path).map_err(io_error)?;
    let mut options = EnvOpenOptions::new().read_txn_without_tls();
    options
        .map_size(fill::map_bytes_for(path, max_bytes))
        .max_dbs(16)
        .max_readers(256);
    // SAFETY: heed requires that one process does not open the same
    // environment twice; an engine opens each shard directory once, under
    // the data directory's lock, and LMDB's lock file guards against
    // other processes' readers.
    let env = unsafe { options.open(path)? };
    if new {
        crate::synced_dir::sync(path).map_err(io_error)?;
    }
    refuse_truncated(&env, path)?;
    Ok(env)
}

/// Whether the shard directory `dir` holds a store file.
fn has_data_file(dir: &Path) -> std::io::Result<bool> {
    dir.join(DATA_FILE).try_exists()
}

/// The length of the store file in the shard directory `dir`.
fn data_file_bytes(dir: &Path) -> std::io::Result<u64> {
    Ok(std::fs::metadata(dir.join(DATA_FILE))?.len())
}

/// Refuses a store whose file ends before a page its last commit uses:
/// LMDB reads pages through its map, and a page past the file's end would
/// kill the process with SIGBUS at its first read. The file may end
/// before LMDB's last page when the pages past its end are free (see
/// [`tail`]).
fn refuse_truncated(env: &Env<WithoutTls>, path: &Path) -> Result<(), StoreError> {
    let file = path.join(DATA_FILE);
    let io_error = |source| StoreError::Io {
        path: file.clone(),
        source,
    };
    let file_bytes = data_file_bytes(path).map_err(io_error)?;
    let page_bytes = u64::from(env.unnamed_database_stat().page_size);
    let last_page = env.info().last_page_number as u64;
    let needed_bytes = (last_page + 1) * page_bytes;
    let whole = file_bytes >= needed_bytes || {
        let opened = std::fs::File::open(&file).map_err(io_error)?;
        let file_pages = file_bytes / page_bytes;
        tail::missing_pages_are_free(&opened, page_bytes as usize, file_pages, last_page)
            .map_err(io_error)?
    };
    if !whole {
        return Err(StoreError::Truncated {
            path: file,
            file_bytes,
            needed_bytes,
        });
    }
    Ok(())
}

/// Creates the store's databases that are missing, and moves a format-1
/// store's two trees into `records`, in one transaction. Returns the
/// databases and the stored format (none for a new store).
fn create_databases(
    env: &Env<WithoutTls>,
    path: &Path,
) -> Result<([Db; DATABASES.len()], Option<u64>), StoreError> {
    let wtxn = env.write_txn()?;
    let mut migrated = None;
    let mut format = None;
    let dbs = env
        .create_databases_and_commit(wtxn, |opener, wtxn| -> Result<_, StoreError> {
            let mut dbs = Vec::with_capacity(DATABASES.len());
            for name in DATABASES {
                dbs.push(opener.create_database::<Bytes, Bytes>(wtxn, Some(name))?);
            }
            let dbs: [Database<Bytes, Bytes>; DATABASES.len()] =
                dbs.try_into().expect("one database per name");
            let [records, _, _, _, _, meta, ..] = &dbs;
            format = meta_in(meta, wtxn, "format")?;
            if format == Some(1) {
                migrated = Some(format::move_format_1_trees(opener, wtxn, records)?);
            }
            Ok(CommitOrAbort::<_, ()>::Commit(dbs))
        })?
        .unwrap_commit();
    if let Some(moved) = migrated {
        crate::log::info(
            "store migrated from format 1 (hooks and rows now share one tree)",
            &[("path", &path.display()), ("records", &moved)],
        );
    }
    Ok((dbs, format))
}

fn meta_in(
    meta: &Database<'_, Bytes, Bytes>,
    txn: &heed::RoTxn,
    name: &str,
) -> Result<Option<u64>, StoreError> {
    let corrupt = || CorruptRecord { what: "meta" };
    meta.get(txn, name.as_bytes())?
        .map(|v| Ok(u64::from_be_bytes(v.try_into().map_err(|_| corrupt())?)))
        .transpose()
}

/// A new shard store (shard 0 of 1) in `dir` and its tenants, for tests.
#[cfg(test)]
pub(crate) fn fresh_store(dir: &Path) -> (ShardStore, TenantTable) {
    let store = ShardStore::open(dir, 0, 1).unwrap();
    let tenants = TenantTable::load(&store).unwrap();
    (store, tenants)
}
