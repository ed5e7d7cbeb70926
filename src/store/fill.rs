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

use super::{ShardStore, StoreError};
use crate::limits::SHARD_OUTCOME_RESERVE_DIVISOR;
use heed::RoTxn;
use std::path::Path;

/// The OS page size, which LMDB's map size must be a multiple of.
fn page_bytes() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let page_bytes = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(page_bytes).unwrap_or(4096)
}

/// The LMDB map size for the store in `dir` bounded by `max_bytes`.
pub(super) fn map_bytes_for(dir: &Path, max_bytes: u64) -> usize {
    let file_bytes = std::fs::metadata(dir.join(super::DATA_FILE)).map_or(0, |m| m.len());
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
}

#[cfg(test)]
mod tests {
    use super::super::record::sample_hook;
    use super::super::{write_commit, TenantTable};
    use super::*;
    use crate::store::NewRow;
    use heed::RwTxn;

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
