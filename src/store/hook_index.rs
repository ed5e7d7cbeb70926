//! The hook-id index (`hook_ids`): a hook's id → its seq and the sinks its
//! commit wrote rows for, so a hook can be looked up by the id its commit
//! returned (see [`ShardStore::hook_status`]).
//!
//! The value is the seq (u64), then per sink its index (u16) and its fate
//! (u8: 0 a row was written, 1 that row was purged). A sink listed whose
//! row is gone and not purged was delivered: rows leave the store only by
//! delivery or purge, and the entry goes with the hook's last row.
//!
//! Written in the commit's transaction, deleted with the hook, marked by a
//! purge: the index always agrees with the records (`goad verify` checks
//! it). A store of format 3 or older gets it when opened, from the rows it
//! holds then (sinks delivered before that are not listed).
//!
//! [`ShardStore::hook_status`]: super::ShardStore::hook_status

use super::keys::{hook_key, is_hook_key, parse_row_key, u64_at};
use super::record::{decode_hook_head, CorruptRecord};
use super::{ShardStore, StoreError};
use heed::{RoTxn, RwTxn};
use std::ops::Bound;

const PURGED: u8 = 1;

/// What the index holds for a hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Indexed {
    pub seq: u64,
    /// (sink index, its row was purged), in sink order.
    pub sinks: Vec<(u16, bool)>,
}

impl Indexed {
    /// A hook just committed at `seq` with rows for `sinks`.
    pub fn committed(seq: u64, sinks: impl Iterator<Item = u16>) -> Indexed {
        Indexed {
            seq,
            sinks: sinks.map(|sink_index| (sink_index, false)).collect(),
        }
    }

    fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(8 + 3 * self.sinks.len());
        v.extend_from_slice(&self.seq.to_be_bytes());
        for &(sink_index, purged) in &self.sinks {
            v.extend_from_slice(&sink_index.to_be_bytes());
            v.push(u8::from(purged) * PURGED);
        }
        v
    }

    fn decode(v: &[u8]) -> Result<Indexed, CorruptRecord> {
        let corrupt = CorruptRecord {
            what: "hook-id index",
        };
        if v.len() < 8 || !(v.len() - 8).is_multiple_of(3) {
            return Err(corrupt);
        }
        let mut sinks = Vec::with_capacity((v.len() - 8) / 3);
        for sink in v[8..].chunks_exact(3) {
            let purged = match sink[2] {
                0 => false,
                PURGED => true,
                _ => return Err(corrupt),
            };
            sinks.push((u16::from_be_bytes([sink[0], sink[1]]), purged));
        }
        Ok(Indexed {
            seq: u64_at(v, 0),
            sinks,
        })
    }
}

/// Indexes hook `id` as `entry` says.
pub(super) fn put(
    store: &ShardStore,
    wtxn: &mut RwTxn,
    id: &str,
    entry: &Indexed,
) -> Result<(), StoreError> {
    Ok(store.hook_ids.put(wtxn, id.as_bytes(), &entry.encode())?)
}

/// The longest key LMDB takes: no id longer (or empty) was ever indexed.
const MAX_KEY_BYTES: usize = 511;

/// The index entry of hook `id`, if any.
pub fn get(store: &ShardStore, txn: &RoTxn, id: &str) -> Result<Option<Indexed>, StoreError> {
    if id.is_empty() || id.len() > MAX_KEY_BYTES {
        return Ok(None);
    }
    match store.hook_ids.get(txn, id.as_bytes())? {
        Some(v) => Ok(Some(Indexed::decode(v)?)),
        None => Ok(None),
    }
}

/// The id of the hook at `seq`, if it is stored and its head decodes.
pub(super) fn id_at(
    store: &ShardStore,
    txn: &RoTxn,
    seq: u64,
) -> Result<Option<String>, StoreError> {
    let head = store.records.get(txn, &hook_key(seq))?;
    Ok(head
        .and_then(|bytes| decode_hook_head(bytes).ok())
        .map(|h| h.id))
}

/// Drops the entry of the hook at `seq` (its last row is gone). A hook
/// whose head does not decode cannot name its id: its entry is found by a
/// walk of the whole index (only a corrupt record costs that).
pub(super) fn forget(store: &ShardStore, wtxn: &mut RwTxn, seq: u64) -> Result<(), StoreError> {
    let head = store
        .records
        .get(wtxn, &hook_key(seq))?
        .map(decode_hook_head);
    match head {
        None => return Ok(()),
        Some(Ok(head)) => {
            store.hook_ids.delete(wtxn, head.id.as_bytes())?;
            return Ok(());
        }
        Some(Err(_)) => {}
    }
    let mut naming = Vec::new();
    for item in store.hook_ids.iter(wtxn)? {
        let (id, v) = item?;
        if v.len() >= 8 && u64_at(v, 0) == seq {
            naming.push(id.to_vec());
        }
    }
    for id in naming {
        store.hook_ids.delete(wtxn, &id)?;
    }
    Ok(())
}

/// Records that the row of sink `sink_index` of the hook at `seq` was
/// purged, so a lookup does not call it delivered.
pub(super) fn mark_purged(
    store: &ShardStore,
    wtxn: &mut RwTxn,
    seq: u64,
    sink_index: u16,
) -> Result<(), StoreError> {
    let Some(id) = id_at(store, wtxn, seq)? else {
        return Ok(());
    };
    let mut entry = match get(store, wtxn, &id) {
        Ok(Some(entry)) => entry,
        // An entry that does not decode is `goad verify`'s to name: the
        // purge goes on.
        Ok(None) | Err(StoreError::Corrupt(_)) => return Ok(()),
        Err(e) => return Err(e),
    };
    for sink in entry.sinks.iter_mut().filter(|s| s.0 == sink_index) {
        sink.1 = true;
    }
    put(store, wtxn, &id, &entry)
}

/// Builds the index from the records (a store older than format 4): each
/// hook with the sinks whose rows it holds now. Returns the hooks indexed;
/// a hook whose head does not decode is left out (`goad verify` names it).
/// Reads the records in batches, so its memory does not grow with the store.
pub(super) fn rebuild(store: &ShardStore, wtxn: &mut RwTxn) -> Result<u64, StoreError> {
    const BATCH: usize = 4_096;
    store.hook_ids.clear(wtxn)?;
    let mut indexed = 0;
    // The hook being read, with the rows read so far.
    let mut open: Option<(String, Indexed)> = None;
    let mut after: Option<Vec<u8>> = None;
    loop {
        let start = after.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        let batch = store
            .records
            .range(wtxn, &(start, Bound::Unbounded))?
            .take(BATCH)
            .map(|item| {
                item.map(|(k, v)| {
                    let id = is_hook_key(k).then(|| decode_hook_head(v).ok().map(|h| h.id));
                    (k.to_vec(), id)
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let Some((last, _)) = batch.last() else {
            break;
        };
        after = Some(last.clone());
        for (k, hook) in batch {
            match (hook, parse_row_key(&k)) {
                (Some(id), _) => {
                    if let Some((id, entry)) = open.take() {
                        put(store, wtxn, &id, &entry)?;
                        indexed += 1;
                    }
                    let seq = u64_at(&k, 0);
                    open = id.map(|id| (id, Indexed { seq, sinks: vec![] }));
                }
                (None, Some(row)) => {
                    if let Some((_, entry)) = open.as_mut().filter(|(_, e)| e.seq == row.seq) {
                        entry.sinks.push((row.sink_index, false));
                    }
                }
                (None, None) => {}
            }
        }
    }
    if let Some((id, entry)) = open {
        put(store, wtxn, &id, &entry)?;
        indexed += 1;
    }
    Ok(indexed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_junk_is_corrupt() {
        let entry = Indexed {
            seq: 7,
            sinks: vec![(0, false), (3, true)],
        };
        assert_eq!(Indexed::decode(&entry.encode()), Ok(entry));
        assert!(Indexed::decode(&[0; 7]).is_err());
        assert!(Indexed::decode(&[0; 10]).is_err());
        assert!(Indexed::decode(&[0, 0, 0, 0, 0, 0, 0, 1, 0, 2, 9]).is_err());
    }

    /// A purge marks its row's sink in the entry; an entry that does not
    /// decode stops no purge (`goad verify` names it).
    #[test]
    fn a_purge_marks_its_sink_and_a_junk_entry_stops_nothing() {
        use super::super::record::sample_hook;
        use super::super::{write_commit, NewRow};
        let dir = tempfile::tempdir().unwrap();
        let (store, mut tenants) = super::super::fresh_store(dir.path());
        let mut wtxn = store.env.write_txn().unwrap();
        let rows = [NewRow::unordered(0, "http"), NewRow::unordered(3, "sqs")];
        for seq in [1, 2] {
            write_commit(
                &store,
                &mut wtxn,
                &mut tenants,
                &sample_hook(seq),
                &rows,
                10,
            )
            .unwrap();
        }
        mark_purged(&store, &mut wtxn, 1, 3).unwrap();
        let entry = get(&store, &wtxn, "h1").unwrap().unwrap();
        assert_eq!(entry.sinks, [(0, false), (3, true)]);
        store.hook_ids.put(&mut wtxn, b"h2", b"junk").unwrap();
        mark_purged(&store, &mut wtxn, 2, 3).unwrap();
        assert!(get(&store, &wtxn, "h2").is_err(), "left for verify to name");
    }
}
