//! The noisy-neighbour measurement: tenant B commits hooks at a steady rate
//! to a healthy loopback receiver, and we record each hook's
//! commit-to-delivery latency. Run 1: B alone. Run 2: the same after tenant A
//! (same shard, default settings) committed 10,000 hooks for an endpoint
//! that accepts connections and never answers: A's attempts hang until the
//! sink's 5 s timeout, its breaker opens and its rows park, all while B runs.
//! Prints B's p50 / p99 for both.
//!
//! `cargo run --release --bin goad-neighbour -- [b_hooks] [b_rate_per_s]`

use goad::config::SourceConfig;
use goad::demo::receiver::{Received, Receiver, Reply};
use goad::{Config, Engine, NewHook, SinkConfig};
use hdrhistogram::Histogram;
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::{Duration, Instant};

const COMMITTED_HEADER: &str = "x-neighbour-committed-us";
const A_HOOKS: usize = 10_000;

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("numbers: b_hooks b_rate_per_s"))
        .collect();
    let b_hooks = args.first().copied().unwrap_or(2_000);
    let b_rate = args.get(1).copied().unwrap_or(1_000);
    let alone = run(b_hooks, b_rate, false);
    let beside = run(b_hooks, b_rate, true);
    let ms = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    println!("tenant B, {b_hooks} hooks at {b_rate}/s, commit-to-delivery:");
    println!(
        "  alone:                      p50 {:>7.2} ms  p99 {:>7.2} ms  ({} delivered)",
        ms(&alone, 0.5),
        ms(&alone, 0.99),
        alone.len()
    );
    println!(
        "  beside A's hung sink:       p50 {:>7.2} ms  p99 {:>7.2} ms  ({} delivered)",
        ms(&beside, 0.5),
        ms(&beside, 0.99),
        beside.len()
    );
    println!(
        "  p99 ratio (beside / alone): {:.2}",
        ms(&beside, 0.99) / ms(&alone, 0.99)
    );
}

/// Tenant B's latencies (µs) for one run.
fn run(b_hooks: u64, b_rate: u64, with_neighbour: bool) -> Histogram<u64> {
    let started = Instant::now();
    let latencies = Arc::new(Mutex::new(
        Histogram::<u64>::new_with_bounds(1, 600_000_000, 3).unwrap(),
    ));
    let record = latencies.clone();
    let healthy = Receiver::start_with(
        move |r: &Received| {
            if let Some(at_us) = r
                .header(COMMITTED_HEADER)
                .and_then(|v| v.parse::<u64>().ok())
            {
                record.lock().saturating_record(
                    (started.elapsed().as_micros() as u64).saturating_sub(at_us),
                );
            }
            Reply::status(200)
        },
        false,
    )
    .expect("receiver");
    let hung = Receiver::start_with(|_| Reply::hang(), false).expect("receiver");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = Config {
        data_dir: dir.path().to_path_buf(),
        shards: 1,
        ..Config::default()
    };
    for (id, url) in [("a", hung.url("/")), ("b", healthy.url("/"))] {
        config.sources.push(SourceConfig::new(
            id,
            format!("tenant-{id}"),
            vec![SinkConfig::http(url)],
        ));
    }
    let engine = Engine::open(config).expect("engine");
    if with_neighbour {
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..A_HOOKS / 4 {
                        engine
                            .commit(NewHook::new("a", vec![b'a'; 1024]))
                            .expect("commit A");
                    }
                });
            }
        });
    }
    {
        let interval = Duration::from_secs_f64(1.0 / b_rate as f64);
        let mut next = Instant::now();
        for _ in 0..b_hooks {
            let now = Instant::now();
            if next > now {
                std::thread::park_timeout(next - now);
            }
            next += interval;
            let mut hook = NewHook::new("b", vec![b'b'; 1024]);
            hook.headers.push((
                COMMITTED_HEADER.into(),
                started.elapsed().as_micros().to_string(),
            ));
            engine.commit(hook).expect("commit B");
        }
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while healthy.ok_count() < b_hooks && Instant::now() < deadline {
        std::thread::park_timeout(Duration::from_millis(5));
    }
    drop(engine);
    let h = latencies.lock().clone();
    h
}
