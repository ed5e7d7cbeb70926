//! Purging dead letters: dead rows deleted for good, each hook with its
//! last row. Dead rows are kept until they are replayed or purged, so a
//! dead-letter queue an operator does not replay would otherwise fill the
//! store (see "Store size" in the module docs). Rows that do not decode are
//! purged too (a purge by source cannot tell their source, so only a purge
//! without one takes them).

use super::dead::{DeadFilter, DeadScan, Matching};
use super::hook_index;
use super::keys::row_key;
use super::tenant_bytes::TenantDeltas;
use super::write::delete_hook_if_rowless;
use super::{ShardStore, StoreError, TenantTable};
use heed::RwTxn;

/// One purge step for a shard: delete up to `max_rows` dead rows matching
/// `filter`, starting after `cursor`.
#[derive(Debug, Clone)]
pub struct PurgeStep {
    pub filter: DeadFilter,
    pub cursor: Option<Vec<u8>>,
    pub max_rows: u64,
}

/// What one purge step did in a shard.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Purged {
    pub purged: u64,
    /// The last dead key examined: the next step starts after it.
    pub cursor: Option<Vec<u8>>,
    /// Every matching dead row of the shard has been purged.
    pub exhausted: bool,
}

/// One purge step in a shard, inside its write transaction, examining at
/// most `budget` dead keys after its cursor.
pub fn purge(
    store: &ShardStore,
    wtxn: &mut RwTxn,
    tenants: &TenantTable,
    step: &PurgeStep,
    budget: usize,
) -> Result<Purged, StoreError> {
    let scan = DeadScan::new(&step.filter, &step.cursor, step.max_rows, budget);
    let Matching {
        rows,
        last,
        exhausted,
    } = scan.run(store, wtxn, tenants, |_| true)?;
    let mut deltas = TenantDeltas::default();
    for (key, tenant_no, row) in &rows {
        store.dead.delete(wtxn, key)?;
        store.records.delete(wtxn, &row_key(*row))?;
        // A hook that keeps other rows keeps its entry: mark the sink purged.
        if !delete_hook_if_rowless(store, wtxn, row.seq, Some(*tenant_no), &mut deltas)? {
            hook_index::mark_purged(store, wtxn, row.seq, row.sink_index)?;
        }
    }
    deltas.write(store, wtxn)?;
    Ok(Purged {
        purged: rows.len() as u64,
        cursor: last.or_else(|| step.cursor.clone()),
        exhausted,
    })
}
