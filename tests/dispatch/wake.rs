//! Waking a sink whose receiver is back: its backlog is delivered now, not
//! after its backoffs and its breaker's open period; no other sink's rows
//! move. Turning breakers off runs what they kept back.

use super::*;
use goad::core::BreakerState;
use goad::{SinkWoken, WakeError};
use std::sync::atomic::AtomicU16;

/// Sources `a` and `b` of tenant `t`, each delivering to its receiver,
/// with `breaker_failures = 2` and `waits_of_ten_minutes`.
fn two_sinks(dir: &std::path::Path, receivers: [&Receiver; 2]) -> goad::Config {
    let mut c = config(dir);
    waits_of_ten_minutes(&mut c, 2);
    for (id, receiver) in ["a", "b"].iter().zip(receivers) {
        let sink = SinkConfig::http(receiver.url("/"));
        c.sources.push(source(id, "t", vec![sink]));
    }
    c
}

/// Sources `a` and `b` each deliver to a receiver that answers 503: with
/// `breaker_failures = 2` (and `waits_of_ten_minutes`), each sink's first
/// two attempts fail and its breaker opens, leaving its five hooks' rows
/// backing off, parked or held.
fn two_sinks_down(dir: &std::path::Path) -> (Engine, [Receiver; 2], [Arc<AtomicU16>; 2]) {
    let (a, a_status) = switchable(503);
    let (b, b_status) = switchable(503);
    let engine = Engine::open(two_sinks(dir, [&a, &b])).unwrap();
    for source in ["a", "b"] {
        for n in 0..5 {
            engine.commit(NewHook::new(source, format!("{n}"))).unwrap();
        }
    }
    wait_until(
        "both breakers open, nothing running",
        Duration::from_secs(10),
        || {
            let sinks = engine.sink_stats().unwrap();
            sinks.iter().all(|s| {
                matches!(s.breaker, BreakerState::Open { .. }) && s.running == 0 && s.queued == 0
            })
        },
    );
    (engine, [a, b], [a_status, b_status])
}

/// Once `a`'s receiver is back, waking its sink closes its breaker and
/// makes its rows due: the two that failed (attempted once) and the one
/// parked to be the probe are counted, the two held behind the breaker are
/// woken with them, and all five are delivered at once, attempts kept.
/// `b`, back too but not woken, keeps its breaker open and its rows.
#[test]
fn waking_a_sink_delivers_its_backlog_now_and_leaves_other_sinks_waiting() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, [a, b], statuses) = two_sinks_down(dir.path());
    assert_eq!((a.count(), b.count()), (2, 2), "two failed attempts each");
    for status in &statuses {
        status.store(200, Ordering::SeqCst);
    }
    let woken = engine.wake_sink("a", 0).unwrap();
    assert_eq!(
        woken,
        SinkWoken {
            woken: 3,
            breaker_closed: true
        }
    );
    assert!(
        a.wait_for(2 + 5, Duration::from_secs(10)),
        "a's 5 hooks delivered"
    );
    let mut attempts: Vec<String> = a.received()[2..]
        .iter()
        .map(|r| r.header("x-goad-attempt").unwrap().to_string())
        .collect();
    attempts.sort();
    assert_eq!(attempts, ["1", "1", "1", "2", "2"]);
    wait_until("a's hooks gone, b's kept", Duration::from_secs(10), || {
        engine.hook_count().unwrap() == 5
    });
    let sinks = engine.sink_stats().unwrap();
    assert_eq!(sinks[0].breaker, BreakerState::Closed);
    assert!(matches!(sinks[1].breaker, BreakerState::Open { .. }));
    assert_eq!(b.count(), 2, "b's rows wait out its open breaker");

    let again = engine.wake_sink("a", 0).unwrap();
    assert_eq!(
        again,
        SinkWoken {
            woken: 0,
            breaker_closed: false
        }
    );
}

/// A wake names a configured sink that is not paused; otherwise it says
/// what is wrong and moves nothing.
#[test]
fn waking_an_unknown_or_paused_sink_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    let mut paused = SinkConfig::http("http://127.0.0.1:9/");
    paused.paused = true;
    c.sources.push(source("a", "t", vec![paused]));
    let engine = Engine::open(c).unwrap();
    let refused = |source, index| engine.wake_sink(source, index).unwrap_err();
    assert!(matches!(refused("nope", 0), WakeError::UnknownSource(_)));
    assert_eq!(
        refused("nope", 0).to_string(),
        "no source \"nope\" is configured"
    );
    assert_eq!(
        refused("a", 1).to_string(),
        "source \"a\" has no sink at index 1"
    );
    assert_eq!(
        refused("a", 0).to_string(),
        "sink 0 of source \"a\" is paused: its rows are held until a reload resumes it (paused = false)"
    );
}

/// A reload that turns breakers off runs what the breakers kept back,
/// where before the rows they parked waited out the ten minutes of the
/// open period: each sink's row parked to be the probe and its two held
/// rows are delivered at once, first attempts all; the two that failed
/// keep waiting out their backoff (a retry's, not a breaker's).
#[test]
fn turning_breakers_off_delivers_the_rows_they_kept_back_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, receivers, statuses) = two_sinks_down(dir.path());
    for status in &statuses {
        status.store(200, Ordering::SeqCst);
    }
    let mut c = config(dir.path());
    waits_of_ten_minutes(&mut c, 0);
    for (id, receiver) in ["a", "b"].iter().zip(&receivers) {
        let sink = SinkConfig::http(receiver.url("/"));
        c.sources.push(source(id, "t", vec![sink]));
    }
    engine.reconfigure(&c).unwrap();
    for receiver in &receivers {
        assert!(receiver.wait_for(2 + 3, Duration::from_secs(10)));
        let attempts: Vec<_> = (receiver.received()[2..].iter())
            .map(|r| r.header("x-goad-attempt").unwrap().to_string())
            .collect();
        assert_eq!(attempts, ["1", "1", "1"]);
    }
    wait_until(
        "the six delivered hooks gone",
        Duration::from_secs(10),
        || engine.hook_count().unwrap() == 4,
    );
    let sinks = engine.sink_stats().unwrap();
    assert!(sinks.iter().all(|s| s.breaker == BreakerState::Closed));
    let waiting: Vec<u32> = rows(&engine).iter().map(|r| r.record.attempts).collect();
    assert_eq!(waiting, [1; 4], "the failed rows still back off");
}

/// Stops `engine` and leaves its store as a lost write leaves it: the two
/// breakers it kept open deleted, and `change` made to `meta` in the same
/// transaction.
fn stopped_with_breakers_forgotten(
    engine: Engine,
    dir: &std::path::Path,
    change: impl FnOnce(&heed::Database<heed::types::Bytes, heed::types::Bytes>, &mut heed::RwTxn),
) {
    engine.shutdown();
    drop(engine);
    let store = goad::store::ShardStore::open(dir, 0, 1).unwrap();
    let meta = tree(&store, "meta");
    let mut wtxn = store.env().write_txn().unwrap();
    let breakers: Vec<Vec<u8>> = (meta.prefix_iter(&wtxn, b"breaker/").unwrap())
        .map(|entry| entry.unwrap().0.to_vec())
        .collect();
    assert_eq!(breakers.len(), 2, "both breakers kept open");
    for key in &breakers {
        meta.delete(&mut wtxn, key).unwrap();
    }
    change(&meta, &mut wtxn);
    wtxn.commit().unwrap();
}

/// With both receivers back, an engine opened with `config` delivers each
/// sink's probe-parked and held rows at once (after its two failed
/// attempts); then it stops, and the store's `meta` entry `name` is read.
fn parked_rows_delivered_at_once(
    config: goad::Config,
    receivers: &[Receiver; 2],
    statuses: &[Arc<AtomicU16>; 2],
    name: &str,
) -> Option<Vec<u8>> {
    let dir = config.data_dir.clone();
    for status in statuses {
        status.store(200, Ordering::SeqCst);
    }
    let engine = Engine::open(config).unwrap();
    for receiver in receivers {
        assert!(receiver.wait_for(2 + 3, Duration::from_secs(10)));
    }
    wait_until(
        "the six delivered hooks gone",
        Duration::from_secs(10),
        || engine.hook_count().unwrap() == 4,
    );
    engine.shutdown();
    drop(engine);
    let store = goad::store::ShardStore::open(&dir, 0, 1).unwrap();
    let rtxn = store.env().read_txn().unwrap();
    let value = tree(&store, "meta").get(&rtxn, name.as_bytes()).unwrap();
    value.map(<[u8]>::to_vec)
}

/// A node that dies while it unparks takes the pass up when it opens
/// again, as its store keeps it under way. The store is left as a reload
/// that turned breakers off leaves it once its own writes are synced and
/// before its pass's: both breakers forgotten, unparking under way, each
/// sink's row parked to be its probe still parked. The next open, with
/// breakers on again and the receivers back, delivers those rows at once
/// with the held ones (without the pass they would wait out the ten
/// minutes), and ends the pass.
#[test]
fn an_open_takes_up_unparking_that_a_crash_cut_short() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, receivers, statuses) = two_sinks_down(dir.path());
    stopped_with_breakers_forgotten(engine, dir.path(), |meta, wtxn| {
        meta.put(wtxn, b"unparking", &1u64.to_be_bytes()).unwrap();
    });
    let config = two_sinks(dir.path(), [&receivers[0], &receivers[1]]);
    let unparking = parked_rows_delivered_at_once(config, &receivers, &statuses, "unparking");
    assert_eq!(unparking, None);
}

/// A node opened with breakers off unparks every row its store says may
/// be parked, although no breaker and no unparking is kept: the store is
/// left as a reload turning breakers off leaves it when the shard is
/// rebuilt (or the process dies) before the reload's writes are synced,
/// after both breakers had closed (their entries gone) with each sink's
/// probe-parked row still parked. The next open delivers those rows at
/// once with the held ones (without the store's `parked` they would wait
/// out the ten minutes), and the store then says no row is parked.
#[test]
fn an_open_with_breakers_off_unparks_rows_its_store_says_may_be_parked() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, receivers, statuses) = two_sinks_down(dir.path());
    stopped_with_breakers_forgotten(engine, dir.path(), |meta, wtxn| {
        assert!(meta.get(wtxn, b"parked").unwrap().is_some(), "parks kept");
        assert_eq!(meta.get(wtxn, b"unparking").unwrap(), None);
    });
    let mut config = two_sinks(dir.path(), [&receivers[0], &receivers[1]]);
    config.dispatch.breaker_failures = 0;
    let parked = parked_rows_delivered_at_once(config, &receivers, &statuses, "parked");
    assert_eq!(parked, None);
}

/// A config with each wait at its largest (a 30-day backoff and dedupe
/// window, open periods of a day, attempts of an hour) and every limit
/// without a bound at
/// u64::MAX runs: a hook whose first attempt fails is due again exactly
/// 30 days after its failure -- across a reopen too, where a row due
/// past `HELD_DUE_MS` would have been taken for a held one and made due at
/// once -- and a wake delivers it.
#[test]
fn a_config_at_its_largest_limits_delivers_and_a_30_day_backoff_waits_across_a_reopen() {
    use goad::limits::{
        MAX_ATTEMPT_TIMEOUT_MS, MAX_BREAKER_OPEN_MS, MAX_DEDUPE_WINDOW_MS, MAX_RETRY_DELAY_MS,
    };
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.retry.base_ms = MAX_RETRY_DELAY_MS;
    c.retry.max_ms = MAX_RETRY_DELAY_MS;
    c.retry.max_attempts = u32::MAX;
    c.retry.max_elapsed_ms = u64::MAX;
    c.dispatch.attempt_timeout_ms = MAX_ATTEMPT_TIMEOUT_MS;
    c.dispatch.breaker_open_ms = MAX_BREAKER_OPEN_MS;
    c.dispatch.breaker_max_open_ms = MAX_BREAKER_OPEN_MS;
    c.dispatch.max_inflight = u32::MAX;
    c.dispatch.max_inflight_bytes = u64::MAX;
    c.dead_letters.retention_ms = u64::MAX;
    c.replay.retention_ms = u64::MAX;
    c.claim_check.retention_ms = u64::MAX;
    let mut s = source_of_kinds("s", "t", &["second"]);
    s.dedupe_header = Some("x-id".into());
    s.dedupe_window_ms = Some(MAX_DEDUPE_WINDOW_MS);
    c.sources.push(s);
    let open = || {
        let second_time_lucky = sink(|d| match d.attempt {
            1 => Err(SinkError::transient("not yet")),
            _ => Ok(()),
        });
        (Engine::builder(c.clone()).sink("second", second_time_lucky)).open()
    };
    let engine = open().unwrap();
    let mut hook = NewHook::new("s", "x");
    hook.headers.push(("x-id".into(), "1".into()));
    let before_ms = goad::runtime::wall_ms();
    engine.commit(hook).unwrap();
    engine.tick().unwrap();
    let after_ms = goad::runtime::wall_ms();
    let due_ms = |engine: &Engine| {
        let rows = engine.rows().unwrap();
        assert_eq!(rows.len(), 1);
        let record = &rows[0].record;
        assert_eq!(record.attempts, 1);
        record.at_ms
    };
    let due = due_ms(&engine);
    let waited = before_ms + MAX_RETRY_DELAY_MS..=after_ms + MAX_RETRY_DELAY_MS;
    assert!(waited.contains(&due), "due at {due}, not in {waited:?}");
    drop(engine);

    let engine = open().unwrap();
    engine.tick().unwrap();
    assert_eq!(due_ms(&engine), due, "still waiting out its backoff");
    let woken = engine.wake_sink("s", 0).unwrap();
    assert_eq!(woken.woken, 1);
    engine.tick().unwrap();
    assert_eq!(engine.hook_count().unwrap(), 0, "delivered");
}
