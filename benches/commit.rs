//! Durable commit throughput: `Engine::commit` from 1, 16 and 64 threads,
//! beside a raw LMDB synced write of the same records (hook, row, due key,
//! hook-id index entry, commit counter) into the same databases of a
//! shard's store.
//!
//! The engine runs twice: delivering every row at once to a no-op sink (so
//! each sync also carries the claims and outcomes of earlier commits), and
//! with deliveries held (its sink holds one attempt open and the tenant's
//! window is one row), so it writes the same records as the raw runs and
//! nothing else. Raw LMDB writes transactions of two sizes: one record per
//! committer (the largest batch those committers could form), and each
//! engine run's mean group-commit size (`commits / group_commits`).
//!
//! After the criterion runs, the lines that compare within one run: the
//! engine at 64 committers and raw LMDB at the engine's batch size
//! alternated in blocks; the same with 64 commits in flight from one
//! thread through `commit_then`, as the node's event loop commits (no
//! committer thread to wake per commit), and through `commit_async`,
//! awaited as an executor's tasks would be; and raw transactions back to back
//! against the same after a gap of busy work, as an engine's syncs are.

use criterion::measurement::WallTime;
use criterion::Throughput;
use criterion::{BenchmarkGroup, BenchmarkId, Criterion};
use goad::config::{SourceConfig, TenantLimitsConfig};
use goad::{Config, Delivery, Engine, NewHook, Sink, SinkConfig, SinkError};
use heed::types::Bytes;
use parking_lot::{Condvar, Mutex};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

#[path = "../tests/common/awaiting.rs"]
mod awaiting;
mod common;
use common::paired::{benching, paired};

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
        c.sources.push(SourceConfig::new(
            tenant,
            tenant,
            vec![SinkConfig::of_kind("accept")],
        ));
    }
    Engine::builder(c)
        .sink("accept", sink.clone())
        .open()
        .unwrap()
}

/// Runs `line` on a new engine in a new directory, its sink holding every
/// delivery while `held`.
fn on_a_fresh_engine<T>(held: bool, line: impl FnOnce(&Engine) -> T) -> T {
    let sink = Arc::new(Accept::default());
    sink.hold(held);
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path(), &sink);
    let out = line(&engine);
    sink.hold(false);
    engine.shutdown();
    out
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

/// A shard's store, written to directly: the same databases the engine
/// writes a commit to (hooks and rows in `records`, due keys in `due`, the
/// id index in `hook_ids`, the tenant's byte count in `tenant_bytes`, the
/// commit counter in `meta`), with none of the engine around them.
struct Raw {
    _dir: tempfile::TempDir,
    env: heed::Env<heed::WithoutTls>,
    dbs: [heed::Database<'static, Bytes, Bytes>; 5],
    seq: u64,
}

impl Raw {
    fn open() -> Raw {
        let dir = tempfile::tempdir().unwrap();
        let store = goad::store::ShardStore::open(dir.path(), 0, 1).unwrap();
        let env = store.env().clone();
        let wtxn = env.write_txn().unwrap();
        let dbs = env
            .create_databases_and_commit(wtxn, |opener, wtxn| {
                let open = |name| opener.open_database::<Bytes, Bytes>(wtxn, Some(name));
                let dbs = [
                    open("records")?,
                    open("due")?,
                    open("hook_ids")?,
                    open("tenant_bytes")?,
                    open("meta")?,
                ]
                .map(|db| db.expect("a shard store's database"));
                Ok::<_, heed::Error>(heed::CommitOrAbort::<_, ()>::Commit(dbs))
            })
            .unwrap()
            .unwrap_commit();
        Raw {
            _dir: dir,
            env,
            dbs,
            seq: 0,
        }
    }

    /// One synced transaction of `hooks` hooks' records, keyed as a shard
    /// keys them: the hook and its row by seq, the due key by (tenant,
    /// time, seq, sink), the id index entry by a 36-byte id that grows as
    /// a UUIDv7's does, the tenant's byte count, and the commit counter.
    fn write(&mut self, hooks: usize) {
        let [records, due, hook_ids, tenant_bytes, meta] = self.dbs;
        let mut wtxn = self.env.write_txn().unwrap();
        for _ in 0..hooks {
            self.seq += 1;
            let hook_key = self.seq.to_be_bytes();
            records
                .put(&mut wtxn, &hook_key, &[b'x'; BODY_BYTES + 64])
                .unwrap();
            let mut row_key = [0u8; 10];
            row_key[..8].copy_from_slice(&hook_key);
            records.put(&mut wtxn, &row_key, &[0u8; 40]).unwrap();
            let mut due_key = [0u8; 22];
            due_key[4..12].copy_from_slice(&hook_key);
            due_key[12..20].copy_from_slice(&hook_key);
            due.put(&mut wtxn, &due_key, &[0u8; 8]).unwrap();
            let mut id = [b'0'; 36];
            id[..8].copy_from_slice(&hook_key);
            hook_ids.put(&mut wtxn, &id, &[0u8; 11]).unwrap();
            let stored_bytes = self.seq * (BODY_BYTES as u64 + 64);
            tenant_bytes
                .put(&mut wtxn, &[0u8; 4], &stored_bytes.to_be_bytes())
                .unwrap();
        }
        meta.put(&mut wtxn, b"next_seq", &self.seq.to_be_bytes())
            .unwrap();
        wtxn.commit().unwrap();
    }
}

/// Synced transactions of `batch` hooks' records each, written by one thread.
fn raw_run(group: &mut BenchmarkGroup<WallTime>, name: &str, committers: usize, batch: usize) {
    let mut raw = Raw::open();
    group.throughput(Throughput::Elements(batch as u64));
    group.bench_with_input(BenchmarkId::new(name, committers), &batch, |b, &n| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                raw.write(n);
            }
            start.elapsed()
        })
    });
}

/// Engine blocks against raw LMDB blocks of the same hooks, alternated
/// (see `common::paired`): each raw block is written by one thread in
/// transactions of the mean group-commit size the engine had in the block
/// before it.
struct PairedBlocks<'e> {
    engine: &'e Engine,
    raw: Raw,
    engine_s: f64,
    raw_s: f64,
    batches: usize,
    ratios: Vec<f64>,
}

impl PairedBlocks<'_> {
    fn new(engine: &Engine) -> PairedBlocks<'_> {
        PairedBlocks {
            engine,
            raw: Raw::open(),
            engine_s: 0.0,
            raw_s: 0.0,
            batches: 0,
            ratios: Vec::new(),
        }
    }

    /// Times `commit_block` (which commits `hooks` hooks), then as many
    /// hooks' records written raw at the block's mean group-commit size.
    fn block(&mut self, hooks: usize, commit_block: impl FnOnce()) {
        let before = self.engine.stats()[0];
        let began = Instant::now();
        commit_block();
        let engine_block_s = began.elapsed().as_secs_f64();
        let after = self.engine.stats()[0];
        let syncs = (after.group_commits - before.group_commits).max(1);
        let batch = ((after.commits - before.commits) as f64 / syncs as f64).round() as usize;
        let began = Instant::now();
        let mut left = hooks;
        while left > 0 {
            let n = batch.clamp(1, left);
            self.raw.write(n);
            left -= n;
        }
        let raw_block_s = began.elapsed().as_secs_f64();
        self.engine_s += engine_block_s;
        self.raw_s += raw_block_s;
        self.batches += batch;
        self.ratios.push(raw_block_s / engine_block_s);
    }

    /// Prints the rates over all blocks and the median of the blocks'
    /// ratios; returns the mean group-commit size.
    fn report(mut self, what: &str, hooks: usize) -> usize {
        let blocks = self.ratios.len();
        let total = (hooks * blocks) as f64;
        self.ratios.sort_by(f64::total_cmp);
        println!(
            "durable_commit paired, {what}, {blocks} blocks of {hooks} hooks: engine {:.1}k/s, raw at its batch (mean {}) {:.1}k/s, ratio {:.2} (median block {:.2})",
            total / self.engine_s / 1e3,
            self.batches / blocks,
            total / self.raw_s / 1e3,
            self.raw_s / self.engine_s,
            self.ratios[blocks / 2],
        );
        self.batches / blocks
    }
}

/// Hooks each committer commits in a block of the paired runs.
const PER_COMMITTER: usize = 40;

/// `committers` threads, each committing `PER_COMMITTER` hooks a block with
/// `Engine::commit`, against raw LMDB; returns the mean group-commit size.
fn paired_commits(engine: &Engine, source: &str, committers: usize, blocks: usize) -> usize {
    let (start, done) = (Barrier::new(committers + 1), Barrier::new(committers + 1));
    let hooks = committers * PER_COMMITTER;
    let mut paired = PairedBlocks::new(engine);
    std::thread::scope(|s| {
        for _ in 0..committers {
            s.spawn(|| {
                for _ in 0..blocks {
                    start.wait();
                    for _ in 0..PER_COMMITTER {
                        let hook = NewHook::new(source, vec![b'x'; BODY_BYTES]);
                        engine.commit(hook).unwrap();
                    }
                    done.wait();
                }
            });
        }
        for _ in 0..blocks {
            paired.block(hooks, || {
                start.wait();
                done.wait();
            });
        }
    });
    paired.report(&format!("{source}/{committers}"), hooks)
}

/// `in_flight` commits at a time from one thread with `commit_then`, as
/// the node's event loop commits its requests (each answered by a callback
/// on the shard thread, no committer thread to wake), `in_flight *
/// PER_COMMITTER` hooks a block, against raw LMDB.
fn paired_commits_then(engine: &Engine, source: &str, in_flight: usize, blocks: usize) {
    let hooks = in_flight * PER_COMMITTER;
    let window = Arc::new((Mutex::new(0usize), Condvar::new()));
    let mut paired = PairedBlocks::new(engine);
    for _ in 0..blocks {
        paired.block(hooks, || {
            let (open, freed) = &*window;
            for _ in 0..hooks {
                let mut n = open.lock();
                while *n == in_flight {
                    freed.wait(&mut n);
                }
                *n += 1;
                drop(n);
                let window = window.clone();
                let hook = NewHook::new(source, vec![b'x'; BODY_BYTES]);
                let done = move |result: Result<String, goad::CommitError>| {
                    result.unwrap();
                    *window.0.lock() -= 1;
                    window.1.notify_one();
                };
                engine.commit_then(hook, done).unwrap();
            }
            let mut n = open.lock();
            while *n > 0 {
                freed.wait(&mut n);
            }
        });
    }
    paired.report(
        &format!("{source}/{in_flight} in flight, commit_then"),
        hooks,
    );
}

/// `in_flight` commits at a time awaited on one thread with
/// `commit_async`, as a host whose request handlers are futures commits,
/// `in_flight * PER_COMMITTER` hooks a block, against raw LMDB.
fn paired_commits_async(engine: &Engine, source: &str, in_flight: usize, blocks: usize) {
    let hooks = in_flight * PER_COMMITTER;
    let mut paired = PairedBlocks::new(engine);
    for _ in 0..blocks {
        paired.block(hooks, || {
            let commits = (0..hooks)
                .map(|_| engine.commit_async(NewHook::new(source, vec![b'x'; BODY_BYTES])));
            for answer in awaiting::await_in_flight(in_flight, commits, Duration::from_secs(30)) {
                answer.unwrap();
            }
        });
    }
    paired.report(
        &format!("{source}/{in_flight} in flight, commit_async"),
        hooks,
    );
}

/// A raw synced transaction of `batch` hooks written back to back, and the
/// same after `GAP_US` of busy work, as an engine's sync follows its other
/// work: alternated in blocks, the transaction's own time in each.
fn sync_after_a_gap(batch: usize, blocks: u32) {
    const GAP_US: u64 = 450;
    let (mut back_to_back, mut after_gap) = (Raw::open(), Raw::open());
    let [now, later] = paired(
        blocks,
        50,
        || back_to_back.write(batch),
        || {
            let began = Instant::now();
            while began.elapsed() < Duration::from_micros(GAP_US) {
                std::hint::spin_loop();
            }
            after_gap.write(batch);
        },
    );
    println!(
        "raw_lmdb_synced paired, {blocks} blocks of 50 transactions of {batch} hooks: back to back {:.0} µs each, after {GAP_US} µs of busy work {:.0} µs",
        now / 1e3,
        later / 1e3 - GAP_US as f64,
    );
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

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    commits(&mut criterion);
    let blocks = if benching() { 30 } else { 1 };
    // A fresh engine for each line, as each line's raw writes get a fresh
    // store.
    let mut held_batch = 1;
    for held in [false, true] {
        let source = if held { "held" } else { "delivering" };
        held_batch = on_a_fresh_engine(held, |engine| paired_commits(engine, source, 64, blocks));
        on_a_fresh_engine(held, |engine| {
            paired_commits_then(engine, source, 64, blocks)
        });
        on_a_fresh_engine(held, |engine| {
            paired_commits_async(engine, source, 64, blocks)
        });
    }
    sync_after_a_gap(held_batch, blocks as u32);
    criterion.final_summary();
}
