//! The noisy-neighbour measurement: tenant B commits hooks at a steady rate
//! to a healthy loopback receiver, and we record each hook's
//! commit-to-delivery latency, alone and then beside a neighbour on the
//! same shard (default settings) that committed its backlog first:
//! - `hung`: tenant A's 10,000 hooks for an endpoint that accepts
//!   connections and never answers: A's attempts hang until the sink's 5 s
//!   timeout, its breaker opens and its rows park, all while B runs;
//! - `rated`: 4 tenants' 1,500 hooks each for sinks with
//!   `max_calls_per_s = 1` (a Slack webhook's rate);
//! - `slow`: 4 tenants' 1,500 hooks each for a receiver that takes 200 ms
//!   to answer.
//!
//! Prints B's p50 / p99 alone and beside each neighbour asked for.
//!
//! `cargo run --release --bin goad-neighbour -- [b_hooks] [b_rate_per_s] [hung|rated|slow ...]`

mod scratch;

use clap::{Parser, ValueEnum};
use goad::config::SourceConfig;
use goad::demo::receiver::{Received, Receiver, Reply};
use goad::{Config, Engine, NewHook, SinkConfig};
use hdrhistogram::Histogram;
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::{Duration, Instant};

const COMMITTED_HEADER: &str = "x-neighbour-committed-us";

/// What shares tenant B's shard.
#[derive(Clone, Copy, Debug, PartialEq, ValueEnum)]
enum Neighbour {
    /// Tenant A's 10,000 hooks for an endpoint that never answers.
    Hung,
    /// 4 tenants' 1,500 hooks each for sinks taking one call a second.
    Rated,
    /// 4 tenants' 1,500 hooks each for a receiver taking 200 ms a request.
    Slow,
}

impl Neighbour {
    /// Its tenants and each one's hooks.
    fn backlog(self) -> (usize, usize) {
        match self {
            Neighbour::Hung => (1, 10_000),
            Neighbour::Rated | Neighbour::Slow => (4, 1_500),
        }
    }
}

#[derive(Parser)]
#[command(
    about = "Tenant B's commit-to-delivery latency alone and beside noisy neighbours \
                   on its shard"
)]
struct Args {
    /// Hooks tenant B commits.
    #[arg(default_value_t = 2_000, value_parser = clap::value_parser!(u64).range(1..))]
    b_hooks: u64,
    /// Hooks per second tenant B commits.
    #[arg(default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(1..))]
    b_rate_per_s: u64,
    /// The neighbours to measure beside, one after another.
    #[arg(value_enum, default_values_t = [Neighbour::Hung])]
    neighbours: Vec<Neighbour>,
}

fn main() {
    let Args {
        b_hooks,
        b_rate_per_s: b_rate,
        neighbours,
    } = Args::parse();
    let scratch = scratch::Scratch::new();
    let ms = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    let alone = run(&scratch, b_hooks, b_rate, None);
    println!("tenant B, {b_hooks} hooks at {b_rate}/s, commit-to-delivery:");
    println!(
        "  alone:              p50 {:>9.2} ms  p99 {:>9.2} ms  ({} delivered)",
        ms(&alone, 0.5),
        ms(&alone, 0.99),
        alone.len()
    );
    for neighbour in neighbours {
        let beside = run(&scratch, b_hooks, b_rate, Some(neighbour));
        let (tenants, hooks) = neighbour.backlog();
        println!(
            "  beside {tenants} x {hooks} {:<5}: p50 {:>9.2} ms  p99 {:>9.2} ms  ({} delivered; p99 {:.2}x alone)",
            format!("{neighbour:?}").to_lowercase(),
            ms(&beside, 0.5),
            ms(&beside, 0.99),
            beside.len(),
            ms(&beside, 0.99) / ms(&alone, 0.99)
        );
    }
}

/// Tenant B's latencies (µs) for one run, beside `neighbour` if any.
fn run(
    scratch: &scratch::Scratch,
    b_hooks: u64,
    b_rate: u64,
    neighbour: Option<Neighbour>,
) -> Histogram<u64> {
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
    let neighbours_receiver = Receiver::start_with(
        move |_: &Received| match neighbour {
            Some(Neighbour::Hung) => Reply::hang(),
            Some(Neighbour::Slow) => Reply::status(200).delayed(Duration::from_millis(200)),
            _ => Reply::status(200),
        },
        false,
    )
    .expect("receiver");
    let dir = scratch.engine_dir();
    let mut config = Config {
        data_dir: dir.path().to_path_buf(),
        shards: 1,
        ..Config::default()
    };
    let (a_tenants, a_hooks) = neighbour.map_or((0, 0), Neighbour::backlog);
    for a in 0..a_tenants {
        let sink = SinkConfig {
            max_calls_per_s: (neighbour == Some(Neighbour::Rated)).then_some(1),
            ..SinkConfig::http(neighbours_receiver.url("/"))
        };
        let (id, tenant) = (format!("a{a}"), format!("tenant-a{a}"));
        config
            .sources
            .push(SourceConfig::new(id, tenant, vec![sink]));
    }
    let b_sink = SinkConfig::http(healthy.url("/"));
    config
        .sources
        .push(SourceConfig::new("b", "tenant-b", vec![b_sink]));
    let engine = scratch.making(|| Engine::open(config).expect("engine"));
    // Four committers, each for one of the neighbour's tenants in turn.
    let committers = if a_tenants == 0 { 0 } else { 4 };
    std::thread::scope(|s| {
        for c in 0..committers {
            let (engine, source) = (&engine, format!("a{}", c % a_tenants));
            s.spawn(move || {
                for _ in 0..a_tenants * a_hooks / committers {
                    let hook = NewHook::new(source.clone(), vec![b'a'; 1024]);
                    engine.commit(hook).expect("commit A");
                }
            });
        }
    });
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
