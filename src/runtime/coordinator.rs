//! The coordinator: owns the node's global windows (`dispatch.max_inflight`,
//! `max_inflight_bytes`, `concurrency`) and grants each shard a share in
//! proportion to its active tenants, so that fairness holds per tenant
//! across the node rather than per shard. The concurrency goes by weighted
//! max-min: a shard whose tenants could run fewer calls than its share
//! (their calls running and those their queued rows could start, within
//! their caps) is granted those and one more, and the rest goes to the
//! other shards. Otherwise nine tenants on one shard each holding a slow
//! call would keep nine tenths of the node's concurrency from the one
//! tenant with a backlog on another (measured with twenty: it drained at
//! 184 deliveries/s instead of 708, with 22 of the 32 slots in use).
//!
//! Shards report their active tenant count (tenants with rows claimed or
//! due now) and the calls they want when the count changes, every
//! `REPORT_INTERVAL_MS` while busy, and at once when their share keeps
//! calls from starting though they last said they wanted fewer: a burst
//! on a shard that wanted little gets its share as it is claimed, not an
//! interval later (measured: a tenant's bursts of 5 beside a shard of four
//! backlogs started within 1–17 ms, and up to 100 ms without). The active shards share the
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
    /// The calls its tenants could run now (see `Core::wanted_calls`).
    pub wanted_calls: u64,
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

/// Splits `global` among shards by their active tenants (`active`), or
/// equally while none has one. The concurrency goes by weighted max-min:
/// a shard whose tenants could run fewer calls than its share
/// (`wanted_calls`, and one more for a commit to come) gets what they
/// could run, and the rest goes to the others by their weights; what no
/// shard could use is shared by weight too. Every share is at least 1 (a
/// shard with no active tenant gets just that); remainders go to the
/// largest fractions.
pub fn shares(global: Grant, active: &[u64], wanted_calls: &[u64]) -> Vec<Grant> {
    let any_active = active.iter().any(|&a| a > 0);
    let weights: Vec<u64> = active
        .iter()
        .map(|&a| if any_active { a } else { 1 })
        .collect();
    let rows = split_by_weight(global.max_inflight, &weights);
    let bytes = split_by_weight(global.max_inflight_bytes, &weights);
    let wants: Vec<u64> = match any_active {
        true => wanted_calls.iter().map(|w| w.saturating_add(1)).collect(),
        false => vec![u64::MAX; weights.len()],
    };
    let concurrency = fill_by_weight(global.concurrency, &weights, &wants);
    (0..weights.len())
        .map(|i| Grant {
            max_inflight: rows[i].max(1),
            max_inflight_bytes: bytes[i].max(1),
            concurrency: concurrency[i].max(1),
        })
        .collect()
}

/// Weighted max-min: `total` split by `weights`, but none of those with a
/// weight given more than it `wants` while another wants more; what is
/// left when every one has what it wants is split by weight too.
fn fill_by_weight(total: u64, weights: &[u64], wants: &[u64]) -> Vec<u64> {
    let mut out = vec![0; weights.len()];
    let mut open: Vec<usize> = (0..weights.len()).filter(|&i| weights[i] > 0).collect();
    let mut left = total;
    while !open.is_empty() && left > 0 {
        let open_weights: Vec<u64> = open.iter().map(|&i| weights[i]).collect();
        let split = split_by_weight(left, &open_weights);
        let satisfied: Vec<usize> = (0..open.len())
            .filter(|&j| wants[open[j]] <= split[j])
            .collect();
        if satisfied.is_empty() {
            for (j, &i) in open.iter().enumerate() {
                out[i] = split[j];
            }
            return out;
        }
        for &j in satisfied.iter().rev() {
            let i = open.remove(j);
            out[i] = wants[i];
            left -= wants[i];
        }
    }
    let unwanted = split_by_weight(left, weights);
    (0..out.len()).map(|i| out[i] + unwanted[i]).collect()
}

/// `total` split by `weights` (not all 0), the remainders going to the
/// largest fractions.
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
    out
}

/// Runs the coordinator until `Stop` (or until every sender is gone).
pub fn run(inputs: Receiver<CoordinatorInput>, shards: Vec<Sender<ShardInput>>, global: Grant) {
    let mut state = Coordinator {
        global,
        active: vec![0; shards.len()],
        wanted_calls: vec![0; shards.len()],
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
    /// The calls each shard's tenants could run, as last reported.
    wanted_calls: Vec<u64>,
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
            for (i, grant) in shares(self.global, &self.active, &self.wanted_calls)
                .into_iter()
                .enumerate()
            {
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
            CoordinatorInput::Demand(d) => {
                self.active[d.shard_index] = d.active_tenants;
                self.wanted_calls[d.shard_index] = d.wanted_calls;
            }
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
                wanted_calls: 100,
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
        let s = shares(global, &[1, 9], &[MANY; 2]);
        assert_eq!(
            s.iter().map(|g| g.concurrency).collect::<Vec<_>>(),
            vec![3, 29]
        );
        assert_eq!(s.iter().map(|g| g.max_inflight).sum::<u64>(), 4096);
        assert_eq!(s.iter().map(|g| g.max_inflight_bytes).sum::<u64>(), 1 << 27);
        // While no shard is active they share equally.
        let s = shares(global, &[0, 0], &[0; 2]);
        assert_eq!(s[0].concurrency, 16);
        // An idle shard holds one of each window, beside the active
        // shards' whole windows.
        let s = shares(
            Grant {
                concurrency: 2,
                ..global
            },
            &[0, 50],
            &[0, MANY],
        );
        assert_eq!((s[0].concurrency, s[1].concurrency), (1, 2));
        let s = shares(global, &[0, 0, 3, 0, 0, 0, 0, 1], &[MANY; 8]);
        let concurrency: Vec<u64> = s.iter().map(|g| g.concurrency).collect();
        assert_eq!(concurrency, [1, 1, 24, 1, 1, 1, 1, 8]);
        let rows: Vec<u64> = s.iter().map(|g| g.max_inflight).collect();
        assert_eq!(rows, [1, 1, 3072, 1, 1, 1, 1, 1024]);
        assert_eq!(s[0].max_inflight_bytes, 1);
    }

    /// Calls the tenants of a shard could run: as many as they want while
    /// others want more.
    const MANY: u64 = 1_000;

    /// A shard whose tenants could run fewer calls than its share gets
    /// those and one more, and the others share the rest by their active
    /// tenants; what no shard could use is shared by them all.
    #[test]
    fn the_concurrency_goes_by_weighted_max_min() {
        let global = Grant {
            max_inflight: 4096,
            max_inflight_bytes: 1 << 27,
            concurrency: 32,
        };
        let concurrency = |active: &[u64], wanted: &[u64]| -> Vec<u64> {
            let s = shares(global, active, wanted);
            s.iter().map(|g| g.concurrency).collect()
        };
        // Nine tenants holding a call each beside one with a backlog.
        assert_eq!(concurrency(&[1, 9], &[MANY, 9]), [22, 10]);
        assert_eq!(concurrency(&[1, 9], &[8, 9]), [10, 22], "none short");
        // Capped in turn: the first wants 3, then 30 left go 1 : 2.
        assert_eq!(concurrency(&[2, 1, 2], &[2, MANY, MANY]), [3, 10, 19]);
        // The rows and bytes still go by active tenants.
        let s = shares(global, &[1, 9], &[0, 9]);
        assert_eq!((s[0].max_inflight, s[1].max_inflight), (410, 3686));
        assert_eq!((s[0].concurrency, s[1].concurrency), (3, 29));
    }
}
