//! Dead rows through the library API: a source's pending rows dead-lettered,
//! replayed once the sink is fixed, purged, and expired past retention.

use super::*;

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
        || engine.stats()[0].core.running == 1,
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
    assert!(matches!(
        engine.dead_letter_source("doomed"),
        Err(goad::Unavailable::Stopped)
    ));
}

/// A backlog of several steps of `dead_letter_source` (1,024 rows walked
/// each, two shards stepping at once): the steps together take each of
/// the source's pending rows once, beside another tenant's backlog that
/// they walk and leave.
#[test]
fn dead_letter_source_takes_a_backlog_of_many_steps_once_each() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.shards = 2;
    for (source, tenant) in [("doomed", "t"), ("kept", "u")] {
        c.dispatch
            .tenants
            .insert(tenant.into(), tenant_limits(1, 1));
        c.sources.push(source_of_kinds(source, tenant, &["gate"]));
    }
    let gate = gate();
    let dead_hooks = Arc::new(parking_lot::Mutex::new(Vec::<String>::new()));
    let observed = dead_hooks.clone();
    let engine = Engine::builder(c)
        .sink("gate", gate.sink.clone())
        .on_outcome(move |event| observed.lock().push(event.hook_id.clone()))
        .open()
        .unwrap();
    std::thread::scope(|s| {
        for (source, hooks) in [("doomed", 2_400), ("kept", 1_600)] {
            for _ in 0..8 {
                let engine = &engine;
                s.spawn(move || {
                    for _ in 0..hooks / 8 {
                        engine.commit(NewHook::new(source, "x")).unwrap();
                    }
                });
            }
        }
    });
    wait_until(
        "one attempt of each tenant held at the gate",
        Duration::from_secs(5),
        || engine.stats().iter().map(|s| s.core.running).sum::<u64>() == 2,
    );
    assert_eq!(engine.dead_letter_source("doomed").unwrap(), 2_399);
    let mut reported = std::mem::take(&mut *dead_hooks.lock());
    reported.sort();
    reported.dedup();
    assert_eq!(reported.len(), 2_399, "each reported once");
    let pending = |source: &str| {
        rows(&engine)
            .iter()
            .filter(|r| r.record.status == RowStatus::Pending && r.source_id == source)
            .count()
    };
    assert_eq!((pending("doomed"), pending("kept")), (1, 1_600));
    assert_eq!(dead(&engine).len(), 2_399);
    drop(gate.open);
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
