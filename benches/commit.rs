//! Durable commit throughput: `Engine::commit` from 1, 16 and 64 threads,
//! beside a raw LMDB synced write of the same records (hook, row, due key).
//!
//! The engine runs twice: delivering every row at once to a no-op sink (so
//! each sync also carries the claims and outcomes of earlier commits), and
//! with deliveries held (its sink holds one attempt open and the tenant's
//! window is one row), so it writes the same records as the raw runs and
//! nothing else. Raw LMDB writes transactions of two sizes: one record per
//! committer (the largest batch those committers could form), and each
//! engine run's mean group-commit size (`commits / group_commits`).

use criterion::measurement::WallTime;
use criterion::Throughput;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, BenchmarkId, Criterion};
use goad::config::{SourceConfig, TenantLimitsConfig};
use goad::{Config, Delivery, Engine, NewHook, Sink, SinkConfig, SinkError};
use heed::types::Bytes;
use parking_lot::{Condvar, Mutex};
use std::sync::Arc;
use std::time::{Duration, Instant};

const BODY_BYTES: usize = 1_024;

/// Takes every delivery at once, or, while held, keeps each attempt open
/// until released.
#[derive(Default)]
struct Accept {
    held: Mutex<bool>,
    released: Condvar,
}

impl Accept {
    fn hold(&self, held: bool) {
        *self.held.lock() = held;
        self.released.notify_all();
    }
}

impl Sink for Accept {
    fn deliver(&self, _: &Delivery<'_>) -> Result<(), SinkError> {
        let mut held = self.held.lock();
        while *held {
            self.released.wait(&mut held);
        }
        Ok(())
    }
}

fn engine(dir: &std::path::Path, sink: &Arc<Accept>) -> Engine {
    let mut c = Config {
        data_dir: dir.to_path_buf(),
        shards: 1,
        ..Config::default()
    };
    // While held: one row claimed and its attempt open, the rest stay due.
    c.dispatch.attempt_timeout_ms = 3_600_000;
    let one_row = TenantLimitsConfig {
        max_inflight: Some(1),
        ..TenantLimitsConfig::default()
    };
    c.dispatch.tenants.insert("held".into(), one_row);
    for tenant in ["delivering", "held"] {
        c.sources.push(SourceConfig {
            id: tenant.into(),
            tenant: tenant.into(),
            ingest_token_env: None,
            forward_headers: None,
            sinks: vec![SinkConfig::of_kind("accept")],
        });
    }
    Engine::builder(c)
        .sink("accept", sink.clone())
        .open()
        .unwrap()
}

/// Commits from `committers` threads to `source`; returns the mean
/// group-commit size of the run.
fn engine_run(
    group: &mut BenchmarkGroup<WallTime>,
    name: &str,
    source: &str,
    committers: usize,
    sink: &Arc<Accept>,
) -> usize {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path(), sink);
    group.throughput(Throughput::Elements(committers as u64));
    group.bench_with_input(BenchmarkId::new(name, committers), &committers, |b, &n| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            std::thread::scope(|s| {
                for _ in 0..n {
                    s.spawn(|| {
                        for _ in 0..iters {
                            let hook = NewHook::new(source, vec![b'x'; BODY_BYTES]);
                            engine.commit(hook).unwrap();
                        }
                    });
                }
            });
            start.elapsed()
        })
    });
    let stats = engine.stats()[0];
    let batch = (stats.commits as f64 / stats.group_commits.max(1) as f64).round() as usize;
    if stats.group_commits > 0 {
        println!("{name}/{committers}: {batch} commits per sync on average");
    }
    sink.hold(false);
    batch.max(1)
}

/// Synced transactions of `batch` hooks' records each, written by one thread.
fn raw_run(group: &mut BenchmarkGroup<WallTime>, name: &str, committers: usize, batch: usize) {
    let dir = tempfile::tempdir().unwrap();
    let store = goad::store::ShardStore::open(dir.path(), 0, 1).unwrap();
    let env = store.env().clone();
    let wtxn = env.write_txn().unwrap();
    let db = env
        .create_databases_and_commit(wtxn, |opener, wtxn| {
            opener
                .create_database::<Bytes, Bytes>(wtxn, Some("raw"))
                .map(heed::CommitOrAbort::<_, ()>::Commit)
        })
        .unwrap()
        .unwrap_commit();
    let mut seq = 0u64;
    group.throughput(Throughput::Elements(batch as u64));
    group.bench_with_input(BenchmarkId::new(name, committers), &batch, |b, &n| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                let mut wtxn = env.write_txn().unwrap();
                for _ in 0..n {
                    seq += 1;
                    let hook_key = seq.to_be_bytes();
                    db.put(&mut wtxn, &hook_key, &[b'x'; BODY_BYTES + 64])
                        .unwrap();
                    let mut row_key = [0u8; 10];
                    row_key[..8].copy_from_slice(&hook_key);
                    db.put(&mut wtxn, &row_key, &[0u8; 40]).unwrap();
                    let mut due_key = [1u8; 22];
                    due_key[12..20].copy_from_slice(&hook_key);
                    db.put(&mut wtxn, &due_key, &[0u8; 8]).unwrap();
                }
                wtxn.commit().unwrap();
            }
            start.elapsed()
        })
    });
}

fn commits(c: &mut Criterion) {
    let mut group = c.benchmark_group("durable_commit");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(5));
    for committers in [1usize, 16, 64] {
        let sink = Arc::new(Accept::default());
        let delivering = engine_run(&mut group, "engine", "delivering", committers, &sink);
        sink.hold(true);
        let held = engine_run(
            &mut group,
            "engine_deliveries_held",
            "held",
            committers,
            &sink,
        );
        raw_run(&mut group, "raw_lmdb_synced", committers, committers);
        raw_run(
            &mut group,
            "raw_lmdb_synced_engine_batch",
            committers,
            delivering,
        );
        raw_run(&mut group, "raw_lmdb_synced_held_batch", committers, held);
    }
    group.finish();
}

criterion_group!(benches, commits);
criterion_main!(benches);
