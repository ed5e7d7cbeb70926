//! One tenant's throughput beside many idle tenants on the same shard: a
//! shard knows every tenant it ever stored a row for, and a scan must not
//! cost more for each of them. For each count of idle tenants, the tool
//! commits one hook per tenant and lets them all be delivered (so the shard
//! knows them), then has 8 threads commit `hooks` hooks for one tenant to
//! a no-op Rust sink and times their commits and deliveries.
//!
//! `cargo run --release --bin goad-tenants -- [hooks] [idle tenants…]`

use goad::config::SourceConfig;
use goad::{Config, Delivery, Engine, NewHook, Sink, SinkConfig, SinkError};
use std::sync::Arc;
use std::time::Instant;

struct NoOp;

impl Sink for NoOp {
    fn deliver(&self, _: &Delivery<'_>) -> Result<(), SinkError> {
        Ok(())
    }
}

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("numbers: hooks, then idle tenant counts"))
        .collect();
    let hooks = args.first().copied().unwrap_or(2_000);
    let counts = if args.len() > 1 {
        args[1..].to_vec()
    } else {
        vec![1, 1_000, 5_000]
    };
    for tenants in counts {
        run(tenants as usize, hooks);
    }
}

fn run(tenants: usize, hooks: u64) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = Config {
        data_dir: dir.path().to_path_buf(),
        shards: 1,
        ..Config::default()
    };
    config.sources = (0..tenants)
        .map(|t| {
            SourceConfig::new(
                format!("s{t}"),
                format!("t{t}"),
                vec![SinkConfig::of_kind("noop")],
            )
        })
        .collect();
    let engine = Engine::builder(config)
        .sink("noop", Arc::new(NoOp))
        .open()
        .expect("engine");
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
