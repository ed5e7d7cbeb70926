//! Per-tenant gauges for the node's stats route.

use super::{Core, TenantId};

/// One tenant's claimed, running and parked rows and open breakers in a shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantStats {
    pub tenant: TenantId,
    pub claimed_rows: u64,
    pub claimed_bytes: u64,
    /// Sink calls running: one per attempt, one per batch of attempts.
    pub running: u64,
    /// Rows parked behind an open breaker since the shard opened.
    pub parked: u64,
    /// The tenant's sink keys whose breaker is open or half-open.
    pub breakers_open: u64,
}

impl Core {
    /// Every tenant the core has seen, by tenant id.
    pub fn tenant_stats(&self) -> Vec<TenantStats> {
        let mut out: Vec<TenantStats> = self
            .tenants
            .iter()
            .map(|(tenant, state)| TenantStats {
                tenant: tenant.clone(),
                claimed_rows: state.claimed.rows,
                claimed_bytes: state.claimed.bytes,
                running: state.calls,
                parked: state.parked,
                breakers_open: self
                    .breakers
                    .iter()
                    .filter(|(key, b)| key.tenant == *tenant && b.is_open())
                    .count() as u64,
            })
            .collect();
        out.sort_by(|a, b| a.tenant.cmp(&b.tenant));
        out
    }
}
