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
    assert_eq!(engine.pressure(), Err(goad::Unavailable));
}
