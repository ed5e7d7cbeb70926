//! Durable commit throughput: `Engine::commit` from 1, 16 and 64 threads,
//! beside a raw LMDB synced write of the same records (hook, row, due key)
//! in transactions of two sizes: one record per committer (the largest
//! batch those committers could form), and the engine's own mean
//! group-commit size in its run (`commits / group_commits`).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use goad::config::SourceConfig;
use goad::{Config, Delivery, Engine, NewHook, Sink, SinkConfig, SinkError};
use heed::types::Bytes;
use std::sync::Arc;
use std::time::{Duration, Instant};

const BODY_BYTES: usize = 1_024;

struct Accept;

impl Sink for Accept {
    fn deliver(&self, _: &Delivery<'_>) -> Result<(), SinkError> {
        Ok(())
    }
}

fn engine(dir: &std::path::Path) -> Engine {
    let mut c = Config {
        data_dir: dir.to_path_buf(),
        shards: 1,
        ..Config::default()
    };
    c.sources.push(SourceConfig {
        id: "s".into(),
        tenant: "t".into(),
        ingest_token_env: None,
        forward_headers: None,
        sinks: vec![SinkConfig::of_kind("accept")],
    });
    Engine::builder(c)
        .sink("accept", Arc::new(Accept))
        .open()
        .unwrap()
}

fn commits(c: &mut Criterion) {
    let mut group = c.benchmark_group("durable_commit");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(5));
    for committers in [1usize, 16, 64] {
        group.throughput(Throughput::Elements(committers as u64));
        let dir = tempfile::tempdir().unwrap();
        let engine = engine(dir.path());
        group.bench_with_input(
            BenchmarkId::new("engine", committers),
            &committers,
            |b, &n| {
                b.iter_custom(|iters| {
                    let start = Instant::now();
                    std::thread::scope(|s| {
                        for _ in 0..n {
                            s.spawn(|| {
                                for _ in 0..iters {
                                    engine
                                        .commit(NewHook::new("s", vec![b'x'; BODY_BYTES]))
                                        .unwrap();
                                }
                            });
                        }
                    });
                    start.elapsed()
                })
            },
        );
        let stats = engine.stats();
        let batch = (stats[0].commits as f64 / stats[0].group_commits.max(1) as f64).round();
        if stats[0].group_commits > 0 {
            println!("engine/{committers}: {batch} commits per sync on average");
        }
        drop(engine);
        let raw_dir = tempfile::tempdir().unwrap();
        let store = goad::store::ShardStore::open(raw_dir.path(), 0, 1).unwrap();
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
        let same_batch = (batch as usize).max(1);
        for (name, n) in [
            ("raw_lmdb_synced", committers),
            ("raw_lmdb_synced_engine_batch", same_batch),
        ] {
            group.throughput(Throughput::Elements(n as u64));
            group.bench_with_input(BenchmarkId::new(name, committers), &n, |b, &n| {
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
    }
    group.finish();
}

criterion_group!(benches, commits);
criterion_main!(benches);
