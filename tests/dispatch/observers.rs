//! What an embedding host is told: outcome and breaker observers, and the
//! pressure signal.

use super::*;

/// An embedding host's outcome observer sees every attempt of a hook: a
/// receiver failing once then answering 200 gives "retrying" (with the
/// error and the due time) then "delivered" on attempt 2; one answering
/// 410 gives "dead" with the dead letter's reason. An observer that panics
/// leaves its shard delivering and observing.
#[test]
fn an_outcome_observer_sees_every_attempt_and_outlives_its_own_panic() {
    use goad::{Outcome, OutcomeEvent};
    let dir = tempfile::tempdir().unwrap();
    let failed_once = AtomicBool::new(false);
    let flaky = Receiver::start(move |_| match failed_once.swap(true, Ordering::SeqCst) {
        false => Reply::status(503),
        true => Reply::status(200),
    })
    .unwrap();
    let refusing = Receiver::start(|_| Reply::status(410).with_body("gone")).unwrap();
    let mut c = config(dir.path());
    let sinks = vec![
        SinkConfig::http(flaky.url("/")),
        SinkConfig::http(refusing.url("/")),
    ];
    c.sources.push(source("s", "t", sinks));
    let seen = Arc::new(parking_lot::Mutex::new(Vec::<OutcomeEvent>::new()));
    let observed = seen.clone();
    let engine = Engine::builder(c)
        .on_outcome(move |event| {
            let mut seen = observed.lock();
            seen.push(event.clone());
            assert!(
                seen.len() > 1,
                "the host's observer panics at its first event"
            );
        })
        .open()
        .unwrap();
    let before_ms = goad::runtime::wall_ms();
    let id = engine.commit(NewHook::new("s", "x")).unwrap();
    engine.tick().unwrap();
    let after_ms = goad::runtime::wall_ms();
    let events = seen.lock().clone();
    assert_eq!(events.len(), 3, "{events:?}");
    for e in &events {
        assert_eq!(
            (e.hook_id.as_str(), &*e.tenant, &*e.source_id, &*e.sink_type),
            (id.as_str(), "t", "s", "http")
        );
        assert!((before_ms..=after_ms).contains(&e.at_ms), "{e:?}");
    }
    let of_sink = |index: u16| -> Vec<(u32, Outcome)> {
        let mine = events.iter().filter(|e| e.sink_index == index);
        mine.map(|e| (e.attempt, e.outcome.clone())).collect()
    };
    let flaky_events = of_sink(0);
    let retried_at_ms = events.iter().find(|e| e.sink_index == 0).unwrap().at_ms;
    assert_eq!(
        flaky_events,
        vec![
            (
                1,
                Outcome::Retrying {
                    // Retries at once here (base_ms 0).
                    due_at_ms: retried_at_ms,
                    error: "HTTP status 503".into()
                }
            ),
            (2, Outcome::Delivered),
        ]
    );
    let reason = "sink http: permanent: HTTP status 410: gone".to_string();
    assert_eq!(of_sink(1), vec![(1, Outcome::Dead { reason })]);
    // After the observer's panic the shard goes on, observed.
    let second = engine.commit(NewHook::new("s", "y")).unwrap();
    engine.tick().unwrap();
    let mut later: Vec<(u16, Outcome)> = (seen.lock().iter())
        .filter(|e| e.hook_id == second)
        .map(|e| (e.sink_index, e.outcome.clone()))
        .collect();
    later.sort_by_key(|(index, _)| *index);
    let reason = "sink http: permanent: HTTP status 410: gone".to_string();
    assert_eq!(
        later,
        vec![(0, Outcome::Delivered), (1, Outcome::Dead { reason })]
    );
    assert_eq!(flaky.ok_count(), 2);
}

/// `on_breaker`: a host hears when a sink key's breaker opens (and until
/// when its rows park) and when an answer closes it again; an observer
/// that panics does not stop the shard.
#[test]
fn a_breaker_observer_hears_a_key_open_and_close() {
    use goad::{BreakerEvent, SinkKey};
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.dispatch.concurrency = 1;
    c.dispatch.sink_concurrency = 1;
    // Long enough that the sink is fixed before the first probe.
    c.dispatch.breaker_failures = 2;
    c.dispatch.breaker_open_ms = 1_000;
    c.dispatch.breaker_max_open_ms = 1_000;
    c.retry.base_ms = 10;
    c.retry.max_ms = 10;
    c.sources.push(source_of_kinds("s", "t", &["flaky"]));
    let failing = Arc::new(AtomicBool::new(true));
    let fails = failing.clone();
    let flaky = sink(move |_| match fails.load(Ordering::SeqCst) {
        true => Err(SinkError::transient(std::io::Error::other("down"))),
        false => Ok(()),
    });
    let seen = Arc::new(parking_lot::Mutex::new(Vec::<(BreakerEvent, u64)>::new()));
    let observed = seen.clone();
    let engine = Engine::builder(c)
        .sink("flaky", flaky)
        .on_breaker(move |event, at_ms| {
            observed.lock().push((event.clone(), at_ms));
            panic!("the host's observer panics at every event");
        })
        .open()
        .unwrap();
    for _ in 0..2 {
        engine.commit(NewHook::new("s", "x")).unwrap();
    }
    wait_until("the breaker opened", Duration::from_secs(5), || {
        !seen.lock().is_empty()
    });
    failing.store(false, Ordering::SeqCst);
    wait_until(
        "both delivered after the probe",
        Duration::from_secs(5),
        || engine.hook_count().unwrap() == 0 && seen.lock().len() == 2,
    );
    let events = seen.lock().clone();
    let key = SinkKey {
        tenant: "t".into(),
        source_id: "s".into(),
        sink_index: 0,
        sink_type: "flaky".into(),
    };
    let (opened_at_ms, closed_at_ms) = (events[0].1, events[1].1);
    assert_eq!(
        events,
        [
            (
                BreakerEvent::Opened {
                    key: key.clone(),
                    until_ms: opened_at_ms + 1_000,
                    opens: 1
                },
                opened_at_ms
            ),
            (BreakerEvent::Closed { key }, closed_at_ms),
        ]
    );
    assert!(closed_at_ms >= opened_at_ms + 1_000);
}

/// `pressure`: no lag and a free window when idle; with the window full
/// behind a blocked sink the oldest due row's lag grows; `Unavailable` once
/// the engine is stopped.
#[test]
fn pressure_reports_the_lag_of_the_oldest_due_row_and_a_full_window() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.dispatch.max_inflight = 2;
    c.sources.push(source_of_kinds("s", "t", &["gate"]));
    let gate = gate();
    let engine = gated_engine(c, &gate);
    let open = gate.open;
    assert_eq!(
        engine.pressure().unwrap(),
        goad::Pressure {
            lag_ms: 0,
            window_full: false
        }
    );
    for _ in 0..5 {
        engine.commit(NewHook::new("s", "x")).unwrap();
    }
    wait_until(
        "the window full and the oldest due row 50 ms late",
        Duration::from_secs(5),
        || {
            let p = engine.pressure().unwrap();
            p.window_full && p.lag_ms >= 50
        },
    );
    for _ in 0..5 {
        open.send(()).unwrap();
    }
    engine.tick().unwrap();
    wait_until("no pressure once drained", Duration::from_secs(2), || {
        engine.pressure().unwrap()
            == goad::Pressure {
                lag_ms: 0,
                window_full: false,
            }
    });
    engine.shutdown();
    assert!(matches!(engine.pressure(), Err(goad::Unavailable::Stopped)));
}

/// A host's callbacks run on a shard's thread. One that calls an engine
/// call that waits for the shards (a dead letter's observer committing an
/// alert with `commit`, or calling `tick`) would wait for the thread it
/// blocks: the shard, every tenant of it, stalled for the call's 30 s.
/// Such a call answers `OnShardThread` at once instead, naming
/// `commit_then`, which commits from the callback; the shard goes on.
#[test]
fn a_callback_that_calls_a_waiting_engine_call_is_answered_at_once_and_the_shard_goes_on() {
    use goad::{CommitError, Outcome, Unavailable};
    use std::sync::{OnceLock, Weak};
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.sources
        .push(source_of_kinds("orders", "acme", &["refuse"]));
    c.sources.push(source_of_kinds("alerts", "acme", &["page"]));
    let (page, pages) = counting_sink();
    // A weak handle: the engine owns the observer.
    let handle: Arc<OnceLock<Weak<Engine>>> = Arc::default();
    let answers: Arc<parking_lot::Mutex<Vec<(String, Duration)>>> = Arc::default();
    let (engine_of, seen) = (handle.clone(), answers.clone());
    let engine = Arc::new(
        Engine::builder(c)
            .sink(
                "refuse",
                sink(|_| Err(SinkError::permanent("no such order"))),
            )
            .sink("page", page)
            .on_outcome(move |e| {
                if !matches!(e.outcome, Outcome::Dead { .. }) {
                    return;
                }
                let engine = engine_of.get().and_then(Weak::upgrade).unwrap();
                let started = Instant::now();
                let committed = engine.commit(NewHook::new("alerts", "order dead"));
                let ticked = engine.tick();
                let stats = engine.sink_stats().map(|_| ());
                let took = started.elapsed();
                let mut seen = seen.lock();
                seen.push((format!("{committed:?} {ticked:?} {stats:?}"), took));
                if let Err(e) = &committed {
                    seen.push((e.to_string(), took));
                }
                engine
                    .commit_then(NewHook::new("alerts", "order dead"), |r| {
                        r.expect("the alert is durable");
                    })
                    .unwrap();
            })
            .open()
            .unwrap(),
    );
    handle.set(Arc::downgrade(&engine)).unwrap();
    engine.commit(NewHook::new("orders", "42")).unwrap();
    wait_until("the alert paged", Duration::from_secs(10), || {
        pages.load(Ordering::SeqCst) == 1
    });
    engine.tick().unwrap();
    let answers = answers.lock().clone();
    assert_eq!(answers.len(), 2, "{answers:?}");
    assert_eq!(
        answers[0].0,
        format!(
            "{:?} {:?} {:?}",
            Err::<String, _>(CommitError::OnShardThread),
            Err::<u64, _>(Unavailable::OnShardThread),
            Err::<(), _>(Unavailable::OnShardThread)
        )
    );
    assert!(answers[1].0.contains("use commit_then"), "{}", answers[1].0);
    assert!(answers[0].1 < Duration::from_secs(5), "{:?}", answers[0].1);
    assert_eq!(pages.load(Ordering::SeqCst), 1);
    let left: Vec<_> = rows(&engine)
        .into_iter()
        .map(|r| (r.source_id, r.record.status))
        .collect();
    assert_eq!(left, [("orders".to_string(), RowStatus::Dead)]);
}

/// A host sink's `deliver` runs on one of the engine's IO workers. Its
/// engine's `tick` there would wait for the attempt making the call (30
/// s, timing the attempt out): it answers `InSinkCall` at once, and the
/// attempt goes on to deliver. Another engine's `tick` is answered as
/// anywhere.
#[test]
fn a_sink_that_ticks_its_own_engine_is_answered_at_once() {
    use goad::Unavailable;
    use std::sync::{OnceLock, Weak};
    let (dir, other_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut c = config(dir.path());
    c.sources.push(source_of_kinds("orders", "acme", &["tick"]));
    let other = Arc::new(Engine::open(config(other_dir.path())).unwrap());
    let handle: Arc<OnceLock<Weak<Engine>>> = Arc::default();
    let answers: Arc<parking_lot::Mutex<Vec<(String, Duration)>>> = Arc::default();
    let (engine_of, seen, neighbour) = (handle.clone(), answers.clone(), other.clone());
    let ticking = sink(move |_| {
        let engine = engine_of.get().and_then(Weak::upgrade).unwrap();
        let started = Instant::now();
        let own = engine.tick();
        let took = started.elapsed();
        let answer = format!("{own:?} {:?}", neighbour.tick());
        seen.lock().push((answer, took));
        if let Err(e) = own {
            seen.lock().push((e.to_string(), took));
        }
        Ok(())
    });
    let engine = Arc::new(Engine::builder(c).sink("tick", ticking).open().unwrap());
    handle.set(Arc::downgrade(&engine)).unwrap();
    engine.commit(NewHook::new("orders", "42")).unwrap();
    // The row may settle before this tick starts (it then counts 0), so
    // the outcome is read from the sink's answers and the rows left.
    engine.tick().unwrap();
    let answers = answers.lock().clone();
    assert_eq!(answers.len(), 2, "{answers:?}");
    let (own, elsewhere) = (
        Err::<u64, _>(Unavailable::InSinkCall),
        Ok::<u64, Unavailable>(0),
    );
    assert_eq!(answers[0].0, format!("{own:?} {elsewhere:?}"));
    assert!(answers[0].1 < Duration::from_secs(5), "{:?}", answers[0].1);
    assert!(
        answers[1].0.contains("call it from another thread"),
        "{}",
        answers[1].0
    );
    assert!(rows(&engine).is_empty(), "the attempt delivered");
}

/// `shutdown` from a callback stops the engine without waiting for the
/// shard whose thread runs the callback (which stops once the callback
/// returns), even with that shard's input queue full (where a blocking
/// commit is refused, `QueueFull`, and not stored): the call returns,
/// every queued commit is answered, later commits are refused, and the
/// data directory opens again with every hook acknowledged, delivered.
#[test]
fn a_callback_may_shut_the_engine_down_with_its_shards_queue_full() {
    use goad::CommitError;
    use std::collections::BTreeSet;
    use std::sync::{OnceLock, Weak};
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.sources.push(source_of_kinds("orders", "acme", &["take"]));
    let delivered: Arc<parking_lot::Mutex<BTreeSet<String>>> = Arc::default();
    let seen = delivered.clone();
    let take = sink(move |d| {
        seen.lock()
            .insert(String::from_utf8_lossy(&d.hook.body).into_owned());
        Ok(())
    });
    let handle: Arc<OnceLock<Weak<Engine>>> = Arc::default();
    let (in_callback, go_on) = (crossbeam_channel::bounded(1), crossbeam_channel::bounded(1));
    let returned = Arc::new(AtomicBool::new(false));
    let (engine_of, shut_down) = (handle.clone(), returned.clone());
    let (entered, go) = (in_callback.0, go_on.1);
    let engine = Arc::new(
        Engine::builder(c.clone())
            .sink("take", take.clone())
            .on_outcome(move |_| {
                let Some(engine) = engine_of.get().and_then(Weak::upgrade) else {
                    return;
                };
                if entered.try_send(()).is_ok() {
                    go.recv().unwrap();
                    engine.shutdown();
                    shut_down.store(true, Ordering::SeqCst);
                }
            })
            .open()
            .unwrap(),
    );
    handle.set(Arc::downgrade(&engine)).unwrap();
    engine.commit(NewHook::new("orders", "first")).unwrap();
    in_callback.1.recv_timeout(Duration::from_secs(10)).unwrap();
    // The shard waits in the callback: fill its queue.
    let answers: Arc<parking_lot::Mutex<Vec<(String, bool)>>> = Arc::default();
    let mut queued = 0;
    loop {
        let (answered, body) = (answers.clone(), format!("queued {queued}"));
        let hook = NewHook::new("orders", body.clone());
        match engine.commit_then(hook, move |r| answered.lock().push((body, r.is_ok()))) {
            Ok(()) => queued += 1,
            Err(CommitError::QueueFull) => break,
            Err(e) => panic!("{e}"),
        }
    }
    assert!(queued > 0);
    // A blocking commit waits a while for room, then is refused: not
    // stored, so never delivered.
    assert!(matches!(
        engine.commit(NewHook::new("orders", "refused")),
        Err(CommitError::QueueFull)
    ));
    go_on.0.send(()).unwrap();
    wait_until("shutdown returned", Duration::from_secs(10), || {
        returned.load(Ordering::SeqCst)
    });
    assert!(matches!(
        engine.commit(NewHook::new("orders", "late")),
        Err(CommitError::Stopped)
    ));
    drop(engine);
    let mut reopened = None;
    wait_until("the directory opens again", Duration::from_secs(10), || {
        reopened = Engine::builder(c.clone())
            .sink("take", take.clone())
            .open()
            .ok();
        reopened.is_some()
    });
    let reopened = reopened.unwrap();
    reopened.tick().unwrap();
    let answers = answers.lock().clone();
    assert_eq!(answers.len(), queued, "every queued commit answered once");
    let acknowledged = answers.iter().filter(|(_, ok)| *ok);
    let mut bodies: Vec<String> = acknowledged.map(|(body, _)| body.clone()).collect();
    bodies.push("first".to_string());
    let delivered = delivered.lock();
    let missing: Vec<_> = bodies.iter().filter(|b| !delivered.contains(*b)).collect();
    assert!(
        missing.is_empty(),
        "acknowledged, not delivered: {missing:?}"
    );
    assert!(
        !delivered.contains("refused"),
        "a refused commit was stored"
    );
    assert_eq!(rows(&reopened).len(), 0, "every stored hook delivered");
}
