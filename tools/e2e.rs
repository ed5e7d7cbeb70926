//! End-to-end throughput, measured in one run on one machine:
//! 1. raw: `connections` threads post 1 KiB bodies with ureq (keep-alive)
//!    to a loopback receiver answering 200, for `seconds`;
//! 2. goad: `committers` threads commit 1 KiB hooks as fast as they can to
//!    an engine whose one HTTP sink (`sink_concurrency` = `connections`)
//!    posts to the same receiver; deliveries/s over the time from the first
//!    commit to the last delivery.
//!
//! Then the CPU time this process spent (receiver included) per raw request,
//! per goad delivery (after the commits stopped; also split by thread role)
//! and per commit (while committing, less its deliveries at that cost): at
//! those costs, the rate at which the machine's cores could commit and
//! deliver alike is a ceiling for the goad figure.
//!
//! `cargo run --release --bin goad-e2e -- [seconds] [committers] [connections]`

mod scratch;

use clap::Parser;
use goad::config::SourceConfig;
use goad::demo::receiver::{Receiver, Reply};
use goad::{Config, Engine, NewHook, SinkConfig};
use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[derive(Parser)]
#[command(
    about = "goad's end-to-end delivery rate beside raw ureq's request rate \
                   against one loopback receiver, measured in one run"
)]
struct Args {
    /// How long raw ureq posts, and goad's committers commit.
    #[arg(default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    seconds: u64,
    /// Threads committing 1 KiB hooks as fast as they can.
    #[arg(default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    committers: u32,
    /// Raw ureq's threads, and the goad sink's `sink_concurrency`.
    #[arg(default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
    connections: u32,
}

fn main() {
    let Args {
        seconds,
        committers,
        connections,
    } = Args::parse();
    let scratch = scratch::Scratch::new();
    let committers = committers as usize;
    let body = vec![b'x'; 1024];
    let receiver = Receiver::start_with(|_| Reply::status(200), false).expect("receiver");
    let url = receiver.url("/hooks");

    let cpu_before_raw = process_cpu_s();
    let raw = raw_rate(&url, connections, Duration::from_secs(seconds), &body);
    let raw_requests = receiver.ok_count();
    let raw_cpu_us = (process_cpu_s() - cpu_before_raw) * 1e6 / raw_requests.max(1) as f64;
    println!("raw ureq      {connections:>3} connections: {raw:>9.0} requests/s");

    let dir = scratch.engine_dir();
    let config = config(dir.path(), &url, connections);
    let engine = scratch.making(|| Engine::open(config).expect("engine"));
    let run = GoadRun::measure(&engine, &receiver, committers, seconds, &body);
    run.report(committers, connections, raw);
    let latency = engine.attempt_latency();
    let attempt_us = latency.sum_ms() * 1_000.0 / latency.count().max(1) as f64;
    // Each of the sink's `connections` slots turns over once per delivery:
    // compare the time a slot is held with the time the attempt itself took.
    println!(
        "per slot: {:.0} µs per delivery, of which the attempt took {attempt_us:.0} µs",
        connections as f64 * 1e6 / run.rate()
    );
    run.report_cpu(raw, raw_cpu_us);
    engine.shutdown();
}

/// One tenant whose one HTTP sink may use every connection.
fn config(data_dir: &std::path::Path, url: &str, connections: u32) -> Config {
    let mut config = Config {
        data_dir: data_dir.to_path_buf(),
        ..Config::default()
    };
    config.dispatch.concurrency = config.dispatch.concurrency.max(connections);
    config.dispatch.sink_concurrency = connections;
    let limits = goad::config::TenantLimitsConfig {
        concurrency: Some(connections),
        ..Default::default()
    };
    config.dispatch.tenants.insert("default".into(), limits);
    config.sources.push(SourceConfig::new(
        "load",
        "load",
        vec![SinkConfig::http(url.to_string())],
    ));
    config
}

/// What the goad phase measured: commits for `seconds`, then the drain.
struct GoadRun {
    committed: u64,
    commit_us: Histogram<u64>,
    commit_elapsed: Duration,
    delivered_while_committing: u64,
    delivered: u64,
    elapsed: Duration,
    cpu_at_start: f64,
    cpu_at_commits_end: f64,
    cpu_at_end: f64,
    threads_at_commits_end: BTreeMap<&'static str, f64>,
    threads_at_end: BTreeMap<&'static str, f64>,
}

impl GoadRun {
    fn measure(
        engine: &Engine,
        receiver: &Receiver,
        committers: usize,
        seconds: u64,
        body: &[u8],
    ) -> GoadRun {
        let before = receiver.ok_count();
        let stop = AtomicBool::new(false);
        let cpu_at_start = process_cpu_s();
        let mut commit_us = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
        let start = Instant::now();
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..committers)
                .map(|_| s.spawn(|| commit_until(engine, &stop, body)))
                .collect();
            std::thread::park_timeout(Duration::from_secs(seconds));
            stop.store(true, Ordering::Relaxed);
            for h in handles {
                commit_us.add(h.join().unwrap()).unwrap();
            }
        });
        let commit_elapsed = start.elapsed();
        let delivered_while_committing = receiver.ok_count() - before;
        let cpu_at_commits_end = process_cpu_s();
        let threads_at_commits_end = thread_cpu_s();
        let committed = commit_us.len();
        while receiver.ok_count() - before < committed
            && start.elapsed() < Duration::from_secs(seconds * 10 + 30)
        {
            std::thread::park_timeout(Duration::from_millis(5));
        }
        GoadRun {
            committed,
            commit_us,
            commit_elapsed,
            delivered_while_committing,
            delivered: receiver.ok_count() - before,
            elapsed: start.elapsed(),
            cpu_at_start,
            cpu_at_commits_end,
            cpu_at_end: process_cpu_s(),
            threads_at_commits_end,
            threads_at_end: thread_cpu_s(),
        }
    }

    /// Deliveries per second from the first commit to the last delivery.
    fn rate(&self) -> f64 {
        self.delivered as f64 / self.elapsed.as_secs_f64()
    }

    fn report(&self, committers: usize, connections: u32, raw: f64) {
        let ms = |q: f64| self.commit_us.value_at_quantile(q) as f64 / 1000.0;
        println!("goad commits  {committers:>3} committers:  {:>9.0} commits/s (p50 {:.2} ms, p99 {:.2} ms per durable commit)", self.committed as f64 / self.commit_elapsed.as_secs_f64(), ms(0.5), ms(0.99));
        println!("goad delivery {connections:>3} connections: {:>9.0} deliveries/s ({} of {} in {:.2} s)", self.rate(), self.delivered, self.committed, self.elapsed.as_secs_f64());
        println!(
            "              of which {:>9.0} deliveries/s while committing, {:.0} deliveries/s after",
            self.delivered_while_committing as f64 / self.commit_elapsed.as_secs_f64(),
            (self.delivered - self.delivered_while_committing) as f64
                / (self.elapsed - self.commit_elapsed).as_secs_f64().max(1e-3)
        );
        println!("ratio goad / raw: {:.2}", self.rate() / raw);
    }

    /// The CPU per raw request, per delivery (after the commits, also by
    /// thread role) and per commit, and the ceiling they set.
    fn report_cpu(&self, raw: f64, raw_cpu_us: f64) {
        let drained = (self.delivered - self.delivered_while_committing).max(1) as f64;
        let delivery_cpu_us = (self.cpu_at_end - self.cpu_at_commits_end) * 1e6 / drained;
        let commit_cpu_us = ((self.cpu_at_commits_end - self.cpu_at_start) * 1e6
            - self.delivered_while_committing as f64 * delivery_cpu_us)
            / self.committed.max(1) as f64;
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let ceiling = cores as f64 * 1e6 / (commit_cpu_us + delivery_cpu_us);
        println!(
            "CPU of this process: {raw_cpu_us:.0} µs per raw request; goad {delivery_cpu_us:.0} µs per delivery, {commit_cpu_us:.0} µs per commit"
        );
        let per_role: Vec<String> = self
            .threads_at_end
            .iter()
            .map(|(role, end_s)| {
                let start_s = self
                    .threads_at_commits_end
                    .get(role)
                    .copied()
                    .unwrap_or(0.0);
                format!("{role} {:.0} µs", (end_s - start_s) * 1e6 / drained)
            })
            .collect();
        println!(
            "  a delivery after the commits, by thread: {}",
            per_role.join(", ")
        );
        println!(
            "ceiling at those costs, committing and delivering alike on {cores} cores: {ceiling:.0}/s ({:.2} × raw)",
            ceiling / raw
        );
    }
}

/// One committer: commits 1 KiB hooks until told to stop; the latency of
/// each durable commit.
fn commit_until(engine: &Engine, stop: &AtomicBool, body: &[u8]) -> Histogram<u64> {
    let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
    while !stop.load(Ordering::Relaxed) {
        let t = Instant::now();
        engine
            .commit(NewHook::new("load", body.to_vec()))
            .expect("commit");
        h.saturating_record(t.elapsed().as_micros() as u64);
    }
    h
}

/// User plus system CPU seconds of this process so far (every thread, also
/// those that exited).
fn process_cpu_s() -> f64 {
    stat_cpu_s(&std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat")).1
}

/// The CPU seconds of this process's live threads by role (the prefix of
/// their names: goad's IO workers, shards, the receiver; the rest as other).
fn thread_cpu_s() -> BTreeMap<&'static str, f64> {
    let mut by_role = BTreeMap::new();
    let tasks = std::fs::read_dir("/proc/self/task").expect("/proc/self/task");
    for task in tasks.flatten() {
        // A thread that exited since the listing has no stat any more.
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue;
        };
        let (name, seconds) = stat_cpu_s(&stat);
        let role = ["goad-io", "goad-shard", "goad-receiver"]
            .into_iter()
            .find(|prefix| name.starts_with(prefix))
            .unwrap_or("other");
        *by_role.entry(role).or_insert(0.0) += seconds;
    }
    by_role
}

/// The command name and the user plus system CPU seconds of a
/// /proc/…/stat line.
fn stat_cpu_s(stat: &str) -> (String, f64) {
    // The name is field 2, in parentheses and possibly with spaces; utime
    // and stime are fields 14 and 15, in clock ticks.
    let open = stat.find('(').expect("a stat line");
    let close = stat.rfind(')').expect("a stat line");
    let ticks: f64 = stat[close + 2..]
        .split(' ')
        .skip(11)
        .take(2)
        .map(|f| f.parse::<f64>().expect("clock ticks"))
        .sum();
    // SAFETY: sysconf has no preconditions.
    let per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (stat[open + 1..close].to_string(), ticks / per_s)
}

fn raw_rate(url: &str, connections: u32, duration: Duration, body: &[u8]) -> f64 {
    // On loopback, as goad's clients reach it: never through a proxy the
    // shell names.
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .proxy(None)
        .max_idle_connections_per_host(connections as usize)
        .http_status_as_error(false)
        .build()
        .into();
    let count = AtomicU64::new(0);
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..connections {
            s.spawn(|| {
                while start.elapsed() < duration {
                    let mut r = agent
                        .post(url)
                        .header("content-type", "application/octet-stream")
                        .send(body)
                        .expect("raw request");
                    let _ = r.body_mut().read_to_vec();
                    count.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    });
    count.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}
