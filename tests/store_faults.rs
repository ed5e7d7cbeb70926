//! A shard over a store with broken records: a corrupt row or hook is
//! dead-lettered and the shard delivers the rest (a hook's status shows it
//! undecodable meanwhile), index entries that do not
//! decode are set aside or rebuilt from their rows' records, and a store
//! failure that persists is retried once a second, not in a busy loop. The
//! records are broken by writing bytes into a real LMDB environment.

mod common;

use common::*;
use goad::core::{Catalog, Core, JobId};
use goad::demo::receiver::{Receiver, Reply};
use goad::runtime::coordinator::global_grant;
use goad::runtime::{NewRows, ShardState};
use goad::store::keys::{hook_key, parse_inflight_value, row_key};
use goad::store::{DeadFilter, Hook, NewRow, ShardStore};
use goad::{Config, Engine};
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::time::Duration;

const NOW_MS: u64 = 1_700_000_000_000;

/// A shard over the store of `config`, opened at `now_ms`.
fn shard<'s>(config: &Config, store: &'s ShardStore, now_ms: u64) -> ShardState<'s> {
    let core = Core::new(
        config.dispatch.clone(),
        config.retry,
        Arc::new(Catalog::from_config(config)),
        global_grant(&config.dispatch),
        now_ms,
        1,
        1,
    );
    ShardState::open(store, core, now_ms).unwrap()
}

/// Commits hooks "h1".."hN" of source `s` in one step of a shard that then
/// goes away: their attempts were claimed but never ran, so the next open
/// makes them due again.
fn leave_claimed_hooks(config: &Config, store: &ShardStore, n: u64) {
    let mut state = shard(config, store, NOW_MS);
    commit_hooks(&mut state, NOW_MS, n);
}

/// A config whose sink is unreachable, and its shard's store (open) holding
/// one hook "h1" whose row was claimed when its shard went away.
fn one_claimed_hook(dir: &std::path::Path) -> (Config, ShardStore) {
    let c = config_with_http_sink(dir, "http://127.0.0.1:9/");
    let store = ShardStore::open(dir, 0, 1).unwrap();
    leave_claimed_hooks(&c, &store, 1);
    (c, store)
}

/// Hook "h<i>" of source `s` (tenant `t`), to commit.
fn new_rows(i: u64) -> NewRows {
    NewRows {
        hook: Hook {
            id: format!("h{i}"),
            seq: 0,
            tenant: Arc::from("t"),
            source_id: Arc::from("s"),
            received_at_ms: NOW_MS,
            content_type: None,
            dedupe_key: None,
            headers: Vec::new(),
            body: format!("body {i}").into_bytes(),
        },
        rows: vec![NewRow::unordered(0, "http")],
        places: None,
        dedupe_window_ms: 0,
    }
}

/// Commits hooks "h1".."hN" of source `s` in one step.
fn commit_hooks(state: &mut ShardState, now_ms: u64, n: u64) {
    let commits = (1..=n).map(new_rows).collect();
    let out = state.step(now_ms, commits, Vec::new(), &mut |_job| {});
    assert_eq!(out.committed.unwrap().unwrap(), vec![None; n as usize]);
}

/// The row of hook seq `seq` for its one sink.
fn row(seq: u64) -> goad::core::RowId {
    goad::core::RowId { seq, sink_index: 0 }
}

/// The keys of one of the store's named trees, in order.
fn tree_keys(store: &ShardStore, name: &str) -> Vec<Vec<u8>> {
    let tree = tree(store, name);
    let rtxn = store.env().read_txn().unwrap();
    let keys = tree.iter(&rtxn).unwrap();
    keys.map(|e| e.unwrap().0.to_vec()).collect()
}

/// Overwrites the values of `keys` in the tree `name` (hooks and rows
/// share `records`) with `bytes`.
fn overwrite(store: &ShardStore, name: &str, keys: &[&[u8]], bytes: &[u8]) {
    let tree = tree(store, name);
    let mut wtxn = store.env().write_txn().unwrap();
    for key in keys {
        tree.put(&mut wtxn, key, bytes).unwrap();
    }
    wtxn.commit().unwrap();
}

/// A due or dead key one byte short: tenant 0, at NOW_MS, then 9 bytes
/// where a row id takes 10. It sorts inside tenant 0's range.
fn short_timed_key() -> Vec<u8> {
    let mut key = vec![0u8; 4];
    key.extend_from_slice(&NOW_MS.to_be_bytes());
    key.extend_from_slice(&[0; 9]);
    key
}

/// Scenario 34: the hook of seq 2 and the row of seq 3 no longer decode:
/// both rows are listed as dead letters with the reason (the bytes kept),
/// a replay moves neither and keeps them, the other hooks are delivered,
/// and the store never failed.
#[test]
fn a_corrupt_row_or_hook_is_dead_lettered_and_the_shard_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let c = config_with_http_sink(dir.path(), &receiver.url("/hooks"));
    {
        let store = ShardStore::open(dir.path(), 0, 1).unwrap();
        leave_claimed_hooks(&c, &store, 4);
        let row_3 = row_key(goad::core::RowId {
            seq: 3,
            sink_index: 0,
        });
        overwrite(&store, "records", &[&hook_key(2), &row_3], b"not a record");
    }
    let found = goad::store::verify_data_dir(dir.path(), 1).unwrap();
    // Hook 2's 41 bytes were counted when it was committed.
    let corruption = |counted: u64| {
        vec![
            "hook 2 does not decode".to_string(),
            "row seq 3 sink 0 does not decode".to_string(),
            format!("tenant \"t\" (number 0) counts {counted} stored bytes, but its hooks hold {} (1 hooks that do not decode may hold the difference)", counted - 41),
        ]
    };
    assert_eq!(
        (found[0].hooks, found[0].in_flight, &found[0].problems),
        (4, 4, &corruption(4 * 41))
    );
    let engine = Engine::open(c).unwrap();
    engine.tick_within(Duration::from_secs(30)).unwrap();
    let mut bodies: Vec<Vec<u8>> = receiver.received().into_iter().map(|r| r.body).collect();
    bodies.sort();
    assert_eq!(bodies, vec![b"body 1".to_vec(), b"body 4".to_vec()]);
    let mut dead: Vec<(u64, String, String)> = engine
        .dead_letters(&DeadFilter::default(), None, 10)
        .unwrap()
        .into_iter()
        .map(|d| (d.position.row.seq, d.hook_id, d.reason))
        .collect();
    dead.sort();
    assert_eq!(
        dead,
        vec![
            // The row is fine: it names why; its hook's id is unreadable.
            (2, String::new(), "undecodable hook record".to_string()),
            // The row itself is unreadable; its hook is fine.
            (3, "h3".to_string(), "undecodable delivery row".to_string()),
        ]
    );
    let stats = engine.stats()[0];
    assert_eq!(
        (stats.core.delivered, stats.core.dead, stats.store_failures),
        (2, 2, 0)
    );
    assert_eq!(engine.replay(&DeadFilter::default()).unwrap().moved, 0);
    let listed = engine.dead_letters(&DeadFilter::default(), None, 10);
    assert_eq!(listed.unwrap().len(), 2, "kept after the replay");
    drop(engine);
    // Both rows are dead letters now, in the dead index; the bytes that do
    // not decode are still there, and still reported.
    let found = goad::store::verify_data_dir(dir.path(), 1).unwrap();
    assert_eq!(
        (
            found[0].hooks,
            found[0].due,
            found[0].in_flight,
            found[0].dead
        ),
        (2, 0, 0, 2)
    );
    assert_eq!(found[0].problems, corruption(2 * 41));
    // A purge is how an operator drops them: with their bytes.
    let engine = Engine::open(config_with_http_sink(dir.path(), &receiver.url("/hooks"))).unwrap();
    assert_eq!(
        engine.purge_dead_letters(&DeadFilter::default()).unwrap(),
        2
    );
    drop(engine);
    let found = goad::store::verify_data_dir(dir.path(), 1).unwrap();
    assert_eq!((found[0].hooks, found[0].dead), (0, 0));
    assert_eq!(found[0].problems, Vec::<String>::new());
}

/// A dead key of the wrong length names no row: listings and replays step
/// over it (they used to panic on it) and `goad verify` reports it.
#[test]
fn a_dead_key_of_the_wrong_length_is_skipped_by_listings_and_replays() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|_| Reply::status(410)).unwrap();
    let c = config_with_http_sink(dir.path(), &receiver.url("/hooks"));
    let engine = Engine::open(c.clone()).unwrap();
    engine.commit(goad::NewHook::new("s", "gone")).unwrap();
    engine.tick_within(Duration::from_secs(30)).unwrap();
    drop(engine);
    {
        let store = ShardStore::open(dir.path(), 0, 1).unwrap();
        overwrite(&store, "dead", &[&short_timed_key()], b"");
    }
    let found = goad::store::verify_data_dir(dir.path(), 1).unwrap();
    assert_eq!(found[0].problems, ["a dead key of 21 bytes"]);
    let engine = Engine::open(c).unwrap();
    let listed = engine
        .dead_letters(&DeadFilter::default(), None, 10)
        .unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].reason, "sink http: permanent: HTTP status 410");
    assert_eq!(engine.replay(&DeadFilter::default()).unwrap().moved, 1);
    engine.tick_within(Duration::from_secs(30)).unwrap();
    assert_eq!(
        receiver.count(),
        2,
        "the first attempt and the replayed one"
    );
}

/// A write that fails (here: a tenant id longer than LMDB takes as a
/// key, which config validation would refuse) rebuilds the shard from its
/// store, and it does not scan again until a second later: a failure that
/// persists is retried once a second, not in a busy loop.
#[test]
fn after_a_store_failure_the_shard_scans_again_a_second_later() {
    let dir = tempfile::tempdir().unwrap();
    let (c, store) = one_claimed_hook(dir.path());
    // Reopened, the claimed row is due again.
    let mut state = shard(&c, &store, NOW_MS + 1);
    let t = NOW_MS + 10;
    let mut started = Vec::new();
    let out = state.step(t, unwritable(), Vec::new(), &mut |call| {
        started.extend(call.jobs().iter().map(|job| job.row.seq))
    });
    assert!(matches!(out.committed, Some(Err(_))), "{:?}", out.committed);
    assert_eq!(
        (state.store_failures, state.poll_deadline(t)),
        (1, Some(t + 1_000))
    );
    // The store was read back at once: the node stays ready.
    assert!(!state.is_store_failing());
    let mut step = |now_ms| {
        state.step(now_ms, Vec::new(), Vec::new(), &mut |call| {
            started.extend(call.jobs().iter().map(|job| job.row.seq))
        });
        (state.store_failures, state.poll_deadline(now_ms))
    };
    assert_eq!(step(t + 500), (1, Some(t + 1_000)), "held off");
    let (failures, _) = step(t + 1_000);
    assert_eq!((failures, started), (1, vec![1]), "scanned again, once");
}

/// The (seq, job) of each attempt one step of `state` starts.
fn started_by(
    state: &mut ShardState,
    now_ms: u64,
    outcomes: Vec<goad::runtime::Completion>,
) -> Vec<(u64, JobId)> {
    let mut started = Vec::new();
    state.step(now_ms, Vec::new(), outcomes, &mut |call| {
        started.extend(call.jobs().iter().map(|job| (job.row.seq, job.id)))
    });
    started
}

/// Commits hooks "h1".."h<n>" in one step at `now_ms`; the (seq, job) of
/// each attempt it starts.
fn started_by_commit(state: &mut ShardState, now_ms: u64, n: u64) -> Vec<(u64, JobId)> {
    let mut started = Vec::new();
    let out = state.step(
        now_ms,
        (1..=n).map(new_rows).collect(),
        Vec::new(),
        &mut |call| started.extend(call.jobs().iter().map(|job| (job.row.seq, job.id))),
    );
    assert!(matches!(out.committed, Some(Ok(_))), "{:?}", out.committed);
    started
}

/// The value of `key` in tree `name`, which holds it.
fn tree_value(store: &ShardStore, name: &str, key: &[u8]) -> Vec<u8> {
    let rtxn = store.env().read_txn().unwrap();
    tree(store, name).get(&rtxn, key).unwrap().unwrap().to_vec()
}

/// Hooks 1 and 2 committed on `state`, their attempts started and left
/// running, then hook 1's record and in-flight marker broken so that no
/// recovery can be written until `Broken::mend`: the two attempts' jobs.
fn two_running_then_broken(state: &mut ShardState, store: &ShardStore) -> (JobId, JobId, Broken) {
    let mut started = started_by_commit(state, NOW_MS, 2);
    // The claims are written with the next step's batch.
    state.step(NOW_MS + 20, Vec::new(), Vec::new(), &mut |_| {});
    started.sort();
    let [(1, first), (2, second)] = started[..] else {
        panic!("both rows started: {started:?}");
    };
    assert_eq!(tree_keys(store, "inflight").len(), 2);
    let broken = Broken {
        hook: tree_value(store, "records", &hook_key(1)),
        marker: tree_value(store, "inflight", &row_key(row(1))),
    };
    break_marker_and_hook(store);
    (first, second, broken)
}

/// What `two_running_then_broken` broke, as it was.
struct Broken {
    hook: Vec<u8>,
    marker: Vec<u8>,
}

impl Broken {
    fn mend(&self, store: &ShardStore) {
        overwrite(store, "records", &[&hook_key(1)], &self.hook);
        overwrite(store, "inflight", &[&row_key(row(1))], &self.marker);
    }
}

/// A commit no store takes: a tenant id longer than LMDB takes as a key.
fn unwritable() -> Vec<NewRows> {
    let mut rows = new_rows(3);
    rows.hook.tenant = Arc::from("t".repeat(600));
    vec![rows]
}

/// Successful results of `jobs`.
fn delivered(jobs: &[JobId]) -> Vec<goad::runtime::Completion> {
    jobs.iter()
        .map(|&job| goad::runtime::Completion {
            job,
            result: Ok(()),
            took: Duration::from_millis(1),
        })
        .collect()
}

/// A store failure whose recovery cannot be written either (here: a
/// claimed row's marker and hook that do not decode, so recovery fails
/// until they are mended) is recovered a second later, not left undone:
/// nothing is claimed meanwhile, then the rows claimed in the store are
/// due again — the row whose old attempt ended meanwhile is delivered
/// again, the one whose attempt still runs is held for it — and both
/// settle. (Recovery used to be tried once: the rows stayed claimed in the
/// store, never delivered, until the process restarted.)
#[test]
fn a_recovery_that_cannot_be_written_after_a_store_failure_is_tried_again() {
    let dir = tempfile::tempdir().unwrap();
    let c = config_with_http_sink(dir.path(), "http://127.0.0.1:9/");
    let store = ShardStore::open(dir.path(), 0, 1).unwrap();
    let mut state = shard(&c, &store, NOW_MS);
    let (first, second, broken) = two_running_then_broken(&mut state, &store);
    let t = NOW_MS + 100;
    let out = state.step(t, unwritable(), Vec::new(), &mut |_| {});
    assert!(matches!(out.committed, Some(Err(_))));
    assert_eq!(state.poll_deadline(t), Some(t + 1_000), "tried again then");
    assert!(state.is_store_failing(), "as /readyz says");
    broken.mend(&store);
    // Hook 1's old attempt ends before its row is held: not counted.
    let claimed = started_by(&mut state, t + 500, delivered(&[first]));
    assert!(claimed.is_empty(), "nothing claimed before the recovery");
    assert!(!state.is_idle(t + 500));

    let again = started_by(&mut state, t + 1_000, Vec::new());
    let [(1, again)] = again[..] else {
        panic!("hook 1 again, hook 2's attempt still running: {again:?}");
    };
    assert!(!state.is_store_failing());
    started_by(&mut state, t + 1_010, delivered(&[second, again]));
    started_by(&mut state, t + 1_100, Vec::new());
    assert_eq!(store.hook_count().unwrap(), 0, "both delivered");
    assert_eq!(state.core().stats().delivered, 2);
    assert!(state.is_idle(t + 1_100));
}

/// A second store failure before the first one's recovery is written
/// still holds the rows of the attempts that were running at the first:
/// once the store mends, neither row starts again beside its attempt, and
/// the attempts' results settle both. (The second rebuild used to forget
/// them: both rows started again while their first attempts ran.)
#[test]
fn a_second_store_failure_before_the_recovery_keeps_the_running_attempts_held() {
    let dir = tempfile::tempdir().unwrap();
    let c = config_with_http_sink(dir.path(), "http://127.0.0.1:9/");
    let store = ShardStore::open(dir.path(), 0, 1).unwrap();
    let mut state = shard(&c, &store, NOW_MS);
    let (first, second, broken) = two_running_then_broken(&mut state, &store);
    let t = NOW_MS + 100;
    for failed_at_ms in [t, t + 500] {
        let out = state.step(failed_at_ms, unwritable(), Vec::new(), &mut |_| {});
        assert!(matches!(out.committed, Some(Err(_))), "{:?}", out.committed);
    }
    assert_eq!(state.store_failures, 2);
    broken.mend(&store);

    let recovered_at_ms = t + 1_500;
    let again = started_by(&mut state, recovered_at_ms, Vec::new());
    assert!(
        again.is_empty(),
        "rows started beside their attempts: {again:?}"
    );
    started_by(
        &mut state,
        recovered_at_ms + 10,
        delivered(&[first, second]),
    );
    started_by(&mut state, recovered_at_ms + 100, Vec::new());
    assert_eq!(store.hook_count().unwrap(), 0, "both delivered");
    assert_eq!(state.core().stats().delivered, 2);
    assert!(state.is_idle(recovered_at_ms + 100));
}

/// Due entries that do not decode are set aside, not failed on: a due value
/// that is not a size is rewritten from its row's record, and the row is
/// delivered as before; a key of the wrong length names no row and is
/// deleted. The store never fails (it used to fail every scan of the shard
/// on either), and `goad verify` finds a sound store after.
#[test]
fn unreadable_due_entries_are_set_aside_and_the_shard_claims_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let c = config_with_http_sink(dir.path(), "http://127.0.0.1:9/");
    let store = ShardStore::open(dir.path(), 0, 1).unwrap();
    leave_claimed_hooks(&c, &store, 2);
    // Reopened, both claimed rows are due again; then row 1's due value
    // breaks and a short key appears in the tenant's range.
    let mut state = shard(&c, &store, NOW_MS + 1);
    let keys = tree_keys(&store, "due");
    assert_eq!(keys.len(), 2, "one due key per row");
    overwrite(&store, "due", &[&keys[0]], b"bad");
    overwrite(&store, "due", &[&short_timed_key()], &7u64.to_be_bytes());
    assert_eq!(
        store.verify().unwrap().problems,
        [
            "a due key of 21 bytes",
            "the due value of row seq 1 sink 0 is 3 bytes, not 8"
        ]
    );
    let t = NOW_MS + 10;
    let mut step = |now_ms| {
        let mut started = Vec::new();
        state.step(now_ms, Vec::new(), Vec::new(), &mut |call| {
            started.extend(call.jobs().iter().map(|job| job.row.seq))
        });
        started
    };
    assert_eq!(step(t), [2], "the readable row, at once");
    assert_eq!(step(t), [1], "the rewritten one, at the next scan");
    assert_eq!((state.store_failures, state.unreadable_due), (0, 2));
    state.flush().unwrap();
    assert!(tree_keys(&store, "due").is_empty(), "both rows claimed");
    let size_bytes = store.row(row(1)).unwrap().unwrap().size_bytes;
    let inflight = tree(&store, "inflight");
    let rtxn = store.env().read_txn().unwrap();
    let marker = inflight.get(&rtxn, &row_key(row(1))).unwrap().unwrap();
    assert_eq!(
        parse_inflight_value(marker).unwrap().1,
        size_bytes,
        "claimed with the size its record holds"
    );
    drop(rtxn);
    assert_eq!(store.verify().unwrap().problems, Vec::<String>::new());
}

/// A tenant number out of its dense sequence is a clear error at open (the
/// shard thread used to panic on it).
#[test]
fn a_corrupt_tenant_number_is_a_clear_error_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let c = {
        let (c, store) = one_claimed_hook(dir.path());
        overwrite(&store, "tenants", &[b"t"], &5u32.to_be_bytes());
        c
    };
    let err = Engine::open(c).err().expect("refused");
    assert_eq!(err.to_string(), "store: undecodable tenant record");
}

/// A store file cut short (a backup without its manifest, a disk that lost
/// its end) is refused at open with both sizes, by the engine and by
/// `verify`, instead of faulting the process (SIGBUS) at the first read of
/// a page past its end.
#[test]
fn a_store_file_cut_short_is_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let c = config_with_http_sink(dir.path(), "http://127.0.0.1:9/");
    drop(ShardStore::open(dir.path(), 0, 1).map(|store| leave_claimed_hooks(&c, &store, 200)));
    let file = ShardStore::dir(dir.path(), 0).join("data.mdb");
    let whole_bytes = std::fs::metadata(&file).unwrap().len();
    let cut_bytes = whole_bytes / 2;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&file)
        .unwrap()
        .set_len(cut_bytes)
        .unwrap();
    let refused = format!(
        "{} holds {cut_bytes} bytes but its last commit's pages end at byte {whole_bytes}: the file was cut short (a backup without its backup.json, a disk that lost its end); restore it from a whole backup",
        file.display()
    );
    refused_by_engine_and_verify(c, &refused);
}

/// The engine and `verify` both refuse `config`'s data directory, as
/// `refused` says.
fn refused_by_engine_and_verify(config: Config, refused: &str) {
    let (data_dir, shards) = (config.data_dir.clone(), config.shard_count());
    let err = Engine::open(config).err().expect("refused");
    assert_eq!(err.to_string(), refused);
    let err = goad::store::verify_data_dir(&data_dir, shards).expect_err("refused");
    assert_eq!(err.to_string(), refused);
}

/// A data directory that lost a shard's store (a copy or a backup cut
/// short, a shard's directory deleted) is refused at open, by the engine
/// and by `verify`, and left as it is: made anew, the store would be
/// empty, and the hooks it held lost without a word (both used to make it).
/// `verify` makes nothing where there is no data directory, or an empty
/// one (a mistyped path, a new directory).
#[test]
fn a_data_directory_that_lost_a_shards_store_is_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config_with_http_sink(dir.path(), "http://127.0.0.1:9/");
    c.shards = 2;
    for k in 0..2 {
        let store = ShardStore::open(dir.path(), k, 2).unwrap();
        leave_claimed_hooks(&c, &store, 3);
    }
    let lost = ShardStore::dir(dir.path(), 1);
    std::fs::remove_dir_all(&lost).unwrap();
    let refused = format!(
        "{} holds no store: shard 1 of the data directory's 2 is missing (a copy or a backup cut short, a shard's directory deleted); restore the whole data directory: an engine started without it would lose the hooks that shard held",
        lost.display()
    );
    refused_by_engine_and_verify(c, &refused);
    assert!(!lost.exists(), "the lost shard was made anew");
    let nowhere = dir.path().join("nowhere");
    let err = goad::store::verify_data_dir(&nowhere, 1).expect_err("refused");
    assert_eq!(
        err.to_string(),
        format!("store: {}: no data directory here", nowhere.display())
    );
    assert!(!nowhere.exists(), "verify made a data directory");
    let empty = tempfile::tempdir().unwrap();
    let err = goad::store::verify_data_dir(empty.path(), 2).expect_err("refused");
    assert_eq!(
        err.to_string(),
        format!(
            "store: {}: an empty directory: no node has run on it (is it the node's data_dir?)",
            empty.path().display()
        )
    );
    let made: Vec<_> = std::fs::read_dir(empty.path()).unwrap().collect();
    assert!(made.is_empty(), "verify made {made:?}");
}

/// Shard directories swapped (renamed, or mixed up in a restore) are
/// refused at open, by the engine and by `verify`: each store knows its
/// shard, and opened as another, its tenants' hooks would be served by
/// the shard their ids hash to and by this one (used to open).
#[test]
fn a_shards_store_in_another_shards_directory_is_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config_with_http_sink(dir.path(), "http://127.0.0.1:9/");
    c.shards = 2;
    drop(ShardStore::open_all(dir.path(), 2, c.max_shard_bytes).unwrap());
    let [zero, one] = [0, 1].map(|k| ShardStore::dir(dir.path(), k));
    let aside = dir.path().join("aside");
    std::fs::rename(&zero, &aside).unwrap();
    std::fs::rename(&one, &zero).unwrap();
    std::fs::rename(&aside, &one).unwrap();
    let refused = format!(
        "{} holds the store of shard 1, not of shard 0: the shard directories were renamed or mixed up; put each store back in its own shard's directory (shard-1 for this one)",
        zero.display()
    );
    refused_by_engine_and_verify(c, &refused);
}

/// Recovery reads past in-flight markers that do not decode (the engine
/// used to refuse to open on either): a marker whose value is broken is
/// rebuilt from its hook (the tenant) and row record (the size), and a
/// marker key that names no row is dropped. Only a broken marker whose hook
/// is broken too cannot be placed: the open fails with a clear error rather
/// than leave its row in no index.
#[test]
fn in_flight_markers_that_do_not_decode_are_recovered_from_their_records() {
    let marker = row_key(row(1));
    // A marker whose value does not decode, and one whose key is short.
    let corruptions: [(&[u8], &[u8]); 2] = [(&marker, b"bad"), (&marker[..9], &[0; 12])];
    for (key, value) in corruptions {
        let dir = tempfile::tempdir().unwrap();
        let (c, store) = one_claimed_hook(dir.path());
        overwrite(&store, "inflight", &[key], value);
        let state = shard(&c, &store, NOW_MS + 1);
        assert_eq!(state.recovered, 1, "{key:?}");
        drop(state);
        let size_bytes = store.row(row(1)).unwrap().unwrap().size_bytes;
        let due = tree(&store, "due");
        let rtxn = store.env().read_txn().unwrap();
        let values: Vec<Vec<u8>> = due
            .iter(&rtxn)
            .unwrap()
            .map(|e| e.unwrap().1.to_vec())
            .collect();
        assert_eq!(values, [size_bytes.to_be_bytes().to_vec()], "{key:?}");
        drop(rtxn);
        assert!(tree_keys(&store, "inflight").is_empty());
        assert_eq!(store.verify().unwrap().problems, Vec::<String>::new());
    }
    let dir = tempfile::tempdir().unwrap();
    let c = {
        let (c, store) = one_claimed_hook(dir.path());
        break_marker_and_hook(&store);
        c
    };
    let err = Engine::open(c).err().expect("refused");
    assert_eq!(
        err.to_string(),
        "store: undecodable in-flight marker record"
    );
}

/// Breaks the in-flight marker of hook 1's row and the hook: recovery
/// cannot tell the row's tenant, and the open fails.
fn break_marker_and_hook(store: &ShardStore) {
    overwrite(store, "inflight", &[&row_key(row(1))], b"bad");
    overwrite(store, "records", &[&hook_key(1)], b"bad");
}

/// The files of this process open under `dir`.
fn open_files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter(|target| target.starts_with(dir))
        .collect()
}

/// When one shard fails to open, the shards already started are stopped
/// before `open` returns: none keeps its store open or delivers rows from
/// it after the host was told the engine did not open (a host that opens
/// again would otherwise run two copies of that shard).
#[test]
fn a_shard_that_fails_to_open_stops_the_shards_started_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config_with_http_sink(dir.path(), "http://127.0.0.1:9/");
    c.shards = 2;
    drop(ShardStore::open(dir.path(), 0, 2).unwrap());
    {
        let store = ShardStore::open(dir.path(), 1, 2).unwrap();
        leave_claimed_hooks(&c, &store, 1);
        break_marker_and_hook(&store);
    }
    assert_eq!(
        open_files_under(dir.path()),
        Vec::<std::path::PathBuf>::new()
    );
    let err = Engine::open(c).err().expect("refused");
    assert_eq!(
        err.to_string(),
        "store: undecodable in-flight marker record"
    );
    assert_eq!(
        open_files_under(dir.path()),
        Vec::<std::path::PathBuf>::new(),
        "a shard's store stayed open after the engine failed to open"
    );
}

/// A store filled with hooks for a sink that is down refuses new hooks
/// (`StoreFull`) before its map runs out, so the writes that record
/// retries and deliveries still fit: once the sink is back every
/// acknowledged hook is delivered and recorded once, and the store takes
/// hooks again. (Filled to the map, it failed every batch after, the
/// outcomes of its deliveries too, and delivered the same rows forever.)
#[test]
fn a_full_store_refuses_new_hooks_and_still_records_every_delivery() {
    let dir = tempfile::tempdir().unwrap();
    let (receiver, status) = switchable(503);
    let mut c = config_with_http_sink(dir.path(), &receiver.url("/h"));
    c.max_shard_bytes = 16 << 20;
    c.retry.base_ms = 50;
    c.retry.max_ms = 200;
    c.retry.max_attempts = 10_000;
    let engine = Engine::open(c).unwrap();
    // Each hook's record in one 4 KiB page (LMDB's overflow page).
    let body = vec![b'x'; 3_000];
    let acked: Vec<String> = std::thread::scope(|s| {
        let committers: Vec<_> = (0..8)
            .map(|_| {
                s.spawn(|| {
                    let mut ids = Vec::new();
                    loop {
                        match engine.commit(goad::NewHook::new("s", body.clone())) {
                            Ok(id) => ids.push(id),
                            Err(goad::CommitError::StoreFull {
                                used_bytes,
                                limit_bytes,
                            }) => {
                                assert_eq!(limit_bytes, 14 << 20, "7/8 of max_shard_bytes");
                                assert!(used_bytes <= limit_bytes, "{used_bytes}");
                                return ids;
                            }
                            Err(e) => panic!("commit failed otherwise: {e}"),
                        }
                    }
                })
            })
            .collect();
        committers
            .into_iter()
            .flat_map(|c| c.join().unwrap())
            .collect()
    });
    // About 14 MiB of hooks of a page each were taken before the first
    // refusal.
    assert!((2_500..3_700).contains(&acked.len()), "{}", acked.len());
    status.store(200, SeqCst);
    wait_until("every hook delivered", Duration::from_secs(60), || {
        engine.hook_count().unwrap() == 0
    });
    let stats = &engine.stats()[0];
    assert_eq!(stats.store_failures, 0, "no write hit the map's end");
    assert_eq!(
        stats.core.delivered,
        acked.len() as u64,
        "each recorded once"
    );
    let mut delivered: Vec<String> = receiver
        .received()
        .iter()
        .filter(|r| r.status == 200)
        .map(|r| r.header("webhook-id").unwrap().to_string())
        .collect();
    delivered.sort_unstable();
    let mut acked = acked;
    acked.sort_unstable();
    assert_eq!(delivered, acked);
    engine.commit(goad::NewHook::new("s", body)).unwrap();
}

/// A hook whose row no longer decodes is still shown (`GET /v1/hooks/{id}`),
/// that sink's state `Undecodable`, where it was `InFlight` before.
#[test]
fn a_hook_whose_row_does_not_decode_shows_that_sink_as_undecodable() {
    let dir = tempfile::tempdir().unwrap();
    let (_config, store) = one_claimed_hook(dir.path());
    let states = |store: &ShardStore| {
        let status = store.hook_status(0, "h1").unwrap().expect("h1 is stored");
        assert_eq!(status.hook.body, b"body 1");
        status.sinks
    };
    let before = states(&store);
    assert_eq!(before.len(), 1);
    assert!(
        matches!(before[0].state, goad::SinkState::InFlight(_)),
        "{before:?}"
    );
    overwrite(&store, "records", &[&row_key(row(1))], b"not a record");
    let after = states(&store);
    assert_eq!(after.len(), 1);
    assert_eq!(after[0].sink_index, 0);
    assert!(
        matches!(after[0].state, goad::SinkState::Undecodable),
        "{after:?}"
    );
}
