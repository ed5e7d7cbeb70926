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
use super::record::{decode_hook, decode_row, Hook, RowRecord, RowStatus};
use super::write::PARKED_ERROR;
use super::{ShardStore, StoreError, TenantTable};
use crate::core::{DueEntry, DueIndex, Loaded, RowId, RowState, TenantId};
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
    hooks: HashMap<u64, Arc<Hook>>,
    /// Rows of the last page read ahead (see [`TxnIndex::read_ahead`]),
    /// in row order.
    rows: Vec<(RowId, Option<RowRecord>)>,
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
        // A record that does not decode is left out: `load_row` reads it
        // again and reports it corrupt.
        for item in self.store.records.range(self.txn, &bounds)? {
            let (k, v) = item?;
            if is_hook_key(k) {
                let seq = u64_at(k, 0);
                let needed = wanted.binary_search_by(|r| r.seq.cmp(&seq)).is_ok();
                if needed && !self.hooks.contains_key(&seq) {
                    if let Ok(hook) = decode_hook(seq, v) {
                        self.hooks.insert(seq, Arc::new(hook));
                    }
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

    fn load_row(&mut self, row: RowId) -> Result<Loaded, StoreError> {
        let ahead = match self.rows.binary_search_by(|(r, _)| r.cmp(&row)) {
            Ok(i) => self.rows[i].1.take(),
            Err(_) => None,
        };
        let record = match ahead {
            Some(record) => record,
            None => {
                let Some(bytes) = self.store.records.get(self.txn, &row_key(row))? else {
                    return Ok(Loaded::RowMissing);
                };
                match decode_row(bytes) {
                    Ok(record) => record,
                    Err(_) => return Ok(Loaded::RowCorrupt),
                }
            }
        };
        // A due key names only pending rows; a row that says otherwise
        // contradicts the index.
        if record.status != RowStatus::Pending {
            return Ok(Loaded::RowCorrupt);
        }
        let state = RowState {
            parked: record.error.as_deref() == Some(PARKED_ERROR),
            sink_type: record.sink_type,
            attempts: record.attempts,
            first_attempt_at_ms: record.first_attempt_at_ms,
            replay: record.replay,
            lane: record.lane,
        };
        let hook = match self.hooks.get(&row.seq) {
            Some(h) => h.clone(),
            None => {
                let Some(bytes) = self.store.records.get(self.txn, &hook_key(row.seq))? else {
                    return Ok(Loaded::HookMissing);
                };
                let Ok(hook) = decode_hook(row.seq, bytes) else {
                    return Ok(Loaded::HookCorrupt { state });
                };
                let hook = Arc::new(hook);
                self.hooks.insert(row.seq, hook.clone());
                hook
            }
        };
        Ok(Loaded::Row { state, hook })
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

    fn load(&mut self, row: RowId) -> Loaded {
        let r = self.load_row(row);
        // A read error leaves the row as it is; the shell rebuilds from the store.
        self.keep(r).unwrap_or(Loaded::RowMissing)
    }
}
