//! Open circuit breakers, kept in `meta` so that a restart within a
//! breaker's open period keeps it open (see `core::breaker`): the key's
//! first attempt after the restart is a probe, not a wave of attempts at a
//! sink that is down.
//!
//! Key: `breaker/`, the tenant number (u32), the sink index (u16), the
//! source id's length (u16), the source id, the sink type. Value: the end of
//! the open period (u64 ms), the opens in a row (u32), then the sink's
//! spot: its place (u64) and rank (u16) (see `core::SinkSpot`; absent in
//! an entry written before 2026-12-07, which goes by its index). An entry
//! is written when a breaker opens and deleted when it closes, in the
//! transaction of the outcome that moved it. Opening a shard takes back
//! the entries still in their open period and deletes the others (their
//! breaker would probe at once: as good as closed, with nothing to tell);
//! the core finds each one's sink by its spot (see `Core::restore_breakers`).

use super::{ShardStore, StoreError, TenantTable};
use crate::core::{OpenBreaker, SinkKey, SinkSpot};
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

/// The breaker an entry keeps; `None` when it does not decode.
fn parse_entry(tenants: &TenantTable, k: &[u8], v: &[u8]) -> Option<OpenBreaker> {
    let k = k.strip_prefix(PREFIX)?;
    let tenant_no = u32::from_be_bytes(k.get(..4)?.try_into().ok()?);
    let sink_index = u16::from_be_bytes(k.get(4..6)?.try_into().ok()?);
    let source_len = usize::from(u16::from_be_bytes(k.get(6..8)?.try_into().ok()?));
    let source = std::str::from_utf8(k.get(8..8 + source_len)?).ok()?;
    let sink_type = std::str::from_utf8(k.get(8 + source_len..)?).ok()?;
    let until_ms = u64::from_be_bytes(v.get(..8)?.try_into().ok()?);
    let opens = u32::from_be_bytes(v.get(8..12)?.try_into().ok()?);
    let spot = match v.len() {
        12 => None,
        22 => Some(SinkSpot {
            place: u64::from_be_bytes(v[12..20].try_into().ok()?),
            rank: u16::from_be_bytes(v[20..22].try_into().ok()?),
        }),
        _ => return None,
    };
    let key = SinkKey {
        tenant: tenants.names().get(tenant_no as usize)?.clone(),
        source_id: Arc::from(source),
        sink_index,
        sink_type: Arc::from(sink_type),
    };
    Some(OpenBreaker {
        key,
        until_ms,
        opens,
        spot,
    })
}

/// Keeps `open` until the end of its open period.
pub(super) fn put(
    store: &ShardStore,
    wtxn: &mut RwTxn,
    tenants: &TenantTable,
    open: &OpenBreaker,
) -> Result<(), StoreError> {
    let Some(tenant_no) = tenants.number(&open.key.tenant) else {
        return Ok(());
    };
    let mut value = open.until_ms.to_be_bytes().to_vec();
    value.extend_from_slice(&open.opens.to_be_bytes());
    if let Some(spot) = open.spot {
        value.extend_from_slice(&spot.place.to_be_bytes());
        value.extend_from_slice(&spot.rank.to_be_bytes());
    }
    store
        .meta
        .put(wtxn, &entry_key(tenant_no, &open.key), &value)?;
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

/// The breakers still open at `now_ms`; the other entries, and any that
/// does not decode, are deleted.
pub fn take_back(
    store: &ShardStore,
    tenants: &TenantTable,
    now_ms: u64,
) -> Result<Vec<OpenBreaker>, StoreError> {
    let mut wtxn = store.env.write_txn()?;
    let mut open = Vec::new();
    let mut stale = Vec::new();
    for entry in store.meta.prefix_iter(&wtxn, PREFIX)? {
        let (k, v) = entry?;
        match parse_entry(tenants, k, v) {
            Some(breaker) if breaker.until_ms > now_ms => open.push(breaker),
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

    /// An open breaker of sink 1 of source `source`, of tenant `t`.
    fn open(source: &str, until_ms: u64, opens: u32, spot: Option<SinkSpot>) -> OpenBreaker {
        let key = SinkKey {
            tenant: Arc::from("t"),
            source_id: Arc::from(source),
            sink_index: 1,
            sink_type: Arc::from("http"),
        };
        OpenBreaker {
            key,
            until_ms,
            opens,
            spot,
        }
    }

    #[test]
    fn an_open_breaker_is_taken_back_in_its_period_with_its_spot_and_dropped_after() {
        let dir = tempfile::tempdir().unwrap();
        let (store, mut tenants) = super::super::fresh_store(dir.path());
        let mut wtxn = store.env.write_txn().unwrap();
        tenants
            .number_or_assign(&store, &mut wtxn, &Arc::from("t"))
            .unwrap();
        let spot = Some(SinkSpot {
            place: 0x5fab_6428_2cda_e5d9,
            rank: 1,
        });
        let a = open("a", 5_000, 2, spot);
        put(&store, &mut wtxn, &tenants, &a).unwrap();
        put(&store, &mut wtxn, &tenants, &open("b", 900, 1, spot)).unwrap();
        let c = open("c", 5_000, 1, None);
        put(&store, &mut wtxn, &tenants, &c).unwrap();
        delete(&store, &mut wtxn, &tenants, &c.key).unwrap();
        // As a goad before 2026-12-07 wrote it: no spot.
        let legacy = open("d", 6_000, 3, None);
        let mut value = 6_000u64.to_be_bytes().to_vec();
        value.extend_from_slice(&3u32.to_be_bytes());
        let k = entry_key(0, &legacy.key);
        store.meta.put(&mut wtxn, &k, &value).unwrap();
        wtxn.commit().unwrap();
        let both = [a.clone(), legacy.clone()];
        assert_eq!(take_back(&store, &tenants, 1_000).unwrap(), both);
        assert_eq!(
            take_back(&store, &tenants, 1_000).unwrap(),
            both,
            "the expired one is gone, the open ones kept"
        );
        assert_eq!(take_back(&store, &tenants, 5_000).unwrap(), [legacy]);
        assert_eq!(take_back(&store, &tenants, 6_000).unwrap(), []);
    }
}
