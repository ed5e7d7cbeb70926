//! The coordinator: owns the node's global windows (`dispatch.max_inflight`,
//! `max_inflight_bytes`, `concurrency`) and grants each shard a share in
//! proportion to its active tenants, so that fairness holds per tenant
//! across the node rather than per shard.
//!
//! Shards report their active tenant count when it changes (and at most
//! every `REPORT_INTERVAL_MS` while busy). A shard with no active tenant
//! weighs a quarter tenant, so it can claim a new commit at once. Shares are
//! leases the shard spends locally; a lowered share only stops the shard's
//! next claim or start, so during a rebalance the shards' sum can exceed the
//! global window by what the shrinking shards still hold.

use super::shard::ShardInput;
use crate::config::DispatchConfig;
use crate::core::Grant;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use std::time::Duration;

/// A shard's demand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Demand {
    pub shard_index: usize,
    pub active_tenants: u64,
}

/// Messages to the coordinator.
#[derive(Debug)]
pub enum CoordinatorInput {
    Demand(Demand),
    Reconfigure(Grant),
    Stop,
}

/// The node's global windows as one grant.
pub fn global_grant(dispatch: &DispatchConfig) -> Grant {
    Grant {
        max_inflight: dispatch.max_inflight.into(),
        max_inflight_bytes: dispatch.max_inflight_bytes,
        concurrency: dispatch.concurrency.into(),
    }
}

/// Splits `global` among shards by weight: four per active tenant, one for
/// a shard with none. Every share is at least 1; remainders go to the
/// largest fractions.
pub fn shares(global: Grant, active_tenants: &[u64]) -> Vec<Grant> {
    let weights: Vec<u64> = active_tenants
        .iter()
        .map(|&a| if a == 0 { 1 } else { 4 * a })
        .collect();
    let split = |total: u64| split_by_weight(total, &weights);
    let rows = split(global.max_inflight);
    let bytes = split(global.max_inflight_bytes);
    let concurrency = split(global.concurrency);
    (0..weights.len())
        .map(|i| Grant {
            max_inflight: rows[i],
            max_inflight_bytes: bytes[i],
            concurrency: concurrency[i],
        })
        .collect()
}

fn split_by_weight(total: u64, weights: &[u64]) -> Vec<u64> {
    let sum: u128 = weights.iter().map(|&w| u128::from(w)).sum();
    let exact: Vec<u128> = weights
        .iter()
        .map(|&w| u128::from(total) * u128::from(w))
        .collect();
    let mut out: Vec<u64> = exact.iter().map(|e| (e / sum) as u64).collect();
    let mut left = total.saturating_sub(out.iter().sum());
    let mut by_fraction: Vec<usize> = (0..weights.len()).collect();
    by_fraction.sort_by_key(|&i| std::cmp::Reverse(exact[i] % sum));
    for i in by_fraction {
        if left == 0 {
            break;
        }
        out[i] += 1;
        left -= 1;
    }
    out.iter().map(|&s| s.max(1)).collect()
}

/// Runs the coordinator until `Stop`.
pub fn run(inputs: Receiver<CoordinatorInput>, shards: Vec<Sender<ShardInput>>, mut global: Grant) {
    let mut active = vec![0u64; shards.len()];
    let mut granted: Vec<Option<Grant>> = vec![None; shards.len()];
    loop {
        match inputs.recv_timeout(Duration::from_millis(crate::limits::REPORT_INTERVAL_MS * 4)) {
            Ok(CoordinatorInput::Demand(d)) => active[d.shard_index] = d.active_tenants,
            Ok(CoordinatorInput::Reconfigure(g)) => global = g,
            Ok(CoordinatorInput::Stop) | Err(RecvTimeoutError::Disconnected) => return,
            Err(RecvTimeoutError::Timeout) => {}
        }
        while let Ok(more) = inputs.try_recv() {
            match more {
                CoordinatorInput::Demand(d) => active[d.shard_index] = d.active_tenants,
                CoordinatorInput::Reconfigure(g) => global = g,
                CoordinatorInput::Stop => return,
            }
        }
        for (i, grant) in shares(global, &active).into_iter().enumerate() {
            if granted[i] != Some(grant) && shards[i].try_send(ShardInput::Grant(grant)).is_ok() {
                granted[i] = Some(grant);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_follow_active_tenants_and_sum_to_the_window() {
        let global = Grant {
            max_inflight: 4096,
            max_inflight_bytes: 1 << 27,
            concurrency: 32,
        };
        let s = shares(global, &[1, 9]);
        assert_eq!(
            s.iter().map(|g| g.concurrency).collect::<Vec<_>>(),
            vec![3, 29]
        );
        assert_eq!(s.iter().map(|g| g.max_inflight).sum::<u64>(), 4096);
        assert_eq!(s.iter().map(|g| g.max_inflight_bytes).sum::<u64>(), 1 << 27);
        // Idle shards weigh a quarter tenant each; nobody gets zero.
        let s = shares(global, &[0, 0]);
        assert_eq!(s[0].concurrency, 16);
        let s = shares(
            Grant {
                concurrency: 2,
                ..global
            },
            &[0, 50],
        );
        assert_eq!((s[0].concurrency, s[1].concurrency), (1, 2));
    }
}
