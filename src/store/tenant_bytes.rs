//! What each tenant's hooks hold in the shard's store: per tenant number,
//! the sum of the encoded lengths of its hook records (each body verbatim
//! with its headers). A commit adds its hook's length and the deletion of
//! a hook with its last row takes it away, in the transaction that writes
//! or deletes the hook (summed per tenant over a batch of writes, see
//! [`TenantDeltas`]), so the count is exact whatever a crash undoes.
//! Ingest refuses a tenant whose count is at its `max_stored_bytes` (see
//! `runtime::room`): one tenant's backlog cannot fill the store that every
//! tenant of the shard shares.
//!
//! `tenant_bytes`: tenant_no u32 → bytes u64 (no key while a tenant holds
//! no hook). A hook whose record stops decoding after its commit keeps its
//! bytes counted (`goad verify` names both) until it goes; then its tenant
//! is counted again from the records.

use super::keys::is_hook_key;
use super::record::decode_hook_head;
use super::{ShardStore, StoreError, TenantTable};
use heed::{RoTxn, RwTxn};
use std::collections::BTreeMap;

fn key(tenant_no: u32) -> [u8; 4] {
    tenant_no.to_be_bytes()
}

/// The bytes the tenant's hooks hold.
pub fn get(store: &ShardStore, txn: &RoTxn, tenant_no: u32) -> Result<u64, StoreError> {
    Ok(store
        .tenant_bytes
        .get(txn, &key(tenant_no))?
        .and_then(|v| v.try_into().ok())
        .map_or(0, u64::from_be_bytes))
}

/// Counts a new hook record of `bytes` for the tenant.
pub(super) fn add(
    store: &ShardStore,
    wtxn: &mut RwTxn,
    tenant_no: u32,
    bytes: u64,
) -> Result<(), StoreError> {
    let total = get(store, wtxn, tenant_no)?.saturating_add(bytes);
    store
        .tenant_bytes
        .put(wtxn, &key(tenant_no), &total.to_be_bytes())?;
    Ok(())
}

/// Takes a deleted hook record of `bytes` off the tenant's count.
pub(super) fn remove(
    store: &ShardStore,
    wtxn: &mut RwTxn,
    tenant_no: u32,
    bytes: u64,
) -> Result<(), StoreError> {
    let total = get(store, wtxn, tenant_no)?.saturating_sub(bytes);
    if total == 0 {
        store.tenant_bytes.delete(wtxn, &key(tenant_no))?;
    } else {
        store
            .tenant_bytes
            .put(wtxn, &key(tenant_no), &total.to_be_bytes())?;
    }
    Ok(())
}

/// What `goad verify` finds wrong with the counts: a tenant whose count
/// is not what its hook records hold (hooks that do not decode, which
/// verify names apart, may explain it).
pub(super) fn check(store: &ShardStore, txn: &RoTxn) -> Result<Vec<String>, StoreError> {
    let tenants = TenantTable::load_in(store, txn)?;
    let (counted, unreadable) = count(store, txn, &tenants)?;
    let stored = stored(store, txn)?;
    let hint = if unreadable.is_empty() {
        String::new()
    } else {
        format!(
            " ({} hooks that do not decode may hold the difference)",
            unreadable.len()
        )
    };
    let numbers: std::collections::BTreeSet<u32> =
        counted.keys().chain(stored.keys()).copied().collect();
    let mut problems = Vec::new();
    for no in numbers {
        let (is, holds) = (stored.get(&no).copied(), counted.get(&no).copied());
        if is.unwrap_or(0) != holds.unwrap_or(0) || is == Some(0) {
            let name = tenants.names().get(no as usize).map_or("?", |n| &**n);
            problems.push(format!(
                "tenant {name:?} (number {no}) counts {} stored bytes, but its hooks hold {}{hint}",
                is.unwrap_or(0),
                holds.unwrap_or(0)
            ));
        }
    }
    Ok(problems)
}

/// Changes to the counts made by a batch of writes, written once per
/// tenant at the batch's end ([`TenantDeltas::write`], in the same
/// transaction): a read and a write per hook cost a quarter of the commits
/// a shard could take with deliveries held (measured), one per tenant per
/// batch costs nothing seen.
#[derive(Debug, Default)]
pub struct TenantDeltas {
    deltas: BTreeMap<u32, i64>,
}

impl TenantDeltas {
    pub(super) fn add(&mut self, tenant_no: u32, bytes: u64) {
        *self.deltas.entry(tenant_no).or_default() += bytes as i64;
    }

    pub(super) fn remove(&mut self, tenant_no: u32, bytes: u64) {
        *self.deltas.entry(tenant_no).or_default() -= bytes as i64;
    }

    /// The tenant's count was just set from its records: nothing of this
    /// batch is left to add to it.
    fn settled(&mut self, tenant_no: u32) {
        self.deltas.remove(&tenant_no);
    }

    /// Writes the batch's changes into `wtxn`.
    pub fn write(self, store: &ShardStore, wtxn: &mut RwTxn) -> Result<(), StoreError> {
        for (tenant_no, delta) in self.deltas {
            match delta {
                0 => {}
                d if d > 0 => add(store, wtxn, tenant_no, d as u64)?,
                d => remove(store, wtxn, tenant_no, d.unsigned_abs())?,
            }
        }
        Ok(())
    }
}

/// Every tenant's count as stored, by tenant number.
pub(super) fn stored(store: &ShardStore, txn: &RoTxn) -> Result<BTreeMap<u32, u64>, StoreError> {
    let mut out = BTreeMap::new();
    for item in store.tenant_bytes.iter(txn)? {
        let (k, v) = item?;
        let (Ok(k), Ok(v)) = (<[u8; 4]>::try_from(k), <[u8; 8]>::try_from(v)) else {
            return Err(super::CorruptRecord {
                what: "tenant byte count",
            }
            .into());
        };
        out.insert(u32::from_be_bytes(k), u64::from_be_bytes(v));
    }
    Ok(out)
}

/// What the tenants' hook records hold, counted from the records: each
/// hook whose head decodes, by its tenant's number. Hooks that do not
/// decode, or name a tenant with no number, are returned apart.
pub(super) fn count(
    store: &ShardStore,
    txn: &RoTxn,
    tenants: &TenantTable,
) -> Result<(BTreeMap<u32, u64>, Vec<u64>), StoreError> {
    let mut counted = BTreeMap::new();
    let mut unattributed = Vec::new();
    for item in store.records.iter(txn)? {
        let (k, v) = item?;
        if !is_hook_key(k) {
            continue;
        }
        let no = decode_hook_head(v)
            .ok()
            .and_then(|head| tenants.number(&head.tenant));
        match no {
            Some(no) => *counted.entry(no).or_default() += v.len() as u64,
            None => unattributed.push(u64::from_be_bytes(k.try_into().expect("a hook key"))),
        }
    }
    Ok((counted, unattributed))
}

/// Sets one tenant's count from its hook records that decode (after one
/// that did not was deleted), dropping what `deltas` held for it.
pub(super) fn recount_tenant(
    store: &ShardStore,
    wtxn: &mut RwTxn,
    tenant_no: u32,
    deltas: &mut TenantDeltas,
) -> Result<(), StoreError> {
    let tenants = TenantTable::load_in(store, wtxn)?;
    let (counted, _) = count(store, wtxn, &tenants)?;
    let bytes = counted.get(&tenant_no).copied().unwrap_or(0);
    remove(store, wtxn, tenant_no, u64::MAX)?;
    if bytes > 0 {
        add(store, wtxn, tenant_no, bytes)?;
    }
    deltas.settled(tenant_no);
    Ok(())
}

/// Sets every tenant's count from its hook records (a store upgraded from
/// a format without counts); returns how many tenants hold hooks.
pub(super) fn recount(store: &ShardStore, wtxn: &mut RwTxn) -> Result<usize, StoreError> {
    let tenants = TenantTable::load_in(store, wtxn)?;
    let (counted, _) = count(store, wtxn, &tenants)?;
    store.tenant_bytes.clear(wtxn)?;
    for (no, bytes) in &counted {
        store
            .tenant_bytes
            .put(wtxn, &key(*no), &bytes.to_be_bytes())?;
    }
    Ok(counted.len())
}
