//! Counting a tenant's held rows — those of paused sinks, due at
//! [`HELD_DUE_MS`] — by source and sink, for `/v1/sinks`: a walk of the
//! tenant's held range in a read transaction (the shard goes on), reading
//! each held hook's head once.

use super::keys::{hook_key, parse_timed_key, timed_key};
use super::record::decode_hook_head;
use super::{ShardStore, StoreError, TenantTable};
use crate::core::{RowId, HELD_DUE_MS};
use std::collections::HashMap;
use std::ops::Bound;
use std::sync::Arc;

/// Held rows by (source id, sink index).
pub type HeldBySink = HashMap<(Arc<str>, u16), u64>;

impl ShardStore {
    /// How many of `tenant`'s rows are held, by source and sink index. It
    /// reads every held row's key and each held hook's head once (a hook's
    /// held rows are adjacent in the index): an admin call, not a hot
    /// path. A row whose hook is gone or does not decode is not counted.
    pub fn held_by_sink(&self, tenant: &str) -> Result<HeldBySink, StoreError> {
        let table = TenantTable::load(self)?;
        let mut held = HeldBySink::new();
        let Some(no) = table.number(tenant) else {
            return Ok(held);
        };
        let rtxn = self.env.read_txn()?;
        let low = timed_key(no, HELD_DUE_MS, RowId::MIN);
        let high = timed_key(no, HELD_DUE_MS, RowId::MAX);
        let bounds = (Bound::Included(&low[..]), Bound::Included(&high[..]));
        let mut last_hook: Option<(u64, Arc<str>)> = None;
        for item in self.due.range(&rtxn, &bounds)? {
            let Some((_, _, row)) = parse_timed_key(item?.0) else {
                continue;
            };
            let source = match &last_hook {
                Some((seq, source)) if *seq == row.seq => source.clone(),
                _ => {
                    let head = self.records.get(&rtxn, &hook_key(row.seq))?;
                    let Some(head) = head.and_then(|bytes| decode_hook_head(bytes).ok()) else {
                        continue;
                    };
                    last_hook = Some((row.seq, head.source_id.clone()));
                    head.source_id
                }
            };
            *held.entry((source, row.sink_index)).or_default() += 1;
        }
        Ok(held)
    }
}
