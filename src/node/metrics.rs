//! `GET /metrics`: the node's counters and gauges in the Prometheus text
//! format (version 0.0.4). Counters are since the node started; per-shard
//! series carry a `shard` label.

use crate::runtime::latency::BUCKET_BOUNDS_MS;
use crate::runtime::{wall_ms, Engine};
use crate::store::StoreError;
use std::fmt::Write as _;

struct Family<'a> {
    out: &'a mut String,
}

impl Family<'_> {
    fn head(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    /// One series per shard.
    fn per_shard<T: std::fmt::Display>(
        &mut self,
        name: &str,
        kind: &str,
        help: &str,
        values: &[T],
    ) {
        self.head(name, kind, help);
        for (k, v) in values.iter().enumerate() {
            let _ = writeln!(self.out, "{name}{{shard=\"{k}\"}} {v}");
        }
    }
}

/// The whole exposition.
pub fn render(engine: &Engine) -> Result<String, StoreError> {
    let stats = engine.stats();
    let due = engine.due_counts()?;
    let dead = engine.dead_counts()?;
    let oldest = engine.oldest_due()?;
    let now_ms = wall_ms();
    let mut out = String::new();
    let mut f = Family { out: &mut out };
    let col = |get: fn(&crate::ShardStats) -> u64| stats.iter().map(get).collect::<Vec<u64>>();
    f.per_shard(
        "goad_commits_total",
        "counter",
        "Hooks committed durably.",
        &col(|s| s.commits),
    );
    f.per_shard(
        "goad_group_commits_total",
        "counter",
        "Synced store batches that carried commits; commits over group commits is the group-commit size.",
        &col(|s| s.group_commits),
    );
    f.head(
        "goad_deliveries_total",
        "counter",
        "Attempt outcomes by result: delivered, retried (failed, due again), dead (dead-lettered), timed_out (attempt_timeout; also counted as retried or dead).",
    );
    for (k, s) in stats.iter().enumerate() {
        for (result, v) in [
            ("delivered", s.delivered),
            ("retried", s.retried),
            ("dead", s.dead),
            ("timed_out", s.timed_out),
        ] {
            let _ = writeln!(
                f.out,
                "goad_deliveries_total{{shard=\"{k}\",result=\"{result}\"}} {v}"
            );
        }
    }
    let latency = engine.attempt_latency();
    f.head(
        "goad_attempts_total",
        "counter",
        "Attempts finished by a sink worker.",
    );
    let _ = writeln!(f.out, "goad_attempts_total {}", latency.count());
    f.head(
        "goad_attempt_duration_seconds",
        "histogram",
        "How long sink attempts took.",
    );
    let mut cumulative = 0;
    for (i, bound_ms) in BUCKET_BOUNDS_MS.iter().enumerate() {
        cumulative += latency.counts[i];
        let _ = writeln!(
            f.out,
            "goad_attempt_duration_seconds_bucket{{le=\"{}\"}} {cumulative}",
            bound_ms / 1_000.0
        );
    }
    let _ = writeln!(
        f.out,
        "goad_attempt_duration_seconds_bucket{{le=\"+Inf\"}} {}\ngoad_attempt_duration_seconds_sum {}\ngoad_attempt_duration_seconds_count {}",
        latency.count(),
        latency.sum_ms / 1_000.0,
        latency.count()
    );
    f.per_shard(
        "goad_due_rows",
        "gauge",
        "Rows due or waiting out a backoff, not claimed.",
        &due,
    );
    f.per_shard(
        "goad_claimed_rows",
        "gauge",
        "Rows claimed (queued or running).",
        &col(|s| s.claimed_rows),
    );
    f.per_shard(
        "goad_running_attempts",
        "gauge",
        "Attempts running.",
        &col(|s| s.running),
    );
    f.per_shard(
        "goad_parked_total",
        "counter",
        "Rows parked behind an open circuit breaker.",
        &col(|s| s.parked),
    );
    f.per_shard(
        "goad_breakers_open",
        "gauge",
        "Sink keys whose breaker is open or half-open.",
        &col(|s| s.breakers_open),
    );
    let ages_s: Vec<f64> = oldest
        .iter()
        .map(|o| o.map_or(0, |at| now_ms.saturating_sub(at)) as f64 / 1_000.0)
        .collect();
    f.per_shard(
        "goad_oldest_due_age_seconds",
        "gauge",
        "Age of the oldest due row (0 when none is due).",
        &ages_s,
    );
    f.per_shard(
        "goad_dead_letters",
        "gauge",
        "Rows dead-lettered and kept.",
        &dead,
    );
    f.per_shard(
        "goad_abandoned_workers",
        "gauge",
        "IO workers stuck in an attempt that timed out.",
        &col(|s| s.abandoned_workers),
    );
    f.per_shard(
        "goad_recovered_rows_total",
        "counter",
        "Rows made due again by recovery (claimed when the process stopped).",
        &col(|s| s.recovered),
    );
    f.per_shard(
        "goad_store_failures_total",
        "counter",
        "Store writes that failed; each rebuilt the shard from the store.",
        &col(|s| s.store_failures),
    );
    f.per_shard(
        "goad_shard_restarts_total",
        "counter",
        "Panics in a shard's loop; each restarted the shard from its store.",
        &col(|s| s.restarts),
    );
    Ok(out)
}
