//! The dispatch pipeline end to end: a real engine on a real LMDB directory,
//! delivering to Rust sinks and to HTTP receivers on loopback. Each test
//! ports a reference scenario (its number in the name's doc).

mod common;

use common::*;
use goad::demo::receiver::{Receiver, Reply};
use goad::{Engine, NewHook, RowStatus, Sink, SinkConfig, SinkError};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Scenario 1: a source with two sinks; one hook reaches each exactly once
/// and the hook is deleted with its last row.
#[test]
fn each_sink_of_a_source_gets_the_hook_once_and_the_hook_is_reclaimed() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (
        Receiver::start(|_| Reply::status(200)).unwrap(),
        Receiver::start(|_| Reply::status(204)).unwrap(),
    );
    let mut c = config(dir.path());
    c.sources.push(source(
        "stripe",
        "acme",
        vec![SinkConfig::http(a.url("/a")), SinkConfig::http(b.url("/b"))],
    ));
    let engine = Engine::open(c).unwrap();
    engine.commit(NewHook::new("stripe", "hello")).unwrap();
    engine.tick().unwrap();
    assert_eq!((a.count(), b.count()), (1, 1));
    assert_eq!(
        (
            a.received()[0].body.as_slice(),
            b.received()[0].path.as_str()
        ),
        (&b"hello"[..], "/b")
    );
    assert_eq!(engine.hook_count().unwrap(), 0);
    assert!(rows(&engine).is_empty());
}

/// Scenario 2: a sink failing its first two calls delivers on attempt 3.
#[test]
fn a_failing_sink_is_retried_until_it_succeeds_on_attempt_three() {
    let dir = tempfile::tempdir().unwrap();
    let calls = Arc::new(AtomicU32::new(0));
    let seen = calls.clone();
    let receiver = Receiver::start(move |_| {
        if seen.fetch_add(1, Ordering::SeqCst) < 2 {
            Reply::status(500)
        } else {
            Reply::status(200)
        }
    })
    .unwrap();
    let c = config_with_http_sink(dir.path(), &receiver.url("/"));
    let engine = Engine::open(c).unwrap();
    engine.commit(NewHook::new("s", "x")).unwrap();
    engine.tick().unwrap();
    let got: Vec<String> = receiver
        .received()
        .iter()
        .map(|r| r.header("x-goad-attempt").unwrap().to_string())
        .collect();
    assert_eq!(got, ["1", "2", "3"]);
    assert_eq!(engine.hook_count().unwrap(), 0);
}

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

/// Scenario 6 (D1): with one attempt slot and a window of two, twenty hooks
/// to a failing sink do not hold up five hooks to a healthy source.
#[test]
fn a_failing_sink_does_not_hold_up_a_healthy_source() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.dispatch.concurrency = 1;
    c.dispatch.sink_concurrency = 1;
    c.dispatch.max_inflight = 2;
    c.retry.base_ms = 20;
    c.retry.max_ms = 20;
    c.retry.max_attempts = 1_000;
    c.sources.push(source_of_kinds("bad", "default", &["fail"]));
    c.sources.push(source_of_kinds("good", "default", &["ok"]));
    let (counting, delivered) = counting_sink();
    let engine = Engine::builder(c)
        .sink(
            "fail",
            sink(|_| Err(SinkError::transient(std::io::Error::other("down")))),
        )
        .sink("ok", counting)
        .open()
        .unwrap();
    for _ in 0..20 {
        engine.commit(NewHook::new("bad", "x")).unwrap();
    }
    let start = Instant::now();
    for _ in 0..5 {
        engine.commit(NewHook::new("good", "y")).unwrap();
    }
    wait_until("5 healthy deliveries", Duration::from_secs(2), || {
        delivered.load(Ordering::SeqCst) == 5
    });
    eprintln!("healthy source delivered in {:?}", start.elapsed());
}

/// Scenario 7 (D6): an attempt that hangs is failed at the attempt deadline
/// and frees its slot; with two attempts the row is dead-lettered as
/// `attempt_timeout`, and the healthy source is delivered meanwhile.
#[test]
fn a_hung_attempt_times_out_frees_its_slot_and_dead_letters_after_its_attempts() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.dispatch.concurrency = 1;
    c.dispatch.sink_concurrency = 1;
    c.dispatch.attempt_timeout_ms = 100;
    c.retry.max_attempts = 2;
    c.sources
        .push(source_of_kinds("hung", "default", &["gate"]));
    c.sources.push(source_of_kinds("good", "default", &["ok"]));
    let (release, gate) = crossbeam_channel::bounded::<()>(0);
    let (counting, delivered) = counting_sink();
    let engine = Engine::builder(c)
        .sink(
            "gate",
            sink(move |_| {
                let _ = gate.recv();
                Ok(())
            }),
        )
        .sink("ok", counting)
        .open()
        .unwrap();
    engine.commit(NewHook::new("hung", "x")).unwrap();
    engine.commit(NewHook::new("good", "y")).unwrap();
    wait_until("the healthy delivery", Duration::from_secs(1), || {
        delivered.load(Ordering::SeqCst) == 1
    });
    engine.tick().unwrap();
    let dead = dead(&engine);
    assert_eq!(dead.len(), 1);
    assert_eq!(
        dead[0].record.error.as_deref(),
        Some("sink gate: attempt_timeout: no result after 100 ms")
    );
    assert_eq!(dead[0].record.attempts, 2);
    assert_eq!(engine.stats()[0].timed_out, 2);
    assert!(
        engine.stats()[0].abandoned_workers >= 1,
        "the stuck workers are reported"
    );
    drop(release);
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

/// A worker started in place of a stuck one runs on every CPU the engine's
/// opener may use: a Linux thread inherits its creator's affinity, and the
/// replacement is started by the shard thread, which is pinned to one core.
#[cfg(target_os = "linux")]
#[test]
fn a_replacement_io_worker_is_not_pinned_to_its_shards_core() {
    fn allowed_cpus() -> usize {
        // SAFETY: `cpu_set_t` is plain bits, written by the call.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            assert_eq!(
                libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set),
                0
            );
            libc::CPU_COUNT(&set) as usize
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.dispatch.concurrency = 1;
    c.dispatch.sink_concurrency = 1;
    c.dispatch.attempt_timeout_ms = 100;
    c.retry.max_attempts = 1;
    c.sources
        .push(source_of_kinds("hung", "default", &["gate"]));
    c.sources
        .push(source_of_kinds("probe", "default", &["probe"]));
    let (release, gate) = crossbeam_channel::bounded::<()>(0);
    let (seen_tx, seen) = crossbeam_channel::unbounded::<usize>();
    let engine = Engine::builder(c)
        .sink(
            "gate",
            sink(move |_| {
                let _ = gate.recv();
                Ok(())
            }),
        )
        .sink(
            "probe",
            sink(move |_| {
                let _ = seen_tx.send(allowed_cpus());
                Ok(())
            }),
        )
        .open()
        .unwrap();
    engine.commit(NewHook::new("hung", "x")).unwrap();
    wait_until(
        "the pool's one worker to be replaced",
        Duration::from_secs(5),
        || engine.stats()[0].abandoned_workers == 1,
    );
    // The only worker able to take this attempt is the replacement.
    engine.commit(NewHook::new("probe", "y")).unwrap();
    let cpus = seen.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(cpus, allowed_cpus());
    drop(release);
}

/// Scenario 8: sinks [always-fail, tag] with two attempts: tag delivered
/// once; exactly one dead row with the sink's last error; the hook is kept.
#[test]
fn a_dead_lettered_row_keeps_its_hook_while_the_other_sink_delivers() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.retry.max_attempts = 2;
    c.sources
        .push(source_of_kinds("s", "t", &["always_fail", "tag"]));
    let (tagging, tagged) = counting_sink();
    let engine = Engine::builder(c)
        .sink(
            "always_fail",
            sink(|_| Err(SinkError::transient(std::io::Error::other("always")))),
        )
        .sink("tag", tagging)
        .open()
        .unwrap();
    engine.commit(NewHook::new("s", "x")).unwrap();
    engine.tick().unwrap();
    assert_eq!(tagged.load(Ordering::SeqCst), 1);
    let dead = dead(&engine);
    assert_eq!(dead.len(), 1);
    assert_eq!(
        dead[0].record.error.as_deref(),
        Some("sink always_fail: always")
    );
    assert_eq!(dead[0].row.sink_index, 0);
    assert_eq!(engine.hook_count().unwrap(), 1);
}

/// Scenario 10 (D3): a sink that panics and an endpoint that answers garbage
/// are failed attempts; the shard keeps serving.
#[test]
fn a_panicking_sink_and_a_garbage_answer_are_failed_attempts_not_a_dead_shard() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let garbage_url = format!("http://{}/", garbage.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in garbage.incoming().flatten() {
            let mut stream = stream;
            let mut buf = [0u8; 4096];
            let _ = std::io::Read::read(&mut stream, &mut buf);
            let _ = std::io::Write::write_all(&mut stream, b"this is not http\r\n\r\n");
        }
    });
    let ok = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut c = config(dir.path());
    c.retry.max_attempts = 1;
    c.sources.push(source(
        "s",
        "t",
        vec![
            SinkConfig::of_kind("raising"),
            SinkConfig::http(garbage_url),
        ],
    ));
    c.sources
        .push(source("after", "t", vec![SinkConfig::http(ok.url("/"))]));
    let engine = Engine::builder(c)
        .sink("raising", sink(|_| panic!("boom")))
        .open()
        .unwrap();
    engine.commit(NewHook::new("s", "x")).unwrap();
    engine.tick().unwrap();
    let mut reasons: Vec<String> = dead(&engine)
        .into_iter()
        .map(|r| r.record.error.unwrap())
        .collect();
    reasons.sort();
    assert_eq!(reasons.len(), 2);
    assert!(reasons[0].starts_with("sink http: "), "{reasons:?}");
    assert_eq!(reasons[1], "sink raising: sink panicked: boom");
    engine.commit(NewHook::new("after", "y")).unwrap();
    engine.tick().unwrap();
    assert_eq!(ok.count(), 1);
}

/// Scenario 14: a permanent error dead-letters after one attempt.
#[test]
fn a_permanent_error_dead_letters_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.retry.max_attempts = 5;
    c.sources.push(source_of_kinds("s", "t", &["gone"]));
    let engine = Engine::builder(c)
        .sink(
            "gone",
            sink(|_| Err(SinkError::permanent(std::io::Error::other("gone")))),
        )
        .open()
        .unwrap();
    engine.commit(NewHook::new("s", "x")).unwrap();
    engine.tick().unwrap();
    let dead = dead(&engine);
    assert_eq!((dead.len(), dead[0].record.attempts), (1, 1));
    assert_eq!(
        dead[0].record.error.as_deref(),
        Some("sink gone: permanent: gone")
    );
}

/// Scenario 15: `Retry-After` of 60 s: the row waits (tick does not), with
/// one attempt spent and its due time at least 60 s out.
#[test]
fn retry_after_defers_the_row_past_the_asked_delay() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|_| Reply::status(503).header("retry-after", "60")).unwrap();
    let c = config_with_http_sink(dir.path(), &receiver.url("/"));
    let engine = Engine::open(c).unwrap();
    let before_ms = goad::runtime::wall_ms();
    engine.commit(NewHook::new("s", "x")).unwrap();
    assert_eq!(engine.tick().unwrap(), 0);
    let rows = rows(&engine);
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (rows[0].record.status, rows[0].record.attempts),
        (RowStatus::Pending, 1)
    );
    assert!(
        rows[0].record.at_ms >= before_ms + 60_000,
        "due at {} (committed at {before_ms})",
        rows[0].record.at_ms
    );
    assert_eq!(
        rows[0].record.error.as_deref(),
        Some("retry after 60000 ms: HTTP status 503")
    );
}

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
        engine.stats()[0].running == 2 && arrivals.load(Ordering::SeqCst) == 2
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

/// Scenario 18: with breakers off, a failing sink spends every attempt.
#[test]
fn every_attempt_is_spent_before_a_row_is_dead_lettered() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.retry.max_attempts = 3;
    c.sources.push(source_of_kinds("s", "t", &["fail"]));
    let engine = Engine::builder(c)
        .sink(
            "fail",
            sink(|_| Err(SinkError::transient(std::io::Error::other("no")))),
        )
        .open()
        .unwrap();
    for _ in 0..6 {
        engine.commit(NewHook::new("s", "x")).unwrap();
    }
    engine.tick().unwrap();
    let dead = dead(&engine);
    assert_eq!(dead.len(), 6);
    assert!(dead.iter().all(|r| r.record.attempts == 3));
}

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
        || tagged.load(Ordering::SeqCst) == 1 && engine.stats()[0].running == 1,
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
    c.sources = vec![source_of_kinds("other", "t", &["later"])];
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

/// Two shards: tenants hash to both and every hook is delivered.
#[test]
fn hooks_of_many_tenants_over_two_shards_are_all_delivered() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(|_| Reply::status(200)).unwrap();
    let mut c = config(dir.path());
    c.shards = 2;
    for t in 0..8 {
        c.sources.push(source(
            &format!("s{t}"),
            &format!("tenant-{t}"),
            vec![SinkConfig::http(receiver.url(&format!("/{t}")))],
        ));
    }
    let engine = Engine::open(c).unwrap();
    let shards_used: std::collections::HashSet<usize> = (0..8)
        .map(|t| Engine::shard_of(&format!("tenant-{t}"), 2))
        .collect();
    assert_eq!(
        shards_used.len(),
        2,
        "the test tenants spread over both shards"
    );
    for i in 0..400 {
        engine
            .commit(NewHook::new(format!("s{}", i % 8), format!("{i}")))
            .unwrap();
    }
    engine.tick().unwrap();
    assert_eq!(receiver.count(), 400);
    assert_eq!(engine.hook_count().unwrap(), 0);
}

/// `tick` counts the rows settled while it waits: three rows held by a gate
/// until the tick is waiting settle during the call.
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
        || engine.stats()[0].running == 3,
    );
    std::thread::scope(|scope| {
        let ticking = scope.spawn(|| engine.tick().unwrap());
        wait_until("the tick waiting", Duration::from_secs(2), || {
            engine.stats()[0].tick_waiters == 1
        });
        for _ in 0..3 {
            open.send(()).unwrap();
        }
        assert_eq!(ticking.join().unwrap(), 3);
    });
}

/// Breakers keep a hung tenant from hurting another: tenant A's endpoint
/// accepts requests and never answers (10,000 hooks); after `breaker_failures` timeouts its
/// breaker opens and its rows park, spending no attempts, while tenant B's
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
    c.dispatch.breaker_failures = 5;
    c.dispatch.breaker_open_ms = 60_000;
    c.dispatch.breaker_max_open_ms = 60_000;
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
        engine.stats()[0].breakers_open == 1
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
    wait_until("every row of A parked", Duration::from_secs(10), || {
        let s = engine.stats()[0];
        s.claimed_rows == 0 && s.parked >= 9_988
    });
    let s = engine.stats()[0];
    assert_eq!(
        (s.breaker_opens, s.breaker_closes),
        (1, 0),
        "opened once, for the minute"
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

/// `dead_letter_source`: pending rows are dead-lettered as `source_gone`,
/// counted and reported to the host's observer; a row claimed by a running
/// attempt is left to settle.
#[test]
fn dead_letter_source_dead_letters_pending_rows_and_leaves_claimed_ones() {
    use goad::{Outcome, OutcomeEvent};
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.dispatch.tenants.insert("t".into(), tenant_limits(1, 1));
    c.sources.push(source_of_kinds("doomed", "t", &["gate"]));
    let gate = gate();
    let seen = Arc::new(parking_lot::Mutex::new(Vec::<OutcomeEvent>::new()));
    let observed = seen.clone();
    let engine = Engine::builder(c)
        .sink("gate", gate.sink.clone())
        .on_outcome(move |event| observed.lock().push(event.clone()))
        .open()
        .unwrap();
    let open = gate.open;
    let mut ids: Vec<String> = (0..10)
        .map(|_| engine.commit(NewHook::new("doomed", "x")).unwrap())
        .collect();
    wait_until(
        "one attempt held at the gate",
        Duration::from_secs(2),
        || engine.stats()[0].running == 1,
    );
    assert_eq!(engine.dead_letter_source("doomed").unwrap(), 9);
    let events = std::mem::take(&mut *seen.lock());
    let gone = Outcome::Dead {
        reason: "source_gone: doomed".into(),
    };
    assert!(events.iter().all(|e| e.outcome == gone
        && e.attempt == 0
        && (&*e.source_id, &*e.sink_type) == ("doomed", "gate")));
    let mut reported: Vec<String> = events.into_iter().map(|e| e.hook_id).collect();
    assert_eq!(
        engine.dead_letter_source("doomed").unwrap(),
        0,
        "nothing pending is left"
    );
    let dead = dead(&engine);
    assert_eq!(dead.len(), 9);
    assert!(dead.iter().all(
        |r| r.record.error.as_deref() == Some("source_gone: doomed") && r.record.attempts == 0
    ));
    open.send(()).unwrap();
    engine.tick().unwrap();
    assert_eq!(
        rows(&engine).len(),
        9,
        "the claimed row settled (delivered); the dead ones stay"
    );
    let delivered = seen.lock().clone();
    assert_eq!(delivered.len(), 1);
    assert_eq!(
        (delivered[0].outcome.clone(), delivered[0].attempt),
        (Outcome::Delivered, 1)
    );
    reported.push(delivered[0].hook_id.clone());
    reported.sort();
    ids.sort();
    assert_eq!(
        reported, ids,
        "each hook reported once: 9 dead, 1 delivered"
    );
    engine.shutdown();
    assert_eq!(engine.dead_letter_source("doomed"), Err(goad::Unavailable));
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
        engine.stats()[0].running == 8
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
        engine.stats()[0].running == 4
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
        || engine.stats()[0].running == 2,
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
        || engine.stats()[0].running == 16,
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

/// Group commit: commits queued together share one sync, and each is
/// answered only once its batch is durable.
#[test]
fn commits_queued_together_share_a_sync() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.sources.push(source_of_kinds("s", "t", &["count"]));
    let (count, delivered) = counting_sink();
    let engine = Engine::builder(c).sink("count", count).open().unwrap();
    let (done_tx, done_rx) = crossbeam_channel::unbounded();
    // Queued back to back without waiting: far faster than one store commit.
    for _ in 0..200 {
        let done = done_tx.clone();
        engine
            .commit_then(NewHook::new("s", "x"), move |r| done.send(r).unwrap())
            .unwrap();
    }
    for _ in 0..200 {
        done_rx
            .recv_timeout(Duration::from_secs(10))
            .unwrap()
            .unwrap();
    }
    engine.tick().unwrap();
    assert_eq!(delivered.load(Ordering::SeqCst), 200);
    // Gauges are published after an iteration's answers: wait for them.
    wait_until(
        "the stats count 200 commits",
        Duration::from_secs(5),
        || engine.stats()[0].commits == 200,
    );
    let syncs = engine.stats()[0].group_commits;
    assert!(syncs < 200, "200 queued commits took {syncs} syncs");
}

/// An attempt starts only once its hook is durable, also while later
/// batches sync (attempts of earlier rows start before each sync): a sink
/// that looks its hook up in a fresh read of the store (which sees only
/// committed, so synced, batches) finds it at every attempt.
#[test]
fn every_attempt_starts_after_its_hook_is_durable() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.sources.push(source_of_kinds("s", "t", &["check"]));
    let engine_slot: Arc<parking_lot::Mutex<Option<Arc<Engine>>>> = Arc::default();
    let (checked, not_stored) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    let check = {
        let (slot, checked, not_stored) =
            (engine_slot.clone(), checked.clone(), not_stored.clone());
        sink(move |d| {
            let engine = slot
                .lock()
                .clone()
                .expect("the engine is set before any commit");
            if !engine
                .rows()
                .unwrap()
                .iter()
                .any(|r| r.hook_id == d.hook.id)
            {
                not_stored.fetch_add(1, Ordering::SeqCst);
            }
            checked.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
    };
    let engine = Arc::new(Engine::builder(c).sink("check", check).open().unwrap());
    *engine_slot.lock() = Some(engine.clone());
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                for _ in 0..50 {
                    engine.commit(NewHook::new("s", "x")).unwrap();
                }
            });
        }
    });
    engine.tick().unwrap();
    assert_eq!(
        (
            checked.load(Ordering::SeqCst),
            not_stored.load(Ordering::SeqCst)
        ),
        (400, 0)
    );
    engine_slot.lock().take();
    engine.shutdown();
}

/// Reference scenario 9 through the library: a row dead after its one
/// attempt is replayed once its sink is fixed: delivered once, carrying the
/// replay's id, counted, its hook reclaimed; nothing is left to replay.
#[test]
fn a_replay_redelivers_a_dead_row_once_its_sink_is_fixed() {
    let dir = tempfile::tempdir().unwrap();
    let fixed = Arc::new(AtomicBool::new(false));
    let receiver = Receiver::start({
        let fixed = fixed.clone();
        move |_| {
            Reply::status(if fixed.load(Ordering::SeqCst) {
                200
            } else {
                500
            })
        }
    })
    .unwrap();
    let mut c = config(dir.path());
    c.retry.max_attempts = 1;
    c.sources
        .push(source("s", "t", vec![SinkConfig::http(receiver.url("/"))]));
    let engine = Engine::open(c).unwrap();
    engine.commit(NewHook::new("s", "x")).unwrap();
    engine.tick().unwrap();
    assert_eq!(dead(&engine).len(), 1);
    fixed.store(true, Ordering::SeqCst);
    let all = goad::store::DeadFilter::default();
    let replayed = engine.replay(&all).unwrap();
    assert_eq!(replayed.moved, 1);
    engine.tick().unwrap();
    let got = receiver.received();
    let statuses: Vec<u16> = got.iter().map(|r| r.status).collect();
    assert_eq!(statuses, vec![500, 200]);
    assert_eq!(
        got[1].header("x-goad-replay-id"),
        Some(replayed.replay_id.as_str())
    );
    assert_eq!(
        engine.replay_counters(&replayed.replay_id).unwrap(),
        goad::store::ReplayCounts {
            moved: 1,
            delivered: 1,
            dead_again: 0,
            parked: 0
        }
    );
    assert_eq!(engine.hook_count().unwrap(), 0);
    assert_eq!(engine.replay(&all).unwrap().moved, 0, "nothing left dead");
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

/// Purging dead letters deletes the matching dead rows for good, each hook
/// with its last row, and leaves the rest; the store stays sound.
#[test]
fn purging_dead_letters_deletes_them_and_their_hooks_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.shards = 2;
    // Source a's hooks: one row delivered, one dead; source b's: one dead.
    c.sources.push(source_of_kinds("a", "t1", &["ok", "fail"]));
    c.sources.push(source_of_kinds("b", "t2", &["fail"]));
    let engine = Engine::builder(c.clone())
        .sink("ok", sink(|_| Ok(())))
        .sink("fail", sink(|_| Err(SinkError::permanent("gone"))))
        .open()
        .unwrap();
    for _ in 0..3 {
        engine.commit(NewHook::new("a", "x")).unwrap();
    }
    for _ in 0..2 {
        engine.commit(NewHook::new("b", "x")).unwrap();
    }
    engine.tick().unwrap();
    assert_eq!((dead(&engine).len(), engine.hook_count().unwrap()), (5, 5));
    let of_a = goad::store::DeadFilter {
        source_id: Some("a".into()),
        ..Default::default()
    };
    assert_eq!(engine.purge_dead_letters(&of_a).unwrap(), 3);
    let left: Vec<String> = dead(&engine).iter().map(|r| r.source_id.clone()).collect();
    assert_eq!(
        (left, engine.hook_count().unwrap()),
        (vec!["b".into(), "b".into()], 2)
    );
    assert_eq!(engine.purge_dead_letters(&of_a).unwrap(), 0, "none left");
    let all = goad::store::DeadFilter::default();
    assert_eq!(engine.purge_dead_letters(&all).unwrap(), 2);
    assert_eq!((dead(&engine).len(), engine.hook_count().unwrap()), (0, 0));
    engine.shutdown();
    drop(engine);
    for shard in goad::store::verify_data_dir(&c.data_dir, 2).unwrap() {
        assert_eq!(shard.problems, Vec::<String>::new());
    }
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
        down.stats()[0].breakers_open == 1
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
        up.stats()[0].breakers_open == 1
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

/// With `dead_letters.retention_ms`, a shard deletes the rows dead longer
/// than that, and none sooner: each hook goes with its last row, while a
/// hook that still has a pending row stays, its expired sink shown purged.
/// The shard counts what it deleted.
#[test]
fn dead_letters_past_their_retention_are_deleted_and_none_sooner() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.dead_letters.retention_ms = 1_000;
    c.sources.push(source_of_kinds("s", "t", &["refuse"]));
    c.sources
        .push(source_of_kinds("both", "t", &["refuse", "gate"]));
    let gate = gate();
    let engine = Engine::builder(c)
        .sink("refuse", sink(|_| Err(SinkError::permanent("no"))))
        .sink("gate", gate.sink.clone())
        .open()
        .unwrap();
    let mut ids: Vec<String> = (0..3)
        .map(|n| engine.commit(NewHook::new("s", format!("{n}"))).unwrap())
        .collect();
    let held = engine.commit(NewHook::new("both", "held")).unwrap();
    ids.push(held.clone());
    let all = goad::store::DeadFilter::default();
    let dead_at = |engine: &Engine| -> Vec<(String, u64)> {
        let page = engine.dead_letters(&all, None, 100).unwrap();
        page.into_iter()
            .map(|d| (d.hook_id, d.position.dead_at_ms))
            .collect()
    };
    wait_until("4 dead", Duration::from_secs(10), || {
        dead_at(&engine).len() == 4
    });
    let died: std::collections::HashMap<String, u64> = dead_at(&engine).into_iter().collect();
    // Watch each dead letter go: none may go before its retention is over.
    let mut gone_at = std::collections::HashMap::new();
    wait_until("every dead letter deleted", Duration::from_secs(20), || {
        let now_ms = goad::runtime::wall_ms();
        let left: Vec<String> = dead_at(&engine).into_iter().map(|(id, _)| id).collect();
        for id in died.keys().filter(|id| !left.contains(id)) {
            gone_at.entry(id.clone()).or_insert(now_ms);
        }
        left.is_empty()
    });
    for (id, dead_at_ms) in &died {
        assert!(
            gone_at[id] >= dead_at_ms + 1_000,
            "hook {id} dead at {dead_at_ms} was deleted by {}",
            gone_at[id]
        );
    }
    // The shard publishes its count after the purge step that deleted them.
    wait_until(
        "the shard's count of expired rows",
        Duration::from_secs(10),
        || engine.stats()[0].dead_expired == 4,
    );
    for id in &ids[..3] {
        assert!(engine.hook_status(id).unwrap().is_none(), "{id} is gone");
    }
    let kept = engine.hook_status(&held).unwrap().unwrap();
    let states: Vec<_> = kept
        .sinks
        .iter()
        .map(|s| (s.sink_index, &s.state))
        .collect();
    assert!(
        matches!(
            states[..],
            [
                (0, goad::SinkState::Purged),
                (1, goad::SinkState::InFlight(_))
            ]
        ),
        "{states:?}"
    );
    gate.open.send(()).unwrap();
    wait_until("the held hook delivered", Duration::from_secs(10), || {
        engine.hook_count().unwrap() == 0
    });
}

/// A source with `dedupe_window_ms` stores a hook with a dedupe key once
/// per window: committing the key again, from one thread or from many at
/// once (within one group commit too), answers the first hook's id and
/// stores nothing; another key, a hook without one, or another source's
/// hook is stored; once the window ends, the key is stored again.
#[test]
fn a_dedupe_key_is_stored_once_per_window() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    let mut long = source_of_kinds("long", "t", &["count"]);
    long.dedupe_window_ms = Some(3_600_000);
    let mut short = source_of_kinds("short", "t", &["count"]);
    short.dedupe_window_ms = Some(1_000);
    c.sources
        .extend([long, short, source_of_kinds("none", "t", &["count"])]);
    let (counting, delivered) = counting_sink();
    let engine = Arc::new(Engine::builder(c).sink("count", counting).open().unwrap());
    let keyed = |source: &str, key: Option<&str>| NewHook {
        dedupe_key: key.map(str::to_string),
        ..NewHook::new(source, "x")
    };
    let first = engine.commit(keyed("long", Some("evt-1"))).unwrap();
    assert_eq!(engine.commit(keyed("long", Some("evt-1"))).unwrap(), first);
    let racing: Vec<String> = (0..16)
        .map(|_| {
            let engine = engine.clone();
            std::thread::spawn(move || engine.commit(keyed("long", Some("evt-2"))).unwrap())
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|t| t.join().unwrap())
        .collect();
    assert!(racing.iter().all(|id| *id == racing[0]), "{racing:?}");
    let others = [
        engine.commit(keyed("long", None)).unwrap(),
        engine.commit(keyed("long", None)).unwrap(),
        engine.commit(keyed("none", Some("evt-1"))).unwrap(),
        engine.commit(keyed("none", Some("evt-1"))).unwrap(),
    ];
    let mut ids: Vec<&String> = others.iter().chain([&first, &racing[0]]).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 6, "each stored hook has its own id");
    let short_first = engine.commit(keyed("short", Some("evt-1"))).unwrap();
    let committed_at_ms = goad::runtime::wall_ms();
    wait_until("the short window over", Duration::from_secs(5), || {
        goad::runtime::wall_ms() > committed_at_ms + 1_000
    });
    let short_again = engine.commit(keyed("short", Some("evt-1"))).unwrap();
    assert_ne!(short_again, short_first, "stored again after its window");
    wait_until("8 hooks delivered", Duration::from_secs(10), || {
        delivered.load(Ordering::SeqCst) == 8 && engine.hook_count().unwrap() == 0
    });
    let stats = engine.stats()[0];
    assert_eq!((stats.commits, stats.duplicates), (8, 16));
}
