//! A backlog behind a sink's `max_calls_per_s` waits in the store for its
//! turns, not claimed in the windows (see `pacing`).

use super::*;

/// Tenant `t`'s source `a` has one sink at `rate` calls per second with
/// `backlog` rows due at 0; tenant `u`'s source `b`, one sink of no rate.
/// The shard's window holds `window` rows.
fn paced_core(rate: u32, backlog: usize, window: u64) -> (Core, Model) {
    let config = config_with(vec![
        rated_source("a", "t", Some(rate)),
        source("b", "u", &["x"]),
    ]);
    let grant = Grant {
        max_inflight: window,
        ..BIG
    };
    let c = core(&config, grant);
    let mut m = Model::default();
    for _ in 0..backlog {
        m.add("t", "a", &["x"], 0);
    }
    (c, m)
}

/// Runs the scans and starts of `now_ms`, answering each call ok; the
/// sources of the calls started.
fn run_at(c: &mut Core, m: &mut Model, now_ms: u64) -> Vec<String> {
    let mut started = Vec::new();
    settle_at(c, m, now_ms, &mut |job| {
        started.push(job.key.source_id.to_string());
        Ok(())
    });
    started
}

/// A key queues the rows its next second of turns starts; the rest of
/// its backlog is written back due one turn apart after them, each
/// claimed at its turn and started then — so the window holds a
/// second's worth of the backlog while it drains at the rate.
#[test]
fn a_backlog_behind_a_rate_waits_for_its_turns_in_the_store() {
    let (mut c, mut m) = paced_core(4, 10, 1_000);
    assert_eq!(run_at(&mut c, &mut m, 0), ["a"]);
    assert_eq!(c.stats().claimed.rows, 3, "the turns at 250, 500, 750");
    let paced: Vec<u64> = due_rows(&m).into_iter().map(|(_, at)| at).collect();
    assert_eq!(paced, [1_000, 1_250, 1_500, 1_750, 2_000, 2_250]);
    for turn_ms in (250..=2_250).step_by(250) {
        assert!(run_at(&mut c, &mut m, turn_ms - 1).is_empty(), "{turn_ms}");
        assert_eq!(run_at(&mut c, &mut m, turn_ms), ["a"], "{turn_ms}");
    }
    assert!(m.due.is_empty() && c.claims.is_empty(), "all ten started");
}

/// The fairness this is for: tenant `t`'s backlog of 5,000 rows behind a
/// rate of 2 a second does not hold the shard's window of 64 rows, so
/// tenant `u`'s 50 rows, due a moment later, start at once rather than
/// as `t`'s turns free room one at a time.
#[test]
fn a_backlog_behind_a_rate_leaves_the_window_to_other_tenants() {
    let (mut c, mut m) = paced_core(2, 5_000, 64);
    assert_eq!(run_at(&mut c, &mut m, 0), ["a"]);
    for _ in 0..50 {
        m.add("u", "b", &["x"], 10);
    }
    c.handle_committed_for(&Arc::from("u"), 10);
    assert_eq!(run_at(&mut c, &mut m, 10), vec!["b"; 50]);
    assert_eq!(run_at(&mut c, &mut m, 500), ["a"]);
    let last_turn = (due_rows(&m).iter()).map(|(_, at)| *at).max();
    assert_eq!(
        last_turn,
        Some(2_499_000),
        "5,000 turns half a second apart"
    );
}

/// A row retried behind a rate is paced no later than its retry
/// horizon, and dead-lettered when taken there: rate 2 a second, a
/// horizon of 1.2 s. Of four rows due at 1,000, two queue and two are
/// paced (2,000, 2,500); the first fails at 1,000 and is due again at
/// 1,100, when a fresh row has filled the queue again, so its turn
/// (3,000) is past its horizon (2,200).
#[test]
fn a_retried_row_is_paced_no_later_than_its_horizon() {
    let mut config = config_with(vec![rated_source("a", "t", Some(2))]);
    config.retry.max_elapsed_ms = 1_200;
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    let retried = RowId {
        seq: m.add("t", "a", &["x"], 1_000),
        sink_index: 0,
    };
    for _ in 0..3 {
        m.add("t", "a", &["x"], 1_000);
    }
    let mut first = true;
    settle_at(&mut c, &mut m, 1_000, &mut |_| {
        if std::mem::take(&mut first) {
            fail(FailureClass::Transient)
        } else {
            Ok(())
        }
    });
    let due_times = |m: &Model| m.due.keys().map(|(_, at, _)| *at).collect::<Vec<_>>();
    assert_eq!(due_times(&m), [1_100, 2_000, 2_500]);
    m.add("t", "a", &["x"], 1_050);
    c.handle_committed_for(&Arc::from("t"), 1_050);
    assert!(
        run_at(&mut c, &mut m, 1_100).is_empty(),
        "the turn is at 1,500"
    );
    let due_of = |m: &Model| {
        (m.due.keys())
            .find(|(_, _, r)| *r == retried)
            .map(|(_, at, _)| *at)
    };
    assert_eq!(
        due_of(&m),
        Some(2_200),
        "paced to its horizon, not to 3,000"
    );
    let mut started = 0;
    for turn_ms in (1_500..=4_000).step_by(500) {
        started += run_at(&mut c, &mut m, turn_ms).len();
    }
    let dead = c.stats().dead_by_reason.get(DeadReasonKind::RetryHorizon);
    assert_eq!((started, dead), (4, 1), "the other four delivered");
    assert!(m.due.is_empty() && c.claims.is_empty());
}

/// A key's paced turns go on from the last one given until its rows are
/// made due again, or its rate changes: a wake of the sink makes its
/// backlog due, and what its queue does not take is paced again from the
/// queue's end (not after the turns it had); after a reload that raises
/// the rate, the rows written back before are due again too, and every
/// row claimed beyond the queue is paced from its end at the new rate.
#[test]
fn paced_turns_start_again_after_a_wake_or_a_new_rate() {
    let (mut c, mut m) = paced_core(1, 6, 1_000);
    assert_eq!(run_at(&mut c, &mut m, 1), ["a"]);
    let turns = |m: &Model| {
        due_rows(m)
            .into_iter()
            .map(|(_, at)| at)
            .collect::<Vec<_>>()
    };
    assert_eq!(turns(&m), [1_001, 2_001, 3_001, 4_001, 5_001]);

    let key = SinkKey {
        tenant: Arc::from("t"),
        ..key_of("a", 0, "x")
    };
    let step = c.handle_wake_sink(100, &key, None, usize::MAX, &mut m);
    assert_eq!((step.woken, step.next), (5, None));
    assert!(
        run_at(&mut c, &mut m, 100).is_empty(),
        "the turn is at 1,001"
    );
    assert_eq!(turns(&m), [2_001, 3_001, 4_001, 5_001], "not after 5,001");

    let config = config_with(vec![
        rated_source("a", "t", Some(4)),
        source("b", "u", &["x"]),
    ]);
    reconfigure(&mut c, 0, &config);
    for _ in 0..5 {
        m.add("t", "a", &["x"], 200);
    }
    c.handle_committed_for(&Arc::from("t"), 200);
    assert!(run_at(&mut c, &mut m, 200).is_empty());
    // Four queue for the turns from 251 on, 250 ms apart from the call at
    // 1 (the one woken and three new); the two other new rows and the
    // four paced at the old rate are paced after them.
    assert_eq!(c.stats().claimed.rows, 4);
    assert_eq!(turns(&m), [1_251, 1_501, 1_751, 2_001, 2_251, 2_501]);
}

/// Tenant `t`'s source `a` has a sink at 1 call a second and one of no
/// rate (`y`, every call failing), tenant `u`'s source `b` a sink at 1 a
/// second; each of the three sinks has 4 rows due at 0. At 0, `a`'s first
/// sink starts one row and paces 3 (the queue takes 1 at this rate), `a`'s
/// second retries its 4 after a backoff, `b`'s sink paces 3. Returns the
/// core and the model at 0 after that, and the config.
fn two_tenants_paced() -> (Core, Model, Config) {
    let mut a = rated_source("a", "t", Some(1));
    a.sinks.push(SinkConfig::of_kind("y"));
    let config = config_with(vec![a, rated_source("b", "u", Some(1))]);
    let mut c = core(&config, BIG);
    let mut m = Model::default();
    for _ in 0..4 {
        m.add("t", "a", &["x", "y"], 0);
        m.add("u", "b", &["x"], 0);
    }
    settle_at(&mut c, &mut m, 0, &mut |job| match &*job.key.sink_type {
        "y" => fail(FailureClass::Transient),
        _ => Ok(()),
    });
    (c, m, config)
}

/// The due times of `source`'s rows of sink `sink_index`, in due order.
fn due_of(m: &Model, source: &str, sink_index: u16) -> Vec<u64> {
    (m.due.keys())
        .filter(|(_, _, row)| row.sink_index == sink_index && &*m.rows[row].1.source_id == source)
        .map(|(_, at, _)| *at)
        .collect()
}

/// A reload that raises a sink's rate makes the rows paced at the old one
/// due, and the scan paces them at the new rate from the key's next
/// turn: three rows paced a second apart are due within the next 750 ms
/// at 4 a second. Rows waiting out a backoff and the rows paced for a
/// sink whose rate did not change keep their due times.
#[test]
fn a_new_rate_paces_the_rows_paced_at_the_old_one_again() {
    let (mut c, mut m, mut config) = two_tenants_paced();
    assert_eq!(due_of(&m, "a", 0), [1_000, 2_000, 3_000]);
    let backoffs = due_of(&m, "a", 1);
    assert_eq!(backoffs.len(), 4);
    assert!(
        backoffs.iter().all(|&at| at > 0 && at < 1_000),
        "{backoffs:?}"
    );
    assert_eq!(due_of(&m, "b", 0), [1_000, 2_000, 3_000]);

    config.sources[0].sinks[0].max_calls_per_s = Some(4);
    reconfigure(&mut c, 10, &config);
    assert!(
        run_at(&mut c, &mut m, 10).is_empty(),
        "the key's turn is at 1,000"
    );
    // The queue takes the turns at 1,000, 1,250, 1,500 and 1,750: all three.
    assert_eq!(c.stats().claimed.rows, 3);
    assert_eq!(due_of(&m, "a", 0), [] as [u64; 0]);
    assert_eq!(due_of(&m, "a", 1), backoffs, "a backoff is not a turn");
    assert_eq!(due_of(&m, "b", 0), [1_000, 2_000, 3_000], "its rate stands");
    assert!(!c.is_repacing());
    for turn_ms in [1_000, 1_250, 1_500] {
        let started = run_at(&mut c, &mut m, turn_ms);
        assert!(started.contains(&"a".to_string()), "{turn_ms}: {started:?}");
    }
}

/// A reload that changes a rate after another's pass ended paces the
/// rows again: the second pass walks the tenant the first walked. Ten
/// rows at 1 a second, then 2, then 10: the last rate queues them all.
#[test]
fn each_new_rate_paces_the_backlog_again() {
    let (mut c, mut m) = paced_core(1, 10, 1_000);
    assert_eq!(run_at(&mut c, &mut m, 1), ["a"]);
    let turns = |m: &Model| due_of(m, "a", 0);
    assert_eq!(
        turns(&m),
        (1..10).map(|k| k * 1_000 + 1).collect::<Vec<_>>()
    );
    for (rate, now_ms, paced) in [
        (2, 10, vec![1_501, 2_001, 2_501, 3_001, 3_501, 4_001, 4_501]),
        (10, 20, vec![]),
    ] {
        let config = config_with(vec![
            rated_source("a", "t", Some(rate)),
            source("b", "u", &["x"]),
        ]);
        reconfigure(&mut c, now_ms, &config);
        assert!(run_at(&mut c, &mut m, now_ms).is_empty(), "{rate}");
        assert!(!c.is_repacing(), "{rate}");
        assert_eq!(turns(&m), paced, "{rate} a second");
    }
    assert_eq!(c.stats().claimed.rows, 9, "every row queues at 10 a second");
}

/// A reload that removes a rated sink makes the rows paced for it due,
/// and the scan dead-letters them as `sink_gone` then, not at their
/// turns. So does one that takes the rate off: they start at once.
#[test]
fn a_sink_removed_or_unrated_leaves_no_row_to_its_old_turns() {
    let (mut c, mut m, mut config) = two_tenants_paced();
    config.sources[1].sinks[0].max_calls_per_s = None;
    config.sources[0].sinks.truncate(1);
    config.sources[0].sinks[0].kind = "z".into();
    reconfigure(&mut c, 10, &config);
    c.handle_scan(10, &mut m);
    let _ = m.apply(&mut c);
    c.handle_scan(10, &mut m);
    assert_eq!(
        dead_reasons(m.apply(&mut c)),
        vec![("sink_gone: index 0, type x".to_string(), 0); 3],
        "a's three paced rows"
    );
    assert_eq!(run_at(&mut c, &mut m, 10), ["b", "b", "b"]);
    assert_eq!(
        due_of(&m, "a", 1).len(),
        4,
        "y's rows wait out their backoffs"
    );
}

/// A new core whose store's paced rows were paced at other rates (the
/// node restarted with a changed config) paces every paced row again,
/// whatever its key: it cannot tell which rates changed. Its store stops
/// saying which paces its rows were paced at until the pass ends. One
/// whose store's paces are its catalog's walks nothing.
#[test]
fn a_new_core_paces_again_the_rows_its_store_paced_at_other_rates() {
    let (c, mut m, mut config) = two_tenants_paced();
    let paced_at = c.catalog.paces_fingerprint();
    let backoffs = due_of(&m, "a", 1);
    let mut c = core(&config, BIG);
    c.resume_repacing(Some(paced_at));
    assert!(!c.is_repacing(), "the same rates");

    config.sources[0].sinks[0].max_calls_per_s = Some(4);
    let mut c = core(&config, BIG);
    c.resume_repacing(Some(paced_at));
    assert!(c.is_repacing());
    c.handle_scan(10, &mut m);
    let ops = m.apply(&mut c);
    let paces = c.catalog.paces_fingerprint();
    assert_ne!(paces, paced_at);
    assert_eq!(paced_at_ops(&ops), [None, Some(paces)]);
    assert!(!c.is_repacing());
    // a's three rows queue for the turns from 10 on, 250 ms apart; b's
    // first row queues, its two others are paced again one second apart.
    assert_eq!(run_at(&mut c, &mut m, 10), ["a", "b"]);
    assert_eq!(due_of(&m, "a", 0), [] as [u64; 0]);
    assert_eq!(due_of(&m, "b", 0), [1_010, 2_010]);
    assert_eq!(due_of(&m, "a", 1), backoffs, "a backoff is not a turn");
    for turn_ms in [260, 510] {
        let mut started = Vec::new();
        settle_at(&mut c, &mut m, turn_ms, &mut |job| {
            started.push((job.key.source_id.to_string(), job.key.sink_index));
            Ok(())
        });
        started.retain(|(_, sink_index)| *sink_index == 0);
        assert_eq!(started, [("a".to_string(), 0)], "{turn_ms}");
    }

    let mut c = core(&config, BIG);
    c.resume_repacing(None);
    assert!(c.is_repacing(), "a pass was under way");
}

/// The fingerprints each `StoreOp::PacedAt` among `ops` wrote.
fn paced_at_ops(ops: &[StoreOp]) -> Vec<Option<u64>> {
    (ops.iter())
        .filter_map(|op| match op {
            StoreOp::PacedAt { paces } => Some(*paces),
            _ => None,
        })
        .collect()
}
