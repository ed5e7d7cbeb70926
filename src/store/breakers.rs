//! Open circuit breakers, kept in `meta` so that a restart within a
//! breaker's open period keeps it open (see `core::breaker`): the key's
//! first attempt after the restart is a probe, not a wave of attempts at a
//! sink that is down.
//!
//! Key: `breaker/`, the tenant number (u32), the sink index (u16), the
//! source id's length (u16), the source id, the sink type. Value: the end of
//! the open period (u64 ms) and the opens in a row (u32). An entry is
//! written when a breaker opens and deleted when it closes, in the
//! transaction of the outcome that moved it. Opening a shard takes back
//! the entries still in their open period and deletes the others (their
//! breaker would probe at once: as good as closed, with nothing to tell).

use super::{ShardStore, StoreError, TenantTable};
use crate::core::SinkKey;
use heed::RwTxn;
use std::sync::Arc;

const PREFIX: &[u8] = b"breaker/";

fn entry_key(tenant_no: u32, key: &SinkKey) -> Vec<u8> {
    let source = key.source_id.as_bytes();
    let mut k = PREFIX.to_vec();
    k.extend_from_slice(&tenant_no.to_be_bytes());
    k.extend_from_slice(&key.sink_index.to_be_bytes());
    k.extend_from_slice(&(source.len() as u16).to_be_bytes());
    k.extend_from_slice(source);
    k.extend_from_slice(key.sink_type.as_bytes());
    k
}

/// The key and the open period of an entry; `None` when it does not decode.
fn parse_entry(tenants: &TenantTable, k: &[u8], v: &[u8]) -> Option<(SinkKey, u64, u32)> {
    let k = k.strip_prefix(PREFIX)?;
    let tenant_no = u32::from_be_bytes(k.get(..4)?.try_into().ok()?);
    let sink_index = u16::from_be_bytes(k.get(4..6)?.try_into().ok()?);
    let source_len = usize::from(u16::from_be_bytes(k.get(6..8)?.try_into().ok()?));
    let source = std::str::from_utf8(k.get(8..8 + source_len)?).ok()?;
    let sink_type = std::str::from_utf8(k.get(8 + source_len..)?).ok()?;
    let until_ms = u64::from_be_bytes(v.get(..8)?.try_into().ok()?);
    let opens = u32::from_be_bytes(v.get(8..12)?.try_into().ok()?);
    let key = SinkKey {
        tenant: tenants.names().get(tenant_no as usize)?.clone(),
        source_id: Arc::from(source),
        sink_index,
        sink_type: Arc::from(sink_type),
    };
    Some((key, until_ms, opens))
}

/// Keeps `key`'s breaker open until `until_ms`.
pub(super) fn put(
    store: &ShardStore,
    wtxn: &mut RwTxn,
    tenants: &TenantTable,
    key: &SinkKey,
    until_ms: u64,
    opens: u32,
) -> Result<(), StoreError> {
    let Some(tenant_no) = tenants.number(&key.tenant) else {
        return Ok(());
    };
    let mut value = until_ms.to_be_bytes().to_vec();
    value.extend_from_slice(&opens.to_be_bytes());
    store.meta.put(wtxn, &entry_key(tenant_no, key), &value)?;
    Ok(())
}

/// Forgets `key`'s breaker (it closed).
pub(super) fn delete(
    store: &ShardStore,
    wtxn: &mut RwTxn,
    tenants: &TenantTable,
    key: &SinkKey,
) -> Result<(), StoreError> {
    if let Some(tenant_no) = tenants.number(&key.tenant) {
        store.meta.delete(wtxn, &entry_key(tenant_no, key))?;
    }
    Ok(())
}

/// The breakers still open at `now_ms` (key, end of the open period, opens
/// in a row); the other entries, and any that does not decode, are deleted.
pub fn take_back(
    store: &ShardStore,
    tenants: &TenantTable,
    now_ms: u64,
) -> Result<Vec<(SinkKey, u64, u32)>, StoreError> {
    let mut wtxn = store.env.write_txn()?;
    let mut open = Vec::new();
    let mut stale = Vec::new();
    for entry in store.meta.prefix_iter(&wtxn, PREFIX)? {
        let (k, v) = entry?;
        match parse_entry(tenants, k, v) {
            Some((key, until_ms, opens)) if until_ms > now_ms => open.push((key, until_ms, opens)),
            _ => stale.push(k.to_vec()),
        }
    }
    for k in &stale {
        store.meta.delete(&mut wtxn, k)?;
    }
    wtxn.commit()?;
    Ok(open)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_open_breaker_is_taken_back_in_its_period_and_dropped_after() {
        let dir = tempfile::tempdir().unwrap();
        let (store, mut tenants) = super::super::fresh_store(dir.path());
        let key = |source: &str| SinkKey {
            tenant: Arc::from("t"),
            source_id: Arc::from(source),
            sink_index: 1,
            sink_type: Arc::from("http"),
        };
        let mut wtxn = store.env.write_txn().unwrap();
        tenants
            .number_or_assign(&store, &mut wtxn, &Arc::from("t"))
            .unwrap();
        put(&store, &mut wtxn, &tenants, &key("a"), 5_000, 2).unwrap();
        put(&store, &mut wtxn, &tenants, &key("b"), 900, 1).unwrap();
        put(&store, &mut wtxn, &tenants, &key("c"), 5_000, 1).unwrap();
        delete(&store, &mut wtxn, &tenants, &key("c")).unwrap();
        wtxn.commit().unwrap();
        assert_eq!(
            take_back(&store, &tenants, 1_000).unwrap(),
            [(key("a"), 5_000, 2)]
        );
        assert_eq!(
            take_back(&store, &tenants, 1_000).unwrap(),
            [(key("a"), 5_000, 2)],
            "the expired one is gone, the open one kept"
        );
        assert_eq!(take_back(&store, &tenants, 5_000).unwrap(), []);
    }
}
