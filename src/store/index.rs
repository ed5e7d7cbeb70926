//! The due index as the core's scan reads it: a view over the shard's write
//! transaction, so rows committed earlier in the same iteration are seen.
//!
//! A due entry that does not decode is stepped over and kept in
//! [`Unreadable`]; the shell sets it aside after the scan (see
//! `store::repair`), so one bad entry does not fail every scan of its
//! shard.

use super::keys::{
    hook_key, is_hook_key, parse_row_key, parse_timed_key, row_key, timed_key, u64_at,
};
use super::record::{
    decode_placed_hook, decode_placed_hook_head, decode_row, Hook, RowRecord, RowStatus, SinkPlaces,
};
use super::write::PARKED_ERROR;
use super::{ShardStore, StoreError, TenantTable};
use crate::core::{DueEntry, DueIndex, Loaded, RowHead, RowId, RowState, TenantId, PACED_ERROR};
use crate::limits::MAX_UNREADABLE_DUE_PER_SCAN;
use heed::RwTxn;
use std::collections::HashMap;
use std::ops::Bound;
use std::sync::Arc;

/// How much wider than twice its rows a page's seq range may be and still be
/// read ahead in one range scan.
const READ_AHEAD_SLACK: u64 = 8;

/// A due entry a scan could not read: its key is not a due key, or its
/// value is not a size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
}

/// Reads for one scan. The first store error is kept (and the reads that
/// follow return nothing); the shell takes it, and the due entries the reads
/// stepped over, with [`TxnIndex::finish`].
pub struct TxnIndex<'t> {
    store: &'t ShardStore,
    txn: &'t RwTxn<'t>,
    tenants: &'t TenantTable,
    /// Hooks loaded whole, shared by the claims of their rows.
    hooks: HashMap<u64, (Arc<Hook>, Option<SinkPlaces>)>,
    /// Rows of the last page read ahead (see [`TxnIndex::read_ahead`]),
    /// in row order.
    rows: Vec<(RowId, Option<RowRecord>)>,
    /// The stored bytes of that page's hooks, decoded only as far as a
    /// load asks (a pass over many rows reads their ids, not their bodies).
    hook_bytes: HashMap<u64, &'t [u8]>,
    /// Due entries stepped over (at most `MAX_UNREADABLE_DUE_PER_SCAN`).
    unreadable: Vec<Unreadable>,
    error: Option<StoreError>,
}

impl<'t> TxnIndex<'t> {
    pub fn new(
        store: &'t ShardStore,
        txn: &'t RwTxn<'t>,
        tenants: &'t TenantTable,
    ) -> TxnIndex<'t> {
        TxnIndex {
            store,
            txn,
            tenants,
            hooks: HashMap::new(),
            rows: Vec::new(),
            hook_bytes: HashMap::new(),
            unreadable: Vec::new(),
            error: None,
        }
    }

    /// The due entries the reads stepped over, or the first error any read hit.
    pub fn finish(self) -> Result<Vec<Unreadable>, StoreError> {
        match self.error {
            Some(e) => Err(e),
            None => Ok(self.unreadable),
        }
    }

    fn keep<T>(&mut self, r: Result<T, StoreError>) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(e) => {
                self.error.get_or_insert(e);
                None
            }
        }
    }

    /// Up to `max_rows` due entries of a tenant after `after`, due by
    /// `until_ms`. Entries that do not decode are stepped over and kept; at
    /// `MAX_UNREADABLE_DUE_PER_SCAN` of them the read stops short (the shell
    /// asks for a new scan once it has set them aside).
    fn first_after(
        &mut self,
        tenant_no: u32,
        after: Option<&DueEntry>,
        until_ms: u64,
        max_rows: usize,
    ) -> Result<Vec<DueEntry>, StoreError> {
        let start = match after {
            Some(e) => Bound::Excluded(timed_key(tenant_no, e.due_at_ms, e.row)),
            None => Bound::Included(timed_key(tenant_no, 0, RowId::MIN)),
        };
        let end = Bound::Included(timed_key(tenant_no, until_ms, RowId::MAX));
        let start = start.as_ref().map(|k| &k[..]);
        let end = end.as_ref().map(|k| &k[..]);
        let mut out = Vec::new();
        if max_rows == 0 {
            return Ok(out);
        }
        let (store, txn) = (self.store, self.txn);
        for item in store.due.range(txn, &(start, end))? {
            let (k, v) = item?;
            let decoded = parse_timed_key(k).zip(v.try_into().ok().map(u64::from_be_bytes));
            let Some(((_, due_at_ms, row), size_bytes)) = decoded else {
                self.unreadable.push(Unreadable {
                    key: k.to_vec(),
                    value: v.to_vec(),
                });
                if self.unreadable.len() >= MAX_UNREADABLE_DUE_PER_SCAN {
                    break;
                }
                continue;
            };
            out.push(DueEntry {
                tenant: self.tenants.name(tenant_no).clone(),
                due_at_ms,
                row,
                size_bytes,
            });
            if out.len() == max_rows {
                break;
            }
        }
        Ok(out)
    }

    /// Reads a page's hooks and rows ahead with one range scan of `records`
    /// when the page's seqs are dense (a tenant's recent commits usually
    /// are): one descent of the shard-wide tree instead of a lookup of each
    /// row and of each hook, so a small tenant's claims cost about the same
    /// beside a large tenant as alone. Sparse pages are loaded row by row.
    fn read_ahead(&mut self, page: &[DueEntry]) -> Result<(), StoreError> {
        self.rows.clear();
        self.hook_bytes.clear();
        let mut wanted: Vec<RowId> = page.iter().map(|e| e.row).collect();
        wanted.sort_unstable();
        wanted.dedup();
        let (Some(first), Some(last)) = (wanted.first(), wanted.last()) else {
            return Ok(());
        };
        let span = last.seq - first.seq + 1;
        if wanted.len() < 2 || span > 2 * wanted.len() as u64 + READ_AHEAD_SLACK {
            return Ok(());
        }
        let (low, high) = (hook_key(first.seq), row_key(*last));
        let bounds = (Bound::Included(&low[..]), Bound::Included(&high[..]));
        // A row that does not decode is left out: `row_state` reads it
        // again and reports it corrupt.
        let (store, txn) = (self.store, self.txn);
        for item in store.records.range(txn, &bounds)? {
            let (k, v) = item?;
            if is_hook_key(k) {
                let seq = u64_at(k, 0);
                if wanted.binary_search_by(|r| r.seq.cmp(&seq)).is_ok() {
                    self.hook_bytes.insert(seq, v);
                }
            } else if let Some(row) = parse_row_key(k) {
                if wanted.binary_search(&row).is_ok() {
                    if let Ok(record) = decode_row(v) {
                        self.rows.push((row, Some(record)));
                    }
                }
            }
        }
        Ok(())
    }

    /// The state of a pending row, from the page read ahead or the store;
    /// `Err` when it cannot be read (what `load` reports).
    fn row_state(&mut self, row: RowId) -> Result<Result<RowState, Loaded>, StoreError> {
        let ahead = match self.rows.binary_search_by(|(r, _)| r.cmp(&row)) {
            Ok(i) => self.rows[i].1.take(),
            Err(_) => None,
        };
        let record = match ahead {
            Some(record) => record,
            None => {
                let Some(bytes) = self.store.records.get(self.txn, &row_key(row))? else {
                    return Ok(Err(Loaded::RowMissing));
                };
                match decode_row(bytes) {
                    Ok(record) => record,
                    Err(_) => return Ok(Err(Loaded::RowCorrupt)),
                }
            }
        };
        // A due key names only pending rows; a row that says otherwise
        // contradicts the index.
        if record.status != RowStatus::Pending {
            return Ok(Err(Loaded::RowCorrupt));
        }
        Ok(Ok(RowState {
            parked: record.error.as_deref() == Some(PARKED_ERROR),
            paced: record.error.as_deref() == Some(PACED_ERROR),
            sink_type: record.sink_type,
            attempts: record.attempts,
            first_attempt_at_ms: record.first_attempt_at_ms,
            replay: record.replay,
            lane: record.lane,
            sink_places: None,
        }))
    }

    /// The stored bytes of hook `seq`, from the page read ahead or the store.
    fn hook_bytes(&self, seq: u64) -> Result<Option<&'t [u8]>, StoreError> {
        if let Some(bytes) = self.hook_bytes.get(&seq) {
            return Ok(Some(bytes));
        }
        let (store, txn) = (self.store, self.txn);
        Ok(store.records.get(txn, &hook_key(seq))?)
    }

    fn load_row(&mut self, row: RowId) -> Result<Loaded, StoreError> {
        let state = match self.row_state(row)? {
            Ok(state) => state,
            Err(unreadable) => return Ok(unreadable),
        };
        if let Some((hook, places)) = self.hooks.get(&row.seq) {
            let (hook, sink_places) = (hook.clone(), places.clone());
            let state = RowState {
                sink_places,
                ..state
            };
            return Ok(Loaded::Row { state, hook });
        }
        let Some(bytes) = self.hook_bytes(row.seq)? else {
            return Ok(Loaded::HookMissing);
        };
        let Ok((hook, sink_places)) = decode_placed_hook(row.seq, bytes) else {
            return Ok(Loaded::HookCorrupt { state });
        };
        let hook = Arc::new(hook);
        (self.hooks).insert(row.seq, (hook.clone(), sink_places.clone()));
        let state = RowState {
            sink_places,
            ..state
        };
        Ok(Loaded::Row { state, hook })
    }

    fn load_row_head(&mut self, row: RowId) -> Result<Result<RowHead, Loaded>, StoreError> {
        let state = match self.row_state(row)? {
            Ok(state) => state,
            Err(unreadable) => return Ok(Err(unreadable)),
        };
        if let Some((hook, places)) = self.hooks.get(&row.seq) {
            let (hook, sink_places) = (hook.head(), places.clone());
            let state = RowState {
                sink_places,
                ..state
            };
            return Ok(Ok(RowHead { state, hook }));
        }
        let Some(bytes) = self.hook_bytes(row.seq)? else {
            return Ok(Err(Loaded::HookMissing));
        };
        Ok(match decode_placed_hook_head(bytes) {
            Ok((hook, sink_places)) => {
                let state = RowState {
                    sink_places,
                    ..state
                };
                Ok(RowHead { state, hook })
            }
            Err(_) => Err(Loaded::HookCorrupt { state }),
        })
    }
}

impl DueIndex for TxnIndex<'_> {
    fn tenants(&mut self, out: &mut Vec<TenantId>) {
        out.extend(self.tenants.names().iter().cloned());
    }

    fn earliest_due_ms(&mut self, tenant: &TenantId, after: Option<&DueEntry>) -> Option<u64> {
        let tenant_no = self.tenants.number(tenant)?;
        let r = self.first_after(tenant_no, after, u64::MAX, 1);
        self.keep(r)?.first().map(|e| e.due_at_ms)
    }

    fn due_page(
        &mut self,
        tenant: &TenantId,
        now_ms: u64,
        after: Option<&DueEntry>,
        max_rows: usize,
        out: &mut Vec<DueEntry>,
    ) {
        let Some(tenant_no) = self.tenants.number(tenant) else {
            return;
        };
        let r = self.first_after(tenant_no, after, now_ms, max_rows);
        if let Some(page) = self.keep(r) {
            let r = self.read_ahead(&page);
            self.keep(r);
            out.extend(page);
        }
    }

    // A read error leaves the row as it is; the shell rebuilds from the store.
    fn load(&mut self, row: RowId) -> Loaded {
        let r = self.load_row(row);
        self.keep(r).unwrap_or(Loaded::RowMissing)
    }

    fn load_head(&mut self, row: RowId) -> Result<RowHead, Loaded> {
        let r = self.load_row_head(row);
        self.keep(r).unwrap_or(Err(Loaded::RowMissing))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::keys::hook_key;
    use crate::store::record::{encode_hook, sample_hook};
    use crate::store::{write_commit, NewRow};

    /// A head load decodes a hook's ids only: a hook whose body is cut short
    /// gives its ids to a head load, read ahead with its page or on its own,
    /// while a whole load reports it corrupt. Missing rows and hooks are
    /// reported as a whole load reports them.
    #[test]
    fn a_head_load_reads_a_hooks_ids_and_not_its_body() {
        let dir = tempfile::tempdir().unwrap();
        let (store, mut tenants) = super::super::fresh_store(dir.path());
        let mut wtxn = store.env.write_txn().unwrap();
        let sinks = [NewRow::unordered(0, "http")];
        // Hook `seq` of source `s<seq>`.
        let hook = |seq| Hook {
            source_id: Arc::from(format!("s{seq}")),
            ..sample_hook(seq)
        };
        for seq in 1..=4 {
            write_commit(&store, &mut wtxn, &mut tenants, &hook(seq), &sinks, 10).unwrap();
        }
        for seq in [2, 4] {
            let bytes = encode_hook(&hook(seq));
            let cut = &bytes[..bytes.len() - 3];
            store.records.put(&mut wtxn, &hook_key(seq), cut).unwrap();
        }
        let hook_3 = hook_key(3);
        store.records.delete(&mut wtxn, &hook_3).unwrap();

        let mut index = TxnIndex::new(&store, &wtxn, &tenants);
        let mut page = Vec::new();
        index.due_page(&Arc::from("t"), 10, None, 3, &mut page);
        assert_eq!(page.len(), 3, "rows of hooks 1 to 3, read ahead");
        let row = |seq| RowId { seq, sink_index: 0 };
        for seq in [1, 2, 4] {
            let head = index.load_head(row(seq)).unwrap();
            assert_eq!(
                (&*head.hook.id, &*head.hook.source_id),
                (&*format!("h{seq}"), &*format!("s{seq}"))
            );
            assert_eq!(&*head.state.sink_type, "http");
            assert!(!head.state.parked);
        }
        assert!(matches!(index.load(row(2)), Loaded::HookCorrupt { .. }));
        assert!(matches!(index.load(row(4)), Loaded::HookCorrupt { .. }));
        assert!(matches!(index.load_head(row(3)), Err(Loaded::HookMissing)));
        assert!(matches!(index.load_head(row(5)), Err(Loaded::RowMissing)));
        // A hook loaded whole gives its head from the loaded hook.
        assert!(matches!(index.load(row(1)), Loaded::Row { .. }));
        assert_eq!(index.load_head(row(1)).unwrap().hook.id, "h1");
        assert_eq!(index.finish().unwrap(), Vec::<Unreadable>::new());
    }
}
