//! A data directory opens whole: every shard's store, or an error. A store
//! missing beside the others (a copy or a backup cut short, a shard's
//! directory deleted) would otherwise be made anew, empty, and the hooks
//! it held lost without a word. A new directory's shards are made from
//! the last one to shard 0, so shard 0's store is there only once every
//! other one is: a first start cut short leaves empty stores and no shard
//! 0, which the next start completes, while a store missing beside shard
//! 0's, or beside another that holds hooks, is refused. So is a backup
//! cut short, which its [`BACKUP_UNFINISHED`] file names.

use super::{has_data_file, ShardStore, StoreError};
use std::path::Path;

/// The file a backup writes first into its directory and deletes once
/// every store and file is in it (see `Engine::backup`): a directory that
/// holds it is a backup cut short, which may lack a store or a file.
pub const BACKUP_UNFINISHED: &str = "BACKUP_UNFINISHED";

impl ShardStore {
    /// Opens every one of `count` shards under `data_dir`, each as
    /// [`ShardStore::open_sized`] does, making a new directory's; refuses
    /// a directory that lost a shard's store
    /// ([`StoreError::MissingShard`]).
    pub fn open_all(
        data_dir: &Path,
        count: usize,
        max_bytes: u64,
    ) -> Result<Vec<ShardStore>, StoreError> {
        refuse_unfinished_backup(data_dir)?;
        let open = |k| ShardStore::open_sized(data_dir, k, count, max_bytes);
        if ShardStore::has_store(data_dir, 0)? {
            // Shard 0 first: a directory of another shard count is named
            // as such, not as one missing shards.
            let first = open(0)?;
            refuse_missing(data_dir, count)?;
            return std::iter::once(Ok(first))
                .chain((1..count).map(open))
                .collect();
        }
        // Without shard 0's store, the others must be a first start's,
        // empty; then the missing ones are made, the last first.
        let mut stores: Vec<Option<ShardStore>> = (0..count).map(|_| None).collect();
        for (k, slot) in stores.iter_mut().enumerate().skip(1) {
            if ShardStore::has_store(data_dir, k)? {
                let store = open(k)?;
                if store.holds_records()? {
                    return Err(missing(data_dir, 0, count));
                }
                *slot = Some(store);
            }
        }
        for (k, slot) in stores.iter_mut().enumerate().rev() {
            if slot.is_none() {
                *slot = Some(open(k)?);
            }
        }
        Ok(stores.into_iter().flatten().collect())
    }

    /// Opens every one of `count` shards under `data_dir`, making none: a
    /// missing store is refused ([`StoreError::MissingShard`]).
    pub(crate) fn open_existing(
        data_dir: &Path,
        count: usize,
    ) -> Result<Vec<ShardStore>, StoreError> {
        refuse_unfinished_backup(data_dir)?;
        refuse_missing(data_dir, count)?;
        (0..count)
            .map(|k| ShardStore::open(data_dir, k, count))
            .collect()
    }

    /// Whether shard `k`'s store file is in `data_dir`.
    pub(crate) fn has_store(data_dir: &Path, k: usize) -> Result<bool, StoreError> {
        let dir = ShardStore::dir(data_dir, k);
        has_data_file(&dir).map_err(|source| StoreError::Io { path: dir, source })
    }

    /// Whether any hook or row is stored.
    fn holds_records(&self) -> Result<bool, StoreError> {
        let rtxn = self.env.read_txn()?;
        Ok(!self.records.is_empty(&rtxn)?)
    }
}

/// Refuses `data_dir` if it is a backup cut short.
fn refuse_unfinished_backup(data_dir: &Path) -> Result<(), StoreError> {
    let marker = data_dir.join(BACKUP_UNFINISHED);
    match marker.try_exists() {
        Ok(false) => Ok(()),
        Ok(true) => Err(StoreError::UnfinishedBackup {
            path: data_dir.to_path_buf(),
        }),
        Err(source) => Err(StoreError::Io {
            path: marker,
            source,
        }),
    }
}

/// Refuses `data_dir` if any of its `count` shards has no store.
fn refuse_missing(data_dir: &Path, count: usize) -> Result<(), StoreError> {
    for k in 0..count {
        if !ShardStore::has_store(data_dir, k)? {
            return Err(missing(data_dir, k, count));
        }
    }
    Ok(())
}

fn missing(data_dir: &Path, shard: usize, shards: usize) -> StoreError {
    StoreError::MissingShard {
        path: ShardStore::dir(data_dir, shard),
        shard,
        shards,
    }
}

#[cfg(test)]
mod tests {
    use super::super::record::sample_hook;
    use super::super::write::{write_commit, NewRow};
    use super::super::TenantTable;
    use super::*;

    const MAX_BYTES: u64 = 16 << 20;

    /// A directory of three shards, with a hook in shard 1's store.
    fn three_shards_one_hook(dir: &Path) {
        let stores = ShardStore::open_all(dir, 3, MAX_BYTES).unwrap();
        let store = &stores[1];
        let mut tenants = TenantTable::load(store).unwrap();
        let sinks = [NewRow::unordered(0, "http")];
        let mut wtxn = store.env.write_txn().unwrap();
        write_commit(store, &mut wtxn, &mut tenants, &sample_hook(1), &sinks, 1).unwrap();
        wtxn.commit().unwrap();
    }

    fn is_missing(result: Result<Vec<ShardStore>, StoreError>, dir: &Path, shard: usize) {
        match result {
            Err(e @ StoreError::MissingShard { .. }) => assert_eq!(
                e.to_string(),
                format!(
                    "{} holds no store: shard {shard} of the data directory's 3 is missing (a copy or a backup cut short, a shard's directory deleted); restore the whole data directory: an engine started without it would lose the hooks that shard held",
                    ShardStore::dir(dir, shard).display()
                )
            ),
            Err(e) => panic!("refused as {e}"),
            Ok(_) => panic!("opened"),
        }
    }

    /// Shard 2 lost beside shard 0's store; shard 0 lost beside shard 1's,
    /// which holds a hook; and both.
    #[test]
    fn a_directory_that_lost_a_shards_store_is_refused_and_left_as_it_is() {
        for (lost, named) in [(&[2][..], 2), (&[0], 0), (&[0, 2], 0)] {
            let dir = tempfile::tempdir().unwrap();
            three_shards_one_hook(dir.path());
            for k in lost {
                std::fs::remove_dir_all(ShardStore::dir(dir.path(), *k)).unwrap();
            }
            let opened = ShardStore::open_all(dir.path(), 3, MAX_BYTES);
            is_missing(opened, dir.path(), named);
            is_missing(ShardStore::open_existing(dir.path(), 3), dir.path(), named);
            for k in lost {
                assert!(
                    !ShardStore::dir(dir.path(), *k).exists(),
                    "{lost:?}: shard {k} made"
                );
            }
        }
    }

    /// A first start that stopped before it made shard 0 left only empty
    /// stores: the next start makes the rest.
    #[test]
    fn a_first_start_cut_short_is_completed() {
        let dir = tempfile::tempdir().unwrap();
        drop(ShardStore::open(dir.path(), 2, 3).unwrap());
        let stores = ShardStore::open_all(dir.path(), 3, MAX_BYTES).unwrap();
        assert_eq!(stores.len(), 3);
        drop(stores);
        let opened = ShardStore::open_existing(dir.path(), 3).unwrap();
        assert_eq!(opened.len(), 3);
    }

    #[test]
    fn another_shard_count_is_named_before_missing_shards() {
        let dir = tempfile::tempdir().unwrap();
        three_shards_one_hook(dir.path());
        let refused = ShardStore::open_all(dir.path(), 4, MAX_BYTES)
            .err()
            .unwrap();
        assert!(
            matches!(
                refused,
                StoreError::ShardCount {
                    stored: 3,
                    configured: 4,
                    ..
                }
            ),
            "{refused}"
        );
        assert!(!ShardStore::dir(dir.path(), 3).exists(), "nothing made");
    }
}
