//! Stores holding dead letters, for tests.

use super::record::{sample_hook, Hook};
use super::tenant_bytes::TenantDeltas;
use super::write::{apply, write_commit, NewRow};
use super::{RowId, ShardStore, TenantTable};
use crate::core::{RowFields, StoreOp};
use heed::RwTxn;
use std::sync::Arc;

/// The reason `dead_rows` gives every row.
pub(crate) const REFUSED: &str = "sink http: permanent: HTTP status 410";

/// A store whose dead letters are, in dead-key order, `sources[i]`'s
/// hook `i + 1`, dead at `10 + i` (as `REFUSED`, at its sink 0).
pub(crate) fn dead_rows(dir: &std::path::Path, sources: &[&str]) -> (ShardStore, TenantTable) {
    let rows: Vec<(&str, u16, &str)> = sources.iter().map(|s| (*s, 0, REFUSED)).collect();
    dead_rows_of(dir, &rows)
}

/// A store whose dead letters are, in dead-key order, hook `i + 1` of
/// source `rows[i].0`, dead at `10 + i` at its sink `rows[i].1`, for
/// the reason `rows[i].2`.
pub(crate) fn dead_rows_of(
    dir: &std::path::Path,
    rows: &[(&str, u16, &str)],
) -> (ShardStore, TenantTable) {
    let store = ShardStore::open(dir, 0, 1).unwrap();
    let mut tenants = TenantTable::load(&store).unwrap();
    let mut wtxn = store.env.write_txn().unwrap();
    for (i, &(source, sink_index, reason)) in rows.iter().enumerate() {
        let hook = Hook {
            source_id: Arc::from(source),
            ..sample_hook(i as u64 + 1)
        };
        let sinks = [NewRow::unordered(sink_index, "http")];
        write_commit(&store, &mut wtxn, &mut tenants, &hook, &sinks, 1).unwrap();
        let row = RowId {
            seq: hook.seq,
            sink_index,
        };
        let fields = RowFields {
            tenant: hook.tenant.clone(),
            sink_type: Arc::from("http"),
            attempts: 1,
            first_attempt_at_ms: 2,
            size_bytes: hook.size_bytes(),
            replay: None,
            lane: None,
        };
        let ops = [
            StoreOp::Claim {
                row,
                tenant: hook.tenant.clone(),
                due_at_ms: 1,
                size_bytes: hook.size_bytes(),
            },
            StoreOp::Dead {
                row,
                fields,
                dead_at_ms: 10 + i as u64,
                reason: reason.into(),
            },
        ];
        apply_all(&store, &mut wtxn, &tenants, &ops);
    }
    wtxn.commit().unwrap();
    (store, tenants)
}

/// Writes `ops` as a shard writes its core's decisions.
pub(crate) fn apply_all(
    store: &ShardStore,
    wtxn: &mut RwTxn,
    tenants: &TenantTable,
    ops: &[StoreOp],
) {
    for op in ops {
        apply(store, wtxn, tenants, op, &mut TenantDeltas::default()).unwrap();
    }
}
