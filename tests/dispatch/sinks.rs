//! What a sink's options do: concurrency caps and their reconfiguration,
//! breakers, rates, retry keys, filters and a host sink's inline limit.

use super::*;
use goad::core::BreakerState;
use parking_lot::Mutex;

/// Scenario 16: with four slots, two per key, twenty hooks to a sink that
/// takes ten seconds do not delay one hook to a fast source past a second.
#[test]
fn a_slow_sink_is_capped_by_sink_concurrency_and_a_fast_source_runs_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let arrivals = Arc::new(AtomicU32::new(0));
    let arrived = arrivals.clone();
    let slow = Receiver::start(move |_| {
        arrived.fetch_add(1, Ordering::SeqCst);
        Reply::status(200).delayed(Duration::from_secs(10))
    })
    .unwrap();
    let fast = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut c = config(dir.path());
    c.dispatch.concurrency = 4;
    c.dispatch.sink_concurrency = 2;
    c.dispatch.attempt_timeout_ms = 2_000;
    let mut slow_sink = SinkConfig::http(slow.url("/"));
    slow_sink.timeout_ms = Some(1_500);
    c.sources.push(source("slow", "t", vec![slow_sink]));
    c.sources
        .push(source("fast", "t", vec![SinkConfig::http(fast.url("/"))]));
    let engine = Engine::open(c).unwrap();
    for _ in 0..20 {
        engine.commit(NewHook::new("slow", "x")).unwrap();
    }
    // Started by the shard and arrived at the endpoint: both.
    wait_until("two slow attempts running", Duration::from_secs(2), || {
        engine.stats()[0].core.running == 2 && arrivals.load(Ordering::SeqCst) == 2
    });
    let start = Instant::now();
    engine.commit(NewHook::new("fast", "y")).unwrap();
    assert!(
        fast.wait_for(1, Duration::from_secs(1)),
        "the fast source waited behind the slow one"
    );
    assert_eq!(fast.received()[0].header("x-goad-attempt"), Some("1"));
    assert_eq!(
        arrivals.load(Ordering::SeqCst),
        2,
        "the slow key never runs more than 2 (none has timed out yet)"
    );
    eprintln!("fast delivered {:?} after commit", start.elapsed());
}

/// Breakers keep a hung tenant from hurting another: tenant A's endpoint
/// accepts requests and never answers (10,000 hooks); after `breaker_failures` timeouts its
/// breaker opens and its rows park (or wait held), spending no attempts, while tenant B's
/// hooks on the same shard are delivered at once.
#[test]
fn a_hung_tenant_parks_behind_its_breaker_while_another_tenant_is_delivered() {
    let dir = tempfile::tempdir().unwrap();
    let arrivals = Arc::new(AtomicU32::new(0));
    let arrived = arrivals.clone();
    let hung = Receiver::start(move |_| {
        arrived.fetch_add(1, Ordering::SeqCst);
        Reply::hang()
    })
    .unwrap();
    let healthy = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut c = config(dir.path());
    // Open longer than the test runs, however slow the machine (under
    // coverage instrumentation it took over a minute, and the breaker
    // opened again at the end of a one-minute period).
    breakers_open_ten_minutes(&mut c, 5);
    c.dispatch.attempt_timeout_ms = 1_000;
    let mut hung_sink = SinkConfig::http(hung.url("/"));
    hung_sink.timeout_ms = Some(200);
    c.sources.push(source("a", "tenant-a", vec![hung_sink]));
    c.sources.push(source(
        "b",
        "tenant-b",
        vec![SinkConfig::http(healthy.url("/"))],
    ));
    let engine = Engine::open(c).unwrap();
    for _ in 0..10_000 {
        engine.commit(NewHook::new("a", "x")).unwrap();
    }
    wait_until("tenant A's breaker open", Duration::from_secs(10), || {
        engine.stats()[0].core.breakers_open == 1
    });
    let start = Instant::now();
    for _ in 0..100 {
        engine.commit(NewHook::new("b", "y")).unwrap();
    }
    assert!(
        healthy.wait_for(100, Duration::from_secs(5)),
        "tenant B delivered {} of 100",
        healthy.count()
    );
    eprintln!(
        "tenant B: 100 hooks committed and delivered in {:?}",
        start.elapsed()
    );
    // Parked behind the breaker, or held for the key's wake: its calls
    // were timed slow (200 ms each) before the breaker opened, so the rows
    // claimed past a wake window's worth were held (see `core::slow_keys`).
    wait_until("every row of A set aside", Duration::from_secs(10), || {
        let s = engine.stats()[0];
        s.core.claimed.rows == 0 && s.core.parked + s.core.held >= 9_988
    });
    let s = engine.stats()[0];
    assert_eq!(
        (s.breaker_opens, s.breaker_closes),
        (1, 0),
        "opened once, for its ten minutes"
    );
    let attempts = arrivals.load(Ordering::SeqCst);
    eprintln!("tenant A: {attempts} attempts reached the hung endpoint for 10,000 hooks");
    // The key's 8 slots (sink_concurrency), plus one new start in each slot
    // freed by the first four failures; the fifth opens the breaker and
    // nothing starts while it is open.
    assert!(
        (5..=8 + 4).contains(&attempts),
        "{attempts} attempts reached the hung endpoint"
    );
    let pending: Vec<_> = rows(&engine)
        .into_iter()
        .filter(|r| &*r.tenant == "tenant-a")
        .collect();
    assert_eq!(pending.len(), 10_000);
    assert!(
        pending.iter().filter(|r| r.record.attempts == 0).count() >= 9_988,
        "parked rows spend no attempts"
    );
    assert!(pending
        .iter()
        .all(|r| r.record.status == RowStatus::Pending));
}

/// `reconfigure` under load: lowering `sink_concurrency` drops nothing that
/// runs and only stops new starts until the count falls below it; raising
/// it starts more at once.
#[test]
fn reconfigure_lowers_and_raises_concurrency_without_dropping_running_attempts() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.dispatch.sink_concurrency = 8;
    c.sources.push(source_of_kinds("s", "t", &["gate"]));
    let gate = gate();
    let delivered = gate.passed.clone();
    let engine = gated_engine(c.clone(), &gate);
    let open = gate.open;
    for _ in 0..40 {
        engine.commit(NewHook::new("s", "x")).unwrap();
    }
    wait_until("8 attempts running", Duration::from_secs(2), || {
        engine.stats()[0].core.running == 8
    });
    let lowered = goad::Config {
        dispatch: goad::config::DispatchConfig {
            sink_concurrency: 2,
            ..c.dispatch.clone()
        },
        ..c.clone()
    };
    engine.reconfigure(&lowered).unwrap();
    // Let four attempts finish: the running count falls, and no new one
    // starts while it is at or above the new limit.
    for _ in 0..4 {
        open.send(()).unwrap();
    }
    wait_until("four delivered", Duration::from_secs(2), || {
        delivered.load(Ordering::SeqCst) == 4
    });
    wait_until("4 still running", Duration::from_secs(2), || {
        engine.stats()[0].core.running == 4
    });
    for _ in 0..3 {
        open.send(()).unwrap();
    }
    wait_until("seven delivered", Duration::from_secs(2), || {
        delivered.load(Ordering::SeqCst) == 7
    });
    // 1 left running is below 2: exactly one more starts.
    wait_until(
        "2 running under the lowered limit",
        Duration::from_secs(2),
        || engine.stats()[0].core.running == 2,
    );
    let raised = goad::Config {
        dispatch: goad::config::DispatchConfig {
            sink_concurrency: 16,
            ..c.dispatch.clone()
        },
        ..c
    };
    engine.reconfigure(&raised).unwrap();
    wait_until(
        "16 running under the raised limit",
        Duration::from_secs(2),
        || engine.stats()[0].core.running == 16,
    );
    for _ in 0..40 {
        open.send(()).unwrap();
    }
    engine.tick().unwrap();
    assert_eq!(
        delivered.load(Ordering::SeqCst),
        40,
        "every row delivered, none dropped"
    );
    assert!(rows(&engine).is_empty());
    engine.shutdown();
    engine
        .reconfigure(&lowered)
        .expect("reconfigure succeeds on a stopped engine");
}

/// A reconfiguration that raises `dispatch.concurrency` grows each shard's
/// IO pool with it: as many attempts run in the sink at once as the new
/// window lets start. (Before, a pool kept the size it opened with: the
/// attempts past it waited in its queue, their deadlines running, and
/// those past its queue failed at once as `io pool saturated`.) Lowered
/// again, the pool gives back its extra workers as they finish: every
/// row is delivered and none is counted stuck.
#[test]
fn raising_the_concurrency_grows_each_shards_io_pool() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.dispatch.concurrency = 2;
    c.dispatch.sink_concurrency = 2;
    c.sources.push(source_of_kinds("s", "t", &["held"]));
    let (open, permits) = crossbeam_channel::unbounded::<()>();
    let inside = Arc::new(AtomicU32::new(0));
    let counted = inside.clone();
    let held = sink(move |_| {
        counted.fetch_add(1, Ordering::SeqCst);
        let permit = permits.recv();
        counted.fetch_sub(1, Ordering::SeqCst);
        permit.map_err(SinkError::transient)
    });
    let engine = Engine::builder(c.clone())
        .sink("held", held)
        .open()
        .unwrap();
    for _ in 0..24 {
        engine.commit(NewHook::new("s", "x")).unwrap();
    }
    wait_until("2 attempts in the sink", Duration::from_secs(5), || {
        inside.load(Ordering::SeqCst) == 2
    });
    let mut raised = c.clone();
    raised.dispatch.concurrency = 12;
    raised.dispatch.sink_concurrency = 12;
    engine.reconfigure(&raised).unwrap();
    wait_until("12 attempts in the sink", Duration::from_secs(5), || {
        inside.load(Ordering::SeqCst) == 12
    });
    engine.reconfigure(&c).unwrap();
    for _ in 0..24 {
        open.send(()).unwrap();
    }
    engine.tick().unwrap();
    assert!(rows(&engine).is_empty(), "every row delivered");
    let stats = &engine.stats()[0];
    assert_eq!(
        (
            stats.core.delivered,
            stats.core.retried,
            stats.abandoned_workers
        ),
        (24, 0, 0)
    );
}

/// A reload that removes a source's first sink while rows of both are
/// claimed: the second sink, at index 0 now, gets each hook's own row once
/// and never a row of the removed sink, whose claimed rows are
/// dead-lettered as `sink_gone`. (Before, the removed sink's rows queued
/// on their key started on whatever sink the reload put at their index.)
#[test]
fn a_reload_that_removes_a_sink_sends_its_claimed_rows_to_no_other_sink() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.dispatch.sink_concurrency = 1;
    c.sources
        .push(source_of_kinds("s", "t", &["first", "second"]));
    let first = gate();
    let second = gate();
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let received = bodies.clone();
    let recording = second.sink.clone();
    let engine = Engine::builder(c.clone())
        .sink("first", first.sink.clone())
        .sink(
            "second",
            sink(move |delivery| {
                recording.deliver(delivery)?;
                let body = String::from_utf8_lossy(&delivery.hook.body).into_owned();
                received.lock().push(body);
                Ok(())
            }),
        )
        .open()
        .unwrap();
    for i in 0..4 {
        engine.commit(NewHook::new("s", format!("{i}"))).unwrap();
    }
    wait_until(
        "one attempt of each sink running, the other rows claimed",
        Duration::from_secs(5),
        || engine.stats()[0].core.running == 2 && engine.stats()[0].core.claimed.rows == 8,
    );
    let mut reloaded = c.clone();
    reloaded.sources = vec![source_of_kinds("s", "t", &["second"])].into();
    engine.reconfigure(&reloaded).unwrap();
    first.open.send(()).unwrap();
    for _ in 0..8 {
        second.open.send(()).unwrap();
    }
    wait_until("every row settled", Duration::from_secs(10), || {
        rows(&engine)
            .iter()
            .all(|r| r.record.status == RowStatus::Dead)
    });
    let mut bodies = bodies.lock().clone();
    bodies.sort();
    assert_eq!(bodies, ["0", "1", "2", "3"], "each hook's own row, once");
    assert_eq!(first.passed.load(Ordering::SeqCst), 1, "the one running");
    let gone = (0, "sink_gone: index 0, type first".to_string());
    assert_eq!(dead_attempts_and_reasons(&engine), vec![gone; 3]);
}

/// A reload gives a sink another URL while its two calls (its
/// `sink_concurrency`) hang at the old one: the new URL gets the two rows
/// left at once; when the old calls then fail (503), the sink's breaker
/// (at two failures) stays closed, and their rows retry at the new URL.
/// (Before, the old calls held the sink's slots until they ended, and
/// their failures opened the breaker of the new URL, which then got none
/// of their rows for the breaker's ten minutes.)
#[test]
fn a_sink_given_another_url_while_its_calls_hang_sends_its_rows_there_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (release, released) = crossbeam_channel::unbounded::<()>();
    let hanging = Arc::new(AtomicU32::new(0));
    let hung = hanging.clone();
    let receiver = Receiver::start(move |r| match r.path.as_str() {
        "/old" => {
            hung.fetch_add(1, Ordering::SeqCst);
            released.recv().unwrap();
            Reply::status(503)
        }
        _ => Reply::status(200),
    })
    .unwrap();
    let mut c = config(dir.path());
    c.dispatch.sink_concurrency = 2;
    breakers_open_ten_minutes(&mut c, 2);
    let old = SinkConfig::http(receiver.url("/old"));
    c.sources.push(source("s", "t", vec![old]));
    let engine = Engine::open(c.clone()).unwrap();
    for n in 0..4 {
        engine.commit(NewHook::new("s", format!("{n}"))).unwrap();
    }
    wait_until(
        "two calls hanging at the old URL",
        Duration::from_secs(10),
        || hanging.load(Ordering::SeqCst) == 2 && engine.stats()[0].core.running == 2,
    );
    c.sources[0].sinks[0] = SinkConfig::http(receiver.url("/new"));
    engine.reconfigure(&c).unwrap();
    wait_until(
        "the two rows left delivered at the new URL",
        Duration::from_secs(10),
        || receiver.ok_count() == 2,
    );
    for _ in 0..2 {
        release.send(()).unwrap();
    }
    wait_until(
        "every hook delivered at the new URL",
        Duration::from_secs(10),
        || receiver.ok_count() == 4 && rows(&engine).is_empty(),
    );
    let sinks = engine.sink_stats().unwrap();
    let breakers: Vec<_> = (sinks.iter())
        .map(|sink| {
            (
                sink.breaker,
                sink.consecutive_failures,
                sink.outcomes.retried,
            )
        })
        .collect();
    assert_eq!(breakers, [(BreakerState::Closed, 0, 2)]);
    assert_eq!(engine.stats()[0].breaker_opens, 0);
    assert_eq!(
        hanging.load(Ordering::SeqCst),
        2,
        "none more to the old URL"
    );
}

/// A host sink that takes bodies up to 10 bytes inline, and records the
/// claim each delivery carried.
#[derive(Default)]
struct SmallInline(parking_lot::Mutex<Vec<Option<goad::claim_check::ClaimRef>>>);

impl Sink for SmallInline {
    fn deliver(&self, d: &goad::Delivery<'_>) -> Result<(), SinkError> {
        self.0.lock().push(d.claim.cloned());
        Ok(())
    }

    fn inline_max_bytes(&self) -> Option<u64> {
        Some(10)
    }
}

/// A host sink whose claim check threshold is broken.
struct BrokenThreshold;

impl Sink for BrokenThreshold {
    fn deliver(&self, _: &goad::Delivery<'_>) -> Result<(), SinkError> {
        Ok(())
    }

    fn inline_max_bytes(&self) -> Option<u64> {
        panic!("a bug in the threshold")
    }
}

/// Scenario 11: a host sink with an inline limit gets a larger body's claim
/// (which the engine redeems) and a smaller one inline; a sink whose
/// `inline_max_bytes` panics fails its own attempts, dead-lettered naming
/// its threshold, while the other sink of the same source delivers.
#[test]
fn a_host_sinks_inline_limit_brings_a_claim_and_a_broken_one_fails_only_its_rows() {
    let dir = tempfile::tempdir().unwrap();
    let small = Arc::new(SmallInline::default());
    let mut c = config(dir.path());
    c.retry.max_attempts = 2;
    c.sources
        .push(source_of_kinds("s", "t", &["small", "broken"]));
    let engine = Engine::builder(c)
        .sink("small", small.clone())
        .sink("broken", Arc::new(BrokenThreshold))
        .open()
        .unwrap();
    let body = vec![b'b'; 100];
    engine.commit(NewHook::new("s", body.clone())).unwrap();
    engine.commit(NewHook::new("s", "tiny")).unwrap();
    wait_until("both broken rows dead", Duration::from_secs(10), || {
        engine.tick().unwrap();
        dead(&engine).len() == 2
    });
    // The two hooks' rows ran side by side: in either order.
    let mut claims = small.0.lock().clone();
    claims.sort_by_key(Option::is_some);
    assert_eq!(claims.len(), 2, "the healthy sink delivered both");
    assert_eq!(claims[0], None, "the small one inline");
    let claim = claims[1].clone().expect("the large body came as a claim");
    assert_eq!(claim.tenant, "t");
    assert_eq!(engine.redeem_claim("t", &claim.sha256).unwrap(), Some(body));
    for row in dead(&engine) {
        assert_eq!(row.record.attempts, 2);
        let reason = row.record.error.unwrap();
        assert!(
            reason.contains("inline_max_bytes") && reason.contains("threshold"),
            "{reason}"
        );
    }
}

/// A claim file an earlier goad wrote with the umask's mode (0644: any
/// account of the host could read the hook's body) is made its owner's
/// only by the claim check's sweep as the engine opens, and still redeemed.
#[test]
fn a_claim_left_open_to_all_is_its_owners_only_once_the_engine_opens() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let small = Arc::new(SmallInline::default());
    let mut c = config(dir.path());
    c.sources.push(source_of_kinds("s", "t", &["small"]));
    let open = || {
        let sink = small.clone();
        Engine::builder(c.clone())
            .sink("small", sink)
            .open()
            .unwrap()
    };
    let engine = open();
    let body = vec![b'b'; 100];
    engine.commit(NewHook::new("s", body.clone())).unwrap();
    engine.tick().unwrap();
    let claim = small.0.lock()[0].clone().expect("the body came as a claim");
    engine.shutdown();
    drop(engine);
    let file = c.claim_dir().join("t").join(&claim.sha256);
    let mode = |file: &std::path::Path| std::fs::metadata(file).unwrap().permissions().mode();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(mode(&file) & 0o777, 0o644);
    let engine = open();
    wait_until(
        "the claim is its owner's only",
        Duration::from_secs(10),
        || mode(&file) & 0o777 == 0o600,
    );
    assert_eq!(engine.redeem_claim("t", &claim.sha256).unwrap(), Some(body));
}

/// Reference weakness 1, mended: an open breaker outlives a restart. An
/// engine reopened within the breaker's open period keeps the key's rows
/// parked until it ends, then runs one probe alone, not a wave of
/// `sink_concurrency` attempts at a sink that may still be down.
#[test]
fn an_open_breaker_survives_a_restart_and_its_key_probes_alone() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.dispatch.breaker_failures = 2;
    c.dispatch.breaker_open_ms = 5_000;
    c.dispatch.breaker_max_open_ms = 5_000;
    c.sources.push(source_of_kinds("s", "t", &["remote"]));
    let down = Engine::builder(c.clone())
        .sink("remote", sink(|_| Err(SinkError::transient("down"))))
        .open()
        .unwrap();
    for n in 0..10 {
        down.commit(NewHook::new("s", format!("{n}"))).unwrap();
    }
    wait_until("the breaker open", Duration::from_secs(10), || {
        down.stats()[0].core.breakers_open == 1
    });
    drop(down);
    // Each call's (calls in flight when it started, calls ended before it).
    let calls: Arc<parking_lot::Mutex<Vec<(u32, u32)>>> = Arc::default();
    let (in_flight, ended) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    let record = calls.clone();
    let up = Engine::builder(c)
        .sink(
            "remote",
            sink(move |_| {
                let running = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                record.lock().push((running, ended.load(Ordering::SeqCst)));
                std::thread::yield_now();
                in_flight.fetch_sub(1, Ordering::SeqCst);
                ended.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }),
        )
        .open()
        .unwrap();
    // Taken back from the store (the sink is up: nothing else opens it).
    wait_until("the breaker open again", Duration::from_secs(4), || {
        up.stats()[0].core.breakers_open == 1
    });
    wait_until("every hook delivered", Duration::from_secs(20), || {
        up.hook_count().unwrap() == 0
    });
    let calls = calls.lock();
    assert_eq!(calls.len(), 10);
    assert_eq!(calls[0], (1, 0), "the probe runs alone");
    assert!(
        calls[1..].iter().all(|&(_, ended)| ended >= 1),
        "the rest start after the probe: {calls:?}"
    );
}

/// An open breaker kept over a restart stays with its sink when the
/// config it restarts on inserts another HTTP sink before it: the sink
/// that was down stays held until the breaker's period ends, and the new
/// sink, at the index the breaker was stored with, gets its hooks at
/// once. (Before, the breaker stayed with its index: the new sink's
/// hooks waited for the period to end, and the down sink got a wave.)
#[test]
fn an_open_breaker_kept_over_a_restart_stays_with_its_sink_when_another_is_inserted_first() {
    a_breaker_stays_with_its_sink_when_another_is_inserted_first(|engine, config| {
        engine.shutdown();
        drop(engine);
        Engine::open(config.clone()).unwrap()
    });
}

/// The same across a reload: the reload takes the open breaker to the
/// sink's new index. (Before, it dropped the breaker, and the sink that
/// was down got its hooks at once.)
#[test]
fn an_open_breaker_stays_with_its_sink_when_a_reload_inserts_another_first() {
    a_breaker_stays_with_its_sink_when_another_is_inserted_first(|engine, config| {
        engine.reconfigure(config).unwrap();
        engine
    });
}

/// A source's one sink answers 503 until its breaker opens (two failures,
/// open ten minutes); `insert` then brings the engine on a config with an
/// HTTP sink inserted before it, and three more hooks are committed: the
/// new sink gets them at once, the down sink nothing, and the breaker is
/// the down sink's, at index 1.
fn a_breaker_stays_with_its_sink_when_another_is_inserted_first(
    insert: impl FnOnce(Engine, &goad::Config) -> Engine,
) {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|r| match r.path.as_str() {
        "/down" => Reply::status(503),
        _ => Reply::status(200),
    })
    .unwrap();
    let mut c = config(dir.path());
    breakers_open_ten_minutes(&mut c, 2);
    let down = SinkConfig::http(receiver.url("/down"));
    c.sources.push(source("s", "t", vec![down]));
    let engine = Engine::open(c.clone()).unwrap();
    for n in 0..3 {
        engine.commit(NewHook::new("s", format!("{n}"))).unwrap();
    }
    // Every attempt started before it opened has reached the receiver.
    wait_until(
        "the breaker open, no attempt running",
        Duration::from_secs(10),
        || {
            let core = engine.stats()[0].core;
            core.breakers_open == 1 && core.running == 0
        },
    );
    let calls_while_up = receiver.count();
    let new = SinkConfig::http(receiver.url("/new"));
    c.sources[0].sinks.insert(0, new);
    let engine = insert(engine, &c);
    for n in 3..6 {
        engine.commit(NewHook::new("s", format!("{n}"))).unwrap();
    }
    assert!(receiver.wait_for(calls_while_up + 3, Duration::from_secs(10)));
    let breakers: Vec<_> = (engine.sink_stats().unwrap().into_iter())
        .map(|sink| (sink.key.sink_index, sink.breaker))
        .collect();
    assert!(
        matches!(
            breakers[..],
            [(0, BreakerState::Closed), (1, BreakerState::Open { .. })]
        ),
        "{breakers:?}"
    );
    let paths = sorted_paths(&receiver);
    let new_paths = paths.iter().filter(|p| *p == "/new").count();
    assert_eq!(new_paths, 3, "the new sink's hooks, at once: {paths:?}");
    assert_eq!(
        receiver.count(),
        calls_while_up + 3,
        "none to the down sink"
    );
}

/// A sink with `max_calls_per_s` gets its calls one interval apart: 21
/// hooks to a sink at 20 per second take at least a second from the first
/// commit to the last request (calls 1 and 21 start more than 20 intervals
/// less 1 ms apart), however fast the receiver answers; the sink beside it
/// without a rate gets every hook too.
#[test]
fn a_sink_with_a_rate_gets_its_calls_one_interval_apart() {
    let dir = tempfile::tempdir().unwrap();
    let arrivals_ms = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let seen = arrivals_ms.clone();
    let limited = Receiver::start(move |_| {
        seen.lock().push(goad::runtime::wall_ms());
        Reply::status(200)
    })
    .unwrap();
    let free = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut c = config(dir.path());
    let rated = SinkConfig {
        max_calls_per_s: Some(20),
        ..SinkConfig::http(limited.url("/limited"))
    };
    c.sources.push(source("rated", "acme", vec![rated]));
    c.sources.push(source(
        "free",
        "acme",
        vec![SinkConfig::http(free.url("/free"))],
    ));
    let engine = Engine::open(c).unwrap();
    let first_commit_ms = goad::runtime::wall_ms();
    for i in 0..21 {
        engine
            .commit(NewHook::new("rated", format!("{i}")))
            .unwrap();
        engine.commit(NewHook::new("free", format!("{i}"))).unwrap();
    }
    engine.tick().unwrap();
    assert_eq!((limited.count(), free.count()), (21, 21));
    let last_ms = *arrivals_ms.lock().iter().max().unwrap();
    assert!(
        last_ms - first_commit_ms >= 999,
        "21 calls at 20/s within {} ms",
        last_ms - first_commit_ms
    );
    assert_eq!(engine.hook_count().unwrap(), 0);
}

/// A backlog behind a sink's rate does not hold the shard's window: with
/// a window of 64 rows, 200 hooks to a sink at 10 calls a second, then 50
/// to another tenant's sink, all 50 arrive while the backlog has had only
/// its first turns — the backlog waits for its turns in the store, not in
/// the window, whose room its turns would free one a tenth of a second.
#[test]
fn a_backlog_behind_a_rate_leaves_the_window_to_another_tenant() {
    let dir = tempfile::tempdir().unwrap();
    let limited = Receiver::start(|_| Reply::status(200)).unwrap();
    let other = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut c = config(dir.path());
    c.dispatch.max_inflight = 64;
    let rated = SinkConfig {
        max_calls_per_s: Some(10),
        ..SinkConfig::http(limited.url("/limited"))
    };
    c.sources.push(source("backlog", "acme", vec![rated]));
    c.sources.push(source(
        "other",
        "globex",
        vec![SinkConfig::http(other.url("/other"))],
    ));
    let engine = Engine::open(c).unwrap();
    for i in 0..200 {
        engine
            .commit(NewHook::new("backlog", format!("{i}")))
            .unwrap();
    }
    for i in 0..50 {
        engine
            .commit(NewHook::new("other", format!("{i}")))
            .unwrap();
    }
    assert!(other.wait_for(50, Duration::from_secs(30)));
    let turns_taken = limited.count();
    assert!(
        turns_taken < 20,
        "{turns_taken} of the backlog's turns first"
    );
    engine.shutdown();
}

/// A reload that raises a sink's rate speeds up the backlog paced at the
/// old one: 40 hooks to a sink at 2 calls a second wait in the store for
/// turns spread over 20 s, each row saying so; raised to 1,000 a second,
/// every hook arrives within 10 s, not at its old turn.
#[test]
fn a_raised_rate_speeds_up_the_backlog_paced_at_the_old_one() {
    let (engine, limited, mut c, _dir) = paced_backlog();
    c.sources[0].sinks[0].max_calls_per_s = Some(1_000);
    engine.reconfigure(&c).unwrap();
    all_arrive_then_none_is_left(&engine, &limited);
}

/// So does a restart with the raised rate: the store says the rows were
/// paced at another.
#[test]
fn a_restart_with_a_raised_rate_speeds_up_the_backlog_paced_at_the_old_one() {
    let (engine, limited, mut c, _dir) = paced_backlog();
    drop(engine);
    c.sources[0].sinks[0].max_calls_per_s = Some(1_000);
    let engine = Engine::open(c).unwrap();
    all_arrive_then_none_is_left(&engine, &limited);
}

/// An engine whose one source's sink, at 2 calls a second, has at least
/// 30 of 40 hooks paced in the store; its receiver, config and directory.
fn paced_backlog() -> (Engine, Receiver, goad::Config, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let limited = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut c = config(dir.path());
    let rated = SinkConfig {
        max_calls_per_s: Some(2),
        ..SinkConfig::http(limited.url("/limited"))
    };
    c.sources.push(source("backlog", "acme", vec![rated]));
    let engine = Engine::open(c.clone()).unwrap();
    for i in 0..40 {
        engine
            .commit(NewHook::new("backlog", format!("{i}")))
            .unwrap();
    }
    let waiting_for_turns = || {
        (rows(&engine).iter())
            .filter(|r| r.record.error.as_deref() == Some(goad::core::PACED_ERROR))
            .count()
    };
    wait_until("the backlog paced", Duration::from_secs(10), || {
        waiting_for_turns() >= 30
    });
    assert!(limited.count() < 10, "{} arrived", limited.count());
    (engine, limited, c, dir)
}

/// Every hook of `paced_backlog` arrives within 10 s (its old turns take
/// 20), and none is left.
fn all_arrive_then_none_is_left(engine: &Engine, limited: &Receiver) {
    assert!(
        limited.wait_for(40, Duration::from_secs(10)),
        "{} of 40 arrived",
        limited.count()
    );
    engine.tick().unwrap();
    assert_eq!(engine.hook_count().unwrap(), 0);
}

/// A sink's own `retry` keys hold for its rows: beside a sink on the
/// node's policy (3 attempts), one with `retry = { max_attempts = 1 }`
/// dead-letters the hook's row at its first failure.
#[test]
fn a_sinks_own_retry_keys_hold_for_its_rows() {
    let dir = tempfile::tempdir().unwrap();
    let failing = Receiver::start(|_| Reply::status(503)).unwrap();
    let mut c = config(dir.path());
    c.retry.base_ms = 10;
    c.retry.max_ms = 10;
    c.retry.max_attempts = 3;
    let once = SinkConfig {
        retry: Some(goad::config::SinkRetryConfig {
            max_attempts: Some(1),
            ..Default::default()
        }),
        ..SinkConfig::http(failing.url("/once"))
    };
    let sinks = vec![SinkConfig::http(failing.url("/policy")), once];
    c.sources.push(source("s", "acme", sinks));
    let engine = Engine::open(c).unwrap();
    engine.commit(NewHook::new("s", "x")).unwrap();
    // `tick` does not wait out backoffs: wait for both rows' ends.
    wait_until("both rows dead", Duration::from_secs(20), || {
        dead(&engine).len() == 2
    });
    let mut dead: Vec<(u16, u32)> = dead(&engine)
        .iter()
        .map(|r| (r.row.sink_index, r.record.attempts))
        .collect();
    dead.sort();
    assert_eq!(dead, [(0, 3), (1, 1)]);
    let paths: Vec<String> = failing.received().into_iter().map(|r| r.path).collect();
    assert_eq!(paths.iter().filter(|p| *p == "/once").count(), 1);
    assert_eq!(paths.iter().filter(|p| *p == "/policy").count(), 3);
}

/// A sink's `filter` takes only the hooks whose header has one of its
/// values (event types): a source fans `push` events out to its CI sink
/// and every event to its audit sink; a hook of no filtered sink's type
/// goes to the unfiltered one only, and a hook that no sink takes is
/// acknowledged and not stored.
#[test]
fn a_sinks_filter_takes_only_the_hooks_whose_header_it_names() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut c = config(dir.path());
    let only = |path: &str, values: &[&str]| SinkConfig {
        filter: Some(goad::config::HeaderFilter {
            header: "X-GitHub-Event".into(),
            values: values.iter().map(|v| v.to_string()).collect(),
        }),
        ..SinkConfig::http(receiver.url(path))
    };
    let fan_out = vec![
        only("/ci", &["push"]),
        SinkConfig::http(receiver.url("/audit")),
    ];
    c.sources.push(source("github", "acme", fan_out));
    c.sources.push(source(
        "pushes",
        "acme",
        vec![only("/pushes", &["push", "tag"])],
    ));
    let engine = Engine::open(c).unwrap();
    let event = |source: &str, kind: Option<&str>, body: &str| NewHook {
        headers: kind
            .map(|k| vec![("x-github-event".to_string(), k.to_string())])
            .unwrap_or_default(),
        ..NewHook::new(source, body)
    };
    engine.commit(event("github", Some("push"), "1")).unwrap();
    engine.commit(event("github", Some("issues"), "2")).unwrap();
    engine.commit(event("github", None, "3")).unwrap();
    engine.commit(event("pushes", Some("issues"), "4")).unwrap();
    engine.tick().unwrap();
    let mut got: Vec<(String, String)> = receiver
        .received()
        .into_iter()
        .map(|r| (r.path, String::from_utf8(r.body).unwrap()))
        .collect();
    got.sort();
    let want = [
        ("/audit", "1"),
        ("/audit", "2"),
        ("/audit", "3"),
        ("/ci", "1"),
    ];
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(p, b)| (p.to_string(), b.to_string()))
        .collect();
    assert_eq!(got, want);
    // A stored hook with no rows would stay for good: hook 4 was not stored.
    assert_eq!(engine.hook_count().unwrap(), 0);
}

/// A paused sink holds its rows: none is attempted, each shows as held,
/// while the source's other sink delivers; resumed by a reconfiguration,
/// they are delivered at once. Rows held when the engine stops wait for
/// good while the sink stays paused, and a sink resumed in the config
/// while the engine was stopped gets them at the next open.
#[test]
fn a_paused_sink_holds_its_rows_until_it_is_resumed() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut c = config(dir.path());
    let paused = SinkConfig {
        paused: true,
        ..SinkConfig::http(receiver.url("/paused"))
    };
    c.sources.push(source(
        "s",
        "t",
        vec![SinkConfig::http(receiver.url("/live")), paused],
    ));
    let engine = Engine::open(c.clone()).unwrap();
    let ids: Vec<String> = (0..3)
        .map(|i| engine.commit(NewHook::new("s", format!("{i}"))).unwrap())
        .collect();
    engine.tick().unwrap();
    let paths = |receiver: &Receiver| -> Vec<String> {
        receiver.received().into_iter().map(|r| r.path).collect()
    };
    assert_eq!(paths(&receiver), ["/live"; 3]);
    let status = engine.hook_status(&ids[0]).unwrap().unwrap();
    assert!(
        matches!(status.sinks[1].state, goad::SinkState::Held(_)),
        "{status:?}"
    );
    let stats = engine.sink_stats().unwrap();
    assert_eq!((stats[0].paused, stats[1].paused), (false, true));
    assert_eq!(engine.stats()[0].core.held, 3);
    let held = engine.held_by_sink("t").unwrap();
    assert_eq!(held.into_iter().collect::<Vec<_>>(), [(("s".into(), 1), 3)]);
    assert!(engine.held_by_sink("no-such-tenant").unwrap().is_empty());
    // Resumed: delivered at once, not after a wait.
    c.sources[0].sinks[1].paused = false;
    engine.reconfigure(&c).unwrap();
    assert!(receiver.wait_for(6, Duration::from_secs(5)));
    // Paused again, two more held across a stop; resumed while stopped.
    c.sources[0].sinks[1].paused = true;
    engine.reconfigure(&c).unwrap();
    for i in 3..5 {
        engine.commit(NewHook::new("s", format!("{i}"))).unwrap();
    }
    engine.tick().unwrap();
    assert!(receiver.wait_for(8, Duration::from_secs(5)));
    engine.shutdown();
    drop(engine);
    let engine = Engine::open(c.clone()).unwrap();
    engine.tick().unwrap();
    assert_eq!(engine.hook_count().unwrap(), 2, "still held");
    engine.shutdown();
    drop(engine);
    c.sources[0].sinks[1].paused = false;
    let engine = Engine::open(c).unwrap();
    assert!(receiver.wait_for(10, Duration::from_secs(5)));
    let mut bodies: Vec<(String, String)> = receiver
        .received()
        .into_iter()
        .map(|r| (r.path, String::from_utf8(r.body).unwrap()))
        .collect();
    bodies.sort();
    let want: Vec<(String, String)> = ["/live", "/paused"]
        .iter()
        .flat_map(|p| (0..5).map(move |i| (p.to_string(), i.to_string())))
        .collect();
    assert_eq!(bodies, want);
    wait_until("every hook reclaimed", Duration::from_secs(5), || {
        engine.hook_count().unwrap() == 0
    });
}

/// The paths of what `receiver` got, sorted.
fn sorted_paths(receiver: &Receiver) -> Vec<String> {
    let mut paths: Vec<String> = receiver.received().into_iter().map(|r| r.path).collect();
    paths.sort();
    paths
}

/// A source posting to `/a` (paused: its rows wait) and `/b`, each of
/// three hooks delivered to `/b`: the engine, its config and receiver.
fn three_hooks_held_for_a(dir: &std::path::Path) -> (Engine, goad::Config, Receiver) {
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut c = config(dir);
    let a = SinkConfig {
        paused: true,
        ..SinkConfig::http(receiver.url("/a"))
    };
    let b = SinkConfig::http(receiver.url("/b"));
    c.sources.push(source("s", "t", vec![a, b]));
    let engine = Engine::open(c.clone()).unwrap();
    for i in 0..3 {
        engine.commit(NewHook::new("s", format!("{i}"))).unwrap();
    }
    assert!(receiver.wait_for(3, Duration::from_secs(5)));
    engine.tick().unwrap();
    assert_eq!(engine.stats()[0].core.held, 3);
    (engine, c, receiver)
}

/// Two HTTP sinks, the first's rows waiting, and a reload that removes
/// the first: its rows are dead-lettered as `sink_gone`, not sent to the
/// second sink, which took the first's index and has its type. (Until
/// 2026-12-07 a row went to whichever sink of its type held its index
/// then: `/b` got each hook twice.)
#[test]
fn a_reload_that_removes_a_sink_sends_its_rows_to_no_other_sink_of_its_type() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, mut c, receiver) = three_hooks_held_for_a(dir.path());
    c.sources[0].sinks.remove(0);
    engine.reconfigure(&c).unwrap();
    wait_until(
        "the removed sink's rows dead",
        Duration::from_secs(5),
        || dead(&engine).len() == 3,
    );
    engine.tick().unwrap();
    assert_eq!(sorted_paths(&receiver), ["/b"; 3]);
    let gone = (0, "sink_gone: index 0, type http".to_string());
    assert_eq!(dead_attempts_and_reasons(&engine), vec![gone; 3]);
}

/// The same two sinks, and a sink inserted before them while the engine
/// is stopped: the first's rows are held for it at its new index, and go
/// to it once it is resumed, none to the new sink at its old one.
#[test]
fn a_sink_inserted_first_while_stopped_takes_none_of_the_rows_stored_before() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, mut c, receiver) = three_hooks_held_for_a(dir.path());
    engine.shutdown();
    drop(engine);
    let new = SinkConfig::http(receiver.url("/new"));
    c.sources[0].sinks.insert(0, new);
    let engine = Engine::open(c.clone()).unwrap();
    engine.tick().unwrap();
    let held = engine.held_by_sink("t").unwrap();
    assert_eq!(held.into_iter().collect::<Vec<_>>(), [(("s".into(), 1), 3)]);
    c.sources[0].sinks[1].paused = false;
    engine.reconfigure(&c).unwrap();
    assert!(receiver.wait_for(6, Duration::from_secs(5)));
    engine.tick().unwrap();
    assert_eq!(engine.hook_count().unwrap(), 0);
    assert_eq!(
        sorted_paths(&receiver),
        ["/a", "/a", "/a", "/b", "/b", "/b"]
    );
}
