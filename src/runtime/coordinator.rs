//! The coordinator: owns the node's global windows (`dispatch.max_inflight`,
//! `max_inflight_bytes`, `concurrency`) and grants each shard a share in
//! proportion to its active tenants, so that fairness holds per tenant
//! across the node rather than per shard.
//!
//! Shards report their active tenant count when it changes (and at most
//! every `REPORT_INTERVAL_MS` while busy). The active shards share the
//! windows; a shard with no active tenant holds one of each (a row, an
//! attempt), so it can claim and start a new commit at once, until its
//! report brings its share. It takes nothing from the active shards, so a
//! lone busy tenant gets the whole node whatever the shard count (a weight
//! per idle shard would come out of the active shards' shares, and idle
//! shards grow with the core count). So the shards' sum can exceed a window
//! by one per idle shard. Shares are leases the shard spends locally; a
//! lowered share only stops the shard's next claim or start, so during a
//! rebalance the sum can also exceed a window by what the shrinking shards
//! still hold.
//!
//! A panic in its loop (a bug in goad) is logged and the loop goes on with
//! the demand it knew, sending every shard its share again: shards never
//! keep a stale share because the coordinator died.

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
    /// Panic in the loop, as a bug in goad would (tests of the restart).
    #[cfg(test)]
    Panic,
}

/// The node's global windows as one grant.
pub fn global_grant(dispatch: &DispatchConfig) -> Grant {
    Grant {
        max_inflight: dispatch.max_inflight.into(),
        max_inflight_bytes: dispatch.max_inflight_bytes,
        concurrency: dispatch.concurrency.into(),
    }
}

/// Splits `global` among shards by their active tenants, or equally while
/// none has one. Every share is at least 1 (a shard with no active tenant
/// gets just that); remainders go to the largest fractions.
pub fn shares(global: Grant, active_tenants: &[u64]) -> Vec<Grant> {
    let any_active = active_tenants.iter().any(|&a| a > 0);
    let weights: Vec<u64> = active_tenants
        .iter()
        .map(|&a| if any_active { a } else { 1 })
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

/// Runs the coordinator until `Stop` (or until every sender is gone).
pub fn run(inputs: Receiver<CoordinatorInput>, shards: Vec<Sender<ShardInput>>, global: Grant) {
    let mut state = Coordinator {
        global,
        active: vec![0; shards.len()],
        granted: vec![None; shards.len()],
    };
    loop {
        match crate::panics::catch(|| state.serve(&inputs, &shards)) {
            Ok(()) => return,
            Err(panic) => {
                crate::log::error(
                    "coordinator panicked; its loop goes on and grants every shard its share again",
                    &[("panic", &panic)],
                );
                state.granted.fill(None);
            }
        }
    }
}

/// What the coordinator knows: each field is replaced whole, so a panic
/// leaves none half-changed.
struct Coordinator {
    global: Grant,
    /// Active tenants per shard, as last reported.
    active: Vec<u64>,
    /// The share each shard was last sent.
    granted: Vec<Option<Grant>>,
}

impl Coordinator {
    /// Inputs, and the shares they change, until `Stop`.
    fn serve(&mut self, inputs: &Receiver<CoordinatorInput>, shards: &[Sender<ShardInput>]) {
        let wait = Duration::from_millis(crate::limits::REPORT_INTERVAL_MS * 4);
        loop {
            match inputs.recv_timeout(wait) {
                Ok(input) => {
                    if !self.take(input) {
                        return;
                    }
                }
                Err(RecvTimeoutError::Disconnected) => return,
                Err(RecvTimeoutError::Timeout) => {}
            }
            while let Ok(more) = inputs.try_recv() {
                if !self.take(more) {
                    return;
                }
            }
            for (i, grant) in shares(self.global, &self.active).into_iter().enumerate() {
                if self.granted[i] != Some(grant)
                    && shards[i].try_send(ShardInput::Grant(grant)).is_ok()
                {
                    self.granted[i] = Some(grant);
                }
            }
        }
    }

    /// One input; false for `Stop`.
    fn take(&mut self, input: CoordinatorInput) -> bool {
        match input {
            CoordinatorInput::Demand(d) => self.active[d.shard_index] = d.active_tenants,
            CoordinatorInput::Reconfigure(g) => self.global = g,
            CoordinatorInput::Stop => return false,
            #[cfg(test)]
            CoordinatorInput::Panic => panic!("a test made the coordinator panic"),
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossbeam_channel::bounded;

    const DEADLINE: Duration = Duration::from_secs(10);

    /// The next grant a shard's channel receives.
    fn next_grant(shard: &Receiver<ShardInput>) -> Grant {
        match shard.recv_timeout(DEADLINE) {
            Ok(ShardInput::Grant(grant)) => grant,
            Ok(_) => panic!("the coordinator sent a shard something else"),
            Err(e) => panic!("no grant: {e}"),
        }
    }

    /// A panic in the coordinator's loop does not end it: it sends every
    /// shard its share again and goes on following demand until `Stop`.
    #[test]
    fn the_coordinator_goes_on_after_a_panic() {
        let global = Grant {
            max_inflight: 100,
            max_inflight_bytes: 1_000,
            concurrency: 10,
        };
        let (input, inputs) = bounded(16);
        let (shard_tx, shard) = bounded(16);
        let coordinator = std::thread::spawn(move || run(inputs, vec![shard_tx], global));
        let demand = |active_tenants| {
            CoordinatorInput::Demand(Demand {
                shard_index: 0,
                active_tenants,
            })
        };
        input.send(demand(3)).unwrap();
        assert_eq!(
            next_grant(&shard),
            global,
            "one shard holds the whole window"
        );
        input.send(CoordinatorInput::Panic).unwrap();
        input.send(demand(5)).unwrap();
        assert_eq!(next_grant(&shard), global, "sent again after the panic");
        let halved = Grant {
            concurrency: 5,
            ..global
        };
        input.send(CoordinatorInput::Reconfigure(halved)).unwrap();
        assert_eq!(next_grant(&shard), halved, "still following its inputs");
        input.send(CoordinatorInput::Stop).unwrap();
        coordinator.join().unwrap();
    }

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
        // While no shard is active they share equally.
        let s = shares(global, &[0, 0]);
        assert_eq!(s[0].concurrency, 16);
        // An idle shard holds one of each window, beside the active
        // shards' whole windows.
        let s = shares(
            Grant {
                concurrency: 2,
                ..global
            },
            &[0, 50],
        );
        assert_eq!((s[0].concurrency, s[1].concurrency), (1, 2));
        let s = shares(global, &[0, 0, 3, 0, 0, 0, 0, 1]);
        let concurrency: Vec<u64> = s.iter().map(|g| g.concurrency).collect();
        assert_eq!(concurrency, [1, 1, 24, 1, 1, 1, 1, 8]);
        let rows: Vec<u64> = s.iter().map(|g| g.max_inflight).collect();
        assert_eq!(rows, [1, 1, 3072, 1, 1, 1, 1, 1024]);
        assert_eq!(s[0].max_inflight_bytes, 1);
    }
}
