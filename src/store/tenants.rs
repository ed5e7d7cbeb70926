//! The shard's tenant table: tenant ids ↔ shard-local tenant numbers, which
//! prefix the due and dead keys so each tenant's rows are one key range.

use super::{ShardStore, StoreError};
use crate::core::TenantId;
use std::collections::HashMap;

/// Loaded at open and extended by the shard thread (the only writer).
#[derive(Debug, Default)]
pub struct TenantTable {
    by_name: HashMap<TenantId, u32>,
    names: Vec<TenantId>,
}

impl TenantTable {
    pub fn load(store: &ShardStore) -> Result<TenantTable, StoreError> {
        let rtxn = store.env.read_txn()?;
        TenantTable::load_in(store, &rtxn)
    }

    /// The table as `txn` sees it.
    pub fn load_in(store: &ShardStore, txn: &heed::RoTxn) -> Result<TenantTable, StoreError> {
        let mut pairs = Vec::new();
        for item in store.tenants.iter(txn)? {
            let (k, v) = item?;
            let name =
                std::str::from_utf8(k).map_err(|_| super::CorruptRecord { what: "tenant" })?;
            let no = u32::from_be_bytes(
                v.try_into()
                    .map_err(|_| super::CorruptRecord { what: "tenant" })?,
            );
            pairs.push((TenantId::from(name), no));
        }
        pairs.sort_by_key(|(_, no)| *no);
        let mut table = TenantTable::default();
        for (expected, (name, no)) in pairs.into_iter().enumerate() {
            // Numbers are given out densely from 0: a gap or a repeat is corrupt.
            if no as usize != expected {
                return Err(super::CorruptRecord { what: "tenant" }.into());
            }
            table.by_name.insert(name.clone(), no);
            table.names.push(name);
        }
        Ok(table)
    }

    pub fn number(&self, tenant: &str) -> Option<u32> {
        self.by_name.get(tenant).copied()
    }

    pub fn name(&self, no: u32) -> &TenantId {
        &self.names[no as usize]
    }

    pub fn names(&self) -> &[TenantId] {
        &self.names
    }

    /// The tenant's number, assigning the next one (in `wtxn`) if it is new.
    /// A new number is only kept in memory once `wtxn` commits: call
    /// [`TenantTable::forget_after`] when it aborts.
    pub fn number_or_assign(
        &mut self,
        store: &ShardStore,
        wtxn: &mut heed::RwTxn,
        tenant: &TenantId,
    ) -> Result<u32, StoreError> {
        if let Some(no) = self.number(tenant) {
            return Ok(no);
        }
        let no = self.names.len() as u32;
        store
            .tenants
            .put(wtxn, tenant.as_bytes(), &no.to_be_bytes())?;
        self.by_name.insert(tenant.clone(), no);
        self.names.push(tenant.clone());
        Ok(no)
    }

    /// Drops tenants numbered `count` and above (their transaction aborted).
    pub fn forget_after(&mut self, count: usize) {
        for name in self.names.drain(count..) {
            self.by_name.remove(&name);
        }
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}
