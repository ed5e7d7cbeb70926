//! A hook looked up by the id its commit returned: where each of its
//! sinks' rows is (`GET /v1/hooks/{id}`, [`Engine::hook_status`]).
//!
//! [`Engine::hook_status`]: crate::Engine::hook_status

use super::hook_index;
use super::keys::{hook_key, member_key, parse_row_key, row_key};
use super::record::{decode_hook, decode_row, Hook, RowRecord, RowStatus};
use super::write::PARKED_ERROR;
use super::{ShardStore, StoreError};
use crate::core::{RowId, HELD_DUE_MS};
use heed::RoTxn;
use std::collections::BTreeMap;
use std::ops::Bound;

/// A stored hook and the state of each sink its commit wrote a row for.
#[derive(Debug, Clone)]
pub struct HookStatus {
    /// The shard that holds it.
    pub shard: u32,
    pub hook: Hook,
    /// In sink order.
    pub sinks: Vec<SinkStatus>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinkStatus {
    pub sink_index: u16,
    pub state: SinkState,
}

/// Where a hook's row for one sink is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SinkState {
    /// Waiting for its due time (its record's `at_ms`: now, or the end of a
    /// backoff) and a free slot.
    Due(RowRecord),
    /// Claimed: an attempt is queued or running.
    InFlight(RowRecord),
    /// Waiting behind the head of its ordering lane.
    InLane(RowRecord),
    /// Held while its sink is paused, or behind a slow sink's queue until
    /// the sink's wake makes it due (see `core::slow_keys`).
    Held(RowRecord),
    /// Never attempted, waiting for its sink's open breaker to close.
    Parked(RowRecord),
    /// Dead-lettered at its record's `at_ms`, for the reason in `error`.
    Dead(RowRecord),
    /// Its record does not decode (`goad verify` names it).
    Undecodable,
    /// Delivered: the row is gone and was not purged.
    Delivered,
    /// Dead-lettered, then purged.
    Purged,
}

impl ShardStore {
    /// The hook `id` with its sinks' states, if this shard holds it: `None`
    /// once every row is delivered or purged (the hook went with its last
    /// row), or for an id it never committed. `shard` is this store's index.
    pub fn hook_status(&self, shard: u32, id: &str) -> Result<Option<HookStatus>, StoreError> {
        let rtxn = self.env.read_txn()?;
        let Some(entry) = hook_index::get(self, &rtxn, id)? else {
            return Ok(None);
        };
        let Some(bytes) = self.records.get(&rtxn, &hook_key(entry.seq))? else {
            return Ok(None);
        };
        let hook = decode_hook(entry.seq, bytes)?;
        if hook.id != id {
            return Ok(None);
        }
        let mut states = self.row_states(&rtxn, entry.seq)?;
        for (sink_index, purged) in entry.sinks {
            let gone = if purged {
                SinkState::Purged
            } else {
                SinkState::Delivered
            };
            states.entry(sink_index).or_insert(gone);
        }
        let sinks = states
            .into_iter()
            .map(|(sink_index, state)| SinkStatus { sink_index, state })
            .collect();
        Ok(Some(HookStatus { shard, hook, sinks }))
    }

    /// The state of each row the hook at `seq` still has.
    fn row_states(&self, txn: &RoTxn, seq: u64) -> Result<BTreeMap<u16, SinkState>, StoreError> {
        let first = row_key(RowId { seq, sink_index: 0 });
        let last = row_key(RowId {
            seq,
            sink_index: u16::MAX,
        });
        let bounds = (Bound::Included(&first[..]), Bound::Included(&last[..]));
        let mut states = BTreeMap::new();
        for item in self.records.range(txn, &bounds)? {
            let (k, v) = item?;
            let Some(row) = parse_row_key(k) else {
                continue;
            };
            let state = match decode_row(v) {
                Ok(record) => self.state_of(txn, row, record)?,
                Err(_) => SinkState::Undecodable,
            };
            states.insert(row.sink_index, state);
        }
        Ok(states)
    }

    fn state_of(
        &self,
        txn: &RoTxn,
        row: RowId,
        record: RowRecord,
    ) -> Result<SinkState, StoreError> {
        if record.status == RowStatus::Dead {
            return Ok(SinkState::Dead(record));
        }
        if self.inflight.get(txn, &row_key(row))?.is_some() {
            return Ok(SinkState::InFlight(record));
        }
        let member = match record.lane {
            Some(lane) => self.members.get(txn, &member_key(lane, row.seq))?.is_some(),
            None => false,
        };
        Ok(if member {
            SinkState::InLane(record)
        } else if record.at_ms == HELD_DUE_MS && record.error.as_deref() == Some(PARKED_ERROR) {
            SinkState::Parked(record)
        } else if record.at_ms == HELD_DUE_MS {
            SinkState::Held(record)
        } else {
            SinkState::Due(record)
        })
    }
}
