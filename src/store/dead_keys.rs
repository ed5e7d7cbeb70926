//! Where a walk over a shard's dead rows (a listing, a count, a replay or
//! purge step) finds its dead keys: the `dead` tree, or, for a filter that
//! names a hook, that hook's few dead keys found through the hook-id index,
//! so one hook's dead letters cost a few reads however many others the
//! store holds.

use super::dead::DeadFilter;
use super::hook_index;
use super::keys::{hook_key, row_key, timed_key, TIMED_KEY_BYTES};
use super::record::{decode_hook_head, decode_row, RowStatus};
use super::{ShardStore, StoreError, TenantTable};
use crate::core::RowId;
use heed::RoTxn;
use std::ops::{Bound, RangeBounds};

/// One tenant's range of dead keys.
pub(super) type KeyRange<'k> = (Bound<&'k [u8]>, Bound<&'k [u8]>);

/// Dead keys in the order a walk takes them.
pub(super) type Keys<'t> = Box<dyn Iterator<Item = Result<&'t [u8], StoreError>> + 't>;

/// The dead keys a walk examines.
pub(super) enum DeadKeys {
    /// Every dead key, from the `dead` tree.
    All,
    /// The dead keys of the hook the filter names, sorted.
    OfHook(Vec<[u8; TIMED_KEY_BYTES]>),
}

impl DeadKeys {
    /// The keys a walk with `filter` needs to examine. A hook's keys come
    /// from its index entry and rows; where one of those does not decode
    /// (`goad verify` names it), the walk takes every key, as it would
    /// without the index, so a damaged record hides no dead letter.
    pub(super) fn of(
        store: &ShardStore,
        txn: &RoTxn,
        tenants: &TenantTable,
        filter: &DeadFilter,
    ) -> Result<DeadKeys, StoreError> {
        let Some(id) = &filter.hook_id else {
            return Ok(DeadKeys::All);
        };
        let entry = match hook_index::get(store, txn, id) {
            Ok(Some(entry)) => entry,
            // Not stored in this shard: no rows, dead or not.
            Ok(None) => return Ok(DeadKeys::OfHook(Vec::new())),
            Err(StoreError::Corrupt(_)) => return Ok(DeadKeys::All),
            Err(e) => return Err(e),
        };
        let head = store.records.get(txn, &hook_key(entry.seq))?;
        let Some(Ok(head)) = head.map(decode_hook_head) else {
            // A walk lists a row whose hook does not decode without a
            // hook id, so no hook filter matches it.
            return Ok(DeadKeys::OfHook(Vec::new()));
        };
        let Some(tenant_no) = tenants.number(&head.tenant) else {
            return Ok(DeadKeys::OfHook(Vec::new()));
        };
        let mut keys = Vec::new();
        for (sink_index, _) in entry.sinks.iter().filter(|(_, purged)| !purged) {
            let row = RowId {
                seq: entry.seq,
                sink_index: *sink_index,
            };
            let Some(bytes) = store.records.get(txn, &row_key(row))? else {
                continue;
            };
            let Ok(record) = decode_row(bytes) else {
                return Ok(DeadKeys::All);
            };
            let key = timed_key(tenant_no, record.at_ms, row);
            if record.status == RowStatus::Dead && store.dead.get(txn, &key)?.is_some() {
                keys.push(key);
            }
        }
        keys.sort_unstable();
        Ok(DeadKeys::OfHook(keys))
    }

    /// The keys within `range`, in key order, or newest first when
    /// `newest_first`.
    pub(super) fn within<'t>(
        &'t self,
        store: &ShardStore,
        txn: &'t RoTxn,
        range: KeyRange,
        newest_first: bool,
    ) -> Result<Keys<'t>, StoreError> {
        let key = |entry: heed::Result<(&'t [u8], &'t [u8])>| Ok(entry?.0);
        Ok(match self {
            DeadKeys::All if newest_first => Box::new(store.dead.rev_range(txn, &range)?.map(key)),
            DeadKeys::All => Box::new(store.dead.range(txn, &range)?.map(key)),
            DeadKeys::OfHook(keys) => {
                let mut inside: Vec<&[u8]> = keys
                    .iter()
                    .map(|k| &k[..])
                    .filter(|k| RangeBounds::<[u8]>::contains(&range, *k))
                    .collect();
                if newest_first {
                    inside.reverse();
                }
                Box::new(inside.into_iter().map(Ok))
            }
        })
    }
}
