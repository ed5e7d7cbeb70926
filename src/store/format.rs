//! The store's format, and the upgrades that bring an older store to it
//! when it is opened. Each upgrade is one transaction: a crash during one
//! leaves the store as it was before it, and the next open runs it again.
//!
//! - Format 1 kept hooks and rows in trees of their own (`hooks`,
//!   `rows`); format 2 keeps both in `records` (see the module docs of
//!   [`super`]): [`move_format_1_trees`] moves them.
//! - Format 3 added `lanes`, `members` and the row's lane: the databases
//!   are created empty and a row without a lane is unordered.
//! - Format 4 added the hook-id index, and format 5 each tenant's stored
//!   bytes: [`ShardStore::upgrade`] builds both from the records.
//! - Format 6 added the hook record that keeps its sinks' places (see
//!   [`super::record`]): hooks written before are read without them, so
//!   the upgrade only sets the format (a goad that reads format 5 would
//!   take the new hooks for corrupt ones).
//!
//! A store of a newer format than [`FORMAT_VERSION`] (a node rolled back
//! to an older binary) is refused, not read.

use super::{hook_index, tenant_bytes, ShardStore, StoreError};
use heed::types::Bytes;
use heed::{Database, DatabaseOpener, WithoutTls};
use std::ops::Bound;
use std::path::Path;

/// The format this goad writes and reads.
pub(super) const FORMAT_VERSION: u32 = 6;

impl ShardStore {
    /// Brings a store of an older `format` to this one in one transaction:
    /// what the records imply (the hook-id index before format 4, the
    /// tenants' byte counts before format 5) is built from them, then the
    /// format is set.
    pub(super) fn upgrade(&self, path: &Path, format: u64) -> Result<(), StoreError> {
        let mut wtxn = self.env.write_txn()?;
        let indexed = if format < 4 {
            hook_index::rebuild(self, &mut wtxn)?
        } else {
            0
        };
        let counted = if format < 5 {
            tenant_bytes::recount(self, &mut wtxn)?
        } else {
            0
        };
        self.put_meta(&mut wtxn, "format", FORMAT_VERSION.into())?;
        wtxn.commit()?;
        crate::log::info(
            "store upgraded to format 6 (hooks can be looked up by id; each tenant's stored bytes are counted; new hooks keep their sinks' places)",
            &[
                ("path", &path.display()),
                ("from_format", &format),
                ("hooks_indexed", &indexed),
                ("tenants_counted", &counted),
            ],
        );
        Ok(())
    }
}

/// Moves a format-1 store's `hooks` and `rows` trees into `records`, in
/// the transaction that opens the store. Returns how many records moved.
pub(super) fn move_format_1_trees(
    opener: &DatabaseOpener<'_, WithoutTls>,
    wtxn: &mut heed::RwTxn,
    records: &Database<'_, Bytes, Bytes>,
) -> Result<u64, StoreError> {
    let mut moved = 0;
    for legacy in ["hooks", "rows"] {
        if let Some(db) = opener.open_database::<Bytes, Bytes>(wtxn, Some(legacy))? {
            moved += move_all(&db, records, wtxn)?;
        }
    }
    Ok(moved)
}

/// Moves every record of `from` into `to` and empties `from` (the format-1
/// migration), a bounded batch of records in memory at a time. Returns how
/// many it moved.
fn move_all(
    from: &Database<'_, Bytes, Bytes>,
    to: &Database<'_, Bytes, Bytes>,
    wtxn: &mut heed::RwTxn,
) -> Result<u64, StoreError> {
    const BATCH: usize = 4_096;
    let mut moved = 0;
    let mut after: Option<Vec<u8>> = None;
    loop {
        let start = after.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        let batch = from
            .range(wtxn, &(start, Bound::Unbounded))?
            .take(BATCH)
            .map(|item| item.map(|(k, v)| (k.to_vec(), v.to_vec())))
            .collect::<Result<Vec<_>, _>>()?;
        let Some((last, _)) = batch.last() else {
            break;
        };
        after = Some(last.clone());
        for (k, v) in &batch {
            to.put(wtxn, k, v)?;
        }
        moved += batch.len() as u64;
    }
    from.clear(wtxn)?;
    Ok(moved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{DueIndex, Loaded, RowId};
    use crate::limits::DEFAULT_MAX_SHARD_BYTES;
    use crate::store::record::{self, encode_hook};
    use crate::store::{fresh_store, keys, write_commit, NewRow, SinkState, TenantTable, TxnIndex};
    use heed::{CommitOrAbort, EnvOpenOptions};
    use std::sync::Arc;

    /// Rewrites a fresh shard's records into the format-1 layout: hooks and
    /// rows in trees of their own.
    fn downgrade_to_format_1(dir: &Path) {
        let mut options = EnvOpenOptions::new().read_txn_without_tls();
        options
            .map_size(DEFAULT_MAX_SHARD_BYTES as usize)
            .max_dbs(8);
        // SAFETY: the test's store is closed (dropped) before this opens
        // its directory, and nothing else opens it meanwhile.
        let env = unsafe { options.open(ShardStore::dir(dir, 0)) }.unwrap();
        let wtxn = env.write_txn().unwrap();
        env.create_databases_and_commit(wtxn, |opener, wtxn| -> Result<_, StoreError> {
            let mut one = |name| opener.create_database::<Bytes, Bytes>(wtxn, Some(name));
            let [records, hooks, rows, meta] =
                [one("records")?, one("hooks")?, one("rows")?, one("meta")?];
            let all = records
                .iter(wtxn)?
                .map(|item| item.map(|(k, v)| (k.to_vec(), v.to_vec())))
                .collect::<Result<Vec<_>, _>>()?;
            for (k, v) in &all {
                let legacy = if keys::is_hook_key(k) { &hooks } else { &rows };
                legacy.put(wtxn, k, v)?;
            }
            records.clear(wtxn)?;
            meta.put(wtxn, b"format", &1u64.to_be_bytes())?;
            Ok(CommitOrAbort::<_, ()>::Commit(()))
        })
        .unwrap();
    }

    #[test]
    fn a_format_1_store_is_migrated_on_open_and_its_rows_load() {
        let dir = tempfile::tempdir().unwrap();
        let (store, mut tenants) = fresh_store(dir.path());
        let hook = record::sample_hook(1);
        let sinks = [NewRow::unordered(0, "http"), NewRow::unordered(1, "sqs")];
        let mut wtxn = store.env.write_txn().unwrap();
        write_commit(&store, &mut wtxn, &mut tenants, &hook, &sinks, 10).unwrap();
        wtxn.commit().unwrap();
        drop(store);
        downgrade_to_format_1(dir.path());

        let store = ShardStore::open(dir.path(), 0, 1).unwrap();
        let rtxn = store.env.read_txn().unwrap();
        assert_eq!(
            store.meta_u64(&rtxn, "format").unwrap(),
            Some(FORMAT_VERSION.into())
        );
        drop(rtxn);
        assert_eq!(store.hook_count().unwrap(), 1);
        let rows = store.rows().unwrap();
        assert_eq!(rows.len(), 2);
        assert!(rows.iter().all(|r| r.hook_id == "h1"));
        let tenants = TenantTable::load(&store).unwrap();
        let wtxn = store.env.write_txn().unwrap();
        let mut index = TxnIndex::new(&store, &wtxn, &tenants);
        let mut page = Vec::new();
        index.due_page(&Arc::from("t"), 10, None, 16, &mut page);
        assert_eq!(page.len(), 2);
        for entry in page {
            match index.load(entry.row) {
                Loaded::Row { state, hook } => {
                    assert_eq!(hook.body, b"payload");
                    assert_eq!(
                        &*state.sink_type,
                        ["http", "sqs"][entry.row.sink_index as usize]
                    );
                }
                other => panic!("row {:?} did not load: {other:?}", entry.row),
            }
        }
    }

    /// A store a newer goad wrote (a node rolled back to an older binary)
    /// is refused, naming both formats, and left as it is.
    #[test]
    fn a_store_of_a_newer_format_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let store = ShardStore::open(dir.path(), 0, 1).unwrap();
        let newer = u64::from(FORMAT_VERSION) + 1;
        let mut wtxn = store.env.write_txn().unwrap();
        store.put_meta(&mut wtxn, "format", newer).unwrap();
        wtxn.commit().unwrap();
        drop(store);
        for _ in 0..2 {
            let refused = ShardStore::open(dir.path(), 0, 1).err().unwrap();
            let path = ShardStore::dir(dir.path(), 0);
            let expected = format!(
                "{} has store format {newer}; this goad reads format {FORMAT_VERSION}",
                path.display()
            );
            assert_eq!(refused.to_string(), expected);
        }
    }

    /// A store of format 5 (hooks without their sinks' places) is set to
    /// format 6 when opened and its hooks read as they were.
    #[test]
    fn a_format_5_store_is_set_to_format_6_and_its_hooks_read_as_they_were() {
        let dir = tempfile::tempdir().unwrap();
        let (store, mut tenants) = fresh_store(dir.path());
        let mut wtxn = store.env.write_txn().unwrap();
        let sinks = [NewRow::unordered(0, "http")];
        let hook = record::sample_hook(1);
        write_commit(&store, &mut wtxn, &mut tenants, &hook, &sinks, 10).unwrap();
        store.put_meta(&mut wtxn, "format", 5).unwrap();
        wtxn.commit().unwrap();
        drop(store);

        let store = ShardStore::open(dir.path(), 0, 1).unwrap();
        let rtxn = store.env.read_txn().unwrap();
        assert_eq!(store.meta_u64(&rtxn, "format").unwrap(), Some(6));
        drop(rtxn);
        assert_eq!(store.hook_status(0, "h1").unwrap().unwrap().hook, hook);
        assert_eq!(store.verify().unwrap().problems, Vec::<String>::new());
    }

    /// A store of format 4 (the hook-id index, no byte counts) gets each
    /// tenant's count from its hooks when opened; its index is kept.
    #[test]
    fn a_format_4_store_gets_its_tenants_byte_counts_on_open() {
        let dir = tempfile::tempdir().unwrap();
        let (store, mut tenants) = fresh_store(dir.path());
        let mut wtxn = store.env.write_txn().unwrap();
        let mut bytes = [0u64; 2];
        for (seq, tenant) in [(1, "a"), (2, "b"), (3, "a")] {
            let mut hook = record::sample_hook(seq);
            hook.tenant = tenant.into();
            hook.body = vec![b'x'; 100 * seq as usize];
            bytes[usize::from(tenant == "b")] += encode_hook(&hook).len() as u64;
            let sinks = [NewRow::unordered(0, "http")];
            write_commit(&store, &mut wtxn, &mut tenants, &hook, &sinks, 10).unwrap();
        }
        store.tenant_bytes.clear(&mut wtxn).unwrap();
        store.put_meta(&mut wtxn, "format", 4).unwrap();
        wtxn.commit().unwrap();
        drop(store);

        let store = ShardStore::open(dir.path(), 0, 1).unwrap();
        let mut stored = store.stored_by_tenant().unwrap();
        stored.sort();
        assert_eq!(stored, [("a".into(), bytes[0]), ("b".into(), bytes[1])]);
        assert_eq!(store.hook_status(0, "h2").unwrap().unwrap().hook.seq, 2);
        assert_eq!(store.verify().unwrap().problems, Vec::<String>::new());
    }

    /// A store of format 3 has no hook-id index and no byte counts: opening
    /// it builds both from the records it holds (a sink whose row is gone is
    /// not listed), so its hooks can be looked up by id, its tenants' bytes
    /// are counted and the store verifies sound.
    #[test]
    fn a_format_3_store_gets_its_hook_id_index_and_byte_counts_on_open() {
        let dir = tempfile::tempdir().unwrap();
        let (store, mut tenants) = fresh_store(dir.path());
        let mut wtxn = store.env.write_txn().unwrap();
        let sinks = [NewRow::unordered(0, "http"), NewRow::unordered(2, "sqs")];
        for seq in [1, 2] {
            let hook = record::sample_hook(seq);
            write_commit(&store, &mut wtxn, &mut tenants, &hook, &sinks, 10).unwrap();
        }
        // Hook 2's first row was delivered before the upgrade.
        let delivered = keys::row_key(RowId {
            seq: 2,
            sink_index: 0,
        });
        store.records.delete(&mut wtxn, &delivered).unwrap();
        store
            .due
            .delete(
                &mut wtxn,
                &keys::timed_key(
                    0,
                    10,
                    RowId {
                        seq: 2,
                        sink_index: 0,
                    },
                ),
            )
            .unwrap();
        store.hook_ids.clear(&mut wtxn).unwrap();
        store.tenant_bytes.clear(&mut wtxn).unwrap();
        store.put_meta(&mut wtxn, "format", 3).unwrap();
        wtxn.commit().unwrap();
        drop(store);

        let store = ShardStore::open(dir.path(), 0, 1).unwrap();
        let rtxn = store.env.read_txn().unwrap();
        assert_eq!(
            store.meta_u64(&rtxn, "format").unwrap(),
            Some(FORMAT_VERSION.into())
        );
        let two_hooks = 2 * encode_hook(&record::sample_hook(1)).len() as u64;
        assert_eq!(tenant_bytes::get(&store, &rtxn, 0).unwrap(), two_hooks);
        let sinks_of = |id| {
            let entry = hook_index::get(&store, &rtxn, id).unwrap().unwrap();
            (entry.seq, entry.sinks)
        };
        assert_eq!(sinks_of("h1"), (1, vec![(0, false), (2, false)]));
        assert_eq!(sinks_of("h2"), (2, vec![(2, false)]));
        let status = store.hook_status(0, "h2").unwrap().unwrap();
        let states: Vec<_> = status
            .sinks
            .iter()
            .map(|s| (s.sink_index, &s.state))
            .collect();
        assert!(matches!(states[..], [(2, SinkState::Due(_))]), "{states:?}");
        assert_eq!(store.verify().unwrap().problems, Vec::<String>::new());
    }
}
