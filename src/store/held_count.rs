//! Counting a tenant's held rows — those of paused sinks, due at
//! [`HELD_DUE_MS`] — by source and sink, for `/v1/sinks`: a walk of the
//! tenant's held range in a read transaction (the shard goes on), reading
//! each held row's record and its hook's head once.

use super::keys::{hook_key, parse_timed_key, row_key, timed_key};
use super::record::{decode_placed_hook_head, decode_row, SinkPlaces};
use super::{ShardStore, StoreError, TenantTable};
use crate::core::{RowId, HELD_DUE_MS};
use std::collections::HashMap;
use std::ops::Bound;
use std::sync::Arc;

/// Held rows by (source id, sink index).
pub type HeldBySink = HashMap<(Arc<str>, u16), u64>;

/// The sink index a held row of a source binds to now, from its stored
/// index and type and its hook's sinks' places (`Catalog::bind`); `None`
/// when its source or sink is gone.
pub type BindHeld<'a> = &'a dyn Fn(&str, u16, &str, Option<&[u64]>) -> Option<u16>;

impl ShardStore {
    /// How many of `tenant`'s rows are held, by source and the sink index
    /// `bind` gives each (a row whose sink is gone is not counted). It
    /// reads every held row and each held hook's head once (a hook's held
    /// rows are adjacent in the index): an admin call, not a hot path. A
    /// row or hook that is gone or does not decode is not counted.
    pub fn held_by_sink(&self, tenant: &str, bind: BindHeld<'_>) -> Result<HeldBySink, StoreError> {
        let table = TenantTable::load(self)?;
        let mut held = HeldBySink::new();
        let Some(no) = table.number(tenant) else {
            return Ok(held);
        };
        let rtxn = self.env.read_txn()?;
        let low = timed_key(no, HELD_DUE_MS, RowId::MIN);
        let high = timed_key(no, HELD_DUE_MS, RowId::MAX);
        let bounds = (Bound::Included(&low[..]), Bound::Included(&high[..]));
        let mut last_hook: Option<(u64, Arc<str>, Option<SinkPlaces>)> = None;
        for item in self.due.range(&rtxn, &bounds)? {
            let Some((_, _, row)) = parse_timed_key(item?.0) else {
                continue;
            };
            let record = self.records.get(&rtxn, &row_key(row))?;
            let Some(record) = record.and_then(|bytes| decode_row(bytes).ok()) else {
                continue;
            };
            if last_hook.as_ref().is_none_or(|(seq, ..)| *seq != row.seq) {
                let head = self.records.get(&rtxn, &hook_key(row.seq))?;
                let Some((head, places)) =
                    head.and_then(|bytes| decode_placed_hook_head(bytes).ok())
                else {
                    continue;
                };
                last_hook = Some((row.seq, head.source_id, places));
            }
            let (_, source, places) = last_hook.as_ref().expect("read above");
            let index = bind(source, row.sink_index, &record.sink_type, places.as_deref());
            if let Some(index) = index {
                *held.entry((source.clone(), index)).or_default() += 1;
            }
        }
        Ok(held)
    }
}
