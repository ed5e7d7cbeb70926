//! A shard's throughput as its tenants grow, with a no-op Rust sink, for
//! each count of tenants on one shard:
//! - **idle**: a shard knows every tenant it ever stored a row for, and a
//!   scan must not cost more for each of them. The tool commits one hook
//!   per tenant and lets them all be delivered (so the shard knows them),
//!   then has 8 threads commit `hooks` hooks for one tenant and times
//!   their commits and deliveries;
//! - **busy**: every tenant has rows due at once, and a scan must not cost
//!   more for each of them either. 8 threads commit `hooks` hooks spread
//!   evenly over the tenants while the sink holds its calls; then the sink
//!   lets them go and the tool times the backlog's delivery;
//! - **keys of one tenant busy**: the same backlog over as many sources (sink keys) of
//!   one tenant, which must not cost more for each key.
//!
//! `cargo run --release --bin goad-tenants -- [hooks] [tenants…]`

mod scratch;

use clap::Parser;
use goad::config::SourceConfig;
use goad::{Config, Delivery, Engine, NewHook, Sink, SinkConfig, SinkError};
use parking_lot::{Condvar, Mutex};
use std::sync::Arc;
use std::time::Instant;

/// A sink that takes everything once its gate is open.
#[derive(Default)]
struct Gated {
    open: Mutex<bool>,
    opened: Condvar,
}

impl Gated {
    fn open(&self) {
        *self.open.lock() = true;
        self.opened.notify_all();
    }
}

impl Sink for Gated {
    fn deliver(&self, _: &Delivery<'_>) -> Result<(), SinkError> {
        let mut open = self.open.lock();
        while !*open {
            self.opened.wait(&mut open);
        }
        Ok(())
    }
}

#[derive(Parser)]
#[command(
    about = "A shard's throughput as its tenants grow: idle tenants, busy tenants, \
                   and busy keys of one tenant"
)]
struct Args {
    /// Hooks committed in each measurement.
    #[arg(default_value_t = 2_000, value_parser = clap::value_parser!(u64).range(1..))]
    hooks: u64,
    /// The tenant counts to measure, one after another.
    #[arg(default_values_t = [1, 1_000, 5_000],
          value_parser = clap::value_parser!(u64).range(1..))]
    tenants: Vec<u64>,
}

fn main() {
    let Args {
        hooks,
        tenants: counts,
    } = Args::parse();
    let scratch = scratch::Scratch::new();
    for tenants in counts {
        idle(&scratch, tenants as usize, hooks);
        busy(&scratch, tenants as usize, hooks, Tenants::OneEach);
        busy(&scratch, tenants as usize, hooks, Tenants::One);
    }
}

/// Whose the sources are.
#[derive(Clone, Copy)]
enum Tenants {
    /// Source `s{i}` is tenant `t{i}`'s.
    OneEach,
    /// Every source is tenant `t0`'s.
    One,
}

/// An engine on a temporary directory with one shard and `sources`
/// sources, `s{i}` with one sink, of `tenants`.
fn engine(
    scratch: &scratch::Scratch,
    sources: usize,
    tenants: Tenants,
    sink: Arc<dyn Sink>,
) -> (tempfile::TempDir, Engine) {
    let dir = scratch.engine_dir();
    let mut config = Config {
        data_dir: dir.path().to_path_buf(),
        shards: 1,
        ..Config::default()
    };
    config.sources = (0..sources)
        .map(|i| {
            let tenant = match tenants {
                Tenants::OneEach => format!("t{i}"),
                Tenants::One => "t0".to_string(),
            };
            SourceConfig::new(format!("s{i}"), tenant, vec![SinkConfig::of_kind("noop")])
        })
        .collect();
    let engine = scratch.making(|| {
        Engine::builder(config)
            .sink("noop", sink)
            .open()
            .expect("engine")
    });
    (dir, engine)
}

fn idle(scratch: &scratch::Scratch, tenants: usize, hooks: u64) {
    let gated = Arc::new(Gated::default());
    gated.open();
    let (_dir, engine) = engine(scratch, tenants, Tenants::OneEach, gated);
    let started = Instant::now();
    for t in 0..tenants {
        engine
            .commit(NewHook::new(format!("s{t}"), "x"))
            .expect("commit");
    }
    engine.tick().expect("tick");
    let known = started.elapsed();
    let started = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                for _ in 0..hooks / 8 {
                    engine.commit(NewHook::new("s0", "x")).expect("commit");
                }
            });
        }
    });
    engine.tick().expect("tick");
    let elapsed = started.elapsed();
    println!(
        "{tenants:>6} tenants known (one hook each, in {:.2} s): {} hooks of one tenant committed and delivered in {:.0} ms = {:.0}/s",
        known.as_secs_f64(),
        hooks / 8 * 8,
        elapsed.as_secs_f64() * 1e3,
        (hooks / 8 * 8) as f64 / elapsed.as_secs_f64()
    );
}

fn busy(scratch: &scratch::Scratch, sources: usize, hooks: u64, tenants: Tenants) {
    let gated = Arc::new(Gated::default());
    let (_dir, engine) = engine(scratch, sources, tenants, gated.clone());
    let committed = hooks / 8 * 8;
    std::thread::scope(|s| {
        for thread in 0..8 {
            let engine = &engine;
            s.spawn(move || {
                for i in 0..hooks / 8 {
                    let source = format!("s{}", (i * 8 + thread) % sources as u64);
                    engine.commit(NewHook::new(source, "x")).expect("commit");
                }
            });
        }
    });
    let started = Instant::now();
    gated.open();
    engine.tick().expect("tick");
    let elapsed = started.elapsed();
    let (name, each) = match tenants {
        Tenants::OneEach => ("tenants busy", "per tenant"),
        Tenants::One => ("keys of one tenant busy", "per key"),
    };
    println!(
        "{sources:>6} {name}: a backlog of {committed} hooks, {} {each}, delivered in {:.0} ms = {:.0}/s",
        committed / sources as u64,
        elapsed.as_secs_f64() * 1e3,
        committed as f64 / elapsed.as_secs_f64()
    );
}
