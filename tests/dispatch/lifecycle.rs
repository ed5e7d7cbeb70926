//! An engine across stops and opens: rows left by a shutdown or a graceful
//! stop, a wall clock stepped back while stopped, sources removed while
//! stopped, the shard count and the one-engine lock of a data directory,
//! `tick`, a panicking commit callback, the commits refused at once.

use super::*;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// A committed hook survives a restart of the engine: rows not yet
/// delivered are delivered by the next engine on the same directory.
#[test]
fn rows_left_by_a_shutdown_are_delivered_after_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.sources.push(source_of_kinds("s", "t", &["later"]));
    let engine = Engine::builder(c.clone())
        .sink(
            "later",
            sink(|_| {
                Err(SinkError::retry_after(
                    3_600_000,
                    std::io::Error::other("not yet"),
                ))
            }),
        )
        .open()
        .unwrap();
    for _ in 0..3 {
        engine.commit(NewHook::new("s", "x")).unwrap();
    }
    engine.tick().unwrap();
    engine.shutdown();
    drop(engine);
    let (counting, delivered) = counting_sink();
    let engine = Engine::builder(c).sink("later", counting).open().unwrap();
    assert_eq!(rows(&engine).len(), 3, "three pending rows survived");
    assert!(rows(&engine)
        .iter()
        .all(|r| r.record.attempts == 1 && !r.in_flight));
    assert_eq!(delivered.load(Ordering::SeqCst), 0, "not due for an hour");
}

/// A wall clock stepped back while the engine was down holds no row: a
/// shard's clock starts where its store last wrote (`clock_ms` in its
/// meta, written with the writes) when the wall clock is behind that.
/// Here the store's clock is moved two hours on, as if the wall clock had
/// read two hours more when the engine stopped and was set back while it
/// was down: the row whose attempt asked to come back in an hour
/// (`Retry-After`) is due at once, where the wall clock alone would hold
/// it for that hour.
#[test]
fn a_wall_clock_stepped_back_while_stopped_holds_no_row() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.sources.push(source_of_kinds("s", "t", &["later"]));
    let in_an_hour = sink(|_| {
        let later = std::io::Error::other("not yet");
        Err(SinkError::retry_after(3_600_000, later))
    });
    let started_ms = goad::runtime::wall_ms();
    let engine = Engine::builder(c.clone())
        .sink("later", in_an_hour)
        .open()
        .unwrap();
    engine.commit(NewHook::new("s", "x")).unwrap();
    engine.tick().unwrap();
    engine.shutdown();
    drop(engine);
    let store = goad::store::ShardStore::open(dir.path(), 0, 1).unwrap();
    let meta = tree(&store, "meta");
    let mut wtxn = store.env().write_txn().unwrap();
    let stored = meta.get(&wtxn, b"clock_ms").unwrap().expect("written");
    let clock_ms = u64::from_be_bytes(stored.try_into().unwrap());
    let stopped_ms = goad::runtime::wall_ms();
    assert!((started_ms..=stopped_ms).contains(&clock_ms), "{clock_ms}");
    let stepped_ms = clock_ms + 7_200_000;
    meta.put(&mut wtxn, b"clock_ms", &stepped_ms.to_be_bytes())
        .unwrap();
    wtxn.commit().unwrap();
    drop(store);
    let (counting, delivered) = counting_sink();
    let engine = Engine::builder(c).sink("later", counting).open().unwrap();
    wait_until("the row delivered", Duration::from_secs(20), || {
        delivered.load(Ordering::SeqCst) == 1 && rows(&engine).is_empty()
    });
}

/// Scenario 13 (D7): sinks [tag, gate] with one attempt slot: tag is
/// delivered while gate holds its row; a graceful stop that outwaits its
/// grace leaves that row in flight; the next engine delivers it, does not
/// deliver tag's again, and reclaims the hook.
#[test]
fn a_row_in_flight_at_a_graceful_stop_is_delivered_after_it_and_no_other_again() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.dispatch.concurrency = 1;
    c.dispatch.sink_concurrency = 1;
    c.sources.push(source_of_kinds("s", "t", &["tag", "gate"]));
    let (tag, tagged) = counting_sink();
    let gate = gate();
    let engine = Engine::builder(c.clone())
        .sink("tag", tag)
        .sink("gate", gate.sink.clone())
        .open()
        .unwrap();
    engine.commit(NewHook::new("s", "x")).unwrap();
    wait_until(
        "tag delivered, gate holding",
        Duration::from_secs(5),
        || tagged.load(Ordering::SeqCst) == 1 && engine.stats()[0].core.running == 1,
    );
    engine.shutdown();
    drop(gate.open);
    drop(engine);
    let (tag_again, tagged_again) = counting_sink();
    let (gate_ok, gated) = counting_sink();
    let engine = Engine::builder(c)
        .sink("tag", tag_again)
        .sink("gate", gate_ok)
        .open()
        .unwrap();
    engine.tick().unwrap();
    assert_eq!(gated.load(Ordering::SeqCst), 1);
    assert_eq!(tagged_again.load(Ordering::SeqCst), 0);
    assert_eq!(engine.hook_count().unwrap(), 0);
}

/// Scenario 12: rows of a source removed from the config while the engine
/// was stopped are dead-lettered as `source_gone` once they come due, with
/// their attempts unchanged, and keep their hooks.
#[test]
fn rows_of_a_source_removed_while_stopped_are_dead_lettered_as_source_gone() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.sources.push(source_of_kinds("s", "t", &["later"]));
    let later = || sink(|_| Err(SinkError::retry_after(50, std::io::Error::other("not yet"))));
    let engine = Engine::builder(c.clone())
        .sink("later", later())
        .open()
        .unwrap();
    for _ in 0..2 {
        engine.commit(NewHook::new("s", "x")).unwrap();
    }
    wait_until("both rows tried", Duration::from_secs(10), || {
        rows(&engine).iter().all(|r| r.record.attempts >= 1)
    });
    engine.shutdown();
    let attempts =
        |engine: &Engine| -> Vec<u32> { rows(engine).iter().map(|r| r.record.attempts).collect() };
    let tried = attempts(&engine);
    drop(engine);
    c.sources = vec![source_of_kinds("other", "t", &["later"])].into();
    let engine = Engine::builder(c).sink("later", later()).open().unwrap();
    wait_until("both rows dead", Duration::from_secs(10), || {
        rows(&engine)
            .iter()
            .all(|r| r.record.status == RowStatus::Dead)
    });
    let dead = rows(&engine);
    assert_eq!(dead.len(), 2);
    assert!(
        dead.iter()
            .all(|r| r.record.error.as_deref() == Some("source_gone: s")),
        "{dead:?}"
    );
    assert_eq!(attempts(&engine), tried, "attempts unchanged");
    assert_eq!(
        engine.hook_count().unwrap(),
        2,
        "dead rows keep their hooks"
    );
}

/// A data directory made with one shard count refuses another.
#[test]
fn opening_a_data_directory_with_another_shard_count_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let c = config(dir.path());
    drop(Engine::open(c.clone()).unwrap());
    let err = Engine::open(goad::Config { shards: 2, ..c })
        .err()
        .expect("refused");
    assert!(
        err.to_string()
            .contains("was created with 1 shards but the config asks for 2"),
        "{err}"
    );
}

/// With `shards = 0` (one per core), a data directory opens with the
/// count it was made with, whatever the cores now: a node whose machine
/// gained or lost cores (a resized VM, a pod given another CPU limit)
/// opened none of its hooks ("created with 2 shards but the config asks
/// for 1"), though its config asked for no count. Its hooks are there.
#[test]
fn a_data_directory_made_one_per_core_opens_as_made_on_another_machine() {
    let dir = tempfile::tempdir().unwrap();
    let cores = std::thread::available_parallelism().unwrap().get();
    let mut c = goad::Config {
        shards: cores + 1,
        ..config(dir.path())
    };
    c.sources.push(source(
        "s",
        "acme",
        vec![SinkConfig::http("http://127.0.0.1:9/")],
    ));
    let engine = Engine::open(c.clone()).unwrap();
    engine.commit(NewHook::new("s", "kept")).unwrap();
    engine.shutdown();
    drop(engine);
    let engine = Engine::open(goad::Config { shards: 0, ..c }).unwrap();
    assert_eq!(engine.stats().len(), cores + 1);
    assert_eq!(engine.hook_count().unwrap(), 1);
}

/// A second engine on a data directory in use is refused with a message that
/// names the directory and the holder, and opens once the first is gone.
#[test]
fn a_data_directory_is_opened_by_one_engine_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let c = config_with_http_sink(dir.path(), &receiver.url("/"));
    let first = Engine::open(c.clone()).unwrap();
    first.commit(NewHook::new("s", "before")).unwrap();
    let err = Engine::open(c.clone()).err().expect("refused");
    assert_eq!(
        err.to_string(),
        format!(
            "{} is in use by another engine in this process: one engine at a time may open a data directory",
            dir.path().display()
        )
    );
    assert!(
        matches!(
            err,
            goad::OpenError::Store(goad::store::StoreError::InUse { holder_pid: Some(pid), .. })
                if pid == std::process::id()
        ),
        "{err:?}"
    );
    first.tick().unwrap();
    drop(first);
    let second = Engine::open(c).unwrap();
    second.commit(NewHook::new("s", "after")).unwrap();
    second.tick().unwrap();
    let bodies: Vec<Vec<u8>> = receiver.received().into_iter().map(|r| r.body).collect();
    assert_eq!(bodies, vec![b"before".to_vec(), b"after".to_vec()]);
}

/// `tick` counts the rows settled while it waits: three rows held by a gate
/// until the tick is waiting settle during the call. Asked to wait for
/// ever (`tick_within(Duration::MAX)`), it waits as long as that takes.
#[test]
fn tick_waits_for_claimed_rows_and_counts_those_settled_during_the_call() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.sources.push(source_of_kinds("s", "t", &["gate"]));
    let gate = gate();
    let engine = gated_engine(c, &gate);
    let open = gate.open;
    for _ in 0..3 {
        engine.commit(NewHook::new("s", "x")).unwrap();
    }
    wait_until(
        "three attempts held at the gate",
        Duration::from_secs(2),
        || engine.stats()[0].core.running == 3,
    );
    std::thread::scope(|scope| {
        let ticking = scope.spawn(|| engine.tick_within(Duration::MAX).unwrap());
        wait_until("the tick waiting", Duration::from_secs(2), || {
            engine.stats()[0].tick_waiters == 1
        });
        for _ in 0..3 {
            open.send(()).unwrap();
        }
        assert_eq!(ticking.join().unwrap(), 3);
    });
}

/// A host's `commit_then` callback runs on the shard thread; one that
/// panics is contained: its hook stays committed and is delivered, and the
/// shard goes on committing.
#[test]
fn a_panicking_commit_callback_does_not_stop_the_shard() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let c = config_with_http_sink(dir.path(), &receiver.url("/"));
    let engine = Engine::open(c).unwrap();
    engine
        .commit_then(NewHook::new("s", "first"), |_| panic!("a bug in the host"))
        .unwrap();
    engine.commit(NewHook::new("s", "second")).unwrap();
    engine.tick().unwrap();
    let mut bodies: Vec<Vec<u8>> = receiver.received().into_iter().map(|r| r.body).collect();
    bodies.sort();
    assert_eq!(bodies, vec![b"first".to_vec(), b"second".to_vec()]);
}

/// A committer that reads the stats once its commit returned sees it
/// counted (the shard publishes its counters before it answers), and its
/// duplicate too.
#[test]
fn a_commit_is_counted_in_the_stats_by_the_time_it_returns() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    let mut s = source_of_kinds("s", "t", &["gate"]);
    s.dedupe_window_ms = Some(60_000);
    c.sources.push(s);
    let gate = gate();
    let engine = gated_engine(c, &gate);
    for n in 1..=300u64 {
        let mut hook = NewHook::new("s", "x");
        hook.dedupe_key = Some(format!("k{}", n / 2));
        engine.commit(hook).unwrap();
        let stats = engine.stats()[0];
        assert_eq!(stats.commits + stats.duplicates, n, "after commit {n}");
    }
    drop(gate.open);
    engine.shutdown();
}

/// A commit the engine refuses at once stores nothing and says why, from
/// `commit`, from `commit_then` (whose callback is never called) and
/// from `commit_async` (resolved at its first poll): a
/// source not configured, a body over `max_body_bytes` (one of exactly
/// that size is taken), a stopped engine; a stopped engine's other calls
/// say it is stopped.
#[test]
fn a_commit_refused_at_once_stores_nothing_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.max_body_bytes = 1_000;
    c.sources.push(source_of_kinds("s", "t", &["gate"]));
    let gate = gate();
    let engine = gated_engine(c, &gate);
    let called = Arc::new(AtomicBool::new(false));
    let refusals = |hook: NewHook| {
        let then = called.clone();
        let refused = engine.commit_then(hook.clone(), move |_| then.store(true, Ordering::SeqCst));
        let mut awaited = engine.commit_async(hook.clone());
        let mut cx = Context::from_waker(Waker::noop());
        let Poll::Ready(awaited) = Pin::new(&mut awaited).poll(&mut cx) else {
            panic!("commit_async not refused at its first poll");
        };
        let (now, then) = (engine.commit(hook).unwrap_err(), refused.unwrap_err());
        assert_eq!(now.to_string(), then.to_string());
        assert_eq!(now.to_string(), awaited.unwrap_err().to_string());
        now.to_string()
    };
    assert_eq!(
        refusals(NewHook::new("nope", "x")),
        "no source \"nope\" is configured"
    );
    assert_eq!(
        refusals(NewHook::new("s", vec![b'x'; 1_001])),
        "body of 1001 bytes is over max_body_bytes (1000)"
    );
    assert_eq!(engine.hook_count().unwrap(), 0);
    engine.commit(NewHook::new("s", vec![b'x'; 1_000])).unwrap();
    assert_eq!(engine.hook_count().unwrap(), 1);
    drop(gate.open);
    engine.shutdown();
    assert_eq!(refusals(NewHook::new("s", "x")), "the engine is stopped");
    assert!(!called.load(Ordering::SeqCst), "no callback for a refusal");
    // The calls that ask the shards say so too.
    let stopped = "the dispatch engine is stopped";
    assert_eq!(engine.tick().unwrap_err().to_string(), stopped);
    assert_eq!(engine.pressure().unwrap_err().to_string(), stopped);
    assert_eq!(engine.sink_stats().unwrap_err().to_string(), stopped);
    assert_eq!(engine.tenant_stats().unwrap_err().to_string(), stopped);
    let dead_lettered = engine.dead_letter_source("s").unwrap_err();
    assert_eq!(dead_lettered.to_string(), stopped);
}
