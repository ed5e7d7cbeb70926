//! Rows delivered, retried and dead-lettered: each sink once, retries until
//! ok, permanent errors, `Retry-After`, timeouts, panics and garbage answers
//! as failed attempts, and the order of commit and attempt.

use super::*;

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

/// `config(dir)` with `concurrency` attempts at once (a sink's too), each
/// failed after 100 ms, `max_attempts` of them, and source `hung` (of
/// tenant `default`) with one sink of type `gate`.
fn hung_source_config(dir: &std::path::Path, concurrency: u32, max_attempts: u32) -> goad::Config {
    let mut c = config(dir);
    c.dispatch.concurrency = concurrency;
    c.dispatch.sink_concurrency = concurrency;
    c.dispatch.attempt_timeout_ms = 100;
    c.retry.max_attempts = max_attempts;
    c.sources
        .push(source_of_kinds("hung", "default", &["gate"]));
    c
}

/// Scenario 7 (D6): an attempt that hangs is failed at the attempt deadline
/// and frees its slot; with two attempts the row is dead-lettered as
/// `attempt_timeout`, and the healthy source is delivered meanwhile.
#[test]
fn a_hung_attempt_times_out_frees_its_slot_and_dead_letters_after_its_attempts() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = hung_source_config(dir.path(), 1, 2);
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
    assert_eq!(engine.stats()[0].core.timed_out, 2);
    assert!(
        engine.stats()[0].abandoned_workers >= 1,
        "the stuck workers are reported"
    );
    drop(release);
}

/// A host sink is told when its attempt times out: the attempt timeout in
/// force when it started, counted from then (a reload changes it for the
/// attempts after).
#[test]
fn a_host_sink_is_told_its_attempts_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.dispatch.attempt_timeout_ms = 20_000;
    c.sources.push(source_of_kinds("s", "default", &["clock"]));
    let (told, left) = crossbeam_channel::unbounded();
    let engine = Engine::builder(c.clone())
        .sink(
            "clock",
            sink(move |d| {
                let _ = told.send(d.deadline.saturating_duration_since(Instant::now()));
                Ok(())
            }),
        )
        .open()
        .unwrap();
    engine.commit(NewHook::new("s", "x")).unwrap();
    engine.tick().unwrap();
    let first = left.try_recv().expect("one call");
    assert!(
        first <= Duration::from_secs(20) && first > Duration::from_secs(10),
        "{first:?} left of a 20 s attempt timeout"
    );
    c.dispatch.attempt_timeout_ms = 8_000;
    engine.reconfigure(&c).unwrap();
    engine.commit(NewHook::new("s", "y")).unwrap();
    engine.tick().unwrap();
    let second = left.try_recv().expect("one more call");
    assert!(
        second <= Duration::from_secs(8) && second > Duration::from_secs(4),
        "{second:?} left of an 8 s attempt timeout"
    );
}

/// A hung receiver's attempts, in a sink that gives up at its deadline:
/// each fails by then (as the sink's error, or as `attempt_timeout` when
/// the shard's timer came first), the row is dead after its two attempts,
/// and no worker stays stuck.
#[test]
fn a_sink_that_gives_up_at_its_deadline_leaves_no_worker_stuck() {
    let dir = tempfile::tempdir().unwrap();
    let c = hung_source_config(dir.path(), 1, 2);
    let (_hold, gate) = crossbeam_channel::bounded::<()>(0);
    let engine = Engine::builder(c)
        .sink(
            "gate",
            sink(move |d| match gate.recv_deadline(d.deadline) {
                Ok(()) => Ok(()),
                Err(_) => Err(SinkError::transient(std::io::Error::other("gave up"))),
            }),
        )
        .open()
        .unwrap();
    engine.commit(NewHook::new("hung", "x")).unwrap();
    engine.tick().unwrap();
    let dead = dead(&engine);
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].record.attempts, 2);
    let error = dead[0].record.error.clone().unwrap_or_default();
    let errors = [
        "sink gate: gave up",
        "sink gate: attempt_timeout: no result after 100 ms",
    ];
    assert_ended_by_its_deadline(&engine, &error, errors);
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
    let mut c = hung_source_config(dir.path(), 1, 1);
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
    let cpus = seen.recv_timeout(Duration::from_secs(30)).unwrap();
    assert_eq!(cpus, allowed_cpus());
    drop(release);
}

/// A shard starts no more than `MAX_ABANDONED_WORKERS` replacements for
/// workers stuck in calls that timed out. Once every worker is stuck, its
/// attempts wait queued and fail at their deadline as `attempt_timeout`,
/// and are taken off the queue then: when the sink lets go, none of them
/// runs late (each would repeat an attempt already failed). The stuck
/// workers count down as they come back.
#[test]
fn a_pool_whose_every_worker_is_stuck_fails_attempts_at_their_deadline_and_never_runs_them_late() {
    const HOOKS: u64 = 96;
    let dir = tempfile::tempdir().unwrap();
    let c = hung_source_config(dir.path(), 8, 1);
    let (release, gate) = crossbeam_channel::bounded::<()>(0);
    let calls = Arc::new(AtomicU32::new(0));
    let counted = calls.clone();
    let hung = sink(move |_| {
        counted.fetch_add(1, Ordering::SeqCst);
        let _ = gate.recv();
        Ok(())
    });
    let engine = Engine::builder(c).sink("gate", hung).open().unwrap();
    for _ in 0..HOOKS {
        engine.commit(NewHook::new("hung", "x")).unwrap();
    }
    // Nothing runs once every row is dead: the calls stuck in the sink
    // timed out.
    engine.tick().unwrap();
    // The pool's 8 workers and 64 replacements, each stuck in one call.
    let stuck = 8 + goad::limits::MAX_ABANDONED_WORKERS as u64;
    assert_eq!(engine.stats()[0].abandoned_workers, stuck);
    assert_eq!(u64::from(calls.load(Ordering::SeqCst)), stuck);
    let errors: Vec<_> = dead(&engine).into_iter().map(|r| r.record.error).collect();
    assert_eq!(
        errors,
        vec![
            Some("sink gate: attempt_timeout: no result after 100 ms".to_string());
            HOOKS as usize
        ]
    );
    drop(release);
    wait_until("the stuck workers back", Duration::from_secs(10), || {
        engine.stats()[0].abandoned_workers == 0
    });
    engine.tick().unwrap();
    assert_eq!(
        u64::from(calls.load(Ordering::SeqCst)),
        stuck,
        "no call that timed out in the queue ran late"
    );
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

/// `EngineBuilder::seed` fixes the shards' jitter: engines opened with one
/// seed wait the same backoff after a failed attempt (up to the attempt's
/// own milliseconds), and engines of other seeds do not all wait alike.
#[test]
fn a_seed_fixes_the_jitter_of_a_retry() {
    let backoff_ms = |seed: u64| -> u64 {
        let dir = tempfile::tempdir().unwrap();
        let mut c = config(dir.path());
        c.retry.base_ms = 100_000;
        c.retry.max_ms = 100_000;
        c.retry.jitter = true;
        c.sources.push(source_of_kinds("s", "t", &["fail"]));
        let failing = sink(|_| Err(SinkError::transient(std::io::Error::other("no"))));
        let engine = Engine::builder(c)
            .sink("fail", failing)
            .seed(seed)
            .open()
            .unwrap();
        engine.commit(NewHook::new("s", "x")).unwrap();
        engine.tick().unwrap();
        let row = rows(&engine).remove(0).record;
        assert_eq!(row.attempts, 1);
        row.at_ms - row.first_attempt_at_ms
    };
    let waits = [7, 7, 8, 9, 10].map(backoff_ms);
    assert!(
        waits.iter().all(|w| (50_000..=101_000).contains(w)),
        "half to all of 100 s: {waits:?}"
    );
    assert!(waits[0].abs_diff(waits[1]) <= 1_000, "one seed: {waits:?}");
    assert!(
        waits[2..].iter().any(|w| w.abs_diff(waits[0]) > 1_000),
        "other seeds: {waits:?}"
    );
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
