//! `GET /metrics`: the node's counters and gauges in the Prometheus text
//! format (version 0.0.4). Counters are since the node started; per-shard
//! series carry a `shard` label.

use super::auth::Tokens;
use super::http::FrontCounts;
use super::ingest_counts::IngestCounts;
use super::notify::NotificationCounts;
use super::reload_counts::ReloadCounts;
use super::replay::Replays;
use super::NodeState;
use crate::config::PerSinkMetrics;
use crate::core::{BreakerState, SinkOutcomes, SinkStats};
use crate::latency::{LatencyCounts, BUCKET_BOUNDS_MS};
use crate::runtime::{wall_ms, Engine, ShardStats};
use crate::store::StoreError;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

/// A counter's value now.
fn count(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

/// Which of a sink's outcome histograms a metric exposes.
type OutcomeCounts = fn(&SinkOutcomes) -> &LatencyCounts;

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

    /// One series per shard for each family.
    fn stats_families(&mut self, families: &[ShardFamily], stats: &[ShardStats]) {
        for (name, kind, help, get) in families {
            let values: Vec<u64> = stats.iter().map(get).collect();
            self.per_shard(name, kind, help, &values);
        }
    }

    /// Replays by state, and the pacer's passes.
    fn replays(&mut self, replays: &Replays) {
        let by_state = replays
            .count_by_state()
            .map(|(state, n)| (state.name(), n as u64));
        self.by_label(
            "goad_replays",
            "gauge",
            "Replays by state: running, done, paused (paused ones stopped themselves; see their error).",
            "state",
            &by_state,
        );
        self.one(
            "goad_replay_pacer_passes_total",
            "counter",
            "Times the replay pacer looked at the running replays (once per pacing step).",
            replays.pacer_passes(),
        );
    }

    /// A family of one series per value of the label `label`.
    fn by_label(
        &mut self,
        name: &str,
        kind: &str,
        help: &str,
        label: &str,
        series: &[(&str, u64)],
    ) {
        self.head(name, kind, help);
        for (value, count) in series {
            let _ = writeln!(self.out, "{name}{{{label}=\"{value}\"}} {count}");
        }
    }

    /// A family of one unlabelled series.
    fn one(&mut self, name: &str, kind: &str, help: &str, value: impl std::fmt::Display) {
        self.head(name, kind, help);
        let _ = writeln!(self.out, "{name} {value}");
    }

    /// What came of the config reloads.
    fn reloads(&mut self, reloads: &ReloadCounts) {
        let (applied, failed, last_ok) = reloads.snapshot();
        self.by_label(
            "goad_config_reloads_total",
            "counter",
            "Config reloads (POST /v1/reload, SIGHUP) by result: applied, or failed (the file refused; the node runs on the config it had).",
            "result",
            &[("applied", applied), ("failed", failed)],
        );
        let help = "0 when the latest config reload failed (1 before any).";
        self.one(
            "goad_config_last_reload_successful",
            "gauge",
            help,
            u8::from(last_ok),
        );
    }

    /// The HTTP front's connections.
    fn front(&mut self, front: &FrontCounts) {
        let get = count;
        let open = get(&front.open);
        self.one(
            "goad_http_connections",
            "gauge",
            "Client connections open.",
            open,
        );
        let taken = get(&front.accepted);
        let help = "Client connections taken.";
        self.one("goad_http_connections_total", "counter", help, taken);
        self.by_label(
            "goad_http_connections_refused_total",
            "counter",
            "Connections refused (503 too_many_connections; closed at once over TLS), by reason: max_connections (at http.max_connections) or file_descriptors (none left: raise the open-files limit).",
            "reason",
            &[
                ("max_connections", get(&front.refused_at_cap)),
                ("file_descriptors", get(&front.refused_without_fds)),
            ],
        );
        self.one(
            "goad_http_request_timeouts_total",
            "counter",
            "Requests that did not arrive within http.read_timeout_ms of their first byte (408, closed).",
            get(&front.read_timeouts),
        );
        self.one(
            "goad_http_buffered_bytes",
            "gauge",
            "Bytes of http.max_buffered_bytes that requests larger than a head (16 KiB) hold while they are read and committed.",
            get(&front.buffered_bytes),
        );
        self.one(
            "goad_http_buffer_waits_total",
            "counter",
            "Requests that waited, unread, for room in http.max_buffered_bytes: the node held more request bytes than it allows.",
            get(&front.budget_waits),
        );
        self.by_label(
            "goad_admin_requests_refused_total",
            "counter",
            "Requests to an admin API without a token refused as a browser's (403), by reason: browser_request (it carried Origin) or bad_host (addressed to a DNS name, as a rebound one is). Any is a web page trying the node.",
            "reason",
            &[
                ("browser_request", get(&front.browser_requests_refused)),
                ("bad_host", get(&front.rebound_hosts_refused)),
            ],
        );
    }

    /// The process's CPU, descriptors and memory, as Prometheus clients
    /// name them.
    #[cfg(target_os = "linux")]
    fn process(&mut self) {
        let Some(p) = super::process_metrics::read() else {
            return;
        };
        let figures = [
            (
                "process_cpu_seconds_total",
                "counter",
                "User and system CPU time spent, in seconds.",
                p.cpu_seconds,
            ),
            (
                "process_open_fds",
                "gauge",
                "Open file descriptors.",
                p.open_fds as f64,
            ),
            (
                "process_virtual_memory_bytes",
                "gauge",
                "Virtual memory size, in bytes.",
                p.virtual_memory_bytes as f64,
            ),
            (
                "process_resident_memory_bytes",
                "gauge",
                "Resident memory size, in bytes.",
                p.resident_memory_bytes as f64,
            ),
            (
                "process_start_time_seconds",
                "gauge",
                "When the process started, in seconds since the Unix epoch.",
                p.start_time_seconds,
            ),
        ];
        for (name, kind, help, value) in figures {
            self.one(name, kind, help, value);
        }
        if let Some(max) = p.max_fds {
            self.one(
                "process_max_fds",
                "gauge",
                "The open-files limit (soft).",
                max,
            );
        }
    }

    /// Ingest answers by source, status and error code.
    fn ingest(&mut self, ingest: &IngestCounts) {
        self.head(
            "goad_ingest_requests_total",
            "counter",
            "Ingest requests answered, by source (\"\" for one not configured), HTTP status and error code (\"\" when accepted).",
        );
        for ((source, status, error), count) in ingest.snapshot() {
            let _ = writeln!(
                self.out,
                "goad_ingest_requests_total{{source=\"{source}\",status=\"{status}\",error=\"{error}\"}} {count}"
            );
        }
    }

    /// Fetches of each `ingest_jwt` source's key set, by result.
    fn key_set_fetches(&mut self, tokens: &Tokens) {
        let name = "goad_ingest_jwt_key_fetches_total";
        self.head(
            name,
            "counter",
            "Fetches of each ingest_jwt source's key set (its jwks_url, shared by the sources naming it), by result: ok or failed (the keys in hand serve meanwhile; until a first ok, its hooks are answered 503).",
        );
        let mut checks: Vec<_> = (tokens.sources.values())
            .filter_map(|ingest| ingest.jwt.as_ref())
            .collect();
        checks.sort_by(|a, b| a.source_id().cmp(b.source_id()));
        for check in checks {
            let (ok, failed) = check.jwks().fetches();
            for (result, count) in [("ok", ok), ("failed", failed)] {
                let source = check.source_id();
                let _ = writeln!(
                    self.out,
                    "{name}{{source=\"{source}\",result=\"{result}\"}} {count}"
                );
            }
        }
    }

    /// Attempt outcomes per shard and result, and rows dead-lettered per
    /// shard and kind of reason.
    fn deliveries(&mut self, stats: &[ShardStats]) {
        self.head(
            "goad_deliveries_total",
            "counter",
            "Attempt outcomes by result: delivered, retried (failed, due again), dead (dead-lettered), timed_out (attempt_timeout; also counted as retried or dead).",
        );
        for (k, s) in stats.iter().enumerate() {
            for (result, v) in [
                ("delivered", s.core.delivered),
                ("retried", s.core.retried),
                ("dead", s.core.dead),
                ("timed_out", s.core.timed_out),
            ] {
                let _ = writeln!(
                    self.out,
                    "goad_deliveries_total{{shard=\"{k}\",result=\"{result}\"}} {v}"
                );
            }
        }
        self.head(
            "goad_dead_rows_total",
            "counter",
            "Rows dead-lettered by kind of reason: permanent (the receiver refused the hook), max_attempts, retry_horizon, source_gone, sink_gone, undecodable.",
        );
        for (k, s) in stats.iter().enumerate() {
            for (kind, v) in s.core.dead_by_reason.iter() {
                let _ = writeln!(
                    self.out,
                    "goad_dead_rows_total{{shard=\"{k}\",reason_kind=\"{kind}\"}} {v}"
                );
            }
        }
    }

    /// Each configured sink's attempt outcomes and whether its breaker is
    /// open, and with `All` its durations and latencies.
    fn sinks(&mut self, sinks: &[SinkStats], shown: PerSinkMetrics) {
        self.sink_outcomes(sinks);
        if shown == PerSinkMetrics::All {
            self.sink_histograms(sinks);
        }
        self.sink_breakers(sinks);
    }

    fn sink_outcomes(&mut self, sinks: &[SinkStats]) {
        self.head(
            "goad_sink_outcomes_total",
            "counter",
            "Each configured sink's attempt outcomes by result (as goad_deliveries_total; rows dead-lettered because their source or sink left the config are not a sink's).",
        );
        for s in sinks {
            let o = &s.outcomes;
            for (result, v) in [
                ("delivered", o.delivered),
                ("retried", o.retried),
                ("dead", o.dead),
                ("timed_out", o.timed_out),
            ] {
                let _ = writeln!(
                    self.out,
                    "goad_sink_outcomes_total{{{},result=\"{result}\"}} {v}",
                    sink_labels(s)
                );
            }
        }
    }

    fn sink_histograms(&mut self, sinks: &[SinkStats]) {
        let histograms: [(&str, &str, OutcomeCounts); 2] = [
            (
                "goad_sink_attempt_duration_seconds",
                "How long each configured sink's attempts took (one that timed out counts as attempt_timeout_ms).",
                |o| &o.durations,
            ),
            (
                "goad_sink_delivery_latency_seconds",
                "How long after its hook was received each of the sink's rows was delivered, retries included (replayed rows are not counted).",
                |o| &o.delivery_latency,
            ),
        ];
        for (name, help, counts) in histograms {
            self.head(name, "histogram", help);
            for s in sinks {
                self.histogram(name, &sink_labels(s), counts(&s.outcomes));
            }
        }
    }

    fn sink_breakers(&mut self, sinks: &[SinkStats]) {
        self.head(
            "goad_sink_breaker_open",
            "gauge",
            "1 while the sink's breaker is open or half-open (its rows park), else 0.",
        );
        for s in sinks {
            let open = u8::from(s.breaker != BreakerState::Closed);
            let _ = writeln!(
                self.out,
                "goad_sink_breaker_open{{{}}} {open}",
                sink_labels(s)
            );
        }
    }

    /// What became of the dead rows' notifications.
    fn notifications(&mut self, counts: &NotificationCounts) {
        let n = count;
        self.by_label(
            "goad_notifications_total",
            "counter",
            "Notifications (notifications.source) by what became of them: queued (events to tell), dropped (the queue was full), coalesced (dead rows told in a rows.dead summary, not alone), committed (notification hooks, summaries included), failed (the commit was refused).",
            "result",
            &[
                ("queued", n(&counts.queued)),
                ("dropped", n(&counts.dropped)),
                ("coalesced", n(&counts.coalesced)),
                ("committed", n(&counts.committed)),
                ("failed", n(&counts.failed)),
            ],
        );
    }

    /// The node's attempt count and duration histogram.
    fn attempt_latency(&mut self, latency: &LatencyCounts) {
        self.head(
            "goad_attempts_total",
            "counter",
            "Attempts finished by a sink worker.",
        );
        let _ = writeln!(self.out, "goad_attempts_total {}", latency.count());
        self.head(
            "goad_attempt_duration_seconds",
            "histogram",
            "How long sink attempts took.",
        );
        self.histogram("goad_attempt_duration_seconds", "", latency);
    }

    /// One histogram's series: its buckets (cumulative), sum and count,
    /// each with `labels` (`a="x",b="y"`, or empty).
    fn histogram(&mut self, name: &str, labels: &str, latency: &LatencyCounts) {
        let sep = if labels.is_empty() { "" } else { "," };
        let mut cumulative = 0;
        for (i, bound_ms) in BUCKET_BOUNDS_MS.iter().enumerate() {
            cumulative += latency.counts[i];
            let le = bound_ms / 1_000.0;
            let _ = writeln!(
                self.out,
                "{name}_bucket{{{labels}{sep}le=\"{le}\"}} {cumulative}"
            );
        }
        let count = latency.count();
        let braced = if labels.is_empty() {
            String::new()
        } else {
            format!("{{{labels}}}")
        };
        let _ = writeln!(
            self.out,
            "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {count}\n{name}_sum{braced} {}\n{name}_count{braced} {count}",
            latency.sum_ms() / 1_000.0
        );
    }

    /// What each shard's store holds: its rows due, in lanes and dead, the
    /// age of its oldest due row, its bytes used and the room left for
    /// ingest on it and on the disk.
    fn store(&mut self, engine: &Engine) -> Result<(), StoreError> {
        let due = engine.due_counts()?;
        let dead = engine.dead_counts()?;
        let oldest = engine.oldest_due()?;
        let used = engine.store_used_bytes()?;
        let now_ms = wall_ms();
        self.per_shard(
            "goad_due_rows",
            "gauge",
            "Rows due or waiting out a backoff, not claimed.",
            &due,
        );
        let ages_s: Vec<f64> = oldest
            .iter()
            .map(|o| o.map_or(0, |at| now_ms.saturating_sub(at)) as f64 / 1_000.0)
            .collect();
        self.per_shard(
            "goad_oldest_due_age_seconds",
            "gauge",
            "Age of the oldest due row (0 when none is due).",
            &ages_s,
        );
        self.per_shard(
            "goad_lane_members",
            "gauge",
            "Rows of ordered sinks waiting behind the head of their lane (neither due nor claimed).",
            &engine.lane_member_counts()?,
        );
        self.per_shard(
            "goad_dead_letters",
            "gauge",
            "Rows dead-lettered and kept.",
            &dead,
        );
        self.per_shard(
            "goad_store_used_bytes",
            "gauge",
            "Bytes the shard's store holds (its pages in use).",
            &used,
        );
        self.per_shard(
            "goad_store_ingest_limit_bytes",
            "gauge",
            "Bytes new hooks may fill (7/8 of max_shard_bytes); at it, ingest answers 503 store_full.",
            &engine.store_ingest_limit_bytes(),
        );
        self.head(
            "goad_store_disk_available_bytes",
            "gauge",
            "Bytes the file system holding the shard's store has free; down to goad_min_free_disk_bytes, ingest answers 503 disk_full.",
        );
        for (k, available) in engine.store_disk_available_bytes().iter().enumerate() {
            if let Some(bytes) = available {
                let _ = writeln!(
                    self.out,
                    "goad_store_disk_available_bytes{{shard=\"{k}\"}} {bytes}"
                );
            }
        }
        self.one(
            "goad_min_free_disk_bytes",
            "gauge",
            "min_free_disk_bytes: what new hooks leave free on the disk, for recording deliveries.",
            engine.min_free_disk_bytes(),
        );
        Ok(())
    }
}

/// A per-shard family read from `ShardStats`: name, type, help, value.
type ShardFamily = (
    &'static str,
    &'static str,
    &'static str,
    fn(&ShardStats) -> u64,
);

/// The commit counters, first in the exposition.
const COMMIT_FAMILIES: &[ShardFamily] = &[
    ("goad_commits_total", "counter", "Hooks committed durably.", |s| s.commits),
    (
        "goad_group_commits_total",
        "counter",
        "Synced store batches that carried commits; commits over group commits is the group-commit size.",
        |s| s.group_commits,
    ),
    (
        "goad_duplicate_hooks_total",
        "counter",
        "Commits not stored because their source took their dedupe key within its dedupe_window_ms.",
        |s| s.duplicates,
    ),
];

/// The shards' work in hand and their health.
const SHARD_FAMILIES: &[ShardFamily] = &[
    (
        "goad_claimed_rows",
        "gauge",
        "Rows claimed (queued or running).",
        |s| s.core.claimed.rows,
    ),
    ("goad_running_attempts", "gauge", "Attempts running.", |s| {
        s.core.running
    }),
    (
        "goad_running_calls",
        "gauge",
        "Sink calls running: one per attempt, one per batch of a batching sink.",
        |s| s.core.calls,
    ),
    (
        "goad_parked_total",
        "counter",
        "Rows parked behind an open circuit breaker.",
        |s| s.core.parked,
    ),
    (
        "goad_held_total",
        "counter",
        "Rows held because their sink is paused (each time one came up).",
        |s| s.core.held,
    ),
    (
        "goad_breakers_open",
        "gauge",
        "Sink keys whose breaker is open or half-open.",
        |s| s.core.breakers_open,
    ),
    (
        "goad_breaker_opens_total",
        "counter",
        "Times a sink key's breaker opened (again after a failed probe too).",
        |s| s.breaker_opens,
    ),
    (
        "goad_breaker_closes_total",
        "counter",
        "Times a sink key's breaker closed.",
        |s| s.breaker_closes,
    ),
    (
        "goad_abandoned_workers",
        "gauge",
        "IO workers stuck in an attempt that timed out.",
        |s| s.abandoned_workers,
    ),
    (
        "goad_recovered_rows_total",
        "counter",
        "Rows made due again by recovery (claimed when the process stopped).",
        |s| s.recovered,
    ),
    (
        "goad_store_failures_total",
        "counter",
        "Store writes that failed; each rebuilt the shard from the store.",
        |s| s.store_failures,
    ),
    (
        "goad_unreadable_due_entries_total",
        "counter",
        "Due index entries that did not decode: rewritten from their row, or deleted if they name none.",
        |s| s.unreadable_due,
    ),
    (
        "goad_dead_letters_expired_total",
        "counter",
        "Dead rows deleted past dead_letters.retention_ms.",
        |s| s.dead_expired,
    ),
    (
        "goad_shard_restarts_total",
        "counter",
        "Panics in a shard's loop; each restarted the shard from its store.",
        |s| s.restarts,
    ),
];

/// A sink's labels: its tenant, source, index and type.
fn sink_labels(s: &SinkStats) -> String {
    let k = &s.key;
    format!(
        "tenant=\"{}\",source=\"{}\",sink=\"{}\",type=\"{}\"",
        k.tenant,
        k.source_id,
        k.sink_index,
        escape_label(&k.sink_type)
    )
}

/// A label value as the text format wants it: ids are `[A-Za-z0-9_-]`,
/// but a host sink's type is whatever name the host registered it under.
fn escape_label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The whole exposition of the node `state` and its `engine`.
pub(super) fn render(engine: &Engine, state: &NodeState) -> Result<String, StoreError> {
    let per_sink = state.config.read().metrics.per_sink;
    let stats = engine.stats();
    let mut out = String::new();
    let mut f = Family { out: &mut out };
    f.stats_families(COMMIT_FAMILIES, &stats);
    f.deliveries(&stats);
    f.attempt_latency(&engine.attempt_latency());
    // Shards that do not answer in time (stopping) leave these out.
    if per_sink != PerSinkMetrics::Off {
        if let Ok(sinks) = engine.sink_stats() {
            f.sinks(&sinks, per_sink);
        }
    }
    f.store(engine)?;
    f.stats_families(SHARD_FAMILIES, &stats);
    f.replays(&state.replays);
    f.ingest(&state.ingest);
    f.key_set_fetches(&state.tokens.read());
    f.front(&state.front);
    f.reloads(&state.reloads);
    #[cfg(target_os = "linux")]
    f.process();
    f.notifications(&state.notifier.counts);
    f.one(
        "goad_dns_stale_hosts",
        "gauge",
        "Hosts whose addresses the node serves from an earlier look-up because looking them up again failed (its DNS server down or slow), each for up to a day after that look-up.",
        crate::sink::dns_stale_hosts(),
    );
    f.one(
        "goad_draining",
        "gauge",
        "1 while the node drains: it takes no new hooks (POST /v1/drain).",
        u8::from(state.drain.is_on()),
    );
    f.by_label(
        "goad_build_info",
        "gauge",
        "1, labelled with the running goad's version (a fleet's versions at a glance).",
        "version",
        &[(env!("CARGO_PKG_VERSION"), 1)],
    );
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::escape_label;

    #[test]
    fn label_values_escape_backslashes_quotes_and_newlines() {
        assert_eq!(escape_label("my-sink_2"), "my-sink_2");
        assert_eq!(escape_label("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
    }
}
