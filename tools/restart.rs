//! How soon an engine is back beside a backlog. `rows` hooks of `tenants`
//! tenants are committed to a host sink that answers each attempt "retry
//! in an hour" (a receiver that is down), so every row is pending,
//! attempted once, in its shard's due index. The engine is shut down and
//! opened again `opens` times; each time the tool prints how long
//! `Engine::open` took, and how long from its start one new hook of
//! another tenant took to be delivered (the shard's first scans beside the
//! backlog). Neither should grow with the backlog: an opening store reads
//! its tenants and the rows claimed when it stopped, not the rows waiting.
//!
//! `cargo run --release --bin goad-restart -- [rows] [tenants] [opens]`

mod scratch;

use clap::Parser;
use goad::config::SourceConfig;
use goad::{Config, Delivery, Engine, NewHook, Sink, SinkConfig, SinkError};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Parser)]
#[command(
    about = "How long an engine takes to open, and to deliver a new hook, \
                   beside a backlog of pending rows"
)]
struct Args {
    /// Pending rows in the backlog (one hook each).
    #[arg(default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    rows: u64,
    /// Tenants the backlog is spread over, one source each.
    #[arg(default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    tenants: u64,
    /// Times the engine is opened again.
    #[arg(default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..))]
    opens: u64,
}

/// Threads committing the backlog.
const COMMITTERS: u64 = 64;

/// A receiver that is down: counts its attempts and asks each to come
/// back in an hour.
#[derive(Default)]
struct Down(AtomicU64);

impl Sink for Down {
    fn deliver(&self, _: &Delivery<'_>) -> Result<(), SinkError> {
        self.0.fetch_add(1, Ordering::Relaxed);
        Err(SinkError::retry_after(3_600_000, "the receiver is down"))
    }
}

/// A receiver that is up: takes each attempt and says so.
struct Up(crossbeam_channel::Sender<()>);

impl Sink for Up {
    fn deliver(&self, _: &Delivery<'_>) -> Result<(), SinkError> {
        self.0.send(()).expect("the tool waits");
        Ok(())
    }
}

fn main() {
    let Args {
        rows,
        tenants,
        opens,
    } = Args::parse();
    let scratch = scratch::Scratch::new();
    let dir = scratch.engine_dir();
    let down = Arc::new(Down::default());
    let (delivered, deliveries) = crossbeam_channel::unbounded();
    let up = Arc::new(Up(delivered));
    let open = || {
        scratch.making(|| {
            Engine::builder(config(dir.path(), tenants))
                .sink("down", down.clone())
                .sink("up", up.clone())
                .open()
                .expect("the engine opens")
        })
    };

    let engine = open();
    let started = Instant::now();
    std::thread::scope(|s| {
        for c in 0..COMMITTERS {
            let engine = &engine;
            s.spawn(move || {
                for n in (c..rows).step_by(COMMITTERS as usize) {
                    let hook = NewHook::new(format!("s{}", n % tenants), vec![b'x'; 256]);
                    engine.commit(hook).expect("committed");
                }
            });
        }
    });
    let committed_s = started.elapsed().as_secs_f64();
    // Until no row is due: each was attempted once and waits out its hour.
    engine
        .tick_within(Duration::from_secs(3_600))
        .expect("the engine runs");
    assert_eq!(down.0.load(Ordering::Relaxed), rows);
    println!(
        "backlog: {rows} rows of {tenants} tenants, committed in {committed_s:.1} s \
         ({:.0}/s), each attempted once by {:.1} s",
        rows as f64 / committed_s,
        started.elapsed().as_secs_f64()
    );
    engine.shutdown();
    drop(engine);

    for _ in 0..opens {
        let started = Instant::now();
        let engine = open();
        let opened = started.elapsed();
        engine
            .commit(NewHook::new("probe", "x"))
            .expect("committed");
        deliveries
            .recv_timeout(Duration::from_secs(60))
            .expect("the new hook delivered");
        println!(
            "opened in {:>7.2} ms; a new hook delivered {:>7.2} ms after the opening began",
            opened.as_secs_f64() * 1e3,
            started.elapsed().as_secs_f64() * 1e3
        );
        let pending = engine.pending_rows().expect("pending rows");
        assert!(pending >= rows, "{pending} rows pending of {rows}");
        engine.shutdown();
    }
}

/// One shard; tenant `t{i}`'s source `s{i}` posts to the sink that is
/// down, tenant `probe`'s source `probe` to the one that is up. Breakers
/// off, so every row is attempted once instead of parked.
fn config(data_dir: &std::path::Path, tenants: u64) -> Config {
    let mut config = Config {
        data_dir: data_dir.to_path_buf(),
        shards: 1,
        ..Config::default()
    };
    config.dispatch.breaker_failures = 0;
    config.sources = (0..tenants)
        .map(|t| {
            let sinks = vec![SinkConfig::of_kind("down")];
            SourceConfig::new(format!("s{t}"), format!("t{t}"), sinks)
        })
        .collect();
    let sinks = vec![SinkConfig::of_kind("up")];
    config
        .sources
        .push(SourceConfig::new("probe", "probe", sinks));
    config
}
