//! Per-tenant and per-sink gauges and counters for the node's stats routes.

use super::{BreakerState, Core, DeadCounts, SinkKey, TenantId};
use crate::latency::LatencyCounts;
use std::collections::HashMap;

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

/// What one sink key's attempts came to since the shard opened. Rows
/// dead-lettered before any attempt of theirs could run (their source or
/// sink gone from the config, their record unreadable) are not a sink's
/// outcomes and are counted only in the shard's totals.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SinkOutcomes {
    pub delivered: u64,
    /// Failed and due again.
    pub retried: u64,
    /// Dead-lettered by the sink's answers: a permanent error, the
    /// attempts used up, or the retry horizon passed.
    pub dead: u64,
    /// `dead`, by kind of reason.
    pub dead_by_reason: DeadCounts,
    /// Attempts that reached `attempt_timeout_ms` (each also counted as
    /// retried or dead).
    pub timed_out: u64,
    pub last_delivered_at_ms: Option<u64>,
    pub last_failure: Option<LastFailure>,
    /// How long the attempts' calls ran (a batch's entries each count its
    /// call; one that timed out counts as `attempt_timeout_ms`).
    pub durations: LatencyCounts,
    /// How long after its hook was received each row was delivered, retries
    /// included: the wait a receiver sees. A replayed row is not counted
    /// (its hook was received before it was dead-lettered).
    pub delivery_latency: LatencyCounts,
}

/// A sink key's latest failed attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastFailure {
    pub at_ms: u64,
    /// The sink's error, as the row stores it.
    pub error: String,
}

/// One sink key in a shard: its outcomes, its breaker and its calls now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinkStats {
    pub key: SinkKey,
    pub outcomes: SinkOutcomes,
    pub breaker: BreakerState,
    /// Failures in a row that count toward opening the breaker.
    pub consecutive_failures: u32,
    /// Sink calls running: one per attempt, one per batch of attempts.
    pub running: u64,
    /// Claimed rows waiting for a slot.
    pub queued: u64,
    /// Its sink is paused: its rows are held (set by the engine, from the
    /// config).
    pub paused: bool,
}

impl SinkStats {
    /// A key with no attempts and no breaker.
    pub fn unseen(key: SinkKey) -> SinkStats {
        SinkStats {
            key,
            outcomes: SinkOutcomes::default(),
            breaker: BreakerState::Closed,
            consecutive_failures: 0,
            running: 0,
            queued: 0,
            paused: false,
        }
    }
}

/// A sink key's rows dead-lettered since they were last taken, for a log
/// line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnloggedDead {
    pub key: SinkKey,
    pub rows: u64,
    /// The key's latest failed attempt's error.
    pub latest_failure: Option<String>,
}

impl Core {
    /// Each key's rows dead-lettered by its answers since the last call,
    /// by key; the counts start again from 0.
    pub fn take_unlogged_dead(&mut self) -> Vec<UnloggedDead> {
        let keys = std::mem::take(&mut self.unlogged_dead_keys);
        let mut out: Vec<UnloggedDead> = keys
            .into_iter()
            .filter_map(|key| {
                let state = self.keys.get_mut(&key)?;
                let rows = std::mem::take(&mut state.unlogged_dead);
                let failure = state.outcomes.last_failure.as_ref();
                let latest_failure = failure.map(|f| f.error.clone());
                Some(UnloggedDead {
                    key,
                    rows,
                    latest_failure,
                })
            })
            .collect();
        let order = |k: &SinkKey| (k.tenant.clone(), k.source_id.clone(), k.sink_index);
        out.sort_by_cached_key(|dead| order(&dead.key));
        out
    }

    /// Every tenant the core has seen, by tenant id.
    pub fn tenant_stats(&self) -> Vec<TenantStats> {
        let mut open: HashMap<&TenantId, u64> = HashMap::new();
        for (key, _) in self.breakers.iter().filter(|(_, b)| b.is_open()) {
            *open.entry(&key.tenant).or_default() += 1;
        }
        let mut out: Vec<TenantStats> = self
            .tenants
            .iter()
            .map(|(tenant, state)| TenantStats {
                tenant: tenant.clone(),
                claimed_rows: state.claimed.rows,
                claimed_bytes: state.claimed.bytes,
                running: state.calls,
                parked: state.parked,
                breakers_open: open.get(tenant).copied().unwrap_or(0),
            })
            .collect();
        out.sort_by(|a, b| a.tenant.cmp(&b.tenant));
        out
    }

    /// Every sink key the core has claimed rows for or keeps a breaker of,
    /// by source, sink index and type.
    pub fn sink_stats(&self) -> Vec<SinkStats> {
        let mut out: Vec<SinkStats> = self
            .keys
            .iter()
            .map(|(key, state)| {
                let breaker = self.breakers.get(key);
                SinkStats {
                    key: key.clone(),
                    outcomes: state.outcomes.clone(),
                    breaker: breaker.map_or(BreakerState::Closed, |b| b.state()),
                    consecutive_failures: breaker.map_or(0, |b| b.failures()),
                    running: state.calls,
                    queued: state.queue.len() as u64,
                    paused: false,
                }
            })
            .collect();
        let restored = self
            .breakers
            .iter()
            .filter(|(key, _)| !self.keys.contains_key(*key));
        out.extend(restored.map(|(key, breaker)| SinkStats {
            breaker: breaker.state(),
            consecutive_failures: breaker.failures(),
            ..SinkStats::unseen(key.clone())
        }));
        out.sort_by(|a, b| sink_order(&a.key).cmp(&sink_order(&b.key)));
        out
    }
}

fn sink_order(key: &SinkKey) -> (&str, u16, &str) {
    (&key.source_id, key.sink_index, &key.sink_type)
}
