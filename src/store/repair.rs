//! Index entries that do not decode, read past instead of failed on.
//!
//! Due entries a scan could not read are set aside in the iteration's write
//! transaction, so that one bad entry does not fail every scan of its shard
//! (each failure would rebuild the shard and hold its deliveries off for
//! `STORE_RETRY_MS`):
//! - A key that names a row, with a value that is not a size: the value is
//!   rewritten from the row's record (0 if the record cannot say), and the
//!   row is due as before. If the record is missing or corrupt, the next scan
//!   treats the row as it treats any such row (forgotten, or quarantined as a
//!   dead letter).
//! - A key that is not a due key names no row that could be delivered: it
//!   is deleted and its bytes are logged. If it was a damaged copy of a real
//!   row's key, that row is now in no index, and `goad verify` names it.
//!
//! Recovery reads in-flight markers the same way: a marker whose value does
//! not decode is made due again under the tenant its hook names (see
//! [`claimed_row_from_records`]); a marker key that names no row is dropped
//! with the others and logged.

use super::index::Unreadable;
use super::keys::{hook_key, parse_timed_key, row_key};
use super::record::{decode_hook_head, decode_row};
use super::{ShardStore, StoreError, TenantTable};
use crate::core::{RowId, TenantId};
use heed::{RoTxn, RwTxn};

/// Sets `unreadable` aside; returns how many entries were rewritten or
/// deleted (an entry read twice by one scan counts once).
pub fn set_aside_unreadable(
    store: &ShardStore,
    wtxn: &mut RwTxn,
    mut unreadable: Vec<Unreadable>,
) -> Result<usize, StoreError> {
    unreadable.sort_unstable_by(|a, b| a.key.cmp(&b.key));
    unreadable.dedup_by(|a, b| a.key == b.key);
    for entry in &unreadable {
        let (key, value) = (hex::encode(&entry.key), hex::encode(&entry.value));
        match parse_timed_key(&entry.key) {
            Some((_, _, row)) => {
                let size_bytes = recorded_size_bytes(store, wtxn, row)?.unwrap_or(0);
                store.due.put(wtxn, &entry.key, &size_bytes.to_be_bytes())?;
                crate::log::error(
                    "a due entry's value did not decode; rewrote it from its row's record",
                    &[
                        ("row", &row),
                        ("value", &value),
                        ("size_bytes", &size_bytes),
                    ],
                );
            }
            None => {
                store.due.delete(wtxn, &entry.key)?;
                crate::log::error(
                    "a due key names no row; deleted it (goad verify names a row it leaves in no index)",
                    &[("key", &key), ("value", &value)],
                );
            }
        }
    }
    Ok(unreadable.len())
}

/// The tenant and size of a claimed row whose in-flight marker (`value`)
/// does not decode, from its hook and row records; `None` when its hook
/// cannot name a tenant of the shard.
pub fn claimed_row_from_records(
    store: &ShardStore,
    txn: &RoTxn,
    tenants: &TenantTable,
    row: RowId,
    value: &[u8],
) -> Result<Option<(TenantId, u64)>, StoreError> {
    let tenant = store
        .records
        .get(txn, &hook_key(row.seq))?
        .and_then(|bytes| decode_hook_head(bytes).ok())
        .and_then(|head| tenants.number(&head.tenant).map(|_| head.tenant));
    let Some(tenant) = tenant else {
        return Ok(None);
    };
    let size_bytes = recorded_size_bytes(store, txn, row)?.unwrap_or(0);
    crate::log::error(
        "an in-flight marker did not decode; the row is due again under its hook's tenant",
        &[
            ("row", &row),
            ("value", &hex::encode(value)),
            ("tenant", &tenant),
            ("size_bytes", &size_bytes),
        ],
    );
    Ok(Some((tenant, size_bytes)))
}

/// Logs an in-flight marker key that names no row (recovery drops it).
pub fn log_unnamed_marker(key: &[u8], value: &[u8]) {
    crate::log::error(
        "an in-flight marker key names no row; dropped it (goad verify names a row it leaves in no index)",
        &[("key", &hex::encode(key)), ("value", &hex::encode(value))],
    );
}

/// The size a row's record holds, if the record is there and decodes.
fn recorded_size_bytes(
    store: &ShardStore,
    txn: &RoTxn,
    row: RowId,
) -> Result<Option<u64>, StoreError> {
    let record = store.records.get(txn, &row_key(row))?;
    Ok(record
        .and_then(|bytes| decode_row(bytes).ok())
        .map(|record| record.size_bytes))
}
