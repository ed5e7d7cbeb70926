//! Batching sinks (reference scenario: "10 (SQS) / up to 1,000 (Pub/Sub)
//! attempts share one request even with sink_concurrency 8; each row
//! settles on its own entry's result; timeout per attempt; open breaker of
//! one tenant keeps its entries out of others' batches"), with a host sink
//! that batches: a batch is one call of the sink and takes one slot, and
//! each attempt in it is still its own.

mod common;

use common::*;
use goad::{Config, Delivery, Engine, NewHook, Sink, SinkError};
use parking_lot::Mutex;
use std::num::NonZeroU16;
use std::sync::Arc;
use std::time::Duration;

/// One entry of a call as the sink saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    tenant: String,
    body: String,
    attempt: u32,
}

/// A host sink batching up to 10 attempts. It records each call; a call
/// with a first attempt whose body starts with `hold` waits for one permit
/// of `open` first. Each entry is answered by its body: `permanent` is
/// refused for good, `transient` fails, `flaky` fails its first attempt,
/// anything else is taken.
struct Batcher {
    calls: Mutex<Vec<Vec<Entry>>>,
    permits: crossbeam_channel::Receiver<()>,
}

impl Batcher {
    fn new() -> (Arc<Batcher>, crossbeam_channel::Sender<()>) {
        let (open, permits) = crossbeam_channel::unbounded();
        let batcher = Batcher {
            calls: Mutex::new(Vec::new()),
            permits,
        };
        (Arc::new(batcher), open)
    }

    fn calls(&self) -> Vec<Vec<Entry>> {
        self.calls.lock().clone()
    }

    /// The size of each call so far, in order.
    fn sizes(&self) -> Vec<usize> {
        self.calls.lock().iter().map(Vec::len).collect()
    }
}

impl Sink for Batcher {
    fn deliver(&self, delivery: &Delivery<'_>) -> Result<(), SinkError> {
        panic!("a batching sink is called by batch, not for {delivery:?}")
    }

    fn batch_max_entries(&self) -> Option<NonZeroU16> {
        NonZeroU16::new(10)
    }

    fn deliver_batch(&self, deliveries: &[Delivery<'_>]) -> Vec<Result<(), SinkError>> {
        let deadline = deliveries[0].deadline;
        assert!(
            deliveries.iter().all(|d| d.deadline == deadline),
            "the attempts of one batch have one deadline"
        );
        let entries: Vec<Entry> = deliveries
            .iter()
            .map(|d| Entry {
                tenant: d.hook.tenant.to_string(),
                body: String::from_utf8_lossy(&d.hook.body).into_owned(),
                attempt: d.attempt,
            })
            .collect();
        self.calls.lock().push(entries.clone());
        if entries
            .iter()
            .any(|e| e.body.starts_with("hold") && e.attempt == 1)
        {
            self.permits.recv().expect("the test holds the gate open");
        }
        entries
            .iter()
            .map(|entry| match entry.body.as_str() {
                "permanent" => Err(SinkError::permanent("refused for good")),
                "transient" => Err(SinkError::transient("not now")),
                "flaky" if entry.attempt == 1 => Err(SinkError::transient("first time")),
                _ => Ok(()),
            })
            .collect()
    }
}

/// One shard; source `s` of tenant `t` (and `s2` of tenant `t2`) deliver
/// to the batching sink.
fn batching_config(dir: &std::path::Path) -> Config {
    let mut c = config(dir);
    c.sources.push(source_of_kinds("s", "t", &["batch"]));
    c.sources.push(source_of_kinds("s2", "t2", &["batch"]));
    c
}

fn open_with(c: Config, batcher: &Arc<Batcher>) -> Engine {
    Engine::builder(c)
        .sink("batch", batcher.clone())
        .open()
        .expect("the engine opens")
}

fn queued(engine: &Engine) -> u64 {
    engine.stats()[0].core.queued
}

#[test]
fn ten_attempts_share_one_call_while_sink_concurrency_calls_run() {
    let dir = tempfile::tempdir().unwrap();
    let (batcher, open) = Batcher::new();
    let engine = open_with(batching_config(dir.path()), &batcher);
    // Eight held calls of one: the key's sink_concurrency, all running.
    for i in 0..8 {
        engine
            .commit(NewHook::new("s", format!("hold-{i}")))
            .unwrap();
        wait_until("the call started", Duration::from_secs(10), || {
            batcher.sizes().len() == i + 1
        });
    }
    for i in 0..25 {
        engine.commit(NewHook::new("s", format!("{i}"))).unwrap();
    }
    wait_until("25 rows queued", Duration::from_secs(10), || {
        queued(&engine) == 25
    });
    let stats = engine.stats()[0];
    assert_eq!((stats.core.running, stats.core.calls), (8, 8));
    for _ in 0..8 {
        open.send(()).unwrap();
    }
    wait_until("every hook delivered", Duration::from_secs(10), || {
        engine.hook_count().unwrap() == 0
    });
    // The three calls run at once, in any order.
    let mut sizes = batcher.sizes();
    sizes[8..].sort();
    assert_eq!(sizes, [1, 1, 1, 1, 1, 1, 1, 1, 5, 10, 10]);
    let mut bodies: Vec<String> = batcher
        .calls()
        .concat()
        .into_iter()
        .map(|e| e.body)
        .collect();
    bodies.sort();
    bodies.dedup();
    assert_eq!(bodies.len(), 33, "each hook delivered once");
    assert_eq!(engine.stats()[0].core.delivered, 33);
}

#[test]
fn each_attempt_of_a_batch_settles_on_its_own_result() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = batching_config(dir.path());
    c.dispatch.sink_concurrency = 1;
    let (batcher, open) = Batcher::new();
    let engine = open_with(c, &batcher);
    engine.commit(NewHook::new("s", "hold")).unwrap();
    wait_until("the held call started", Duration::from_secs(10), || {
        batcher.sizes() == [1]
    });
    for body in ["ok", "permanent", "flaky", "transient", "ok"] {
        engine.commit(NewHook::new("s", body)).unwrap();
    }
    wait_until("five rows queued", Duration::from_secs(10), || {
        queued(&engine) == 5
    });
    open.send(()).unwrap();
    wait_until("every row settled", Duration::from_secs(20), || {
        engine.hook_count().unwrap() == 2 && dead(&engine).len() == 2
    });
    let calls = batcher.calls();
    let bodies = |call: &[Entry]| call.iter().map(|e| e.body.clone()).collect::<Vec<_>>();
    assert_eq!(
        bodies(&calls[1]),
        ["ok", "permanent", "flaky", "transient", "ok"],
        "one call, in commit order"
    );
    // Only the failed entries come again: the flaky one until it passes,
    // the transient one until its attempts run out.
    let retried: Vec<Entry> = calls[2..].concat();
    assert!(retried
        .iter()
        .all(|e| e.body == "flaky" || e.body == "transient"));
    let flaky: Vec<u32> = retried
        .iter()
        .filter(|e| e.body == "flaky")
        .map(|e| e.attempt)
        .collect();
    assert_eq!(flaky, [2]);
    assert_eq!(
        dead_attempts_and_reasons(&engine),
        [
            (1, "sink batch: permanent: refused for good".to_string()),
            (10, "sink batch: not now".to_string())
        ]
    );
    assert_eq!(engine.stats()[0].core.delivered, 4);
}

#[test]
fn each_attempt_of_a_hung_batch_times_out_on_its_own_and_is_retried() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = batching_config(dir.path());
    c.dispatch.sink_concurrency = 1;
    c.dispatch.attempt_timeout_ms = 1_000;
    c.retry.base_ms = 1_000;
    let (batcher, open) = Batcher::new();
    let engine = open_with(c, &batcher);
    engine.commit(NewHook::new("s", "hold-first")).unwrap();
    wait_until("the first call started", Duration::from_secs(10), || {
        batcher.sizes() == [1]
    });
    for body in ["a", "b", "hold-second"] {
        engine.commit(NewHook::new("s", body)).unwrap();
    }
    wait_until("three rows queued", Duration::from_secs(10), || {
        queued(&engine) == 3
    });
    // The first call ends at its deadline, and the second, which took the
    // freed slot, at its own: each of its attempts fails as timed out.
    wait_until("both calls timed out", Duration::from_secs(10), || {
        engine.stats()[0].core.timed_out == 4
    });
    let second = &batcher.calls()[1];
    assert_eq!(second.len(), 3);
    assert!(second.iter().all(|e| e.attempt == 1));
    // Released, the late results change nothing; the rows are retried a
    // second later and pass.
    for _ in 0..2 {
        open.send(()).unwrap();
    }
    wait_until("every row delivered", Duration::from_secs(20), || {
        engine.hook_count().unwrap() == 0
    });
    let later: Vec<Entry> = batcher.calls()[2..].concat();
    let mut retried: Vec<(String, u32)> = later.into_iter().map(|e| (e.body, e.attempt)).collect();
    retried.sort();
    assert_eq!(
        retried,
        [
            ("a".to_string(), 2),
            ("b".to_string(), 2),
            ("hold-first".to_string(), 2),
            ("hold-second".to_string(), 2)
        ]
    );
    assert_eq!(
        engine.stats()[0].core.timed_out,
        4,
        "no late result counted"
    );
}

#[test]
fn an_open_breaker_keeps_its_tenants_entries_out_of_other_tenants_batches() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = batching_config(dir.path());
    c.dispatch.breaker_failures = 2;
    c.dispatch.breaker_open_ms = 60_000;
    c.dispatch.breaker_max_open_ms = 60_000;
    let (batcher, _open) = Batcher::new();
    let engine = open_with(c, &batcher);
    for _ in 0..5 {
        engine.commit(NewHook::new("s", "transient")).unwrap();
        engine.commit(NewHook::new("s2", "ok")).unwrap();
    }
    wait_until(
        "t2's hooks delivered and t's breaker open",
        Duration::from_secs(10),
        || {
            let s = engine.stats()[0];
            s.core.breakers_open == 1 && engine.hook_count().unwrap() == 5
        },
    );
    let calls = batcher.calls();
    for call in &calls {
        assert!(
            call.iter().all(|e| e.tenant == call[0].tenant),
            "a call mixes tenants: {call:?}"
        );
    }
    let ok_entries = calls.concat().iter().filter(|e| e.body == "ok").count();
    assert_eq!(ok_entries, 5, "t2's hooks once each");
    // t's rows wait out the breaker, parked, with the attempts they spent.
    let pending: Vec<(u32, String)> = engine
        .rows()
        .unwrap()
        .into_iter()
        .map(|r| (r.record.attempts, r.record.error.unwrap_or_default()))
        .collect();
    assert_eq!(pending.len(), 5);
    assert!(
        pending.iter().all(|(_, error)| error == "breaker open"),
        "{pending:?}"
    );
    let spent: u32 = pending.iter().map(|(attempts, _)| attempts).sum();
    let t_entries = calls.concat().iter().filter(|e| e.tenant == "t").count();
    assert_eq!(t_entries, spent as usize, "every attempt made is counted");
}

/// A batching sink whose every batch fails in the same way.
struct Broken(fn(&[Delivery<'_>]) -> Vec<Result<(), SinkError>>);

impl Sink for Broken {
    fn deliver(&self, _: &Delivery<'_>) -> Result<(), SinkError> {
        Ok(())
    }

    fn batch_max_entries(&self) -> Option<NonZeroU16> {
        NonZeroU16::new(5)
    }

    fn deliver_batch(&self, deliveries: &[Delivery<'_>]) -> Vec<Result<(), SinkError>> {
        (self.0)(deliveries)
    }
}

#[test]
fn a_batch_that_panics_or_miscounts_fails_each_of_its_attempts() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.retry.max_attempts = 1;
    c.sources
        .push(source_of_kinds("s", "t", &["panics", "miscounts"]));
    let panics = Broken(|_| panic!("boom"));
    let miscounts = Broken(|_| Vec::new());
    let engine = Engine::builder(c)
        .sink("panics", Arc::new(panics))
        .sink("miscounts", Arc::new(miscounts))
        .open()
        .unwrap();
    engine.commit(NewHook::new("s", "x")).unwrap();
    wait_until("both rows dead-lettered", Duration::from_secs(10), || {
        dead(&engine).len() == 2
    });
    assert_eq!(
        dead_attempts_and_reasons(&engine),
        [
            (
                1,
                "sink miscounts: the sink answered 0 results for a batch of 1".to_string()
            ),
            (1, "sink panics: sink panicked: boom".to_string())
        ]
    );
}
