//! How full a shard's store is, and how much of it new hooks may fill.
//!
//! LMDB's map (`max_shard_bytes`) bounds a store: a write that needs a page
//! past it fails with `MDB_MAP_FULL`. That includes the writes that record
//! deliveries, since a B-tree delete copies the pages it changes before the
//! old ones are freed at commit. A store filled to its map by hooks for a
//! sink that is down would fail every batch after, the outcomes of its
//! deliveries too: each delivery would be made again and never recorded.
//! So new hooks may fill only 7/8 of the map; the last eighth is for
//! claims, outcomes and replays, which keep the store's size or shrink it.
//! A commit that would pass the limit is refused (`CommitError::StoreFull`)
//! until deliveries free room.
//!
//! A store whose file is already larger than that (its `max_shard_bytes`
//! was lowered) is mapped at its file's size plus the same eighth: it takes
//! no new hooks until deliveries shrink it below the limit, but it records
//! them.
//!
//! The disk can fill first: the map is address space, and the file grows
//! into whatever the file system has. A write that finds the disk full
//! fails as a map-full one does (LMDB reports a short write as an I/O
//! error), so new hooks leave `min_free_disk_bytes` of the file system
//! free as well ([`DiskRoom`]). They may fill the pages free inside the
//! store's file, which LMDB reuses before it grows the file, and the
//! store's share (one of `shards`, which share the file system) of what
//! the file system has free past that reserve; once the file has grown
//! into the reserve, its share of that growth is taken off the free pages
//! (see [`DiskReserve::room`]).

use super::{ShardStore, StoreError};
use crate::limits::SHARD_OUTCOME_RESERVE_DIVISOR;
use heed::RoTxn;
use std::path::Path;

/// What new hooks leave free on the file system holding the data
/// directory, which the node's shards share.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiskReserve {
    /// `min_free_disk_bytes`.
    pub min_free_bytes: u64,
    /// The shards whose stores share the file system.
    pub shards: usize,
}

/// What a store's new hooks may fill of the file system holding it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiskRoom {
    /// The pages free inside the store's file, and the store's share of
    /// what the file system has free past the reserve.
    pub room_bytes: u64,
    /// What the file system has free for an unprivileged writer.
    pub available_bytes: u64,
}

impl DiskReserve {
    /// The room of a store whose file is `file_bytes` long with
    /// `used_bytes` of it in use, on a file system with `available_bytes`
    /// free. Below the reserve, the deficit's share is taken off the free
    /// pages: LMDB grows the file beside them (a hook's overflow pages need
    /// a free run, and pages the last transactions freed wait a while), so
    /// a file that grew into the reserve leaves new hooks that much less.
    pub fn room(&self, file_bytes: u64, used_bytes: u64, available_bytes: u64) -> DiskRoom {
        let inside_bytes = i128::from(file_bytes.saturating_sub(used_bytes));
        let past_reserve_bytes = i128::from(available_bytes) - i128::from(self.min_free_bytes);
        let share_bytes = past_reserve_bytes / self.shards.max(1) as i128;
        let room_bytes = (inside_bytes + share_bytes).clamp(0, i128::from(u64::MAX));
        DiskRoom {
            room_bytes: room_bytes as u64,
            available_bytes,
        }
    }
}

/// What new hooks may fill of a store, and the nearer of its limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IngestRoom {
    pub room_bytes: u64,
    pub bound: RoomBound,
}

/// The limit that bounds new hooks: the store's map, or the disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoomBound {
    /// What new hooks may fill of the map (7/8 of it).
    Map { limit_bytes: u64 },
    /// What the file system has free for an unprivileged writer.
    Disk { available_bytes: u64 },
}

/// The size of the file system holding `path` and what an unprivileged
/// writer may still fill of it, in bytes; `None` where the OS does not say.
fn disk_bytes(path: &Path) -> Option<DiskBytes> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: `statvfs` is plain numbers; the call writes at most its size.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is NUL-terminated and `stat` is a valid out-pointer.
    let read = unsafe { libc::statvfs(path.as_ptr(), &mut stat) };
    #[allow(clippy::unnecessary_cast)] // the field types differ by platform
    let block_bytes = stat.f_frsize as u64;
    #[allow(clippy::unnecessary_cast)]
    (read == 0).then(|| DiskBytes {
        total: stat.f_blocks as u64 * block_bytes,
        available: stat.f_bavail as u64 * block_bytes,
    })
}

struct DiskBytes {
    total: u64,
    available: u64,
}

impl DiskReserve {
    /// At open: says so in the log when the file system holding `store`
    /// has less free than the reserve (new hooks are refused until room is
    /// freed), or is smaller than it (every new hook would be).
    pub fn check(&self, store: &ShardStore) {
        let Some(disk) = disk_bytes(store.env.path()) else {
            return;
        };
        let fields: &[(&str, &dyn std::fmt::Display)] = &[
            ("path", &store.env.path().display()),
            ("available_bytes", &disk.available),
            ("total_bytes", &disk.total),
            ("min_free_disk_bytes", &self.min_free_bytes),
        ];
        if disk.total <= self.min_free_bytes {
            crate::log::error(
                "min_free_disk_bytes is more than the file system holding the data directory has: every new hook is refused (503 disk_full); lower it, or move data_dir to a larger disk",
                fields,
            );
        } else if disk.available <= self.min_free_bytes {
            crate::log::warn(
                "the file system holding the data directory has less free than min_free_disk_bytes: new hooks are refused (503 disk_full) until deliveries or the operator free room",
                fields,
            );
        }
    }
}

/// The OS page size, which LMDB's map size must be a multiple of.
fn page_bytes() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let page_bytes = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(page_bytes).unwrap_or(4096)
}

/// The LMDB map size for the store in `dir` bounded by `max_bytes`.
pub(super) fn map_bytes_for(dir: &Path, max_bytes: u64) -> usize {
    let file_bytes = super::data_file_bytes(dir).unwrap_or(0);
    let needed_bytes = file_bytes + file_bytes / (SHARD_OUTCOME_RESERVE_DIVISOR - 1);
    if needed_bytes <= max_bytes {
        return map_bytes(max_bytes);
    }
    crate::log::warn(
        "the shard's store is larger than max_shard_bytes allows new hooks to fill; it takes none until deliveries free room",
        &[
            ("path", &dir.display()),
            ("file_bytes", &file_bytes),
            ("max_shard_bytes", &max_bytes),
        ],
    );
    map_bytes(needed_bytes)
}

/// The LMDB map size for `max_bytes`: whole OS pages.
pub(super) fn map_bytes(max_bytes: u64) -> usize {
    let page_bytes = page_bytes();
    max_bytes.div_ceil(page_bytes).saturating_mul(page_bytes) as usize
}

/// The most bytes new hooks may fill in a store of `max_bytes`.
pub(super) fn ingest_limit_bytes(max_bytes: u64) -> u64 {
    let map_bytes = map_bytes(max_bytes) as u64;
    map_bytes - map_bytes / SHARD_OUTCOME_RESERVE_DIVISOR
}

impl ShardStore {
    /// The bytes of the pages the store's trees hold as `txn` sees them
    /// (the open write transaction included). Pages LMDB has freed are not
    /// counted: it reuses them before it grows the file.
    pub fn used_bytes(&self, txn: &RoTxn) -> Result<u64, StoreError> {
        let main = self.env.unnamed_database_stat();
        let mut pages = main.branch_pages + main.leaf_pages + main.overflow_pages;
        for db in [
            &self.records,
            &self.due,
            &self.inflight,
            &self.dead,
            &self.tenants,
            &self.meta,
            &self.lanes,
            &self.members,
            &self.hook_ids,
            &self.dedupe,
            &self.dedupe_ends,
            &self.tenant_bytes,
        ] {
            let stat = db.stat(txn)?;
            pages += stat.branch_pages + stat.leaf_pages + stat.overflow_pages;
        }
        Ok(pages as u64 * u64::from(main.page_size))
    }

    /// [`ShardStore::used_bytes`] as last committed.
    pub fn committed_used_bytes(&self) -> Result<u64, StoreError> {
        let rtxn = self.env.read_txn()?;
        self.used_bytes(&rtxn)
    }

    /// The most bytes new hooks may fill: `max_shard_bytes` less the part
    /// kept for recording outcomes.
    pub fn ingest_limit_bytes(&self) -> u64 {
        self.ingest_limit_bytes
    }

    /// What new hooks may fill of the file system holding the store, with
    /// `used_bytes` of its file in use; `None` where the OS does not say.
    pub fn disk_room(&self, used_bytes: u64, reserve: DiskReserve) -> Option<DiskRoom> {
        let available_bytes = self.disk_available_bytes()?;
        let file_bytes = super::data_file_bytes(self.env.path()).ok()?;
        Some(reserve.room(file_bytes, used_bytes, available_bytes))
    }

    /// What new hooks may fill with `used_bytes` of the store in use: the
    /// nearer of the map's limit and the disk's (see [`DiskReserve::room`];
    /// the map's alone where the OS does not say what the disk has).
    pub fn ingest_room(&self, used_bytes: u64, reserve: DiskReserve) -> IngestRoom {
        let limit_bytes = self.ingest_limit_bytes();
        let map = IngestRoom {
            room_bytes: limit_bytes.saturating_sub(used_bytes),
            bound: RoomBound::Map { limit_bytes },
        };
        match self.disk_room(used_bytes, reserve) {
            Some(disk) if disk.room_bytes < map.room_bytes => IngestRoom {
                room_bytes: disk.room_bytes,
                bound: RoomBound::Disk {
                    available_bytes: disk.available_bytes,
                },
            },
            _ => map,
        }
    }

    /// What the file system holding the store has free for an
    /// unprivileged writer; `None` where the OS does not say.
    pub fn disk_available_bytes(&self) -> Option<u64> {
        disk_bytes(self.env.path()).map(|disk| disk.available)
    }
}

#[cfg(test)]
mod tests {
    use super::super::record::sample_hook;
    use super::super::{write_commit, TenantTable};
    use super::*;
    use crate::store::NewRow;
    use heed::RwTxn;

    /// New hooks may fill the pages free inside the file and the store's
    /// share of the file system past the reserve; below the reserve, the
    /// deficit's share is taken off the pages inside.
    #[test]
    fn the_disk_room_is_the_free_pages_and_a_share_past_the_reserve() {
        let reserve = DiskReserve {
            min_free_bytes: 100,
            shards: 4,
        };
        let room = |file, used, available| reserve.room(file, used, available).room_bytes;
        assert_eq!(room(1_000, 600, 500), 400 + 100);
        assert_eq!(room(1_000, 600, 100), 400);
        assert_eq!(room(1_000, 600, 0), 400 - 25);
        assert_eq!(room(1_000, 990, 0), 0);
        // Pages taken in an open transaction past the file's end.
        assert_eq!(room(1_000, 1_200, 900), 200);
        let alone = DiskReserve {
            shards: 1,
            ..reserve
        };
        assert_eq!(alone.room(0, 0, 900).room_bytes, 800);
        assert_eq!(alone.room(0, 0, 900).available_bytes, 900);
        let past_the_disk = DiskReserve {
            min_free_bytes: u64::MAX,
            shards: 1,
        };
        assert_eq!(past_the_disk.room(1 << 40, 0, 0).room_bytes, 0);
    }

    /// The real file system: a store in a temporary directory has room
    /// for what its file system has free past the reserve, and none when
    /// the reserve is a terabyte larger than the disk.
    #[test]
    fn a_store_measures_the_file_system_holding_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = ShardStore::open_sized(dir.path(), 0, 1, 16 << 20).unwrap();
        let used_bytes = store.committed_used_bytes().unwrap();
        let reserve = |min_free_bytes| DiskReserve {
            min_free_bytes,
            shards: 1,
        };
        let room = store.disk_room(used_bytes, reserve(16 << 20)).unwrap();
        assert!(room.available_bytes > 16 << 20, "{room:?}");
        assert!(room.room_bytes > 0, "{room:?}");
        let past_the_disk = reserve(room.available_bytes + (1 << 40));
        let room = store.disk_room(used_bytes, past_the_disk).unwrap();
        assert_eq!(room.room_bytes, 0);
    }

    #[test]
    fn the_limit_leaves_an_eighth_of_the_map_in_whole_pages() {
        let page_bytes = page_bytes();
        assert_eq!(map_bytes(16 << 20), 16 << 20);
        assert_eq!(map_bytes((16 << 20) + 1) as u64, (16 << 20) + page_bytes);
        assert_eq!(ingest_limit_bytes(16 << 20), 14 << 20);
    }

    /// Writes `count` hooks of 8,000 bytes, one row each.
    fn fill(store: &ShardStore, wtxn: &mut RwTxn, count: u64) {
        let mut tenants = TenantTable::load(store).unwrap();
        for seq in 1..=count {
            let mut hook = sample_hook(seq);
            hook.body = vec![b'x'; 8_000];
            let sinks = [NewRow::unordered(0, "http")];
            write_commit(store, wtxn, &mut tenants, &hook, &sinks, 10).unwrap();
        }
    }

    /// A store opened with a `max_shard_bytes` below what it holds keeps an
    /// eighth more than its file for outcomes, and new hooks no room.
    #[test]
    fn a_store_larger_than_its_max_keeps_room_for_outcomes() {
        let dir = tempfile::tempdir().unwrap();
        let file_bytes = {
            let store = ShardStore::open_sized(dir.path(), 0, 1, 64 << 20).unwrap();
            let mut wtxn = store.env.write_txn().unwrap();
            fill(&store, &mut wtxn, 3_000);
            wtxn.commit().unwrap();
            std::fs::metadata(ShardStore::dir(dir.path(), 0).join(super::super::DATA_FILE))
                .unwrap()
                .len()
        };
        assert!(file_bytes > 16 << 20, "{file_bytes}");
        let store = ShardStore::open_sized(dir.path(), 0, 1, 16 << 20).unwrap();
        assert_eq!(
            store.env.info().map_size as u64,
            (file_bytes + file_bytes / 7).div_ceil(page_bytes()) * page_bytes()
        );
        assert!(store.committed_used_bytes().unwrap() > store.ingest_limit_bytes());
    }

    #[test]
    fn used_bytes_grow_with_hooks_in_the_open_transaction() {
        let dir = tempfile::tempdir().unwrap();
        let store = ShardStore::open_sized(dir.path(), 0, 1, 16 << 20).unwrap();
        assert_eq!(store.ingest_limit_bytes(), 14 << 20);
        let mut wtxn = store.env.write_txn().unwrap();
        let empty = store.used_bytes(&wtxn).unwrap();
        fill(&store, &mut wtxn, 100);
        let full = store.used_bytes(&wtxn).unwrap();
        // 100 bodies of 8,000 bytes take two overflow pages each.
        assert!(
            (800_000..1_000_000).contains(&(full - empty)),
            "{empty} then {full}"
        );
    }
}
