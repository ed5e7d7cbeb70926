//! `goad reshard`: a stopped node's data directory moved to another shard
//! count keeps every row as it was (pending, dead, claimed, in its lane),
//! each tenant on the shard its id hashes to, replay counters summed; an
//! engine refuses a directory whose reshard was cut short, and resharding
//! again finishes it.

mod common;

use common::*;
use goad::core::RowId;
use goad::store::{reshard, verify_data_dir, DeadFilter, RowRecord, ShardStore};
use goad::{Config, Engine, NewHook, RowStatus, SinkConfig, SinkError, SinkState};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const MAX_SHARD_BYTES: u64 = 64 << 20;

/// Tenants `t0`..`t5`, each with source `s<i>`: sinks `refuse` (permanent)
/// and `later` (transient, retried in ten minutes); and tenant `lanes`
/// whose source `ordered` delivers to `gate` in lanes keyed by header `k`.
fn layout(dir: &Path, shards: usize) -> Config {
    let mut c = retrying_in_ten_minutes(dir, shards);
    for i in 0..6 {
        let sinks = &["refuse", "later"];
        c.sources
            .push(source_of_kinds(&format!("s{i}"), &format!("t{i}"), sinks));
    }
    let ordered = SinkConfig {
        ordered: true,
        ordering_key: Some("header:k".into()),
        ..SinkConfig::of_kind("gate")
    };
    c.sources.push(source("ordered", "lanes", vec![ordered]));
    c
}

/// `config(dir)` with `shards` shards of `MAX_SHARD_BYTES`, retries in
/// ten minutes.
fn retrying_in_ten_minutes(dir: &Path, shards: usize) -> Config {
    let mut c = config(dir);
    c.shards = shards;
    c.max_shard_bytes = MAX_SHARD_BYTES;
    c.retry.base_ms = 600_000;
    c.retry.max_ms = 600_000;
    c
}

/// A row as it is stored, by (hook id, sink index).
type Snapshot = BTreeMap<(String, u16), (RowStatus, u32, Option<String>, u64, Option<String>)>;

fn snapshot(engine: &Engine) -> Snapshot {
    rows(engine)
        .into_iter()
        .map(|r| {
            let record = r.record;
            let replay = record.replay.map(|id| id.to_string());
            let at_ms = match record.status {
                RowStatus::Dead => record.at_ms,
                // Claimed rows come back due when the store is reopened.
                RowStatus::Pending if r.in_flight => 0,
                RowStatus::Pending => record.at_ms,
            };
            let state = (record.status, record.attempts, record.error, at_ms, replay);
            ((r.hook_id, r.row.sink_index), state)
        })
        .collect()
}

/// Deliveries a sink of every type took, as (source, body).
type Taken = Arc<Mutex<Vec<(String, String)>>>;

/// An engine whose sinks all take every delivery, recording them.
fn taking_engine(c: Config) -> (Engine, Taken) {
    let taken: Taken = Arc::default();
    let mut builder = Engine::builder(c);
    for kind in ["refuse", "later", "gate"] {
        let taken = taken.clone();
        builder = builder.sink(
            kind,
            sink(move |d| {
                let body = String::from_utf8_lossy(&d.hook.body).into_owned();
                taken.lock().push((d.hook.source_id.to_string(), body));
                Ok(())
            }),
        );
    }
    (builder.open().unwrap(), taken)
}

/// An engine on `dir` with `shards` shards and sources `s<i>` of tenants
/// `t<i>` (`i` below `tenants`), whose sink fails every attempt, holding
/// hooks with bodies `0`..`hooks` (hook `n` to source `s<n % tenants>`)
/// committed from 16 threads, each row waiting ten minutes after its first
/// attempt.
fn waiting_hooks(dir: &Path, shards: usize, tenants: usize, hooks: usize) -> Engine {
    let mut c = retrying_in_ten_minutes(dir, shards);
    for i in 0..tenants {
        let (source, tenant) = (format!("s{i}"), format!("t{i}"));
        c.sources
            .push(source_of_kinds(&source, &tenant, &["later"]));
    }
    let engine = Engine::builder(c)
        .sink("later", sink(|_| Err(SinkError::transient("not now"))))
        .open()
        .unwrap();
    std::thread::scope(|s| {
        for t in 0..16 {
            let engine = &engine;
            s.spawn(move || {
                for n in (t..hooks).step_by(16) {
                    let source = format!("s{}", n % tenants);
                    engine.commit(NewHook::new(source, format!("{n}"))).unwrap();
                }
            });
        }
    });
    engine
}

#[test]
fn a_resharded_directory_keeps_every_row_as_it_was_each_tenant_on_its_new_shard() {
    let dir = tempfile::tempdir().unwrap();
    let gate = gate();
    let engine = Engine::builder(layout(dir.path(), 2))
        .sink("refuse", sink(|_| Err(SinkError::permanent("no"))))
        .sink("later", sink(|_| Err(SinkError::transient("not now"))))
        .sink("gate", gate.sink.clone())
        .open()
        .unwrap();
    for i in 0..6 {
        for n in 0..5 {
            engine
                .commit(NewHook::new(format!("s{i}"), format!("{n}")))
                .unwrap();
        }
    }
    for (k, n) in [("a", 1), ("b", 1), ("a", 2), ("a", 3), ("b", 2)] {
        let hook = NewHook {
            headers: vec![("k".into(), k.into())],
            ..NewHook::new("ordered", format!("{k}{n}"))
        };
        engine.commit(hook).unwrap();
    }
    // Every refused row dead, every later row retried once, and the gate
    // holding the lanes' heads.
    wait_until(
        "refused rows dead, later rows waiting",
        Duration::from_secs(20),
        || {
            let rows = rows(&engine);
            let dead = rows
                .iter()
                .filter(|r| r.record.status == RowStatus::Dead)
                .count();
            let retried = rows
                .iter()
                .filter(|r| r.record.status == RowStatus::Pending && r.record.attempts == 1)
                .count();
            let claimed = rows.iter().filter(|r| r.in_flight).count();
            dead == 30 && retried == 30 && claimed == 2
        },
    );
    // A replay whose rows die again: its counters move with them.
    let replayed = engine.replay(&DeadFilter::default()).unwrap();
    assert_eq!(replayed.moved, 30);
    wait_until(
        "the replayed rows dead again",
        Duration::from_secs(20),
        || {
            engine
                .replay_counters(&replayed.replay_id)
                .unwrap()
                .dead_again
                == 30
        },
    );
    let counters = engine.replay_counters(&replayed.replay_id).unwrap();
    let before = snapshot(&engine);
    drop(engine);
    drop(gate);

    // Resharded with the wall clock stepped an hour back since: the new
    // shards' clocks start where the old ones' last wrote.
    let old_clock_ms = (0..2)
        .map(|k| {
            ShardStore::open(dir.path(), k, 2)
                .unwrap()
                .clock_ms()
                .unwrap()
        })
        .max()
        .unwrap();
    let done = reshard(
        dir.path(),
        3,
        MAX_SHARD_BYTES,
        Engine::shard_of,
        goad::runtime::wall_ms() - 3_600_000,
    )
    .unwrap();
    assert_eq!((done.from_shards, done.to_shards), (2, 3));
    assert_eq!((done.hooks, done.rows), (35, 65));
    assert_eq!(done.kept_at, dir.path().join("before-reshard"));
    for k in 0..3 {
        let store = ShardStore::open(dir.path(), k, 3).unwrap();
        assert_eq!(store.verify().unwrap().problems, Vec::<String>::new());
        assert_eq!(store.clock_ms().unwrap(), old_clock_ms);
        for row in store.rows().unwrap() {
            assert_eq!(Engine::shard_of(&row.tenant, 3), k, "{row:?}");
        }
    }
    let (engine, taken) = taking_engine(layout(dir.path(), 3));
    assert_eq!(
        engine.replay_counters(&replayed.replay_id).unwrap(),
        counters
    );
    // Claimed rows came back due and are delivered; the rest are as they were.
    engine.tick().unwrap();
    let mut after = snapshot(&engine);
    let mut expected = before.clone();
    expected.retain(|_, (status, attempts, ..)| *status == RowStatus::Dead || *attempts > 0);
    after.retain(|_, (status, attempts, ..)| *status == RowStatus::Dead || *attempts > 0);
    assert_eq!(after, expected);
    // Each dead row's hook is found by its id, on its tenant's new shard.
    for ((hook_id, sink_index), (status, attempts, ..)) in &after {
        if *status != RowStatus::Dead {
            continue;
        }
        let found = engine.hook_status(hook_id).unwrap().unwrap();
        assert_eq!(
            found.shard as usize,
            Engine::shard_of(&found.hook.tenant, 3)
        );
        let sink = found.sinks.iter().find(|s| s.sink_index == *sink_index);
        let dead_attempts = match sink.map(|s| &s.state) {
            Some(SinkState::Dead(record)) => record.attempts,
            other => panic!("hook {hook_id} sink {sink_index}: {other:?}"),
        };
        assert_eq!(dead_attempts, *attempts);
    }
    let lanes: Vec<String> = taken
        .lock()
        .iter()
        .filter(|(source, _)| source == "ordered")
        .map(|(_, body)| body.clone())
        .collect();
    let lane = |k: &str| {
        lanes
            .iter()
            .filter(|b| b.starts_with(k))
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(lane("a"), ["a1", "a2", "a3"], "lane a in commit order");
    assert_eq!(lane("b"), ["b1", "b2"], "lane b in commit order");
}

/// Dedupe windows survive a reshard: each entry moves to its tenant's new
/// shard, so a key taken before is still answered with the first hook's id.
#[test]
fn dedupe_windows_move_with_their_tenants() {
    let dir = tempfile::tempdir().unwrap();
    let windowed = |shards| {
        let mut c = layout(dir.path(), shards);
        for source in &mut c.sources {
            source.dedupe_window_ms = Some(86_400_000);
        }
        c
    };
    let keyed = |i: usize| NewHook {
        dedupe_key: Some("evt-1".into()),
        ..NewHook::new(format!("s{i}"), "x")
    };
    let (engine, _) = taking_engine(windowed(2));
    let ids: Vec<String> = (0..6).map(|i| engine.commit(keyed(i)).unwrap()).collect();
    engine.tick().unwrap();
    drop(engine);
    reshard(
        dir.path(),
        3,
        MAX_SHARD_BYTES,
        Engine::shard_of,
        goad::runtime::wall_ms(),
    )
    .unwrap();
    for k in 0..3 {
        let store = ShardStore::open(dir.path(), k, 3).unwrap();
        assert_eq!(store.verify().unwrap().problems, Vec::<String>::new());
    }
    let (engine, taken) = taking_engine(windowed(3));
    let again: Vec<String> = (0..6).map(|i| engine.commit(keyed(i)).unwrap()).collect();
    assert_eq!(again, ids);
    let duplicates: u64 = engine.stats().iter().map(|s| s.duplicates).sum();
    assert_eq!(duplicates, 6);
    engine.tick().unwrap();
    assert!(taken.lock().is_empty(), "nothing stored again");
}

/// A directory larger than one write transaction of the copy (10,000
/// hooks) is copied whole, its rows' due times and order kept.
#[test]
fn a_directory_larger_than_one_copy_transaction_is_copied_whole() {
    let dir = tempfile::tempdir().unwrap();
    let hooks = 10_050;
    let engine = waiting_hooks(dir.path(), 1, 4, hooks);
    // Each hook's (tenant, seq), before and after.
    let placed = |rows: Vec<goad::RowView>| -> BTreeMap<String, (String, u64)> {
        rows.into_iter()
            .map(|r| (r.hook_id, (r.tenant.to_string(), r.row.seq)))
            .collect()
    };
    let before = placed(rows(&engine));
    drop(engine);
    let now = goad::runtime::wall_ms();
    let done = reshard(dir.path(), 2, MAX_SHARD_BYTES, Engine::shard_of, now).unwrap();
    assert_eq!((done.hooks, done.rows), (hooks as u64, hooks as u64));
    let mut after = BTreeMap::new();
    for k in 0..2 {
        let store = ShardStore::open(dir.path(), k, 2).unwrap();
        after.extend(placed(store.rows().unwrap()));
    }
    assert_eq!(after.len(), hooks);
    // Within each tenant, the hooks keep their commit order.
    let order = |placed: &BTreeMap<String, (String, u64)>| {
        let mut by_seq: Vec<(&String, u64, &String)> = placed
            .iter()
            .map(|(id, (tenant, seq))| (tenant, *seq, id))
            .collect();
        by_seq.sort();
        by_seq
            .into_iter()
            .map(|(tenant, _, id)| (tenant.clone(), id.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(order(&after), order(&before));
}

#[test]
fn an_unfinished_reshard_is_refused_by_an_engine_and_finished_by_resharding_again() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.shards = 2;
    c.max_shard_bytes = MAX_SHARD_BYTES;
    for i in 0..4 {
        c.sources.push(source_of_kinds(
            &format!("s{i}"),
            &format!("t{i}"),
            &["gate"],
        ));
    }
    let gate = gate();
    let engine = gated_engine(c.clone(), &gate);
    for i in 0..4 {
        engine.commit(NewHook::new(format!("s{i}"), "x")).unwrap();
    }
    drop(engine);
    drop(gate);
    let now = goad::runtime::wall_ms;
    let refused = reshard(dir.path(), 2, MAX_SHARD_BYTES, Engine::shard_of, now());
    assert_eq!(
        refused.unwrap_err().to_string(),
        format!(
            "{}: cannot reshard: it already has 2 shards",
            dir.path().display()
        )
    );
    reshard(dir.path(), 3, MAX_SHARD_BYTES, Engine::shard_of, now()).unwrap();
    // Put the directory back as a crash during the moves leaves it: the
    // marker written, old shard 0 moved aside, old shard 1 still in place,
    // the new shards still staged.
    let (data, staging, before) = (
        dir.path(),
        dir.path().join("resharding"),
        dir.path().join("before-reshard"),
    );
    std::fs::create_dir_all(&staging).unwrap();
    for k in 0..3 {
        std::fs::rename(ShardStore::dir(data, k), ShardStore::dir(&staging, k)).unwrap();
    }
    std::fs::rename(ShardStore::dir(&before, 1), ShardStore::dir(data, 1)).unwrap();
    std::fs::write(data.join("RESHARDING"), "2 3\n").unwrap();

    c.shards = 3;
    let unfinished = format!(
        "{}: a reshard from 2 to 3 shards is unfinished: run `goad reshard --shards 3` again",
        data.display()
    );
    let open = Engine::builder(c.clone())
        .sink("gate", sink(|_| Ok(())))
        .open()
        .err()
        .unwrap()
        .to_string();
    assert!(open.contains(&unfinished), "{open}");
    let verify = goad::store::verify_data_dir(data, 3)
        .err()
        .unwrap()
        .to_string();
    assert_eq!(verify, unfinished, "goad verify refuses it too");
    let other = reshard(data, 4, MAX_SHARD_BYTES, Engine::shard_of, now());
    assert_eq!(
        other.unwrap_err().to_string(),
        format!(
            "{}: cannot reshard: an unfinished reshard to 3 shards: run it again with 3",
            data.display()
        )
    );
    let done = reshard(data, 3, MAX_SHARD_BYTES, Engine::shard_of, now()).unwrap();
    assert_eq!((done.from_shards, done.hooks, done.rows), (2, 4, 4));
    assert!(!data.join("RESHARDING").exists() && !staging.exists());
    // A crash after every move and the staging directory's removal, before
    // the marker's: resharding again finds nothing left to move.
    std::fs::write(data.join("RESHARDING"), "2 3\n").unwrap();
    let done = reshard(data, 3, MAX_SHARD_BYTES, Engine::shard_of, now()).unwrap();
    assert_eq!((done.from_shards, done.hooks, done.rows), (2, 4, 4));
    assert!(!data.join("RESHARDING").exists() && !staging.exists());
    let (engine, taken) = taking_engine(c);
    engine.tick().unwrap();
    assert_eq!(taken.lock().len(), 4);
    assert_eq!(engine.hook_count().unwrap(), 0);
}

/// Leaves at `data` a stopped node's one shard holding one hook, its
/// attempt cut short.
fn one_hook_left(data: &Path) {
    let mut c = config(data);
    c.sources.push(source_of_kinds("s", "t", &["gate"]));
    let gate = gate();
    let engine = gated_engine(c, &gate);
    engine.commit(NewHook::new("s", "x")).unwrap();
}

/// A reshard it cannot do is refused before anything moves, saying why:
/// no directory, no shards, a count out of range, the shards an earlier reshard kept
/// still there, a marker that names no counts, a shard `goad verify`
/// finds unsound (nothing staged, no marker written).
#[test]
fn a_reshard_it_cannot_do_is_refused_saying_why() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let now = goad::runtime::wall_ms;
    let refusal = |to: usize| {
        let refused = reshard(data, to, MAX_SHARD_BYTES, Engine::shard_of, now());
        let reason = refused.unwrap_err().to_string();
        reason.replace(&data.display().to_string(), "<data>")
    };
    assert_eq!(refusal(2), "<data>: cannot reshard: no shards to reshard");
    let nowhere = data.join("nowhere");
    let refused = reshard(&nowhere, 2, MAX_SHARD_BYTES, Engine::shard_of, now());
    assert_eq!(
        refused.unwrap_err().to_string(),
        format!(
            "{}: cannot reshard: no data directory here",
            nowhere.display()
        )
    );
    assert!(!nowhere.exists(), "a mistyped path was made");
    one_hook_left(data);
    for to in [0, 257] {
        assert_eq!(
            refusal(to),
            format!("<data>: cannot reshard: {to} shards: the count must be from 1 to 256")
        );
    }
    reshard(data, 2, MAX_SHARD_BYTES, Engine::shard_of, now()).unwrap();
    assert_eq!(
        refusal(3),
        "<data>: cannot reshard: <data>/before-reshard holds the shards an earlier reshard \
         replaced: delete it (or move it away) first"
    );
    std::fs::remove_dir_all(data.join("before-reshard")).unwrap();
    std::fs::write(data.join("RESHARDING"), "two three\n").unwrap();
    assert_eq!(
        refusal(3),
        "<data>/RESHARDING: the reshard marker holds \"two three\\n\", not two shard counts"
    );
    std::fs::remove_file(data.join("RESHARDING")).unwrap();
    // The row loses its due entry.
    let k = Engine::shard_of("t", 2);
    let shard = ShardStore::open(data, k, 2).unwrap();
    let due = tree(&shard, "due");
    let mut wtxn = shard.env().write_txn().unwrap();
    due.clear(&mut wtxn).unwrap();
    wtxn.commit().unwrap();
    drop(shard);
    assert_eq!(
        refusal(3),
        format!(
            "<data>: cannot reshard: old shard {k} is not sound (row seq 1 sink 0 is Pending \
             but in no index: it would never be delivered): see `goad verify`"
        )
    );
    assert!(!data.join("resharding").exists() && !data.join("RESHARDING").exists());
}

/// The command: `goad reshard --config FILE --shards N` prints what it did
/// and exits 0; run again with the same count, it says why not and exits 2.
#[test]
fn goad_reshard_reports_what_it_did_and_why_it_cannot() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    one_hook_left(&data);
    let file = dir.path().join("goad.toml");
    let toml = format!("data_dir = {:?}\nshards = 1\n", data.display().to_string());
    std::fs::write(&file, toml).unwrap();
    let run = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_goad"))
            .args([
                "reshard",
                "--config",
                file.to_str().unwrap(),
                "--shards",
                "2",
            ])
            .output()
            .unwrap()
    };
    let first = run();
    let stdout = String::from_utf8_lossy(&first.stdout);
    assert_eq!(first.status.code(), Some(0), "{first:?}");
    assert!(
        stdout.contains("from 1 to 2 shards: 1 hooks, 1 rows")
            && stdout.contains("set shards = 2 in the config"),
        "{stdout}"
    );
    let again = run();
    assert_eq!(again.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(
        stderr.contains("cannot reshard: it already has 2 shards"),
        "{stderr}"
    );
}

/// Open breakers close in a reshard, and the row one parked to be its
/// probe runs at the first open after it (with the row it held), rather
/// than at the end of its ten-minute open period: the new shards are
/// written with unparking under way. The row whose failure opened the
/// breaker keeps its ten-minute backoff.
#[test]
fn a_row_parked_behind_a_breaker_runs_at_the_first_open_after_a_reshard() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = retrying_in_ten_minutes(dir.path(), 1);
    waits_of_ten_minutes(&mut c, 1);
    c.sources.push(source_of_kinds("s", "t", &["later"]));
    let engine = Engine::builder(c.clone())
        .sink("later", sink(|_| Err(SinkError::transient("not now"))))
        .open()
        .unwrap();
    for n in 0..3 {
        engine.commit(NewHook::new("s", format!("{n}"))).unwrap();
    }
    let errors = |engine: &Engine| -> Vec<Option<String>> {
        let mut errors: Vec<_> = rows(engine).into_iter().map(|r| r.record.error).collect();
        errors.sort();
        errors
    };
    wait_until(
        "the breaker open, its rows set aside",
        Duration::from_secs(10),
        || {
            let errors = errors(&engine);
            errors.len() == 3
                && errors
                    .iter()
                    .filter(|e| e.as_deref() == Some("breaker open"))
                    .count()
                    == 2
                && errors.iter().any(|e| e.as_deref() == Some("not now"))
        },
    );
    drop(engine);
    let now = goad::runtime::wall_ms();
    reshard(dir.path(), 2, MAX_SHARD_BYTES, Engine::shard_of, now).unwrap();
    c.shards = 2;
    let (engine, taken) = taking_engine(c);
    let backing_off = [Some("not now".to_string())];
    wait_until(
        "the parked and the held row delivered",
        Duration::from_secs(10),
        || taken.lock().len() == 2 && errors(&engine) == backing_off,
    );
}

/// The marker of a reshard moving directories.
const MARKER: &str = "RESHARDING";

/// When a `goad reshard` run is killed.
#[derive(Debug, Clone, Copy)]
enum Kill {
    /// This long after it starts.
    After(Duration),
    /// As soon as this path under the data directory exists.
    OnceThere(&'static str),
    /// As soon as this path under the data directory, once there, is gone.
    OnceGone(&'static str),
}

/// Starts `goad reshard --shards 3` on the 2-shard directory `data`.
fn start_reshard(data: &Path) -> Child {
    let file = data.with_extension("toml");
    let toml = format!(
        "data_dir = {:?}\nshards = 2\nmax_shard_bytes = {MAX_SHARD_BYTES}\n",
        data.display().to_string()
    );
    std::fs::write(&file, toml).unwrap();
    Command::new(env!("CARGO_BIN_EXE_goad"))
        .args([
            "reshard",
            "--config",
            file.to_str().unwrap(),
            "--shards",
            "3",
        ])
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

/// Runs `goad reshard` on `data`, killed with SIGKILL at `kill` unless it
/// finishes first; whether it was killed.
fn reshard_killed(data: &Path, kill: Kill) -> bool {
    let mut child = start_reshard(data);
    let started = Instant::now();
    let deadline = started + Duration::from_secs(60);
    let mut seen = false;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "{kill:?}: goad reshard exited {status}");
            return false;
        }
        let now = Instant::now();
        assert!(now < deadline, "goad reshard did not end or reach {kill:?}");
        let now_is_the_time = match kill {
            Kill::After(wait) => now - started >= wait,
            Kill::OnceThere(path) => data.join(path).exists(),
            Kill::OnceGone(path) => {
                let there = data.join(path).exists();
                seen |= there;
                seen && !there
            }
        };
        if now_is_the_time {
            child.kill().unwrap();
            child.wait().unwrap();
            return true;
        }
        // Spinning, so that a path which exists for a moment is seen.
        std::thread::yield_now();
    }
}

/// Runs `goad reshard` on `data` until it finishes; how long it took.
fn reshard_whole(data: &Path) -> Duration {
    let started = Instant::now();
    let status = start_reshard(data).wait().unwrap();
    assert!(status.success(), "goad reshard exited {status}");
    started.elapsed()
}

/// What a killed reshard left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Left {
    /// The old shards, in place.
    Old,
    /// The marker: some directories moved, others not.
    Unfinished,
    /// The new shards, in place (killed after its last move).
    New,
}

/// What a reshard killed at `kill` left, checked: the old directory, sound
/// and holding every hook; one with the marker, refused until resharding
/// again finishes it; or the new one, sound and holding every hook.
fn left_by(data: &Path, hooks: u64, kill: Kill) -> Left {
    if data.join(MARKER).exists() {
        let refused = verify_data_dir(data, 3).unwrap_err().to_string();
        assert!(refused.contains("is unfinished"), "{kill:?}: {refused}");
        return Left::Unfinished;
    }
    // The old shards leave for `before-reshard/` only once the marker is
    // written, and the marker goes only once the new shards are in place.
    let left = match data.join("before-reshard").exists() {
        true => Left::New,
        false => Left::Old,
    };
    let shards = if left == Left::New { 3 } else { 2 };
    let verified = verify_data_dir(data, shards).unwrap();
    let problems: Vec<_> = verified.iter().flat_map(|v| &v.problems).collect();
    assert!(problems.is_empty(), "{kill:?}: {problems:?}");
    let held: u64 = verified.iter().map(|v| v.hooks).sum();
    assert_eq!(held, hooks, "{kill:?}: the {left:?} shards hold every hook");
    left
}

/// Every row of a 3-shard directory, by shard, as stored.
fn stored_rows(data: &Path) -> Vec<(usize, RowId, String, String, RowRecord)> {
    let mut rows = Vec::new();
    for k in 0..3 {
        let store = ShardStore::open_sized(data, k, 3, MAX_SHARD_BYTES).unwrap();
        for r in store.rows().unwrap() {
            assert!(!r.in_flight, "nothing runs on a stopped directory");
            rows.push((k, r.row, r.hook_id, r.tenant.to_string(), r.record));
        }
    }
    rows.sort_by_key(|r| (r.0, r.1));
    rows
}

/// `goad reshard` killed with SIGKILL at instants spread over its run --
/// as it starts, once it copies, a quarter and half way through, once its
/// marker is written, while it moves directories, once its marker is gone
/// (checking the new shards), and twice in a row -- then run again until
/// it finishes, leaves what an uninterrupted run leaves: each row on the
/// same shard with the same seq, due time and attempts. After each kill the directory is the old one, sound and
/// whole, or refused as unfinished, or the new one, sound and whole. Each
/// case starts from its own copy of the directory.
#[test]
fn a_reshard_killed_at_any_instant_and_run_again_ends_as_an_uninterrupted_one() {
    let dir = tempfile::tempdir().unwrap();
    let pristine = dir.path().join("pristine");
    let hooks = 20_000;
    let engine = waiting_hooks(&pristine, 2, 8, hooks);
    // Every row waits out its ten-minute backoff: none is claimed, so a
    // reshard keeps each one's due time.
    engine.tick().unwrap();
    drop(engine);
    let copy = |name: &str| {
        let to = dir.path().join(name);
        let cp = Command::new("cp")
            .arg("-a")
            .arg(&pristine)
            .arg(&to)
            .status();
        assert!(cp.unwrap().success(), "copied to {name}");
        to
    };
    let uninterrupted = copy("uninterrupted");
    let run_time = reshard_whole(&uninterrupted);
    let expected = stored_rows(&uninterrupted);
    assert_eq!(expected.len(), hooks);

    let cases: [(&str, &[Kill]); 8] = [
        ("starting", &[Kill::After(Duration::ZERO)]),
        ("copying", &[Kill::OnceThere("resharding")]),
        ("a-quarter", &[Kill::After(run_time / 4)]),
        ("a-half", &[Kill::After(run_time / 2)]),
        ("marked", &[Kill::OnceThere(MARKER)]),
        ("moving", &[Kill::OnceThere("before-reshard/shard-1")]),
        ("moved", &[Kill::OnceGone(MARKER)]),
        (
            "twice",
            &[Kill::After(run_time / 3), Kill::OnceThere(MARKER)],
        ),
    ];
    let mut kills = 0;
    for (name, instants) in cases {
        let data = copy(name);
        let mut left = Left::Old;
        for &kill in instants {
            left = match reshard_killed(&data, kill) {
                true => {
                    kills += 1;
                    left_by(&data, hooks as u64, kill)
                }
                false => Left::New,
            };
            if left == Left::New {
                break;
            }
        }
        if left != Left::New {
            reshard_whole(&data);
        }
        assert_eq!(stored_rows(&data), expected, "{name}");
    }
    // A run may end before a timed instant, or before the spinning loop
    // sees a path come or go: most are killed all the same.
    assert!(kills >= 7, "{kills} of 9 runs killed: too few to tell");
}
