//! The demo run: an engine on a temporary data directory, three loopback
//! receivers (fast, flaky, slow), several tenants, a few thousand hooks,
//! progress while it runs and a summary table at the end.

use super::receiver::{Receiver, Reply};
use crate::config::{Config, SinkConfig, SourceConfig};
use crate::core::{Outcome, OutcomeEvent};
use crate::runtime::{Engine, NewHook};
use hdrhistogram::Histogram;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

// A reader that went away (`goad demo | head`) is no reason to stop: the
// demo runs to its end and removes its directory.
use crate::say;

/// What to run.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    pub hooks: u64,
    pub committers: usize,
    pub body_bytes: usize,
    /// Set to end the demo early (`goad demo` sets it on SIGINT and
    /// SIGTERM): the committers stop, the summary shows what was done, the
    /// engine stops and the temporary data directory is removed.
    pub interrupted: Arc<AtomicBool>,
}

/// Per-tenant commit-to-delivery latency, as the receivers saw it (each
/// hook carries the instant its commit started, µs since the demo's start,
/// in a provider header), and the failed attempts, as the engine reported
/// them.
#[derive(Default)]
struct Tally {
    latency_us: BTreeMap<String, Histogram<u64>>,
    delivered: BTreeMap<String, u64>,
    retried: BTreeMap<String, u64>,
    dead: BTreeMap<String, u64>,
}

impl Tally {
    fn record(&mut self, tenant: &str, latency_us: u64) {
        self.latency_us
            .entry(tenant.to_string())
            .or_insert_with(|| Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid bounds"))
            .saturating_record(latency_us);
        *self.delivered.entry(tenant.to_string()).or_default() += 1;
    }

    fn outcome(&mut self, event: &OutcomeEvent) {
        let count = match event.outcome {
            Outcome::Retrying { .. } => &mut self.retried,
            Outcome::Dead { .. } => &mut self.dead,
            _ => return,
        };
        *count.entry(event.tenant.to_string()).or_default() += 1;
    }
}

const COMMITTED_HEADER: &str = "x-demo-committed-us";

const TENANTS: [(&str, &[&str]); 4] = [
    ("acme", &["fast"]),
    ("globex", &["flaky"]),
    ("initech", &["slow"]),
    ("umbrella", &["fast", "flaky"]),
];

pub fn run(options: &DemoOptions) -> Result<(), Box<dyn std::error::Error>> {
    let tally = Arc::new(Mutex::new(Tally::default()));
    let started = Instant::now();
    let receivers = Receivers::start(&tally, started)?;
    let data = tempfile::tempdir()?;
    let config = demo_config(data.path(), &receivers);
    let rows_total: u64 = (0..options.hooks)
        .map(|i| TENANTS[(i % 4) as usize].1.len() as u64)
        .sum();
    say!(
        "goad demo: {} hooks from {} committers, {rows_total} deliveries",
        options.hooks,
        options.committers
    );
    let routes: Vec<String> = (TENANTS.iter())
        .map(|(tenant, sinks)| format!("{tenant} → {}", sinks.join(" + ")))
        .collect();
    say!("tenants: {}", routes.join(", "));
    say!("receivers: fast, flaky (1 in 5 fails), slow (20 ms)");
    say!(
        "data directory {} ({} shards)",
        data.path().display(),
        config.shard_count()
    );
    let outcomes = tally.clone();
    let engine = Engine::builder(config)
        .on_outcome(move |event| outcomes.lock().outcome(event))
        .open()?;
    let deadline = started + SETTLE_WITHIN;
    let commits = Commits::default();
    std::thread::scope(|scope| {
        scope.spawn(|| commit_all(&engine, options, started, &commits));
        progress(
            &engine,
            rows_total,
            &commits,
            started,
            deadline,
            &options.interrupted,
        );
    });
    let failed_commits = commits.failed.into_inner();
    let elapsed = started.elapsed();
    let settled = settled(&engine);
    print_summary(&engine, &tally.lock(), elapsed);
    engine.shutdown();
    if options.interrupted.load(Ordering::Relaxed) {
        let committed = commits.hooks.into_inner();
        let e = format!(
            "interrupted after {committed} of {} hooks were committed; {settled} rows delivered or dead-lettered",
            options.hooks
        );
        return Err(e.into());
    }
    if failed_commits > 0 {
        return Err(format!("{failed_commits} of {} commits failed", options.hooks).into());
    }
    if settled < rows_total {
        let within_s = SETTLE_WITHIN.as_secs();
        let e = format!(
            "{settled} of {rows_total} rows delivered or dead-lettered within {within_s} s"
        );
        return Err(e.into());
    }
    Ok(())
}

/// How long the demo waits for every row to be delivered or dead-lettered.
const SETTLE_WITHIN: Duration = Duration::from_secs(120);

/// The three loopback receivers; each records what it accepts in the tally.
struct Receivers {
    fast: Receiver,
    flaky: Receiver,
    slow: Receiver,
}

impl Receivers {
    fn start(tally: &Arc<Mutex<Tally>>, started: Instant) -> std::io::Result<Receivers> {
        let record = |tally: Arc<Mutex<Tally>>| {
            move |r: &super::receiver::Received| {
                let committed_us: Option<u64> =
                    r.header(COMMITTED_HEADER).and_then(|v| v.parse().ok());
                if let (Some(committed_us), Some(tenant)) =
                    (committed_us, r.header("x-goad-tenant"))
                {
                    let us = (started.elapsed().as_micros() as u64).saturating_sub(committed_us);
                    tally.lock().record(tenant, us);
                }
            }
        };
        let (fast_tally, flaky_tally, slow_tally) = (
            record(tally.clone()),
            record(tally.clone()),
            record(tally.clone()),
        );
        let flaky_n = AtomicU64::new(0);
        Ok(Receivers {
            fast: Receiver::start_with(
                move |r| {
                    fast_tally(r);
                    Reply::status(200)
                },
                false,
            )?,
            flaky: Receiver::start_with(
                move |r| {
                    if flaky_n.fetch_add(1, Ordering::Relaxed).is_multiple_of(5) {
                        return Reply::status(503);
                    }
                    flaky_tally(r);
                    Reply::status(200)
                },
                false,
            )?,
            slow: Receiver::start_with(
                move |r| {
                    slow_tally(r);
                    Reply::status(200).delayed(Duration::from_millis(20))
                },
                false,
            )?,
        })
    }

    fn url(&self, name: &str) -> String {
        match name {
            "fast" => &self.fast,
            "flaky" => &self.flaky,
            "slow" => &self.slow,
            _ => unreachable!("the demo's receivers are fast, flaky and slow"),
        }
        .url("/hooks")
    }
}

/// The engine's config: goad's defaults, shorter backoffs, one source per
/// tenant with the sinks of `TENANTS`.
fn demo_config(data_dir: &std::path::Path, receivers: &Receivers) -> Config {
    let mut config = Config {
        data_dir: data_dir.to_path_buf(),
        ..Config::default()
    };
    config.retry.base_ms = 50;
    config.retry.max_ms = 1_000;
    for (tenant, sinks) in TENANTS {
        let sinks = sinks
            .iter()
            .map(|s| SinkConfig::http(receivers.url(s)))
            .collect();
        config
            .sources
            .push(SourceConfig::new(format!("{tenant}-events"), tenant, sinks));
    }
    config
}

/// How the committers are doing: the hooks and rows their commits wrote,
/// the commits that failed, and whether they are done.
#[derive(Default)]
struct Commits {
    hooks: AtomicU64,
    rows: AtomicU64,
    failed: AtomicU64,
    done: AtomicBool,
}

/// Commits the demo's hooks from `options.committers` threads, round robin
/// over the tenants, each stamped with the instant its commit started,
/// counting in `commits` what they wrote and what failed.
fn commit_all(engine: &Engine, options: &DemoOptions, started: Instant, commits: &Commits) {
    let next = AtomicU64::new(0);
    let body = vec![b'x'; options.body_bytes];
    std::thread::scope(|scope| {
        for _ in 0..options.committers {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= options.hooks || options.interrupted.load(Ordering::Relaxed) {
                    return;
                }
                let (tenant, sinks) = TENANTS[(i % 4) as usize];
                let mut hook = NewHook::new(format!("{tenant}-events"), body.clone());
                hook.headers.push((
                    COMMITTED_HEADER.to_string(),
                    started.elapsed().as_micros().to_string(),
                ));
                match engine.commit(hook) {
                    Ok(_) => {
                        commits.hooks.fetch_add(1, Ordering::Relaxed);
                        commits
                            .rows
                            .fetch_add(sinks.len() as u64, Ordering::Relaxed)
                    }
                    Err(e) => {
                        eprintln!("commit failed: {e}");
                        commits.failed.fetch_add(1, Ordering::Relaxed)
                    }
                };
            });
        }
    });
    commits.done.store(true, Ordering::Release);
}

fn settled(engine: &Engine) -> u64 {
    engine
        .stats()
        .iter()
        .map(|s| s.core.delivered + s.core.dead)
        .sum()
}

/// Prints the counts every half second until the committers are done and
/// every row they wrote is settled, `deadline` passed or the demo is
/// interrupted.
fn progress(
    engine: &Engine,
    rows_total: u64,
    commits: &Commits,
    started: Instant,
    deadline: Instant,
    interrupted: &AtomicBool,
) {
    while Instant::now() < deadline && !interrupted.load(Ordering::Relaxed) {
        let done = commits.done.load(Ordering::Acquire);
        std::thread::park_timeout(Duration::from_millis(500));
        let stats = engine.stats();
        let delivered: u64 = stats.iter().map(|s| s.core.delivered).sum();
        let retried: u64 = stats.iter().map(|s| s.core.retried).sum();
        let dead: u64 = stats.iter().map(|s| s.core.dead).sum();
        say!("  {:>6.1}s  delivered {delivered:>7} / {rows_total}  retried {retried:>6}  dead {dead:>4}", started.elapsed().as_secs_f64());
        if done && delivered + dead >= commits.rows.load(Ordering::Relaxed) {
            return;
        }
    }
}

fn print_summary(engine: &Engine, tally: &Tally, elapsed: Duration) {
    let stats = engine.stats();
    let delivered: u64 = stats.iter().map(|s| s.core.delivered).sum();
    say!();
    say!(
        "{:<10} {:>10} {:>8} {:>6} {:>10} {:>10} {:>10}",
        "tenant",
        "delivered",
        "retried",
        "dead",
        "p50 ms",
        "p99 ms",
        "max ms"
    );
    let count = |counts: &BTreeMap<String, u64>, tenant| counts.get(tenant).copied().unwrap_or(0);
    for (tenant, _) in TENANTS {
        let ms = |q: f64| {
            let hist = tally.latency_us.get(tenant)?;
            Some(hist.value_at_quantile(q) as f64 / 1000.0)
        };
        let shown = |ms: Option<f64>| ms.map_or("-".to_string(), |ms| format!("{ms:.2}"));
        say!(
            "{:<10} {:>10} {:>8} {:>6} {:>10} {:>10} {:>10}",
            tenant,
            count(&tally.delivered, tenant),
            count(&tally.retried, tenant),
            count(&tally.dead, tenant),
            shown(ms(0.5)),
            shown(ms(0.99)),
            shown(ms(1.0)),
        );
    }
    say!();
    say!(
        "delivered {delivered}  retried {}  dead-lettered {}  in {:.2}s  = {:.0} deliveries/s",
        stats.iter().map(|s| s.core.retried).sum::<u64>(),
        stats.iter().map(|s| s.core.dead).sum::<u64>(),
        elapsed.as_secs_f64(),
        delivered as f64 / elapsed.as_secs_f64()
    );
    say!("(latency: commit acknowledged → first successful delivery, per tenant)");
}
