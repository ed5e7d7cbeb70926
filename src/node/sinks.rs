//! `GET /v1/sinks`: every configured sink with what its attempts came to
//! since the node started, its latest failure and its breaker: which
//! receiver is failing, and why, without reading the logs; and for a
//! paused sink, how many rows it holds. Paged by `limit` and `cursor`
//! (see [`super::listing`]): a sink's key is `<source id>/<sink index>`.

use super::admin::{store_error, unavailable};
use super::http::{Request, Response};
use super::listing::SourceListing;
use crate::core::{BreakerState, SinkStats};
use crate::latency::LatencyCounts;
use crate::runtime::Engine;
use crate::store::HeldBySink;
use serde_json::{json, Value};
use std::collections::HashMap;

pub(super) fn sinks(engine: &Engine, request: &Request) -> Response {
    let listing = match SourceListing::of(request) {
        Ok(listing) => listing,
        Err(bad) => return bad,
    };
    let stats = match engine.sink_stats() {
        Ok(stats) => stats,
        Err(e) => return unavailable(&e),
    };
    let matching: Vec<&SinkStats> = (stats.iter())
        .filter(|s| listing.takes(&s.key.source_id, &s.key.tenant))
        .collect();
    let key = |s: &&SinkStats| format!("{}/{}", s.key.source_id, s.key.sink_index);
    let (listed, next_cursor) = match listing.paging.page(matching, key) {
        Ok(page) => page,
        Err(bad) => return bad,
    };
    // Held rows are counted for paused sinks only, each tenant's once.
    let mut held: HashMap<&str, HeldBySink> = HashMap::new();
    for stats in listed.iter().filter(|s| s.paused) {
        let tenant = &*stats.key.tenant;
        if !held.contains_key(tenant) {
            match engine.held_by_sink(tenant) {
                Ok(counts) => held.insert(tenant, counts),
                Err(e) => return store_error(&e),
            };
        }
    }
    let sinks: Vec<Value> = listed
        .into_iter()
        .map(|stats| {
            let key = &stats.key;
            let counts = held.get(&*key.tenant).filter(|_| stats.paused);
            let held = counts.map(|c| {
                let sink = (key.source_id.clone(), key.sink_index);
                c.get(&sink).copied().unwrap_or(0)
            });
            sink_json(stats, held)
        })
        .collect();
    Response::json(200, &json!({ "sinks": sinks, "next_cursor": next_cursor }))
}

/// `closed`, `open` or `half_open`, and when an open one lets a probe through.
fn breaker_name(state: BreakerState) -> (&'static str, Option<u64>) {
    match state {
        BreakerState::Closed => ("closed", None),
        BreakerState::Open { until_ms } => ("open", Some(until_ms)),
        BreakerState::HalfOpen => ("half_open", None),
    }
}

/// The mean duration in ms, to the µs; `None` with nothing counted.
fn mean_ms(durations: &LatencyCounts) -> Option<f64> {
    let count = durations.count();
    (count > 0).then(|| (durations.sum_us / count) as f64 / 1_000.0)
}

/// Durations' count, mean and bucket-bound median and 99th percentile, in ms.
fn summary_ms(durations: &LatencyCounts) -> Value {
    json!({
        "count": durations.count(),
        "mean": mean_ms(durations),
        "p50_at_most": durations.quantile_at_most_ms(0.5),
        "p99_at_most": durations.quantile_at_most_ms(0.99),
    })
}

/// A sink's entry; `held` is counted for a paused sink (`None`: not paused).
fn sink_json(stats: &SinkStats, held: Option<u64>) -> Value {
    let key = &stats.key;
    let outcomes = &stats.outcomes;
    let (breaker, open_until_ms) = breaker_name(stats.breaker);
    json!({
        "source_id": &*key.source_id,
        "tenant": &*key.tenant,
        "sink_index": key.sink_index,
        "sink_type": &*key.sink_type,
        "delivered": outcomes.delivered,
        "retried": outcomes.retried,
        "dead": outcomes.dead,
        "dead_by_reason": outcomes.dead_by_reason,
        "timed_out": outcomes.timed_out,
        "last_delivered_at_ms": outcomes.last_delivered_at_ms,
        "last_failure": outcomes.last_failure.as_ref().map(|f| json!({
            "at_ms": f.at_ms,
            "error": f.error,
        })),
        "paused": stats.paused,
        "held": held,
        "breaker": breaker,
        "breaker_open_until_ms": open_until_ms,
        "consecutive_failures": stats.consecutive_failures,
        "running": stats.running,
        "queued": stats.queued,
        "attempt_ms": summary_ms(&outcomes.durations),
        "delivery_latency_ms": summary_ms(&outcomes.delivery_latency),
    })
}
