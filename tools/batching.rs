//! What batching buys: deliveries per second through a host sink whose
//! every call takes `call_ms` (a remote queue's round trip), one attempt
//! per call against batches of up to `batch` attempts, at goad's default
//! concurrency. 20 tenants commit `hooks` hooks while the sink holds its
//! calls; the time is from its opening to the last delivery, so the rate
//! is the sink's, not the commits'.
//!
//! `cargo run --release --bin goad-batching -- [hooks] [call_ms] [batch]`

mod scratch;

use clap::Parser;
use goad::config::SourceConfig;
use goad::{Config, Delivery, Engine, NewHook, Sink, SinkConfig, SinkError};
use parking_lot::{Condvar, Mutex};
use std::num::NonZeroU16;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const TENANTS: usize = 20;

/// Takes every attempt after `call` of waiting, one call per attempt or per
/// batch, once it is open; counts calls and attempts.
struct Remote {
    call: Duration,
    batch: Option<NonZeroU16>,
    open: (Mutex<bool>, Condvar),
    calls: AtomicU64,
    attempts: AtomicU64,
}

impl Remote {
    fn take(&self, attempts: u64) {
        let (open, opened) = &self.open;
        let mut is_open = open.lock();
        while !*is_open {
            opened.wait(&mut is_open);
        }
        drop(is_open);
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.attempts.fetch_add(attempts, Ordering::Relaxed);
        std::thread::sleep(self.call);
    }

    fn open(&self) {
        *self.open.0.lock() = true;
        self.open.1.notify_all();
    }
}

impl Sink for Remote {
    fn deliver(&self, _: &Delivery<'_>) -> Result<(), SinkError> {
        self.take(1);
        Ok(())
    }

    fn batch_max_entries(&self) -> Option<NonZeroU16> {
        self.batch
    }

    fn deliver_batch(&self, deliveries: &[Delivery<'_>]) -> Vec<Result<(), SinkError>> {
        self.take(deliveries.len() as u64);
        deliveries.iter().map(|_| Ok(())).collect()
    }
}

#[derive(Parser)]
#[command(about = "Deliveries per second through a slow host sink: \
                   one attempt a call, then batches")]
struct Args {
    /// Hooks committed, spread over 20 tenants.
    #[arg(default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(1..))]
    hooks: u64,
    /// How long each call of the sink takes.
    #[arg(default_value_t = 5)]
    call_ms: u64,
    /// The most attempts a batch takes.
    #[arg(default_value_t = 10, value_parser = clap::value_parser!(u16).range(1..))]
    batch: u16,
}

fn main() {
    let Args {
        hooks,
        call_ms,
        batch,
    } = Args::parse();
    let scratch = scratch::Scratch::new();
    println!(
        "{hooks} hooks of {TENANTS} tenants, {call_ms} ms a call, goad's default concurrency:"
    );
    for batch in [None, NonZeroU16::new(batch)] {
        let (seconds, calls) = run(&scratch, hooks, Duration::from_millis(call_ms), batch);
        let label = batch.map_or("one attempt a call".to_string(), |b| {
            format!("batches of up to {b}")
        });
        println!(
            "  {label:<22} {:>8.0} deliveries/s  ({calls} calls, {:.1} attempts a call)",
            hooks as f64 / seconds,
            hooks as f64 / calls as f64
        );
    }
}

/// Seconds from the sink's opening to the last delivery, and the calls made.
fn run(
    scratch: &scratch::Scratch,
    hooks: u64,
    call: Duration,
    batch: Option<NonZeroU16>,
) -> (f64, u64) {
    let dir = scratch.engine_dir();
    let mut config = Config {
        data_dir: dir.path().to_path_buf(),
        ..Config::default()
    };
    for t in 0..TENANTS {
        config.sources.push(SourceConfig::new(
            format!("s{t}"),
            format!("t{t}"),
            vec![SinkConfig::of_kind("remote")],
        ));
    }
    let remote = Arc::new(Remote {
        call,
        batch,
        open: (Mutex::new(false), Condvar::new()),
        calls: AtomicU64::new(0),
        attempts: AtomicU64::new(0),
    });
    let engine = scratch.making(|| {
        Engine::builder(config)
            .sink("remote", remote.clone())
            .open()
            .expect("the engine opens")
    });
    std::thread::scope(|s| {
        for c in 0..16 {
            let engine = &engine;
            s.spawn(move || {
                for n in (c..hooks).step_by(16) {
                    let source = format!("s{}", n % TENANTS as u64);
                    engine
                        .commit(NewHook::new(source, vec![b'x'; 256]))
                        .expect("committed");
                }
            });
        }
    });
    let started = Instant::now();
    remote.open();
    while remote.attempts.load(Ordering::Relaxed) < hooks {
        engine.tick().expect("the engine runs");
    }
    let seconds = started.elapsed().as_secs_f64();
    (seconds, remote.calls.load(Ordering::Relaxed))
}
